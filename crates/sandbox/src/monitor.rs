//! The supervisor's watch over a confined command's whole process tree: every
//! [`INTERVAL`] it counts the tree's processes and threads, sums their memory and looks at each
//! process's CPU time; when one passes the task's limit it kills the command's process group
//! (the supervisor then kills whatever else is left, as after any command), appends a
//! [`Report::LimitReached`] to the command's report file and says so on the command's stderr.
//!
//! The tree is found from the supervisor itself: `/proc/<pid>/task/<tid>/children` of each
//! thread, down from the supervisor (which, a subreaper, also adopts every orphan of the
//! command). Memory is each process's resident anonymous memory (`resident − shared` of
//! `/proc/<pid>/statm`): what the kernel cannot drop under pressure; file pages and shared
//! memory are not counted. Threads share their process's memory and count once.

use super::cgroup::Counter;
use super::incidents::{self, Report};
use super::limits::{Limits, format_limit};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How often the tree is measured: a fork bomb or a hog gets at most this long past its limit.
pub const INTERVAL: Duration = Duration::from_millis(50);

/// A running watch; stopped when dropped. The drop does not wait for the thread to end (that
/// would cost the command a thread switch on a busy machine): it waits only for a measure (and
/// a report) in progress, then leaves the thread to end on its own or with the supervisor.
pub(super) struct Watch {
    /// Dropped to wake the thread at once (it waits on the other end between measures).
    wake: Option<Sender<()>>,
    /// Held by the thread while it measures and reports; `true` once the watch is over (a
    /// limit reported, or the command gone).
    over: Arc<Mutex<bool>>,
    watched: Arc<Watched>,
}

/// What a watch needs to know.
pub(super) struct Watched {
    /// The limits the monitor enforces: `memory`, `processes`, `cpu_time`.
    pub limits: Limits,
    /// The command's process group (its pid).
    pub group: libc::pid_t,
    /// The report file, if any.
    pub report: Option<PathBuf>,
    /// The command line, for the report.
    pub command: String,
    /// The kernel's counters of the command's cgroup, when it has one.
    pub counters: Vec<Counter>,
}

impl Watch {
    /// Starts watching, unless none of the limits it enforces is set. The thread blocks every
    /// signal, so the supervisor's handlers keep running on its main thread.
    pub(super) fn start(watched: Watched) -> Option<Watch> {
        let Limits { memory, processes, cpu_time, .. } = watched.limits;
        if memory.is_none() && processes.is_none() && cpu_time.is_none() {
            return None;
        }
        let (wake, woken) = channel();
        let over = Arc::new(Mutex::new(false));
        let (state, watched) = (over.clone(), Arc::new(watched));
        let shared = watched.clone();
        // SAFETY: sigset operations on stack memory; the old mask is restored right after the
        // spawn, so only the new thread keeps every signal blocked.
        unsafe {
            let (mut all, mut old) = (std::mem::zeroed::<libc::sigset_t>(), std::mem::zeroed::<libc::sigset_t>());
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            let spawned = std::thread::Builder::new().name("limits".into()).spawn(move || watch(&shared, &woken, &state));
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            spawned.ok()?;
        }
        Some(Watch { wake: Some(wake), over, watched })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        drop(self.wake.take());
        let mut over = self.over.lock().unwrap_or_else(PoisonError::into_inner);
        // The kernel may have stopped the command (an OOM kill in its group) between measures.
        if let (false, Some(limit)) = (*over, hit_counter(&self.watched)) {
            stopped(&self.watched, limit);
        }
        *over = true;
    }
}

/// Measures the tree until the watch is over or a limit is passed.
fn watch(watched: &Watched, woken: &Receiver<()>, over: &Mutex<bool>) {
    // SAFETY: sysconf only returns numbers.
    let (page, ticks) = unsafe { (libc::sysconf(libc::_SC_PAGESIZE).max(1) as u64, libc::sysconf(libc::_SC_CLK_TCK).max(1) as u64) };
    // Waiting first keeps a short command (most are) from paying for a measure: it ends, and
    // the watch with it, before the first one.
    while woken.recv_timeout(INTERVAL) == Err(RecvTimeoutError::Timeout) {
        let mut over = over.lock().unwrap_or_else(PoisonError::into_inner);
        if *over {
            return;
        }
        let usage = measure(page, ticks);
        if let Some(limit) = passed(&watched.limits, &usage).or_else(|| hit_counter(watched)) {
            // SAFETY: kill only sends a signal. The group is the command's; the supervisor ends
            // the watch (waiting on `over`) as soon as it has reaped the leader, so the group id
            // is not reused.
            unsafe { libc::kill(-watched.group, libc::SIGKILL) };
            stopped(watched, limit);
            *over = true;
            return;
        }
    }
}

/// The limit whose cgroup counter shows the kernel enforced it, if any.
fn hit_counter(watched: &Watched) -> Option<&'static str> {
    watched.counters.iter().find(|c| c.hits() > 0).map(|c| c.limit)
}

/// Reports a limit the command passed: in its report file and on its stderr.
fn stopped(watched: &Watched, limit: &str) {
    let value = match limit {
        "memory" => watched.limits.memory,
        "processes" => watched.limits.processes,
        _ => watched.limits.cpu_time,
    };
    let value = format_limit(limit, value.unwrap_or_default());
    #[allow(clippy::print_stderr)]
    {
        eprintln!("dracode sandbox: the command passed the task's {limit} limit ({value}); all its processes were killed");
    }
    if let Some(path) = &watched.report {
        let report = Report::LimitReached { limit: limit.to_string(), value, command: watched.command.clone() };
        let _ = incidents::append(path, &report);
    }
}

/// The longest command line a report carries.
const COMMAND_LINE_MAX: usize = 300;

/// `program` and `args` as one line for a report (shortened to [`COMMAND_LINE_MAX`] bytes).
pub(super) fn command_line(program: &std::ffi::OsStr, args: &[std::ffi::OsString]) -> String {
    let mut line = std::iter::once(program)
        .chain(args.iter().map(std::ffi::OsString::as_os_str))
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    if line.len() > COMMAND_LINE_MAX {
        let cut = (0..=COMMAND_LINE_MAX).rev().find(|&i| line.is_char_boundary(i)).unwrap_or(0);
        line.truncate(cut);
        line.push('…');
    }
    line
}

/// What the tree uses at one moment.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Usage {
    /// Processes and threads.
    pub tasks: u64,
    /// Resident anonymous bytes of every process together.
    pub memory: u64,
    /// The most CPU time one process has used, in milliseconds.
    pub cpu_millis: u64,
}

/// The first limit `usage` is over.
pub(super) fn passed(limits: &Limits, usage: &Usage) -> Option<&'static str> {
    let cpu_millis = limits.cpu_time.map(|secs| secs.saturating_mul(1000));
    let checks =
        [("processes", limits.processes, usage.tasks), ("memory", limits.memory, usage.memory), ("cpu_time", cpu_millis, usage.cpu_millis)];
    checks.into_iter().find_map(|(name, limit, used)| limit.filter(|&l| used > l).map(|_| name))
}

/// Measures every descendant of this process.
fn measure(page: u64, ticks: u64) -> Usage {
    let mut usage = Usage::default();
    let mut pending = children("self");
    while let Some(pid) = pending.pop() {
        let Some((threads, cpu_ticks)) = stat(pid) else { continue };
        usage.tasks += threads;
        usage.cpu_millis = usage.cpu_millis.max(cpu_ticks * 1000 / ticks);
        usage.memory += anonymous_pages(pid) * page;
        pending.extend(children(&pid.to_string()));
    }
    usage
}

/// The children of every thread of process `pid` (`self` for this one).
fn children(pid: &str) -> Vec<libc::pid_t> {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut found = Vec::new();
    for thread in threads.flatten() {
        let mut path = thread.path();
        path.push("children");
        if let Ok(list) = std::fs::read_to_string(&path) {
            found.extend(list.split_whitespace().filter_map(|p| p.parse::<libc::pid_t>().ok()));
        }
    }
    found
}

/// A process's thread count and CPU ticks (user + system), from `/proc/<pid>/stat`.
fn stat(pid: libc::pid_t) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is [0], utime [11], stime
    // [12], num_threads [17].
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    let number = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some((number(17)?.max(1), number(11)? + number(12)?))
}

/// A process's resident pages that are neither file-backed nor shared (`resident − shared`).
fn anonymous_pages(pid: libc::pid_t) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap_or_default();
    let mut fields = text.split_whitespace().skip(1).filter_map(|f| f.parse::<u64>().ok());
    match (fields.next(), fields.next()) {
        (Some(resident), Some(shared)) => resident.saturating_sub(shared),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_limit_passed_is_named_with_its_value() {
        let limits = Limits { memory: Some(100), processes: Some(10), cpu_time: Some(5), ..Limits::default() };
        assert_eq!(passed(&limits, &Usage { tasks: 10, memory: 100, cpu_millis: 5000 }), None, "at the limit is fine");
        assert_eq!(passed(&limits, &Usage { tasks: 11, memory: 0, cpu_millis: 0 }), Some("processes"));
        assert_eq!(passed(&limits, &Usage { tasks: 1, memory: 101, cpu_millis: 0 }), Some("memory"));
        assert_eq!(passed(&limits, &Usage { tasks: 1, memory: 0, cpu_millis: 5010 }), Some("cpu_time"));
        assert_eq!(passed(&Limits::default(), &Usage { tasks: 1 << 20, memory: u64::MAX, cpu_millis: 1 << 40 }), None);
    }

    #[test]
    fn measures_its_own_children() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let usage = measure(4096, 100);
        let _ = child.kill();
        let _ = child.wait();
        assert!(usage.tasks >= 1 && usage.memory > 0, "{usage:?}");
    }
}
