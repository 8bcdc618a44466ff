//! Builders of outcomes and event streams shared by the unit tests of the events and of the
//! reporters.

use super::{Event, Header, RetryScope, RunTotals, Stamp, Status, TaskOutcome, Transcript, WireEvent};
use dracode_llm::{Message, StopReason, Usage};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

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

/// An event at [`fixed_ts`], of `task` (its id and attempt) as its emitter would make it
/// ([`Event::of_task`]); unstamped.
pub fn event(task: Option<(&str, u32)>, record: impl Into<Event>) -> Event {
    let event = Event { ts: fixed_ts(), ..record.into() };
    match task {
        Some((id, attempt)) => event.of_task(id, attempt),
        None => event,
    }
}

/// An unstamped header, for a record a test makes.
pub fn unstamped() -> Header {
    Header::unstamped(None)
}

/// `events` as a bus of the run `run_id` (sharded `shard`) hands them to its reporters:
/// stamped ([`Stamp`]), `seq` from 1.
pub fn stamped(events: impl IntoIterator<Item = Event>, run_id: &str, shard: Option<&str>) -> Vec<Event> {
    let mut stamp = Stamp::new(run_id, shard);
    events
        .into_iter()
        .map(|mut event| {
            stamp.stamp(&mut event);
            event
        })
        .collect()
}

/// The finish event of `outcome` (finished as a producer finishes it).
pub fn finished(mut outcome: TaskOutcome) -> Event {
    let id = outcome.task_id.clone();
    let attempt = outcome.record.attempts;
    event(Some((&id, attempt)), Event::task_finished(&mut outcome))
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
    }
}

/// The `run.finished` of `totals` as a reporter reads it.
pub fn run_end(totals: &RunTotals) -> super::RunFinished {
    Event::run_finished(totals).as_run_finished().unwrap_or_else(|| unreachable!("a run.finished event"))
}

/// One event of every kind, in the order a one-task run emits them (unstamped).
pub fn sample_run() -> Vec<Event> {
    let mut done = outcome("t1", Status::Passed);
    done.attachments.diff = Some("diff --git a/README.md b/README.md\n".into());
    let t1 = Some(("t1", 1));
    vec![
        event(
            None,
            WireEvent::RunStarted {
                header: unstamped(),
                version: "0.1.0".into(),
                manifests: vec!["tasks.toml".into()],
                task_count: 1,
                jobs: 1,
                warnings: Vec::new(),
                config_files: None,
                merged_from: None,
            },
        ),
        event(
            t1,
            WireEvent::TaskStarted {
                header: unstamped(),
                workspace_ms: None,
                issue: None,
                provider: "openai".into(),
                model: "gpt-4o".into(),
                isolation: "worktree".into(),
                workdir: "/tmp/w".into(),
                base_commit: Some("abc123".into()),
            },
        ),
        event(t1, Event::turn_completed(1, &StopReason::ToolUse, Usage::from_counts(10, 5), Duration::from_millis(800))),
        event(t1, Event::tool_started("c1", "write_file", serde_json::json!({"path": "README.md"}))),
        event(t1, Event::tool_completed("c1", "write_file", true, "wrote README.md".into(), Duration::from_millis(3))),
        event(t1, Event::retry(RetryScope::Http, "429".into(), Duration::from_millis(500), 2)),
        event(
            t1,
            WireEvent::ContextCompacted {
                header: unstamped(),
                tokens_before: 9000,
                tokens_after: 3000,
                method: crate::events::CompactionMethod::TrimToolOutputs,
            },
        ),
        event(
            t1,
            WireEvent::NetworkDenied {
                header: unstamped(),
                host: "evil.example".into(),
                port: 443,
                command: "curl https://evil.example".into(),
                reason: Some("evil.example:443 is not in the task's network allowlist".into()),
                phase: Some("agent".into()),
                lookup: false,
            },
        ),
        event(t1, limit_warning()),
        event(t1, WireEvent::AgentMessage { header: unstamped(), text: "Done.".into() }),
        finished(done),
        event(None, Event::run_finished(&totals(&[(Status::Passed, 1)]))),
    ]
}

/// A `limit.warning`: two turns left of ten.
fn limit_warning() -> WireEvent {
    let message = "[dracode] A limit of this task is close".to_string();
    WireEvent::LimitWarning { header: unstamped(), limit: dracode_results::Limit::MaxIterations, remaining: 2.0, allowed: 10.0, message }
}
