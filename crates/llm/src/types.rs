//! The provider-neutral conversation model: messages made of text, tool-use and tool-result
//! blocks, a response with a typed stop reason, and token [`Usage`].

pub use dracode_results::Usage;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Who said a message. Tool results travel in `User` messages, as in the Anthropic model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The task prompt and tool results.
    User,
    /// The model's text and tool calls.
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
        /// The API's id of the output message the text came in, where it gives one (Responses:
        /// `msg_…`), so the message can go back as the same item.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    /// The model asks for a tool to be called.
    ToolUse {
        /// The provider's call id; the matching result must carry it.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments, a JSON object.
        input: serde_json::Value,
    },
    /// The answer to a [`ContentBlock::ToolUse`].
    ToolResult {
        /// The id of the call this answers.
        tool_use_id: String,
        /// What the tool returned, or `Error [CODE]: message`.
        content: String,
        /// True when the tool failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// The model's reasoning before what follows it (Anthropic thinking, a Responses API
    /// reasoning item, Gemini's thought). Kept in the conversation so it goes back unchanged to
    /// the API that produced it: Anthropic refuses a tool turn whose thinking block was
    /// dropped, and the Responses API resumes from encrypted reasoning when nothing is stored
    /// on the server. Wire formats that cannot take it back leave it out of their requests.
    Reasoning {
        /// The readable reasoning, or its summary; empty when the API keeps it hidden.
        #[serde(default)]
        text: String,
        /// The API's opaque token that must travel back with it: Anthropic's `signature` (or a
        /// `redacted_thinking` block's `data`), the Responses API's `encrypted_content`,
        /// Gemini's `thoughtSignature`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// The API's id of the item, where it gives one (Responses: `rs_…`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// Anthropic `redacted_thinking`: the reasoning is encrypted in `signature`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        redacted: bool,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into(), id: None }
    }
}

/// How hard a model thinks before it answers: the `reasoning` setting of a provider,
/// `[defaults]` or a task. Each wire format maps it to its API (OpenAI `reasoning_effort`,
/// Responses `reasoning.effort`, Anthropic `thinking` with a token budget, Gemini's
/// `thinkingConfig`); unset, nothing is sent and the model's own default applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    /// Little thinking: fast and cheap.
    Low,
    /// The usual trade-off.
    Medium,
    /// Thinks longest: the hardest tasks.
    High,
}

impl ReasoningEffort {
    /// The lowercase name (`low`, `medium`, `high`), as OpenAI's APIs take it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

/// A message in the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said, in order.
    pub content: Vec<ContentBlock>,
}

/// The ids of the tool calls among `content`, in order.
pub fn tool_use_ids(content: &[ContentBlock]) -> impl Iterator<Item = &str> {
    content.iter().filter_map(|block| match block {
        ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
        _ => None,
    })
}

impl Message {
    /// The ids of the tool calls this message makes, in order.
    pub fn tool_use_ids(&self) -> impl Iterator<Item = &str> {
        tool_use_ids(&self.content)
    }

    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Message { role: Role::User, content: vec![ContentBlock::text(text)] }
    }

    /// The concatenated text blocks of this message.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Text { text, .. } = block {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }
}

/// Why the model stopped, normalised across wire formats.
///
/// A provider that is not configured, or a call that failed, is not a stop reason here but an
/// [`crate::LlmError`] with its [`crate::ErrorKind`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model wants tools called.
    ToolUse,
    /// The output hit the token limit.
    MaxTokens,
    /// A stop sequence was produced.
    StopSequence,
    /// The model refused (Anthropic `refusal`).
    Refusal,
    /// Output withheld by a content filter (OpenAI `content_filter`, Gemini `SAFETY`).
    ContentFilter,
    /// A long-running turn paused (Anthropic `pause_turn`).
    PauseTurn,
    /// The model produced a malformed tool call (Gemini `MALFORMED_FUNCTION_CALL`).
    MalformedToolCall,
    /// Anything else the provider said, kept verbatim.
    Other(String),
}

impl StopReason {
    /// The snake_case name used in events.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::Refusal => "refusal",
            StopReason::ContentFilter => "content_filter",
            StopReason::PauseTurn => "pause_turn",
            StopReason::MalformedToolCall => "malformed_tool_call",
            StopReason::Other(s) => s,
        }
    }
}

/// A tool as offered to the model: name, description and JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// snake_case name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// One call to a model.
#[derive(Debug, Clone, Copy)]
pub struct LlmRequest<'a> {
    /// The system prompt.
    pub system: &'a str,
    /// The conversation so far, starting with the user's task.
    pub messages: &'a [Message],
    /// The tools the model may call.
    pub tools: &'a [ToolSpec],
    /// The output token limit for this call, when the user set one.
    pub max_tokens: Option<u32>,
}

/// The model's answer to one [`LlmRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    /// Text and tool-use blocks, in order.
    pub content: Vec<ContentBlock>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Tokens of this call.
    #[serde(default)]
    pub usage: Usage,
    /// The model that answered, when the provider says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_sums_field_by_field() {
        let a = Usage { cached_input_tokens: 3, ..Usage::from_counts(10, 5) };
        let b = Usage { reasoning_output_tokens: 2, ..Usage::from_counts(7, 1) };
        let sum: Usage = [a, b].into_iter().sum();
        assert_eq!(sum.input_tokens, 17);
        assert_eq!(sum.output_tokens, 6);
        assert_eq!(sum.total_tokens, 23);
        assert_eq!(sum.cached_input_tokens, 3);
        assert_eq!(sum.reasoning_output_tokens, 2);
        assert_eq!(sum.requests, 2);
    }

    #[test]
    fn content_blocks_serialise_tagged() {
        let block = ContentBlock::ToolUse { id: "c1".into(), name: "read_file".into(), input: serde_json::json!({"file_path": "a"}) };
        let json = serde_json::to_value(&block).unwrap();
        assert_eq!(json["type"], "tool_use");
        let back: ContentBlock = serde_json::from_value(json).unwrap();
        assert_eq!(back, block);
    }
}
