//! Talking to models: the neutral conversation model ([`types`]), typed errors ([`error`]),
//! the [`Provider`] trait, and one file per wire format. Vendors are data ([`preset`]);
//! wire APIs are code: each implements [`wire::WireFormat`] (pure functions: URL, body, parse,
//! tool JSON, snapshot-tested) and is spoken by the one generic
//! [`http_provider::HttpProvider`], which owns sending, retries and credentials.
//!
//! - [`openai`]: Chat Completions (OpenAI, Azure, Copilot, Z.AI, vLLM, SGLang, llama.cpp);
//! - [`responses`]: OpenAI's Responses API (OpenAI and Azure, by `wire_api` or model);
//! - [`anthropic`]: Messages; [`gemini`]: generateContent; [`ollama`]: `/api/chat`;
//! - [`copilot`]: Copilot's token exchange (a [`http_provider::KeySource`]) and device flow,
//!   with its GitHub token found by [`github_token`];
//! - [`replay`] / [`record`]: offline playback and recording; [`governor`]: shared limits;
//! - [`reasoning`]: the `reasoning` setting as each model-dependent API takes it;
//! - [`registry`]: builds a task's provider from its settings, per wire API.
//!
//! The modules form layers, each importing only from those below it: at the bottom the
//! conversation model and its helpers ([`types`], [`error`], [`stream`], [`overflow`],
//! [`reasoning`], [`prices`], [`governor`], [`record`], [`github_token`]); then the settings
//! ([`preset`]); the HTTP client ([`http`]); the [`wire::WireFormat`] trait; the one
//! [`http_provider::HttpProvider`]; the formats ([`openai`], then [`responses`], [`anthropic`],
//! [`gemini`], [`ollama`]); [`copilot`] and [`replay`]; and on top the [`registry`].
//!
//! # Adding a provider
//! - A vendor that speaks an existing wire API: a [`preset::ProviderType`] variant (its name
//!   in `as_str` and `ALL`) and its [`preset::Preset`] — endpoint, key variable, key header,
//!   vendor headers, token-limit field — in `ProviderType::preset`. Nothing else.
//! - A vendor whose credentials need code (like Copilot): its [`preset::Preset`] naming a
//!   [`preset::KeyExchange`] variant, its own file with a [`http_provider::KeySource`] and a
//!   `connect` function, and one line in [`registry::build`] calling it.
//! - A new wire API: one file with a type implementing [`wire::WireFormat`] (and its
//!   snapshot tests), a [`preset::WireApi`] variant and one line in [`registry::build`].
#![forbid(unsafe_code)]

pub mod anthropic;
pub mod copilot;
pub mod error;
pub mod gemini;
pub mod github_token;
pub mod governor;
pub mod http;
pub mod http_provider;
pub mod ollama;
pub mod openai;
pub mod overflow;
pub mod preset;
pub mod prices;
pub mod reach;
pub mod reasoning;
pub mod recording;
pub mod registry;
pub mod replay;
pub mod responses;
#[cfg(any(test, feature = "test-support"))]
pub mod snapshot;
pub mod stream;
pub mod types;
pub mod wire;

pub use error::{ErrorKind, LlmError};
pub use types::{ContentBlock, LlmRequest, LlmResponse, Message, ReasoningEffort, Role, StopReason, ToolSpec, Usage};

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

/// Watches a provider call while it is in flight: each retry (so it can become a `retry`
/// event) and each arrival of bytes on the wire (so a task's idle clock restarts while a
/// streamed answer is still coming).
pub trait CallObserver: Send + Sync {
    /// A retry is about to happen.
    fn on_retry(&self, notice: RetryNotice);

    /// Bytes arrived (response headers, a chunk of a stream, a keep-alive). Default: nothing.
    fn on_bytes(&self) {}
}

/// A closure over retry notices is an observer that ignores bytes.
impl<F: Fn(RetryNotice) + Send + Sync> CallObserver for F {
    fn on_retry(&self, notice: RetryNotice) {
        self(notice);
    }
}

/// Receives retry notices (and arrivals of bytes) from a provider while a call is in flight.
pub type RetryObserver<'a> = &'a dyn CallObserver;

/// A model endpoint. HTTP wire APIs do not implement this themselves: they implement
/// [`wire::WireFormat`] and [`http_provider::HttpProvider`] implements this for them.
pub trait Provider: Send + Sync {
    /// Sends one request and returns the model's answer. Transient failures are retried inside,
    /// each retry reported to `on_retry`; what comes back as `Err` is final for this call.
    fn complete<'a>(&'a self, request: LlmRequest<'a>, on_retry: RetryObserver<'a>) -> BoxFuture<'a, Result<LlmResponse, LlmError>>;

    /// The model name this provider sends.
    fn model(&self) -> &str;
}
