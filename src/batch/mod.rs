//! Running a batch: planning tasks from manifests and flags ([`plan`]), preparing each task's
//! [`workspace`], running it ([`task`]) and scheduling the whole run ([`runner`]).

mod beneath;
pub mod cache;
pub mod carry;
pub mod change_record;
pub mod check;
pub mod combine;
pub mod fresh_repo;
pub mod grade;
pub mod judge;
pub mod options;
pub mod owned_dir;
pub mod plan;
pub mod preflight;
pub mod regrade;
pub mod repeat;
pub mod run_stores;
pub mod runner;
pub mod sandbox_view;
pub mod setup;
pub mod setups;
pub mod snapshot;
pub mod spec;
pub mod task;
pub mod trailers;
pub mod unrecorded;
pub mod workspace;
pub mod worktree;
pub mod world;

/// `git ARGS` in `dir` for this module's tests: its stdout; the test fails when git does.
#[cfg(test)]
pub(crate) fn test_git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git").args(args).current_dir(dir).output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}
