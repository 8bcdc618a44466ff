//! A disk that fills up during a run. A task's commands may fill the file system its workspace,
//! its TMPDIR and often `--out` share; then two things must still hold:
//!
//! - **the artifacts are written whole.** [`Reserve`] holds a few MiB in the output folder from
//!   the start of the run (a hidden file, [`RESERVE_NAME`]). When an artifact write fails because
//!   the disk is full, the reserve is given up and the write tried once more, into its room; it is
//!   taken again once a task has finished (its folders removed, their room given back), and
//!   removed before the run's last file, so the folder never shows it after the run.
//! - **nothing is graded on a full disk.** [`full`] tells whether a file system is full —
//!   counting a reserve given up as still taken, since it is only lent to the artifacts — and a
//!   check that ended there proves nothing (`batch::check::could_not_run`: the task ends
//!   `error`, kind `check_unrunnable`).
//!
//! A reserve file was chosen over preallocating `results.jsonl` past its end
//! (`FALLOC_FL_KEEP_SIZE`): both keep appends working on a full disk (measured on ext4 and
//! tmpfs), but only the reserve also gives room to the files written whole (`junit.xml`,
//! `summary.md`, transcripts, patches, `report.html`), which need new blocks. Holding it costs
//! one `fallocate` per run (8 MiB: 12 ms on a loop-mounted ext4, 4 ms on tmpfs; writing zeros,
//! the fallback where `fallocate` is not supported, 50 ms and 15 ms).

use std::collections::BTreeMap;
use std::io::{self, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The reserve's file in the output folder (hidden; removed before the run's last file, and by
/// the next run when a killed run left it).
pub const RESERVE_NAME: &str = ".dracode-reserve";

/// What the reserve holds: room for the artifacts written while the disk is full — the rest of
/// `results.jsonl`, the finished tasks' transcripts and patches, `junit.xml`, `summary.md` and
/// `report.html` of a run of hundreds of tasks.
pub const RESERVE_BYTES: u64 = 8 << 20;

/// A file system with less than this available (a reserve given up not counted) is full.
pub const FULL_BELOW: u64 = 1 << 20;

/// Bytes of reserves given up (lent to the artifacts) per file system (`st_dev`): the disk is
/// shared by the whole process, so this is too.
static LENT: Mutex<BTreeMap<u64, u64>> = Mutex::new(BTreeMap::new());

/// A file system found full: the path asked about and the bytes left on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskFull {
    /// The path whose file system is full.
    pub path: PathBuf,
    /// Bytes still available there, a reserve given up not counted.
    pub available: u64,
}

impl std::fmt::Display for DiskFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the disk holding `{}` was full ({} KiB free)", self.path.display(), self.available / 1024)
    }
}

impl std::error::Error for DiskFull {}

/// The first of `paths` whose file system is full: less than [`FULL_BELOW`] available once the
/// reserves lent out there are taken off. Available as `df` says it: the blocks ext4 keeps for
/// root do not count, even for root — `statvfs` does not tell them from those ext4 keeps for
/// itself, which nobody can write (a disk filled by root shows up to 16 MiB "free" there). A
/// path that cannot be measured (gone, or a file system without `statvfs`) counts as not full.
pub fn full<'a>(paths: impl IntoIterator<Item = &'a PathBuf>) -> Option<DiskFull> {
    let mut seen = Vec::new();
    for path in paths {
        let Ok(dev) = std::fs::metadata(path).map(|m| m.dev()) else { continue };
        if seen.contains(&dev) {
            continue;
        }
        seen.push(dev);
        let Ok(stat) = rustix::fs::statvfs(path) else { continue };
        let available = stat.f_bavail.saturating_mul(stat.f_frsize).saturating_sub(lent_on(dev));
        if available < FULL_BELOW {
            return Some(DiskFull { path: path.clone(), available });
        }
    }
    None
}

/// Whether `error` says the disk (or the user's quota) is full.
pub fn is_full(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded)
}

fn ledger() -> MutexGuard<'static, BTreeMap<u64, u64>> {
    LENT.lock().unwrap_or_else(PoisonError::into_inner)
}

fn lent_on(dev: u64) -> u64 {
    ledger().get(&dev).copied().unwrap_or(0)
}

/// Adds `bytes` (or, `lend = false`, takes them off) to what is lent out on `dev`.
fn record_lent(dev: u64, bytes: u64, lend: bool) {
    let mut ledger = ledger();
    let entry = ledger.entry(dev).or_default();
    *entry = if lend { entry.saturating_add(bytes) } else { entry.saturating_sub(bytes) };
    if *entry == 0 {
        ledger.remove(&dev);
    }
}

/// Space held back in an output folder for the artifacts (see the module). Shared by every
/// reporter writing there; removed when dropped.
#[derive(Debug)]
pub struct Reserve {
    /// The reserve's file; `None` for [`Reserve::none`].
    path: Option<PathBuf>,
    bytes: u64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The file holds its bytes.
    held: bool,
    /// The file system's device, once the file was made.
    dev: Option<u64>,
    /// How often the reserve was given up because the disk was full.
    given_up: u32,
    /// Its bytes count in [`LENT`]: given up and not taken back yet.
    lent: bool,
}

impl Reserve {
    /// A reserve that holds nothing: writes are tried once (streams, tests, `merge`).
    pub fn none() -> Arc<Reserve> {
        Arc::new(Reserve { path: None, bytes: 0, state: Mutex::default() })
    }

    /// Holds [`RESERVE_BYTES`] in `dir` (an output folder that exists). A disk too full for it
    /// already leaves the run without one (the first failed write is then final, as before).
    pub fn hold(dir: &Path) -> Arc<Reserve> {
        Self::hold_bytes(dir, RESERVE_BYTES)
    }

    /// [`Reserve::hold`] of `bytes`.
    pub fn hold_bytes(dir: &Path, bytes: u64) -> Arc<Reserve> {
        let reserve = Reserve { path: Some(dir.join(RESERVE_NAME)), bytes, state: Mutex::default() };
        let dev = std::fs::metadata(dir).map(|m| m.dev()).ok();
        let mut state = reserve.state();
        state.dev = dev;
        state.held = reserve.take();
        drop(state);
        Arc::new(reserve)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the file and gives it its bytes; on any failure removes it again. True when held.
    fn take(&self) -> bool {
        let Some(path) = &self.path else { return false };
        let made = std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(path).and_then(|file| {
            match rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, self.bytes) {
                Ok(()) => Ok(()),
                // A file system without fallocate: zeros take the room as surely.
                Err(rustix::io::Errno::OPNOTSUPP) => write_zeros(&file, self.bytes),
                Err(e) => Err(e.into()),
            }
        });
        if made.is_err() {
            let _ = std::fs::remove_file(path);
        }
        made.is_ok()
    }

    /// Runs `attempt`; when it fails because the disk is full and the reserve still holds its
    /// room, gives the room up ([`Reserve::give_up`]) and runs `attempt` once more. `attempt`
    /// must leave nothing behind when it fails (a temporary file removed, a line cut off).
    pub fn write<T>(&self, mut attempt: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        match attempt() {
            Err(e) if is_full(&e) && self.give_up() => attempt(),
            other => other,
        }
    }

    /// Removes the reserve's file because the disk is full, so the artifacts have its room;
    /// its bytes count as lent ([`full`]) until it is taken again. True when it held any.
    pub fn give_up(&self) -> bool {
        let mut state = self.state();
        if !state.held || self.path.as_ref().is_none_or(|p| std::fs::remove_file(p).is_err()) {
            return false;
        }
        (state.held, state.lent) = (false, state.dev.is_some());
        state.given_up += 1;
        if let Some(dev) = state.dev {
            record_lent(dev, self.bytes, true);
        }
        true
    }

    /// Takes the room back after the reserve was given up, when the disk has it again (a task's
    /// folders were removed); nothing otherwise.
    pub fn take_back(&self) {
        let mut state = self.state();
        if state.held || state.given_up == 0 || !self.take() {
            return;
        }
        state.held = true;
        if let (true, Some(dev)) = (std::mem::take(&mut state.lent), state.dev) {
            record_lent(dev, self.bytes, false);
        }
    }

    /// How often the disk filled and the reserve was given up.
    pub fn times_given_up(&self) -> u32 {
        self.state().given_up
    }

    /// Removes the reserve for good (before the run's last file, and when dropped): its room goes
    /// to whatever is written next, and the folder no longer holds it.
    pub fn remove(&self) -> io::Result<()> {
        let mut state = self.state();
        if let (true, Some(dev)) = (std::mem::take(&mut state.lent), state.dev) {
            // Lent and never taken back: the loan ends with the reserve.
            record_lent(dev, self.bytes, false);
        }
        let held = std::mem::take(&mut state.held);
        match &self.path {
            Some(path) if held => std::fs::remove_file(path),
            _ => Ok(()),
        }
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// Writes `bytes` zeros to `file` (when `fallocate` is not supported).
fn write_zeros(mut file: &std::fs::File, bytes: u64) -> io::Result<()> {
    let chunk = vec![0u8; 64 * 1024];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_space() -> io::Error {
        io::Error::from_raw_os_error(28)
    }

    #[test]
    fn a_write_that_finds_the_disk_full_gets_the_reserves_room_once() {
        let dir = tempfile::tempdir().unwrap();
        let reserve = Reserve::hold_bytes(dir.path(), 64 * 1024);
        let file = dir.path().join(RESERVE_NAME);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 64 * 1024, "held from the start");
        let mut tries = 0;
        let written = reserve.write(|| {
            tries += 1;
            if tries == 1 { Err(no_space()) } else { Ok(tries) }
        });
        assert_eq!(written.unwrap(), 2, "tried again once");
        assert!(!file.exists(), "given up");
        assert_eq!(reserve.times_given_up(), 1);
        let dev = std::fs::metadata(dir.path()).unwrap().dev();
        assert!(lent_on(dev) >= 64 * 1024, "counted as lent while given up");
        let again = reserve.write(|| -> io::Result<()> { Err(no_space()) });
        assert!(is_full(&again.unwrap_err()), "nothing left to give: the failure stands");
        reserve.take_back();
        assert!(file.exists(), "taken back once there is room");
        reserve.remove().unwrap();
        assert!(!file.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing left in the folder");
    }

    #[test]
    fn other_failures_are_not_tried_again_and_a_dropped_reserve_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let reserve = Reserve::hold_bytes(dir.path(), 4096);
        let mut tries = 0;
        let denied = reserve.write(|| -> io::Result<()> {
            tries += 1;
            Err(io::Error::from_raw_os_error(13))
        });
        assert!(denied.is_err());
        assert_eq!((tries, reserve.times_given_up()), (1, 0));
        assert!(dir.path().join(RESERVE_NAME).exists());
        drop(reserve);
        assert!(!dir.path().join(RESERVE_NAME).exists());
        let none = Reserve::none();
        assert!(none.write(|| -> io::Result<()> { Err(no_space()) }).is_err());
    }

    #[test]
    fn a_file_system_with_room_is_not_full_and_fullness_is_said_plainly() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(full([&dir.path().to_path_buf(), &PathBuf::from("/no/such/path")]), None);
        let said = DiskFull { path: PathBuf::from("/tmp/ws"), available: 12 * 1024 }.to_string();
        assert_eq!(said, "the disk holding `/tmp/ws` was full (12 KiB free)");
    }
}
