//! Where package managers write in a confined task: folders of the task's own, named by the
//! variables each tool reads ([`CACHE_VARS`]), so no task changes what a later task — or the
//! user's own build — reads from a shared cache. The user's caches and toolchains are readable
//! (see [`super::ReadSet`]) but never writable.
//!
//! Two caches cannot be layered (the tool keeps one folder for reading and writing): cargo's
//! `CARGO_HOME` and Go's `GOMODCACHE`. Without network they stay the user's, read-only — a
//! build uses what is already downloaded, offline; with network (anything but `network =
//! false`) they move to the task's folder, where downloads land (cargo gets a copy of the
//! user's `config.toml` without its credentials, see [`super::cargo_config`]). Without network
//! but with credentials in the user's cargo configuration, cargo's home moves too: to a folder
//! holding that copy and links to everything else of the user's cargo home (registry, git
//! checkouts, binaries — read-only as before). Where a tool can read a second cache
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
/// otherwise (with the user's `HOME`) and whether they may use the network. Makes nothing
/// (it reads the user's cargo configuration): see [`cache_env`] for the one that also makes the
/// folders.
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
        out.insert("GOMODCACHE".into(), show(&dir.join("cache/go-mod")));
    }
    if network || super::cargo_config::any_secrets(env) {
        out.insert("CARGO_HOME".into(), show(&dir.join(CARGO_DIR)));
    }
    out
}

/// Cargo's per-task home under the cache folder's parent (with network, or when the user's
/// cargo configuration holds credentials).
const CARGO_DIR: &str = "cargo";

/// [`cache_vars`], with the folders made: `cache/`, and when cargo's home moves, the task's own
/// (see [`cargo_home`]).
pub fn cache_env(dir: &Path, env: &BTreeMap<String, String>, network: bool) -> std::io::Result<BTreeMap<String, String>> {
    std::fs::create_dir_all(dir.join("cache"))?;
    let vars = cache_vars(dir, env, network);
    if vars.contains_key("CARGO_HOME") {
        cargo_home(&dir.join(CARGO_DIR), env, network)?;
    }
    Ok(vars)
}

/// Makes the task's cargo home `cargo`: the user's configuration without its credentials
/// (never `credentials.toml`), and without network a link to each other entry of the user's
/// cargo home but its lock files (the task locks its own home).
fn cargo_home(cargo: &Path, env: &BTreeMap<String, String>, network: bool) -> std::io::Result<()> {
    use super::cargo_config::{CONFIG_NAMES, secret_free};
    std::fs::create_dir_all(cargo)?;
    let var = |name: &str| env.get(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let Some(user) = var("CARGO_HOME").or_else(|| var("HOME").map(|h| h.join(".cargo"))) else { return Ok(()) };
    for name in CONFIG_NAMES {
        if let Some(copy) = std::fs::read_to_string(user.join(name)).ok().and_then(|text| secret_free(&text)) {
            std::fs::write(cargo.join(name), copy)?;
        }
    }
    if network {
        return Ok(());
    }
    let Ok(entries) = std::fs::read_dir(&user) else { return Ok(()) };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let text = name.to_string_lossy();
        let skipped = CONFIG_NAMES.contains(&text.as_ref()) || text.starts_with("credentials") || text.starts_with(".package-cache");
        if !skipped && std::fs::symlink_metadata(cargo.join(&name)).is_err() {
            std::os::unix::fs::symlink(entry.path(), cargo.join(&name))?;
        }
    }
    Ok(())
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

    #[test]
    fn a_cargo_configuration_with_a_token_moves_cargo_home_without_network() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(home.join(".cargo/registry/cache")).unwrap();
        std::fs::write(home.join(".cargo/config.toml"), "[registry]\ntoken = \"t-SECRET\"\n[net]\nretry = 3\n").unwrap();
        std::fs::write(home.join(".cargo/credentials.toml"), "token").unwrap();
        std::fs::write(home.join(".cargo/.package-cache"), "").unwrap();
        let env = BTreeMap::from([("HOME".to_string(), home.display().to_string())]);
        let task = tmp.path().join("task");
        let closed = cache_env(&task, &env, false).unwrap();
        let cargo = task.join("cargo");
        assert_eq!(closed["CARGO_HOME"], cargo.display().to_string());
        let copy = std::fs::read_to_string(cargo.join("config.toml")).unwrap();
        assert!(copy.contains("retry = 3") && !copy.contains("SECRET"), "{copy}");
        assert_eq!(std::fs::read_link(cargo.join("registry")).unwrap(), home.join(".cargo/registry"));
        for absent in ["credentials.toml", ".package-cache"] {
            assert!(!cargo.join(absent).exists(), "{absent}");
        }
        assert!(!closed.contains_key("GOMODCACHE"), "{closed:?}");
    }
}
