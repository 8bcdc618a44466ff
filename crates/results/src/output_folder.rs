//! A finished run read back from its output folder (`--out`): its `results.jsonl` and the
//! patches beside it, for a pipeline written in Rust and for the commands that work on recorded
//! results without running a model (`dracode combine`, `dracode regrade`).
//!
//! Each task's last `task.finished` is kept, its patch read from `diffs/` (looked up by the task
//! id, never by a path the file names), and paired with the `base_commit` of that attempt's
//! `task.started`: the commit the patch applies to.

use crate::fields::IssueOrigin;
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
    /// The GitHub issue the task was made from (its `task.started`'s `issue`).
    pub issue: Option<IssueOrigin>,
}

/// Why a recorded run could not be read back; each names the file and, for a bad line, its
/// number.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// `results.jsonl` could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A line of `results.jsonl` that is not what dracode writes.
    #[error("{}:{line}: {problem}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// Its 1-based number.
        line: usize,
        /// What is wrong with it.
        problem: LineProblem,
    },
    /// No `run.started` line: not the results of a dracode run.
    #[error("{}: no run.started line: not the results of a dracode run", path.display())]
    NoRunStarted {
        /// The file.
        path: PathBuf,
    },
    /// A patch a task names could not be read.
    #[error("{}: {source} (task {task_id:?} names a patch)", path.display())]
    Patch {
        /// The patch file.
        path: PathBuf,
        /// The task that names it.
        task_id: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// What is wrong with one line of `results.jsonl`.
#[derive(Debug, thiserror::Error)]
pub enum LineProblem {
    /// Not JSON.
    #[error("not a JSON line: {0}")]
    NotJson(serde_json::Error),
    /// JSON, but not an event of dracode's.
    #[error("not a dracode event: {0}")]
    NotAnEvent(serde_json::Error),
    /// A `task.finished` before any `run.started`.
    #[error("task.finished before run.started")]
    FinishedBeforeStart,
    /// A `task.finished` without its `task_id`.
    #[error("task.finished without task_id")]
    FinishedWithoutTask,
}

/// Reads `dir/results.jsonl` (and the patches of its tasks). The error names the file and,
/// for a bad line, its number.
pub fn read(dir: &Path) -> Result<OutputFolder, ReadError> {
    let path = dir.join("results.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|source| ReadError::Io { path: path.clone(), source })?;
    let mut run: Option<OutputFolder> = None;
    let mut starts: BTreeMap<(String, u32), (Option<String>, Option<IssueOrigin>)> = BTreeMap::new();
    for (n, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let invalid = |problem| ReadError::Line { path: path.clone(), line: n + 1, problem };
        let value: serde_json::Value = serde_json::from_str(raw).map_err(|e| invalid(LineProblem::NotJson(e)))?;
        let event = WireEvent::deserialize(&value).map_err(|e| invalid(LineProblem::NotAnEvent(e)))?;
        match event {
            WireEvent::RunStarted { header, manifests, .. } => {
                run = Some(OutputFolder { dir: dir.to_path_buf(), run_id: header.run_id, manifests, tasks: Vec::new() });
            }
            WireEvent::TaskStarted { header, base_commit, issue, .. } => {
                starts.insert((header.task_id.unwrap_or_default(), header.attempt.unwrap_or(1)), (base_commit, issue));
            }
            WireEvent::TaskFinished { header, outcome } => {
                let run = run.as_mut().ok_or_else(|| invalid(LineProblem::FinishedBeforeStart))?;
                let task_id = header.task_id.ok_or_else(|| invalid(LineProblem::FinishedWithoutTask))?;
                let attempt = header.attempt.unwrap_or(1);
                let diff = match outcome.diff_path {
                    Some(_) => Some(read_patch(dir, &task_id)?),
                    None => None,
                };
                let (base_commit, issue) = starts.get(&(task_id.clone(), attempt)).cloned().unwrap_or_default();
                run.tasks.retain(|t| t.task_id != task_id);
                run.tasks.push(FinishedTask { task_id, outcome: *outcome, diff, attempt, base_commit, issue });
            }
            _ => {}
        }
    }
    let mut run = run.ok_or(ReadError::NoRunStarted { path })?;
    run.tasks.sort_by_key(|t| t.outcome.index);
    Ok(run)
}

/// `dir/diffs/<task>.patch`.
fn read_patch(dir: &Path, task_id: &str) -> Result<String, ReadError> {
    let path = dir.join("diffs").join(format!("{}.patch", file_stem(task_id)));
    std::fs::read_to_string(&path).map_err(|source| ReadError::Patch { path, task_id: task_id.to_string(), source })
}
