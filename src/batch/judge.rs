//! The verdict of an attempt: from how its phases ended to a status and an error. Pure, so every
//! path is a row of one table test.

use super::spec::RequireChange;
use crate::agent::AgentEnd;
use crate::events::{CheckRecord, FailureKind, Status, TaskError};
use dracode_llm::ErrorKind;
use std::time::Duration;

/// How the agent phase of an attempt ended, seen from outside the loop.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentPhase {
    /// The loop ended on its own.
    Ended(AgentEnd),
    /// The attempt ran longer than its `timeout` (the limit).
    TimedOut(Duration),
    /// No event for this long (`idle_timeout`).
    Stalled(Duration),
    /// The run was interrupted.
    Cancelled,
}

/// What the verdict is made from: plain data, gathered by the attempt.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// How the agent phase ended.
    pub phase: &'a AgentPhase,
    /// The check run after the agent finished, if the task has one.
    pub check: Option<&'a CheckRecord>,
    /// How many files the attempt changed.
    pub files_changed: usize,
    /// Whether the task fails when it changed no file, and why.
    pub require_change: RequireChange,
    /// The LLM calls the task was allowed (for the message).
    pub max_iterations: u32,
    /// Protected paths the agent changed (put back before the check).
    pub protected: &'a [String],
    /// A resource limit one of the attempt's commands (a tool call or the check) passed.
    pub resource: Option<&'a TaskError>,
    /// Why `check` could not run, when it could not ([`super::check::could_not_run`]).
    pub unrunnable: Option<&'a str>,
}

/// The status of an attempt and, unless it passed, why.
pub fn judge(evidence: &Evidence<'_>) -> (Status, Option<TaskError>) {
    let agent = |status, message: String| (status, Some(TaskError::new(FailureKind::Agent, message)));
    // An agent stopped by a limit had its work so far checked: the message says how that went.
    let limit = |status, message: String| agent(status, message + &check_note(evidence));
    if let (Some(error), false) = (evidence.resource, *evidence.phase == AgentPhase::Cancelled) {
        return (Status::Error, Some(error.clone()));
    }
    match evidence.phase {
        AgentPhase::Ended(AgentEnd::Finished) => judge_finished(evidence),
        AgentPhase::Ended(AgentEnd::MaxIterations) => {
            limit(Status::MaxIterations, format!("the agent did not finish within {} iterations", evidence.max_iterations))
        }
        AgentPhase::Ended(AgentEnd::BudgetExceeded(message)) => limit(Status::BudgetExceeded, message.clone()),
        AgentPhase::Ended(AgentEnd::Failed(error)) => (failure_status(error), Some(error.clone())),
        AgentPhase::TimedOut(timeout) => {
            limit(Status::Timeout, format!("the task ran longer than its timeout of {}", humantime::format_duration(*timeout)))
        }
        AgentPhase::Stalled(idle) => agent(
            Status::Stalled,
            format!(
                "nothing from the model or a command for {} (idle_timeout): a stuck stream or a hung command",
                // Whole seconds: the clock is checked about once a second anyway.
                humantime::format_duration(Duration::from_secs(idle.as_secs()))
            ),
        ),
        AgentPhase::Cancelled => (Status::Cancelled, Some(TaskError::new(FailureKind::Cancelled, "the run was interrupted"))),
    }
}

/// ` (its work so far passes the check)` or `… fails the check (exit N)` when the check ran.
fn check_note(evidence: &Evidence<'_>) -> String {
    if let Some(why) = evidence.unrunnable {
        return format!(" (its work so far could not be checked: {why})");
    }
    match evidence.check.map(|c| c.exit_code) {
        None => String::new(),
        Some(Some(0)) => " (its work so far passes the check)".to_string(),
        Some(Some(code)) => format!(" (its work so far fails the check: exit code {code})"),
        Some(None) => " (its work so far fails the check: killed)".to_string(),
    }
}

/// The agent finished: a change to a protected path fails it, then a check that could not run
/// leaves it unjudged, then the check decides, then `require_change` (by default, a task that
/// changed nothing while its check was green before the agent fails: nothing was fixed).
fn judge_finished(evidence: &Evidence<'_>) -> (Status, Option<TaskError>) {
    if !evidence.protected.is_empty() {
        let message =
            format!("the agent changed protected path(s) {} (put back before the check; not in the patch)", evidence.protected.join(", "));
        return (Status::Failed, Some(TaskError::new(FailureKind::Protected, message)));
    }
    if let Some(why) = evidence.unrunnable {
        let message = format!("the check could not run: {why}; the agent's work was not graded");
        return (Status::Error, Some(TaskError::new(FailureKind::CheckUnrunnable, message)));
    }
    if let Some(check) = evidence.check.filter(|c| c.exit_code != Some(0)) {
        let code = check.exit_code.map_or("no code (killed)".into(), |c| c.to_string());
        let message = format!("check `{}` exited with {code}", check.command);
        return (Status::Failed, Some(TaskError::new(FailureKind::Check, message)));
    }
    if evidence.files_changed == 0 {
        let green_before = evidence.check.is_some_and(|c| c.before == Some(Some(0)));
        let why = match evidence.require_change {
            RequireChange::No => return (Status::Passed, None),
            RequireChange::Unset if !green_before => return (Status::Passed, None),
            RequireChange::Unset => {
                "nothing was fixed: the check passed before the agent ran (check_before) and the agent changed no file \
                 (set require_change = false for a task that may leave the files as they are)"
            }
            RequireChange::Set => "the agent changed no file (require_change = true)",
            RequireChange::NoOtherEvidence => {
                "the agent changed no file, and nothing else shows it did its work: the task has no check, no structured \
                 output and a sandbox that can write, so require_change defaults to true (add a check, or set \
                 require_change = false for a task that may leave the files as they are)"
            }
        };
        return (Status::Failed, Some(TaskError::new(FailureKind::Agent, why)));
    }
    (Status::Passed, None)
}

/// The status a failure gives: a provider without credentials is `not_configured`,
/// infrastructure is `error`, the task's own failures are `failed`.
pub fn failure_status(error: &TaskError) -> Status {
    match error.kind {
        FailureKind::Llm(ErrorKind::NotConfigured) => Status::NotConfigured,
        // The task's own failure (JUnit `<failure>`), but the agent did not finish: `error`.
        FailureKind::Llm(ErrorKind::ContextOverflow) => Status::Error,
        kind if kind.is_infrastructure() => Status::Error,
        _ => Status::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(exit_code: Option<i32>) -> CheckRecord {
        CheckRecord { command: "make test".into(), exit_code, output_tail: String::new(), before: None, ..Default::default() }
    }

    /// Name, agent phase, check, files changed, require_change → status, error kind and a
    /// part of its message.
    type Row<'a> = (&'a str, AgentPhase, Option<&'a CheckRecord>, usize, RequireChange, Status, Option<(FailureKind, &'a str)>);

    fn failed(kind: FailureKind) -> AgentPhase {
        AgentPhase::Ended(AgentEnd::Failed(TaskError::new(kind, "boom")))
    }

    #[test]
    fn every_status_path() {
        let finished = AgentPhase::Ended(AgentEnd::Finished);
        let (green, red, killed) = (check(Some(0)), check(Some(1)), check(None));
        let green_before = |before| CheckRecord { before: Some(before), ..check(Some(0)) };
        let (green_green, red_green) = (green_before(Some(0)), green_before(Some(1)));
        let llm = |k| failed(FailureKind::Llm(k));
        use RequireChange::{No, NoOtherEvidence, Set, Unset};
        #[rustfmt::skip]
        let table: Vec<Row<'_>> = vec![
            ("passed, no check", finished.clone(), None, 0, No, Status::Passed, None),
            ("passed, green check", finished.clone(), Some(&green), 1, No, Status::Passed, None),
            ("passed, change required and made", finished.clone(), None, 2, Set, Status::Passed, None),
            ("failed by check", finished.clone(), Some(&red), 1, No, Status::Failed, Some((FailureKind::Check, "check `make test` exited with 1"))),
            ("failed by killed check", finished.clone(), Some(&killed), 1, No, Status::Failed, Some((FailureKind::Check, "exited with no code (killed)"))),
            ("check wins over require_change", finished.clone(), Some(&red), 0, Set, Status::Failed, Some((FailureKind::Check, "check"))),
            ("failed by require_change", finished.clone(), Some(&green), 0, Set, Status::Failed, Some((FailureKind::Agent, "changed no file (require_change = true)"))),
            ("failed: nothing else grades it", finished.clone(), None, 0, NoOtherEvidence, Status::Failed, Some((FailureKind::Agent, "no check, no structured output and a sandbox that can write, so require_change defaults to true"))),
            ("failed: green before, nothing changed", finished.clone(), Some(&green_green), 0, Unset, Status::Failed, Some((FailureKind::Agent, "nothing was fixed: the check passed before the agent ran"))),
            ("passed: green before, nothing changed, require_change = false", finished.clone(), Some(&green_green), 0, No, Status::Passed, None),
            ("passed: red before, green after, nothing changed", finished.clone(), Some(&red_green), 0, Unset, Status::Passed, None),
            ("passed: green before, a change made", finished.clone(), Some(&green_green), 1, Unset, Status::Passed, None),
            ("passed: no check_before, nothing changed", finished.clone(), Some(&green), 0, Unset, Status::Passed, None),
            ("passed: nothing else grades it, but it changed a file", finished.clone(), None, 1, NoOtherEvidence, Status::Passed, None),
            ("max_iterations", AgentPhase::Ended(AgentEnd::MaxIterations), None, 0, No, Status::MaxIterations, Some((FailureKind::Agent, "within 7 iterations"))),
            ("max_iterations, work checked", AgentPhase::Ended(AgentEnd::MaxIterations), Some(&green), 1, No, Status::MaxIterations, Some((FailureKind::Agent, "within 7 iterations (its work so far passes the check)"))),
            ("timeout, work checked", AgentPhase::TimedOut(Duration::from_secs(90)), Some(&red), 1, No, Status::Timeout, Some((FailureKind::Agent, "timeout of 1m 30s (its work so far fails the check: exit code 1)"))),
            ("budget_exceeded", AgentPhase::Ended(AgentEnd::BudgetExceeded("over 100 tokens".into())), None, 0, No, Status::BudgetExceeded, Some((FailureKind::Agent, "over 100 tokens"))),
            ("not_configured", llm(ErrorKind::NotConfigured), None, 0, No, Status::NotConfigured, Some((FailureKind::Llm(ErrorKind::NotConfigured), "boom"))),
            ("error: rate_limit", llm(ErrorKind::RateLimit), None, 0, No, Status::Error, Some((FailureKind::Llm(ErrorKind::RateLimit), "boom"))),
            ("error: quota", llm(ErrorKind::Quota), None, 0, No, Status::Error, Some((FailureKind::Llm(ErrorKind::Quota), "boom"))),
            ("error: auth", llm(ErrorKind::Auth), None, 0, No, Status::Error, Some((FailureKind::Llm(ErrorKind::Auth), "boom"))),
            ("error: network", llm(ErrorKind::Network), None, 0, No, Status::Error, Some((FailureKind::Llm(ErrorKind::Network), "boom"))),
            ("error: server", llm(ErrorKind::Server), None, 0, No, Status::Error, Some((FailureKind::Llm(ErrorKind::Server), "boom"))),
            ("error: bad_response", llm(ErrorKind::BadResponse), None, 0, No, Status::Error, Some((FailureKind::Llm(ErrorKind::BadResponse), "boom"))),
            ("error: internal", failed(FailureKind::Internal), None, 0, No, Status::Error, Some((FailureKind::Internal, "boom"))),
            ("error: sandbox", failed(FailureKind::Sandbox), None, 0, No, Status::Error, Some((FailureKind::Sandbox, "boom"))),
            ("failed by the agent", failed(FailureKind::Agent), None, 0, No, Status::Failed, Some((FailureKind::Agent, "boom"))),
            ("failed by a tool", failed(FailureKind::Tool), None, 0, No, Status::Failed, Some((FailureKind::Tool, "boom"))),
            ("timeout", AgentPhase::TimedOut(Duration::from_secs(90)), None, 0, No, Status::Timeout, Some((FailureKind::Agent, "timeout of 1m 30s"))),
            ("stalled", AgentPhase::Stalled(Duration::from_secs(30)), None, 0, No, Status::Stalled, Some((FailureKind::Agent, "nothing from the model or a command for 30s"))),
            ("cancelled", AgentPhase::Cancelled, None, 3, Set, Status::Cancelled, Some((FailureKind::Cancelled, "interrupted"))),
        ];
        for (name, phase, check, files_changed, require_change, status, error) in table {
            let evidence = Evidence {
                phase: &phase,
                check,
                files_changed,
                require_change,
                max_iterations: 7,
                protected: &[],
                resource: None,
                unrunnable: None,
            };
            let (got_status, got_error) = judge(&evidence);
            assert_eq!(got_status, status, "{name}");
            match (got_error, error) {
                (None, None) => {}
                (Some(got), Some((kind, needle))) => {
                    assert_eq!(got.kind, kind, "{name}");
                    assert!(got.message.contains(needle), "{name}: {:?} lacks {needle:?}", got.message);
                }
                (got, want) => panic!("{name}: error {got:?}, expected {want:?}"),
            }
        }
    }

    #[test]
    fn a_changed_protected_path_fails_the_task_even_with_a_green_check() {
        let finished = AgentPhase::Ended(AgentEnd::Finished);
        let green = check(Some(0));
        let protected = ["tests/test_calc.py".to_string()];
        let evidence = Evidence {
            phase: &finished,
            check: Some(&green),
            files_changed: 1,
            require_change: RequireChange::No,
            max_iterations: 7,
            protected: &protected,
            resource: None,
            unrunnable: None,
        };
        let (status, error) = judge(&evidence);
        let error = error.expect("an error");
        assert_eq!((status, error.kind), (Status::Failed, FailureKind::Protected));
        assert!(error.message.contains("tests/test_calc.py"), "{}", error.message);
        let timed_out = AgentPhase::TimedOut(Duration::from_secs(1));
        assert_eq!(judge(&Evidence { phase: &timed_out, ..evidence }).0, Status::Timeout, "an unfinished agent keeps its status");
    }

    #[test]
    fn a_command_that_passed_a_limit_makes_the_attempt_an_error_of_kind_resource() {
        let limit = TaskError::new(FailureKind::Resource, "the command `sh bomb` passed the task's processes limit (32)");
        let red = check(None);
        let finished = AgentPhase::Ended(AgentEnd::Finished);
        for (phase, check) in [(&finished, Some(&red)), (&finished, None), (&AgentPhase::TimedOut(Duration::from_secs(1)), None)] {
            let evidence = Evidence {
                phase,
                check,
                files_changed: 0,
                require_change: RequireChange::Set,
                max_iterations: 7,
                protected: &[],
                resource: Some(&limit),
                unrunnable: None,
            };
            assert_eq!(judge(&evidence), (Status::Error, Some(limit.clone())), "{phase:?}");
        }
        let cancelled = Evidence {
            phase: &AgentPhase::Cancelled,
            check: None,
            files_changed: 0,
            require_change: RequireChange::No,
            max_iterations: 7,
            protected: &[],
            resource: Some(&limit),
            unrunnable: None,
        };
        assert_eq!(judge(&cancelled).0, Status::Cancelled);
        assert_eq!(failure_status(&limit), Status::Error);
    }

    #[test]
    fn a_check_that_could_not_run_leaves_a_finished_agent_unjudged_but_keeps_a_limit_or_a_protected_change() {
        let missing = CheckRecord { exit_code: Some(127), ..check(Some(127)) };
        let why = "`pytest` not found (exit 127)";
        let finished = AgentPhase::Ended(AgentEnd::Finished);
        let evidence = Evidence {
            phase: &finished,
            check: Some(&missing),
            files_changed: 1,
            require_change: RequireChange::No,
            max_iterations: 7,
            protected: &[],
            resource: None,
            unrunnable: Some(why),
        };
        let (status, error) = judge(&evidence);
        let error = error.expect("an error");
        assert_eq!((status, error.kind), (Status::Error, FailureKind::CheckUnrunnable));
        assert!(error.message.starts_with("the check could not run: `pytest` not found (exit 127)"), "{}", error.message);
        let timed_out = AgentPhase::TimedOut(Duration::from_secs(1));
        let (status, error) = judge(&Evidence { phase: &timed_out, ..evidence });
        assert_eq!(status, Status::Timeout);
        assert!(error.is_some_and(|e| e.message.ends_with("(its work so far could not be checked: `pytest` not found (exit 127))")));
        let protected = ["tests/t.py".to_string()];
        assert_eq!(judge(&Evidence { protected: &protected, ..evidence }).0, Status::Failed, "a protected change is the agent's own");
    }
}
