//! Per-task resource limits (`[tasks.limits]`): what one task's commands may use of the machine,
//! so that a fork bomb or a memory hog ends its own task, not the runner.

use serde::{Deserialize, Serialize};

/// The limits of one task's commands; `None` is "no limit of this kind".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Bytes of memory, for all the task's processes together.
    #[serde(default)]
    pub memory: Option<u64>,
    /// Processes (and threads) alive at once.
    #[serde(default)]
    pub processes: Option<u64>,
    /// Open files per process.
    #[serde(default)]
    pub open_files: Option<u64>,
    /// Bytes one file may grow to.
    #[serde(default)]
    pub file_size: Option<u64>,
    /// Seconds of CPU time per process.
    #[serde(default)]
    pub cpu_time: Option<u64>,
}
