//! JSON-RPC as both links exchange it (a child's stdio and streamable HTTP): a request to
//! send, why it got no result, reading a response, and the answer to a request the server
//! sends back.

use super::elicit::{self, McpElicitation};
use super::protocol::RpcError;
use serde_json::{Value, json};
use std::sync::Mutex;

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

/// What a server asked of dracode during a call: how to answer elicitations, and the notes
/// for the model's next tool result.
#[derive(Debug, Default)]
pub struct Asked {
    /// How an elicitation is answered.
    pub elicitation: McpElicitation,
    /// What the server asked and how dracode answered, since the last call.
    pub notes: Mutex<Vec<String>>,
}

impl Asked {
    /// Asked with `elicitation` answered so.
    pub fn new(elicitation: McpElicitation) -> Asked {
        Asked { elicitation, notes: Mutex::default() }
    }

    fn note(&self, note: String) {
        if let Ok(mut notes) = self.notes.lock() {
            notes.push(note);
        }
    }
}

/// The answer to a request the server sent (`None` when `message` is not one): `ping` is
/// answered; an elicitation at once, as [`elicit::answer`] says; anything else (sampling,
/// roots) is refused as not supported, since dracode runs unattended. A note says so in the
/// next tool result.
pub fn answer_server_request(message: &Value, asked: &Asked) -> Option<Value> {
    let method = message.get("method")?.as_str()?;
    let id = message.get("id")?.clone();
    if method == "ping" {
        return Some(json!({"jsonrpc": "2.0", "id": id, "result": {}}));
    }
    if method == "elicitation/create" {
        let (result, note) = elicit::answer(message.get("params").unwrap_or(&Value::Null), asked.elicitation);
        asked.note(note);
        return Some(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }
    asked.note(format!("[dracode: the MCP server sent a {method} request; dracode runs unattended and answered that it is not supported]"));
    let message = format!("{method} is not supported: dracode runs unattended and has no user to ask");
    Some(json!({"jsonrpc": "2.0", "id": id, "error": {"code": super::protocol::METHOD_NOT_FOUND, "message": message}}))
}
