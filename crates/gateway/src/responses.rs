//! OpenAI's Responses API (`POST /v1/responses`), as Codex CLI speaks it.
//!
//! Decoding: `instructions` is the system prompt; `input` is a string or items — `message`
//! (user and assistant text; a `developer` or `system` message becomes user text prefixed
//! `[developer] ` / `[system] `, kept where it stands in the conversation rather than moved
//! into the system prompt, so the prompt's cached prefix stays put), `function_call` /
//! `custom_tool_call` (a tool use; a custom call's raw text is the input's `input` string),
//! their `_output` items (tool results), `reasoning` (summary text, encrypted content as the
//! signature, its id). Tools: `function` tools as they are; `custom` (freeform, grammar-bound)
//! tools as a tool taking one string `input`, the grammar appended to the description; other
//! tool types (web search, local shell, tool search) are dropped. `max_output_tokens`.
//!
//! Encoding: the response object, or its typed event stream (`response.created`,
//! `response.in_progress`, per item `response.output_item.added`, its deltas and
//! `response.output_item.done`, then `response.completed` — `response.incomplete` when the
//! output hit the token limit) with `sequence_number`s. A tool use whose name is one of the
//! request's custom tools goes back as a `custom_tool_call`.

use dracode_llm::{ContentBlock, LlmResponse, Role, StopReason, ToolSpec, Usage};
use serde_json::{Value, json};

use crate::{Answer, Call, Context, Format, as_u32, fresh_id, now_secs, push_blocks, sse_frame, str_at};

/// The request body as a [`Call`], or what is wrong with it.
pub(crate) fn decode(body: &Value) -> Result<(Call, Context), crate::Malformed> {
    let model = str_at(body, "model").to_string();
    let system = str_at(body, "instructions").to_string();
    let mut messages = Vec::new();
    match body.get("input") {
        Some(Value::String(text)) => push_blocks(&mut messages, Role::User, vec![ContentBlock::text(text)]),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let (role, block) = item_block(item).map_err(|e| format!("input[{i}]: {e}"))?;
                push_blocks(&mut messages, role, block);
            }
        }
        None | Some(Value::Null) => {}
        Some(_) => return Err("`input` is neither a string nor an array of items".into()),
    }
    let (tools, custom_tools) = tools(body.get("tools"));
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let max_tokens = as_u32(body.get("max_output_tokens"));
    let context = Context { model: model.clone(), stream, custom_tools, include_usage: false };
    Ok((Call { format: Format::OpenAiResponses, model, system, messages, tools, max_tokens, stream, user_agent: None }, context))
}

/// One input item as blocks of a role (no blocks for items the backend has no use for).
fn item_block(item: &Value) -> Result<(Role, Vec<ContentBlock>), crate::Malformed> {
    let field = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_string);
    let call_id = || field("call_id").ok_or_else(|| format!("a `{}` item has no call_id", str_at(item, "type")));
    let kind = item.get("type").and_then(Value::as_str).unwrap_or(if item.get("role").is_some() { "message" } else { "" });
    Ok(match kind {
        "message" => {
            let (role, prefix) = match str_at(item, "role") {
                "user" => (Role::User, ""),
                "assistant" => (Role::Assistant, ""),
                "developer" => (Role::User, "[developer] "),
                "system" => (Role::User, "[system] "),
                other => return Err(format!("message role `{other}` is not user, assistant, developer or system").into()),
            };
            let text = content_text(item.get("content"));
            let id = if role == Role::Assistant { field("id") } else { None };
            (role, vec![ContentBlock::Text { text: format!("{prefix}{text}"), id }])
        }
        "function_call" => {
            let arguments = str_at(item, "arguments");
            let input = serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()));
            (Role::Assistant, vec![ContentBlock::ToolUse { id: call_id()?, name: str_at(item, "name").to_string(), input }])
        }
        "custom_tool_call" => {
            let input = json!({"input": str_at(item, "input")});
            (Role::Assistant, vec![ContentBlock::ToolUse { id: call_id()?, name: str_at(item, "name").to_string(), input }])
        }
        "function_call_output" | "custom_tool_call_output" => {
            let content = content_text(item.get("output"));
            (Role::User, vec![ContentBlock::ToolResult { tool_use_id: call_id()?, content, is_error: false }])
        }
        "reasoning" => {
            let texts = |key: &str| -> Vec<&str> {
                item.get(key)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect()
            };
            let summary = texts("summary");
            let text = if summary.is_empty() { texts("content") } else { summary }.join("\n\n");
            (
                Role::Assistant,
                vec![ContentBlock::Reasoning { text, signature: field("encrypted_content"), id: field("id"), redacted: false }],
            )
        }
        _ => (Role::User, Vec::new()),
    })
}

/// A content list (or string) as text: text parts joined, images and files as placeholders.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| match str_at(p, "type") {
                "input_text" | "output_text" | "text" | "summary_text" | "reasoning_text" => str_at(p, "text").to_string(),
                "input_image" => "[image]".to_string(),
                "input_file" => "[file]".to_string(),
                "refusal" => str_at(p, "refusal").to_string(),
                other => format!("[{other}]"),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The request's tools, and the names of its custom (freeform) ones.
fn tools(wire: Option<&Value>) -> (Vec<ToolSpec>, Vec<String>) {
    let mut tools = Vec::new();
    let mut custom = Vec::new();
    for tool in wire.and_then(Value::as_array).into_iter().flatten() {
        let name = str_at(tool, "name").to_string();
        let description = str_at(tool, "description").to_string();
        match str_at(tool, "type") {
            "function" => {
                let parameters = tool.get("parameters").filter(|p| p.is_object()).cloned();
                let parameters = parameters.unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                tools.push(ToolSpec { name, description, parameters });
            }
            "custom" => {
                let mut description = description;
                if let Some(format) = tool.get("format").filter(|f| str_at(f, "type") == "grammar") {
                    let grammar =
                        format!("\n\nThe `input` must follow this {} grammar:\n{}", str_at(format, "syntax"), str_at(format, "definition"));
                    description.push_str(&grammar);
                }
                let parameters = json!({
                    "type": "object",
                    "properties": {"input": {"type": "string", "description": "The raw text the tool takes (no JSON quoting or escaping beyond this string's)."}},
                    "required": ["input"],
                });
                custom.push(name.clone());
                tools.push(ToolSpec { name, description, parameters });
            }
            _ => {}
        }
    }
    (tools, custom)
}

/// One output item per block of the answer.
fn output_items(response: &LlmResponse, context: &Context) -> Vec<Value> {
    let mut items = Vec::new();
    for block in &response.content {
        let item = match block {
            ContentBlock::Text { text, id } => json!({
                "type": "message", "id": id.clone().unwrap_or_else(|| fresh_id("msg_")), "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }),
            ContentBlock::ToolUse { id, name, input } if context.custom_tools.contains(name) => {
                let raw = match input.get("input").unwrap_or(input) {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                json!({"type": "custom_tool_call", "id": fresh_id("ctc_"), "call_id": id, "name": name, "input": raw, "status": "completed"})
            }
            ContentBlock::ToolUse { id, name, input } => json!({
                "type": "function_call", "id": fresh_id("fc_"), "call_id": id, "name": name,
                "arguments": input.to_string(), "status": "completed",
            }),
            ContentBlock::Reasoning { text, signature, id, .. } => {
                let summary = if text.is_empty() { json!([]) } else { json!([{"type": "summary_text", "text": text}]) };
                json!({"type": "reasoning", "id": id.clone().unwrap_or_else(|| fresh_id("rs_")), "summary": summary, "encrypted_content": signature})
            }
            ContentBlock::ToolResult { .. } => continue,
        };
        items.push(item);
    }
    items
}

/// Responses usage: `input_tokens` includes the cached ones, `output_tokens` the reasoning ones.
fn usage(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_output_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    })
}

/// The backend's answer as a Responses response object, or its event stream.
pub(crate) fn encode(response: &LlmResponse, context: &Context) -> Answer {
    let model = response.model.clone().unwrap_or_else(|| context.model.clone());
    let output = output_items(response, context);
    let incomplete = response.stop_reason == StopReason::MaxTokens;
    let mut object = json!({
        "id": fresh_id("resp_"), "object": "response", "created_at": now_secs(), "model": model,
        "status": if incomplete { "incomplete" } else { "completed" },
        "incomplete_details": if incomplete { json!({"reason": "max_output_tokens"}) } else { Value::Null },
        "error": null, "output": output, "usage": usage(&response.usage),
    });
    if !context.stream {
        return Answer::Json(object);
    }
    let mut events = Events::default();
    let mut started = object.clone();
    started["status"] = json!("in_progress");
    started["output"] = json!([]);
    started["usage"] = Value::Null;
    started["incomplete_details"] = Value::Null;
    events.send("response.created", json!({"response": started.clone()}));
    events.send("response.in_progress", json!({"response": started}));
    let items = object["output"].as_array().cloned().unwrap_or_default();
    for (index, item) in items.iter().enumerate() {
        events.item(index, item);
    }
    let last = if incomplete { "response.incomplete" } else { "response.completed" };
    events.send(last, json!({"response": object.take()}));
    Answer::Sse(events.out)
}

/// The events of one stream, numbered.
#[derive(Default)]
struct Events {
    out: String,
    sequence: u64,
}

impl Events {
    /// One event of `kind` with `fields`.
    fn send(&mut self, kind: &str, mut fields: Value) {
        fields["type"] = json!(kind);
        fields["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        sse_frame(&mut self.out, Some(kind), &fields);
    }

    /// One output item: announced empty, its content as deltas, then whole.
    fn item(&mut self, index: usize, item: &Value) {
        let id = item["id"].clone();
        let mut opening = item.clone();
        opening["status"] = json!("in_progress");
        match str_at(item, "type") {
            "message" => opening["content"] = json!([]),
            "function_call" => opening["arguments"] = json!(""),
            "custom_tool_call" => opening["input"] = json!(""),
            _ => {}
        }
        if str_at(item, "type") == "reasoning" {
            opening.as_object_mut().map(|o| o.remove("status"));
        }
        self.send("response.output_item.added", json!({"output_index": index, "item": opening}));
        let at = |extra: Value| {
            let mut fields = json!({"item_id": id, "output_index": index});
            for (key, value) in extra.as_object().into_iter().flatten() {
                fields[key.as_str()] = value.clone();
            }
            fields
        };
        match str_at(item, "type") {
            "message" => {
                let text = item["content"][0]["text"].clone();
                let empty = json!({"type": "output_text", "text": "", "annotations": []});
                self.send("response.content_part.added", at(json!({"content_index": 0, "part": empty})));
                self.send("response.output_text.delta", at(json!({"content_index": 0, "delta": text})));
                self.send("response.output_text.done", at(json!({"content_index": 0, "text": text})));
                self.send("response.content_part.done", at(json!({"content_index": 0, "part": item["content"][0]})));
            }
            "function_call" => {
                self.send("response.function_call_arguments.delta", at(json!({"delta": item["arguments"]})));
                self.send("response.function_call_arguments.done", at(json!({"arguments": item["arguments"]})));
            }
            "custom_tool_call" => {
                self.send("response.custom_tool_call_input.delta", at(json!({"delta": item["input"]})));
                self.send("response.custom_tool_call_input.done", at(json!({"input": item["input"]})));
            }
            _ => {}
        }
        self.send("response.output_item.done", json!({"output_index": index, "item": item}));
    }
}

/// An error body in OpenAI's shape (Responses and Chat Completions).
pub(crate) fn error(status: u16, message: &str) -> Value {
    let (kind, code) = match status {
        401 => ("authentication_error", json!("invalid_api_key")),
        403 => ("permission_error", Value::Null),
        404 => ("not_found_error", json!("not_found")),
        413 => ("invalid_request_error", json!("request_too_large")),
        429 => ("rate_limit_error", json!("rate_limit_exceeded")),
        500..=599 => ("server_error", json!("server_error")),
        _ => ("invalid_request_error", Value::Null),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{event_names, fixture, fold, sample, without_item_ids};
    use dracode_llm::responses::{EventDecoder, parse_response};

    #[test]
    fn decodes_the_codex_request() {
        let (call, context) = decode(&fixture("openai-responses.json")).unwrap();
        assert_eq!(call.format, Format::OpenAiResponses);
        assert_eq!(call.model, "gpt-5.5");
        assert!(call.stream);
        let names: Vec<&str> = call.tools.iter().map(|t| t.name.as_str()).collect();
        assert!(names.contains(&"exec_command") && names.contains(&"apply_patch"), "{names:?}");
        assert!(!names.contains(&"web_search"));
        assert_eq!(context.custom_tools, ["apply_patch"]);
        let patch = call.tools.iter().find(|t| t.name == "apply_patch").unwrap();
        assert_eq!(patch.parameters["required"], json!(["input"]));
        assert!(patch.description.contains("grammar"), "{}", patch.description);
        let roles: Vec<Role> = call.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
        assert!(call.messages[0].text().starts_with("[developer] "));
        let ContentBlock::ToolUse { id, name, input } = &call.messages[1].content[0] else { panic!() };
        assert_eq!((name.as_str(), input["cmd"].as_str()), ("exec_command", Some("echo hi > out.txt")));
        let ContentBlock::ToolResult { tool_use_id, .. } = &call.messages[2].content[0] else { panic!() };
        assert_eq!(tool_use_id, id);
    }

    #[test]
    fn decodes_custom_calls_and_reasoning() {
        let body = json!({"model": "m", "instructions": "be brief", "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "enc"},
            {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"},
        ], "max_output_tokens": 500});
        let (call, _) = decode(&body).unwrap();
        assert_eq!((call.system.as_str(), call.max_tokens), ("be brief", Some(500)));
        assert_eq!(
            call.messages[1].content,
            vec![
                ContentBlock::Reasoning { text: "plan".into(), signature: Some("enc".into()), id: Some("rs_1".into()), redacted: false },
                ContentBlock::ToolUse { id: "c1".into(), name: "apply_patch".into(), input: json!({"input": "*** Begin Patch"}) },
            ]
        );
        assert_eq!(
            call.messages[2].content,
            vec![ContentBlock::ToolResult { tool_use_id: "c1".into(), content: "ok".into(), is_error: false }]
        );
        assert!(decode(&json!({"input": [{"type": "function_call", "name": "x"}]})).unwrap_err().contains("call_id"));
    }

    #[test]
    fn an_answer_round_trips_through_dracodes_parser() {
        let response = sample();
        let Answer::Json(body) = encode(&response, &Context::default()) else { panic!() };
        let parsed = parse_response(&body).unwrap();
        assert_eq!(without_item_ids(&parsed.content), response.content);
        assert_eq!(parsed.stop_reason, StopReason::ToolUse);
        assert_eq!(parsed.usage, response.usage);
    }

    #[test]
    fn a_streamed_answer_round_trips_and_custom_tools_stay_custom() {
        let mut response = sample();
        response.content.push(ContentBlock::ToolUse {
            id: "call_8".into(),
            name: "apply_patch".into(),
            input: json!({"input": "*** Begin Patch"}),
        });
        let context = Context { stream: true, custom_tools: vec!["apply_patch".into()], ..Context::default() };
        let Answer::Sse(sse) = encode(&response, &context) else { panic!() };
        let names = event_names(&sse);
        assert_eq!(names[..2], ["response.created", "response.in_progress"]);
        assert_eq!(names.last().map(String::as_str), Some("response.completed"));
        assert_eq!(names.iter().filter(|n| *n == "response.output_item.done").count(), 4);
        assert!(sse.contains("\"sequence_number\":0"));
        let (body, complete) = fold(Box::new(EventDecoder::default()), &sse);
        assert!(complete);
        assert_eq!(body["output"][3]["type"], "custom_tool_call");
        assert_eq!(body["output"][3]["input"], "*** Begin Patch");
        let parsed = parse_response(&body).unwrap();
        assert_eq!(without_item_ids(&parsed.content), response.content);
        assert_eq!(parsed.usage, response.usage);
    }
}
