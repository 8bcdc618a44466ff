//! A finished run read back from its output folder ([`dracode_results::output_folder`]) as
//! outcomes, for the commands that work on recorded results without running a model:
//! `dracode combine` and `dracode regrade`.

use super::contract::from_wire;
use crate::events::TaskOutcome;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A run as its output folder records it.
#[derive(Debug)]
pub struct RecordedRun {
    /// The folder.
    pub dir: PathBuf,
    /// Its `run_id`.
    pub run_id: String,
    /// The manifests it ran, as given on its command line.
    pub manifests: Vec<String>,
    /// Its tasks, in manifest order (`index`).
    pub tasks: Vec<RecordedTask>,
}

/// One task of a recorded run.
#[derive(Debug, Clone)]
pub struct RecordedTask {
    /// Its final outcome, the patch read back from `diffs/`.
    pub outcome: TaskOutcome,
    /// The attempt that outcome is of.
    pub attempt: u32,
    /// The commit that attempt's workspace started from (`None` outside git).
    pub base_commit: Option<String>,
}

/// Reads `dir/results.jsonl` (and the patches of its tasks), each task's outcome mapped back
/// with [`from_wire`]. The error names the file and, for a bad line, its number.
pub fn read(dir: &Path) -> Result<RecordedRun, String> {
    let folder = dracode_results::output_folder::read(dir).map_err(|e| e.to_string())?;
    let tasks = folder
        .tasks
        .into_iter()
        .map(|t| RecordedTask { outcome: from_wire(t.task_id, t.outcome, t.diff), attempt: t.attempt, base_commit: t.base_commit })
        .collect();
    Ok(RecordedRun { dir: folder.dir, run_id: folder.run_id, manifests: folder.manifests, tasks })
}

/// The files more than one task's patch changes, each with those tasks (in manifest order):
/// where patches may not combine.
pub fn overlaps<'a>(tasks: impl IntoIterator<Item = &'a TaskOutcome>) -> BTreeMap<String, Vec<String>> {
    let mut by_file: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for outcome in tasks {
        for file in &outcome.files_changed {
            by_file.entry(file.clone()).or_default().push(outcome.task_id.clone());
        }
    }
    by_file.retain(|_, ids| ids.len() > 1);
    by_file
}
