//! Issue 17, "limits that keep the machine alive": a fork bomb and a memory hog end their own
//! task (`error`, kind `resource`, naming the limit) while the other tasks of the run carry on
//! and nothing is left running; the per-process limits (open files, file size, CPU time) bite.
//! Run as root and as an unprivileged user (CI runs the `sandbox` filter as uid 65534).

use crate::support::cli::{dracode, finished, git_repo, read_jsonl};
use crate::support::sandbox::{Scratch, supported};
use dracode_sandbox::incidents::Report;
use dracode_sandbox::{Limits, SandboxMode};
use serde_json::{Value, json};
use std::path::Path;

/// What the scripted model says after its command.
const FINAL: &str = "all done after the command";

/// A `sleep` argument no other process on the machine has: how leftovers are found.
const BOMB_SLEEP: &str = "987.65";

/// Writes the replay of a task whose model runs `command` with `run_command`, then answers.
fn replay(dir: &Path, id: &str, command: &str) {
    let turns = json!([
        {"content": [{"type": "tool_use", "id": "c0", "name": "run_command",
            "input": {"command": command, "shell": true, "timeout_seconds": 60}}], "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": FINAL}], "stop_reason": "end_turn"}
    ]);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(format!("{id}.json")), turns.to_string()).unwrap();
}

/// Runs `manifest` (tasks only; the defaults are added) in a scratch folder with a git repo and
/// the replays of `commands` (task id → command); returns the events.
fn run(manifest: &str, commands: &[(&str, &str)], args: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    git_repo(&root.join("repo"), &[("README.md", "project\n")]);
    for (id, command) in commands {
        replay(&root.join("replays"), id, command);
    }
    let defaults =
        "[defaults]\nprovider = \"replay\"\nreplay = \"replays\"\nrepo = \"repo\"\nisolation = \"copy\"\nrequire_change = false\n";
    std::fs::write(root.join("m.toml"), format!("{defaults}{manifest}")).unwrap();
    let output = dracode(&root).args(["run", "m.toml", "--out", "out"]).args(args).output().unwrap();
    let results = root.join("out/results.jsonl");
    assert!(results.exists(), "no results: {}", String::from_utf8_lossy(&output.stderr));
    read_jsonl(&results)
}

/// The pids of live processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let pids = entries.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    pids.filter(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains(needle) && crate::support::sandbox::alive(*pid)
    })
    .collect()
}

/// Asserts that task `id` ended `error`, kind `resource`, its message naming `limit` and
/// `value`, right after the command (the model's final words never came).
fn assert_resource(events: &[Value], id: &str, limit: &str, value: &str) {
    let task = finished(events, id);
    assert_eq!(task["status"], "error", "{task}");
    assert_eq!(task["error"]["kind"], "resource", "{task}");
    let message = task["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("{limit} limit ({value}")), "{message}");
    let said_final = events.iter().any(|e| e["task_id"] == id && e["type"] == "agent.message");
    assert!(!said_final, "the task went on after the limit");
}

#[test]
fn sandbox_limits_a_fork_bomb_and_a_memory_hog_end_only_their_own_task() {
    if !supported() {
        return;
    }
    let bomb = format!("for i in $(seq 200); do sleep {BOMB_SLEEP} & done; wait; echo bomb-finished");
    let hog = "python3 -c \"x = b'a' * (600 << 20); import time; time.sleep(20); print('hog-finished')\"";
    let manifest = "[[tasks]]\nid = \"bomb\"\nprompt = \"p\"\n[tasks.limits]\nprocesses = 32\n\
                    [[tasks]]\nid = \"hog\"\nprompt = \"p\"\n[tasks.limits]\nmemory = \"200MiB\"\n\
                    [[tasks]]\nid = \"fine\"\nprompt = \"p\"\n";
    let started = std::time::Instant::now();
    let events = run(manifest, &[("bomb", &bomb), ("hog", hog), ("fine", "echo fine-ran")], &["--jobs", "2"]);
    assert_resource(&events, "bomb", "processes", "32");
    assert_resource(&events, "hog", "memory", "200 MiB");
    assert_eq!(finished(&events, "fine")["status"], "passed");
    let outputs: Vec<&str> = events.iter().filter(|e| e["type"] == "tool.completed").filter_map(|e| e["output"].as_str()).collect();
    assert!(outputs.iter().any(|o| o.contains("fine-ran")), "{outputs:?}");
    assert!(!outputs.iter().any(|o| o.contains("bomb-finished") || o.contains("hog-finished")), "{outputs:?}");
    assert!(events.iter().any(|e| e["type"] == "run.finished"), "the run carried on to its end");
    assert!(started.elapsed().as_secs() < 15, "killed at once, not at a timeout: {:?}", started.elapsed());
    assert_eq!(processes_with(BOMB_SLEEP), Vec::<u32>::new(), "the bomb's sleepers outlived their task");
}

#[test]
fn sandbox_limits_a_check_that_passes_a_limit_ends_the_task_as_resource() {
    if !supported() {
        return;
    }
    let hog = "check = \"python3 -c \\\"x = b'a' * (600 << 20); import time; time.sleep(20)\\\"\"\n";
    let manifest = format!(
        "[[tasks]]\nid = \"checked\"\nprompt = \"p\"\n{hog}[tasks.limits]\nmemory = \"200MiB\"\n\
         [[tasks]]\nid = \"before\"\nprompt = \"p\"\ncheck_before = true\n{hog}[tasks.limits]\nmemory = \"200MiB\"\n"
    );
    let events = run(&manifest, &[("checked", "echo agent-ran"), ("before", "echo agent-ran")], &["--jobs", "2"]);
    for id in ["checked", "before"] {
        let task = finished(&events, id);
        assert_eq!((&task["status"], &task["error"]["kind"]), (&json!("error"), &json!("resource")), "{task}");
        assert!(task["error"]["message"].as_str().unwrap_or_default().contains("memory limit (200 MiB"), "{task}");
    }
    let agent_ran = |id: &str| events.iter().any(|e| e["task_id"] == id && e["type"] == "tool.started");
    assert!(agent_ran("checked"), "the check ran after the agent");
    assert!(!agent_ran("before"), "a check_before past a limit ends the task before the agent");
}

#[test]
fn sandbox_limits_invalid_values_fail_validate_naming_file_line_task_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = "[[tasks]]\nid = \"x\"\nprompt = \"p\"\n[tasks.limits]\nmemory = 512\nprocesses = 0\nfile_size = \"1GB\"\n";
    std::fs::write(dir.path().join("m.toml"), manifest).unwrap();
    for command in ["validate", "run"] {
        let output = dracode(dir.path()).args([command, "m.toml"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command}: {stderr}");
        for part in ["m.toml:4", "task \"x\"", "\"limits\"", "memory: 512 has no unit", "processes: 0", "file_size: invalid size \"1GB\""] {
            assert!(stderr.contains(part), "{command}: {part} in {stderr}");
        }
    }
}

/// Runs `script` confined with `limits` in a scratch layout.
fn confined(limits: Limits, script: &str) -> dracode_sandbox::process::Finished {
    let s = Scratch::new();
    let mut policy = s.policy(SandboxMode::WorkspaceWrite);
    policy.limits = limits;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(s.sh(&policy, script))
}

#[test]
fn sandbox_limits_open_files_and_file_size_bite() {
    if !supported() {
        return;
    }
    let limits = Limits { open_files: Some(64), file_size: Some(1 << 20), ..Limits::default() };
    let script = "python3 -c \"fs = [open('/dev/null') for i in range(100)]\" 2>&1 | tail -1; \
                  python3 -c \"open('big', 'wb').write(b'a' * (2 << 20))\" 2>&1 | tail -1; \
                  python3 -c \"fs = [open('/dev/null') for i in range(50)]; open('small', 'wb').write(b'a' * 1000); print('within-ok')\"";
    let f = confined(limits, script);
    assert!(f.output.contains("[Errno 24] Too many open files"), "{}", f.output);
    assert!(f.output.contains("[Errno 27] File too large"), "{}", f.output);
    assert!(f.output.contains("within-ok"), "{}", f.output);
    assert_eq!(f.exit_code, Some(0), "{}", f.output);
    assert!(f.reports.is_empty(), "per-process limits are the program's errors, not reports: {:?}", f.reports);
}

#[test]
fn sandbox_limits_cpu_time_stops_a_spinning_command_and_reports_it() {
    if !supported() {
        return;
    }
    let limits = Limits { cpu_time: Some(1), ..Limits::default() };
    let f = confined(limits, "while :; do :; done");
    assert_eq!(f.signal, Some(libc::SIGKILL), "{}", f.output);
    assert!(f.output.contains("cpu_time limit (1s)"), "the command's stderr says why: {}", f.output);
    assert!(
        matches!(f.reports.as_slice(), [Report::LimitReached { limit, value, command }] if limit == "cpu_time" && value == "1s" && command.contains("while")),
        "{:?}",
        f.reports
    );
}

/// Whether this user may make cgroups next to its own (root on a host or in a container).
fn cgroups_delegated() -> bool {
    let probe = std::path::Path::new("/sys/fs/cgroup/memory").join(format!("dracode-probe-{}", std::process::id()));
    let made = std::fs::create_dir(&probe).is_ok();
    let _ = std::fs::remove_dir(&probe);
    made || std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control").is_ok_and(|t| t.contains("memory"))
}

#[test]
fn sandbox_limits_with_cgroups_a_hog_that_ends_before_the_monitor_looks_is_still_reported() {
    if !supported() || !cgroups_delegated() {
        eprintln!("skipping: this user cannot make cgroups here (the monitor alone is tested above)");
        return;
    }
    let limits = Limits { memory: Some(200 << 20), processes: Some(16), ..Limits::default() };
    let f = confined(limits.clone(), "python3 -c \"x = b'a' * (600 << 20); print('hog-survived')\"");
    assert!(!f.output.contains("hog-survived"), "{}", f.output);
    assert!(matches!(f.reports.as_slice(), [Report::LimitReached { limit, .. }] if limit == "memory"), "{:?}\n{}", f.reports, f.output);
    // The kernel refuses the 18th task at once: a shell that gives up on a failed fork is still
    // reported, and the command's groups are removed.
    let script = "echo cgroup=$(grep :pids: /proc/self/cgroup | cut -d: -f3); for i in $(seq 40); do sleep 5 & done 2>/dev/null";
    let f = confined(limits, script);
    assert!(matches!(f.reports.as_slice(), [Report::LimitReached { limit, .. }] if limit == "processes"), "{:?}\n{}", f.reports, f.output);
    let group = f.output.lines().find_map(|l| l.strip_prefix("cgroup=")).unwrap_or_default().trim().to_string();
    assert!(group.contains("dracode-"), "the command ran in a group of its own: {}", f.output);
    let dir = format!("/sys/fs/cgroup/pids{group}");
    assert!(!std::path::Path::new(&dir).exists(), "{dir} was not removed");
}
