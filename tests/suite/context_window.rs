//! Issue 9, context-window management, through the real binary: each provider's local server
//! answers its real context-overflow error above a token threshold (tokens ≈ body bytes / 4);
//! the task compacts and passes. With the window known, a 40-turn task never meets the error.

use crate::support::anthropic_server as anthropic;
use crate::support::cli::{dracode, events, finished, read_jsonl};
use crate::support::gemini_server as gemini;
use crate::support::openai_server as openai;
use serde_json::{Value, json};
use std::path::Path;

/// The threshold of the servers in the overflow scenarios, in tokens (12 KB of body).
const LIMIT: u64 = 3000;
/// What the model answers to the summary request.
const SUMMARY: &str = "Read big.txt (1000 lines, nothing to change yet). Remaining: report.";

/// A project with `big.txt` (about 21 KB: one read of it passes [`LIMIT`]), provider `mock` of
/// type `kind` at `base_url` with an unknown model (so no built-in window) plus `extra`
/// settings, and `manifest`.
fn project(kind: &str, base_url: &str, extra: &str, manifest: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let big: String = (0..1000).map(|i| format!("line {i:04} of a big file\n")).collect();
    std::fs::write(ws.join("big.txt"), big).unwrap();
    let config = format!("[providers.mock]\ntype = \"{kind}\"\nbase_url = \"{base_url}\"\nmodel = \"mock-model\"\n{extra}");
    std::fs::write(tmp.path().join("dracode.toml"), config).unwrap();
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    tmp
}

const ONE_TASK: &str = "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\n[[tasks]]\nid = \"long\"\nprompt = \"Read big.txt and report.\"\n";

async fn run(dir: &Path, env: &[(&str, &str)]) -> (i32, String, Vec<Value>) {
    let dir = dir.to_path_buf();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        let output = dracode(&dir).envs(env).args(["run", "tasks.toml", "--out", "out", "--provider", "mock"]).output().unwrap();
        let results = dir.join("out/results.jsonl");
        let all = if results.exists() { read_jsonl(&results) } else { Vec::new() };
        (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned(), all)
    })
    .await
    .unwrap()
}

/// The run passed after a summary compaction; the `context.compacted` events say so.
fn assert_compacted_and_passed(code: i32, stderr: &str, all: &[Value]) {
    assert_eq!(code, 0, "{stderr}");
    let task = finished(all, "long");
    assert_eq!(task["status"], "passed", "{task}");
    assert_eq!(task["result"], "done");
    assert!(task["compactions"].as_u64().unwrap() >= 1, "{task}");
    let compacted = events(all, "context.compacted");
    assert_eq!(compacted.len() as u64, task["compactions"].as_u64().unwrap());
    let summary = compacted.iter().find(|e| e["method"] == "summary").expect("a summary compaction");
    assert!(summary["tokens_after"].as_u64() < summary["tokens_before"].as_u64(), "{summary}");
    // Tool call, summary, final answer: three calls that returned, all counted.
    assert_eq!(task["num_turns"], 3);
    assert_eq!(task["usage"]["requests"], 3);
    assert_eq!(events(all, "turn.completed").len(), 3);
}

/// The text of every message of an OpenAI or Anthropic body, joined.
fn body_text(body: &Value) -> String {
    body["messages"].to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_context_length_exceeded_is_compacted_and_the_task_passes() {
    let server = openai::OpenAiServer::start(vec![
        openai::ScriptedReply::tool_call("call_1", "read_file", json!({"file_path": "big.txt"}), openai::Tokens::new(0, 10)),
        openai::ScriptedReply::text(SUMMARY, openai::Tokens::new(0, 20)),
        openai::ScriptedReply::text("done", openai::Tokens::new(0, 2)),
    ])
    .await;
    server.set_context_limit(LIMIT);
    let tmp = project("openai", &server.base_url(), "", ONE_TASK);
    let (code, stderr, all) = run(tmp.path(), &[("OPENAI_API_KEY", "sk-test-123456789")]).await;
    assert_compacted_and_passed(code, &stderr, &all);
    let received = server.received();
    let refused: Vec<_> = received.iter().filter(|r| r.status == 400).collect();
    assert_eq!(refused.len(), 1, "the overflow error was answered once: compacted, not resent as is");
    assert!(refused.iter().all(|r| openai::body_tokens(r.body.as_ref().unwrap().to_string().as_bytes()) > LIMIT));
    // Every accepted request fitted; the last one continues from the summary, tools offered.
    let last = received.last().unwrap();
    assert_eq!(last.status, 200);
    let body = last.body.as_ref().unwrap();
    assert!(body_text(body).contains(SUMMARY) && body["tools"].is_array(), "{body}");
    let summary_call = &received[received.len() - 2];
    assert!(summary_call.body.as_ref().unwrap().get("tools").is_none(), "the summary call offers no tools");
    assert_eq!(
        finished(&all, "long")["usage"]["input_tokens"],
        received
            .iter()
            .filter(|r| r.status == 200)
            .map(|r| openai::body_tokens(&serde_json::to_vec(r.body.as_ref().unwrap()).unwrap()))
            .sum::<u64>()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_prompt_is_too_long_is_compacted_and_the_task_passes() {
    let server = anthropic::AnthropicServer::start(vec![
        anthropic::ScriptedReply::tool_use("toolu_01", "read_file", json!({"file_path": "big.txt"}), anthropic::Tokens::new(0, 10)),
        anthropic::ScriptedReply::text(SUMMARY, anthropic::Tokens::new(0, 20)),
        anthropic::ScriptedReply::text("done", anthropic::Tokens::new(0, 2)),
    ])
    .await;
    server.set_context_limit(LIMIT);
    let tmp = project("anthropic", &server.base_url(), "", ONE_TASK);
    let (code, stderr, all) = run(tmp.path(), &[("ANTHROPIC_API_KEY", "sk-ant-test-123456789")]).await;
    assert_compacted_and_passed(code, &stderr, &all);
    let received = server.received();
    assert_eq!(received.iter().filter(|r| r.status == 400).count(), 1, "one refusal, then compaction");
    let last = received.last().unwrap();
    assert_eq!(last.status, 200);
    assert!(body_text(last.body.as_ref().unwrap()).contains(SUMMARY));
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_input_token_count_exceeded_is_compacted_and_the_task_passes() {
    let key = "AIza-context-123456789";
    let server = gemini::GeminiServer::start(
        key,
        vec![
            gemini::Reply::Calls(vec![("read_file".into(), json!({"file_path": "big.txt"}))], [0, 10, 0, 0]),
            gemini::Reply::Text(SUMMARY.into(), [0, 20, 0, 0]),
            gemini::Reply::Text("done".into(), [0, 2, 0, 0]),
        ],
    )
    .await;
    server.set_context_limit(LIMIT);
    let tmp = project("gemini", &server.base_url(), "", ONE_TASK);
    let (code, stderr, all) = run(tmp.path(), &[("GEMINI_API_KEY", key)]).await;
    assert_compacted_and_passed(code, &stderr, &all);
    assert_eq!(server.overflows(), 1);
    let (_, last) = server.requests().pop().unwrap();
    assert!(last["contents"].to_string().contains(SUMMARY), "{last}");
}

/// With the window unknown and a conversation that cannot be made to fit (the task prompt
/// alone is over the limit), the task ends `error`, kind `context_overflow`, a JUnit failure.
#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_longer_than_the_window_ends_as_context_overflow() {
    let server = openai::OpenAiServer::start(vec![]).await;
    server.set_context_limit(200);
    let manifest = format!(
        "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\n[[tasks]]\nid = \"long\"\nprompt = \"{}\"\n",
        "Summarise this. ".repeat(200)
    );
    let tmp = project("openai", &server.base_url(), "", &manifest);
    let (code, stderr, all) = run(tmp.path(), &[("OPENAI_API_KEY", "sk-test-123456789")]).await;
    assert_eq!(code, 1, "{stderr}");
    let task = finished(&all, "long");
    assert_eq!(task["status"], "error");
    assert_eq!(task["error"]["kind"], "context_overflow");
    assert_eq!(task["error"]["http_status"], 400);
    assert_eq!(task["attempts"], 1);
    let junit = std::fs::read_to_string(tmp.path().join("out/junit.xml")).unwrap();
    assert!(junit.contains("<failure") && junit.contains("type=\"context_overflow\""), "{junit}");
}

/// Issue 9's 40-turn task: forty reads of 3 KB files (about 30k tokens of tool output) against
/// a server whose window is 16k tokens. Told the window, dracode trims old outputs before the
/// server would refuse: not a single overflow error, every request accepted as valid.
#[tokio::test(flavor = "multi_thread")]
async fn a_forty_turn_task_over_a_16k_window_never_overflows() {
    const TURNS: usize = 40;
    let mut script: Vec<openai::ScriptedReply> = (0..TURNS)
        .map(|i| {
            let path = format!("src/f{i:02}.txt");
            openai::ScriptedReply::tool_call(&format!("call_{i}"), "read_file", json!({"file_path": path}), openai::Tokens::new(0, 10))
        })
        .collect();
    script.push(openai::ScriptedReply::text("done", openai::Tokens::new(0, 2)));
    let server = openai::OpenAiServer::start(script).await;
    server.set_context_limit(16_000);
    let manifest = "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\nmax_iterations = 60\n[[tasks]]\nid = \"long\"\nprompt = \"Read every file under src.\"\n";
    let tmp = project("openai", &server.base_url(), "context_window = 16000\n", manifest);
    let src = tmp.path().join("ws/src");
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..TURNS {
        let text: String = (0..100).map(|l| format!("file {i:02} line {l:03}: some code\n")).collect();
        std::fs::write(src.join(format!("f{i:02}.txt")), text).unwrap();
    }
    let (code, stderr, all) = run(tmp.path(), &[("OPENAI_API_KEY", "sk-test-123456789")]).await;
    let received = server.received();
    let statuses: Vec<u16> = received.iter().map(|r| r.status).collect();
    assert!(statuses.iter().all(|s| *s == 200), "no request was refused: {statuses:?}");
    assert_eq!(received.len(), TURNS + 1);
    assert_eq!(code, 0, "{stderr}");
    let task = finished(&all, "long");
    assert_eq!(task["status"], "passed");
    assert_eq!(task["num_turns"], TURNS as u64 + 1);
    let compacted = events(&all, "context.compacted");
    assert!(!compacted.is_empty() && task["compactions"].as_u64() == Some(compacted.len() as u64), "{task}");
    assert!(compacted.iter().all(|e| e["tokens_after"].as_u64() < e["tokens_before"].as_u64()));
    let tool_outputs = |body: &Value| body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").count();
    let last = received.last().unwrap().body.as_ref().unwrap();
    assert_eq!(tool_outputs(last), TURNS, "every call is still answered in the last request");
    assert!(last.to_string().contains("dracode cut") && !last.to_string().contains("file 00 line 050"), "old outputs were trimmed");
    // The transcript keeps every output whole.
    let transcript = std::fs::read_to_string(tmp.path().join("out/transcripts/long.json")).unwrap();
    assert!(!transcript.contains("dracode cut") && transcript.contains("file 00 line 050"), "{transcript:.300}");
}

#[test]
fn context_fields_out_of_range_are_exit_2_naming_file_line_task_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[[tasks]]\nid = \"a\"\nprompt = \"x\"\ncompact_at = 1.5\n\n[[tasks]]\nid = \"b\"\nprompt = \"y\"\nmax_context_tokens = 0\n",
    )
    .unwrap();
    for command in ["validate", "run"] {
        let output = dracode(tmp.path()).args([command, "tasks.toml"]).assert().code(2).get_output().clone();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("tasks.toml:4:1: task \"a\": field \"compact_at\": 1.5 is not a fraction of the window in (0, 1]"),
            "{stderr}"
        );
        assert!(stderr.contains("tasks.toml:9:1: task \"b\": field \"max_context_tokens\": must be at least 1"), "{stderr}");
    }
}

/// Told the window, dracode summarises before the request that would pass it: the strict
/// Anthropic server never refuses, and accepts the rebuilt conversation (the kept `tool_use`
/// still answered by its `tool_result`).
#[tokio::test(flavor = "multi_thread")]
async fn a_known_window_is_compacted_by_summary_before_the_server_would_refuse() {
    let server = anthropic::AnthropicServer::start(vec![
        anthropic::ScriptedReply::tool_use("toolu_01", "read_file", json!({"file_path": "big.txt"}), anthropic::Tokens::new(0, 10)),
        anthropic::ScriptedReply::text(SUMMARY, anthropic::Tokens::new(0, 20)),
        anthropic::ScriptedReply::text("done", anthropic::Tokens::new(0, 2)),
    ])
    .await;
    server.set_context_limit(LIMIT);
    let tmp = project("anthropic", &server.base_url(), &format!("context_window = {LIMIT}\n"), ONE_TASK);
    let (code, stderr, all) = run(tmp.path(), &[("ANTHROPIC_API_KEY", "sk-ant-test-123456789")]).await;
    assert_compacted_and_passed(code, &stderr, &all);
    let received = server.received();
    assert!(received.iter().all(|r| r.status == 200), "{:?}", received.iter().map(|r| r.status).collect::<Vec<_>>());
    let last = received.last().unwrap().body.clone().unwrap();
    let kinds: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .map(|b| b["type"].as_str().unwrap_or("text").to_string())
        .collect();
    assert_eq!(kinds, ["text", "tool_use", "tool_result"], "{last}");
}
