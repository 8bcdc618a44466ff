//! An MCP server's tool as the model sees it: `SERVER__tool`, with the server's description
//! and input schema, a time limit per call and the task's output cap.

use super::protocol::ToolDef;
use super::server::{CallError, McpServer};
use dracode_llm::ToolSpec;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// The longest tool name every wire format accepts.
pub const MAX_TOOL_NAME: usize = 64;

/// Why a call of an MCP tool gave no result; the tool registry tells the model which it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpCallError {
    /// The arguments were not a JSON object.
    InvalidArguments(String),
    /// The server failed (it died, or answered with a protocol error).
    ServerFailed(String),
    /// The server did not answer within the call's time limit; the call was cancelled.
    TimedOut(String),
    /// The tool answered with an error result (its text, capped).
    ToolError(String),
}

/// One tool of a started server.
pub struct McpTool {
    server: Arc<McpServer>,
    /// The tool's own name on its server.
    remote: String,
    spec: ToolSpec,
    timeout: Duration,
}

impl McpTool {
    /// The tools `listed` by `server`, named `SERVER__tool` (see [`offered_name`]); a name
    /// already in `taken` gets a numeric suffix.
    pub fn from_listing(server: Arc<McpServer>, listed: Vec<ToolDef>, timeout: Duration, taken: &mut BTreeSet<String>) -> Vec<McpTool> {
        listed
            .into_iter()
            .map(|tool| {
                let name = unique(offered_name(&server.name, &tool.name), taken);
                let description = tool
                    .description
                    .as_deref()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{} (MCP server {})", tool.name, server.name));
                let parameters = serde_json::Value::Object(tool.input_schema);
                McpTool { server: server.clone(), remote: tool.name, spec: ToolSpec { name, description, parameters }, timeout }
            })
            .collect()
    }

    /// The name the model calls it by.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// What the model is offered.
    pub fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    /// Calls the tool; its text is capped to `output_limit` bytes (head and tail).
    pub async fn call(&self, input: serde_json::Value, output_limit: usize) -> Result<String, McpCallError> {
        let input = if input.is_null() { serde_json::json!({}) } else { input };
        if !input.is_object() {
            return Err(McpCallError::InvalidArguments("the arguments must be a JSON object".to_string()));
        }
        let result = self.server.call(&self.remote, input, self.timeout).await.map_err(|e| match e {
            CallError::Failed(m) => McpCallError::ServerFailed(format!("MCP server {}: {m}", self.server.name)),
            CallError::TimedOut(limit) => McpCallError::TimedOut(format!(
                "{} did not answer within {}; the call was cancelled",
                self.spec.name,
                humantime::format_duration(limit)
            )),
        })?;
        let text = cap(&result.text, output_limit);
        if result.is_error {
            return Err(McpCallError::ToolError(text));
        }
        Ok(text)
    }
}

/// `SERVER__tool` reduced to `^[a-zA-Z0-9_-]{1,64}$`: any other character becomes `_`, and a
/// longer name is cut to 64 characters.
pub fn offered_name(server: &str, tool: &str) -> String {
    let raw = format!("{server}__{tool}");
    raw.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') { c } else { '_' }).take(MAX_TOOL_NAME).collect()
}

/// `name`, or `name` with `_2`, `_3`… (within 64 characters) when it is taken; recorded in `taken`.
fn unique(name: String, taken: &mut BTreeSet<String>) -> String {
    let mut candidate = name.clone();
    let mut n = 2;
    while taken.contains(&candidate) {
        let suffix = format!("_{n}");
        let keep = MAX_TOOL_NAME.saturating_sub(suffix.len()).min(name.len());
        candidate = format!("{}{suffix}", &name[..keep]);
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// The first and last `limit / 2` bytes of `text` with a marker between, when it is longer.
fn cap(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let floor = |mut i: usize| {
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let head = floor(limit / 2);
    let tail = floor(text.len() - limit / 2);
    format!("{}\n[... {} bytes omitted ...]\n{}", &text[..head], tail - head, &text[tail..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_names_fit_every_wire_format() {
        let re = regex::Regex::new("^[a-zA-Z0-9_-]{1,64}$").unwrap();
        assert_eq!(offered_name("fs", "read_file"), "fs__read_file");
        assert_eq!(offered_name("fs", "git.log/head"), "fs__git_log_head");
        let long = offered_name("server", &"x".repeat(100));
        assert_eq!(long.len(), 64);
        for name in [offered_name("fs", "read file ✓"), long] {
            assert!(re.is_match(&name), "{name}");
        }
    }

    #[test]
    fn clashing_names_get_a_suffix_within_64_characters() {
        let mut taken = BTreeSet::new();
        let long = "y".repeat(64);
        assert_eq!(unique("fs__a".into(), &mut taken), "fs__a");
        assert_eq!(unique("fs__a".into(), &mut taken), "fs__a_2");
        assert_eq!(unique(long.clone(), &mut taken), long);
        let second = unique(long, &mut taken);
        assert!(second.len() <= 64 && second.ends_with("_2"), "{second}");
    }

    #[test]
    fn long_results_keep_head_and_tail() {
        let text = format!("{}{}", "a".repeat(100), "b".repeat(100));
        let capped = cap(&text, 20);
        assert!(capped.starts_with("aaaaaaaaaa\n[... 180 bytes omitted ...]\nbbbbbbbbbb"), "{capped}");
        assert_eq!(cap("short", 20), "short");
    }
}
