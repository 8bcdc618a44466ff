//! Server-sent events as a streamable-HTTP MCP server sends them: fed in chunks, handed back
//! as whole events (`data` joined, the last `id` and `retry` remembered).

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    /// Its `data` lines, joined with `\n`.
    pub data: String,
}

/// Parses a byte stream into events.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
    data: Vec<String>,
    /// The last event id seen (for a legacy reconnection).
    pub last_id: Option<String>,
    /// The last `retry` (milliseconds) seen.
    pub retry_ms: Option<u64>,
}

impl SseParser {
    /// Feeds `chunk`; returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Event> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    events.push(Event { data: self.data.join("\n") });
                    self.data.clear();
                }
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "data" => self.data.push(value.to_string()),
                "id" => self.last_id = Some(value.to_string()),
                "retry" => self.retry_ms = value.parse().ok().or(self.retry_ms),
                _ => {}
            }
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_are_joined_and_comments_ignored() {
        let mut parser = SseParser::default();
        assert!(parser.feed(b": keep-alive\r\nid: 7\r\nretry: 500\r\ndata: {\"a\"").is_empty());
        let events = parser.feed(b":1}\r\n\r\ndata: x\ndata: y\n\n");
        assert_eq!(events, [Event { data: "{\"a\":1}".into() }, Event { data: "x\ny".into() }]);
        assert_eq!((parser.last_id.as_deref(), parser.retry_ms), (Some("7"), Some(500)));
    }
}
