//! How the `reasoning` setting (low, medium, high) is asked of each API whose form depends on
//! the model: Anthropic's `thinking` (a token budget up to Claude 4.5, adaptive thinking with an
//! `effort` from Claude 4.6 on) and Gemini's `thinkingConfig` (a `thinkingBudget` for Gemini
//! 2.5, a `thinkingLevel` from Gemini 3 on). docs/src/reference/configuration.md#reasoning documents every
//! mapping here. OpenAI's `reasoning_effort` and Ollama's `think` take the level's name as is.

use super::ReasoningEffort;
use serde_json::{Value, json};

/// Anthropic's smallest thinking budget (the API refuses less).
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// The `anthropic-beta` flag that lets Claude 4 models (up to 4.5) think between tool calls.
pub const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";

/// The thinking budget of a level, in tokens: Anthropic's `budget_tokens` for Claude up to 4.5
/// (and the room [`anthropic_max_tokens`] makes for thinking on every Claude model).
pub fn anthropic_budget(effort: ReasoningEffort) -> u32 {
    match effort {
        ReasoningEffort::Low => 2048,
        ReasoningEffort::Medium => 8192,
        ReasoningEffort::High => 16384,
    }
}

/// Gemini 2.5's `thinkingBudget` for a level, in tokens (2.5 Flash allows up to 24,576).
pub fn gemini_budget(effort: ReasoningEffort) -> u32 {
    match effort {
        ReasoningEffort::Low => 1024,
        ReasoningEffort::Medium => 8192,
        ReasoningEffort::High => 24576,
    }
}

/// How a Claude model is asked to think.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// `thinking: {type: "enabled", budget_tokens}` (Claude 3.7 to 4.5); `interleaved` when the
    /// model is a Claude 4 one, which thinks between tool calls with the beta flag.
    Budget {
        /// `budget_tokens`.
        budget_tokens: u32,
        /// Whether the request carries [`INTERLEAVED_THINKING_BETA`].
        interleaved: bool,
    },
    /// `thinking: {type: "adaptive", display: "summarized"}` with `output_config: {effort}`
    /// (Claude 4.6 and later, which refuse or deprecate the budget form).
    Adaptive {
        /// `output_config.effort`.
        effort: ReasoningEffort,
    },
}

impl Thinking {
    /// The form `model` takes for `effort`.
    pub fn for_model(model: &str, effort: ReasoningEffort) -> Self {
        let version = claude_version(model);
        let newest_family = ["mythos", "fable"].iter().any(|family| model.contains(family));
        match version {
            Some(v) if v >= (4, 6) => Thinking::Adaptive { effort },
            None if newest_family => Thinking::Adaptive { effort },
            _ => Thinking::Budget { budget_tokens: anthropic_budget(effort), interleaved: version.is_some_and(|(major, _)| major == 4) },
        }
    }

    /// The room for thinking that `max_tokens` must leave.
    fn room(self) -> u32 {
        match self {
            Thinking::Budget { budget_tokens, .. } => budget_tokens,
            Thinking::Adaptive { effort } => anthropic_budget(effort),
        }
    }
}

/// `(major, minor)` of a Claude model name (`claude-sonnet-4-5-20250929` → 4.5,
/// `claude-3-7-sonnet` → 3.7, `claude-opus-4-20250514` → 4.0, `claude-sonnet-5` → 5.0);
/// `None` when the name has no version.
pub fn claude_version(model: &str) -> Option<(u32, u32)> {
    let name = &model[model.find("claude-")? + "claude-".len()..];
    let small = |part: &str| part.parse::<u32>().ok().filter(|n| *n < 100);
    let mut parts = name.split(['-', '@', '.', ':']).skip_while(|part| small(part).is_none());
    let major = small(parts.next()?)?;
    Some((major, parts.next().and_then(small).unwrap_or(0)))
}

/// `max_tokens` counts thinking: when the thinking room does not fit below `max_tokens`, the
/// room is added on top, so the answer keeps the limit it had.
pub fn anthropic_max_tokens(max_tokens: u32, thinking: Thinking) -> u32 {
    let room = thinking.room();
    if room >= max_tokens { max_tokens.saturating_add(room) } else { max_tokens }
}

/// Sets `thinking` (and `output_config.effort`) on an Anthropic request `body` and makes its
/// `max_tokens` fit ([`anthropic_max_tokens`]).
pub fn apply_anthropic(body: &mut Value, thinking: Thinking) {
    let max_tokens = body.get("max_tokens").and_then(Value::as_u64).and_then(|m| u32::try_from(m).ok()).unwrap_or(0);
    body["max_tokens"] = Value::from(anthropic_max_tokens(max_tokens, thinking));
    match thinking {
        Thinking::Budget { budget_tokens, .. } => body["thinking"] = json!({"type": "enabled", "budget_tokens": budget_tokens}),
        Thinking::Adaptive { effort } => {
            body["thinking"] = json!({"type": "adaptive", "display": "summarized"});
            body["output_config"] = json!({"effort": effort.as_str()});
        }
    }
}

/// Gemini's `generationConfig.thinkingConfig` for `model`: `thinkingLevel` from Gemini 3 on,
/// `thinkingBudget` before; thought summaries included either way.
pub fn gemini_thinking_config(model: &str, effort: ReasoningEffort) -> Value {
    let model = model.rsplit('/').next().unwrap_or(model);
    let major = model.strip_prefix("gemini-").and_then(|rest| rest.split(['.', '-']).next()).and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(major) if major >= 3 => json!({"thinkingLevel": effort.as_str(), "includeThoughts": true}),
        _ => json!({"thinkingBudget": gemini_budget(effort), "includeThoughts": true}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReasoningEffort::{High, Low, Medium};

    #[test]
    fn claude_versions_are_read_from_every_naming_scheme() {
        for (model, version) in [
            ("claude-sonnet-4-5-20250929", Some((4, 5))),
            ("claude-3-7-sonnet-20250219", Some((3, 7))),
            ("claude-opus-4-20250514", Some((4, 0))),
            ("claude-opus-4-6", Some((4, 6))),
            ("anthropic.claude-opus-4-6-v1", Some((4, 6))),
            ("claude-opus-4-1@20250805", Some((4, 1))),
            ("claude-sonnet-5", Some((5, 0))),
            ("claude-mythos-preview", None),
            ("my-proxy-model", None),
        ] {
            assert_eq!(claude_version(model), version, "{model}");
        }
    }

    #[test]
    fn older_claude_models_get_a_budget_and_newer_ones_adaptive_thinking() {
        assert_eq!(Thinking::for_model("claude-sonnet-4-5", High), Thinking::Budget { budget_tokens: 16384, interleaved: true });
        assert_eq!(Thinking::for_model("claude-3-7-sonnet-latest", Low), Thinking::Budget { budget_tokens: 2048, interleaved: false });
        assert_eq!(Thinking::for_model("claude-opus-4-7", Medium), Thinking::Adaptive { effort: Medium });
        assert_eq!(Thinking::for_model("claude-fable-5", Low), Thinking::Adaptive { effort: Low });
        assert_eq!(Thinking::for_model("claude-mythos-preview", Low), Thinking::Adaptive { effort: Low });
        assert_eq!(Thinking::for_model("my-proxy-model", Medium), Thinking::Budget { budget_tokens: 8192, interleaved: false });
    }

    #[test]
    fn the_budget_always_fits_below_max_tokens_and_leaves_the_answer_its_limit() {
        for effort in [Low, Medium, High] {
            for max_tokens in [1, 1024, 4096, 8192, 16384, 64000] {
                let thinking = Thinking::for_model("claude-sonnet-4-5", effort);
                let sent = anthropic_max_tokens(max_tokens, thinking);
                assert!(anthropic_budget(effort) < sent, "{effort:?} {max_tokens}");
                assert!(sent >= max_tokens);
            }
        }
        assert_eq!(anthropic_max_tokens(8192, Thinking::for_model("claude-sonnet-4-5", Low)), 8192);
        assert_eq!(anthropic_max_tokens(8192, Thinking::for_model("claude-sonnet-4-5", High)), 8192 + 16384);
        let mut body = json!({"max_tokens": 8192});
        apply_anthropic(&mut body, Thinking::for_model("claude-opus-4-7", High));
        assert_eq!(
            body,
            json!({"max_tokens": 24576, "thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "high"}})
        );
    }

    #[test]
    fn gemini_3_takes_a_level_and_gemini_2_5_a_budget() {
        assert_eq!(gemini_thinking_config("gemini-3-pro-preview", High), json!({"thinkingLevel": "high", "includeThoughts": true}));
        assert_eq!(gemini_thinking_config("models/gemini-3.1-flash", Low), json!({"thinkingLevel": "low", "includeThoughts": true}));
        assert_eq!(gemini_thinking_config("gemini-2.5-flash", Medium), json!({"thinkingBudget": 8192, "includeThoughts": true}));
    }
}
