//! Provider types as data: each type's wire format, default endpoint and credential variable.
//! A provider named after a type (`openai`, `ollama`, …) works with no config table at all.

use super::{LlmError, Provider};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
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
    /// Offline playback.
    Replay,
}

/// What a provider type is, as data.
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
}

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
        let chat = |base_url, key_env, key_required, default_model| Preset {
            wire: WireApi::ChatCompletions,
            base_url,
            key_env,
            key_required,
            base_url_env: None,
            default_model,
        };
        match self {
            ProviderType::Openai => Preset {
                base_url_env: Some("OPENAI_BASE_URL"),
                ..chat(Some("https://api.openai.com/v1"), Some("OPENAI_API_KEY"), true, Some("gpt-4o"))
            },
            ProviderType::Vllm => chat(Some("http://127.0.0.1:8000/v1"), Some("VLLM_API_KEY"), false, None),
            ProviderType::Sglang => chat(Some("http://127.0.0.1:30000/v1"), Some("SGLANG_API_KEY"), false, None),
            ProviderType::Llamacpp => chat(Some("http://127.0.0.1:8080/v1"), Some("LLAMACPP_API_KEY"), false, None),
            ProviderType::Zai => chat(Some("https://api.z.ai/api/paas/v4"), Some("ZAI_API_KEY"), true, Some("glm-4.6")),
            ProviderType::Copilot => chat(Some("https://api.githubcopilot.com"), Some("GITHUB_COPILOT_TOKEN"), true, Some("gpt-4o")),
            ProviderType::Azure => Preset {
                wire: WireApi::ChatCompletions,
                base_url: None,
                key_env: Some("AZURE_OPENAI_API_KEY"),
                key_required: true,
                base_url_env: Some("AZURE_OPENAI_ENDPOINT"),
                default_model: None,
            },
            ProviderType::Anthropic => Preset {
                wire: WireApi::AnthropicMessages,
                base_url: Some("https://api.anthropic.com"),
                key_env: Some("ANTHROPIC_API_KEY"),
                key_required: true,
                base_url_env: Some("ANTHROPIC_BASE_URL"),
                default_model: Some("claude-sonnet-4-5"),
            },
            ProviderType::Gemini => Preset {
                wire: WireApi::GeminiGenerateContent,
                base_url: Some("https://generativelanguage.googleapis.com"),
                key_env: Some("GEMINI_API_KEY"),
                key_required: true,
                base_url_env: None,
                default_model: Some("gemini-2.5-flash"),
            },
            ProviderType::Ollama => Preset {
                wire: WireApi::OllamaChat,
                base_url: Some("http://localhost:11434"),
                key_env: None,
                key_required: false,
                base_url_env: Some("OLLAMA_HOST"),
                default_model: None,
            },
            ProviderType::Replay => Preset {
                wire: WireApi::Replay,
                base_url: None,
                key_env: None,
                key_required: false,
                base_url_env: None,
                default_model: Some("replay"),
            },
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
    /// The key; never printed (see [`crate::secrets`]).
    pub api_key: Option<String>,
    /// Per-request HTTP timeout.
    pub timeout: Duration,
    /// Output token limit per call.
    pub max_tokens: Option<u32>,
    /// Extra HTTP headers.
    pub headers: BTreeMap<String, String>,
    /// Azure `api-version`.
    pub api_version: Option<String>,
    /// Shared limits on requests to this provider.
    pub limits: super::governor::Limits,
    /// For `replay`: the recorded file or folder.
    pub replay_path: Option<PathBuf>,
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
    /// Why this provider cannot send a request, or `None` when it can.
    pub fn not_configured_reason(&self) -> Option<String> {
        let preset = self.kind.preset();
        let auth_header = self.headers.keys().any(|h| h.eq_ignore_ascii_case("authorization"));
        if preset.key_required && self.api_key.as_deref().is_none_or(str::is_empty) && !auth_header {
            let var = match self.kind {
                ProviderType::Copilot => "GITHUB_COPILOT_TOKEN (or run `dracode auth copilot`)",
                _ => preset.key_env.unwrap_or("api_key"),
            };
            return Some(format!("provider {:?} ({}) has no API key: set {var} or `api_key` in its config", self.name, self.kind.as_str()));
        }
        if preset.wire != WireApi::Replay && self.base_url.as_deref().is_none_or(str::is_empty) {
            let var = preset.base_url_env.unwrap_or("base_url");
            return Some(format!(
                "provider {:?} ({}) has no endpoint: set {var} or `base_url` in its config",
                self.name,
                self.kind.as_str()
            ));
        }
        if self.model.as_deref().is_none_or(str::is_empty) {
            return Some(format!(
                "provider {:?} ({}) has no model: set `model` in its config or the manifest",
                self.name,
                self.kind.as_str()
            ));
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

/// Builds the provider for one task, or says why it is not configured. Nothing is sent here.
pub fn build(resolved: &ResolvedProvider, task: &TaskBinding, http: &super::http::HttpClient) -> Result<Arc<dyn Provider>, LlmError> {
    if let Some(reason) = resolved.not_configured_reason() {
        return Err(LlmError::not_configured(reason));
    }
    if resolved.kind == ProviderType::Copilot {
        let endpoints = super::copilot::Endpoints::from_env(&crate::config::process_env());
        return Ok(Arc::new(super::copilot::Copilot::new(resolved, http.clone(), endpoints)?));
    }
    match resolved.kind.preset().wire {
        WireApi::ChatCompletions => Ok(Arc::new(super::openai::ChatCompletions::new(resolved, http.clone())?)),
        WireApi::Replay => Ok(Arc::new(super::replay::Replay::load(resolved, task)?)),
        WireApi::AnthropicMessages => Ok(Arc::new(super::anthropic::AnthropicMessages::new(resolved, http.clone())?)),
        WireApi::GeminiGenerateContent => Ok(Arc::new(super::gemini::GeminiGenerateContent::new(resolved, http.clone())?)),
        WireApi::OllamaChat => Ok(Arc::new(super::ollama::OllamaChat::new(resolved, http.clone())?)),
    }
}
