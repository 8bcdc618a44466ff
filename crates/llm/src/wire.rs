//! What a wire API is, as code: the [`WireFormat`] trait, and helpers its implementations
//! share. One implementation per API, each in the module above this one named after it —
//! `openai` (Chat Completions), `responses` (OpenAI's Responses API), `anthropic` (Messages),
//! `gemini` (generateContent), `ollama` (`/api/chat`) — each a set of pure functions from the
//! neutral conversation to JSON and back. Sending, retries, credentials and usage live once in
//! the `http_provider` module's `HttpProvider`; vendor differences (Azure's deployment URL,
//! Copilot's editor headers, `max_completion_tokens`, …) are data in [`super::preset`].
//!
//! Streaming is part of the trait too: [`WireFormat::stream_body`] (the same body with the
//! format's stream switch, e.g. `stream: true` + `stream_options.include_usage`),
//! [`WireFormat::stream_url`] (Gemini's `:streamGenerateContent?alt=sse`),
//! [`WireFormat::FRAMING`] (SSE events or NDJSON lines) and [`WireFormat::stream_decoder`],
//! which folds the frames into the body the same answer has unstreamed, so `parse_response`
//! reads both and usage comes from the stream's final counts. The provider reads the body
//! incrementally in one place ([`super::http::JsonEndpoint::post_stream`]).

use super::preset::{KeyHeader, ResolvedProvider};
use super::stream::{Framing, StreamDecoder};
use super::{LlmError, LlmRequest, LlmResponse, Message, ToolSpec};
use serde_json::Value;

/// One wire API: how a call is addressed, encoded and decoded. Every method is pure.
pub trait WireFormat: Send + Sync + Sized + 'static {
    /// How this API sends the key unless the provider's preset says otherwise.
    const KEY_HEADER: KeyHeader;

    /// The format for a provider with these settings (reads what it needs from the type's
    /// preset: the token-limit field, the deployment URL, prompt caching, …).
    fn for_provider(settings: &ResolvedProvider) -> Self;

    /// The URL of a call to `model` at `base_url` (no trailing `/`).
    fn url(&self, base_url: &str, model: &str) -> String;

    /// Headers every call of this API carries besides the key (e.g. `anthropic-version`).
    fn fixed_headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// The JSON body of `request` to `model`.
    fn request_body(&self, model: &str, request: &LlmRequest<'_>) -> Value;

    /// The model's answer from a 2xx body; `history` is the conversation that was sent (APIs
    /// without call ids number the new calls after the earlier ones).
    fn parse_response(&self, body: &Value, history: &[Message]) -> Result<LlmResponse, LlmError>;

    /// A failed call's error, adjusted for what this API means by it (Gemini's bad key is a
    /// 400; Ollama's refused connection means the server is not running). Default: as is.
    fn refine_error(&self, error: LlmError) -> LlmError {
        error
    }

    /// Rewrites a request `body` into the form lenient servers accept where this API's own
    /// form is refused by some (Chat Completions: `content: ""` instead of `null` beside tool
    /// calls); whether anything changed. A provider whose server refused a body this changes
    /// resends it rewritten at once, and rewrites every later body. Default: nothing to do.
    fn relax_body(&self, _body: &mut Value) -> bool {
        false
    }

    /// Whether `error`, answering a body [`WireFormat::relax_body`] would change, may be the
    /// server refusing that form (so the relaxed body is sent at once rather than the same one
    /// retried). Default: a 400, 422 or 500 that is not a context-window refusal.
    fn may_refuse_form(&self, error: &LlmError) -> bool {
        matches!(error.http_status, Some(400 | 422 | 500)) && !super::overflow::is_overflow_message(&error.message)
    }

    /// How this API frames a streamed answer.
    const FRAMING: Framing;

    /// The URL of a streamed call to `model` at `base_url`. Default: [`WireFormat::url`].
    fn stream_url(&self, base_url: &str, model: &str) -> String {
        self.url(base_url, model)
    }

    /// Turns a [`WireFormat::request_body`] into the request for a streamed answer.
    fn stream_body(&self, body: &mut Value);

    /// A decoder for one streamed answer (a fresh one per try).
    fn stream_decoder(&self) -> Box<dyn StreamDecoder>;

    /// The tool specs as this API expects them in a request (what `dracode tools --format`
    /// prints).
    fn render_tools(specs: &[ToolSpec]) -> Value;
}

/// The bytes percent-encoded in a URL path segment, a query value or a form value: all but
/// RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`).
pub const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// How many tool calls `history` holds: APIs that give calls no id number new ones after them.
pub fn calls_before(history: &[Message]) -> usize {
    history.iter().flat_map(|m| &m.content).filter(|b| matches!(b, super::ContentBlock::ToolUse { .. })).count()
}

/// Whether `content` holds a tool call.
pub fn has_calls(content: &[super::ContentBlock]) -> bool {
    content.iter().any(|b| matches!(b, super::ContentBlock::ToolUse { .. }))
}

/// Gives every tool call in `content` an id that is neither empty nor used by another call in
/// `content` or `history` (some local servers answer `""` or the same id every turn, and an API
/// cannot match results to calls that share one). Ids already unique are kept.
pub fn unique_call_ids(content: &mut [super::ContentBlock], history: &[Message]) {
    use super::ContentBlock;
    let mut seen: std::collections::HashSet<String> = history.iter().flat_map(Message::tool_use_ids).map(str::to_string).collect();
    let mut next = seen.len();
    for block in content.iter_mut() {
        if let ContentBlock::ToolUse { id, .. } = block {
            if id.is_empty() || seen.contains(id.as_str()) {
                while seen.contains(&format!("call_{next}")) {
                    next += 1;
                }
                *id = format!("call_{next}");
            }
            seen.insert(id.clone());
        }
    }
}

/// The value at `path` under `root` as a count; absent or not a number is zero.
pub fn count_at(root: Option<&Value>, path: &[&str]) -> u64 {
    path.iter().fold(root, |value, key| value.and_then(|v| v.get(key))).and_then(Value::as_u64).unwrap_or(0)
}
