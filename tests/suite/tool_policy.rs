//! The tool policy through the real binary with a scripted model (the `replay` provider):
//! allowed calls run, denied ones are answered `Error [DENIED]` and counted in
//! `task.finished`, `on_denied = "fail"` ends the task, `dracode tools --task` shows the rules,
//! and `web_fetch` reaches only allowed hosts (a local 127.0.0.1 server).

use crate::support::cli::{dracode, events, finished, read_jsonl};
use serde_json::{Value, json};
use std::path::Path;

/// One scripted turn calling `calls` (id, tool, input), then a final answer.
fn script(dir: &Path, calls: &[(&str, &str, Value)]) {
    let uses: Vec<Value> =
        calls.iter().map(|(id, name, input)| json!({"type": "tool_use", "id": id, "name": name, "input": input})).collect();
    let rec = json!([
        {"content": uses, "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
    ]);
    std::fs::write(dir.join("rec.json"), rec.to_string()).unwrap();
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(dir.join("ws/keep.txt"), "keep\n").unwrap();
}

/// A one-task manifest `t` working on a copy of `ws`, with `extra` (fields, then tables).
fn manifest(dir: &Path, extra: &str) {
    let text = format!(
        "[defaults]\nprovider = \"replay\"\nreplay = \"rec.json\"\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\n[[tasks]]\nid = \"t\"\nprompt = \"p\"\n{extra}"
    );
    std::fs::write(dir.join("tasks.toml"), text).unwrap();
}

/// Runs the manifest; returns the exit code, stderr and the events.
fn run(dir: &Path) -> (i32, String, Vec<Value>) {
    let out = dracode(dir).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), stderr, read_jsonl(&dir.join("out/results.jsonl")))
}

/// The `tool.completed` output of call `id`.
fn output<'a>(all: &'a [Value], id: &str) -> &'a str {
    let done = events(all, "tool.completed").into_iter().find(|e| e["call_id"] == id).unwrap_or_else(|| panic!("no tool.completed {id}"));
    done["output"].as_str().unwrap()
}

const POLICY: &str = "tools = [\"run_command\", \"delete_file\", \"read_file\"]\n\n[tasks.policy]\n\
    run_command = { allow = [\"echo *\", \"git status\"], deny = [\"curl *\", \"git push*\"] }\n\
    delete_file = { allow = false }\n";

#[test]
fn allowed_calls_run_and_denied_calls_are_answered_and_counted() {
    let tmp = tempfile::tempdir().unwrap();
    script(
        tmp.path(),
        &[
            ("ok", "run_command", json!({"command": "echo", "arguments": "allowed-ran"})),
            ("smuggle", "run_command", json!({"command": "echo hi; touch smuggled.txt", "shell": true})),
            ("curl", "run_command", json!({"command": "sh", "arguments": "-c 'curl http://evil.invalid'"})),
            ("other", "run_command", json!({"command": "touch", "arguments": "other.txt"})),
            ("rm", "delete_file", json!({"file_path": "keep.txt"})),
            ("read", "read_file", json!({"file_path": "keep.txt"})),
        ],
    );
    manifest(tmp.path(), POLICY);
    let (code, stderr, all) = run(tmp.path());
    assert_eq!(code, 0, "denials are answered, the task goes on: {stderr}");
    let done = finished(&all, "t");
    assert_eq!(done["status"], "passed");
    assert!(output(&all, "ok").contains("allowed-ran"), "{}", output(&all, "ok"));
    assert!(output(&all, "read").contains("keep"));
    assert!(output(&all, "smuggle").starts_with("Error [DENIED]: command `echo hi; touch smuggled.txt` uses shell operators"));
    assert!(output(&all, "curl").contains("(policy rule policy.run_command.deny \"curl *\")"), "{}", output(&all, "curl"));
    assert!(output(&all, "other").contains("matches none of the allowed commands [\"echo *\", \"git status\"]"));
    assert_eq!(
        output(&all, "rm"),
        "Error [DENIED]: delete_file may not be called in this task (policy rule policy.delete_file.allow = false)"
    );
    assert_eq!(done["denied_calls"], 4);
    let denied: Vec<(&str, &str)> =
        done["denied"].as_array().unwrap().iter().map(|d| (d["call_id"].as_str().unwrap(), d["tool"].as_str().unwrap())).collect();
    assert_eq!(denied, [("smuggle", "run_command"), ("curl", "run_command"), ("other", "run_command"), ("rm", "delete_file")]);
    assert!(done["denied"][3]["message"].as_str().unwrap().contains("policy.delete_file.allow = false"));
    assert_eq!(done["files_changed"], json!([]), "no denied command ran: nothing was created or deleted");
}

#[test]
fn on_denied_fail_ends_the_task_as_a_denied_failure() {
    let tmp = tempfile::tempdir().unwrap();
    script(tmp.path(), &[("push", "run_command", json!({"command": "git", "arguments": "push origin main"}))]);
    manifest(tmp.path(), &format!("{POLICY}on_denied = \"fail\"\n"));
    let (code, stderr, all) = run(tmp.path());
    assert_eq!(code, 1, "a failed task: {stderr}");
    let done = finished(&all, "t");
    assert_eq!((&done["status"], &done["error"]["kind"], &done["num_turns"]), (&json!("failed"), &json!("denied"), &json!(1)));
    let message = done["error"]["message"].as_str().unwrap();
    assert!(message.contains("on_denied = \"fail\"") && message.contains("git push*"), "{message}");
    assert_eq!(done["denied_calls"], 1);
    let junit = std::fs::read_to_string(tmp.path().join("out/junit.xml")).unwrap();
    assert!(junit.contains("<failure") && junit.contains("type=\"denied\""), "a task-side failure: {junit}");
    assert!(!junit.contains("<error"), "{junit}");
}

#[test]
fn tools_task_shows_the_effective_tools_and_rules() {
    let tmp = tempfile::tempdir().unwrap();
    script(tmp.path(), &[]);
    manifest(tmp.path(), POLICY);
    let out = dracode(tmp.path()).args(["tools", "--task", "t", "tasks.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        shown,
        json!({"task": "t", "network": false, "on_denied": "answer", "tools": [
            {"name": "run_command", "allow": ["echo *", "git status"], "deny": ["curl *", "git push*"]},
            {"name": "delete_file", "allow": false},
            {"name": "read_file", "allow": true}
        ]})
    );
    let missing = dracode(tmp.path()).args(["tools", "--task", "nope", "tasks.toml"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no task \"nope\""));
}

#[test]
fn a_bad_policy_exits_2_naming_file_line_task_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    script(tmp.path(), &[]);
    manifest(tmp.path(), "\n[tasks.policy]\nrun_comand = { allow = false }\nrun_command = { allow = [\"cargo [\"] }\n");
    let out = dracode(tmp.path()).args(["validate", "tasks.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "tasks.toml:11:8: task \"t\": field \"policy\": run_comand: unknown tool \"run_comand\" (did you mean \"run_command\"?)"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("field \"policy\": run_command.allow[0]: rule \"cargo [\" is not a valid glob"), "{stderr}");

    manifest(tmp.path(), "tools = [\"web_fetch\"]\n");
    let out = dracode(tmp.path()).args(["validate", "tasks.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("field \"tools\": web_fetch needs network = true"), "{stderr}");
    manifest(tmp.path(), "tools = [\"web_fetch\"]\nnetwork = true\n");
    let stderr = String::from_utf8_lossy(&dracode(tmp.path()).args(["validate", "tasks.toml"]).output().unwrap().stderr).into_owned();
    assert!(stderr.contains("web_fetch needs policy.web_fetch.allowed_hosts"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn web_fetch_reads_allowed_hosts_only_and_checks_redirects() {
    use wiremock::matchers::path;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    let port = server.address().port();
    let page = "<html><body><h1>Guide</h1><p>Use <a href=\"https://docs.rs\">docs.rs</a>.</p></body></html>";
    Mock::given(path("/guide")).respond_with(ResponseTemplate::new(200).set_body_raw(page, "text/html")).mount(&server).await;
    let away = ResponseTemplate::new(301).insert_header("location", format!("http://localhost:{port}/guide"));
    Mock::given(path("/away")).respond_with(away).mount(&server).await;
    let tmp = tempfile::tempdir().unwrap();
    let base = server.uri();
    script(
        tmp.path(),
        &[
            ("page", "web_fetch", json!({"url": format!("{base}/guide")})),
            ("host", "web_fetch", json!({"url": format!("http://localhost:{port}/guide")})),
            ("redirect", "web_fetch", json!({"url": format!("{base}/away")})),
        ],
    );
    manifest(tmp.path(), "tools = [\"web_fetch\"]\nnetwork = true\n\n[tasks.policy]\nweb_fetch = { allowed_hosts = [\"127.0.0.1\"] }\n");
    let dir = tmp.path().to_path_buf();
    let (code, stderr, all) = tokio::task::spawn_blocking(move || run(&dir)).await.unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(output(&all, "page"), format!("URL: {base}/guide\n\n# Guide\n\nUse [docs.rs](https://docs.rs)."));
    assert!(output(&all, "host").starts_with("Error [DENIED]: URL http://localhost:"), "{}", output(&all, "host"));
    assert!(output(&all, "redirect").starts_with("Error [DENIED]: redirect to http://localhost:"), "{}", output(&all, "redirect"));
    assert_eq!(finished(&all, "t")["denied_calls"], 2);
    let served: Vec<String> = server.received_requests().await.unwrap().iter().map(|r| r.url.path().to_string()).collect();
    assert_eq!(served, ["/guide", "/away"], "nothing was fetched from a host the task does not allow");
}
