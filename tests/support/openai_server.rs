//! A local server that speaks OpenAI Chat Completions, strictly.
//!
//! [`OpenAiServer`] (wiremock on 127.0.0.1) answers `POST /v1/chat/completions` from a script
//! of [`ScriptedReply`]s, one per accepted request, and records every request it receives.
//! Before it uses a scripted reply it checks the request the way the real API does, and
//! answers with the API's own error shape (`{"error":{"message","type","param","code"}}`):
//! - a wrong URL → 404 `Invalid URL (POST /v1/…)`;
//! - a missing or wrong `Authorization: Bearer` key (when started with one) → 401;
//! - a body that is not JSON → 400;
//! - an unknown top-level argument, a bad `role`, an empty `tools` array, or anything that
//!   fails `CreateChatCompletionRequest` of the official OpenAPI spec
//!   (`tests/fixtures/schemas/openai-chat-completions.yaml`, reduced from the official document) → 400 naming the failing path;
//! - tool calls not answered by `tool` messages before the next turn, or a `tool` message that
//!   answers no call → 400 with the API's message text.
//!
//!
//! [`OpenAiServer::start_llama_cpp_python`] also behaves like llama-cpp-python's server
//! (`llama_cpp/server/errors.py`): its chat template fails on an assistant message whose
//! `content` is `null`, and the route's error handler wraps that exception as
//! `500 {"error":{"message":str(exc),"type":"internal_server_error","param":null,"code":null}}`.
//!
//! A request with `stream: true` gets the same answer streamed as the API streams it
//! (`text/event-stream`: a first chunk with the role, text in small `content` deltas, each tool
//! call as a first delta with id and name then `arguments` fragments, all keyed by `index`, a
//! chunk with the `finish_reason`, the usage chunk with `choices: []` only when
//! `stream_options.include_usage` is set, then `data: [DONE]`); `stream_options` without
//! `stream: true` is refused with the API's 400. Errors are sent unstreamed, as the API sends
//! them before a stream starts. [`ScriptedReply::cut_after`] closes a stream early. In
//! llama-cpp-python mode a `stream: true` request with tools and automatic tool choice gets an
//! empty 200 (that server's answer), without using up the script.
//! [`OpenAiServer::set_context_limit`] turns on a context window: a request over it (tokens ≈
//! body bytes / 4) gets the API's 400 `context_length_exceeded`, and accepted requests report
//! their prompt tokens counted the same way.
//!
//! Rejected requests do not use up the script. When the script runs out, the server answers
//! 500 saying so, so that a test expecting fewer calls fails loudly.
//!
//! The spec is OpenAPI 3.1 but still uses OpenAPI 3.0's `nullable: true` in many places, which a
//! JSON Schema validator ignores (so `null` would be rejected where the API accepts it):
//! [`spec`] rewrites each `nullable: true` into a JSON Schema `null` alternative before
//! compiling. `discriminator`, `x-*` and `example` are annotations a validator skips; formats
//! (e.g. the spec's own `unixtime`) are not checked.

use super::sse;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Token counts a scripted completion reports in its `usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// `prompt_tokens`.
    pub prompt: u64,
    /// `completion_tokens`.
    pub completion: u64,
    /// `prompt_tokens_details.cached_tokens`.
    pub cached: u64,
    /// `completion_tokens_details.reasoning_tokens`.
    pub reasoning: u64,
}

impl Tokens {
    /// `prompt` input and `completion` output tokens.
    pub fn new(prompt: u64, completion: u64) -> Self {
        Tokens { prompt, completion, ..Tokens::default() }
    }

    /// With `n` of the prompt tokens served from cache.
    pub fn cached(self, n: u64) -> Self {
        Tokens { cached: n, ..self }
    }

    /// With `n` of the completion tokens spent on reasoning.
    pub fn reasoning(self, n: u64) -> Self {
        Tokens { reasoning: n, ..self }
    }

    fn usage_json(self) -> Value {
        json!({
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
            "prompt_tokens_details": {"cached_tokens": self.cached, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": self.reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0
            }
        })
    }
}

/// One function call in a scripted tool-call answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call id (`call_…`).
    pub id: String,
    /// The function name.
    pub name: String,
    /// The `arguments` string exactly as sent.
    pub arguments: String,
}

impl ToolCall {
    /// A call whose arguments are `arguments` encoded as JSON.
    pub fn new(id: &str, name: &str, arguments: Value) -> Self {
        ToolCall { id: id.into(), name: name.into(), arguments: arguments.to_string() }
    }

    /// A call whose `arguments` string is `raw` verbatim (e.g. invalid JSON).
    pub fn raw(id: &str, name: &str, raw: &str) -> Self {
        ToolCall { id: id.into(), name: name.into(), arguments: raw.into() }
    }
}

#[derive(Debug, Clone)]
enum Body {
    Completion { text: Option<String>, calls: Vec<ToolCall>, finish_reason: String, usage: Option<Tokens> },
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
}

impl ScriptedReply {
    fn with_body(status: u16, body: Body) -> Self {
        ScriptedReply { status, body, headers: Vec::new(), delay: Duration::ZERO, cut_after: None }
    }

    /// Streamed, the connection closes after `events` SSE events (before `[DONE]`).
    pub fn cut_after(mut self, events: usize) -> Self {
        self.cut_after = Some(events);
        self
    }

    /// A text answer (`finish_reason: stop`).
    pub fn text(text: &str, tokens: Tokens) -> Self {
        Self::with_body(
            200,
            Body::Completion { text: Some(text.into()), calls: Vec::new(), finish_reason: "stop".into(), usage: Some(tokens) },
        )
    }

    /// An answer calling one tool (`finish_reason: tool_calls`, `content: null`).
    pub fn tool_call(id: &str, name: &str, arguments: Value, tokens: Tokens) -> Self {
        Self::tool_calls(vec![ToolCall::new(id, name, arguments)], tokens)
    }

    /// An answer calling several tools at once.
    pub fn tool_calls(calls: Vec<ToolCall>, tokens: Tokens) -> Self {
        Self::with_body(200, Body::Completion { text: None, calls, finish_reason: "tool_calls".into(), usage: Some(tokens) })
    }

    /// An HTTP error with OpenAI's error body.
    pub fn error(status: u16, error_type: &str, code: Option<&str>, message: &str) -> Self {
        Self::json(status, error_json(message, error_type, None, code))
    }

    /// 429 `rate_limit_exceeded` with `Retry-After: secs`.
    pub fn rate_limited(secs: u64) -> Self {
        Self::error(
            429,
            "requests",
            Some("rate_limit_exceeded"),
            "Rate limit reached for gpt-4o in organization org-mock on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
        )
        .with_header("retry-after", &secs.to_string())
    }

    /// 429 `insufficient_quota` (the account is out of credit).
    pub fn insufficient_quota() -> Self {
        Self::error(
            429,
            "insufficient_quota",
            Some("insufficient_quota"),
            "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
        )
    }

    /// 500 `server_error`.
    pub fn server_error() -> Self {
        Self::error(500, "server_error", None, "The server had an error while processing your request. Sorry about that!")
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

    /// A completion with another `finish_reason` (e.g. `length`, `content_filter`).
    pub fn with_finish_reason(mut self, reason: &str) -> Self {
        if let Body::Completion { finish_reason, .. } = &mut self.body {
            *finish_reason = reason.into();
        }
        self
    }

    /// A completion with text besides its tool calls.
    pub fn with_text(mut self, content: &str) -> Self {
        if let Body::Completion { text, .. } = &mut self.body {
            *text = Some(content.into());
        }
        self
    }

    /// A completion without `usage` (as some local servers answer).
    pub fn without_usage(mut self) -> Self {
        if let Body::Completion { usage, .. } = &mut self.body {
            *usage = None;
        }
        self
    }

    /// The response; `stream` is `Some(include_usage)` for a `stream: true` request.
    fn render(&self, serial: usize, model: &str, stream: Option<bool>) -> ResponseTemplate {
        let (bytes, mime) = match &self.body {
            Body::Completion { text, calls, finish_reason, usage } => {
                let body = completion_json(serial, model, text.as_deref(), calls, finish_reason, *usage);
                match stream {
                    Some(include_usage) if (200..300).contains(&self.status) => {
                        let mut events: Vec<String> = completion_chunks(&body, include_usage).iter().map(|c| sse::event(None, c)).collect();
                        events.push("data: [DONE]\n\n".into());
                        events.truncate(self.cut_after.unwrap_or(usize::MAX));
                        (events.concat(), sse::EVENT_STREAM)
                    }
                    _ => (body.to_string(), "application/json"),
                }
            }
            Body::Json(value) => (value.to_string(), "application/json"),
            Body::Raw(raw) => (raw.clone(), "application/json"),
        };
        let mut template = ResponseTemplate::new(self.status)
            .set_body_raw(bytes, mime)
            .insert_header("x-request-id", format!("req_mock{serial}").as_str());
        for (name, value) in &self.headers {
            template = template.insert_header(name.as_str(), value.as_str());
        }
        template.set_delay(self.delay)
    }
}

fn completion_json(
    serial: usize,
    model: &str,
    text: Option<&str>,
    calls: &[ToolCall],
    finish_reason: &str,
    usage: Option<Tokens>,
) -> Value {
    let created = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let mut message = json!({"role": "assistant", "content": text, "refusal": null, "annotations": []});
    if !calls.is_empty() {
        message["tool_calls"] =
            calls.iter().map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}})).collect();
    }
    let mut body = json!({
        "id": format!("chatcmpl-mock{serial}"),
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason}],
        "service_tier": "default",
        "system_fingerprint": "fp_mock"
    });
    if let Some(tokens) = usage {
        body["usage"] = tokens.usage_json();
    }
    body
}

/// The `chat.completion.chunk`s that stream `completion` (see the module doc).
fn completion_chunks(completion: &Value, include_usage: bool) -> Vec<Value> {
    let message = &completion["choices"][0]["message"];
    let chunk = |delta: Value, finish: Value| {
        let mut chunk = json!({
            "id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"], "service_tier": "default", "system_fingerprint": "fp_mock",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
        });
        if include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    };
    let calls = message.get("tool_calls").and_then(Value::as_array).cloned().unwrap_or_default();
    let text = message["content"].as_str();
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": if text.is_some() { json!("") } else { Value::Null }, "refusal": null}),
        Value::Null,
    )];
    for piece in text.map(|t| sse::pieces(t, 4)).unwrap_or_default() {
        chunks.push(chunk(json!({"content": piece}), Value::Null));
    }
    for (index, call) in calls.iter().enumerate() {
        let function = &call["function"];
        let first = json!({"index": index, "id": call["id"], "type": "function", "function": {"name": function["name"], "arguments": ""}});
        chunks.push(chunk(json!({"tool_calls": [first]}), Value::Null));
        for piece in sse::pieces(function["arguments"].as_str().unwrap_or_default(), 7) {
            chunks.push(chunk(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}), Value::Null));
        }
    }
    chunks.push(chunk(json!({}), completion["choices"][0]["finish_reason"].clone()));
    if include_usage && let Some(usage) = completion.get("usage") {
        let mut last = chunk(json!({}), Value::Null);
        last["choices"] = json!([]);
        last["usage"] = usage.clone();
        chunks.push(last);
    }
    chunks
}

/// OpenAI's error body.
fn error_json(message: &str, error_type: &str, param: Option<&str>, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": error_type, "param": param, "code": code}})
}

/// A request the server received, whatever it answered.
#[derive(Debug, Clone)]
pub struct ReceivedRequest {
    /// `POST`, …
    pub method: String,
    /// The URL path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The query string, if any (`api-version=…`).
    pub query: Option<String>,
    /// Headers, names lowercase.
    pub headers: BTreeMap<String, String>,
    /// The body, when it was JSON.
    pub body: Option<Value>,
    /// The status the server answered.
    pub status: u16,
}

impl ReceivedRequest {
    /// What the server got in `request`, with its JSON `body` and the `status` it answered.
    pub fn of(request: &Request, body: Option<Value>, status: u16) -> Self {
        ReceivedRequest {
            method: request.method.to_string(),
            path: request.url.path().to_string(),
            query: request.url.query().map(str::to_string),
            headers: headers_of(request),
            body,
            status,
        }
    }
}

/// A request's headers, names lowercase, values as text.
pub fn headers_of(request: &Request) -> BTreeMap<String, String> {
    request.headers.iter().map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect()
}

/// A request the real API would refuse: status and OpenAI error fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// HTTP status.
    pub status: u16,
    /// `error.message`.
    pub message: String,
    /// `error.type`.
    pub error_type: String,
    /// `error.param`.
    pub param: Option<String>,
    /// `error.code`.
    pub code: Option<String>,
}

impl Rejection {
    /// A 400 `invalid_request_error`.
    pub fn invalid(message: String, param: Option<String>, code: Option<&str>) -> Self {
        Rejection { status: 400, message, error_type: "invalid_request_error".into(), param, code: code.map(str::to_string) }
    }

    /// The API's error body.
    pub fn body(&self) -> Value {
        error_json(&self.message, &self.error_type, self.param.as_deref(), self.code.as_deref())
    }
}

#[derive(Debug, Clone)]
enum Flavor {
    OpenAi,
    Azure,
}

struct State {
    key: Option<String>,
    flavor: Flavor,
    refuses_null_content: bool,
    script: Mutex<VecDeque<ScriptedReply>>,
    scripted: usize,
    received: Mutex<Vec<ReceivedRequest>>,
    /// The context window in tokens; 0: none.
    context_limit: std::sync::atomic::AtomicU64,
}

/// A running mock of the Chat Completions API.
pub struct OpenAiServer {
    server: MockServer,
    state: Arc<State>,
}

impl OpenAiServer {
    /// A server that accepts any (or no) key, answering with `script` in order.
    pub async fn start(script: Vec<ScriptedReply>) -> Self {
        Self::launch(None, Flavor::OpenAi, script).await
    }

    /// A server that answers 401 unless the request carries `Authorization: Bearer {key}`.
    pub async fn start_with_key(key: &str, script: Vec<ScriptedReply>) -> Self {
        Self::launch(Some(key.into()), Flavor::OpenAi, script).await
    }

    /// An Azure OpenAI resource: `POST /openai/deployments/{deployment}/chat/completions
    /// ?api-version=…` with an `api-key: {key}` header; the body needs no `model`.
    /// [`OpenAiServer::base_url`] is then the resource endpoint (no `/v1`).
    pub async fn start_azure(key: &str, script: Vec<ScriptedReply>) -> Self {
        Self::launch(Some(key.into()), Flavor::Azure, script).await
    }

    /// A llama-cpp-python server: as [`OpenAiServer::start`], but an assistant message with
    /// `content: null` is answered with the 500 llama-cpp-python gives it.
    pub async fn start_llama_cpp_python(script: Vec<ScriptedReply>) -> Self {
        Self::launch_with(None, Flavor::OpenAi, true, script).await
    }

    async fn launch(key: Option<String>, flavor: Flavor, script: Vec<ScriptedReply>) -> Self {
        Self::launch_with(key, flavor, false, script).await
    }

    async fn launch_with(key: Option<String>, flavor: Flavor, refuses_null_content: bool, script: Vec<ScriptedReply>) -> Self {
        // Compile the schema before serving, so a slow first load never looks like a timeout.
        request_validator();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let server = MockServer::builder().listener(listener).start().await;
        let state = Arc::new(State {
            key,
            flavor,
            refuses_null_content,
            scripted: script.len(),
            script: Mutex::new(script.into()),
            received: Mutex::new(Vec::new()),
            context_limit: std::sync::atomic::AtomicU64::new(0),
        });
        Mock::given(any()).respond_with(Responder(state.clone())).mount(&server).await;
        OpenAiServer { server, state }
    }

    /// The `base_url` to configure: `http://127.0.0.1:PORT/v1` (Azure: without `/v1`).
    pub fn base_url(&self) -> String {
        match self.state.flavor {
            Flavor::OpenAi => format!("{}/v1", self.server.uri()),
            Flavor::Azure => self.server.uri(),
        }
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
    /// bytes is answered the API's 400 `context_length_exceeded`; accepted ones report
    /// `prompt_tokens` as body bytes / 4.
    pub fn set_context_limit(&self, tokens: u64) {
        self.state.context_limit.store(tokens, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The prompt tokens of a request in context-limit mode: its body bytes / 4.
pub fn body_tokens(body: &[u8]) -> u64 {
    (body.len() as u64).div_ceil(4)
}

/// The lock, even if a panicking holder poisoned it.
pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Responder(Arc<State>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Option<Value> = serde_json::from_slice(&request.body).ok();
        let (status, template) = match self.answer(request, body.as_ref()) {
            Ok((status, template)) => (status, template),
            Err(rejection) => {
                let template = ResponseTemplate::new(rejection.status).set_body_json(rejection.body());
                (rejection.status, template)
            }
        };
        lock(&self.0.received).push(ReceivedRequest::of(request, body, status));
        template
    }
}

const NO_KEY: &str = "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username and password. You can obtain an API key from https://platform.openai.com/account/api-keys.";
const WRONG_KEY: &str = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.";
const AZURE_WRONG_KEY: &str = "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.";
const NOT_JSON: &str = "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)";

impl Responder {
    fn answer(&self, request: &Request, body: Option<&Value>) -> Result<(u16, ResponseTemplate), Rejection> {
        let state = &self.0;
        let deployment = self.route(request)?;
        self.authorize(request)?;
        let Some(body) = body else {
            return Err(Rejection::invalid(NOT_JSON.into(), None, None));
        };
        let mut body = body.clone();
        // Azure takes the model from the URL; validate as if the body named it.
        if let (Some(deployment), Some(map)) = (deployment, body.as_object_mut()) {
            map.entry("model").or_insert_with(|| Value::from(deployment));
        }
        validate_request(&body)?;
        let stream = sse::wants_stream(&body);
        if body.get("stream_options").is_some_and(|o| !o.is_null()) && !stream {
            return Err(Rejection::invalid(
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.".into(),
                Some("stream_options".into()),
                None,
            ));
        }
        if state.refuses_null_content {
            refuse_null_content(&body)?;
            if stream && body.get("tools").is_some() && body.get("tool_choice").is_none_or(|c| c == "auto") {
                return Ok((200, ResponseTemplate::new(200).set_body_raw(Vec::new(), sse::EVENT_STREAM)));
            }
        }
        let include_usage = body.pointer("/stream_options/include_usage") == Some(&Value::Bool(true));

        let limit = state.context_limit.load(std::sync::atomic::Ordering::Relaxed);
        let prompt_tokens = body_tokens(&request.body);
        if limit > 0 && prompt_tokens > limit {
            let message = format!(
                "This model's maximum context length is {limit} tokens. However, your messages resulted in {prompt_tokens} tokens. Please reduce the length of the messages."
            );
            return Err(Rejection::invalid(message, Some("messages".into()), Some("context_length_exceeded")));
        }

        let model = body.get("model").and_then(Value::as_str).unwrap_or_default();
        let mut script = lock(&state.script);
        let Some(mut reply) = script.pop_front() else {
            let message =
                format!("OpenAiServer script exhausted: all {} scripted replies were used, this request was not expected", state.scripted);
            return Ok((500, ResponseTemplate::new(500).set_body_json(error_json(&message, "server_error", None, None))));
        };
        if let (true, Body::Completion { usage: Some(tokens), .. }) = (limit > 0, &mut reply.body) {
            tokens.prompt = prompt_tokens;
        }
        let serial = state.scripted - script.len();
        Ok((reply.status, reply.render(serial, model, stream.then_some(include_usage))))
    }

    /// The Azure deployment named by the URL (`None` for OpenAI), or the API's 404.
    fn route(&self, request: &Request) -> Result<Option<String>, Rejection> {
        let path = request.url.path();
        let not_found = |message: String, code: Option<&str>| Rejection {
            status: 404,
            message,
            error_type: "invalid_request_error".into(),
            param: None,
            code: code.map(str::to_string),
        };
        let invalid_url = || not_found(format!("Invalid URL ({} {path})", request.method), None);
        if request.method.as_str() != "POST" {
            return Err(invalid_url());
        }
        match self.0.flavor {
            Flavor::OpenAi if path == "/v1/chat/completions" => Ok(None),
            Flavor::OpenAi => Err(invalid_url()),
            Flavor::Azure => {
                let deployment = path
                    .strip_prefix("/openai/deployments/")
                    .and_then(|rest| rest.strip_suffix("/chat/completions"))
                    .filter(|d| !d.is_empty() && !d.contains('/'));
                let has_version = request.url.query_pairs().any(|(k, v)| k == "api-version" && !v.is_empty());
                match deployment {
                    Some(d) if has_version => Ok(Some(d.to_string())),
                    _ => Err(not_found("Resource not found".into(), Some("404"))),
                }
            }
        }
    }

    /// The API's 401 unless the request carries the expected key.
    fn authorize(&self, request: &Request) -> Result<(), Rejection> {
        let Some(key) = &self.0.key else { return Ok(()) };
        let header = |name: &str| request.headers.get(name).and_then(|v| v.to_str().ok());
        let (message, code) = match self.0.flavor {
            Flavor::OpenAi => match header("authorization").and_then(|v| v.strip_prefix("Bearer ")) {
                None => (NO_KEY, None),
                Some(sent) if sent != key => (WRONG_KEY, Some("invalid_api_key")),
                Some(_) => return Ok(()),
            },
            Flavor::Azure if header("api-key") == Some(key.as_str()) => return Ok(()),
            Flavor::Azure => (AZURE_WRONG_KEY, Some("401")),
        };
        Err(Rejection {
            status: 401,
            message: message.into(),
            error_type: "invalid_request_error".into(),
            param: None,
            code: code.map(str::to_string),
        })
    }
}

/// Checks a request body as the API does; `Err` carries the API's 400 answer.
pub fn validate_request(body: &Value) -> Result<(), Rejection> {
    let Some(map) = body.as_object() else {
        return Err(Rejection::invalid(
            format!("Invalid type for request body: expected an object, but got {} instead.", json_type(body)),
            None,
            Some("invalid_type"),
        ));
    };
    let known = top_level_arguments();
    if let Some(unknown) = map.keys().find(|k| !known.contains(k.as_str())) {
        return Err(Rejection::invalid(format!("Unrecognized request argument supplied: {unknown}"), None, None));
    }
    if map.get("model").and_then(Value::as_str) == Some("") {
        return Err(Rejection::invalid("you must provide a model parameter".into(), None, None));
    }
    const ROLES: [&str; 6] = ["system", "assistant", "user", "function", "tool", "developer"];
    let messages = map.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for (i, message) in messages.iter().enumerate() {
        if let Some(role) = message.get("role").and_then(Value::as_str).filter(|r| !ROLES.contains(r)) {
            return Err(Rejection::invalid(
                format!(
                    "Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'."
                ),
                Some(format!("messages[{i}].role")),
                Some("invalid_value"),
            ));
        }
    }
    if map.get("tools").and_then(Value::as_array).is_some_and(Vec::is_empty) {
        return Err(Rejection::invalid(
            "Invalid 'tools': empty array. Expected an array with minimum length 1, but got an empty array instead.".into(),
            Some("tools".into()),
            Some("empty_array"),
        ));
    }
    if let Some(error) = request_validator().iter_errors(body).next() {
        return Err(schema_rejection(&error));
    }
    check_tool_sequence(messages)
}

/// The API's answer to a schema violation, naming the innermost failing parameter.
pub fn schema_rejection(error: &jsonschema::ValidationError<'_>) -> Rejection {
    use jsonschema::error::ValidationErrorKind as Kind;
    if let Kind::OneOfNotValid { context } | Kind::AnyOf { context } = error.kind()
        && let Some(inner) = matching_branch(context)
    {
        return schema_rejection(inner);
    }
    let path = dotted(error.instance_path().as_str());
    let (message, param, code) = match error.kind() {
        Kind::Required { property } => {
            let property = property.as_str().map(str::to_string).unwrap_or_else(|| property.to_string());
            let full = if path.is_empty() { property } else { format!("{path}.{property}") };
            (format!("Missing required parameter: '{full}'."), full, "missing_required_parameter")
        }
        Kind::Type { .. } => (format!("Invalid type for '{path}': {error}."), path, "invalid_type"),
        _ => (format!("Invalid value for '{path}': {error}."), path, "invalid_value"),
    };
    Rejection::invalid(message, Some(param), Some(code))
}

/// Of a `oneOf`/`anyOf`'s failed branches, the first one the value was meant for: the one not
/// failing on its discriminator (`role` of a message, `type` of a tool or content part).
fn matching_branch<'e>(branches: &'e [Vec<jsonschema::ValidationError<'static>>]) -> Option<&'e jsonschema::ValidationError<'static>> {
    let discriminator_failed = |errors: &[jsonschema::ValidationError<'static>]| {
        errors.iter().any(|e| {
            let path = e.instance_path().as_str();
            path.ends_with("/role") || path.ends_with("/type")
        })
    };
    branches.iter().find(|errors| !errors.is_empty() && !discriminator_failed(errors)).and_then(|errors| errors.first())
}

/// The message llama-cpp-python's chat templates raise on `content: null` (Python's
/// `TypeError` when the template concatenates the content with a string).
pub const LLAMA_CPP_NULL_CONTENT: &str = "can only concatenate str (not \"NoneType\") to str";

/// llama-cpp-python's answer to an assistant message whose `content` is `null`.
fn refuse_null_content(body: &Value) -> Result<(), Rejection> {
    let messages = body.get("messages").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if messages.iter().any(|m| m.get("role").and_then(Value::as_str) == Some("assistant") && m.get("content") == Some(&Value::Null)) {
        return Err(Rejection {
            status: 500,
            message: LLAMA_CPP_NULL_CONTENT.into(),
            error_type: "internal_server_error".into(),
            param: None,
            code: None,
        });
    }
    Ok(())
}

/// Every `tool_calls` id must be answered by a `tool` message before the next user or
/// assistant message, and every `tool` message must answer such a call.
fn check_tool_sequence(messages: &[Value]) -> Result<(), Rejection> {
    // (index of the assistant message, ids not answered yet)
    let mut open: Option<(usize, Vec<String>)> = None;
    let unanswered = |index: usize, ids: &[String]| {
        Rejection::invalid(
            format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                ids.join(", ")
            ),
            Some(format!("messages.[{index}].role")),
            None,
        )
    };
    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        if role == "tool" {
            let id = message.get("tool_call_id").and_then(Value::as_str).unwrap_or_default();
            let Some((_, pending)) = &mut open else {
                return Err(Rejection::invalid(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".into(),
                    Some(format!("messages.[{i}].role")),
                    None,
                ));
            };
            let Some(at) = pending.iter().position(|p| p == id) else {
                return Err(Rejection::invalid(
                    format!("Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."),
                    Some(format!("messages.[{i}].tool_call_id")),
                    None,
                ));
            };
            pending.remove(at);
            continue;
        }
        if let Some((index, pending)) = open.take()
            && !pending.is_empty()
        {
            return Err(unanswered(index, &pending));
        }
        if role == "assistant" {
            let ids: Vec<String> = message
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| calls.iter().filter_map(|c| c.get("id").and_then(Value::as_str)).map(str::to_string).collect())
                .unwrap_or_default();
            if !ids.is_empty() {
                open = Some((i, ids));
            }
        }
    }
    match open {
        Some((index, pending)) if !pending.is_empty() => Err(unanswered(index, &pending)),
        _ => Ok(()),
    }
}

/// Checks a response body against `CreateChatCompletionResponse` (the mock's own replies).
pub fn validate_response(body: &Value) -> Result<(), String> {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    let validator = VALIDATOR.get_or_init(|| compile("CreateChatCompletionResponse"));
    match validator.iter_errors(body).next() {
        Some(error) => Err(format!("{}: {error}", error.instance_path().as_str())),
        None => Ok(()),
    }
}

/// `/messages/0/content` → `messages[0].content`, as the API names parameters.
fn dotted(pointer: &str) -> String {
    let mut out = String::new();
    for segment in pointer.split('/').skip(1) {
        if segment.bytes().all(|b| b.is_ascii_digit()) && !segment.is_empty() {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment.replace("~1", "/").replace("~0", "~"));
        }
    }
    out
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn request_validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| compile("CreateChatCompletionRequest"))
}

/// The property names `CreateChatCompletionRequest` declares, through its `allOf` parts; the
/// API refuses any other top-level argument.
fn top_level_arguments() -> &'static std::collections::BTreeSet<String> {
    static NAMES: OnceLock<std::collections::BTreeSet<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let schemas = &spec()["components"]["schemas"];
        let mut names = std::collections::BTreeSet::new();
        let mut stack = vec![&schemas["CreateChatCompletionRequest"]];
        while let Some(schema) = stack.pop() {
            if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
                let name = target.trim_start_matches("#/components/schemas/");
                stack.push(&schemas[name]);
            }
            if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
                stack.extend(parts);
            }
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                names.extend(props.keys().cloned());
            }
        }
        names
    })
}

fn compile(schema: &str) -> jsonschema::Validator {
    let root = json!({
        "$ref": format!("#/components/schemas/{schema}"),
        "components": spec()["components"].clone(),
    });
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(false)
        .build(&root)
        .unwrap_or_else(|e| panic!("the OpenAI spec's {schema} does not compile: {e}"))
}

/// The official OpenAPI document, loaded once, with `nullable` rewritten (see the module doc).
pub fn spec() -> &'static Value {
    static SPEC: OnceLock<Value> = OnceLock::new();
    SPEC.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/schemas/openai-chat-completions.yaml");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read the OpenAI spec {path}: {e}"));
        let mut spec: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("cannot parse the OpenAI spec {path}: {e}"));
        rewrite_nullable(&mut spec);
        spec
    })
}

/// OpenAPI 3.0 `nullable: true` → a JSON Schema that also accepts `null`.
pub fn rewrite_nullable(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(rewrite_nullable),
        Value::Object(map) => {
            map.values_mut().for_each(rewrite_nullable);
            match map.remove("nullable") {
                Some(Value::Bool(true)) => {}
                // A property *named* `nullable` is a schema object: put it back.
                Some(other @ Value::Object(_)) => {
                    map.insert("nullable".into(), other);
                    return;
                }
                _ => return,
            }
            if let Some(Value::Array(options)) = map.get_mut("enum") {
                options.push(Value::Null);
            }
            match map.get("type").cloned() {
                Some(Value::String(single)) => {
                    map.insert("type".into(), json!([single, "null"]));
                }
                Some(Value::Array(mut several)) => {
                    several.push(Value::from("null"));
                    map.insert("type".into(), Value::Array(several));
                }
                _ => {
                    let inner = Value::Object(std::mem::take(map));
                    map.insert("anyOf".into(), json!([inner, {"type": "null"}]));
                }
            }
        }
        _ => {}
    }
}
