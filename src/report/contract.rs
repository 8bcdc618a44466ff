//! The one, pure, mapping between dracode's internal events and the results contract
//! ([`dracode_results::records`]): [`to_wire`] makes a line of an event. A finished task needs
//! no mapping: its [`crate::events::TaskOutcome`] holds the contract's record itself.

use crate::events::{Event, EventKind, millis};
use dracode_results::records::{Header, SCHEMA_VERSION, StatusCounts, TOOL_OUTPUT_LIMIT, WireEvent, exact_cost};

/// The fields every line of `event` starts with.
fn header(event: &Event, seq: u64, run_id: &str, shard: Option<&str>) -> Header {
    Header {
        schema_version: SCHEMA_VERSION,
        seq,
        ts: humantime::format_rfc3339_millis(event.ts).to_string(),
        run_id: run_id.to_string(),
        task_id: event.task.as_ref().map(|t| t.task_id.to_string()),
        attempt: event.task.as_ref().map(|t| t.attempt),
        shard: shard.map(str::to_string),
    }
}

/// Maps one internal event to its wire line. Pure: the same arguments always give the same line.
pub fn to_wire(event: &Event, seq: u64, run_id: &str, shard: Option<&str>) -> WireEvent {
    let mut header = header(event, seq, run_id, shard);
    match &event.kind {
        EventKind::RunStarted { .. } => run_started(header, &event.kind),
        EventKind::TaskStarted { provider, model, isolation, workdir, base_commit, workspace_ms } => WireEvent::TaskStarted {
            workspace_ms: *workspace_ms,
            header,
            provider: provider.clone(),
            model: model.clone(),
            isolation: isolation.clone(),
            workdir: workdir.to_string_lossy().into_owned(),
            base_commit: base_commit.clone(),
        },
        EventKind::TurnCompleted { turn, stop_reason, usage, duration } => WireEvent::TurnCompleted {
            header,
            turn: *turn,
            stop_reason: stop_reason.as_str().to_string(),
            usage: *usage,
            duration_ms: millis(*duration),
        },
        EventKind::ToolStarted { call_id, name, input } => WireEvent::ToolStarted {
            header,
            call_id: call_id.clone(),
            name: name.clone(),
            input: cap_strings(input, TOOL_OUTPUT_LIMIT),
            input_bytes: serde_json::to_string(input).map_or(0, |text| text.len()),
        },
        EventKind::ToolCompleted { call_id, name, ok, output, duration } => WireEvent::ToolCompleted {
            header,
            call_id: call_id.clone(),
            name: name.clone(),
            ok: *ok,
            output: dracode_results::records::cut_at(output, TOOL_OUTPUT_LIMIT).to_string(),
            output_bytes: output.len(),
            duration_ms: millis(*duration),
        },
        EventKind::Retry { scope, reason, delay, next_attempt } => WireEvent::Retry {
            // The contract names the retry's own field `attempt` too; one key cannot hold two
            // numbers, so here it is the attempt about to start.
            header: Header { attempt: None, ..header },
            scope: *scope,
            reason: reason.clone(),
            delay_ms: millis(*delay),
            attempt: *next_attempt,
        },
        EventKind::AgentMessage { text } => WireEvent::AgentMessage { header, text: text.clone() },
        EventKind::ContextCompacted { tokens_before, tokens_after, method } => {
            WireEvent::ContextCompacted { header, tokens_before: *tokens_before, tokens_after: *tokens_after, method: *method }
        }
        EventKind::NetworkDenied { host, port, command, reason } => {
            WireEvent::NetworkDenied { header, host: host.clone(), port: *port, command: command.clone(), reason: reason.clone() }
        }
        EventKind::LimitWarning { limit, remaining, allowed, message } => {
            WireEvent::LimitWarning { header, limit: *limit, remaining: *remaining, allowed: *allowed, message: message.clone() }
        }
        EventKind::SetupStarted { .. } | EventKind::SetupFinished(_) => setup_event(header, &event.kind),
        EventKind::TaskFinished(outcome) => {
            // The outcome names its task even when the scheduler emits it run-level (a task
            // skipped before it started has no attempt).
            header.task_id = Some(outcome.task_id.clone());
            WireEvent::TaskFinished { header, outcome: Box::new(outcome.record.clone()) }
        }
        EventKind::RunFinished(totals) => WireEvent::RunFinished {
            header,
            counts: StatusCounts::from_counts(&totals.counts),
            usage: totals.usage,
            total_cost_usd: totals.cost_usd.map(exact_cost),
            duration_ms: millis(totals.duration),
            exit_code: totals.exit_code,
        },
    }
}

/// The `setup.started` or `setup.finished` line of a setup event.
fn setup_event(header: Header, kind: &EventKind) -> WireEvent {
    match kind {
        EventKind::SetupStarted { command, repo, base_commit, tasks } => WireEvent::SetupStarted {
            header,
            command: command.clone(),
            repo: repo.to_string_lossy().into_owned(),
            base_commit: base_commit.clone(),
            tasks: *tasks,
        },
        EventKind::SetupFinished(report) => WireEvent::SetupFinished {
            header,
            command: report.command.clone(),
            exit_code: report.exit_code,
            duration_ms: millis(report.duration),
            output_tail: report.output_tail.clone(),
            outputs: report.outputs.clone(),
            not_carried: report.not_carried.clone(),
            error: report.error.clone(),
        },
        other => unreachable!("not a setup event: {other:?}"),
    }
}

/// The `run.started` line of a [`EventKind::RunStarted`] event (its shard fills the header's).
fn run_started(mut header: Header, kind: &EventKind) -> WireEvent {
    let EventKind::RunStarted { version, manifests, task_count, shard, jobs, warnings, config_files } = kind else {
        unreachable!("run_started is given run.started events only")
    };
    header.shard = header.shard.or_else(|| shard.clone());
    WireEvent::RunStarted {
        header,
        version: version.clone(),
        manifests: manifests.clone(),
        task_count: *task_count,
        jobs: *jobs,
        warnings: warnings.clone(),
        config_files: config_files.clone(),
        merged_from: None,
    }
}

/// `value` with every string longer than `limit` bytes cut to its first `limit` bytes and a
/// note of how many bytes were cut.
fn cap_strings(value: &serde_json::Value, limit: usize) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(text) if text.len() > limit => {
            let kept = dracode_results::records::cut_at(text, limit);
            Value::String(format!("{kept}[... {} bytes cut]", text.len() - kept.len()))
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| cap_strings(v, limit)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), cap_strings(v, limit))).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::RunTotals;
    use crate::report::test_support::{event, outcome};
    use dracode_llm::StopReason;
    use dracode_results::records::events_schema;
    use dracode_results::records::{WireAttempt, WireCheckRound, WireOutcome, WireRepeat};
    use dracode_results::{CheckRecord, ErrorKind, FailureKind, RetryScope, Status, TaskError, Usage};
    use serde_json::json;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn line(event: &Event) -> serde_json::Value {
        serde_json::to_value(to_wire(event, 7, "run-1", None)).unwrap()
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
        let v = line(&event(Some(("fix/clippy", 2)), EventKind::task_finished(&mut o)));
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
        let v = line(&event(Some(("t", 1)), EventKind::task_finished(&mut o.clone())));
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
        let v = line(&event(Some(("t", 1)), EventKind::task_finished(&mut o.clone())));
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
        let v = line(&event(Some(("t", 2)), EventKind::task_finished(&mut o.clone())));
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
        let plain = line(&event(Some(("t", 1)), EventKind::task_finished(&mut outcome("t", Status::Passed))));
        for key in ["repairs", "check_rounds", "pass_rate", "verdict", "repeats"] {
            assert!(plain.get(key).is_none(), "{key}");
        }
    }

    #[test]
    fn a_limit_warning_says_which_limit_and_what_is_left() {
        let kind =
            EventKind::LimitWarning { limit: crate::deadline::Limit::MaxCostUsd, remaining: 0.05, allowed: 1.0, message: "close".into() };
        let v = line(&event(Some(("t", 1)), kind));
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
        let v = line(&event(Some(("t", 1)), EventKind::task_finished(&mut o)));
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
            artifact_failures: 0,
        };
        let wire = to_wire(&event(None, EventKind::RunFinished(totals)), 9, "r", Some("2/3"));
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
        let v = line(&event(
            None,
            EventKind::RunStarted {
                version: "0.1.0".into(),
                manifests: vec!["tasks.toml".into()],
                task_count: 3,
                shard: Some("1/2".into()),
                jobs: 2,
                warnings: Vec::new(),
                config_files: Some(vec!["/repo/dracode.toml".into()]),
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
        let kind = EventKind::RunStarted {
            version: "0.1.0".into(),
            manifests: Vec::new(),
            task_count: 1,
            shard: None,
            jobs: 1,
            warnings: vec!["w1".into()],
            config_files: Some(Vec::new()),
        };
        let v = line(&event(None, kind));
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
        let ev = event(None, EventKind::ToolStarted { call_id: "c".into(), name: "write_file".into(), input: input.clone() });
        let v = serde_json::to_value(to_wire(&ev, 1, "run", None)).unwrap();
        assert_eq!(v["input"]["file_path"], "a.txt");
        let kept = v["input"]["content"].as_str().unwrap();
        assert!(kept.len() < TOOL_OUTPUT_LIMIT + 40 && kept.ends_with(&format!("[... {} bytes cut]", big.len() - TOOL_OUTPUT_LIMIT)));
        assert_eq!(v["input_bytes"], serde_json::to_string(&input).unwrap().len());
    }

    #[test]
    fn tool_completed_output_is_cut_on_a_char_boundary() {
        // 'é' is two bytes: 2047 ASCII bytes then 'é' would straddle the 2048 limit.
        let output = format!("{}é{}", "a".repeat(2047), "b".repeat(100));
        let v = line(&event(
            Some(("t", 1)),
            EventKind::ToolCompleted {
                call_id: "c1".into(),
                name: "read_file".into(),
                ok: true,
                output: output.clone(),
                duration: Duration::from_millis(12),
            },
        ));
        assert_eq!(v["output"].as_str().unwrap(), "a".repeat(2047));
        assert_eq!(v["output_bytes"], output.len());
        assert_eq!(v["duration_ms"], 12);
        assert_eq!(v["ok"], true);
        assert_eq!(v["call_id"], "c1");
    }

    #[test]
    fn turn_retry_and_tool_started_use_contract_names() {
        let turn = line(&event(
            Some(("t", 1)),
            EventKind::TurnCompleted {
                turn: 1,
                stop_reason: StopReason::ToolUse,
                usage: Usage::from_counts(3, 4),
                duration: Duration::from_millis(1500),
            },
        ));
        assert_eq!(turn["type"], "turn.completed");
        assert_eq!(turn["stop_reason"], "tool_use");
        assert_eq!(turn["turn"], 1);
        assert_eq!(turn["duration_ms"], 1500);
        assert_eq!(turn["usage"]["output_tokens"], 4);

        let retry = line(&event(
            Some(("t", 1)),
            EventKind::Retry { scope: RetryScope::Http, reason: "rate_limit".into(), delay: Duration::from_millis(2000), next_attempt: 2 },
        ));
        assert_eq!(
            (retry["type"].clone(), retry["scope"].clone(), retry["delay_ms"].clone(), retry["attempt"].clone()),
            (json!("retry"), json!("http"), json!(2000), json!(2))
        );
        let text = serde_json::to_string(&to_wire(
            &event(
                Some(("t", 1)),
                EventKind::Retry { scope: RetryScope::Task, reason: "server".into(), delay: Duration::ZERO, next_attempt: 2 },
            ),
            1,
            "r",
            None,
        ))
        .unwrap();
        assert_eq!(text.matches("\"attempt\"").count(), 1, "one attempt key: {text}");
        assert!(text.contains("\"attempt\":2"), "{text}");

        let started = line(&event(
            Some(("t", 1)),
            EventKind::ToolStarted { call_id: "c".into(), name: "list_files".into(), input: json!({"path": "."}) },
        ));
        assert_eq!(started["type"], "tool.started");
        assert_eq!(started["input"], json!({"path": "."}));
        let msg = line(&event(Some(("t", 1)), EventKind::AgentMessage { text: "hi".into() }));
        assert_eq!((msg["type"].clone(), msg["text"].clone()), (json!("agent.message"), json!("hi")));
    }

    #[test]
    fn refused_connections_are_events_counted_in_task_finished_and_read_back() {
        let denied = EventKind::NetworkDenied { host: "::1".into(), port: 53, command: "dig x".into(), reason: None };
        let v = line(&event(Some(("t", 1)), denied));
        assert_eq!(
            v,
            json!({"type": "network.denied", "schema_version": 1, "seq": 7, "ts": "2023-11-14T22:13:20.123Z", "run_id": "run-1",
                "task_id": "t", "attempt": 1, "host": "::1", "port": 53, "command": "dig x"})
        );
        let mut o = outcome("t", Status::Passed);
        (o.record.network_denied, o.record.network_denied_hosts) = (2, vec!["[::1]:53".into()]);
        let v = line(&event(Some(("t", 1)), EventKind::task_finished(&mut o.clone())));
        assert_eq!((v["network_denied"].clone(), v["network_denied_hosts"].clone()), (json!(2), json!(["[::1]:53"])));
        assert!(jsonschema::validator_for(&events_schema()).unwrap().is_valid(&v));
        let back: WireOutcome = serde_json::from_value(v).unwrap();
        assert_eq!((back.network_denied, back.network_denied_hosts), (2, o.record.network_denied_hosts), "merge reads them back");
    }

    #[test]
    fn stop_reason_other_is_kept_verbatim() {
        let v = line(&event(
            Some(("t", 1)),
            EventKind::TurnCompleted {
                turn: 2,
                stop_reason: StopReason::Other("recitation".into()),
                usage: Usage::default(),
                duration: Duration::ZERO,
            },
        ));
        assert_eq!(v["stop_reason"], "recitation");
    }

    #[test]
    fn every_event_validates_against_the_published_schema_and_round_trips() {
        let schema = events_schema();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let events = crate::report::test_support::sample_run();
        for (i, e) in events.iter().enumerate() {
            let wire = to_wire(e, i as u64 + 1, "run", Some("1/1"));
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
        let run = crate::report::test_support::sample_run();
        for (i, event) in run.iter().enumerate() {
            let mut wire = serde_json::to_value(to_wire(event, i as u64 + 1, "run", None)).unwrap();
            assert_eq!(events.errors(&wire), [], "{wire}");
            wire["seq"] = json!("one");
            assert!(!events.is_valid(&wire), "{wire}");
        }
    }
}
