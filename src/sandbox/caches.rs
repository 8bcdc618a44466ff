//! Where package managers write in a confined task: folders of the task's own, named by the
//! variables each tool reads ([`CACHE_VARS`]), so no task changes what a later task — or the
//! user's own build — reads from a shared cache. The user's caches and toolchains are readable
//! (see [`super::ReadSet`]) but never writable.
//!
//! Two caches cannot be layered (the tool keeps one folder for reading and writing): cargo's
//! `CARGO_HOME` and Go's `GOMODCACHE`. Without network they stay the user's, read-only — a
//! build uses what is already downloaded, offline; with network (anything but `network =
//! false`) they move to the task's folder, where downloads land (cargo gets a copy of the
//! user's `config.toml`, never its credentials). Where a tool can read a second cache
//! read-only, it is pointed at the user's: Gradle (`GRADLE_RO_DEP_CACHE`) and Maven 3.9
//! (`maven.repo.local.tail`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Variables set for every confined task, each to a folder under the task's own `cache/`.
pub const CACHE_VARS: &[(&str, &str)] = &[
    ("XDG_CACHE_HOME", "cache"),
    ("npm_config_cache", "cache/npm"),
    ("YARN_CACHE_FOLDER", "cache/yarn"),
    ("PIP_CACHE_DIR", "cache/pip"),
    ("UV_CACHE_DIR", "cache/uv"),
    ("GOCACHE", "cache/go-build"),
    ("GRADLE_USER_HOME", "cache/gradle"),
];

/// The variables that point a task's package managers at folders under `dir` (inside the
/// task's TMPDIR, which the task may write), given the variables `env` the task's commands get
/// otherwise (with the user's `HOME`) and whether they may use the network. Pure: see
/// [`cache_env`] for the one that also makes the folders.
pub fn cache_vars(dir: &Path, env: &BTreeMap<String, String>, network: bool) -> BTreeMap<String, String> {
    let show = |p: &Path| p.display().to_string();
    let var = |name: &str| env.get(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = var("HOME");
    let mut out: BTreeMap<String, String> = CACHE_VARS.iter().map(|(name, rel)| (name.to_string(), show(&dir.join(rel)))).collect();
    let user_gradle = var("GRADLE_USER_HOME").or_else(|| home.as_ref().map(|h| h.join(".gradle")));
    if let Some(caches) = user_gradle.map(|g| g.join("caches")).filter(|c| c.is_dir()) {
        out.insert("GRADLE_RO_DEP_CACHE".into(), show(&caches));
    }
    let mut maven = format!("-Dmaven.repo.local={}", show(&dir.join("cache/m2")));
    if let Some(repo) = home.as_ref().map(|h| h.join(".m2/repository")).filter(|r| r.is_dir()) {
        maven.push_str(&format!(" -Dmaven.repo.local.tail={}", show(&repo)));
    }
    if let Some(user) = env.get("MAVEN_OPTS").filter(|v| !v.trim().is_empty()) {
        maven = format!("{user} {maven}");
    }
    out.insert("MAVEN_OPTS".into(), maven);
    if network {
        out.insert("CARGO_HOME".into(), show(&dir.join(CARGO_DIR)));
        out.insert("GOMODCACHE".into(), show(&dir.join("cache/go-mod")));
    }
    out
}

/// Cargo's per-task home under the cache folder's parent (with network only).
const CARGO_DIR: &str = "cargo";

/// [`cache_vars`], with the folders made: `cache/`, and with network a cargo home holding a
/// copy of the user's cargo configuration (`config.toml`, never `credentials.toml`).
pub fn cache_env(dir: &Path, env: &BTreeMap<String, String>, network: bool) -> std::io::Result<BTreeMap<String, String>> {
    std::fs::create_dir_all(dir.join("cache"))?;
    if network {
        let cargo = dir.join(CARGO_DIR);
        std::fs::create_dir_all(&cargo)?;
        let var = |name: &str| env.get(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let user_cargo = var("CARGO_HOME").or_else(|| var("HOME").map(|h| h.join(".cargo")));
        for name in ["config.toml", "config"] {
            if let Some(config) = user_cargo.as_ref().map(|c| c.join(name)).filter(|c| c.is_file()) {
                std::fs::copy(config, cargo.join(name))?;
            }
        }
    }
    Ok(cache_vars(dir, env, network))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caches_point_into_the_task_folder_and_cargo_moves_only_with_network() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(home.join(".cargo")).unwrap();
        std::fs::write(home.join(".cargo/config.toml"), "[net]\noffline = false\n").unwrap();
        std::fs::write(home.join(".cargo/credentials.toml"), "token").unwrap();
        let env = BTreeMap::from([("HOME".to_string(), home.display().to_string())]);
        let task = tmp.path().join("task");
        let closed = cache_env(&task, &env, false).unwrap();
        for (name, _) in CACHE_VARS {
            assert!(closed[*name].starts_with(&task.display().to_string()), "{name}: {closed:?}");
        }
        assert!(!closed.contains_key("CARGO_HOME") && !closed.contains_key("GOMODCACHE"), "{closed:?}");
        let open = cache_env(&task, &env, true).unwrap();
        assert_eq!(open["CARGO_HOME"], task.join("cargo").display().to_string());
        assert!(task.join("cargo/config.toml").is_file() && !task.join("cargo/credentials.toml").exists());
    }
}
