//! OpenAI's Responses API (`POST {base_url}/responses`), the only API OpenAI serves its Codex
//! and pro reasoning models through, spoken by `openai` and `azure` providers when their
//! `wire_api` says `responses` or their model needs it ([`super::preset::needs_responses`]).
//! Azure OpenAI's is its v1 API, `{endpoint}/openai/v1/responses` with the deployment as
//! `model` (`{endpoint}/openai/responses?api-version=…` when an `api_version` is configured).
//!
//! The request is stateless, as Codex sends it: `store: false`, the system prompt as
//! `instructions`, the whole conversation as `input` items — user text as `input_text`,
//! assistant text as an assistant message, calls as `function_call` / `custom_tool_call`, their
//! results as `function_call_output` / `custom_tool_call_output`, and the model's `reasoning`
//! items sent back unchanged with their id and `encrypted_content` (asked for with `include:
//! ["reasoning.encrypted_content"]`), so a reasoning model resumes its thinking on the next
//! turn with nothing kept on the server. `apply_patch` is offered as Codex offers it, a
//! free-form `custom` tool whose input is the patch text itself, constrained by a Lark grammar
//! ([`APPLY_PATCH_GRAMMAR`]); its raw input becomes the tool's `{"input": …}` arguments.
//!
//! Streaming folds the API's typed SSE events ([`events::EventDecoder`]) into the response
//! object the unstreamed call returns, so [`parse_response`] reads both.

mod events;

use super::http_provider::HttpProvider;
use super::openai::parse_arguments;
use super::preset::{KeyHeader, ResolvedProvider};
use super::stream::{Framing, StreamDecoder};
use super::wire::{UNRESERVED, WireFormat, count_at, has_calls, unique_call_ids};
use super::{ContentBlock, ErrorKind, LlmError, LlmRequest, LlmResponse, Message, ReasoningEffort, Role, StopReason, ToolSpec, Usage};
use percent_encoding::utf8_percent_encode;
use serde_json::{Value, json};

pub use events::EventDecoder;

/// A Responses API endpoint (OpenAI, Azure OpenAI).
pub type Responses = HttpProvider<ResponsesFormat>;

/// The tool sent as a free-form `custom` tool rather than a function.
pub const APPLY_PATCH: &str = "apply_patch";

/// The Lark grammar of the free-form `apply_patch` tool: the `*** Begin Patch` envelope as
/// dracode's tool reads it (`src/tools/apply_patch/parse.rs`) — files added (`+` lines, none
/// for an empty file), deleted, or updated (optionally moved) by hunks, the first of which may
/// omit its `@@` header, each optionally ending the file.
pub const APPLY_PATCH_GRAMMAR: &str = r#"start: begin_patch file_op+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?

file_op: add_file | delete_file | update_file
add_file: "*** Add File: " path LF added_line*
delete_file: "*** Delete File: " path LF
update_file: "*** Update File: " path LF move_to? first_hunk hunk*
move_to: "*** Move to: " path LF
path: /(.+)/

added_line: "+" /(.*)/ LF
first_hunk: hunk_header? hunk_body
hunk: hunk_header hunk_body
hunk_header: "@@" LF | "@@ " /(.+)/ LF
hunk_body: hunk_line+ end_of_file?
hunk_line: (" " | "-" | "+") /(.*)/ LF
end_of_file: "*** End of File" LF

%import common.LF
"#;

/// Where a provider's Responses endpoint is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    /// `{base_url}/responses` (OpenAI, and servers reached through the `openai` type).
    OpenAi,
    /// Azure's v1 API: `{endpoint}/openai/v1/responses`.
    AzureV1,
    /// Azure's dated API: `{endpoint}/openai/responses?api-version=…`.
    AzureDated(String),
}

/// The Responses wire format, as one provider's settings shape it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponsesFormat {
    route: Route,
    /// `reasoning.effort`, when set (a summary is asked for too).
    reasoning: Option<ReasoningEffort>,
}

/// Whether a request to `model` asks for its reasoning back encrypted: every model but the
/// ones known not to reason (`gpt-4*`, `gpt-3*`, `gpt-5-chat*`, `chatgpt*`), which OpenAI
/// answers 400 "Encrypted content is not supported with this model." (`param: include`). An
/// Azure deployment's name need not say what it runs; one that refuses gets the request again
/// without it ([`WireFormat::relax_body`]).
pub fn asks_encrypted_reasoning(model: &str) -> bool {
    let model = model.to_ascii_lowercase();
    let model = model.rsplit('/').next().unwrap_or_default();
    !["gpt-4", "gpt-3", "gpt-5-chat", "chatgpt"].iter().any(|p| model.starts_with(p))
}

/// The start of OpenAI's refusal of `include: ["reasoning.encrypted_content"]`.
const NO_ENCRYPTED_REASONING: &str = "Encrypted content is not supported";

impl WireFormat for ResponsesFormat {
    const KEY_HEADER: KeyHeader = KeyHeader::Bearer;

    fn for_provider(settings: &ResolvedProvider) -> Self {
        let route = match (settings.kind.preset().deployment_api_version, &settings.api_version) {
            (None, _) => Route::OpenAi,
            (Some(_), None) => Route::AzureV1,
            (Some(_), Some(version)) => Route::AzureDated(version.clone()),
        };
        ResponsesFormat { route, reasoning: settings.reasoning }
    }

    fn url(&self, base_url: &str, _model: &str) -> String {
        match &self.route {
            Route::OpenAi => format!("{base_url}/responses"),
            Route::AzureV1 => format!("{base_url}/openai/v1/responses"),
            Route::AzureDated(version) => format!("{base_url}/openai/responses?api-version={}", utf8_percent_encode(version, UNRESERVED)),
        }
    }

    fn request_body(&self, model: &str, request: &LlmRequest<'_>) -> Value {
        request_body(model, request, self.reasoning)
    }

    fn parse_response(&self, body: &Value, history: &[Message]) -> Result<LlmResponse, LlmError> {
        let mut response = parse_response(body)?;
        unique_call_ids(&mut response.content, history);
        Ok(response)
    }

    /// Without `include`, for a model that does not reason.
    fn relax_body(&self, body: &mut Value) -> bool {
        body.as_object_mut().is_some_and(|map| map.remove("include").is_some())
    }

    /// The 400 of a model that cannot return encrypted reasoning.
    fn may_refuse_form(&self, error: &LlmError) -> bool {
        error.http_status == Some(400) && error.message.contains(NO_ENCRYPTED_REASONING)
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

/// One tool: `apply_patch` as a free-form `custom` tool with its grammar, every other one as a
/// `function` (not `strict`: dracode's schemas are not written for strict mode).
pub fn tool(spec: &ToolSpec) -> Value {
    if spec.name == APPLY_PATCH {
        return json!({
            "type": "custom",
            "name": spec.name,
            "description": spec.description,
            "format": {"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH_GRAMMAR},
        });
    }
    json!({
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
        "strict": false,
    })
}

/// The request body for `request` to `model`, with `effort` as `reasoning.effort` when set.
pub fn request_body(model: &str, request: &LlmRequest<'_>, effort: Option<ReasoningEffort>) -> Value {
    let mut body = serde_json::Map::new();
    body.insert("model".into(), Value::from(model));
    if !request.system.is_empty() {
        body.insert("instructions".into(), Value::from(request.system));
    }
    body.insert("input".into(), Value::Array(input_items(request.messages)));
    if !request.tools.is_empty() {
        body.insert("tools".into(), ResponsesFormat::render_tools(request.tools));
        body.insert("tool_choice".into(), Value::from("auto"));
    }
    body.insert("store".into(), Value::Bool(false));
    if effort.is_some() || asks_encrypted_reasoning(model) {
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    if let Some(effort) = effort {
        body.insert("reasoning".into(), json!({"effort": effort.as_str(), "summary": "auto"}));
    }
    if let Some(limit) = request.max_tokens {
        body.insert("max_output_tokens".into(), Value::from(limit));
    }
    Value::Object(body)
}

/// The conversation as `input` items, in order.
fn input_items(messages: &[Message]) -> Vec<Value> {
    let mut items = Vec::new();
    // The API refuses an item id twice in one request ("Duplicate item found").
    let mut sent = std::collections::HashSet::new();
    for message in messages {
        match message.role {
            Role::Assistant => {
                let whole = resumes_whole(&message.content);
                for block in &message.content {
                    let first = !matches!(block, ContentBlock::Text { id: Some(id), .. } if !sent.insert(id.clone()));
                    items.extend(assistant_item(block, whole && first));
                }
            }
            Role::User => user_items(message, messages, &mut items),
        }
    }
    items
}

/// Whether every reasoning item of an assistant turn goes back (each has the id and encrypted
/// content it came with): only then may its output messages go back under their ids, since the
/// API refuses a message item without the reasoning item it followed.
fn resumes_whole(turn: &[ContentBlock]) -> bool {
    turn.iter().all(|block| !matches!(block, ContentBlock::Reasoning { .. }) || reasoning_item(block).is_some())
}

/// One block of an assistant turn as an item. Text the API gave an id goes back as that output
/// message (`output_text`, as the API returned it) when it may go back `under_id` (its turn's
/// reasoning goes back too, and no other item of the request has the id); other text
/// (another provider's, a summary, a turn missing reasoning) as a message whose content is a
/// string, the only other form the official schema gives an assistant message. A reasoning
/// block without the encrypted content and id it came with cannot be resumed and is left out.
fn assistant_item(block: &ContentBlock, under_id: bool) -> Option<Value> {
    match block {
        ContentBlock::Text { text, id: Some(id) } if under_id && !text.is_empty() => Some(json!({
            "type": "message", "id": id, "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
        })),
        ContentBlock::Text { text, .. } if !text.is_empty() => Some(json!({"type": "message", "role": "assistant", "content": text})),
        ContentBlock::ToolUse { id, name, input } if name == APPLY_PATCH => {
            Some(json!({"type": "custom_tool_call", "call_id": id, "name": name, "input": custom_input(input)}))
        }
        ContentBlock::ToolUse { id, name, input } => {
            Some(json!({"type": "function_call", "call_id": id, "name": name, "arguments": arguments_string(input)}))
        }
        ContentBlock::Reasoning { .. } => reasoning_item(block),
        _ => None,
    }
}

/// A reasoning block as the item it came as, when it has the id and encrypted content for that.
fn reasoning_item(block: &ContentBlock) -> Option<Value> {
    let ContentBlock::Reasoning { text, signature: Some(encrypted), id: Some(id), .. } = block else { return None };
    let summary: Vec<Value> = (!text.is_empty()).then(|| json!({"type": "summary_text", "text": text})).into_iter().collect();
    Some(json!({"type": "reasoning", "id": id, "summary": summary, "encrypted_content": encrypted}))
}

/// A user turn: its tool results as call outputs (custom or function, as the call was), then
/// its text as a user message (an empty turn still sends one).
fn user_items(message: &Message, conversation: &[Message], items: &mut Vec<Value>) {
    let mut results = 0;
    for block in &message.content {
        if let ContentBlock::ToolResult { tool_use_id, content, .. } = block {
            let kind =
                if call_name(conversation, tool_use_id) == Some(APPLY_PATCH) { "custom_tool_call_output" } else { "function_call_output" };
            items.push(json!({"type": kind, "call_id": tool_use_id, "output": content}));
            results += 1;
        }
    }
    let text = message.text();
    if !text.is_empty() || results == 0 {
        items.push(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}));
    }
}

/// The name of the call `id` in `conversation`.
fn call_name<'a>(conversation: &'a [Message], id: &str) -> Option<&'a str> {
    conversation.iter().flat_map(|m| &m.content).find_map(|block| match block {
        ContentBlock::ToolUse { id: call, name, .. } if call == id => Some(name.as_str()),
        _ => None,
    })
}

/// The raw text of a free-form call: its `input` argument (`patch` and `diff` are the tool's
/// aliases), else the arguments as JSON.
fn custom_input(input: &Value) -> String {
    let field = ["input", "patch", "diff"].iter().find_map(|key| input.get(key).and_then(Value::as_str));
    match (field, input) {
        (Some(text), _) => text.to_string(),
        (None, Value::String(raw)) => raw.clone(),
        (None, other) => other.to_string(),
    }
}

/// The `arguments` string of a function call: its JSON, or the model's own text when that was
/// not JSON.
fn arguments_string(input: &Value) -> String {
    match input {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// The model's answer from a response object (streamed or not).
pub fn parse_response(body: &Value) -> Result<LlmResponse, LlmError> {
    if body.get("status").and_then(Value::as_str) == Some("failed") || body.get("error").is_some_and(Value::is_object) {
        return Err(failure(body));
    }
    let output = body.get("output").and_then(Value::as_array).ok_or_else(|| {
        let shown: String = body.to_string().chars().take(500).collect();
        LlmError::new(ErrorKind::BadResponse, format!("the response has no output: {shown}"))
    })?;
    let mut content = Vec::new();
    let mut refusals = 0;
    for item in output {
        refusals += usize::from(parse_item(item, &mut content));
    }
    // Refused: the only text is the refusal.
    let refused = refusals > 0 && content.iter().filter(|b| matches!(b, ContentBlock::Text { .. })).count() == refusals;
    let stop_reason = stop_reason(body, has_calls(&content), refused);
    Ok(LlmResponse {
        content,
        stop_reason,
        usage: parse_usage(body.get("usage")),
        model: body.get("model").and_then(Value::as_str).map(str::to_string),
    })
}

/// One output item onto `content`; whether it was a refusal. Items dracode has no use for
/// (web search calls, …) are skipped.
fn parse_item(item: &Value, content: &mut Vec<ContentBlock>) -> bool {
    let text = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    match item.get("type").and_then(Value::as_str) {
        Some("message") => {
            let parts = item.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let written: String = parts.iter().filter(|p| p["type"] == "output_text").filter_map(|p| p["text"].as_str()).collect();
            let refusal: String = parts.iter().filter(|p| p["type"] == "refusal").filter_map(|p| p["refusal"].as_str()).collect();
            if !written.is_empty() {
                // Only a whole output message can go back as one.
                let completed = item.get("status").and_then(Value::as_str).is_none_or(|s| s == "completed");
                let id = item.get("id").and_then(Value::as_str).filter(|id| completed && id.starts_with("msg"));
                content.push(ContentBlock::Text { text: written, id: id.map(str::to_string) });
            } else if !refusal.is_empty() {
                content.push(ContentBlock::text(refusal));
                return true;
            }
        }
        Some("function_call") => {
            content.push(ContentBlock::ToolUse { id: text("call_id"), name: text("name"), input: parse_arguments(item.get("arguments")) });
        }
        Some("custom_tool_call") => {
            content.push(ContentBlock::ToolUse { id: text("call_id"), name: text("name"), input: json!({"input": text("input")}) });
        }
        Some("reasoning") => content.push(parse_reasoning(item)),
        _ => {}
    }
    false
}

/// A reasoning item: its summary (else its reasoning text) as the text, its encrypted content
/// as the signature, its id.
fn parse_reasoning(item: &Value) -> ContentBlock {
    let texts = |key: &str| -> Vec<String> {
        let parts = item.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).map(str::to_string).collect()
    };
    let summary = texts("summary");
    let text = if summary.is_empty() { texts("content") } else { summary }.join("\n\n");
    ContentBlock::Reasoning {
        text,
        signature: item.get("encrypted_content").and_then(Value::as_str).map(str::to_string),
        id: item.get("id").and_then(Value::as_str).map(str::to_string),
        redacted: false,
    }
}

/// The stop reason from `status` and `incomplete_details.reason`.
fn stop_reason(body: &Value, has_calls: bool, refused: bool) -> StopReason {
    let status = body.get("status").and_then(Value::as_str);
    let incomplete = body.get("incomplete_details").and_then(|d| d.get("reason")).and_then(Value::as_str);
    match (status, incomplete) {
        (_, Some("max_output_tokens")) => StopReason::MaxTokens,
        (_, Some("content_filter")) => StopReason::ContentFilter,
        _ if has_calls => StopReason::ToolUse,
        _ if refused => StopReason::Refusal,
        (Some("completed") | None, _) => StopReason::EndTurn,
        (Some("incomplete"), Some(other)) => StopReason::Other(other.to_string()),
        (Some(other), _) => StopReason::Other(other.to_string()),
    }
}

/// Usage in the neutral shape (`input_tokens` includes the cached ones, `output_tokens` the
/// reasoning ones, as in the neutral model).
fn parse_usage(usage: Option<&Value>) -> Usage {
    Usage {
        cached_input_tokens: count_at(usage, &["input_tokens_details", "cached_tokens"]),
        reasoning_output_tokens: count_at(usage, &["output_tokens_details", "reasoning_tokens"]),
        ..Usage::from_counts(count_at(usage, &["input_tokens"]), count_at(usage, &["output_tokens"]))
    }
}

/// The error a failed response (`status: failed`, or a `response.failed` event) stands for:
/// transient when the server failed or was rate-limited; a context-window refusal keeps its
/// `context_length_exceeded` code in the message, so the agent compacts.
pub fn failure(body: &Value) -> LlmError {
    let error = body.get("error").filter(|e| e.is_object()).cloned().unwrap_or_else(|| json!({"message": "the response failed"}));
    let message = error.get("message").and_then(Value::as_str).unwrap_or("the response failed");
    let code = error.get("code").and_then(Value::as_str).unwrap_or_default();
    let kind = match code {
        "server_error" | "internal_error" | "overloaded" | "server_is_overloaded" => ErrorKind::Server,
        "rate_limit_exceeded" | "slow_down" => ErrorKind::RateLimit,
        _ => ErrorKind::BadResponse,
    };
    let tag = if code.is_empty() { String::new() } else { format!(" (code {code})") };
    LlmError::new(kind, format!("the response failed: {message}{tag}"))
}

#[cfg(test)]
mod tests;
