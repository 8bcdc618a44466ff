//! Recorded work checked again without a model: a fresh `worktree` workspace of the user's
//! repository at a base commit, recorded patches applied to it with `git apply` (at the
//! repository's root, where dracode roots its patches), and a check command run in it by the
//! same runner and OS sandbox as a task's check ([`super::check`]). Used by `dracode combine`
//! (the union of a run's patches) and `dracode regrade` (each patch alone).
//!
//! The workspace is an owned temp folder ([`super::workspace::OwnedDir`]): removed when the
//! [`Workspace`] is dropped, on an error or an interrupt too, or by the next run after a
//! SIGKILL; nothing is written to the user's repository.

use super::check::{self, CheckContext};
use super::task::{CommandLayout, SharedPaths};
use super::workspace::{OwnedDir, TASK_TEMP_PREFIX, Workspace};
use crate::events::CheckRecord;
use crate::sandbox::Policy;
use crate::secrets::Redactor;
use std::collections::BTreeMap;
use std::path::Path;
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

/// Where and how a check runs: dracode's environment, the variables the check may see, and how
/// to confine it given the workspace's layout and the command's environment (before its TMPDIR
/// is set).
pub struct CheckSetup<'a> {
    /// dracode's own environment.
    pub process_env: &'a BTreeMap<String, String>,
    /// Extra variables of dracode's environment the check may see (a task's `env_passthrough`).
    pub passthrough: &'a [String],
    /// The task's `env`.
    pub task_env: &'a BTreeMap<String, String>,
    /// Masks secrets in the recorded output.
    pub redactor: &'a Redactor,
    /// The policy of the check's command.
    pub confine: &'a dyn Fn(&CommandLayout, &BTreeMap<String, String>) -> Policy,
}

/// Runs `command` in `workdir` of `workspace`, confined as `setup.confine` says, with its own
/// TMPDIR (removed afterwards).
pub async fn run_check(workspace: &Workspace, workdir: &Path, command: &str, timeout: Duration, setup: &CheckSetup<'_>) -> CheckRecord {
    let temp = match OwnedDir::create(TASK_TEMP_PREFIX) {
        Ok(dir) => dir,
        Err(e) => return not_started(command, &format!("cannot make the check's TMPDIR: {e}")),
    };
    let tmp = temp.path().join("tmp");
    let allowed =
        crate::secrets::child_env(setup.process_env.iter().map(|(k, v)| (k.clone(), v.clone())), setup.passthrough, setup.task_env);
    let layout = CommandLayout { workspace: workspace.root.clone(), tmp_dir: tmp.clone(), paths: workspace.sandbox_paths(), proxy: None };
    let confine = (setup.confine)(&layout, &allowed);
    let mut env = allowed.clone();
    let made = std::fs::create_dir(&tmp).and_then(|()| {
        if confine.mode != crate::sandbox::SandboxMode::Off {
            env.extend(crate::sandbox::cache_env(&tmp, &allowed, confine.network)?);
            env.extend([crate::sandbox::git_config_env(&tmp, &allowed)?]);
        }
        Ok(())
    });
    if let Err(e) = made {
        return not_started(command, &format!("cannot make the check's TMPDIR: {e}"));
    }
    env.insert("TMPDIR".into(), tmp.display().to_string());
    let ctx = CheckContext { env: &env, tmp_dir: Some(&tmp), confine: Some(&confine), redactor: setup.redactor, reports: None };
    check::run(command, workdir, timeout, ctx).await
}

/// The default confinement of a check dracode runs on its own (`combine --check`): the
/// workspace writable, the system and toolchains readable, the user's git directory and
/// `out` hidden, no network — a task's default sandbox.
pub fn default_policy(layout: &CommandLayout, env: &BTreeMap<String, String>, out: &Path) -> Policy {
    let shared = SharedPaths::new(Some(out), env);
    let mode = crate::sandbox::SandboxMode::default();
    let mut policy = Policy::for_env(mode, &layout.workspace, Some(&layout.tmp_dir), env, shared.runner_temp.as_deref());
    policy.writable = layout.paths.writable.clone();
    policy.readable.extend(layout.paths.readable.iter().cloned());
    policy.hidden.extend(layout.paths.hidden.iter().cloned());
    policy.hidden.extend(shared.out);
    policy
}

fn not_started(command: &str, why: &str) -> CheckRecord {
    CheckRecord { command: command.to_string(), exit_code: None, output_tail: why.to_string(), before: None, ..Default::default() }
}
