//! `codex`: a one-task dracode run against `codex exec` on the same one-turn task and the same
//! local mock server (`chat_server.rs`, answering at once: each tool's own cost, not the
//! model's): dracode's task asks the server's Chat Completions endpoint (provider `mock`, as in
//! `scale.rs`), Codex its Responses endpoint (the only API it speaks), and both get the text
//! "done" in one turn. Whole processes, wall time from spawn to exit, in alternating runs after
//! one checked run of each; every timed run is checked too (dracode's task passed, Codex wrote
//! its last message), and the server must have served every request it was sent.
//!
//! Codex is `DRACODE_BENCH_CODEX` (a path to the `codex` program) when set; else the install
//! the tests use (`tests/support/agents.rs`: `npm install --prefix` into
//! `CARGO_TARGET_TMPDIR/agents/codex-VERSION`, at the version `.github/action/agents.tsv`
//! pins), made here when missing. Without one the section prints why and measures nothing.

use super::chat_server::{ChatServer, ServerStats};
use super::scale::Bench;
use super::{Measured, ms, ratio, spawn_measure};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The model's latency per reply: none, so each figure is the tool's own cost.
const LATENCY: Duration = Duration::ZERO;

/// Timed runs of each tool.
const RUNS: usize = 11;

/// The goals of issue 43: dracode at most this fraction of `codex exec`, and at most this long.
const GOAL_RATIO: f64 = 0.1;
const GOAL: Duration = Duration::from_millis(50);

/// The prompt both tools are given.
const PROMPT: &str = "say hi";

/// The pinned agents: name, npm package, version, program (as the action installs them).
const AGENTS: &str = include_str!("../../.github/action/agents.tsv");

/// Measures both and prints one line (or why nothing was measured).
pub fn one_task_against_codex(exe: &Path, root: &Path) {
    let codex = match find_codex() {
        Ok(codex) => codex,
        Err(why) => {
            println!("one task against `codex exec`: skipped ({why})");
            return;
        }
    };
    let server = ChatServer::start(LATENCY);
    let bench = Bench::new(exe, root, "codex-dracode");
    bench.point_at(&server);
    let manifest = bench.manifest(1);
    let scratch = CodexScratch::new(root, &server);
    let checked = check_dracode(exe, &manifest).and_then(|()| scratch.check(&codex));
    if let Err(why) = checked {
        let stats = server.stop();
        println!("one task against `codex exec`: not measured: {why}{}", served(&stats));
        return;
    }
    let (mut ours, mut theirs, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..RUNS {
        let (run, passed) = bench.run(&manifest, 1);
        if passed != 1 {
            failures.push(format!("dracode run {n}: its task did not pass"));
        }
        ours.push(run);
        let (run, answered) = scratch.run(&codex, n);
        if !answered {
            failures.push(format!("codex run {n}: no last message \"done\""));
        }
        theirs.push(run);
    }
    let stats = server.stop();
    // Every run of each made at least one request, answered (the checked runs too).
    let expected = (RUNS + 1) as u64;
    if stats.completions < expected {
        failures.push(format!("{} chat completions served for {expected} dracode runs", stats.completions));
    }
    if stats.responses < expected {
        failures.push(format!("{} responses served for {expected} codex runs", stats.responses));
    }
    if !failures.is_empty() {
        println!("one task against `codex exec`: no figures, runs failed: {}{}", failures.join("; "), served(&stats));
        return;
    }
    let (ours, theirs) = (Summary::of(&ours), Summary::of(&theirs));
    let goal = ours.median.as_secs_f64() <= GOAL_RATIO * theirs.median.as_secs_f64() && ours.median <= GOAL;
    println!(
        "one task, one turn, same mock server ({} ms per reply): dracode {} vs `codex exec` {} ({}; goal ≤ {GOAL_RATIO:.2} and ≤ {} ms: {}), \
         median (min–max) of {RUNS} alternating runs; peak RSS {:.1} vs {:.1} MiB, CPU {:.0} vs {:.0} ms{}",
        LATENCY.as_millis(),
        ours.times(),
        theirs.times(),
        ratio(ours.median, theirs.median, "`codex exec`"),
        GOAL.as_millis(),
        if goal { "met" } else { "not met" },
        ours.rss_kib as f64 / 1024.0,
        theirs.rss_kib as f64 / 1024.0,
        ms(ours.cpu),
        ms(theirs.cpu),
        served(&stats)
    );
    println!("  (dracode: {}; codex: {})", exe.display(), codex.display());
}

/// `; server: N chat completions, N responses, N refused (the first refused requests)`.
fn served(stats: &ServerStats) -> String {
    let refusals = if stats.refusals.is_empty() { String::new() } else { format!(": {}", stats.refusals.join(", ")) };
    format!("; server: {} chat completions, {} responses, {} refused{refusals}", stats.completions, stats.responses, stats.refused)
}

/// Median, min and max wall time of some runs, with their median CPU time and largest RSS.
struct Summary {
    median: Duration,
    min: Duration,
    max: Duration,
    cpu: Duration,
    rss_kib: i64,
}

impl Summary {
    fn of(runs: &[Measured]) -> Summary {
        let mut walls: Vec<Duration> = runs.iter().map(|r| r.wall).collect();
        walls.sort();
        let mut cpus: Vec<Duration> = runs.iter().map(|r| r.cpu).collect();
        cpus.sort();
        Summary {
            median: walls[walls.len() / 2],
            min: walls[0],
            max: walls[walls.len() - 1],
            cpu: cpus[cpus.len() / 2],
            rss_kib: runs.iter().map(|r| r.rss_kib).max().unwrap_or(0),
        }
    }

    /// `45.1 ms (40.2–50.3)`.
    fn times(&self) -> String {
        format!("{:.1} ms ({:.1}–{:.1})", ms(self.median), ms(self.min), ms(self.max))
    }
}

/// One dracode run whose output is kept: it must exit 0 with its task passed.
fn check_dracode(exe: &Path, manifest: &Path) -> Result<(), String> {
    let dir = manifest.parent().unwrap();
    let out = dir.join("out");
    let output = Command::new(exe)
        .arg("run")
        .arg(manifest)
        .args(["--quiet", "--out"])
        .arg(&out)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let results = std::fs::read_to_string(out.join("results.jsonl")).unwrap_or_default();
    let finished = results.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).find(|e| e["type"] == "task.finished");
    match finished {
        Some(event) if output.status.success() && event["status"] == "passed" => Ok(()),
        event => Err(format!(
            "the dracode task did not pass ({}; task.finished: {}; stderr: {})",
            output.status,
            event.map_or_else(|| "none".to_string(), |e| e.to_string()),
            tail(&output.stderr)
        )),
    }
}

/// The last 400 bytes of `bytes`, as text on one line.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let start = text.char_indices().map(|(i, _)| i).find(|&i| text.len() - i <= 400).unwrap_or(0);
    text[start..].replace('\n', " | ")
}

/// A home for Codex (`CODEX_HOME` with a `config.toml` naming the server as provider `mock`)
/// and a git repository to run it in.
struct CodexScratch {
    home: PathBuf,
    repo: PathBuf,
}

impl CodexScratch {
    fn new(root: &Path, server: &ChatServer) -> CodexScratch {
        let dir = root.join("codex");
        let (home, repo) = (dir.join("home"), dir.join("repo"));
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::create_dir_all(&repo).unwrap();
        let config = format!(
            "model = \"m\"\nmodel_provider = \"mock\"\ncheck_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n\
             [model_providers.mock]\nname = \"mock\"\nbase_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"MOCK_KEY\"\n",
            server.base_url
        );
        std::fs::write(home.join(".codex/config.toml"), config).unwrap();
        std::fs::write(repo.join("README.md"), "# bench\n").unwrap();
        super::git(&repo, &["init", "-q"]);
        super::git(&repo, &["add", "-A"]);
        super::git(&repo, &["commit", "-qm", "base"]);
        CodexScratch { home, repo }
    }

    /// `codex exec` on the one-turn task, its last message written to `last`; the flags
    /// dracode launches it with (`src/external/launch.rs`).
    fn command(&self, codex: &Path, last: &Path) -> Command {
        let mut cmd = Command::new(codex);
        cmd.args(["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"])
            .args(["--disable", "plugins", "--disable", "remote_plugin", "--disable", "apps", "--disable", "in_app_updates"])
            .args(["-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false", "-o"])
            .arg(last)
            .arg(PROMPT)
            .current_dir(&self.repo)
            .env("HOME", &self.home)
            .env("CODEX_HOME", self.home.join(".codex"))
            .env("MOCK_KEY", "x")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .stdin(std::process::Stdio::null());
        cmd
    }

    /// The file timed run `n` writes its last message to.
    fn last(&self, n: usize) -> PathBuf {
        self.home.join(format!("last-{n}.txt"))
    }

    /// One run whose output is kept: it must exit 0 with the last message "done".
    fn check(&self, codex: &Path) -> Result<(), String> {
        let last = self.home.join("last-check.txt");
        let output = self.command(codex, &last).output().map_err(|e| format!("cannot run {}: {e}", codex.display()))?;
        let message = std::fs::read_to_string(&last).unwrap_or_default();
        if output.status.success() && message.trim() == "done" {
            return Ok(());
        }
        Err(format!(
            "`codex exec` did not complete the task ({}, last message {message:?}; stderr: {}; stdout: {})",
            output.status,
            tail(&output.stderr),
            tail(&output.stdout)
        ))
    }

    /// Timed run `n`: what it cost, and whether its last message is "done".
    fn run(&self, codex: &Path, n: usize) -> (Measured, bool) {
        let last = self.last(n);
        let measured = spawn_measure(self.command(codex, &last));
        (measured, std::fs::read_to_string(&last).is_ok_and(|m| m.trim() == "done"))
    }
}

/// The `codex` program: `DRACODE_BENCH_CODEX`, else the tests' install (made when missing).
fn find_codex() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("DRACODE_BENCH_CODEX") {
        let path = PathBuf::from(path);
        return if path.is_file() { Ok(path) } else { Err(format!("DRACODE_BENCH_CODEX={} is not a file", path.display())) };
    }
    let row = AGENTS.lines().filter(|l| !l.starts_with('#')).map(|l| l.split('\t').collect::<Vec<_>>()).find(|cells| cells[0] == "codex");
    let Some([_, package, version, program]) = row.as_deref() else { return Err("no codex row in .github/action/agents.tsv".into()) };
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("agents").join(format!("codex-{version}"));
    let program = prefix.join("node_modules/.bin").join(program);
    if program.is_file() {
        return Ok(program);
    }
    let installed = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
        .arg(&prefix)
        .arg(format!("{package}@{version}"))
        .output();
    match installed {
        Ok(out) if out.status.success() && program.is_file() => Ok(program),
        Ok(out) => Err(format!("npm install {package}@{version} failed: {}", tail(&out.stderr))),
        Err(e) => Err(format!("no DRACODE_BENCH_CODEX, no install at {}, and npm cannot run: {e}", prefix.display())),
    }
}
