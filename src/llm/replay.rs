//! Offline playback. TODO.
use super::preset::{ResolvedProvider, TaskBinding};
use super::{BoxFuture, LlmError, LlmRequest, LlmResponse, Provider, RetryObserver};
/// Plays back recorded responses.
pub struct Replay { model: String }
impl Replay {
    /// Loads the recording for `task`.
    pub fn load(resolved: &ResolvedProvider, _task: &TaskBinding) -> Result<Self, LlmError> {
        Ok(Replay { model: resolved.model.clone().unwrap_or_default() })
    }
}
impl Provider for Replay {
    fn complete<'a>(&'a self, _request: LlmRequest<'a>, _on_retry: RetryObserver<'a>) -> BoxFuture<'a, Result<LlmResponse, LlmError>> {
        Box::pin(async { Err(LlmError::new(super::ErrorKind::Internal, "not built yet")) })
    }
    fn model(&self) -> &str { &self.model }
}
