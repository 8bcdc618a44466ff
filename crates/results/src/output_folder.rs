//! A finished run read back from its output folder (`--out`): its `results.jsonl` and the
//! patches beside it, for a pipeline written in Rust and for the commands that work on recorded
//! results without running a model (`dracode combine`, `dracode regrade`).
//!
//! Each task's last `task.finished` is kept, its patch read from `diffs/` (looked up by the task
//! id, never by a path the file names), and paired with the `base_commit` of that attempt's
//! `task.started`: the commit the patch applies to.

use crate::file_names::file_stem;
use crate::records::{WireEvent, WireOutcome};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A run as its output folder records it.
#[derive(Debug)]
pub struct OutputFolder {
    /// The folder.
    pub dir: PathBuf,
    /// Its `run_id`.
    pub run_id: String,
    /// The manifests it ran, as given on its command line.
    pub manifests: Vec<String>,
    /// Its tasks, in manifest order (`index`).
    pub tasks: Vec<FinishedTask>,
}

/// One task of a recorded run: its last `task.finished`.
#[derive(Debug, Clone)]
pub struct FinishedTask {
    /// The task's id.
    pub task_id: String,
    /// The fields of its last `task.finished`.
    pub outcome: WireOutcome,
    /// Its patch, read back from `diffs/` (`None` when it changed nothing).
    pub diff: Option<String>,
    /// The attempt that outcome is of.
    pub attempt: u32,
    /// The commit that attempt's workspace started from (`None` outside git).
    pub base_commit: Option<String>,
}

/// Reads `dir/results.jsonl` (and the patches of its tasks). The error names the file and,
/// for a bad line, its number.
pub fn read(dir: &Path) -> Result<OutputFolder, String> {
    let path = dir.join("results.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut run: Option<OutputFolder> = None;
    let mut bases: BTreeMap<(String, u32), Option<String>> = BTreeMap::new();
    for (n, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let invalid = |e: String| format!("{}:{}: {e}", path.display(), n + 1);
        let value: serde_json::Value = serde_json::from_str(raw).map_err(|e| invalid(format!("not a JSON line: {e}")))?;
        let event = WireEvent::deserialize(&value).map_err(|e| invalid(format!("not a dracode event: {e}")))?;
        match event {
            WireEvent::RunStarted { header, manifests, .. } => {
                run = Some(OutputFolder { dir: dir.to_path_buf(), run_id: header.run_id, manifests, tasks: Vec::new() });
            }
            WireEvent::TaskStarted { header, base_commit, .. } => {
                bases.insert((header.task_id.unwrap_or_default(), header.attempt.unwrap_or(1)), base_commit);
            }
            WireEvent::TaskFinished { header, outcome } => {
                let run = run.as_mut().ok_or_else(|| invalid("task.finished before run.started".into()))?;
                let task_id = header.task_id.ok_or_else(|| invalid("task.finished without task_id".into()))?;
                let attempt = header.attempt.unwrap_or(1);
                let diff = match outcome.diff_path {
                    Some(_) => Some(read_patch(dir, &task_id)?),
                    None => None,
                };
                let base_commit = bases.get(&(task_id.clone(), attempt)).cloned().flatten();
                run.tasks.retain(|t| t.task_id != task_id);
                run.tasks.push(FinishedTask { task_id, outcome: *outcome, diff, attempt, base_commit });
            }
            _ => {}
        }
    }
    let mut run = run.ok_or_else(|| format!("{}: no run.started line: not the results of a dracode run", path.display()))?;
    run.tasks.sort_by_key(|t| t.outcome.index);
    Ok(run)
}

/// `dir/diffs/<task>.patch`.
fn read_patch(dir: &Path, task_id: &str) -> Result<String, String> {
    let path = dir.join("diffs").join(format!("{}.patch", file_stem(task_id)));
    std::fs::read_to_string(&path).map_err(|e| format!("{}: {e} (task {task_id:?} names a patch)", path.display()))
}
