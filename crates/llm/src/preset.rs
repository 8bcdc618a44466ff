//! Provider types as data: each type's wire format, default endpoint and credential variable,
//! and every vendor quirk — Azure's deployment URL, `api-version`, `api-key` header and Entra
//! bearer variable; Copilot's editor headers and token lookup ([`COPILOT`]);
//! `max_completion_tokens` or `max_tokens`; Anthropic prompt caching. The wire formats read
//! these fields and never test a type by name. A provider named after a type (`openai`,
//! `ollama`, …) works with no config table at all.
//!
//! A new vendor on an existing wire API is a [`ProviderType`] variant and its [`Preset`] (the
//! compiler points at the `as_str` and `preset` arms to fill); see [`super`] for the rest.
//! Nothing here builds a provider: the `registry` module does, from this data.

use super::github_token::github_token;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The kind of endpoint a provider talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderType {
    /// OpenAI Chat Completions.
    Openai,
    /// vLLM's OpenAI-compatible server.
    Vllm,
    /// SGLang's OpenAI-compatible server.
    Sglang,
    /// llama.cpp's `llama-server`.
    Llamacpp,
    /// Z.AI (GLM) OpenAI-compatible endpoint.
    Zai,
    /// GitHub Copilot chat completions.
    Copilot,
    /// Azure OpenAI deployments.
    Azure,
    /// Anthropic Messages API.
    #[serde(alias = "claude")]
    Anthropic,
    /// Google Gemini generateContent.
    Gemini,
    /// Ollama's native `/api/chat`.
    Ollama,
    /// Plays back recorded responses offline.
    Replay,
}

/// How a provider type talks: which wire format module serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireApi {
    /// `POST {base_url}/chat/completions`.
    ChatCompletions,
    /// Anthropic Messages.
    AnthropicMessages,
    /// Gemini generateContent.
    GeminiGenerateContent,
    /// Ollama native chat.
    OllamaChat,
    /// OpenAI Responses (`POST {base_url}/responses`; Azure: `/openai/v1/responses`).
    Responses,
    /// Offline playback.
    Replay,
}

/// The `wire_api` setting of an `openai` or `azure` provider, named as Codex names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WireChoice {
    /// Chat Completions (`/chat/completions`).
    Chat,
    /// The Responses API (`/responses`).
    Responses,
}

/// Whether OpenAI serves `model` through the Responses API only (it answers Chat Completions
/// with 404 `This model is only supported in v1/responses`): the Codex models (`*-codex*`,
/// `codex-mini*`), the pro reasoning models (`o1-pro`, `o3-pro`, `gpt-5-pro`, `gpt-5.x-pro`),
/// deep research and computer use — each documented "available in the Responses API only" on
/// its model page (developers.openai.com/api/docs/models/…). Dated snapshots match too.
pub fn needs_responses(model: &str) -> bool {
    let model = model.to_ascii_lowercase();
    let model = model.rsplit('/').next().unwrap_or_default();
    const FAMILIES: [&str; 6] = ["codex-mini", "o1-pro", "o3-pro", "o3-deep-research", "o4-mini-deep-research", "computer-use-preview"];
    let gpt5_pro = model.starts_with("gpt-5") && (model.ends_with("-pro") || model.contains("-pro-"));
    model.contains("-codex") || gpt5_pro || FAMILIES.iter().any(|family| model.starts_with(family))
}

/// The process environment (or what a test passes instead).
pub type Env = BTreeMap<String, String>;

/// Credentials that need code rather than a configured key: the registry builds a provider
/// of such a type with that code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyExchange {
    /// A GitHub token exchanged for short-lived Copilot tokens (the `copilot` module).
    Copilot,
}

/// How a provider sends its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHeader {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// The bare key in the named header (`api-key`, `x-api-key`, `x-goog-api-key`).
    Named(&'static str),
}

/// Which field carries a Chat Completions call's output limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenLimitField {
    /// `max_completion_tokens`: OpenAI's reasoning and newer models reject `max_tokens`.
    MaxCompletionTokens,
    /// `max_tokens`: the one field every OpenAI-compatible server reads.
    MaxTokens,
}

/// The Azure `api-version` sent when none is configured: the last dated GA release of the
/// data-plane inference API (it accepts `max_completion_tokens`).
pub const AZURE_API_VERSION: &str = "2024-10-21";

/// What a provider type is, as data: everything that differs between vendors of one wire API.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// The wire format.
    pub wire: WireApi,
    /// Default `base_url`, when there is a public or conventional local one.
    pub base_url: Option<&'static str>,
    /// The conventional environment variable holding the key.
    pub key_env: Option<&'static str>,
    /// True when a request without a key is pointless (hosted APIs).
    pub key_required: bool,
    /// The conventional environment variable holding the endpoint, if any.
    pub base_url_env: Option<&'static str>,
    /// Default model when none is configured.
    pub default_model: Option<&'static str>,
    /// How the key is sent, when not as the wire format sends it (Azure: `api-key`).
    pub key_header: Option<KeyHeader>,
    /// Headers every request carries (Copilot's editor identification); configured `headers`
    /// override them.
    pub headers: &'static [(&'static str, &'static str)],
    /// Chat Completions: the output-limit field.
    pub token_limit_field: TokenLimitField,
    /// Chat Completions: the model is a deployment named in the URL
    /// (`/openai/deployments/{model}/chat/completions?api-version=…`, no `model` in the body),
    /// with this `api-version` unless one is configured (Azure).
    pub deployment_api_version: Option<&'static str>,
    /// A variable holding a bearer token sent as `Authorization` when there is no key
    /// (Azure's Entra ID token).
    pub bearer_env: Option<&'static str>,
    /// Finds the key when `api_key` is not configured, instead of reading `key_env` (Copilot:
    /// two variables, then the stored token).
    pub find_key: Option<fn(&Env) -> Option<String>>,
    /// What to tell a user who has no key, when not `key_env`.
    pub key_hint: Option<&'static str>,
    /// Anthropic Messages: mark prompt-cache breakpoints.
    pub prompt_caching: bool,
    /// Chat Completions: an assistant turn of only tool calls carries `content: ""`, not
    /// `null` — local servers built on pydantic models and chat templates (llama-cpp-python,
    /// vLLM, SGLang) fail on `null` (llama-cpp-python with a 500).
    pub empty_content_with_calls: bool,
    /// The code that builds the provider when its credentials need code; `None`: the wire
    /// format's `HttpProvider` with the configured key.
    pub key_exchange: Option<KeyExchange>,
    /// Chat Completions types whose endpoint also serves the Responses API (OpenAI, Azure):
    /// the `wire_api` setting may choose it, and models that need it get it on their own.
    pub speaks_responses: bool,
}

impl Preset {
    /// The fields most types leave as they are.
    pub const DEFAULT: Preset = Preset {
        wire: WireApi::ChatCompletions,
        base_url: None,
        key_env: None,
        key_required: false,
        base_url_env: None,
        default_model: None,
        key_header: None,
        headers: &[],
        token_limit_field: TokenLimitField::MaxTokens,
        deployment_api_version: None,
        bearer_env: None,
        find_key: None,
        key_hint: None,
        prompt_caching: false,
        empty_content_with_calls: false,
        key_exchange: None,
        speaks_responses: false,
    };

    /// A Chat Completions type of a local server at `base_url` with its key in `key_env`.
    pub const fn local_chat(base_url: &'static str, key_env: &'static str) -> Preset {
        Preset { empty_content_with_calls: true, ..Preset::chat(Some(base_url), key_env, false, None) }
    }

    /// A Chat Completions type at `base_url` with its key in `key_env`.
    pub const fn chat(
        base_url: Option<&'static str>,
        key_env: &'static str,
        key_required: bool,
        default_model: Option<&'static str>,
    ) -> Preset {
        Preset { base_url, key_env: Some(key_env), key_required, default_model, ..Preset::DEFAULT }
    }
}

/// The editor identification Copilot expects, on the token exchange and on chat calls (values
/// as VS Code's Copilot Chat sends them; configured `headers` override them on chat calls).
pub const COPILOT_EDITOR_VERSION: (&str, &str) = ("editor-version", "vscode/1.107.0");
/// The editor plugin's version, beside [`COPILOT_EDITOR_VERSION`].
pub const COPILOT_EDITOR_PLUGIN_VERSION: (&str, &str) = ("editor-plugin-version", "copilot-chat/0.35.0");
/// The headers of every Copilot chat call.
const COPILOT_CHAT_HEADERS: [(&str, &str); 3] =
    [("copilot-integration-id", "vscode-chat"), COPILOT_EDITOR_VERSION, COPILOT_EDITOR_PLUGIN_VERSION];

/// The `copilot` provider type, as data: Chat Completions with `max_completion_tokens`, the
/// editor headers, the GitHub token found by [`github_token`], and its token exchange.
pub const COPILOT: Preset = Preset {
    token_limit_field: TokenLimitField::MaxCompletionTokens,
    headers: &COPILOT_CHAT_HEADERS,
    find_key: Some(github_token),
    key_hint: Some("GITHUB_COPILOT_TOKEN (or run `dracode auth copilot`)"),
    key_exchange: Some(KeyExchange::Copilot),
    ..Preset::chat(Some("https://api.githubcopilot.com"), "GITHUB_COPILOT_TOKEN", true, Some("gpt-4o"))
};

impl ProviderType {
    /// Every type, in the order `dracode providers` lists them.
    pub const ALL: [ProviderType; 11] = [
        ProviderType::Openai,
        ProviderType::Anthropic,
        ProviderType::Gemini,
        ProviderType::Azure,
        ProviderType::Ollama,
        ProviderType::Copilot,
        ProviderType::Zai,
        ProviderType::Vllm,
        ProviderType::Sglang,
        ProviderType::Llamacpp,
        ProviderType::Replay,
    ];

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderType::Openai => "openai",
            ProviderType::Vllm => "vllm",
            ProviderType::Sglang => "sglang",
            ProviderType::Llamacpp => "llamacpp",
            ProviderType::Zai => "zai",
            ProviderType::Copilot => "copilot",
            ProviderType::Azure => "azure",
            ProviderType::Anthropic => "anthropic",
            ProviderType::Gemini => "gemini",
            ProviderType::Ollama => "ollama",
            ProviderType::Replay => "replay",
        }
    }

    /// Looks a type up by name (`claude` is an alias of `anthropic`).
    pub fn from_name(name: &str) -> Option<ProviderType> {
        if name == "claude" {
            return Some(ProviderType::Anthropic);
        }
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// The data that defines this type.
    pub fn preset(self) -> Preset {
        const OPENAI_STYLE: TokenLimitField = TokenLimitField::MaxCompletionTokens;
        match self {
            ProviderType::Openai => Preset {
                base_url_env: Some("OPENAI_BASE_URL"),
                token_limit_field: OPENAI_STYLE,
                speaks_responses: true,
                ..Preset::chat(Some("https://api.openai.com/v1"), "OPENAI_API_KEY", true, Some("gpt-4o"))
            },
            ProviderType::Vllm => Preset::local_chat("http://127.0.0.1:8000/v1", "VLLM_API_KEY"),
            ProviderType::Sglang => Preset::local_chat("http://127.0.0.1:30000/v1", "SGLANG_API_KEY"),
            ProviderType::Llamacpp => Preset::local_chat("http://127.0.0.1:8080/v1", "LLAMACPP_API_KEY"),
            ProviderType::Zai => Preset::chat(Some("https://api.z.ai/api/paas/v4"), "ZAI_API_KEY", true, Some("glm-4.6")),
            ProviderType::Copilot => COPILOT,
            ProviderType::Azure => Preset {
                base_url_env: Some("AZURE_OPENAI_ENDPOINT"),
                key_header: Some(KeyHeader::Named("api-key")),
                token_limit_field: OPENAI_STYLE,
                deployment_api_version: Some(AZURE_API_VERSION),
                bearer_env: Some("AZURE_OPENAI_AD_TOKEN"),
                speaks_responses: true,
                ..Preset::chat(None, "AZURE_OPENAI_API_KEY", true, None)
            },
            ProviderType::Anthropic => Preset {
                wire: WireApi::AnthropicMessages,
                base_url_env: Some("ANTHROPIC_BASE_URL"),
                prompt_caching: true,
                ..Preset::chat(Some("https://api.anthropic.com"), "ANTHROPIC_API_KEY", true, Some("claude-sonnet-4-5"))
            },
            ProviderType::Gemini => Preset {
                wire: WireApi::GeminiGenerateContent,
                ..Preset::chat(Some("https://generativelanguage.googleapis.com"), "GEMINI_API_KEY", true, Some("gemini-2.5-flash"))
            },
            ProviderType::Ollama => Preset {
                wire: WireApi::OllamaChat,
                base_url: Some("http://localhost:11434"),
                base_url_env: Some("OLLAMA_HOST"),
                ..Preset::DEFAULT
            },
            ProviderType::Replay => Preset { wire: WireApi::Replay, default_model: Some("replay"), ..Preset::DEFAULT },
        }
    }
}

/// A provider with every setting resolved from config, environment and manifest.
#[derive(Clone)]
pub struct ResolvedProvider {
    /// The name the user refers to it by.
    pub name: String,
    /// Its type.
    pub kind: ProviderType,
    /// The model (or Azure deployment).
    pub model: Option<String>,
    /// The endpoint.
    pub base_url: Option<String>,
    /// The key; never printed (see [`dracode_secrets`]).
    pub api_key: Option<String>,
    /// Per-request HTTP timeout: the whole of a non-streamed request; for a streamed one, the
    /// wait for the response headers and the longest silence between bytes after them.
    pub timeout: Duration,
    /// Whether answers are streamed (on unless the config says `stream = false`).
    pub stream: bool,
    /// Output token limit per call.
    pub max_tokens: Option<u32>,
    /// How hard the model thinks, when set (provider, `[defaults]` or task).
    pub reasoning: Option<super::ReasoningEffort>,
    /// The configured `wire_api` (OpenAI and Azure); unset: chosen by model ([`Self::wire`]).
    pub wire_api: Option<WireChoice>,
    /// Extra HTTP headers.
    pub headers: BTreeMap<String, String>,
    /// Azure `api-version`.
    pub api_version: Option<String>,
    /// Shared limits on requests to this provider.
    pub limits: super::governor::Limits,
    /// For `replay`: the recorded file or folder.
    pub replay_path: Option<PathBuf>,
    /// The config fields a `${VAR}` template left empty, by field, each with why
    /// (`api_key = "${MOCK_KEY}": MOCK_KEY is not set`): what [`Self::not_configured_reason`]
    /// tells the user to fix instead of the type's usual variable.
    pub emptied: BTreeMap<String, String>,
}

#[cfg(test)]
impl ResolvedProvider {
    /// A provider for this crate's tests: `kind` at `base_url` with model `model`, a test key,
    /// streaming, a 5 s timeout and nothing else set.
    pub(crate) fn for_test(kind: ProviderType, model: &str, base_url: &str) -> ResolvedProvider {
        ResolvedProvider {
            name: "p".into(),
            kind,
            model: Some(model.into()),
            base_url: Some(base_url.into()),
            api_key: Some("sk-test-0123456789".into()),
            timeout: std::time::Duration::from_secs(5),
            stream: true,
            max_tokens: None,
            reasoning: None,
            wire_api: None,
            headers: Default::default(),
            api_version: None,
            limits: Default::default(),
            replay_path: None,
            emptied: Default::default(),
        }
    }
}

impl std::fmt::Debug for ResolvedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedProvider")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .finish_non_exhaustive()
    }
}

impl ResolvedProvider {
    /// The wire API this provider speaks: its type's, except that a type whose endpoint also
    /// serves the Responses API ([`Preset::speaks_responses`]) speaks the one `wire_api`
    /// names, or, unset, Responses for the models only it serves ([`needs_responses`]).
    pub fn wire(&self) -> WireApi {
        let preset = self.kind.preset();
        if !preset.speaks_responses {
            return preset.wire;
        }
        let responses = match self.wire_api {
            Some(choice) => choice == WireChoice::Responses,
            None => self.model.as_deref().is_some_and(needs_responses),
        };
        if responses { WireApi::Responses } else { preset.wire }
    }

    /// Why this provider cannot send a request, or `None` when it can.
    pub fn not_configured_reason(&self) -> Option<String> {
        let preset = self.kind.preset();
        let auth_header = self.headers.keys().any(|h| h.eq_ignore_ascii_case("authorization"));
        let why = |field: &str, usual: String| self.emptied.get(field).cloned().unwrap_or(usual);
        let (name, kind) = (&self.name, self.kind.as_str());
        if preset.key_required && self.api_key.as_deref().is_none_or(str::is_empty) && !auth_header {
            let var = preset.key_hint.or(preset.key_env).unwrap_or("api_key");
            return Some(format!(
                "provider {name:?} ({kind}) has no API key: {}",
                why("api_key", format!("set {var} or `api_key` in its config"))
            ));
        }
        if preset.wire != WireApi::Replay && self.base_url.as_deref().is_none_or(str::is_empty) {
            let var = preset.base_url_env.unwrap_or("base_url");
            let usual = format!("set {var} or `base_url` in its config");
            return Some(format!("provider {name:?} ({kind}) has no endpoint: {}", why("base_url", usual)));
        }
        if self.model.as_deref().is_none_or(str::is_empty) {
            let usual = "set `model` in its config or the manifest".to_string();
            return Some(format!("provider {name:?} ({kind}) has no model: {}", why("model", usual)));
        }
        if preset.wire == WireApi::Replay && self.replay_path.is_none() {
            return Some(format!("provider {:?} (replay) has no recording: set `replay` in the manifest", self.name));
        }
        None
    }
}

/// What a task's provider instance needs to know about the task.
#[derive(Debug, Clone)]
pub struct TaskBinding {
    /// The task's id (replay picks the recording by it).
    pub task_id: String,
}
