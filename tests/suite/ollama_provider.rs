//! Ollama's native chat API against a local server that rejects what Ollama rejects.

use crate::support::ollama_server::{OllamaServer, Reply};
use dracode_llm::http::{HttpClient, RetryPolicy};
use dracode_llm::ollama::OllamaChat;
use dracode_llm::preset::{ProviderType, ResolvedProvider};
use dracode_llm::{ContentBlock, ErrorKind, LlmRequest, Message, Provider, Role, StopReason, Usage};
use serde_json::json;
use std::time::Duration;

fn resolved(base_url: &str, model: &str) -> ResolvedProvider {
    crate::support::provider::resolved(ProviderType::Ollama, base_url, model, None)
}

fn fast() -> RetryPolicy {
    RetryPolicy {
        max_retries: 1,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(20),
        max_total_wait: Duration::from_secs(1),
    }
}

#[tokio::test]
async fn a_three_turn_tool_conversation_completes_with_exact_usage() {
    let server = OllamaServer::start(
        "qwen2.5-coder",
        vec![
            // The first answer as an older server gives it (calls without ids), the second as a
            // current one (ids given).
            Reply::CallsWithoutIds(vec![("list_files".into(), json!({}))], 100, 10),
            Reply::Calls(vec![("read_file".into(), json!({"file_path": "a"})), ("read_file".into(), json!({"file_path": "b"}))], 150, 20),
            Reply::Text("done".into(), 200, 5),
        ],
    )
    .await;
    let provider = OllamaChat::new(&resolved(&server.base_url(), "qwen2.5-coder"), HttpClient::default()).unwrap();
    let mut messages = vec![Message::user_text("go")];
    let mut usage = Usage::default();
    let noop = |_| {};
    for _ in 0..3 {
        let r = provider.complete(LlmRequest { system: "s", messages: &messages, tools: &[], max_tokens: None }, &noop).await.unwrap();
        usage += r.usage;
        let results: Vec<ContentBlock> = r
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse { id, .. } => {
                    Some(ContentBlock::ToolResult { tool_use_id: id.clone(), content: "ok".into(), is_error: false })
                }
                _ => None,
            })
            .collect();
        let done = r.stop_reason == StopReason::EndTurn;
        messages.push(Message { role: Role::Assistant, content: r.content });
        if done {
            break;
        }
        messages.push(Message { role: Role::User, content: results });
    }
    assert_eq!((usage.input_tokens, usage.output_tokens, usage.requests), (450, 35, 3));
    let last = server.requests().pop().unwrap();
    let tools: Vec<_> = last["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 3);
    assert_eq!(tools[1]["tool_name"], "read_file");
    let ids: Vec<String> = messages.iter().flat_map(Message::tool_use_ids).map(String::from).collect();
    assert_eq!(ids, ["call_1", "call_00000001", "call_00000002"], "made-up ids for the older server, the server's own otherwise");
    let sent: Vec<&str> = tools.iter().map(|t| t["tool_call_id"].as_str().unwrap()).collect();
    assert_eq!(sent, ids, "each result names its call");
    let calls: Vec<&serde_json::Value> =
        last["messages"].as_array().unwrap().iter().flat_map(|m| m["tool_calls"].as_array().into_iter().flatten()).collect();
    assert!(calls.iter().all(|c| c["function"]["arguments"].is_object()));
    assert_eq!(calls[2]["id"], "call_00000002");
}

#[tokio::test]
async fn an_unknown_model_is_a_bad_response_and_a_stopped_server_says_so() {
    let server = OllamaServer::start("qwen2.5-coder", vec![]).await;
    let provider = OllamaChat::new(&resolved(&server.base_url(), "llama9"), HttpClient::default()).unwrap().with_retry_policy(fast());
    let req = LlmRequest { system: "s", messages: &[], tools: &[], max_tokens: None };
    let err = provider.complete(req, &|_| {}).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadResponse);
    assert!(err.message.contains("model 'llama9' not found"), "{}", err.message);
    assert_eq!(server.requests().len(), 1, "404 is not retried");

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let provider = OllamaChat::new(&resolved(&format!("127.0.0.1:{port}"), "m"), HttpClient::default()).unwrap().with_retry_policy(fast());
    let err = provider.complete(req, &|_| {}).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Network);
    assert!(err.message.contains("is `ollama serve` running?"), "{}", err.message);
}

#[tokio::test(flavor = "multi_thread")]
async fn dracode_runs_a_task_against_a_provider_of_type_ollama() {
    let server = OllamaServer::start(
        "qwen2.5-coder",
        vec![
            Reply::Calls(vec![("write_file".into(), json!({"file_path": "hello.txt", "content": "hi\n"}))], 60, 8),
            Reply::Text("done".into(), 90, 3),
        ],
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::fs::write(
        tmp.path().join("dracode.toml"),
        format!(
            "provider = \"local\"\n[providers.local]\ntype = \"ollama\"\nbase_url = \"{}\"\nmodel = \"qwen2.5-coder\"\nmax_tokens = 512\n",
            server.base_url()
        ),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\n[[tasks]]\nid = \"hello\"\nprompt = \"Create hello.txt\"\n",
    )
    .unwrap();
    let dir = tmp.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        crate::support::cli::dracode(&dir).args(["run", "tasks.toml", "--out", "out"]).output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let all = crate::support::cli::read_jsonl(&tmp.path().join("out/results.jsonl"));
    let task = crate::support::cli::finished(&all, "hello");
    assert_eq!(task["status"], "passed");
    assert_eq!((task["usage"]["input_tokens"].as_u64(), task["usage"]["output_tokens"].as_u64()), (Some(150), Some(11)));
    assert!(std::fs::read_to_string(tmp.path().join("out/diffs/hello.patch")).unwrap().contains("+hi"));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r["options"]["num_predict"] == 512 && r["stream"] == true));
    assert_eq!(requests[1]["messages"].as_array().unwrap().last().unwrap()["tool_name"], "write_file");
}
