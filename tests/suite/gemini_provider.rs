//! Gemini generateContent against a local server that rejects what the real API rejects.

use crate::support::gemini_server::{GeminiServer, Reply, validate};
use crate::support::provider::resolved;
use dracode::tools::Registry;
use dracode_llm::gemini::GeminiGenerateContent;
use dracode_llm::http::{HttpClient, RetryPolicy};
use dracode_llm::preset::ProviderType;
use dracode_llm::{ContentBlock, ErrorKind, LlmRequest, Message, Provider, Role, StopReason, Usage};
use serde_json::json;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const KEY: &str = "AIza-test-0123456789";

fn provider(server: &GeminiServer, key: &str) -> GeminiGenerateContent {
    let resolved = resolved(ProviderType::Gemini, &server.base_url(), "gemini-2.5-flash", Some(key));
    let fast = RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        max_total_wait: Duration::from_secs(5),
    };
    GeminiGenerateContent::new(&resolved, HttpClient::default()).unwrap().with_retry_policy(fast)
}

/// Runs the conversation until the model ends its turn, answering every call (one failing).
async fn converse(p: &GeminiGenerateContent) -> (Usage, Vec<Message>) {
    let tools = Registry::all().specs();
    let mut messages = vec![Message::user_text("go")];
    let mut usage = Usage::default();
    for _ in 0..5 {
        let r = p.complete(LlmRequest { system: "s", messages: &messages, tools: &tools, max_tokens: Some(512) }, &|_| {}).await.unwrap();
        usage += r.usage;
        let answers: Vec<ContentBlock> = r
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse { id, name, .. } => Some(ContentBlock::ToolResult {
                    tool_use_id: id.clone(),
                    content: if name == "read_file" { "Error [FILE_NOT_FOUND]: b".into() } else { "ok".into() },
                    is_error: name == "read_file",
                }),
                _ => None,
            })
            .collect();
        let done = r.stop_reason == StopReason::EndTurn;
        messages.push(Message { role: Role::Assistant, content: r.content });
        if done {
            break;
        }
        messages.push(Message { role: Role::User, content: answers });
    }
    (usage, messages)
}

#[tokio::test]
async fn a_three_turn_tool_conversation_completes_with_exact_usage_and_the_key_in_a_header() {
    let server = GeminiServer::start(
        KEY,
        vec![
            Reply::Calls(vec![("list_files".into(), json!({}))], [100, 10, 0, 0]),
            Reply::Calls(
                vec![("read_file".into(), json!({"file_path": "b"})), ("list_files".into(), json!({"recursive": true}))],
                [150, 20, 64, 7],
            ),
            Reply::Text("done".into(), [200, 5, 128, 0]),
        ],
    )
    .await;
    let (usage, messages) = converse(&provider(&server, KEY)).await;
    assert_eq!(messages.last().unwrap().text(), "done");
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens, usage.reasoning_output_tokens, usage.requests),
        (450, 42, 192, 7, 3)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "every request was accepted");
    assert!(requests.iter().all(|(url, _)| url == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" && !url.contains(KEY)));
    let last = &requests[2].1;
    assert_eq!(last["contents"][4]["parts"][0]["functionResponse"]["response"], json!({"error": "Error [FILE_NOT_FOUND]: b"}));
    assert!(validate(last).is_ok());
}

#[tokio::test]
async fn finish_reasons_retries_and_errors_are_typed() {
    let server = GeminiServer::start(
        KEY,
        vec![
            Reply::Finish("SAFETY".into()),
            Reply::Finish("MALFORMED_FUNCTION_CALL".into()),
            Reply::Error(503, "UNAVAILABLE".into(), "The model is overloaded.".into()),
            Reply::Text("ok".into(), [1, 1, 0, 0]),
            Reply::RateLimited(1),
            Reply::Text("ok".into(), [1, 1, 0, 0]),
            Reply::Raw("{not json".into()),
        ],
    )
    .await;
    let p = provider(&server, KEY);
    let req = LlmRequest { system: "s", messages: &[], tools: &[], max_tokens: None };
    let notices = Mutex::new(Vec::new());
    let record = |n: dracode_llm::RetryNotice| notices.lock().unwrap().push(n.reason);
    assert_eq!(p.complete(req, &record).await.unwrap().stop_reason, StopReason::ContentFilter);
    assert_eq!(p.complete(req, &record).await.unwrap().stop_reason, StopReason::MalformedToolCall);
    assert_eq!(p.complete(req, &record).await.unwrap().stop_reason, StopReason::EndTurn);
    assert_eq!(notices.lock().unwrap().as_slice(), ["503"]);
    let started = Instant::now();
    p.complete(req, &record).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(900), "Retry-After: 1 was honoured");
    assert_eq!(p.complete(req, &record).await.unwrap_err().kind, ErrorKind::BadResponse);

    let bad_key = provider(&server, "wrong-key-123456");
    let before = server.requests().len();
    let err = bad_key.complete(req, &|_| {}).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Auth, "{}", err.message);
    assert_eq!(server.requests().len(), before + 1, "not retried");
    assert!(!err.message.contains("wrong-key-123456"));
}

#[test]
fn the_mock_rejects_unanswered_calls_and_unsupported_schema_keywords() {
    let unanswered = json!({"contents": [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "a", "args": {}}}, {"functionCall": {"name": "b", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "a", "response": {"output": "x"}}}]}
    ]});
    assert!(validate(&unanswered).unwrap_err().contains("function response turn comes immediately after"));
    let schema = json!({"contents": [{"role": "user", "parts": [{"text": "go"}]}],
        "tools": [{"functionDeclarations": [{"name": "a", "parameters": {"type": "object", "additionalProperties": false}}]}]});
    assert!(validate(&schema).unwrap_err().contains("Unknown name \"additionalProperties\""));
    let role = json!({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]});
    assert!(validate(&role).is_err());
}
