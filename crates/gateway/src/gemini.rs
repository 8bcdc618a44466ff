//! Google's Gemini API (`POST /v1beta/models/{model}:generateContent` and
//! `:streamGenerateContent`), as Gemini CLI speaks it.
//!
//! Decoding: `systemInstruction.parts[].text` is the system prompt; `contents[]` (`user` and
//! `model` turns) hold `text` parts (`thought: true` ones are reasoning, a `thoughtSignature`
//! is kept as a reasoning block's signature), `functionCall` and `functionResponse` parts,
//! inline and file data as placeholders. Gemini's calls may carry no id: a call without one is
//! given `call_<n>` (the n-th call of the request, so the ids stay the same from one request to
//! the next), and a response without one answers the oldest unanswered call of its name.
//! Tools: `functionDeclarations` (`parametersJsonSchema`, else `parameters` with its OpenAPI
//! type names lowercased); other tools (search, code execution) are dropped.
//! `generationConfig.maxOutputTokens`.
//!
//! Encoding: a `GenerateContentResponse` (calls carry the backend's ids, which Gemini CLI
//! sends back in its `functionResponse`s); a stream is that response as one `data:` frame.

use std::collections::VecDeque;

use dracode_llm::{ContentBlock, LlmResponse, Role, StopReason, ToolSpec};
use serde_json::{Value, json};

use crate::{Answer, Call, Context, Format, as_u32, fresh_id, push_blocks, sse_frame, str_at};

/// The request body for `model` as a [`Call`], or what is wrong with it.
pub(crate) fn decode(body: &Value, model: &str, stream: bool) -> Result<(Call, Context), crate::Malformed> {
    let system = body
        .pointer("/systemInstruction/parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n\n");
    let contents = body.get("contents").and_then(Value::as_array).ok_or("`contents` is missing or not an array")?;
    let mut ids = Ids::default();
    let mut messages = Vec::new();
    for (i, content) in contents.iter().enumerate() {
        let role = match content.get("role").and_then(Value::as_str) {
            Some("model") => Role::Assistant,
            Some("user" | "function" | "tool") | None => Role::User,
            Some(other) => return Err(format!("contents[{i}].role `{other}` is not user or model").into()),
        };
        let parts = content.get("parts").and_then(Value::as_array).ok_or(format!("contents[{i}] has no parts"))?;
        let mut blocks = Vec::new();
        for part in parts {
            part_blocks(part, &mut ids, &mut blocks);
        }
        push_blocks(&mut messages, role, blocks);
    }
    let tools = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
        .flatten()
        .map(declaration)
        .collect();
    let max_tokens = as_u32(body.pointer("/generationConfig/maxOutputTokens"));
    let context = Context { model: model.to_string(), stream, ..Context::default() };
    Ok((Call { format: Format::Gemini, model: model.to_string(), system, messages, tools, max_tokens, stream, user_agent: None }, context))
}

/// Call ids: those synthesized so far, and the calls not answered yet (name, id).
#[derive(Default)]
struct Ids {
    calls: usize,
    open: VecDeque<(String, String)>,
}

impl Ids {
    /// The id of a call: its own, else `call_<n>`.
    fn call(&mut self, name: &str, own: Option<&str>) -> String {
        self.calls += 1;
        let id = own.filter(|id| !id.is_empty()).map_or_else(|| format!("call_{}", self.calls), str::to_string);
        self.open.push_back((name.to_string(), id.clone()));
        id
    }

    /// The id a response answers: its own, else the oldest open call of its name, else the
    /// oldest open call.
    fn answer(&mut self, name: &str, own: Option<&str>) -> String {
        let position = match own.filter(|id| !id.is_empty()) {
            Some(id) => self.open.iter().position(|(_, open)| open == id),
            None => self.open.iter().position(|(open, _)| open == name).or(if self.open.is_empty() { None } else { Some(0) }),
        };
        let found = position.and_then(|p| self.open.remove(p)).map(|(_, id)| id);
        found.or_else(|| own.map(str::to_string)).unwrap_or_else(|| {
            self.calls += 1;
            format!("call_{}", self.calls)
        })
    }
}

/// The signatures Google documents as placeholders for a function call that has none (the
/// model never signed it): Gemini CLI puts the first on calls it did not get signed. They
/// carry no reasoning, and no other provider could take them back: dropped.
const PLACEHOLDER_SIGNATURES: [&str; 2] = ["skip_thought_signature_validator", "context_engineering_is_the_way_to_go"];

/// One part as blocks onto `out`.
fn part_blocks(part: &Value, ids: &mut Ids, out: &mut Vec<ContentBlock>) {
    let signature =
        part.get("thoughtSignature").and_then(Value::as_str).filter(|sig| !PLACEHOLDER_SIGNATURES.contains(sig)).map(str::to_string);
    if part.get("thought").and_then(Value::as_bool) == Some(true) {
        out.push(ContentBlock::Reasoning { text: str_at(part, "text").to_string(), signature, id: None, redacted: false });
        return;
    }
    if signature.is_some() {
        out.push(ContentBlock::Reasoning { text: String::new(), signature, id: None, redacted: false });
    }
    if let Some(text) = part.get("text").and_then(Value::as_str) {
        if !text.is_empty() {
            out.push(ContentBlock::text(text));
        }
    } else if let Some(call) = part.get("functionCall") {
        let name = str_at(call, "name");
        let id = ids.call(name, call.get("id").and_then(Value::as_str));
        let input = call.get("args").filter(|a| !a.is_null()).cloned().unwrap_or_else(|| json!({}));
        out.push(ContentBlock::ToolUse { id, name: name.to_string(), input });
    } else if let Some(response) = part.get("functionResponse") {
        let id = ids.answer(str_at(response, "name"), response.get("id").and_then(Value::as_str));
        let body = response.get("response").cloned().unwrap_or(Value::Null);
        let (content, is_error) = match (body.get("output"), body.get("error")) {
            (_, Some(error)) => (text_or_json(error), true),
            (Some(output), None) => (text_or_json(output), false),
            (None, None) => (text_or_json(&body), false),
        };
        out.push(ContentBlock::ToolResult { tool_use_id: id, content, is_error });
    } else if part.get("inlineData").is_some() || part.get("fileData").is_some() {
        out.push(ContentBlock::text("[file]"));
    } else if let Some(code) = part.get("executableCode") {
        out.push(ContentBlock::text(str_at(code, "code")));
    } else if let Some(result) = part.get("codeExecutionResult") {
        out.push(ContentBlock::text(str_at(result, "output")));
    }
}

/// A string as itself, anything else as JSON.
fn text_or_json(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A function declaration as a tool.
fn declaration(declaration: &Value) -> ToolSpec {
    let parameters = match (declaration.get("parametersJsonSchema"), declaration.get("parameters")) {
        (Some(schema), _) if schema.is_object() => schema.clone(),
        (_, Some(schema)) if schema.is_object() => lowercase_types(schema),
        _ => json!({"type": "object", "properties": {}}),
    };
    ToolSpec { name: str_at(declaration, "name").to_string(), description: str_at(declaration, "description").to_string(), parameters }
}

/// An OpenAPI-style schema (`"type": "OBJECT"`) with JSON Schema's lowercase type names.
fn lowercase_types(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| match (key.as_str(), value) {
                    ("type", Value::String(kind)) => (key.clone(), Value::String(kind.to_lowercase())),
                    _ => (key.clone(), lowercase_types(value)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(lowercase_types).collect()),
        other => other.clone(),
    }
}

/// The answer's parts; a reasoning block's signature goes on the next part that is not a
/// thought (a function call, text), as Gemini sends it.
fn parts(response: &LlmResponse) -> Vec<Value> {
    let mut parts = Vec::new();
    let mut signature: Option<String> = None;
    for block in &response.content {
        let mut part = match block {
            ContentBlock::Reasoning { text, signature: sig, .. } if text.is_empty() => {
                signature = sig.clone().or(signature);
                continue;
            }
            ContentBlock::Reasoning { text, signature: sig, .. } => {
                // Gemini CLI keeps no thought parts in its history: the signature rides on
                // the next part, where Gemini itself puts it.
                parts.push(json!({"text": text, "thought": true}));
                signature = sig.clone().or(signature);
                continue;
            }
            ContentBlock::Text { text, .. } => json!({"text": text}),
            ContentBlock::ToolUse { id, name, input } => json!({"functionCall": {"id": id, "name": name, "args": input}}),
            ContentBlock::ToolResult { .. } => continue,
        };
        if let Some(sig) = signature.take() {
            part["thoughtSignature"] = json!(sig);
        }
        parts.push(part);
    }
    if let Some(sig) = signature {
        parts.push(json!({"text": "", "thought": true, "thoughtSignature": sig}));
    }
    parts
}

/// The backend's answer as a `GenerateContentResponse`, or a stream of it.
pub(crate) fn encode(response: &LlmResponse, context: &Context) -> Answer {
    let finish = match response.stop_reason {
        StopReason::MaxTokens => "MAX_TOKENS",
        StopReason::ContentFilter | StopReason::Refusal => "SAFETY",
        StopReason::MalformedToolCall => "MALFORMED_FUNCTION_CALL",
        _ => "STOP",
    };
    let usage = &response.usage;
    let mut metadata = json!({
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": usage.output_tokens.saturating_sub(usage.reasoning_output_tokens),
        "totalTokenCount": usage.input_tokens + usage.output_tokens,
    });
    if usage.cached_input_tokens > 0 {
        metadata["cachedContentTokenCount"] = json!(usage.cached_input_tokens);
    }
    if usage.reasoning_output_tokens > 0 {
        metadata["thoughtsTokenCount"] = json!(usage.reasoning_output_tokens);
    }
    let body = json!({
        "candidates": [{"content": {"role": "model", "parts": parts(response)}, "finishReason": finish, "index": 0}],
        "usageMetadata": metadata,
        "modelVersion": response.model.clone().unwrap_or_else(|| context.model.clone()),
        "responseId": fresh_id("resp_"),
    });
    if !context.stream {
        return Answer::Json(body);
    }
    let mut out = String::new();
    sse_frame(&mut out, None, &body);
    Answer::Sse(out)
}

/// An error body in Gemini's shape.
pub(crate) fn error(status: u16, message: &str) -> Value {
    let kind = match status {
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        500..=599 => "INTERNAL",
        _ => "INVALID_ARGUMENT",
    };
    json!({"error": {"code": status, "message": message, "status": kind}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{fixture, fold, sample, without_item_ids};
    use dracode_llm::gemini::{ChunkDecoder, parse_response};

    #[test]
    fn decodes_the_gemini_cli_request() {
        let (call, context) = decode(&fixture("gemini.json"), "gemini-2.5-pro", true).unwrap();
        assert_eq!((call.format, call.model.as_str(), call.stream), (Format::Gemini, "gemini-2.5-pro", true));
        assert_eq!(context.model, "gemini-2.5-pro");
        assert!(!call.system.is_empty());
        assert!(call.tools.iter().any(|t| t.name == "run_shell_command" && t.parameters["properties"]["command"].is_object()));
        let roles: Vec<Role> = call.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
        let call_block = call.messages[1].content.iter().find(|b| matches!(b, ContentBlock::ToolUse { .. })).unwrap();
        let ContentBlock::ToolUse { id, name, .. } = call_block else { panic!() };
        assert_eq!(name, "run_shell_command");
        let ContentBlock::ToolResult { tool_use_id, .. } = &call.messages[2].content[0] else { panic!() };
        assert_eq!(tool_use_id, id);
        // Gemini CLI's placeholder signature (`skip_thought_signature_validator`) is no reasoning.
        assert!(!call.messages[1].content.iter().any(|b| matches!(b, ContentBlock::Reasoning { .. })), "{:?}", call.messages[1]);
    }

    #[test]
    fn synthesizes_call_ids_by_order_and_name() {
        let body = json!({"contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "a", "args": {}}}, {"functionCall": {"name": "b", "args": {"x": 1}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "b", "response": {"output": "B"}}},
                                       {"functionResponse": {"name": "a", "response": {"error": "A failed"}}}]},
            {"role": "model", "parts": [{"functionCall": {"name": "a", "args": {}}}]},
        ], "tools": [{"functionDeclarations": [{"name": "a", "parameters": {"type": "OBJECT", "properties": {"p": {"type": "STRING"}}}}]},
                     {"googleSearch": {}}],
           "generationConfig": {"maxOutputTokens": 77}});
        let (call, _) = decode(&body, "m", false).unwrap();
        let ids: Vec<&str> = call.messages[1]
            .content
            .iter()
            .filter_map(|b| if let ContentBlock::ToolUse { id, .. } = b { Some(id.as_str()) } else { None })
            .collect();
        assert_eq!(ids, ["call_1", "call_2"]);
        assert_eq!(
            call.messages[2].content,
            vec![
                ContentBlock::ToolResult { tool_use_id: "call_2".into(), content: "B".into(), is_error: false },
                ContentBlock::ToolResult { tool_use_id: "call_1".into(), content: "A failed".into(), is_error: true },
            ]
        );
        assert!(matches!(&call.messages[3].content[0], ContentBlock::ToolUse { id, .. } if id == "call_3"));
        assert_eq!(call.tools[0].parameters["properties"]["p"]["type"], "string");
        assert_eq!(call.max_tokens, Some(77));
        assert!(decode(&json!({}), "m", false).unwrap_err().contains("contents"));
    }

    #[test]
    fn answers_round_trip_through_dracodes_parser_streamed_or_not() {
        let response = sample();
        // Gemini's parser numbers calls itself, and the signature travels on the next part.
        let mut expected = response.content.clone();
        if let ContentBlock::ToolUse { id, .. } = &mut expected[2] {
            *id = "call_1".into();
        }
        expected[0] = ContentBlock::Reasoning { text: "Let me think.".into(), signature: None, id: None, redacted: false };
        expected.insert(1, ContentBlock::Reasoning { text: String::new(), signature: Some("sig-abc".into()), id: None, redacted: false });
        let Answer::Json(body) = encode(&response, &Context::default()) else { panic!() };
        assert_eq!(body["candidates"][0]["content"]["parts"][2]["functionCall"]["id"], "call_7");
        assert_eq!(body["candidates"][0]["content"]["parts"][1]["thoughtSignature"], "sig-abc");
        let parsed = parse_response(&body, &[]).unwrap();
        assert_eq!(without_item_ids(&parsed.content), expected);
        assert_eq!((parsed.stop_reason, parsed.usage), (StopReason::ToolUse, response.usage));
        let Answer::Sse(sse) = encode(&response, &Context { stream: true, ..Context::default() }) else { panic!() };
        assert!(sse.starts_with("data: {"));
        let (body, complete) = fold(Box::new(ChunkDecoder::default()), &sse);
        assert!(complete);
        let parsed = parse_response(&body, &[]).unwrap();
        assert_eq!(without_item_ids(&parsed.content), expected);
        assert_eq!(parsed.usage, response.usage);
    }
}
