//! One `[providers.NAME]` table and how it resolves against its type's defaults.

use dracode_input::expand_vars;
use dracode_input::why_empty;
use dracode_llm::preset::{ProviderType, ResolvedProvider};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::time::Duration;

/// Default per-request HTTP timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// A provider as written in config. Every field is optional; the type's defaults fill the gaps.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSettings {
    /// The provider type; defaults to the table's name when that names a type.
    #[serde(rename = "type")]
    pub kind: Option<ProviderType>,
    /// Model (Azure: deployment).
    pub model: Option<String>,
    /// Endpoint; docs/src/reference/configuration.md says what it includes.
    pub base_url: Option<String>,
    /// Key; `${VAR}` expands. Defaults to the type's conventional variable.
    pub api_key: Option<String>,
    /// Per-request timeout, e.g. `120s`; checked when the config loads (a duration above zero),
    /// so a typo is an error naming the file and key rather than the default.
    #[serde(default, deserialize_with = "checked_timeout")]
    pub timeout: Option<String>,
    /// Output token limit per call.
    pub max_tokens: Option<u32>,
    /// How hard the model thinks (`low`, `medium`, `high`); unset sends nothing, so the
    /// model's own default applies. A task's or `[defaults]`' `reasoning` overrides it.
    pub reasoning: Option<dracode_llm::ReasoningEffort>,
    /// `openai` and `azure` only: `chat` (Chat Completions) or `responses` (the Responses
    /// API); unset, Responses for the models that need it
    /// ([`dracode_llm::preset::needs_responses`]), Chat Completions otherwise.
    pub wire_api: Option<dracode_llm::preset::WireChoice>,
    /// Whether answers are streamed (default on); `false` sends the non-streamed body.
    pub stream: Option<bool>,
    /// Extra HTTP headers; values expand `${VAR}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Azure `api-version`.
    pub api_version: Option<String>,
    /// Requests in flight at once, across every task of the run.
    pub max_concurrent_requests: Option<usize>,
    /// Requests started per minute, across every task of the run.
    pub requests_per_minute: Option<u32>,
    /// The model's context window in tokens; overrides the built-in table (docs/src/long-tasks.md).
    pub context_window: Option<u64>,
    /// The fields a `${VAR}` template left empty, each with why
    /// (`api_key = "${MOCK_KEY}": MOCK_KEY is not set`); filled when expanded, never read.
    #[serde(skip)]
    pub emptied: BTreeMap<String, String>,
}

/// A provider `timeout`: a duration above zero (`"120s"`, `"10m"`, or bare seconds).
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let not_positive = || format!("invalid timeout {text:?}: it must be more than zero");
    if text.trim_start().starts_with('-') {
        return Err(not_positive());
    }
    let timeout = dracode_input::duration::parse(text).map_err(|e| e.to_string())?;
    if timeout.is_zero() {
        return Err(not_positive());
    }
    Ok(timeout)
}

/// Reads `timeout` (a string, or a number of seconds from a `DRACODE_*` variable) and rejects
/// what [`parse_timeout`] rejects; the error carries the file and key that set it.
fn checked_timeout<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Text(String),
        Seconds(f64),
    }
    let text = match Written::deserialize(deserializer)? {
        Written::Text(text) => text,
        Written::Seconds(seconds) => seconds.to_string(),
    };
    parse_timeout(&text).map_err(serde::de::Error::custom)?;
    Ok(Some(text))
}

impl ProviderSettings {
    /// Expands `${VAR}` in the templated fields, noting each field left empty and why.
    pub(super) fn expand(&mut self, env: &BTreeMap<String, String>) {
        let fields = [
            ("model", &mut self.model),
            ("base_url", &mut self.base_url),
            ("api_key", &mut self.api_key),
            ("api_version", &mut self.api_version),
        ];
        for (field, value) in fields {
            let Some(value) = value else { continue };
            let template = std::mem::replace(value, expand_vars(value, env));
            if let Some(why) = why_empty(&template, env).filter(|_| value.is_empty()) {
                self.emptied.insert(field.to_string(), format!("{field} = {template:?}: {why}"));
            }
        }
        for value in self.headers.values_mut() {
            *value = expand_vars(value, env);
        }
    }
}

/// Refuses `wire_api` on a provider whose type does not serve the Responses API (only
/// `openai` and `azure` do), each error naming the file or variable that set it and the key.
pub(super) fn check_wire_apis(
    layers: &super::Layers,
    providers: &BTreeMap<String, ProviderSettings>,
) -> Result<(), crate::manifest::ManifestErrors> {
    let errors: Vec<crate::manifest::ManifestError> = providers
        .iter()
        .filter(|(_, settings)| settings.wire_api.is_some())
        .filter_map(|(name, settings)| {
            let kind = settings.kind.or_else(|| ProviderType::from_name(name))?;
            if kind.preset().speaks_responses {
                return None;
            }
            let key = format!("providers.{name}.wire_api");
            let path = ["providers".to_string(), name.clone(), "wire_api".to_string()];
            let file = layers.source_of(&path).unwrap_or_else(|| super::CONFIG_FILE.into());
            let message = format!(
                "`{key}`: only `openai` and `azure` providers have a `wire_api`; {name:?} is `{}` (to reach a server's own \
                 Responses endpoint, configure it as `type = \"openai\"` with its `base_url`)",
                kind.as_str()
            );
            Some(crate::manifest::ManifestError { file, position: None, task: None, field: Some(key), message })
        })
        .collect();
    if errors.is_empty() { Ok(()) } else { Err(crate::manifest::ManifestErrors(errors)) }
}

/// Fills `settings` in from `kind`'s preset and the environment.
pub(super) fn resolve(
    name: &str,
    kind: ProviderType,
    settings: &ProviderSettings,
    model: Option<&str>,
    env: &BTreeMap<String, String>,
) -> ResolvedProvider {
    let preset = kind.preset();
    let from_env = |var: Option<&str>| var.and_then(|v| env.get(v)).filter(|v| !v.is_empty()).cloned();
    let non_empty = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
    ResolvedProvider {
        name: name.to_string(),
        kind,
        model: model.map(str::to_string).or_else(|| non_empty(&settings.model)).or_else(|| preset.default_model.map(str::to_string)),
        base_url: non_empty(&settings.base_url).or_else(|| from_env(preset.base_url_env)).or_else(|| preset.base_url.map(str::to_string)),
        api_key: match &settings.api_key {
            Some(key) => Some(key.clone()).filter(|k| !k.is_empty()),
            None => match preset.find_key {
                Some(find_key) => find_key(env),
                None => from_env(preset.key_env),
            },
        },
        // Checked on load; a value set in code after loading and not valid falls back too.
        timeout: settings.timeout.as_deref().and_then(|t| parse_timeout(t).ok()).unwrap_or(DEFAULT_TIMEOUT),
        max_tokens: settings.max_tokens,
        reasoning: settings.reasoning,
        wire_api: settings.wire_api,
        stream: settings.stream.unwrap_or(true),
        headers: with_bearer_from_env(kind, settings, env),
        api_version: settings.api_version.clone(),
        limits: dracode_llm::governor::Limits {
            max_concurrent: settings.max_concurrent_requests,
            requests_per_minute: settings.requests_per_minute,
        },
        replay_path: None,
        emptied: settings.emptied.clone(),
    }
}

/// The configured headers; for a type whose preset names a `bearer_env` (Azure's
/// `AZURE_OPENAI_AD_TOKEN`, an Entra ID token), that token as `Authorization: Bearer …` when
/// there is no key.
fn with_bearer_from_env(kind: ProviderType, settings: &ProviderSettings, env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let preset = kind.preset();
    let mut headers = settings.headers.clone();
    let has_key = settings.api_key.is_some() || preset.key_env.and_then(|k| env.get(k)).is_some_and(|k| !k.is_empty());
    let token = preset.bearer_env.and_then(|var| env.get(var)).filter(|t| !has_key && !t.is_empty());
    if let Some(token) = token {
        headers.entry("Authorization".into()).or_insert_with(|| format!("Bearer {token}"));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::super::{Config, ConfigError};
    use std::collections::BTreeMap;

    fn load(timeout: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(super::super::CONFIG_FILE), format!("[providers.x]\ntype = \"openai\"\ntimeout = {timeout}\n"))
            .unwrap();
        Config::load(dir.path(), None, &BTreeMap::new())
    }

    #[test]
    fn wire_api_is_refused_where_no_responses_api_is_and_chosen_where_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(super::super::CONFIG_FILE);
        std::fs::write(&file, "[providers.local]\ntype = \"vllm\"\nwire_api = \"responses\"\n").unwrap();
        let err = Config::load(dir.path(), None, &BTreeMap::new()).unwrap_err().to_string();
        assert!(err.contains("dracode.toml") && err.contains("`providers.local.wire_api`") && err.contains("`vllm`"), "{err}");
        std::fs::write(&file, "[providers.anthropic]\nwire_api = \"chat\"\n").unwrap();
        assert!(Config::load(dir.path(), None, &BTreeMap::new()).is_err(), "a type named by the table");
        std::fs::write(
            &file,
            "[providers.oa]\ntype = \"openai\"\nwire_api = \"responses\"\n[providers.az]\ntype = \"azure\"\nwire_api = \"chat\"\n",
        )
        .unwrap();
        let config = Config::load(dir.path(), None, &BTreeMap::new()).unwrap();
        let wire = |name: &str, model: &str| config.resolve_provider(name, Some(model), &BTreeMap::new()).unwrap().wire();
        use dracode_llm::preset::WireApi;
        assert_eq!(wire("oa", "gpt-4o"), WireApi::Responses);
        assert_eq!(wire("az", "gpt-5-codex"), WireApi::ChatCompletions, "an explicit `chat` wins over the model");
        assert_eq!(wire("openai", "gpt-5-codex"), WireApi::Responses, "chosen by the model");
        assert_eq!(wire("openai", "gpt-4o"), WireApi::ChatCompletions);
        std::fs::write(&file, "[providers.oa]\ntype = \"openai\"\nwire_api = \"soap\"\n").unwrap();
        let err = Config::load(dir.path(), None, &BTreeMap::new()).unwrap_err().to_string();
        assert!(err.contains("wire_api") && err.contains("dracode.toml"), "{err}");
    }

    #[test]
    fn a_timeout_that_does_not_parse_or_is_not_positive_names_the_file_and_key() {
        for bad in ["\"ten minutes\"", "\"-1s\"", "\"0s\"", "0"] {
            let err = load(bad).unwrap_err().to_string();
            assert!(err.contains("timeout") && err.contains("dracode.toml"), "{bad}: {err}");
        }
        for good in ["\"90s\"", "\"5m\"", "30", "1.5"] {
            let config = load(good).unwrap_or_else(|e| panic!("{good}: {e}"));
            let provider = config.resolve_provider("x", None, &BTreeMap::new()).unwrap();
            assert!(!provider.timeout.is_zero() && provider.timeout.as_secs() < 600, "{good}: {:?}", provider.timeout);
        }
    }
}
