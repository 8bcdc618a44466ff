//! A control group per confined command, when the machine lets this user make one: the kernel
//! then holds the command's tree to `pids.max` and its memory limit exactly, where the monitor
//! alone could be 50 ms late. Used when dracode may create a child group next to its own:
//! cgroup v2 with the `pids` and `memory` controllers enabled there (root in a container with
//! its own cgroup namespace, a delegated systemd scope whose group has no process of its own),
//! else the cgroup v1 `pids`/`memory` hierarchies (root on a hybrid host). Anywhere else
//! nothing is made and the monitor and rlimits do the work alone.
//!
//! `pids.max` is the limit plus one, so that a tree held at the ceiling is over the limit and
//! the monitor reports it (and kills it); a process the kernel's OOM killer ended inside the
//! group shows in the `oom_kill` counter, which the monitor reads too.

use super::Limits;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// A counter the kernel keeps in a group's files: how often a limit was hit.
#[derive(Debug, Clone)]
pub(super) struct Counter {
    /// The limit it stands for (`memory`, `processes`).
    pub limit: &'static str,
    /// The file (`pids.events`, `memory.events`, `memory.oom_control`).
    file: PathBuf,
    /// The key in it (`max`, `oom_kill`).
    key: &'static str,
}

impl Counter {
    /// The counter's value now (0 when unreadable).
    pub(super) fn hits(&self) -> u64 {
        let text = std::fs::read_to_string(&self.file).unwrap_or_default();
        text.lines().filter_map(|l| l.split_once(' ')).find(|(k, _)| *k == self.key).and_then(|(_, v)| v.trim().parse().ok()).unwrap_or(0)
    }
}

/// The groups made for one command; removed when dropped (after every process is gone).
pub(super) struct CommandCgroup {
    dirs: Vec<PathBuf>,
    procs: Vec<OwnedFd>,
    counters: Vec<Counter>,
}

/// What the child does to join the groups, between fork and exec: `Copy`, no allocation.
#[derive(Debug, Clone, Copy)]
pub(super) struct Joiner {
    fds: [libc::c_int; 2],
}

impl Joiner {
    /// Writes `0` (this process) into each group's `cgroup.procs`; a failure leaves the command
    /// to the monitor alone.
    ///
    /// # Safety
    /// Meant for `pre_exec`: `write` on descriptors the parent keeps open.
    pub(super) unsafe fn join(&self) {
        for fd in self.fds.iter().filter(|&&fd| fd >= 0) {
            // SAFETY: writes one byte from a static buffer.
            unsafe { libc::write(*fd, b"0".as_ptr().cast(), 1) };
        }
    }
}

/// One controller's files in each cgroup version.
struct Controller {
    name: &'static str,
    limit: &'static str,
    v1_dir: &'static str,
    v1_limit_file: &'static str,
    v2_limit_file: &'static str,
    v1_counter: (&'static str, &'static str),
    v2_counter: (&'static str, &'static str),
}

const CONTROLLERS: [Controller; 2] = [
    Controller {
        name: "pids",
        limit: "processes",
        v1_dir: "pids",
        v1_limit_file: "pids.max",
        v2_limit_file: "pids.max",
        v1_counter: ("pids.events", "max"),
        v2_counter: ("pids.events", "max"),
    },
    Controller {
        name: "memory",
        limit: "memory",
        v1_dir: "memory",
        v1_limit_file: "memory.limit_in_bytes",
        v2_limit_file: "memory.max",
        v1_counter: ("memory.oom_control", "oom_kill"),
        v2_counter: ("memory.events", "oom_kill"),
    },
];

impl CommandCgroup {
    /// Makes the groups for `limits` (memory, processes), if the machine lets this user;
    /// `None` when it does not or no such limit is set.
    pub(super) fn create(limits: &Limits) -> Option<CommandCgroup> {
        let wanted = |c: &Controller| match c.limit {
            "processes" => limits.processes.map(|p| p.saturating_add(1)),
            _ => limits.memory,
        };
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        // SAFETY: getpid only returns a number.
        let name = format!("dracode-{}", unsafe { libc::getpid() });
        let mut group = CommandCgroup { dirs: Vec::new(), procs: Vec::new(), counters: Vec::new() };
        let v2 = v2_parent(&own).filter(|parent| CONTROLLERS.iter().all(|c| enabled(parent, c.name)));
        for controller in &CONTROLLERS {
            let Some(value) = wanted(controller) else { continue };
            let made = match &v2 {
                Some(parent) => group.add(&parent.join(&name), controller.v2_limit_file, value, controller.v2_counter, controller.limit),
                None => v1_parent(&own, controller.v1_dir)
                    .and_then(|p| group.add(&p.join(&name), controller.v1_limit_file, value, controller.v1_counter, controller.limit)),
            };
            made?; // on failure, dropping `group` removes what was made
        }
        (!group.dirs.is_empty()).then_some(group)
    }

    /// Makes (or reuses, for v2's one group) `dir`, sets `file` to `value`, opens `cgroup.procs`.
    fn add(&mut self, dir: &Path, file: &str, value: u64, counter: (&'static str, &'static str), limit: &'static str) -> Option<()> {
        if !self.dirs.iter().any(|d| d == dir) {
            std::fs::create_dir(dir).ok()?;
            self.dirs.push(dir.to_path_buf());
            let procs = std::fs::OpenOptions::new().write(true).open(dir.join("cgroup.procs")).ok()?;
            self.procs.push(procs.into());
        }
        std::fs::write(dir.join(file), value.to_string()).ok()?;
        self.counters.push(Counter { limit, file: dir.join(counter.0), key: counter.1 });
        Some(())
    }

    /// How the child joins.
    pub(super) fn joiner(&self) -> Joiner {
        let mut fds = [-1; 2];
        for (slot, fd) in fds.iter_mut().zip(&self.procs) {
            *slot = fd.as_raw_fd();
        }
        Joiner { fds }
    }

    /// The counters the monitor reads.
    pub(super) fn counters(&self) -> Vec<Counter> {
        self.counters.clone()
    }
}

impl Drop for CommandCgroup {
    fn drop(&mut self) {
        self.procs.clear();
        for dir in &self.dirs {
            // A group empties when its last process is reaped, which the supervisor has done.
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }
}

/// This process's cgroup v2 folder (`0::/path` under the unified mount), if there is one.
fn v2_parent(own: &str) -> Option<PathBuf> {
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mount = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"].into_iter().find(|m| Path::new(m).join("cgroup.controllers").exists())?;
    Some(Path::new(mount).join(path.trim_start_matches('/')))
}

/// Whether `controller` is enabled for the children of the v2 group `parent`.
fn enabled(parent: &Path, controller: &str) -> bool {
    std::fs::read_to_string(parent.join("cgroup.subtree_control")).is_ok_and(|t| t.split_whitespace().any(|c| c == controller))
}

/// This process's group in the v1 hierarchy of `controller`, if that hierarchy is mounted.
fn v1_parent(own: &str, controller: &str) -> Option<PathBuf> {
    let line = own.lines().find(|l| l.split(':').nth(1).is_some_and(|list| list.split(',').any(|c| c == controller)))?;
    let path = line.splitn(3, ':').nth(2)?.trim_start_matches('/');
    let mount = Path::new("/sys/fs/cgroup").join(controller);
    // Inside a cgroup namespace the path is relative to a root mounted at `mount` itself.
    [mount.join(path), mount].into_iter().find(|dir| dir.join("cgroup.procs").exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_v1_group_of_a_controller_and_reads_counters() {
        let own = "12:pids:/\n4:memory:/a/b\n2:cpu,cpuacct:/\n0::/\n";
        let pids = v1_parent(own, "pids");
        assert!(pids.is_none() || pids == Some(PathBuf::from("/sys/fs/cgroup/pids")), "{pids:?}");
        assert_eq!(v1_parent(own, "freezer2"), None);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("memory.events"), "low 0\nhigh 0\nmax 7\noom 2\noom_kill 1\n").unwrap();
        let counter = |key| Counter { limit: "memory", file: dir.path().join("memory.events"), key };
        assert_eq!((counter("oom_kill").hits(), counter("max").hits(), counter("absent").hits()), (1, 7, 0));
    }

    #[test]
    fn nothing_is_made_without_a_memory_or_process_limit() {
        assert!(CommandCgroup::create(&Limits { open_files: Some(10), ..Limits::default() }).is_none());
    }
}
