//! Where a task's time went: one bar per attempt, from when its workspace began to be made
//! (`task.started` minus its `workspace_ms`) to its last line, cut into `prepare` (workspace,
//! tools, MCP servers and the check before the agent, up to the first model call),
//! `agent`, `check` (each run, placed by the check's own `started_ms`) and `repair` (the agent
//! again after a failed check).

use crate::data::group;
use crate::data::{AttemptBar, Phase};
use crate::events::{AttemptEvents, RunEvents, ms_between};
use dracode_results::records::WireOutcome;
use dracode_results::{Status, TaskError};

/// The bars of task `id`, whose reported outcome is `outcome`, on the run's clock.
pub fn bars(run: &RunEvents, id: &str, outcome: &WireOutcome) -> Vec<AttemptBar> {
    let attempts: Vec<(&u32, &AttemptEvents)> =
        run.attempts.range((id.to_string(), 0)..=(id.to_string(), u32::MAX)).map(|((_, a), e)| (a, e)).collect();
    let last = attempts.iter().filter(|(_, e)| e.finished.is_some()).map(|(a, _)| **a).max();
    // A repeated task's own fields (its check) describe its reported repeat, else its last attempt.
    let reported = outcome.repeats.iter().find(|r| r.reported).map(|r| r.attempt).or(last);
    attempts
        .iter()
        .filter(|(_, events)| events.started.is_some())
        .map(|&(&attempt, events)| bar(run, attempt, events, outcome, Some(attempt) == reported))
        .collect()
}

/// The bar of one attempt; the `reported` one is cut by its check runs, and lasts at least
/// until its last check ended.
fn bar(run: &RunEvents, attempt: u32, events: &AttemptEvents, outcome: &WireOutcome, reported: bool) -> AttemptBar {
    let announced_ms = ms_between(run.started, events.started);
    let start_ms = announced_ms.saturating_sub(events.workspace_ms);
    let checks = if reported { check_runs(run, events, outcome) } else { Vec::new() };
    let checked_ms = checks.iter().map(|(from, took)| from + took).max().unwrap_or(0);
    let duration_ms = ms_between(run.started, events.last).max(announced_ms).max(checked_ms) - start_ms;
    let (status, group) = status_of(outcome, attempt, reported);
    let phases = if reported { phases(start_ms, duration_ms, run, events, &checks) } else { plain(start_ms, duration_ms, run, events) };
    AttemptBar { attempt, start_ms, duration_ms, status, group, phases }
}

/// Each check run of the reported attempt: when it began on the run's clock, and how long it took.
fn check_runs(run: &RunEvents, events: &AttemptEvents, outcome: &WireOutcome) -> Vec<(u64, u64)> {
    let mut checks: Vec<(u64, u64)> = outcome.check_rounds.iter().filter_map(|r| Some((r.started_ms?, r.duration_ms))).collect();
    if checks.is_empty()
        && let Some(check) = &outcome.check
        && let (Some(at), Some(took)) = (check.started_ms, check.duration_ms)
    {
        checks.push((at, took));
    }
    let on_clock = |at: u64| ms_between(run.started, events.started.and_then(|s| s.checked_add(std::time::Duration::from_millis(at))));
    checks.into_iter().map(|(at, took)| (on_clock(at), took)).collect()
}

/// How attempt `attempt` ended, and its group: the outcome's for the reported one, else its
/// repeat's or its earlier attempt's.
fn status_of(outcome: &WireOutcome, attempt: u32, reported: bool) -> (String, String) {
    let of = |status: Status, error: Option<&TaskError>| (status.as_str().to_string(), group(status, error).to_string());
    if let Some(repeat) = outcome.repeats.iter().find(|r| r.attempt == attempt) {
        return of(repeat.status, repeat.error.as_ref());
    }
    let prior = usize::try_from(attempt.saturating_sub(1)).ok().and_then(|i| outcome.prior_attempts.get(i));
    match prior {
        Some(p) if !reported => of(p.status, p.error.as_ref()),
        _ => of(outcome.status, outcome.error.as_ref()),
    }
}

/// An attempt whose check is not known: `prepare` then `agent`.
fn plain(start_ms: u64, duration_ms: u64, run: &RunEvents, events: &AttemptEvents) -> Vec<Phase> {
    let end = start_ms + duration_ms;
    let agent_from = (ms_between(run.started, events.first_call)).clamp(start_ms, end);
    let mut phases = Vec::new();
    push(&mut phases, "prepare", start_ms, agent_from);
    push(&mut phases, "agent", agent_from, end);
    phases
}

/// The reported attempt: `prepare`, `agent`, then each check run (`checks`, on the run's clock)
/// and the repair between two.
fn phases(start_ms: u64, duration_ms: u64, run: &RunEvents, events: &AttemptEvents, checks: &[(u64, u64)]) -> Vec<Phase> {
    let end = start_ms + duration_ms;
    let mut phases = Vec::new();
    let agent_from = ms_between(run.started, events.first_call).clamp(start_ms, end);
    push(&mut phases, "prepare", start_ms, agent_from);
    let mut cursor = agent_from;
    for (n, &(at, took)) in checks.iter().enumerate() {
        let from = at.clamp(cursor, end);
        push(&mut phases, if n == 0 { "agent" } else { "repair" }, cursor, from);
        let to = (from + took).min(end);
        push(&mut phases, "check", from, to);
        cursor = to;
    }
    if phases.iter().all(|p| p.kind != "check") {
        push(&mut phases, "agent", cursor, end);
    }
    phases
}

/// Adds `kind` from `from` to `to` when it lasts.
fn push(phases: &mut Vec<Phase>, kind: &str, from: u64, to: u64) {
    if to > from {
        phases.push(Phase { kind: kind.to_string(), start_ms: from, duration_ms: to - from });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events;
    use crate::test_support::{Log, outcome, with_error};
    use serde_json::json;

    /// The bars of the first task of `log`.
    fn bars_of(log: &Log) -> Vec<AttemptBar> {
        let run = events::read(log.folder().path()).unwrap();
        let (id, outcome) = &run.finished[0];
        bars(&run, id, outcome)
    }

    /// Each phase as (kind, from, to).
    fn spans(bar: &AttemptBar) -> Vec<(&str, u64, u64)> {
        bar.phases.iter().map(|p| (p.kind.as_str(), p.start_ms, p.start_ms + p.duration_ms)).collect()
    }

    /// The phases lie inside the bar, in order, none overlapping another.
    fn assert_inside(bar: &AttemptBar) {
        let mut cursor = bar.start_ms;
        for (kind, from, to) in spans(bar) {
            assert!(from >= cursor && to > from, "{kind} {from}..{to} after {cursor}: {:?}", spans(bar));
            cursor = to;
        }
        assert!(cursor <= bar.start_ms + bar.duration_ms, "{:?} beyond the bar {bar:?}", spans(bar));
    }

    #[test]
    fn an_attempt_with_a_check_is_prepare_then_agent_then_check() {
        let mut log = Log::new("r1", 0);
        log.started(1000, "a", 1, Some(200)).turn(3000, "a", 1, 1500);
        let mut o = outcome(0, "passed");
        o["check"] = json!({"command": "make test", "exit_code": 0, "output_tail": "", "started_ms": 3500, "duration_ms": 1000});
        log.finished(6000, "a", 1, o);
        let bars = bars_of(&log);
        assert_eq!(bars.len(), 1);
        let bar = &bars[0];
        assert_eq!((bar.attempt, bar.start_ms, bar.duration_ms), (1, 800, 5200), "the bar starts when the workspace began");
        assert_eq!((bar.status.as_str(), bar.group.as_str()), ("passed", "passed"));
        assert_eq!(spans(bar), [("prepare", 800, 1500), ("agent", 1500, 4500), ("check", 4500, 5500)]);
        assert_inside(bar);
    }

    #[test]
    fn check_rounds_give_agent_check_repair_check() {
        let mut log = Log::new("r1", 0);
        log.started(1000, "a", 1, Some(200)).turn(2000, "a", 1, 500).turn(4500, "a", 1, 400);
        let mut o = with_error(outcome(0, "failed"), "check", "exit 1");
        o["repairs"] = json!(1);
        o["check_rounds"] = json!([
            {"exit_code": 1, "duration_ms": 500, "output_tail": "1 failed", "started_ms": 2000},
            {"exit_code": 1, "duration_ms": 500, "output_tail": "1 failed", "started_ms": 4000}
        ]);
        o["check"] = json!({"command": "make test", "exit_code": 1, "output_tail": "", "started_ms": 4000, "duration_ms": 500});
        log.finished(6000, "a", 1, o);
        let bar = &bars_of(&log)[0];
        assert_eq!((bar.status.as_str(), bar.group.as_str()), ("failed", "failed"));
        let kinds: Vec<&str> = bar.phases.iter().map(|p| p.kind.as_str()).collect();
        assert_eq!(kinds, ["prepare", "agent", "check", "repair", "check"]);
        assert_eq!(spans(bar)[2..], [("check", 3000, 3500), ("repair", 3500, 5000), ("check", 5000, 5500)]);
        assert_inside(bar);
    }

    #[test]
    fn a_retried_task_has_a_bar_per_attempt_with_the_earlier_ones_status() {
        let mut log = Log::new("r1", 0);
        log.started(1000, "a", 1, Some(100)).turn(2000, "a", 1, 500);
        log.event(2100, "retry", Some(("a", 2)), json!({"scope": "task", "reason": "server", "delay_ms": 50}));
        log.started(3000, "a", 2, Some(100)).turn(4000, "a", 2, 500);
        let mut o = outcome(0, "passed");
        o["attempts"] = json!(2);
        o["prior_attempts"] = json!([{"status": "error", "error": {"kind": "server", "message": "503"}, "duration_ms": 1100}]);
        log.finished(5000, "a", 2, o);
        let bars = bars_of(&log);
        assert_eq!(bars.len(), 2, "{bars:?}");
        let (first, second) = (&bars[0], &bars[1]);
        assert_eq!((first.attempt, first.status.as_str(), first.group.as_str()), (1, "error", "not_judged"));
        assert_eq!((first.start_ms, first.duration_ms), (900, 1100));
        assert_eq!(spans(first), [("prepare", 900, 1500), ("agent", 1500, 2000)]);
        assert_eq!((second.attempt, second.status.as_str(), second.group.as_str()), (2, "passed", "passed"));
        assert_eq!((second.start_ms, second.duration_ms), (2900, 2100));
        assert!(first.start_ms + first.duration_ms <= second.start_ms);
        assert_inside(first);
        assert_inside(second);
    }

    #[test]
    fn a_repeated_tasks_check_is_drawn_on_the_reported_repeat() {
        let mut log = Log::new("r1", 0);
        log.started(1000, "a", 1, Some(100)).turn(2000, "a", 1, 500);
        log.started(5000, "a", 2, Some(100)).turn(6000, "a", 2, 500);
        let repeat = |n: u32, status: &str, reported: bool| {
            json!({"repeat": n, "attempt": n, "status": status, "error": null, "duration_ms": 1000, "reported": reported,
                "files_changed": [], "diff_path": null, "transcript_path": null})
        };
        let mut o = outcome(0, "passed");
        (o["repeats"], o["pass_rate"], o["verdict"]) =
            (json!([repeat(1, "passed", true), repeat(2, "failed", false)]), json!(0.5), json!("flaky"));
        o["check"] = json!({"command": "make test", "exit_code": 0, "output_tail": "", "started_ms": 1500, "duration_ms": 400});
        log.finished(7000, "a", 2, o);
        let bars = bars_of(&log);
        assert_eq!(bars.len(), 2);
        assert_eq!((bars[0].status.as_str(), bars[1].status.as_str()), ("passed", "failed"));
        assert_eq!(spans(&bars[0]), [("prepare", 900, 1500), ("agent", 1500, 2500), ("check", 2500, 2900)], "{bars:?}");
        assert!(bars[1].phases.iter().all(|p| p.kind != "check"), "the other repeat's check is not this one's: {:?}", spans(&bars[1]));
        assert_inside(&bars[0]);
        assert_inside(&bars[1]);
    }

    #[test]
    fn a_cached_task_and_a_carried_one_draw_without_panicking() {
        let mut log = Log::new("r1", 0);
        log.started(500, "a", 1, None);
        let mut o = outcome(0, "passed");
        o["cached"] = json!(true);
        log.finished(500, "a", 1, o);
        let bars = bars_of(&log);
        assert_eq!(bars.len(), 1);
        assert_eq!((bars[0].start_ms, bars[0].duration_ms), (500, 0));
        assert!(bars[0].phases.is_empty(), "{bars:?}");

        let mut log = Log::new("r1", 0);
        let mut o = outcome(0, "passed");
        o["carried_from"] = json!("r0");
        log.finished(500, "a", 1, o);
        assert!(bars_of(&log).is_empty(), "a task with no task.started in this run has no bar");
    }

    #[test]
    fn times_before_the_runs_start_clamp_to_zero() {
        let mut log = Log::new("r1", 10_000);
        log.started(9_000, "a", 1, Some(300)).turn(10_500, "a", 1, 1000);
        let mut o = outcome(0, "failed");
        o["check"] = json!({"command": "make test", "exit_code": 1, "output_tail": "", "started_ms": 1600, "duration_ms": 600});
        log.finished(12_000, "a", 1, o);
        let bar = &bars_of(&log)[0];
        assert_eq!(bar.start_ms, 0);
        assert_eq!(bar.start_ms + bar.duration_ms, 2000, "the bar ends at its last line: {bar:?}");
        assert_eq!(spans(bar), [("agent", 0, 600), ("check", 600, 1200)], "the check at its own time: {bar:?}");
        assert_inside(bar);
    }
}
