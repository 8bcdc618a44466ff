//! Where a task works: its workspace per isolation mode, the changes it made there, and the
//! paths the OS sandbox must open or hide for its commands ([`Workspace::sandbox_paths`]).
//!
//! - `worktree`: a repository of the task's own, checked out at `base`, that borrows the user's
//!   objects ([`super::worktree`] says why it is not a `git worktree`);
//! - `none`: the repository folder itself (tasks on the same folder never overlap);
//! - `copy`: a temporary copy of the folder (.gitignore honoured, `.git` left out) with a
//!   baseline commit of its own, so any folder — git or not — yields a patch.
//!
//! In both, the diff is taken between a snapshot before the agent and one after
//! ([`super::snapshot`]), so changes already present are not blamed on the task.
//!
//! `copy` and `worktree` folders are `dracode-workspace-<pid>-<random>/` in the temp dir: an
//! `owner.lock` (the pid, `flock`-ed while the task runs) and `ws/`, the workspace root. A run
//! killed by SIGKILL cannot remove them, so the first workspace of the next run removes those
//! whose process is gone and whose lock is free ([`sweep_leftovers`]).

use super::change_record::Record;
use super::owned_dir::{OwnedDir, TASK_DIR_PREFIX};
use super::run_stores::{CopyBase, RunStores};
use super::snapshot::Changes;
use super::unrecorded::{Inventory, Recorded, Rules};
use super::worktree::{self, GitDirs, repo_prefix};
use crate::manifest::Isolation;
use git2::{Oid, Repository};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A prepared workspace.
pub struct Workspace {
    /// The workspace root (the sandbox for tools).
    pub root: PathBuf,
    /// Where tools run: `root` joined with the task's `workdir`.
    pub workdir: PathBuf,
    /// The commit the workspace started from, in a git repository.
    pub base_commit: Option<String>,
    /// How it was made.
    isolation: Isolation,
    /// The change record, kept outside the workspace ([`Record`]).
    record: Record,
    /// The tree [`Workspace::changes`] recorded last: what `commit = true` commits.
    recorded: std::sync::Mutex<Option<Oid>>,
    /// Every entry of the working tree as prepared, before any command ran
    /// ([`Workspace::take_inventory`]; [`Workspace::kept_for_check`] keeps none of those unchanged).
    inventory: Inventory,
    /// The git directory and working directory of the repository the tools work on, fixed
    /// when the workspace was made: the task's own `.git` (`worktree`, `copy`), the user's
    /// (`none` in a repository).
    git: Option<(PathBuf, PathBuf)>,
    /// The user's repository a `worktree` workspace borrows from: where `commit` branches.
    source: Option<PathBuf>,
    /// The git directories of the repository the workspace was made from (not with `none`).
    source_git: Option<GitDirs>,
    /// What a `copy` or `worktree` workspace was copied from (the run's copy of its source, or
    /// checkout of its repository), with the objects its `.git` borrows.
    copy_base: Option<Arc<CopyBase>>,
    /// Last: the folder goes after the repository handles are closed.
    _dir: TaskDir,
}

/// The file-system view a sandboxed command of one task needs (plain data for the OS sandbox).
///
/// A path in `readable` stays readable although it lies under a path in `hidden`. The task's
/// own TMPDIR is not listed: the task runner owns it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxPaths {
    /// May be read and written: the workspace root, its own `.git` included (so `git add` and
    /// `git commit` in the task work).
    pub writable: Vec<PathBuf>,
    /// Must stay readable although under `hidden`: the user's object stores, which a `worktree`
    /// workspace's `objects/info/alternates` names.
    pub readable: Vec<PathBuf>,
    /// Neither readable nor writable: the git directory of the repository the workspace was
    /// made from (its config holds `http.*.extraheader` tokens; hooks, refs, info), and its
    /// common directory when that differs.
    pub hidden: Vec<PathBuf>,
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
    /// The run's copy of the source could not be made ([`super::run_stores`]).
    #[error(transparent)]
    Base(#[from] super::run_stores::BaseError),
    /// Preparing the workspace panicked (a bug).
    #[error("preparing the workspace panicked: {0}")]
    Panicked(String),
}

/// What a batch's setup made, to be found in every workspace of its tasks
/// ([`Workspace::prepare_carrying`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    /// The root of the workspace the setup ran in, copied from; `None` when it ran in the
    /// repository itself (`isolation = "none"`), where its outputs already are.
    pub from: Option<PathBuf>,
    /// What it made, relative to the root, `/`-separated: new folders whole, new files in
    /// folders that were there.
    pub paths: Vec<String>,
}

impl Workspace {
    /// Prepares `repo` for a task with `isolation`; `workdir` is relative to the root.
    pub fn prepare(repo: &Path, isolation: Isolation, base: &str, workdir: Option<&Path>) -> Result<Workspace, WorkspaceError> {
        Self::prepare_carrying(&RunStores::default(), repo, isolation, base, workdir, None)
    }

    /// [`Workspace::prepare`], then what `carried` names copied in from where the setup ran
    /// ([`super::carry`]) and left out of the change record (and of the task's own `git
    /// status`): the task's patch never holds it. Each check gets it again as the setup left
    /// it (`world.rs`). A `copy` workspace is copied from the run's base of `repo` in
    /// `stores` ([`super::run_stores`]), made by the first.
    pub fn prepare_carrying(
        stores: &RunStores,
        repo: &Path,
        isolation: Isolation,
        base: &str,
        workdir: Option<&Path>,
        carried: Option<&Carried>,
    ) -> Result<Workspace, WorkspaceError> {
        let io = |source| WorkspaceError::Io { path: repo.to_path_buf(), source };
        let source = repo.canonicalize().map_err(io)?;
        let mut ws = match isolation {
            Isolation::None => Self::prepare_in_place(&source)?,
            Isolation::Copy => Self::prepare_copy(&stores.copy_base(&source)?)?,
            Isolation::Worktree => Self::prepare_worktree(stores, &source, base)?,
        };
        if let Some(carried) = carried {
            ws.carry_in(carried, isolation != Isolation::None).map_err(io)?;
        }
        if let Some(dir) = workdir {
            ws.workdir = ws.root.join(dir);
            std::fs::create_dir_all(&ws.workdir).map_err(io)?;
        }
        Ok(ws)
    }

    /// Takes the inventory of the working tree as prepared, before any command runs: what
    /// [`Workspace::kept_for_check`] tells the agent's files from. Only a task with
    /// `keep_ignored` needs it (a walk of every file, the setup's outputs included); never with
    /// `isolation = "none"` (the user's folder, whose build folders may be large).
    pub fn take_inventory(&mut self) -> Result<(), WorkspaceError> {
        if self.isolation != Isolation::None {
            self.inventory = Inventory::take(&self.root).map_err(|source| WorkspaceError::Io { path: self.root.clone(), source })?;
        }
        Ok(())
    }

    /// The user's folder itself, recorded from its state now (its HEAD's files tracked when it
    /// is in a repository); patches are rooted at the repository's root.
    fn prepare_in_place(source: &Path) -> Result<Workspace, WorkspaceError> {
        let dir = TaskDir::create_without_workspace()?;
        let user = Repository::discover(source).ok().filter(|r| r.workdir().is_some());
        let head = user.as_ref().and_then(|r| r.head().ok()?.peel_to_commit().ok());
        let git = user.as_ref().map(GitDirs::of);
        let objects = git.as_ref().map(|g| g.object_dirs.clone()).unwrap_or_default();
        let prefix = user.as_ref().map(|r| repo_prefix(r, source)).unwrap_or_default();
        let start = match (&user, &head) {
            (Some(repo), Some(commit)) => subtree(repo, &commit.tree()?, &prefix)?,
            _ => None,
        };
        let record = Record::create_at(&dir.record, source, &objects, start, &prefix)?;
        Ok(Workspace {
            root: source.to_path_buf(),
            workdir: source.to_path_buf(),
            base_commit: head.map(|c| c.id().to_string()),
            isolation: Isolation::None,
            record,
            recorded: Default::default(),
            inventory: Default::default(),
            git: user.as_ref().and_then(|r| Some((r.path().to_path_buf(), r.workdir()?.to_path_buf()))),
            source: None,
            source_git: None,
            copy_base: None,
            _dir: dir,
        })
    }

    /// A copy of the run's `base` of the source with a baseline repository of its own (for
    /// the agent's git) borrowing the base's objects; the record starts from the baseline tree,
    /// its patches rooted at the user's repository root.
    fn prepare_copy(base: &Arc<CopyBase>) -> Result<Workspace, WorkspaceError> {
        let dir = TaskDir::create()?;
        let root = dir.root.clone();
        let io = |e| WorkspaceError::Io { path: root.clone(), source: e };
        base.copy_into(&root).map_err(io)?;
        base.write_git(&root).map_err(io)?;
        let record = base.record(&root)?;
        Ok(Workspace {
            git: Some((root.join(".git"), root.clone())),
            root: root.clone(),
            workdir: root.clone(),
            base_commit: base.source.base_commit.clone(),
            isolation: Isolation::Copy,
            record,
            recorded: Default::default(),
            inventory: Default::default(),
            source: None,
            source_git: base.source.git.clone(),
            copy_base: Some(base.clone()),
            _dir: dir,
        })
    }

    /// A task repository at `base` of the repository at `source`, recorded against the base
    /// commit's tree (read from the user's object store).
    fn prepare_worktree(stores: &RunStores, source: &Path, base: &str) -> Result<Workspace, WorkspaceError> {
        let made = stores.checkout_base(source, base)?;
        let dir = TaskDir::create()?;
        let root = dir.root.clone();
        let io = |e| WorkspaceError::Io { path: root.clone(), source: e };
        made.copy_into(&root).map_err(io)?;
        made.write_git(&root).map_err(io)?;
        let record = made.record(&root)?;
        Ok(Workspace {
            git: Some((root.join(".git"), root.clone())),
            root: root.clone(),
            workdir: root,
            base_commit: made.source.base_commit.clone(),
            isolation: Isolation::Worktree,
            record,
            recorded: Default::default(),
            inventory: Default::default(),
            source: Some(source.to_path_buf()),
            source_git: made.source.git.clone(),
            copy_base: Some(made),
            _dir: dir,
        })
    }

    /// Copies `carried` in (unless it is here already) and excludes its paths from the record
    /// and, when the workspace has one (`own_git`: not the user's), from the task's repository.
    fn carry_in(&mut self, carried: &Carried, own_git: bool) -> std::io::Result<()> {
        let own: Vec<PathBuf> = self.git.iter().filter(|_| own_git).map(|(git_dir, _)| git_dir.clone()).collect();
        carry_into(&self.root, carried, &own)?;
        self.record.exclude(&super::carry::exclude_lines(&carried.paths)).map_err(std::io::Error::other)
    }

    /// How the workspace was made.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// Makes the empty folder `root` what this workspace was when prepared — a repository of its
    /// own made the same way (`worktree`: at the base commit, borrowing the user's objects;
    /// `copy`: a baseline commit of the tree the task started from), never a byte of the
    /// workspace's own `.git` — with `tree` (a snapshot of the change record) as its working
    /// tree. The start of a check's world (`world.rs`); not with `isolation = "none"`.
    pub fn remake_at(&self, root: &Path, tree: Oid) -> Result<(), WorkspaceError> {
        let Some(base) = self.copy_base.as_ref().filter(|_| self.isolation != Isolation::None) else {
            return Err(WorkspaceError::Git(git2::Error::from_str("a workspace in place cannot be made again")));
        };
        // The files as the task started (a checkout's exactly; a copy's as recorded), then a
        // `.git` made as the workspace's was: never a byte of the workspace's own.
        match self.isolation {
            Isolation::Worktree => base.copy_into(root).map_err(|source| WorkspaceError::Io { path: root.to_path_buf(), source })?,
            _ => self.record.write_tree_into(self.record.base(), root)?,
        }
        base.write_git(root).map_err(|source| WorkspaceError::Io { path: root.to_path_buf(), source })?;
        self.record.write_changes_into(self.record.base(), tree, root)?;
        Ok(())
    }

    /// [`Workspace::sandbox_paths`] of a world made at `root` by [`Workspace::remake_at`].
    pub fn sandbox_paths_at(&self, root: &Path) -> SandboxPaths {
        self.with_base_objects(SandboxPaths::of(root, self.source_git.as_ref(), self.source.is_some()))
    }

    /// `paths`, with the object store a `copy` workspace's `.git` borrows readable.
    fn with_base_objects(&self, mut paths: SandboxPaths) -> SandboxPaths {
        paths.readable.extend(self.copy_base.iter().flat_map(|base| base.readable().iter().cloned()));
        paths
    }

    /// Commits what changed since the workspace was prepared on a new branch `branch` of the
    /// user's repository, whose parent is the base commit; returns the commit id. Only for
    /// `worktree` workspaces; dracode makes the commit with libgit2 (no hook runs, nothing is
    /// checked out in the user's repository).
    pub fn commit(&self, branch: &str, message: &str) -> Result<String, git2::Error> {
        self.commit_onto(branch, message, false)
    }

    /// [`Workspace::commit`], moving an existing branch `branch` to the new commit when `force`.
    pub fn commit_onto(&self, branch: &str, message: &str, force: bool) -> Result<String, git2::Error> {
        let (Some(source), Some(base)) = (&self.source, &self.base_commit) else {
            return Err(git2::Error::from_str("no git repository to commit in"));
        };
        let recorded = *self.recorded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let tree = match recorded {
            Some(tree) => tree,
            None => self.record.snapshot()?,
        };
        let id = worktree::commit_into(source, self.record.repo(), tree, Oid::from_str(base)?, branch, message, force)?;
        Ok(id.to_string())
    }

    /// What changed since the workspace was prepared (`None`: nothing), from dracode's own
    /// record: nothing the agent did to a `.git` hides a change.
    pub fn changes(&self) -> Result<Option<Changes>, git2::Error> {
        let (tree, changes) = self.record.changes_now()?;
        *self.recorded.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(tree);
        Ok(changes)
    }

    /// The paths `keep` names and `protect` does not that are neither in the tree
    /// [`Workspace::changes`] recorded last nor unchanged since the workspace was prepared: what
    /// a check's world gets from the workspace besides the record ([`super::unrecorded::kept`]);
    /// `skip` (absolute paths) is never kept. Called when no command of the task runs.
    pub fn kept_for_check(
        &self,
        keep: &dracode_sandbox::Protect,
        protect: &dracode_sandbox::Protect,
        skip: &[PathBuf],
    ) -> Result<Vec<String>, WorkspaceError> {
        let recorded = *self.recorded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(tree) = recorded else { return Ok(Vec::new()) };
        let recorded = Recorded::of(self.record.repo(), tree)?;
        let skip: Vec<Vec<u8>> = skip
            .iter()
            .filter_map(|p| p.strip_prefix(&self.root).ok())
            .filter(|rel| !rel.as_os_str().is_empty())
            .map(|rel| std::os::unix::ffi::OsStrExt::as_bytes(rel.as_os_str()).to_vec())
            .collect();
        let rules = Rules { recorded: &recorded, inventory: &self.inventory, keep, protect, skip: &skip };
        super::unrecorded::kept(&self.root, &rules).map_err(|source| WorkspaceError::Io { path: self.root.clone(), source })
    }

    /// The tree [`Workspace::changes`] recorded last; `None` before.
    pub fn recorded_tree(&self) -> Option<Oid> {
        *self.recorded.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The repository the git tools may open: the one pinned when the workspace was made.
    pub fn pinned_git(&self) -> Option<crate::tools::PinnedGit> {
        let (git_dir, workdir) = self.git.as_ref()?;
        crate::tools::PinnedGit::new(git_dir, workdir)
    }

    /// The change record.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// What the OS sandbox must let this task's commands write and read, and what it must hide.
    ///
    /// With `isolation = "none"` the workspace *is* the user's checkout, so its `.git` (config
    /// with any `extraheader` token, hooks, refs) lies inside the writable root and nothing here
    /// can protect it: use `worktree` or `copy` for untrusted tasks.
    pub fn sandbox_paths(&self) -> SandboxPaths {
        self.with_base_objects(SandboxPaths::of(&self.root, self.source_git.as_ref(), self.source.is_some()))
    }
}

impl SandboxPaths {
    /// The paths of a workspace at `root` made from a repository with `source_git` (none with
    /// `isolation = "none"`), whose objects it borrows when `borrows` (a worktree).
    fn of(root: &Path, source_git: Option<&GitDirs>, borrows: bool) -> SandboxPaths {
        let writable = vec![root.to_path_buf()];
        let Some(git) = source_git else { return SandboxPaths { writable, ..SandboxPaths::default() } };
        let mut hidden = vec![git.git_dir.clone()];
        if git.common_dir != git.git_dir {
            hidden.push(git.common_dir.clone());
        }
        let readable = if borrows { git.object_dirs.clone() } else { Vec::new() };
        SandboxPaths { writable, readable, hidden }
    }

    /// What [`Workspace::sandbox_paths`] will be for a workspace of `repo` with `isolation`,
    /// before it is made: `root` stands for the workspace root (with `none`, `repo` itself).
    pub fn planned(repo: &Path, isolation: Isolation, root: &Path) -> SandboxPaths {
        let source = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
        match isolation {
            Isolation::None => SandboxPaths::of(&source, None, false),
            Isolation::Copy => SandboxPaths::of(root, Repository::discover(&source).ok().map(|r| GitDirs::of(&r)).as_ref(), false),
            Isolation::Worktree => SandboxPaths::of(root, Repository::open(&source).ok().map(|r| GitDirs::of(&r)).as_ref(), true),
        }
    }
}

/// Copies `carried` into the workspace at `root` (unless it is there already: `from` is
/// `None`) and excludes its paths in each repository of `git_dirs` (`info/exclude`), so neither
/// the change record nor the task's `git status` sees them.
pub fn carry_into(root: &Path, carried: &Carried, git_dirs: &[PathBuf]) -> std::io::Result<()> {
    if let Some(from) = &carried.from {
        super::carry::copy_outputs(from, root, &carried.paths)?;
    }
    let lines = super::carry::exclude_lines(&carried.paths);
    for git_dir in git_dirs {
        let info = git_dir.join("info");
        std::fs::create_dir_all(&info)?;
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(info.join("exclude"))?;
        file.write_all(lines.as_bytes())?;
    }
    Ok(())
}

/// A task's folder: an [`OwnedDir`] with the workspace root `ws/` (unless the task works in
/// place) and, for a task in place (`isolation = "none"`), its change record `record.git/`
/// (the others write into the run's stores, [`super::run_stores`]).
struct TaskDir {
    /// The workspace root inside it.
    root: PathBuf,
    /// Where the change record lives (created by [`Record::create_at`]).
    record: PathBuf,
    _dir: OwnedDir,
}

impl TaskDir {
    /// A new owned folder with an empty `ws/`.
    fn create() -> Result<TaskDir, WorkspaceError> {
        let mut dir = Self::create_without_workspace()?;
        let io = |source| WorkspaceError::Io { path: std::env::temp_dir(), source };
        let root = dir._dir.path().join("ws");
        std::fs::create_dir(&root).map_err(io)?;
        dir.root = root.canonicalize().map_err(io)?;
        Ok(dir)
    }

    /// A new owned folder for the record only (`isolation = "none"`).
    fn create_without_workspace() -> Result<TaskDir, WorkspaceError> {
        let io = |source| WorkspaceError::Io { path: std::env::temp_dir(), source };
        let dir = OwnedDir::create(TASK_DIR_PREFIX).map_err(io)?;
        Ok(TaskDir { root: PathBuf::new(), record: dir.path().join("record.git"), _dir: dir })
    }
}

/// The tree at `prefix` (`sub/dir/`) in `tree`; `None` when the folder is not in it.
fn subtree(repo: &Repository, tree: &git2::Tree<'_>, prefix: &str) -> Result<Option<Oid>, git2::Error> {
    let rel = prefix.trim_end_matches('/');
    if rel.is_empty() {
        return Ok(Some(tree.id()));
    }
    match tree.get_path(Path::new(rel)) {
        Ok(entry) if entry.kind() == Some(git2::ObjectType::Tree) => Ok(Some(repo.find_tree(entry.id())?.id())),
        _ => Ok(None),
    }
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

    #[test]
    fn copy_workspaces_of_one_run_write_no_object_and_only_the_git_files_git_needs() {
        // At 1,000 tasks every file made and removed counts: a task's folder holds its lock and
        // its workspace, whose `.git` borrows the run's baseline objects (no pack, no loose
        // object, no reflog, no sample hook); its record writes into the run's records store.
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("a.txt"), "1\n").unwrap();
        let names = |dir: &Path| -> Vec<String> {
            let mut names: Vec<String> =
                std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            names.sort();
            names
        };
        let stores = RunStores::default();
        let mut bases = Vec::new();
        for _ in 0..2 {
            let ws = Workspace::prepare_carrying(&stores, src.path(), Isolation::Copy, "HEAD", None, None).unwrap();
            assert_eq!(names(ws.root.parent().unwrap()), ["owner.lock", "ws"]);
            assert_eq!(names(&ws.root.join(".git")), ["HEAD", "config", "index", "objects", "packed-refs", "refs"]);
            assert_eq!(names(&ws.root.join(".git/objects")), ["info"]);
            assert_eq!(git(&ws.root, &["log", "--format=%s"]), "dracode baseline\n");
            assert_eq!(git(&ws.root, &["status", "--porcelain"]), "");
            std::fs::write(ws.root.join("a.txt"), "2\n").unwrap();
            assert_eq!(ws.changes().unwrap().unwrap().files, ["a.txt"]);
            bases.push(ws.copy_base.clone().unwrap().readable()[0].clone());
        }
        assert_eq!(bases[0], bases[1], "one base for the run");
    }

    #[test]
    fn git_status_in_a_fresh_copy_workspace_is_clean_and_then_shows_the_edit() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("src")).unwrap();
        std::fs::write(src.path().join("src/a.rs"), "fn a() {}\n").unwrap();
        std::fs::write(src.path().join("b.txt"), "b\n").unwrap();
        let ws = Workspace::prepare(src.path(), Isolation::Copy, "HEAD", None).unwrap();
        assert_eq!(git(&ws.root, &["status", "--porcelain"]), "");
        std::fs::write(ws.root.join("b.txt"), "changed\n").unwrap();
        assert_eq!(git(&ws.root, &["status", "--porcelain"]), " M b.txt\n");
    }

    #[test]
    fn a_copy_workspace_and_its_record_store_objects_as_packs_git_reads() {
        // A loose object is a file (and often a folder): the baseline and the record's
        // snapshots are written as one pack each, which the git CLI reads like any other.
        let src = tempfile::tempdir().unwrap();
        for i in 0..50 {
            std::fs::create_dir_all(src.path().join(format!("d{}", i % 7))).unwrap();
            std::fs::write(src.path().join(format!("d{}/f{i}.txt", i % 7)), format!("file {i}\n")).unwrap();
        }
        let ws = Workspace::prepare(src.path(), Isolation::Copy, "HEAD", None).unwrap();
        std::fs::write(ws.root.join("d3/f3.txt"), "changed\n").unwrap();
        std::fs::write(ws.root.join("new.txt"), "new\n").unwrap();
        assert_eq!(ws.changes().unwrap().unwrap().files, ["d3/f3.txt", "new.txt"]);
        let base = ws.copy_base.clone().unwrap().readable()[0].clone();
        for objects in [base, ws.record().repo().path().join("objects")] {
            let loose: Vec<String> = std::fs::read_dir(&objects)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.len() == 2)
                .collect();
            assert!(loose.is_empty(), "loose objects in {}: {loose:?}", objects.display());
            let packs = std::fs::read_dir(objects.join("pack"))
                .unwrap()
                .filter(|e| e.as_ref().unwrap().path().extension() == Some("pack".as_ref()));
            assert!(packs.count() >= 1, "no pack in {}", objects.display());
        }
        git(&ws.root, &["fsck", "--strict"]);
        assert_eq!(git(&ws.root, &["log", "--format=%s"]), "dracode baseline\n");
        assert_eq!(git(&ws.root, &["ls-tree", "-r", "--name-only", "HEAD"]).lines().count(), 50);
        assert_eq!(git(&ws.root, &["show", "HEAD:d3/f3.txt"]), "file 3\n");
        git(&ws.root, &["add", "-A"]);
        git(&ws.root, &["-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "agent"]);
        let diff = git(&ws.root, &["diff", "HEAD~1", "HEAD"]);
        assert!(diff.contains("-file 3\n+changed\n") && diff.contains("+new\n"), "{diff}");
        assert_eq!(git(&ws.root, &["diff", "--stat", "HEAD~1", "HEAD"]).lines().count(), 3);
        let record = ws.record().repo().path().to_path_buf();
        let record_git = |args: &[&str]| git(&record, &[&["--git-dir=.", "--work-tree"], &[ws.root.to_str().unwrap()][..], args].concat());
        record_git(&["fsck", "--strict", "--no-dangling"]);
    }

    use crate::batch::test_git as git;

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
        let git_dir = files_under(&root.join(".git"));

        let ws = Workspace::prepare(root, Isolation::Worktree, "HEAD~1", None).unwrap();
        assert!(ws.root.join(".git").is_dir(), "a git directory of its own");
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
        assert!(!wt_root.parent().unwrap().exists(), "the task folder goes too");
        assert!(files_under(&root.join(".git")) == git_dir, "the user's .git is byte-for-byte unchanged");
        assert_eq!(git(root, &["worktree", "list"]).lines().count(), 1, "only the main worktree remains");
        assert_eq!(git(root, &["status", "--porcelain"]), status);
        assert_eq!(git(root, &["branch", "--list"]), branches);
        assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "v2\n");
    }

    /// Every file under `dir` with its bytes.
    fn files_under(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
        let mut files = std::collections::BTreeMap::new();
        for entry in ignore::WalkBuilder::new(dir).standard_filters(false).build().flatten() {
            if entry.file_type().is_some_and(|t| t.is_file()) {
                files.insert(entry.path().to_path_buf(), std::fs::read(entry.path()).unwrap());
            }
        }
        files
    }

    #[test]
    fn sandbox_paths_open_the_workspace_and_the_user_objects_and_hide_the_user_git_dir() {
        let src = tempfile::tempdir().unwrap();
        let root = src.path().canonicalize().unwrap();
        git(&root, &["init", "-q"]);
        std::fs::write(root.join("a.txt"), "1\n").unwrap();
        git(&root, &["add", "a.txt"]);
        git(&root, &["-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "one"]);

        let ws = Workspace::prepare(&root, Isolation::Worktree, "HEAD", None).unwrap();
        let paths = ws.sandbox_paths();
        assert_eq!(paths.writable, std::slice::from_ref(&ws.root));
        assert_eq!(paths.readable, [root.join(".git/objects")]);
        assert_eq!(paths.hidden, [root.join(".git")]);
        let alternates = std::fs::read_to_string(ws.root.join(".git/objects/info/alternates")).unwrap();
        assert_eq!(alternates.trim(), root.join(".git/objects").display().to_string());

        let copy = Workspace::prepare(&root, Isolation::Copy, "HEAD", None).unwrap();
        let paths = copy.sandbox_paths();
        let base_objects = copy.copy_base.clone().unwrap().readable()[0].clone();
        assert_eq!((paths.writable, paths.readable, paths.hidden), (vec![copy.root.clone()], vec![base_objects], vec![root.join(".git")]));
        assert!(!copy.root.starts_with(&root) && !ws.root.starts_with(&root));

        let none = Workspace::prepare(&root, Isolation::None, "HEAD", None).unwrap();
        assert_eq!(none.sandbox_paths(), SandboxPaths { writable: vec![root.clone()], ..SandboxPaths::default() });
    }

    #[test]
    fn a_linked_worktree_or_a_shallow_clone_as_the_source_works() {
        let tmp = tempfile::tempdir().unwrap();
        let main = tmp.path().canonicalize().unwrap().join("main");
        std::fs::create_dir(&main).unwrap();
        git(&main, &["init", "-q", "-b", "main"]);
        for n in ["one", "two"] {
            std::fs::write(main.join("a.txt"), n).unwrap();
            git(&main, &["add", "a.txt"]);
            git(&main, &["-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", n]);
        }
        let linked = main.with_file_name("linked");
        git(&main, &["worktree", "add", "-q", "--detach", linked.to_str().unwrap(), "HEAD~1"]);
        let ws = Workspace::prepare(&linked, Isolation::Worktree, "HEAD", None).unwrap();
        assert_eq!(std::fs::read_to_string(ws.root.join("a.txt")).unwrap(), "one");
        let hidden = ws.sandbox_paths().hidden;
        assert_eq!(hidden, [main.join(".git/worktrees/linked"), main.join(".git")]);

        let shallow = main.with_file_name("shallow");
        let url = format!("file://{}", main.display());
        git(tmp.path(), &["clone", "-q", "--depth", "1", &url, shallow.to_str().unwrap()]);
        let ws = Workspace::prepare(&shallow, Isolation::Worktree, "HEAD", None).unwrap();
        assert_eq!(git(&ws.root, &["log", "--format=%s"]), "two\n", "history ends where the clone's does");
    }

    #[test]
    fn none_outside_git_records_changes_without_writing_a_git_dir_there() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("kept"), "0").unwrap();
        let ws = Workspace::prepare(src.path(), Isolation::None, "HEAD", Some(Path::new("sub"))).unwrap();
        assert!(ws.workdir.ends_with("sub"));
        std::fs::write(ws.root.join("x"), "1").unwrap();
        assert_eq!(ws.changes().unwrap().map(|c| c.files), Some(vec!["x".to_string()]));
        assert!(!src.path().join(".git").exists());
    }

    #[test]
    fn patches_of_a_subfolder_apply_at_the_repository_root() {
        let user = tempfile::tempdir().unwrap();
        let root = user.path();
        std::fs::create_dir_all(root.join("pkg/app")).unwrap();
        std::fs::write(root.join("pkg/app/main.py"), "print(1)\n").unwrap();
        std::fs::write(root.join("top.txt"), "top\n").unwrap();
        git(root, &["init", "-q"]);
        git(root, &["add", "-A"]);
        git(root, &["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "base"]);
        for isolation in [Isolation::Copy, Isolation::None] {
            let ws = Workspace::prepare(&root.join("pkg/app"), isolation, "HEAD", None).unwrap();
            std::fs::write(ws.root.join("main.py"), "print(2)\n").unwrap();
            std::fs::write(ws.root.join("new.py"), "x = 1\n").unwrap();
            let changes = ws.changes().unwrap().expect("changed");
            assert_eq!(changes.files, ["pkg/app/main.py", "pkg/app/new.py"], "{isolation:?}");
            drop(ws);
            if isolation == Isolation::None {
                git(root, &["checkout", "-q", "--", "."]);
                std::fs::remove_file(root.join("pkg/app/new.py")).unwrap();
            }
            std::fs::write(root.join("p.patch"), &changes.patch).unwrap();
            git(root, &["apply", "--check", "p.patch"]);
            std::fs::remove_file(root.join("p.patch")).unwrap();
        }
    }
}
