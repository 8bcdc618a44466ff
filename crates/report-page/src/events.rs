//! `results.jsonl` read for the page: every line, not only each task's last `task.finished`
//! (the timeline needs when each attempt began and ended, the task view its retries, refused
//! connections and limit warnings).

use dracode_results::Usage;
use dracode_results::output_folder::{LineProblem, ReadError};
use dracode_results::records::{MergedFrom, StatusCounts, WireEvent, WireOutcome};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

/// A run's events, grouped as the page reads them.
#[derive(Debug, Default)]
pub struct RunEvents {
    /// `run.started`: `run_id`, `ts`, `version`, manifests, jobs, warnings, shards.
    pub run_id: String,
    /// When the run began.
    pub started: Option<SystemTime>,
    /// `run.started.ts` as written.
    pub started_at: String,
    /// dracode's version.
    pub version: String,
    /// The manifests, as given.
    pub manifests: Vec<String>,
    /// `--jobs`.
    pub jobs: usize,
    /// `run.started.warnings`.
    pub warnings: Vec<String>,
    /// `run.started.merged_from`.
    pub merged_from: Vec<MergedFrom>,
    /// The setups, in the order they started.
    pub setups: Vec<SetupEvents>,
    /// Each task attempt's events, by task id and attempt.
    pub attempts: BTreeMap<(String, u32), AttemptEvents>,
    /// Each task's last `task.finished`, in file order of their first appearance.
    pub finished: Vec<(String, WireOutcome)>,
    /// Per task: retries, refused connections, limit warnings.
    pub notes: BTreeMap<String, TaskNotes>,
    /// `run.finished`: counts, usage, cost, exit code, and when.
    pub end: Option<RunEnd>,
    /// When the last line was written.
    pub last: Option<SystemTime>,
}

/// `run.finished`.
#[derive(Debug)]
pub struct RunEnd {
    /// Its `ts`.
    pub at: String,
    /// Counts by status.
    pub counts: StatusCounts,
    /// Every call's tokens.
    pub usage: Usage,
    /// Summed cost.
    pub total_cost_usd: Option<f64>,
    /// The exit code.
    pub exit_code: i32,
}

/// One `[setup]` run.
#[derive(Debug, Default)]
pub struct SetupEvents {
    /// When it began.
    pub started: Option<SystemTime>,
    /// The command.
    pub command: String,
    /// Its repository.
    pub repo: String,
    /// `setup.finished`.
    pub finished: Option<SetupEnd>,
}

/// `setup.finished`.
#[derive(Debug, Default, Clone)]
pub struct SetupEnd {
    /// Its exit code.
    pub exit_code: Option<i32>,
    /// Its wall time.
    pub duration_ms: u64,
    /// The last part of its output.
    pub output_tail: String,
    /// What it made.
    pub outputs: Vec<String>,
    /// Why it failed.
    pub error: Option<String>,
}

/// The times of one attempt.
#[derive(Debug, Default)]
pub struct AttemptEvents {
    /// `task.started`.
    pub started: Option<SystemTime>,
    /// How long making its workspace took, before `task.started`.
    pub workspace_ms: u64,
    /// Its last event.
    pub last: Option<SystemTime>,
    /// When its first model call began (`turn.completed` minus the call's time).
    pub first_call: Option<SystemTime>,
    /// Its `task.finished`, when this attempt was the reported one.
    pub finished: Option<SystemTime>,
}

/// What the task view lists besides the outcome.
#[derive(Debug, Default)]
pub struct TaskNotes {
    /// `retry` lines: scope, reason, delay.
    pub retries: Vec<(String, String, u64)>,
    /// `network.denied` lines.
    pub network: Vec<crate::data::NetworkDenied>,
    /// `limit.warning` messages.
    pub limit_warnings: Vec<String>,
}

/// Parses an RFC 3339 `ts`.
pub fn time(ts: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(ts.trim_end_matches('Z')).ok()
}

/// Milliseconds from `from` to `to`, 0 when `to` is earlier or either is unknown.
pub fn ms_between(from: Option<SystemTime>, to: Option<SystemTime>) -> u64 {
    match (from, to) {
        (Some(from), Some(to)) => to.duration_since(from).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0),
        _ => 0,
    }
}

/// Reads `dir/results.jsonl`. The error names the file and, for a bad line, its number.
pub fn read(dir: &Path) -> Result<RunEvents, ReadError> {
    let path = dir.join("results.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|source| ReadError::Io { path: path.clone(), source })?;
    let mut run = RunEvents::default();
    let mut seen_start = false;
    for (n, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let invalid = |problem| ReadError::Line { path: path.clone(), line: n + 1, problem };
        let value: serde_json::Value = serde_json::from_str(raw).map_err(|e| invalid(LineProblem::NotJson(e)))?;
        let event = WireEvent::deserialize(&value).map_err(|e| invalid(LineProblem::NotAnEvent(e)))?;
        seen_start |= matches!(event, WireEvent::RunStarted { .. });
        run.take(event);
    }
    if !seen_start {
        return Err(ReadError::NoRunStarted { path });
    }
    run.finished.sort_by_key(|(_, o)| o.index);
    Ok(run)
}

impl RunEvents {
    /// Files one event.
    pub(crate) fn take(&mut self, event: WireEvent) {
        let header = event.header().clone();
        let at = time(&header.ts);
        self.last = at.or(self.last);
        let task = header.task_id.clone().unwrap_or_default();
        let attempt = (task.clone(), header.attempt.unwrap_or(1));
        match event {
            WireEvent::RunStarted { header, version, manifests, jobs, warnings, merged_from, .. } => {
                (self.run_id, self.started, self.started_at) = (header.run_id, at, header.ts);
                (self.version, self.manifests, self.jobs, self.warnings) = (version, manifests, jobs, warnings);
                self.merged_from = merged_from.unwrap_or_default();
            }
            WireEvent::SetupStarted { command, repo, .. } => {
                self.setups.push(SetupEvents { started: at, command, repo, finished: None });
            }
            WireEvent::SetupFinished { command, exit_code, duration_ms, output_tail, outputs, error, .. } => {
                let finished = Some(SetupEnd { exit_code, duration_ms, output_tail, outputs, error });
                match self.setups.iter_mut().find(|s| s.command == command && s.finished.is_none()) {
                    Some(setup) => setup.finished = finished,
                    None => self.setups.push(SetupEvents { started: None, command, repo: String::new(), finished }),
                }
            }
            WireEvent::TaskStarted { workspace_ms, .. } => {
                let entry = self.attempts.entry(attempt).or_default();
                (entry.started, entry.workspace_ms) = (at, workspace_ms.unwrap_or(0));
            }
            WireEvent::TurnCompleted { duration_ms, .. } => {
                let entry = self.attempts.entry(attempt).or_default();
                let began = at.and_then(|t| t.checked_sub(std::time::Duration::from_millis(duration_ms)));
                entry.first_call = entry.first_call.or(began);
                entry.last = at;
            }
            WireEvent::Retry { scope, reason, delay_ms, .. } => {
                let scope = serde_json::to_value(scope).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
                self.notes.entry(task).or_default().retries.push((scope, reason, delay_ms));
            }
            WireEvent::NetworkDenied { host, port, command, reason, phase, lookup, .. } => {
                // Files of older versions name a refused name lookup `udp`, with no phase.
                let lookup = lookup || (host == "udp" && port == 0);
                let host = if lookup { String::new() } else { host };
                let phase = phase.unwrap_or_else(|| "agent".to_string());
                let denied = crate::data::NetworkDenied { host, port, command, reason, phase, lookup };
                self.notes.entry(task).or_default().network.push(denied);
            }
            WireEvent::LimitWarning { message, .. } => self.notes.entry(task).or_default().limit_warnings.push(message),
            WireEvent::TaskFinished { outcome, .. } => {
                let entry = self.attempts.entry(attempt).or_default();
                (entry.finished, entry.last) = (at, at);
                match self.finished.iter_mut().find(|(id, _)| *id == task) {
                    Some(slot) => slot.1 = *outcome,
                    None => self.finished.push((task, *outcome)),
                }
            }
            WireEvent::RunFinished { header, counts, usage, total_cost_usd, exit_code, .. } => {
                self.end = Some(RunEnd { at: header.ts, counts, usage, total_cost_usd, exit_code });
            }
            WireEvent::ToolStarted { .. } | WireEvent::ToolCompleted { .. } | WireEvent::AgentMessage { .. } => {
                self.attempts.entry(attempt).or_default().last = at;
            }
            WireEvent::ContextCompacted { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{Log, outcome, ts};
    use serde_json::json;

    #[test]
    fn a_bad_line_is_refused_naming_the_file_and_its_line() {
        let log = Log::new("r1", 0);
        let dir = log.folder();
        let text = format!("{}\n{{\"type\": \"run.started\"\n", log.text());
        std::fs::write(dir.path().join("results.jsonl"), text).unwrap();
        let err = read(dir.path()).unwrap_err().to_string();
        let file = dir.path().join("results.jsonl").display().to_string();
        assert!(err.starts_with(&format!("{file}:3: not a JSON line")), "{err}");

        let text = format!("{}{}\n", log.text(), json!({"type": "task.exploded", "ts": ts(1)}));
        std::fs::write(dir.path().join("results.jsonl"), text).unwrap();
        let err = read(dir.path()).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{file}:2: not a dracode event")), "{err}");
    }

    #[test]
    fn a_file_without_run_started_is_refused() {
        let mut log = Log::new("r1", 0);
        log.lines.remove(0);
        log.finished(10, "a", 1, outcome(0, "passed"));
        let dir = log.folder();
        let err = read(dir.path()).unwrap_err().to_string();
        assert_eq!(err, format!("{}: no run.started line: not the results of a dracode run", dir.path().join("results.jsonl").display()));
        let missing = read(&dir.path().join("nowhere")).unwrap_err().to_string();
        assert!(missing.contains("nowhere/results.jsonl"), "{missing}");
    }

    #[test]
    fn tasks_come_in_manifest_order_and_the_last_finish_of_a_task_wins() {
        let mut log = Log::new("r1", 0);
        log.finished(10, "c", 1, outcome(2, "passed"));
        log.finished(20, "a", 1, outcome(0, "failed"));
        log.finished(30, "b", 1, outcome(1, "passed"));
        let mut again = outcome(0, "passed");
        again["attempts"] = json!(2);
        log.finished(40, "a", 2, again);
        let run = read(log.folder().path()).unwrap();
        let ids: Vec<&str> = run.finished.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(run.finished[0].1.status, dracode_results::Status::Passed);
        assert_eq!(run.finished[0].1.attempts, 2);
        assert_eq!(run.run_id, "r1");
        assert_eq!(run.jobs, 2);
        assert_eq!(run.last, time(&ts(40)));
        assert!(run.end.is_none());
    }

    #[test]
    fn setup_started_and_finished_are_paired_by_command() {
        let mut log = Log::new("r1", 0);
        log.event(5, "setup.started", None, json!({"command": "make", "repo": "/r", "base_commit": null, "tasks": 2}));
        log.event(6, "setup.started", None, json!({"command": "npm ci", "repo": "/s", "base_commit": null, "tasks": 1}));
        let end = |code: i32, ms: u64| json!({"command": "", "exit_code": code, "duration_ms": ms, "output_tail": "t", "outputs": ["node_modules/"], "error": null});
        let mut npm = end(0, 70);
        npm["command"] = json!("npm ci");
        log.event(76, "setup.finished", None, npm);
        let mut make = end(2, 90);
        make["command"] = json!("make");
        make["error"] = json!("exit 2");
        log.event(95, "setup.finished", None, make);
        let run = read(log.folder().path()).unwrap();
        assert_eq!(run.setups.len(), 2);
        let (first, second) = (&run.setups[0], &run.setups[1]);
        assert_eq!((first.command.as_str(), first.repo.as_str()), ("make", "/r"));
        let made = first.finished.as_ref().unwrap();
        assert_eq!((made.exit_code, made.duration_ms, made.error.as_deref()), (Some(2), 90, Some("exit 2")));
        assert_eq!(second.command, "npm ci");
        assert_eq!(second.finished.as_ref().unwrap().exit_code, Some(0));
        assert_eq!(ms_between(run.started, second.started), 6);
    }
}
