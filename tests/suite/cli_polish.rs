//! Small things a new user hit (issue 29): `list` exits 4 on an empty selection as `run` does,
//! `regrade --jobs`, no second paid at exit in CI, what `-q` prints, and paths shown normalised.

use crate::support::cli::{dracode, finished, git_repo, read_jsonl};
use serde_json::json;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A replayed answer that changes nothing and ends the task.
const ANSWER: &str = r#"[{"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}]"#;

/// A replayed model that writes `file` and ends.
fn writer(file: &str) -> String {
    json!([
        {"content": [{"type": "tool_use", "id": "c1", "name": "write_file", "input": {"file_path": file, "content": "x\n"}}], "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
    ])
    .to_string()
}

/// (exit code, stdout, stderr) of `dracode args…` in `dir`.
fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = dracode(dir).args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[test]
fn list_exits_4_on_an_empty_selection_as_run_does() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tasks.toml"), "[[tasks]]\nid = \"a\"\nprompt = \"p\"\n").unwrap();
    let (code, stdout, stderr) = run(tmp.path(), &["list", "tasks.toml", "--filter", "nomatch"]);
    assert_eq!((code, stdout.as_str()), (4, ""), "{stderr}");
    assert!(stderr.contains("error: no task selected: --filter nomatch selected none of 1 task(s)"), "{stderr}");
    let (run_code, _, run_stderr) = run(tmp.path(), &["run", "tasks.toml", "--filter", "nomatch", "--dry-run"]);
    assert_eq!(run_code, 4, "{run_stderr}");
    // An empty shard of a matrix is normal, as for `run`: a warning, exit 0.
    let (code, _, stderr) = run(tmp.path(), &["list", "tasks.toml", "--filter", "nomatch", "--shard", "1/2"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("warning: no task selected"), "{stderr}");
    let (code, stdout, _) = run(tmp.path(), &["list", "tasks.toml", "--filter", "a"]);
    assert_eq!((code, stdout.as_str()), (0, "a\n"));
}

/// Two tasks whose checks each wait (up to 20 s) for the other's marker: they pass only when
/// the two checks run at the same time.
#[test]
fn regrade_jobs_runs_the_checks_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git_repo(&dir.join("repo"), &[("a.txt", "a\n")]);
    std::fs::write(dir.join("a.json"), writer("x.txt")).unwrap();
    std::fs::write(dir.join("b.json"), writer("y.txt")).unwrap();
    let manifest = |check_a: &str, check_b: &str| {
        format!(
            "[defaults]\nprovider = \"replay\"\nrepo = \"repo\"\nsandbox = \"off\"\n\
             [[tasks]]\nid = \"a\"\nprompt = \"p\"\nreplay = \"a.json\"\ncheck = \"{check_a}\"\n\
             [[tasks]]\nid = \"b\"\nprompt = \"p\"\nreplay = \"b.json\"\ncheck = \"{check_b}\"\n"
        )
    };
    std::fs::write(dir.join("tasks.toml"), manifest("true", "true")).unwrap();
    let (code, _, stderr) = run(dir, &["run", "tasks.toml", "--out", "out"]);
    assert_eq!(code, 0, "{stderr}");
    let marks = dir.join("marks");
    std::fs::create_dir(&marks).unwrap();
    let wait = |mine: &str, other: &str| {
        format!(
            "touch {m}/{mine}; i=0; while [ ! -e {m}/{other} ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done; test -e {m}/{other}",
            m = marks.display()
        )
    };
    std::fs::write(dir.join("tasks.toml"), manifest(&wait("a", "b"), &wait("b", "a"))).unwrap();
    let (code, _, stderr) = run(dir, &["regrade", "out", "--jobs", "2", "--out", "regraded"]);
    assert_eq!(code, 0, "{stderr}");
    let events = read_jsonl(&dir.join("regraded/results.jsonl"));
    assert_eq!(events[0]["jobs"], 2);
    for id in ["a", "b"] {
        assert_eq!(finished(&events, id)["status"], "passed", "{id}");
    }
}

/// A scratch folder with an empty `ws/`, the recording `t.json` ([`ANSWER`]) and `tasks.toml`
/// holding `manifest`.
fn replay_project(manifest: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::fs::write(tmp.path().join("t.json"), ANSWER).unwrap();
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    tmp
}

/// A CI job's stdin is /dev/null and it has no terminal: the `SLOW` watch (ticking every
/// second) must not hold the exit. Before the fix every such run took at least one tick; the
/// fastest of three quick runs must now end well inside one.
#[test]
fn a_quick_run_in_ci_mode_does_not_wait_for_the_slow_tick() {
    let tmp = replay_project(
        "[[tasks]]\nid = \"t\"\nprompt = \"p\"\nprovider = \"replay\"\nreplay = \"t.json\"\nrepo = \"ws\"\nisolation = \"none\"\nrequire_change = false\n",
    );
    let dir = tmp.path();
    let mut fastest = Duration::MAX;
    for i in 0..3 {
        let out = format!("out{i}");
        let started = Instant::now();
        let done = std::process::Command::new(assert_cmd::cargo::cargo_bin("dracode"))
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("CI", "true")
            .args(["run", "tasks.toml", "--out", &out])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .unwrap();
        fastest = fastest.min(started.elapsed());
        assert_eq!(done.status.code(), Some(0));
        assert_eq!(finished(&read_jsonl(&dir.join(&out).join("results.jsonl")), "t")["status"], "passed");
    }
    assert!(fastest < Duration::from_millis(700), "the fastest run took {fastest:?}: the exit waited for the 1 s SLOW tick");
}

/// `-q` prints nothing but dracode's errors and warnings: no START, PASS, FAIL or TOTAL line;
/// the exit code and `--out` say how the run went.
#[test]
fn quiet_prints_no_progress_lines_not_even_fail_and_total() {
    let tmp = replay_project(
        "[defaults]\nprovider = \"replay\"\nreplay = \"t.json\"\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\n\
         [[tasks]]\nid = \"good\"\nprompt = \"p\"\n[[tasks]]\nid = \"bad\"\nprompt = \"p\"\ncheck = \"false\"\n",
    );
    let dir = tmp.path();
    let (code, stdout, stderr) = run(dir, &["run", "tasks.toml", "--out", "out", "-q"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(stdout, "");
    for word in ["START", "PASS", "FAIL", "TOTAL"] {
        assert!(!stderr.contains(word), "-q printed a {word} line: {stderr}");
    }
    assert_eq!(finished(&read_jsonl(&dir.join("out/results.jsonl")), "bad")["status"], "failed");
    let (code, _, stderr) = run(dir, &["run", "tasks.toml", "--out", "out"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("FAIL") && stderr.contains("TOTAL"), "without -q: {stderr}");
}

/// A repo given as `..` from a manifest in `.dracode/` is shown as the folder it is.
#[test]
fn paths_are_shown_normalised() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git_repo(dir, &[("a.txt", "a\n")]);
    std::fs::create_dir(dir.join(".dracode")).unwrap();
    std::fs::write(dir.join(".dracode/tasks.toml"), "[[tasks]]\nid = \"t\"\nprompt = \"p\"\nrepo = \"..\"\nprovider = \"replay\"\n")
        .unwrap();
    let (code, stdout, stderr) = run(dir, &["run", ".dracode/tasks.toml", "--dry-run", "--offline"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\trepo=. ") || stdout.contains(" repo=. "), "{stdout}");
    assert!(!stdout.contains(".dracode/.."), "{stdout}");
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let (code, stdout, stderr) = run(&sub, &["run", "../.dracode/tasks.toml", "--dry-run", "--offline"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(" repo=.. "), "{stdout}");
}

/// An ad-hoc task (`--task`, the `codex exec` way) graded like a manifest's: `--check` runs
/// before and after the agent, `--protect` keeps a path; a changed file alone no longer passes.
#[test]
fn an_adhoc_task_is_graded_by_check_and_keeps_protect() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = &tmp.path().join("repo");
    git_repo(dir, &[("a.txt", "broken\n"), ("test.sh", "grep -qx FIXED a.txt\n"), (".gitignore", "rec/\n")]);
    std::fs::create_dir(dir.join("rec")).unwrap();
    let record = |content: &str| {
        let turns = json!([
            {"content": [{"type": "tool_use", "id": "c1", "name": "write_file", "input": {"file_path": "a.txt", "content": content}}], "stop_reason": "tool_use"},
            {"content": [{"type": "tool_use", "id": "c2", "name": "write_file", "input": {"file_path": "test.sh", "content": "true\n"}}], "stop_reason": "tool_use"},
            {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
        ]);
        std::fs::write(dir.join("rec/task-1.json"), turns.to_string()).unwrap();
    };
    let run = |out: &str| {
        let out = tmp.path().join(out);
        dracode(dir)
            .env("DRACODE_DEFAULTS__REPLAY", "rec")
            .args(["run", "--task", "make a.txt say FIXED", "--provider", "replay", "--out", out.to_str().unwrap()])
            .args(["--check", "sh test.sh", "--protect", "test.sh", "--isolation", "copy"])
            .output()
            .unwrap()
    };
    record("FIXED\n");
    let out = run("out-pass");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let all = read_jsonl(&tmp.path().join("out-pass/results.jsonl"));
    let done = finished(&all, "task-1");
    assert_eq!(
        (done["check"]["command"].as_str(), done["check"]["before"].as_i64(), done["check"]["exit_code"].as_i64()),
        (Some("sh test.sh"), Some(1), Some(0)),
        "{done}"
    );
    assert_eq!(done["protected_refused"], json!(["test.sh"]), "the agent's write to test.sh was refused: {done}");

    record("still broken\n");
    let out = run("out-fail");
    assert_eq!(out.status.code(), Some(1), "a change that does not pass the check fails: {}", String::from_utf8_lossy(&out.stderr));

    let out = dracode(dir).args(["run", "--check", "true", "--provider", "replay"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "--check needs --task");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--task"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `--replay PATH` plays recordings back for every task without a provider in the manifest (it
/// took `DRACODE_DEFAULTS__REPLAY=… --provider replay`), and refuses to be mixed with
/// `--provider`.
#[test]
fn replay_flag_plays_a_folder_of_recordings_back_for_every_task() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = &tmp.path().join("repo");
    git_repo(dir, &[("a.txt", "a\n"), (".gitignore", "recordings/\n")]);
    std::fs::create_dir(dir.join("recordings")).unwrap();
    for id in ["one", "two"] {
        let turns = json!([
            {"content": [{"type": "tool_use", "id": "c1", "name": "write_file", "input": {"file_path": format!("{id}.txt"), "content": "x\n"}}], "stop_reason": "tool_use"},
            {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
        ]);
        std::fs::write(dir.join(format!("recordings/{id}.json")), turns.to_string()).unwrap();
    }
    std::fs::write(
        dir.join("recordings/../tasks.toml"),
        "[[tasks]]\nid = \"one\"\nprompt = \"p\"\n[[tasks]]\nid = \"two\"\nprompt = \"q\"\n",
    )
    .unwrap();
    let out_dir = tmp.path().join("out");
    let out = dracode(dir).args(["run", "tasks.toml", "--replay", "recordings", "--out", out_dir.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let all = read_jsonl(&out_dir.join("results.jsonl"));
    for id in ["one", "two"] {
        assert_eq!(finished(&all, id)["status"], "passed");
        assert_eq!(finished(&all, id)["provider"], "replay");
    }
    let out = dracode(dir).args(["run", "tasks.toml", "--replay", "recordings", "--provider", "openai"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}
