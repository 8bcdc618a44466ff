//! The one HTTP provider: [`HttpProvider`] speaks any [`WireFormat`] and owns everything that is
//! not the format — the endpoint (URL, key header, preset and configured headers, secrets
//! masked), retries through [`JsonEndpoint::post`] (and so [`super::http::send_json`]), the retry
//! observer, the output-limit default, usage (parsed by the format, passed through untouched)
//! and, through a [`KeySource`], credentials that are issued rather than configured (Copilot's
//! token exchange, with one refresh after a 401).
//!
//! Streaming is written once, in `HttpProvider::send`: unless the provider's `stream` setting
//! is off, it sends the format's stream body through [`JsonEndpoint::post_stream`], the
//! streaming twin of [`JsonEndpoint::post`] (same retries and error classes; a cut stream is a
//! transient failure; every arrival of bytes is reported to the observer, which restarts the
//! task's idle clock), and the format's decoder folds the frames (SSE events or NDJSON lines)
//! into the body `parse_response` reads. A server that answers a stream request with one JSON
//! body is read as such; one that answers it with an empty 2xx (llama-cpp-python with
//! automatic tool choice) gets the non-streamed request at once, and every later call of the
//! provider goes unstreamed. Nothing in the format files sends.

use super::http::{HttpClient, JsonEndpoint, RetryPolicy, StreamReply};
use super::preset::ResolvedProvider;
use super::wire::WireFormat;
use super::{BoxFuture, LlmError, LlmRequest, LlmResponse, Provider, RetryObserver};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};

/// A key handed out for a while by someone other than the config (a token exchange).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedKey {
    /// The key to send, as the format's key header says.
    pub key: String,
    /// Where calls with this key go, when the issuer says (replaces `base_url`).
    pub base_url: Option<String>,
}

/// Where a provider's key comes from.
pub trait KeySource: Send + Sync + 'static {
    /// The key for the next call, or `None` for the configured one. `refused` is the issued
    /// key a 401 just refused: fetch another. Transient failures are retried under `retry`
    /// and reported to `on_retry`, like every call.
    fn issue<'a>(
        &'a self,
        refused: Option<&'a str>,
        retry: &'a RetryPolicy,
        on_retry: RetryObserver<'a>,
    ) -> BoxFuture<'a, Result<Option<IssuedKey>, LlmError>>;
}

/// The key from config or the environment, sent on every call as is.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConfiguredKey;

impl KeySource for ConfiguredKey {
    fn issue<'a>(
        &'a self,
        _: Option<&'a str>,
        _: &'a RetryPolicy,
        _: RetryObserver<'a>,
    ) -> BoxFuture<'a, Result<Option<IssuedKey>, LlmError>> {
        Box::pin(async { Ok(None) })
    }
}

/// A model endpoint speaking wire format `W`, with keys from `K`.
pub struct HttpProvider<W, K = ConfiguredKey> {
    wire: W,
    settings: ResolvedProvider,
    model: String,
    endpoint: JsonEndpoint,
    keys: K,
    /// The server refused a body in the format's own form once: every body is sent relaxed
    /// ([`WireFormat::relax_body`]) from then on.
    relaxed: AtomicBool,
    /// The server answered a stream request with an empty body once: calls are not streamed
    /// from then on.
    unstreamed: AtomicBool,
}

impl<W: WireFormat> HttpProvider<W> {
    /// A provider from resolved settings, sending the configured key. Fails (nothing sent)
    /// when the key or a configured header cannot be sent over HTTP.
    pub fn new(resolved: &ResolvedProvider, http: HttpClient) -> Result<Self, LlmError> {
        Self::with_key_source(resolved, http, ConfiguredKey)
    }
}

impl<W: WireFormat, K: KeySource> HttpProvider<W, K> {
    /// A provider from resolved settings whose keys come from `keys`.
    pub fn with_key_source(resolved: &ResolvedProvider, http: HttpClient, keys: K) -> Result<Self, LlmError> {
        let wire = W::for_provider(resolved);
        let endpoint = build_endpoint(&wire, resolved, http)?;
        Ok(HttpProvider {
            model: resolved.model.clone().unwrap_or_default(),
            settings: resolved.clone(),
            wire,
            endpoint,
            keys,
            relaxed: AtomicBool::new(false),
            unstreamed: AtomicBool::new(false),
        })
    }

    /// The same provider with another retry policy (tests use short delays).
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.endpoint.retry = retry;
        self
    }

    /// The wire format.
    pub fn wire(&self) -> &W {
        &self.wire
    }

    /// The wire format, to adjust (e.g. Anthropic's prompt caching).
    pub fn wire_mut(&mut self) -> &mut W {
        &mut self.wire
    }

    /// The endpoint calls with the configured key go to.
    pub fn endpoint(&self) -> &JsonEndpoint {
        &self.endpoint
    }

    /// One call through `issued`'s endpoint (the configured one without): body, POST with
    /// retries, parse. Errors carry the provider's name, secrets masked.
    async fn call(
        &self,
        issued: Option<&IssuedKey>,
        request: LlmRequest<'_>,
        on_retry: RetryObserver<'_>,
    ) -> Result<LlmResponse, LlmError> {
        let reissued;
        let endpoint = match issued {
            None => &self.endpoint,
            Some(key) => {
                reissued = self.endpoint_for(key)?;
                &reissued
            }
        };
        let mut body = self.wire.request_body(&self.model, &request);
        let never = |_: &LlmError| false;
        let reply = if self.relaxed.load(Ordering::Relaxed) {
            self.wire.relax_body(&mut body);
            self.send(endpoint, &body, on_retry, &never).await
        } else {
            let mut relaxed = body.clone();
            if self.wire.relax_body(&mut relaxed) {
                // A refusal may be of the form (llama-cpp-python answers 500 to `content:
                // null`): resend relaxed at once instead of retrying the same body.
                let refused = |e: &LlmError| self.wire.may_refuse_form(e);
                match self.send(endpoint, &body, on_retry, &refused).await {
                    Err(e) if refused(&e) => {
                        let reply = self.send(endpoint, &relaxed, on_retry, &never).await;
                        if reply.is_ok() {
                            self.relaxed.store(true, Ordering::Relaxed);
                        }
                        reply
                    }
                    other => other,
                }
            } else {
                self.send(endpoint, &body, on_retry, &never).await
            }
        };
        let reply = reply.map_err(|e| self.wire.refine_error(e))?;
        self.wire.parse_response(&reply, request.messages).map_err(|e| endpoint.label(e))
    }

    /// Sends `body` through `endpoint`, streamed unless the provider says not to (or its
    /// server cannot), with retries; the answer as the format's non-streamed body. A failure
    /// `give_up` accepts is returned at once.
    async fn send(
        &self,
        endpoint: &JsonEndpoint,
        body: &Value,
        on_retry: RetryObserver<'_>,
        give_up: &(dyn Fn(&LlmError) -> bool + Sync),
    ) -> Result<Value, LlmError> {
        if self.settings.stream && !self.unstreamed.load(Ordering::Relaxed) {
            let mut streamed = body.clone();
            self.wire.stream_body(&mut streamed);
            let decoder = || self.wire.stream_decoder();
            match endpoint.post_stream(&streamed, W::FRAMING, &decoder, on_retry, give_up).await? {
                StreamReply::Streamed(body) => return Ok(body),
                StreamReply::Json(reply) => return Ok(reply.body),
                StreamReply::Empty => self.unstreamed.store(true, Ordering::Relaxed),
            }
        }
        Ok(endpoint.post_until(body, on_retry, give_up).await?.body)
    }

    /// The endpoint for an issued key (and the base URL its issuer named).
    fn endpoint_for(&self, issued: &IssuedKey) -> Result<JsonEndpoint, LlmError> {
        let mut settings = self.settings.clone();
        settings.api_key = Some(issued.key.clone());
        if let Some(base_url) = &issued.base_url {
            settings.base_url = Some(base_url.clone());
        }
        let mut endpoint = build_endpoint(&self.wire, &settings, self.endpoint.http.clone())?;
        endpoint.retry = self.endpoint.retry.clone();
        Ok(endpoint)
    }
}

/// The endpoint of `settings` in format `wire`: its URL; the format's fixed headers and the
/// preset's vendor headers; the key as the preset (else the format) sends it; then the
/// configured headers, which override all of these.
pub fn build_endpoint<W: WireFormat>(wire: &W, settings: &ResolvedProvider, http: HttpClient) -> Result<JsonEndpoint, LlmError> {
    let preset = settings.kind.preset();
    let base = settings.base_url.as_deref().unwrap_or_default().trim_end_matches('/');
    let url = wire.url(base, settings.model.as_deref().unwrap_or_default());
    let mut headers = HeaderMap::new();
    for (name, value) in wire.fixed_headers().iter().chain(preset.headers) {
        headers.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
    }
    let mut endpoint = JsonEndpoint::new(settings, url, headers, preset.key_header.unwrap_or(W::KEY_HEADER), http)?;
    endpoint.stream_url = wire.stream_url(base, settings.model.as_deref().unwrap_or_default());
    Ok(endpoint)
}

impl<W: WireFormat, K: KeySource> Provider for HttpProvider<W, K> {
    fn complete<'a>(&'a self, request: LlmRequest<'a>, on_retry: RetryObserver<'a>) -> BoxFuture<'a, Result<LlmResponse, LlmError>> {
        Box::pin(async move {
            let request = LlmRequest { max_tokens: request.max_tokens.or(self.settings.max_tokens), ..request };
            let retry = &self.endpoint.retry;
            let issued = self.keys.issue(None, retry, on_retry).await?;
            let result = self.call(issued.as_ref(), request, on_retry).await;
            match issued {
                // An issued key may be revoked before it expires: fetch one more, once.
                Some(refused) if result.as_ref().is_err_and(|e| e.http_status == Some(401)) => {
                    let fresh = self.keys.issue(Some(&refused.key), retry, on_retry).await?;
                    self.call(fresh.as_ref(), request, on_retry).await
                }
                _ => result,
            }
        })
    }

    fn model(&self) -> &str {
        &self.model
    }
}
