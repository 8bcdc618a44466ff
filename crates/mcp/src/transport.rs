//! How JSON-RPC messages reach one server: newline-delimited JSON on a child's stdio, or
//! streamable HTTP ([`super::http`]). Requests a legacy server sends back are answered at once
//! ([`super::jsonrpc::answer_server_request`]), and noted for the transcript.

use super::elicit::McpElicitation;
use super::http::HttpLink;
use super::jsonrpc::{Asked, Failure, Outgoing, answer_server_request, response_of};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::oneshot;

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

    /// How the server's elicitations are answered.
    pub fn elicitation(&self) -> McpElicitation {
        match self {
            Transport::Stdio(link) => link.asked.elicitation,
            Transport::Http(link) => link.asked.elicitation,
        }
    }

    /// What the server asked of dracode and how it answered, since the last call.
    pub fn take_notes(&self) -> Vec<String> {
        let asked = match self {
            Transport::Stdio(link) => &link.asked,
            Transport::Http(link) => &link.asked,
        };
        asked.notes.lock().map(|mut n| std::mem::take(&mut *n)).unwrap_or_default()
    }
}

/// The requests waiting for an answer; `None` once the server closed its output.
type Pending = Arc<Mutex<Option<HashMap<i64, oneshot::Sender<Result<Value, Failure>>>>>>;

/// Newline-delimited JSON-RPC on a child's stdin and stdout.
pub struct StdioLink {
    writer: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    pending: Pending,
    next_id: AtomicI64,
    asked: Arc<Asked>,
    reader: tokio::task::JoinHandle<()>,
}

impl StdioLink {
    /// Starts reading `stdout`; requests go to `stdin`; the server's requests are answered
    /// as `asked` says.
    pub fn new(stdin: ChildStdin, stdout: ChildStdout, asked: Asked) -> StdioLink {
        let writer = Arc::new(tokio::sync::Mutex::new(Some(stdin)));
        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::new())));
        let asked = Arc::new(asked);
        let reader = tokio::spawn(read_loop(stdout, writer.clone(), pending.clone(), asked.clone()));
        StdioLink { writer, pending, next_id: AtomicI64::new(1), asked, reader }
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

async fn read_loop(stdout: ChildStdout, writer: Arc<tokio::sync::Mutex<Option<ChildStdin>>>, pending: Pending, asked: Arc<Asked>) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            tracing::debug!(line = %line, "MCP server wrote a line that is not JSON");
            continue;
        };
        if let Some(reply) = answer_server_request(&message, &asked) {
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
