//! Why an LLM call failed, as a type: the kind decides retries, task status and JUnit element.

pub use dracode_results::ErrorKind;
use std::time::Duration;

/// A failed LLM call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind_name}: {message}", kind_name = kind.as_str())]
pub struct LlmError {
    /// What class of failure.
    pub kind: ErrorKind,
    /// A human explanation; secrets already redacted.
    pub message: String,
    /// The HTTP status, when there was a response.
    pub http_status: Option<u16>,
    /// How long the provider asked us to wait before retrying.
    pub retry_after: Option<Duration>,
}

impl LlmError {
    /// An error of `kind` with `message` and no HTTP details.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        LlmError { kind, message: message.into(), http_status: None, retry_after: None }
    }

    /// The provider is missing a key or endpoint; `message` says which variable to set.
    pub fn not_configured(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotConfigured, message)
    }

    /// True when the same call may succeed if tried again.
    pub fn is_transient(&self) -> bool {
        matches!(self.kind, ErrorKind::RateLimit | ErrorKind::Network | ErrorKind::Server) || matches!(self.http_status, Some(408 | 409))
    }
}

impl From<LlmError> for dracode_results::TaskError {
    /// A failed call as the failure of the task that made it.
    fn from(e: LlmError) -> Self {
        dracode_results::TaskError { kind: e.kind.into(), message: e.message, http_status: e.http_status }
    }
}
