//! Folders in the temp dir that belong to this process while it runs ([`OwnedDir`]): a task's
//! workspace and record (`dracode-workspace-<pid>-<random>/`), a task's TMPDIR and HOME
//! (`dracode-task-…`), a run's copy bases. Each holds an `owner.lock`, the pid `flock`-ed while the
//! folder is used. A run killed by SIGKILL cannot remove them, so the first workspace of the next
//! run removes those whose process is gone and whose lock is free ([`sweep_leftovers`]).

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// Task folders in the temp dir start with this, then the owner's pid and `-`.
pub const TASK_DIR_PREFIX: &str = "dracode-workspace-";
/// The prefix of a task's own TMPDIR/HOME folder (an [`OwnedDir`] too).
pub const TASK_TEMP_PREFIX: &str = "dracode-task-";

/// The file in a task folder that holds the owner's pid and its lock.
const OWNER_FILE: &str = "owner.lock";

/// A folder in the temp dir owned by this process while it exists: `<prefix><pid>-<random>/`
/// (prefix [`TASK_DIR_PREFIX`] or [`TASK_TEMP_PREFIX`]) with its `owner.lock` locked. What a run killed with
/// SIGKILL leaves behind is removed by the next run ([`sweep_leftovers`]).
pub struct OwnedDir {
    /// Removed on drop, before the lock is released.
    temp: tempfile::TempDir,
    /// Locked while the task runs; the lock dies with the process, SIGKILL included.
    _owner: File,
}

impl OwnedDir {
    /// A new owned folder in the temp dir, its name starting with `prefix`.
    pub fn create(prefix: &str) -> std::io::Result<OwnedDir> {
        let pid = std::process::id();
        let temp = tempfile::Builder::new().prefix(&format!("{prefix}{pid}-")).tempdir_in(std::env::temp_dir())?;
        let mut owner = File::create(temp.path().join(OWNER_FILE))?;
        if !try_lock(&owner)? {
            return Err(std::io::Error::other("a fresh task folder is locked by another process"));
        }
        writeln!(owner, "{pid}")?;
        Ok(OwnedDir { temp, _owner: owner })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.temp.path()
    }
}

/// Takes `file`'s exclusive lock without waiting; `false` when another process holds it.
fn try_lock(file: &File) -> std::io::Result<bool> {
    match rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// What every run does once before its first workspace: removes the task folders in TMPDIR that
/// runs killed before they could clean up left behind ([`sweep_leftovers`]).
pub fn sweep_killed_runs() {
    let removed = sweep_leftovers(&std::env::temp_dir());
    if removed > 0 {
        tracing::info!("removed {removed} workspace folder(s) left by runs that were killed");
    }
}

/// Removes the task folders in `tmp` whose owner is gone — its pid does not run and nobody
/// holds its `owner.lock` (a process in another PID namespace sharing `tmp` would) — and
/// returns how many it removed.
pub fn sweep_leftovers(tmp: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(tmp) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let owner_pid = |n: &str| {
            let rest = [TASK_DIR_PREFIX, TASK_TEMP_PREFIX].iter().find_map(|prefix| n.strip_prefix(prefix))?;
            rest.split_once('-')?.0.parse::<u32>().ok()
        };
        let Some(pid) = name.to_str().and_then(owner_pid) else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_dir()) || super::worktree::process_alive(pid) {
            continue;
        }
        let path = entry.path();
        // Held until the folder is gone, so no second sweeper sees a free lock meanwhile.
        let owner = File::open(path.join(OWNER_FILE));
        if owner.as_ref().is_ok_and(|f| !try_lock(f).unwrap_or(false)) {
            continue;
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Folders being removed off the tasks' critical path: a task's workspace, record, TMPDIR and
/// check worlds are dropped on a blocking thread while the next task starts, and the run waits
/// for every removal before `run.finished` ([`Removals::wait`]), so the `TOTAL` line counts them
/// and nothing is left when the process exits.
#[derive(Default)]
pub struct Removals {
    pending: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Removals {
    /// Drops `what` (whatever holds the folders) on a blocking thread, now; not awaited.
    pub fn remove(&self, what: impl Send + 'static) {
        let handle = tokio::task::spawn_blocking(move || drop(what));
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.retain(|h| !h.is_finished());
        pending.push(handle);
    }

    /// Waits until every removal started so far has ended.
    pub async fn wait(&self) {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        for handle in pending {
            let _ = handle.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_removes_folders_of_dead_owners_and_keeps_live_or_locked_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let folder = |pid: u32, tag: &str| {
            let dir = tmp.path().join(format!("{TASK_DIR_PREFIX}{pid}-{tag}"));
            std::fs::create_dir_all(dir.join("ws/.git")).unwrap();
            std::fs::write(dir.join(OWNER_FILE), format!("{pid}\n")).unwrap();
            dir
        };
        let (gone, no_lock_file) = (folder(dead, "a"), folder(dead, "b"));
        std::fs::remove_file(no_lock_file.join(OWNER_FILE)).unwrap();
        let live = folder(std::process::id(), "c");
        let locked = folder(dead, "d");
        let lock = File::open(locked.join(OWNER_FILE)).unwrap();
        assert!(try_lock(&lock).unwrap(), "held as another PID namespace's dracode would");
        let unrelated = tmp.path().join("dracode-task-abc");
        std::fs::create_dir(&unrelated).unwrap();

        assert_eq!(sweep_leftovers(tmp.path()), 2);
        assert!(!gone.exists() && !no_lock_file.exists());
        assert!(live.exists() && locked.exists() && unrelated.exists());
    }

    #[test]
    fn a_task_temp_folder_left_by_a_dead_run_is_swept_and_a_live_one_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let left = tmp.path().join(format!("{TASK_TEMP_PREFIX}{dead}-x"));
        std::fs::create_dir_all(left.join("tmp")).unwrap();
        let live = OwnedDir::create(TASK_TEMP_PREFIX).unwrap();
        assert_eq!(sweep_leftovers(tmp.path()), 1);
        assert!(!left.exists());
        assert!(live.path().exists() && live.path().file_name().unwrap().to_string_lossy().starts_with(TASK_TEMP_PREFIX));
    }
}
