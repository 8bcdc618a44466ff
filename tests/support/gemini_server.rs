//! A local server that speaks Gemini `generateContent` and rejects what the real API rejects,
//! with its error shape `{"error":{"code","message","status","details"}}`:
//! - a missing or wrong `x-goog-api-key` → 400 INVALID_ARGUMENT, reason API_KEY_INVALID (the
//!   real API's answer to a bad key);
//! - a key in the URL (`?key=`): the real API accepts it, but dracode must never put it there
//!   (URLs reach logs), so the mock answers 400 saying so;
//! - a role other than `user`/`model`, or a content with no parts → 400;
//! - JSON Schema keywords the `Schema` object lacks (`additionalProperties`, `default`,
//!   `$schema`) → 400 "Invalid JSON payload received. Unknown name …";
//! - a model turn with function calls not followed at once by a user turn holding as many
//!   function responses, with the same names → 400 (the API's wording);
//! - with [`GeminiServer::set_context_limit`], a request over the window (tokens ≈ body bytes /
//!   4) → 400 INVALID_ARGUMENT "The input token count (N) exceeds the maximum number of tokens
//!   allowed (M)."; accepted ones report `promptTokenCount` counted the same way.
//!
//! - thinking: a `thoughtSignature` the server did not issue → 400 `Corrupted thought
//!   signature.`; on a `gemini-3…` model, a model turn of the current exchange (after the last
//!   user text) whose first function call carries no signature → 400 `Function call is missing
//!   a thought_signature in functionCall parts. …` (the API's wording; the position is the
//!   mock's count); `thinkingLevel` and `thinkingBudget` together, or a `thinkingLevel` to a
//!   model before Gemini 3 → 400 (the mock's wording).
//!
//! [`Reply::Thinking`] answers with a thought summary part (`thought: true`) before the
//! answer, and signs the answer's first part (`thoughtSignature`), as Gemini 3 does.
//!
//! `:streamGenerateContent?alt=sse` gets the same answer streamed as the API streams it: each
//! `data:` event (CRLF-framed, as Google's servers send them) a whole `GenerateContentResponse`
//! with the next piece of text (or all the function calls), every one with the usage so far
//! (the prompt count; the last with the candidate count and the `finishReason`).
//! `:streamGenerateContent` without `alt=sse` would answer a JSON array, which dracode does not
//! read: the mock refuses it.

use super::sse;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Text with (prompt, candidates, cached, thoughts) token counts.
    Text(String, [u64; 4]),
    /// Function calls `(name, args)` with token counts.
    Calls(Vec<(String, Value)>, [u64; 4]),
    /// A candidate ending with `finishReason`.
    Finish(String),
    /// An HTTP error: status, `status` string, message.
    Error(u16, String, String),
    /// A raw body with status 200.
    Raw(String),
    /// 429 with `Retry-After`.
    RateLimited(u64),
    /// A thought summary, then the answer (a `Text` or `Calls`) with its first part signed.
    Thinking(String, Box<Reply>),
}

struct State {
    key: String,
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<(String, Value)>>,
    /// The context window in tokens; 0: none.
    context_limit: std::sync::atomic::AtomicU64,
    /// Requests answered with the context-window error.
    overflows: std::sync::atomic::AtomicUsize,
    /// Every thought signature sent so far: only these may come back.
    signatures: Mutex<Vec<String>>,
}

/// A running mock of the Gemini API.
pub struct GeminiServer {
    server: MockServer,
    state: Arc<State>,
}

impl GeminiServer {
    /// A server accepting only `key`, answering with `script` in order.
    pub async fn start(key: &str, script: Vec<Reply>) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let server = MockServer::builder().listener(listener).start().await;
        let state = Arc::new(State {
            key: key.into(),
            script: Mutex::new(script.into()),
            requests: Mutex::new(Vec::new()),
            context_limit: std::sync::atomic::AtomicU64::new(0),
            overflows: std::sync::atomic::AtomicUsize::new(0),
            signatures: Mutex::new(Vec::new()),
        });
        Mock::given(any()).respond_with(Responder(state.clone())).mount(&server).await;
        GeminiServer { server, state }
    }

    /// The `base_url` to configure.
    pub fn base_url(&self) -> String {
        self.server.uri()
    }

    /// Every request received: full URL (path and query) and JSON body.
    pub fn requests(&self) -> Vec<(String, Value)> {
        self.state.requests.lock().unwrap().clone()
    }

    /// From now on, a context window of `tokens` (see the module doc).
    pub fn set_context_limit(&self, tokens: u64) {
        self.state.context_limit.store(tokens, std::sync::atomic::Ordering::Relaxed);
    }

    /// Requests answered with the context-window error so far.
    pub fn overflows(&self) -> usize {
        self.state.overflows.load(std::sync::atomic::Ordering::Relaxed)
    }
}

fn error(code: u16, status: &str, message: &str, reason: Option<&str>) -> ResponseTemplate {
    let mut body = json!({"error": {"code": code, "message": message, "status": status}});
    if let Some(reason) = reason {
        body["error"]["details"] =
            json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "googleapis.com"}]);
    }
    ResponseTemplate::new(code).set_body_json(body)
}

fn invalid(message: &str) -> ResponseTemplate {
    error(400, "INVALID_ARGUMENT", message, None)
}

/// Why `body` would be rejected, if it would.
pub fn validate(body: &Value) -> Result<(), String> {
    let contents = body["contents"].as_array().ok_or("* GenerateContentRequest.contents: contents is not specified")?;
    for (i, decl) in body.pointer("/tools/0/functionDeclarations").and_then(Value::as_array).into_iter().flatten().enumerate() {
        check_schema(&decl["parameters"], &format!("tools[0].function_declarations[{i}].parameters"))?;
    }
    for (i, content) in contents.iter().enumerate() {
        let role = content["role"].as_str().unwrap_or_default();
        if role != "user" && role != "model" {
            return Err(format!("Please use a valid role: user, model. (contents[{i}].role = {role:?})"));
        }
        let parts = content["parts"]
            .as_array()
            .filter(|p| !p.is_empty())
            .ok_or(format!("* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty."))?;
        let calls: Vec<&str> = parts.iter().filter_map(|p| p.pointer("/functionCall/name").and_then(Value::as_str)).collect();
        if role == "model" && !calls.is_empty() {
            let next = contents.get(i + 1);
            let answers: Vec<&str> = next
                .filter(|n| n["role"] == "user")
                .and_then(|n| n["parts"].as_array())
                .map(|ps| ps.iter().filter_map(|p| p.pointer("/functionResponse/name").and_then(Value::as_str)).collect())
                .unwrap_or_default();
            let mut sorted_calls = calls.clone();
            let mut sorted_answers = answers.clone();
            sorted_calls.sort();
            sorted_answers.sort();
            if next.is_some() && sorted_calls != sorted_answers {
                return Err("Please ensure that function response turn comes immediately after a function call turn. And the number of function response parts should be equal to number of function call parts of the function call turn.".into());
            }
        }
    }
    Ok(())
}

/// Checks the thinking of a request to `model` against the `issued` signatures (see the module
/// doc).
pub fn check_thinking(body: &Value, model: &str, issued: &[String]) -> Result<(), String> {
    let gemini_3 = model.starts_with("gemini-3");
    let config = &body["generationConfig"]["thinkingConfig"];
    if config.get("thinkingLevel").is_some() && (config.get("thinkingBudget").is_some() || !gemini_3) {
        return Err(format!("mock: thinkingLevel is for Gemini 3 models and never with thinkingBudget ({model}: {config})"));
    }
    let contents = body["contents"].as_array().map(Vec::as_slice).unwrap_or_default();
    let parts = |c: &Value| c["parts"].as_array().cloned().unwrap_or_default();
    for part in contents.iter().flat_map(parts) {
        if let Some(signature) = part["thoughtSignature"].as_str()
            && !issued.iter().any(|s| s == signature)
        {
            return Err("Corrupted thought signature.".into());
        }
    }
    let user_text = |c: &Value| c["role"] == "user" && parts(c).iter().any(|p| p.get("text").is_some());
    let turn = contents.iter().rposition(user_text).map_or(0, |i| i + 1);
    for (i, content) in contents.iter().enumerate().skip(turn).filter(|(_, c)| gemini_3 && c["role"] == "model") {
        let first_call = parts(content).into_iter().find(|p| p.get("functionCall").is_some());
        if let Some(call) = first_call.filter(|c| c.get("thoughtSignature").is_none()) {
            return Err(format!(
                "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{}` , position {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                call["functionCall"]["name"].as_str().unwrap_or_default(),
                i + 1
            ));
        }
    }
    Ok(())
}

fn check_schema(schema: &Value, at: &str) -> Result<(), String> {
    if let Some(map) = schema.as_object() {
        for (key, value) in map {
            if matches!(key.as_str(), "additionalProperties" | "default" | "$schema" | "title" | "const") {
                return Err(format!("Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field."));
            }
            if key == "format" && !matches!(value.as_str(), Some("float" | "double" | "int32" | "int64" | "enum" | "date-time")) {
                return Err(format!(
                    "* GenerateContentRequest.{at}.format: only 'enum' and 'date-time' are supported for STRING type; int32/int64 for INTEGER"
                ));
            }
            if key == "properties" {
                for (name, sub) in value.as_object().into_iter().flatten() {
                    check_schema(sub, &format!("{at}.properties[{name}]"))?;
                }
            } else if key == "items" {
                check_schema(value, &format!("{at}.items"))?;
            }
        }
    }
    Ok(())
}

/// `whole` as the stream of responses the API sends for it (see the module doc).
fn stream_events(whole: &Value) -> String {
    let candidate = &whole["candidates"][0];
    let parts = candidate["content"]["parts"].as_array().cloned().unwrap_or_default();
    let mut chunks: Vec<Vec<Value>> = Vec::new();
    for part in parts {
        match part.get("text").and_then(Value::as_str) {
            Some(text) => {
                let thought = part.get("thought").is_some();
                let piece = |t: String| if thought { json!({"text": t, "thought": true}) } else { json!({"text": t}) };
                chunks.extend(sse::pieces(text, 6).into_iter().map(|t| vec![piece(t)]));
                // A signed text part: the signature comes last, on a part with no text.
                if let Some(signature) = part.get("thoughtSignature") {
                    chunks.push(vec![json!({"text": "", "thoughtSignature": signature})]);
                }
            }
            None => chunks.push(vec![part.clone()]),
        }
    }
    let prompt_only = json!({"promptTokenCount": whole["usageMetadata"]["promptTokenCount"], "totalTokenCount": whole["usageMetadata"]["promptTokenCount"]});
    let count = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, parts)| {
            let last = i + 1 == count;
            let mut response = json!({
                "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
                "usageMetadata": if last { whole["usageMetadata"].clone() } else { prompt_only.clone() },
                "modelVersion": whole["modelVersion"]
            });
            if last {
                response["candidates"][0]["finishReason"] = candidate["finishReason"].clone();
            }
            format!("data: {response}\r\n\r\n")
        })
        .collect()
}

struct Responder(Arc<State>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let url = match request.url.query() {
            Some(q) => format!("{}?{q}", request.url.path()),
            None => request.url.path().to_string(),
        };
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        self.0.requests.lock().unwrap().push((url.clone(), body.clone()));
        let stream = request.url.path().ends_with(":streamGenerateContent");
        if stream && !request.url.query_pairs().any(|(k, v)| k == "alt" && v == "sse") {
            return invalid("mock: streamGenerateContent without alt=sse answers a JSON array; dracode must ask for SSE");
        }
        if !(request.url.path().starts_with("/v1beta/models/") && (request.url.path().ends_with(":generateContent") || stream)) {
            return error(404, "NOT_FOUND", &format!("mock: unexpected path {}", request.url.path()), None);
        }
        if request.url.query_pairs().any(|(k, _)| k == "key") {
            return invalid("mock: the API key was sent in the URL; it must go in the x-goog-api-key header");
        }
        let key = request.headers.get("x-goog-api-key").and_then(|v| v.to_str().ok()).unwrap_or_default();
        if key != self.0.key {
            return error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", Some("API_KEY_INVALID"));
        }
        if body.is_null() {
            return invalid("Invalid JSON payload received.");
        }
        if let Err(message) = validate(&body) {
            return invalid(&message);
        }
        let model = request.url.path().trim_start_matches("/v1beta/models/").split(':').next().unwrap_or_default().to_string();
        if let Err(message) = check_thinking(&body, &model, &self.0.signatures.lock().unwrap()) {
            return invalid(&message);
        }
        let limit = self.0.context_limit.load(std::sync::atomic::Ordering::Relaxed);
        let prompt_tokens = (request.body.len() as u64).div_ceil(4);
        if limit > 0 && prompt_tokens > limit {
            self.0.overflows.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return invalid(&format!("The input token count ({prompt_tokens}) exceeds the maximum number of tokens allowed ({limit})."));
        }
        let Some(reply) = self.0.script.lock().unwrap().pop_front() else {
            return error(500, "INTERNAL", "mock: script exhausted", None);
        };
        let reply = match reply {
            Reply::Text(text, t) if limit > 0 => Reply::Text(text, [prompt_tokens, t[1], 0, t[3]]),
            Reply::Calls(calls, t) if limit > 0 => Reply::Calls(calls, [prompt_tokens, t[1], 0, t[3]]),
            other => other,
        };
        self.render(reply, stream)
    }
}

/// A whole `GenerateContentResponse` of `parts` ending with `finish`, with (prompt, candidates,
/// cached, thoughts) counts `t`; streamed when `stream`.
fn candidate(parts: Value, finish: &str, t: [u64; 4], stream: bool) -> ResponseTemplate {
    let mut usage = json!({"promptTokenCount": t[0], "candidatesTokenCount": t[1], "totalTokenCount": t[0] + t[1] + t[3]});
    if t[2] > 0 {
        usage["cachedContentTokenCount"] = json!(t[2]);
    }
    if t[3] > 0 {
        usage["thoughtsTokenCount"] = json!(t[3]);
    }
    let whole = json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
        "usageMetadata": usage,
        "modelVersion": "gemini-2.5-flash"
    });
    if stream {
        ResponseTemplate::new(200).set_body_raw(stream_events(&whole), "text/event-stream")
    } else {
        ResponseTemplate::new(200).set_body_json(whole)
    }
}

impl Responder {
    /// The answer `reply`, streamed when `stream`; a [`Reply::Thinking`] signs its first part.
    fn render(&self, reply: Reply, stream: bool) -> ResponseTemplate {
        let (thought, reply) = match reply {
            Reply::Thinking(thought, answer) => (Some(thought), *answer),
            other => (None, other),
        };
        let answer = |mut parts: Vec<Value>, t: [u64; 4]| {
            if let Some(thought) = &thought {
                let mut issued = self.0.signatures.lock().unwrap();
                let signature = format!("CiQBjz1rX{:04}/mock", issued.len() + 1);
                issued.push(signature.clone());
                parts[0]["thoughtSignature"] = json!(signature);
                parts.insert(0, json!({"text": thought, "thought": true}));
            }
            candidate(Value::Array(parts), "STOP", t, stream)
        };
        match reply {
            Reply::Text(text, t) => answer(vec![json!({"text": text})], t),
            Reply::Calls(calls, t) => answer(calls.into_iter().map(|(n, a)| json!({"functionCall": {"name": n, "args": a}})).collect(), t),
            Reply::Thinking(..) => error(500, "INTERNAL", "mock: nested Thinking replies", None),
            Reply::Finish(reason) => candidate(json!([{"text": "…"}]), &reason, [1, 1, 0, 0], stream),
            Reply::Error(code, status, message) => error(code, &status, &message, None),
            Reply::Raw(raw) => ResponseTemplate::new(200).set_body_string(raw),
            Reply::RateLimited(secs) => error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).", None)
                .insert_header("retry-after", secs.to_string().as_str())
                .set_delay(Duration::from_millis(0)),
        }
    }
}
