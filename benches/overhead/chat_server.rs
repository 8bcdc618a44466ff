//! A lean local OpenAI-compatible Chat Completions server for the `jobs`, `scale` and `codex`
//! sections: raw tokio TCP and just enough HTTP/1.1 (keep-alive, `Content-Length` bodies) to
//! answer every `POST /v1/chat/completions` after a fixed latency with a valid completion —
//! streamed as `chat.completion.chunk` SSE events ending in a usage chunk and `[DONE]` when the
//! request asks `stream: true`, one `chat.completion` otherwise. It answers the Responses API
//! too (`POST /v1/responses`, what `codex exec` speaks) with a one-turn text reply: streamed as
//! typed events (`response.created`, `response.in_progress`, `response.output_item.added`,
//! `response.content_part.added`, `response.output_text.delta`/`.done`,
//! `response.content_part.done`, `response.output_item.done`, `response.completed` with the
//! usage), or one `response` object. It refuses what the real API refuses: another path (404),
//! a body that is not JSON or lacks `model` or `messages` (`input` for Responses) (400), no
//! `Content-Length` (411). wiremock is too heavy for 1,000 tasks on 2 cores.
//!
//! It runs as a child process of the bench binary (the same executable, started with
//! [`SERVE_ENV`] set) on one thread, so its CPU time is measured apart from dracode's.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Set (to the latency in milliseconds) in the environment of the child that serves.
pub const SERVE_ENV: &str = "DRACODE_BENCH_CHAT_SERVER_MS";

/// The server child: its base URL, and what it cost when stopped.
pub struct ChatServer {
    child: Child,
    /// `http://127.0.0.1:PORT/v1`.
    pub base_url: String,
}

/// What a stopped server reports.
pub struct ServerStats {
    /// Requests answered with a completion.
    pub completions: u64,
    /// Requests refused (4xx).
    pub refused: u64,
    /// Responses API requests answered with a response.
    pub responses: u64,
    /// The first few refused requests: `METHOD PATH -> STATUS`.
    pub refusals: Vec<String>,
    /// User + system CPU time of the server process.
    pub cpu: Duration,
}

impl ChatServer {
    /// Starts the server child answering after `latency`; waits until it listens.
    pub fn start(latency: Duration) -> ChatServer {
        let exe = std::env::current_exe().expect("bench executable");
        let mut child = Command::new(exe)
            .env(SERVE_ENV, latency.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the chat server");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        let port: u16 = line.trim().parse().unwrap_or_else(|_| panic!("chat server said {line:?}"));
        ChatServer { child, base_url: format!("http://127.0.0.1:{port}/v1") }
    }

    /// Stops the server (closing its stdin) and returns its counts and CPU time.
    pub fn stop(mut self) -> ServerStats {
        drop(self.child.stdin.take());
        let mut report = String::new();
        self.child.stdout.take().unwrap().read_to_string(&mut report).unwrap();
        let (cpu, _) = super::reap(&self.child);
        let mut lines = report.lines();
        let mut counts = lines.next().unwrap_or_default().split_whitespace().map(|n| n.parse::<u64>().unwrap_or(0));
        let (completions, refused, responses) = (counts.next().unwrap_or(0), counts.next().unwrap_or(0), counts.next().unwrap_or(0));
        ServerStats { completions, refused, responses, refusals: lines.map(str::to_string).collect(), cpu }
    }
}

/// In the child: serves until stdin closes, then prints `completions refused responses` and the
/// first refused requests, one a line, and exits.
/// Returns `false` (and does nothing) in any other process.
pub fn serve_if_asked() -> bool {
    let Some(ms) = std::env::var(SERVE_ENV).ok().and_then(|v| v.parse::<u64>().ok()) else { return false };
    let latency = Duration::from_millis(ms);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let counts = std::sync::Arc::new(Counts::default());
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("{}", listener.local_addr().unwrap().port());
        std::io::stdout().flush().unwrap();
        let accept = async {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve_connection(stream, latency, counts.clone()));
            }
        };
        let stdin_closed = tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new()));
        tokio::select! {
            () = accept => {}
            _ = stdin_closed => {}
        }
    });
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::SeqCst);
    println!("{} {} {}", load(&counts.completions), load(&counts.refused), load(&counts.responses));
    for refusal in counts.refusals.lock().unwrap().iter() {
        println!("{refusal}");
    }
    true
}

#[derive(Default)]
struct Counts {
    completions: std::sync::atomic::AtomicU64,
    refused: std::sync::atomic::AtomicU64,
    responses: std::sync::atomic::AtomicU64,
    /// The first [`KEPT_REFUSALS`] refused requests.
    refusals: std::sync::Mutex<Vec<String>>,
}

/// How many refused requests the server names in its report.
const KEPT_REFUSALS: usize = 5;

/// One request: its head's request line and the body.
struct Request {
    method: String,
    path: String,
    content_length: Option<usize>,
    close: bool,
    body: Vec<u8>,
}

/// Serves requests on one connection until the client closes it (or asks to).
async fn serve_connection(mut stream: TcpStream, latency: Duration, counts: std::sync::Arc<Counts>) {
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut stream, &mut buf).await {
        let answer = answer(&request);
        let ok = answer.starts_with(b"HTTP/1.1 200");
        let counter = match (ok, request.path == RESPONSES_PATH) {
            (true, false) => &counts.completions,
            (true, true) => &counts.responses,
            (false, _) => &counts.refused,
        };
        if ok {
            tokio::time::sleep(latency).await;
        } else {
            let mut refusals = counts.refusals.lock().unwrap();
            if refusals.len() < KEPT_REFUSALS {
                let status = String::from_utf8_lossy(answer.get(9..12).unwrap_or_default()).into_owned();
                refusals.push(format!("{} {} -> {status}", request.method, request.path));
            }
        }
        if stream.write_all(&answer).await.is_err() {
            return;
        }
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if request.close || request.content_length.is_none() {
            return;
        }
    }
}

/// Reads one request (head, then a `Content-Length` body); `None` at end of stream.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Request> {
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_string(), first.next()?.to_string());
    let (mut content_length, mut close) = (None, false);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => content_length = value.trim().parse().ok(),
            "connection" => close = value.trim().eq_ignore_ascii_case("close"),
            _ => {}
        }
    }
    let wanted = head_end + content_length.unwrap_or(0);
    while buf.len() < wanted {
        let mut chunk = [0u8; 65536];
        let n = stream.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[head_end..wanted].to_vec();
    buf.drain(..wanted);
    Some(Request { method, path, content_length, close, body })
}

/// The Responses API's path.
const RESPONSES_PATH: &str = "/v1/responses";

/// The whole HTTP response to `request`.
fn answer(request: &Request) -> Vec<u8> {
    if request.method == "POST" && request.path == RESPONSES_PATH {
        return responses_answer(request);
    }
    if request.method != "POST" || request.path != "/v1/chat/completions" {
        return refusal(404, "Not Found", "unknown_url", &format!("Unknown request URL: {} {}", request.method, request.path));
    }
    let (body, model) = match json_body(request) {
        Ok(parsed) => parsed,
        Err(refused) => return refused,
    };
    let model = model.as_str();
    if body.get("messages").and_then(serde_json::Value::as_array).is_none_or(Vec::is_empty) {
        return refusal(400, "Bad Request", "invalid_request_error", "'messages' must be a non-empty array");
    }
    if body.get("stream").and_then(serde_json::Value::as_bool) == Some(true) {
        let wants_usage = body.pointer("/stream_options/include_usage").and_then(serde_json::Value::as_bool) == Some(true);
        response(200, "OK", "text/event-stream", &chunks(model, wants_usage))
    } else {
        let completion = serde_json::json!({
            "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "done"}}],
            "usage": usage()
        });
        response(200, "OK", "application/json", &completion.to_string())
    }
}

/// The JSON body of `request` and the model it names, or the refusal the real API gives when
/// its length, its JSON or its model is missing.
fn json_body(request: &Request) -> Result<(serde_json::Value, String), Vec<u8>> {
    if request.content_length.is_none() {
        return Err(refusal(411, "Length Required", "invalid_request_error", "a request body needs a Content-Length"));
    }
    let body: serde_json::Value = serde_json::from_slice(&request.body)
        .map_err(|e| refusal(400, "Bad Request", "invalid_request_error", &format!("We could not parse the JSON body: {e}")))?;
    let Some(model) = body.get("model").and_then(serde_json::Value::as_str).map(str::to_string) else {
        return Err(refusal(400, "Bad Request", "invalid_request_error", "you must provide a model parameter"));
    };
    Ok((body, model))
}

/// The SSE body of a streamed answer "done": role and text, the finish, the usage chunk (when
/// asked for), `[DONE]`.
fn chunks(model: &str, wants_usage: bool) -> String {
    let chunk = |choices: serde_json::Value, usage: Option<serde_json::Value>| {
        let mut chunk = serde_json::json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": choices});
        if let Some(usage) = usage {
            chunk["usage"] = usage;
        }
        format!("data: {chunk}\n\n")
    };
    let mut body = chunk(serde_json::json!([{"index": 0, "delta": {"role": "assistant", "content": "done"}, "finish_reason": null}]), None);
    body.push_str(&chunk(serde_json::json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]), None));
    if wants_usage {
        body.push_str(&chunk(serde_json::json!([]), Some(usage())));
    }
    body.push_str("data: [DONE]\n\n");
    body
}

/// The whole HTTP response to a Responses API request: the text "done" as one `message` item.
fn responses_answer(request: &Request) -> Vec<u8> {
    let (body, model) = match json_body(request) {
        Ok(parsed) => parsed,
        Err(refused) => return refused,
    };
    let model = model.as_str();
    let input_ok = match body.get("input") {
        Some(serde_json::Value::String(text)) => !text.is_empty(),
        Some(serde_json::Value::Array(items)) => !items.is_empty(),
        _ => false,
    };
    if !input_ok {
        return refusal(400, "Bad Request", "invalid_request_error", "'input' must be a non-empty string or array of items");
    }
    let message = serde_json::json!({
        "type": "message", "id": "msg_bench", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": "done", "annotations": [], "logprobs": []}]
    });
    let mut object = serde_json::json!({
        "id": "resp_bench", "object": "response", "created_at": 0, "status": "completed", "model": model,
        "error": null, "incomplete_details": null, "output": [message.clone()], "parallel_tool_calls": true,
        "store": false, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 11}
    });
    if body.get("stream").and_then(serde_json::Value::as_bool) != Some(true) {
        return response(200, "OK", "application/json", &object.to_string());
    }
    let mut events = String::new();
    let mut sequence = 0;
    let mut event = |kind: &str, mut data: serde_json::Value| {
        data["type"] = kind.into();
        data["sequence_number"] = sequence.into();
        sequence += 1;
        events.push_str(&format!("event: {kind}\ndata: {data}\n\n"));
    };
    let mut started = object.clone();
    started["status"] = "in_progress".into();
    started["output"] = serde_json::json!([]);
    started["usage"] = serde_json::Value::Null;
    event("response.created", serde_json::json!({"response": started.clone()}));
    event("response.in_progress", serde_json::json!({"response": started}));
    let mut opening = message.clone();
    opening["status"] = "in_progress".into();
    opening["content"] = serde_json::json!([]);
    event("response.output_item.added", serde_json::json!({"output_index": 0, "item": opening}));
    let at = serde_json::json!({"item_id": "msg_bench", "output_index": 0, "content_index": 0});
    let with = |extra: serde_json::Value| {
        let mut fields = at.clone();
        fields.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
        fields
    };
    event("response.content_part.added", with(serde_json::json!({"part": {"type": "output_text", "text": "", "annotations": []}})));
    event("response.output_text.delta", with(serde_json::json!({"delta": "done", "logprobs": []})));
    event("response.output_text.done", with(serde_json::json!({"text": "done", "logprobs": []})));
    event("response.content_part.done", with(serde_json::json!({"part": message["content"][0].clone()})));
    event("response.output_item.done", serde_json::json!({"output_index": 0, "item": message}));
    event("response.completed", serde_json::json!({"response": object.take()}));
    response(200, "OK", "text/event-stream", &events)
}

/// The token counts every answer reports.
fn usage() -> serde_json::Value {
    serde_json::json!({"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11})
}

/// An OpenAI-shaped error response.
fn refusal(status: u16, reason: &str, kind: &str, message: &str) -> Vec<u8> {
    let body = serde_json::json!({"error": {"message": message, "type": kind, "param": null, "code": null}});
    response(status, reason, "application/json", &body.to_string())
}

fn response(status: u16, reason: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes()
}
