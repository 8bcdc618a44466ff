//! A repeated task (`repeat = N`, `--repeat N`): N independent attempts become one outcome with
//! a pass rate, a verdict (`stable_pass`, `stable_fail`, `flaky`) and a status that
//! `--min-pass-rate` decides — so the exit code follows from the statuses as for any task.

use super::spec::RepeatSpec;
use crate::events::{Attachments, RepeatVerdict, Status, TaskError, TaskOutcome};
use dracode_results::records::WireRepeat;

/// The outcome of a repeated task from its attempts (each with the number of its last attempt),
/// in order (at least one). The task passes when its pass rate is at least `spec.min_pass_rate`; its own fields
/// are then those of the last attempt that passed, else of the last that did not (its error
/// saying the pass rate). Turns, usage and cost are summed over every attempt.
pub fn summarise(runs: Vec<(TaskOutcome, u32)>, spec: RepeatSpec) -> TaskOutcome {
    let count = u32::try_from(runs.len()).unwrap_or(u32::MAX).max(1);
    let passed = u32::try_from(runs.iter().filter(|(o, _)| o.record.status.is_pass()).count()).unwrap_or(0);
    let pass_rate = f64::from(passed) / f64::from(count);
    let passes = pass_rate >= spec.min_pass_rate;
    let chosen = runs.iter().rposition(|(o, _)| o.record.status.is_pass() == passes).unwrap_or(runs.len().saturating_sub(1));
    let records: Vec<WireRepeat> = runs.iter().enumerate().map(|(i, (o, attempt))| record(i, o, *attempt, i == chosen)).collect();
    let files: Vec<Attachments> = runs
        .iter()
        .map(|(o, _)| Attachments { diff: o.attachments.diff.clone(), transcript: o.attachments.transcript.clone(), repeats: Vec::new() })
        .collect();
    let last_attempt = runs.last().map_or(1, |(_, attempt)| *attempt);
    let (usage, cost) = totals(&runs);
    let turns = runs.iter().map(|(o, _)| o.record.num_turns).fold(0, u32::saturating_add);
    let mut runs = runs;
    let (mut outcome, _) = runs.swap_remove(chosen);
    let verdict = RepeatVerdict::of(passed, count);
    if passes && !outcome.record.status.is_pass() {
        // `--min-pass-rate 0`: passed whatever its attempts did.
        (outcome.record.status, outcome.record.error) = (Status::Passed, None);
    } else if !passes {
        let why =
            format!("passed {passed} of {count} attempts (pass rate {pass_rate}, below the --min-pass-rate of {})", spec.min_pass_rate);
        let error = outcome.record.error.take().unwrap_or_else(|| TaskError::new(crate::events::FailureKind::Agent, String::new()));
        let message = if error.message.is_empty() { why } else { format!("{why}; attempt {}: {}", chosen + 1, error.message) };
        outcome.record.error = Some(TaskError { message, ..error });
    }
    outcome.record.num_turns = turns;
    outcome.record.usage = usage;
    outcome.record.total_cost_usd = cost;
    outcome.record.attempts = last_attempt;
    outcome.record.flaky = verdict == RepeatVerdict::Flaky;
    outcome.record.pass_rate = Some(pass_rate);
    outcome.record.verdict = Some(verdict);
    outcome.record.repeats = records;
    outcome.attachments.repeats = files;
    outcome
}

/// The record of attempt `index` (0-based) ending at attempt number `attempt` (its paths are
/// set with the task's other derived fields, [`TaskOutcome::finish`]).
fn record(index: usize, o: &TaskOutcome, attempt: u32, reported: bool) -> WireRepeat {
    WireRepeat {
        repeat: u32::try_from(index + 1).unwrap_or(u32::MAX),
        attempt,
        status: o.record.status,
        error: o.record.error.clone(),
        duration_ms: o.record.duration_ms,
        repairs: o.record.repairs,
        check_exit_code: o.record.check.as_ref().map(|c| c.exit_code),
        reported,
        files_changed: o.record.files_changed.clone(),
        diff_path: None,
        transcript_path: None,
    }
}

/// Usage and cost summed over every run (the cost unknown when a run that made calls had none).
fn totals(runs: &[(TaskOutcome, u32)]) -> (dracode_llm::Usage, Option<f64>) {
    let usage = runs.iter().map(|(o, _)| o.record.usage).sum();
    let cost =
        runs.iter().filter(|(o, _)| o.record.usage.requests > 0).try_fold(0.0, |sum, (o, _)| o.record.total_cost_usd.map(|c| sum + c));
    (usage, cost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::FailureKind;

    fn run(status: Status) -> TaskOutcome {
        let mut o = TaskOutcome::new("t", "tasks.toml".as_ref(), 0, status, "p", "m");
        o.record.usage = dracode_llm::Usage::from_counts(10, 5);
        o.record.total_cost_usd = Some(0.5);
        if status != Status::Passed {
            o.record.error = Some(TaskError::new(FailureKind::Check, "check `x` exited with 1"));
        }
        o
    }

    fn repeated(statuses: &[Status], min_pass_rate: f64) -> TaskOutcome {
        let runs = statuses.iter().enumerate().map(|(i, s)| (run(*s), i as u32 + 1)).collect();
        summarise(runs, RepeatSpec { count: statuses.len() as u32, min_pass_rate })
    }

    #[test]
    fn three_of_five_is_flaky_and_the_threshold_decides_the_status() {
        use Status::{Failed, Passed};
        let statuses = [Passed, Failed, Passed, Failed, Passed];
        let strict = repeated(&statuses, 1.0);
        assert_eq!((strict.record.status, strict.record.verdict, strict.record.pass_rate), (Failed, Some(RepeatVerdict::Flaky), Some(0.6)));
        let message = strict.record.error.unwrap().message;
        assert!(message.starts_with("passed 3 of 5 attempts (pass rate 0.6, below the --min-pass-rate of 1); attempt 4:"), "{message}");
        assert_eq!(strict.record.repeats.iter().filter(|r| r.reported).map(|r| r.repeat).collect::<Vec<_>>(), [4]);
        let lenient = repeated(&statuses, 0.6);
        assert_eq!((lenient.record.status, lenient.record.error), (Passed, None));
        assert_eq!(lenient.record.repeats.iter().position(|r| r.reported), Some(4));
        assert!(lenient.record.flaky);
        assert_eq!((lenient.record.usage.total_tokens, lenient.record.total_cost_usd, lenient.record.attempts), (75, Some(2.5), 5));
    }

    #[test]
    fn all_or_nothing_is_stable() {
        let pass = repeated(&[Status::Passed; 3], 1.0);
        assert_eq!((pass.record.status, pass.record.verdict, pass.record.flaky), (Status::Passed, Some(RepeatVerdict::StablePass), false));
        let fail = repeated(&[Status::Failed, Status::Timeout], 0.5);
        assert_eq!(
            (fail.record.status, fail.record.verdict, fail.record.pass_rate),
            (Status::Timeout, Some(RepeatVerdict::StableFail), Some(0.0))
        );
    }
}
