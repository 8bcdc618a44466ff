//! How JSON-RPC messages reach one server: newline-delimited JSON on a child's stdio, or
//! streamable HTTP ([`super::http`]). Requests a legacy server sends back (elicitation,
//! sampling, roots) are refused as not supported, and noted for the transcript.

use super::http::HttpLink;
use super::protocol::RpcError;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::oneshot;

/// Why a request got no result.
#[derive(Debug, Clone)]
pub enum Failure {
    /// The server answered with a JSON-RPC error.
    Rpc(RpcError),
    /// The server wants credentials it was not given, or refused those it was: one line
    /// saying what to configure.
    Auth(String),
    /// An HTTP error without a JSON-RPC error body.
    Http(u16, String),
    /// The server is gone, sent garbage, or could not be reached.
    Broken(String),
    /// The time limit passed (the request was cancelled).
    TimedOut,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Rpc(e) => write!(f, "{e}"),
            Failure::Auth(m) | Failure::Broken(m) => f.write_str(m),
            Failure::Http(status, body) if body.is_empty() => write!(f, "HTTP {status}"),
            Failure::Http(status, body) => write!(f, "HTTP {status}: {body}"),
            Failure::TimedOut => f.write_str("no answer in time"),
        }
    }
}

/// One request to send.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// Its method.
    pub method: String,
    /// Its params (already with `_meta` when modern).
    pub params: Value,
    /// The `MCP-Protocol-Version` header (HTTP), once a version is chosen.
    pub version: Option<String>,
    /// Further headers (HTTP): `Mcp-Name`, `Mcp-Param-*`.
    pub headers: Vec<(String, String)>,
}

/// A connection to one server.
pub enum Transport {
    /// A child process.
    Stdio(StdioLink),
    /// A streamable-HTTP endpoint.
    Http(Box<HttpLink>),
}

impl Transport {
    /// Sends `out` and waits at most `limit` for its result.
    pub async fn request(&self, out: &Outgoing, limit: Duration) -> Result<Value, Failure> {
        match self {
            Transport::Stdio(link) => link.request(out, limit).await,
            Transport::Http(link) => link.request(out, limit).await,
        }
    }

    /// Sends a notification (errors ignored: nothing waits for it).
    pub async fn notify(&self, method: &str, params: Value, version: Option<&str>) {
        match self {
            Transport::Stdio(link) => link.send(&json!({"jsonrpc": "2.0", "method": method, "params": params})).await,
            Transport::Http(link) => link.notify(method, params, version).await,
        }
    }

    /// What the server asked of dracode that it could not give, since the last call.
    pub fn take_notes(&self) -> Vec<String> {
        let notes = match self {
            Transport::Stdio(link) => &link.notes,
            Transport::Http(link) => &link.notes,
        };
        notes.lock().map(|mut n| std::mem::take(&mut *n)).unwrap_or_default()
    }
}

/// The requests waiting for an answer; `None` once the server closed its output.
type Pending = Arc<Mutex<Option<HashMap<i64, oneshot::Sender<Result<Value, Failure>>>>>>;

/// Newline-delimited JSON-RPC on a child's stdin and stdout.
pub struct StdioLink {
    writer: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    pending: Pending,
    next_id: AtomicI64,
    notes: Arc<Mutex<Vec<String>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl StdioLink {
    /// Starts reading `stdout`; requests go to `stdin`.
    pub fn new(stdin: ChildStdin, stdout: ChildStdout) -> StdioLink {
        let writer = Arc::new(tokio::sync::Mutex::new(Some(stdin)));
        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::new())));
        let notes = Arc::new(Mutex::new(Vec::new()));
        let reader = tokio::spawn(read_loop(stdout, writer.clone(), pending.clone(), notes.clone()));
        StdioLink { writer, pending, next_id: AtomicI64::new(1), notes, reader }
    }

    async fn request(&self, out: &Outgoing, limit: Duration) -> Result<Value, Failure> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        match self.pending.lock().as_deref_mut() {
            Ok(Some(pending)) => _ = pending.insert(id, tx),
            _ => return Err(Failure::Broken("the server closed its output (it exited?)".into())),
        }
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": out.method, "params": out.params})).await;
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(Failure::Broken("the server closed its output".into())),
            Err(_) => {
                let cancel = json!({"requestId": id, "reason": "dracode's time limit for the request passed"});
                self.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})).await;
                Err(Failure::TimedOut)
            }
        }
    }

    async fn send(&self, message: &Value) {
        write_line(&self.writer, message).await;
    }

    /// Closes the server's stdin (a polite stop) and stops reading.
    pub async fn close(&self) {
        self.writer.lock().await.take();
        self.reader.abort();
    }
}

async fn write_line(writer: &tokio::sync::Mutex<Option<ChildStdin>>, message: &Value) {
    let mut line = message.to_string();
    line.push('\n');
    if let Some(stdin) = writer.lock().await.as_mut() {
        let _ = stdin.write_all(line.as_bytes()).await;
        let _ = stdin.flush().await;
    }
}

async fn read_loop(
    stdout: ChildStdout,
    writer: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    pending: Pending,
    notes: Arc<Mutex<Vec<String>>>,
) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            tracing::debug!(line = %line, "MCP server wrote a line that is not JSON");
            continue;
        };
        if let Some(reply) = answer_server_request(&message, &notes) {
            write_line(&writer, &reply).await;
        } else if let Some((id, answer)) = response_of(&message) {
            let waiter = pending.lock().ok().and_then(|mut p| p.as_mut()?.remove(&id));
            if let Some(waiter) = waiter {
                let _ = waiter.send(answer);
            }
        }
    }
    let waiters = pending.lock().ok().and_then(|mut p| p.take()).unwrap_or_default();
    for (_, waiter) in waiters {
        let _ = waiter.send(Err(Failure::Broken("the server closed its output (it exited?)".into())));
    }
}

/// The id and outcome of a JSON-RPC response (`None` for anything else).
pub fn response_of(message: &Value) -> Option<(i64, Result<Value, Failure>)> {
    if message.get("method").is_some() {
        return None;
    }
    let id = message.get("id")?.as_i64()?;
    if let Some(error) = message.get("error") {
        return Some((id, Err(Failure::Rpc(RpcError::from_value(error)))));
    }
    Some((id, Ok(message.get("result").cloned().unwrap_or_else(|| json!({})))))
}

/// The answer to a request the server sent (`None` when `message` is not one): `ping` is
/// answered; anything else (elicitation, sampling, roots) is refused as not supported, since
/// dracode runs unattended, and a note says so in the next tool result.
pub fn answer_server_request(message: &Value, notes: &Mutex<Vec<String>>) -> Option<Value> {
    let method = message.get("method")?.as_str()?;
    let id = message.get("id")?.clone();
    if method == "ping" {
        return Some(json!({"jsonrpc": "2.0", "id": id, "result": {}}));
    }
    let what = match method {
        "elicitation/create" => {
            let asked = message.pointer("/params/message").and_then(Value::as_str).unwrap_or("");
            format!("asked for user input ({asked:?})")
        }
        other => format!("sent a {other} request"),
    };
    if let Ok(mut notes) = notes.lock() {
        notes.push(format!("[dracode: the MCP server {what}; dracode runs unattended and answered that it is not supported]"));
    }
    let message = format!("{method} is not supported: dracode runs unattended and has no user to ask");
    Some(json!({"jsonrpc": "2.0", "id": id, "error": {"code": super::protocol::METHOD_NOT_FOUND, "message": message}}))
}
