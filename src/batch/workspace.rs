//! Where a task works: its workspace per isolation mode, and the changes it made there.
//!
//! - `worktree`: a detached git worktree of the repository at `base` ([`super::worktree`]);
//! - `none`: the repository folder itself (tasks on the same folder never overlap);
//! - `copy`: a temporary copy of the folder (.gitignore honoured, `.git` left out) with a
//!   baseline commit of its own, so any folder — git or not — yields a patch.
//!
//! In both, the diff is taken between a snapshot before the agent and one after
//! ([`super::snapshot`]), so changes already present are not blamed on the task.

use super::snapshot::{self, Changes};
use super::worktree::{self, Worktree};
use crate::manifest::Isolation;
use git2::{Oid, Repository};
use std::path::{Path, PathBuf};

/// A prepared workspace.
pub struct Workspace {
    /// The workspace root (the sandbox for tools).
    pub root: PathBuf,
    /// Where tools run: `root` joined with the task's `workdir`.
    pub workdir: PathBuf,
    /// The commit the workspace started from, in a git repository.
    pub base_commit: Option<String>,
    repo: Option<Repository>,
    baseline: Option<Oid>,
    // Dropped in this order: the worktree entry is pruned before its temp folder goes.
    _worktree: Option<Worktree>,
    _temp: Option<tempfile::TempDir>,
}

/// A workspace that could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The repository folder is missing or unreadable.
    #[error("repo {path}: {source}")]
    Io {
        /// The folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// git failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    /// Preparing the workspace panicked (a bug).
    #[error("preparing the workspace panicked: {0}")]
    Panicked(String),
}

impl Workspace {
    /// Prepares `repo` for a task with `isolation`; `workdir` is relative to the root.
    pub fn prepare(repo: &Path, isolation: Isolation, base: &str, workdir: Option<&Path>) -> Result<Workspace, WorkspaceError> {
        let io = |source| WorkspaceError::Io { path: repo.to_path_buf(), source };
        let source = repo.canonicalize().map_err(io)?;
        let mut ws = match isolation {
            Isolation::None => {
                let repo = Repository::open(&source).ok().filter(|r| r.workdir() == Some(source.as_path()));
                let baseline = repo.as_ref().map(snapshot::snapshot).transpose()?;
                let base_commit = repo.as_ref().and_then(|r| r.head().ok()?.target()).map(|o| o.to_string());
                Workspace { root: source.clone(), workdir: source, base_commit, repo, baseline, _worktree: None, _temp: None }
            }
            Isolation::Copy => {
                let temp = tempfile::Builder::new().prefix("dracode-ws-").tempdir().map_err(io)?;
                copy_tree(&source, temp.path()).map_err(io)?;
                let root = temp.path().canonicalize().map_err(io)?;
                let (repo, baseline) = snapshot::init_baseline(&root)?;
                let base_commit = Repository::open(&source).ok().and_then(|r| r.head().ok()?.target()).map(|o| o.to_string());
                Workspace {
                    root: root.clone(),
                    workdir: root,
                    base_commit,
                    repo: Some(repo),
                    baseline: Some(baseline),
                    _worktree: None,
                    _temp: Some(temp),
                }
            }
            Isolation::Worktree => {
                let temp = tempfile::Builder::new().prefix("dracode-wt-").tempdir().map_err(io)?;
                let wt = worktree::add(&source, base, temp.path())?;
                let root = wt.path.canonicalize().map_err(io)?;
                let baseline = wt.repo.find_commit(wt.base)?.tree_id();
                let repo = Repository::open(&root)?;
                Workspace {
                    root: root.clone(),
                    workdir: root,
                    base_commit: Some(wt.base.to_string()),
                    repo: Some(repo),
                    baseline: Some(baseline),
                    _worktree: Some(wt),
                    _temp: Some(temp),
                }
            }
        };
        if let Some(dir) = workdir {
            ws.workdir = ws.root.join(dir);
            std::fs::create_dir_all(&ws.workdir).map_err(io)?;
        }
        Ok(ws)
    }

    /// Commits what changed since the workspace was prepared on a new branch `branch` whose
    /// parent is the base commit; returns the commit id. Only for worktrees (the branch lives in
    /// the user's repository; nothing is checked out there).
    pub fn commit(&self, branch: &str, message: &str) -> Result<String, git2::Error> {
        let (Some(repo), Some(base)) = (&self.repo, &self.base_commit) else {
            return Err(git2::Error::from_str("no git repository to commit in"));
        };
        let tree = repo.find_tree(snapshot::snapshot(repo)?)?;
        let parent = repo.find_commit(Oid::from_str(base)?)?;
        let sig = repo.signature().or_else(|_| git2::Signature::now("dracode", "dracode@localhost"))?;
        let id = repo.commit(None, &sig, &sig, message, &tree, &[&parent])?;
        repo.branch(branch, &repo.find_commit(id)?, false)?;
        Ok(id.to_string())
    }

    /// What changed since the workspace was prepared; `None` when nothing did or the folder is
    /// not a git repository (`none` isolation outside git cannot tell).
    pub fn changes(&self) -> Result<Option<Changes>, git2::Error> {
        match (&self.repo, self.baseline) {
            (Some(repo), Some(before)) => {
                let after = snapshot::snapshot(repo)?;
                snapshot::changes(repo, before, after, None)
            }
            _ => Ok(None),
        }
    }
}

/// Copies the files of `from` into `to`, honouring .gitignore and leaving `.git` out.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let walker = ignore::WalkBuilder::new(from).hidden(false).git_ignore(true).require_git(false).build();
    for entry in walker {
        let entry = entry.map_err(std::io::Error::other)?;
        let rel = entry.path().strip_prefix(from).map_err(std::io::Error::other)?;
        if rel.as_os_str().is_empty() || rel.starts_with(".git") {
            continue;
        }
        let target = to.join(rel);
        let kind = entry.file_type();
        if kind.is_some_and(|k| k.is_dir()) {
            std::fs::create_dir_all(&target)?;
        } else if kind.is_some_and(|k| k.is_symlink()) {
            let link = std::fs::read_link(entry.path())?;
            std::os::unix::fs::symlink(link, &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_leaves_the_source_untouched_and_reports_changes() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("a.txt"), "1\n").unwrap();
        std::fs::write(src.path().join(".gitignore"), "target/\n").unwrap();
        std::fs::create_dir(src.path().join("target")).unwrap();
        std::fs::write(src.path().join("target/big"), "x").unwrap();
        let ws = Workspace::prepare(src.path(), Isolation::Copy, "HEAD", None).unwrap();
        assert!(!ws.root.join("target").exists(), "ignored files are not copied");
        assert_eq!(ws.changes().unwrap(), None);
        std::fs::write(ws.root.join("a.txt"), "2\n").unwrap();
        let changes = ws.changes().unwrap().unwrap();
        assert_eq!(changes.files, ["a.txt"]);
        assert_eq!(std::fs::read_to_string(src.path().join("a.txt")).unwrap(), "1\n");
        let root = ws.root.clone();
        drop(ws);
        assert!(!root.exists(), "the copy is removed");
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git").args(args).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn worktree_starts_at_base_leaves_the_checkout_alone_and_cleans_up() {
        let src = tempfile::tempdir().unwrap();
        let root = src.path();
        git(root, &["init", "-q", "-b", "main"]);
        std::fs::write(root.join("a.txt"), "v1\n").unwrap();
        git(root, &["add", "a.txt"]);
        git(root, &["-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "one"]);
        std::fs::write(root.join("a.txt"), "v2\n").unwrap();
        git(root, &["-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qam", "two"]);
        std::fs::write(root.join("dirty.txt"), "uncommitted").unwrap();
        let status = git(root, &["status", "--porcelain"]);
        let branches = git(root, &["branch", "--list"]);

        let ws = Workspace::prepare(root, Isolation::Worktree, "HEAD~1", None).unwrap();
        assert_eq!(std::fs::read_to_string(ws.root.join("a.txt")).unwrap(), "v1\n");
        assert!(!ws.root.join("dirty.txt").exists());
        assert_eq!(git(root, &["branch", "--list"]), branches, "no branch is left while it runs");
        std::fs::write(ws.root.join("a.txt"), "v3\n").unwrap();
        std::fs::write(ws.root.join("new.txt"), "n\n").unwrap();
        let changes = ws.changes().unwrap().unwrap();
        assert_eq!(changes.files, ["a.txt", "new.txt"]);
        let wt_root = ws.root.clone();
        drop(ws);

        assert!(!wt_root.exists());
        assert_eq!(git(root, &["worktree", "list"]).lines().count(), 1, "only the main worktree remains");
        assert_eq!(git(root, &["status", "--porcelain"]), status);
        assert_eq!(git(root, &["branch", "--list"]), branches);
        assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "v2\n");
    }

    #[test]
    fn none_outside_git_works_but_reports_no_diff() {
        let src = tempfile::tempdir().unwrap();
        let ws = Workspace::prepare(src.path(), Isolation::None, "HEAD", Some(Path::new("sub"))).unwrap();
        assert!(ws.workdir.ends_with("sub"));
        std::fs::write(ws.root.join("x"), "1").unwrap();
        assert_eq!(ws.changes().unwrap(), None);
    }
}
