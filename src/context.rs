//! Keeping a long task's conversation inside the model's context window (docs/src/long-tasks.md).
//!
//! - **The window** ([`ContextPolicy`]): the provider's `context_window`, else the built-in
//!   table's (`llm/prices.toml`), capped by the task's `max_context_tokens`; compaction starts at
//!   `compact_at` (default [`DEFAULT_COMPACT_AT`]) of it. Unknown window: nothing is done ahead
//!   of time, only after the provider refuses a request as too long — and the window it names in
//!   that refusal is used from then on ([`ContextMeter::learn`]).
//! - **The estimate** ([`ContextMeter::estimate`]): the prompt size the provider reported for
//!   the last call (`input_tokens`, cached tokens included) plus about one token per
//!   [`BYTES_PER_TOKEN`] bytes of every message added since (as JSON). Before any call, or after
//!   the conversation was rewritten, the whole request (system prompt, tools, messages) is
//!   estimated that way.
//! - **Shrinking, cheapest first**: [`trim_tool_outputs`] cuts tool outputs older than the
//!   last [`RECENT_TURNS`] turns to their head and tail with a note of what was cut; if that is
//!   not enough, the model summarises the work so far ([`summary_request`]) and the
//!   conversation continues from the task prompt, the summary and the last turns
//!   ([`rebuild`]). Cuts fall only before an assistant message, so every tool call stays
//!   answered by its result and no result is left without its call.

use dracode_llm::{ContentBlock, Message, Role, ToolSpec, Usage};

/// The fraction of the window at which compaction starts, when the task does not say.
pub const DEFAULT_COMPACT_AT: f64 = 0.85;
/// Bytes counted as one token in estimates (English text and code average 3–4 bytes a token;
/// the higher figure undercounts a little, which `compact_at` leaves room for).
pub const BYTES_PER_TOKEN: u64 = 4;
/// Assistant turns at the end of the conversation whose tool outputs are never trimmed (unless
/// even the summary was not enough).
pub const RECENT_TURNS: usize = 3;
/// Tool outputs up to this many bytes are never trimmed.
const TRIM_OVER: usize = 1024;
/// Bytes kept at the start of a trimmed tool output.
const KEEP_HEAD: usize = 384;
/// Bytes kept at the end of a trimmed tool output.
const KEEP_TAIL: usize = 256;
/// Bytes each tool output keeps in the transcript the summary is written from.
const TRANSCRIPT_OUTPUT: usize = 400;
/// Transcript bytes for the summary request when the window is unknown.
const FALLBACK_TRANSCRIPT_BYTES: usize = 24 * 1024;

/// What the model is asked for when the conversation is compacted.
pub const SUMMARY_INSTRUCTION: &str = "\
The conversation above is being compacted because it is close to the model's context window. \
Write a summary of the work so far that lets the agent continue without the earlier messages: \
the files it read and changed (with paths), what it found and decided, the commands it ran and \
their results, and what remains to be done. Reply with the summary only; do not call tools.";

/// How the summary is introduced in the rewritten first message.
const SUMMARY_HEADER: &str = "[dracode: earlier turns of this task were compacted to fit the model's context window. \
Summary of the work so far:]";

/// The window a task's conversation must fit in, and when to act.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextPolicy {
    /// The effective window in tokens; `None` when unknown.
    pub window: Option<u64>,
    /// The fraction of the window at which compaction starts, in (0, 1].
    pub compact_at: f64,
}

impl ContextPolicy {
    /// The model's window capped by the task's `max_context_tokens`.
    pub fn new(model_window: Option<u64>, max_context_tokens: Option<u64>, compact_at: f64) -> Self {
        let window = match (model_window, max_context_tokens) {
            (Some(model), Some(cap)) => Some(model.min(cap)),
            (model, cap) => model.or(cap),
        };
        ContextPolicy { window, compact_at }
    }

    /// No window: only a provider's refusal leads to compaction.
    pub fn unknown() -> Self {
        ContextPolicy { window: None, compact_at: DEFAULT_COMPACT_AT }
    }
}

/// Tokens of `text` by the byte estimate.
pub fn estimate_text(text: &str) -> u64 {
    (text.len() as u64).div_ceil(BYTES_PER_TOKEN)
}

/// Tokens of `messages` by the byte estimate of their JSON.
pub fn estimate_messages(messages: &[Message]) -> u64 {
    messages.iter().map(|m| serde_json::to_string(m).map_or(0, |json| estimate_text(&json))).sum()
}

/// Tokens of a whole request by the byte estimate.
pub fn estimate_request(system: &str, tools: &[ToolSpec], messages: &[Message]) -> u64 {
    estimate_text(system) + serde_json::to_string(tools).map_or(0, |json| estimate_text(&json)) + estimate_messages(messages)
}

/// The size of the next request, tracked over a task's calls.
#[derive(Debug, Clone, Default)]
pub struct ContextMeter {
    /// The prompt tokens reported for the last call and how many messages it sent.
    reported: Option<(u64, usize)>,
    /// A window the provider named when it refused a request.
    learned: Option<u64>,
}

impl ContextMeter {
    /// Records the usage of a call that sent the first `sent` messages.
    pub fn observe(&mut self, usage: &Usage, sent: usize) {
        if usage.input_tokens > 0 {
            self.reported = Some((usage.input_tokens, sent));
        }
    }

    /// The conversation was rewritten: estimate it whole until the next reported usage.
    pub fn forget(&mut self) {
        self.reported = None;
    }

    /// `tokens` were cut from messages the last call sent.
    pub fn discount(&mut self, tokens: u64) {
        if let Some((reported, _)) = &mut self.reported {
            *reported = reported.saturating_sub(tokens);
        }
    }

    /// Remembers the window a provider named in its refusal.
    pub fn learn(&mut self, window: Option<u64>) {
        if let Some(window) = window {
            self.learned = Some(self.learned.map_or(window, |w| w.min(window)));
        }
    }

    /// The estimated tokens of a request of `system`, `tools` and `messages`.
    pub fn estimate(&self, system: &str, tools: &[ToolSpec], messages: &[Message]) -> u64 {
        match self.reported {
            Some((tokens, sent)) if sent <= messages.len() => tokens + estimate_messages(&messages[sent..]),
            _ => estimate_request(system, tools, messages),
        }
    }

    /// The window in force: the policy's, or the smaller one a provider named.
    pub fn window(&self, policy: &ContextPolicy) -> Option<u64> {
        match (policy.window, self.learned) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The estimate at which to compact, when a window is known.
    pub fn threshold(&self, policy: &ContextPolicy) -> Option<u64> {
        self.window(policy).map(|w| ((w as f64) * policy.compact_at).floor() as u64)
    }
}

/// Cuts every tool output longer than 1 KiB in messages before the last `keep_recent` assistant
/// turns to its head and tail, with a note of how many bytes were cut. Returns the bytes saved.
pub fn trim_tool_outputs(messages: &mut [Message], keep_recent: usize) -> u64 {
    let end = cut_point(messages, keep_recent).unwrap_or(0);
    let mut saved = 0;
    for message in &mut messages[..end] {
        for block in &mut message.content {
            if let ContentBlock::ToolResult { content, .. } = block
                && content.len() > TRIM_OVER
            {
                let trimmed = cut_middle(content, KEEP_HEAD, KEEP_TAIL);
                saved += (content.len() - trimmed.len()) as u64;
                *content = trimmed;
            }
        }
    }
    saved
}

/// The index of the `keep`-th assistant message from the end (0: the end), never 0 itself (the
/// task prompt stays first). `None` when there are fewer.
fn cut_point(messages: &[Message], keep: usize) -> Option<usize> {
    if keep == 0 {
        return Some(messages.len());
    }
    let assistants: Vec<usize> = messages.iter().enumerate().filter(|(i, m)| *i > 0 && m.role == Role::Assistant).map(|(i, _)| i).collect();
    assistants.len().checked_sub(keep).map(|at| assistants[at])
}

/// `text` with its middle replaced by a note, keeping about `head` bytes before and `tail`
/// after (on character boundaries).
pub fn cut_middle(text: &str, head: usize, tail: usize) -> String {
    if text.len() <= head + tail {
        return text.to_string();
    }
    let head_end = floor_boundary(text, head);
    let tail_start = ceil_boundary(text, text.len() - tail);
    let cut = tail_start - head_end;
    format!(
        "{}\n[... dracode cut {cut} bytes of this output to fit the context window; run the tool again for them ...]\n{}",
        &text[..head_end],
        &text[tail_start..]
    )
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// The one message of the summary call: the task (with any earlier summary), a transcript of
/// the rest of `messages` in at most about `budget_bytes` (old turns dropped first, tool
/// outputs cut), and [`SUMMARY_INSTRUCTION`]. Plain text, so no tool call can be orphaned.
pub fn summary_request(messages: &[Message], budget_bytes: Option<usize>) -> Message {
    let budget = budget_bytes.unwrap_or(FALLBACK_TRANSCRIPT_BYTES).max(2048);
    let task = messages.first().map(Message::text).unwrap_or_default();
    let task = cut_middle(&task, budget / 6, budget / 6);
    let lines: Vec<String> = messages.iter().skip(1).flat_map(transcript_lines).collect();
    let mut room = budget.saturating_sub(task.len());
    let mut kept: Vec<&str> = Vec::new();
    for line in lines.iter().rev() {
        if line.len() + 1 > room {
            kept.push("[... earlier turns left out ...]");
            break;
        }
        room -= line.len() + 1;
        kept.push(line);
    }
    kept.reverse();
    let text = format!("<task>\n{task}\n</task>\n<transcript>\n{}\n</transcript>\n\n{SUMMARY_INSTRUCTION}", kept.join("\n"));
    Message::user_text(text)
}

/// One message as transcript lines: the agent's text, its tool calls, their (cut) results.
fn transcript_lines(message: &Message) -> Vec<String> {
    message
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text, .. } if message.role == Role::Assistant => format!("agent: {}", cut_middle(text, 1024, 512)),
            ContentBlock::Text { text, .. } => format!("user: {}", cut_middle(text, 1024, 512)),
            ContentBlock::ToolUse { name, input, .. } => {
                format!("agent called {name} {}", cut_middle(&input.to_string(), TRANSCRIPT_OUTPUT, 0))
            }
            ContentBlock::ToolResult { content, is_error, .. } => {
                let what = if *is_error { "tool error" } else { "tool result" };
                format!("{what}: {}", cut_middle(content, TRANSCRIPT_OUTPUT / 2, TRANSCRIPT_OUTPUT / 2))
            }
            ContentBlock::Reasoning { text, .. } => format!("agent thought: {}", cut_middle(text, 512, 256)),
        })
        .collect()
}

/// The conversation after a summary: the task `prompt` with the `summary`, then `messages`
/// from the last `keep_turns` assistant turns on (none when there are fewer). Starts with the
/// user and every kept tool call keeps its result.
pub fn rebuild(prompt: &str, summary: &str, messages: &[Message], keep_turns: usize) -> Vec<Message> {
    let start = cut_point(messages, keep_turns).or_else(|| cut_point(messages, 1)).unwrap_or(messages.len());
    let first = Message::user_text(format!("{prompt}\n\n{SUMMARY_HEADER}\n{}", summary.trim()));
    std::iter::once(first).chain(messages[start..].iter().cloned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn assistant_call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse { id: id.into(), name: "read_file".into(), input: json!({"file_path": "a"}) }],
        }
    }

    fn result(id: &str, content: &str) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult { tool_use_id: id.into(), content: content.into(), is_error: false }],
        }
    }

    fn conversation(turns: usize, output: &str) -> Vec<Message> {
        let mut messages = vec![Message::user_text("fix it")];
        for i in 0..turns {
            messages.push(assistant_call(&format!("c{i}")));
            messages.push(result(&format!("c{i}"), output));
        }
        messages
    }

    fn outputs(messages: &[Message]) -> Vec<&str> {
        messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|b| match b {
                ContentBlock::ToolResult { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Every tool result answers the call in the message just before it, and every call is
    /// answered in the message just after.
    fn assert_paired(messages: &[Message]) {
        assert_eq!(messages[0].role, Role::User);
        for (i, m) in messages.iter().enumerate() {
            for b in &m.content {
                if let ContentBlock::ToolResult { tool_use_id, .. } = b {
                    let call = messages[i - 1].content.iter().any(|c| matches!(c, ContentBlock::ToolUse { id, .. } if id == tool_use_id));
                    assert!(call, "orphaned result {tool_use_id} in {messages:?}");
                }
                if let ContentBlock::ToolUse { id, .. } = b {
                    let answered = messages.get(i + 1).is_some_and(|n| {
                        n.content.iter().any(|r| matches!(r, ContentBlock::ToolResult { tool_use_id, .. } if tool_use_id == id))
                    });
                    assert!(answered || i + 1 == messages.len(), "unanswered call {id}");
                }
            }
        }
    }

    #[test]
    fn the_window_is_the_smaller_of_model_cap_and_refusal() {
        assert_eq!(ContextPolicy::new(Some(128_000), Some(16_000), 0.85).window, Some(16_000));
        assert_eq!(ContextPolicy::new(None, Some(16_000), 0.85).window, Some(16_000));
        assert_eq!(ContextPolicy::new(Some(8_000), None, 0.85).window, Some(8_000));
        let policy = ContextPolicy::new(Some(10_000), None, 0.5);
        let mut meter = ContextMeter::default();
        assert_eq!(meter.threshold(&policy), Some(5_000));
        meter.learn(Some(4_000));
        assert_eq!(meter.threshold(&policy), Some(2_000));
        assert_eq!(ContextMeter::default().threshold(&ContextPolicy::unknown()), None);
    }

    #[test]
    fn the_estimate_is_the_last_reported_prompt_plus_what_was_added() {
        let mut messages = conversation(1, "x");
        let mut meter = ContextMeter::default();
        let whole = meter.estimate("system", &[], &messages);
        assert_eq!(whole, estimate_request("system", &[], &messages));
        meter.observe(&Usage::from_counts(5_000, 10), messages.len());
        assert_eq!(meter.estimate("system", &[], &messages), 5_000);
        let big = result("c9", &"y".repeat(4_000));
        let added = estimate_messages(std::slice::from_ref(&big));
        assert!((1_000..1_100).contains(&added), "{added}");
        messages.push(big);
        assert_eq!(meter.estimate("system", &[], &messages), 5_000 + added);
        meter.discount(1_000);
        assert_eq!(meter.estimate("system", &[], &messages), 4_000 + added);
        meter.forget();
        assert_eq!(meter.estimate("system", &[], &messages), estimate_request("system", &[], &messages));
    }

    #[test]
    fn trimming_keeps_recent_turns_and_the_head_and_tail_of_old_outputs() {
        let output = format!("HEAD{}TAIL", "m".repeat(10_000));
        let mut messages = conversation(5, &output);
        let saved = trim_tool_outputs(&mut messages, RECENT_TURNS);
        let kept = outputs(&messages);
        for old in &kept[..2] {
            assert!(old.starts_with("HEAD") && old.ends_with("TAIL"), "{old}");
            assert!(old.contains("dracode cut 9368 bytes"), "{old}");
            assert!(old.len() < 800, "{}", old.len());
        }
        assert!(kept[2..].iter().all(|o| *o == output), "the last three turns are whole");
        assert_eq!(saved, 2 * (output.len() - kept[0].len()) as u64);
        assert_eq!(trim_tool_outputs(&mut messages, RECENT_TURNS), 0, "trimming twice cuts nothing more");
        assert_eq!(trim_tool_outputs(&mut messages, 0), 3 * saved / 2);
        assert_paired(&messages);
        let small = conversation(5, "short");
        let mut trimmed = small.clone();
        assert_eq!(trim_tool_outputs(&mut trimmed, 0), 0);
        assert_eq!(trimmed, small);
    }

    #[test]
    fn cut_middle_respects_characters() {
        let text = "é".repeat(1000);
        let cut = cut_middle(&text, 101, 101);
        assert!(cut.starts_with(&"é".repeat(50)) && cut.ends_with(&"é".repeat(50)), "{cut}");
        assert_eq!(cut_middle("short", 10, 10), "short");
    }

    #[test]
    fn the_summary_request_is_plain_text_within_its_budget() {
        let messages = conversation(200, &"z".repeat(5_000));
        let request = summary_request(&messages, Some(8_000));
        assert_eq!(request.role, Role::User);
        assert!(matches!(request.content.as_slice(), [ContentBlock::Text { .. }]));
        let text = request.text();
        assert!(text.len() < 8_000 + SUMMARY_INSTRUCTION.len() + 100, "{}", text.len());
        assert!(text.contains("fix it") && text.contains("earlier turns left out") && text.contains("agent called read_file"));
        assert!(text.ends_with(SUMMARY_INSTRUCTION));
    }

    #[test]
    fn rebuilt_conversations_start_with_the_task_and_keep_every_call_answered() {
        let messages = conversation(6, "out");
        let rebuilt = rebuild("fix it", "read a, changed b", &messages, 2);
        assert_eq!(rebuilt.len(), 5);
        assert!(rebuilt[0].text().starts_with("fix it\n\n[dracode: earlier turns") && rebuilt[0].text().ends_with("read a, changed b"));
        assert_eq!(rebuilt[1].role, Role::Assistant);
        assert_paired(&rebuilt);
        // A conversation with no turn yet keeps only the task; one with a single turn keeps it.
        assert_eq!(rebuild("p", "s", &messages[..1], 2).len(), 1);
        let one = rebuild("p", "s", &messages[..3], 2);
        assert_eq!(one.len(), 3);
        assert_paired(&one);
    }
}
