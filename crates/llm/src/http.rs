//! The shared HTTP client and the one retry policy every provider uses.
//!
//! [`send_json`] sends a request built by the provider, retries what is transient (408, 409,
//! 429, 5xx — unless the body is a request-validation error: pydantic's `{"detail":[…]}`, a
//! "validation error" message, `invalid_request_error` —, connection failures, timeouts and an
//! empty 2xx body) with full-jitter exponential backoff, honours the
//! provider's own wait hints, and turns every failure into an [`LlmError`] of the right
//! [`ErrorKind`] with the provider's own error message, secrets masked.
//!
//! Streamed calls go through [`JsonEndpoint::post_stream`], the same retry loop around one
//! streamed try: an error status is classified exactly as above; a 2xx event stream (or NDJSON)
//! is read chunk by chunk, each arrival reported to the observer's `on_bytes` (the task's idle
//! clock), framed and folded by the format's decoder; a stream that ends before its terminal
//! event is a transient `network` failure, retried. The endpoint `timeout` then bounds the wait
//! for the headers and each silence between chunks, not the whole answer.
//!
//! The backoff is computed here rather than with `backon`: `backon`'s jitter adds up to one
//! more delay on top (`d..2d`, which can overshoot `max_delay`), not full jitter (`0..=d`), and
//! its `adjust` hook cannot express "give up when the server asks for more than the budget".

use super::preset::{KeyHeader, ResolvedProvider};
use super::stream::{Framer, Framing, StreamDecoder};
use super::{ErrorKind, LlmError, RetryNotice, RetryObserver};
use dracode_secrets::{Redactor, is_secret_name};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

/// Lazily built `reqwest::Client`s, shared by every provider of a run (built on first use so
/// offline runs pay nothing for TLS set-up).
///
/// A client that can speak TLS reads the system's certificates when it is built (a few hundred
/// files): a run whose providers all answer on plain `http://` (a local vLLM, Ollama or
/// llama.cpp server, dracode's own endpoint) gets a client without them ([`HttpClient::for_url`]).
#[derive(Clone, Default)]
pub struct HttpClient {
    inner: Arc<OnceLock<reqwest::Client>>,
    plain: Arc<OnceLock<reqwest::Client>>,
}

impl HttpClient {
    /// The client for any URL, built on first call (the system's certificates read).
    pub fn get(&self) -> &reqwest::Client {
        self.inner.get_or_init(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder().build().unwrap_or_else(|_| reqwest::Client::new())
        })
    }

    /// The client for requests to `url`: for a plain `http://` URL, one that trusts no
    /// certificate (none read; a redirect to `https://` fails its handshake), else [`HttpClient::get`].
    pub fn for_url(&self, url: &str) -> &reqwest::Client {
        if !url.get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://")) {
            return self.get();
        }
        self.plain.get_or_init(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let builder = reqwest::Client::builder().tls_certs_only(std::iter::empty());
            builder.build().unwrap_or_else(|_| reqwest::Client::new())
        })
    }
}

/// How often and how long to retry one call. Every provider uses the same policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first try (so at most `max_retries + 1` requests).
    pub max_retries: u32,
    /// The backoff ceiling before the first retry; it doubles for each further retry.
    pub base_delay: Duration,
    /// The highest backoff ceiling, and the cap on waits derived from rate-limit reset headers.
    pub max_delay: Duration,
    /// The most time spent waiting between tries of one call; a server asking for more
    /// (`Retry-After`) makes the call fail at once rather than wait.
    pub max_total_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            max_total_wait: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// The full-jitter backoff before retry number `retry` (1-based): `unit` (in `[0, 1)`)
    /// times `min(max_delay, base_delay * 2^(retry-1))`.
    pub fn backoff(&self, retry: u32, unit: f64) -> Duration {
        let doublings = retry.saturating_sub(1).min(31);
        let ceiling = self.base_delay.saturating_mul(1 << doublings).min(self.max_delay);
        ceiling.mul_f64(unit.clamp(0.0, 1.0))
    }
}

/// The error for a provider setting that cannot be sent as an HTTP header; names `what`, never
/// its value (it may be a key). Nothing has been sent.
fn unsendable(resolved: &ResolvedProvider, what: &str) -> LlmError {
    LlmError::not_configured(format!("provider {:?}: {what} cannot be sent as an HTTP header", resolved.name))
}

/// Adds the provider's configured `headers` to `headers`, replacing any of the same name. A value
/// under a secret-looking name (`authorization`, `api-key`, `x-api-key`, `*-token`, …) is marked
/// sensitive and pushed to `secrets` (also without a `Bearer ` prefix), so errors mask it.
fn add_configured_headers(resolved: &ResolvedProvider, headers: &mut HeaderMap, secrets: &mut Vec<String>) -> Result<(), LlmError> {
    for (name, value) in &resolved.headers {
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| unsendable(resolved, &format!("header name {name:?}")))?;
        let mut header_value = HeaderValue::from_str(value).map_err(|_| unsendable(resolved, &format!("the value of header {name:?}")))?;
        let as_variable = name.replace('-', "_");
        if is_secret_name(&as_variable) || matches!(as_variable.to_ascii_lowercase().as_str(), "authorization" | "api_key") {
            header_value.set_sensitive(true);
            secrets.push(value.clone());
            secrets.extend(value.strip_prefix("Bearer ").map(str::to_string));
        }
        headers.insert(header, header_value);
    }
    Ok(())
}

/// One provider's JSON endpoint: where to POST, with which headers, per-request timeout and
/// retry policy. Every wire format sends through one of these, so errors are labelled with the
/// provider's name and masked the same way everywhere.
pub struct JsonEndpoint {
    /// The provider's name, for error messages.
    pub name: String,
    /// The URL requests go to.
    pub url: String,
    /// The URL streamed requests go to (the same as `url` unless the API has its own).
    pub stream_url: String,
    /// Headers of every request (auth included, marked sensitive).
    pub headers: HeaderMap,
    /// Per-request timeout (zero: none). A whole non-streamed request must finish within it; a
    /// streamed one must get its response headers within it and then never go longer than it
    /// without a byte, however long the whole answer takes.
    pub timeout: Duration,
    /// The shared client.
    pub http: HttpClient,
    /// How transient failures are retried.
    pub retry: RetryPolicy,
    /// Masks the key and secret headers in error messages.
    pub redactor: Redactor,
}

impl JsonEndpoint {
    /// The endpoint of `resolved` at `url`: the wire format's fixed `headers`, then the key as
    /// `key_header` says (marked sensitive), then the configured headers; the default retry
    /// policy. Fails (nothing sent) when a value cannot be sent over HTTP.
    pub fn new(
        resolved: &ResolvedProvider,
        url: String,
        mut headers: HeaderMap,
        key_header: KeyHeader,
        http: HttpClient,
    ) -> Result<Self, LlmError> {
        let mut secrets = Vec::new();
        if let Some(key) = resolved.api_key.as_deref().filter(|k| !k.is_empty()) {
            let (name, value) = match key_header {
                KeyHeader::Bearer => (reqwest::header::AUTHORIZATION, format!("Bearer {key}")),
                KeyHeader::Named(name) => (HeaderName::from_static(name), key.to_string()),
            };
            let mut value = HeaderValue::from_str(&value).map_err(|_| unsendable(resolved, "the API key"))?;
            value.set_sensitive(true);
            headers.insert(name, value);
            secrets.push(key.to_string());
        }
        add_configured_headers(resolved, &mut headers, &mut secrets)?;
        Ok(JsonEndpoint {
            name: resolved.name.clone(),
            stream_url: url.clone(),
            url,
            headers,
            timeout: resolved.timeout,
            http,
            retry: RetryPolicy::default(),
            redactor: Redactor::new(secrets),
        })
    }

    /// POSTs `body` (with retries) and returns the JSON reply, or a labelled error.
    pub async fn post(&self, body: &Value, on_retry: RetryObserver<'_>) -> Result<JsonReply, LlmError> {
        self.post_until(body, on_retry, &|_| false).await
    }

    /// [`JsonEndpoint::post`], except that a failure `give_up` accepts is returned at once
    /// instead of being retried (the caller has a better answer to it than the same request).
    pub async fn post_until(
        &self,
        body: &Value,
        on_retry: RetryObserver<'_>,
        give_up: &(dyn Fn(&LlmError) -> bool + Sync),
    ) -> Result<JsonReply, LlmError> {
        let build = |client: &reqwest::Client| {
            let request = client.post(&self.url).headers(self.headers.clone()).json(body);
            if self.timeout.is_zero() { request } else { request.timeout(self.timeout) }
        };
        let client = self.http.for_url(&self.url);
        send_json_until(client, build, &self.retry, &self.redactor, on_retry, give_up).await.map_err(|e| self.label(e))
    }

    /// POSTs the streamed request `body` to `stream_url` (with the same retries as
    /// [`JsonEndpoint::post_until`]) and folds its frames with a fresh decoder from `decoder`
    /// per try. A stream cut before its end, or reporting a transient error, is retried; an
    /// error status is classified exactly as for [`JsonEndpoint::post`]. Every arrival of
    /// bytes is reported to `observer.on_bytes`.
    pub async fn post_stream(
        &self,
        body: &Value,
        framing: Framing,
        decoder: &(dyn Fn() -> Box<dyn StreamDecoder> + Sync),
        observer: RetryObserver<'_>,
        give_up: &(dyn Fn(&LlmError) -> bool + Sync),
    ) -> Result<StreamReply, LlmError> {
        let attempt = || try_stream_once(self, body, framing, decoder, observer);
        retrying(&self.retry, observer, give_up, attempt).await.map_err(|e| self.label(e))
    }

    /// `error` with the provider's name in front and secrets masked.
    pub fn label(&self, mut error: LlmError) -> LlmError {
        error.message = format!("provider {:?}: {}", self.name, self.redactor.redact(&error.message));
        error
    }
}

/// A successful (2xx) response whose body is JSON.
#[derive(Debug, Clone)]
pub struct JsonReply {
    /// The HTTP status.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The parsed body.
    pub body: Value,
}

/// What a streamed request got back.
#[derive(Debug, Clone)]
pub enum StreamReply {
    /// A whole stream, folded into the body of the non-streamed answer.
    Streamed(Value),
    /// A server that does not stream answered with one JSON body.
    Json(JsonReply),
    /// A 2xx event stream (or body of no type) with no bytes at all (llama-cpp-python's answer
    /// to `stream: true` with automatic tool choice): this server cannot stream this request.
    /// (An empty `application/json` 2xx is a failure retried, as unstreamed.)
    Empty,
}

/// A wait the server asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitHint {
    /// `Retry-After` / `retry-after-ms`: honoured exactly, or the call gives up.
    Explicit(Duration),
    /// When a rate-limit window resets (`x-ratelimit-reset-*`, `anthropic-ratelimit-*-reset`):
    /// the time until the window is *fully* reset, so it is capped at `max_delay`.
    Reset(Duration),
}

impl WaitHint {
    fn duration(self) -> Duration {
        match self {
            WaitHint::Explicit(d) | WaitHint::Reset(d) => d,
        }
    }
}

/// One failed try: the error, any wait the server asked for, and whether it is retried even
/// though its kind is not transient (a 2xx with an empty body: the next try may have one).
#[derive(Debug, Clone)]
struct Failure {
    error: LlmError,
    hint: Option<WaitHint>,
    retry_anyway: bool,
}

/// Sends the request `build` makes, retrying transient failures under `policy`.
///
/// `build` is called once per try (a `RequestBuilder` cannot be reused). Each retry is
/// announced to `on_retry` before its wait. Error messages pass through `redactor`; the URL is
/// never part of them (it may carry a key).
pub async fn send_json(
    client: &reqwest::Client,
    build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    policy: &RetryPolicy,
    redactor: &Redactor,
    on_retry: RetryObserver<'_>,
) -> Result<JsonReply, LlmError> {
    send_json_until(client, build, policy, redactor, on_retry, &|_| false).await
}

/// [`send_json`], returning at once (no retry) a failure that `give_up` accepts.
async fn send_json_until(
    client: &reqwest::Client,
    build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    policy: &RetryPolicy,
    redactor: &Redactor,
    on_retry: RetryObserver<'_>,
    give_up: &(dyn Fn(&LlmError) -> bool + Sync),
) -> Result<JsonReply, LlmError> {
    retrying(policy, on_retry, give_up, || try_once(client, &build, redactor)).await
}

/// Runs `attempt` until it succeeds, fails for good, `give_up` accepts its failure, or
/// `policy` runs out; each retry is announced to `on_retry` before its wait.
async fn retrying<T, F: Future<Output = Result<T, Failure>>>(
    policy: &RetryPolicy,
    on_retry: RetryObserver<'_>,
    give_up: &(dyn Fn(&LlmError) -> bool + Sync),
    attempt: impl Fn() -> F,
) -> Result<T, LlmError> {
    let mut retries = 0;
    let mut waited = Duration::ZERO;
    loop {
        let failure = match attempt().await {
            Ok(reply) => return Ok(reply),
            Err(failure) if give_up(&failure.error) => return Err(failure.error),
            Err(failure) => failure,
        };
        match next_wait(policy, retries, waited, &failure, random_unit()) {
            Ok(delay) => {
                retries += 1;
                on_retry.on_retry(RetryNotice { reason: retry_reason(&failure.error), delay, attempt: retries + 1 });
                tokio::time::sleep(delay).await;
                waited += delay;
            }
            Err(error) => return Err(error),
        }
    }
}

async fn try_once(
    client: &reqwest::Client,
    build: &impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    redactor: &Redactor,
) -> Result<JsonReply, Failure> {
    let network = |e: reqwest::Error, what: &str| Failure {
        error: LlmError::new(ErrorKind::Network, redactor.redact(&describe_reqwest(e, what)).into_owned()),
        hint: None,
        retry_anyway: false,
    };
    let response = build(client).send().await.map_err(|e| network(e, "sending the request"))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.map_err(|e| network(e, "reading the response"))?;
    if !(200..300).contains(&status) {
        return Err(classify(status, &headers, &bytes, SystemTime::now(), redactor));
    }
    json_reply(status, headers, &bytes, redactor)
}

/// A 2xx `bytes` body as JSON; an empty one is a failure retried anyway.
fn json_reply(status: u16, headers: HeaderMap, bytes: &[u8], redactor: &Redactor) -> Result<JsonReply, Failure> {
    match serde_json::from_slice(bytes) {
        Ok(body) => Ok(JsonReply { status, headers, body }),
        // llama-cpp-python answers some requests (`stream: true` with automatic tool choice)
        // with an empty 200; like a body cut short, the next try may be whole.
        Err(_) if bytes.iter().all(u8::is_ascii_whitespace) => {
            let mut error = LlmError::new(ErrorKind::BadResponse, format!("HTTP {status} with an empty body"));
            error.http_status = Some(status);
            Err(Failure { error, hint: None, retry_anyway: true })
        }
        Err(e) => {
            let mut error = LlmError::new(
                ErrorKind::BadResponse,
                format!("HTTP {status} with a body that is not valid JSON ({e}): {}", snippet(&String::from_utf8_lossy(bytes), redactor)),
            );
            error.http_status = Some(status);
            Err(Failure { error, hint: None, retry_anyway: false })
        }
    }
}

/// `future` (a step of reading a response), failing as a `network` timeout when `limit` (not
/// zero) passes first.
async fn within<T>(
    limit: Duration,
    what: &str,
    future: impl Future<Output = Result<T, reqwest::Error>>,
    redactor: &Redactor,
) -> Result<T, Failure> {
    let network = |message: String| Failure { error: LlmError::new(ErrorKind::Network, message), hint: None, retry_anyway: false };
    let result = if limit.is_zero() {
        future.await
    } else {
        match tokio::time::timeout(limit, future).await {
            Ok(result) => result,
            Err(_) => return Err(network(format!("{what} timed out: no byte for {}", humantime::format_duration(limit)))),
        }
    };
    result.map_err(|e| network(redactor.redact(&describe_reqwest(e, what)).into_owned()))
}

/// One streamed try: the response headers and then every chunk within the endpoint's timeout
/// of the bytes before; frames folded by a fresh decoder; a JSON answer or an empty body
/// passed back as such.
async fn try_stream_once(
    endpoint: &JsonEndpoint,
    body: &Value,
    framing: Framing,
    decoder: &(dyn Fn() -> Box<dyn StreamDecoder> + Sync),
    observer: RetryObserver<'_>,
) -> Result<StreamReply, Failure> {
    let (limit, redactor) = (endpoint.timeout, &endpoint.redactor);
    let request = endpoint.http.for_url(&endpoint.stream_url).post(&endpoint.stream_url).headers(endpoint.headers.clone()).json(body);
    let mut response = within(limit, "sending the request", request.send(), redactor).await?;
    observer.on_bytes();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let content_type = headers.get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_ascii_lowercase();
    // An error, or a body that does not say it is a stream (a server that ignores `stream`),
    // is read whole.
    let is_stream = content_type.contains("text/event-stream") || content_type.contains("ndjson");
    if !(200..300).contains(&status) || !is_stream {
        let bytes = within(limit, "reading the response", response.bytes(), redactor).await?;
        return whole_reply(status, headers, content_type.is_empty(), &bytes, redactor);
    }
    let mut framer = Framer::new(framing);
    let mut decoder = decoder();
    let mut received = 0usize;
    let as_failure = |error: LlmError| Failure { error, hint: None, retry_anyway: false };
    while !decoder.ended() {
        let Some(chunk) = within(limit, "reading the stream", response.chunk(), redactor).await? else {
            for frame in framer.finish() {
                decoder.feed(&frame).map_err(as_failure)?;
            }
            break;
        };
        observer.on_bytes();
        received += chunk.len();
        for frame in framer.push(&chunk) {
            decoder.feed(&frame).map_err(as_failure)?;
        }
    }
    if received == 0 {
        return Ok(StreamReply::Empty);
    }
    if !decoder.complete() {
        let message = format!("the stream was cut before its end (HTTP {status}, {received} bytes received)");
        return Err(as_failure(LlmError::new(ErrorKind::Network, message)));
    }
    Ok(StreamReply::Streamed(decoder.into_body()))
}

/// The answer to a stream request that came as one body: an error status classified as for
/// an unstreamed request, an empty body of no type the server's way to say it cannot stream,
/// anything else JSON.
fn whole_reply(status: u16, headers: HeaderMap, untyped: bool, bytes: &[u8], redactor: &Redactor) -> Result<StreamReply, Failure> {
    if !(200..300).contains(&status) {
        return Err(classify(status, &headers, bytes, SystemTime::now(), redactor));
    }
    if untyped && bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(StreamReply::Empty);
    }
    json_reply(status, headers, bytes, redactor).map(StreamReply::Json)
}

/// The wait before the next try, or the error to return when there is none.
fn next_wait(policy: &RetryPolicy, retries: u32, waited: Duration, failure: &Failure, unit: f64) -> Result<Duration, LlmError> {
    let error = &failure.error;
    if !error.is_transient() && !failure.retry_anyway {
        return Err(error.clone());
    }
    let with_note = |note: String| {
        let mut e = error.clone();
        e.message = format!("{} ({note})", e.message);
        e
    };
    if retries >= policy.max_retries {
        return Err(with_note(format!("gave up after {} tries", retries + 1)));
    }
    let left = policy.max_total_wait.saturating_sub(waited);
    let delay = match failure.hint {
        Some(WaitHint::Explicit(d)) if d > left => {
            return Err(with_note(format!(
                "the provider asked to wait {}, more than the {} retry budget left",
                humantime::format_duration(round_secs(d)),
                humantime::format_duration(round_secs(left))
            )));
        }
        Some(WaitHint::Explicit(d)) => d,
        Some(WaitHint::Reset(d)) => d.min(policy.max_delay),
        None => policy.backoff(retries + 1, unit),
    };
    if delay > left {
        return Err(with_note(format!("retry budget of {} spent", humantime::format_duration(policy.max_total_wait))));
    }
    Ok(delay)
}

fn round_secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

/// `429`, `500`, … when there was a response, else the error kind (`network`).
fn retry_reason(error: &LlmError) -> String {
    match error.http_status {
        Some(status) => status.to_string(),
        None => error.kind.as_str().to_string(),
    }
}

/// A number in `[0, 1)` for jitter. `RandomState` is seeded randomly per process and changes
/// its keys on every `new()`, which is all the randomness jitter needs (no extra crate).
pub fn random_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos());
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// A reqwest error as one line, without the URL, with its causes (where "connection refused"
/// and the like live).
fn describe_reqwest(error: reqwest::Error, what: &str) -> String {
    let headline = if error.is_timeout() { "timed out" } else { "failed" };
    let error = error.without_url();
    let mut text = format!("{what} {headline}: {error}");
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Turns a non-2xx response into an error of the right kind, with the provider's message.
fn classify(status: u16, headers: &HeaderMap, body: &[u8], now: SystemTime, redactor: &Redactor) -> Failure {
    let raw = String::from_utf8_lossy(body);
    let parsed: Option<Value> = serde_json::from_str(&raw).ok();
    let detail = parsed.as_ref().and_then(ApiError::from_body);
    let invalid_request = detail.as_ref().is_some_and(ApiError::is_invalid_request) || parsed.as_ref().is_some_and(is_validation_error);
    let kind = match status {
        401 | 403 => ErrorKind::Auth,
        // The server read the request and refused it; the same request gets the same answer.
        500..=599 | 408 | 409 if invalid_request => ErrorKind::BadResponse,
        429 if detail.as_ref().is_some_and(ApiError::is_quota) => ErrorKind::Quota,
        429 => ErrorKind::RateLimit,
        408 => ErrorKind::Network,
        409 | 500..=599 => ErrorKind::Server,
        _ => ErrorKind::BadResponse,
    };
    let what = match &detail {
        Some(api) => api.describe(),
        None if invalid_request => parsed.as_ref().map(describe_validation_error).unwrap_or_default(),
        None if raw.trim().is_empty() => "empty body".to_string(),
        None => raw.to_string(),
    };
    let hint = if kind == ErrorKind::Quota { None } else { wait_hint(status, headers, now) };
    let mut error = LlmError::new(kind, format!("HTTP {status}: {}", snippet(&what, redactor)));
    error.http_status = Some(status);
    error.retry_after = hint.map(WaitHint::duration);
    Failure { error, hint, retry_anyway: false }
}

/// A request-validation error body of a pydantic/FastAPI server (`{"detail":[{"loc","msg",
/// "type"}]}`, or a message saying "validation error").
fn is_validation_error(body: &Value) -> bool {
    let detail_list = body.get("detail").and_then(Value::as_array).is_some_and(|items| items.iter().any(|i| i.get("msg").is_some()));
    let says_so = |v: Option<&Value>| v.and_then(Value::as_str).is_some_and(|s| s.to_ascii_lowercase().contains("validation error"));
    detail_list || says_so(body.get("detail")) || says_so(body.get("message")) || says_so(body.get("error").and_then(|e| e.get("message")))
}

/// A validation error body as one line: each `detail` item's `loc` and `msg`.
fn describe_validation_error(body: &Value) -> String {
    match body.get("detail") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                let loc: Vec<String> = item
                    .get("loc")
                    .and_then(Value::as_array)
                    .map(|l| l.iter().map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_string)).collect())
                    .unwrap_or_default();
                let msg = item.get("msg").and_then(Value::as_str).unwrap_or("invalid");
                if loc.is_empty() { msg.to_string() } else { format!("{}: {msg}", loc.join(".")) }
            })
            .collect::<Vec<_>>()
            .join("; "),
        Some(other) => other.as_str().map_or_else(|| other.to_string(), str::to_string),
        None => body.to_string(),
    }
}

/// The error object of an OpenAI-style body (`{"error":{"message","type","code"}}`), also
/// accepting `{"error":"text"}` (Ollama), a top-level `message` (vLLM) and Anthropic's
/// `{"type":"error","error":{"type","message","details":{"error_code"}}}`.
#[derive(Debug, Default, PartialEq)]
struct ApiError {
    message: Option<String>,
    kind: Option<String>,
    code: Option<String>,
}

impl ApiError {
    fn from_body(body: &Value) -> Option<ApiError> {
        let text = |v: Option<&Value>| match v {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let api = match body.get("error") {
            Some(Value::String(s)) => ApiError { message: Some(s.clone()), ..ApiError::default() },
            Some(obj @ Value::Object(_)) => ApiError {
                message: text(obj.get("message")),
                kind: text(obj.get("type")).or_else(|| text(obj.get("status"))),
                code: text(obj.get("code")).or_else(|| text(obj.get("details").and_then(|d| d.get("error_code")))),
            },
            _ => ApiError { message: text(body.get("message")), kind: text(body.get("type")), code: text(body.get("code")) },
        };
        (api != ApiError::default()).then_some(api)
    }

    /// OpenAI's `insufficient_quota`; Anthropic's monthly spend cap, a 429 `rate_limit_error`
    /// that only the next month (or a higher tier) lifts.
    fn is_quota(&self) -> bool {
        [&self.kind, &self.code].into_iter().flatten().any(|s| s == "insufficient_quota" || s == "enforced_spend_limit_reached")
    }

    /// OpenAI's `invalid_request_error` (also vLLM's `BadRequestError`): the request itself is
    /// wrong, whatever the status says.
    fn is_invalid_request(&self) -> bool {
        [&self.kind, &self.code].into_iter().flatten().any(|s| s == "invalid_request_error" || s == "BadRequestError")
            || self.message.as_deref().is_some_and(|m| m.to_ascii_lowercase().contains("validation error"))
    }

    fn describe(&self) -> String {
        let mut text = self.message.clone().unwrap_or_else(|| "no message".to_string());
        let tags: Vec<String> = [("type", &self.kind), ("code", &self.code)]
            .into_iter()
            .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name} {v}")))
            .collect();
        if !tags.is_empty() {
            text.push_str(&format!(" ({})", tags.join(", ")));
        }
        text
    }
}

/// What the server says about waiting: `retry-after-ms` or `Retry-After` (delta seconds or
/// HTTP-date) first; on a 429 without them, the reset time of the exhausted rate-limit window.
pub fn wait_hint(status: u16, headers: &HeaderMap, now: SystemTime) -> Option<WaitHint> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(WaitHint::Explicit(Duration::from_secs_f64(ms / 1000.0)));
    }
    if let Some(delay) = header("retry-after").and_then(|v| parse_retry_after(v, now)) {
        return Some(WaitHint::Explicit(delay));
    }
    if status != 429 {
        return None;
    }
    // (reset header, remaining header, parser): OpenAI gives Go durations ("6m0s"),
    // Anthropic RFC 3339 instants.
    type Parse = fn(&str, SystemTime) -> Option<Duration>;
    let windows: [(&str, &str, Parse); 6] = [
        ("x-ratelimit-reset-requests", "x-ratelimit-remaining-requests", |v, _| parse_go_duration(v)),
        ("x-ratelimit-reset-tokens", "x-ratelimit-remaining-tokens", |v, _| parse_go_duration(v)),
        ("anthropic-ratelimit-requests-reset", "anthropic-ratelimit-requests-remaining", until_rfc3339),
        ("anthropic-ratelimit-tokens-reset", "anthropic-ratelimit-tokens-remaining", until_rfc3339),
        ("anthropic-ratelimit-input-tokens-reset", "anthropic-ratelimit-input-tokens-remaining", until_rfc3339),
        ("anthropic-ratelimit-output-tokens-reset", "anthropic-ratelimit-output-tokens-remaining", until_rfc3339),
    ];
    let any_remaining = windows.iter().any(|(_, remaining, _)| header(remaining).is_some());
    windows
        .iter()
        // Without remaining counts we cannot tell which window is exhausted, so all count.
        .filter(|(_, remaining, _)| !any_remaining || header(remaining) == Some("0"))
        .filter_map(|(reset, _, parse)| header(reset).and_then(|v| parse(v, now)))
        .max()
        .map(WaitHint::Reset)
}

/// `Retry-After` as delta seconds (`"120"`, also `"1.5"`) or an HTTP-date (a past date is 0).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

fn until_rfc3339(value: &str, now: SystemTime) -> Option<Duration> {
    let at = humantime::parse_rfc3339_weak(value.trim()).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// A Go duration as OpenAI prints it: `"1s"`, `"6m0s"`, `"20ms"`, `"1h2m3.5s"`.
///
/// `humantime` reads every unit Go prints but no fractions, while Go prints sub-minute seconds
/// with them (`1.345s`): a fractional seconds part at the end is read here and the rest left
/// to `humantime`.
pub fn parse_go_duration(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(duration) = humantime::parse_duration(value) {
        return Some(duration);
    }
    let head = value.strip_suffix('s')?;
    let split = head.rfind(|c: char| !(c.is_ascii_digit() || c == '.')).map_or(0, |i| i + 1);
    let seconds = Duration::try_from_secs_f64(head[split..].parse().ok()?).ok()?;
    let whole = if split == 0 { Duration::ZERO } else { humantime::parse_duration(&head[..split]).ok()? };
    Some(whole + seconds)
}

/// `text` with secrets masked, cut to about 500 characters.
pub fn snippet(text: &str, redactor: &Redactor) -> String {
    const LIMIT: usize = 500;
    let text = redactor.redact(text.trim());
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderName, HeaderValue};

    #[test]
    fn a_plain_http_url_never_builds_the_client_that_reads_the_systems_certificates() {
        let http = HttpClient::default();
        let plain = http.for_url("http://127.0.0.1:8000/v1") as *const reqwest::Client;
        assert_eq!(http.for_url("HTTP://localhost:11434") as *const reqwest::Client, plain, "one plain client, any case");
        assert!(http.inner.get().is_none(), "no TLS client was built for plain http");
        let tls = http.for_url("https://api.example.test/v1") as *const reqwest::Client;
        assert!(http.inner.get().is_some() && tls != plain, "https gets the client with the system's roots");
        assert_eq!(http.get() as *const reqwest::Client, tls);
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap())).collect()
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn retry_after_accepts_seconds_and_http_dates() {
        // 784111777 = Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example date).
        let now = at(784_111_777 - 30);
        assert_eq!(parse_retry_after("1", now), Some(Duration::from_secs(1)));
        assert_eq!(parse_retry_after(" 120 ", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("1.5", now), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", at(784_111_777 + 5)), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }

    #[test]
    fn go_durations_as_openai_prints_them() {
        assert_eq!(parse_go_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(parse_go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(parse_go_duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(parse_go_duration("1h2m3.5s"), Some(Duration::from_millis(3_723_500)));
        assert_eq!(parse_go_duration("1.345s"), Some(Duration::from_millis(1345)));
        assert_eq!(parse_go_duration("0.5s"), Some(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("-1s"), None);
        assert_eq!(parse_go_duration("1.2.3s"), None);
        assert_eq!(parse_go_duration(""), None);
        assert_eq!(parse_go_duration("5 parsecs"), None);
    }

    #[test]
    fn wait_hints_prefer_explicit_headers_then_the_exhausted_window() {
        let now = at(1_000);
        let h = headers(&[("retry-after-ms", "250"), ("retry-after", "7")]);
        assert_eq!(wait_hint(429, &h, now), Some(WaitHint::Explicit(Duration::from_millis(250))));
        let h = headers(&[("retry-after", "7"), ("x-ratelimit-reset-requests", "1s")]);
        assert_eq!(wait_hint(503, &h, now), Some(WaitHint::Explicit(Duration::from_secs(7))));
        let h = headers(&[
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "2s"),
            ("x-ratelimit-remaining-tokens", "1500"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ]);
        assert_eq!(wait_hint(429, &h, now), Some(WaitHint::Reset(Duration::from_secs(2))));
        assert_eq!(wait_hint(500, &h, now), None, "reset headers only explain a 429");
        let h = headers(&[("anthropic-ratelimit-tokens-remaining", "0"), ("anthropic-ratelimit-tokens-reset", "1970-01-01T00:16:50Z")]);
        assert_eq!(wait_hint(429, &h, now), Some(WaitHint::Reset(Duration::from_secs(10))));
    }

    fn kind_of(status: u16, body: &str) -> (ErrorKind, String) {
        let f = classify(status, &HeaderMap::new(), body.as_bytes(), at(0), &Redactor::default());
        assert_eq!(f.error.http_status, Some(status));
        (f.error.kind, f.error.message)
    }

    #[test]
    fn statuses_classify_into_kinds() {
        let openai = |message: &str, kind: &str, code: &str| {
            format!(r#"{{"error":{{"message":"{message}","type":"{kind}","param":null,"code":"{code}"}}}}"#)
        };
        let table: [(u16, String, ErrorKind, bool); 12] = [
            (401, openai("Incorrect API key provided", "invalid_request_error", "invalid_api_key"), ErrorKind::Auth, false),
            (403, "{}".into(), ErrorKind::Auth, false),
            (429, openai("Rate limit reached", "requests", "rate_limit_exceeded"), ErrorKind::RateLimit, true),
            (429, openai("You exceeded your current quota", "insufficient_quota", "insufficient_quota"), ErrorKind::Quota, false),
            (500, openai("The server had an error", "server_error", ""), ErrorKind::Server, true),
            (503, "<html>Service Unavailable</html>".into(), ErrorKind::Server, true),
            (400, openai("Invalid 'messages[0].role'", "invalid_request_error", "invalid_value"), ErrorKind::BadResponse, false),
            (404, openai("The model `gpt-9` does not exist", "invalid_request_error", "model_not_found"), ErrorKind::BadResponse, false),
            (
                422,
                r#"{"object":"error","message":"bad tool schema","type":"BadRequestError","code":422}"#.into(),
                ErrorKind::BadResponse,
                false,
            ),
            (408, String::new(), ErrorKind::Network, true),
            (409, String::new(), ErrorKind::Server, true),
            (413, r#"{"error":"request too large"}"#.into(), ErrorKind::BadResponse, false),
        ];
        for (status, body, kind, transient) in table {
            let f = classify(status, &HeaderMap::new(), body.as_bytes(), at(0), &Redactor::default());
            assert_eq!(f.error.kind, kind, "HTTP {status} {body}");
            assert_eq!(f.error.is_transient(), transient, "HTTP {status} {body}");
        }
    }

    #[test]
    fn request_validation_errors_are_not_transient_whatever_the_status() {
        let pydantic = r#"{"detail":[{"type":"missing","loc":["body","messages",1,"content"],"msg":"Field required","input":{}}]}"#;
        for status in [400, 422, 500, 503] {
            let (kind, message) = kind_of(status, pydantic);
            assert_eq!(kind, ErrorKind::BadResponse, "HTTP {status}");
            assert_eq!(message, format!("HTTP {status}: body.messages.1.content: Field required"));
        }
        let (kind, message) = kind_of(500, r#"{"detail":"1 validation error for ChatCompletionRequest"}"#);
        assert_eq!((kind, message.as_str()), (ErrorKind::BadResponse, "HTTP 500: 1 validation error for ChatCompletionRequest"));
        let invalid = r#"{"error":{"message":"bad content","type":"invalid_request_error","param":null,"code":null}}"#;
        assert_eq!(kind_of(502, invalid).0, ErrorKind::BadResponse);
        // llama-cpp-python's wrapped exception stays a (transient) server error.
        let wrapped = r#"{"error":{"message":"boom","type":"internal_server_error","param":null,"code":null}}"#;
        assert_eq!(kind_of(500, wrapped).0, ErrorKind::Server);
        // FastAPI's `{"detail": "Not Found"}` is no validation error.
        assert_eq!(kind_of(503, r#"{"detail":"Service Unavailable"}"#).0, ErrorKind::Server);
    }

    #[test]
    fn anthropic_error_bodies_classify_into_kinds() {
        let anthropic = |kind: &str, message: &str| {
            format!(r#"{{"type":"error","error":{{"type":"{kind}","message":"{message}"}},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}}"#)
        };
        let table = [
            (401, anthropic("authentication_error", "invalid x-api-key"), ErrorKind::Auth, false),
            (403, anthropic("permission_error", "Your API key does not have permission"), ErrorKind::Auth, false),
            (429, anthropic("rate_limit_error", "Number of requests has exceeded your rate limit"), ErrorKind::RateLimit, true),
            (529, anthropic("overloaded_error", "Overloaded"), ErrorKind::Server, true),
            (500, anthropic("api_error", "Internal server error"), ErrorKind::Server, true),
            (400, anthropic("invalid_request_error", "max_tokens: Field required"), ErrorKind::BadResponse, false),
            (
                429,
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your usage tier's spend limit.","details":{"error_code":"enforced_spend_limit_reached"}}}"#.into(),
                ErrorKind::Quota,
                false,
            ),
        ];
        for (status, body, kind, transient) in table {
            let f = classify(status, &HeaderMap::new(), body.as_bytes(), at(0), &Redactor::default());
            assert_eq!(f.error.kind, kind, "HTTP {status} {body}");
            assert_eq!(f.error.is_transient(), transient, "HTTP {status} {body}");
        }
        let (_, message) = kind_of(400, &anthropic("invalid_request_error", "max_tokens: Field required"));
        assert_eq!(message, "HTTP 400: max_tokens: Field required (type invalid_request_error)");
    }

    #[test]
    fn error_messages_carry_the_provider_message_with_secrets_masked() {
        let (_, message) = kind_of(
            400,
            r#"{"error":{"message":"Invalid 'messages[1].tool_call_id'","type":"invalid_request_error","param":"messages[1].tool_call_id","code":null}}"#,
        );
        assert_eq!(message, "HTTP 400: Invalid 'messages[1].tool_call_id' (type invalid_request_error)");
        let redactor = Redactor::new(["sk-secret-123456".to_string()]);
        let long = format!("proxy error for sk-secret-123456 {}", "x".repeat(2000));
        let f = classify(502, &HeaderMap::new(), long.as_bytes(), at(0), &redactor);
        assert!(f.error.message.starts_with("HTTP 502: proxy error for [REDACTED] xxx"), "{}", f.error.message);
        assert!(f.error.message.chars().count() < 520, "trimmed: {}", f.error.message.len());
        assert_eq!(kind_of(500, "").1, "HTTP 500: empty body");
    }

    fn failure(status: u16, hint: Option<WaitHint>) -> Failure {
        let f = classify(status, &HeaderMap::new(), b"{}", at(0), &Redactor::default());
        Failure { hint, ..f }
    }

    #[test]
    fn backoff_is_full_jitter_under_a_doubling_capped_ceiling() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(1, 0.999_999), Duration::from_secs(1).mul_f64(0.999_999));
        assert_eq!(p.backoff(3, 0.5), Duration::from_secs(2));
        assert_eq!(p.backoff(10, 0.5), Duration::from_secs(15), "ceiling capped at max_delay");
        assert_eq!(p.backoff(2, 0.0), Duration::ZERO);
        let unit = random_unit();
        assert!((0.0..1.0).contains(&unit));
    }

    #[test]
    fn next_wait_honours_hints_limits_and_the_budget() {
        let p = RetryPolicy::default();
        let wait = |retries, waited, f: &Failure| next_wait(&p, retries, Duration::from_secs(waited), f, 0.5);
        assert_eq!(wait(0, 0, &failure(500, None)), Ok(Duration::from_millis(500)));
        assert!(wait(0, 0, &failure(401, None)).is_err(), "auth is never retried");
        assert!(wait(0, 0, &failure(400, None)).is_err());
        let explicit = failure(429, Some(WaitHint::Explicit(Duration::from_secs(45))));
        assert_eq!(wait(0, 0, &explicit), Ok(Duration::from_secs(45)), "explicit waits are not capped");
        let err = wait(0, 100, &explicit).unwrap_err();
        assert_eq!(err.kind, ErrorKind::RateLimit);
        assert!(err.message.contains("asked to wait 45s"), "{}", err.message);
        let reset = failure(429, Some(WaitHint::Reset(Duration::from_secs(360))));
        assert_eq!(wait(0, 0, &reset), Ok(Duration::from_secs(30)), "reset hints capped at max_delay");
        let err = wait(4, 0, &failure(503, None)).unwrap_err();
        assert!(err.message.ends_with("(gave up after 5 tries)"), "{}", err.message);
        assert_eq!(err.http_status, Some(503));
    }
}
