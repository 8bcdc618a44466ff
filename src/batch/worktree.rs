//! Detached git worktrees for `worktree` isolation.
//!
//! The checkout is made by `git worktree add --detach` when git is installed: libgit2's
//! checkout measured ~8× slower on a 5,000-file repository (`cargo bench --bench overhead`), and
//! worktree creation must be no slower than git's. Without a git binary, git2 makes it: libgit2
//! can only add a worktree on a branch, so a temporary branch is created at the base commit,
//! the worktree's HEAD is detached onto the commit, and the branch is deleted at once.
//! Either way nothing but the worktree entry exists while the task runs; it is pruned (with
//! git2) when the task ends, or, after a crash, by [`prune_stale`] at the next run's start.

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

/// Adds a detached worktree of the repository at `source`, at `base` (a commit-ish), in a new
/// folder inside `parent`.
pub fn add(source: &Path, base: &str, parent: &Path) -> Result<Worktree, git2::Error> {
    let repo = Repository::open(source)?;
    let commit = repo.revparse_single(base)?.peel_to_commit()?;
    let name = unique_name();
    let path = parent.join(&name);
    if let Some(wt) = add_with_git_cli(source, &name, &path, commit.id()) {
        return Ok(wt);
    }
    add_with_git2(&repo, source, &name, path, &commit)
}

/// libgit2's way: a temporary branch, the worktree on it, HEAD detached, the branch deleted.
fn add_with_git2(repo: &Repository, source: &Path, name: &str, path: PathBuf, commit: &git2::Commit<'_>) -> Result<Worktree, git2::Error> {
    let mut branch = repo.branch(name, commit, true)?;
    let added = (|| {
        let mut opts = WorktreeAddOptions::new();
        opts.reference(Some(branch.get()));
        let wt = repo.worktree(name, &path, Some(&opts))?;
        let wt_repo = Repository::open_from_worktree(&wt)?;
        wt_repo.set_head_detached(commit.id())?;
        Ok::<_, git2::Error>(wt_repo)
    })();
    branch.delete()?;
    let wt_repo = added?;
    Ok(Worktree { source: source.to_path_buf(), name: name.to_string(), repo: wt_repo, path, base: commit.id() })
}

/// `git worktree add --detach` (hooks off, the caller's GIT_* variables ignored); `None` when
/// git is missing or fails, so the caller falls back to git2.
fn add_with_git_cli(source: &Path, name: &str, path: &Path, commit: Oid) -> Option<Worktree> {
    let mut cmd = std::process::Command::new("git");
    cmd.args(["-c", "core.hooksPath=/dev/null", "worktree", "add", "--detach", "--quiet"])
        .arg(path)
        .arg(commit.to_string())
        .current_dir(source)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    let output = cmd.output().ok()?;
    if !output.status.success() {
        tracing::debug!("git worktree add failed, using libgit2: {}", String::from_utf8_lossy(&output.stderr));
        let _ = std::fs::remove_dir_all(path);
        return None;
    }
    let repo = Repository::open(path).ok()?;
    Some(Worktree { source: source.to_path_buf(), name: name.to_string(), repo, path: path.to_path_buf(), base: commit })
}

impl Drop for Worktree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        if let Ok(repo) = Repository::open(&self.source)
            && let Ok(wt) = repo.find_worktree(&self.name)
        {
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
            && !wt.path().exists()
        {
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
    repo.statuses(Some(&mut opts)).map(|s| s.iter().filter_map(|e| e.path().ok().map(str::to_string)).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_libgit2_fallback_makes_a_detached_worktree_and_leaves_no_branch() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path().join("r")).unwrap();
        std::fs::write(dir.path().join("r/a.txt"), "x").unwrap();
        let (repo_ref, base) = {
            let tree = crate::batch::snapshot::snapshot(&repo).unwrap();
            let sig = git2::Signature::now("t", "t@x").unwrap();
            let tree = repo.find_tree(tree).unwrap();
            let id = repo.commit(Some("HEAD"), &sig, &sig, "m", &tree, &[]).unwrap();
            (&repo, id)
        };
        let commit = repo_ref.find_commit(base).unwrap();
        let path = dir.path().join("wt-fallback");
        let wt = add_with_git2(repo_ref, &dir.path().join("r"), "dracode-test-1", path.clone(), &commit).unwrap();
        assert_eq!(std::fs::read_to_string(path.join("a.txt")).unwrap(), "x");
        assert!(wt.repo.head_detached().unwrap());
        assert_eq!(repo.branches(None).unwrap().count(), 1, "only the default branch");
        drop(wt);
        assert!(!path.exists());
        assert_eq!(repo.worktrees().unwrap().len(), 0);
    }
}
