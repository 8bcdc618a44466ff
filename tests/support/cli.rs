//! Running the real `dracode` binary in a scratch folder and reading what it wrote.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The `dracode` binary with a clean environment: no real keys leak in from the developer's
/// shell, and no config file from the checkout is picked up.
pub fn dracode(cwd: &Path) -> Command {
    let mut cmd = Command::cargo_bin("dracode").expect("the dracode binary is built for tests");
    cmd.current_dir(cwd).env_clear().env("PATH", std::env::var("PATH").unwrap_or_default()).env("HOME", cwd);
    cmd
}

/// The crate's root folder (for `examples/`).
pub fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every line of a results.jsonl, parsed; panics with the line on invalid JSON.
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSONL line {l:?}: {e}"))).collect()
}

/// The events of `kind` (`task.finished`, …).
pub fn events<'a>(all: &'a [Value], kind: &str) -> Vec<&'a Value> {
    all.iter().filter(|e| e["type"] == kind).collect()
}

/// The `task.finished` event of `task_id`.
pub fn finished<'a>(all: &'a [Value], task_id: &str) -> &'a Value {
    all.iter().find(|e| e["type"] == "task.finished" && e["task_id"] == task_id).unwrap_or_else(|| panic!("no task.finished for {task_id}"))
}

/// Runs `git args` in `dir`, panicking with stderr on failure; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@localhost")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@localhost")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Where `dir` lies in its git repository (`examples/x/`, with the slash; empty outside git):
/// what a task's patch paths and `files_changed` start with, since they are rooted at the root.
pub fn repo_prefix(dir: &Path) -> String {
    let out = std::process::Command::new("git").args(["rev-parse", "--show-prefix"]).current_dir(dir).output();
    out.ok().filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default()
}

/// A scripted model's turns (for the `replay` provider): each of `commands` by `run_command`
/// (shell, `timeout_seconds` each), then the final answer `last`.
pub fn shell_turns(commands: &[String], timeout_seconds: u64, last: &str) -> Value {
    let mut turns: Vec<Value> = commands
        .iter()
        .enumerate()
        .map(|(i, c)| {
            serde_json::json!({"content": [{"type": "tool_use", "id": format!("c{i}"), "name": "run_command",
                "input": {"command": c, "shell": true, "timeout_seconds": timeout_seconds}}], "stop_reason": "tool_use"})
        })
        .collect();
    turns.push(serde_json::json!({"content": [{"type": "text", "text": last}], "stop_reason": "end_turn"}));
    Value::Array(turns)
}

/// A git repository in `dir` with `files` committed.
pub fn git_repo(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "base"]);
}

/// Every file under `dir` whose bytes contain `needle` (to prove a secret went nowhere).
pub fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes())) {
                hits.push(path);
            }
        }
    }
    hits
}
