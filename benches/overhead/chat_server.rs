//! A lean local OpenAI-compatible Chat Completions server for the `jobs` and `scale` sections:
//! raw tokio TCP and just enough HTTP/1.1 (keep-alive, `Content-Length` bodies) to answer every
//! `POST /v1/chat/completions` after a fixed latency with a valid completion — streamed as
//! `chat.completion.chunk` SSE events ending in a usage chunk and `[DONE]` when the request asks
//! `stream: true`, one `chat.completion` otherwise. It refuses what the real API refuses: another
//! path (404), a body that is not JSON or lacks `model` or `messages` (400), no
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
        let mut counts = report.split_whitespace().map(|n| n.parse::<u64>().unwrap_or(0));
        ServerStats { completions: counts.next().unwrap_or(0), refused: counts.next().unwrap_or(0), cpu }
    }
}

/// In the child: serves until stdin closes, then prints `completions refused` and exits.
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
    println!("{} {}", load(&counts.completions), load(&counts.refused));
    true
}

#[derive(Default)]
struct Counts {
    completions: std::sync::atomic::AtomicU64,
    refused: std::sync::atomic::AtomicU64,
}

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
        let counter = if answer.starts_with(b"HTTP/1.1 200") { &counts.completions } else { &counts.refused };
        if answer.starts_with(b"HTTP/1.1 200") {
            tokio::time::sleep(latency).await;
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

/// The whole HTTP response to `request`.
fn answer(request: &Request) -> Vec<u8> {
    if request.method != "POST" || request.path != "/v1/chat/completions" {
        return refusal(404, "Not Found", "unknown_url", &format!("Unknown request URL: {} {}", request.method, request.path));
    }
    if request.content_length.is_none() {
        return refusal(411, "Length Required", "invalid_request_error", "a request body needs a Content-Length");
    }
    let body: serde_json::Value = match serde_json::from_slice(&request.body) {
        Ok(body) => body,
        Err(e) => return refusal(400, "Bad Request", "invalid_request_error", &format!("We could not parse the JSON body: {e}")),
    };
    let Some(model) = body.get("model").and_then(serde_json::Value::as_str) else {
        return refusal(400, "Bad Request", "invalid_request_error", "you must provide a model parameter");
    };
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
