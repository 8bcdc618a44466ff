//! Speaking MCP to one connected server: choosing the protocol version (the current, stateless
//! revision first — `server/discover` — falling back to the `initialize` handshake of
//! 2025-11-25 and earlier, or the server's `protocol_version`), then listing tools (every page)
//! and calling them, with the headers and `_meta` the chosen version requires. A modern
//! server's request for input (an `input_required` result) is answered as dracode can: an
//! elicitation as [`elicit::answer`] says, anything else ends the call with a note saying it is not supported.

use super::elicit::{self, McpElicitation};
use super::headers::{ParamHeader, header_value, param_headers, param_values};
use super::jsonrpc::{Failure, Outgoing};
use super::protocol::{self, LEGACY, MODERN, ToolDef, ToolOutput, is_modern};
use super::transport::Transport;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Requests of one MCP conversation, in the version chosen for it.
pub struct Session {
    /// The connection.
    pub transport: Transport,
    /// The protocol version in use.
    pub version: String,
    /// The `x-mcp-header` parameters of each listed tool (modern HTTP only).
    param_headers: Mutex<HashMap<String, Vec<ParamHeader>>>,
}

/// Most pages of `tools/list` read, and rounds of an `input_required` call.
const MAX_PAGES: usize = 100;
const MAX_ROUNDS: usize = 4;

impl Session {
    /// Chooses the version with the server, within `limit` per request.
    pub async fn negotiate(transport: Transport, wanted: Option<&str>, limit: Duration) -> Result<Session, Failure> {
        let mut session = Session { transport, version: wanted.unwrap_or(MODERN).to_string(), param_headers: Mutex::default() };
        if !is_modern(&session.version) {
            session.initialize(limit).await?;
            return Ok(session);
        }
        // A legacy stdio server may never answer an unknown method: probe briefly.
        let probe = if matches!(session.transport, Transport::Stdio(_)) { limit.min(Duration::from_secs(5)) } else { limit };
        for _ in 0..2 {
            match session.request("server/discover", json!({}), Vec::new(), probe).await {
                Ok(found) => {
                    let offered: Vec<String> = found
                        .get("supportedVersions")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect();
                    if offered.contains(&session.version) {
                        return Ok(session);
                    }
                    match protocol::best_of(&offered) {
                        Some(best) if is_modern(best) => session.version = best.to_string(),
                        // Not a `DiscoverResult`: a legacy server answering any method.
                        _ if wanted.is_none() => return session.fall_back(limit).await,
                        _ => {
                            return Err(Failure::Broken(format!("the server does not speak {} (its `protocol_version`)", session.version)));
                        }
                    }
                }
                Err(Failure::Rpc(e)) if e.code == protocol::UNSUPPORTED_VERSION => {
                    let offered = e.supported_versions();
                    let Some(best) = protocol::best_of(&offered) else {
                        let (theirs, ours) = (offered.join(", "), protocol::SUPPORTED.join(", "));
                        return Err(Failure::Broken(format!("the server speaks protocol versions {theirs}; dracode speaks {ours}")));
                    };
                    session.version = best.to_string();
                    if !is_modern(best) {
                        session.initialize(limit).await?;
                        return Ok(session);
                    }
                }
                Err(e) if is_modern_refusal(&e) => return Err(e),
                Err(e @ Failure::Broken(_)) => return Err(e),
                Err(e @ Failure::TimedOut) if matches!(session.transport, Transport::Http(_)) => return Err(e),
                Err(e) if wanted.is_some() => {
                    let version = &session.version;
                    return Err(Failure::Broken(format!("the server does not speak {version} (its `protocol_version`): {e}")));
                }
                Err(_) => return session.fall_back(limit).await,
            }
        }
        Err(Failure::Broken("the server kept refusing the protocol versions it named".into()))
    }

    /// A legacy server: the `initialize` handshake of [`LEGACY`].
    async fn fall_back(mut self, limit: Duration) -> Result<Session, Failure> {
        self.version = LEGACY.to_string();
        self.initialize(limit).await?;
        Ok(self)
    }

    /// Whether the server speaks the stateless revision.
    pub fn modern(&self) -> bool {
        is_modern(&self.version)
    }

    /// The legacy handshake: `initialize`, then `notifications/initialized`.
    async fn initialize(&mut self, limit: Duration) -> Result<(), Failure> {
        let out = Outgoing {
            method: "initialize".into(),
            params: protocol::initialize_params(&self.version),
            version: None,
            headers: Vec::new(),
        };
        let result = self.transport.request(&out, limit).await?;
        let chosen = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        if is_modern(chosen) || !protocol::SUPPORTED.contains(&chosen) {
            return Err(Failure::Broken(format!(
                "the server answered `initialize` with protocol version {chosen:?}, which dracode does not speak with a handshake"
            )));
        }
        self.version = chosen.to_string();
        self.transport.notify("notifications/initialized", json!({}), Some(&self.version)).await;
        if let Transport::Http(link) = &self.transport {
            link.listen(&self.version, limit).await;
        }
        Ok(())
    }

    /// Sends `method` with the version's `_meta` (modern) and headers.
    async fn request(&self, method: &str, params: Value, mut headers: Vec<(String, String)>, limit: Duration) -> Result<Value, Failure> {
        let name = params.get("name").or_else(|| params.get("uri")).and_then(Value::as_str);
        if let Some(name) = name {
            headers.insert(0, ("mcp-name".into(), header_value(name)));
        }
        let params = if self.modern() { protocol::with_meta(params, &self.version) } else { params };
        let out = Outgoing { method: method.into(), params, version: Some(self.version.clone()), headers };
        let result = self.transport.request(&out, limit).await?;
        match result.get("resultType").and_then(Value::as_str) {
            None | Some("complete" | "input_required") => Ok(result),
            Some(other) => Err(Failure::Broken(format!("the server answered {method} with an unknown resultType {other:?}"))),
        }
    }

    /// Every tool the server lists (all pages). On modern HTTP a tool whose `x-mcp-header`
    /// annotations are invalid is left out, with a warning.
    pub async fn list_tools(&self, limit: Duration) -> Result<Vec<ToolDef>, Failure> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor.as_ref().map(|c| json!({"cursor": c})).unwrap_or_else(|| json!({}));
            let page = self.request("tools/list", params, Vec::new(), limit).await?;
            tools.extend(page.get("tools").and_then(Value::as_array).into_iter().flatten().filter_map(ToolDef::from_value));
            cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        if !(self.modern() && matches!(self.transport, Transport::Http(_))) {
            return Ok(tools);
        }
        let mut kept = Vec::new();
        let mut headers = self.param_headers.lock().map_err(|_| Failure::Broken("poisoned".into()))?;
        for tool in tools {
            match param_headers(&tool.input_schema) {
                Ok(params) => {
                    headers.insert(tool.name.clone(), params);
                    kept.push(tool);
                }
                Err(why) => tracing::warn!(tool = %tool.name, "MCP tool left out: {why}"),
            }
        }
        Ok(kept)
    }

    /// Calls `tool` with `arguments`, answering `input_required` results as dracode can.
    pub async fn call_tool(&self, tool: &str, arguments: Value, limit: Duration) -> Result<ToolOutput, Failure> {
        let headers = self.param_headers.lock().ok().and_then(|h| h.get(tool).cloned()).unwrap_or_default();
        let headers = param_values(&headers, &arguments);
        let mut params = json!({"name": tool, "arguments": arguments});
        let mut notes = Vec::new();
        for _ in 0..MAX_ROUNDS {
            let result = self.request("tools/call", params.clone(), headers.clone(), limit).await?;
            notes.extend(self.transport.take_notes());
            if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
                let mut text = protocol::content_text(&result);
                for note in notes {
                    text = if text.is_empty() { note } else { format!("{text}\n{note}") };
                }
                return Ok(ToolOutput { text, is_error: result.get("isError").and_then(Value::as_bool) == Some(true) });
            }
            match input_responses(&result, self.transport.elicitation()) {
                Ok((responses, said)) => {
                    notes.extend(said);
                    params["inputResponses"] = responses;
                    match result.get("requestState") {
                        Some(state) => params["requestState"] = state.clone(),
                        None => _ = params.as_object_mut().map(|p| p.remove("requestState")),
                    }
                }
                Err(unsupported) => return Ok(ToolOutput { text: unsupported.to_string(), is_error: true }),
            }
        }
        Ok(ToolOutput { text: format!("[dracode: {tool} kept asking for more input after {MAX_ROUNDS} rounds]"), is_error: true })
    }
}

/// A modern server's error that means "modern, but refusing this request".
fn is_modern_refusal(failure: &Failure) -> bool {
    matches!(failure, Failure::Auth(_)) || matches!(failure, Failure::Rpc(e) if protocol::MODERN_ERRORS.contains(&e.code))
}

/// A server's request for input dracode cannot answer; its text is the note the model sees.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("[dracode: the MCP server needs a {method} answer to go on; dracode runs unattended and does not support it]")]
struct UnsupportedRequest {
    /// The request's method.
    method: String,
}

/// The `inputResponses` for an `input_required` result, and notes for the transcript; `Err`
/// when the server needs something dracode cannot give.
fn input_responses(result: &Value, policy: McpElicitation) -> Result<(Value, Vec<String>), UnsupportedRequest> {
    let mut responses = serde_json::Map::new();
    let mut notes = Vec::new();
    let requests = result.get("inputRequests").and_then(Value::as_object).cloned().unwrap_or_default();
    for (key, request) in requests {
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        if method != "elicitation/create" {
            return Err(UnsupportedRequest { method: method.to_string() });
        }
        let (answer, note) = elicit::answer(request.get("params").unwrap_or(&Value::Null), policy);
        notes.push(note);
        responses.insert(key, answer);
    }
    Ok((Value::Object(responses), notes))
}
