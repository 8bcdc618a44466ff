//! What the workspaces of one run share, made once per run and source folder rather than once
//! per task ([`RunStores`]).
//!
//! A `copy` workspace needs the source's files, a repository of its own whose one commit holds
//! them (for the agent's git), and a change record whose base is that tree. Made per task, that
//! is a walk of the source honouring `.gitignore`, every file hashed twice, two packs written and
//! two repositories of forty entries: on a file system that scans for a free inode on each
//! create, the files, not the bytes, are what a task costs. So the first task of a run makes a
//! [`CopyBase`] in a run folder of its own:
//!
//! - `base/ws/`: a copy of the source (`.gitignore` honoured, no `.git`), the one copy every task
//!   of the run starts from, whatever happens to the source meanwhile;
//! - `base/ws/.git`: its baseline repository; every task's `.git` borrows its objects through
//!   `objects/info/alternates` (readable by the task's commands, never writable), and gets its
//!   `HEAD`, `config`, `index` and branch as bytes: nine entries, no hashing;
//! - `record.git`: the object store of every task's change record (private: no command may
//!   read it), the base objects borrowed the same way.
//!
//! A `worktree` task's record writes into a store of the run too, one per repository whose
//! objects it borrows (`records-N.git`, [`RunStores::records_store`]).
//!
//! The run folder is an [`OwnedDir`]: removed when the last workspace of the run is, or by the
//! next run after a SIGKILL.

use super::change_record::Record;
use super::owned_dir::{OwnedDir, TASK_DIR_PREFIX};
use super::worktree::{GitDirs, repo_prefix};
use git2::{Oid, Repository};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// The copy bases of one run, one per source folder, made on first use.
#[derive(Default)]
pub struct RunStores {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The run's folder, made with the first base or store.
    dir: Option<Arc<OwnedDir>>,
    /// Each canonical source folder's base.
    bases: BTreeMap<PathBuf, Arc<CopyBase>>,
    /// The records' stores of `worktree` tasks, by the object stores they borrow.
    records: BTreeMap<Vec<PathBuf>, Arc<RecordsStore>>,
}

/// A bare repository in the run's folder that the change records of tasks borrowing the same
/// object stores write into (`worktree` tasks of one repository).
pub struct RecordsStore {
    /// The repository.
    pub path: PathBuf,
    /// Holds the run's folder.
    _dir: Arc<OwnedDir>,
}

impl RunStores {
    /// The base of `source` (a canonical path), made now when this run has none yet. Tasks
    /// wait for the first one to be made; it is made once.
    pub fn copy_base(&self, source: &Path) -> Result<Arc<CopyBase>, BaseError> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(base) = inner.bases.get(source) {
            return Ok(base.clone());
        }
        let dir = inner.folder()?;
        let at = dir.path().join(format!("base-{}", inner.bases.len()));
        let base = Arc::new(CopyBase::make(source, &at, dir)?);
        inner.bases.insert(source.to_path_buf(), base.clone());
        Ok(base)
    }

    /// The records' store of the run for records that borrow `object_dirs` (a repository's
    /// object stores), made now when this run has none yet.
    pub fn records_store(&self, object_dirs: &[PathBuf]) -> Result<Arc<RecordsStore>, BaseError> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(store) = inner.records.get(object_dirs) {
            return Ok(store.clone());
        }
        let dir = inner.folder()?;
        let path = dir.path().join(format!("records-{}.git", inner.records.len()));
        super::fresh_repo::init_once(&path, true)?;
        write_alternates(&path.join("objects"), object_dirs).map_err(|e| io(&path, e))?;
        let store = Arc::new(RecordsStore { path, _dir: dir });
        inner.records.insert(object_dirs.to_vec(), store.clone());
        Ok(store)
    }
}

impl Inner {
    /// The run's folder, made on first use.
    fn folder(&mut self) -> Result<Arc<OwnedDir>, BaseError> {
        if let Some(dir) = &self.dir {
            return Ok(dir.clone());
        }
        let made = OwnedDir::create(TASK_DIR_PREFIX).map_err(|e| io(&std::env::temp_dir(), e))?;
        Ok(self.dir.insert(Arc::new(made)).clone())
    }
}

impl RunStores {
    /// Lets go of every base (removed with the last workspace made from it) and of the run's
    /// folder: the run's end.
    pub fn clear(&self) {
        let taken = std::mem::take(&mut *self.inner.lock().unwrap_or_else(PoisonError::into_inner));
        drop(taken);
    }
}

/// What every `copy` workspace of one source starts from (see the module).
pub struct CopyBase {
    /// The working tree every task's files are copied from.
    root: PathBuf,
    /// Its entries, parents first, relative to `root`.
    entries: Vec<(PathBuf, Kind)>,
    /// The files of a task's `.git`, as bytes.
    git: GitFiles,
    /// The baseline repository's object store.
    objects: PathBuf,
    /// The change records' object store (a bare repository).
    records: PathBuf,
    /// The baseline tree: the base of every task's record.
    tree: Oid,
    /// The source's repository: its HEAD, the source folder's path in it (`sub/dir/`), its git
    /// directories (hidden from commands).
    pub(crate) source: SourceRepo,
    /// Holds the run's folder.
    _dir: Arc<OwnedDir>,
}

/// What the repository holding a source folder says about it (all empty outside git).
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceRepo {
    /// Its HEAD commit.
    pub base_commit: Option<String>,
    /// The folder's path in it, with a trailing `/` (empty at the root).
    pub prefix: String,
    /// Its git directories.
    pub git: Option<GitDirs>,
}

/// A kind of entry of the base's working tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Link,
}

/// The files of a fresh task `.git` (beside `objects/info/alternates`).
struct GitFiles {
    head: Vec<u8>,
    config: Vec<u8>,
    index: Vec<u8>,
    packed_refs: Vec<u8>,
}

impl CopyBase {
    /// Copies `source` into `at/ws`, commits it there as the baseline, and makes the records'
    /// store `at/record.git`.
    fn make(source: &Path, at: &Path, dir: Arc<OwnedDir>) -> Result<CopyBase, BaseError> {
        let root = at.join("ws");
        std::fs::create_dir_all(&root).map_err(|e| io(&root, e))?;
        let entries = copy_source(source, &root).map_err(|e| io(source, e))?;
        let (repo, tree) = super::snapshot::init_baseline(&root)?;
        let git = GitFiles::of(&repo)?;
        let objects = repo.path().join("objects");
        let records = at.join("record.git");
        super::fresh_repo::init_once(&records, true)?;
        write_alternates(&records.join("objects"), std::slice::from_ref(&objects)).map_err(|e| io(&records, e))?;
        Ok(CopyBase { root, entries, git, objects, records, tree, source: SourceRepo::of(source), _dir: dir })
    }

    /// Copies the base's files into the empty folder `to`.
    pub fn copy_into(&self, to: &Path) -> std::io::Result<()> {
        for (rel, kind) in &self.entries {
            let target = to.join(rel);
            match kind {
                Kind::Dir => std::fs::create_dir(&target)?,
                Kind::Link => std::os::unix::fs::symlink(std::fs::read_link(self.root.join(rel))?, &target)?,
                Kind::File => drop(std::fs::copy(self.root.join(rel), &target)?),
            }
        }
        Ok(())
    }

    /// Makes `root/.git` a repository at the baseline commit whose objects are the base's, its
    /// index matching the baseline (so `git status` starts clean): no object is written.
    pub fn write_git(&self, root: &Path) -> std::io::Result<()> {
        let git = root.join(".git");
        std::fs::create_dir_all(git.join("refs"))?;
        write_alternates(&git.join("objects"), std::slice::from_ref(&self.objects))?;
        std::fs::write(git.join("HEAD"), &self.git.head)?;
        std::fs::write(git.join("config"), &self.git.config)?;
        std::fs::write(git.join("packed-refs"), &self.git.packed_refs)?;
        std::fs::write(git.join("index"), &self.git.index)
    }

    /// A change record of the working tree `workdir`, copied from this base: its base is the
    /// baseline tree, its objects go to the run's records store.
    pub fn record(&self, workdir: &Path) -> Result<Record, git2::Error> {
        Record::in_store(&self.records, workdir, self.tree, &self.source.prefix)
    }

    /// The object store a task's `.git` borrows from: what its commands must be able to read.
    pub fn objects(&self) -> &Path {
        &self.objects
    }
}

impl GitFiles {
    /// The files a task's `.git` gets from the baseline repository `repo`.
    fn of(repo: &Repository) -> Result<GitFiles, BaseError> {
        let read = |name: &str| std::fs::read(repo.path().join(name)).map_err(|e| io(&repo.path().join(name), e));
        let head = repo.head()?;
        let (Some(branch), Some(commit)) = (head.name().ok(), head.target()) else {
            return Err(git2::Error::from_str("the baseline's HEAD is not a branch").into());
        };
        let packed_refs = format!("# pack-refs with: peeled fully-peeled sorted \n{commit} {branch}\n").into_bytes();
        Ok(GitFiles { head: read("HEAD")?, config: read("config")?, index: read("index")?, packed_refs })
    }
}

impl SourceRepo {
    /// What the repository around `source` says of it.
    pub(crate) fn of(source: &Path) -> SourceRepo {
        let Some(user) = Repository::discover(source).ok().filter(|r| r.workdir().is_some()) else { return SourceRepo::default() };
        SourceRepo {
            base_commit: user.head().ok().and_then(|h| h.target()).map(|o| o.to_string()),
            prefix: repo_prefix(&user, source),
            git: Some(GitDirs::of(&user)),
        }
    }
}

/// Makes `objects` (with `objects/info`) and names each of `borrowed` in its `info/alternates`.
fn write_alternates(objects: &Path, borrowed: &[PathBuf]) -> std::io::Result<()> {
    std::fs::create_dir_all(objects.join("info"))?;
    let listed: String = borrowed.iter().map(|dir| format!("{}\n", dir.display())).collect();
    std::fs::write(objects.join("info/alternates"), listed)
}

/// Copies the files of `from` into `to`, honouring .gitignore and leaving `.git` out; returns
/// what it copied, parents first.
fn copy_source(from: &Path, to: &Path) -> std::io::Result<Vec<(PathBuf, Kind)>> {
    let mut entries = Vec::new();
    for entry in super::snapshot::unignored(from) {
        let entry = entry.map_err(std::io::Error::other)?;
        let rel = entry.path().strip_prefix(from).map_err(std::io::Error::other)?;
        if rel.as_os_str().is_empty() {
            continue;
        }
        let target = to.join(rel);
        let kind = match entry.file_type() {
            Some(k) if k.is_dir() => Kind::Dir,
            Some(k) if k.is_symlink() => Kind::Link,
            _ => Kind::File,
        };
        match kind {
            Kind::Dir => std::fs::create_dir_all(&target)?,
            Kind::Link => std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?,
            Kind::File => drop(std::fs::copy(entry.path(), &target)?),
        }
        entries.push((rel.to_path_buf(), kind));
    }
    Ok(entries)
}

/// Why a run's copy base could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    /// A file or folder could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// Which.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// git failed.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

/// A [`BaseError`] of `path`.
fn io(path: &Path, source: std::io::Error) -> BaseError {
    BaseError::Io { path: path.to_path_buf(), source }
}
