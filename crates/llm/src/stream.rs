//! Streamed answers, format-neutral: the framing of a streamed body ([`Framing`]: SSE events or
//! NDJSON lines, cut into [`Frame`]s by a [`Framer`] as bytes arrive) and the
//! [`StreamDecoder`] each wire format implements to fold the frames back into the body its
//! non-streamed answer would have had — so one `parse_response` reads both, and the usage of a
//! streamed answer is, by construction, what the non-streamed one reports.
//!
//! The SSE rules followed are the WHATWG ones that matter here: lines end in `\n`, `\r\n` or
//! `\r`; `event:` names the event, `data:` lines are joined with `\n`; a line starting with `:`
//! is a comment (a keep-alive); a blank line dispatches; an event not ended by a blank line
//! when the body ends is dropped (a cut stream, which the decoder then finds incomplete). The
//! last `id:` and `retry:` seen are kept for a client that resumes a stream (MCP's Streamable
//! HTTP reconnects with `Last-Event-ID` after `retry` milliseconds).

use super::{ErrorKind, LlmError};
use serde_json::Value;

/// How a streamed body is cut into frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events (`text/event-stream`): OpenAI, Anthropic, Gemini.
    Sse,
    /// One JSON value per line (`application/x-ndjson`): Ollama.
    Ndjson,
}

/// One event of a stream: an SSE event (its name, if any, and its data) or an NDJSON line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frame {
    /// The SSE `event:` name; `None` for unnamed events and NDJSON lines.
    pub event: Option<String>,
    /// The SSE data (lines joined with `\n`) or the NDJSON line.
    pub data: String,
}

impl Frame {
    /// The data as JSON, or a `bad_response` error quoting (the start of) it.
    pub fn json(&self) -> Result<Value, LlmError> {
        serde_json::from_str(&self.data).map_err(|e| {
            let shown: String = self.data.chars().take(200).collect();
            LlmError::new(ErrorKind::BadResponse, format!("a stream event is not valid JSON ({e}): {shown}"))
        })
    }
}

/// Folds the frames of one streamed answer into the body the same answer has unstreamed.
pub trait StreamDecoder: Send {
    /// Takes the next frame. An error event of the stream is returned as the error it stands
    /// for (an overloaded server is a transient `server` error, so the call is retried).
    fn feed(&mut self, frame: &Frame) -> Result<(), LlmError>;

    /// Whether the stream's terminal event arrived (`[DONE]`, `message_stop`, `done: true`):
    /// nothing more needs reading.
    fn ended(&self) -> bool;

    /// Whether what arrived is a whole answer if the connection closes now; a stream closed
    /// before that was cut, and the call is retried. Default: [`StreamDecoder::ended`].
    fn complete(&self) -> bool {
        self.ended()
    }

    /// The answer as the format's non-streamed response body.
    fn into_body(self: Box<Self>) -> Value;
}

/// Cuts the bytes of a streamed body into frames as they arrive.
#[derive(Debug)]
pub struct Framer {
    framing: Framing,
    /// Bytes of a line not ended yet.
    pending: Vec<u8>,
    /// The last byte was a `\r` (a `\n` right after it ends no second line).
    after_cr: bool,
    /// The SSE event being gathered.
    event: Option<String>,
    data: Option<String>,
    /// The last SSE `id:` seen.
    last_id: Option<String>,
    /// The last SSE `retry:` (milliseconds) seen.
    retry_ms: Option<u64>,
}

impl Framer {
    /// A framer for `framing`.
    pub fn new(framing: Framing) -> Self {
        Framer { framing, pending: Vec::new(), after_cr: false, event: None, data: None, last_id: None, retry_ms: None }
    }

    /// The last SSE event id seen (what a resumed stream sends as `Last-Event-ID`).
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The last SSE `retry` seen: how many milliseconds to wait before reconnecting.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// The frames completed by `bytes`.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Frame> {
        let mut frames = Vec::new();
        for &byte in bytes {
            let crlf_tail = self.after_cr && byte == b'\n';
            self.after_cr = byte == b'\r';
            if crlf_tail {
                continue;
            }
            if byte == b'\n' || byte == b'\r' {
                let line = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
                frames.extend(self.line(line));
            } else {
                self.pending.push(byte);
            }
        }
        frames
    }

    /// The frames left when the body ends: an NDJSON last line without its newline (if it is
    /// whole JSON); an unfinished SSE event is dropped.
    pub fn finish(&mut self) -> Vec<Frame> {
        let rest = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
        match self.framing {
            Framing::Ndjson if serde_json::from_str::<Value>(&rest).is_ok() => vec![Frame { event: None, data: rest }],
            _ => Vec::new(),
        }
    }

    fn line(&mut self, line: String) -> Option<Frame> {
        if self.framing == Framing::Ndjson {
            return (!line.trim().is_empty()).then_some(Frame { event: None, data: line });
        }
        if line.is_empty() {
            let data = self.data.take();
            let event = self.event.take();
            return data.map(|data| Frame { event, data });
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field.to_string(), value.strip_prefix(' ').unwrap_or(value).to_string()),
            None => (line, String::new()),
        };
        match field.as_str() {
            "event" => self.event = Some(value),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(&value);
                }
                None => self.data = Some(value),
            },
            "id" => self.last_id = Some(value),
            "retry" => self.retry_ms = value.parse().ok().or(self.retry_ms),
            // Comments (`field` empty) and unknown fields.
            _ => {}
        }
        None
    }
}

/// The error an error event inside a stream stands for (`{"type":"error","error":{…}}`,
/// `{"error":{…}}`, `{"error":"text"}`): transient when the server is overloaded, failing or
/// rate-limited, a `bad_response` otherwise.
pub fn stream_error(body: &Value) -> LlmError {
    let error = body.get("error").unwrap_or(body);
    let text = |key: &str| error.get(key).and_then(|v| v.as_str().map(str::to_string).or_else(|| v.as_u64().map(|n| n.to_string())));
    let message = error.as_str().map(str::to_string).or_else(|| text("message")).unwrap_or_else(|| error.to_string());
    let kind_name = text("type").or_else(|| text("status")).or_else(|| text("code")).unwrap_or_default();
    let kind = match kind_name.as_str() {
        "overloaded_error"
        | "api_error"
        | "server_error"
        | "internal_server_error"
        | "INTERNAL"
        | "UNAVAILABLE"
        | "500"
        | "503"
        | "529" => ErrorKind::Server,
        "rate_limit_error" | "rate_limit_exceeded" | "RESOURCE_EXHAUSTED" | "429" => ErrorKind::RateLimit,
        _ => ErrorKind::BadResponse,
    };
    let tag = if kind_name.is_empty() { String::new() } else { format!(" (type {kind_name})") };
    LlmError::new(kind, format!("the stream reported an error: {message}{tag}"))
}

/// Feeds `bytes` (split at odd places) through a framer into `decoder`: the body and whether
/// the stream was whole. For the decoder tests of each format.
#[cfg(test)]
pub(crate) fn decode(framing: Framing, mut decoder: Box<dyn StreamDecoder>, bytes: &str) -> Result<(Value, bool), LlmError> {
    let mut framer = Framer::new(framing);
    for piece in bytes.as_bytes().chunks(7) {
        for frame in framer.push(piece) {
            decoder.feed(&frame)?;
        }
    }
    for frame in framer.finish() {
        decoder.feed(&frame)?;
    }
    let complete = decoder.complete();
    Ok((decoder.into_body(), complete))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(framing: Framing, pieces: &[&str]) -> Vec<Frame> {
        let mut framer = Framer::new(framing);
        let mut out: Vec<Frame> = pieces.iter().flat_map(|p| framer.push(p.as_bytes())).collect();
        out.extend(framer.finish());
        out
    }

    fn frame(event: Option<&str>, data: &str) -> Frame {
        Frame { event: event.map(str::to_string), data: data.to_string() }
    }

    #[test]
    fn sse_events_survive_any_split_and_every_line_ending() {
        let whole = "event: ping\r\ndata: {}\r\n\r\n: keep-alive\n\ndata: a\ndata: b\n\nevent: x\rdata:c\r\r";
        let expected = vec![frame(Some("ping"), "{}"), frame(None, "a\nb"), frame(Some("x"), "c")];
        assert_eq!(frames(Framing::Sse, &[whole]), expected);
        let bytes: Vec<String> = whole.chars().map(String::from).collect();
        let one_by_one: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(frames(Framing::Sse, &one_by_one), expected, "split into single bytes");
    }

    #[test]
    fn an_sse_event_cut_before_its_blank_line_is_dropped() {
        assert_eq!(frames(Framing::Sse, &["data: {\"a\":1}\n\ndata: {\"b\""]), vec![frame(None, "{\"a\":1}")]);
    }

    #[test]
    fn the_last_sse_id_and_retry_are_kept_and_comments_ignored() {
        let mut framer = Framer::new(Framing::Sse);
        assert!(framer.push(b": keep-alive\r\nid: 7\r\nretry: 500\r\ndata: {\"a\"").is_empty());
        let events = framer.push(b":1}\r\n\r\ndata: x\ndata: y\n\n");
        assert_eq!(events, [frame(None, "{\"a\":1}"), frame(None, "x\ny")]);
        assert_eq!((framer.last_id(), framer.retry_ms()), (Some("7"), Some(500)));
        framer.push(b"retry: soon\n");
        assert_eq!(framer.retry_ms(), Some(500), "a retry that is not a number is ignored");
    }

    #[test]
    fn ndjson_lines_and_a_whole_last_line_without_newline() {
        assert_eq!(frames(Framing::Ndjson, &["{\"a\":1}\n\n{\"b\"", ":2}"]), vec![frame(None, "{\"a\":1}"), frame(None, "{\"b\":2}")]);
        assert_eq!(frames(Framing::Ndjson, &["{\"a\":1}\n{\"b\":"]), vec![frame(None, "{\"a\":1}")], "a cut line is dropped");
    }

    #[test]
    fn stream_errors_are_transient_when_the_server_is_at_fault() {
        let overloaded = serde_json::json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}});
        let e = stream_error(&overloaded);
        assert_eq!((e.kind, e.is_transient()), (ErrorKind::Server, true));
        assert_eq!(e.message, "the stream reported an error: Overloaded (type overloaded_error)");
        let invalid = serde_json::json!({"error":{"message":"bad","type":"invalid_request_error"}});
        assert_eq!(stream_error(&invalid).kind, ErrorKind::BadResponse);
        assert_eq!(stream_error(&serde_json::json!({"error":"model crashed"})).message, "the stream reported an error: model crashed");
        let gemini = serde_json::json!({"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}});
        assert_eq!(stream_error(&gemini).kind, ErrorKind::Server);
    }
}
