//! Cargo's configuration without its credentials: cargo keeps registry tokens in
//! `credentials.toml` (hidden, see [`super::HOME_CREDENTIALS`]), but a token also works in
//! `config.toml` (or the legacy `config`), and so do a credential provider's command line and a
//! registry URL with a password in it.
//!
//! A user configuration that holds any of them ([`SECRET_KEYS`], or a URL or proxy with a
//! user and password) is hidden from confined commands ([`hidden_configs`]), and a task's
//! commands get a cargo home of their own with a copy that lacks them ([`secret_free`]; see
//! [`super::cache_env`]). A file cargo would read but dracode cannot parse is treated the same
//! (hidden, no copy).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file names of cargo's configuration in a cargo home.
pub const CONFIG_NAMES: &[&str] = &["config.toml", "config"];

/// Keys that hold or produce a credential: `registry.<key>`, `registries.<name>.<key>`.
pub const SECRET_KEYS: &[&str] = &["token", "credential-provider", "global-credential-providers"];

/// The tables removed whole (aliases of credential providers, with their arguments).
const SECRET_TABLES: &[&str] = &["credential-alias"];

/// The user's cargo homes in `env`: `$CARGO_HOME` and `~/.cargo` (cargo reads the latter too
/// when a command runs below `$HOME`).
pub fn user_cargo_homes(env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let var = |name: &str| env.get(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut homes: Vec<PathBuf> = var("CARGO_HOME").into_iter().collect();
    homes.extend(var("HOME").map(|h| h.join(".cargo")).filter(|h| !homes.contains(h)));
    homes
}

/// The configuration files of the user's cargo homes that hold a credential: hidden from
/// confined commands.
pub fn hidden_configs(env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let files = user_cargo_homes(env).into_iter().flat_map(|home| CONFIG_NAMES.iter().map(move |name| home.join(name)));
    files.filter(|file| has_secrets(file)).collect()
}

/// Whether any of the user's cargo configurations holds a credential.
pub fn any_secrets(env: &BTreeMap<String, String>) -> bool {
    !hidden_configs(env).is_empty()
}

/// Whether the cargo configuration at `file` holds a credential (or cannot be parsed). A file
/// dracode cannot read, a command cannot read either.
fn has_secrets(file: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(file) else { return false };
    match text.parse::<toml::Table>() {
        Ok(table) => stripped(table.clone()) != table,
        Err(_) => true,
    }
}

/// `text` (a cargo configuration) without its credentials; `None` when it is not TOML.
pub fn secret_free(text: &str) -> Option<String> {
    text.parse::<toml::Table>().ok().map(|table| stripped(table).to_string())
}

fn stripped(mut table: toml::Table) -> toml::Table {
    for name in SECRET_TABLES {
        table.remove(*name);
    }
    if let Some(toml::Value::Table(registry)) = table.get_mut("registry") {
        strip_keys(registry);
    }
    if let Some(toml::Value::Table(registries)) = table.get_mut("registries") {
        for (_, registry) in registries.iter_mut() {
            if let toml::Value::Table(registry) = registry {
                strip_keys(registry);
            }
        }
    }
    strip_passwords(&mut table);
    table
}

fn strip_keys(table: &mut toml::Table) {
    for key in SECRET_KEYS {
        table.remove(*key);
    }
}

/// Removes, at any depth, every string that carries a password: a URL with a user part
/// (`https://user:pass@host/`) or a proxy address with one (`user:pass@host:port`).
fn strip_passwords(table: &mut toml::Table) {
    table.retain(|_, value| match value {
        toml::Value::String(text) => !carries_password(text),
        _ => true,
    });
    for (_, value) in table.iter_mut() {
        match value {
            toml::Value::Table(inner) => strip_passwords(inner),
            toml::Value::Array(items) => items.retain(|item| !matches!(item, toml::Value::String(text) if carries_password(text))),
            _ => {}
        }
    }
}

fn carries_password(text: &str) -> bool {
    let rest = text.split_once("://").map_or(text, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.contains('@')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_dropped_and_the_rest_kept() {
        let text = "[registry]\ntoken = \"t-SECRET\"\ndefault = \"private\"\nglobal-credential-providers = [\"cargo:token\"]\n\
            [registries.private]\nindex = \"sparse+https://u:p-SECRET@example.invalid/index/\"\ntoken = \"t2-SECRET\"\n\
            credential-provider = [\"x\", \"p3-SECRET\"]\n[registries.public]\nindex = \"https://example.invalid/git/index\"\n\
            [credential-alias]\nmine = \"prov --key a-SECRET\"\n[http]\nproxy = \"user:h-SECRET@proxy:3128\"\ncheck-revoke = false\n\
            [net]\nretry = 7\n[source.vendored]\ndirectory = \"vendor\"\n";
        let copy = secret_free(text).unwrap();
        assert!(!copy.contains("SECRET"), "{copy}");
        for kept in
            ["default = \"private\"", "https://example.invalid/git/index", "check-revoke = false", "retry = 7", "directory = \"vendor\""]
        {
            assert!(copy.contains(kept), "{kept} in {copy}");
        }
        assert_eq!(secret_free("not = [toml"), None);
    }

    #[test]
    fn only_configurations_with_credentials_are_hidden() {
        let tmp = tempfile::tempdir().unwrap();
        let (home, cargo_home) = (tmp.path().join("home"), tmp.path().join("cargo"));
        std::fs::create_dir_all(home.join(".cargo")).unwrap();
        std::fs::create_dir_all(&cargo_home).unwrap();
        std::fs::write(home.join(".cargo/config.toml"), "[net]\nretry = 2\n").unwrap();
        std::fs::write(cargo_home.join("config"), "[registries.x]\ntoken = \"t\"\n").unwrap();
        let env = BTreeMap::from([("HOME".to_string(), home.display().to_string())]);
        assert!(hidden_configs(&env).is_empty() && !any_secrets(&env));
        let mut env = env;
        env.insert("CARGO_HOME".into(), cargo_home.display().to_string());
        assert_eq!(hidden_configs(&env), [cargo_home.join("config")]);
        std::fs::write(home.join(".cargo/config.toml"), "[net\n").unwrap();
        assert_eq!(hidden_configs(&env), [cargo_home.join("config"), home.join(".cargo/config.toml")]);
    }
}
