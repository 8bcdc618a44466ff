//! The model endpoint dracode serves an external coding agent on loopback.
//!
//! dracode runs external coding agents (Claude Code, Codex CLI, Gemini CLI, opencode) as a
//! task's agent. Each speaks its own wire format to its model; the [`Gateway`] listens on
//! `127.0.0.1` in all four at once, decodes each request into dracode's neutral conversation
//! model (a [`Call`]), hands it to a [`Backend`] (dracode: limits, the real provider with the
//! real key, token counting, events) and encodes the backend's [`LlmResponse`] back in the
//! agent's format: as server-sent events when the request asked for a stream, else as one JSON
//! body.

mod anthropic;
mod chat;
mod gemini;
mod responses;
mod server;

use std::net::SocketAddr;
use std::sync::Arc;

pub use dracode_llm::BoxFuture;
use dracode_llm::{ContentBlock, LlmResponse, Message, Role, ToolSpec};
use serde_json::Value;

/// The wire format a call came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Anthropic's Messages API (`POST /v1/messages`): Claude Code.
    AnthropicMessages,
    /// OpenAI's Responses API (`POST /v1/responses`): Codex CLI.
    OpenAiResponses,
    /// OpenAI's Chat Completions API (`POST /v1/chat/completions`): opencode.
    ChatCompletions,
    /// Google's Gemini API (`POST /v1beta/models/{model}:generateContent`): Gemini CLI.
    Gemini,
}

impl Format {
    /// Every format, in the order [`Format::as_str`] names them.
    pub const ALL: [Format; 4] = [Format::AnthropicMessages, Format::OpenAiResponses, Format::ChatCompletions, Format::Gemini];

    /// The format named `name` ([`Format::as_str`]), if it is one.
    pub fn parse(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.as_str() == name)
    }

    /// The format's name in events and logs: `anthropic-messages`, `openai-responses`,
    /// `chat-completions` or `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::AnthropicMessages => "anthropic-messages",
            Format::OpenAiResponses => "openai-responses",
            Format::ChatCompletions => "chat-completions",
            Format::Gemini => "gemini",
        }
    }
}

/// One model call an agent made, decoded.
#[derive(Debug, Clone)]
pub struct Call {
    /// The format the call came in.
    pub format: Format,
    /// The model the agent asked for (Gemini: from the path).
    pub model: String,
    /// The system prompt (instructions), its parts joined with blank lines.
    pub system: String,
    /// The conversation, in dracode's neutral model.
    pub messages: Vec<Message>,
    /// The tools the agent offers the model (server-side tools the agent's API would run
    /// itself are dropped).
    pub tools: Vec<ToolSpec>,
    /// The output token limit the agent asked for.
    pub max_tokens: Option<u32>,
    /// True when the agent asked for a streamed answer (server-sent events).
    pub stream: bool,
    /// The request's `User-Agent` (the agent's name and version, as it tells them).
    pub user_agent: Option<String>,
}

/// What is wrong with a request an agent sent (a field missing or of the wrong shape): the
/// 400 the endpoint answers says it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Malformed(pub(crate) String);

impl From<String> for Malformed {
    fn from(message: String) -> Self {
        Malformed(message)
    }
}

impl std::ops::Deref for Malformed {
    type Target = str;

    /// The message.
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Malformed {
    fn from(message: &str) -> Self {
        Malformed(message.to_string())
    }
}

/// A call the backend refuses (a limit, a provider failure), told to the agent in its own format.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The HTTP status the agent gets (400, 429, 500, …).
    pub status: u16,
    /// What went wrong, for the agent's error message.
    pub message: String,
}

/// What answers the calls: dracode's side.
pub trait Backend: Send + Sync + 'static {
    /// Answers one decoded call, or refuses it.
    fn call(&self, call: Call) -> BoxFuture<'_, Result<LlmResponse, Refusal>>;
}

/// A running endpoint; dropping it stops the listener and every connection.
pub struct Gateway {
    addr: SocketAddr,
    _server: server::Server,
}

impl Gateway {
    /// Listens on 127.0.0.1 (random port); accepts only requests carrying `token`.
    pub async fn start(token: String, backend: Arc<dyn Backend>) -> std::io::Result<Gateway> {
        let (addr, server) = server::Server::start(token, backend).await?;
        Ok(Gateway { addr, _server: server })
    }

    /// The address the endpoint listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// What encoding the answer needs besides the [`Call`] handed to the backend.
#[derive(Debug, Clone, Default)]
pub(crate) struct Context {
    /// The model the agent asked for, echoed in the answer when the backend names none.
    pub(crate) model: String,
    /// The agent asked for server-sent events.
    pub(crate) stream: bool,
    /// Responses: the names of this request's `custom` (freeform) tools.
    pub(crate) custom_tools: Vec<String>,
    /// Chat Completions: `stream_options.include_usage`.
    pub(crate) include_usage: bool,
}

/// An encoded answer: one JSON body, or a whole stream of server-sent events.
#[derive(Debug)]
pub(crate) enum Answer {
    /// `application/json`.
    Json(Value),
    /// `text/event-stream`.
    Sse(String),
}

/// Appends `blocks` as a `role` message, merged into the last message when it has the same
/// role (the neutral model alternates; tool results of one turn travel in one user message).
pub(crate) fn push_blocks(messages: &mut Vec<Message>, role: Role, blocks: Vec<ContentBlock>) {
    if blocks.is_empty() {
        return;
    }
    match messages.last_mut() {
        Some(last) if last.role == role => last.content.extend(blocks),
        _ => messages.push(Message { role, content: blocks }),
    }
}

/// A content that is a string, or an array of typed parts joined with newlines: `text` parts as
/// their text, the part types `placeholders` names as their placeholder (`("image", "[image]")`),
/// any other as `[TYPE]`.
pub(crate) fn parts_text(content: Option<&Value>, placeholders: &[(&str, &str)]) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| match str_at(p, "type") {
                "text" => str_at(p, "text").to_string(),
                other => placeholders.iter().find(|(kind, _)| *kind == other).map_or(format!("[{other}]"), |(_, text)| (*text).to_string()),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A JSON count as `u32`, saturating.
pub(crate) fn as_u32(value: Option<&Value>) -> Option<u32> {
    value.and_then(Value::as_u64).map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// The string at `key`, or empty.
pub(crate) fn str_at<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// A fresh id with `prefix` (`msg_`, `fc_`, …): unique within the process.
pub(crate) fn fresh_id(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{:x}{n:04x}", std::process::id())
}

/// Seconds since the Unix epoch.
pub(crate) fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// One SSE frame: `event: NAME` (when named) and `data: JSON`, then a blank line.
pub(crate) fn sse_frame(out: &mut String, event: Option<&str>, data: &Value) {
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Helpers of the format modules' tests.

    use dracode_llm::stream::{Framer, Framing, StreamDecoder};
    use dracode_llm::{ContentBlock, LlmResponse, StopReason, Usage};
    use serde_json::{Value, json};

    /// A fixture captured from a real agent (see tests/fixtures/README.md).
    pub(crate) fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// An answer with reasoning, text and a tool call.
    pub(crate) fn sample() -> LlmResponse {
        LlmResponse {
            content: vec![
                ContentBlock::Reasoning { text: "Let me think.".into(), signature: Some("sig-abc".into()), id: None, redacted: false },
                ContentBlock::text("I will run it."),
                ContentBlock::ToolUse { id: "call_7".into(), name: "Bash".into(), input: json!({"command": "echo hi > out.txt"}) },
            ],
            stop_reason: StopReason::ToolUse,
            usage: Usage { cached_input_tokens: 30, reasoning_output_tokens: 5, ..Usage::from_counts(100, 20) },
            model: Some("backend-model".into()),
        }
    }

    /// Feeds an SSE body through dracode's own framer and `decoder`: the folded body and
    /// whether the stream was whole.
    pub(crate) fn fold(decoder: Box<dyn StreamDecoder>, sse: &str) -> (Value, bool) {
        let mut decoder = decoder;
        let mut framer = Framer::new(Framing::Sse);
        for piece in sse.as_bytes().chunks(5) {
            for frame in framer.push(piece) {
                decoder.feed(&frame).unwrap();
            }
        }
        let complete = decoder.complete();
        (decoder.into_body(), complete)
    }

    /// `content` with the API item ids of text and reasoning dropped (and tool ids kept).
    pub(crate) fn without_item_ids(content: &[ContentBlock]) -> Vec<ContentBlock> {
        content
            .iter()
            .map(|block| match block {
                ContentBlock::Text { text, .. } => ContentBlock::text(text.clone()),
                ContentBlock::Reasoning { text, signature, redacted, .. } => {
                    ContentBlock::Reasoning { text: text.clone(), signature: signature.clone(), id: None, redacted: *redacted }
                }
                other => other.clone(),
            })
            .collect()
    }

    /// The SSE event names of a stream, in order.
    pub(crate) fn event_names(sse: &str) -> Vec<String> {
        sse.lines().filter_map(|l| l.strip_prefix("event: ")).map(str::to_string).collect()
    }
}
