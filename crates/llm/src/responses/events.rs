//! The Responses API's streamed events, folded into the response object the same call returns
//! unstreamed.
//!
//! The stream is typed SSE events, each JSON with its `type`: `response.created` (the response,
//! `in_progress`, no output yet), `response.output_item.added` / `.done` (an output item by
//! `output_index`, whole when done), deltas of an item — `response.output_text.delta`,
//! `response.function_call_arguments.delta`, `response.custom_tool_call_input.delta`,
//! `response.reasoning_summary_text.delta` — and one terminal event: `response.completed` or
//! `response.incomplete` (the final response with `usage`), `response.failed` (the response
//! with its `error`) or `error`. The final response's own `output` is taken when it has one;
//! otherwise the items gathered from the events (whole from `.done`, or built from deltas).

use super::failure;
use crate::stream::{Frame, StreamDecoder};
use crate::{ErrorKind, LlmError};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Folds one streamed Responses answer (see the module doc).
#[derive(Debug, Default)]
pub struct EventDecoder {
    /// The response object: from `response.created`, replaced by the terminal event's.
    response: Option<Value>,
    /// Output items by `output_index`.
    items: BTreeMap<u64, Value>,
    /// The terminal event arrived.
    done: bool,
}

impl StreamDecoder for EventDecoder {
    fn feed(&mut self, frame: &Frame) -> Result<(), LlmError> {
        // Some proxies end every stream with Chat Completions' terminator: nothing to read.
        if frame.data.trim() == "[DONE]" {
            return Ok(());
        }
        let event = frame.json()?;
        let kind = event.get("type").and_then(Value::as_str).or(frame.event.as_deref()).unwrap_or_default().to_string();
        let index = event.get("output_index").and_then(Value::as_u64).unwrap_or(0);
        let delta = event.get("delta").and_then(Value::as_str).unwrap_or_default();
        match kind.as_str() {
            "response.created" | "response.in_progress" => self.response = event.get("response").cloned(),
            "response.output_item.added" | "response.output_item.done" => {
                if let Some(item) = event.get("item") {
                    self.items.insert(index, item.clone());
                }
            }
            "response.output_text.delta" => {
                let position = event.get("content_index").and_then(Value::as_u64).unwrap_or(0);
                append(part(self.item(index, "message"), "content", position, "output_text"), "text", delta);
            }
            "response.function_call_arguments.delta" => append(self.item(index, "function_call"), "arguments", delta),
            "response.custom_tool_call_input.delta" => append(self.item(index, "custom_tool_call"), "input", delta),
            "response.reasoning_summary_text.delta" => {
                let position = event.get("summary_index").and_then(Value::as_u64).unwrap_or(0);
                append(part(self.item(index, "reasoning"), "summary", position, "summary_text"), "text", delta);
            }
            "response.completed" | "response.incomplete" => {
                self.response = event.get("response").cloned();
                self.done = true;
            }
            "response.failed" => return Err(failure(event.get("response").unwrap_or(&event))),
            "error" => return Err(error_event(&event)),
            _ => {}
        }
        Ok(())
    }

    fn ended(&self) -> bool {
        self.done
    }

    fn into_body(self: Box<Self>) -> Value {
        let mut response = self.response.unwrap_or_else(|| json!({}));
        let has_output = response.get("output").and_then(Value::as_array).is_some_and(|o| !o.is_empty());
        if !has_output {
            response["output"] = Value::Array(self.items.into_values().collect());
        }
        response
    }
}

impl EventDecoder {
    /// The item at `index`, begun as a `kind` item if no event announced it.
    fn item(&mut self, index: u64, kind: &str) -> &mut Value {
        self.items.entry(index).or_insert_with(|| json!({"type": kind}))
    }
}

/// The part at `position` of `item`'s `list` (`content`, `summary`), made with `{"type": kind}`
/// (and those before it) when missing.
fn part<'a>(item: &'a mut Value, list: &str, position: u64, kind: &str) -> &'a mut Value {
    if !item.is_object() {
        *item = json!({});
    }
    let slot = &mut item[list];
    let mut parts = match slot.take() {
        Value::Array(parts) => parts,
        _ => Vec::new(),
    };
    // A position far past the parts so far is a broken stream: it goes after them.
    let position = usize::try_from(position).unwrap_or(usize::MAX).min(parts.len());
    while parts.len() <= position {
        parts.push(json!({"type": kind, "text": ""}));
    }
    *slot = Value::Array(parts);
    &mut slot[position]
}

/// Appends `delta` to the string `key` of `object` (made empty when missing).
fn append(object: &mut Value, key: &str, delta: &str) {
    if !object.is_object() {
        *object = json!({});
    }
    let mut text = object.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    text.push_str(delta);
    object[key] = Value::String(text);
}

/// The error an `error` event stands for (`{"type":"error","code","message","param"}`, or the
/// error nested under `error`): transient when the server failed or was rate-limited.
fn error_event(event: &Value) -> LlmError {
    let error = event.get("error").filter(|e| e.is_object()).unwrap_or(event);
    let text = |key: &str| error.get(key).and_then(Value::as_str).unwrap_or_default();
    let code = if text("code").is_empty() { text("type") } else { text("code") };
    let kind = match code {
        "server_error" | "internal_error" | "overloaded" | "server_is_overloaded" | "api_error" => ErrorKind::Server,
        "rate_limit_exceeded" | "rate_limit_error" | "slow_down" => ErrorKind::RateLimit,
        _ => ErrorKind::BadResponse,
    };
    let tag = if code.is_empty() || code == "error" { String::new() } else { format!(" (code {code})") };
    LlmError::new(kind, format!("the stream reported an error: {}{tag}", text("message")))
}
