//! `--record DIR`: wraps a provider and saves every response of a task to `DIR/<id>.json`, a
//! recording that the `replay` provider plays back.

use super::{BoxFuture, LlmError, LlmRequest, LlmResponse, Provider, RetryObserver};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A provider that records what the inner provider answers.
pub struct Recorder {
    inner: Arc<dyn Provider>,
    file: PathBuf,
    provider_name: String,
    responses: Mutex<Vec<LlmResponse>>,
}

impl Recorder {
    /// Records `inner`'s answers for `task_id` into `dir`.
    pub fn new(inner: Arc<dyn Provider>, dir: &std::path::Path, task_id: &str, provider_name: &str) -> Self {
        Recorder {
            inner,
            file: dir.join(format!("{}.json", dracode_results::file_names::file_stem(task_id))),
            provider_name: provider_name.to_string(),
            responses: Mutex::new(Vec::new()),
        }
    }

    /// Rewrites the recording with every response so far (a crash keeps what was recorded).
    fn save(&self, responses: &[LlmResponse]) -> std::io::Result<()> {
        let doc = serde_json::json!({
            "provider": self.provider_name,
            "model": self.inner.model(),
            "responses": responses,
        });
        if let Some(dir) = self.file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)?;
        std::fs::write(&self.file, text)
    }
}

impl Provider for Recorder {
    fn complete<'a>(&'a self, request: LlmRequest<'a>, on_retry: RetryObserver<'a>) -> BoxFuture<'a, Result<LlmResponse, LlmError>> {
        Box::pin(async move {
            let response = self.inner.complete(request, on_retry).await?;
            let mut responses = self.responses.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            responses.push(response.clone());
            self.save(&responses)
                .map_err(|e| LlmError::new(super::ErrorKind::Internal, format!("cannot write recording {}: {e}", self.file.display())))?;
            Ok(response)
        })
    }

    fn model(&self) -> &str {
        self.inner.model()
    }
}
