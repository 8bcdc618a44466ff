//! Earlier nights (`--history DIR…`): each DIR an earlier output folder (its `results.jsonl`) or
//! a `--cache` folder, where every run with `--cache` leaves `history/<run_id>.json` — one small
//! file per run: when it started, its cost, and each task's status, group and cost.

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
}

/// The record of the run `report` draws.
pub fn record_of(report: &Report) -> RunRecord {
    let tasks = report
        .tasks
        .iter()
        .map(|t| (t.id.clone(), TaskRecord { status: t.status.clone(), group: t.group.clone(), cost_usd: t.cost_usd }))
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
pub fn remember(cache: &Path, report: &Report) -> Result<(), String> {
    let dir = cache.join("history");
    let path = dir.join(format!("{}.json", dracode_results::file_names::file_stem(&report.run.run_id)));
    let text = serde_json::to_string_pretty(&record_of(report)).map_err(|e| e.to_string())?;
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join(format!(".{}.tmp", std::process::id()));
        std::fs::write(&tmp, text.as_bytes())?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The runs in `dirs` (output folders or cache folders), oldest first, without the runs in
/// `current` (this run, and the shards a merged run joins) and without repeats of one `run_id`,
/// the newest [`KEEP`]. The error names the folder.
pub fn read(dirs: &[PathBuf], current: &[String]) -> Result<Vec<(PathBuf, RunRecord)>, String> {
    let mut runs: Vec<(PathBuf, RunRecord)> = Vec::new();
    for dir in dirs {
        if dir.join("results.jsonl").is_file() {
            runs.push((dir.clone(), from_output_folder(dir)?));
        } else if dir.join("history").is_dir() {
            runs.extend(from_cache(dir)?.into_iter().map(|r| (dir.clone(), r)));
        } else if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none()) {
            // An empty folder: a history kept from tonight on (the first night of a CI cache).
        } else {
            return Err(format!(
                "--history {}: neither an output folder (no results.jsonl) nor a cache folder (no history/), nor an empty folder",
                dir.display()
            ));
        }
    }
    runs.retain(|(_, r)| !current.contains(&r.run_id));
    runs.sort_by(|a, b| a.1.started_at.cmp(&b.1.started_at).then_with(|| a.1.run_id.cmp(&b.1.run_id)));
    runs.dedup_by(|a, b| a.1.run_id == b.1.run_id);
    let skip = runs.len().saturating_sub(KEEP);
    Ok(runs.split_off(skip))
}

/// A run's record read from its output folder.
fn from_output_folder(dir: &Path) -> Result<RunRecord, String> {
    let report = crate::build::report(dir, &crate::Options::default())?.0;
    Ok(record_of(&report))
}

/// Every `history/*.json` of a cache folder.
fn from_cache(dir: &Path) -> Result<Vec<RunRecord>, String> {
    let folder = dir.join("history");
    let entries = std::fs::read_dir(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    let mut runs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        runs.push(serde_json::from_str(&text).map_err(|e| format!("{}: not a dracode history record: {e}", path.display()))?);
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
        })
        .collect();
    for task in &mut report.tasks {
        task.history = runs
            .iter()
            .map(|(_, r)| {
                r.tasks.get(&task.id).map(|t| PastResult { status: t.status.clone(), group: t.group.clone(), cost_usd: t.cost_usd })
            })
            .collect();
    }
}
