//! Issue 32, "examples that are real": `examples/rust.toml`, `examples/node.toml` and
//! `examples/python.toml` each run a small project's own tests as the check, through recorded
//! agents (the `replay` provider), the real sandbox and a real toolchain. One task per example is
//! fixed by its agent's change; the other's agent falls short and the check says why. A missing
//! toolchain skips the example with a note on stderr, unless `DRACODE_REQUIRE_EXAMPLES=1` (set by
//! `.ci/run`).

use crate::support::cli::{crate_root, dracode, events, finished, git, read_jsonl, repo_prefix};
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Stdio};

/// One bundled example: `examples/{name}.toml` and `examples/{name}/`.
struct Example {
    name: &'static str,
    /// The task whose agent fixes the project, and the file its patch touches.
    passes: (&'static str, &'static str),
    /// The task whose agent falls short, and lines its check's output must show.
    fails: (&'static str, &'static [&'static str]),
}

/// True when `program args…` runs and exits 0.
pub(crate) fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program).args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// `false` after a note (or a panic under `DRACODE_REQUIRE_EXAMPLES=1`) when `what` is missing.
pub(crate) fn present(example: &str, found: bool, what: &str) -> bool {
    if found {
        return true;
    }
    let message = format!("the {example} example needs {what}");
    assert!(std::env::var_os("DRACODE_REQUIRE_EXAMPLES").is_none_or(|v| v != "1"), "{message}, and DRACODE_REQUIRE_EXAMPLES=1");
    // Straight to the process's stderr: the test harness captures `eprintln!` of passing tests.
    let _ = writeln!(std::io::stderr(), "note: {message}: skipped");
    false
}

/// `git status --porcelain --ignored` of the example's files: what a run may not change.
fn example_status(name: &str) -> String {
    let root = crate_root();
    if !runs("git", &["-C", root.to_str().unwrap(), "rev-parse", "--git-dir"]) {
        return String::new();
    }
    git(&root, &["status", "--porcelain", "--ignored", "--", &format!("examples/{name}"), &format!("examples/{name}.toml")])
}

/// Runs the example as a user would (`dracode run examples/NAME.toml --out out`) with the
/// toolchains' variables, and checks what the user would: the exit code, each task's status,
/// the fix's patch, the failure's reason, and that the example itself did not change.
fn run_example(example: &Example) -> Vec<Value> {
    let before = example_status(example.name);
    let tmp = tempfile::tempdir().unwrap();
    let manifest = crate_root().join(format!("examples/{}.toml", example.name));
    let mut cmd = dracode(tmp.path());
    for (var, value) in std::env::vars_os() {
        let var = var.to_string_lossy().into_owned();
        let toolchain = ["HOME", "RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN", "PYENV_ROOT"].contains(&var.as_str());
        if toolchain || var.starts_with("PIP_") {
            cmd.env(var, value);
        }
    }
    let started = std::time::Instant::now();
    let output = cmd.arg("run").arg(&manifest).args(["--out", "out"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let _ = writeln!(std::io::stderr(), "examples/{}.toml ran in {:.1?}", example.name, started.elapsed());
    let out = tmp.path().join("out");
    let all = read_jsonl(&out.join("results.jsonl"));

    // One task is red, and it is the agents' shortfall: exit 1, not 5 (could not be judged).
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(all.last().unwrap()["exit_code"], 1);
    assert_eq!(all.last().unwrap()["counts"]["passed"], 1, "{stderr}");
    for setup in events(&all, "setup.finished") {
        assert_eq!(setup["exit_code"], 0, "the setup ran: {setup}");
    }

    let prefix = repo_prefix(&crate_root().join(format!("examples/{}/project", example.name)));
    let (fixed, file) = example.passes;
    let done = finished(&all, fixed);
    assert_eq!(done["status"], "passed", "{fixed}: {done}");
    assert_eq!(done["check"]["exit_code"], 0, "{done}");
    assert_ne!(done["check"]["before"], 0, "the check fails on the untouched project (check_before): {done}");
    assert_eq!(done["files_changed"], json!([format!("{prefix}{file}")]), "{done}");
    let patch = std::fs::read_to_string(out.join(format!("diffs/{fixed}.patch"))).unwrap();
    assert!(patch.contains(&format!("+++ b/{prefix}{file}")), "{patch}");

    let (short, telling) = example.fails;
    let done = finished(&all, short);
    assert_eq!(done["status"], "failed", "{short}: {done}");
    assert_eq!(done["error"]["kind"], "check", "{done}");
    assert_ne!(done["check"]["before"], 0, "{done}");
    assert!(done["protected"].as_array().is_none_or(Vec::is_empty), "the tests were left alone: {done}");
    let tail = done["check"]["output_tail"].as_str().unwrap();
    for line in telling {
        assert!(tail.contains(line), "{short}: the check's output shows {line:?}:\n{tail}");
    }
    assert!(stderr.contains("FAIL  [") && stderr.contains(short), "{stderr}");

    // Copy isolation: the example is as it was (no build output, venv or edit left in it).
    assert_eq!(example_status(example.name), before, "examples/{} changed", example.name);
    all
}

#[test]
fn examples_rust_fixes_one_gap_and_shows_why_the_other_is_still_red() {
    if !present("rust", runs("cargo", &["--version"]), "cargo") {
        return;
    }
    let all = run_example(&Example {
        name: "rust",
        passes: ("fix-compare", "src/lib.rs"),
        fails: ("accept-v-prefix", &["test an_uppercase_v_prefix_is_accepted ... FAILED", "panicked at tests/parse.rs:16:5"]),
    });
    assert_eq!(events(&all, "setup.finished").len(), 1, "the tests are built once, before the agents");
}

#[test]
fn examples_node_fixes_one_gap_and_shows_why_the_other_is_still_red() {
    // `node --test` came with Node 18.
    let modern = runs("node", &["-e", "process.exit(Number(process.versions.node.split('.')[0]) >= 18 ? 0 : 1)"]);
    if !present("node", modern, "Node 18 or later (`node --test`)") {
        return;
    }
    run_example(&Example {
        name: "node",
        passes: ("parse-compound", "src/duration.js"),
        fails: ("format-days", &["not ok 2 - days for a day or more", "not a duration: \"1d\""]),
    });
}

#[test]
fn examples_python_fixes_one_gap_and_shows_why_the_other_is_still_red() {
    if !present("python", runs("python3", &["-c", "import venv, ensurepip"]), "python3 with venv and ensurepip (python3-venv)") {
        return;
    }
    // Its setup downloads pytest from pip's package index (whichever pip's configuration names).
    let probe = tempfile::tempdir().unwrap();
    let index = runs(
        "python3",
        &[
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--retries",
            "0",
            "--timeout",
            "15",
            "-d",
            probe.path().to_str().unwrap(),
            "pytest",
        ],
    );
    if !present("python", index, "pip's package index (its setup installs pytest)") {
        return;
    }
    let all = run_example(&Example {
        name: "python",
        passes: ("drop-punctuation", "slug.py"),
        fails: ("plain-accents", &["AssertionError: assert 'creme-brûlee' == 'creme-brulee'", "tests/test_accents.py:5: AssertionError"]),
    });
    assert_eq!(events(&all, "setup.finished").len(), 1, "one virtualenv for the batch");
}
