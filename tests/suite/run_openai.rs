//! `dracode run` against a local server that speaks OpenAI Chat Completions strictly (it
//! rejects unanswered tool calls, bad auth and schema violations as the real API does).

use crate::support::cli::{dracode, events, files_containing, finished, git, git_repo, read_jsonl};
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens, ToolCall};
use serde_json::{Value, json};
use std::path::Path;

const KEY: &str = "sk-test-0123456789abcdef";

/// A project folder with a dracode.toml pointing the `mock` provider at `server`.
fn setup(server: &OpenAiServer, manifest: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("dracode.toml"),
        format!("provider = \"mock\"\n[providers.mock]\ntype = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o\"\n", server.base_url()),
    )
    .unwrap();
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    tmp
}

fn run(dir: &Path) -> (i32, String, Vec<Value>) {
    let output = dracode(dir).env("OPENAI_API_KEY", KEY).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let results = dir.join("out/results.jsonl");
    let all = if results.exists() { read_jsonl(&results) } else { Vec::new() };
    (output.status.code().unwrap_or(-1), stderr, all)
}

/// The `tool` messages of a request body, as (tool_call_id, content).
fn tool_messages(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| (m["tool_call_id"].as_str().unwrap().to_string(), m["content"].as_str().unwrap_or_default().to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_that_writes_a_file_passes_and_its_patch_applies_to_the_base() {
    let server = OpenAiServer::start_with_key(
        KEY,
        vec![
            ScriptedReply::tool_call(
                "call_1",
                "write_file",
                json!({"file_path": "src/new.txt", "content": "hello\n"}),
                Tokens::new(100, 20),
            ),
            ScriptedReply::tool_call(
                "call_2",
                "edit_file",
                json!({"file_path": "a.txt", "old_string": "one", "new_string": "uno"}),
                Tokens::new(150, 30).cached(64),
            ),
            ScriptedReply::text("Wrote src/new.txt and edited a.txt.", Tokens::new(200, 10).reasoning(4)),
        ],
    )
    .await;
    let tmp =
        setup(&server, "[defaults]\nrepo = \"repo\"\nisolation = \"none\"\n[[tasks]]\nid = \"write\"\nprompt = \"Create src/new.txt\"\n");
    let repo = tmp.path().join("repo");
    git_repo(&repo, &[("a.txt", "one\ntwo\n")]);
    let (code, stderr, all) = tokio::task::spawn_blocking({
        let dir = tmp.path().to_path_buf();
        move || run(&dir)
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{stderr}");
    let task = finished(&all, "write");
    assert_eq!(task["status"], "passed");
    assert_eq!(task["result"], "Wrote src/new.txt and edited a.txt.");
    // Token sums equal what the server reported.
    assert_eq!(task["usage"]["input_tokens"], 450);
    assert_eq!(task["usage"]["output_tokens"], 60);
    assert_eq!(task["usage"]["cached_input_tokens"], 64);
    assert_eq!(task["usage"]["reasoning_output_tokens"], 4);
    assert_eq!(task["usage"]["total_tokens"], 510);
    assert_eq!(task["usage"]["requests"], 3);
    assert_eq!(all.last().unwrap()["usage"]["total_tokens"], 510);
    let turns = events(&all, "turn.completed");
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[0]["stop_reason"], "tool_use");
    assert_eq!(turns[2]["stop_reason"], "end_turn");
    assert!(task["total_cost_usd"].as_f64().unwrap() > 0.0, "gpt-4o has a price");

    // In place: the change is in the repo; the patch reproduces it on a clean clone of the base.
    assert_eq!(std::fs::read_to_string(repo.join("src/new.txt")).unwrap(), "hello\n");
    let patch = tmp.path().join("out/diffs/write.patch");
    assert!(patch.is_file());
    let clone = tmp.path().join("clone");
    git(tmp.path(), &["clone", "-q", repo.to_str().unwrap(), clone.to_str().unwrap()]);
    git(&clone, &["apply", "--check", patch.to_str().unwrap()]);
    git(&clone, &["apply", patch.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(clone.join("a.txt")).unwrap(), "uno\ntwo\n");
    assert_eq!(std::fs::read_to_string(clone.join("src/new.txt")).unwrap(), "hello\n");
    // The user's index was not touched: the new file is still untracked.
    assert!(git(&repo, &["status", "--porcelain"]).contains("?? src/"));
}

#[tokio::test(flavor = "multi_thread")]
async fn every_call_of_a_multi_tool_turn_is_answered_and_tool_errors_reach_the_model() {
    let server = OpenAiServer::start(vec![
        ScriptedReply::tool_calls(
            vec![
                ToolCall::new("call_a", "read_file", json!({"file_path": "missing.txt"})),
                ToolCall::new("call_b", "list_files", json!({})),
                ToolCall::raw("call_c", "read_file", "{not json"),
            ],
            Tokens::new(50, 10),
        ),
        ScriptedReply::text("done", Tokens::new(80, 5)),
    ])
    .await;
    let tmp = setup(
        &server,
        "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\n[[tasks]]\nid = \"multi\"\nprompt = \"look around\"\n",
    );
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::fs::write(tmp.path().join("ws/present.txt"), "x").unwrap();
    let dir = tmp.path().to_path_buf();
    let (code, stderr, all) = tokio::task::spawn_blocking(move || run(&dir)).await.unwrap();
    assert_eq!(code, 0, "{stderr}");
    let second = &server.requests()[1];
    let answers = tool_messages(second);
    let ids: Vec<&str> = answers.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["call_a", "call_b", "call_c"], "answered in order");
    assert!(answers[0].1.starts_with("Error [FILE_NOT_FOUND]"), "{}", answers[0].1);
    assert!(answers[1].1.contains("present.txt"), "{}", answers[1].1);
    assert!(answers[2].1.starts_with("Error [INVALID_ARGUMENTS]"), "{}", answers[2].1);
    let tools = events(&all, "tool.completed");
    assert_eq!(tools.iter().map(|t| t["ok"].as_bool().unwrap()).collect::<Vec<_>>(), [false, true, false]);
    assert_eq!(finished(&all, "multi")["status"], "passed");
}

#[tokio::test(flavor = "multi_thread")]
async fn max_iterations_ends_the_task_with_its_own_status() {
    let server = OpenAiServer::start(vec![
        ScriptedReply::tool_call("c1", "list_files", json!({}), Tokens::new(10, 1)),
        ScriptedReply::tool_call("c2", "list_files", json!({}), Tokens::new(11, 1)),
    ])
    .await;
    let tmp = setup(&server, "[defaults]\nrepo = \".\"\nmax_iterations = 2\n[[tasks]]\nid = \"loop\"\nprompt = \"x\"\n");
    let dir = tmp.path().to_path_buf();
    let (code, _, all) = tokio::task::spawn_blocking(move || run(&dir)).await.unwrap();
    assert_eq!(code, 1);
    let task = finished(&all, "loop");
    assert_eq!(task["status"], "max_iterations");
    assert_eq!(task["is_error"], true);
    assert_eq!(task["num_turns"], 2);
    assert_eq!(task["usage"]["input_tokens"], 21);
    assert_eq!(server.requests().len(), 2);
    let junit = std::fs::read_to_string(tmp.path().join("out/junit.xml")).unwrap();
    assert!(junit.contains("max_iterations"), "{junit}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_without_a_key_is_not_configured_and_sends_nothing() {
    let server = OpenAiServer::start(vec![ScriptedReply::text("never", Tokens::new(1, 1))]).await;
    let tmp = setup(&server, "[[tasks]]\nid = \"nokey\"\nprompt = \"x\"\n");
    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    assert_eq!(output.status.code(), Some(5), "could not be judged");
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    let task = finished(&all, "nokey");
    assert_eq!(task["status"], "not_configured");
    assert_eq!(task["error"]["kind"], "not_configured");
    assert!(task["error"]["message"].as_str().unwrap().contains("OPENAI_API_KEY"));
    assert!(server.received().is_empty(), "no request was sent");
    assert_eq!(all.last().unwrap()["counts"]["not_configured"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn paths_outside_the_workspace_are_refused() {
    let server = OpenAiServer::start(vec![
        ScriptedReply::tool_calls(
            vec![
                ToolCall::new("c1", "read_file", json!({"file_path": "../secret.txt"})),
                ToolCall::new("c2", "read_file", json!({"file_path": "/etc/passwd"})),
                ToolCall::new("c3", "read_file", json!({"file_path": "link/secret.txt"})),
                ToolCall::new("c4", "write_file", json!({"file_path": "../escaped.txt", "content": "x"})),
                ToolCall::new("c5", "write_file", json!({"file_path": "link/planted.txt", "content": "x"})),
                ToolCall::new("c6", "list_files", json!({"directory": "../ws-evil"})),
            ],
            Tokens::new(10, 10),
        ),
        ScriptedReply::text("ok", Tokens::new(10, 1)),
    ])
    .await;
    let tmp = setup(
        &server,
        "[defaults]\nrepo = \"ws\"\nisolation = \"none\"\nrequire_change = false\n[[tasks]]\nid = \"escape\"\nprompt = \"x\"\n",
    );
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "TOP-SECRET").unwrap();
    std::fs::write(tmp.path().join("secret.txt"), "TOP-SECRET").unwrap();
    std::fs::create_dir(tmp.path().join("ws-evil")).unwrap();
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::os::unix::fs::symlink(&outside, tmp.path().join("ws/link")).unwrap();
    let dir = tmp.path().to_path_buf();
    let (code, stderr, _) = tokio::task::spawn_blocking(move || run(&dir)).await.unwrap();
    assert_eq!(code, 0, "{stderr}");
    let answers = tool_messages(&server.requests()[1]);
    assert_eq!(answers.len(), 6);
    for (id, content) in &answers {
        assert!(content.starts_with("Error [PATH_OUTSIDE_WORKSPACE]"), "{id}: {content}");
        assert!(!content.contains("TOP-SECRET") && !content.contains("root:"), "{id} leaked: {content}");
    }
    assert!(!tmp.path().join("escaped.txt").exists());
    assert!(!outside.join("planted.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_never_reach_commands_the_model_or_any_artifact() {
    const CI_SECRET: &str = "deploy-secret-98765-abcdef";
    let server = OpenAiServer::start_with_key(
        KEY,
        vec![
            ScriptedReply::tool_calls(
                vec![
                    ToolCall::new("c1", "run_command", json!({"command": "env"})),
                    // Reading the parent's environment directly: the key is masked anyway.
                    ToolCall::new("c2", "run_command", json!({"command": "cat /proc/$PPID/environ", "shell": true})),
                    ToolCall::new(
                        "c3",
                        "run_command",
                        json!({"command": "sh", "arguments": "-c 'echo key=$OPENAI_API_KEY token=$MY_DEPLOY_TOKEN'"}),
                    ),
                ],
                Tokens::new(10, 10),
            ),
            ScriptedReply::text(&format!("echoing {KEY} back"), Tokens::new(10, 1)),
        ],
    )
    .await;
    let tmp = setup(
        &server,
        "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\n[[tasks]]\nid = \"leak\"\nprompt = \"x\"\n",
    );
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    let dir = tmp.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        dracode(&dir)
            .env("OPENAI_API_KEY", KEY)
            .env("MY_DEPLOY_TOKEN", CI_SECRET)
            .args(["run", "tasks.toml", "--out", "out", "--verbose"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let answers = tool_messages(&server.requests()[1]);
    assert_eq!(answers.len(), 3);
    assert!(answers[0].1.contains("PATH="), "env ran: {}", answers[0].1);
    assert!(answers[2].1.contains("key= token="), "variables are absent: {}", answers[2].1);
    for (id, content) in &answers {
        assert!(!content.contains(KEY) && !content.contains(CI_SECRET), "{id} leaked: {content}");
    }
    for secret in [KEY, CI_SECRET] {
        assert_eq!(files_containing(&tmp.path().join("out"), secret), Vec::<std::path::PathBuf>::new());
        assert!(!String::from_utf8_lossy(&output.stderr).contains(secret));
        assert!(!String::from_utf8_lossy(&output.stdout).contains(secret));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn record_then_replay_reproduces_the_run_offline() {
    let server = OpenAiServer::start(vec![
        ScriptedReply::tool_call("call_1", "write_file", json!({"file_path": "out.txt", "content": "recorded\n"}), Tokens::new(40, 8)),
        ScriptedReply::text("wrote out.txt", Tokens::new(60, 4)),
    ])
    .await;
    let tmp = setup(&server, "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\n[[tasks]]\nid = \"rec\"\nprompt = \"write out.txt\"\n");
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    let dir = tmp.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        dracode(&dir).env("OPENAI_API_KEY", KEY).args(["run", "tasks.toml", "--out", "live", "--record", "recordings"]).output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(tmp.path().join("recordings/rec.json").is_file());
    assert!(!std::fs::read_to_string(tmp.path().join("recordings/rec.json")).unwrap().contains(KEY));

    // The same manifest, offline: no key, no server, same result and usage.
    let replayed = dracode(tmp.path())
        .args(["run", "tasks.toml", "--out", "offline", "--provider", "replay"])
        .env("DRACODE_DEFAULTS__REPLAY", tmp.path().join("recordings").to_str().unwrap())
        .output()
        .unwrap();
    assert_eq!(replayed.status.code(), Some(0), "{}", String::from_utf8_lossy(&replayed.stderr));
    let live = read_jsonl(&tmp.path().join("live/results.jsonl"));
    let offline = read_jsonl(&tmp.path().join("offline/results.jsonl"));
    for key in ["status", "usage", "result", "files_changed"] {
        assert_eq!(finished(&live, "rec")[key], finished(&offline, "rec")[key], "{key}");
    }
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("live/diffs/rec.patch")).unwrap(),
        std::fs::read_to_string(tmp.path().join("offline/diffs/rec.patch")).unwrap()
    );
    assert_eq!(server.requests().len(), 2, "the replay sent nothing");
}

/// A project whose `local` provider of type `kind` (no key) points at `server`.
fn setup_local(server: &OpenAiServer, kind: &str, manifest: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("dracode.toml"),
        format!(
            "provider = \"local\"\n[providers.local]\ntype = \"{kind}\"\nbase_url = \"{}\"\nmodel = \"qwen2.5-coder\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    tmp
}

/// A two-turn tool task against llama-cpp-python through provider type `kind`: the statuses
/// the server answered, and the bodies it received.
async fn llama_cpp_python_task(kind: &str) -> (Vec<u16>, Vec<Value>) {
    let server = OpenAiServer::start_llama_cpp_python(vec![
        ScriptedReply::tool_call("call_1", "list_files", json!({}), Tokens::new(20, 4)),
        ScriptedReply::text("done", Tokens::new(30, 2)),
    ])
    .await;
    let tmp = setup_local(
        &server,
        kind,
        "[defaults]\nrepo = \".\"\nrequire_change = false\n[[tasks]]\nid = \"local\"\nprompt = \"look around\"\n",
    );
    let dir = tmp.path().to_path_buf();
    let (code, stderr, all) = tokio::task::spawn_blocking(move || run(&dir)).await.unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(finished(&all, "local")["status"], "passed");
    (server.received().iter().map(|r| r.status).collect(), server.requests())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_llamacpp_task_against_llama_cpp_python_sends_empty_content_and_passes() {
    let (statuses, requests) = llama_cpp_python_task("llamacpp").await;
    // The streamed first request gets an empty 200 and is sent again unstreamed, as is the rest.
    assert_eq!(statuses, [200, 200, 200]);
    assert_eq!(requests.iter().map(|r| r.get("stream").is_some()).collect::<Vec<_>>(), [true, false, false]);
    let requests = &requests[1..];
    let assistant = requests[1]["messages"].as_array().unwrap().iter().find(|m| m["role"] == "assistant").unwrap().clone();
    assert_eq!(assistant["content"], "");
    assert_eq!(tool_messages(&requests[1]).len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_type_task_against_llama_cpp_python_passes_with_one_resend() {
    let (statuses, requests) = llama_cpp_python_task("openai").await;
    assert_eq!(statuses, [200, 200, 500, 200], "an empty answer to the stream, one refused request, resent once, no retries");
    let requests = &requests[1..];
    let content = |body: &Value| body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "assistant").unwrap()["content"].clone();
    assert_eq!(content(&requests[1]), Value::Null);
    assert_eq!(content(&requests[2]), "");
}
