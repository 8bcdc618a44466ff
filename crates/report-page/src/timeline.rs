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
    attempts
        .iter()
        .filter(|(_, events)| events.started.is_some())
        .map(|&(&attempt, events)| {
            let announced_ms = ms_between(run.started, events.started);
            let start_ms = announced_ms.saturating_sub(events.workspace_ms);
            let duration_ms = ms_between(events.started, events.last) + (announced_ms - start_ms);
            let reported = events.finished.is_some() && attempt == attempts.iter().map(|(a, _)| **a).max().unwrap_or(attempt);
            let (status, group) = status_of(outcome, attempt, reported);
            let phases = if reported {
                phases(start_ms, announced_ms, duration_ms, run, events, outcome)
            } else {
                plain(start_ms, duration_ms, run, events)
            };
            AttemptBar { attempt, start_ms, duration_ms, status, group, phases }
        })
        .collect()
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

/// The reported attempt: `prepare`, `agent`, then each check run and the repair between two.
fn phases(
    start_ms: u64,
    announced_ms: u64,
    duration_ms: u64,
    run: &RunEvents,
    events: &AttemptEvents,
    outcome: &WireOutcome,
) -> Vec<Phase> {
    let end = start_ms + duration_ms;
    let mut checks: Vec<(u64, u64)> = outcome.check_rounds.iter().filter_map(|r| Some((r.started_ms?, r.duration_ms))).collect();
    if checks.is_empty()
        && let Some(check) = &outcome.check
        && let (Some(at), Some(took)) = (check.started_ms, check.duration_ms)
    {
        checks.push((at, took));
    }
    let mut phases = Vec::new();
    let agent_from = ms_between(run.started, events.first_call).clamp(start_ms, end);
    push(&mut phases, "prepare", start_ms, agent_from);
    let mut cursor = agent_from;
    for (n, (at, took)) in checks.into_iter().enumerate() {
        let from = (announced_ms + at).clamp(cursor, end);
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
