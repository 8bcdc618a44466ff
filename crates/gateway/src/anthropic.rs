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
pub(crate) fn decode(body: &Value) -> Result<(Call, Context), crate::Malformed> {
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
            other => return Err(format!("messages[{i}].role `{other}` is not user, assistant or system").into()),
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
    Ok((Call { format: Format::AnthropicMessages, model, system, messages, tools, max_tokens, stream, user_agent: None }, context))
}

/// A message's content as blocks; `prefix` goes before each text.
fn blocks(content: Option<&Value>, prefix: &str) -> Result<Vec<ContentBlock>, crate::Malformed> {
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
    crate::parts_text(content, &[("image", "[image]")])
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{event_names, fixture, fold, sample};
    use dracode_llm::anthropic::{EventDecoder, parse_response};

    #[test]
    fn decodes_the_claude_code_request() {
        let (call, context) = decode(&fixture("anthropic-messages.json")).unwrap();
        assert_eq!(call.format, Format::AnthropicMessages);
        assert_eq!(call.model, "claude-sonnet-4-5");
        assert!(call.stream && context.stream);
        assert_eq!(call.max_tokens, Some(32000));
        assert!(call.system.contains("Claude"), "{}", call.system);
        assert!(call.tools.iter().any(|t| t.name == "Bash" && t.parameters["properties"]["command"].is_object()));
        let roles: Vec<Role> = call.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
        let ContentBlock::ToolUse { id, name, input } = &call.messages[1].content[0] else { panic!("{:?}", call.messages[1]) };
        assert_eq!((name.as_str(), input["command"].as_str()), ("Bash", Some("echo hi > out.txt")));
        let ContentBlock::ToolResult { tool_use_id, is_error, .. } = &call.messages[2].content[0] else { panic!() };
        assert_eq!((tool_use_id, *is_error), (id, false));
    }

    #[test]
    fn decodes_system_messages_thinking_and_block_results() {
        let body = json!({
            "model": "m", "system": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "system", "content": "note"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s1"},
                    {"type": "redacted_thinking", "data": "enc"},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": true,
                    "content": [{"type": "text", "text": "no"}, {"type": "image", "source": {}}]}]}],
            "tools": [{"name": "Read", "input_schema": {"type": "object"}}, {"type": "web_search_20250305", "name": "web_search"}],
        });
        let (call, _) = decode(&body).unwrap();
        assert_eq!(call.system, "one\n\ntwo");
        assert_eq!(call.messages[0].content, vec![ContentBlock::text("hi"), ContentBlock::text("[system] note")]);
        assert_eq!(
            call.messages[1].content[..2],
            [
                ContentBlock::Reasoning { text: "hmm".into(), signature: Some("s1".into()), id: None, redacted: false },
                ContentBlock::Reasoning { text: String::new(), signature: Some("enc".into()), id: None, redacted: true },
            ]
        );
        assert_eq!(
            call.messages[2].content,
            vec![ContentBlock::ToolResult { tool_use_id: "t1".into(), content: "no\n[image]".into(), is_error: true }]
        );
        assert_eq!(call.tools.len(), 1);
        assert!(!call.stream);
    }

    #[test]
    fn refuses_a_malformed_body_naming_what_is_wrong() {
        let err = decode(&json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]})).unwrap_err();
        assert!(err.contains("messages[0].role"), "{err}");
        assert!(decode(&json!({"model": "m"})).unwrap_err().contains("messages"));
    }

    #[test]
    fn an_answer_round_trips_through_dracodes_parser() {
        let response = sample();
        let context = Context { model: "asked".into(), ..Context::default() };
        let Answer::Json(body) = encode(&response, &context) else { panic!() };
        assert_eq!(body["usage"]["input_tokens"], 70);
        let parsed = parse_response(&body).unwrap();
        assert_eq!(parsed.content, response.content);
        assert_eq!(parsed.stop_reason, StopReason::ToolUse);
        assert_eq!((parsed.usage.input_tokens, parsed.usage.cached_input_tokens, parsed.usage.output_tokens), (100, 30, 20));
        assert_eq!(parsed.model.as_deref(), Some("backend-model"));
    }

    #[test]
    fn a_streamed_answer_round_trips_through_dracodes_decoder() {
        let response = sample();
        let Answer::Sse(sse) = encode(&response, &Context { stream: true, ..Context::default() }) else { panic!() };
        let names = event_names(&sse);
        assert_eq!(names.first().map(String::as_str), Some("message_start"));
        assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
        assert_eq!(names.iter().filter(|n| *n == "content_block_start").count(), 3);
        let (body, complete) = fold(Box::new(EventDecoder::default()), &sse);
        assert!(complete);
        let parsed = parse_response(&body).unwrap();
        assert_eq!(parsed.content, response.content);
        assert_eq!(parsed.stop_reason, StopReason::ToolUse);
        assert_eq!((parsed.usage.input_tokens, parsed.usage.output_tokens), (100, 20));
    }
}
