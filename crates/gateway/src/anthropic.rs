//! Anthropic's Messages API (`POST /v1/messages`), as Claude Code speaks it.
//!
//! Decoding: `system` (a string, or text blocks joined with blank lines); `messages` whose
//! content is a string or blocks — `text`, `tool_use`, `tool_result` (its content a string or
//! text blocks), `thinking` / `redacted_thinking` (kept as reasoning with their signature),
//! images and documents as a `[image]` / `[document]` placeholder; a mid-conversation
//! `role: "system"` message (a beta Claude Code uses) becomes user text prefixed `[system] `;
//! tools with an `input_schema` (server tools, which have none, are dropped); `max_tokens`;
//! `stream`.
//!
//! Encoding: the `message` object, or its event stream (`message_start`, per block
//! `content_block_start` / `_delta` / `_stop`, `message_delta` with the stop reason and usage,
//! `message_stop`), the shapes dracode's own Anthropic client reads.

use dracode_llm::{ContentBlock, LlmResponse, Role, StopReason, ToolSpec, Usage};
use serde_json::{Value, json};

use crate::{Answer, Call, Context, Format, as_u32, fresh_id, push_blocks, sse_frame, str_at};

/// The request body as a [`Call`], or what is wrong with it.
pub(crate) fn decode(body: &Value) -> Result<(Call, Context), String> {
    let model = str_at(body, "model").to_string();
    let system = match body.get("system") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n\n"),
        Some(_) => return Err("`system` is neither a string nor an array of text blocks".into()),
    };
    let wire = body.get("messages").and_then(Value::as_array).ok_or("`messages` is missing or not an array")?;
    let mut messages = Vec::new();
    for (i, message) in wire.iter().enumerate() {
        let (role, prefix) = match str_at(message, "role") {
            "user" => (Role::User, ""),
            "assistant" => (Role::Assistant, ""),
            "system" => (Role::User, "[system] "),
            other => return Err(format!("messages[{i}].role `{other}` is not user, assistant or system")),
        };
        let blocks = blocks(message.get("content"), prefix).map_err(|e| format!("messages[{i}]: {e}"))?;
        push_blocks(&mut messages, role, blocks);
    }
    let tools = body.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let tools = tools
        .iter()
        .filter_map(|t| {
            let schema = t.get("input_schema")?;
            Some(ToolSpec {
                name: str_at(t, "name").to_string(),
                description: str_at(t, "description").to_string(),
                parameters: schema.clone(),
            })
        })
        .collect();
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let max_tokens = as_u32(body.get("max_tokens"));
    let context = Context { model: model.clone(), stream, ..Context::default() };
    Ok((Call { format: Format::AnthropicMessages, model, system, messages, tools, max_tokens, stream }, context))
}

/// A message's content as blocks; `prefix` goes before each text.
fn blocks(content: Option<&Value>, prefix: &str) -> Result<Vec<ContentBlock>, String> {
    let wire = match content {
        Some(Value::String(text)) => return Ok(vec![ContentBlock::text(format!("{prefix}{text}"))]),
        Some(Value::Array(blocks)) => blocks,
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(_) => return Err("`content` is neither a string nor an array of blocks".into()),
    };
    let mut out = Vec::new();
    for (i, block) in wire.iter().enumerate() {
        let field = |key: &str| block.get(key).and_then(Value::as_str).map(str::to_string);
        let converted = match str_at(block, "type") {
            "text" => ContentBlock::text(format!("{prefix}{}", str_at(block, "text"))),
            "image" => ContentBlock::text("[image]"),
            "document" => ContentBlock::text("[document]"),
            "tool_use" => ContentBlock::ToolUse {
                id: field("id").ok_or(format!("content[{i}] (tool_use) has no id"))?,
                name: field("name").ok_or(format!("content[{i}] (tool_use) has no name"))?,
                input: block.get("input").cloned().unwrap_or_else(|| json!({})),
            },
            "tool_result" => ContentBlock::ToolResult {
                tool_use_id: field("tool_use_id").ok_or(format!("content[{i}] (tool_result) has no tool_use_id"))?,
                content: result_text(block.get("content")),
                is_error: block.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            },
            "thinking" => ContentBlock::Reasoning {
                text: str_at(block, "thinking").to_string(),
                signature: field("signature"),
                id: None,
                redacted: false,
            },
            "redacted_thinking" => ContentBlock::Reasoning { text: String::new(), signature: field("data"), id: None, redacted: true },
            // Server tool calls and their results, containers, …: nothing the backend can use.
            _ => continue,
        };
        out.push(converted);
    }
    Ok(out)
}

/// A tool result's content: a string, or its text blocks joined (images as `[image]`).
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| match str_at(p, "type") {
                "text" => str_at(p, "text").to_string(),
                "image" => "[image]".to_string(),
                other => format!("[{other}]"),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The stop reason as Messages names it.
fn stop_reason(reason: &StopReason) -> &'static str {
    match reason {
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::Refusal | StopReason::ContentFilter => "refusal",
        StopReason::PauseTurn => "pause_turn",
        StopReason::EndTurn | StopReason::MalformedToolCall | StopReason::Other(_) => "end_turn",
    }
}

/// Messages usage: its `input_tokens` excludes the cache reads and writes.
fn usage(usage: &Usage) -> Value {
    let fresh = usage.input_tokens.saturating_sub(usage.cached_input_tokens + usage.cache_creation_input_tokens);
    json!({
        "input_tokens": fresh,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cached_input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
    })
}

/// One content block of the answer (tool results, which answers never hold, are `None`).
fn block(block: &ContentBlock) -> Option<Value> {
    Some(match block {
        ContentBlock::Text { text, .. } => json!({"type": "text", "text": text}),
        ContentBlock::ToolUse { id, name, input } => json!({"type": "tool_use", "id": id, "name": name, "input": input}),
        ContentBlock::Reasoning { signature, redacted: true, .. } => json!({"type": "redacted_thinking", "data": signature}),
        ContentBlock::Reasoning { text, signature, .. } => {
            json!({"type": "thinking", "thinking": text, "signature": signature.clone().unwrap_or_default()})
        }
        ContentBlock::ToolResult { .. } => return None,
    })
}

/// The backend's answer in the Messages format.
pub(crate) fn encode(response: &LlmResponse, context: &Context) -> Answer {
    let model = response.model.clone().unwrap_or_else(|| context.model.clone());
    let id = fresh_id("msg_");
    let content: Vec<Value> = response.content.iter().filter_map(block).collect();
    if !context.stream {
        return Answer::Json(json!({
            "id": id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop_reason(&response.stop_reason), "stop_sequence": null, "usage": usage(&response.usage),
        }));
    }
    let mut out = String::new();
    let mut start_usage = usage(&response.usage);
    start_usage["output_tokens"] = json!(1);
    let message = json!({
        "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": null, "stop_sequence": null, "usage": start_usage,
    });
    sse_frame(&mut out, Some("message_start"), &json!({"type": "message_start", "message": message}));
    for (index, block) in content.iter().enumerate() {
        stream_block(&mut out, index, block);
    }
    let delta = json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(&response.stop_reason), "stop_sequence": null},
        "usage": usage(&response.usage),
    });
    sse_frame(&mut out, Some("message_delta"), &delta);
    sse_frame(&mut out, Some("message_stop"), &json!({"type": "message_stop"}));
    Answer::Sse(out)
}

/// One block as `content_block_start`, its deltas and `content_block_stop`.
fn stream_block(out: &mut String, index: usize, block: &Value) {
    let (start, deltas) = match str_at(block, "type") {
        "text" => (json!({"type": "text", "text": ""}), vec![json!({"type": "text_delta", "text": block["text"]})]),
        "tool_use" => (
            json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
            vec![json!({"type": "input_json_delta", "partial_json": block["input"].to_string()})],
        ),
        "thinking" => (
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            vec![
                json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                json!({"type": "signature_delta", "signature": block["signature"]}),
            ],
        ),
        _ => (block.clone(), Vec::new()),
    };
    sse_frame(out, Some("content_block_start"), &json!({"type": "content_block_start", "index": index, "content_block": start}));
    for delta in deltas {
        sse_frame(out, Some("content_block_delta"), &json!({"type": "content_block_delta", "index": index, "delta": delta}));
    }
    sse_frame(out, Some("content_block_stop"), &json!({"type": "content_block_stop", "index": index}));
}

/// An error body in the Messages shape.
pub(crate) fn error(status: u16, message: &str) -> Value {
    let kind = match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}
