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
    /// Each repository's checkout at a base, for its `worktree` tasks.
    checkouts: BTreeMap<(PathBuf, String), Arc<CopyBase>>,
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

    /// The base of the `worktree` tasks of the repository at `source` (canonical) at `base` (a
    /// commit-ish, resolved when the first task asks): a checkout made once per run, as a
    /// task's repository is made ([`super::worktree::create`]), whose files and `.git` every task
    /// copies.
    pub fn checkout_base(&self, source: &Path, base: &str) -> Result<Arc<CopyBase>, BaseError> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (source.to_path_buf(), base.to_string());
        if let Some(made) = inner.checkouts.get(&key) {
            return Ok(made.clone());
        }
        let dir = inner.folder()?;
        let at = dir.path().join(format!("checkout-{}", inner.checkouts.len()));
        let made = Arc::new(CopyBase::checkout(&mut inner, source, base, &at, dir)?);
        inner.checkouts.insert(key, made.clone());
        Ok(made)
    }
}

impl Inner {
    /// The records' store of the run for records that borrow `object_dirs` (a repository's
    /// object stores), made now when this run has none yet.
    fn records_store(&mut self, object_dirs: &[PathBuf]) -> Result<Arc<RecordsStore>, BaseError> {
        if let Some(store) = self.records.get(object_dirs) {
            return Ok(store.clone());
        }
        let dir = self.folder()?;
        let path = dir.path().join(format!("records-{}.git", self.records.len()));
        super::fresh_repo::init_once(&path, true)?;
        write_alternates(&path.join("objects"), object_dirs).map_err(|e| io(&path, e))?;
        let store = Arc::new(RecordsStore { path, _dir: dir });
        self.records.insert(object_dirs.to_vec(), store.clone());
        Ok(store)
    }

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

/// What every `copy` workspace of one source, or every `worktree` workspace of one repository
/// and base, starts from (see the module).
pub struct CopyBase {
    /// The working tree every task's files are copied from.
    root: PathBuf,
    /// Its entries, parents first, relative to `root`.
    entries: Vec<(PathBuf, Kind)>,
    /// The files of a task's `.git`, as bytes.
    git: GitFiles,
    /// The object stores a task's `.git` borrows (its `objects/info/alternates`).
    borrowed: Vec<PathBuf>,
    /// Of those, what a task's commands must be given to read (the copy baseline's store; a
    /// repository's own stores are opened by the workspace's sandbox paths already).
    readable: Vec<PathBuf>,
    /// The change records' object store (a bare repository).
    records: PathBuf,
    /// The records' store when the run's records of that repository share it.
    _records: Option<Arc<RecordsStore>>,
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

/// Files from which a base is copied on more than one thread (fewer are not worth a thread).
const PARALLEL_FROM: usize = 256;

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
    /// Its branch (a copy's baseline) or the repository's tags (a checkout).
    packed_refs: Option<Vec<u8>>,
    /// A shallow clone's boundary.
    shallow: Option<Vec<u8>>,
    /// `info/exclude`, as a repository made by git has it (a checkout's; agents append to it).
    info_exclude: Option<Vec<u8>>,
}

impl CopyBase {
    /// Copies `source` into `at/ws`, commits it there as the baseline, and makes the records'
    /// store `at/record.git`.
    fn make(source: &Path, at: &Path, dir: Arc<OwnedDir>) -> Result<CopyBase, BaseError> {
        let root = at.join("ws");
        std::fs::create_dir_all(&root).map_err(|e| io(&root, e))?;
        let entries = copy_source(source, &root).map_err(|e| io(source, e))?;
        let (repo, tree) = super::snapshot::init_baseline(&root)?;
        let git = GitFiles::of_baseline(&repo)?;
        let objects = repo.path().join("objects");
        let records = at.join("record.git");
        super::fresh_repo::init_once(&records, true)?;
        write_alternates(&records.join("objects"), std::slice::from_ref(&objects)).map_err(|e| io(&records, e))?;
        let (borrowed, readable) = (vec![objects.clone()], vec![objects]);
        Ok(CopyBase { root, entries, git, borrowed, readable, records, _records: None, tree, source: SourceRepo::of(source), _dir: dir })
    }

    /// Checks the repository at `source` out at `base` into `at/ws` as a task's repository is
    /// made; its records go to the run's store for that repository.
    fn checkout(inner: &mut Inner, source: &Path, base: &str, at: &Path, dir: Arc<OwnedDir>) -> Result<CopyBase, BaseError> {
        let root = at.join("ws");
        std::fs::create_dir_all(&root).map_err(|e| io(&root, e))?;
        let task = super::worktree::create(source, base, &root)?;
        let tree = task.repo.find_commit(task.base)?.tree_id();
        let entries = list_checkout(&root).map_err(|e| io(&root, e))?;
        let git = GitFiles::of_checkout(task.repo.path())?;
        let alternates = std::fs::read_to_string(task.repo.path().join("objects/info/alternates")).map_err(|e| io(&root, e))?;
        let borrowed = alternates.lines().filter(|l| !l.trim().is_empty()).map(PathBuf::from).collect();
        let store = inner.records_store(&task.source.object_dirs)?;
        let source = SourceRepo { base_commit: Some(task.base.to_string()), prefix: String::new(), git: Some(task.source) };
        let records = store.path.clone();
        Ok(CopyBase { root, entries, git, borrowed, readable: Vec::new(), records, _records: Some(store), tree, source, _dir: dir })
    }

    /// Copies the base's files into the empty folder `to`: the folders first, then the files
    /// and links, on one thread per core when there are many (as `git checkout` does: making a
    /// file, not writing its bytes, is what costs).
    pub fn copy_into(&self, to: &Path) -> std::io::Result<()> {
        for (rel, _) in self.entries.iter().filter(|(_, kind)| *kind == Kind::Dir) {
            std::fs::create_dir(to.join(rel))?;
        }
        let files: Vec<&(PathBuf, Kind)> = self.entries.iter().filter(|(_, kind)| *kind != Kind::Dir).collect();
        let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get).min(files.len() / PARALLEL_FROM + 1).min(4);
        if threads <= 1 {
            return self.copy_files(&files, to);
        }
        let chunk = files.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = files.chunks(chunk).map(|part| scope.spawn(move || self.copy_files(part, to))).collect();
            handles.into_iter().try_for_each(|h| h.join().unwrap_or_else(|_| Err(std::io::Error::other("a copying thread panicked"))))
        })
    }

    /// Copies `files` (files and links of the base) into `to`, whose folders exist.
    fn copy_files(&self, files: &[&(PathBuf, Kind)], to: &Path) -> std::io::Result<()> {
        for (rel, kind) in files {
            let target = to.join(rel);
            match kind {
                Kind::Link => std::os::unix::fs::symlink(std::fs::read_link(self.root.join(rel))?, &target)?,
                _ => drop(std::fs::copy(self.root.join(rel), &target)?),
            }
        }
        Ok(())
    }

    /// Makes `root/.git` a repository at the baseline commit whose objects are the base's, its
    /// index matching the baseline (so `git status` starts clean): no object is written.
    pub fn write_git(&self, root: &Path) -> std::io::Result<()> {
        let git = root.join(".git");
        std::fs::create_dir_all(git.join("refs"))?;
        write_alternates(&git.join("objects"), &self.borrowed)?;
        std::fs::write(git.join("HEAD"), &self.git.head)?;
        std::fs::write(git.join("config"), &self.git.config)?;
        if let Some(refs) = &self.git.packed_refs {
            std::fs::write(git.join("packed-refs"), refs)?;
        }
        if let Some(shallow) = &self.git.shallow {
            std::fs::write(git.join("shallow"), shallow)?;
        }
        if let Some(exclude) = &self.git.info_exclude {
            std::fs::create_dir(git.join("info"))?;
            std::fs::write(git.join("info/exclude"), exclude)?;
        }
        std::fs::write(git.join("index"), &self.git.index)
    }

    /// A change record of the working tree `workdir`, copied from this base: its base is the
    /// baseline tree, its objects go to the run's records store.
    pub fn record(&self, workdir: &Path) -> Result<Record, git2::Error> {
        Record::in_store(&self.records, workdir, self.tree, &self.source.prefix)
    }

    /// What a task's commands must be given to read: the object store a copy's `.git`
    /// borrows (none for a checkout, whose stores are the repository's).
    pub fn readable(&self) -> &[PathBuf] {
        &self.readable
    }

    /// The baseline tree.
    pub fn tree(&self) -> Oid {
        self.tree
    }
}

impl GitFiles {
    /// The files a task's `.git` gets from the checkout whose git directory is `git_dir`.
    fn of_checkout(git_dir: &Path) -> Result<GitFiles, BaseError> {
        let read = |name: &str| std::fs::read(git_dir.join(name)).map_err(|e| io(&git_dir.join(name), e));
        let optional = |name: &str| std::fs::read(git_dir.join(name)).ok();
        Ok(GitFiles {
            head: read("HEAD")?,
            config: read("config")?,
            index: read("index")?,
            packed_refs: optional("packed-refs"),
            shallow: optional("shallow"),
            info_exclude: optional("info/exclude"),
        })
    }

    /// The files a task's `.git` gets from the baseline repository `repo`.
    fn of_baseline(repo: &Repository) -> Result<GitFiles, BaseError> {
        let read = |name: &str| std::fs::read(repo.path().join(name)).map_err(|e| io(&repo.path().join(name), e));
        let head = repo.head()?;
        let (Some(branch), Some(commit)) = (head.name().ok(), head.target()) else {
            return Err(git2::Error::from_str("the baseline's HEAD is not a branch").into());
        };
        let packed_refs = format!("# pack-refs with: peeled fully-peeled sorted \n{commit} {branch}\n").into_bytes();
        Ok(GitFiles {
            head: read("HEAD")?,
            config: read("config")?,
            index: read("index")?,
            packed_refs: Some(packed_refs),
            shallow: None,
            info_exclude: None,
        })
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

/// The entries of the checkout at `root` (every one but its `.git`), parents first.
fn list_checkout(root: &Path) -> std::io::Result<Vec<(PathBuf, Kind)>> {
    let walk = ignore::WalkBuilder::new(root).standard_filters(false).filter_entry(|e| e.file_name() != ".git").build();
    let mut entries = Vec::new();
    for entry in walk {
        let entry = entry.map_err(std::io::Error::other)?;
        let rel = entry.path().strip_prefix(root).map_err(std::io::Error::other)?;
        if rel.as_os_str().is_empty() {
            continue;
        }
        let kind = match entry.file_type() {
            Some(k) if k.is_dir() => Kind::Dir,
            Some(k) if k.is_symlink() => Kind::Link,
            _ => Kind::File,
        };
        entries.push((rel.to_path_buf(), kind));
    }
    Ok(entries)
}

/// A [`BaseError`] of `path`.
fn io(path: &Path, source: std::io::Error) -> BaseError {
    BaseError::Io { path: path.to_path_buf(), source }
}
