//! Recognising a provider's "the conversation is longer than my context window" answer, in one
//! place, whatever the wire format: [`recognise`] turns such an error into
//! [`ErrorKind::ContextOverflow`] (never retried as it is; the agent compacts and tries once
//! more), and [`reported_window`] reads the window the provider named, when it did.
//!
//! The bodies recognised (the error's message carries the provider's text):
//! - OpenAI (and vLLM, Azure): 400 `code: context_length_exceeded`, "This model's maximum
//!   context length is 128000 tokens. However, your messages resulted in 130017 tokens. …";
//! - OpenAI Responses: the same code, "Your input exceeds the context window of this model.
//!   Please adjust your input and try again.", as a 400 or, once a stream has started, as the
//!   error of a `response.failed` event (no HTTP status);
//! - Anthropic: 400 `invalid_request_error`, "prompt is too long: 208310 tokens > 200000
//!   maximum" (and "input length and `max_tokens` exceed context limit: 196601 + 16000 >
//!   200000");
//! - Gemini: 400 `INVALID_ARGUMENT`, "The input token count (1200293) exceeds the maximum
//!   number of tokens allowed (1048576).";
//! - llama.cpp server: 400 `exceed_context_size_error`, "request (4476 tokens) exceeds the
//!   available context size (4096 tokens)" (older: "the request exceeds the available context
//!   size, try increasing it");
//! - Ollama: "the input length exceeds the context length".

use super::{ErrorKind, LlmError};

/// Lowercase phrases that only a context-window refusal contains.
const PHRASES: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "prompt is too long",
    "exceed context limit",
    "exceeds the maximum number of tokens allowed",
    "exceed_context_size_error",
    "exceeds the available context size",
    "exceeds the context length",
    "context window exceeded",
    "exceeds the context window",
];

/// `error` as a [`ErrorKind::ContextOverflow`] when it is a provider's context-window refusal
/// (a 4xx, a local server's 500, or an error reported inside a stream, whose message says so);
/// any other error unchanged.
pub fn recognise(mut error: LlmError) -> LlmError {
    let refused = matches!(error.http_status, Some(400 | 413 | 422 | 500) | None) && error.kind == ErrorKind::BadResponse;
    if refused && is_overflow_message(&error.message) {
        error.kind = ErrorKind::ContextOverflow;
        error.retry_after = None;
    }
    error
}

/// True when `message` is a context-window refusal in any of the recognised wordings.
pub fn is_overflow_message(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    PHRASES.iter().any(|phrase| lower.contains(phrase))
}

/// The context window the provider named in an overflow message, when it named one:
/// OpenAI's "maximum context length is N tokens", Anthropic's "> N maximum" / "> N",
/// Gemini's "tokens allowed (N)", llama.cpp's "context size (N tokens)".
pub fn reported_window(message: &str) -> Option<u64> {
    let lower = message.to_ascii_lowercase();
    let after = |marker: &str| lower.find(marker).and_then(|at| first_number(&lower[at + marker.len()..]));
    after("maximum context length is ")
        .or_else(|| after("tokens allowed ("))
        .or_else(|| after("context size ("))
        .or_else(|| lower.find("prompt is too long").and_then(|at| after_gt(&lower[at..])))
        .or_else(|| lower.find("exceed context limit").and_then(|at| after_gt(&lower[at..])))
        .filter(|n| *n > 0)
}

/// The number after the first `>` of `text`.
fn after_gt(text: &str) -> Option<u64> {
    text.find('>').and_then(|at| first_number(&text[at + 1..]))
}

/// The digits at the start of `text` (after spaces), as a number.
fn first_number(text: &str) -> Option<u64> {
    let digits: String = text.trim_start().chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(status: u16, message: &str) -> LlmError {
        let mut e = LlmError::new(ErrorKind::BadResponse, format!("HTTP {status}: {message}"));
        e.http_status = Some(status);
        e
    }

    /// The messages `http::classify` makes of the real bodies: the provider's text, then its
    /// type and code.
    const REAL: &[(&str, Option<u64>)] = &[
        (
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130017 tokens. Please reduce the length of the messages. (type invalid_request_error, code context_length_exceeded)",
            Some(128_000),
        ),
        ("prompt is too long: 208310 tokens > 200000 maximum (type invalid_request_error)", Some(200_000)),
        (
            "input length and `max_tokens` exceed context limit: 196601 + 16000 > 200000, decrease input length or `max_tokens` and try again (type invalid_request_error)",
            Some(200_000),
        ),
        (
            "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576). (type INVALID_ARGUMENT, code 400)",
            Some(1_048_576),
        ),
        ("request (4476 tokens) exceeds the available context size (4096 tokens) (type exceed_context_size_error, code 400)", Some(4096)),
        ("the request exceeds the available context size, try increasing it (type exceed_context_size_error, code 400)", None),
        (
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion. (type BadRequestError, code 400)",
            Some(4096),
        ),
        ("the input length exceeds the context length", None),
        (
            "Your input exceeds the context window of this model. Please adjust your input and try again. (type invalid_request_error, code context_length_exceeded)",
            None,
        ),
    ];

    #[test]
    fn every_real_overflow_body_is_recognised_with_its_window() {
        for (message, window) in REAL {
            let e = recognise(error(400, message));
            assert_eq!(e.kind, ErrorKind::ContextOverflow, "{message}");
            assert!(!e.is_transient(), "{message}");
            assert_eq!(reported_window(message), *window, "{message}");
        }
    }

    #[test]
    fn a_failed_response_event_inside_a_stream_is_an_overflow() {
        let event = serde_json::json!({"status": "failed", "error": {"code": "context_length_exceeded",
            "message": "Your input exceeds the context window of this model. Please adjust your input and try again."}});
        let e = recognise(crate::responses::failure(&event));
        assert_eq!((e.kind, e.http_status), (ErrorKind::ContextOverflow, None), "{}", e.message);
        let other = recognise(crate::responses::failure(&serde_json::json!({"error": {"code": "invalid_prompt", "message": "bad"}})));
        assert_eq!(other.kind, ErrorKind::BadResponse);
    }

    #[test]
    fn other_errors_are_left_alone() {
        let not_overflow = [
            (400, "Invalid 'messages[1].tool_call_id' (type invalid_request_error)"),
            (400, "max_tokens: Field required (type invalid_request_error)"),
            (400, "* GenerateContentRequest.contents: contents is not specified (type INVALID_ARGUMENT, code 400)"),
            (404, "The model `gpt-9` does not exist (type invalid_request_error, code model_not_found)"),
        ];
        for (status, message) in not_overflow {
            assert_eq!(recognise(error(status, message)).kind, ErrorKind::BadResponse, "{message}");
        }
        // The words alone do not make a rate limit or an auth failure an overflow.
        let mut limited = error(429, "maximum context length is 10 tokens");
        limited.kind = ErrorKind::RateLimit;
        assert_eq!(recognise(limited).kind, ErrorKind::RateLimit);
        assert_eq!(reported_window("prompt is too long"), None);
    }
}
