//! An output folder read into the page's [`Report`] and its tasks' [`TaskDetail`]s.

use crate::data::group;
use crate::data::{Counts, FORMAT, Report, Run, Setup, Shard, TaskDetail, TaskRow, Usage};
use crate::events::{self, RunEvents, ms_between};
use crate::{Options, PageError};
use dracode_results::Status;
use dracode_results::records::WireOutcome;
use std::path::Path;

/// The overview of the folder `dir`, and its events (for [`details`]).
pub fn report(dir: &Path, options: &Options<'_>) -> Result<(Report, RunEvents), PageError> {
    let mut run_events = events::read(dir)?;
    if let Some(end) = &options.end {
        run_events.take(end.clone());
    }
    let tasks: Vec<TaskRow> = run_events.finished.iter().enumerate().map(|(n, (id, o))| row(&run_events, n, id, o, options)).collect();
    let combine_path = dir.join("combine.json");
    let combine = match std::fs::read_to_string(&combine_path) {
        Ok(text) => Some(serde_json::from_str(&text).map_err(|source| PageError::Combine { path: combine_path, source })?),
        Err(_) => None,
    };
    let report = Report {
        format: FORMAT,
        generated_by: format!("dracode {}", options.version),
        kind: if run_events.merged_from.is_empty() { "run" } else { "merged" }.to_string(),
        run: run(&run_events),
        counts: counts(&run_events.finished),
        setups: setups(&run_events),
        tasks,
        combine,
        history: Vec::new(),
    };
    Ok((report, run_events))
}

/// Each task's view, in the order of `report.tasks`.
pub fn details(dir: &Path, report: &Report, run: &RunEvents) -> Vec<TaskDetail> {
    run.finished.iter().zip(&report.tasks).map(|((id, o), _)| crate::detail::build(dir, id, o, run.notes.get(id))).collect()
}

/// The run as a whole.
fn run(e: &RunEvents) -> Run {
    let summed = e.finished.iter().fold(Usage::default(), |sum, (_, o)| sum + o.usage);
    let cost = e.finished.iter().try_fold(0.0, |sum, (_, o)| o.total_cost_usd.map(|c| sum + c));
    Run {
        run_id: e.run_id.clone(),
        started_at: e.started_at.clone(),
        finished_at: e.end.as_ref().map(|end| end.at.clone()),
        duration_ms: ms_between(e.started, e.end.as_ref().and_then(|end| events::time(&end.at)).or(e.last)),
        jobs: e.jobs,
        version: e.version.clone(),
        manifests: e.manifests.clone(),
        exit_code: e.end.as_ref().map(|end| end.exit_code),
        warnings: e.warnings.clone(),
        shards: e
            .merged_from
            .iter()
            .map(|m| Shard { dir: m.dir.clone(), run_id: m.run_id.clone(), shard: m.shard.clone(), task_count: m.task_count })
            .collect(),
        usage: e.end.as_ref().map_or(summed, |end| end.usage),
        total_cost_usd: e.end.as_ref().map_or(cost, |end| end.total_cost_usd),
    }
}

/// The table row of the `n`-th task.
fn row(run: &RunEvents, n: usize, id: &str, o: &WireOutcome, options: &Options<'_>) -> TaskRow {
    let reason = if o.status.is_pass() { None } else { (options.reason)(o).filter(|r| !r.is_empty()) };
    TaskRow {
        id: id.to_string(),
        index: o.index,
        status: o.status.as_str().to_string(),
        group: group(o.status, o.error.as_ref()).to_string(),
        kind: o.error.as_ref().map(|e| e.kind.as_str().to_string()),
        reason,
        tags: o.tags.clone(),
        provider: o.provider.clone(),
        model: o.model.clone(),
        manifest: o.line.map_or_else(|| o.manifest.clone(), |line| format!("{}:{line}", o.manifest)),
        duration_ms: o.duration_ms,
        cost_usd: o.total_cost_usd,
        usage: o.usage,
        turns: o.num_turns,
        attempts: o.attempts,
        flaky: o.flaky,
        cached: o.cached,
        carried_from: o.carried_from.clone(),
        repairs: o.repairs,
        files_changed: o.files_changed.len(),
        pass_rate: o.pass_rate,
        verdict: o.verdict.map(|v| v.as_str().to_string()),
        protected: o.protected.len(),
        protected_refused: o.protected_refused.len(),
        denied_calls: o.denied_calls,
        network_denied: o.network_denied - network_not_agent(run, id).min(o.network_denied),
        network_denied_check: network_not_agent(run, id).min(o.network_denied),
        timeline: crate::timeline::bars(run, id, o),
        history: Vec::new(),
        detail: n,
    }
}

/// The refusals of task `id` that its check or the setup asked for (`network.denied` lines).
fn network_not_agent(run: &RunEvents, id: &str) -> u64 {
    run.notes.get(id).map_or(0, |n| n.network.iter().filter(|d| d.phase != "agent").count() as u64)
}

/// Counts by group and status.
fn counts(finished: &[(String, WireOutcome)]) -> Counts {
    let mut counts = Counts { total: finished.len(), ..Counts::default() };
    for (_, o) in finished {
        match group(o.status, o.error.as_ref()) {
            "passed" => counts.passed += 1,
            "failed" => counts.failed += 1,
            _ => counts.not_judged += 1,
        }
        counts.cached += usize::from(o.cached);
        counts.carried += usize::from(o.carried_from.is_some());
        counts.flaky += usize::from(o.flaky);
    }
    counts.by_status = Status::ALL
        .iter()
        .map(|s| (s.as_str().to_string(), finished.iter().filter(|(_, o)| o.status == *s).count()))
        .filter(|(_, n)| *n > 0)
        .collect();
    counts
}

/// The setups.
fn setups(e: &RunEvents) -> Vec<Setup> {
    e.setups
        .iter()
        .map(|s| {
            let end = s.finished.clone().unwrap_or_default();
            Setup {
                command: s.command.clone(),
                repo: s.repo.clone(),
                start_ms: ms_between(e.started, s.started),
                duration_ms: s.finished.as_ref().map(|f| f.duration_ms),
                exit_code: end.exit_code,
                error: end.error,
                outputs: end.outputs,
                output_tail: end.output_tail,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{Log, outcome, with_error};
    use serde_json::json;

    #[test]
    fn counts_go_by_group() {
        let mut log = Log::new("r1", 0);
        log.finished(10, "pass", 1, outcome(0, "passed"));
        log.finished(20, "check", 1, with_error(outcome(1, "failed"), "check", "exit 1"));
        log.finished(30, "provider", 1, with_error(outcome(2, "error"), "rate_limit", "429"));
        log.finished(40, "agent", 1, with_error(outcome(3, "error"), "agent", "malformed tool call"));
        let mut cached = outcome(4, "passed");
        cached["cached"] = json!(true);
        log.finished(50, "cached", 1, cached);
        let mut carried = outcome(5, "passed");
        carried["carried_from"] = json!("r0");
        log.finished(60, "carried", 1, carried);
        let mut flaky = outcome(6, "passed");
        (flaky["flaky"], flaky["attempts"]) = (json!(true), json!(2));
        log.finished(70, "flaky", 1, flaky);
        let folder = log.folder();
        let (report, _) = super::report(folder.path(), &Options::default()).unwrap();
        let c = &report.counts;
        assert_eq!((c.total, c.passed, c.failed, c.not_judged), (7, 4, 2, 1));
        assert_eq!((c.cached, c.carried, c.flaky), (1, 1, 1));
        let by_status: Vec<(&str, usize)> = c.by_status.iter().map(|(s, n)| (s.as_str(), *n)).collect();
        assert_eq!(by_status, [("passed", 4), ("failed", 1), ("error", 2)]);
        let groups: Vec<(&str, &str)> = report.tasks.iter().map(|t| (t.id.as_str(), t.group.as_str())).collect();
        assert_eq!(groups[1..4], [("check", "failed"), ("provider", "not_judged"), ("agent", "failed")]);
        assert_eq!(report.kind, "run");
    }

    #[test]
    fn a_run_without_run_finished_lasts_to_its_last_line() {
        let mut log = Log::new("r1", 1000);
        log.started(1500, "a", 1, None).turn(4000, "a", 1, 100);
        let folder = log.folder();
        let (report, _) = super::report(folder.path(), &Options::default()).unwrap();
        assert_eq!((report.run.duration_ms, report.run.finished_at.as_deref(), report.run.exit_code), (3000, None, None));
        assert!(report.tasks.is_empty());

        log.finished(5000, "a", 1, outcome(0, "passed")).run_finished(6000);
        log.write(folder.path());
        let (report, _) = super::report(folder.path(), &Options::default()).unwrap();
        assert_eq!(report.run.duration_ms, 5000);
        assert_eq!(report.run.finished_at, Some(crate::test_support::ts(6000)));
        assert_eq!((report.run.exit_code, report.run.total_cost_usd), (Some(1), Some(0.5)));
    }
}
