//! Ollama's native chat API, `POST {base_url}/api/chat`: streamed as NDJSON (`stream: true`,
//! one chunk per line, the last with `done: true` and the counts) unless the provider sets
//! `stream = false`, when the body says `stream: false` and the answer is one JSON object.
//!
//! It differs from Chat Completions in small ways that matter on the wire: tool-call arguments
//! are JSON objects (not strings), tool results are `role: "tool"` messages naming the tool
//! (`tool_name`, as the API documents, plus `tool_call_id`, which some model renderers use to
//! pair results with calls), the output limit is `options.num_predict`, and usage comes as
//! `prompt_eval_count` / `eval_count`. Recent servers give each call an `id`; older ones give
//! none, and dracode makes one up, unique within the conversation. A server that is not running
//! is a `network` error saying so.
//!
//! The `reasoning` setting is `think`: the level itself for `gpt-oss` models (which take `low`,
//! `medium`, `high`), `true` for every other model (which only turn thinking on or off). The
//! answer's `message.thinking` becomes reasoning, and goes back as the assistant message's
//! `thinking`.

use super::http_provider::HttpProvider;
use super::openai::ChatCompletionsFormat;
use super::preset::{KeyHeader, ResolvedProvider};
use super::stream::{Frame, Framing, StreamDecoder, stream_error};
use super::wire::{WireFormat, calls_before, has_calls};
use super::{ContentBlock, ErrorKind, LlmError, LlmRequest, LlmResponse, Message, Role, StopReason, ToolSpec, Usage};
use serde_json::{Value, json};
use std::collections::HashMap;

/// An Ollama server's native chat endpoint.
pub type OllamaChat = HttpProvider<OllamaChatFormat>;

/// Ollama's native chat wire format. A key, when set, is sent as a bearer token, for servers
/// behind an authenticating proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OllamaChatFormat {
    /// The server, with a scheme, for the "is it running?" hint.
    server: String,
    /// `think`, when the `reasoning` setting is set.
    think: Option<Value>,
}

/// `base_url` with a scheme: `OLLAMA_HOST` is often written without one (`127.0.0.1:11434`).
fn with_scheme(base_url: &str) -> String {
    if base_url.contains("://") { base_url.to_string() } else { format!("http://{base_url}") }
}

impl WireFormat for OllamaChatFormat {
    const KEY_HEADER: KeyHeader = KeyHeader::Bearer;

    fn for_provider(settings: &ResolvedProvider) -> Self {
        let levels = settings.model.as_deref().is_some_and(|m| m.contains("gpt-oss"));
        let think = settings.reasoning.map(|effort| if levels { Value::from(effort.as_str()) } else { Value::Bool(true) });
        OllamaChatFormat { server: with_scheme(settings.base_url.as_deref().unwrap_or_default().trim_end_matches('/')), think }
    }

    fn url(&self, base_url: &str, _model: &str) -> String {
        format!("{}/api/chat", with_scheme(base_url))
    }

    fn request_body(&self, model: &str, request: &LlmRequest<'_>) -> Value {
        let mut body = request_body(model, request);
        if let Some(think) = &self.think {
            body["think"] = think.clone();
        }
        body
    }

    fn parse_response(&self, body: &Value, history: &[Message]) -> Result<LlmResponse, LlmError> {
        parse_response(body, history)
    }

    /// A refused connection means no server; a timeout is a slow model, not a missing server.
    fn refine_error(&self, mut error: LlmError) -> LlmError {
        if error.kind == ErrorKind::Network && !error.message.contains("timed out") && !error.message.contains("stream was cut") {
            error.message = format!("cannot reach Ollama at {}: is `ollama serve` running? ({})", self.server, error.message);
        }
        error
    }

    const FRAMING: Framing = Framing::Ndjson;

    fn stream_body(&self, body: &mut Value) {
        body["stream"] = Value::Bool(true);
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::<LineDecoder>::default()
    }

    /// Tools as Chat Completions declares them.
    fn render_tools(specs: &[ToolSpec]) -> Value {
        ChatCompletionsFormat::render_tools(specs)
    }
}

/// The `/api/chat` body for `request`.
pub fn request_body(model: &str, request: &LlmRequest<'_>) -> Value {
    let mut messages = vec![json!({"role": "system", "content": request.system})];
    let mut names: HashMap<&str, &str> = HashMap::new();
    for message in request.messages {
        messages.extend(convert(message, &mut names));
    }
    let mut body = json!({"model": model, "messages": messages, "stream": false});
    if !request.tools.is_empty() {
        body["tools"] = OllamaChatFormat::render_tools(request.tools);
    }
    if let Some(limit) = request.max_tokens {
        body["options"] = json!({"num_predict": limit});
    }
    body
}

/// One conversation message as Ollama messages; `names` maps call ids to tool names.
fn convert<'m>(message: &'m Message, names: &mut HashMap<&'m str, &'m str>) -> Vec<Value> {
    let mut out = Vec::new();
    let text = message.text();
    match message.role {
        Role::Assistant => {
            let calls: Vec<Value> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolUse { id, name, input } => {
                        names.insert(id, name);
                        let arguments = if input.is_object() { input.clone() } else { json!({}) };
                        Some(json!({"id": id, "function": {"name": name, "arguments": arguments}}))
                    }
                    _ => None,
                })
                .collect();
            let mut m = json!({"role": "assistant", "content": text});
            let thinking: Vec<&str> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Reasoning { text, .. } if !text.is_empty() => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            if !thinking.is_empty() {
                m["thinking"] = Value::from(thinking.join("\n"));
            }
            if !calls.is_empty() {
                m["tool_calls"] = Value::Array(calls);
            }
            out.push(m);
        }
        Role::User => {
            for block in &message.content {
                if let ContentBlock::ToolResult { tool_use_id, content, .. } = block {
                    let name = names.get(tool_use_id.as_str()).copied().unwrap_or_default();
                    out.push(json!({"role": "tool", "content": content, "tool_name": name, "tool_call_id": tool_use_id}));
                }
            }
            if !text.is_empty() {
                out.push(json!({"role": "user", "content": text}));
            }
        }
    }
    out
}

/// The response to `request`; calls without an `id` get one numbered after the calls already
/// in `history`.
pub fn parse_response(body: &Value, history: &[Message]) -> Result<LlmResponse, LlmError> {
    let bad = |what: &str| LlmError::new(ErrorKind::BadResponse, format!("Ollama response {what}"));
    let message = body.get("message").filter(|m| m.is_object()).ok_or_else(|| bad("has no `message`"))?;
    let mut content = Vec::new();
    if let Some(thinking) = message.get("thinking").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        content.push(ContentBlock::Reasoning { text: thinking.to_string(), signature: None, id: None, redacted: false });
    }
    if let Some(text) = message.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        content.push(ContentBlock::text(text));
    }
    let earlier = calls_before(history);
    for (i, call) in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let function = call.get("function").ok_or_else(|| bad("has a tool call without `function`"))?;
        let name = function.get("name").and_then(Value::as_str).ok_or_else(|| bad("has a tool call without a name"))?;
        let input = match function.get("arguments") {
            Some(Value::String(raw)) => serde_json::from_str(raw).unwrap_or(Value::String(raw.clone())),
            Some(args) => args.clone(),
            None => json!({}),
        };
        let id = match call.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => id.to_string(),
            _ => format!("call_{}", earlier + i + 1),
        };
        content.push(ContentBlock::ToolUse { id, name: name.to_string(), input });
    }
    let has_calls = has_calls(&content);
    let stop_reason = match body.get("done_reason").and_then(Value::as_str) {
        _ if has_calls => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        None | Some("stop") => StopReason::EndTurn,
        Some(other) => StopReason::Other(other.to_string()),
    };
    let count = |key: &str| body.get(key).and_then(Value::as_u64).unwrap_or(0);
    Ok(LlmResponse {
        content,
        stop_reason,
        usage: Usage::from_counts(count("prompt_eval_count"), count("eval_count")),
        model: body.get("model").and_then(Value::as_str).map(str::to_string),
    })
}

/// Folds `/api/chat` NDJSON lines into one answer: message text and thinking concatenated, tool calls
/// gathered, and from the `done: true` line the model, `done_reason` and the counts.
#[derive(Debug, Default)]
pub struct LineDecoder {
    text: String,
    thinking: String,
    calls: Vec<Value>,
    last: Option<Value>,
}

impl StreamDecoder for LineDecoder {
    fn feed(&mut self, frame: &Frame) -> Result<(), LlmError> {
        let line = frame.json()?;
        if line.get("error").is_some() {
            return Err(stream_error(&line));
        }
        let message = line.get("message");
        self.text.push_str(message.and_then(|m| m.get("content")).and_then(Value::as_str).unwrap_or_default());
        self.thinking.push_str(message.and_then(|m| m.get("thinking")).and_then(Value::as_str).unwrap_or_default());
        self.calls.extend(message.and_then(|m| m.get("tool_calls")).and_then(Value::as_array).into_iter().flatten().cloned());
        if line.get("done").and_then(Value::as_bool) == Some(true) {
            self.last = Some(line);
        }
        Ok(())
    }

    fn ended(&self) -> bool {
        self.last.is_some()
    }

    fn into_body(self: Box<Self>) -> Value {
        let mut body = self.last.unwrap_or_else(|| json!({}));
        body["message"] = json!({"role": "assistant", "content": self.text, "thinking": self.thinking, "tool_calls": self.calls});
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolSpec;

    #[test]
    fn thinking_is_read_streamed_or_not_and_goes_back_on_the_assistant_message() {
        let body = json!({"model": "qwen3", "message": {"role": "assistant", "content": "Done.", "thinking": "Easy."}, "done": true});
        let answer = parse_response(&body, &[]).unwrap();
        let thought = ContentBlock::Reasoning { text: "Easy.".into(), signature: None, id: None, redacted: false };
        assert_eq!(answer.content, [thought, ContentBlock::text("Done.")]);
        let mut decoder = LineDecoder::default();
        for line in [
            json!({"message": {"role": "assistant", "content": "", "thinking": "Ea"}, "done": false}),
            json!({"message": {"role": "assistant", "content": "", "thinking": "sy."}, "done": false}),
            json!({"message": {"role": "assistant", "content": "Done."}, "done": false}),
            json!({"message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop"}),
        ] {
            decoder.feed(&Frame { event: None, data: line.to_string() }).unwrap();
        }
        assert_eq!(parse_response(&Box::new(decoder).into_body(), &[]).unwrap().content, answer.content);
        let messages = [Message::user_text("go"), Message { role: Role::Assistant, content: answer.content }];
        let sent = request_body("qwen3", &LlmRequest { system: "", messages: &messages, tools: &[], max_tokens: None });
        assert_eq!(sent["messages"][2], json!({"role": "assistant", "content": "Done.", "thinking": "Easy."}));
    }

    #[test]
    fn request_maps_calls_results_and_limits() {
        let messages = vec![
            Message::user_text("fix it"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse { id: "call_1".into(), name: "read_file".into(), input: json!({"file_path": "a"}) }],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult { tool_use_id: "call_1".into(), content: "x".into(), is_error: false }],
            },
        ];
        let tools = [ToolSpec { name: "read_file".into(), description: "r".into(), parameters: json!({"type": "object"}) }];
        let body = request_body("qwen", &LlmRequest { system: "sys", messages: &messages, tools: &tools, max_tokens: Some(64) });
        assert_eq!(body["stream"], false);
        assert_eq!(body["options"]["num_predict"], 64);
        assert_eq!(body["messages"][0], json!({"role": "system", "content": "sys"}));
        assert_eq!(
            body["messages"][2]["tool_calls"][0],
            json!({"id": "call_1", "function": {"name": "read_file", "arguments": {"file_path": "a"}}})
        );
        assert_eq!(body["messages"][3], json!({"role": "tool", "content": "x", "tool_name": "read_file", "tool_call_id": "call_1"}));
        assert_eq!(body["tools"][0]["function"]["name"], "read_file");
    }

    #[test]
    fn ndjson_lines_fold_into_the_unstreamed_answer_with_the_done_counts() {
        use crate::stream::{Framing, decode};
        let stream = include_str!("../../../tests/fixtures/streams/ollama_tool_call.ndjson");
        let (body, complete) = decode(Framing::Ndjson, Box::<LineDecoder>::default(), stream).unwrap();
        assert!(complete);
        let response = parse_response(&body, &[]).unwrap();
        assert_eq!(
            response.content,
            [
                ContentBlock::text("Let me look."),
                ContentBlock::ToolUse { id: "call_1".into(), name: "read_file".into(), input: json!({"file_path": "main.go"}) },
            ]
        );
        assert_eq!((response.stop_reason, response.usage), (StopReason::ToolUse, Usage::from_counts(187, 33)));
        assert_eq!(response.model.as_deref(), Some("qwen3:8b"));
        let cut = &stream[..stream.rfind("{\"model\"").unwrap()];
        assert!(!decode(Framing::Ndjson, Box::<LineDecoder>::default(), cut).unwrap().1, "no done line: cut");
        let error = decode(Framing::Ndjson, Box::<LineDecoder>::default(), "{\"error\":\"model runner has unexpectedly stopped\"}\n");
        assert_eq!(error.unwrap_err().message, "the stream reported an error: model runner has unexpectedly stopped");
    }

    #[test]
    fn response_gets_unique_ids_usage_and_stop_reason() {
        let history = vec![Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse { id: "call_1".into(), name: "x".into(), input: json!({}) }],
        }];
        let body = json!({
            "model": "qwen", "done": true, "done_reason": "stop",
            "message": {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "list_files", "arguments": {}}},
                {"function": {"name": "read_file", "arguments": {"file_path": "b"}}}
            ]},
            "prompt_eval_count": 120, "eval_count": 15
        });
        let r = parse_response(&body, &history).unwrap();
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        let ids: Vec<&str> = crate::types::tool_use_ids(&r.content).collect();
        assert_eq!(ids, ["call_2", "call_3"]);
        let given = json!({"message": {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_k3x9a2mz", "function": {"index": 0, "name": "list_files", "arguments": {}}}
        ]}});
        assert!(matches!(&parse_response(&given, &history).unwrap().content[0], ContentBlock::ToolUse { id, .. } if id == "call_k3x9a2mz"));
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens), (120, 15, 135));
        let text = parse_response(&json!({"message": {"role": "assistant", "content": "hi"}, "done_reason": "length"}), &[]).unwrap();
        assert_eq!(text.stop_reason, StopReason::MaxTokens);
        assert!(parse_response(&json!({"error": "x"}), &[]).is_err());
    }

    fn conversation() -> Vec<Message> {
        vec![
            Message::user_text("fix it"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text("Looking."),
                    ContentBlock::ToolUse { id: "call_1".into(), name: "read_file".into(), input: json!({"file_path": "a"}) },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::ToolResult { tool_use_id: "call_1".into(), content: "x".into(), is_error: false },
                    ContentBlock::text("Keep it short."),
                ],
            },
        ]
    }

    #[test]
    fn snapshot_request_body() {
        let messages = conversation();
        let tools = [ToolSpec { name: "read_file".into(), description: "r".into(), parameters: json!({"type": "object"}) }];
        insta::assert_json_snapshot!(request_body(
            "qwen",
            &LlmRequest { system: "sys", messages: &messages, tools: &tools, max_tokens: Some(64) }
        ));
    }

    #[test]
    fn snapshot_endpoint() {
        use crate::preset::ProviderType;
        use crate::snapshot::{endpoint, settings};
        insta::assert_json_snapshot!(endpoint::<OllamaChatFormat>(&settings(ProviderType::Ollama, "127.0.0.1:11434", "qwen")));
    }

    #[test]
    fn snapshot_parse_response() {
        let body = json!({
            "model": "qwen", "done": true, "done_reason": "stop",
            "message": {"role": "assistant", "content": "Reading.", "tool_calls": [
                {"function": {"name": "read_file", "arguments": {"file_path": "b"}}}
            ]},
            "prompt_eval_count": 120, "eval_count": 15
        });
        insta::assert_json_snapshot!(parse_response(&body, &conversation()).unwrap());
    }
}
