//! Property tests of the results contract: any records, written as `results.jsonl` writes them
//! (one JSON line each), read back equal (as nextest's `test_event_summary_roundtrips`); a
//! generated run read back through [`output_folder::read`] gives its tasks back; every line is
//! valid against [`events_schema`].
//!
//! The record types derive `Arbitrary` under test; the few fields whose arbitrary values the
//! wire cannot carry by design take the strategies of `strategies` (named in their
//! `#[cfg_attr(test, proptest(strategy = ...))]`), and [`normalise`] makes the one constraint
//! across fields that a derive cannot express.

use crate::Usage;
use crate::file_names::file_stem;
use crate::output_folder;
use crate::records::{Header, MergedFrom, StatusCounts, WireEvent, WireOutcome, events_schema};
use crate::strategies::finite_or_none;
use proptest::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;

/// A generated event made one the wire can carry, where a constraint spans fields: a `retry`
/// carries no header `attempt`, because its own `attempt` (the attempt about to start) takes
/// that key on the line.
fn normalise(mut event: WireEvent) -> WireEvent {
    if let WireEvent::Retry { header, .. } = &mut event {
        header.attempt = None;
    }
    event
}

/// Any event the wire can carry.
fn event() -> impl Strategy<Value = WireEvent> {
    any::<WireEvent>().prop_map(normalise)
}

/// `event`'s line, as the writer writes it.
fn line(event: &WireEvent) -> String {
    serde_json::to_string(event).unwrap() + "\n"
}

/// One task of a generated run: its `task.finished`, the `base_commit` of its `task.started`,
/// and the events between the two.
#[derive(Debug, Clone)]
struct GeneratedTask {
    attempt: Option<u32>,
    outcome: WireOutcome,
    base_commit: Option<String>,
    between: Vec<WireEvent>,
}

/// A task's events between `task.started` and `task.finished`: any but those three that the
/// reader acts on (`run.started`, `task.started`, `task.finished`).
fn between() -> impl Strategy<Value = Vec<WireEvent>> {
    proptest::collection::vec(event(), 0..4).prop_map(|events| {
        events
            .into_iter()
            .filter(|e| !matches!(e, WireEvent::RunStarted { .. } | WireEvent::TaskStarted { .. } | WireEvent::TaskFinished { .. }))
            .collect()
    })
}

/// A well-formed run: `run.started`, each task's events, `run.finished`; task ids distinct.
fn run() -> impl Strategy<Value = (WireEvent, BTreeMap<String, GeneratedTask>, WireEvent)> {
    let task = (any::<Option<u32>>(), any::<WireOutcome>(), any::<Option<String>>(), between())
        .prop_map(|(attempt, outcome, base_commit, between)| GeneratedTask { attempt, outcome, base_commit, between });
    let started =
        (
            any::<Header>(),
            any::<String>(),
            any::<Vec<String>>(),
            any::<usize>(),
            any::<usize>(),
            any::<Vec<String>>(),
            any::<Option<Vec<String>>>(),
            any::<Option<Vec<MergedFrom>>>(),
        )
            .prop_map(|(header, version, manifests, task_count, jobs, warnings, config_files, merged_from)| {
                WireEvent::RunStarted { header, version, manifests, task_count, jobs, warnings, config_files, merged_from }
            });
    let finished = (any::<Header>(), any::<StatusCounts>(), any::<Usage>(), finite_or_none(), any::<u64>(), any::<i32>()).prop_map(
        |(header, counts, usage, total_cost_usd, duration_ms, exit_code)| WireEvent::RunFinished {
            header,
            counts,
            usage,
            total_cost_usd,
            duration_ms,
            exit_code,
        },
    );
    (started, proptest::collection::btree_map(any::<String>(), task, 0..4), finished)
}

/// `event` as an event of task `task_id`, attempt `attempt`: its header names them.
fn of_task(mut event: WireEvent, task_id: &str, attempt: Option<u32>) -> WireEvent {
    let header = event.header_mut();
    header.task_id = Some(task_id.to_string());
    header.attempt = attempt;
    normalise(event)
}

/// `events_schema()`'s validator, compiled once for every case.
static SCHEMA: std::sync::LazyLock<jsonschema::Validator> =
    std::sync::LazyLock::new(|| jsonschema::validator_for(&events_schema()).unwrap());

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any records, written one JSON line each, read back equal, line by line.
    #[test]
    fn records_written_as_lines_read_back_equal(events in proptest::collection::vec(event(), 0..8)) {
        let text: String = events.iter().map(line).collect();
        let back: Vec<WireEvent> = text.lines().map(serde_json::from_str).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(back, events, "{}", text);
    }

    /// Every line the writer writes is valid against `events_schema()` (what `dracode schema
    /// events` prints).
    #[test]
    fn every_line_is_valid_against_the_schema(events in proptest::collection::vec(event(), 0..8)) {
        for event in &events {
            let value = serde_json::to_value(event).unwrap();
            let errors: Vec<String> = SCHEMA.iter_errors(&value).map(|e| e.to_string()).collect();
            prop_assert!(errors.is_empty(), "{}: {:?}", value, errors);
        }
    }
}

proptest! {
    // Fewer cases: each writes an output folder and reads it back, and its `task.finished`
    // records are the largest (collections of up to 100 elements, nested); 64 take about 4 s
    // in a debug build.
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A generated run read back through [`output_folder::read`] gives its tasks back: each
    /// task's `task.finished`, attempt and `base_commit` (and its patch when it names one), in
    /// `index` order.
    #[test]
    fn a_run_read_back_gives_its_tasks((started, tasks, finished) in run()) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("diffs")).unwrap();
        let mut text = line(&started);
        for (task_id, task) in &tasks {
            let task_started = WireEvent::TaskStarted {
                header: Header { task_id: None, attempt: None, ..started.header().clone() },
                provider: task.outcome.provider.clone(),
                model: task.outcome.model.clone(),
                isolation: "worktree".into(),
                workdir: "/w".into(),
                base_commit: task.base_commit.clone(),
                workspace_ms: None,
                issue: None,
            };
            text += &line(&of_task(task_started, task_id, task.attempt));
            for event in &task.between {
                text += &line(&of_task(event.clone(), task_id, task.attempt));
            }
            let done = WireEvent::TaskFinished { header: started.header().clone(), outcome: Box::new(task.outcome.clone()) };
            text += &line(&of_task(done, task_id, task.attempt));
            if task.outcome.diff_path.is_some() {
                std::fs::write(dir.path().join("diffs").join(format!("{}.patch", file_stem(task_id))), file_stem(task_id)).unwrap();
            }
        }
        text += &line(&finished);
        std::fs::write(dir.path().join("results.jsonl"), &text).unwrap();

        let folder = output_folder::read(dir.path()).unwrap();
        prop_assert_eq!(&folder.run_id, &started.header().run_id);
        let WireEvent::RunStarted { manifests, .. } = &started else { unreachable!() };
        prop_assert_eq!(&folder.manifests, manifests);
        let mut expected: Vec<(&String, &GeneratedTask)> = tasks.iter().collect();
        expected.sort_by_key(|(_, task)| task.outcome.index);
        prop_assert_eq!(folder.tasks.len(), expected.len());
        for (read, (task_id, task)) in folder.tasks.iter().zip(expected) {
            prop_assert_eq!(&read.task_id, task_id);
            prop_assert_eq!(&read.outcome, &task.outcome);
            prop_assert_eq!(read.attempt, task.attempt.unwrap_or(1));
            prop_assert_eq!(&read.base_commit, &task.base_commit);
            prop_assert_eq!(read.diff.clone(), task.outcome.diff_path.as_ref().map(|_| file_stem(task_id)));
        }
    }
}

/// The case the property found: a repeated task's `pass_rate` of 1 in 11 is written
/// `0.09090909090909091`, which serde_json without `float_roundtrip` reads back as
/// `0.09090909090909093`; every pass rate of 1 to 200 attempts reads back as written.
#[test]
fn every_pass_rate_reads_back_as_written() {
    for count in 1..=200u32 {
        for passed in 0..=count {
            let rate = f64::from(passed) / f64::from(count);
            let back: f64 = serde_json::from_str(&serde_json::to_string(&rate).unwrap()).unwrap();
            assert_eq!(back.to_bits(), rate.to_bits(), "{passed}/{count}");
        }
    }
}

/// What the wire cannot keep apart, pinned so that a change shows: a task whose answer is JSON
/// `null` (an `output_schema` that allows it) and a task with no answer are both written
/// `"structured_output": null`, and read back as no answer.
#[test]
fn a_null_answer_reads_back_as_no_answer() {
    let outcome =
        WireOutcome { structured_output: Some(Value::Null), ..WireOutcome::empty(crate::Status::Passed, "m".into(), 0, "p", "m") };
    let text = serde_json::to_string(&outcome).unwrap();
    assert!(text.contains(r#""structured_output":null"#), "{text}");
    let back: WireOutcome = serde_json::from_str(&text).unwrap();
    assert_eq!(back.structured_output, None);
}
