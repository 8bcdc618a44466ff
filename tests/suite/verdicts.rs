//! Green means green (issue 18): a run that could not judge its tasks (a missing key, a provider
//! that failed, a missing shard) exits 5, not 1; the pre-flight of `validate` and `--dry-run`
//! names every task whose provider cannot send a request; a task with nothing to grade it
//! (no check, no structured output, a sandbox that can write) passes only if it changed
//! something. Issue 27: a check that could not run (127, 126, a read the sandbox refused) is
//! exit 5, not the agent's failure, and under `check_before` the agent is never started.

use crate::support::cli::{dracode, events, finished, read_jsonl};
use serde_json::json;
use std::net::TcpListener;
use std::path::Path;

/// A provider on the OpenAI wire whose key comes from `${MOCK_KEY}` and whose endpoint is `url`.
fn mock_config(url: &str) -> String {
    format!("[providers.mock]\ntype = \"openai\"\nbase_url = \"{url}\"\nmodel = \"gpt-test\"\napi_key = \"${{MOCK_KEY}}\"\n")
}

/// A scratch folder: `ws/` (one file), `done.json` (a recording that answers "done" at once),
/// `empty.json` (a recording with no answer: the provider fails, kind `bad_response`), a
/// `dracode.toml` declaring `mock` on `url`, and `tasks.toml` = `[defaults]` (replay, a copy
/// of `ws`) + `tasks`.
fn scene(dir: &Path, url: &str, tasks: &str) {
    let done = json!([{"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4, "requests": 1}}]);
    std::fs::write(dir.join("done.json"), done.to_string()).unwrap();
    std::fs::write(dir.join("empty.json"), "[]").unwrap();
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(dir.join("ws/app.txt"), "v1\n").unwrap();
    std::fs::write(dir.join("dracode.toml"), mock_config(url)).unwrap();
    let defaults = "[defaults]\nprovider = \"replay\"\nreplay = \"done.json\"\nrepo = \"ws\"\nisolation = \"copy\"\n";
    std::fs::write(dir.join("tasks.toml"), format!("{defaults}{tasks}")).unwrap();
}

/// A local listener that counts nothing but whether anyone connected.
fn silent_endpoint() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    (listener, url)
}

fn nobody_connected(listener: &TcpListener) -> bool {
    matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

const NO_KEY_AND_RED: &str = "[[tasks]]\nid = \"nokey\"\nprompt = \"p\"\nprovider = \"mock\"\n\
                              [[tasks]]\nid = \"red\"\nprompt = \"p\"\ncheck = \"false\"\n";

#[test]
fn an_unset_key_is_exit_5_and_named_by_its_variable_even_beside_a_failed_task() {
    let tmp = tempfile::tempdir().unwrap();
    let (listener, url) = silent_endpoint();
    scene(tmp.path(), &url, NO_KEY_AND_RED);
    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(5), "{stderr}");
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    assert_eq!(all.last().unwrap()["type"], "run.finished");
    assert_eq!(all.last().unwrap()["exit_code"], 5, "run.finished says what the process said");
    assert_eq!(finished(&all, "red")["status"], "failed");
    let nokey = finished(&all, "nokey");
    assert_eq!(nokey["status"], "not_configured");
    let message = nokey["error"]["message"].as_str().unwrap();
    assert!(message.contains("api_key = \"${MOCK_KEY}\": MOCK_KEY is not set"), "{message}");
    assert!(!message.contains("OPENAI_API_KEY"), "the variable the config names, not the type's: {message}");
    assert!(nobody_connected(&listener));

    // Set but empty is named too.
    let output = dracode(tmp.path()).env("MOCK_KEY", "").args(["run", "tasks.toml", "--out", "empty"]).output().unwrap();
    assert_eq!(output.status.code(), Some(5));
    let all = read_jsonl(&tmp.path().join("empty/results.jsonl"));
    let message = finished(&all, "nokey")["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("api_key = \"${MOCK_KEY}\": MOCK_KEY is empty"), "{message}");
}

#[test]
fn a_provider_that_fails_is_exit_5_and_a_failed_check_alone_is_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = "[[tasks]]\nid = \"broken-provider\"\nprompt = \"p\"\nreplay = \"empty.json\"\ncheck = \"true\"\n\
                 [[tasks]]\nid = \"red\"\nprompt = \"p\"\ncheck = \"false\"\n";
    scene(tmp.path(), "http://127.0.0.1:9/v1", tasks);
    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    assert_eq!(output.status.code(), Some(5), "{}", String::from_utf8_lossy(&output.stderr));
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    assert_eq!(finished(&all, "broken-provider")["status"], "error");
    assert_eq!(finished(&all, "broken-provider")["error"]["kind"], "bad_response");
    assert_eq!(all.last().unwrap()["exit_code"], 5);

    // Without the broken provider, the agents' work fell short: 1.
    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "red", "--filter", "red"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(read_jsonl(&tmp.path().join("red/results.jsonl")).last().unwrap()["exit_code"], 1);
}

#[test]
fn validate_and_dry_run_name_every_task_that_could_not_send_a_request_unless_offline() {
    let tmp = tempfile::tempdir().unwrap();
    let (listener, url) = silent_endpoint();
    let tasks = "[[tasks]]\nid = \"nokey\"\nprompt = \"p\"\nprovider = \"mock\"\n\
                 [[tasks]]\nid = \"plain-openai\"\nprompt = \"p\"\nprovider = \"openai\"\n\
                 [[tasks]]\nid = \"no-recording\"\nprompt = \"p\"\nreplay = \"recs\"\n\
                 [[tasks]]\nid = \"fine\"\nprompt = \"p\"\ncheck = \"true\"\n";
    scene(tmp.path(), &url, tasks);
    std::fs::create_dir(tmp.path().join("recs")).unwrap();
    for args in [&["validate", "tasks.toml"][..], &["run", "tasks.toml", "--dry-run"]] {
        let output = dracode(tmp.path()).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(5), "{args:?}: {stderr}");
        for needle in [
            "nokey",
            "\"mock\"",
            "api_key = \"${MOCK_KEY}\": MOCK_KEY is not set",
            "plain-openai",
            "OPENAI_API_KEY",
            "no-recording",
            "recs/no-recording.json",
        ] {
            assert!(stderr.contains(needle), "{args:?} should name {needle}: {stderr}");
        }
        assert!(!stderr.contains("task \"fine\""), "{stderr}");
        let offline = dracode(tmp.path()).args(args).arg("--offline").output().unwrap();
        assert_eq!(offline.status.code(), Some(0), "{args:?} --offline: {}", String::from_utf8_lossy(&offline.stderr));
    }
    std::fs::copy(tmp.path().join("done.json"), tmp.path().join("recs/no-recording.json")).unwrap();
    let keyed =
        dracode(tmp.path()).env("MOCK_KEY", "k-123").env("OPENAI_API_KEY", "k-456").args(["validate", "tasks.toml"]).output().unwrap();
    assert_eq!(keyed.status.code(), Some(0), "{}", String::from_utf8_lossy(&keyed.stderr));
    assert!(nobody_connected(&listener), "the pre-flight sends no request");
}

#[test]
fn a_task_with_nothing_to_grade_it_must_change_something_to_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = "[[tasks]]\nid = \"idle\"\nprompt = \"p\"\n\
                 [[tasks]]\nid = \"checked\"\nprompt = \"p\"\ncheck = \"true\"\n\
                 [[tasks]]\nid = \"red-first\"\nprompt = \"p\"\ncheck = \"true\"\ncheck_before = true\nprotect = [\"tests/**\"]\n\
                 [[tasks]]\nid = \"review\"\nprompt = \"p\"\nsandbox = \"read-only\"\n\
                 [[tasks]]\nid = \"opted-out\"\nprompt = \"p\"\nrequire_change = false\n";
    scene(tmp.path(), "http://127.0.0.1:9/v1", tasks);
    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    let idle = finished(&all, "idle");
    assert_eq!(idle["status"], "failed");
    assert_eq!(idle["files_changed"], json!([]));
    let message = idle["error"]["message"].as_str().unwrap();
    assert!(message.contains("changed no file"), "{message}");
    assert!(message.contains("require_change") && message.contains("no check"), "says why it applied: {message}");
    for passed in ["checked", "review", "opted-out"] {
        assert_eq!(finished(&all, passed)["status"], "passed", "{passed}");
        assert_eq!(finished(&all, passed)["files_changed"], json!([]), "{passed}");
    }
    assert_eq!(finished(&all, "red-first")["status"], "failed", "its check passed before the agent, and nothing changed");
    assert_eq!(events(&all, "task.finished").len(), 5);

    let dry = dracode(tmp.path()).args(["run", "tasks.toml", "--dry-run"]).output().unwrap();
    let text = String::from_utf8_lossy(&dry.stdout);
    let line = |id: &str| text.lines().find(|l| l.starts_with(&format!("{id}\t"))).unwrap_or_else(|| panic!("{id}: {text}")).to_string();
    assert!(line("idle").contains("require_change=true"), "{text}");
    for id in ["checked", "review", "opted-out"] {
        assert!(line(id).contains("require_change=false"), "{text}");
    }
    // The whole grading: the check, whether it runs first, what is protected, and that a task
    // whose check passed before the agent must change something.
    assert!(line("checked").contains("check=\"true\" check_before=false require_change=false"), "{text}");
    let red = line("red-first");
    assert!(red.contains("check=\"true\" check_before=true protect=[\"tests/**\"] require_change=if_check_passes_before"), "{red}");
}

#[test]
fn a_merge_with_a_missing_or_unfinished_shard_is_exit_5_and_says_which() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks: String = (1..=4).map(|i| format!("[[tasks]]\nid = \"t{i}\"\nprompt = \"p\"\ncheck = \"true\"\n")).collect();
    scene(tmp.path(), "http://127.0.0.1:9/v1", &tasks);
    for k in 1..=3 {
        let (out, shard) = (format!("out{k}"), format!("{k}/3"));
        dracode(tmp.path()).args(["run", "tasks.toml", "--out", &out, "--shard", &shard]).assert().success();
    }
    dracode(tmp.path()).args(["merge", "out1", "out2", "out3", "--out", "all"]).assert().success();

    let output = dracode(tmp.path()).args(["merge", "out1", "out3", "--out", "partial"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("shard 2/3 is missing"), "{stderr}");
    assert_eq!(read_jsonl(&tmp.path().join("partial/results.jsonl")).last().unwrap()["exit_code"], 5);

    // A shard whose folder holds no results at all (its artifact never came).
    std::fs::create_dir(tmp.path().join("out-empty")).unwrap();
    let output = dracode(tmp.path()).args(["merge", "out1", "out-empty", "out3", "--out", "unread"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("cannot read a shard's results: out-empty/results.jsonl"), "{stderr}");

    // A shard whose job died before run.finished.
    let results = tmp.path().join("out2/results.jsonl");
    let text = std::fs::read_to_string(&results).unwrap();
    let cut: Vec<&str> = text.lines().filter(|l| !l.contains("\"run.finished\"")).collect();
    std::fs::write(&results, cut.join("\n") + "\n").unwrap();
    let output = dracode(tmp.path()).args(["merge", "out1", "out2", "out3", "--out", "unfinished"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(5), "{stderr}");
    assert!(stderr.contains("(2/3) did not finish"), "{stderr}");
}

/// Asserts that `task` ended `error`, kind `check_unrunnable`, its message holding every one of
/// `needles`; returns the message.
fn assert_unjudged(task: &serde_json::Value, needles: &[&str]) -> String {
    assert_eq!(task["status"], "error", "{task}");
    assert_eq!(task["error"]["kind"], "check_unrunnable", "{task}");
    let message = task["error"]["message"].as_str().unwrap().to_string();
    for needle in needles {
        assert!(message.contains(needle), "{needle:?} not in {message:?}");
    }
    message
}

#[test]
fn a_check_that_cannot_run_before_the_agent_is_exit_5_and_the_agent_never_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let (listener, url) = silent_endpoint();
    let tasks = "[[tasks]]\nid = \"no-pytest\"\nprompt = \"p\"\nprovider = \"mock\"\ntimeout = \"5s\"\n\
                 check = \"pytest-that-is-not-installed -q\"\ncheck_before = true\n";
    scene(tmp.path(), &url, tasks);
    let output = dracode(tmp.path()).env("MOCK_KEY", "k-123456789").args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(5), "{stderr}");
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    assert_eq!(all.last().unwrap()["exit_code"], 5);
    let task = finished(&all, "no-pytest");
    assert_unjudged(task, &["could not run before the agent", "`pytest-that-is-not-installed` not found (exit 127)", "not started"]);
    assert_eq!(task["num_turns"], 0, "{task}");
    assert_eq!(task["usage"]["requests"], 0, "{task}");
    assert_eq!(task["usage"]["total_tokens"], 0, "{task}");
    assert!(events(&all, "agent.message").is_empty(), "the agent never ran");
    assert!(nobody_connected(&listener), "no model request was sent");
}

#[test]
fn a_check_that_cannot_run_after_the_agent_is_exit_5_not_1_and_starts_no_repair() {
    let tmp = tempfile::tempdir().unwrap();
    let tasks = "[[tasks]]\nid = \"no-pytest\"\nprompt = \"p\"\ncheck = \"pytest-that-is-not-installed -q\"\ncheck_repairs = 2\n\
                 [[tasks]]\nid = \"not-executable\"\nprompt = \"p\"\ncheck = \"./app.txt\"\n\
                 [[tasks]]\nid = \"red\"\nprompt = \"p\"\ncheck = \"echo 2 tests failed; exit 1\"\n";
    scene(tmp.path(), "http://127.0.0.1:9/v1", tasks);
    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    assert_eq!(output.status.code(), Some(5), "{}", String::from_utf8_lossy(&output.stderr));
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    let task = finished(&all, "no-pytest");
    assert_unjudged(task, &["the check could not run: `pytest-that-is-not-installed` not found (exit 127)"]);
    assert_eq!(task["repairs"].as_u64().unwrap_or(0), 0, "no repair of a check that cannot run: {task}");
    assert_eq!(task["check_rounds"].as_array().map_or(0, Vec::len), 1, "{task}");
    assert_eq!(task["check"]["exit_code"], 127);
    assert_unjudged(finished(&all, "not-executable"), &["`./app.txt` is not executable (exit 126)"]);
    // A check that ran and failed stays the agent's failure.
    assert_eq!(finished(&all, "red")["status"], "failed");
    assert_eq!(finished(&all, "red")["error"]["kind"], "check");

    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "red", "--filter", "red"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn sandbox_a_check_refused_a_read_is_exit_5_naming_the_path_and_read_paths_and_a_faked_refusal_is_not() {
    if !crate::support::sandbox::supported() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    // A virtualenv outside every folder the task's commands may read.
    std::fs::create_dir_all(root.join("venv/lib")).unwrap();
    std::fs::write(root.join("venv/lib/site.py"), "print('ok')\n").unwrap();
    let site = root.join("venv/lib/site.py").display().to_string();
    let fake = |path: &str| format!("echo \\\"PermissionError: [Errno 13] Permission denied: '{path}'\\\"; exit 1");
    let tasks = format!(
        "[[tasks]]\nid = \"venv\"\nprompt = \"p\"\ncheck = \"cat {site}\"\n\
         [[tasks]]\nid = \"venv-granted\"\nprompt = \"p\"\ncheck = \"cat {site}\"\nread_paths = [\"venv\"]\n\
         [[tasks]]\nid = \"fake-allowed\"\nprompt = \"p\"\ncheck = \"{}\"\n\
         [[tasks]]\nid = \"fake-missing\"\nprompt = \"p\"\ncheck = \"{}\"\n",
        fake("/usr/bin/env"),
        fake(&root.join("venv/no-such-file.py").display().to_string()),
    );
    scene(&root, "http://127.0.0.1:9/v1", &tasks);
    let output = dracode(&root).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    assert_eq!(output.status.code(), Some(5), "{}", String::from_utf8_lossy(&output.stderr));
    let all = read_jsonl(&root.join("out/results.jsonl"));
    let venv = finished(&all, "venv");
    let folder = root.join("venv/lib").display().to_string();
    assert_unjudged(venv, &["the check could not run", &format!("`{site}`"), "read_paths", &format!("`{folder}`")]);
    assert_eq!(finished(&all, "venv-granted")["status"], "passed", "the hint works");
    // A "Permission denied" line about a path commands may read, or one that does not exist,
    // is the check's own failure: the agent cannot print its way out of a red.
    for id in ["fake-allowed", "fake-missing"] {
        assert_eq!(finished(&all, id)["status"], "failed", "{id}");
        assert_eq!(finished(&all, id)["error"]["kind"], "check", "{id}");
    }
    let output = dracode(&root).args(["run", "tasks.toml", "--out", "fakes", "--filter", "fake-*"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn sandbox_a_cargo_check_refused_a_path_dependency_is_exit_5_naming_its_manifest() {
    if !crate::support::sandbox::supported() {
        return;
    }
    // This user may have no cargo of its own (`.ci/run` reruns the sandbox tests as uid 65534,
    // which cannot reach root's rustup): there is nothing to refuse then.
    if !std::process::Command::new("cargo").arg("--version").output().is_ok_and(|o| o.status.success()) {
        eprintln!("note: no cargo runs for this user: the cargo refusal is not checked");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    // A crate whose path dependency lies outside every folder the task's commands may read: cargo
    // says so as an error chain, the path on one line and `Permission denied` two lines later.
    std::fs::create_dir_all(root.join("dep/src")).unwrap();
    std::fs::write(root.join("dep/Cargo.toml"), "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n").unwrap();
    std::fs::write(root.join("dep/src/lib.rs"), "").unwrap();
    scene(
        &root,
        "http://127.0.0.1:9/v1",
        "[[tasks]]\nid = \"cargo\"\nprompt = \"p\"\ncheck = \"cargo metadata --offline --format-version 1 >/dev/null\"\n",
    );
    let dep = root.join("dep").display().to_string();
    let manifest =
        format!("[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\ndep = {{ path = \"{dep}\" }}\n");
    std::fs::write(root.join("ws/Cargo.toml"), manifest).unwrap();
    std::fs::create_dir_all(root.join("ws/src")).unwrap();
    std::fs::write(root.join("ws/src/lib.rs"), "").unwrap();
    let mut cmd = dracode(&root);
    for var in ["HOME", "RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN"] {
        if let Some(value) = std::env::var_os(var) {
            cmd.env(var, value);
        }
    }
    let output = cmd.args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    let all = read_jsonl(&root.join("out/results.jsonl"));
    let task = finished(&all, "cargo");
    assert_eq!(output.status.code(), Some(5), "{task}");
    assert_unjudged(task, &["the check could not run", &format!("`{dep}/Cargo.toml`"), "read_paths", &format!("`{dep}`")]);
}
