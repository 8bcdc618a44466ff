//! The git repository of a `worktree` workspace: a repository of the task's own, never the
//! user's.
//!
//! Why the task has its own git directory: a task is hostile code. A `git worktree` shares the
//! user's `.git` — config, hooks, `info/attributes`, refs, `.git/worktrees/*` — so a task could
//! define `filter.x.smudge` plus an attributes line and have the *next* task's checkout run its
//! command, plant a `pre-commit` hook that fires on the user's next commit, read the
//! `http.*.extraheader` token `actions/checkout` keeps in `.git/config`, and parallel tasks raced
//! on `.git/worktrees/…/commondir`. Here each workspace is a fresh repository ([`create`]):
//!
//! - `.git` is made by libgit2 without git's templates (no live hook, a default config);
//! - `.git/objects/info/alternates` names the user's object store: objects are shared read-only,
//!   nothing is copied, so it costs what `git worktree add` costs; a shallow repository's
//!   `shallow` file is copied so history ends where the user's does;
//! - the base commit is checked out detached by [`git_command`] (`git checkout`), or by libgit2
//!   when git is missing or fails;
//! - the user's tags are copied (names and ids only), so `git describe` — a version taken
//!   from git by setuptools-scm or hatch-vcs — answers as in their clone.
//!
//! While a task runs nothing is written to the user's repository: no worktree entry, branch or
//! lock, so tasks cannot race and nothing is left behind. With `commit = true`, dracode itself
//! copies the task's new objects into the user's store and makes the commit and the branch there
//! with libgit2 ([`commit_into`]): no hook, filter or config of the task's repository is
//! honoured. [`prune_stale`] still removes what older versions of dracode left (worktree entries
//! and branches named `dracode-<pid>-<n>` whose process is gone).

use git2::{ObjectType, Odb, Oid, Repository, RepositoryInitOptions, WorktreePruneOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Worktree and branch names older versions of dracode created start with this.
pub const NAME_PREFIX: &str = "dracode-";

/// The environment variables dracode's own git commands keep; everything else (provider keys,
/// the caller's `GIT_*`) is dropped.
const GIT_ENV_ALLOWLIST: [&str; 4] = ["PATH", "HOME", "LANG", "TMPDIR"];

/// Where a repository keeps its git data (read from the user's repository).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitDirs {
    /// The git directory (`.git`, or `.git/worktrees/<name>` for a linked worktree).
    pub git_dir: PathBuf,
    /// The common directory: config, hooks, refs, objects (equal to `git_dir` but in a linked
    /// worktree).
    pub common_dir: PathBuf,
    /// The object stores: `<common_dir>/objects` and the alternates it names itself.
    pub object_dirs: Vec<PathBuf>,
}

impl GitDirs {
    /// The directories of `repo`.
    pub fn of(repo: &Repository) -> GitDirs {
        let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let common_dir = canon(repo.commondir());
        let objects = common_dir.join("objects");
        let mut object_dirs = vec![objects.clone()];
        if let Ok(text) = std::fs::read_to_string(objects.join("info/alternates")) {
            let listed = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'));
            object_dirs.extend(listed.map(|l| canon(&objects.join(l))));
        }
        GitDirs { git_dir: canon(repo.path()), common_dir, object_dirs }
    }
}

/// The path of `folder` relative to the working directory of `repo`, with a trailing `/`
/// (empty at the root): what patch paths are prefixed with so that they apply at the root.
pub(crate) fn repo_prefix(repo: &Repository, folder: &Path) -> String {
    let Some(workdir) = repo.workdir().and_then(|w| w.canonicalize().ok()) else { return String::new() };
    let Ok(rel) = folder.strip_prefix(&workdir) else { return String::new() };
    let rel = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
    if rel.is_empty() { rel } else { format!("{rel}/") }
}

/// A task's repository, checked out at the base commit.
pub struct TaskRepo {
    /// The task's repository (its `.git` is inside the workspace root).
    pub repo: Repository,
    /// The commit it starts at.
    pub base: Oid,
    /// The user's repository it borrows objects from.
    pub source: GitDirs,
}

/// `git` with hooks, fsmonitor, system and global config (so every filter driver) off, no
/// terminal prompt, no transport, and an environment cleared to [`GIT_ENV_ALLOWLIST`]: the one
/// way dracode runs git. Consequences: LFS files stay pointer files in a workspace (no smudge
/// filter is defined), and the user's `core.autocrlf` (global, or in the repository's config,
/// which a task repository does not inherit) does not apply.
pub fn git_command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.env_clear();
    for key in GIT_ENV_ALLOWLIST {
        if let Some(value) = std::env::var_os(key) {
            cmd.env(key, value);
        }
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .args(["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.allow=never"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Makes `root` (an empty folder) a repository of its own that borrows the objects of the
/// repository at `source`, checked out detached at `base` (a commit-ish of `source`).
pub fn create(source: &Path, base: &str, root: &Path) -> Result<TaskRepo, git2::Error> {
    let user = Repository::open(source)?;
    let commit = user.revparse_single(base)?.peel_to_commit()?.id();
    let dirs = GitDirs::of(&user);
    init(root, &dirs)?;
    if let Err(why) = checkout_with_git_cli(root, commit) {
        tracing::debug!("git checkout failed, using libgit2: {why}");
        reset_dir(root)?;
        init(root, &dirs)?;
        checkout_with_git2(&open(root)?, commit)?;
    }
    copy_tags(&user, root)?;
    set_identity(&user, root)?;
    Ok(TaskRepo { repo: open(root)?, base: commit, source: dirs })
}

/// Gives the task repository at `root` the user's tags, in one `packed-refs` file (their
/// objects are in the store it borrows): `git describe`, which setuptools-scm, hatch-vcs and
/// other version-from-git tools ask, answers as in the user's clone (`1.2.3`, not
/// `0.1.dev1+g…`). Nothing else of the user's refs is copied.
fn copy_tags(user: &Repository, root: &Path) -> Result<(), git2::Error> {
    let mut tags: Vec<(String, Oid)> = Vec::new();
    for reference in user.references_glob("refs/tags/*")? {
        let reference = reference?;
        if let (Ok(name), Some(target)) = (reference.name(), reference.target()) {
            tags.push((name.to_string(), target));
        }
    }
    if tags.is_empty() {
        return Ok(());
    }
    tags.sort();
    let mut text = String::from("# pack-refs with: sorted \n");
    for (name, target) in tags {
        text.push_str(&format!("{target} {name}\n"));
    }
    std::fs::write(root.join(".git/packed-refs"), text).map_err(|e| git2::Error::from_str(&format!("{}: {e}", root.display())))
}

/// The author of the agent's own commits when the user has no identity: `dracode-agent
/// <dracode@localhost>`.
pub const DEFAULT_IDENTITY: (&str, &str) = ("dracode-agent", "dracode@localhost");

/// Gives the task repository at `root` the user's `user.name` and `user.email` — from their
/// repository's config, else their global one — so the agent's own `git commit` works as it
/// does in their checkout; [`DEFAULT_IDENTITY`] for a key they have not set. Nothing else of
/// their config is copied.
fn set_identity(user: &Repository, root: &Path) -> Result<(), git2::Error> {
    let theirs = user.config().and_then(|mut c| c.snapshot()).ok();
    let get = |key: &str| theirs.as_ref().and_then(|c| c.get_string(key).ok()).filter(|v| !v.trim().is_empty());
    let mut config = git2::Config::open(&root.join(".git").join("config"))?;
    config.set_str("user.name", &get("user.name").unwrap_or_else(|| DEFAULT_IDENTITY.0.to_string()))?;
    config.set_str("user.email", &get("user.email").unwrap_or_else(|| DEFAULT_IDENTITY.1.to_string()))
}

/// Opens the task repository at `root` with its git dir and working folder pinned, so a
/// `core.worktree` the task writes into its config cannot point dracode elsewhere.
pub fn open(root: &Path) -> Result<Repository, git2::Error> {
    let repo = Repository::open_bare(root.join(".git"))?;
    repo.set_workdir(root, false)?;
    Ok(repo)
}

/// A fresh `.git` in `root` (no templates) whose object store falls back on `source`'s.
fn init(root: &Path, source: &GitDirs) -> Result<(), git2::Error> {
    let mut opts = RepositoryInitOptions::new();
    opts.external_template(false).no_reinit(true);
    let repo = Repository::init_opts(root, &opts)?;
    let io = |e: std::io::Error| git2::Error::from_str(&format!("{}: {e}", repo.path().display()));
    let info = repo.path().join("objects/info");
    std::fs::create_dir_all(&info).map_err(io)?;
    // The user's own store is enough: git and libgit2 follow the alternates it names.
    std::fs::write(info.join("alternates"), format!("{}\n", source.object_dirs[0].display())).map_err(io)?;
    let shallow = source.common_dir.join("shallow");
    if shallow.is_file() {
        std::fs::copy(&shallow, repo.path().join("shallow")).map_err(io)?;
    }
    Ok(())
}

/// Empties `root` after a failed checkout.
fn reset_dir(root: &Path) -> Result<(), git2::Error> {
    let io = |e: std::io::Error| git2::Error::from_str(&format!("{}: {e}", root.display()));
    std::fs::remove_dir_all(root).map_err(io)?;
    std::fs::create_dir(root).map_err(io)
}

/// Why `git checkout` did not make the task's working tree (then libgit2 does).
#[derive(Debug, thiserror::Error)]
enum GitCheckoutError {
    /// git could not be started (not installed, most likely).
    #[error("{0}")]
    Spawn(#[from] std::io::Error),
    /// git exited with an error; what it said.
    #[error("{0}")]
    Failed(String),
}

/// `git checkout --detach` of `commit` in the fresh repository at `root`.
fn checkout_with_git_cli(root: &Path, commit: Oid) -> Result<(), GitCheckoutError> {
    // One checkout worker per core (git's default is one): what keeps this as fast as `git
    // worktree add` on a large tree.
    let output = git_command(root).args(["-c", "checkout.workers=0", "checkout", "-q", "--detach"]).arg(commit.to_string()).output()?;
    if output.status.success() { Ok(()) } else { Err(GitCheckoutError::Failed(String::from_utf8_lossy(&output.stderr).trim().to_string())) }
}

/// libgit2's checkout of `commit` (slower than git's, used when git is not installed).
fn checkout_with_git2(repo: &Repository, commit: Oid) -> Result<(), git2::Error> {
    let tree = repo.find_commit(commit)?.tree()?;
    repo.checkout_tree(tree.as_object(), Some(git2::build::CheckoutBuilder::new().force()))?;
    repo.set_head_detached(commit)
}

/// Makes `tree` of the task repository a commit whose parent is `base` on the new branch
/// `branch` of the user's repository at `source` (an existing branch of that name is an error,
/// or is moved to the commit when `force`); returns the commit id. Only the objects the user's
/// store lacks are copied, each checked against its id.
pub fn commit_into(
    source: &Path,
    task: &Repository,
    tree: Oid,
    base: Oid,
    branch: &str,
    message: &str,
    force: bool,
) -> Result<Oid, git2::Error> {
    let user = Repository::open(source)?;
    copy_missing(task, &user.odb()?, tree)?;
    let tree = user.find_tree(tree)?;
    let parent = user.find_commit(base)?;
    let sig = user.signature().or_else(|_| git2::Signature::now("dracode", "dracode@localhost"))?;
    let id = user.commit(None, &sig, &sig, message, &tree, &[&parent])?;
    user.branch(branch, &user.find_commit(id)?, force)?;
    Ok(id)
}

/// Copies the trees and blobs under `tree` that `to` lacks from the task repository.
fn copy_missing(task: &Repository, to: &Odb<'_>, tree: Oid) -> Result<(), git2::Error> {
    let from = task.odb()?;
    let mut pending = vec![tree];
    while let Some(id) = pending.pop() {
        // A tree the store has brings everything under it.
        if to.exists(id) {
            continue;
        }
        let object = from.read(id)?;
        if object.kind() == ObjectType::Tree {
            let tree = task.find_tree(id)?;
            pending.extend(tree.iter().filter(|e| matches!(e.kind(), Some(ObjectType::Tree | ObjectType::Blob))).map(|e| e.id()));
        }
        if to.write(object.kind(), object.data())? != id {
            return Err(git2::Error::from_str(&format!("object {id} of the task repository does not match its id")));
        }
    }
    Ok(())
}

/// Removes what older versions of dracode left in the repository at `source` after a crash:
/// worktrees named `dracode-<pid>-<n>` whose folder is gone or whose process is, and the
/// temporary branches of that name.
pub fn prune_stale(source: &Path) {
    let Ok(repo) = Repository::open(source) else { return };
    let Ok(names) = repo.worktrees() else { return };
    for name in names.iter().flatten().flatten().filter(|n| legacy_owner_gone(n)) {
        if let Ok(wt) = repo.find_worktree(name) {
            // Only folders in the temp dir, where dracode made them, are removed.
            if wt.path().starts_with(std::env::temp_dir())
                && std::fs::remove_dir_all(wt.path()).is_ok()
                && let Some(parent) = wt.path().parent()
            {
                let _ = std::fs::remove_dir(parent);
            }
            let _ = wt.prune(Some(WorktreePruneOptions::new().valid(true)));
        }
    }
    let Ok(branches) = repo.branches(Some(git2::BranchType::Local)) else { return };
    for (mut branch, _) in branches.flatten() {
        if branch.name().ok().flatten().is_some_and(legacy_owner_gone) && !branch.is_head() {
            let _ = branch.delete();
        }
    }
}

/// Whether `name` is `dracode-<pid>-<n>` of a process that no longer runs.
fn legacy_owner_gone(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(NAME_PREFIX) else { return false };
    let Some((pid, n)) = rest.split_once('-') else { return false };
    match (pid.parse::<u32>(), n.parse::<u64>()) {
        (Ok(pid), Ok(_)) => !process_alive(pid),
        _ => false,
    }
}

/// Paths with uncommitted changes in the repository at `source` (a workspace does not carry
/// them; the user is told).
pub fn dirty_paths(source: &Path) -> Vec<String> {
    let Ok(repo) = Repository::open(source) else { return Vec::new() };
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true).include_ignored(false);
    repo.statuses(Some(&mut opts)).map(|s| s.iter().filter_map(|e| e.path().ok().map(str::to_string)).collect()).unwrap_or_default()
}

/// Whether a process with this id exists (possibly another user's).
pub(crate) fn process_alive(pid: u32) -> bool {
    // 0 and negative ids name process groups, not a process.
    libc::pid_t::try_from(pid).is_ok_and(dracode_sandbox::signals::process_exists)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::batch::test_git as git;

    /// A user repository (two files, one commit) in a new temp dir: (dir, repo folder, repo, head).
    fn user_repo() -> (tempfile::TempDir, PathBuf, Repository, Oid) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("u");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("a.txt"), "x\n").unwrap();
        std::fs::write(dir.join("sub/b.txt"), "y\n").unwrap();
        git(&dir, &["add", "-A"]);
        git(&dir, &["-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "m"]);
        let repo = Repository::open(&dir).unwrap();
        let head = repo.head().unwrap().target().unwrap();
        (tmp, dir, repo, head)
    }

    /// Replaces the old libgit2 worktree fallback test: both checkouts give the same workspace.
    #[test]
    fn git_and_libgit2_checkouts_give_the_same_detached_workspace_and_write_nothing_to_the_user() {
        let (dir, src, user, head) = user_repo();
        let before = git(&src, &["for-each-ref"]) + &git(&src, &["worktree", "list", "--porcelain"]);
        let dirs = GitDirs::of(&user);
        for (name, by_cli) in [("cli", true), ("git2", false)] {
            let root = dir.path().join(name);
            std::fs::create_dir(&root).unwrap();
            init(&root, &dirs).unwrap();
            if by_cli {
                checkout_with_git_cli(&root, head).unwrap();
            } else {
                checkout_with_git2(&open(&root).unwrap(), head).unwrap();
            }
            let repo = open(&root).unwrap();
            assert!(repo.head_detached().unwrap(), "{name}");
            assert_eq!(repo.head().unwrap().target(), Some(head), "{name}");
            assert_eq!(std::fs::read_to_string(root.join("sub/b.txt")).unwrap(), "y\n", "{name}");
            assert_eq!(git(&root, &["status", "--porcelain"]), "", "{name}: the index matches the checkout");
            assert!(root.join(".git").is_dir(), "{name}: a git dir of its own");
            let hooks: Vec<_> = std::fs::read_dir(root.join(".git/hooks")).unwrap().flatten().map(|e| e.file_name()).collect();
            assert!(hooks.iter().all(|h| h.to_string_lossy().ends_with(".sample")), "{name}: no live hook: {hooks:?}");
        }
        assert_eq!(git(&src, &["for-each-ref"]) + &git(&src, &["worktree", "list", "--porcelain"]), before);
    }

    #[test]
    fn git_command_keeps_only_the_allowlist_and_reads_no_global_or_system_config() {
        let dir = tempfile::tempdir().unwrap();
        let set = ["GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_ATTR_NOSYSTEM", "GIT_TERMINAL_PROMPT"];
        for (key, _) in git_command(dir.path()).get_envs() {
            let key = key.to_string_lossy();
            assert!(GIT_ENV_ALLOWLIST.contains(&key.as_ref()) || set.contains(&key.as_ref()), "{key}");
        }
        // What a git alias sees is what git itself got: none of this test's CARGO_* variables.
        let out = git_command(dir.path()).args(["-c", "alias.showenv=!env", "showenv"]).stdout(Stdio::piped()).output().unwrap();
        let env = String::from_utf8_lossy(&out.stdout);
        assert!(env.contains("GIT_CONFIG_GLOBAL=/dev/null") && !env.contains("CARGO_"), "{env}");
        let out = git_command(dir.path()).args(["config", "--list", "--show-scope"]).stdout(Stdio::piped()).output().unwrap();
        let listed = String::from_utf8_lossy(&out.stdout);
        assert!(listed.lines().all(|l| l.starts_with("command")), "only our -c settings: {listed}");
        assert!(listed.contains("core.hookspath=/dev/null") && listed.contains("core.fsmonitor=false"), "{listed}");
    }

    #[test]
    fn commit_into_copies_only_missing_objects_and_makes_the_branch() {
        let (dir, src, user, head) = user_repo();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        let task = create(&src, "HEAD", &root).unwrap();
        std::fs::write(root.join("sub/new.txt"), "new\n").unwrap();
        let tree = crate::batch::snapshot::snapshot(&task.repo).unwrap();
        assert!(!user.odb().unwrap().exists(tree), "the snapshot is written to the task's store");
        let id = commit_into(&src, &task.repo, tree, head, "dracode/r/t", "msg", false).unwrap();
        assert_eq!(git(&src, &["show", "dracode/r/t:sub/new.txt"]), "new\n");
        assert_eq!(git(&src, &["rev-parse", "dracode/r/t^"]).trim(), head.to_string());
        assert_eq!(git(&src, &["rev-parse", "dracode/r/t"]).trim(), id.to_string());
        git(&src, &["fsck", "--strict"]);
    }

    #[test]
    fn the_task_repository_has_the_users_tags_and_describes_as_their_clone() {
        let (dir, src, _user, _head) = user_repo();
        git(&src, &["tag", "v0.9"]);
        git(&src, &["-c", "user.name=t", "-c", "user.email=t@x", "tag", "-a", "v1.0", "-m", "release"]);
        git(&src, &["branch", "feature"]);
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        create(&src, "HEAD", &root).unwrap();
        assert_eq!(git(&root, &["describe", "--tags", "--long"]).trim(), git(&src, &["describe", "--tags", "--long"]).trim());
        assert_eq!(git(&root, &["tag", "--list"]), "v0.9\nv1.0\n");
        assert_eq!(git(&root, &["cat-file", "-t", "v1.0"]).trim(), "tag", "the annotated tag's object, from the user's store");
        assert!(!git(&root, &["branch", "--list"]).contains("feature"), "no branch of the user's");
    }

    #[test]
    fn legacy_names_are_recognised_and_only_for_dead_processes() {
        assert!(!legacy_owner_gone(&format!("dracode-{}-3", std::process::id())));
        assert!(!legacy_owner_gone("dracode/run/task"));
        assert!(!legacy_owner_gone("dracode-feature-x"));
        assert!(legacy_owner_gone("dracode-99999999-1"), "pids never go that high");
    }
}
