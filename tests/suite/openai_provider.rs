//! OpenAI provider scenarios: `ChatCompletions` against the strict local mock of the API.

use crate::support::openai_server::{
    LLAMA_CPP_NULL_CONTENT, OpenAiServer, ScriptedReply, Tokens, ToolCall, validate_request, validate_response,
};
use crate::support::provider::{fast_retries, resolved};
use dracode::tools::Registry;
use dracode_llm::http::HttpClient;
use dracode_llm::openai::{AZURE_API_VERSION, ChatCompletions};
use dracode_llm::preset::ProviderType;
use dracode_llm::{
    ContentBlock, ErrorKind, LlmError, LlmRequest, LlmResponse, Message, Provider, RetryNotice, Role, StopReason, ToolSpec, Usage,
};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const KEY: &str = "sk-test-mock-0123456789";

fn provider(server: &OpenAiServer, key: &str) -> ChatCompletions {
    ChatCompletions::new(&resolved(ProviderType::Openai, &server.base_url(), "gpt-4o", Some(key)), HttpClient::default())
        .expect("provider builds")
        .with_retry_policy(fast_retries())
}

/// Sends one request, collecting the retry notices.
async fn complete(
    provider: &ChatCompletions,
    messages: &[Message],
    tools: &[ToolSpec],
) -> (Result<LlmResponse, LlmError>, Vec<RetryNotice>) {
    let notices = Mutex::new(Vec::new());
    let on_retry = |notice: RetryNotice| notices.lock().unwrap().push(notice);
    let request = LlmRequest { system: "You are a coding agent.", messages, tools, max_tokens: Some(1024) };
    let result = provider.complete(request, &on_retry).await;
    (result, notices.into_inner().unwrap())
}

fn hello() -> Vec<Message> {
    vec![Message::user_text("Say hello")]
}

#[tokio::test]
async fn a_three_turn_tool_conversation_completes_with_exact_usage() {
    let server = OpenAiServer::start_with_key(
        KEY,
        vec![
            ScriptedReply::tool_call("call_1", "read_file", json!({"file_path": "src/lib.rs"}), Tokens::new(120, 20).cached(64)),
            ScriptedReply::tool_calls(
                vec![
                    ToolCall::new("call_2", "list_files", json!({"directory": "src"})),
                    ToolCall::new("call_3", "search_code", json!({"pattern": "fn main"})),
                ],
                Tokens::new(180, 35).reasoning(12),
            ),
            ScriptedReply::text("All done.", Tokens::new(260, 9)),
        ],
    )
    .await;
    let provider = provider(&server, KEY);
    let tools = Registry::all().specs();
    let mut messages = vec![Message::user_text("Find the entry point")];
    let mut usage = Usage::default();
    let mut stops = Vec::new();
    loop {
        let (result, notices) = complete(&provider, &messages, &tools).await;
        let response = result.expect("every turn succeeds");
        assert!(notices.is_empty());
        usage += response.usage;
        stops.push(response.stop_reason.clone());
        let results: Vec<ContentBlock> = response
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { id, name, .. } => {
                    Some(ContentBlock::ToolResult { tool_use_id: id.clone(), content: format!("output of {name}"), is_error: false })
                }
                _ => None,
            })
            .collect();
        messages.push(Message { role: Role::Assistant, content: response.content });
        if results.is_empty() {
            break;
        }
        messages.push(Message { role: Role::User, content: results });
    }

    assert_eq!(stops, [StopReason::ToolUse, StopReason::ToolUse, StopReason::EndTurn]);
    assert_eq!(messages.last().unwrap().text(), "All done.");
    assert_eq!(
        usage,
        Usage {
            input_tokens: 120 + 180 + 260,
            cached_input_tokens: 64,
            cache_creation_input_tokens: 0,
            output_tokens: 20 + 35 + 9,
            reasoning_output_tokens: 12,
            total_tokens: 120 + 180 + 260 + 20 + 35 + 9,
            requests: 3,
        }
    );
    let received = server.received();
    assert_eq!(received.iter().map(|r| r.status).collect::<Vec<_>>(), [200, 200, 200]);
    assert!(received.iter().all(|r| r.headers["authorization"] == format!("Bearer {KEY}")));
    let last = &server.requests()[2];
    let roles: Vec<&str> = last["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant", "tool", "tool"]);
    assert_eq!(last["messages"][4]["tool_calls"][1]["function"]["arguments"], r#"{"pattern":"fn main"}"#);
    assert_eq!(last["messages"][6]["tool_call_id"], "call_3");
    assert_eq!(last["max_completion_tokens"], 1024);
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn request_bodies_pass_the_official_schema() {
    let messages = vec![
        Message::user_text("Fix it"),
        Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::text("Reading first."),
                ContentBlock::ToolUse { id: "call_a".into(), name: "read_file".into(), input: json!({"file_path": "a"}) },
                ContentBlock::ToolUse { id: "call_b".into(), name: "list_files".into(), input: Value::String("{bad".into()) },
            ],
        },
        Message {
            role: Role::User,
            content: vec![
                ContentBlock::ToolResult { tool_use_id: "call_a".into(), content: "text".into(), is_error: false },
                ContentBlock::ToolResult { tool_use_id: "call_b".into(), content: "Error [INVALID_ARGUMENTS]: x".into(), is_error: true },
                ContentBlock::text("Please hurry."),
            ],
        },
    ];
    let tools = Registry::all().specs();
    for kind in [ProviderType::Openai, ProviderType::Vllm, ProviderType::Copilot, ProviderType::Zai] {
        let request = LlmRequest { system: "sys", messages: &messages, tools: &tools, max_tokens: Some(100) };
        let body = dracode_llm::openai::request_body(kind, "gpt-4o", &request);
        assert_eq!(validate_request(&body), Ok(()), "{kind:?}: {body:#}");
        let no_tools = LlmRequest { tools: &[], max_tokens: None, ..request };
        let body = dracode_llm::openai::request_body(kind, "gpt-4o", &no_tools);
        assert_eq!(validate_request(&body), Ok(()), "{kind:?}: {body:#}");
    }
}

#[tokio::test]
async fn a_refused_key_is_an_auth_error_and_not_retried() {
    let server = OpenAiServer::start_with_key(KEY, vec![ScriptedReply::text("never", Tokens::new(1, 1))]).await;
    let wrong = "sk-wrong-key-9876543210";
    let (result, notices) = complete(&provider(&server, wrong), &hello(), &[]).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Auth);
    assert_eq!(err.http_status, Some(401));
    assert!(err.message.contains("Incorrect API key provided"), "{}", err.message);
    assert!(!err.message.contains(wrong), "the key never appears: {}", err.message);
    assert!(notices.is_empty());
    assert_eq!(server.received().len(), 1);
    assert_eq!(server.remaining(), 1);
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let server = OpenAiServer::start(vec![
        ScriptedReply::server_error(),
        ScriptedReply::server_error(),
        ScriptedReply::text("recovered", Tokens::new(10, 2)),
    ])
    .await;
    let (result, notices) = complete(&provider(&server, KEY), &hello(), &[]).await;
    let response = result.expect("third try succeeds");
    assert_eq!(response.content, vec![ContentBlock::text("recovered")]);
    assert_eq!(response.usage.requests, 1, "retries of one call count as one request");
    assert_eq!(notices.iter().map(|n| (n.reason.as_str(), n.attempt)).collect::<Vec<_>>(), [("500", 2), ("500", 3)]);
    assert!(notices.iter().all(|n| n.delay <= Duration::from_millis(100)));
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn a_rate_limit_waits_as_long_as_retry_after_says() {
    let server = OpenAiServer::start(vec![ScriptedReply::rate_limited(1), ScriptedReply::text("ok", Tokens::new(5, 1))]).await;
    let started = Instant::now();
    let (result, notices) = complete(&provider(&server, KEY), &hello(), &[]).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(started.elapsed() >= Duration::from_millis(900), "waited only {:?}", started.elapsed());
    assert_eq!(notices, [RetryNotice { reason: "429".into(), delay: Duration::from_secs(1), attempt: 2 }]);
}

#[tokio::test]
async fn a_retry_after_beyond_the_budget_fails_at_once() {
    let server = OpenAiServer::start(vec![ScriptedReply::rate_limited(3600)]).await;
    let started = Instant::now();
    let (result, notices) = complete(&provider(&server, KEY), &hello(), &[]).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ErrorKind::RateLimit);
    assert_eq!(err.retry_after, Some(Duration::from_secs(3600)));
    assert!(notices.is_empty());
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_garbage_body_is_a_bad_response() {
    let server = OpenAiServer::start(vec![ScriptedReply::raw(200, r#"{"id":"chatcmpl-1","choices":[{"#)]).await;
    let (result, notices) = complete(&provider(&server, KEY), &hello(), &[]).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadResponse);
    assert_eq!(err.http_status, Some(200));
    assert!(err.message.contains(r#"{"id":"chatcmpl-1","choices":[{"#), "{}", err.message);
    assert!(notices.is_empty());
}

#[tokio::test]
async fn insufficient_quota_is_quota_and_not_retried() {
    let server = OpenAiServer::start(vec![ScriptedReply::insufficient_quota(), ScriptedReply::text("never", Tokens::new(1, 1))]).await;
    let (result, notices) = complete(&provider(&server, KEY), &hello(), &[]).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Quota);
    assert!(err.message.contains("You exceeded your current quota"), "{}", err.message);
    assert!(notices.is_empty());
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn azure_uses_the_deployment_url_and_api_key_header() {
    let server = OpenAiServer::start_azure(KEY, vec![ScriptedReply::text("hi from azure", Tokens::new(7, 3))]).await;
    let settings = resolved(ProviderType::Azure, &format!("{}/", server.base_url()), "my-deployment", Some(KEY));
    let provider = ChatCompletions::new(&settings, HttpClient::default()).unwrap().with_retry_policy(fast_retries());
    let (result, _) = complete(&provider, &hello(), &[]).await;
    assert_eq!(result.expect("azure answers").content, vec![ContentBlock::text("hi from azure")]);
    let request = &server.received()[0];
    assert_eq!(request.path, "/openai/deployments/my-deployment/chat/completions");
    assert_eq!(request.query.as_deref(), Some(format!("api-version={AZURE_API_VERSION}").as_str()));
    assert_eq!(request.headers["api-key"], KEY);
    assert!(!request.headers.contains_key("authorization"));
    let body = request.body.as_ref().unwrap();
    assert!(body.get("model").is_none());
    assert_eq!(body["max_completion_tokens"], 1024);
}

/// Posts `body` straight to the mock, as a client that gets the format wrong would.
async fn post(server: &OpenAiServer, auth: Option<&str>, body: &str) -> (u16, Value) {
    let mut request = HttpClient::default()
        .get()
        .post(format!("{}/chat/completions", server.base_url()))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(key) = auth {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn the_mock_rejects_what_the_real_api_rejects() {
    let server = OpenAiServer::start_with_key(KEY, vec![ScriptedReply::text("fine", Tokens::new(3, 1))]).await;
    let call = json!({"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}});
    let call_b = json!({"id": "call_b", "type": "function", "function": {"name": "list_files", "arguments": "{}"}});
    let unanswered = json!({"model": "gpt-4o", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [call, call_b]},
        {"role": "tool", "tool_call_id": "call_a", "content": "ok"},
        {"role": "user", "content": "and?"}
    ]});
    let (status, body) = post(&server, Some(KEY), &unanswered.to_string()).await;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"]["message"],
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_b"
    );
    assert_eq!(body["error"]["type"], "invalid_request_error");

    let cases = [
        (
            json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "call_z", "content": "x"}]}),
            "messages.[1].role",
        ),
        (
            json!({"model": "gpt-4o", "messages": [
            {"role": "assistant", "content": null, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_zzz", "content": "x"}]}),
            "messages.[1].tool_call_id",
        ),
        (json!({"model": "gpt-4o", "messages": [{"role": "bot", "content": "go"}]}), "messages[0].role"),
        (json!({"model": "gpt-4o", "messages": [{"role": "user", "content": 42}]}), "messages[0].content"),
        (json!({"model": "gpt-4o", "messages": []}), "messages"),
        (json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "go"}], "tools": []}), "tools"),
        (json!({"messages": [{"role": "user", "content": "go"}]}), "model"),
    ];
    for (request, param) in cases {
        let (status, body) = post(&server, Some(KEY), &request.to_string()).await;
        assert_eq!(status, 400, "{request}: {body}");
        assert_eq!(body["error"]["param"], param, "{request}: {body}");
    }
    let (status, body) = post(&server, Some(KEY), r#"{"model":"gpt-4o","messages":[{"role":"user","content":"go"}],"max_tokns":5}"#).await;
    assert_eq!((status, body["error"]["message"].as_str().unwrap()), (400, "Unrecognized request argument supplied: max_tokns"));
    let (status, _) = post(&server, Some(KEY), "{not json").await;
    assert_eq!(status, 400);
    let (status, body) = post(&server, None, r#"{"model":"gpt-4o","messages":[{"role":"user","content":"go"}]}"#).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(server.remaining(), 1, "rejected requests do not use the script");

    let valid = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"go"}]}"#;
    let (status, body) = post(&server, Some(KEY), valid).await;
    assert_eq!(status, 200);
    assert_eq!(validate_response(&body), Ok(()), "the mock's own replies follow the spec");
    let (status, body) = post(&server, Some(KEY), valid).await;
    assert_eq!(status, 500);
    assert!(body["error"]["message"].as_str().unwrap().contains("script exhausted"), "{body}");
}

#[test]
fn the_mock_accepts_nulls_where_the_spec_says_nullable() {
    // `max_completion_tokens` and `stream` are `nullable: true` in the spec (OpenAPI 3.0 style):
    // accepted only because the mock rewrites `nullable` for the JSON Schema validator.
    let body = json!({
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "go"}],
        "max_completion_tokens": null,
        "stream": null,
    });
    assert_eq!(validate_request(&body), Ok(()));
    let wrong = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "go"}], "max_completion_tokens": "ten"});
    assert_eq!(validate_request(&wrong).unwrap_err().param.as_deref(), Some("max_completion_tokens"));
}

#[tokio::test]
async fn scripted_replies_follow_the_response_schema() {
    let server = OpenAiServer::start(vec![
        ScriptedReply::tool_calls(
            vec![ToolCall::new("call_1", "read_file", json!({"file_path": "a"})), ToolCall::raw("call_2", "x", "{oops")],
            Tokens::new(10, 5).cached(2).reasoning(1),
        )
        .with_text("Let me look."),
        ScriptedReply::text("cut", Tokens::new(1, 1)).with_finish_reason("length").without_usage(),
    ])
    .await;
    let valid = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"go"}]}"#;
    for _ in 0..2 {
        let (status, body) = post(&server, None, valid).await;
        assert_eq!(status, 200);
        assert_eq!(validate_response(&body), Ok(()), "{body}");
    }
}

/// A provider of type `kind` (no key) at `server`.
fn local_provider(server: &OpenAiServer, kind: ProviderType) -> ChatCompletions {
    ChatCompletions::new(&resolved(kind, &server.base_url(), "qwen2.5-coder", None), HttpClient::default())
        .expect("provider builds")
        .with_retry_policy(fast_retries())
}

/// Plays a tool conversation against `provider` until a text answer, answering every call;
/// the retry notices of all turns.
async fn converse(provider: &ChatCompletions) -> (Vec<Message>, Vec<RetryNotice>) {
    let tools = Registry::all().specs();
    let mut messages = vec![Message::user_text("Find the entry point")];
    let mut all_notices = Vec::new();
    loop {
        let (result, notices) = complete(provider, &messages, &tools).await;
        all_notices.extend(notices);
        let response = result.expect("every turn succeeds");
        let results: Vec<ContentBlock> = response
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse { id, .. } => {
                    Some(ContentBlock::ToolResult { tool_use_id: id.clone(), content: "ok".into(), is_error: false })
                }
                _ => None,
            })
            .collect();
        messages.push(Message { role: Role::Assistant, content: response.content });
        if results.is_empty() {
            return (messages, all_notices);
        }
        messages.push(Message { role: Role::User, content: results });
    }
}

/// The assistant messages of a request body.
fn assistant_turns(body: &Value) -> Vec<Value> {
    body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").cloned().collect()
}

#[tokio::test]
async fn the_llamacpp_preset_sends_empty_content_beside_tool_calls() {
    let server = OpenAiServer::start_llama_cpp_python(vec![
        ScriptedReply::tool_call("call_1", "read_file", json!({"file_path": "src/lib.rs"}), Tokens::new(30, 5)),
        ScriptedReply::text("Done.", Tokens::new(40, 2)),
    ])
    .await;
    let (messages, notices) = converse(&local_provider(&server, ProviderType::Llamacpp)).await;
    assert_eq!(messages.last().unwrap().text(), "Done.");
    assert!(notices.is_empty(), "{notices:?}");
    let received = server.received();
    // The first request streams and gets llama-cpp-python's empty 200; it is sent again
    // unstreamed at once, and so is every later one.
    assert_eq!(received.iter().map(|r| r.status).collect::<Vec<_>>(), [200, 200, 200], "no request refused");
    let streamed: Vec<bool> = received.iter().map(|r| r.body.as_ref().unwrap().get("stream").is_some()).collect();
    assert_eq!(streamed, [true, false, false]);
    let turns = assistant_turns(received[2].body.as_ref().unwrap());
    assert_eq!(turns[0]["content"], "", "{turns:?}");
    assert_eq!(turns[0]["tool_calls"][0]["id"], "call_1");
}

#[tokio::test]
async fn the_mock_refuses_null_content_as_llama_cpp_python_does() {
    let server = OpenAiServer::start_llama_cpp_python(vec![]).await;
    let body = json!({"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"}
    ]});
    let (status, answer) = post(&server, None, &body.to_string()).await;
    assert_eq!(status, 500);
    assert_eq!(answer, json!({"error": {"message": LLAMA_CPP_NULL_CONTENT, "type": "internal_server_error", "param": null, "code": null}}));
}

#[tokio::test]
async fn the_openai_type_resends_a_refused_null_content_once_and_remembers() {
    let server = OpenAiServer::start_llama_cpp_python(vec![
        ScriptedReply::tool_call("call_1", "read_file", json!({"file_path": "src/lib.rs"}), Tokens::new(30, 5)),
        ScriptedReply::tool_call("call_2", "list_files", json!({}), Tokens::new(40, 5)),
        ScriptedReply::text("Done.", Tokens::new(50, 2)),
    ])
    .await;
    let (messages, notices) = converse(&local_provider(&server, ProviderType::Openai)).await;
    assert_eq!(messages.last().unwrap().text(), "Done.");
    assert!(notices.is_empty(), "the resend is not a transient retry: {notices:?}");
    let received = server.received();
    // Turn 1 streamed (an empty 200) then unstreamed; turn 2 with `null` (500) and at once
    // with `""`; turn 3 with `""` straight away.
    assert_eq!(received.iter().map(|r| r.status).collect::<Vec<_>>(), [200, 200, 500, 200, 200]);
    let refused = received[2].body.clone().unwrap();
    let resent = received[3].body.clone().unwrap();
    assert_eq!(assistant_turns(&refused)[0]["content"], Value::Null, "the openai type sends null first");
    let mut expected = refused.clone();
    expected["messages"][2]["content"] = json!("");
    assert_eq!(resent, expected, "the same request, content \"\" instead of null");
    let last = assistant_turns(received[4].body.as_ref().unwrap());
    assert_eq!(last.iter().map(|m| m["content"].clone()).collect::<Vec<_>>(), [json!(""), json!("")]);
}

#[tokio::test]
async fn the_openai_preset_still_sends_null_to_the_real_api() {
    let server = OpenAiServer::start(vec![
        ScriptedReply::tool_call("call_1", "list_files", json!({}), Tokens::new(30, 5)),
        ScriptedReply::text("Done.", Tokens::new(40, 2)),
    ])
    .await;
    converse(&provider(&server, KEY)).await;
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(assistant_turns(&requests[1])[0]["content"], Value::Null);
}

#[tokio::test]
async fn validation_errors_are_not_retried() {
    let pydantic = json!({"detail": [{
        "type": "string_type",
        "loc": ["body", "messages", 1, "content"],
        "msg": "Input should be a valid string",
        "input": null
    }]});
    let cases = [
        (ScriptedReply::json(422, pydantic.clone()), "body.messages.1.content: Input should be a valid string"),
        (ScriptedReply::json(500, pydantic), "body.messages.1.content: Input should be a valid string"),
        (
            ScriptedReply::error(500, "internal_server_error", None, "1 validation error for CreateChatCompletionRequest"),
            "1 validation error",
        ),
        (ScriptedReply::error(503, "invalid_request_error", None, "messages[1].content is invalid"), "is invalid"),
        (ScriptedReply::error(400, "invalid_request_error", None, "Invalid value for 'content'"), "Invalid value"),
    ];
    for (reply, says) in cases {
        let server = OpenAiServer::start(vec![reply, ScriptedReply::text("never", Tokens::new(1, 1))]).await;
        let (result, notices) = complete(&provider(&server, KEY), &hello(), &[]).await;
        let err = result.unwrap_err();
        assert_eq!(err.kind, ErrorKind::BadResponse, "{err:?}");
        assert!(err.message.contains(says), "{}", err.message);
        assert!(notices.is_empty(), "{notices:?}");
        assert_eq!(server.received().len(), 1, "{says}: sent once");
    }
}

#[tokio::test]
async fn empty_and_repeated_tool_call_ids_are_made_unique() {
    let server = OpenAiServer::start(vec![
        ScriptedReply::tool_calls(
            vec![ToolCall::new("", "list_files", json!({})), ToolCall::new("", "read_file", json!({"file_path": "a"}))],
            Tokens::new(30, 5),
        ),
        ScriptedReply::tool_calls(
            vec![ToolCall::new("same", "list_files", json!({})), ToolCall::new("same", "read_file", json!({"file_path": "b"}))],
            Tokens::new(40, 5),
        ),
        ScriptedReply::tool_call("same", "list_files", json!({}), Tokens::new(50, 5)),
        ScriptedReply::text("Done.", Tokens::new(60, 2)),
    ])
    .await;
    let (messages, _) = converse(&provider(&server, KEY)).await;
    assert_eq!(messages.last().unwrap().text(), "Done.");
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "every request accepted");
    let last = &requests[3];
    let ids: Vec<String> = assistant_turns(last)
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().unwrap().clone())
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 5);
    assert!(ids.iter().all(|id| !id.is_empty()), "{ids:?}");
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), 5, "{ids:?}");
    assert_eq!(ids[2], "same", "a first use of an id is kept");
    let answered: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(answered, ids, "each result answers its own call");
}

#[tokio::test]
async fn an_empty_200_body_is_a_bad_response_and_retried() {
    let server = OpenAiServer::start(vec![ScriptedReply::raw(200, ""), ScriptedReply::text("ok", Tokens::new(5, 1))]).await;
    let (result, notices) = complete(&provider(&server, KEY), &hello(), &[]).await;
    assert_eq!(result.expect("the second try answers").content, vec![ContentBlock::text("ok")]);
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(server.received().len(), 2);

    let server = OpenAiServer::start(vec![ScriptedReply::raw(200, ""); 4]).await;
    let (result, notices) = complete(&provider(&server, KEY), &hello(), &[]).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadResponse);
    assert_eq!(err.http_status, Some(200));
    assert!(err.message.contains("HTTP 200 with an empty body"), "{}", err.message);
    assert_eq!(notices.len(), 3);
    assert_eq!(server.received().len(), 4);
}
