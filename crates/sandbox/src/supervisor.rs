//! The supervisor: `dracode __sandbox-exec <policy JSON> <program> [args…]`, the process dracode
//! starts in place of a confined command.
//!
//! Why a separate process rather than confining the command straight from dracode's fork: it
//! must outlive the command to clean up after it, and it must be single-threaded to be a
//! subreaper that waits for *any* child (dracode's async runtime reaps its own children). It is
//! dracode re-executed (`std::env::current_exe()`), dispatched in `main` before the command line
//! is parsed, so it costs one exec and carries none of dracode's memory; its environment is the
//! command's (secrets already removed), and the policy holds only paths.
//!
//! It marks itself a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every orphan of the
//! command — a `setsid` daemon, a double fork — is re-parented to it, not to init; asks for
//! `SIGTERM` when dracode dies (`PR_SET_PDEATHSIG`); builds the Landlock ruleset and seccomp
//! program; forks the command into a session of its own (no controlling terminal) with only
//! descriptors 0–2 surviving the exec, confines it, takes the connect broker's listener from it
//! (the `broker` module, answered on threads of the supervisor) and executes it; waits;
//! then kills and reaps every process left until it has no child at all, and exits the way the
//! command did (same code, or the same signal re-raised). On `SIGTERM`/`SIGINT`/`SIGHUP` it
//! forwards `SIGTERM` to the command's group, gives it [`GRACE_SECS`], then kills everything.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that spawned the supervisor ends; dracode spawns
//! from its async runtime's worker threads, which live as long as the run.
//!
//! A PID namespace would do the cleanup by itself (killing its init kills all), but it needs a
//! user namespace without root, which GitHub's Ubuntu 24.04 runners restrict; a cgroup needs a
//! delegated hierarchy. A subreaper needs nothing. The command cannot kill the supervisor to
//! escape: seccomp refuses signals aimed at its pid or group, and it runs outside the command's
//! Landlock domain.
//!
//! With resource limits it also sets the command's rlimits, may put it in a cgroup of its own,
//! and runs one more thread, the limits monitor (`sandbox::monitor`), which never waits for a
//! child: reaping stays on the main thread.

use super::{Policy, supervisor_program};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// The hidden subcommand that runs the supervisor.
pub const SUBCOMMAND: &str = "__sandbox-exec";

/// Seconds a stopped command gets between `SIGTERM` and `SIGKILL` (less than dracode's own
/// `TERM_GRACE` in the `process` module, so the supervisor is done before dracode escalates).
pub const GRACE_SECS: u32 = 1;

/// Exit code when the supervisor itself failed (bad invocation, confinement refused).
pub const EXIT_SETUP_FAILED: i32 = 125;

/// What dracode tells the supervisor.
#[derive(Debug, Serialize, Deserialize)]
struct Invocation {
    policy: Policy,
    /// dracode's pid: if the supervisor's parent is already another process, dracode died.
    parent: u32,
    /// Where to append [`Report`](super::incidents::Report)s about the command, if anywhere.
    #[serde(default)]
    report: Option<PathBuf>,
}

/// Runs the supervisor when this process was started as `dracode __sandbox-exec …` and returns
/// its exit code; `None` for any other command line. Call first thing in `main`.
pub fn run_if_requested() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != SUBCOMMAND {
        return None;
    }
    Some(match start(args.collect()) {
        Ok(code) => code,
        Err((code, message)) => {
            // The supervisor's stderr is the command's: the one place to say why it did not run.
            #[allow(clippy::print_stderr)]
            {
                eprintln!("dracode sandbox: {message}");
            }
            code
        }
    })
}

/// What dracode starts in place of a confined command.
pub(crate) struct Confined<'a> {
    /// The confinement.
    pub policy: &'a Policy,
    /// The program, as the caller named it.
    pub program: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// The child's `PATH`, searched here so that a missing program is reported like an
    /// unconfined one.
    pub path: Option<&'a str>,
    /// The working directory.
    pub cwd: &'a Path,
    /// The report file the supervisor appends to, if any.
    pub report: Option<&'a Path>,
}

/// The command dracode spawns to run `confined.program` under the supervisor.
pub(crate) fn command(confined: &Confined<'_>) -> io::Result<tokio::process::Command> {
    let Confined { policy, program, args, path, cwd, report } = *confined;
    policy.check_supported().map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e.to_string()))?;
    let program = find_program(program, path, cwd)?;
    let invocation = Invocation { policy: policy.clone(), parent: std::process::id(), report: report.map(Path::to_path_buf) };
    let invocation = serde_json::to_string(&invocation)?;
    let mut cmd = tokio::process::Command::new(supervisor_program()?);
    cmd.arg(SUBCOMMAND).arg(invocation).arg(program).args(args);
    Ok(cmd)
}

/// `program` as `execvp` would find it on `path` (relative entries against `cwd`).
fn find_program(program: &str, path: Option<&str>, cwd: &Path) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let candidate = cwd.join(program);
        return if candidate.exists() {
            Ok(candidate)
        } else {
            Err(io::Error::new(io::ErrorKind::NotFound, format!("{program}: not found")))
        };
    }
    let path = path.unwrap_or("/usr/local/bin:/usr/bin:/bin");
    let found = path.split(':').map(|dir| cwd.join(if dir.is_empty() { "." } else { dir }).join(program)).find(|p| runnable(p));
    found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{program}: not found on PATH")))
}

#[cfg(not(target_os = "linux"))]
fn start(_args: Vec<OsString>) -> Result<i32, (i32, String)> {
    Err((EXIT_SETUP_FAILED, format!("no sandbox on {}", std::env::consts::OS)))
}

#[cfg(target_os = "linux")]
fn start(args: Vec<OsString>) -> Result<i32, (i32, String)> {
    let mut args = args.into_iter();
    let setup = |m: String| (EXIT_SETUP_FAILED, m);
    let json = args.next().ok_or_else(|| setup("missing policy".into()))?;
    let invocation: Invocation =
        serde_json::from_str(json.to_str().unwrap_or_default()).map_err(|e| setup(format!("invalid invocation: {e}")))?;
    let program = args.next().ok_or_else(|| setup("missing program".into()))?;
    linux::supervise(&invocation, &program, args.collect())
}

#[cfg(target_os = "linux")]
mod linux {
    use super::{EXIT_SETUP_FAILED, GRACE_SECS, Invocation};
    use crate::broker::{self, Broker};
    use crate::cgroup::CommandCgroup;
    use crate::confine::Confinement;
    use crate::limits::Rlimits;
    use crate::monitor::{Watch, Watched, command_line};
    use std::ffi::OsString;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

    /// The command's pid (and process group), for the signal handler.
    static CHILD: AtomicI32 = AtomicI32::new(0);
    /// The signal that asked the supervisor to stop, or 0.
    static STOP: AtomicI32 = AtomicI32::new(0);
    /// Set when the grace period after a stop request is over.
    static GRACE_OVER: AtomicBool = AtomicBool::new(false);

    extern "C" fn on_stop(signal: libc::c_int) {
        if STOP.swap(signal, Ordering::SeqCst) == 0 {
            let child = CHILD.load(Ordering::SeqCst);
            // SAFETY: kill and alarm are async-signal-safe.
            unsafe {
                if child > 0 {
                    libc::kill(-child, libc::SIGTERM);
                }
                libc::alarm(GRACE_SECS);
            }
        }
    }

    /// The grace period is over: kill the command outright, which also ends a `waitpid` that
    /// started just after the flag was checked.
    extern "C" fn on_alarm(_: libc::c_int) {
        GRACE_OVER.store(true, Ordering::SeqCst);
        let child = CHILD.load(Ordering::SeqCst);
        if child > 0 {
            // SAFETY: kill is async-signal-safe; `child` is not reaped yet (reset to 0 first).
            unsafe {
                libc::kill(-child, libc::SIGKILL);
                libc::kill(child, libc::SIGKILL);
            }
        }
    }

    fn install_handlers() {
        let handlers: [(libc::c_int, extern "C" fn(libc::c_int)); 4] =
            [(libc::SIGTERM, on_stop), (libc::SIGINT, on_stop), (libc::SIGHUP, on_stop), (libc::SIGALRM, on_alarm)];
        for (signal, handler) in handlers {
            // SAFETY: a zeroed sigaction with a handler and no SA_RESTART, so that a signal
            // interrupts waitpid; the handlers only touch atomics and call kill/alarm.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = handler as usize;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    }

    /// Signals a command could cause the kernel to send the supervisor — `SIGXFSZ` and `SIGXCPU`
    /// from limits (which seccomp stops it setting on another process, see
    /// `confine::other_processes`), `SIGIO` from an `F_SETOWN` descriptor (Landlock scopes it only
    /// from ABI 6) — whose default action would end it before it cleans up: ignored here (a
    /// write past a limit then fails with `EFBIG`), back to their defaults in the command.
    const IGNORED: [libc::c_int; 3] = [libc::SIGXFSZ, libc::SIGXCPU, libc::SIGIO];

    /// Ignores (`ignore`) or restores the default action of the [`IGNORED`] signals.
    ///
    /// # Safety
    /// Async-signal-safe (`signal` is `sigaction`).
    unsafe fn ignore_limit_signals(ignore: bool) {
        let action = if ignore { libc::SIG_IGN } else { libc::SIG_DFL };
        for signal in IGNORED {
            // SAFETY: see the function's contract.
            unsafe { libc::signal(signal, action) };
        }
    }

    /// Runs the command confined and cleans up after it; returns the exit code (or re-raises
    /// the command's signal).
    pub(super) fn supervise(invocation: &Invocation, program: &OsString, args: Vec<OsString>) -> Result<i32, (i32, String)> {
        // SAFETY: prctl/getppid/getpid only read or set flags of this process.
        let (parent, me) = unsafe {
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
            (libc::getppid(), libc::getpid())
        };
        if u32::try_from(parent).ok() != Some(invocation.parent) {
            return Err((EXIT_SETUP_FAILED, "dracode is gone; not starting the command".into()));
        }
        install_handlers();
        // SAFETY: at start-up, before any thread of the supervisor exists.
        unsafe { ignore_limit_signals(true) };
        let confinement = Confinement::build(&invocation.policy, &[me, parent]).map_err(|e| (EXIT_SETUP_FAILED, e.to_string()))?;
        let (rlimits, cgroup) = (Rlimits::for_limits(&invocation.policy.limits), CommandCgroup::create(&invocation.policy.limits));
        let joiner = cgroup.as_ref().map(CommandCgroup::joiner);
        let command = command_line(program, &args);
        let (channel, handoff) = broker::channel().map_err(|e| (EXIT_SETUP_FAILED, format!("connect broker: {e}")))?;
        let handoff_fd = handoff.as_raw_fd();
        let mut cmd = std::process::Command::new(program);
        cmd.args(args);
        // SAFETY: the closure makes system calls only (see Confinement::apply, Rlimits::apply,
        // broker::hand_over).
        unsafe {
            cmd.pre_exec(move || {
                crate::close_inherited_descriptors();
                ignore_limit_signals(false);
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                if let Some(joiner) = joiner {
                    joiner.join();
                }
                rlimits.apply()?;
                let listener = confinement.apply()?;
                broker::hand_over(handoff_fd, listener)
            });
        }
        let child = cmd.spawn().map_err(|e| spawn_failure(&e, program))?;
        drop(handoff);
        let pid = child.id() as libc::pid_t;
        CHILD.store(pid, Ordering::SeqCst);
        let brokered = broker::receive(&channel)
            .and_then(|listener| Broker::new(&invocation.policy, invocation.report.clone(), command.clone()).serve(listener));
        if let Err(e) = brokered {
            // SAFETY: the command's own process group (it is a session leader).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            kill_descendants();
            return Err((EXIT_SETUP_FAILED, format!("connect broker: {e}")));
        }
        if STOP.load(Ordering::SeqCst) != 0 {
            // SAFETY: signals the command's own group.
            unsafe { libc::kill(-pid, libc::SIGTERM) };
        }
        let limits = invocation.policy.limits.clone();
        let counters = cgroup.as_ref().map(CommandCgroup::counters).unwrap_or_default();
        let watch = Watch::start(Watched { limits, group: pid, report: invocation.report.clone(), command, counters });
        let status = wait_for(pid);
        drop(watch);
        kill_descendants();
        drop(cgroup);
        Ok(finish(status))
    }

    fn spawn_failure(err: &std::io::Error, program: &OsString) -> (i32, String) {
        let code = match err.kind() {
            std::io::ErrorKind::NotFound => 127,
            std::io::ErrorKind::PermissionDenied => 126,
            _ => EXIT_SETUP_FAILED,
        };
        (code, format!("cannot start {}: {err}", program.to_string_lossy()))
    }

    /// Waits for the command, reaping adopted orphans on the way; `None` when a stop request's
    /// grace period ran out first.
    fn wait_for(pid: libc::pid_t) -> Option<libc::c_int> {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes one int.
            let reaped = unsafe { libc::waitpid(-1, &mut status, 0) };
            if reaped == pid {
                CHILD.store(0, Ordering::SeqCst);
                return Some(status);
            }
            if reaped < 0 {
                let interrupted = std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR);
                if !interrupted || GRACE_OVER.load(Ordering::SeqCst) {
                    return None;
                }
            }
        }
    }

    /// Kills and reaps every descendant: each round kills this process's children (orphans
    /// land here, and a killed child's children land here next) until there is none.
    fn kill_descendants() {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes one int.
            match unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } {
                0 => {}
                reaped if reaped > 0 => continue,
                _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => continue,
                _ => return, // ECHILD: nothing left.
            }
            for child in children() {
                // SAFETY: each pid is a live child of this process (a zombie at worst, since
                // only this process reaps them), so it cannot have been reused.
                unsafe { libc::kill(child, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// This process's children: from `/proc/self/task/<tid>/children` when the kernel has it,
    /// else by scanning every `/proc/<pid>/stat` for the parent pid.
    fn children() -> Vec<libc::pid_t> {
        // SAFETY: getpid only returns a number.
        let me = unsafe { libc::getpid() };
        if let Ok(list) = std::fs::read_to_string(format!("/proc/self/task/{me}/children")) {
            return list.split_whitespace().filter_map(|p| p.parse().ok()).collect();
        }
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        let parent_of = |pid: &str| -> Option<libc::pid_t> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
        };
        let pids = entries.flatten().filter_map(|e| e.file_name().to_str().map(str::to_string));
        pids.filter(|p| parent_of(p) == Some(me)).filter_map(|p| p.parse().ok()).collect()
    }

    /// The supervisor's own ending, mirroring the command's: its exit code, or its signal
    /// re-raised (so dracode reports "killed by signal N" as for an unconfined command).
    fn finish(status: Option<libc::c_int>) -> i32 {
        let signal = match status {
            Some(s) if libc::WIFEXITED(s) => return libc::WEXITSTATUS(s),
            Some(s) if libc::WIFSIGNALED(s) => libc::WTERMSIG(s),
            _ => match STOP.load(Ordering::SeqCst) {
                0 => libc::SIGKILL,
                stop => stop,
            },
        };
        // SAFETY: restores the default action and raises the signal at this process.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
        128 + signal
    }
}
