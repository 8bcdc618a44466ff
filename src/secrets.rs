//! Keeping secrets out of everything dracode writes and everything the agent runs.
//!
//! Two defences: commands the agent runs get an environment with credentials removed
//! ([`child_env`]), and every artifact passes through a [`Redactor`] that replaces the values of
//! known secrets (configured API keys and secret-looking environment variables) with
//! `[REDACTED]`.

use std::borrow::Cow;
use std::collections::BTreeMap;

/// What replaces a secret in any output.
pub const MASK: &str = "[REDACTED]";

/// Variables removed by exact name, besides the patterns in [`is_secret_name`].
const SECRET_NAMES: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "ZAI_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_COPILOT_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "ACTIONS_CACHE_URL",
    "ACTIONS_RESULTS_URL",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "CI_JOB_TOKEN",
    "NPM_TOKEN",
    "CARGO_REGISTRY_TOKEN",
];

/// True for a variable that holds (or may hold) a credential: the known provider and CI
/// variables, anything named like `*_API_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`,
/// `*_CREDENTIALS`, and dracode's own `DRACODE_*` (config may carry keys).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAMES.contains(&upper.as_str())
        || upper.starts_with("DRACODE_")
        || upper.ends_with("_API_KEY")
        || upper.ends_with("_APIKEY")
        || upper.ends_with("_TOKEN")
        || upper.ends_with("_ACCESS_KEY")
        || upper.ends_with("_CREDENTIALS")
        || upper.contains("SECRET")
        || upper.contains("PASSWORD")
        || upper.contains("PRIVATE_KEY")
}

/// The environment for commands the agent runs: `parent` without any secret variable.
pub fn child_env(parent: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    parent.into_iter().filter(|(k, _)| !is_secret_name(k)).collect()
}

/// Replaces known secret values with [`MASK`].
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// A redactor for the given values (short values are ignored: masking `1` would mangle
    /// every number).
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets.into_iter().filter(|s| s.len() >= 8).collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    /// A redactor for every secret-looking variable of `env` plus `extra` values.
    pub fn from_env(env: impl IntoIterator<Item = (String, String)>, extra: impl IntoIterator<Item = String>) -> Self {
        Self::new(env.into_iter().filter(|(k, _)| is_secret_name(k)).map(|(_, v)| v).chain(extra))
    }

    /// `text` with every secret replaced by [`MASK`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), MASK));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_env_drops_credentials_and_keeps_the_rest() {
        let parent = [
            ("PATH", "/usr/bin"),
            ("OPENAI_API_KEY", "sk-live"),
            ("MY_SERVICE_TOKEN", "t"),
            ("DB_PASSWORD", "p"),
            ("DRACODE_PROVIDERS__OPENAI__API_KEY", "k"),
            ("HOME", "/root"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = child_env(parent);
        assert_eq!(env.keys().collect::<Vec<_>>(), ["HOME", "PATH"]);
    }

    #[test]
    fn redactor_masks_values_and_ignores_short_ones() {
        let r = Redactor::from_env(
            [("OPENAI_API_KEY".to_string(), "sk-test-0123456789".to_string()), ("X_TOKEN".into(), "1".into())],
            ["another-secret-value".to_string()],
        );
        assert_eq!(r.redact("key=sk-test-0123456789 and another-secret-value, 1"), "key=[REDACTED] and [REDACTED], 1");
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
    }
}
