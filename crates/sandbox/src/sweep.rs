//! The sweep: dracode's own search for processes of a confined command that outlived their
//! supervisor, independent of that supervisor being alive.
//!
//! A supervisor kills its command's whole tree when the command ends; if the supervisor itself
//! died first (killed from outside, or by a bug), the tree's orphans would be re-parented to
//! init and run on. So dracode marks itself a child subreaper ([`become_subreaper`], first thing
//! in the commands that run tasks): such orphans are re-parented to dracode instead. A sweep
//! ([`TaskSweep::sweep`]; at the start of every grading round, before dracode puts protected
//! paths back, records the changes and runs the check, and again when the attempt ends) finds
//! them without trusting anything they can change: a child of dracode (`PPid`) carrying more
//! seccomp filters (`Seccomp_filters` in `/proc/<pid>/status`, a count no process can lower)
//! than dracode itself. Only a confined command carries the sandbox's filters; the supervisors,
//! dracode's direct children, carry none of their own. Each is killed (`SIGKILL`) and reaped by
//! its pid (never `waitpid(-1)`: the async runtime reaps its own children), round after round,
//! since a killed process's children are re-parented to dracode in turn, until none is left.
//!
//! A found process is charged to the task whose TMPDIR its environment names or under whose
//! folders its working directory lies, when those can be read; otherwise to the task whose
//! sweep found it. That task ends `error` (kind `sandbox`), as does one whose processes could
//! not all be reaped within [`REAP_WITHIN`].
//!
//! Where the machine delegates a cgroup to dracode, each command already runs in a cgroup of
//! its own (`limits`), which its processes cannot leave; the sweep does not need it.
//! A `sandbox = "off"` command that installs seccomp filters of its own in the process dracode
//! started would be taken for an escaped one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a sweep waits for the processes it killed to be reaped.
pub const REAP_WITHIN: Duration = Duration::from_secs(5);

/// Makes this process a child subreaper: the orphans of its descendants (an escaped process
/// whose supervisor died) are re-parented to it, where [`TaskSweep::sweep`] finds them.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl sets a flag of this process.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// A process found outside every supervisor, described before it was killed.
#[derive(Debug, Clone)]
struct Escaped {
    pid: i32,
    command: String,
    tmp_dir: Option<PathBuf>,
    cwd: Option<PathBuf>,
}

/// Why a task's sweep says it cannot be trusted: processes of it (or of no task) had escaped
/// their supervisor and were killed, or some could not be reaped in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepError {
    /// The escaped processes charged to the task: pid and command line (at most 200 characters).
    pub escaped: Vec<(i32, String)>,
    /// The pids that were still not reaped [`REAP_WITHIN`] after they were killed.
    pub stuck: Vec<i32>,
}

impl std::fmt::Display for SweepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut problems: Vec<String> = self
            .escaped
            .iter()
            .map(|(pid, command)| format!("process {pid} ({command}) outlived its command's supervisor and was killed"))
            .collect();
        if !self.stuck.is_empty() {
            problems.push(format!("processes {:?} could not be stopped within {}s", self.stuck, REAP_WITHIN.as_secs()));
        }
        f.write_str(&problems.join("; "))
    }
}

impl std::error::Error for SweepError {}

/// One live task's share of the sweep.
struct Entry {
    /// The task's folders (workspace, TMPDIR): where its processes run.
    folders: Vec<PathBuf>,
    /// What sweeps (its own or another task's) found of this task's.
    found: Mutex<Vec<(i32, String)>>,
}

impl Entry {
    /// Whether `escaped` names this task's TMPDIR, or runs under one of its folders.
    fn owns(&self, escaped: &Escaped) -> bool {
        let under = |p: &Path| self.folders.iter().any(|f| p.starts_with(f));
        escaped.tmp_dir.as_deref().is_some_and(under) || escaped.cwd.as_deref().is_some_and(under)
    }
}

/// The live tasks.
static TASKS: Mutex<Vec<Arc<Entry>>> = Mutex::new(Vec::new());
/// One sweep at a time: two would race to reap the same pid.
static SWEEPING: Mutex<()> = Mutex::new(());

/// A task's registration with the sweep, for as long as it lives.
pub struct TaskSweep {
    entry: Arc<Entry>,
}

impl TaskSweep {
    /// Registers a task whose commands work in `folders` (its workspace and TMPDIR).
    pub fn register(folders: Vec<PathBuf>) -> TaskSweep {
        let folders = folders.into_iter().map(|f| f.canonicalize().unwrap_or(f)).collect();
        let entry = Arc::new(Entry { folders, found: Mutex::new(Vec::new()) });
        TASKS.lock().unwrap_or_else(PoisonError::into_inner).push(entry.clone());
        TaskSweep { entry }
    }

    /// Kills and reaps every escaped process; `Err` says why this task cannot be trusted: one
    /// of its processes (or one no task owns) had escaped, or some could not be reaped. It
    /// blocks (reading `/proc`, waiting for the killed): on a multi-thread runtime it tells the
    /// runtime so.
    pub fn sweep(&self) -> Result<(), SweepError> {
        let multi_thread =
            tokio::runtime::Handle::try_current().is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if multi_thread { tokio::task::block_in_place(|| self.sweep_now()) } else { self.sweep_now() }
    }

    fn sweep_now(&self) -> Result<(), SweepError> {
        let swept = sweep();
        let tasks = TASKS.lock().unwrap_or_else(PoisonError::into_inner).clone();
        for escaped in &swept.found {
            let owner = tasks.iter().find(|t| t.owns(escaped)).unwrap_or(&self.entry);
            owner.found.lock().unwrap_or_else(PoisonError::into_inner).push((escaped.pid, escaped.command.clone()));
        }
        let escaped = std::mem::take(&mut *self.entry.found.lock().unwrap_or_else(PoisonError::into_inner));
        if escaped.is_empty() && swept.stuck.is_empty() { Ok(()) } else { Err(SweepError { escaped, stuck: swept.stuck }) }
    }
}

impl Drop for TaskSweep {
    fn drop(&mut self) {
        TASKS.lock().unwrap_or_else(PoisonError::into_inner).retain(|t| !Arc::ptr_eq(t, &self.entry));
    }
}

/// What one sweep found and killed, and the pids it could not reap in time.
#[derive(Default)]
struct Swept {
    found: Vec<Escaped>,
    stuck: Vec<i32>,
}

/// Kills and reaps every escaped process, and any it leaves behind; for the end of a run, when
/// no task is left to charge.
pub fn sweep_all() {
    sweep();
}

#[cfg(not(target_os = "linux"))]
fn sweep() -> Swept {
    Swept::default()
}

#[cfg(target_os = "linux")]
fn sweep() -> Swept {
    let _one = SWEEPING.lock().unwrap_or_else(PoisonError::into_inner);
    let own = filters("self").unwrap_or(0);
    let deadline = Instant::now() + REAP_WITHIN;
    let mut swept = Swept::default();
    loop {
        let round: Vec<i32> = children().into_iter().filter(|&pid| filters(&pid.to_string()).is_some_and(|n| n > own)).collect();
        if round.is_empty() {
            return swept;
        }
        for &pid in &round {
            if !swept.found.iter().any(|e| e.pid == pid) {
                swept.found.push(describe(pid));
            }
            // SAFETY: `pid` is an unreaped child of this process (only this sweep reaps it),
            // so it cannot have been reused.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for pid in round {
            if !reap(pid, deadline) {
                swept.stuck.push(pid);
            }
        }
        if !swept.stuck.is_empty() {
            return swept;
        }
    }
}

/// Waits for child `pid` to end, until `deadline`; whether it was reaped.
#[cfg(target_os = "linux")]
fn reap(pid: i32, deadline: Instant) -> bool {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on one pid writes one int.
        match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
            0 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            0 => return false,
            _ => return true, // reaped, or not (any more) a child of ours
        }
    }
}

/// The number of seccomp filters of process `pid` (`self` for this one), if it is readable.
#[cfg(target_os = "linux")]
fn filters(pid: &str) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    // A process re-parented to another between the listing and this read is not ours.
    if pid != "self" && field("PPid:")? != std::process::id().to_string() {
        return None;
    }
    field("Seccomp_filters:")?.parse().ok()
}

/// What `pid` says of itself (its command line, TMPDIR and working directory), as far as it
/// can be read; a zombie or a non-dumpable process tells nothing.
#[cfg(target_os = "linux")]
fn describe(pid: i32) -> Escaped {
    let command = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let command: Vec<String> =
        command.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let tmp_dir =
        environ.split(|&b| b == 0).find_map(|v| v.strip_prefix(b"TMPDIR=")).map(|v| PathBuf::from(String::from_utf8_lossy(v).into_owned()));
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
    let command = if command.is_empty() { "command line unreadable".to_string() } else { command.join(" ").chars().take(200).collect() };
    Escaped { pid, command, tmp_dir, cwd }
}

/// This process's children, over all its threads (an orphan is re-parented to any of them).
#[cfg(target_os = "linux")]
fn children() -> Vec<i32> {
    let mut pids = Vec::new();
    if let Ok(threads) = std::fs::read_dir("/proc/self/task") {
        for thread in threads.flatten() {
            if let Ok(list) = std::fs::read_to_string(thread.path().join("children")) {
                pids.extend(list.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
            }
        }
    }
    if pids.is_empty() && !Path::new("/proc/self/task").join(std::process::id().to_string()).join("children").exists() {
        // No `children` files in this kernel: every process, filtered on its parent later.
        let entries = std::fs::read_dir("/proc").into_iter().flatten().flatten();
        pids.extend(entries.filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()));
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(tmp_dir: Option<&str>, cwd: Option<&str>) -> Escaped {
        Escaped { pid: 1, command: "sleep".into(), tmp_dir: tmp_dir.map(PathBuf::from), cwd: cwd.map(PathBuf::from) }
    }

    #[test]
    fn an_escaped_process_is_charged_by_its_tmpdir_or_its_working_directory() {
        let task = Entry { folders: vec![PathBuf::from("/t/ws-a"), PathBuf::from("/t/task-a/tmp")], found: Mutex::new(Vec::new()) };
        assert!(task.owns(&escaped(Some("/t/task-a/tmp"), None)));
        assert!(task.owns(&escaped(None, Some("/t/ws-a/src"))));
        assert!(!task.owns(&escaped(Some("/t/task-b/tmp"), Some("/t/ws-b"))));
        assert!(!task.owns(&escaped(None, Some("/t/ws-ab"))), "a sibling folder sharing a prefix is not the task's");
        assert!(!task.owns(&escaped(None, None)));
    }

    #[test]
    fn a_sweep_with_nothing_escaped_finds_nothing() {
        let sweep = TaskSweep::register(vec![PathBuf::from("/nonexistent")]);
        assert_eq!(sweep.sweep(), Ok(()));
        drop(sweep);
        let error = SweepError { escaped: vec![(7, "sleep 9".into()), (8, "sh".into())], stuck: vec![8] };
        assert_eq!(
            error.to_string(),
            "process 7 (sleep 9) outlived its command's supervisor and was killed; \
             process 8 (sh) outlived its command's supervisor and was killed; \
             processes [8] could not be stopped within 5s"
        );
        assert!(TASKS.lock().unwrap().iter().all(|t| t.folders != [PathBuf::from("/nonexistent")]));
    }
}
