//! Anthropic Messages wire format (`POST {base_url}/v1/messages`, the `anthropic` type, alias
//! `claude`), sent as the official SDKs send it: `x-api-key`, `anthropic-version: 2023-06-01`
//! and a JSON body.
//!
//! Conversion is two pure functions, [`request_body`] and [`parse_response`], behind
//! [`MessagesFormat`]; [`AnthropicMessages`] is the generic HTTP provider speaking it. Errors come
//! as `{"type":"error","error":{"type","message"}}` and classify by status there: 401
//! `authentication_error` and 403 `permission_error` are auth errors, 429 `rate_limit_error` is
//! retried (honouring `retry-after`), 529 `overloaded_error` and 500 `api_error` are server
//! errors and retried, a 400 `invalid_request_error` is a bad response carrying the API's message.
//!
//! What the API refuses, and how the body avoids it:
//! - no `max_tokens`: it is always sent — the call's limit, else the provider's, else
//!   [`DEFAULT_MAX_TOKENS`];
//! - a `system` message: the system prompt is the top-level `system`, roles are user/assistant;
//! - a `tool_use` not answered by `tool_result`s at the start of the very next message: results
//!   travel in the user turn after the call, first in it;
//! - empty or blank text blocks: left out, and a message left with nothing is dropped;
//! - consecutive messages of one role are merged (the API would merge them too; merging here
//!   keeps the tool results of the merged turn first).
//!
//! Prompt caching, on unless the preset (`prompt_caching`) or
//! [`AnthropicMessages::with_prompt_caching`] turns it off:
//! `cache_control: {"type":"ephemeral"}` marks the last tool, the system prompt (sent as one text
//! block for that) and the last block of the last message. The API reads the prompt as tools,
//! then system, then messages, so the first two marks cache the prefix every turn of every task
//! of a batch repeats, and the last lets each turn read back the conversation the turn before
//! wrote. That is 3 of the 4 marks the API allows; they are placed afresh on every call, so they
//! never pile up in the history.
//!
//! Reasoning (the `reasoning` setting, see [`super::reasoning`]): `thinking` with a budget that
//! fits `max_tokens` up to Claude 4.5 (with the interleaved-thinking beta flag on Claude 4
//! models, unless a configured `anthropic-beta` header replaces it), adaptive thinking with
//! `output_config.effort` from Claude 4.6 on. `thinking` and `redacted_thinking` blocks, streamed
//! or not, become [`ContentBlock::Reasoning`] and go back unchanged, in place, in every later
//! request (the API refuses a tool turn whose thinking was dropped or altered, and models that
//! think by default answer with them even when `reasoning` is unset); no cache mark is ever put
//! on one.

use super::http::snippet;
use super::http_provider::HttpProvider;
use super::preset::{KeyHeader, ResolvedProvider};
use super::reasoning::{INTERLEAVED_THINKING_BETA, Thinking, apply_anthropic};
use super::stream::{Frame, Framing, StreamDecoder, stream_error};
use super::wire::{WireFormat, count_at, has_calls};
use super::{ContentBlock, ErrorKind, LlmError, LlmRequest, LlmResponse, Message, Role, StopReason, ToolSpec, Usage};
use dracode_secrets::Redactor;
use serde_json::{Map, Value, json};

/// The `anthropic-version` header: the API version every current SDK sends.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` when neither the call nor the provider sets one (the API requires it). Every
/// current Claude model allows at least this much output; the Claude 3 Haiku and Opus models
/// allow only 4096, so set `max_tokens` for those.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// An Anthropic Messages endpoint.
pub type AnthropicMessages = HttpProvider<MessagesFormat>;

/// The Anthropic Messages wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessagesFormat {
    /// Whether requests mark cache breakpoints (see the module doc).
    pub prompt_caching: bool,
    /// How requests ask the model to think; `None`: nothing is sent (the model's default).
    pub thinking: Option<Thinking>,
}

impl WireFormat for MessagesFormat {
    const KEY_HEADER: KeyHeader = KeyHeader::Named("x-api-key");

    fn for_provider(settings: &ResolvedProvider) -> Self {
        let thinking = settings.reasoning.map(|effort| Thinking::for_model(settings.model.as_deref().unwrap_or_default(), effort));
        MessagesFormat { prompt_caching: settings.kind.preset().prompt_caching, thinking }
    }

    fn url(&self, base_url: &str, _model: &str) -> String {
        format!("{base_url}/v1/messages")
    }

    fn fixed_headers(&self) -> &'static [(&'static str, &'static str)] {
        match self.thinking {
            Some(Thinking::Budget { interleaved: true, .. }) => {
                &[("anthropic-version", ANTHROPIC_VERSION), ("anthropic-beta", INTERLEAVED_THINKING_BETA)]
            }
            _ => &[("anthropic-version", ANTHROPIC_VERSION)],
        }
    }

    fn request_body(&self, model: &str, request: &LlmRequest<'_>) -> Value {
        let mut body = request_body(model, request, self.prompt_caching);
        if let Some(thinking) = self.thinking {
            apply_anthropic(&mut body, thinking);
        }
        body
    }

    fn parse_response(&self, body: &Value, _history: &[Message]) -> Result<LlmResponse, LlmError> {
        parse_response(body)
    }

    const FRAMING: Framing = Framing::Sse;

    fn stream_body(&self, body: &mut Value) {
        body["stream"] = Value::Bool(true);
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::<EventDecoder>::default()
    }

    fn render_tools(specs: &[ToolSpec]) -> Value {
        specs.iter().map(tool).collect()
    }
}

/// One tool in the `{"name","description","input_schema"}` shape.
pub fn tool(spec: &ToolSpec) -> Value {
    json!({ "name": spec.name, "description": spec.description, "input_schema": spec.parameters })
}

impl AnthropicMessages {
    /// The same provider with cache breakpoints on (the preset's default) or off.
    pub fn with_prompt_caching(mut self, on: bool) -> Self {
        self.wire_mut().prompt_caching = on;
        self
    }
}

/// `{"type":"ephemeral"}`: cache the prompt up to and including the block that carries it.
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// The request body for `request` to `model`, with cache breakpoints when `prompt_caching`.
pub fn request_body(model: &str, request: &LlmRequest, prompt_caching: bool) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(model));
    body.insert("max_tokens".into(), Value::from(request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)));
    if !request.system.trim().is_empty() {
        let mut block = json!({"type": "text", "text": request.system});
        if prompt_caching {
            block["cache_control"] = ephemeral();
        }
        body.insert("system".into(), json!([block]));
    }
    let mut messages = wire_messages(request.messages);
    // Thinking blocks cannot carry a mark: the last block that is not one gets it.
    let markable = |block: &&mut Value| !matches!(block["type"].as_str(), Some("thinking" | "redacted_thinking"));
    if prompt_caching
        && let Some(Value::Object(last)) = messages.last_mut().and_then(|m| m["content"].as_array_mut()?.iter_mut().rev().find(markable))
    {
        last.insert("cache_control".into(), ephemeral());
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request.tools.iter().map(tool).collect();
        if prompt_caching && let Some(Value::Object(last)) = tools.last_mut() {
            last.insert("cache_control".into(), ephemeral());
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

/// The conversation as alternating user/assistant turns of content blocks, tool results first
/// in each user turn, with nothing empty in it.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut turns: Vec<(Role, Vec<Value>)> = Vec::new();
    for message in messages {
        let blocks: Vec<Value> = message.content.iter().filter_map(wire_block).collect();
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((role, content)) if *role == message.role => content.extend(blocks),
            _ => turns.push((message.role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, mut content)| {
            let role = match role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            // A stable sort: results keep their order, and so does the text after them.
            content.sort_by_key(|block| block["type"] != "tool_result");
            json!({"role": role, "content": content})
        })
        .collect()
}

/// One block on the wire, or `None` for a text block the API would refuse as empty (or
/// reasoning without a signature, which only another API can have produced).
fn wire_block(block: &ContentBlock) -> Option<Value> {
    Some(match block {
        ContentBlock::Text { text, .. } if text.trim().is_empty() => return None,
        ContentBlock::Text { text, .. } => json!({"type": "text", "text": text}),
        ContentBlock::ToolUse { id, name, input } => {
            // The API requires an object; this adapter only ever records objects, so anything
            // else came from another format's history and is sent as no arguments.
            let input = if input.is_object() { input.clone() } else { json!({}) };
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        ContentBlock::ToolResult { tool_use_id, content, is_error } => {
            let mut result = json!({"type": "tool_result", "tool_use_id": tool_use_id});
            // `content` is optional; an empty string would be an empty text block.
            if !content.is_empty() {
                result["content"] = Value::from(content.as_str());
            }
            if *is_error {
                result["is_error"] = Value::Bool(true);
            }
            result
        }
        ContentBlock::Reasoning { signature: None, .. } => return None,
        ContentBlock::Reasoning { signature: Some(data), redacted: true, .. } => json!({"type": "redacted_thinking", "data": data}),
        ContentBlock::Reasoning { text, signature: Some(signature), .. } => {
            json!({"type": "thinking", "thinking": text, "signature": signature})
        }
    })
}

/// The model's answer from a Messages response body.
///
/// Text, `thinking` (text and `signature`), `redacted_thinking` (its `data` as the signature)
/// and `tool_use` blocks are kept in order; server-tool blocks have no place in the neutral
/// model and are skipped. The usage is normalised as
/// [`Usage`] documents: Anthropic's `input_tokens` counts only the prompt tokens after the last
/// cache breakpoint, so
/// - `input_tokens` = `input_tokens + cache_read_input_tokens + cache_creation_input_tokens`,
/// - `cached_input_tokens` = `cache_read_input_tokens`,
/// - `cache_creation_input_tokens` = `cache_creation_input_tokens`,
/// - `output_tokens` = `output_tokens` (thinking included; `output_tokens_details.thinking_tokens`,
///   when sent, is also `reasoning_output_tokens`),
/// - `total_tokens` = input + output, `requests` = 1.
pub fn parse_response(body: &Value) -> Result<LlmResponse, LlmError> {
    // The provider masks its secrets in every error it returns, so none are known here.
    let bad = |what: &str| LlmError::new(ErrorKind::BadResponse, format!("{what}: {}", snippet(&body.to_string(), &Redactor::default())));
    if body.get("type").and_then(Value::as_str) == Some("error") {
        let error = body.get("error");
        let field = |key: &str| error.and_then(|e| e.get(key)).and_then(Value::as_str).unwrap_or("no message");
        return Err(LlmError::new(
            ErrorKind::BadResponse,
            format!("the response is an error: {} (type {})", field("message"), field("type")),
        ));
    }
    let blocks = body.get("content").and_then(Value::as_array).ok_or_else(|| bad("the response has no content"))?;
    let mut content = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = block.get("text").and_then(Value::as_str).ok_or_else(|| bad("a text block has no text"))?;
                if !text.is_empty() {
                    content.push(ContentBlock::text(text));
                }
            }
            Some("tool_use") => {
                let field = |key: &str| block.get(key).and_then(Value::as_str).map(str::to_string);
                let id = field("id").ok_or_else(|| bad("a tool_use block has no id"))?;
                let name = field("name").ok_or_else(|| bad("a tool_use block has no name"))?;
                let input = block.get("input").filter(|i| !i.is_null()).cloned().unwrap_or_else(|| json!({}));
                content.push(ContentBlock::ToolUse { id, name, input });
            }
            Some(kind @ ("thinking" | "redacted_thinking")) => content.push(thinking_block(kind, block)),
            _ => {}
        }
    }
    let has_calls = has_calls(&content);
    let stop_reason = match body.get("stop_reason").and_then(Value::as_str) {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::Refusal,
        Some("pause_turn") => StopReason::PauseTurn,
        Some(other) => StopReason::Other(other.to_string()),
        // Only a streamed message lacks one; its calls still need answering.
        None if has_calls => StopReason::ToolUse,
        None => StopReason::EndTurn,
    };
    Ok(LlmResponse {
        content,
        stop_reason,
        usage: parse_usage(body.get("usage")),
        model: body.get("model").and_then(Value::as_str).map(str::to_string),
    })
}

/// A `thinking` or `redacted_thinking` block as reasoning, its signature (or data) kept as is.
fn thinking_block(kind: &str, block: &Value) -> ContentBlock {
    let field = |key: &str| block.get(key).and_then(Value::as_str).map(str::to_string);
    let redacted = kind == "redacted_thinking";
    ContentBlock::Reasoning {
        text: if redacted { String::new() } else { field("thinking").unwrap_or_default() },
        signature: if redacted { field("data") } else { field("signature") },
        id: None,
        redacted,
    }
}

/// `usage` normalised (see [`parse_response`]); absent counts are zero.
fn parse_usage(usage: Option<&Value>) -> Usage {
    let cache_read = count_at(usage, &["cache_read_input_tokens"]);
    let cache_creation = count_at(usage, &["cache_creation_input_tokens"]);
    Usage {
        cached_input_tokens: cache_read,
        cache_creation_input_tokens: cache_creation,
        reasoning_output_tokens: count_at(usage, &["output_tokens_details", "thinking_tokens"]),
        ..Usage::from_counts(count_at(usage, &["input_tokens"]) + cache_read + cache_creation, count_at(usage, &["output_tokens"]))
    }
}

/// Folds Messages stream events into a message: `message_start` gives the message (with the
/// input and cache counts), `content_block_start`/`_delta`/`_stop` build each block (text
/// deltas concatenated, `input_json_delta` fragments parsed once the block stops),
/// `message_delta` sets the stop reason and the cumulative usage, `message_stop` ends it;
/// `ping` is only a sign of life; an `error` event is the error it names (an overloaded
/// server is retried).
#[derive(Debug, Default)]
pub struct EventDecoder {
    message: Option<Value>,
    blocks: Vec<Value>,
    /// The `input_json_delta` fragments of each block so far.
    partial_json: Vec<String>,
    stopped: bool,
}

impl StreamDecoder for EventDecoder {
    fn feed(&mut self, frame: &Frame) -> Result<(), LlmError> {
        let event = frame.json()?;
        let index = event.get("index").and_then(Value::as_u64).and_then(|i| usize::try_from(i).ok()).unwrap_or(0);
        match event.get("type").and_then(Value::as_str).or(frame.event.as_deref()) {
            Some("message_start") => self.message = event.get("message").cloned(),
            Some("content_block_start") => {
                while self.blocks.len() <= index {
                    self.blocks.push(Value::Null);
                    self.partial_json.push(String::new());
                }
                self.blocks[index] = event.get("content_block").cloned().unwrap_or(Value::Null);
            }
            Some("content_block_delta") => self.add_delta(index, event.get("delta")),
            Some("content_block_stop") => self.finish_block(index),
            Some("message_delta") => self.add_message_delta(&event),
            Some("message_stop") => self.stopped = true,
            Some("error") => return Err(stream_error(&event)),
            _ => {}
        }
        Ok(())
    }

    fn ended(&self) -> bool {
        self.stopped
    }

    fn into_body(self: Box<Self>) -> Value {
        let mut message = self.message.unwrap_or_else(|| json!({}));
        message["content"] = Value::Array(self.blocks.into_iter().filter(|b| !b.is_null()).collect());
        message
    }
}

impl EventDecoder {
    fn add_delta(&mut self, index: usize, delta: Option<&Value>) {
        let (Some(block), Some(delta)) = (self.blocks.get_mut(index), delta) else { return };
        let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        let append = |block: &mut Value, key: &str, more: &str| {
            let joined = format!("{}{more}", block.get(key).and_then(Value::as_str).unwrap_or_default());
            block[key] = Value::String(joined);
        };
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => append(block, "text", text("text")),
            Some("thinking_delta") => append(block, "thinking", text("thinking")),
            Some("signature_delta") => append(block, "signature", text("signature")),
            Some("input_json_delta") => self.partial_json[index].push_str(text("partial_json")),
            _ => {}
        }
    }

    /// A `tool_use` block's input from its fragments: `{}` when there were none, the raw text
    /// when it is not JSON (the tool then reports invalid arguments to the model).
    fn finish_block(&mut self, index: usize) {
        let (Some(block), Some(raw)) = (self.blocks.get_mut(index), self.partial_json.get(index)) else { return };
        if block.get("type").and_then(Value::as_str) == Some("tool_use") && !raw.trim().is_empty() {
            block["input"] = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()));
        }
    }

    /// `stop_reason` and the usage counts (cumulative, so each replaces the one before).
    fn add_message_delta(&mut self, event: &Value) {
        let message = self.message.get_or_insert_with(|| json!({}));
        if let Some(delta) = event.get("delta").and_then(Value::as_object) {
            for (key, value) in delta {
                message[key.as_str()] = value.clone();
            }
        }
        if let Some(usage) = event.get("usage").and_then(Value::as_object) {
            if !message.get("usage").is_some_and(Value::is_object) {
                message["usage"] = json!({});
            }
            for (key, value) in usage.iter().filter(|(_, v)| !v.is_null()) {
                message["usage"][key.as_str()] = value.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpClient;
    use crate::preset::ProviderType;

    fn tool_use(id: &str, name: &str, input: Value) -> ContentBlock {
        ContentBlock::ToolUse { id: id.into(), name: name.into(), input }
    }

    fn tool_result(id: &str, content: &str, is_error: bool) -> ContentBlock {
        ContentBlock::ToolResult { tool_use_id: id.into(), content: content.into(), is_error }
    }

    fn thought(text: &str, signature: &str, redacted: bool) -> ContentBlock {
        ContentBlock::Reasoning { text: text.into(), signature: Some(signature.into()), id: None, redacted }
    }

    #[test]
    fn thinking_goes_back_unchanged_in_place_and_never_carries_a_cache_mark() {
        let messages = vec![
            Message::user_text("Fix it"),
            Message {
                role: Role::Assistant,
                content: vec![
                    thought("I should read a.rs.", "sig_1", false),
                    thought("", "ENCRYPTED", true),
                    tool_use("toolu_a", "read_file", json!({"file_path": "a.rs"})),
                ],
            },
            Message { role: Role::User, content: vec![tool_result("toolu_a", "fn main() {}", false)] },
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::Reasoning { text: "other API".into(), signature: None, id: None, redacted: false }],
            },
            Message { role: Role::Assistant, content: vec![thought("Now the answer.", "sig_2", false)] },
        ];
        let request = LlmRequest { system: "sys", messages: &messages, tools: &[], max_tokens: None };
        let body = request_body("m", &request, true);
        assert_eq!(
            body["messages"][1]["content"],
            json!([
                {"type": "thinking", "thinking": "I should read a.rs.", "signature": "sig_1"},
                {"type": "redacted_thinking", "data": "ENCRYPTED"},
                {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"file_path": "a.rs"}}
            ])
        );
        assert_eq!(body["messages"][3]["content"], json!([{"type": "thinking", "thinking": "Now the answer.", "signature": "sig_2"}]));
        assert_eq!(body.to_string().matches("cache_control").count(), 1, "only the system prompt: a thinking block is never marked");
    }

    #[test]
    fn reasoning_sets_thinking_and_the_beta_flag_by_model() {
        use crate::ReasoningEffort;
        let mut settings = resolved();
        settings.reasoning = Some(ReasoningEffort::High);
        settings.headers.clear();
        let provider = AnthropicMessages::new(&settings, HttpClient::default()).unwrap();
        assert_eq!(provider.endpoint().headers["anthropic-beta"], "interleaved-thinking-2025-05-14");
        let messages = vec![Message::user_text("hi")];
        let request = LlmRequest { system: "", messages: &messages, tools: &[], max_tokens: None };
        let body = provider.wire().request_body("claude-sonnet-4-5", &request);
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 16384}));
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS + 16384);
        settings.model = Some("claude-opus-4-7".into());
        let provider = AnthropicMessages::new(&settings, HttpClient::default()).unwrap();
        assert!(provider.endpoint().headers.get("anthropic-beta").is_none());
        let body = provider.wire().request_body("claude-opus-4-7", &request);
        assert_eq!((&body["thinking"]["type"], &body["output_config"]["effort"]), (&json!("adaptive"), &json!("high")));
        settings.reasoning = None;
        let body = AnthropicMessages::new(&settings, HttpClient::default()).unwrap().wire().request_body("claude-opus-4-7", &request);
        assert!(body.get("thinking").is_none() && body.get("output_config").is_none() && body["max_tokens"] == DEFAULT_MAX_TOKENS);
    }

    fn conversation() -> Vec<Message> {
        vec![
            Message::user_text("Fix the bug"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text("Looking."),
                    tool_use("toolu_a", "read_file", json!({"file_path": "a.rs"})),
                    tool_use("toolu_b", "list_files", Value::String("{oops".into())),
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::text("Also keep it short."),
                    tool_result("toolu_b", "Error [INVALID_ARGUMENTS]: not JSON", true),
                    ContentBlock::text(""),
                    tool_result("toolu_a", "fn main() {}", false),
                ],
            },
            Message { role: Role::Assistant, content: vec![ContentBlock::text("  \n")] },
            Message::user_text("Go on."),
            Message { role: Role::Assistant, content: vec![tool_use("toolu_c", "write_file", json!({}))] },
            Message { role: Role::User, content: vec![tool_result("toolu_c", "", false)] },
        ]
    }

    fn tools() -> Vec<ToolSpec> {
        ["read_file", "list_files"]
            .into_iter()
            .map(|name| ToolSpec {
                name: name.into(),
                description: format!("The {name} tool"),
                parameters: json!({"type": "object", "properties": {"file_path": {"type": "string"}}}),
            })
            .collect()
    }

    #[test]
    fn an_event_stream_folds_into_the_unstreamed_answer_with_exact_usage() {
        use crate::stream::{Framing, decode};
        let stream = include_str!("../../../tests/fixtures/streams/anthropic_tool_use.sse");
        let (body, complete) = decode(Framing::Sse, Box::<EventDecoder>::default(), stream).unwrap();
        assert!(complete);
        let response = parse_response(&body).unwrap();
        assert_eq!(
            response.content,
            [
                ContentBlock::text("Okay, let me read it."),
                tool_use("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "read_file", json!({"file_path": "src/lib.rs"})),
                tool_use("toolu_02", "list_files", json!({})),
            ]
        );
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        let u = response.usage;
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cached_input_tokens, u.cache_creation_input_tokens),
            (472 + 2048 + 100, 89, 2048, 100),
            "input and cache counts from message_start, the cumulative output from message_delta"
        );
        let cut = &stream[..stream.find("event: message_delta").unwrap()];
        assert!(!decode(Framing::Sse, Box::<EventDecoder>::default(), cut).unwrap().1, "no message_stop: cut");
        let overloaded =
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let error = decode(Framing::Sse, Box::<EventDecoder>::default(), overloaded).unwrap_err();
        assert_eq!((error.kind, error.is_transient()), (ErrorKind::Server, true));
    }

    #[test]
    fn request_body_maps_the_conversation() {
        let messages = conversation();
        let tools = tools();
        let request = LlmRequest { system: "You are terse.", messages: &messages, tools: &tools, max_tokens: Some(256) };
        insta::assert_json_snapshot!(request_body("claude-sonnet-4-5", &request, true));
    }

    #[test]
    fn turns_alternate_with_results_first_and_nothing_empty() {
        let messages = conversation();
        let request = LlmRequest { system: "", messages: &messages, tools: &[], max_tokens: None };
        let body = request_body("m", &request, false);
        let wire = body["messages"].as_array().unwrap();
        let roles: Vec<&str> = wire.iter().map(|m| m["role"].as_str().unwrap()).collect();
        // The blank assistant message is dropped, so "Go on." joins the tool-result turn.
        assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
        let types =
            |i: usize| -> Vec<&str> { wire[i]["content"].as_array().unwrap().iter().map(|b| b["type"].as_str().unwrap()).collect() };
        assert_eq!(types(2), ["tool_result", "tool_result", "text", "text"]);
        assert_eq!(wire[2]["content"][0]["tool_use_id"], "toolu_b");
        assert_eq!(wire[2]["content"][0]["is_error"], true);
        assert!(wire[2]["content"][1].get("is_error").is_none(), "is_error only when the tool failed");
        assert_eq!(wire[2]["content"][3]["text"], "Go on.");
        assert_eq!(wire[1]["content"][2]["input"], json!({}), "a non-object input is sent as no arguments");
        assert_eq!(wire[4]["content"][0], json!({"type": "tool_result", "tool_use_id": "toolu_c"}));
        assert_eq!(body["max_tokens"], DEFAULT_MAX_TOKENS, "max_tokens is always sent");
        assert!(body.get("system").is_none() && body.get("tools").is_none());
        assert!(!body.to_string().contains("cache_control"));
    }

    #[test]
    fn cache_breakpoints_mark_tools_system_and_the_last_message() {
        let messages = conversation();
        let tools = tools();
        let request = LlmRequest { system: "sys", messages: &messages, tools: &tools, max_tokens: None };
        let body = request_body("m", &request, true);
        assert_eq!(body["system"], json!([{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]));
        assert!(body["tools"][0].get("cache_control").is_none());
        assert_eq!(body["tools"][1]["cache_control"], ephemeral());
        let last = body["messages"].as_array().unwrap().last().unwrap();
        assert_eq!(last["content"][0]["cache_control"], ephemeral());
        assert_eq!(body.to_string().matches("cache_control").count(), 3);
    }

    fn reply(content: Value, stop_reason: &str) -> Value {
        json!({
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929", "content": content,
            "stop_reason": stop_reason, "stop_sequence": null,
            "usage": {
                "input_tokens": 30, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 1000,
                "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 0},
                "output_tokens": 45, "service_tier": "standard"
            }
        })
    }

    #[test]
    fn parse_response_reads_blocks_and_normalises_usage() {
        let body = reply(
            json!([
                {"type": "thinking", "thinking": "Let me look.", "signature": "sig"},
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"file_path": "a"}},
                {"type": "redacted_thinking", "data": "xyz"},
                {"type": "tool_use", "id": "toolu_2", "name": "list_files", "input": {}}
            ]),
            "tool_use",
        );
        let response = parse_response(&body).unwrap();
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.content,
            vec![
                thought("Let me look.", "sig", false),
                ContentBlock::text("Reading both."),
                tool_use("toolu_1", "read_file", json!({"file_path": "a"})),
                thought("", "xyz", true),
                tool_use("toolu_2", "list_files", json!({})),
            ]
        );
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 30 + 200 + 1000,
                cached_input_tokens: 1000,
                cache_creation_input_tokens: 200,
                output_tokens: 45,
                reasoning_output_tokens: 0,
                total_tokens: 1230 + 45,
                requests: 1,
            }
        );
        assert_eq!(response.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
    }

    #[test]
    fn stop_reasons_map_one_to_one() {
        let text = json!([{"type": "text", "text": "x"}]);
        let cases = [
            ("end_turn", StopReason::EndTurn),
            ("tool_use", StopReason::ToolUse),
            ("max_tokens", StopReason::MaxTokens),
            ("stop_sequence", StopReason::StopSequence),
            ("refusal", StopReason::Refusal),
            ("pause_turn", StopReason::PauseTurn),
            ("model_context_window_exceeded", StopReason::Other("model_context_window_exceeded".into())),
        ];
        for (wire, expected) in cases {
            assert_eq!(parse_response(&reply(text.clone(), wire)).unwrap().stop_reason, expected, "{wire}");
        }
    }

    #[test]
    fn thinking_tokens_are_reasoning_and_missing_usage_counts_one_request() {
        let mut body = reply(json!([{"type": "text", "text": "x"}]), "end_turn");
        body["usage"] = json!({"input_tokens": 5, "output_tokens": 9, "output_tokens_details": {"thinking_tokens": 4}});
        let usage = parse_response(&body).unwrap().usage;
        assert_eq!((usage.input_tokens, usage.output_tokens, usage.reasoning_output_tokens), (5, 9, 4));
        body.as_object_mut().unwrap().remove("usage");
        assert_eq!(parse_response(&body).unwrap().usage, Usage::from_counts(0, 0));
    }

    #[test]
    fn malformed_bodies_and_error_bodies_are_bad_responses() {
        for body in [
            json!({}),
            json!({"type": "message", "content": "hi"}),
            json!({"content": [{"type": "tool_use", "name": "x", "input": {}}]}),
            json!({"content": [{"type": "text"}]}),
        ] {
            assert_eq!(parse_response(&body).unwrap_err().kind, ErrorKind::BadResponse, "{body}");
        }
        let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        let err = parse_response(&overloaded).unwrap_err();
        assert_eq!(err.kind, ErrorKind::BadResponse);
        assert_eq!(err.message, "the response is an error: Overloaded (type overloaded_error)");
    }

    fn resolved() -> ResolvedProvider {
        ResolvedProvider {
            name: "claude".into(),
            api_key: Some("sk-ant-test-0123456789".into()),
            headers: [("anthropic-beta".to_string(), "context-1m-2025-08-07".to_string())].into(),
            ..ResolvedProvider::for_test(ProviderType::Anthropic, "claude-sonnet-4-5", "https://api.anthropic.test/")
        }
    }

    #[test]
    fn url_and_headers() {
        let provider = AnthropicMessages::new(&resolved(), HttpClient::default()).unwrap();
        assert_eq!(provider.endpoint().url, "https://api.anthropic.test/v1/messages");
        assert_eq!(provider.endpoint().headers["x-api-key"], "sk-ant-test-0123456789");
        assert!(provider.endpoint().headers["x-api-key"].is_sensitive());
        assert_eq!(provider.endpoint().headers["anthropic-version"], ANTHROPIC_VERSION);
        assert_eq!(provider.endpoint().headers["anthropic-beta"], "context-1m-2025-08-07");
        assert!(provider.endpoint().headers.get("authorization").is_none());
        assert!(provider.wire().prompt_caching && !provider.with_prompt_caching(false).wire().prompt_caching);
    }

    #[test]
    fn unsendable_keys_and_secret_headers_are_never_echoed() {
        let mut bad = resolved();
        bad.api_key = Some("sk-ant-line\nbreak-secret".into());
        let err = AnthropicMessages::new(&bad, HttpClient::default()).err().unwrap();
        assert_eq!(err.kind, ErrorKind::NotConfigured);
        assert!(!err.message.contains("secret"), "{}", err.message);
        let mut proxied = resolved();
        proxied.headers.insert("x-proxy-token".into(), "proxy-secret-42".into());
        let provider = AnthropicMessages::new(&proxied, HttpClient::default()).unwrap();
        assert!(provider.endpoint().headers["x-proxy-token"].is_sensitive());
        assert_eq!(provider.endpoint().redactor.redact("echo proxy-secret-42 sk-ant-test-0123456789"), "echo [REDACTED] [REDACTED]");
    }

    #[test]
    fn snapshot_endpoint() {
        use crate::snapshot::{endpoint, settings};
        insta::assert_json_snapshot!(endpoint::<MessagesFormat>(&settings(
            ProviderType::Anthropic,
            "https://api.anthropic.com",
            "claude-sonnet-4-5"
        )));
    }

    #[test]
    fn snapshot_parse_response() {
        let body = reply(
            json!([
                {"type": "thinking", "thinking": "Let me look.", "signature": "sig"},
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"file_path": "a"}}
            ]),
            "tool_use",
        );
        insta::assert_json_snapshot!(parse_response(&body).unwrap());
    }
}
