//! Google Gemini `generateContent`: `POST {base_url}/v1beta/models/{model}:generateContent`.
//!
//! The key travels in the `x-goog-api-key` header, never in the URL (URLs end up in logs). The
//! system prompt is `systemInstruction`; roles are `user` and `model`; tool calls are
//! `functionCall` parts (no ids: dracode numbers them, unique within the conversation) answered
//! by `functionResponse` parts in the next user turn, `{"output": …}` or `{"error": …}` as the
//! API reference asks; tool schemas are reduced to the subset Gemini accepts
//! ([`declaration`]). Usage: `promptTokenCount` (cached content
//! included) is input, `candidatesTokenCount + thoughtsTokenCount` is output (the thoughts also
//! as reasoning).
//!
//! Reasoning: the `reasoning` setting is `generationConfig.thinkingConfig`
//! ([`super::reasoning::gemini_thinking_config`]: a `thinkingLevel` from Gemini 3 on, a
//! `thinkingBudget` before, thought summaries included). Thought parts (`thought: true`) become
//! [`ContentBlock::Reasoning`]; a `thoughtSignature` on any other part becomes a reasoning block
//! with no text just before the block of that part, and goes back on the same part (Gemini 3
//! refuses function calls in the history without theirs).

use super::http_provider::HttpProvider;
use super::preset::{KeyHeader, ResolvedProvider};
use super::reasoning::gemini_thinking_config;
use super::stream::{Frame, Framing, StreamDecoder, stream_error};
use super::wire::{WireFormat, calls_before, has_calls};
use super::{ContentBlock, ErrorKind, LlmError, LlmRequest, LlmResponse, Message, ReasoningEffort, Role, StopReason, ToolSpec, Usage};
use serde_json::{Value, json};
use std::collections::HashMap;

/// A Gemini model's generateContent endpoint.
pub type GeminiGenerateContent = HttpProvider<GenerateContentFormat>;

/// The Gemini generateContent wire format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenerateContentFormat {
    /// How hard the model thinks, when the `reasoning` setting is set.
    pub reasoning: Option<ReasoningEffort>,
}

impl WireFormat for GenerateContentFormat {
    const KEY_HEADER: KeyHeader = KeyHeader::Named("x-goog-api-key");

    fn for_provider(settings: &ResolvedProvider) -> Self {
        GenerateContentFormat { reasoning: settings.reasoning }
    }

    fn url(&self, base_url: &str, model: &str) -> String {
        let model = model.strip_prefix("models/").unwrap_or(model);
        format!("{base_url}/v1beta/models/{model}:generateContent")
    }

    fn request_body(&self, model: &str, request: &LlmRequest<'_>) -> Value {
        let mut body = request_body(request);
        if let Some(effort) = self.reasoning {
            body["generationConfig"]["thinkingConfig"] = gemini_thinking_config(model, effort);
        }
        body
    }

    const FRAMING: Framing = Framing::Sse;

    fn stream_url(&self, base_url: &str, model: &str) -> String {
        let model = model.strip_prefix("models/").unwrap_or(model);
        format!("{base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse")
    }

    /// The body is the same; the URL says "stream".
    fn stream_body(&self, _body: &mut Value) {}

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::<ChunkDecoder>::default()
    }

    fn parse_response(&self, body: &Value, history: &[Message]) -> Result<LlmResponse, LlmError> {
        parse_response(body, history)
    }

    /// Gemini answers a bad key with 400 INVALID_ARGUMENT / API_KEY_INVALID: an auth error.
    fn refine_error(&self, mut error: LlmError) -> LlmError {
        if error.kind == ErrorKind::BadResponse
            && (error.message.contains("API key not valid") || error.message.contains("API_KEY_INVALID"))
        {
            error.kind = ErrorKind::Auth;
        }
        error
    }

    fn render_tools(specs: &[ToolSpec]) -> Value {
        json!([{"functionDeclarations": specs.iter().map(declaration).collect::<Vec<_>>()}])
    }
}

/// One Gemini function declaration; the schema reduced to the OpenAPI subset Gemini accepts.
pub fn declaration(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name,
        "description": spec.description,
        "parameters": schema_subset(&spec.parameters),
    })
}

/// Drops the JSON Schema keywords Gemini's `Schema` object rejects (`default`,
/// `additionalProperties`, `$schema`, `title`, …) and turns `"type": ["x","null"]` into
/// `"type": "x", "nullable": true`.
pub fn schema_subset(schema: &Value) -> Value {
    const KEEP: &[&str] = &[
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "properties",
        "required",
        "items",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "anyOf",
        "propertyOrdering",
    ];
    match schema {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (key, value) in map {
                if !KEEP.contains(&key.as_str()) {
                    continue;
                }
                let value = match key.as_str() {
                    "properties" => match value {
                        Value::Object(props) => Value::Object(props.iter().map(|(k, v)| (k.clone(), schema_subset(v))).collect()),
                        other => other.clone(),
                    },
                    "items" => schema_subset(value),
                    // Gemini knows only these formats (uint32, uint64, … are rejected).
                    "format" => match value.as_str() {
                        Some("float" | "double" | "int32" | "int64" | "enum" | "date-time") => value.clone(),
                        _ => continue,
                    },
                    "anyOf" => match value {
                        Value::Array(items) => Value::Array(items.iter().map(schema_subset).collect()),
                        other => other.clone(),
                    },
                    "type" => match value {
                        Value::Array(types) => {
                            let non_null: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                            if non_null.len() < types.len() {
                                out.insert("nullable".into(), Value::Bool(true));
                            }
                            non_null.first().map(|t| (*t).clone()).unwrap_or(Value::from("string"))
                        }
                        other => other.clone(),
                    },
                    _ => value.clone(),
                };
                out.insert(key.clone(), value);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// The generateContent body for `request`.
pub fn request_body(request: &LlmRequest<'_>) -> Value {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let contents: Vec<Value> = request.messages.iter().filter_map(|m| convert(m, &mut names)).collect();
    let mut body = json!({
        "systemInstruction": {"parts": [{"text": request.system}]},
        "contents": contents,
    });
    if !request.tools.is_empty() {
        body["tools"] = GenerateContentFormat::render_tools(request.tools);
    }
    if let Some(limit) = request.max_tokens {
        body["generationConfig"] = json!({"maxOutputTokens": limit});
    }
    body
}

/// One message as a Gemini `Content`; `None` when it has no parts. `names` maps call ids to
/// function names, for the responses. A thought signature goes on the part of the block after
/// it (a part of its own when none follows); thoughts go back as thought parts.
fn convert<'m>(message: &'m Message, names: &mut HashMap<&'m str, &'m str>) -> Option<Value> {
    let mut parts = Vec::new();
    let mut signature: Option<&str> = None;
    let mut push = |mut part: Value, signature: &mut Option<&str>| {
        if let Some(signature) = signature.take() {
            part["thoughtSignature"] = Value::from(signature);
        }
        parts.push(part);
    };
    for block in &message.content {
        match block {
            ContentBlock::Text { text, .. } if !text.is_empty() => push(json!({"text": text}), &mut signature),
            ContentBlock::Text { .. } => {}
            ContentBlock::Reasoning { text, signature: sig, .. } if text.is_empty() => signature = sig.as_deref().or(signature),
            ContentBlock::Reasoning { text, signature: sig, .. } => {
                let mut part = json!({"text": text, "thought": true});
                if let Some(sig) = sig {
                    part["thoughtSignature"] = Value::from(sig.as_str());
                }
                push(part, &mut None);
            }
            ContentBlock::ToolUse { id, name, input } => {
                names.insert(id, name);
                let args = if input.is_object() { input.clone() } else { json!({}) };
                push(json!({"functionCall": {"name": name, "args": args}}), &mut signature);
            }
            ContentBlock::ToolResult { tool_use_id, content, is_error } => {
                let name = names.get(tool_use_id.as_str()).copied().unwrap_or_default();
                let response = if *is_error { json!({"error": content}) } else { json!({"output": content}) };
                push(json!({"functionResponse": {"name": name, "response": response}}), &mut None);
            }
        }
    }
    if let Some(signature) = signature {
        push(json!({"text": "", "thoughtSignature": signature}), &mut None);
    }
    // Function responses first: they must answer the previous model turn before any text.
    parts.sort_by_key(|p| p.get("functionResponse").is_none());
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "model",
    };
    (!parts.is_empty()).then(|| json!({"role": role, "parts": parts}))
}

/// The response to a request whose conversation was `history`.
pub fn parse_response(body: &Value, history: &[Message]) -> Result<LlmResponse, LlmError> {
    let usage = usage(body.get("usageMetadata"));
    let model = body.get("modelVersion").and_then(Value::as_str).map(str::to_string);
    let Some(candidate) = body.get("candidates").and_then(|c| c.get(0)) else {
        if let Some(reason) = body.pointer("/promptFeedback/blockReason").and_then(Value::as_str) {
            let content = vec![ContentBlock::text(format!("prompt blocked: {reason}"))];
            return Ok(LlmResponse { content, stop_reason: StopReason::ContentFilter, usage, model });
        }
        return Err(LlmError::new(ErrorKind::BadResponse, "Gemini response has no candidates"));
    };
    let earlier = calls_before(history);
    let mut content = Vec::new();
    for part in candidate.pointer("/content/parts").and_then(Value::as_array).into_iter().flatten() {
        let signature = part.get("thoughtSignature").and_then(Value::as_str).map(str::to_string);
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            let text = part.get("text").and_then(Value::as_str).unwrap_or_default().to_string();
            content.push(ContentBlock::Reasoning { text, signature, id: None, redacted: false });
            continue;
        }
        if signature.is_some() {
            content.push(ContentBlock::Reasoning { text: String::new(), signature, id: None, redacted: false });
        }
        if let Some(text) = part.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            content.push(ContentBlock::text(text));
        }
        if let Some(call) = part.get("functionCall") {
            let name = call.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            let input = call.get("args").cloned().unwrap_or_else(|| json!({}));
            let n = earlier + content.iter().filter(|b| matches!(b, ContentBlock::ToolUse { .. })).count() + 1;
            content.push(ContentBlock::ToolUse { id: format!("call_{n}"), name, input });
        }
    }
    let has_calls = has_calls(&content);
    let stop_reason = match candidate.get("finishReason").and_then(Value::as_str) {
        _ if has_calls => StopReason::ToolUse,
        None | Some("STOP") => StopReason::EndTurn,
        Some("MAX_TOKENS") => StopReason::MaxTokens,
        Some("SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY") => StopReason::ContentFilter,
        Some("MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL") => StopReason::MalformedToolCall,
        Some(other) => StopReason::Other(other.to_string()),
    };
    Ok(LlmResponse { content, stop_reason, usage, model })
}

/// Folds the `GenerateContentResponse`s of a stream into one: the parts of the first
/// candidate in order (consecutive text parts of one kind joined), the last `finishReason`,
/// `modelVersion` and `usageMetadata` (cumulative: the last one is the total). The stream has
/// no end event, so it is whole when it closes after a finish reason (or a blocked prompt).
#[derive(Debug, Default)]
pub struct ChunkDecoder {
    parts: Vec<Value>,
    finish_reason: Option<Value>,
    usage: Option<Value>,
    model: Option<Value>,
    prompt_feedback: Option<Value>,
}

impl StreamDecoder for ChunkDecoder {
    fn feed(&mut self, frame: &Frame) -> Result<(), LlmError> {
        let chunk = frame.json()?;
        if chunk.get("error").is_some() {
            return Err(stream_error(&chunk));
        }
        let keep = |slot: &mut Option<Value>, value: Option<&Value>| {
            if let Some(value) = value.filter(|v| !v.is_null()) {
                *slot = Some(value.clone());
            }
        };
        keep(&mut self.usage, chunk.get("usageMetadata"));
        keep(&mut self.model, chunk.get("modelVersion"));
        keep(&mut self.prompt_feedback, chunk.get("promptFeedback"));
        let candidate = chunk.get("candidates").and_then(|c| c.get(0));
        keep(&mut self.finish_reason, candidate.and_then(|c| c.get("finishReason")));
        for part in candidate.and_then(|c| c.pointer("/content/parts")).and_then(Value::as_array).into_iter().flatten() {
            self.add_part(part);
        }
        Ok(())
    }

    fn ended(&self) -> bool {
        false
    }

    fn complete(&self) -> bool {
        self.finish_reason.is_some() || self.prompt_feedback.as_ref().is_some_and(|f| f.get("blockReason").is_some())
    }

    fn into_body(self: Box<Self>) -> Value {
        let mut body = json!({});
        if self.finish_reason.is_some() || !self.parts.is_empty() {
            body["candidates"] = json!([{"content": {"role": "model", "parts": self.parts}, "finishReason": self.finish_reason}]);
        }
        for (key, value) in [("usageMetadata", self.usage), ("modelVersion", self.model), ("promptFeedback", self.prompt_feedback)] {
            if let Some(value) = value {
                body[key] = value;
            }
        }
        body
    }
}

impl ChunkDecoder {
    /// One streamed part: text joins the text part before it when both are thoughts or both
    /// not, and the new piece carries no signature (the earlier one keeps its own).
    fn add_part(&mut self, part: &Value) {
        let is_thought = |p: &Value| p.get("thought").and_then(Value::as_bool) == Some(true);
        let only_text = |p: &Value, signed: bool| {
            p.as_object().is_some_and(|o| o.keys().all(|k| k == "text" || k == "thought" || (signed && k == "thoughtSignature")))
        };
        if let (Some(last), Some(more)) = (self.parts.last_mut(), part.get("text").and_then(Value::as_str))
            && only_text(last, true)
            && only_text(part, false)
            && is_thought(last) == is_thought(part)
        {
            let joined = format!("{}{more}", last.get("text").and_then(Value::as_str).unwrap_or_default());
            last["text"] = Value::String(joined);
            return;
        }
        self.parts.push(part.clone());
    }
}

/// `usageMetadata`, normalised: cached content is part of the prompt count; thoughts are output.
fn usage(meta: Option<&Value>) -> Usage {
    let count = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_u64).unwrap_or(0);
    let thoughts = count("thoughtsTokenCount");
    Usage {
        cached_input_tokens: count("cachedContentTokenCount"),
        reasoning_output_tokens: thoughts,
        ..Usage::from_counts(count("promptTokenCount"), count("candidatesTokenCount") + thoughts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::list_files_spec;

    #[test]
    fn gemini_drops_unsupported_keywords_and_maps_nullable() {
        let decl = declaration(&list_files_spec());
        let params = &decl["parameters"];
        assert!(params.get("additionalProperties").is_none());
        assert!(params["properties"]["recursive"].get("default").is_none());
        assert_eq!(params["properties"]["directory"]["type"], "string");
        assert_eq!(params["properties"]["directory"]["nullable"], true);
        let unsigned = schema_subset(&json!({"type": "integer", "format": "uint64", "minimum": 0}));
        assert!(unsigned.get("format").is_none(), "{unsigned}");
        assert_eq!(schema_subset(&json!({"type": "integer", "format": "int64"}))["format"], "int64");
    }

    fn conversation() -> Vec<Message> {
        vec![
            Message::user_text("go"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::ToolUse { id: "call_1".into(), name: "read_file".into(), input: json!({"file_path": "a"}) },
                    ContentBlock::ToolUse { id: "call_2".into(), name: "list_files".into(), input: json!({}) },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::ToolResult { tool_use_id: "call_1".into(), content: "x".into(), is_error: false },
                    ContentBlock::ToolResult { tool_use_id: "call_2".into(), content: "Error [IO_ERROR]: no".into(), is_error: true },
                ],
            },
        ]
    }

    #[test]
    fn request_uses_system_instruction_roles_and_function_parts() {
        let messages = conversation();
        let tools = [ToolSpec {
            name: "read_file".into(),
            description: "r".into(),
            parameters: json!({"type": "object", "additionalProperties": false, "properties": {"n": {"type": "integer", "format": "uint64", "default": 1}}}),
        }];
        let body = request_body(&LlmRequest { system: "sys", messages: &messages, tools: &tools, max_tokens: Some(99) });
        assert_eq!(body["systemInstruction"]["parts"][0]["text"], "sys");
        assert_eq!(body["contents"][1]["role"], "model");
        assert_eq!(body["contents"][1]["parts"][0]["functionCall"], json!({"name": "read_file", "args": {"file_path": "a"}}));
        assert_eq!(body["contents"][2]["parts"][0]["functionResponse"], json!({"name": "read_file", "response": {"output": "x"}}));
        assert_eq!(body["contents"][2]["parts"][1]["functionResponse"]["response"], json!({"error": "Error [IO_ERROR]: no"}));
        let params = &body["tools"][0]["functionDeclarations"][0]["parameters"];
        assert!(params.get("additionalProperties").is_none() && params["properties"]["n"].get("default").is_none());
        assert!(params["properties"]["n"].get("format").is_none());
        assert_eq!(body["generationConfig"]["maxOutputTokens"], 99);
    }

    #[test]
    fn a_response_stream_folds_into_the_unstreamed_answer_with_the_last_usage() {
        use crate::stream::{Framing, decode};
        let stream = include_str!("../../../tests/fixtures/streams/gemini_function_call.sse");
        let (body, complete) = decode(Framing::Sse, Box::<ChunkDecoder>::default(), stream).unwrap();
        assert!(complete);
        let response = parse_response(&body, &[]).unwrap();
        assert_eq!(
            response.content,
            [
                ContentBlock::text("The bug is on line 3."),
                ContentBlock::ToolUse {
                    id: "call_1".into(),
                    name: "edit_file".into(),
                    input: json!({"file_path": "a.rs", "old_string": "1", "new_string": "2"})
                },
            ]
        );
        let u = response.usage;
        assert_eq!((u.input_tokens, u.output_tokens, u.cached_input_tokens, u.reasoning_output_tokens), (300, 65, 128, 24));
        let cut = &stream[..stream.find("\r\n\r\n").unwrap() + 4];
        assert!(!decode(Framing::Sse, Box::<ChunkDecoder>::default(), cut).unwrap().1, "no finishReason yet: cut");
    }

    #[test]
    fn response_maps_calls_usage_and_finish_reasons() {
        let body = json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"text": "thinking…", "thought": true},
                {"functionCall": {"name": "read_file", "args": {"file_path": "b"}}}
            ]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "thoughtsTokenCount": 5, "cachedContentTokenCount": 40, "totalTokenCount": 115},
            "modelVersion": "gemini-2.5-flash"
        });
        let r = parse_response(&body, &conversation()).unwrap();
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert!(
            matches!(&r.content[..], [ContentBlock::Reasoning { text, .. }, ContentBlock::ToolUse { id, .. }] if id == "call_3" && text == "thinking…")
        );
        assert_eq!(
            (
                r.usage.input_tokens,
                r.usage.output_tokens,
                r.usage.cached_input_tokens,
                r.usage.reasoning_output_tokens,
                r.usage.total_tokens
            ),
            (100, 15, 40, 5, 115)
        );
        let finish = |reason: &str| {
            parse_response(&json!({"candidates": [{"content": {"parts": [{"text": "t"}]}, "finishReason": reason}]}), &[])
                .unwrap()
                .stop_reason
        };
        assert_eq!(finish("SAFETY"), StopReason::ContentFilter);
        assert_eq!(finish("MALFORMED_FUNCTION_CALL"), StopReason::MalformedToolCall);
        assert_eq!(finish("MAX_TOKENS"), StopReason::MaxTokens);
        let blocked = parse_response(&json!({"promptFeedback": {"blockReason": "SAFETY"}}), &[]).unwrap();
        assert_eq!(blocked.stop_reason, StopReason::ContentFilter);
        assert!(parse_response(&json!({}), &[]).is_err());
    }

    #[test]
    fn thought_signatures_go_back_on_the_parts_they_came_with() {
        let body = json!({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "Plan: read b.", "thought": true},
            {"functionCall": {"name": "read_file", "args": {"file_path": "b"}}, "thoughtSignature": "SIG_CALL"},
            {"functionCall": {"name": "list_files", "args": {}}},
            {"text": "", "thoughtSignature": "SIG_TAIL"}
        ]}, "finishReason": "STOP"}]});
        let answer = parse_response(&body, &[]).unwrap();
        let signature = |s: &str| ContentBlock::Reasoning { text: String::new(), signature: Some(s.into()), id: None, redacted: false };
        assert_eq!(answer.content[1], signature("SIG_CALL"));
        assert_eq!(answer.content[4], signature("SIG_TAIL"));
        let messages = vec![Message::user_text("go"), Message { role: Role::Assistant, content: answer.content }];
        let sent = request_body(&LlmRequest { system: "", messages: &messages, tools: &[], max_tokens: None });
        assert_eq!(sent["contents"][1]["parts"], body["candidates"][0]["content"]["parts"], "the parts as they came");
        let format = GenerateContentFormat { reasoning: Some(ReasoningEffort::High) };
        let request = LlmRequest { system: "", messages: &messages, tools: &[], max_tokens: Some(99) };
        let config = &format.request_body("gemini-3-pro-preview", &request)["generationConfig"];
        assert_eq!(config, &json!({"maxOutputTokens": 99, "thinkingConfig": {"thinkingLevel": "high", "includeThoughts": true}}));
        assert!(
            GenerateContentFormat::default().request_body("gemini-3-pro-preview", &request)["generationConfig"]
                .get("thinkingConfig")
                .is_none()
        );
    }

    #[test]
    fn streamed_text_pieces_join_the_signed_piece_before_them() {
        let mut decoder = ChunkDecoder::default();
        for part in [json!({"text": "Hel", "thoughtSignature": "S"}), json!({"text": "lo"}), json!({"text": "", "thoughtSignature": "T"})] {
            decoder.add_part(&part);
        }
        assert_eq!(decoder.parts, [json!({"text": "Hello", "thoughtSignature": "S"}), json!({"text": "", "thoughtSignature": "T"})]);
    }

    #[test]
    fn snapshot_request_body() {
        let messages = conversation();
        let tools = [list_files_spec()];
        insta::assert_json_snapshot!(request_body(&LlmRequest { system: "sys", messages: &messages, tools: &tools, max_tokens: Some(99) }));
    }

    #[test]
    fn snapshot_endpoint() {
        use crate::preset::ProviderType;
        use crate::snapshot::{endpoint, settings};
        let settings = settings(ProviderType::Gemini, "https://generativelanguage.googleapis.com/", "models/gemini-2.5-flash");
        insta::assert_json_snapshot!(endpoint::<GenerateContentFormat>(&settings));
    }

    #[test]
    fn snapshot_parse_response() {
        let body = json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"text": "thinking…", "thought": true},
                {"text": "Reading it."},
                {"functionCall": {"name": "read_file", "args": {"file_path": "b"}}}
            ]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "thoughtsTokenCount": 5, "cachedContentTokenCount": 40, "totalTokenCount": 115},
            "modelVersion": "gemini-2.5-flash"
        });
        insta::assert_json_snapshot!(parse_response(&body, &conversation()).unwrap());
    }
}
