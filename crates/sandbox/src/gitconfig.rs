//! The global git configuration a confined task's commands see: a copy of the user's, reduced to
//! the settings in [`SAFE_GIT_KEYS`], pointed at by `GIT_CONFIG_GLOBAL`.
//!
//! Why not the user's `~/.gitconfig` itself: CI puts tokens there (`url.<with token>.insteadOf`,
//! `http.*.extraheader`, credential helpers), and it is under `$HOME`, which commands may not
//! read — and git stops with "unknown error occurred while reading the configuration files" when
//! a config file exists but cannot be read. The copy keeps what `git commit` and everyday
//! commands need (who the user is, line endings, the default branch) and nothing that reaches a
//! remote.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The settings copied from the user's global git configuration (`section.key`).
pub const SAFE_GIT_KEYS: &[&str] = &[
    "user.name",
    "user.email",
    "init.defaultBranch",
    "core.autocrlf",
    "core.eol",
    "core.quotePath",
    "merge.conflictStyle",
    "diff.algorithm",
    "pull.rebase",
];

/// The name of the reduced copy in the task's folder.
const FILE_NAME: &str = "gitconfig";

/// Writes the reduced copy of the global git configuration of the user whose variables are
/// `env` (`HOME`, `XDG_CONFIG_HOME`) into `dir`, and returns `GIT_CONFIG_GLOBAL` naming it.
pub fn git_config_env(dir: &Path, env: &BTreeMap<String, String>) -> std::io::Result<(String, String)> {
    let var = |name: &str| env.get(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let home = var("HOME");
    let xdg = var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
    // Git reads the XDG file first, then ~/.gitconfig, which wins.
    let sources = [xdg.map(|x| x.join("git/config")), home.map(|h| h.join(".gitconfig"))];
    let mut values: BTreeMap<&str, String> = BTreeMap::new();
    for source in sources.into_iter().flatten().filter(|s| s.is_file()) {
        let Ok(config) = git2::Config::open(&source) else { continue };
        for key in SAFE_GIT_KEYS {
            if let Ok(value) = config.get_string(key) {
                values.insert(key, value);
            }
        }
    }
    let path = git_config_path(dir);
    std::fs::write(&path, render(&values))?;
    Ok((GIT_CONFIG_VAR.to_string(), path.display().to_string()))
}

/// The variable that names the copy.
pub const GIT_CONFIG_VAR: &str = "GIT_CONFIG_GLOBAL";

/// Where [`git_config_env`] writes the copy in `dir`.
pub fn git_config_path(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

/// `values` in git's configuration format, every value quoted.
fn render(values: &BTreeMap<&str, String>) -> String {
    let mut text = String::new();
    let mut section = "";
    for (key, value) in values {
        let Some((name, field)) = key.split_once('.') else { continue };
        if name != section {
            text.push_str(&format!("[{name}]\n"));
            section = name;
        }
        let escaped: String =
            value.chars().filter(|c| *c != '\n').flat_map(|c| if c == '"' || c == '\\' { vec!['\\', c] } else { vec![c] }).collect();
        text.push_str(&format!("\t{field} = \"{escaped}\"\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_safe_settings_are_copied() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = A \\\"Q\\\" User\n\temail = a@example.com\n[url \"https://x:tok-secret@example.com/\"]\n\tinsteadOf = https://example.com/\n[http]\n\textraheader = AUTHORIZATION: basic tok-secret\n[credential]\n\thelper = store\n",
        )
        .unwrap();
        let env = BTreeMap::from([("HOME".to_string(), home.display().to_string())]);
        let (name, path) = git_config_env(tmp.path(), &env).unwrap();
        assert_eq!(name, "GIT_CONFIG_GLOBAL");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("tok-secret") && !text.contains("helper"), "{text}");
        let copy = git2::Config::open(Path::new(&path)).unwrap();
        assert_eq!(copy.get_string("user.name").unwrap(), "A \"Q\" User");
        assert_eq!(copy.get_string("user.email").unwrap(), "a@example.com");
    }
}
