//! A local server that speaks the Anthropic Messages API, strictly.
//!
//! [`AnthropicServer`] (wiremock on 127.0.0.1) answers `POST /v1/messages` from a script of
//! [`ScriptedReply`]s, one per accepted request, and records every request it receives. Before it
//! uses a scripted reply it checks the request the way the real API does, and answers with the
//! API's error shape (`{"type":"error","error":{"type","message"},"request_id"}`):
//! - a missing `x-api-key` → 401 `x-api-key header is required`; a wrong one (when started with
//!   a key) → 401 `invalid x-api-key` (both `authentication_error`);
//! - a missing `anthropic-version` → 400 `anthropic-version: header is required`;
//! - a missing `model`, `max_tokens` or `messages` → 400 `max_tokens: Field required` (etc.), and
//!   any top-level argument the API does not declare → 400 `…: Extra inputs are not permitted`;
//! - a role other than `user`/`assistant` → 400 `messages.N.role: Input should be 'user' or
//!   'assistant'`; a first message not from the user → 400 `messages: first message must use the
//!   "user" role`;
//! - a `tool_use` whose id is not answered by a `tool_result` among the blocks that open the very
//!   next message → 400 ``messages.N: `tool_use` ids were found without `tool_result` blocks
//!   immediately after: …``; a `tool_result` answering no `tool_use` of the message before →
//!   400 ``messages.N.content.M: unexpected `tool_use_id` found in `tool_result` blocks: …``;
//! - an empty text block → 400 `messages: text content blocks must be non-empty` (blank:
//!   `… must contain non-whitespace text`); an empty message other than a final assistant one →
//!   400 `messages.N: all messages must have non-empty content except for the optional final
//!   assistant message`;
//! - more than four `cache_control` marks → 400 `A maximum of 4 blocks with cache_control may be
//!   provided. Found N.`
//! - extended thinking (`thinking: {type: "enabled", budget_tokens}`): a budget under 1024 →
//!   400 `thinking.enabled.budget_tokens: Input should be greater than or equal to 1024`; one not
//!   below `max_tokens` → 400 ``max_tokens` must be greater than `thinking.budget_tokens`…``; a
//!   `tool_choice` forcing a tool → 400 `Thinking may not be enabled when tool_choice forces tool
//!   use.`; an assistant turn (the one after the last user message that is not only tool
//!   results) that goes on with tool results but does not open with its thinking block → 400
//!   ``messages.N.content.0.type: Expected `thinking` or `redacted_thinking`, but found
//!   `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a
//!   thinking block…``;
//! - any `thinking` or `redacted_thinking` block (thinking on or off) that is not, byte for byte,
//!   one the server sent (text and `signature`, or `data`) → 400 ``messages.N.content.M: Invalid
//!   `signature` in `thinking` block``; a field besides those on one (a `cache_control` mark) →
//!   400 `….cache_control: Extra inputs are not permitted`.
//!
//! Those messages are the API's own, as its users have reported them. Consecutive messages of one
//! role are accepted, as the API documents ("will be combined into a single turn"). The wording of
//! the mock's other refusals (a body that is not JSON, a wrong path, no messages, a field of the
//! wrong type, an unknown block type, a malformed tool or `cache_control`) is its own; their
//! status and error type are the API's.
//!
//! Replies have the real response shape: `id`, `type: "message"`, `role`, `model`, `content`,
//! `stop_reason`, `stop_sequence`, and `usage` with `input_tokens`, `output_tokens`,
//! `cache_creation_input_tokens` and `cache_read_input_tokens` (where `input_tokens` excludes the
//! cached ones, as the real API counts). A `stream: true` request gets the same message as
//! the API's event stream (`text/event-stream`: `message_start` with the input and cache counts,
//! per block `content_block_start` / deltas / `content_block_stop`, a `ping`, `message_delta`
//! with the stop reason and the output count, `message_stop`); errors are sent unstreamed, as
//! the API sends them before a stream starts. [`ScriptedReply::cut_after`] closes a stream
//! early; [`ScriptedReply::overloaded_after`] ends it with an `overloaded_error` event.
//! Rejected requests do not use up the script. When the
//! script runs out, the server answers 500 saying so, so that a test expecting fewer calls fails
//! loudly.

use super::sse;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Token counts a scripted message reports in its `usage`, as the API counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// `input_tokens`: prompt tokens neither read from nor written to the cache.
    pub input: u64,
    /// `output_tokens`.
    pub output: u64,
    /// `cache_read_input_tokens`.
    pub cache_read: u64,
    /// `cache_creation_input_tokens`.
    pub cache_creation: u64,
}

impl Tokens {
    /// `input` uncached prompt tokens and `output` completion tokens.
    pub fn new(input: u64, output: u64) -> Self {
        Tokens { input, output, ..Tokens::default() }
    }

    /// With `n` prompt tokens read from the cache.
    pub fn cache_read(self, n: u64) -> Self {
        Tokens { cache_read: n, ..self }
    }

    /// With `n` prompt tokens written to the cache.
    pub fn cache_creation(self, n: u64) -> Self {
        Tokens { cache_creation: n, ..self }
    }

    fn usage_json(self) -> Value {
        json!({
            "input_tokens": self.input,
            "cache_creation_input_tokens": self.cache_creation,
            "cache_read_input_tokens": self.cache_read,
            "cache_creation": {"ephemeral_5m_input_tokens": self.cache_creation, "ephemeral_1h_input_tokens": 0},
            "output_tokens": self.output,
            "service_tier": "standard"
        })
    }
}

/// One `tool_use` block of a scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    /// The call id (`toolu_…`).
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments object.
    pub input: Value,
}

impl ToolUse {
    /// A call of `name` with `input`.
    pub fn new(id: &str, name: &str, input: Value) -> Self {
        ToolUse { id: id.into(), name: name.into(), input }
    }
}

#[derive(Debug, Clone)]
enum Body {
    Message {
        thinking: Option<String>,
        redacted: Option<String>,
        text: Option<String>,
        calls: Vec<ToolUse>,
        stop_reason: String,
        usage: Tokens,
    },
    Json(Value),
    Raw(String),
}

/// What the server answers to one accepted request.
#[derive(Debug, Clone)]
pub struct ScriptedReply {
    status: u16,
    body: Body,
    headers: Vec<(String, String)>,
    delay: Duration,
    cut_after: Option<usize>,
    error_after: Option<usize>,
}

impl ScriptedReply {
    fn with_body(status: u16, body: Body) -> Self {
        ScriptedReply { status, body, headers: Vec::new(), delay: Duration::ZERO, cut_after: None, error_after: None }
    }

    /// Streamed, the connection closes after `events` events (before `message_stop`).
    pub fn cut_after(mut self, events: usize) -> Self {
        self.cut_after = Some(events);
        self
    }

    /// Streamed, an `overloaded_error` event follows the first `events` events and ends the
    /// stream (the API's way to fail after the 200).
    pub fn overloaded_after(mut self, events: usize) -> Self {
        self.error_after = Some(events);
        self
    }

    /// A text answer (`stop_reason: end_turn`).
    pub fn text(text: &str, tokens: Tokens) -> Self {
        Self::with_body(
            200,
            Body::Message {
                thinking: None,
                redacted: None,
                text: Some(text.into()),
                calls: Vec::new(),
                stop_reason: "end_turn".into(),
                usage: tokens,
            },
        )
    }

    /// An answer calling one tool (`stop_reason: tool_use`).
    pub fn tool_use(id: &str, name: &str, input: Value, tokens: Tokens) -> Self {
        Self::tool_uses(vec![ToolUse::new(id, name, input)], tokens)
    }

    /// An answer calling several tools at once.
    pub fn tool_uses(calls: Vec<ToolUse>, tokens: Tokens) -> Self {
        Self::with_body(
            200,
            Body::Message { thinking: None, redacted: None, text: None, calls, stop_reason: "tool_use".into(), usage: tokens },
        )
    }

    /// An HTTP error with Anthropic's error body.
    pub fn error(status: u16, error_type: &str, message: &str) -> Self {
        Self::json(status, error_json(error_type, message))
    }

    /// 429 `rate_limit_error` with `retry-after: secs`.
    pub fn rate_limited(secs: u64) -> Self {
        Self::error(
            429,
            "rate_limit_error",
            "This request would exceed your organization's rate limit of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
        )
        .with_header("retry-after", &secs.to_string())
    }

    /// 529 `overloaded_error`.
    pub fn overloaded() -> Self {
        Self::error(529, "overloaded_error", "Overloaded")
    }

    /// 500 `api_error`.
    pub fn api_error() -> Self {
        Self::error(500, "api_error", "Internal server error")
    }

    /// Any JSON body with any status.
    pub fn json(status: u16, body: Value) -> Self {
        Self::with_body(status, Body::Json(body))
    }

    /// A raw body (e.g. garbage or truncated JSON) sent as `application/json`.
    pub fn raw(status: u16, body: &str) -> Self {
        Self::with_body(status, Body::Raw(body.into()))
    }

    /// With one more response header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Answered only after `delay`.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// A message with another `stop_reason` (e.g. `max_tokens`, `refusal`, `pause_turn`).
    pub fn with_stop_reason(mut self, reason: &str) -> Self {
        if let Body::Message { stop_reason, .. } = &mut self.body {
            *stop_reason = reason.into();
        }
        self
    }

    /// A message with a text block before its tool calls.
    pub fn with_text(mut self, content: &str) -> Self {
        if let Body::Message { text, .. } = &mut self.body {
            *text = Some(content.into());
        }
        self
    }

    /// A message opening with a `thinking` block (extended thinking).
    pub fn with_thinking(mut self, content: &str) -> Self {
        if let Body::Message { thinking, .. } = &mut self.body {
            *thinking = Some(content.into());
        }
        self
    }

    /// A message whose thinking block is followed by a `redacted_thinking` block (`data`
    /// encrypted reasoning, made unique per reply by the server).
    pub fn with_redacted_thinking(mut self, data: &str) -> Self {
        if let Body::Message { redacted, .. } = &mut self.body {
            *redacted = Some(data.into());
        }
        self
    }

    /// The thinking blocks the reply opens with, signed (the same thinking, the same signature,
    /// so a streamed and an unstreamed answer are alike).
    fn thinking_blocks(&self) -> Vec<Value> {
        let Body::Message { thinking, redacted, .. } = &self.body else { return Vec::new() };
        let mut blocks = Vec::new();
        if let Some(thinking) = thinking {
            let signature = format!("EqMBCkgIARABGAIiQL{:016x}", fnv(thinking));
            blocks.push(json!({"type": "thinking", "thinking": thinking, "signature": signature}));
        }
        if let Some(data) = redacted {
            blocks.push(json!({"type": "redacted_thinking", "data": format!("{data}{:016x}", fnv(data))}));
        }
        blocks
    }

    /// The response, streamed as the API streams it when `stream` (a 2xx message only).
    fn render(&self, serial: usize, model: &str, stream: bool) -> ResponseTemplate {
        let mut mime = "application/json";
        let bytes = match &self.body {
            Body::Message { text, calls, stop_reason, usage, .. } => {
                let mut content = self.thinking_blocks();
                if let Some(text) = text {
                    content.push(json!({"type": "text", "text": text}));
                }
                for call in calls {
                    content.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}));
                }
                let message = json!({
                    "id": format!("msg_mock{serial:04}"),
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": content,
                    "stop_reason": stop_reason,
                    "stop_sequence": null,
                    "usage": usage.usage_json()
                });
                if stream && (200..300).contains(&self.status) {
                    mime = sse::EVENT_STREAM;
                    let mut events = message_events(&message);
                    if let Some(n) = self.error_after {
                        events.truncate(n);
                        events.push(sse::event(Some("error"), &error_json("overloaded_error", "Overloaded")));
                    }
                    events.truncate(self.cut_after.unwrap_or(usize::MAX));
                    events.concat()
                } else {
                    message.to_string()
                }
            }
            Body::Json(value) => value.to_string(),
            Body::Raw(raw) => raw.clone(),
        };
        let mut template = ResponseTemplate::new(self.status)
            .set_body_raw(bytes, mime)
            .insert_header("request-id", format!("req_mock{serial:04}").as_str());
        for (name, value) in &self.headers {
            template = template.insert_header(name.as_str(), value.as_str());
        }
        template.set_delay(self.delay)
    }
}

/// A 64-bit FNV-1a hash of `text`: the mock's stand-in for a signature over it.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// The SSE events that stream `message`: `message_start` (input and cache counts, one output
/// token), then per block `content_block_start`, its deltas (text in small `text_delta`s,
/// thinking and its signature, tool input as `input_json_delta` fragments) and
/// `content_block_stop`, a `ping`, `message_delta` (stop reason, cumulative usage) and
/// `message_stop`.
fn message_events(message: &Value) -> Vec<String> {
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    let mut events = vec![sse::event(Some("message_start"), &json!({"type": "message_start", "message": start}))];
    let delta = |index: usize, delta: Value| {
        sse::event(Some("content_block_delta"), &json!({"type": "content_block_delta", "index": index, "delta": delta}))
    };
    for (index, block) in message["content"].as_array().into_iter().flatten().enumerate() {
        let (opening, deltas) = match block["type"].as_str() {
            Some("text") => (
                json!({"type": "text", "text": ""}),
                sse::pieces(block["text"].as_str().unwrap_or_default(), 5)
                    .into_iter()
                    .map(|t| json!({"type": "text_delta", "text": t}))
                    .collect(),
            ),
            Some("redacted_thinking") => (block.clone(), Vec::new()),
            Some("thinking") => (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                    json!({"type": "signature_delta", "signature": block["signature"]}),
                ],
            ),
            _ => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                sse::pieces(&block["input"].to_string(), 6)
                    .into_iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect::<Vec<_>>(),
            ),
        };
        events.push(sse::event(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": opening}),
        ));
        if index == 0 {
            events.push(sse::event(Some("ping"), &json!({"type": "ping"})));
        }
        events.extend(deltas.into_iter().map(|d| delta(index, d)));
        events.push(sse::event(Some("content_block_stop"), &json!({"type": "content_block_stop", "index": index})));
    }
    let usage = json!({"output_tokens": message["usage"]["output_tokens"]});
    let stop = json!({"stop_reason": message["stop_reason"], "stop_sequence": null});
    events.push(sse::event(Some("message_delta"), &json!({"type": "message_delta", "delta": stop, "usage": usage})));
    events.push(sse::event(Some("message_stop"), &json!({"type": "message_stop"})));
    events
}

/// Anthropic's error body.
fn error_json(error_type: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type, "message": message}, "request_id": "req_mockerror"})
}

/// A request the server received, whatever it answered.
#[derive(Debug, Clone)]
pub struct ReceivedRequest {
    /// `POST`, …
    pub method: String,
    /// The URL path, e.g. `/v1/messages`.
    pub path: String,
    /// Headers, names lowercase.
    pub headers: BTreeMap<String, String>,
    /// The body, when it was JSON.
    pub body: Option<Value>,
    /// The status the server answered.
    pub status: u16,
}

/// A request the real API would refuse: status and Anthropic error fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// HTTP status.
    pub status: u16,
    /// `error.type`.
    pub error_type: String,
    /// `error.message`.
    pub message: String,
}

impl Rejection {
    fn invalid(message: impl Into<String>) -> Self {
        Rejection { status: 400, error_type: "invalid_request_error".into(), message: message.into() }
    }

    fn unauthenticated(message: &str) -> Self {
        Rejection { status: 401, error_type: "authentication_error".into(), message: message.into() }
    }
}

struct State {
    key: Option<String>,
    script: Mutex<VecDeque<ScriptedReply>>,
    scripted: usize,
    received: Mutex<Vec<ReceivedRequest>>,
    /// The context window in tokens; 0: none.
    context_limit: std::sync::atomic::AtomicU64,
    /// Every thinking and redacted-thinking block sent so far: only these may come back.
    issued: Mutex<Vec<Value>>,
}

/// A running mock of the Messages API.
pub struct AnthropicServer {
    server: MockServer,
    state: Arc<State>,
}

impl AnthropicServer {
    /// A server that accepts any non-empty key, answering with `script` in order.
    pub async fn start(script: Vec<ScriptedReply>) -> Self {
        Self::launch(None, script).await
    }

    /// A server that answers 401 unless the request carries `x-api-key: {key}`.
    pub async fn start_with_key(key: &str, script: Vec<ScriptedReply>) -> Self {
        Self::launch(Some(key.into()), script).await
    }

    async fn launch(key: Option<String>, script: Vec<ScriptedReply>) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let server = MockServer::builder().listener(listener).start().await;
        let state = Arc::new(State {
            key,
            scripted: script.len(),
            script: Mutex::new(script.into()),
            received: Mutex::new(Vec::new()),
            context_limit: std::sync::atomic::AtomicU64::new(0),
            issued: Mutex::new(Vec::new()),
        });
        Mock::given(any()).respond_with(Responder(state.clone())).mount(&server).await;
        AnthropicServer { server, state }
    }

    /// The `base_url` to configure: `http://127.0.0.1:PORT` (the client appends `/v1/messages`).
    pub fn base_url(&self) -> String {
        self.server.uri()
    }

    /// The JSON bodies of every request received so far, in order, accepted or not.
    pub fn requests(&self) -> Vec<Value> {
        self.received().into_iter().filter_map(|r| r.body).collect()
    }

    /// Every request received so far with its headers and the status answered.
    pub fn received(&self) -> Vec<ReceivedRequest> {
        lock(&self.state.received).clone()
    }

    /// Scripted replies not used yet.
    pub fn remaining(&self) -> usize {
        lock(&self.state.script).len()
    }

    /// From now on, a context window of `tokens`: a request whose body is over `4 * tokens`
    /// bytes is answered the API's 400 "prompt is too long: N tokens > M maximum"; accepted
    /// ones report `input_tokens` as body bytes / 4.
    pub fn set_context_limit(&self, tokens: u64) {
        self.state.context_limit.store(tokens, std::sync::atomic::Ordering::Relaxed);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Responder(Arc<State>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Option<Value> = serde_json::from_slice(&request.body).ok();
        let (status, template) = match self.answer(request, body.as_ref()) {
            Ok(answer) => answer,
            Err(rejection) => (
                rejection.status,
                ResponseTemplate::new(rejection.status).set_body_json(error_json(&rejection.error_type, &rejection.message)),
            ),
        };
        lock(&self.0.received).push(ReceivedRequest {
            method: request.method.to_string(),
            path: request.url.path().to_string(),
            headers: super::openai_server::headers_of(request),
            body,
            status,
        });
        template
    }
}

impl Responder {
    fn answer(&self, request: &Request, body: Option<&Value>) -> Result<(u16, ResponseTemplate), Rejection> {
        let state = &self.0;
        if request.method.as_str() != "POST" || request.url.path() != "/v1/messages" {
            return Err(Rejection {
                status: 404,
                error_type: "not_found_error".into(),
                message: format!("Not Found: {} {}", request.method, request.url.path()),
            });
        }
        let header = |name: &str| request.headers.get(name).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty());
        match (header("x-api-key"), &state.key) {
            (None, _) => return Err(Rejection::unauthenticated("x-api-key header is required")),
            (Some(sent), Some(key)) if sent != key => return Err(Rejection::unauthenticated("invalid x-api-key")),
            _ => {}
        }
        match header("anthropic-version") {
            None => return Err(Rejection::invalid("anthropic-version: header is required")),
            Some("2023-06-01" | "2023-01-01") => {}
            Some(other) => return Err(Rejection::invalid(format!("anthropic-version: unknown version {other:?}"))),
        }
        let body = body.ok_or_else(|| Rejection::invalid("The request body is not valid JSON."))?;
        validate_request(body)?;
        check_thinking(body, &lock(&state.issued))?;
        let limit = state.context_limit.load(std::sync::atomic::Ordering::Relaxed);
        let prompt_tokens = (request.body.len() as u64).div_ceil(4);
        if limit > 0 && prompt_tokens > limit {
            return Err(Rejection::invalid(format!("prompt is too long: {prompt_tokens} tokens > {limit} maximum")));
        }

        let model = body.get("model").and_then(Value::as_str).unwrap_or_default();
        let mut script = lock(&state.script);
        let Some(mut reply) = script.pop_front() else {
            let message = format!(
                "AnthropicServer script exhausted: all {} scripted replies were used, this request was not expected",
                state.scripted
            );
            return Ok((500, ResponseTemplate::new(500).set_body_json(error_json("api_error", &message))));
        };
        if let (true, Body::Message { usage, .. }) = (limit > 0, &mut reply.body) {
            *usage = Tokens { input: prompt_tokens, cache_read: 0, cache_creation: 0, ..*usage };
        }
        let serial = state.scripted - script.len();
        lock(&state.issued).extend(reply.thinking_blocks());
        Ok((reply.status, reply.render(serial, model, sse::wants_stream(body))))
    }
}

/// The top-level arguments of `POST /v1/messages` (the official SDK's `MessageCreateParams`).
const TOP_LEVEL: [&str; 18] = [
    "model",
    "messages",
    "max_tokens",
    "system",
    "tools",
    "tool_choice",
    "metadata",
    "stop_sequences",
    "stream",
    "temperature",
    "top_k",
    "top_p",
    "thinking",
    "service_tier",
    "container",
    "inference_geo",
    "output_config",
    "cache_control",
];

/// Checks a request body as the API does; `Err` carries the API's 400 answer.
pub fn validate_request(body: &Value) -> Result<(), Rejection> {
    let map = body.as_object().ok_or_else(|| Rejection::invalid("The request body must be a JSON object."))?;
    if let Some(extra) = map.keys().find(|k| !TOP_LEVEL.contains(&k.as_str())) {
        return Err(Rejection::invalid(format!("{extra}: Extra inputs are not permitted")));
    }
    for field in ["model", "max_tokens", "messages"] {
        if !map.contains_key(field) {
            return Err(Rejection::invalid(format!("{field}: Field required")));
        }
    }
    if map["model"].as_str().is_none_or(str::is_empty) {
        return Err(Rejection::invalid("model: Input should be a non-empty string"));
    }
    if !map["max_tokens"].is_u64() {
        return Err(Rejection::invalid("max_tokens: Input should be a valid non-negative integer"));
    }
    let messages = map["messages"].as_array().ok_or_else(|| Rejection::invalid("messages: Input should be a valid list"))?;
    let mut marks = 0;
    if let Some(system) = map.get("system") {
        marks += check_system(system)?;
    }
    if let Some(tools) = map.get("tools") {
        marks += check_tools(tools)?;
    }
    for (i, message) in messages.iter().enumerate() {
        marks += check_message(i, message, i + 1 == messages.len())?;
    }
    match messages.first().and_then(|m| m["role"].as_str()) {
        Some("user") => {}
        Some(_) => return Err(Rejection::invalid(r#"messages: first message must use the "user" role"#)),
        None => return Err(Rejection::invalid("messages: at least one message is required")),
    }
    check_tool_pairing(messages)?;
    if map.get("cache_control").is_some() {
        marks += 1;
    }
    if marks > 4 {
        return Err(Rejection::invalid(format!("A maximum of 4 blocks with cache_control may be provided. Found {marks}.")));
    }
    Ok(())
}

/// The content blocks of a message: a string is shorthand for one text block.
fn blocks_of(message: &Value) -> Vec<Value> {
    match &message["content"] {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks.clone(),
        _ => Vec::new(),
    }
}

/// `Err` for fields of `object` outside `allowed`, named under `path`.
fn no_extra_fields(object: &Map<String, Value>, allowed: &[&str], path: &str) -> Result<(), Rejection> {
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(extra) => Err(Rejection::invalid(format!("{path}.{extra}: Extra inputs are not permitted"))),
        None => Ok(()),
    }
}

/// 1 when `block` carries a valid `cache_control` mark, 0 when none.
fn cache_mark(block: &Map<String, Value>, path: &str) -> Result<usize, Rejection> {
    match block.get("cache_control") {
        None => Ok(0),
        Some(mark) if mark["type"] == "ephemeral" && mark.get("ttl").is_none_or(|t| t == "5m" || t == "1h") => Ok(1),
        Some(_) => Err(Rejection::invalid(format!("{path}.cache_control: Input should be {{\"type\": \"ephemeral\"}}"))),
    }
}

/// A text block's text, refused when empty or blank as the API refuses it (`what` names where).
fn check_text(block: &Map<String, Value>, what: &str, path: &str) -> Result<usize, Rejection> {
    no_extra_fields(block, &["type", "text", "cache_control", "citations"], path)?;
    let text = block.get("text").and_then(Value::as_str).ok_or_else(|| Rejection::invalid(format!("{path}.text: Field required")))?;
    if text.is_empty() {
        return Err(Rejection::invalid(format!("{what}: text content blocks must be non-empty")));
    }
    if text.trim().is_empty() {
        return Err(Rejection::invalid(format!("{what}: text content blocks must contain non-whitespace text")));
    }
    cache_mark(block, path)
}

fn check_system(system: &Value) -> Result<usize, Rejection> {
    let blocks = match system {
        Value::String(_) => return Ok(0),
        Value::Array(blocks) => blocks,
        _ => return Err(Rejection::invalid("system: Input should be a valid string or list of text blocks")),
    };
    let mut marks = 0;
    for (i, block) in blocks.iter().enumerate() {
        let path = format!("system.{i}");
        match block.as_object() {
            Some(b) if b.get("type").and_then(Value::as_str) == Some("text") => marks += check_text(b, "system", &path)?,
            _ => return Err(Rejection::invalid(format!("{path}: Input should be a text block"))),
        }
    }
    Ok(marks)
}

fn check_tools(tools: &Value) -> Result<usize, Rejection> {
    let tools = tools.as_array().ok_or_else(|| Rejection::invalid("tools: Input should be a valid list"))?;
    let mut marks = 0;
    for (i, tool) in tools.iter().enumerate() {
        let path = format!("tools.{i}.custom");
        let tool = tool.as_object().ok_or_else(|| Rejection::invalid(format!("{path}: Input should be an object")))?;
        no_extra_fields(tool, &["type", "name", "description", "input_schema", "cache_control", "strict"], &path)?;
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        let valid_name = (1..=128).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid_name {
            return Err(Rejection::invalid(format!("{path}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")));
        }
        if tool.get("input_schema").and_then(|s| s.get("type")).and_then(Value::as_str) != Some("object") {
            return Err(Rejection::invalid(format!("{path}.input_schema.type: Input should be 'object'")));
        }
        marks += cache_mark(tool, &path)?;
    }
    Ok(marks)
}

/// Checks one message and its blocks; returns how many `cache_control` marks it carries.
fn check_message(i: usize, message: &Value, last: bool) -> Result<usize, Rejection> {
    let object = message.as_object().ok_or_else(|| Rejection::invalid(format!("messages.{i}: Input should be an object")))?;
    no_extra_fields(object, &["role", "content"], &format!("messages.{i}"))?;
    let role = object.get("role").and_then(Value::as_str);
    if !matches!(role, Some("user" | "assistant")) {
        return Err(Rejection::invalid(format!("messages.{i}.role: Input should be 'user' or 'assistant'")));
    }
    if !matches!(object.get("content"), Some(Value::String(_) | Value::Array(_))) {
        return Err(Rejection::invalid(format!("messages.{i}.content: Input should be a valid string or list")));
    }
    let blocks = blocks_of(message);
    if blocks.is_empty() && !(last && role == Some("assistant")) {
        return Err(Rejection::invalid(format!(
            "messages.{i}: all messages must have non-empty content except for the optional final assistant message"
        )));
    }
    let mut marks = 0;
    for (j, block) in blocks.iter().enumerate() {
        let path = format!("messages.{i}.content.{j}");
        let block = block.as_object().ok_or_else(|| Rejection::invalid(format!("{path}: Input should be an object")))?;
        let kind = block.get("type").and_then(Value::as_str).unwrap_or_default();
        let path = format!("{path}.{kind}");
        marks += match kind {
            "text" => check_text(block, "messages", &path)?,
            "tool_use" => {
                no_extra_fields(block, &["type", "id", "name", "input", "cache_control"], &path)?;
                let id = block.get("id").and_then(Value::as_str).unwrap_or_default();
                if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
                    return Err(Rejection::invalid(format!("{path}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")));
                }
                if !block.get("name").is_some_and(Value::is_string) {
                    return Err(Rejection::invalid(format!("{path}.name: Field required")));
                }
                if !block.get("input").is_some_and(Value::is_object) {
                    return Err(Rejection::invalid(format!("{path}.input: Input should be a valid dictionary")));
                }
                cache_mark(block, &path)?
            }
            "tool_result" => check_tool_result(block, &path)?,
            "thinking" | "redacted_thinking" => {
                let fields: &[&str] = if kind == "thinking" { &["type", "thinking", "signature"] } else { &["type", "data"] };
                no_extra_fields(block, fields, &path).map(|()| 0)?
            }
            "image" | "document" => 0,
            other => {
                return Err(Rejection::invalid(format!(
                    "messages.{i}.content.{j}: Input tag '{other}' found using 'type' does not match any of the expected tags"
                )));
            }
        };
    }
    Ok(marks)
}

/// A `tool_result` block at `path`; how many `cache_control` marks it carries.
fn check_tool_result(block: &Map<String, Value>, path: &str) -> Result<usize, Rejection> {
    no_extra_fields(block, &["type", "tool_use_id", "content", "is_error", "cache_control"], path)?;
    if !block.get("tool_use_id").is_some_and(Value::is_string) {
        return Err(Rejection::invalid(format!("{path}.tool_use_id: Field required")));
    }
    match block.get("content") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(parts)) => {
            for (k, part) in parts.iter().enumerate() {
                match part.as_object() {
                    Some(p) if p.get("type").and_then(Value::as_str) == Some("text") => {
                        check_text(p, "messages", &format!("{path}.content.{k}"))?;
                    }
                    _ => {}
                }
            }
        }
        Some(_) => return Err(Rejection::invalid(format!("{path}.content: Input should be a valid string or list"))),
    }
    if block.get("is_error").is_some_and(|e| !e.is_boolean()) {
        return Err(Rejection::invalid(format!("{path}.is_error: Input should be a valid boolean")));
    }
    cache_mark(block, path)
}

/// The link the API's thinking errors point to.
const THINKING_DOCS: &str = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking";

/// Checks thinking as the API does: the `thinking` setting against `max_tokens` and
/// `tool_choice`, every thinking block sent back against the `issued` ones, and (thinking on)
/// the current assistant turn opening with its thinking.
fn check_thinking(body: &Value, issued: &[Value]) -> Result<(), Rejection> {
    let messages = body["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
    for (i, message) in messages.iter().enumerate() {
        for (j, block) in blocks_of(message).iter().enumerate() {
            let kind = block["type"].as_str().unwrap_or_default();
            if matches!(kind, "thinking" | "redacted_thinking") && !issued.contains(block) {
                return Err(Rejection::invalid(format!("messages.{i}.content.{j}: Invalid `signature` in `{kind}` block")));
            }
        }
    }
    let enabled = match body["thinking"]["type"].as_str() {
        None | Some("disabled" | "adaptive") => false,
        Some("enabled") => true,
        Some(other) => {
            return Err(Rejection::invalid(format!(
                "thinking: Input tag '{other}' found using 'type' does not match any of the expected tags: 'adaptive', 'disabled', 'enabled'"
            )));
        }
    };
    if !enabled {
        return Ok(());
    }
    let budget =
        body["thinking"]["budget_tokens"].as_u64().ok_or_else(|| Rejection::invalid("thinking.enabled.budget_tokens: Field required"))?;
    if budget < 1024 {
        return Err(Rejection::invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"));
    }
    if body["max_tokens"].as_u64().is_some_and(|max| budget >= max) {
        return Err(Rejection::invalid(format!(
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at {THINKING_DOCS}#max-tokens-and-context-window-size"
        )));
    }
    if matches!(body["tool_choice"]["type"].as_str(), Some("any" | "tool")) {
        return Err(Rejection::invalid("Thinking may not be enabled when tool_choice forces tool use."));
    }
    check_turn_opens_with_thinking(messages)
}

/// With thinking on, the assistant message after the last user message that is not only tool
/// results must open with thinking when tool results follow it.
fn check_turn_opens_with_thinking(messages: &[Value]) -> Result<(), Rejection> {
    let only_results = |m: &Value| blocks_of(m).iter().all(|b| b["type"] == "tool_result");
    let Some(user) = messages.iter().rposition(|m| m["role"] == "user" && !only_results(m)) else { return Ok(()) };
    let (Some(turn), true) = (messages.get(user + 1), messages.len() > user + 2) else { return Ok(()) };
    let first = blocks_of(turn).first().and_then(|b| b["type"].as_str().map(str::to_string)).unwrap_or_default();
    if turn["role"] != "assistant" || first == "thinking" || first == "redacted_thinking" {
        return Ok(());
    }
    Err(Rejection::invalid(format!(
        "messages.{}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at {THINKING_DOCS}",
        user + 1
    )))
}

/// The ids of the blocks of `kind` (`tool_use` → `id`, `tool_result` → `tool_use_id`).
fn ids(blocks: &[Value], kind: &str, field: &str) -> Vec<String> {
    blocks.iter().filter(|b| b["type"] == kind).filter_map(|b| b[field].as_str().map(str::to_string)).collect()
}

/// Every `tool_use` answered at the start of the very next message; every `tool_result`
/// answering a `tool_use` of the message just before.
fn check_tool_pairing(messages: &[Value]) -> Result<(), Rejection> {
    for (i, message) in messages.iter().enumerate() {
        let blocks = blocks_of(message);
        if message["role"] == "user" {
            let previous = match i.checked_sub(1).map(|p| &messages[p]) {
                Some(p) if p["role"] == "assistant" => ids(&blocks_of(p), "tool_use", "id"),
                _ => Vec::new(),
            };
            for (j, block) in blocks.iter().enumerate() {
                let id = block["tool_use_id"].as_str().unwrap_or_default();
                if block["type"] == "tool_result" && !previous.iter().any(|p| p == id) {
                    return Err(Rejection::invalid(format!(
                        "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    )));
                }
            }
            continue;
        }
        let calls = ids(&blocks, "tool_use", "id");
        if calls.is_empty() {
            continue;
        }
        // Only the results that open the next message count as "immediately after".
        let answered: Vec<String> = match messages.get(i + 1) {
            Some(next) if next["role"] == "user" => {
                let opening: Vec<Value> = blocks_of(next).into_iter().take_while(|b| b["type"] == "tool_result").collect();
                ids(&opening, "tool_result", "tool_use_id")
            }
            _ => Vec::new(),
        };
        let missing: Vec<&str> = calls.iter().filter(|c| !answered.contains(c)).map(String::as_str).collect();
        if !missing.is_empty() {
            return Err(Rejection::invalid(format!(
                "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                missing.join(", ")
            )));
        }
    }
    Ok(())
}

/// Checks a response body has the Messages API's shape (the mock's own replies).
pub fn validate_response(body: &Value) -> Result<(), String> {
    let field = |name: &str| body.get(name).ok_or_else(|| format!("missing {name}"));
    if !field("id")?.as_str().is_some_and(|id| id.starts_with("msg_")) {
        return Err("id is not msg_…".into());
    }
    if field("type")? != "message" || field("role")? != "assistant" || !field("model")?.is_string() {
        return Err("type/role/model".into());
    }
    const STOPS: [&str; 7] =
        ["end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal", "model_context_window_exceeded"];
    if !field("stop_reason")?.as_str().is_some_and(|s| STOPS.contains(&s)) {
        return Err(format!("stop_reason {}", body["stop_reason"]));
    }
    if !(field("stop_sequence")?.is_null() || body["stop_sequence"].is_string()) {
        return Err("stop_sequence".into());
    }
    for block in field("content")?.as_array().ok_or("content is not a list")? {
        let ok = match block["type"].as_str() {
            Some("text") => block["text"].is_string(),
            Some("tool_use") => block["id"].is_string() && block["name"].is_string() && block["input"].is_object(),
            Some("thinking") => block["thinking"].is_string() && block["signature"].is_string(),
            Some("redacted_thinking") => block["data"].is_string(),
            _ => false,
        };
        if !ok {
            return Err(format!("content block {block}"));
        }
    }
    let usage = field("usage")?;
    for count in ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"] {
        if !usage[count].is_u64() {
            return Err(format!("usage.{count}"));
        }
    }
    Ok(())
}
