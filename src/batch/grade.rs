//! Recorded work on a fresh `worktree` workspace of the user's repository at a base commit:
//! recorded patches applied to it with `git apply` (at the repository's root, where dracode
//! roots its patches). Used by `dracode combine` (the union of a run's patches) and `dracode
//! regrade` (each patch alone), whose checks then run there as a task's does
//! ([`super::task::run_check_in`]).
//!
//! The workspace is an owned temp folder ([`super::owned_dir::OwnedDir`]): removed when the
//! [`Workspace`] is dropped, on an error or an interrupt too, or by the next run after a
//! SIGKILL; nothing is written to the user's repository.

use super::owned_dir::{OwnedDir, TASK_TEMP_PREFIX};
use super::workspace::Workspace;
use std::time::Duration;

/// How long a check runs when nothing says otherwise (a task's `check_timeout` default).
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Why a patch was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// No temporary folder for the patch file.
    #[error("cannot make a temp folder: {0}")]
    TempFolder(std::io::Error),
    /// The patch file could not be written.
    #[error("{}: {source}", path.display())]
    WritePatch {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// git could not be started.
    #[error("cannot run git apply: {0}")]
    Spawn(std::io::Error),
    /// git refused the patch: its message, the patch file named `patch`.
    #[error("{0}")]
    Refused(String),
}

/// Applies `patch` (a dracode patch, rooted at the repository's root) to the workspace. All or
/// nothing: a patch that does not apply changes no file. The error is git's message.
pub fn apply(workspace: &Workspace, patch: &str) -> Result<(), ApplyError> {
    git_apply(workspace, patch, &[])
}

/// `git apply` of `patch` in the workspace with `extra` options (`--check`, `--reverse`).
pub fn git_apply(workspace: &Workspace, patch: &str, extra: &[&str]) -> Result<(), ApplyError> {
    let dir = OwnedDir::create(TASK_TEMP_PREFIX).map_err(ApplyError::TempFolder)?;
    let file = dir.path().join("change.patch");
    std::fs::write(&file, patch).map_err(|source| ApplyError::WritePatch { path: file.clone(), source })?;
    let output = super::worktree::git_command(&workspace.root)
        .args(["apply", "--whitespace=nowarn", "--binary"])
        .args(extra)
        .arg(&file)
        .output()
        .map_err(ApplyError::Spawn)?;
    if output.status.success() {
        return Ok(());
    }
    let message = String::from_utf8_lossy(&output.stderr).replace(&format!("{}:", file.display()), "patch:");
    Err(ApplyError::Refused(message.trim().to_string()))
}
