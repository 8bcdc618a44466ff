//! A finished run read back from its output folder, for the commands that work on recorded
//! results without running a model (`dracode combine` and `dracode regrade`): the results
//! crate's [`OutputFolder`] itself, each task's record taken as it is.

pub use dracode_results::output_folder::{FinishedTask, OutputFolder};

use crate::events::TaskOutcome;
use dracode_results::records::WireOutcome;
use std::collections::BTreeMap;

impl From<FinishedTask> for TaskOutcome {
    /// The outcome of a recorded task: its record as read, its patch from `diffs/`.
    fn from(task: FinishedTask) -> Self {
        TaskOutcome::recorded(task.task_id, task.outcome, task.diff)
    }
}

/// The files more than one task's patch changes, each with those tasks (in the order given):
/// where patches may not combine. Each task is its id and its record.
pub fn overlaps<'a>(tasks: impl IntoIterator<Item = (&'a str, &'a WireOutcome)>) -> BTreeMap<String, Vec<String>> {
    let mut by_file: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (task_id, record) in tasks {
        for file in &record.files_changed {
            by_file.entry(file.clone()).or_default().push(task_id.to_string());
        }
    }
    by_file.retain(|_, ids| ids.len() > 1);
    by_file
}
