//! Containment: the file tools' path checks ([`Sandbox`]) and the OS confinement of every command
//! the agent can influence ([`Policy`], applied by [`crate::process`] through a supervisor).
//!
//! # What a confined command gets (Linux, any mode but `off`)
//! - **Files** (Landlock): it reads only an allowlist ([`ReadSet`]: the system, the toolchains,
//!   plus what the caller adds — the workspace, `read_paths`) minus the [hidden](Policy::hidden)
//!   paths — `~/.ssh`, `~/.git-credentials`, `~/.config/gh` and the other [`HOME_CREDENTIALS`],
//!   the toolchains' and the system's credentials, plus what the caller adds; it writes only the
//!   [writable roots](Policy::writable_roots) and `/dev/null`-like devices. Package managers are
//!   pointed at per-task caches ([`cache_env`]).
//! - **Other processes**: Landlock denies ptrace-mode access to every process outside the
//!   command's domain, so `/proc/<dracode>/environ` and `/proc/<dracode>/mem` are unreadable even
//!   for root; with Landlock ABI 6+ it cannot signal them or reach their abstract unix sockets.
//!   seccomp refuses `ptrace`, `process_vm_readv`/`writev`, `kill(-1)`, signals aimed at
//!   the supervisor or at dracode (on every ABI), changing another process's limits,
//!   scheduling or memory (`prlimit` and the like on any pid but 0), the keyring and SysV IPC.
//! - **Privileges**: `no_new_privs` (setuid binaries such as `sudo` do not elevate) and every
//!   capability dropped (effective, permitted, inheritable, ambient, bounding set) — root inside
//!   is an ordinary user of uid 0.
//! - **Network** (seccomp, unless [`Policy::network`]): `socket()` for anything but `AF_UNIX`
//!   and `AF_INET`/`AF_INET6` TCP fails with `EPERM`; `io_uring` is refused in every mode (it
//!   can open sockets behind seccomp's back).
//! - **Connections** (the `broker` module): every `connect()` is decided and performed by the
//!   supervisor — Unix sockets only inside the writable roots or in [`Policy::unix_sockets`],
//!   TCP only to the proxy and the command's own loopback listeners (or anywhere with
//!   `network`); without `network`, `bind`/`listen` too, on loopback only (the `loopback`
//!   module); refusals are reported. No Unix datagram sockets, no TCP fast open without
//!   `network`.
//! - **Descriptors and terminal**: only fds 0–2 survive into the command
//!   ([`close_inherited_descriptors`]); it runs in a session of its own without a controlling
//!   terminal, and `TIOCSTI`/`TIOCLINUX` are refused.
//! - **Lifetime**: a supervisor (dracode re-executed, see [`supervisor`]) is the command's
//!   subreaper; when the command ends, or the supervisor is told to stop, or dracode dies, every
//!   process it started is killed — including ones that called `setsid` or double-forked.
//!   Should the supervisor die first, dracode's own [`sweep`] finds and kills what is left.
//! - **Resources** ([`Limits`]): per-process rlimits ([`limits::Rlimits`]), and a monitor in the
//!   supervisor that kills the command's tree past its memory, process or CPU time limit and
//!   reports it ([`incidents::Report::LimitReached`]).
//!
//! # What is not confined
//! Reading non-hidden files inside the allowlist (a secret in a world-readable file under `/etc`
//! or a toolchain folder is readable), `/dev/shm` (writable and shared by every task, for POSIX
//! semaphores), resource use beyond the [`Limits`] (the disk space of the writable roots, several
//! commands or tasks together), and new entries created in a folder that had
//! to be split around a hidden path after the policy was applied (those are not readable — see
//! `rules`). On macOS and other systems only `off` is available.

#[cfg(target_os = "linux")]
mod broker;
mod caches;
pub mod cargo_config;
#[cfg(target_os = "linux")]
mod cgroup;
#[cfg(target_os = "linux")]
mod confine;
pub mod egress;
mod gitconfig;
mod home;
pub mod incidents;
pub mod limits;
#[cfg(target_os = "linux")]
mod loopback;
#[cfg(target_os = "linux")]
mod monitor;
mod paths;
mod policy;
pub mod process;
mod protect;
mod reads;
#[cfg(target_os = "linux")]
mod rules;
pub mod signals;
pub mod supervisor;
pub mod sweep;

pub use caches::{CACHE_VARS, cache_env, cache_vars};
pub use gitconfig::{GIT_CONFIG_VAR, SAFE_GIT_KEYS, git_config_env, git_config_path};
pub use home::home_view;
pub use limits::{LimitFields, Limits};
pub use paths::{Entry, Escaped, PathError, Sandbox, is_escape};
pub use policy::{HOME_CREDENTIALS, Policy, SandboxMode, home_credentials};
pub use protect::{Protect, ProtectError};
pub use reads::{HOME_TOOLCHAINS, READABLE_DEVICES, ReadSet, SYSTEM_CREDENTIALS, SYSTEM_READS, TOOLCHAIN_VARS};

use std::path::PathBuf;
use std::sync::OnceLock;

/// A machine that cannot confine as asked.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel lacks a feature the mode needs.
    #[error(
        "sandbox \"{mode}\" is not available on this machine: it needs {missing}; to run commands unconfined set sandbox = \"off\" (or pass --sandbox off)",
        mode = mode.as_str()
    )]
    Unsupported {
        /// The mode asked for.
        mode: SandboxMode,
        /// What is missing, in words.
        missing: String,
    },
    /// Building the confinement failed (a path that cannot be opened, a kernel refusal).
    #[error("cannot set up the sandbox: {0}")]
    Setup(String),
}

/// What the machine offers, found once per process by [`probe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Whether the OS has a sandbox implementation here (Linux only).
    pub os_supported: bool,
    /// The Landlock ABI version, when Landlock is enabled.
    pub landlock_abi: Option<u32>,
    /// Whether seccomp filters (with `SECCOMP_RET_ERRNO`) are available.
    pub seccomp: bool,
}

/// What this machine offers (cached).
pub fn probe() -> Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    *PROBE.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            Probe { os_supported: true, landlock_abi: confine::landlock_abi(), seccomp: confine::seccomp_available() }
        }
        #[cfg(not(target_os = "linux"))]
        {
            Probe { os_supported: false, landlock_abi: None, seccomp: false }
        }
    })
}

static SUPERVISOR_PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Sets the dracode executable that supervises confined commands (default: the running
/// executable). Tests and benches, whose own executable is not dracode, point it at the built
/// binary. Only the first call has an effect.
pub fn use_supervisor_program(path: PathBuf) {
    let _ = SUPERVISOR_PROGRAM.set(path);
}

/// The executable that runs `dracode __sandbox-exec`.
pub(crate) fn supervisor_program() -> std::io::Result<PathBuf> {
    match SUPERVISOR_PROGRAM.get() {
        Some(path) => Ok(path.clone()),
        None => std::env::current_exe(),
    }
}

/// Marks every descriptor above stderr close-on-exec, so that nothing dracode was started with
/// (a wrapper's `exec 7<secret`) reaches a command. Called at dracode's start and in each
/// command's `pre_exec` (close-on-exec rather than close: the standard library's exec-error pipe
/// must live until the exec). Async-signal-safe.
pub fn close_inherited_descriptors() {
    #[cfg(target_os = "linux")]
    // SAFETY: close_range and fcntl only change descriptor flags of this process.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) == 0 {
            return;
        }
        // Before Linux 5.11: every descriptor up to a generous bound, one by one.
        for fd in 3..65_536 {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// Marks this process non-dumpable: no core dumps, and `/proc/<pid>/{environ,mem,…}` become
/// owned by root, so a process of the same user without `CAP_SYS_PTRACE` cannot read them. A
/// second line behind Landlock's ptrace restriction; dracode calls it at start.
pub fn mark_non_dumpable() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_DUMPABLE only changes a flag of this process.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unsupported_machine_says_what_is_missing_and_how_to_opt_out() {
        let text = SandboxError::Unsupported { mode: SandboxMode::ReadOnly, missing: "Landlock".into() }.to_string();
        for part in ["\"read-only\"", "needs Landlock", "sandbox = \"off\"", "--sandbox off"] {
            assert!(text.contains(part), "{part} in {text}");
        }
    }

    #[test]
    fn the_probe_agrees_with_the_policy_check() {
        let policy = Policy::for_workspace(SandboxMode::WorkspaceWrite, std::path::Path::new("/"), None);
        let found = probe();
        let complete = found.os_supported && found.landlock_abi.is_some() && found.seccomp;
        assert_eq!(policy.check_supported().is_ok(), complete, "{found:?}");
    }
}
