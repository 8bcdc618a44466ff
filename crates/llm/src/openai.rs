//! OpenAI Chat Completions wire format (`POST {base_url}/chat/completions`), also spoken by
//! Azure OpenAI deployments, GitHub Copilot, Z.AI, vLLM, SGLang and llama.cpp's server.
//!
//! Conversion is pure functions, [`request_body`] and [`parse_response`], behind
//! [`ChatCompletionsFormat`]; [`ChatCompletions`] is the generic HTTP provider speaking it. What
//! differs between those vendors (Azure's deployment URL and `api-key` header, Copilot's editor
//! headers, `max_completion_tokens` or `max_tokens`) is preset data ([`super::preset`]).
//!
//! The `reasoning` setting is `reasoning_effort` (`low`, `medium`, `high`), sent only when set;
//! `usage.completion_tokens_details.reasoning_tokens` is counted as reasoning output. The
//! reasoning itself stays on the server: Chat Completions neither returns nor takes it back.

use super::http_provider::HttpProvider;
use super::preset::{KeyHeader, ProviderType, ResolvedProvider, TokenLimitField};
use super::stream::{Frame, Framing, StreamDecoder, stream_error};
use super::wire::{UNRESERVED, WireFormat, count_at, has_calls, unique_call_ids};
use super::{ContentBlock, ErrorKind, LlmError, LlmRequest, LlmResponse, Message, ReasoningEffort, Role, StopReason, ToolSpec, Usage};
use percent_encoding::utf8_percent_encode;
use serde_json::{Value, json};

pub use super::preset::AZURE_API_VERSION;

/// A Chat Completions endpoint (OpenAI, vLLM, SGLang, llama.cpp, Z.AI, Copilot, Azure).
pub type ChatCompletions = HttpProvider<ChatCompletionsFormat>;

/// The Chat Completions wire format, as one provider type's preset shapes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatCompletionsFormat {
    kind: ProviderType,
    /// The deployment `api-version`, when the model is a deployment in the URL (Azure).
    api_version: Option<String>,
    /// Assistant tool-call turns carry `content: ""`, not `null` (local servers).
    empty_content_with_calls: bool,
    /// `reasoning_effort`, when the `reasoning` setting is set.
    reasoning: Option<ReasoningEffort>,
}

/// Ollama's conventional port: its `/v1` Chat Completions endpoint is reached through the
/// `openai` type, and gets a local server's `content: ""`.
const OLLAMA_PORT: &str = ":11434";

/// Whether `base_url` is a local Ollama (loopback host on Ollama's port).
fn is_local_ollama(base_url: Option<&str>) -> bool {
    let Some(rest) = base_url.and_then(|u| u.split_once("://")).map(|(_, rest)| rest) else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    ["localhost", "127.0.0.1", "[::1]"].iter().any(|host| authority == format!("{host}{OLLAMA_PORT}"))
}

impl WireFormat for ChatCompletionsFormat {
    const KEY_HEADER: KeyHeader = KeyHeader::Bearer;

    fn for_provider(settings: &ResolvedProvider) -> Self {
        let deployment = settings.kind.preset().deployment_api_version;
        let api_version = deployment.map(|default| settings.api_version.clone().unwrap_or_else(|| default.to_string()));
        let empty_content_with_calls = settings.kind.preset().empty_content_with_calls
            || (settings.kind == ProviderType::Openai && is_local_ollama(settings.base_url.as_deref()));
        ChatCompletionsFormat { kind: settings.kind, api_version, empty_content_with_calls, reasoning: settings.reasoning }
    }

    fn url(&self, base_url: &str, model: &str) -> String {
        match &self.api_version {
            Some(version) => {
                format!(
                    "{base_url}/openai/deployments/{}/chat/completions?api-version={}",
                    utf8_percent_encode(model, UNRESERVED),
                    utf8_percent_encode(version, UNRESERVED)
                )
            }
            None => format!("{base_url}/chat/completions"),
        }
    }

    fn request_body(&self, model: &str, request: &LlmRequest<'_>) -> Value {
        let mut body = request_body(self.kind, model, request);
        if let Some(effort) = self.reasoning {
            body["reasoning_effort"] = Value::from(effort.as_str());
        }
        if self.empty_content_with_calls {
            self.relax_body(&mut body);
        }
        body
    }

    fn parse_response(&self, body: &Value, history: &[Message]) -> Result<LlmResponse, LlmError> {
        let mut response = parse_response(body)?;
        unique_call_ids(&mut response.content, history);
        Ok(response)
    }

    fn relax_body(&self, body: &mut Value) -> bool {
        empty_null_contents(body)
    }

    /// OpenAI's 404 for a model served only by the Responses API gets the setting that fixes it.
    fn refine_error(&self, mut error: LlmError) -> LlmError {
        if error.http_status == Some(404) && error.message.contains("only supported in v1/responses") {
            error.message.push_str(
                " — set `wire_api = \"responses\"` on this provider (docs/src/reference/configuration.md#openais-responses-api-wire_api)",
            );
        }
        error
    }

    const FRAMING: Framing = Framing::Sse;

    /// `stream: true`, with the usage chunk asked for (`stream_options.include_usage`).
    fn stream_body(&self, body: &mut Value) {
        body["stream"] = Value::Bool(true);
        body["stream_options"] = json!({"include_usage": true});
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::<ChunkDecoder>::default()
    }

    fn render_tools(specs: &[ToolSpec]) -> Value {
        specs.iter().map(tool).collect()
    }
}

/// One tool in the `{"type":"function","function":{…}}` shape.
pub fn tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        }
    })
}

/// The request body for `request` to `model` on a provider of type `kind`.
///
/// The output limit goes in the preset's field: `max_completion_tokens` for OpenAI, Azure and
/// Copilot (OpenAI's reasoning and newer models reject the deprecated `max_tokens`),
/// `max_tokens` for vLLM, SGLang, llama.cpp and Z.AI, the one field all of them read. A
/// deployment (Azure) names the model in the URL, so the body has none.
pub fn request_body(kind: ProviderType, model: &str, request: &LlmRequest) -> Value {
    let preset = kind.preset();
    let mut body = serde_json::Map::new();
    if preset.deployment_api_version.is_none() {
        body.insert("model".into(), Value::from(model));
    }
    body.insert("messages".into(), Value::Array(wire_messages(request.system, request.messages)));
    if !request.tools.is_empty() {
        body.insert("tools".into(), ChatCompletionsFormat::render_tools(request.tools));
        body.insert("tool_choice".into(), Value::from("auto"));
    }
    if let Some(limit) = request.max_tokens {
        let field = match preset.token_limit_field {
            TokenLimitField::MaxCompletionTokens => "max_completion_tokens",
            TokenLimitField::MaxTokens => "max_tokens",
        };
        body.insert(field.into(), Value::from(limit));
    }
    Value::Object(body)
}

/// The conversation as Chat Completions messages: tool results become `tool` messages, in the
/// order of the calls they answer, before any text of the same user message.
fn wire_messages(system: &str, messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::new();
    if !system.is_empty() {
        out.push(json!({"role": "system", "content": system}));
    }
    let mut call_order: Vec<&str> = Vec::new();
    for message in messages {
        match message.role {
            Role::Assistant => {
                call_order = message.tool_use_ids().collect();
                out.push(assistant_message(message));
            }
            Role::User => {
                user_messages(message, &call_order, &mut out);
                call_order.clear();
            }
        }
    }
    out
}

/// Replaces `content: null` of the assistant messages in `body` with `""`; whether there was
/// one.
pub fn empty_null_contents(body: &mut Value) -> bool {
    let mut changed = false;
    let messages = body.get_mut("messages").and_then(Value::as_array_mut).map(Vec::as_mut_slice).unwrap_or_default();
    for message in messages {
        if message.get("role").and_then(Value::as_str) == Some("assistant")
            && let Some(content @ Value::Null) = message.get_mut("content")
        {
            *content = Value::from("");
            changed = true;
        }
    }
    changed
}

/// An assistant turn: its text and its calls as `tool_calls`.
fn assistant_message(message: &Message) -> Value {
    let text = message.text();
    let calls: Vec<Value> = message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolUse { id, name, input } => Some(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": arguments_string(input)},
            })),
            _ => None,
        })
        .collect();
    // `content` may be null only beside tool calls.
    let content = match (text.is_empty(), calls.is_empty()) {
        (true, false) => Value::Null,
        _ => Value::from(text),
    };
    let mut wire = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        wire["tool_calls"] = Value::Array(calls);
    }
    wire
}

/// A user turn pushed onto `out`: its tool results as `tool` messages in `call_order`, then its
/// text (an empty turn still sends an empty user message).
fn user_messages(message: &Message, call_order: &[&str], out: &mut Vec<Value>) {
    let text = message.text();
    let mut results: Vec<(&str, &str)> = message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolResult { tool_use_id, content, .. } => Some((tool_use_id.as_str(), content.as_str())),
            _ => None,
        })
        .collect();
    results.sort_by_key(|(id, _)| call_order.iter().position(|c| c == id).unwrap_or(usize::MAX));
    for (id, content) in &results {
        out.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
    }
    if !text.is_empty() || results.is_empty() {
        out.push(json!({"role": "user", "content": text}));
    }
}

/// The `arguments` string of a call: its JSON, or the model's own text when that was not JSON.
fn arguments_string(input: &Value) -> String {
    match input {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// The model's answer from a Chat Completions response body.
pub fn parse_response(body: &Value) -> Result<LlmResponse, LlmError> {
    let bad = |what: &str| {
        let mut shown = body.to_string();
        if let Some((cut, _)) = shown.char_indices().nth(500) {
            shown.truncate(cut);
            shown.push('…');
        }
        LlmError::new(ErrorKind::BadResponse, format!("{what}: {shown}"))
    };
    if let Some(error) = body.get("error").filter(|e| !e.is_null()) {
        let message = error.get("message").and_then(Value::as_str).map(str::to_string);
        return Err(LlmError::new(
            ErrorKind::BadResponse,
            format!("the response is an error: {}", message.unwrap_or_else(|| error.to_string())),
        ));
    }
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or_else(|| bad("the response has no choices"))?;
    let message = choice.get("message").filter(|m| m.is_object()).ok_or_else(|| bad("the choice has no message"))?;

    let mut content = Vec::new();
    let text = message_text(message.get("content"));
    if !text.is_empty() {
        content.push(ContentBlock::text(text));
    }
    let refusal = message.get("refusal").and_then(Value::as_str).filter(|r| !r.is_empty());
    if let (Some(refusal), true) = (refusal, content.is_empty()) {
        content.push(ContentBlock::text(refusal));
    }
    content.extend(parse_calls(message, &bad)?);
    let refused = refusal.is_some() && message_text(message.get("content")).is_empty();
    let stop_reason = stop_reason(choice.get("finish_reason").and_then(Value::as_str), has_calls(&content), refused);
    Ok(LlmResponse {
        content,
        stop_reason,
        usage: parse_usage(body.get("usage")),
        model: body.get("model").and_then(Value::as_str).map(str::to_string),
    })
}

/// The calls of a response `message`: `tool_calls`, or the deprecated single `function_call`
/// from servers that still answer with it.
fn parse_calls(message: &Value, bad: &dyn Fn(&str) -> LlmError) -> Result<Vec<ContentBlock>, LlmError> {
    let mut content = Vec::new();
    let calls = message.get("tool_calls").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    for (index, call) in calls.iter().enumerate() {
        let function = call.get("function").ok_or_else(|| bad("a tool call has no function"))?;
        let name = function.get("name").and_then(Value::as_str).ok_or_else(|| bad("a tool call has no name"))?;
        // Some local servers omit ids; the result only has to carry the same one back.
        let id = call.get("id").and_then(Value::as_str).map_or_else(|| format!("call_{index}"), str::to_string);
        content.push(ContentBlock::ToolUse { id, name: name.to_string(), input: parse_arguments(function.get("arguments")) });
    }
    if let (true, Some(call)) = (calls.is_empty(), message.get("function_call").filter(|c| c.is_object())) {
        let name = call.get("name").and_then(Value::as_str).ok_or_else(|| bad("a function call has no name"))?;
        content.push(ContentBlock::ToolUse {
            id: "call_0".to_string(),
            name: name.to_string(),
            input: parse_arguments(call.get("arguments")),
        });
    }
    Ok(content)
}

/// The stop reason from `finish_reason`, given whether the answer has calls and whether it is
/// a refusal with no text.
fn stop_reason(finish: Option<&str>, has_calls: bool, refused: bool) -> StopReason {
    match finish {
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::ContentFilter,
        // Some local servers say `stop` (or nothing) after tool calls.
        _ if has_calls => StopReason::ToolUse,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        _ if refused => StopReason::Refusal,
        Some("stop") | None => StopReason::EndTurn,
        Some(other) => StopReason::Other(other.to_string()),
    }
}

/// `content` as a string: a plain string, or the text parts of an array (some servers).
fn message_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join(""),
        _ => String::new(),
    }
}

/// Tool arguments: parsed JSON; `{}` for an empty string (no-argument calls from some local
/// servers); the raw string when it is not JSON, so the tool reports INVALID_ARGUMENTS to the
/// model; an object some servers send unencoded is kept as is.
pub(crate) fn parse_arguments(arguments: Option<&Value>) -> Value {
    match arguments {
        Some(Value::String(raw)) if raw.trim().is_empty() => json!({}),
        Some(Value::String(raw)) => serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone())),
        Some(Value::Null) | None => json!({}),
        Some(other) => other.clone(),
    }
}

/// Usage in the neutral shape; a server that reports none (some local ones) counts zero tokens
/// but still one request.
fn parse_usage(usage: Option<&Value>) -> Usage {
    Usage {
        cached_input_tokens: count_at(usage, &["prompt_tokens_details", "cached_tokens"]),
        reasoning_output_tokens: count_at(usage, &["completion_tokens_details", "reasoning_tokens"]),
        ..Usage::from_counts(count_at(usage, &["prompt_tokens"]), count_at(usage, &["completion_tokens"]))
    }
}

/// Folds `chat.completion.chunk`s into a `chat.completion`: text and refusal deltas
/// concatenated, tool calls gathered by `index` (id and name from their first delta, argument
/// fragments concatenated), the last `finish_reason`, and the usage of the final chunk (the one
/// with `choices: []` that `include_usage` adds before `[DONE]`).
#[derive(Debug, Default)]
pub struct ChunkDecoder {
    model: Option<Value>,
    text: String,
    refusal: String,
    /// `(id, name, arguments)` by call index.
    calls: std::collections::BTreeMap<u64, (String, String, String)>,
    finish_reason: Option<Value>,
    usage: Option<Value>,
    done: bool,
}

impl StreamDecoder for ChunkDecoder {
    fn feed(&mut self, frame: &Frame) -> Result<(), LlmError> {
        if frame.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk = frame.json()?;
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            return Err(stream_error(&chunk));
        }
        if let Some(model) = chunk.get("model").filter(|m| m.is_string()) {
            self.model = Some(model.clone());
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let choice = chunk.get("choices").and_then(|c| c.get(0));
        if let Some(reason) = choice.and_then(|c| c.get("finish_reason")).filter(|r| !r.is_null()) {
            self.finish_reason = Some(reason.clone());
        }
        let Some(delta) = choice.and_then(|c| c.get("delta")) else { return Ok(()) };
        self.text.push_str(delta.get("content").and_then(Value::as_str).unwrap_or_default());
        self.refusal.push_str(delta.get("refusal").and_then(Value::as_str).unwrap_or_default());
        for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            self.add_call_delta(call);
        }
        Ok(())
    }

    fn ended(&self) -> bool {
        self.done
    }

    /// `[DONE]` seen, or (from a server that never sends it) a finish reason and the usage.
    fn complete(&self) -> bool {
        self.done || (self.finish_reason.is_some() && self.usage.is_some())
    }

    fn into_body(self: Box<Self>) -> Value {
        let calls: Vec<Value> = self
            .calls
            .into_values()
            .map(|(id, name, arguments)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}))
            .collect();
        let text = |s: String| if s.is_empty() { Value::Null } else { Value::String(s) };
        let mut message = json!({"role": "assistant", "content": text(self.text), "refusal": text(self.refusal)});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        let mut body = json!({"choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}]});
        if let Some(model) = self.model {
            body["model"] = model;
        }
        if let Some(usage) = self.usage {
            body["usage"] = usage;
        }
        body
    }
}

impl ChunkDecoder {
    /// One `tool_calls` delta. A server that omits `index` sends each call whole: a new id
    /// starts a new call.
    fn add_call_delta(&mut self, call: &Value) {
        let id = call.get("id").and_then(Value::as_str).filter(|id| !id.is_empty());
        let index = call.get("index").and_then(Value::as_u64).unwrap_or_else(|| {
            let last = self.calls.keys().next_back().copied();
            match (last, id) {
                (Some(last), Some(id)) if self.calls.get(&last).is_some_and(|c| c.0 != id) => last + 1,
                (Some(last), _) => last,
                (None, _) => 0,
            }
        });
        let entry = self.calls.entry(index).or_default();
        if let (Some(id), true) = (id, entry.0.is_empty()) {
            entry.0 = id.to_string();
        }
        let function = call.get("function");
        if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str).filter(|n| !n.is_empty()) {
            entry.1 = name.to_string();
        }
        entry.2.push_str(function.and_then(|f| f.get("arguments")).and_then(Value::as_str).unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpClient;

    fn conversation() -> Vec<Message> {
        vec![
            Message::user_text("Fix the bug"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text("Looking."),
                    ContentBlock::ToolUse { id: "call_a".into(), name: "read_file".into(), input: json!({"file_path": "a.rs"}) },
                    ContentBlock::ToolUse { id: "call_b".into(), name: "list_files".into(), input: Value::String("{oops".into()) },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::ToolResult {
                        tool_use_id: "call_b".into(),
                        content: "Error [INVALID_ARGUMENTS]: not JSON".into(),
                        is_error: true,
                    },
                    ContentBlock::ToolResult { tool_use_id: "call_a".into(), content: "fn main() {}".into(), is_error: false },
                    ContentBlock::text("Also keep it short."),
                ],
            },
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse { id: "call_c".into(), name: "write_file".into(), input: json!({}) }],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult { tool_use_id: "call_c".into(), content: "ok".into(), is_error: false }],
            },
        ]
    }

    fn tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}),
        }]
    }

    /// A Chat Completions stream as OpenAI sends it with `include_usage`: a text delta, two
    /// tool calls whose arguments arrive in fragments keyed by `index`, the finish chunk, the
    /// usage chunk with `choices: []`, `[DONE]`.
    const OPENAI_STREAM: &str = include_str!("../../../tests/fixtures/streams/openai_tool_calls.sse");

    #[test]
    fn a_chunk_stream_folds_into_the_unstreamed_answer_with_exact_usage() {
        use crate::stream::{Framing, decode};
        let (body, complete) = decode(Framing::Sse, Box::<ChunkDecoder>::default(), OPENAI_STREAM).unwrap();
        assert!(complete);
        let response = parse_response(&body).unwrap();
        assert_eq!(
            response.content,
            [
                ContentBlock::text("Checking"),
                ContentBlock::ToolUse { id: "call_DdmO".into(), name: "read_file".into(), input: json!({"file_path": "a.rs"}) },
                ContentBlock::ToolUse { id: "call_Xk2p".into(), name: "list_files".into(), input: json!({}) },
            ]
        );
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        let u = response.usage;
        assert_eq!((u.input_tokens, u.output_tokens, u.cached_input_tokens, u.reasoning_output_tokens, u.requests), (812, 54, 512, 16, 1));
        assert_eq!(response.model.as_deref(), Some("gpt-4o-2024-08-06"));
        // Cut before the usage chunk: not whole (the usage would be lost).
        let cut = &OPENAI_STREAM[..OPENAI_STREAM.find("\"choices\":[],").unwrap()];
        assert!(!decode(Framing::Sse, Box::<ChunkDecoder>::default(), cut).unwrap().1);
        let error = "data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\"}}\n\n";
        assert!(decode(Framing::Sse, Box::<ChunkDecoder>::default(), error).unwrap_err().is_transient());
    }

    #[test]
    fn request_body_maps_the_conversation() {
        let messages = conversation();
        let tools = tools();
        let request = LlmRequest { system: "You are terse.", messages: &messages, tools: &tools, max_tokens: Some(256) };
        insta::assert_json_snapshot!(request_body(ProviderType::Openai, "gpt-4o", &request));
    }

    #[test]
    fn token_limit_field_and_model_depend_on_the_type() {
        let messages = [Message::user_text("hi")];
        let request = LlmRequest { system: "", messages: &messages, tools: &[], max_tokens: Some(10) };
        let openai = request_body(ProviderType::Openai, "gpt-4o", &request);
        assert_eq!(openai["max_completion_tokens"], 10);
        assert!(openai.get("max_tokens").is_none());
        assert!(openai.get("tools").is_none() && openai.get("tool_choice").is_none());
        assert_eq!(openai["messages"], json!([{"role": "user", "content": "hi"}]), "no empty system message");
        let vllm = request_body(ProviderType::Vllm, "qwen", &request);
        assert_eq!(vllm["max_tokens"], 10);
        assert!(vllm.get("max_completion_tokens").is_none());
        let azure = request_body(ProviderType::Azure, "my-deployment", &request);
        assert!(azure.get("model").is_none());
        assert_eq!(azure["max_completion_tokens"], 10);
        let unlimited = LlmRequest { max_tokens: None, ..request };
        let body = request_body(ProviderType::Copilot, "gpt-4o", &unlimited);
        assert!(body.get("max_completion_tokens").is_none() && body.get("max_tokens").is_none());
    }

    fn reply(message: Value, finish: &str) -> Value {
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
                "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 8, "audio_tokens": 0}
            }
        })
    }

    #[test]
    fn parse_response_reads_text_calls_and_usage() {
        let body = reply(
            json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"file_path\":\"a\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "list_files", "arguments": "{not json"}}
            ]}),
            "tool_calls",
        );
        let response = parse_response(&body).unwrap();
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(
            response.content,
            vec![
                ContentBlock::ToolUse { id: "call_1".into(), name: "read_file".into(), input: json!({"file_path": "a"}) },
                ContentBlock::ToolUse { id: "call_2".into(), name: "list_files".into(), input: Value::String("{not json".into()) },
            ]
        );
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 100,
                cached_input_tokens: 64,
                cache_creation_input_tokens: 0,
                output_tokens: 20,
                reasoning_output_tokens: 8,
                total_tokens: 120,
                requests: 1
            }
        );
        assert_eq!(response.model.as_deref(), Some("gpt-4o-2024-08-06"));
    }

    #[test]
    fn finish_reasons_map_to_stop_reasons() {
        let text = json!({"role": "assistant", "content": "done"});
        let call = json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "x", "arguments": ""}}]});
        let cases = [
            (&text, "stop", StopReason::EndTurn),
            (&text, "length", StopReason::MaxTokens),
            (&text, "content_filter", StopReason::ContentFilter),
            (&text, "eos", StopReason::Other("eos".into())),
            (&call, "tool_calls", StopReason::ToolUse),
            (&call, "stop", StopReason::ToolUse),
            (&call, "function_call", StopReason::ToolUse),
        ];
        for (message, finish, expected) in cases {
            let response = parse_response(&reply(message.clone(), finish)).unwrap();
            assert_eq!(response.stop_reason, expected, "{finish}");
        }
        let response = parse_response(&reply(call, "tool_calls")).unwrap();
        assert_eq!(response.content, vec![ContentBlock::ToolUse { id: "c".into(), name: "x".into(), input: json!({}) }]);
        let legacy = json!({"role": "assistant", "content": null, "function_call": {"name": "x", "arguments": "{\"a\":1}"}});
        let response = parse_response(&reply(legacy, "function_call")).unwrap();
        assert_eq!(response.stop_reason, StopReason::ToolUse);
        assert_eq!(response.content, vec![ContentBlock::ToolUse { id: "call_0".into(), name: "x".into(), input: json!({"a": 1}) }]);
        let refusal = json!({"role": "assistant", "content": null, "refusal": "I can't help with that."});
        let response = parse_response(&reply(refusal, "stop")).unwrap();
        assert_eq!(response.stop_reason, StopReason::Refusal);
        assert_eq!(response.content, vec![ContentBlock::text("I can't help with that.")]);
    }

    #[test]
    fn missing_usage_counts_zero_tokens_and_one_request() {
        let body = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]});
        let response = parse_response(&body).unwrap();
        assert_eq!(response.usage, Usage::from_counts(0, 0));
        assert_eq!(response.usage.requests, 1);
        assert_eq!(response.content, vec![ContentBlock::text("hi")]);
    }

    #[test]
    fn malformed_bodies_are_bad_responses() {
        for body in [
            json!({}),
            json!({"choices": []}),
            json!({"choices": [{"finish_reason": "stop"}]}),
            json!({"error": {"message": "overloaded"}}),
        ] {
            let err = parse_response(&body).unwrap_err();
            assert_eq!(err.kind, ErrorKind::BadResponse, "{body}");
        }
    }

    fn resolved(kind: ProviderType) -> ResolvedProvider {
        ResolvedProvider::for_test(kind, "dep-1", "https://example.test/v1/")
    }

    #[test]
    fn urls_and_auth_headers_follow_the_type() {
        let openai = ChatCompletions::new(&resolved(ProviderType::Openai), HttpClient::default()).unwrap();
        assert_eq!(openai.endpoint().url, "https://example.test/v1/chat/completions");
        assert_eq!(openai.endpoint().headers["authorization"], "Bearer sk-test-0123456789");
        let azure = ChatCompletions::new(&resolved(ProviderType::Azure), HttpClient::default()).unwrap();
        assert_eq!(
            azure.endpoint().url,
            format!("https://example.test/v1/openai/deployments/dep-1/chat/completions?api-version={AZURE_API_VERSION}")
        );
        assert_eq!(azure.endpoint().headers["api-key"], "sk-test-0123456789");
        assert!(azure.endpoint().headers.get("authorization").is_none());
        let copilot = ChatCompletions::new(&resolved(ProviderType::Copilot), HttpClient::default()).unwrap();
        assert_eq!(copilot.endpoint().headers["copilot-integration-id"], "vscode-chat");
        assert!(copilot.endpoint().headers["editor-version"].to_str().unwrap().starts_with("vscode/"));
    }

    #[test]
    fn an_unsendable_key_is_not_configured_and_not_echoed() {
        let mut bad = resolved(ProviderType::Openai);
        bad.api_key = Some("sk-line\nbreak-secret".into());
        let err = ChatCompletions::new(&bad, HttpClient::default()).err().unwrap();
        assert_eq!(err.kind, ErrorKind::NotConfigured);
        assert!(!err.message.contains("secret"), "{}", err.message);
    }

    #[test]
    fn snapshot_endpoints_per_vendor() {
        use crate::snapshot::{endpoint, settings};
        let endpoints: serde_json::Map<String, Value> = [
            (ProviderType::Openai, "https://api.openai.com/v1", "gpt-4o"),
            (ProviderType::Azure, "https://r.openai.azure.com/", "my deployment"),
            (ProviderType::Copilot, "https://api.githubcopilot.com", "gpt-4o"),
            (ProviderType::Vllm, "http://127.0.0.1:8000/v1", "qwen"),
        ]
        .into_iter()
        .map(|(kind, base, model)| (kind.as_str().to_string(), endpoint::<ChatCompletionsFormat>(&settings(kind, base, model))))
        .collect();
        insta::assert_json_snapshot!(endpoints);
    }

    #[test]
    fn snapshot_parse_response() {
        let body = reply(
            json!({"role": "assistant", "content": "Reading it.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"file_path\":\"a\"}"}}
            ]}),
            "tool_calls",
        );
        insta::assert_json_snapshot!(parse_response(&body).unwrap());
    }

    #[test]
    fn local_presets_and_a_local_ollama_send_empty_content_beside_calls() {
        let messages = conversation();
        let request = LlmRequest { system: "", messages: &messages, tools: &[], max_tokens: None };
        let content_of_call_turns = |kind: ProviderType, base_url: &str| {
            let wire = ChatCompletionsFormat::for_provider(&crate::snapshot::settings(kind, base_url, "m"));
            let body = wire.request_body("m", &request);
            body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "assistant")
                .map(|m| m["content"].clone())
                .collect::<Vec<_>>()
        };
        for kind in [ProviderType::Llamacpp, ProviderType::Vllm, ProviderType::Sglang] {
            assert_eq!(content_of_call_turns(kind, "http://127.0.0.1:8080/v1"), [json!("Looking."), json!("")], "{kind:?}");
        }
        assert_eq!(content_of_call_turns(ProviderType::Openai, "http://localhost:11434/v1"), [json!("Looking."), json!("")]);
        for base_url in ["https://api.openai.com/v1", "http://127.0.0.1:8080/v1", "https://example.com:11434/v1"] {
            assert_eq!(content_of_call_turns(ProviderType::Openai, base_url), [json!("Looking."), Value::Null], "{base_url}");
        }
    }

    #[test]
    fn empty_and_repeated_call_ids_get_fresh_ones() {
        let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}});
        let body = json!({"choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [call(""), call("call_a"), call("call_a"), call("")]}, "finish_reason": "tool_calls"}]});
        let wire = ChatCompletionsFormat::for_provider(&crate::snapshot::settings(ProviderType::Llamacpp, "http://h/v1", "m"));
        let history = conversation();
        let content = wire.parse_response(&body, &history).unwrap().content;
        let ids: Vec<String> = crate::types::tool_use_ids(&content).map(String::from).collect();
        // `call_a` is in the history already; the conversation has 3 calls, so numbering starts at 3.
        assert_eq!(ids, ["call_3", "call_4", "call_5", "call_6"]);
    }
}
