//! Issue 8: a confined command cannot reach dracode (or any process outside its sandbox), gains
//! no privilege, and leaves no process behind.

use crate::support::sandbox::{Scratch, alive, is_root, supported};
use dracode_sandbox::SandboxMode;
use std::time::Duration;

/// A process outside the sandbox holding a secret in its environment; killed when dropped.
struct SecretHolder(std::process::Child);

impl SecretHolder {
    fn start() -> SecretHolder {
        let child = std::process::Command::new("sleep").arg("60").env("HOLDER_SECRET", "hunter2-holder").spawn().unwrap();
        SecretHolder(child)
    }
}

impl Drop for SecretHolder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn sandbox_cannot_read_the_environ_or_memory_of_dracode() {
    if !supported() {
        return;
    }
    let s = Scratch::new();
    let holder = SecretHolder::start();
    // The test process plays dracode: it is the supervisor's parent, and cargo gave it
    // CARGO_PKG_NAME, which the command's own environment (PATH, HOME) does not have.
    let (me, other) = (std::process::id(), holder.0.id());
    let script = format!(
        "for p in {me} {other} $PPID; do cat /proc/$p/environ; head -c 16 /proc/$p/mem; cat /proc/$p/cmdline >/dev/null && echo cmdline-ok; done; \
         tr '\\0' '\\n' < /proc/self/environ | grep -c HOME"
    );
    let f = s.sh(&s.policy(SandboxMode::WorkspaceWrite), &script).await;
    assert!(!f.output.contains("hunter2") && !f.output.contains("CARGO_PKG_NAME"), "a secret leaked:\n{}", f.output);
    assert_eq!(f.output.matches("Permission denied").count(), 6, "{}", f.output);
    assert!(f.output.contains("cmdline-ok"), "/proc stays readable: {}", f.output);
}

#[tokio::test]
async fn sandbox_drops_every_privilege() {
    if !supported() {
        return;
    }
    let s = Scratch::new();
    let f = s.sh(&s.policy(SandboxMode::WorkspaceWrite), "grep -E '^(Cap|NoNewPrivs|Seccomp:)' /proc/self/status").await;
    let field = |name: &str| f.output.lines().find(|l| l.starts_with(name)).map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string());
    for name in ["CapInh:", "CapPrm:", "CapEff:", "CapAmb:"] {
        assert_eq!(field(name).as_deref(), Some("0000000000000000"), "{name}\n{}", f.output);
    }
    if is_root() {
        assert_eq!(field("CapBnd:").as_deref(), Some("0000000000000000"), "{}", f.output);
    }
    assert_eq!(field("NoNewPrivs:").as_deref(), Some("1"));
    assert_eq!(field("Seccomp:").as_deref(), Some("2"));
    // setuid binaries do not elevate under no_new_privs (`sudo` on a GitHub runner).
    let sudo = s.sh(&s.policy(SandboxMode::WorkspaceWrite), "command -v sudo >/dev/null || { echo no-sudo; exit 1; }; sudo -n true").await;
    assert_ne!(sudo.exit_code, Some(0), "{}", sudo.output);
}

#[tokio::test]
async fn sandbox_setsid_and_double_fork_are_gone_when_the_command_returns() {
    if !supported() {
        return;
    }
    let s = Scratch::new();
    let script = "setsid sleep 1000 > /dev/null 2>&1 & echo $! > pid1; \
                  sh -c 'sh -c \"sleep 999 & echo \\$! > pid2\" &'; \
                  sleep 0.2; kill -9 $PPID 2>&1 || echo supervisor-safe; exit 3";
    let f = s.sh(&s.policy(SandboxMode::WorkspaceWrite), script).await;
    assert_eq!(f.exit_code, Some(3), "the exit code passes through: {}", f.output);
    assert!(f.output.contains("supervisor-safe"), "{}", f.output);
    for file in ["pid1", "pid2"] {
        let pid: u32 = std::fs::read_to_string(s.ws.join(file)).unwrap().trim().parse().unwrap();
        assert!(!alive(pid), "{file} ({pid}) survived the command");
    }
}

#[tokio::test]
async fn sandbox_timeout_and_cancel_kill_every_process() {
    if !supported() {
        return;
    }
    let s = Scratch::new();
    let policy = s.policy(SandboxMode::WorkspaceWrite);
    let script = "setsid sleep 1000 > /dev/null 2>&1 & echo $! > pid; trap '' TERM; sleep 1000";
    let started = std::time::Instant::now();
    let f = s.sh_with_timeout(&policy, script, Duration::from_millis(500)).await;
    assert!(f.timed_out && started.elapsed() < Duration::from_secs(5), "{f:?}");
    let pid: u32 = std::fs::read_to_string(s.ws.join("pid")).unwrap().trim().parse().unwrap();
    assert!(!alive(pid), "the setsid daemon survived the timeout");

    // Dropping the call (a cancelled task) stops the supervisor, which cleans up.
    std::fs::remove_file(s.ws.join("pid")).unwrap();
    let cancelled = tokio::time::timeout(Duration::from_millis(500), s.sh(&policy, script)).await;
    assert!(cancelled.is_err());
    let pid: u32 = std::fs::read_to_string(s.ws.join("pid")).unwrap().trim().parse().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while alive(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(pid), "the setsid daemon survived the cancellation");
}

#[tokio::test]
async fn sandbox_passes_the_signal_that_ended_the_command() {
    if !supported() {
        return;
    }
    let s = Scratch::new();
    let f = s.sh(&s.policy(SandboxMode::WorkspaceWrite), "kill -9 $$").await;
    assert_eq!((f.exit_code, f.signal), (None, Some(9)), "{f:?}");
}

/// `cmd`, run as the unprivileged user 65534 when this test runs as root (so that reading
/// another process's memory depends on dumpability, not on capabilities).
fn as_plain_user(program: &str) -> std::process::Command {
    if !is_root() {
        return std::process::Command::new(program);
    }
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", program]);
    cmd
}

#[test]
fn dracode_marks_itself_non_dumpable() {
    if is_root() && std::process::Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipping: running as root without setpriv, so no unprivileged reader can be started");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let fifo = dir.path().join("blocks.toml");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o666) }, 0);
    let start = |program: &str, args: &[&str]| {
        let mut cmd = as_plain_user(program);
        cmd.args(args).env("HOLDER_SECRET", "hunter2").stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
        SecretHolder(cmd.spawn().unwrap())
    };
    // dracode blocks opening the FIFO; a plain `sleep` of the same user is the control.
    let dracode = start(env!("CARGO_BIN_EXE_dracode"), &["validate", fifo.to_str().unwrap()]);
    let control = start("sleep", &["60"]);
    std::thread::sleep(Duration::from_millis(300));
    let read = |pid: u32| as_plain_user("cat").arg(format!("/proc/{pid}/environ")).output().unwrap();
    let (ours, theirs) = (read(dracode.0.id()), read(control.0.id()));
    assert!(String::from_utf8_lossy(&theirs.stdout).contains("hunter2"), "the control is readable: {theirs:?}");
    assert!(!String::from_utf8_lossy(&ours.stdout).contains("hunter2") && !ours.status.success(), "{ours:?}");
}
