//! Recorded work on a fresh `worktree` workspace of the user's repository at a base commit:
//! recorded patches applied to it with `git apply` (at the repository's root, where dracode
//! roots its patches). Used by `dracode combine` (the union of a run's patches) and `dracode
//! regrade` (each patch alone), whose checks then run there as a task's does
//! ([`super::task::run_check_in`]).
//!
//! The workspace is an owned temp folder ([`super::workspace::OwnedDir`]): removed when the
//! [`Workspace`] is dropped, on an error or an interrupt too, or by the next run after a
//! SIGKILL; nothing is written to the user's repository.

use super::workspace::{OwnedDir, TASK_TEMP_PREFIX, Workspace};
use std::time::Duration;

/// How long a check runs when nothing says otherwise (a task's `check_timeout` default).
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Applies `patch` (a dracode patch, rooted at the repository's root) to the workspace. All or
/// nothing: a patch that does not apply changes no file. The error is git's message.
pub fn apply(workspace: &Workspace, patch: &str) -> Result<(), String> {
    git_apply(workspace, patch, &[])
}

/// `git apply` of `patch` in the workspace with `extra` options (`--check`, `--reverse`).
pub fn git_apply(workspace: &Workspace, patch: &str, extra: &[&str]) -> Result<(), String> {
    let dir = OwnedDir::create(TASK_TEMP_PREFIX).map_err(|e| format!("cannot make a temp folder: {e}"))?;
    let file = dir.path().join("change.patch");
    std::fs::write(&file, patch).map_err(|e| format!("{}: {e}", file.display()))?;
    let output = super::worktree::git_command(&workspace.root)
        .args(["apply", "--whitespace=nowarn", "--binary"])
        .args(extra)
        .arg(&file)
        .output()
        .map_err(|e| format!("cannot run git apply: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let message = String::from_utf8_lossy(&output.stderr).replace(&format!("{}:", file.display()), "patch:");
    Err(message.trim().to_string())
}
