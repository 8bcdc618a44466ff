//! The GitHub token Copilot is reached with: `GITHUB_COPILOT_TOKEN`, `GH_COPILOT_TOKEN`, then
//! the token stored by `dracode auth copilot` in `$XDG_CONFIG_HOME/dracode/copilot.json` (or
//! `~/.config/…`, mode 0600). Copilot's preset finds its key here; the exchange for Copilot
//! tokens is in the `copilot` module.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The stored credential.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    github_token: String,
}

/// `$XDG_CONFIG_HOME/dracode/copilot.json`, or `$HOME/.config/dracode/copilot.json`.
pub fn token_path(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let base = env
        .get("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| env.get("HOME").map(|h| Path::new(h).join(".config")))?;
    Some(base.join("dracode").join("copilot.json"))
}

/// The GitHub token to use: the environment first, then the stored one.
pub fn github_token(env: &BTreeMap<String, String>) -> Option<String> {
    ["GITHUB_COPILOT_TOKEN", "GH_COPILOT_TOKEN"].iter().find_map(|k| env.get(*k).filter(|v| !v.is_empty()).cloned()).or_else(|| {
        let text = std::fs::read_to_string(token_path(env)?).ok()?;
        serde_json::from_str::<Stored>(&text).ok().map(|s| s.github_token)
    })
}

/// Stores `token` with mode 0600 (its folder 0700); returns the path.
pub fn store_token(env: &BTreeMap<String, String>, token: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let path = token_path(env).ok_or_else(|| std::io::Error::other("neither XDG_CONFIG_HOME nor HOME is set"))?;
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let text = serde_json::to_string(&Stored { github_token: token.to_string() }).map_err(std::io::Error::other)?;
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&path)?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_wins_over_the_stored_token_which_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let mut env = BTreeMap::from([("XDG_CONFIG_HOME".to_string(), dir.path().display().to_string())]);
        assert_eq!(github_token(&env), None);
        let path = store_token(&env, "gho_stored").unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(github_token(&env).as_deref(), Some("gho_stored"));
        env.insert("GH_COPILOT_TOKEN".into(), "gho_gh".into());
        assert_eq!(github_token(&env).as_deref(), Some("gho_gh"));
        env.insert("GITHUB_COPILOT_TOKEN".into(), "gho_env".into());
        assert_eq!(github_token(&env).as_deref(), Some("gho_env"));
    }

    #[test]
    fn the_stored_token_lives_under_the_config_dir() {
        let home = BTreeMap::from([("HOME".to_string(), "/home/u".to_string())]);
        assert_eq!(token_path(&home), Some(PathBuf::from("/home/u/.config/dracode/copilot.json")));
        let xdg = BTreeMap::from([("HOME".to_string(), "/home/u".to_string()), ("XDG_CONFIG_HOME".to_string(), "/cfg".to_string())]);
        assert_eq!(token_path(&xdg), Some(PathBuf::from("/cfg/dracode/copilot.json")));
        assert_eq!(token_path(&BTreeMap::new()), None);
    }
}
