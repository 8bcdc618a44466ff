//! OpenAI's Chat Completions API (`POST /v1/chat/completions`), as opencode speaks it (through
//! its OpenAI-compatible provider).
//!
//! Decoding: `system` and `developer` messages make the system prompt (joined with blank
//! lines); `user` messages (a string or content parts; images, audio and files as
//! placeholders); `assistant` messages (content, `reasoning_content`, `tool_calls` whose
//! `arguments` are a JSON string); `tool` messages (results, by `tool_call_id`). Tools:
//! `function` tools. `max_completion_tokens`, else `max_tokens`.
//!
//! Encoding: a `chat.completion`, or `chat.completion.chunk`s (the role, reasoning and text
//! deltas, one chunk per tool call with its index, id, name and whole arguments, the finish
//! reason, the usage chunk when `stream_options.include_usage` asked for it) ended by
//! `data: [DONE]`. Reasoning goes back as `reasoning_content`; its signature has no place here.

use dracode_llm::{ContentBlock, LlmResponse, Role, StopReason, ToolSpec, Usage};
use serde_json::{Value, json};

use crate::{Answer, Call, Context, Format, as_u32, fresh_id, now_secs, push_blocks, sse_frame, str_at};

/// The request body as a [`Call`], or what is wrong with it.
pub(crate) fn decode(body: &Value) -> Result<(Call, Context), crate::Malformed> {
    let model = str_at(body, "model").to_string();
    let wire = body.get("messages").and_then(Value::as_array).ok_or("`messages` is missing or not an array")?;
    let mut system: Vec<String> = Vec::new();
    let mut messages = Vec::new();
    for (i, message) in wire.iter().enumerate() {
        let text = content_text(message.get("content"));
        match str_at(message, "role") {
            "system" | "developer" => system.push(text),
            "user" if text.is_empty() => {}
            "user" => push_blocks(&mut messages, Role::User, vec![ContentBlock::text(text)]),
            "assistant" => {
                push_blocks(&mut messages, Role::Assistant, assistant(message, text).map_err(|e| format!("messages[{i}]: {e}"))?);
            }
            "tool" => {
                let id = message.get("tool_call_id").and_then(Value::as_str).ok_or(format!("messages[{i}] (tool) has no tool_call_id"))?;
                let result = ContentBlock::ToolResult { tool_use_id: id.to_string(), content: text, is_error: false };
                push_blocks(&mut messages, Role::User, vec![result]);
            }
            other => return Err(format!("messages[{i}].role `{other}` is not system, developer, user, assistant or tool").into()),
        }
    }
    let tools = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| str_at(t, "type") == "function")
        .filter_map(|t| t.get("function"))
        .map(|f| ToolSpec {
            name: str_at(f, "name").to_string(),
            description: str_at(f, "description").to_string(),
            parameters: f
                .get("parameters")
                .filter(|p| p.is_object())
                .cloned()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        })
        .collect();
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let include_usage = body.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false);
    let max_tokens = as_u32(body.get("max_completion_tokens")).or_else(|| as_u32(body.get("max_tokens")));
    let context = Context { model: model.clone(), stream, custom_tools: Vec::new(), include_usage };
    let system = system.join("\n\n");
    Ok((Call { format: Format::ChatCompletions, model, system, messages, tools, max_tokens, stream, user_agent: None }, context))
}

/// An assistant message's reasoning, text and tool calls.
fn assistant(message: &Value, text: String) -> Result<Vec<ContentBlock>, crate::Malformed> {
    let mut blocks = Vec::new();
    let reasoning = message.get("reasoning_content").or_else(|| message.get("reasoning")).and_then(Value::as_str);
    if let Some(reasoning) = reasoning.filter(|r| !r.is_empty()) {
        blocks.push(ContentBlock::Reasoning { text: reasoning.to_string(), signature: None, id: None, redacted: false });
    }
    if !text.is_empty() {
        blocks.push(ContentBlock::text(text));
    }
    for (j, call) in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let id = call.get("id").and_then(Value::as_str).ok_or(format!("tool_calls[{j}] has no id"))?;
        let function = call.get("function").ok_or(format!("tool_calls[{j}] has no function"))?;
        let input = match function.get("arguments") {
            Some(Value::String(raw)) if raw.trim().is_empty() => json!({}),
            Some(Value::String(raw)) => serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone())),
            Some(other) if other.is_object() => other.clone(),
            _ => json!({}),
        };
        blocks.push(ContentBlock::ToolUse { id: id.to_string(), name: str_at(function, "name").to_string(), input });
    }
    Ok(blocks)
}

/// A message's content: a string, or its parts joined (non-text parts as placeholders).
fn content_text(content: Option<&Value>) -> String {
    crate::parts_text(content, &[("image_url", "[image]"), ("input_audio", "[audio]"), ("file", "[file]")])
}

/// The finish reason as Chat Completions names it.
fn finish_reason(reason: &StopReason) -> &'static str {
    match reason {
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::Refusal | StopReason::ContentFilter => "content_filter",
        _ => "stop",
    }
}

/// Chat Completions usage.
fn usage(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_output_tokens},
    })
}

/// The answer's reasoning, text and tool calls.
fn parts(response: &LlmResponse) -> (String, String, Vec<Value>) {
    let (mut reasoning, mut text, mut calls) = (String::new(), String::new(), Vec::new());
    for block in &response.content {
        match block {
            ContentBlock::Text { text: more, .. } => text.push_str(more),
            ContentBlock::Reasoning { text: more, .. } => reasoning.push_str(more),
            ContentBlock::ToolUse { id, name, input } => {
                calls.push(json!({"id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}}));
            }
            ContentBlock::ToolResult { .. } => {}
        }
    }
    (reasoning, text, calls)
}

/// The backend's answer as a `chat.completion`, or its chunks.
pub(crate) fn encode(response: &LlmResponse, context: &Context) -> Answer {
    let model = response.model.clone().unwrap_or_else(|| context.model.clone());
    let (reasoning, text, calls) = parts(response);
    let finish = finish_reason(&response.stop_reason);
    let id = fresh_id("chatcmpl-");
    let created = now_secs();
    if !context.stream {
        let mut message = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
        if !reasoning.is_empty() {
            message["reasoning_content"] = json!(reasoning);
        }
        if !calls.is_empty() {
            message["tool_calls"] = json!(calls);
        }
        return Answer::Json(json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage(&response.usage),
        }));
    }
    let mut out = String::new();
    let mut chunk = |choices: Value, usage: Option<Value>| {
        let mut data = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices});
        if let Some(usage) = usage {
            data["usage"] = usage;
        }
        sse_frame(&mut out, None, &data);
    };
    let delta = |delta: Value| json!([{"index": 0, "delta": delta, "finish_reason": null}]);
    chunk(delta(json!({"role": "assistant", "content": ""})), None);
    if !reasoning.is_empty() {
        chunk(delta(json!({"reasoning_content": reasoning})), None);
    }
    if !text.is_empty() {
        chunk(delta(json!({"content": text})), None);
    }
    for (index, call) in calls.iter().enumerate() {
        let mut call = call.clone();
        call["index"] = json!(index);
        chunk(delta(json!({"tool_calls": [call]})), None);
    }
    chunk(json!([{"index": 0, "delta": {}, "finish_reason": finish}]), None);
    if context.include_usage {
        chunk(json!([]), Some(usage(&response.usage)));
    }
    out.push_str("data: [DONE]\n\n");
    Answer::Sse(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{fixture, fold, sample};
    use dracode_llm::openai::{ChunkDecoder, parse_response};

    #[test]
    fn decodes_the_opencode_request() {
        let (call, context) = decode(&fixture("chat-completions.json")).unwrap();
        assert_eq!(call.format, Format::ChatCompletions);
        assert!(call.stream && context.include_usage);
        assert_eq!(call.max_tokens, Some(32000));
        assert!(!call.system.is_empty());
        assert!(call.tools.iter().any(|t| t.name == "bash"));
        let roles: Vec<Role> = call.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
        let ContentBlock::ToolUse { id, name, input } = &call.messages[1].content[0] else { panic!("{:?}", call.messages[1]) };
        assert_eq!((name.as_str(), input["command"].as_str()), ("bash", Some("echo hi > out.txt")));
        let ContentBlock::ToolResult { tool_use_id, .. } = &call.messages[2].content[0] else { panic!() };
        assert_eq!(tool_use_id, id);
    }

    #[test]
    fn merges_system_and_developer_and_groups_tool_results() {
        let body = json!({"model": "m", "max_completion_tokens": 9, "messages": [
            {"role": "system", "content": "a"}, {"role": "developer", "content": [{"type": "text", "text": "b"}]},
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{\"k\":1}"}},
                {"id": "y", "type": "function", "function": {"name": "f", "arguments": ""}}]},
            {"role": "tool", "tool_call_id": "x", "content": "1"}, {"role": "tool", "tool_call_id": "y", "content": "2"}]});
        let (call, _) = decode(&body).unwrap();
        assert_eq!((call.system.as_str(), call.max_tokens), ("a\n\nb", Some(9)));
        assert_eq!(call.messages.len(), 3);
        assert_eq!(call.messages[1].content[1], ContentBlock::ToolUse { id: "y".into(), name: "f".into(), input: json!({}) });
        assert_eq!(call.messages[2].content.len(), 2);
        assert!(decode(&json!({"messages": [{"role": "tool", "content": "1"}]})).unwrap_err().contains("tool_call_id"));
    }

    #[test]
    fn answers_round_trip_through_dracodes_parser_streamed_or_not() {
        let response = sample();
        let expected: Vec<ContentBlock> = response.content[1..].to_vec();
        let Answer::Json(body) = encode(&response, &Context::default()) else { panic!() };
        assert_eq!(body["choices"][0]["message"]["reasoning_content"], "Let me think.");
        let parsed = parse_response(&body).unwrap();
        assert_eq!(parsed.content, expected);
        assert_eq!((parsed.stop_reason, parsed.usage), (StopReason::ToolUse, response.usage));
        let context = Context { stream: true, include_usage: true, ..Context::default() };
        let Answer::Sse(sse) = encode(&response, &context) else { panic!() };
        assert!(sse.ends_with("data: [DONE]\n\n"));
        let (body, complete) = fold(Box::new(ChunkDecoder::default()), &sse);
        assert!(complete);
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
        let parsed = parse_response(&body).unwrap();
        assert_eq!(parsed.content, expected);
        assert_eq!(parsed.usage, response.usage);
    }
}
