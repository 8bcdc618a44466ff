//! Earlier nights (`--history DIR…`): each DIR an earlier output folder (its `results.jsonl`) or
//! a `--cache` folder, where every run with `--cache` leaves `history/<run_id>.json` — one small
//! file per run: when it started, its cost, and each task's status, group and cost.

use crate::PageError;
use crate::data::{PastResult, PastRun, Report};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How many earlier runs a report shows (the newest).
pub const KEEP: usize = 20;

/// One run as history keeps it (`history/<run_id>.json` in a cache folder).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// Its `run_id`.
    pub run_id: String,
    /// When it started (RFC 3339).
    pub started_at: String,
    /// Its summed cost.
    pub total_cost_usd: Option<f64>,
    /// Each task's result, by id.
    pub tasks: BTreeMap<String, TaskRecord>,
}

/// A task's result in a [`RunRecord`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskRecord {
    /// Its status.
    pub status: String,
    /// `passed`, `failed` or `not_judged`.
    pub group: String,
    /// Its cost.
    pub cost_usd: Option<f64>,
    /// Protected paths a tool was refused to write (absent, 0, in a record of an earlier version).
    #[serde(default)]
    pub protected_refused: usize,
}

/// The record of the run `report` draws.
pub fn record_of(report: &Report) -> RunRecord {
    let tasks = report
        .tasks
        .iter()
        .map(|t| {
            let record = TaskRecord {
                status: t.status.clone(),
                group: t.group.clone(),
                cost_usd: t.cost_usd,
                protected_refused: t.protected_refused,
            };
            (t.id.clone(), record)
        })
        .collect();
    RunRecord {
        run_id: report.run.run_id.clone(),
        started_at: report.run.started_at.clone(),
        total_cost_usd: report.run.total_cost_usd,
        tasks,
    }
}

/// Leaves `report`'s run in the cache folder `cache` (`history/<run_id>.json`, written to a
/// temporary file and renamed).
pub fn remember(cache: &Path, report: &Report) -> Result<(), PageError> {
    let dir = cache.join("history");
    let path = dir.join(format!("{}.json", dracode_results::file_names::file_stem(&report.run.run_id)));
    let text = serde_json::to_string_pretty(&record_of(report)).map_err(PageError::Encode)?;
    crate::write_atomic(&path, text.as_bytes()).map_err(|source| PageError::Write { path, source })
}

/// The runs in `dirs` (output folders or cache folders), oldest first, without the runs in
/// `current` (this run, and the shards a merged run joins) and without repeats of one `run_id`,
/// the newest [`KEEP`]. The error names the folder.
pub fn read(dirs: &[PathBuf], current: &[String]) -> Result<Vec<(PathBuf, RunRecord)>, PageError> {
    let mut runs: Vec<(PathBuf, RunRecord)> = Vec::new();
    for dir in dirs {
        if dir.join("results.jsonl").is_file() {
            runs.push((dir.clone(), from_output_folder(dir)?));
        } else if dir.join("history").is_dir() {
            runs.extend(from_cache(dir)?.into_iter().map(|r| (dir.clone(), r)));
        } else if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none()) {
            // An empty folder: a history kept from tonight on (the first night of a CI cache).
        } else {
            return Err(PageError::NotHistory { dir: dir.clone() });
        }
    }
    runs.retain(|(_, r)| !current.contains(&r.run_id));
    runs.sort_by(|a, b| a.1.started_at.cmp(&b.1.started_at).then_with(|| a.1.run_id.cmp(&b.1.run_id)));
    runs.dedup_by(|a, b| a.1.run_id == b.1.run_id);
    let skip = runs.len().saturating_sub(KEEP);
    Ok(runs.split_off(skip))
}

/// A run's record read from its output folder.
fn from_output_folder(dir: &Path) -> Result<RunRecord, PageError> {
    let report = crate::build::report(dir, &crate::Options::default())?.0;
    Ok(record_of(&report))
}

/// Every `history/*.json` of a cache folder.
fn from_cache(dir: &Path) -> Result<Vec<RunRecord>, PageError> {
    let folder = dir.join("history");
    let entries = std::fs::read_dir(&folder).map_err(|source| PageError::Read { path: folder.clone(), source })?;
    let mut runs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|source| PageError::Read { path: path.clone(), source })?;
        runs.push(serde_json::from_str(&text).map_err(|source| PageError::HistoryRecord { path, source })?);
    }
    Ok(runs)
}

/// Puts `runs` into `report`: the runs, and each task's result in each.
pub fn attach(report: &mut Report, runs: &[(PathBuf, RunRecord)]) {
    report.history = runs
        .iter()
        .map(|(dir, r)| PastRun {
            run_id: r.run_id.clone(),
            started_at: r.started_at.clone(),
            dir: dir.display().to_string(),
            passed: r.tasks.values().filter(|t| t.group == "passed").count(),
            total: r.tasks.len(),
            total_cost_usd: r.total_cost_usd,
            protected_refused: r.tasks.values().map(|t| t.protected_refused).sum(),
        })
        .collect();
    for task in &mut report.tasks {
        task.history = runs
            .iter()
            .map(|(_, r)| {
                r.tasks.get(&task.id).map(|t| PastResult {
                    status: t.status.clone(),
                    group: t.group.clone(),
                    cost_usd: t.cost_usd,
                    protected_refused: t.protected_refused,
                })
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{Log, outcome, ts};
    use serde_json::json;

    /// A record of run `id` started at `ms` whose tasks ended as given (id, status, group).
    fn record(id: &str, ms: u64, tasks: &[(&str, &str, &str)]) -> RunRecord {
        let tasks = tasks
            .iter()
            .map(|(t, status, group)| {
                let record = TaskRecord { status: status.to_string(), group: group.to_string(), cost_usd: Some(0.5), protected_refused: 1 };
                (t.to_string(), record)
            })
            .collect();
        RunRecord { run_id: id.to_string(), started_at: ts(ms), total_cost_usd: Some(1.0), tasks }
    }

    /// Writes `records` as `cache/history/<run_id>.json`.
    fn cache_with(cache: &Path, records: &[RunRecord]) {
        std::fs::create_dir_all(cache.join("history")).unwrap();
        for r in records {
            std::fs::write(cache.join("history").join(format!("{}.json", r.run_id)), serde_json::to_string(r).unwrap()).unwrap();
        }
    }

    /// The run ids of `runs`.
    fn ids(runs: &[(PathBuf, RunRecord)]) -> Vec<&str> {
        runs.iter().map(|(_, r)| r.run_id.as_str()).collect()
    }

    #[test]
    fn runs_come_oldest_first_without_the_current_one_or_repeats() {
        let cache = tempfile::tempdir().unwrap();
        cache_with(cache.path(), &[record("r3", 3000, &[]), record("r1", 1000, &[]), record("now", 4000, &[]), record("r2", 2000, &[])]);
        std::fs::write(cache.path().join("history/.123.tmp"), "half a file").unwrap();
        let mut log = Log::new("r2", 2000);
        log.finished(2500, "a", 1, outcome(0, "passed"));
        let folder = log.folder();
        let dirs = [cache.path().to_path_buf(), folder.path().to_path_buf()];
        let runs = read(&dirs, &["now".to_string()]).unwrap();
        assert_eq!(ids(&runs), ["r1", "r2", "r3"]);
        assert!(read(&[], &["now".to_string()]).unwrap().is_empty());
    }

    #[test]
    fn only_the_newest_runs_are_kept() {
        let cache = tempfile::tempdir().unwrap();
        let records: Vec<RunRecord> = (0..KEEP + 3).map(|n| record(&format!("r{n:02}"), 1000 * n as u64, &[])).collect();
        cache_with(cache.path(), &records);
        let runs = read(&[cache.path().to_path_buf()], &["other".to_string()]).unwrap();
        let want: Vec<String> = (3..KEEP + 3).map(|n| format!("r{n:02}")).collect();
        assert_eq!(ids(&runs), want);
    }

    #[test]
    fn a_folder_that_is_neither_is_refused_by_name() {
        let empty = tempfile::tempdir().unwrap();
        let none = read(&[empty.path().to_path_buf()], &["now".to_string()]).unwrap();
        assert!(none.is_empty(), "an empty folder is a history that starts tonight");
        std::fs::write(empty.path().join("notes.txt"), "mine").unwrap();
        let err = read(&[empty.path().to_path_buf()], &["now".to_string()]).unwrap_err().to_string();
        assert!(err.contains(&empty.path().display().to_string()), "{err}");
        assert!(err.contains("neither an output folder") && err.contains("results.jsonl") && err.contains("history/"), "{err}");

        cache_with(empty.path(), &[]);
        std::fs::write(empty.path().join("history/bad.json"), "{}").unwrap();
        let err = read(&[empty.path().to_path_buf()], &["now".to_string()]).unwrap_err().to_string();
        assert!(err.contains("history/bad.json: not a dracode history record"), "{err}");
    }

    #[test]
    fn a_remembered_run_is_read_back_from_the_cache() {
        let mut log = Log::new("night-1", 0);
        log.finished(100, "a", 1, outcome(0, "passed"));
        log.finished(200, "b", 1, crate::test_support::with_error(outcome(1, "failed"), "check", "exit 1"));
        let folder = log.folder();
        let report = crate::build::report(folder.path(), &crate::Options::default()).unwrap().0;
        let cache = tempfile::tempdir().unwrap();
        remember(cache.path(), &report).unwrap();
        assert!(cache.path().join("history/night-1.json").is_file());
        let runs = read(&[cache.path().to_path_buf()], &["night-2".to_string()]).unwrap();
        assert_eq!(ids(&runs), ["night-1"]);
        let run = &runs[0].1;
        assert_eq!(run.started_at, ts(0));
        let statuses: Vec<(&str, &str, &str)> =
            run.tasks.iter().map(|(id, t)| (id.as_str(), t.status.as_str(), t.group.as_str())).collect();
        assert_eq!(statuses, [("a", "passed", "passed"), ("b", "failed", "failed")]);
        assert_eq!(run.tasks["a"].cost_usd, Some(0.25));
    }

    #[test]
    fn attach_gives_each_task_one_entry_per_past_run() {
        let mut log = Log::new("now", 9000);
        log.finished(9100, "a", 1, outcome(0, "passed"));
        log.finished(9200, "b", 1, outcome(1, "failed"));
        let folder = log.folder();
        let mut report = crate::build::report(folder.path(), &crate::Options::default()).unwrap().0;
        let past = [
            (PathBuf::from("night-1"), record("r1", 1000, &[("a", "failed", "failed"), ("b", "passed", "passed")])),
            (PathBuf::from("night-2"), record("r2", 2000, &[("a", "passed", "passed"), ("gone", "passed", "passed")])),
        ];
        attach(&mut report, &past);
        let runs: Vec<(&str, &str, usize, usize)> =
            report.history.iter().map(|r| (r.run_id.as_str(), r.dir.as_str(), r.passed, r.total)).collect();
        assert_eq!(runs, [("r1", "night-1", 1, 2), ("r2", "night-2", 2, 2)]);
        let of =
            |n: usize| -> Vec<Option<&str>> { report.tasks[n].history.iter().map(|p| p.as_ref().map(|p| p.status.as_str())).collect() };
        assert_eq!(of(0), [Some("failed"), Some("passed")]);
        assert_eq!(of(1), [Some("passed"), None]);
        assert_eq!(
            json!(report.tasks[1].history),
            json!([{"status": "passed", "group": "passed", "cost_usd": 0.5, "protected_refused": 1}, null])
        );
        assert_eq!(report.history.iter().map(|r| r.protected_refused).collect::<Vec<_>>(), [2, 2], "counted over each run's tasks");
    }

    #[test]
    fn a_record_of_an_earlier_version_reads_with_no_refused_writes() {
        let old = r#"{"run_id": "r0", "started_at": "2026-01-01T00:00:00Z", "total_cost_usd": null,
            "tasks": {"a": {"status": "passed", "group": "passed", "cost_usd": null}}}"#;
        let record: RunRecord = serde_json::from_str(old).unwrap();
        assert_eq!(record.tasks["a"].protected_refused, 0);
    }
}
