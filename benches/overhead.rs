//! What dracode adds on top of the LLM, measured against baselines run in the same process.
//!
//! `cargo bench --bench overhead` prints:
//! - fixed cost of a one-task run (start, config, workspace, artifacts): wall time and peak RSS
//!   of `dracode run` on a one-turn replay, against spawning `true`, and the binary's size;
//! - orchestration per LLM turn: a 200-turn replay minus the one-turn run, per turn;
//! - `worktree` workspace creation (a task repository of its own on the user's objects)
//!   against `git worktree add`, on a repository of 5,000 files;
//! - `search_code` against `rg` on the same 5,000 files;
//! - `--jobs N` (`-- jobs`): 16 one-turn tasks at 1, 4, 8 and 16 jobs and 64 at 64, against
//!   the ideal `tasks x latency / jobs` (the model's time only; not the serial run / N, which
//!   would hide dracode's cost per task), on a lean local Chat Completions server
//!   (`overhead/chat_server.rs`, a child process) answering after 250 ms; peak RSS at 64;
//! - `scale`: 1,000 one-turn tasks at `--jobs 64` and at `--jobs 256` (copy isolation of a
//!   3-file repository) against the ideal 1,000 x 250 ms / jobs, with the passed count read from
//!   results.jsonl, dracode's peak RSS, CPU time and CPU per task, and the server's CPU time
//!   (median of 3 runs; `DRACODE_BENCH_SCALE_RUNS` changes it);
//! - `copy` workspace creation against `cp -r` of the same 2,000-file repository (with a
//!   `.gitignore`d `junk/` that `copy` leaves out and `cp -r` copies);
//! - the sandbox's added cost per command: `true` through `process::run` confined (supervisor,
//!   Landlock, seccomp) against unconfined, interleaved in the same run
//!   (`cargo bench --bench overhead -- sandbox` prints only this line and the next);
//! - the connect broker's added cost per connection: a python3 loop of `connect()` to a Unix
//!   socket in the workspace and to a 127.0.0.1 listener set as the task's proxy, timed inside
//!   the command, confined (every connect goes through the supervisor) against unconfined;
//! - the egress proxy's added cost per connection: connect, one byte each way and close to a
//!   local listener through a `CONNECT` of the task proxy (`network = [hosts]`), against a
//!   direct connection, interleaved in the same process (`-- proxy`).
//!
//! `scripts/bench.sh [SECTION]` builds the release binary first and measures that one
//! (`DRACODE_BENCH_BIN`); plain `cargo bench` measures the bench profile's own build of it.
//!
//! Every comparison is printed as `ratio X.XX against <baseline>`, the baseline run in the same
//! process. Each figure is the median of several runs. Nothing here asserts: it prints figures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)] // a bench/test: a panic is the report

#[path = "overhead/chat_server.rs"]
mod chat_server;
#[path = "overhead/codex.rs"]
mod codex;
#[path = "overhead/copy.rs"]
mod copy;
#[path = "overhead/endpoint.rs"]
mod endpoint;
#[path = "overhead/gate.rs"]
mod gate;
#[path = "overhead/scale.rs"]
mod scale;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const RUNS: usize = 15;

fn main() {
    if chat_server::serve_if_asked() {
        return;
    }
    // `cargo bench --bench overhead -- worktree` runs only the sections whose name contains it:
    // sandbox, proxy, endpoint, run-cost, jobs, scale, copy, worktree, search_code (carrying a setup's
    // outputs has a bench of its own: `cargo bench --bench carry`).
    let only = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let wants = |section: &str| only.as_deref().is_none_or(|o| section.contains(o));
    // scripts/bench.sh passes the binary `cargo build --release` makes (what users install):
    // the bench's own build of it unifies the dev-dependencies' features, so it differs.
    let exe = std::env::var_os("DRACODE_BENCH_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_dracode")), PathBuf::from);
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path();
    if wants("sandbox") {
        sandbox_overhead(&exe, root);
        connect_overhead(&exe, root);
    }
    if wants("proxy") {
        proxy_overhead();
    }
    // The benchmark gate runs only when asked by name, with the base's binary to compare.
    if only.as_deref() == Some("gate") {
        let base = std::env::var_os("DRACODE_BENCH_BASE_BIN").map(PathBuf::from).expect("DRACODE_BENCH_BASE_BIN: the base's binary");
        if !gate::gate(&exe, &base, root) {
            std::process::exit(1);
        }
        return;
    }
    if wants("endpoint") {
        endpoint::endpoint_overhead();
    }
    if wants("run-cost") {
        run_cost(&exe, root);
    }
    if wants("jobs") {
        scale::jobs_scaling(&exe, root);
    }
    if wants("scale") {
        scale::thousand_tasks(&exe, root);
    }
    if wants("codex") {
        codex::one_task_against_codex(&exe, root);
    }
    if wants("copy") {
        copy::copy_creation(root);
    }
    let repo = root.join("big");
    if wants("worktree") || wants("search_code") {
        make_repo(&repo, 5_000);
    }
    if wants("worktree") {
        worktree_creation(root, &repo);
    }
    if wants("search_code") {
        search_code(&repo);
    }
}

/// Fixed cost of a one-task run and orchestration per LLM turn.
fn run_cost(exe: &Path, root: &Path) {
    let baseline = median(RUNS, || spawn_measure(Command::new("true")).wall);
    let one = replay_manifest(root, "one", 1);
    let many = replay_manifest(root, "many", 200);
    let mut rss = 0;
    let fixed = median(RUNS, || {
        let run = spawn_measure(run_cmd(exe, &one, root));
        rss = rss.max(run.rss_kib);
        run.wall
    });
    // As every CI job runs it: stdin at /dev/null, no terminal, `CI` set, progress lines on (the
    // SLOW-line watch running), not --quiet.
    let ci = median(RUNS, || {
        let mut cmd = Command::new(exe);
        cmd.arg("run").arg(&one).arg("--out").arg(root.join("out")).current_dir(root);
        cmd.env("CI", "true").stdin(std::process::Stdio::null());
        spawn_measure(cmd).wall
    });
    let long = median(5, || spawn_measure(run_cmd(exe, &many, root)).wall);
    println!(
        "fixed cost of a one-task run: {:.1} ms vs spawning `true` {:.2} ms ({}), peak RSS {:.1} MiB",
        ms(fixed),
        ms(baseline),
        ratio(fixed, baseline, "`true`"),
        rss as f64 / 1024.0
    );
    println!(
        "fixed cost of a one-task run in CI mode (stdin /dev/null, CI=true, progress lines): {:.1} ms ({}, {})",
        ms(ci),
        ratio(ci, baseline, "`true`"),
        ratio(ci, fixed, "the --quiet run")
    );
    println!("orchestration per LLM turn (200-turn replay): {:.3} ms", ms(long.saturating_sub(fixed)) / 199.0);
    let size = std::fs::metadata(exe).map_or(0, |m| m.len());
    println!("binary size: {:.1} MB ({}; target 15 MB), one-task peak RSS target 10 MiB", size as f64 / 1e6, exe.display());
}

/// A `worktree` workspace against `git worktree add`, in the same run: the workspaces of one run
/// (the first makes the run's checkout, which the median leaves out; every task pays the copy).
fn worktree_creation(root: &Path, repo: &Path) {
    use dracode::batch::workspace::Workspace;
    let stores = dracode::batch::run_stores::RunStores::default();
    // Interleaved rounds, so page-cache and disk effects hit both alike.
    let (mut git_times, mut our_times) = (Vec::new(), Vec::new());
    for n in 0..7 {
        let path = root.join(format!("gitwt{n}"));
        let t = Instant::now();
        let ok = Command::new("git")
            .args(["worktree", "add", "-q", "--detach"])
            .arg(&path)
            .arg("HEAD")
            .current_dir(repo)
            .status()
            .unwrap()
            .success();
        git_times.push(t.elapsed());
        assert!(ok);
        Command::new("git").args(["worktree", "remove", "--force"]).arg(&path).current_dir(repo).status().unwrap();

        let t = Instant::now();
        let ws = Workspace::prepare_carrying(&stores, repo, dracode::manifest::Isolation::Worktree, "HEAD", None, None).unwrap();
        our_times.push(t.elapsed());
        drop(ws);
    }
    git_times.sort();
    our_times.sort();
    let (git_add, ours) = (git_times[3], our_times[3]);
    println!(
        "worktree workspace creation, 5,000 files: dracode {:.1} ms vs `git worktree add` {:.1} ms ({})",
        ms(ours),
        ms(git_add),
        ratio(ours, git_add, "`git worktree add`")
    );
}

/// `search_code` against `rg` on the same 5,000 files.
fn search_code(repo: &Path) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let ctx = dracode::tools::ToolContext {
        confine: None,
        sandbox: dracode_sandbox::Sandbox::new(repo).unwrap(),
        child_env: Default::default(),
        tmp_dir: None,
        answers: Default::default(),
        max_command_timeout: Duration::from_secs(60),
        output_limit: 64 * 1024,
        policy: Default::default(),
        emitter: dracode::events::Emitter::discard(),
        git_writes: false,
        processes: Default::default(),
        reports: Default::default(),
        git: None,
        network: Default::default(),
        network_log: Default::default(),
    };
    let registry = dracode::tools::Registry::all();
    let input = serde_json::json!({"query": "needle_4999", "regex": false, "case_sensitive": true});
    let search = median(RUNS, || {
        let t = Instant::now();
        let out = rt.block_on(registry.call(&ctx, "search_code", input.clone())).unwrap();
        assert!(out.contains("needle_4999"));
        t.elapsed()
    });
    match Command::new("rg").arg("--version").output() {
        Ok(_) => {
            let rg = median(RUNS, || {
                let t = Instant::now();
                let out = Command::new("rg").args(["-n", "-F", "needle_4999", "."]).current_dir(repo).output().unwrap();
                assert!(out.status.success());
                t.elapsed()
            });
            println!("search_code, 5,000 files: {:.1} ms vs rg {:.1} ms ({})", ms(search), ms(rg), ratio(search, rg, "`rg`"));
        }
        Err(_) => println!("search_code, 5,000 files: {:.1} ms (rg not installed: no ratio)", ms(search)),
    }
}

/// p50 of `true` through `process::run`, unconfined and confined, in alternating rounds.
fn sandbox_overhead(exe: &Path, root: &Path) {
    use dracode_sandbox::process::{Spec, run};
    use dracode_sandbox::{Policy, SandboxMode};
    dracode_sandbox::use_supervisor_program(exe.to_path_buf());
    let policy = Policy::for_workspace(SandboxMode::WorkspaceWrite, root, Some(root));
    if let Err(e) = policy.check_supported() {
        println!("sandbox overhead per command: not measured ({e})");
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let env = std::collections::BTreeMap::from([("PATH".to_string(), std::env::var("PATH").unwrap_or_default())]);
    let spawn = |confine: Option<&Policy>| {
        let spec = Spec {
            program: "true",
            args: &[],
            cwd: root,
            env: &env,
            tmp_dir: None,
            timeout: Duration::from_secs(10),
            output_limit: 1024,
            confine,
        };
        let t = Instant::now();
        let finished = rt.block_on(run(&spec)).unwrap();
        assert_eq!(finished.exit_code, Some(0), "{}", finished.output);
        t.elapsed()
    };
    // What a task gets: the same policy with the default resource limits (rlimits and the
    // monitor thread), measured apart to show what the limits add.
    let limited = Policy { limits: dracode_sandbox::Limits::defaults(), ..policy.clone() };
    let (mut plain, mut confined, mut with_limits) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..41 {
        plain.push(spawn(None));
        confined.push(spawn(Some(&policy)));
        with_limits.push(spawn(Some(&limited)));
    }
    plain.sort();
    confined.sort();
    with_limits.sort();
    let (plain, confined, with_limits) = (plain[20], confined[20], with_limits[20]);
    println!(
        "sandbox with the default resource limits (p50 of `true`): +{:.2} ms over unconfined ({:.2} ms; limits add {:+.2} ms; {})",
        ms(with_limits.saturating_sub(plain)),
        ms(with_limits),
        ms(with_limits) - ms(confined),
        ratio(with_limits, plain, "unconfined")
    );
    println!(
        "sandbox overhead per command (p50 of `true`): +{:.2} ms ({:.2} ms confined vs {:.2} ms unconfined, {})",
        ms(confined.saturating_sub(plain)),
        ms(confined),
        ms(plain),
        ratio(confined, plain, "unconfined")
    );
}

/// The connect broker's added cost per connection, confined against unconfined, measured by
/// the command itself (so process start-up is left out).
fn connect_overhead(exe: &Path, root: &Path) {
    use dracode_sandbox::process::{Spec, run};
    use dracode_sandbox::{Policy, SandboxMode};
    dracode_sandbox::use_supervisor_program(exe.to_path_buf());
    let ws = root.join("connect-ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut policy = Policy::for_workspace(SandboxMode::WorkspaceWrite, &ws, Some(&ws));
    if policy.check_supported().is_err() || Command::new("python3").arg("-c").arg("pass").status().is_err() {
        println!("connect broker overhead: not measured (no sandbox or no python3)");
        return;
    }
    let unix = std::os::unix::net::UnixListener::bind(ws.join("bench.sock")).unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    policy.proxy = Some(tcp.local_addr().unwrap());
    std::thread::spawn(move || for _ in unix.incoming() {});
    std::thread::spawn(move || for _ in tcp.incoming() {});
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let env = std::collections::BTreeMap::from([("PATH".to_string(), std::env::var("PATH").unwrap_or_default())]);
    let script = format!(
        "import socket, time\nfor family, address in [(socket.AF_UNIX, 'bench.sock'), (socket.AF_INET, ('127.0.0.1', {port}))]:\n  \
         times = []\n  for _ in range(300):\n    s = socket.socket(family); t = time.perf_counter(); s.connect(address); \
         times.append(time.perf_counter() - t); s.close()\n  times.sort(); print(times[len(times) // 2] * 1e6)"
    );
    let per_connect = |confine: Option<&Policy>| -> Vec<f64> {
        let args = vec!["-c".to_string(), script.clone()];
        let spec = Spec {
            program: "python3",
            args: &args,
            cwd: &ws,
            env: &env,
            tmp_dir: None,
            timeout: Duration::from_secs(60),
            output_limit: 4096,
            confine,
        };
        let finished = rt.block_on(run(&spec)).unwrap();
        assert_eq!(finished.exit_code, Some(0), "{}", finished.output);
        finished.output.lines().filter_map(|l| l.trim().parse().ok()).collect()
    };
    let (plain, confined) = (per_connect(None), per_connect(Some(&policy)));
    for (i, what) in ["Unix socket in the workspace", "TCP to the proxy address"].iter().enumerate() {
        println!(
            "connect broker overhead per connect(), {what} (p50 of 300): +{:.0} µs ({:.0} µs confined vs {:.0} µs unconfined, {})",
            confined[i] - plain[i],
            confined[i],
            plain[i],
            ratio(Duration::from_secs_f64(confined[i]), Duration::from_secs_f64(plain[i]), "unconfined")
        );
    }
}

/// The egress proxy's cost per connection: a `CONNECT` through it against a direct connection.
fn proxy_overhead() {
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let mut byte = [0u8; 1];
                    if stream.read_exact(&mut byte).await.is_ok() {
                        let _ = stream.write_all(&byte).await;
                    }
                });
            }
        });
        let allow = vec![target.to_string()];
        let rules = Arc::new(dracode_sandbox::egress::Allowlist::parse(&allow, &[], "network", "network.deny").unwrap());
        let proxy = dracode_sandbox::egress::EgressProxy::start(rules, Default::default()).await.unwrap();
        let connect_line = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
        let round_trip = |through_proxy: bool| {
            let connect_line = connect_line.clone();
            let proxy_addr = proxy.addr();
            async move {
                let t = Instant::now();
                let mut stream = TcpStream::connect(if through_proxy { proxy_addr } else { target }).await.unwrap();
                if through_proxy {
                    stream.write_all(connect_line.as_bytes()).await.unwrap();
                    let mut head = [0u8; 39]; // "HTTP/1.1 200 Connection established\r\n\r\n"
                    stream.read_exact(&mut head).await.unwrap();
                    assert!(head.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&head));
                }
                stream.write_all(b"x").await.unwrap();
                let mut byte = [0u8; 1];
                stream.read_exact(&mut byte).await.unwrap();
                t.elapsed()
            }
        };
        let (mut direct, mut proxied) = (Vec::new(), Vec::new());
        for _ in 0..401 {
            direct.push(round_trip(false).await);
            proxied.push(round_trip(true).await);
        }
        direct.sort();
        proxied.sort();
        let (direct, proxied) = (direct[200], proxied[200]);
        println!(
            "egress proxy per connection (p50 of connect + 1 byte each way): +{:.3} ms ({:.3} ms through a CONNECT vs {:.3} ms direct, {})",
            ms(proxied.saturating_sub(direct)),
            ms(proxied),
            ms(direct),
            ratio(proxied, direct, "a direct connection")
        );
    });
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    median_of((0..n).map(|_| f()).collect())
}

/// The median of `times`.
fn median_of(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// What a child cost: wall time from spawn to exit, peak RSS and CPU time.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Spawn to exit.
    pub wall: Duration,
    /// Peak resident set size, KiB.
    pub rss_kib: i64,
    /// User + system CPU time.
    pub cpu: Duration,
}

/// Wall time, peak RSS and CPU time of a child run to its end.
#[allow(clippy::zombie_processes)] // reaped by wait4 in `reap`
fn spawn_measure(mut cmd: Command) -> Measured {
    let t = Instant::now();
    let child = cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().expect("spawn");
    let (cpu, rss_kib) = reap(&child);
    Measured { wall: t.elapsed(), rss_kib, cpu }
}

/// Waits for `child` to exit (reaping it: `Child::wait` is not needed after) and returns its
/// user + system CPU time and peak RSS (KiB), from `wait4`'s rusage.
fn reap(child: &std::process::Child) -> (Duration, i64) {
    let mut status = 0;
    // SAFETY: plain wait4 on our own child; rusage is written by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let time = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    (time(usage.ru_utime) + time(usage.ru_stime), usage.ru_maxrss)
}

/// `ratio X.XX against BASELINE`: the one way every section compares a figure to its baseline.
fn ratio(ours: Duration, baseline: Duration, against: &str) -> String {
    format!("ratio {:.2} against {against}", ours.as_secs_f64() / baseline.as_secs_f64())
}

fn run_cmd(exe: &Path, manifest: &Path, root: &Path) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg("run").arg(manifest).arg("--out").arg(root.join("out")).arg("--quiet").current_dir(root);
    cmd
}

/// A one-task manifest whose replay makes `turns` LLM turns (each a `display_text` call).
fn replay_manifest(root: &Path, name: &str, turns: usize) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let mut responses = Vec::new();
    for i in 1..turns {
        responses.push(serde_json::json!({
            "content": [{"type": "tool_use", "id": format!("c{i}"), "name": "display_text", "input": {"text": "step"}}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1000, "output_tokens": 10, "total_tokens": 1010, "requests": 1}
        }));
    }
    responses.push(serde_json::json!({
        "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 1000, "output_tokens": 10, "total_tokens": 1010, "requests": 1}
    }));
    std::fs::write(dir.join("rec.json"), serde_json::to_string(&responses).unwrap()).unwrap();
    let manifest = dir.join("m.toml");
    std::fs::write(&manifest, format!(
        "[defaults]\nprovider = \"replay\"\nreplay = \"rec.json\"\nrepo = \"ws\"\nisolation = \"copy\"\nmax_iterations = {}\n[[tasks]]\nid = \"t\"\nprompt = \"p\"\n",
        turns + 1
    )).unwrap();
    manifest
}

/// A git repository of `files` small source files, one of them holding `needle_4999`.
fn make_repo(dir: &Path, files: usize) {
    for i in 0..files {
        let sub = dir.join(format!("src/m{}", i / 100));
        std::fs::create_dir_all(&sub).unwrap();
        let body: String = (0..40).map(|l| format!("fn f{l}() -> usize {{ {l} + {i} }} // filler text line\n")).collect();
        std::fs::write(sub.join(format!("f{i}.rs")), format!("{body}// needle_{i}\n")).unwrap();
    }
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "base"]);
}

/// Runs `git args` in `dir` (as a fixed author), asserting it succeeds.
fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@x")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@x")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}
