//! What the git tools share: opening the task's repository, pathspecs, the guard on writes, and
//! capping output.
//!
//! The repository is the one the task runner pinned when it made the workspace
//! ([`PinnedGit`]): with `isolation = "worktree"` or `"copy"` the task's own (see
//! `batch::workspace`); with `isolation = "none"` the user's own, where [`ensure_writable`]
//! refuses `git_commit` and `git_branch` create: the agent may read the user's history but
//! never moves its branches. It is never found by searching from the workspace, so a `.git`
//! file, symlink or `gitdir:` line the agent plants cannot point the tools at another
//! repository: a pinned git directory that is no longer the very folder it was (replaced,
//! turned into a file or a link) is refused.

use super::{ErrorCode, ToolContext, ToolError};
use git2::Repository;

/// A `GIT_ERROR` saying what was being done.
pub(crate) fn git_error(context: &str, err: &git2::Error) -> ToolError {
    ToolError::new(ErrorCode::GitError, format!("{context}: {}", err.message()))
}

/// The repository the git tools work on, fixed when the workspace was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedGit {
    /// The git directory.
    pub git_dir: std::path::PathBuf,
    /// Its working directory.
    pub workdir: std::path::PathBuf,
    /// The git directory's device and inode when it was pinned.
    identity: (u64, u64),
}

impl PinnedGit {
    /// Pins the git directory `git_dir` (a real folder, not a link) with working directory
    /// `workdir`; `None` when it is not a folder.
    pub fn new(git_dir: &std::path::Path, workdir: &std::path::Path) -> Option<PinnedGit> {
        let identity = folder_identity(git_dir)?;
        Some(PinnedGit { git_dir: git_dir.to_path_buf(), workdir: workdir.to_path_buf(), identity })
    }

    /// Opens the repository, refusing a git directory that is no longer the pinned folder.
    pub fn open(&self) -> Result<Repository, ToolError> {
        if folder_identity(&self.git_dir) != Some(self.identity) {
            return Err(ToolError::new(
                ErrorCode::GitError,
                format!(
                    "{} is no longer the repository this task started with (replaced, or made a file or a link): \
                     the git tools work only on the task's own repository",
                    self.git_dir.display()
                ),
            ));
        }
        let repo = Repository::open_bare(&self.git_dir).map_err(|e| git_error("opening the task's repository", &e))?;
        repo.set_workdir(&self.workdir, false).map_err(|e| git_error("opening the task's repository", &e))?;
        Ok(repo)
    }
}

/// The device and inode of `path` when it is a folder (not following a link).
fn folder_identity(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.is_dir().then(|| (meta.dev(), meta.ino()))
}

/// The task's repository (the one pinned for it).
pub(crate) fn open(ctx: &ToolContext) -> Result<Repository, ToolError> {
    match &ctx.git {
        Some(pinned) => pinned.open(),
        None => Err(ToolError::new(ErrorCode::GitError, "the workspace is not in a git repository")),
    }
}

/// Refuses a write to the repository unless it is the task's own.
pub(crate) fn ensure_writable(ctx: &ToolContext, tool: &str) -> Result<(), ToolError> {
    if ctx.git_writes {
        return Ok(());
    }
    Err(ToolError::new(
        ErrorCode::GitError,
        format!(
            "{tool} is refused: the workspace is the user's own repository (isolation = \"none\"); \
             only a task with isolation = \"worktree\" or \"copy\" has a repository of its own to commit to"
        ),
    ))
}

/// The repository-relative pathspec of the workspace path `path` (`None`: everything).
pub(crate) fn pathspec(ctx: &ToolContext, repo: &Repository, path: Option<&str>) -> Result<Option<String>, ToolError> {
    let Some(path) = path else { return Ok(None) };
    // Resolved for write: a deleted file no longer exists but still has a status and a history.
    let target = ctx.sandbox.resolve_for_write(path)?;
    let workdir = repo
        .workdir()
        .and_then(|w| w.canonicalize().ok())
        .ok_or_else(|| ToolError::new(ErrorCode::GitError, "the repository has no working directory"))?;
    let rel = target
        .strip_prefix(&workdir)
        .map_err(|_| ToolError::new(ErrorCode::PathOutsideWorkspace, format!("{path} is outside the repository")))?;
    let spec = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
    Ok((!spec.is_empty()).then_some(spec))
}

/// The first seven hex digits of `oid`.
pub(crate) fn short(oid: git2::Oid) -> String {
    oid.to_string()[..7].to_string()
}

/// A commit time as RFC 3339 (UTC, seconds).
pub(crate) fn date(time: git2::Time) -> String {
    let secs = u64::try_from(time.seconds()).unwrap_or(0);
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)).to_string()
}

/// Cuts `text` to `limit` bytes at a line end, saying how much of the `what` (`output`, `diff`)
/// was left out and what to do.
pub(crate) fn cap(mut text: String, limit: usize, what: &str, hint: &str) -> String {
    if text.len() <= limit {
        return text;
    }
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let cut = text[..cut].rfind('\n').map_or(cut, |i| i + 1);
    let omitted = text.len() - cut;
    text.truncate(cut);
    text.push_str(&format!("[... {what} truncated: {omitted} more bytes; {hint} ...]"));
    text
}

#[cfg(test)]
pub(crate) mod fixture {
    //! A small repository for the git tools' tests.
    use git2::{Repository, Signature};
    use std::path::Path;

    /// Commits every file of `root` with `message` (as "Test <t@example.com>" at time `t`).
    pub(crate) fn commit_all(repo: &Repository, message: &str, t: i64) -> git2::Oid {
        let mut index = repo.index().unwrap();
        index.add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None).unwrap();
        index.update_all(["*"].iter(), None).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = Signature::new("Test", "t@example.com", &git2::Time::new(t, 0)).unwrap();
        let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &parents).unwrap()
    }

    /// A repository on branch `main` with three commits: "add a" (a.txt), "add src" (src/lib.rs),
    /// "change a" (a.txt again).
    pub(crate) fn history(root: &Path) -> Repository {
        let repo = Repository::init_opts(root, git2::RepositoryInitOptions::new().initial_head("main")).unwrap();
        std::fs::write(root.join("a.txt"), "one\n").unwrap();
        commit_all(&repo, "add a", 1_700_000_000);
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "fn main() {}\n").unwrap();
        commit_all(&repo, "add src\n\nWith a body.", 1_700_000_100);
        std::fs::write(root.join("a.txt"), "two\n").unwrap();
        commit_all(&repo, "change a", 1_700_000_200);
        repo
    }
}
