//! The record is honest on every path (issue 9): when an artifact cannot be written the run
//! exits 3, says which file and why, the TOTAL line does not claim success, and
//! `run.finished.exit_code` is the process's exit code; input files that would block or flood
//! dracode are refused.

use crate::support::cli::{crate_root, dracode, events, read_jsonl};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the bundled example with `--out out_dir` on a 8 KiB file system (a tmpfs mounted in a
/// private user + mount namespace), or, where the kernel allows no user namespaces, with an
/// 8 KiB file-size limit (SIGXFSZ ignored, so a write fails with EFBIG instead of killing).
/// Returns the output, the OS error expected and where `results.jsonl` can be read afterwards
/// (the tmpfs goes with the namespace, so it is copied out first); `None` when neither way
/// works here.
fn run_on_a_full_disk(cwd: &Path, out_dir: &Path) -> Option<(Output, &'static str, PathBuf)> {
    let binary = assert_cmd::cargo::cargo_bin("dracode");
    let manifest = crate_root().join("examples/quickstart.toml");
    let kept = cwd.join("kept-results.jsonl");
    let run = format!(
        "'{}' run '{}' --out '{}'; code=$?; cp '{}/results.jsonl' '{}'; exit $code",
        binary.display(),
        manifest.display(),
        out_dir.display(),
        out_dir.display(),
        kept.display()
    );
    let shell = |wrapper: &[&str], script: String| {
        Command::new(wrapper[0])
            .args(&wrapper[1..])
            .args(["sh", "-c", &script])
            .current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", cwd)
            .output()
    };
    let namespaces = ["unshare", "--user", "--map-root-user", "--mount"];
    if shell(&namespaces, "true".into()).is_ok_and(|o| o.status.success()) {
        let script = format!("mount -t tmpfs -o size=8k tmpfs '{}' || exit 99; {run}", out_dir.display());
        let output = shell(&namespaces, script).ok()?;
        return (output.status.code() != Some(99)).then_some((output, "No space left on device", kept));
    }
    // 16 blocks of 512 bytes.
    let output = shell(&["env"], format!("ulimit -f 16 && trap '' XFSZ && {run}")).ok()?;
    Some((output, "File too large", kept))
}

#[test]
fn a_full_disk_is_exit_3_naming_each_file_and_the_record_ends_on_a_whole_line() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let Some((output, reason, results)) = run_on_a_full_disk(tmp.path(), &out) else {
        eprintln!("SKIPPED: neither user namespaces nor `ulimit -f` are available here to fill a disk");
        return;
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains(&format!("error: cannot write {}: {reason}", out.join("results.jsonl").display())), "{stderr}");
    assert!(stderr.contains("error: dracode could not write all of its results (exit code 3)"), "{stderr}");
    let total = stderr.lines().find(|l| l.trim_start().starts_with("TOTAL")).unwrap_or_else(|| panic!("no TOTAL line: {stderr}"));
    assert!(total.contains("RESULTS NOT WRITTEN"), "the TOTAL line claims success: {total}");
    // Every line parses (read_jsonl panics on half a line), and the record says unfinished.
    let lines = read_jsonl(&results);
    assert!(!lines.is_empty());
    assert!(events(&lines, "run.finished").is_empty(), "an incomplete record must not end in run.finished");
}

#[test]
fn junit_and_step_summary_failures_make_run_finished_and_the_process_say_3() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    // A folder where junit.xml should go: the rename onto it fails (EISDIR).
    std::fs::create_dir_all(out.join("junit.xml")).unwrap();
    let manifest = crate_root().join("examples/quickstart.toml");
    let step_summary = tmp.path().join("no-such-folder/step-summary.md");
    let output =
        dracode(tmp.path()).arg("run").arg(&manifest).arg("--out").arg(&out).env("GITHUB_STEP_SUMMARY", &step_summary).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains(&format!("error: cannot write {}: Is a directory", out.join("junit.xml").display())), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot append to $GITHUB_STEP_SUMMARY ({}): No such file or directory", step_summary.display())),
        "{stderr}"
    );
    let lines = read_jsonl(&out.join("results.jsonl"));
    let finished = events(&lines, "run.finished");
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0]["counts"]["passed"], 2, "the tasks themselves passed");
    assert_eq!(finished[0]["exit_code"], 3, "run.finished.exit_code is the process's");
    assert!(out.join("summary.md").is_file(), "what can be written still is");
}

#[test]
fn a_replay_recording_that_is_a_fifo_a_device_or_too_big_is_refused_by_validate_and_run() {
    let tmp = tempfile::tempdir().unwrap();
    let replay = tmp.path().join("replay");
    std::fs::create_dir(&replay).unwrap();
    assert!(Command::new("mkfifo").arg(replay.join("fifo.json")).status().unwrap().success());
    std::os::unix::fs::symlink("/dev/zero", replay.join("zero.json")).unwrap();
    std::fs::write(replay.join("big.json"), format!("[{}]", " ".repeat(1024 * 1024))).unwrap();
    std::fs::write(tmp.path().join("big.json"), format!("[{}]", " ".repeat(1024 * 1024))).unwrap();
    let manifest = "[defaults]\nprovider = \"replay\"\nreplay = \"replay\"\nisolation = \"none\"\n\
        [[tasks]]\nid = \"fifo\"\nprompt = \"x\"\n\
        [[tasks]]\nid = \"zero\"\nprompt = \"x\"\n\
        [[tasks]]\nid = \"big\"\nprompt = \"x\"\n\
        [[tasks]]\nid = \"big-file\"\nprompt = \"x\"\nreplay = \"big.json\"\n";
    std::fs::write(tmp.path().join("m.toml"), manifest).unwrap();
    for command in ["validate", "run"] {
        // A FIFO read would block for ever and /dev/zero never end: the timeout is the failure.
        let output =
            dracode(tmp.path()).args([command, "m.toml"]).timeout(std::time::Duration::from_secs(60)).assert().code(2).get_output().clone();
        let stderr = String::from_utf8_lossy(&output.stderr);
        for needle in [
            "m.toml:5:1: task \"fifo\": field \"replay\": cannot read ./replay/fifo.json: not a regular file",
            "m.toml:8:1: task \"zero\": field \"replay\": cannot read ./replay/zero.json: not a regular file",
            "m.toml:11:1: task \"big\": field \"replay\": cannot read ./replay/big.json: larger than the 1024 KiB limit",
            "task \"big-file\": field \"replay\": cannot read",
        ] {
            assert!(stderr.contains(needle), "{command}: {needle:?} not in\n{stderr}");
        }
        assert!(!tmp.path().join("dracode-out").exists(), "nothing was run");
    }
}

/// A replay recording: one `run_command` of `script` (through `sh -c`), then a final answer.
fn one_command_recording(script: &str) -> String {
    let usage = serde_json::json!({"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "requests": 1});
    serde_json::json!({"responses": [
        {"content": [{"type": "tool_use", "id": "c1", "name": "run_command",
            "input": {"command": script, "shell": true, "timeout_seconds": 60}}],
         "stop_reason": "tool_use", "usage": usage},
        {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn", "usage": usage}
    ]})
    .to_string()
}

/// `idle_timeout` measures silence: a command that prints every 0.3 s for twice the limit keeps
/// its task alive; a silent command of the same length stalls it.
#[test]
fn a_command_that_keeps_printing_never_stalls_and_a_silent_one_does() {
    let tmp = tempfile::tempdir().unwrap();
    crate::support::cli::git_repo(&tmp.path().join("repo"), &[("a.txt", "a\n")]);
    let replay = tmp.path().join("replay");
    std::fs::create_dir(&replay).unwrap();
    // About 4.5 s either way, against a 2 s limit: wide margins on a loaded machine.
    let chatty = "i=0; while [ $i -lt 15 ]; do echo tick $i; sleep 0.3; i=$((i+1)); done";
    std::fs::write(replay.join("chatty.json"), one_command_recording(chatty)).unwrap();
    std::fs::write(replay.join("silent.json"), one_command_recording("sleep 4.5")).unwrap();
    let manifest = "[defaults]\nprovider = \"replay\"\nreplay = \"replay\"\nrepo = \"repo\"\nisolation = \"copy\"\nidle_timeout = \"2s\"\nrequire_change = false\n\
        [[tasks]]\nid = \"chatty\"\nprompt = \"x\"\n[[tasks]]\nid = \"silent\"\nprompt = \"x\"\n";
    std::fs::write(tmp.path().join("m.toml"), manifest).unwrap();
    let output = dracode(tmp.path()).args(["run", "m.toml", "--jobs", "2"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let lines = read_jsonl(&tmp.path().join("dracode-out/results.jsonl"));
    let chatty = crate::support::cli::finished(&lines, "chatty");
    assert_eq!(chatty["status"], "passed", "{chatty}");
    let silent = crate::support::cli::finished(&lines, "silent");
    assert_eq!(silent["status"], "stalled", "{silent}");
    assert_eq!(silent["error"]["message"], "nothing from the model or a command for 2s (idle_timeout): a stuck stream or a hung command");
}

#[test]
fn merge_that_cannot_write_its_output_is_exit_3_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = crate_root().join("examples/quickstart.toml");
    dracode(tmp.path()).arg("run").arg(&manifest).args(["--out", "shard"]).assert().success();
    std::fs::create_dir_all(tmp.path().join("merged/junit.xml")).unwrap();
    let output = dracode(tmp.path()).args(["merge", "shard", "--out", "merged"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("cannot write merged/junit.xml: Is a directory"), "{stderr}");
}
