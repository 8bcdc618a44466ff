//! Builders of outcomes and event streams shared by the reporters' unit tests.

use crate::events::{Event, EventKind, RetryScope, RunTotals, Status, TaskOutcome, TaskRef, Transcript};
use dracode_llm::{Message, StopReason, Usage};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// XSD checks with xmllint, shared with the integration tests.
#[path = "../../tests/support/xmllint.rs"]
pub mod xmllint;

/// A writer whose bytes a test can read back while a reporter owns it.
#[derive(Clone, Default)]
pub struct Shared(pub Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// 2023-11-14T22:13:20.123Z.
pub fn fixed_ts() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123)
}

/// A finished task of `tasks.toml` at index 0: 4 turns, 1,234 tokens, $0.0123, 2.1 s.
pub fn outcome(task_id: &str, status: Status) -> TaskOutcome {
    TaskOutcome {
        num_turns: 4,
        duration: Duration::from_millis(2100),
        usage: Usage { requests: 4, ..Usage::from_counts(1000, 234) },
        cost_usd: Some(0.0123),
        result: Some("done".to_string()),
        ..TaskOutcome::new(task_id, std::path::Path::new("tasks.toml"), 0, status, "openai", "gpt-4o")
    }
}

/// A transcript of one user message and one answer.
pub fn transcript(answer: &str) -> Arc<Transcript> {
    Arc::new(Transcript {
        provider: "openai".into(),
        model: "gpt-4o".into(),
        system: "You are a coding agent.".into(),
        tools: vec!["read_file".into()],
        messages: vec![
            Message::user_text("Add a README"),
            Message { role: dracode_llm::Role::Assistant, content: vec![dracode_llm::ContentBlock::text(answer)] },
        ],
    })
}

/// An event at [`fixed_ts`].
pub fn event(task: Option<(&str, u32)>, kind: EventKind) -> Event {
    Event { ts: fixed_ts(), task: task.map(|(id, attempt)| TaskRef { task_id: id.into(), attempt }), kind }
}

/// The finish event of `outcome`.
pub fn finished(outcome: TaskOutcome) -> Event {
    let id = outcome.task_id.clone();
    event(Some((&id, outcome.attempts)), EventKind::TaskFinished(Box::new(outcome)))
}

/// Totals with the given counts, 3 s, exit code 0 when everything passed.
pub fn totals(counts: &[(Status, usize)]) -> RunTotals {
    let exit_code = i32::from(counts.iter().any(|(s, n)| !s.is_pass() && *n > 0));
    RunTotals {
        counts: counts.iter().copied().collect::<BTreeMap<_, _>>(),
        usage: Usage::from_counts(2000, 468),
        cost_usd: Some(0.0246),
        duration: Duration::from_secs(3),
        exit_code,
        artifact_failures: 0,
    }
}

/// One event of every kind, in the order a one-task run emits them.
pub fn sample_run() -> Vec<Event> {
    let mut done = outcome("t1", Status::Passed);
    done.diff = Some("diff --git a/README.md b/README.md\n".into());
    vec![
        event(
            None,
            EventKind::RunStarted {
                version: "0.1.0".into(),
                manifests: vec!["tasks.toml".into()],
                task_count: 1,
                shard: None,
                jobs: 1,
                warnings: Vec::new(),
                config_files: None,
            },
        ),
        event(
            Some(("t1", 1)),
            EventKind::TaskStarted {
                workspace_ms: None,
                provider: "openai".into(),
                model: "gpt-4o".into(),
                isolation: "worktree".into(),
                workdir: PathBuf::from("/tmp/w"),
                base_commit: Some("abc123".into()),
            },
        ),
        event(
            Some(("t1", 1)),
            EventKind::TurnCompleted {
                turn: 1,
                stop_reason: StopReason::ToolUse,
                usage: Usage::from_counts(10, 5),
                duration: Duration::from_millis(800),
            },
        ),
        event(
            Some(("t1", 1)),
            EventKind::ToolStarted { call_id: "c1".into(), name: "write_file".into(), input: serde_json::json!({"path": "README.md"}) },
        ),
        event(
            Some(("t1", 1)),
            EventKind::ToolCompleted {
                call_id: "c1".into(),
                name: "write_file".into(),
                ok: true,
                output: "wrote README.md".into(),
                duration: Duration::from_millis(3),
            },
        ),
        event(
            Some(("t1", 1)),
            EventKind::Retry { scope: RetryScope::Http, reason: "429".into(), delay: Duration::from_millis(500), next_attempt: 2 },
        ),
        event(
            Some(("t1", 1)),
            EventKind::ContextCompacted {
                tokens_before: 9000,
                tokens_after: 3000,
                method: crate::events::CompactionMethod::TrimToolOutputs,
            },
        ),
        event(
            Some(("t1", 1)),
            EventKind::NetworkDenied {
                host: "evil.example".into(),
                port: 443,
                command: "curl https://evil.example".into(),
                reason: Some("evil.example:443 is not in the task's network allowlist".into()),
            },
        ),
        event(Some(("t1", 1)), limit_warning()),
        event(Some(("t1", 1)), EventKind::AgentMessage { text: "Done.".into() }),
        finished(done),
        event(None, EventKind::RunFinished(totals(&[(Status::Passed, 1)]))),
    ]
}

/// A `limit.warning`: two turns left of ten.
fn limit_warning() -> EventKind {
    let message = "[dracode] A limit of this task is close".to_string();
    EventKind::LimitWarning { limit: dracode_results::Limit::MaxIterations, remaining: 2.0, allowed: 10.0, message }
}
