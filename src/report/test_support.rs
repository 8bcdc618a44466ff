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
    let mut o = TaskOutcome::new(task_id, std::path::Path::new("tasks.toml"), 0, status, "openai", "gpt-4o");
    o.record.num_turns = 4;
    o.record.duration_ms = 2100;
    o.record.usage = Usage { requests: 4, ..Usage::from_counts(1000, 234) };
    o.record.total_cost_usd = Some(0.0123);
    o.record.result = Some("done".to_string());
    o
}

/// A finished task with every field of its record set (none at its default) and a patch, as
/// a producer finishes it ([`TaskOutcome::finish`]).
pub fn every_field(task_id: &str) -> TaskOutcome {
    use crate::events::{Attachments, CacheHit, CheckRecord, DeniedCall, FailureKind, RegradedFrom, RepeatVerdict, TaskError};
    use dracode_results::records::{WireAttempt, WireCheckRound, WireRepeat};
    let error = |kind: FailureKind, message: &str| Some(TaskError { kind, message: message.into(), http_status: Some(502) });
    let mut o = outcome(task_id, Status::Failed);
    let r = &mut o.record;
    (r.files_changed, r.attempts, r.flaky, r.compactions, r.repairs) = (vec!["src/lib.rs".into()], 3, true, 1, 1);
    let check = CheckRecord { command: "cargo test".into(), exit_code: Some(101), output_tail: "FAILED".into(), ..Default::default() };
    r.check = Some(CheckRecord {
        before: Some(Some(101)),
        before_output_tail: Some("x".into()),
        started_ms: Some(9),
        duration_ms: Some(4),
        ..check
    });
    (r.error, r.manifest_name, r.tags, r.line, r.index) =
        (error(FailureKind::Check, "check failed"), Some("repo/tasks.toml".into()), vec!["n".into()], Some(12), 4);
    r.prior_attempts = vec![WireAttempt { status: Status::Error, error: error(FailureKind::Agent, "x"), duration_ms: 1500 }];
    (r.branch, r.structured_output) = (Some("dracode/t".into()), Some(serde_json::json!({"risk": 2})));
    r.denied = vec![DeniedCall { call_id: "c1".into(), tool: "run_command".into(), message: "denied".into() }];
    (r.protected, r.kept_ignored) = (vec!["tests/t.py".into()], vec!["target/".into()]);
    r.protected_refused = vec!["tests/golden.txt".into()];
    (r.network_denied, r.network_denied_hosts, r.carried_from) = (2, vec!["[::1]:53".into()], Some("run-0".into()));
    let usage = Usage::from_counts(10, 5);
    r.cached_from = Some(CacheHit { run_id: "c".into(), key: "k".into(), num_turns: 2, usage, total_cost_usd: Some(0.5), duration_ms: 3 });
    r.regraded_from = Some(RegradedFrom { run_id: "run-r".into(), attempt: 2, status: Status::Passed });
    r.check_rounds = vec![WireCheckRound { exit_code: None, duration_ms: 40, output_tail: "MISMATCH".into(), started_ms: Some(900) }];
    (r.pass_rate, r.verdict) = (Some(0.5), Some(RepeatVerdict::Flaky));
    r.repeats = vec![WireRepeat {
        repeat: 1,
        attempt: 2,
        status: Status::Passed,
        error: None,
        duration_ms: 10,
        repairs: 1,
        check_exit_code: Some(None),
        reported: true,
        files_changed: vec!["a.txt".into()],
        diff_path: None,
        transcript_path: None,
    }];
    let patch = |text: &str| Some(format!("diff --git a/{text} b/{text}\n"));
    o.attachments = Attachments {
        diff: patch("src/lib.rs"),
        transcript: Some(transcript("done")),
        repeats: vec![Attachments { diff: patch("a.txt"), transcript: Some(transcript("one")), repeats: Vec::new() }],
    };
    o.finish();
    o
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

/// The finish event of `outcome` (finished as a producer finishes it).
pub fn finished(mut outcome: TaskOutcome) -> Event {
    let id = outcome.task_id.clone();
    let attempt = outcome.record.attempts;
    event(Some((&id, attempt)), EventKind::task_finished(&mut outcome))
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
    done.attachments.diff = Some("diff --git a/README.md b/README.md\n".into());
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
