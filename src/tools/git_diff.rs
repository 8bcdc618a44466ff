//! The `git_diff` tool: the workspace's uncommitted changes against `HEAD` as a unified diff,
//! staged and unstaged alike, new (untracked, not ignored) files included.

use super::{BlockingTool, ErrorCode, ToolContext, ToolError};
use dracode_sandbox::Sandbox;
use git2::{DiffFormat, DiffOptions, Repository};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::Path;

/// The `git_diff` tool.
pub struct GitDiff;

// The arguments of `git_diff`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// Only show changes to this file or directory (relative to workspace root); default: the whole workspace.
    #[serde(default)]
    path: Option<String>,
}

impl BlockingTool for GitDiff {
    const NAME: &'static str = "git_diff";
    const READ_ONLY: bool = true;
    const DESCRIPTION: &'static str = "Show the workspace's uncommitted changes (including new files) against the last commit, \
         as a unified diff with repository-relative paths.";
    type Args = Args;
    fn run(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
        let repo = super::git_repo::open(ctx)?;
        diff(&repo, &ctx.sandbox, args.path.as_deref(), ctx.output_limit)
    }
}

fn git_error(context: &str, err: &git2::Error) -> ToolError {
    ToolError::new(ErrorCode::GitError, format!("{context}: {}", err.message()))
}

fn diff(repo: &Repository, sandbox: &Sandbox, path: Option<&str>, limit: usize) -> Result<String, ToolError> {
    // Resolved for write: a deleted file no longer exists but still has a diff.
    let target = match path {
        Some(p) => sandbox.resolve_for_write(p)?,
        None => sandbox.root().to_path_buf(),
    };
    let workdir = repo
        .workdir()
        .and_then(|w| w.canonicalize().ok())
        .ok_or_else(|| ToolError::new(ErrorCode::GitError, "the repository has no working directory"))?;
    let head_tree = match repo.head() {
        Ok(head) => Some(head.peel_to_tree().map_err(|e| git_error("reading HEAD", &e))?),
        // No commit yet: everything is new.
        Err(e) if matches!(e.code(), git2::ErrorCode::UnbornBranch | git2::ErrorCode::NotFound) => None,
        Err(e) => return Err(git_error("reading HEAD", &e)),
    };
    let mut opts = DiffOptions::new();
    opts.include_untracked(true).recurse_untracked_dirs(true).show_untracked_content(true).disable_pathspec_match(true);
    if let Some(spec) = pathspec(&target, &workdir) {
        opts.pathspec(spec);
    }
    let diff =
        repo.diff_tree_to_workdir_with_index(head_tree.as_ref(), Some(&mut opts)).map_err(|e| git_error("computing the diff", &e))?;
    let patch = patch_text(&diff).map_err(|e| git_error("printing the diff", &e))?;
    if patch.is_empty() {
        return Ok("No uncommitted changes.".to_string());
    }
    Ok(super::git_repo::cap(patch, limit, "diff", "pass path to see one file or directory"))
}

/// `diff` as the text of a unified patch, as `git diff` prints it (`git apply` reads it back).
pub fn patch_text(diff: &git2::Diff<'_>) -> Result<String, git2::Error> {
    let mut patch = Vec::new();
    diff.print(DiffFormat::Patch, |_, _, line| {
        // Patch lines arrive without their marker; file and hunk headers carry their own.
        if matches!(line.origin(), '+' | '-' | ' ') {
            patch.push(line.origin() as u8);
        }
        patch.extend_from_slice(line.content());
        true
    })?;
    Ok(String::from_utf8_lossy(&patch).into_owned())
}

/// The repository-relative path to limit the diff to; `None` for the whole repository.
fn pathspec(target: &Path, workdir: &Path) -> Option<String> {
    let rel = target.strip_prefix(workdir).ok()?;
    let spec = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
    (!spec.is_empty()).then_some(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool as _;
    use crate::tools::test_context;
    use serde_json::json;
    use std::fs;

    /// A repository with `a.txt`, `src/lib.rs` and `gone.txt` committed, then `a.txt` changed,
    /// `gone.txt` deleted, `new/n.txt` added and `skip.log` (ignored) added.
    fn repo_with_changes() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = Repository::init(root).unwrap();
        fs::create_dir_all(root.join("src")).unwrap();
        fs::write(root.join("a.txt"), "one\ntwo\n").unwrap();
        fs::write(root.join("src/lib.rs"), "fn a() {}\n").unwrap();
        fs::write(root.join("gone.txt"), "bye\n").unwrap();
        fs::write(root.join(".gitignore"), "*.log\n").unwrap();
        let mut index = repo.index().unwrap();
        index.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[]).unwrap();
        fs::write(root.join("a.txt"), "one\nTWO\n").unwrap();
        fs::remove_file(root.join("gone.txt")).unwrap();
        fs::create_dir_all(root.join("new")).unwrap();
        fs::write(root.join("new/n.txt"), "fresh\n").unwrap();
        fs::write(root.join("skip.log"), "ignored\n").unwrap();
        dir
    }

    #[tokio::test]
    async fn shows_modified_deleted_and_new_files() {
        let dir = repo_with_changes();
        let out = GitDiff.call(&test_context(dir.path()), json!({})).await.unwrap();
        for want in [
            "diff --git a/a.txt b/a.txt",
            "-two\n+TWO\n",
            " one\n",
            "diff --git a/gone.txt b/gone.txt",
            "deleted file mode",
            "-bye\n",
            "diff --git a/new/n.txt b/new/n.txt",
            "new file mode",
            "+fresh\n",
        ] {
            assert!(out.contains(want), "missing {want:?} in:\n{out}");
        }
        assert!(!out.contains("skip.log") && !out.contains("src/lib.rs"), "{out}");
    }

    #[tokio::test]
    async fn path_limits_the_diff() {
        let dir = repo_with_changes();
        let ctx = test_context(dir.path());
        let out = GitDiff.call(&ctx, json!({"path": "new"})).await.unwrap();
        assert!(out.contains("new/n.txt") && !out.contains("a.txt"), "{out}");
        let out = GitDiff.call(&ctx, json!({"path": "gone.txt"})).await.unwrap();
        assert!(out.contains("gone.txt") && !out.contains("new/n.txt"), "{out}");
        let out = GitDiff.call(&ctx, json!({"path": "src"})).await.unwrap();
        assert_eq!(out, "No uncommitted changes.");
    }

    #[tokio::test]
    async fn a_workspace_below_the_repository_root_sees_its_own_changes() {
        let dir = repo_with_changes();
        fs::write(dir.path().join("src/lib.rs"), "fn b() {}\n").unwrap();
        let out = GitDiff.call(&test_context(&dir.path().join("src")), json!({})).await.unwrap();
        assert!(out.contains("diff --git a/src/lib.rs b/src/lib.rs"), "{out}");
        assert!(!out.contains("a.txt"), "{out}");
    }

    #[tokio::test]
    async fn the_output_is_capped() {
        let dir = repo_with_changes();
        fs::write(dir.path().join("new/big.txt"), "line\n".repeat(50_000)).unwrap();
        let mut ctx = test_context(dir.path());
        ctx.output_limit = 1000;
        let out = GitDiff.call(&ctx, json!({})).await.unwrap();
        assert!(out.len() < 1200, "{}", out.len());
        assert!(out.contains("[... diff truncated:"), "{out}");
    }

    #[tokio::test]
    async fn each_error_has_its_code() {
        let not_repo = tempfile::tempdir().unwrap();
        // A temp dir could sit inside some repository; only outside one is this GIT_ERROR.
        if Repository::discover(not_repo.path()).is_err() {
            let err = GitDiff.call(&test_context(not_repo.path()), json!({})).await.unwrap_err();
            assert_eq!(err.code, ErrorCode::GitError, "{err}");
            assert!(err.message.contains("not in a git repository"), "{err}");
        }
        let dir = repo_with_changes();
        let ctx = test_context(dir.path());
        let err = GitDiff.call(&ctx, json!({"path": "../x"})).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::PathOutsideWorkspace);
        let err = GitDiff.call(&ctx, json!({"staged": true})).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArguments);
    }

    #[tokio::test]
    async fn a_repository_without_commits_shows_everything_as_new() {
        let dir = tempfile::tempdir().unwrap();
        Repository::init(dir.path()).unwrap();
        fs::write(dir.path().join("first.txt"), "hello\n").unwrap();
        let out = GitDiff.call(&test_context(dir.path()), json!({})).await.unwrap();
        assert!(out.contains("+hello"), "{out}");
    }
}
