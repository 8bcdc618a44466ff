//! Process exit codes: public API, documented in docs/src/reference/exit-codes.md.
//!
//! When several apply, the one that says the most wins: an interrupt (130/143) over
//! [`ARTIFACTS_FAILED`] (3) over [`NOT_JUDGED`] (5) over [`TASKS_FAILED`] (1) over [`OK`].
//! [`USAGE`] (2) and [`NO_TASKS`] (4) end a run before any task starts, so they meet no other.

use crate::{Status, TaskError};

/// Every selected task passed.
pub const OK: i32 = 0;
/// At least one task did not pass: the agents' work fell short (a failed check, no change,
/// a timeout, a budget, …), and every task could be judged.
pub const TASKS_FAILED: i32 = 1;
/// Usage, config or manifest error: nothing was run.
pub const USAGE: i32 = 2;
/// dracode could not write its results (an artifact in `--out`, `--jsonl`, the step summary):
/// the tasks' statuses cannot be trusted to have been recorded, whatever they were.
pub const ARTIFACTS_FAILED: i32 = 3;
/// No task was selected (a filter, `--rerun-failed` or the shard matched nothing), unless
/// `--no-tasks` says otherwise (`--shard` implies `warn`).
pub const NO_TASKS: i32 = 4;
/// Some task could not be judged: its provider was not configured (`not_configured`), or it
/// ended `error` for a reason outside the agent's work (auth, quota, rate_limit, network,
/// server, bad_response, sandbox, check_unrunnable, secret, internal:
/// [`crate::FailureKind::is_infrastructure`]);
/// or `dracode merge` lacks a shard, or a shard that never finished. Outranks
/// [`TASKS_FAILED`]: a failed task beside it does not hide it.
pub const NOT_JUDGED: i32 = 5;
/// Interrupted by SIGINT.
pub const INTERRUPTED: i32 = 130;
/// Terminated by SIGTERM.
pub const TERMINATED: i32 = 143;

/// True when a task that ended with `status` and `error` says nothing about the agent's work:
/// its provider was not configured, or it ended `error` for an infrastructure reason. A
/// `context_overflow` is the task's own (`error`, but exit 1); an interrupted task is the
/// signal's to report.
pub fn not_judged(status: Status, error: Option<&TaskError>) -> bool {
    match status {
        Status::NotConfigured => true,
        Status::Error => error.is_none_or(|e| e.kind.is_infrastructure()),
        _ => false,
    }
}

/// The exit code a set of finished tasks gives (a run's, or a merge's), each as its status and
/// error: [`NOT_JUDGED`] when one could not be judged, else [`TASKS_FAILED`] when one did not
/// pass, else [`OK`].
pub fn of_tasks<'a>(tasks: impl IntoIterator<Item = (Status, Option<&'a TaskError>)>) -> i32 {
    let mut code = OK;
    for (status, error) in tasks {
        if not_judged(status, error) {
            return NOT_JUDGED;
        }
        if !status.is_pass() {
            code = TASKS_FAILED;
        }
    }
    code
}

/// The code that says the most of `a` and `b` (see the module's order); 2 and 4 rank above
/// the task codes, below 3.
pub fn worst(a: i32, b: i32) -> i32 {
    let rank = |code: i32| match code {
        OK => 0,
        TASKS_FAILED => 1,
        NOT_JUDGED => 2,
        USAGE | NO_TASKS => 3,
        ARTIFACTS_FAILED => 4,
        INTERRUPTED | TERMINATED => 6,
        _ => 5,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// The exit code of a run that `signal` interrupted (2 or 15; anything else: not interrupted),
/// else `tasks`.
pub fn after_signal(signal: i32, tasks: i32) -> i32 {
    match signal {
        2 => INTERRUPTED,
        15 => TERMINATED,
        _ => tasks,
    }
}

/// The exit code of a run whose tasks left `code` and where `artifact_failures` artifacts could
/// not be written: an interrupt's code stays (it says the most), anything else becomes
/// [`ARTIFACTS_FAILED`] — a record that could not be written outranks the tasks it records.
pub fn after_artifacts(code: i32, artifact_failures: usize) -> i32 {
    match code {
        INTERRUPTED | TERMINATED => code,
        _ if artifact_failures > 0 => ARTIFACTS_FAILED,
        _ => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_that_could_not_be_judged_outranks_one_that_failed() {
        use crate::{ErrorKind, FailureKind};
        let with = |status, kind| (status, Some(TaskError::new(kind, "x")));
        let passed = (Status::Passed, None);
        let failed = with(Status::Failed, FailureKind::Check);
        #[rustfmt::skip]
        let table = [
            (vec![passed.clone()], OK),
            (vec![passed.clone(), failed.clone()], TASKS_FAILED),
            (vec![with(Status::Error, FailureKind::Llm(ErrorKind::ContextOverflow))], TASKS_FAILED),
            (vec![with(Status::Timeout, FailureKind::Agent)], TASKS_FAILED),
            (vec![failed.clone(), with(Status::NotConfigured, FailureKind::Llm(ErrorKind::NotConfigured))], NOT_JUDGED),
            (vec![with(Status::Error, FailureKind::Llm(ErrorKind::RateLimit)), failed.clone()], NOT_JUDGED),
            (vec![with(Status::Error, FailureKind::Llm(ErrorKind::Network)), passed.clone()], NOT_JUDGED),
            (vec![with(Status::Error, FailureKind::Sandbox)], NOT_JUDGED),
            (vec![with(Status::Error, FailureKind::CheckUnrunnable), failed.clone()], NOT_JUDGED),
            (vec![with(Status::Error, FailureKind::Internal)], NOT_JUDGED),
        ];
        for (outcomes, code) in table {
            let tasks = outcomes.iter().map(|(status, error)| (*status, error.as_ref()));
            assert_eq!(of_tasks(tasks), code, "{outcomes:?}");
        }
    }

    #[test]
    fn precedence_is_interrupt_then_artifacts_then_not_judged_then_failed() {
        assert_eq!(worst(OK, TASKS_FAILED), TASKS_FAILED);
        assert_eq!(worst(NOT_JUDGED, TASKS_FAILED), NOT_JUDGED);
        assert_eq!(worst(TASKS_FAILED, NOT_JUDGED), NOT_JUDGED);
        assert_eq!(worst(NOT_JUDGED, ARTIFACTS_FAILED), ARTIFACTS_FAILED);
        assert_eq!(worst(TERMINATED, ARTIFACTS_FAILED), TERMINATED);
        assert_eq!(after_artifacts(NOT_JUDGED, 1), ARTIFACTS_FAILED);
        assert_eq!(after_signal(15, NOT_JUDGED), TERMINATED);
    }

    #[test]
    fn an_artifact_failure_outranks_the_tasks_but_not_an_interrupt() {
        assert_eq!(after_artifacts(OK, 0), OK);
        assert_eq!(after_artifacts(TASKS_FAILED, 0), TASKS_FAILED);
        assert_eq!(after_artifacts(OK, 1), ARTIFACTS_FAILED);
        assert_eq!(after_artifacts(TASKS_FAILED, 2), ARTIFACTS_FAILED);
        assert_eq!(after_artifacts(TERMINATED, 1), TERMINATED);
        assert_eq!(after_artifacts(INTERRUPTED, 1), INTERRUPTED);
    }
}
