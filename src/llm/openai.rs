//! OpenAI Chat Completions wire format. TODO(helper): implement.

use super::preset::ResolvedProvider;
use super::{BoxFuture, LlmError, LlmRequest, LlmResponse, Provider, RetryObserver};
use super::http::HttpClient;

/// A Chat Completions endpoint (OpenAI, vLLM, SGLang, llama.cpp, Z.AI, Copilot, Azure).
pub struct ChatCompletions {
    model: String,
    _http: HttpClient,
}

impl ChatCompletions {
    /// Builds the adapter from resolved settings.
    pub fn new(resolved: &ResolvedProvider, http: HttpClient) -> Result<Self, LlmError> {
        Ok(ChatCompletions { model: resolved.model.clone().unwrap_or_default(), _http: http })
    }
}

impl Provider for ChatCompletions {
    fn complete<'a>(&'a self, _request: LlmRequest<'a>, _on_retry: RetryObserver<'a>) -> BoxFuture<'a, Result<LlmResponse, LlmError>> {
        Box::pin(async { Err(LlmError::new(super::ErrorKind::Internal, "not built yet")) })
    }
    fn model(&self) -> &str {
        &self.model
    }
}
