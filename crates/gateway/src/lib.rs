//! The model endpoint dracode serves an external coding agent on loopback.
//!
//! dracode runs external coding agents (Claude Code, Codex CLI, Gemini CLI, opencode) as a
//! task's agent. Each speaks its own wire format to its model; the [`Gateway`] listens on
//! `127.0.0.1` in all four at once, decodes each request into dracode's neutral conversation
//! model (a [`Call`]), hands it to a [`Backend`] (dracode: limits, the real provider with the
//! real key, token counting, events) and encodes the backend's [`LlmResponse`] back in the
//! agent's format: as server-sent events when the request asked for a stream, else as one JSON
//! body.

pub mod anthropic;
pub mod chat;
pub mod gemini;
pub mod responses;
mod server;

use std::net::SocketAddr;
use std::sync::Arc;

pub use dracode_llm::BoxFuture;
use dracode_llm::{LlmResponse, Message, ToolSpec};

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
