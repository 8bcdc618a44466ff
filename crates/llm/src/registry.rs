//! Builds the provider of one task from its settings: the registry of wire APIs, on top of
//! every format. A type whose credentials need code ([`KeyExchange`]) is built by that code;
//! any other gets the [`HttpProvider`] of its wire API with the configured key, or the replay
//! of its recording.

use super::anthropic::MessagesFormat;
use super::copilot;
use super::gemini::GenerateContentFormat;
use super::http::HttpClient;
use super::http_provider::HttpProvider;
use super::ollama::OllamaChatFormat;
use super::openai::ChatCompletionsFormat;
use super::preset::{Env, KeyExchange, ResolvedProvider, TaskBinding, WireApi};
use super::replay::Replay;
use super::responses::ResponsesFormat;
use super::wire::WireFormat;
use super::{ErrorKind, LlmError, Provider};
use std::sync::Arc;

/// Why `task`'s provider would end it `not_configured`, found without sending anything: the
/// provider's [`ResolvedProvider::not_configured_reason`], and for `replay` whether the task's
/// recording can be read (what [`build`] does first). `None` when a run could start it.
pub fn preflight(resolved: &ResolvedProvider, task: &TaskBinding) -> Option<String> {
    if let Some(reason) = resolved.not_configured_reason() {
        return Some(reason);
    }
    if resolved.kind.preset().wire != WireApi::Replay {
        return None;
    }
    match Replay::load(resolved, task) {
        Err(e) if e.kind == ErrorKind::NotConfigured => Some(format!("provider {:?} (replay): {}", resolved.name, e.message)),
        _ => None,
    }
}

/// Builds the provider for one task, or says why it is not configured. Nothing is sent here.
/// `env` is the process environment, for credential sources that read it.
///
/// The registry of wire APIs: a new one is a file implementing [`WireFormat`] and one line
/// here.
pub fn build(resolved: &ResolvedProvider, task: &TaskBinding, http: &HttpClient, env: &Env) -> Result<Arc<dyn Provider>, LlmError> {
    if let Some(reason) = resolved.not_configured_reason() {
        return Err(LlmError::not_configured(reason));
    }
    let preset = resolved.kind.preset();
    if let Some(KeyExchange::Copilot) = preset.key_exchange {
        return copilot::connect(resolved, http, env);
    }
    match resolved.wire() {
        WireApi::Responses => connect_with_key::<ResponsesFormat>(resolved, http),
        WireApi::ChatCompletions => connect_with_key::<ChatCompletionsFormat>(resolved, http),
        WireApi::AnthropicMessages => connect_with_key::<MessagesFormat>(resolved, http),
        WireApi::GeminiGenerateContent => connect_with_key::<GenerateContentFormat>(resolved, http),
        WireApi::OllamaChat => connect_with_key::<OllamaChatFormat>(resolved, http),
        WireApi::Replay => Ok(Arc::new(Replay::load(resolved, task)?)),
    }
}

/// The [`HttpProvider`] of format `W` with the configured key.
fn connect_with_key<W: WireFormat>(resolved: &ResolvedProvider, http: &HttpClient) -> Result<Arc<dyn Provider>, LlmError> {
    Ok(Arc::new(HttpProvider::<W>::new(resolved, http.clone())?))
}
