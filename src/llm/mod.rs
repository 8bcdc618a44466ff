//! Talking to models: the neutral conversation model ([`types`]), typed errors ([`error`]),
//! the [`Provider`] trait, and one file per wire format. Vendors are data ([`preset`]);
//! wire APIs are code ([`openai`], [`anthropic`], [`replay`]).

pub mod anthropic;
pub mod copilot;
pub mod error;
pub mod gemini;
pub mod governor;
pub mod http;
pub mod ollama;
pub mod openai;
pub mod preset;
pub mod prices;
pub mod record;
pub mod replay;
pub mod types;

pub use error::{ErrorKind, LlmError};
pub use types::{ContentBlock, LlmRequest, LlmResponse, Message, Role, StopReason, ToolSpec, Usage};

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A boxed, sendable future, as returned by [`Provider::complete`].
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An HTTP retry about to happen, reported so it can become a `retry` event.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryNotice {
    /// The error kind or HTTP status that caused it, e.g. `server` or `429`.
    pub reason: String,
    /// How long we wait before the next try.
    pub delay: Duration,
    /// The number of the try that is about to start (2 for the first retry).
    pub attempt: u32,
}

/// Receives retry notices from a provider while a call is in flight.
pub type RetryObserver<'a> = &'a (dyn Fn(RetryNotice) + Send + Sync);

/// A model endpoint. A new wire format implements this in one file and adds one line to
/// [`preset::build`].
pub trait Provider: Send + Sync {
    /// Sends one request and returns the model's answer. Transient failures are retried inside,
    /// each retry reported to `on_retry`; what comes back as `Err` is final for this call.
    fn complete<'a>(&'a self, request: LlmRequest<'a>, on_retry: RetryObserver<'a>) -> BoxFuture<'a, Result<LlmResponse, LlmError>>;

    /// The model name this provider sends.
    fn model(&self) -> &str;
}
