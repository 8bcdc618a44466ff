//! Running dracode's command line in a scratch folder and reading what it wrote.
//!
//! [`dracode`] runs a command line the way the binary does — same arguments, environment,
//! folder, streams and exit code — inside the test's own process ([`dracode::cli::run`]) when
//! each test has a process of its own (`cargo nextest run`), and as the built binary otherwise
//! (`cargo test` runs tests as threads of one process, which share a folder and an environment).
//! A test about the process itself (signals, a kill, its descriptors, a time limit) uses
//! [`dracode_process`].

use assert_cmd::Command;
use assert_cmd::assert::{Assert, OutputAssertExt};
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Output;

/// The `dracode` binary with a clean environment: no real keys leak in from the developer's
/// shell, and no config file from the checkout is picked up.
pub fn dracode_process(cwd: &Path) -> Command {
    let mut cmd = Command::cargo_bin("dracode").expect("the dracode binary is built for tests");
    cmd.current_dir(cwd).env_clear().env("PATH", std::env::var("PATH").unwrap_or_default()).env("HOME", cwd);
    cmd
}

/// A `dracode` command line in `cwd` with a clean environment (PATH, and HOME = `cwd`), run
/// in-process where that is safe (see the module's doc).
pub fn dracode(cwd: &Path) -> Dracode {
    let env = BTreeMap::from([
        (OsString::from("PATH"), std::env::var_os("PATH").unwrap_or_default()),
        (OsString::from("HOME"), cwd.as_os_str().to_os_string()),
    ]);
    Dracode { cwd: cwd.to_path_buf(), args: Vec::new(), env, stdin: None, timeout: None }
}

/// A command line to run, built as [`assert_cmd::Command`] is.
#[derive(Debug, Clone)]
pub struct Dracode {
    cwd: PathBuf,
    args: Vec<OsString>,
    env: BTreeMap<OsString, OsString>,
    stdin: Option<Vec<u8>>,
    /// A time limit: only a process can be killed when it is over, so it runs as one.
    timeout: Option<std::time::Duration>,
}

impl Dracode {
    /// Adds one argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&mut self, args: I) -> &mut Self {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// Sets one environment variable.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.env.insert(key.as_ref().to_os_string(), value.as_ref().to_os_string());
        self
    }

    /// Sets environment variables.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    /// Removes one environment variable.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Self {
        self.env.remove(key.as_ref());
        self
    }

    /// Removes every environment variable.
    pub fn env_clear(&mut self) -> &mut Self {
        self.env.clear();
        self
    }

    /// Runs in `dir` instead.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.cwd = dir.as_ref().to_path_buf();
        self
    }

    /// What the command reads on its standard input (else nothing: `/dev/null`).
    pub fn write_stdin(&mut self, bytes: impl Into<Vec<u8>>) -> &mut Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Kills the command after `limit` (it then runs as a process).
    pub fn timeout(&mut self, limit: std::time::Duration) -> &mut Self {
        self.timeout = Some(limit);
        self
    }

    /// Runs it and returns its exit status and output.
    pub fn output(&mut self) -> std::io::Result<Output> {
        if self.timeout.is_none() && crate::support::in_process::safe() {
            return Ok(crate::support::in_process::run(&self.cwd, &self.args, &self.env, self.stdin.as_deref()));
        }
        self.as_process().output()
    }

    /// Runs it for assertions.
    pub fn assert(&mut self) -> Assert {
        self.output().expect("dracode runs").assert()
    }

    /// The same command line as the built binary's process.
    pub fn as_process(&self) -> Command {
        let mut cmd = Command::cargo_bin("dracode").expect("the dracode binary is built for tests");
        cmd.current_dir(&self.cwd).env_clear().envs(&self.env).args(&self.args);
        if let Some(bytes) = &self.stdin {
            cmd.write_stdin(bytes.clone());
        }
        if let Some(limit) = self.timeout {
            cmd.timeout(limit);
        }
        cmd
    }
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

/// A project as a pull request's tests want it: `dir/repo`, a git repository with `files`
/// committed whose `origin` is the bare `dir/remote.git` (its `main` pushed there), and a TMPDIR
/// of its own, `dir/tmp`. Returns (repo, remote, tmpdir).
pub fn repo_with_origin(dir: &Path, files: &[(&str, &str)]) -> (PathBuf, PathBuf, PathBuf) {
    let remote = dir.join("remote.git");
    std::fs::create_dir_all(&remote).unwrap();
    git(&remote, &["init", "-q", "--bare", "-b", "main"]);
    let repo = dir.join("repo");
    git_repo(&repo, files);
    git(&repo, &["remote", "add", "origin", remote.to_str().unwrap()]);
    git(&repo, &["push", "-q", "origin", "main"]);
    let tmpdir = dir.join("tmp");
    std::fs::create_dir_all(&tmpdir).unwrap();
    (repo, remote, tmpdir)
}

/// Every file under `dir` (not its folders), in no set order.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

/// Every file under `dir` whose bytes contain `needle` (to prove a secret went nowhere).
pub fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let contains = |path: &PathBuf| std::fs::read(path).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()));
    files_under(dir).into_iter().filter(contains).collect()
}
