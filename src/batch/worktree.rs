//! Detached git worktrees for `worktree` isolation, made and removed with git2.
//!
//! libgit2 can only add a worktree on a branch, so a temporary branch is created at the base
//! commit, the worktree's HEAD is detached onto the commit, and the branch is deleted at once:
//! nothing but the worktree entry itself exists while the task runs, and that is pruned when
//! the task ends (or, after a crash, by [`prune_stale`] at the next run's start).

use git2::{Oid, Repository, WorktreeAddOptions, WorktreePruneOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Worktree names dracode creates start with this, so it never prunes anyone else's.
pub const NAME_PREFIX: &str = "dracode-";

/// A worktree checked out at a base commit.
pub struct Worktree {
    /// The repository it belongs to (the user's).
    source: PathBuf,
    /// Its name in `.git/worktrees/`.
    name: String,
    /// The worktree's own repository handle.
    pub repo: Repository,
    /// Its folder.
    pub path: PathBuf,
    /// The commit it starts at.
    pub base: Oid,
}

/// A fresh name: process id and a counter keep parallel tasks and runs apart.
fn unique_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{NAME_PREFIX}{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Adds a detached worktree of the repository at `source`, at `base` (a commit-ish), in `path`
/// (which must not exist yet).
pub fn add(source: &Path, base: &str, path: &Path) -> Result<Worktree, git2::Error> {
    let repo = Repository::open(source)?;
    let commit = repo.revparse_single(base)?.peel_to_commit()?;
    let name = unique_name();
    let mut branch = repo.branch(&name, &commit, true)?;
    let added = (|| {
        let mut opts = WorktreeAddOptions::new();
        opts.reference(Some(branch.get()));
        let wt = repo.worktree(&name, path, Some(&opts))?;
        let wt_repo = Repository::open_from_worktree(&wt)?;
        wt_repo.set_head_detached(commit.id())?;
        Ok::<_, git2::Error>(wt_repo)
    })();
    branch.delete()?;
    let wt_repo = added?;
    Ok(Worktree { source: source.to_path_buf(), name, repo: wt_repo, path: path.to_path_buf(), base: commit.id() })
}

impl Drop for Worktree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        if let Ok(repo) = Repository::open(&self.source)
            && let Ok(wt) = repo.find_worktree(&self.name) {
                let _ = wt.prune(Some(WorktreePruneOptions::new().valid(true).working_tree(true).locked(true)));
            }
    }
}

/// Prunes dracode worktrees whose folders are gone (left by a crashed run).
pub fn prune_stale(source: &Path) {
    let Ok(repo) = Repository::open(source) else { return };
    let Ok(names) = repo.worktrees() else { return };
    let names: Vec<String> = (0..names.len()).filter_map(|i| names.get(i).ok().flatten().map(str::to_string)).collect();
    for name in names.iter().filter(|n| n.starts_with(NAME_PREFIX)) {
        if let Ok(wt) = repo.find_worktree(name)
            && !wt.path().exists() {
                let _ = wt.prune(Some(WorktreePruneOptions::new().valid(true)));
            }
    }
}

/// Paths with uncommitted changes in the repository at `source` (a worktree does not carry
/// them; the user is told).
pub fn dirty_paths(source: &Path) -> Vec<String> {
    let Ok(repo) = Repository::open(source) else { return Vec::new() };
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true).include_ignored(false);
    repo.statuses(Some(&mut opts))
        .map(|s| s.iter().filter_map(|e| e.path().ok().map(str::to_string)).collect())
        .unwrap_or_default()
}
