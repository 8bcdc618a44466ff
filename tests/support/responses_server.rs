//! A local server that speaks OpenAI's Responses API, strictly (wiremock on 127.0.0.1).
//!
//! [`ResponsesServer`] answers `POST /v1/responses` (Azure: `POST /openai/v1/responses`, or
//! `/openai/responses?api-version=…`, with an `api-key` header) from a script of [`Reply`]s,
//! one per accepted request, and records every request. Before using a reply it checks the
//! request the way the real API does, answering with OpenAI's error shape
//! (`{"error":{"message","type","param","code"}}`):
//! - a wrong URL → 404; a missing or wrong key (when started with one) → 401; not JSON → 400;
//! - an unknown top-level argument, or anything that fails `CreateResponse` of the official
//!   OpenAPI description (`tests/fixtures/schemas/openai-responses.yaml`, reduced from the
//!   official document) → 400 naming the failing path;
//! - a call output that answers no earlier call of its kind (`function_call_output` for a
//!   `function_call`, `custom_tool_call_output` for a `custom_tool_call`), or a call left
//!   without its output → 400 with the API's message;
//! - an item id twice in one request → 400 "Duplicate item found";
//! - stateless reasoning: a call (or an output message sent back under its id) this server made
//!   next to a reasoning item must come back after that item, and the item with the `encrypted_content` it was given (sent only when the
//!   request `include`s `reasoning.encrypted_content`) → else 400 with the API's messages.
//!
//! A model that does not reason (`gpt-4*`, or any after
//! [`ResponsesServer::serve_a_model_that_does_not_reason`]) refuses `include:
//! ["reasoning.encrypted_content"]` with the API's 400.
//!
//! A reply that calls a tool the request did not declare in that form (a `custom` tool for a
//! custom call, a `function` for a function call) is answered 500 saying so, so that a test
//! whose client sends the wrong form fails loudly; so is a request after the script ran out.
//! The server checks its own answers against `Response` of the same description.
//!
//! `stream: true` gets the same answer as typed SSE events, as the API streams it:
//! `response.created`, `response.in_progress`, per item `response.output_item.added`, its
//! deltas in small pieces (`response.reasoning_summary_text.delta`, `response.output_text.delta`,
//! `response.function_call_arguments.delta`, `response.custom_tool_call_input.delta`) with their
//! `.done` events, `response.output_item.done`, then `response.completed` (or
//! `response.incomplete`) with the whole response and its usage. [`Reply::failed`] ends a stream
//! with `response.failed`. [`ResponsesServer::set_context_limit`] turns on a context window
//! (tokens ≈ body bytes / 4): a request over it is refused with `context_length_exceeded` — a
//! 400 unstreamed, a `response.failed` event streamed — and accepted ones report their input
//! tokens counted the same way. Every event the server sends is checked against
//! `ResponseStreamEvent` of the same description (a 500 names the first that fails).

use super::openai_server::{ReceivedRequest, Rejection, lock, rewrite_nullable, schema_rejection};
use super::sse;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Token counts a scripted response reports in its `usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// `input_tokens`.
    pub input: u64,
    /// `input_tokens_details.cached_tokens`.
    pub cached: u64,
    /// `output_tokens`.
    pub output: u64,
    /// `output_tokens_details.reasoning_tokens`.
    pub reasoning: u64,
}

impl Tokens {
    /// `input` and `output` tokens.
    pub fn new(input: u64, output: u64) -> Self {
        Tokens { input, output, ..Tokens::default() }
    }

    /// With `cached` of the input tokens from the cache and `reasoning` of the output ones
    /// spent reasoning.
    pub fn with(self, cached: u64, reasoning: u64) -> Self {
        Tokens { cached, reasoning, ..self }
    }

    fn json(self) -> Value {
        json!({
            "input_tokens": self.input, "input_tokens_details": {"cached_tokens": self.cached, "cache_write_tokens": 0},
            "output_tokens": self.output, "output_tokens_details": {"reasoning_tokens": self.reasoning},
            "total_tokens": self.input + self.output
        })
    }
}

/// One output item of a scripted response.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// A reasoning item with this summary (its id and encrypted content are the server's).
    Reasoning(String),
    /// An assistant message.
    Text(String),
    /// A `function_call`: call id, name, `arguments` string.
    Call(String, String, String),
    /// A `custom_tool_call`: call id, name, raw input.
    Custom(String, String, String),
}

impl Out {
    /// A function call whose arguments are `arguments` as JSON.
    pub fn call(id: &str, name: &str, arguments: Value) -> Self {
        Out::Call(id.into(), name.into(), arguments.to_string())
    }

    /// A free-form call with raw `input`.
    pub fn custom(id: &str, name: &str, input: &str) -> Self {
        Out::Custom(id.into(), name.into(), input.into())
    }
}

/// What the server answers to one accepted request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A response with these items; `incomplete` is `incomplete_details.reason`.
    Answer { items: Vec<Out>, tokens: Tokens, incomplete: Option<String> },
    /// An HTTP error with OpenAI's body.
    Error { status: u16, error_type: String, code: Option<String>, message: String },
    /// A failed response (`response.failed` when streamed) with this error code and message.
    Failed { code: String, message: String },
}

impl Reply {
    /// A response of `items`.
    pub fn answer(items: Vec<Out>, tokens: Tokens) -> Self {
        Reply::Answer { items, tokens, incomplete: None }
    }

    /// A text answer.
    pub fn text(text: &str, tokens: Tokens) -> Self {
        Self::answer(vec![Out::Text(text.into())], tokens)
    }

    /// An HTTP error.
    pub fn error(status: u16, error_type: &str, code: Option<&str>, message: &str) -> Self {
        Reply::Error { status, error_type: error_type.into(), code: code.map(str::to_string), message: message.into() }
    }

    /// A failed response.
    pub fn failed(code: &str, message: &str) -> Self {
        Reply::Failed { code: code.into(), message: message.into() }
    }

    /// The same answer cut short for `reason` (`max_output_tokens`, `content_filter`).
    pub fn incomplete(self, reason: &str) -> Self {
        match self {
            Reply::Answer { items, tokens, .. } => Reply::Answer { items, tokens, incomplete: Some(reason.into()) },
            other => other,
        }
    }
}

/// The Responses API's message for an input over the context window.
pub const OVERFLOW: &str = "Your input exceeds the context window of this model. Please adjust your input and try again.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    OpenAi,
    Azure,
}

/// What the server handed out that must come back: reasoning items by id (their encrypted
/// content) and, by call id (a message: by its id), the reasoning items made with the call.
#[derive(Default)]
struct Issued {
    reasoning: BTreeMap<String, String>,
    with_call: BTreeMap<String, Vec<String>>,
}

struct State {
    key: Option<String>,
    flavor: Flavor,
    script: Mutex<VecDeque<Reply>>,
    scripted: usize,
    received: Mutex<Vec<ReceivedRequest>>,
    issued: Mutex<Issued>,
    /// The context window in tokens; 0: none.
    context_limit: std::sync::atomic::AtomicU64,
    /// Every model is one that does not reason (refuses encrypted reasoning).
    not_reasoning: std::sync::atomic::AtomicBool,
}

/// A running mock of the Responses API.
pub struct ResponsesServer {
    server: MockServer,
    state: Arc<State>,
}

impl ResponsesServer {
    /// OpenAI's API at `{base_url}/responses`, wanting `Authorization: Bearer {key}`.
    pub async fn start(key: &str, script: Vec<Reply>) -> Self {
        Self::launch(key, Flavor::OpenAi, script).await
    }

    /// An Azure OpenAI resource (its v1 API), wanting `api-key: {key}`; [`Self::base_url`] is
    /// the resource endpoint.
    pub async fn start_azure(key: &str, script: Vec<Reply>) -> Self {
        Self::launch(key, Flavor::Azure, script).await
    }

    async fn launch(key: &str, flavor: Flavor, script: Vec<Reply>) -> Self {
        request_validator();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let server = MockServer::builder().listener(listener).start().await;
        let state = Arc::new(State {
            key: Some(key.to_string()).filter(|k| !k.is_empty()),
            flavor,
            scripted: script.len(),
            script: Mutex::new(script.into()),
            received: Mutex::new(Vec::new()),
            issued: Mutex::new(Issued::default()),
            context_limit: std::sync::atomic::AtomicU64::new(0),
            not_reasoning: std::sync::atomic::AtomicBool::new(false),
        });
        Mock::given(any()).respond_with(Responder(state.clone())).mount(&server).await;
        ResponsesServer { server, state }
    }

    /// The `base_url` to configure: `http://127.0.0.1:PORT/v1` (Azure: the bare endpoint).
    pub fn base_url(&self) -> String {
        match self.state.flavor {
            Flavor::OpenAi => format!("{}/v1", self.server.uri()),
            Flavor::Azure => self.server.uri(),
        }
    }

    /// Every request received so far with its status.
    pub fn received(&self) -> Vec<ReceivedRequest> {
        lock(&self.state.received).clone()
    }

    /// Scripted replies not used yet.
    pub fn remaining(&self) -> usize {
        lock(&self.state.script).len()
    }

    /// From now on, the model does not reason, whatever its name (as `gpt-4*` always): a
    /// request that asks for encrypted reasoning gets the API's 400.
    pub fn serve_a_model_that_does_not_reason(&self) {
        self.state.not_reasoning.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// From now on, a context window of `tokens` (body bytes / 4).
    pub fn set_context_limit(&self, tokens: u64) {
        self.state.context_limit.store(tokens, std::sync::atomic::Ordering::Relaxed);
    }
}

struct Responder(Arc<State>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Option<Value> = serde_json::from_slice(&request.body).ok();
        let (status, template) = match self.answer(request, body.as_ref()) {
            Ok(answered) => answered,
            Err(rejection) => (rejection.status, ResponseTemplate::new(rejection.status).set_body_json(rejection.body())),
        };
        lock(&self.0.received).push(ReceivedRequest::of(request, body, status));
        template
    }
}

impl Responder {
    fn answer(&self, request: &Request, body: Option<&Value>) -> Result<(u16, ResponseTemplate), Rejection> {
        self.route(request)?;
        self.authorize(request)?;
        let body = body.ok_or_else(|| Rejection::invalid("We could not parse the JSON body of your request.".into(), None, None))?;
        validate_request(body)?;
        check_calls_and_reasoning(body, &lock(&self.0.issued))?;
        let encrypt = body["include"].as_array().is_some_and(|i| i.iter().any(|v| v == "reasoning.encrypted_content"));
        let not_reasoning = self.0.not_reasoning.load(std::sync::atomic::Ordering::Relaxed)
            || body["model"].as_str().is_some_and(|m| m.starts_with("gpt-4"));
        if encrypt && not_reasoning {
            let message = "Encrypted content is not supported with this model.";
            return Err(Rejection::invalid(message.into(), Some("include".into()), None));
        }
        let stream = sse::wants_stream(body);
        let limit = self.0.context_limit.load(std::sync::atomic::Ordering::Relaxed);
        let input_tokens = (request.body.len() as u64).div_ceil(4);
        if limit > 0 && input_tokens > limit {
            return overflow(stream);
        }
        let serial = self.0.scripted - lock(&self.0.script).len() + 1;
        let Some(reply) = lock(&self.0.script).pop_front() else {
            return Err(failure(500, "the mock's script has no reply left for this request"));
        };
        let model = body["model"].as_str().unwrap_or_default();
        match reply {
            Reply::Error { status, error_type, code, message } => Err(Rejection { status, message, error_type, param: None, code }),
            Reply::Failed { code, message } => Ok((200, render_failed(serial, model, &code, &message, stream))),
            Reply::Answer { items, mut tokens, incomplete } => {
                declared(body, &items)?;
                if limit > 0 {
                    tokens.input = input_tokens;
                }
                let response = response_json(serial, model, &items, tokens, incomplete.as_deref(), encrypt);
                validate_response(&response).map_err(|e| failure(500, &format!("the mock's own response is invalid: {e}")))?;
                self.remember(&response);
                Ok((200, render(&response, stream)))
            }
        }
    }

    /// Notes the reasoning items of `response` and the calls made next to them.
    fn remember(&self, response: &Value) {
        let mut issued = lock(&self.0.issued);
        let output = response["output"].as_array().cloned().unwrap_or_default();
        let reasoning: Vec<String> =
            output.iter().filter(|i| i["type"] == "reasoning").filter_map(|i| i["id"].as_str()).map(String::from).collect();
        for item in &output {
            match item["type"].as_str() {
                Some("reasoning") => {
                    let encrypted = item["encrypted_content"].as_str().unwrap_or_default().to_string();
                    issued.reasoning.insert(item["id"].as_str().unwrap_or_default().to_string(), encrypted);
                }
                Some("function_call" | "custom_tool_call") if !reasoning.is_empty() => {
                    issued.with_call.insert(item["call_id"].as_str().unwrap_or_default().to_string(), reasoning.clone());
                }
                Some("message") if !reasoning.is_empty() => {
                    issued.with_call.insert(item["id"].as_str().unwrap_or_default().to_string(), reasoning.clone());
                }
                _ => {}
            }
        }
    }

    fn route(&self, request: &Request) -> Result<(), Rejection> {
        let path = request.url.path();
        let versioned = request.url.query_pairs().any(|(k, v)| k == "api-version" && !v.is_empty());
        let ok = request.method.as_str() == "POST"
            && match self.0.flavor {
                Flavor::OpenAi => path == "/v1/responses",
                Flavor::Azure => path == "/openai/v1/responses" || (path == "/openai/responses" && versioned),
            };
        if ok {
            return Ok(());
        }
        Err(Rejection {
            status: 404,
            message: format!("Invalid URL ({} {path})", request.method),
            error_type: "invalid_request_error".into(),
            param: None,
            code: None,
        })
    }

    fn authorize(&self, request: &Request) -> Result<(), Rejection> {
        let Some(key) = &self.0.key else { return Ok(()) };
        let header = |name: &str| request.headers.get(name).and_then(|v| v.to_str().ok());
        let sent = match self.0.flavor {
            Flavor::OpenAi => header("authorization").and_then(|v| v.strip_prefix("Bearer ")),
            Flavor::Azure => header("api-key"),
        };
        if sent == Some(key.as_str()) {
            return Ok(());
        }
        Err(Rejection {
            status: 401,
            message: "Incorrect API key provided.".into(),
            error_type: "invalid_request_error".into(),
            param: None,
            code: Some("invalid_api_key".into()),
        })
    }
}

/// A 500 that makes a test fail loudly (a script the client did not follow).
fn failure(status: u16, message: &str) -> Rejection {
    Rejection { status, message: message.into(), error_type: "server_error".into(), param: None, code: None }
}

/// The refusal of an input over the window: a 400 unstreamed, a failed response streamed.
fn overflow(stream: bool) -> Result<(u16, ResponseTemplate), Rejection> {
    if stream {
        return Ok((200, render_failed(0, "mock", "context_length_exceeded", OVERFLOW, true)));
    }
    Err(Rejection {
        status: 400,
        message: OVERFLOW.into(),
        error_type: "invalid_request_error".into(),
        param: Some("input".into()),
        code: Some("context_length_exceeded".into()),
    })
}

/// Each scripted call names a tool the request declares in the call's form.
fn declared(body: &Value, items: &[Out]) -> Result<(), Rejection> {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let has = |kind: &str, name: &str| tools.iter().any(|t| t["type"] == kind && t["name"] == name);
    for item in items {
        let (kind, name) = match item {
            Out::Call(_, name, _) => ("function", name),
            Out::Custom(_, name, _) => ("custom", name),
            _ => continue,
        };
        if !has(kind, name) {
            return Err(failure(500, &format!("the script calls {name:?}, which the request does not declare as a `{kind}` tool")));
        }
    }
    Ok(())
}

/// The request checks of the API before any answer (see the module doc).
pub fn validate_request(body: &Value) -> Result<(), Rejection> {
    let Some(map) = body.as_object() else {
        return Err(Rejection::invalid("Invalid type for request body: expected an object.".into(), None, Some("invalid_type")));
    };
    if let Some(unknown) = map.keys().find(|k| !top_level_arguments().contains(k.as_str())) {
        return Err(Rejection::invalid(format!("Unknown parameter: '{unknown}'."), Some(unknown.clone()), Some("unknown_parameter")));
    }
    if map.get("model").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Err(Rejection::invalid(
            "Missing required parameter: 'model'.".into(),
            Some("model".into()),
            Some("missing_required_parameter"),
        ));
    }
    match request_validator().iter_errors(body).next() {
        Some(error) => Err(schema_rejection(&error)),
        None => Ok(()),
    }
}

/// Call outputs answer earlier calls of their kind, every call has its output, and calls made
/// next to reasoning come back after that reasoning, with its encrypted content.
fn check_calls_and_reasoning(body: &Value, issued: &Issued) -> Result<(), Rejection> {
    let input = body["input"].as_array().cloned().unwrap_or_default();
    let mut seen_reasoning = BTreeSet::new();
    let mut open: Vec<(String, &str)> = Vec::new();
    let mut ids = BTreeSet::new();
    let invalid = |message: String| Rejection::invalid(message, Some("input".into()), None);
    for item in &input {
        if let Some(id) = item["id"].as_str()
            && !ids.insert(id.to_string())
        {
            return Err(invalid(format!("Duplicate item found with id {id}. Remove duplicate items from your input and try again.")));
        }
        let call_id = item["call_id"].as_str().unwrap_or_default().to_string();
        match item["type"].as_str().unwrap_or_default() {
            "reasoning" => {
                let id = item["id"].as_str().unwrap_or_default();
                match (item["encrypted_content"].as_str(), issued.reasoning.get(id)) {
                    (None, _) => {
                        return Err(invalid(format!(
                            "Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."
                        )));
                    }
                    (Some(sent), Some(given)) if sent == given => {}
                    _ => return Err(invalid(format!("The encrypted content for item {id} could not be verified."))),
                }
                seen_reasoning.insert(id.to_string());
            }
            // An output message sent back under its id needs its reasoning too.
            "message" if item.get("id").is_some() => {
                let id = item["id"].as_str().unwrap_or_default();
                if let Some(missing) = issued.with_call.get(id).into_iter().flatten().find(|rs| !seen_reasoning.contains(*rs)) {
                    return Err(invalid(format!(
                        "Item '{id}' of type 'message' was provided without its required 'reasoning' item: '{missing}'."
                    )));
                }
            }
            kind @ ("function_call" | "custom_tool_call") => {
                if let Some(missing) = issued.with_call.get(&call_id).into_iter().flatten().find(|rs| !seen_reasoning.contains(*rs)) {
                    return Err(invalid(format!(
                        "Item '{call_id}' of type '{kind}' was provided without its required 'reasoning' item: '{missing}'."
                    )));
                }
                open.push((call_id, kind));
            }
            kind @ ("function_call_output" | "custom_tool_call_output") => {
                let call_kind = kind.trim_end_matches("_output");
                let Some(at) = open.iter().position(|(id, k)| *id == call_id && *k == call_kind) else {
                    let what = if call_kind == "function_call" { "function call" } else { "custom tool call" };
                    return Err(invalid(format!("No tool call found for {what} output with call_id {call_id}.")));
                };
                open.remove(at);
            }
            _ => {}
        }
    }
    match open.first() {
        Some((id, kind)) => Err(invalid(format!("No tool output found for {} {id}.", kind.replace('_', " ")))),
        None => Ok(()),
    }
}

/// The response object of a scripted answer.
fn response_json(serial: usize, model: &str, items: &[Out], tokens: Tokens, incomplete: Option<&str>, encrypt: bool) -> Value {
    let output: Vec<Value> = items.iter().enumerate().map(|(i, item)| item_json(serial, i, item, encrypt)).collect();
    let mut response = base_response(serial, model, if incomplete.is_some() { "incomplete" } else { "completed" });
    response["output"] = Value::Array(output);
    response["usage"] = tokens.json();
    if let Some(reason) = incomplete {
        response["incomplete_details"] = json!({"reason": reason});
    }
    response
}

/// A response object with no output yet.
fn base_response(serial: usize, model: &str, status: &str) -> Value {
    json!({
        "id": format!("resp_mock{serial}"), "object": "response", "created_at": 1_756_315_696, "status": status,
        "error": null, "incomplete_details": null, "instructions": null, "max_output_tokens": null, "model": model,
        "output": [], "parallel_tool_calls": true, "previous_response_id": null, "store": false, "temperature": 1.0,
        "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled", "metadata": {}
    })
}

/// One output item, with the ids the API gives them.
fn item_json(serial: usize, index: usize, item: &Out, encrypt: bool) -> Value {
    match item {
        Out::Reasoning(summary) => {
            let id = format!("rs_mock{serial}_{index}");
            let mut item = json!({"type": "reasoning", "id": id, "summary": [{"type": "summary_text", "text": summary}]});
            if encrypt {
                item["encrypted_content"] = Value::from(format!("gAAAAB-{id}-{:x}", summary.len() * 7919 + serial));
            }
            item
        }
        Out::Text(text) => json!({"type": "message", "id": format!("msg_mock{serial}_{index}"), "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}),
        Out::Call(call_id, name, arguments) => json!({"type": "function_call", "id": format!("fc_mock{serial}_{index}"),
            "status": "completed", "call_id": call_id, "name": name, "arguments": arguments}),
        Out::Custom(call_id, name, input) => json!({"type": "custom_tool_call", "id": format!("ctc_mock{serial}_{index}"),
            "status": "completed", "call_id": call_id, "name": name, "input": input}),
    }
}

/// The response as a JSON body, or as the API's event stream.
fn render(response: &Value, stream: bool) -> ResponseTemplate {
    if !stream {
        return ResponseTemplate::new(200).set_body_json(response);
    }
    let mut events = Events::default();
    let mut started = response.clone();
    started["status"] = json!("in_progress");
    started["output"] = json!([]);
    started.as_object_mut().map(|m| m.remove("usage"));
    started["incomplete_details"] = Value::Null;
    events.push("response.created", json!({"response": started}));
    events.push("response.in_progress", json!({"response": started}));
    for (index, item) in response["output"].as_array().into_iter().flatten().enumerate() {
        events.item(index, item);
    }
    let end = if response["status"] == "incomplete" { "response.incomplete" } else { "response.completed" };
    events.push(end, json!({"response": response}));
    events.into_template()
}

/// A failed response: the object with its error, or its stream ending in `response.failed`.
fn render_failed(serial: usize, model: &str, code: &str, message: &str, stream: bool) -> ResponseTemplate {
    let mut failed = base_response(serial, model, "failed");
    failed["error"] = json!({"code": code, "message": message});
    if !stream {
        return ResponseTemplate::new(200).set_body_json(failed);
    }
    let mut events = Events::default();
    let started = base_response(serial, model, "in_progress");
    events.push("response.created", json!({"response": started}));
    events.push("response.failed", json!({"response": failed}));
    events.into_template()
}

/// An event stream being written, numbered as the API numbers it, each event checked against
/// `ResponseStreamEvent` (but `response.failed`: the API fails with codes, such as
/// `context_length_exceeded`, that the description's enum lacks).
#[derive(Default)]
struct Events {
    text: String,
    sequence: u64,
    /// The first event that is not valid, and why.
    invalid: Option<String>,
}

impl Events {
    fn push(&mut self, kind: &str, mut data: Value) {
        data["type"] = Value::from(kind);
        data["sequence_number"] = Value::from(self.sequence);
        self.sequence += 1;
        if kind != "response.failed"
            && self.invalid.is_none()
            && let Err(why) = validate_event(kind, &data)
        {
            self.invalid = Some(why);
        }
        self.text.push_str(&sse::event(Some(kind), &data));
    }

    /// The stream, or a 500 naming the first invalid event (the mock is wrong, not the client).
    fn into_template(self) -> ResponseTemplate {
        match self.invalid {
            Some(why) => ResponseTemplate::new(500).set_body_json(failure(500, &format!("the mock's stream is invalid: {why}")).body()),
            None => ResponseTemplate::new(200).set_body_raw(self.text, sse::EVENT_STREAM),
        }
    }

    /// One item: added (empty), its deltas and `.done` events, done (whole).
    fn item(&mut self, index: usize, item: &Value) {
        let id = item["id"].clone();
        let at = |extra: Value| {
            let mut data = json!({"item_id": id, "output_index": index});
            data.as_object_mut().into_iter().for_each(|m| m.extend(extra.as_object().cloned().unwrap_or_default()));
            data
        };
        let mut empty = item.clone();
        match item["type"].as_str().unwrap_or_default() {
            "reasoning" => {
                empty["summary"] = json!([]);
                self.push("response.output_item.added", json!({"output_index": index, "item": empty}));
                let text = item["summary"][0]["text"].as_str().unwrap_or_default();
                self.push(
                    "response.reasoning_summary_part.added",
                    at(json!({"summary_index": 0, "part": {"type": "summary_text", "text": ""}})),
                );
                for piece in sse::pieces(text, 5) {
                    self.push("response.reasoning_summary_text.delta", at(json!({"summary_index": 0, "delta": piece})));
                }
                self.push("response.reasoning_summary_text.done", at(json!({"summary_index": 0, "text": text})));
            }
            "message" => {
                empty["content"] = json!([]);
                empty["status"] = json!("in_progress");
                self.push("response.output_item.added", json!({"output_index": index, "item": empty}));
                let text = item["content"][0]["text"].as_str().unwrap_or_default();
                for piece in sse::pieces(text, 4) {
                    self.push("response.output_text.delta", at(json!({"content_index": 0, "delta": piece, "logprobs": []})));
                }
                self.push("response.output_text.done", at(json!({"content_index": 0, "text": text, "logprobs": []})));
            }
            kind => {
                let (field, event) =
                    if kind == "function_call" { ("arguments", "function_call_arguments") } else { ("input", "custom_tool_call_input") };
                empty[field] = json!("");
                empty["status"] = json!("in_progress");
                self.push("response.output_item.added", json!({"output_index": index, "item": empty}));
                let whole = item[field].as_str().unwrap_or_default();
                for piece in sse::pieces(whole, 7) {
                    self.push(&format!("response.{event}.delta"), at(json!({"delta": piece})));
                }
                let mut done = at(json!({field: whole}));
                if kind == "function_call" {
                    done["name"] = item["name"].clone();
                }
                self.push(&format!("response.{event}.done"), done);
            }
        }
        self.push("response.output_item.done", json!({"output_index": index, "item": item}));
    }
}

/// Checks a response object against `Response` (the mock's own answers).
pub fn validate_response(body: &Value) -> Result<(), String> {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    let validator = VALIDATOR.get_or_init(|| compile("Response"));
    match validator.iter_errors(body).next() {
        Some(error) => Err(format!("{}: {error}", error.instance_path().as_str())),
        None => Ok(()),
    }
}

/// Checks one streamed event against the member of `ResponseStreamEvent` whose `type` it has.
fn validate_event(kind: &str, event: &Value) -> Result<(), String> {
    static VALIDATORS: OnceLock<BTreeMap<String, jsonschema::Validator>> = OnceLock::new();
    let validators = VALIDATORS.get_or_init(|| {
        let schemas = &spec()["components"]["schemas"];
        let members = schemas["ResponseStreamEvent"]["anyOf"].as_array().cloned().unwrap_or_default();
        members
            .iter()
            .filter_map(|member| member["$ref"].as_str())
            .map(|target| target.trim_start_matches("#/components/schemas/"))
            .filter_map(|name| Some((schemas[name]["properties"]["type"]["enum"][0].as_str()?.to_string(), compile(name))))
            .collect()
    });
    let validator = validators.get(kind).ok_or_else(|| format!("{kind} is not an event of the API"))?;
    match validator.iter_errors(event).next() {
        Some(error) => Err(format!("{kind} {}: {error}", error.instance_path().as_str())),
        None => Ok(()),
    }
}

fn request_validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| compile("CreateResponse"))
}

/// The property names `CreateResponse` declares through its `allOf` parts.
fn top_level_arguments() -> &'static BTreeSet<String> {
    static NAMES: OnceLock<BTreeSet<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let schemas = &spec()["components"]["schemas"];
        let mut names = BTreeSet::new();
        let mut stack = vec![&schemas["CreateResponse"]];
        while let Some(schema) = stack.pop() {
            if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
                stack.push(&schemas[target.trim_start_matches("#/components/schemas/")]);
            }
            stack.extend(schema.get("allOf").and_then(Value::as_array).into_iter().flatten());
            names.extend(schema.get("properties").and_then(Value::as_object).into_iter().flat_map(|p| p.keys().cloned()));
        }
        names
    })
}

fn compile(schema: &str) -> jsonschema::Validator {
    let root = json!({"$ref": format!("#/components/schemas/{schema}"), "components": spec()["components"].clone()});
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(false)
        .build(&root)
        .unwrap_or_else(|e| panic!("the OpenAI spec's {schema} does not compile: {e} at {}", e.instance_path().as_str()))
}

/// The vendored Responses part of the official OpenAPI document, made a JSON Schema a
/// validator reads as the API does: `nullable` rewritten; every `$recursiveAnchor: true`
/// (draft 2019-09, in `CompoundFilter`; a 2020-12 validator reads it as an anchor name and
/// refuses it) dropped; and every `oneOf` read as `anyOf` — the description's alternatives
/// overlap where the API tells them apart by `type` (a user message is both an
/// `EasyInputMessage` and an `InputMessage`), and a JSON Schema `oneOf` refuses a value that
/// matches two.
pub fn spec() -> &'static Value {
    static SPEC: OnceLock<Value> = OnceLock::new();
    SPEC.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/schemas/openai-responses.yaml");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
        let mut spec: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("cannot parse {path}: {e}"));
        rewrite_nullable(&mut spec);
        relax_for_validation(&mut spec);
        spec
    })
}

/// Drops `$recursiveAnchor` and renames `oneOf` to `anyOf` at any depth (see [`spec`]).
fn relax_for_validation(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("$recursiveAnchor");
            if let Some(branches) = map.remove("oneOf") {
                map.insert("anyOf".into(), branches);
            }
            map.values_mut().for_each(relax_for_validation);
        }
        Value::Array(items) => items.iter_mut().for_each(relax_for_validation),
        _ => {}
    }
}
