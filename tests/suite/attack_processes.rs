//! Issue 27: nothing a command does can end, weaken or outlive its confinement. Commands cannot
//! change another process's limits (the supervisor's, dracode's), the keyring and SysV IPC are
//! refused, and a process that escaped a dead supervisor is found and killed by dracode's own
//! sweep, its task ending `error`.

use super::attacks::Scenario;
use crate::support::cli::{finished, git, read_jsonl};
use crate::support::sandbox::{alive, supported};
use std::path::Path;
use std::time::{Duration, Instant};

/// The system's Python (a pyenv shim under /root is unreadable to the unprivileged run).
const PYTHON: &str = "/usr/bin/python3";
/// An egress allowlist: Internet sockets are allowed, and a connect the broker refuses is
/// reported (by the supervisor, to a file).
const ALLOWLIST: &str = "network = [\"example.org\"]";
/// A direct connect the broker refuses (and reports).
const CONNECT: &str = "/usr/bin/python3 -c 'import socket; socket.create_connection((\"1.2.3.4\", 80), 2)' 2>&1 | tail -1";

/// The pids of the processes whose command line is exactly `args` (NUL-separated).
fn pids_running(args: &[&str]) -> Vec<u32> {
    let wanted: Vec<u8> = args.iter().flat_map(|a| a.bytes().chain([0])).collect();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let pids = entries.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    pids.filter(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c == wanted)).filter(|&p| alive(p)).collect()
}

/// Asserts no process runs `args`, killing any that does first (so a failing test leaves
/// nothing behind).
fn assert_none_running(args: &[&str], what: &str) {
    let survivors = pids_running(args);
    for &pid in &survivors {
        // SAFETY: kill only sends a signal.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
    assert!(survivors.is_empty(), "{what} {survivors:?} outlived dracode");
}

#[test]
fn attack_prlimit_on_the_supervisor_is_refused_and_its_daemon_dies() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    // The daemon is `sleep 3127`, started before the attack; then the supervisor ($PPID) gets
    // a zero file size limit, and a refused connect makes it write a report.
    let commands = [
        format!(
            "setsid sleep 3127 >/dev/null 2>&1 & sleep 0.2; prlimit --pid $PPID --fsize=0: 2>&1; echo prlimit-rc=$?; \
             {CONNECT}; sleep 0.3; echo after-connect"
        ),
        format!(
            "nice -n 5 true && ulimit -n 256 && prlimit --nofile=128 true && taskset -c 0 true && ionice -c3 true && \
             {PYTHON} -c 'import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100))' && echo own-limits-ok"
        ),
    ];
    let r = s.run("prlimit-supervisor", &commands, ALLOWLIST, &[], &[]);
    assert_none_running(&["sleep", "3127"], "the setsid daemon");
    let out = r.outputs();
    assert!(out[0].contains("Operation not permitted") && !out[0].contains("prlimit-rc=0"), "{}", out[0]);
    assert!(out[1].contains("own-limits-ok"), "a command still sets its own limits: {}", out[1]);
    r.assert_finished("passed");
}

#[test]
fn attack_prlimit_on_dracode_is_refused_and_every_task_is_reported() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let attack = crate::support::cli::shell_turns(
        &["D=$(awk '/^PPid/ {print $2}' /proc/$PPID/status); prlimit --pid $D --fsize=0: 2>&1; echo prlimit-rc=$?; \
           curl -s -m 2 http://1.2.3.4/ 2>&1; echo curl-rc=$?"
            .to_string()],
        20,
        "attacked",
    );
    let honest = crate::support::cli::shell_turns(&["sleep 2; echo honest".to_string()], 20, "done");
    std::fs::write(s.root.join("attack.json"), attack.to_string()).unwrap();
    std::fs::write(s.root.join("honest.json"), honest.to_string()).unwrap();
    let manifest = "[defaults]\nprovider = \"replay\"\nrepo = \"repo\"\nisolation = \"copy\"\nrequire_change = false\n\
                    [[tasks]]\nid = \"attack\"\nprompt = \"p\"\nreplay = \"attack.json\"\n\
                    [[tasks]]\nid = \"honest\"\nprompt = \"p\"\nreplay = \"honest.json\"\n";
    std::fs::write(s.root.join("two.toml"), manifest).unwrap();
    let out = s.root.join("out");
    let mut cmd = crate::support::cli::dracode(&s.root);
    let output = cmd.env("HOME", &s.home).args(["run", "two.toml", "--jobs", "2", "--out"]).arg(&out).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "dracode ended honestly (status {:?}): {stderr}", output.status);
    let events = read_jsonl(&out.join("results.jsonl"));
    assert_eq!(finished(&events, "honest")["status"], "passed");
    assert_eq!(finished(&events, "attack")["status"], "passed");
    let attack_output: String =
        events.iter().filter(|e| e["type"] == "tool.completed" && e["task_id"] == "attack").map(|e| e["output"].to_string()).collect();
    assert!(attack_output.contains("Operation not permitted") && !attack_output.contains("prlimit-rc=0"), "{attack_output}");
}

/// The daemon of the verdict forgery: waits for the check's supervisor (`sh -c "sh test.sh"`),
/// swaps the protected test.sh for `exit 0` while it runs, then puts the original back.
const SWAPPER: &str = r#"
import os, sys, time
orig = open("test.sh").read()
def check_running():
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            args = open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")
        except OSError:
            continue
        if b"__sandbox-exec" in args and len(args) > 2 and args[-2] == b"sh test.sh":
            return p
    return None
deadline = time.time() + 60
while time.time() < deadline:
    p = check_running()
    if p:
        open("test.sh", "w").write("exit 0\n")
        while os.path.exists("/proc/" + p):
            time.sleep(0.005)
        open("test.sh", "w").write(orig)
        break
"#;

#[test]
fn attack_a_daemon_swapping_the_protected_test_during_the_check_never_passes() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    std::fs::write(s.repo.join("test.sh"), "echo the test fails\nexit 1\n").unwrap();
    git(&s.repo, &["add", "test.sh"]);
    git(&s.repo, &["commit", "-q", "-m", "a failing test"]);
    let script = SWAPPER.replace('\'', "'\\''");
    let commands = [format!(
        "printf '%s' '{script}' > \"$TMPDIR/swap.py\"; setsid {PYTHON} \"$TMPDIR/swap.py\" swapper-3128 >/dev/null 2>&1 & \
         echo innocent >> README.md; sleep 0.3; prlimit --pid $PPID --fsize=0: 2>&1; {CONNECT}"
    )];
    let fields = format!("check = \"sh test.sh\"\nprotect = [\"test.sh\"]\n{ALLOWLIST}");
    let r = s.run("swap", &commands, &fields, &[], &[]);
    let swappers: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains("swapper-3128")))
        .collect();
    for &pid in &swappers {
        // SAFETY: kill only sends a signal.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
    let task = finished(&r.events, "attack");
    assert_ne!(task["status"], "passed", "the forged check passed: {task}\n{}", r.all_output());
    assert!(swappers.is_empty(), "the swapping daemon outlived dracode: {swappers:?}");
}

/// A command's output with `ctypes` calls into the keyring and SysV IPC, each printed as
/// `name=<result>/<errno>`; anything created is removed at once.
const IPC_PROBE: &str = r#"
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
add_key, keyctl = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
def show(name, r):
    print("%s=%d/%d" % (name, r, ctypes.get_errno() if r < 0 else 0))
r = libc.syscall(add_key, b"user", b"dracode-probe", b"secret", 6, ctypes.c_int(-4))
show("add_key", r)
if r >= 0:
    libc.syscall(keyctl, 21, r)
show("keyctl", libc.syscall(keyctl, 0, ctypes.c_int(-4), 0))
r = libc.shmget(0, 4096, 0o1600)
show("shmget", r)
if r >= 0:
    libc.shmctl(r, 0, None)
r = libc.semget(0, 1, 0o1600)
show("semget", r)
if r >= 0:
    libc.semctl(r, 0, 0)
r = libc.msgget(0, 0o1600)
show("msgget", r)
if r >= 0:
    libc.msgctl(r, 0, None)
from multiprocessing import shared_memory
import multiprocessing
m = shared_memory.SharedMemory(create=True, size=16)
m.buf[0] = 7
m.close()
m.unlink()
lock = multiprocessing.Lock()
lock.acquire()
lock.release()
print("posix-shm-ok")
"#;

#[test]
fn attack_keyring_and_sysv_ipc_are_refused_posix_shared_memory_works() {
    if !supported() || !Path::new(PYTHON).exists() {
        return;
    }
    let s = Scenario::new();
    let script = IPC_PROBE.replace('\'', "'\\''");
    let commands = [format!("printf '%s' '{script}' > \"$TMPDIR/ipc.py\"; {PYTHON} \"$TMPDIR/ipc.py\" 2>&1")];
    let r = s.run("ipc", &commands, "", &[], &[]);
    r.assert_finished("passed");
    let out = r.outputs()[0].to_string();
    for name in ["add_key", "keyctl", "shmget", "semget", "msgget"] {
        assert!(out.contains(&format!("{name}=-1/{}", libc::EPERM)), "{name} was not refused:\n{out}");
    }
    assert!(out.contains("posix-shm-ok"), "POSIX shared memory broke:\n{out}");
}

#[test]
fn attack_a_killed_supervisor_leaves_an_orphan_that_dracode_sweeps_and_the_task_errs() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let turns = crate::support::cli::shell_turns(&["setsid sleep 3129 >/dev/null 2>&1 & exec sleep 29".to_string()], 20, "done");
    std::fs::write(s.root.join("orphan.json"), turns.to_string()).unwrap();
    let manifest = "[defaults]\nprovider = \"replay\"\nrepo = \"repo\"\nisolation = \"copy\"\nrequire_change = false\n\
                    [[tasks]]\nid = \"orphan\"\nprompt = \"p\"\nreplay = \"orphan.json\"\n";
    std::fs::write(s.root.join("orphan.toml"), manifest).unwrap();
    let out = s.root.join("out");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_dracode"))
        .current_dir(&s.root)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &s.home)
        .args(["run", "orphan.toml", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The command's supervisor, once the daemon runs; killed from here, not from the sandbox.
    let deadline = Instant::now() + Duration::from_secs(15);
    let supervisor = loop {
        let supervisors = pids_running_containing("__sandbox-exec", "exec sleep 29");
        if !pids_running(&["sleep", "3129"]).is_empty() && supervisors.len() == 1 {
            break supervisors[0];
        }
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: kill only sends a signal, to the supervisor found above.
    unsafe { libc::kill(supervisor as libc::pid_t, libc::SIGKILL) };
    let output = child.wait_with_output().unwrap();
    assert_none_running(&["sleep", "3129"], "the orphan of the killed supervisor");
    let events = read_jsonl(&out.join("results.jsonl"));
    let task = finished(&events, "orphan");
    assert_eq!(task["status"], "error", "{task}\n{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(task["error"]["kind"], "sandbox", "{task}");
}

/// The pids of the processes whose command line holds both `a` and `b`.
fn pids_running_containing(a: &str, b: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let pids = entries.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    pids.filter(|p| {
        std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
            let c = String::from_utf8_lossy(&c);
            c.contains(a) && c.contains(b)
        })
    })
    .filter(|&p| alive(p))
    .collect()
}
