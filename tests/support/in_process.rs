//! A dracode command line run inside the test's own process ([`dracode::cli::run`]), seen from
//! outside exactly as the binary's process would be: it gets its own folder, environment and
//! standard streams (the process's descriptors 0, 1 and 2, pointed at files for the run) and
//! gives back its exit code and what it wrote. All of them are the process's own, so this is
//! safe only where the test is alone in its process ([`safe`]).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output};
use std::sync::Mutex;

/// Set (to anything) to run every command line as the binary's process even under nextest: to
/// compare the two, or to rule the in-process run out when a test fails.
pub const SPAWN_VAR: &str = "DRACODE_TESTS_SPAWN";

/// True when this test has its process to itself — nextest's process-per-test mode — so that its
/// folder, environment and descriptors may be lent to a command line.
pub fn safe() -> bool {
    std::env::var_os("NEXTEST_EXECUTION_MODE").is_some_and(|mode| mode == "process-per-test") && std::env::var_os(SPAWN_VAR).is_none()
}

/// One command line at a time: a test that runs two from threads gets them one after the other.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `args` in `cwd` with exactly `env` and `stdin` (nothing when `None`), inside this process.
pub fn run(cwd: &Path, args: &[OsString], env: &BTreeMap<OsString, OsString>, stdin: Option<&[u8]>) -> Output {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // Confined commands are started by the supervisor, which is the dracode binary.
    dracode_sandbox::use_supervisor_program(PathBuf::from(env!("CARGO_BIN_EXE_dracode")));
    let lent = Lent::take(cwd, env, stdin);
    // On a thread of its own, as in the binary's main thread: outside any async runtime of the
    // test's (an `async` test would otherwise own the thread the command line blocks on).
    let code = std::thread::scope(|scope| scope.spawn(|| dracode::cli::run(args.iter().cloned())).join()).unwrap_or(101);
    let (stdout, stderr) = lent.give_back();
    // As the binary's `ExitCode::from(code as u8)` does.
    Output { status: ExitStatus::from_raw((code & 0xff) << 8), stdout, stderr }
}

/// What the process lends a command line, taken back when dropped (after a panic too).
struct Lent {
    cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
    /// The process's descriptors 0, 1 and 2, kept (close-on-exec) while files stand in for them.
    streams: [libc::c_int; 3],
    out: std::fs::File,
    err: std::fs::File,
    given_back: bool,
}

impl Lent {
    fn take(cwd: &Path, env: &BTreeMap<OsString, OsString>, stdin: Option<&[u8]>) -> Self {
        let _ = std::io::stdout().flush();
        let mut input = tempfile::tempfile().expect("a file for stdin");
        input.write_all(stdin.unwrap_or_default()).and_then(|()| input.rewind()).expect("stdin written");
        let (out, err) = (tempfile::tempfile().expect("a file for stdout"), tempfile::tempfile().expect("a file for stderr"));
        let streams = [0, 1, 2].map(|fd| {
            // SAFETY: duplicates an open descriptor of this process into a new one.
            let kept = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
            assert!(kept >= 0, "descriptor {fd} duplicated");
            kept
        });
        for (file, fd) in [(input.as_raw_fd(), 0), (out.as_raw_fd(), 1), (err.as_raw_fd(), 2)] {
            // SAFETY: points a standard descriptor at an open file of this process.
            assert!(unsafe { libc::dup2(file, fd) } == fd, "descriptor {fd} lent");
        }
        let lent = Lent {
            cwd: std::env::current_dir().expect("the test's folder"),
            env: std::env::vars_os().collect(),
            streams,
            out,
            err,
            given_back: false,
        };
        std::env::set_current_dir(cwd).unwrap_or_else(|e| panic!("cannot enter {}: {e}", cwd.display()));
        replace_env(env.iter().map(|(k, v)| (k.clone(), v.clone())));
        lent
    }

    /// Restores the process and returns what the command line wrote on stdout and stderr.
    fn give_back(mut self) -> (Vec<u8>, Vec<u8>) {
        self.restore();
        let read = |file: &mut std::fs::File| {
            let mut bytes = Vec::new();
            file.rewind().and_then(|()| file.read_to_end(&mut bytes)).expect("output read back");
            bytes
        };
        (read(&mut self.out), read(&mut self.err))
    }

    fn restore(&mut self) {
        if std::mem::replace(&mut self.given_back, true) {
            return;
        }
        let _ = std::io::stdout().flush();
        for (fd, kept) in self.streams.iter().enumerate() {
            // SAFETY: puts back the descriptors kept in `take` and closes the copies.
            unsafe {
                libc::dup2(*kept, fd as libc::c_int);
                libc::close(*kept);
            }
        }
        let _ = std::env::set_current_dir(&self.cwd);
        replace_env(std::mem::take(&mut self.env));
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.restore();
    }
}

/// Makes `vars` the whole environment of this process.
fn replace_env(vars: impl IntoIterator<Item = (OsString, OsString)>) {
    for (key, _) in std::env::vars_os() {
        // SAFETY: the test is alone in its process ([`safe`]) and its own threads hold the
        // command-line lock or do not read the environment.
        unsafe { std::env::remove_var(key) };
    }
    for (key, value) in vars {
        // SAFETY: as above.
        unsafe { std::env::set_var(key, value) };
    }
}
