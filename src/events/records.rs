//! The records the engine emits that need more than their fields: typed values converted once,
//! where the event happens (a duration in whole milliseconds, a stop reason in words, a tool's
//! arguments and output cut with their whole kept beside, a finished task, a run's totals); and
//! the views through which reporters read a finished task ([`TaskFinished`]) and a finished run
//! ([`RunFinished`]).

use super::{Attachment, Attachments, Event, RetryScope, RunTotals, TaskOutcome, millis};
use dracode_llm::{StopReason, Usage};
use dracode_results::records::{Header, StatusCounts, TOOL_OUTPUT_LIMIT, WireEvent, WireOutcome, cap_strings, cut_at, exact_cost};
use std::time::Duration;

impl Event {
    /// `tool.started`: the arguments with every string cut to [`TOOL_OUTPUT_LIMIT`] bytes
    /// ([`cap_strings`]) and their whole size; the whole arguments beside, when anything was cut.
    pub fn tool_started(call_id: &str, name: &str, input: serde_json::Value) -> Self {
        let input_bytes = serde_json::to_string(&input).map_or(0, |text| text.len());
        let record = WireEvent::ToolStarted {
            header: Header::unstamped(None),
            call_id: call_id.to_string(),
            name: name.to_string(),
            // Arguments no longer than the limit as JSON hold no string to cut.
            input: if input_bytes > TOOL_OUTPUT_LIMIT { cap_strings(&input, TOOL_OUTPUT_LIMIT) } else { input.clone() },
            input_bytes,
        };
        let event = Event::new(record);
        if input_bytes > TOOL_OUTPUT_LIMIT { event.with(Attachment::ToolInput(input)) } else { event }
    }

    /// `tool.completed`: the output cut to [`TOOL_OUTPUT_LIMIT`] bytes on a character boundary
    /// ([`cut_at`]) and its whole length; the whole output beside, when it was cut.
    pub fn tool_completed(call_id: &str, name: &str, ok: bool, output: String, duration: Duration) -> Self {
        let record = WireEvent::ToolCompleted {
            header: Header::unstamped(None),
            call_id: call_id.to_string(),
            name: name.to_string(),
            ok,
            output: cut_at(&output, TOOL_OUTPUT_LIMIT).to_string(),
            output_bytes: output.len(),
            duration_ms: millis(duration),
        };
        let event = Event::new(record);
        if output.len() > TOOL_OUTPUT_LIMIT { event.with(Attachment::ToolOutput(output)) } else { event }
    }

    /// `turn.completed`: an LLM call that returned after `duration`, retries included.
    pub fn turn_completed(turn: u32, stop_reason: &StopReason, usage: Usage, duration: Duration) -> Self {
        Event::new(WireEvent::TurnCompleted {
            header: Header::unstamped(None),
            turn,
            stop_reason: stop_reason.as_str().to_string(),
            usage,
            duration_ms: millis(duration),
        })
    }

    /// `retry`: its header names no attempt (the emitter leaves it out): the record's own
    /// `attempt` is the one about to start, and one key cannot hold two numbers.
    pub fn retry(scope: RetryScope, reason: String, delay: Duration, next_attempt: u32) -> Self {
        Event::new(WireEvent::Retry { header: Header::unstamped(None), scope, reason, delay_ms: millis(delay), attempt: next_attempt })
    }

    /// The `task.finished` event of `outcome`, which is finished first ([`TaskOutcome::finish`]):
    /// how every producer reports a task's end. Its header names the task even when the
    /// scheduler emits it run-level (a task skipped before it started has no attempt).
    pub fn task_finished(outcome: &mut TaskOutcome) -> Self {
        outcome.finish();
        let header = Header { task_id: Some(outcome.task_id.clone()), ..Header::unstamped(None) };
        let record = WireEvent::TaskFinished { header, outcome: Box::new(outcome.record.clone()) };
        Event::new(record).with(Attachment::Task(outcome.attachments.clone()))
    }

    /// The `run.finished` event of `totals`: every status counted, the cost as results keep it
    /// ([`exact_cost`]).
    pub fn run_finished(totals: &RunTotals) -> Self {
        Event::new(WireEvent::RunFinished {
            header: Header::unstamped(None),
            counts: StatusCounts::from_counts(&totals.counts),
            usage: totals.usage,
            total_cost_usd: totals.cost_usd.map(exact_cost),
            duration_ms: millis(totals.duration),
            exit_code: totals.exit_code,
        })
    }

    /// This event as a finished task, when it is `task.finished`.
    pub fn as_task_finished(&self) -> Option<TaskFinished<'_>> {
        let WireEvent::TaskFinished { header, outcome } = &self.record else { return None };
        let attachments = match self.attachment.as_deref() {
            Some(Attachment::Task(attachments)) => attachments,
            _ => &NO_ATTACHMENTS,
        };
        Some(TaskFinished { task_id: header.task_id.as_deref().unwrap_or_default(), record: outcome, attachments })
    }

    /// This event as a finished run, when it is `run.finished`.
    pub fn as_run_finished(&self) -> Option<RunFinished> {
        let WireEvent::RunFinished { counts, usage, total_cost_usd, duration_ms, exit_code, .. } = &self.record else { return None };
        let artifact_failures = match self.attachment.as_deref() {
            Some(Attachment::ArtifactFailures(n)) => *n,
            _ => 0,
        };
        Some(RunFinished {
            counts: *counts,
            usage: *usage,
            total_cost_usd: *total_cost_usd,
            duration_ms: *duration_ms,
            exit_code: *exit_code,
            artifact_failures,
        })
    }
}

/// A recorded task's attachments when its event has none (a line read back): no patch, no
/// conversation.
static NO_ATTACHMENTS: Attachments = Attachments { diff: None, transcript: None, repeats: Vec::new() };

/// A `task.finished` event as a reporter reads it: its task, its record, and its patches and
/// conversations ([`Event::as_task_finished`]).
#[derive(Debug, Clone, Copy)]
pub struct TaskFinished<'a> {
    /// The task's id.
    pub task_id: &'a str,
    /// Its `task.finished` fields.
    pub record: &'a WireOutcome,
    /// Its patches and conversations (none for a line read back).
    pub attachments: &'a Attachments,
}

impl TaskFinished<'_> {
    /// Its wall time, all attempts.
    pub fn duration(&self) -> Duration {
        Duration::from_millis(self.record.duration_ms)
    }

    /// The whole outcome, for a reporter that keeps it past the event.
    pub fn to_outcome(&self) -> TaskOutcome {
        TaskOutcome { task_id: self.task_id.to_string(), record: self.record.clone(), attachments: self.attachments.clone() }
    }

    /// The outcome without its patches and conversations, for a reporter that keeps the record
    /// past the event (the files are other reporters' business: it need not hold them).
    pub fn to_bare_outcome(&self) -> TaskOutcome {
        TaskOutcome { task_id: self.task_id.to_string(), record: self.record.clone(), attachments: Attachments::default() }
    }
}

/// A `run.finished` event as a reporter reads it ([`Event::as_run_finished`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunFinished {
    /// Tasks per status.
    pub counts: StatusCounts,
    /// Summed token usage.
    pub usage: Usage,
    /// Summed cost; `None` when any task's price was unknown.
    pub total_cost_usd: Option<f64>,
    /// Wall time of the run.
    pub duration_ms: u64,
    /// The process exit code.
    pub exit_code: i32,
    /// Artifacts that could not be written before this reporter got it (0 when all were).
    pub artifact_failures: usize,
}

impl RunFinished {
    /// Wall time of the run.
    pub fn duration(&self) -> Duration {
        Duration::from_millis(self.duration_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::test_support::{event, outcome, sample_run, stamped, unstamped};
    use dracode_results::records::events_schema;
    use dracode_results::records::{WireAttempt, WireCheckRound, WireRepeat};
    use dracode_results::{CheckRecord, ErrorKind, FailureKind, Status, TaskError};
    use serde_json::json;
    use std::collections::BTreeMap;

    /// `event` as the bus of the run `run_id` (sharded `shard`) stamps it, as line `seq`.
    fn wire(event: Event, seq: u64, run_id: &str, shard: Option<&str>) -> WireEvent {
        let mut event = stamped([event], run_id, shard).remove(0);
        event.record.header_mut().seq = seq;
        event.record
    }

    /// `event`'s line, the 7th of the run `run-1`.
    fn line(event: Event) -> serde_json::Value {
        serde_json::to_value(wire(event, 7, "run-1", None)).unwrap()
    }

    #[test]
    fn task_finished_carries_every_contract_field() {
        let mut o = outcome("fix/clippy", Status::Failed);
        o.attachments.diff = Some("diff --git a/x b/x\n".into());
        o.record.files_changed = vec!["src/lib.rs".into()];
        o.record.check = Some(CheckRecord {
            command: "cargo clippy".into(),
            exit_code: Some(101),
            output_tail: "warning: x".into(),
            before: None,
            ..Default::default()
        });
        o.record.error = Some(TaskError { kind: FailureKind::Check, message: "check failed".into(), http_status: None });
        o.record.manifest = "ci/tasks.toml".into();
        o.record.index = 3;
        o.record.attempts = 2;
        o.record.prior_attempts = vec![WireAttempt {
            status: Status::Error,
            error: Some(TaskError { kind: ErrorKind::Server.into(), message: "502".into(), http_status: Some(502) }),
            duration_ms: 1500,
        }];
        let v = line(event(Some(("fix/clippy", 2)), Event::task_finished(&mut o)));
        assert_eq!(
            v,
            json!({
                "type": "task.finished", "schema_version": 1, "seq": 7,
                "ts": "2023-11-14T22:13:20.123Z", "run_id": "run-1",
                "task_id": "fix/clippy", "attempt": 2,
                "status": "failed", "is_error": true, "num_turns": 4, "duration_ms": 2100,
                "usage": {"input_tokens": 1000, "cached_input_tokens": 0,
                    "cache_creation_input_tokens": 0, "output_tokens": 234,
                    "reasoning_output_tokens": 0, "total_tokens": 1234, "requests": 4},
                "total_cost_usd": 0.0123, "result": "done",
                "files_changed": ["src/lib.rs"], "diff_path": "diffs/fix_clippy.patch",
                "check": {"command": "cargo clippy", "exit_code": 101, "output_tail": "warning: x"},
                "error": {"kind": "check", "message": "check failed", "http_status": null},
                "attempts": 2, "flaky": false,
                "manifest": "ci/tasks.toml", "index": 3, "provider": "openai", "model": "gpt-4o",
                "prior_attempts": [{"status": "error", "duration_ms": 1500,
                    "error": {"kind": "server", "message": "502", "http_status": 502}}],
                "branch": null, "structured_output": null, "compactions": 0,
                "denied_calls": 0, "denied": [], "network_denied": 0
            })
        );
        let keys: Vec<&String> = v.as_object().unwrap().keys().take(2).collect();
        assert_eq!(keys, ["type", "schema_version"], "type comes first on the line");
    }

    #[test]
    fn a_structured_answer_is_on_the_line_and_in_the_schema() {
        let mut o = outcome("t", Status::Passed);
        o.record.structured_output = Some(json!({"risk": 2, "reasons": ["small"]}));
        let v = line(event(Some(("t", 1)), Event::task_finished(&mut o.clone())));
        assert_eq!(v["structured_output"], json!({"risk": 2, "reasons": ["small"]}));
        let schema = events_schema();
        assert!(jsonschema::validator_for(&schema).unwrap().is_valid(&v));
        assert!(schema.to_string().contains("The task's final answer as JSON"), "`dracode schema events` describes it");
        let back: WireOutcome = serde_json::from_value(v).unwrap();
        assert_eq!(back.structured_output, o.record.structured_output, "merge reads it back");
    }

    #[test]
    fn denied_calls_are_counted_listed_in_the_schema_and_read_back() {
        let mut o = outcome("t", Status::Failed);
        o.record.error = Some(TaskError::new(FailureKind::Denied, "run_command call denied"));
        let call = crate::events::DeniedCall { call_id: "c1".into(), tool: "run_command".into(), message: "denied (policy rule x)".into() };
        o.record.denied = vec![call];
        let v = line(event(Some(("t", 1)), Event::task_finished(&mut o.clone())));
        assert_eq!(v["denied_calls"], 1);
        assert_eq!(v["denied"], json!([{"call_id": "c1", "tool": "run_command", "message": "denied (policy rule x)"}]));
        assert_eq!(v["error"]["kind"], "denied");
        let schema = events_schema();
        assert!(jsonschema::validator_for(&schema).unwrap().is_valid(&v));
        let back: WireOutcome = serde_json::from_value(v).unwrap();
        assert_eq!((back.denied, back.error), (o.record.denied, o.record.error), "merge reads them back");
    }

    #[test]
    fn repairs_and_repeats_are_on_the_line_in_the_schema_and_read_back() {
        use crate::events::{Attachments, RepeatVerdict};
        let mut o = outcome("t", Status::Passed);
        o.record.repairs = 1;
        let round =
            |code, tail: &str| WireCheckRound { started_ms: Some(900), exit_code: Some(code), duration_ms: 40, output_tail: tail.into() };
        o.record.check_rounds = vec![round(3, "MISMATCH"), round(0, "ok")];
        o.record.pass_rate = Some(0.5);
        o.record.verdict = Some(RepeatVerdict::Flaky);
        let repeat = |n: u32, status, reported| WireRepeat {
            repeat: n,
            attempt: n,
            status,
            error: None,
            duration_ms: 10,
            repairs: 0,
            check_exit_code: Some(Some(0)),
            reported,
            files_changed: vec!["a.txt".into()],
            diff_path: None,
            transcript_path: None,
        };
        o.record.repeats = vec![repeat(1, Status::Failed, false), repeat(2, Status::Passed, true)];
        let files = Attachments { diff: Some("diff --git a/a.txt b/a.txt\n".into()), transcript: None, repeats: Vec::new() };
        o.attachments.repeats = vec![files.clone(), files];
        let v = line(event(Some(("t", 2)), Event::task_finished(&mut o.clone())));
        assert_eq!(v["repairs"], 1);
        assert_eq!(v["check_rounds"][0], json!({"exit_code": 3, "duration_ms": 40, "output_tail": "MISMATCH", "started_ms": 900}));
        assert_eq!((v["pass_rate"].clone(), v["verdict"].clone()), (json!(0.5), json!("flaky")));
        assert_eq!(v["repeats"][1]["diff_path"], "diffs/t@2.patch");
        assert_eq!(v["repeats"][1]["transcript_path"], serde_json::Value::Null);
        assert!(jsonschema::validator_for(&events_schema()).unwrap().is_valid(&v));
        let back: WireOutcome = serde_json::from_value(v).unwrap();
        assert_eq!(
            (back.repairs, back.check_rounds, back.pass_rate, back.verdict),
            (1, o.record.check_rounds, o.record.pass_rate, o.record.verdict)
        );
        assert_eq!(
            back.repeats.iter().map(|r| (r.status, r.reported)).collect::<Vec<_>>(),
            [(Status::Failed, false), (Status::Passed, true)]
        );
        // A task without them has none of these keys.
        let plain = line(event(Some(("t", 1)), Event::task_finished(&mut outcome("t", Status::Passed))));
        for key in ["repairs", "check_rounds", "pass_rate", "verdict", "repeats"] {
            assert!(plain.get(key).is_none(), "{key}");
        }
    }

    #[test]
    fn a_limit_warning_says_which_limit_and_what_is_left() {
        let kind = WireEvent::LimitWarning {
            header: unstamped(),
            limit: dracode_results::Limit::MaxCostUsd,
            remaining: 0.05,
            allowed: 1.0,
            message: "close".into(),
        };
        let v = line(event(Some(("t", 1)), kind));
        assert_eq!(
            v,
            json!({"type": "limit.warning", "schema_version": 1, "seq": 7, "ts": "2023-11-14T22:13:20.123Z", "run_id": "run-1",
                "task_id": "t", "attempt": 1, "limit": "max_cost_usd", "remaining": 0.05, "allowed": 1, "message": "close"})
        );
    }

    #[test]
    fn task_finished_without_price_diff_or_error_has_nulls() {
        let mut o = outcome("t", Status::Passed);
        o.record.total_cost_usd = None;
        o.attachments.diff = Some(String::new());
        o.record.result = None;
        let v = line(event(Some(("t", 1)), Event::task_finished(&mut o)));
        assert_eq!(v["is_error"], false);
        for key in ["total_cost_usd", "diff_path", "check", "error", "result", "structured_output"] {
            assert!(v[key].is_null(), "{key} should be null: {v}");
        }
    }

    #[test]
    fn run_finished_lists_every_status_and_shard() {
        let totals = RunTotals {
            counts: BTreeMap::from([(Status::Passed, 2), (Status::Timeout, 1)]),
            usage: Usage::from_counts(10, 5),
            cost_usd: None,
            duration: Duration::from_secs(3),
            exit_code: 1,
        };
        let wire = wire(event(None, Event::run_finished(&totals)), 9, "r", Some("2/3"));
        let v = serde_json::to_value(wire).unwrap();
        assert_eq!(v["type"], "run.finished");
        assert_eq!(v["shard"], "2/3");
        assert!(v.get("task_id").is_none());
        assert_eq!(
            v["counts"],
            json!({"passed": 2, "failed": 0, "error": 0, "not_configured": 0,
                "max_iterations": 0, "timeout": 1, "stalled": 0, "budget_exceeded": 0,
                "cancelled": 0, "skipped": 0})
        );
        assert_eq!(v["total_cost_usd"], serde_json::Value::Null);
        assert_eq!(serde_json::json!(exact_cost(0.000_754_049_999_999_999_9)).to_string(), "0.00075405");
        assert_eq!((exact_cost(0.0123), exact_cost(0.0)), (0.0123, 0.0));
        assert_eq!(v["duration_ms"], 3000);
        assert_eq!(v["exit_code"], 1);
        assert_eq!(v["usage"]["total_tokens"], 15);
    }

    #[test]
    fn run_started_names_manifests_and_shard() {
        let v = line(event(
            None,
            WireEvent::RunStarted {
                header: Header { shard: Some("1/2".into()), ..unstamped() },
                version: "0.1.0".into(),
                manifests: vec!["tasks.toml".into()],
                task_count: 3,
                jobs: 2,
                warnings: Vec::new(),
                config_files: Some(vec!["/repo/dracode.toml".into()]),
                merged_from: None,
            },
        ));
        assert_eq!(
            v,
            json!({"type": "run.started", "schema_version": 1, "seq": 7,
                "ts": "2023-11-14T22:13:20.123Z", "run_id": "run-1", "shard": "1/2",
                "version": "0.1.0", "manifests": ["tasks.toml"], "task_count": 3, "jobs": 2,
                "config_files": ["/repo/dracode.toml"]})
        );
    }

    #[test]
    fn run_started_warnings_are_written_when_present_and_optional_when_read() {
        let kind = WireEvent::RunStarted {
            header: unstamped(),
            version: "0.1.0".into(),
            manifests: Vec::new(),
            task_count: 1,
            jobs: 1,
            warnings: vec!["w1".into()],
            config_files: Some(Vec::new()),
            merged_from: None,
        };
        let v = line(event(None, kind));
        assert_eq!(v["warnings"], json!(["w1"]));
        assert_eq!(v["config_files"], json!([]), "no config file read: an empty list, not absent");
        // A file of an older version has no `warnings` (nor `config_files`).
        let old = json!({"type": "run.started", "schema_version": 1, "seq": 1, "ts": "2023-11-14T22:13:20.123Z",
            "run_id": "r", "version": "0.1.0", "manifests": [], "task_count": 1, "jobs": 1});
        let WireEvent::RunStarted { warnings, config_files, .. } = serde_json::from_value(old).unwrap() else { panic!("not run.started") };
        assert!(warnings.is_empty() && config_files.is_none());
    }

    #[test]
    fn tool_inputs_are_capped_like_outputs_with_their_size() {
        let big = "x".repeat(5 * 1024 * 1024);
        let input = serde_json::json!({"file_path": "a.txt", "content": big});
        let ev = event(None, Event::tool_started("c", "write_file", input.clone()));
        assert_eq!(ev.tool_input(), Some(&input), "the whole arguments stay beside the record");
        let v = serde_json::to_value(wire(ev, 1, "run", None)).unwrap();
        assert_eq!(v["input"]["file_path"], "a.txt");
        let kept = v["input"]["content"].as_str().unwrap();
        assert!(kept.len() < TOOL_OUTPUT_LIMIT + 40 && kept.ends_with(&format!("[... {} bytes cut]", big.len() - TOOL_OUTPUT_LIMIT)));
        assert_eq!(v["input_bytes"], serde_json::to_string(&input).unwrap().len());
    }

    #[test]
    fn tool_completed_output_is_cut_on_a_char_boundary() {
        // 'é' is two bytes: 2047 ASCII bytes then 'é' would straddle the 2048 limit.
        let output = format!("{}é{}", "a".repeat(2047), "b".repeat(100));
        let completed = event(Some(("t", 1)), Event::tool_completed("c1", "read_file", true, output.clone(), Duration::from_millis(12)));
        assert_eq!(completed.tool_output(), Some(output.as_str()), "the whole output stays beside the record");
        let v = line(completed);
        assert_eq!(v["output"].as_str().unwrap(), "a".repeat(2047));
        assert_eq!(v["output_bytes"], output.len());
        assert_eq!(v["duration_ms"], 12);
        assert_eq!(v["ok"], true);
        assert_eq!(v["call_id"], "c1");
    }

    #[test]
    fn turn_retry_and_tool_started_use_contract_names() {
        let turn = line(event(
            Some(("t", 1)),
            Event::turn_completed(1, &StopReason::ToolUse, Usage::from_counts(3, 4), Duration::from_millis(1500)),
        ));
        assert_eq!(turn["type"], "turn.completed");
        assert_eq!(turn["stop_reason"], "tool_use");
        assert_eq!(turn["turn"], 1);
        assert_eq!(turn["duration_ms"], 1500);
        assert_eq!(turn["usage"]["output_tokens"], 4);

        let retry = line(event(Some(("t", 1)), Event::retry(RetryScope::Http, "rate_limit".into(), Duration::from_millis(2000), 2)));
        assert_eq!(
            (retry["type"].clone(), retry["scope"].clone(), retry["delay_ms"].clone(), retry["attempt"].clone()),
            (json!("retry"), json!("http"), json!(2000), json!(2))
        );
        let text = serde_json::to_string(&wire(
            event(Some(("t", 1)), Event::retry(RetryScope::Task, "server".into(), Duration::ZERO, 2)),
            1,
            "r",
            None,
        ))
        .unwrap();
        assert_eq!(text.matches("\"attempt\"").count(), 1, "one attempt key: {text}");
        assert!(text.contains("\"attempt\":2"), "{text}");

        let started = line(event(Some(("t", 1)), Event::tool_started("c", "list_files", json!({"path": "."}))));
        assert_eq!(started["type"], "tool.started");
        assert_eq!(started["input"], json!({"path": "."}));
        let msg = line(event(Some(("t", 1)), WireEvent::AgentMessage { header: unstamped(), text: "hi".into() }));
        assert_eq!((msg["type"].clone(), msg["text"].clone()), (json!("agent.message"), json!("hi")));
    }

    #[test]
    fn refused_connections_are_events_counted_in_task_finished_and_read_back() {
        let denied = WireEvent::NetworkDenied {
            header: unstamped(),
            host: "::1".into(),
            port: 53,
            command: "dig x".into(),
            reason: None,
            phase: None,
            lookup: false,
        };
        let v = line(event(Some(("t", 1)), denied));
        assert_eq!(
            v,
            json!({"type": "network.denied", "schema_version": 1, "seq": 7, "ts": "2023-11-14T22:13:20.123Z", "run_id": "run-1",
                "task_id": "t", "attempt": 1, "host": "::1", "port": 53, "command": "dig x"})
        );
        let mut o = outcome("t", Status::Passed);
        (o.record.network_denied, o.record.network_denied_hosts) = (2, vec!["[::1]:53".into()]);
        let v = line(event(Some(("t", 1)), Event::task_finished(&mut o.clone())));
        assert_eq!((v["network_denied"].clone(), v["network_denied_hosts"].clone()), (json!(2), json!(["[::1]:53"])));
        assert!(jsonschema::validator_for(&events_schema()).unwrap().is_valid(&v));
        let back: WireOutcome = serde_json::from_value(v).unwrap();
        assert_eq!((back.network_denied, back.network_denied_hosts), (2, o.record.network_denied_hosts), "merge reads them back");
    }

    #[test]
    fn stop_reason_other_is_kept_verbatim() {
        let v = line(event(
            Some(("t", 1)),
            Event::turn_completed(2, &StopReason::Other("recitation".into()), Usage::default(), Duration::ZERO),
        ));
        assert_eq!(v["stop_reason"], "recitation");
    }

    #[test]
    fn every_event_validates_against_the_published_schema_and_round_trips() {
        let schema = events_schema();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let events = stamped(sample_run(), "run", Some("1/1"));
        for (i, e) in events.into_iter().enumerate() {
            assert_eq!(e.record.header().seq, i as u64 + 1);
            let wire = e.record;
            let v = serde_json::to_value(&wire).unwrap();
            let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{v}\n{errors:?}");
            let back: WireEvent = serde_json::from_value(v).unwrap();
            assert_eq!(back, wire);
        }
        assert!(schema.to_string().contains("task.finished"));
    }

    /// `dracode schema events`, compiled by the validator answers are checked with, accepts every
    /// line of a run and refuses a broken one.
    #[test]
    fn the_events_schema_accepts_every_line_of_a_run() {
        let events = crate::structured::schema::JsonSchema::compile(&events_schema()).unwrap();
        for event in stamped(sample_run(), "run", None) {
            let mut wire = serde_json::to_value(event.record).unwrap();
            assert_eq!(events.errors(&wire), [], "{wire}");
            wire["seq"] = json!("one");
            assert!(!events.is_valid(&wire), "{wire}");
        }
    }
}
