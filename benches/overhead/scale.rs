//! `--jobs` against the ideal: one-turn tasks against the local chat server, each reply after a
//! fixed latency, so a run of `tasks` tasks at `--jobs N` ideally takes `tasks x latency / N`
//! (the model's time, nothing of dracode's). The ratio against that ideal is what dracode adds.

use super::chat_server::{ChatServer, ServerStats};
use super::{Measured, ms, ratio, spawn_measure};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The model's latency per reply.
pub(crate) const LATENCY: Duration = Duration::from_millis(250);

/// A folder with a 3-file git repository `ws`, a `dracode.toml` naming the server as provider
/// `mock`, and manifests of one-turn tasks in copy isolation.
pub(crate) struct Bench {
    exe: PathBuf,
    dir: PathBuf,
}

impl Bench {
    pub(crate) fn new(exe: &Path, root: &Path, name: &str) -> Bench {
        let dir = root.join(name);
        let ws = dir.join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(ws.join("README.md"), "# bench\n").unwrap();
        std::fs::write(ws.join("src/lib.rs"), "pub fn answer() -> u32 {\n    42\n}\n").unwrap();
        std::fs::write(ws.join("Cargo.toml"), "[package]\nname = \"bench\"\nversion = \"0.1.0\"\n").unwrap();
        super::git(&ws, &["init", "-q"]);
        super::git(&ws, &["add", "-A"]);
        super::git(&ws, &["commit", "-qm", "base"]);
        Bench { exe: exe.to_path_buf(), dir }
    }

    /// Makes provider `mock` the (vLLM-typed, OpenAI Chat Completions) server at `server`.
    pub(crate) fn point_at(&self, server: &ChatServer) {
        let config = format!("[providers.mock]\ntype = \"vllm\"\nbase_url = \"{}\"\nmodel = \"m\"\n", server.base_url);
        std::fs::write(self.dir.join("dracode.toml"), config).unwrap();
    }

    /// A manifest of `n` one-turn tasks.
    pub(crate) fn manifest(&self, n: usize) -> PathBuf {
        let path = self.dir.join(format!("m{n}.toml"));
        let mut text = "[defaults]\nprovider = \"mock\"\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\n".to_string();
        for i in 0..n {
            text.push_str(&format!("[[tasks]]\nid = \"t{i}\"\nprompt = \"p\"\n"));
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Runs `manifest` at `--jobs jobs`; what it cost and how many tasks passed.
    pub(crate) fn run(&self, manifest: &Path, jobs: usize) -> (Measured, usize) {
        let out = self.dir.join("out");
        let mut cmd = Command::new(&self.exe);
        cmd.arg("run").arg(manifest).args(["--quiet", "--jobs", &jobs.to_string(), "--out"]).arg(&out).current_dir(&self.dir);
        let measured = spawn_measure(cmd);
        (measured, passed(&out.join("results.jsonl")))
    }
}

/// The `task.finished` lines of `results` whose status is `passed`.
fn passed(results: &Path) -> usize {
    let text = std::fs::read_to_string(results).unwrap_or_default();
    let lines = text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    lines.filter(|e| e["type"] == "task.finished" && e["status"] == "passed").count()
}

/// The ideal wall time of `tasks` one-turn tasks at `--jobs jobs`, `tasks x latency / jobs`:
/// the model's time only (with a partly filled last wave, a little below what any runner can do).
fn ideal(tasks: usize, jobs: usize) -> Duration {
    LATENCY.mul_f64(tasks as f64 / jobs as f64)
}

/// 16 tasks at `--jobs` 1, 4, 8 and 16, and 64 at `--jobs 64`, against the ideal
/// `tasks x latency / jobs` (not the serial run's time / jobs, which would hide dracode's own
/// cost per task in the baseline).
pub fn jobs_scaling(exe: &Path, root: &Path) {
    let server = ChatServer::start(LATENCY);
    let bench = Bench::new(exe, root, "jobs");
    bench.point_at(&server);
    let sixteen = bench.manifest(16);
    for jobs in [1, 4, 8, 16] {
        let (run, ok) = bench.run(&sixteen, jobs);
        let ideal = ideal(16, jobs);
        println!(
            "--jobs {jobs:>2}, 16 tasks x {} ms latency: {:.0} ms vs ideal {:.0} ms ({}), {ok}/16 passed",
            LATENCY.as_millis(),
            ms(run.wall),
            ms(ideal),
            ratio(run.wall, ideal, "the ideal tasks x latency / jobs")
        );
    }
    let (run, ok) = bench.run(&bench.manifest(64), 64);
    let ideal = ideal(64, 64);
    println!(
        "64 tasks at --jobs 64: {:.0} ms vs ideal {:.0} ms ({}), {ok}/64 passed, peak RSS {:.1} MiB",
        ms(run.wall),
        ms(ideal),
        ratio(run.wall, ideal, "the ideal tasks x latency / jobs"),
        run.rss_kib as f64 / 1024.0
    );
    server.stop();
}

/// Runs of the `scale` section (the median is printed); `DRACODE_BENCH_SCALE_RUNS` overrides.
fn scale_runs() -> usize {
    std::env::var("DRACODE_BENCH_SCALE_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(3).max(1)
}

/// 1,000 one-turn tasks at `--jobs 64` and at `--jobs 256` (copy isolation of a 3-file git
/// repository), each against the ideal 1,000 x 250 ms / jobs; a fresh server each run, so its CPU
/// time is that run's. Prints dracode's CPU per task (user + system, children included).
pub fn thousand_tasks(exe: &Path, root: &Path) {
    let tasks = 1000;
    let bench = Bench::new(exe, root, "scale");
    let manifest = bench.manifest(tasks);
    for jobs in [64, 256] {
        let mut runs: Vec<(Measured, usize, ServerStats)> = Vec::new();
        for _ in 0..scale_runs() {
            let server = ChatServer::start(LATENCY);
            bench.point_at(&server);
            let (run, ok) = bench.run(&manifest, jobs);
            runs.push((run, ok, server.stop()));
        }
        let walls: Vec<String> = runs.iter().map(|(r, ..)| format!("{:.2}", r.wall.as_secs_f64())).collect();
        runs.sort_by_key(|(r, ..)| r.wall);
        let (run, ok, stats) = &runs[runs.len() / 2];
        let ideal = ideal(tasks, jobs);
        println!(
            "1,000 one-turn tasks at --jobs {jobs} (copy of a 3-file repository, {} ms per reply): {:.2} s vs ideal {:.2} s ({}); \
             {ok}/{tasks} passed, {} completions served, {} refused; peak RSS {:.1} MiB; CPU dracode {:.2} s ({:.1} ms per task), \
             server {:.2} s (median of {} runs: {} s)",
            LATENCY.as_millis(),
            run.wall.as_secs_f64(),
            ideal.as_secs_f64(),
            ratio(run.wall, ideal, &format!("the ideal 1,000 x 250 ms / {jobs}")),
            stats.completions,
            stats.refused,
            run.rss_kib as f64 / 1024.0,
            run.cpu.as_secs_f64(),
            run.cpu.as_secs_f64() * 1000.0 / tasks as f64,
            stats.cpu.as_secs_f64(),
            runs.len(),
            walls.join(", ")
        );
    }
}
