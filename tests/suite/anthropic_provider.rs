//! Anthropic provider scenarios: `AnthropicMessages` against the strict local mock of the
//! Messages API, then the real binary with an `anthropic` (and `claude`) provider.

use crate::support::anthropic_server::{AnthropicServer, ScriptedReply, Tokens, ToolUse, validate_request, validate_response};
use crate::support::cli::{dracode, events, finished, git_repo, read_jsonl};
use crate::support::provider::{fast_retries, resolved};
use dracode::tools::Registry;
use dracode_llm::anthropic::{ANTHROPIC_VERSION, AnthropicMessages, DEFAULT_MAX_TOKENS, request_body};
use dracode_llm::http::HttpClient;
use dracode_llm::preset::ProviderType;
use dracode_llm::{
    ContentBlock, ErrorKind, LlmError, LlmRequest, LlmResponse, Message, Provider, RetryNotice, Role, StopReason, ToolSpec, Usage,
};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const KEY: &str = "sk-ant-test-mock-0123456789";

fn provider(server: &AnthropicServer, key: &str) -> AnthropicMessages {
    AnthropicMessages::new(&resolved(ProviderType::Anthropic, &server.base_url(), "claude-sonnet-4-5", Some(key)), HttpClient::default())
        .expect("provider builds")
        .with_retry_policy(fast_retries())
}

/// Sends one request (limit 1024 tokens), collecting the retry notices.
async fn complete(
    provider: &AnthropicMessages,
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

fn block_types(message: &Value) -> Vec<&str> {
    message["content"].as_array().unwrap().iter().map(|b| b["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_three_turn_tool_conversation_completes_with_normalised_usage() {
    let server = AnthropicServer::start_with_key(
        KEY,
        vec![
            ScriptedReply::tool_use("toolu_01", "read_file", json!({"file_path": "src/lib.rs"}), Tokens::new(120, 20).cache_creation(2000)),
            ScriptedReply::tool_uses(
                vec![
                    ToolUse::new("toolu_02", "list_files", json!({"directory": "src"})),
                    ToolUse::new("toolu_03", "search_code", json!({"pattern": "fn main"})),
                ],
                Tokens::new(180, 35).cache_read(2000).cache_creation(150),
            )
            .with_text("Two more looks.")
            .with_thinking("The entry point is probably in src."),
            ScriptedReply::text("All done.", Tokens::new(60, 9).cache_read(2150)),
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
                ContentBlock::ToolUse { id, name, .. } => Some(ContentBlock::ToolResult {
                    tool_use_id: id.clone(),
                    content: if name == "search_code" { "Error [NO_MATCHES]: nothing".into() } else { format!("output of {name}") },
                    is_error: name == "search_code",
                }),
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
    // The API's input_tokens leaves out cache reads and writes; the sum puts them back.
    assert_eq!(
        usage,
        Usage {
            input_tokens: (120 + 2000) + (180 + 2000 + 150) + (60 + 2150),
            cached_input_tokens: 2000 + 2150,
            cache_creation_input_tokens: 2000 + 150,
            output_tokens: 20 + 35 + 9,
            reasoning_output_tokens: 0,
            total_tokens: 6660 + 64,
            requests: 3,
        }
    );
    let received = server.received();
    assert_eq!(received.iter().map(|r| r.status).collect::<Vec<_>>(), [200, 200, 200]);
    for request in &received {
        assert_eq!(request.path, "/v1/messages");
        assert_eq!(request.headers["x-api-key"], KEY);
        assert_eq!(request.headers["anthropic-version"], ANTHROPIC_VERSION);
        assert_eq!(request.headers["content-type"], "application/json");
        assert!(!request.headers.contains_key("authorization"));
    }
    let last = &server.requests()[2];
    assert_eq!(last["max_tokens"], 1024);
    assert_eq!(last["system"][0]["text"], "You are a coding agent.");
    let wire = last["messages"].as_array().unwrap();
    let roles: Vec<&str> = wire.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    assert_eq!(block_types(&wire[3]), ["thinking", "text", "tool_use", "tool_use"], "the thinking block goes back first");
    assert_eq!(block_types(&wire[4]), ["tool_result", "tool_result"]);
    assert_eq!(wire[4]["content"][1]["tool_use_id"], "toolu_03");
    assert_eq!(wire[4]["content"][1]["is_error"], true, "a failed tool is sent with is_error");
    assert!(wire[4]["content"][0].get("is_error").is_none());
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn cache_marks_sit_on_the_system_prompt_and_the_last_tool_and_can_be_turned_off() {
    let server = AnthropicServer::start(vec![
        ScriptedReply::text("hi", Tokens::new(5, 1).cache_creation(3000)),
        ScriptedReply::text("hi again", Tokens::new(5, 1).cache_read(3000)),
    ])
    .await;
    let tools = Registry::all().specs();
    assert!(tools.len() > 1);
    let (result, _) = complete(&provider(&server, KEY), &hello(), &tools).await;
    let usage = result.unwrap().usage;
    assert_eq!((usage.input_tokens, usage.cache_creation_input_tokens), (3005, 3000));
    let body = &server.requests()[0];
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(body["system"][0]["cache_control"], ephemeral);
    let sent_tools = body["tools"].as_array().unwrap();
    assert_eq!(sent_tools.len(), tools.len());
    assert_eq!(sent_tools.last().unwrap()["cache_control"], ephemeral);
    assert!(sent_tools[..sent_tools.len() - 1].iter().all(|t| t.get("cache_control").is_none()));
    assert_eq!(body["messages"][0]["content"][0]["cache_control"], ephemeral, "the conversation is cached too");

    let uncached = provider(&server, KEY).with_prompt_caching(false);
    let (result, _) = complete(&uncached, &hello(), &tools).await;
    assert_eq!(result.unwrap().usage.cached_input_tokens, 3000);
    assert!(!server.requests()[1].to_string().contains("cache_control"));
}

#[tokio::test]
async fn max_tokens_is_always_sent() {
    let server =
        AnthropicServer::start(vec![ScriptedReply::text("a", Tokens::new(1, 1)), ScriptedReply::text("b", Tokens::new(1, 1))]).await;
    async fn no_limit(provider: &AnthropicMessages) {
        let messages = hello();
        let request = LlmRequest { system: "", messages: &messages, tools: &[], max_tokens: None };
        provider.complete(request, &|_| {}).await.expect("accepted");
    }
    no_limit(&provider(&server, KEY)).await;
    let mut settings = resolved(ProviderType::Anthropic, &server.base_url(), "claude-sonnet-4-5", Some(KEY));
    settings.max_tokens = Some(2048);
    no_limit(&AnthropicMessages::new(&settings, HttpClient::default()).unwrap()).await;
    let bodies = server.requests();
    assert_eq!(bodies[0]["max_tokens"], DEFAULT_MAX_TOKENS);
    assert_eq!(bodies[1]["max_tokens"], 2048);
    assert!(bodies[0].get("system").is_none(), "an empty system prompt is not sent");
}

#[tokio::test]
async fn a_refused_key_is_an_auth_error_and_not_retried() {
    let server = AnthropicServer::start_with_key(KEY, vec![ScriptedReply::text("never", Tokens::new(1, 1))]).await;
    let wrong = "sk-ant-wrong-key-9876543210";
    let (result, notices) = complete(&provider(&server, wrong), &hello(), &[]).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Auth);
    assert_eq!(err.http_status, Some(401));
    assert!(err.message.contains("invalid x-api-key (type authentication_error)"), "{}", err.message);
    assert!(!err.message.contains(wrong), "the key never appears: {}", err.message);
    assert!(notices.is_empty());
    assert_eq!(server.received().len(), 1);
    assert_eq!(server.remaining(), 1);
}

#[tokio::test]
async fn a_permission_error_is_auth_and_a_spend_cap_is_quota() {
    let server = AnthropicServer::start(vec![
        ScriptedReply::error(403, "permission_error", "Your API key does not have permission to use the specified resource."),
        ScriptedReply::json(
            429,
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "You have reached your usage tier's monthly spend limit.", "details": {"error_code": "enforced_spend_limit_reached"}}}),
        ),
        ScriptedReply::text("never", Tokens::new(1, 1)),
    ])
    .await;
    let provider = provider(&server, KEY);
    let (result, notices) = complete(&provider, &hello(), &[]).await;
    let err = result.unwrap_err();
    assert_eq!((err.kind, err.http_status), (ErrorKind::Auth, Some(403)));
    assert!(err.message.contains("does not have permission"), "{}", err.message);
    assert!(notices.is_empty());
    let (result, notices) = complete(&provider, &hello(), &[]).await;
    assert_eq!(result.unwrap_err().kind, ErrorKind::Quota);
    assert!(notices.is_empty(), "a spend cap is not waited out");
    assert_eq!(server.remaining(), 1);
}

#[tokio::test]
async fn an_overloaded_api_is_retried_once_then_answers() {
    let server = AnthropicServer::start(vec![ScriptedReply::overloaded(), ScriptedReply::text("recovered", Tokens::new(10, 2))]).await;
    let (result, notices) = complete(&provider(&server, KEY), &hello(), &[]).await;
    let response = result.expect("second try succeeds");
    assert_eq!(response.content, vec![ContentBlock::text("recovered")]);
    assert_eq!(response.usage.requests, 1, "retries of one call count as one request");
    assert_eq!(notices.iter().map(|n| (n.reason.as_str(), n.attempt)).collect::<Vec<_>>(), [("529", 2)]);
    assert!(notices[0].delay <= Duration::from_millis(100));
    assert_eq!(server.received().iter().map(|r| r.status).collect::<Vec<_>>(), [529, 200]);
}

#[tokio::test]
async fn a_rate_limit_waits_as_long_as_retry_after_says() {
    let server = AnthropicServer::start(vec![ScriptedReply::rate_limited(1), ScriptedReply::text("ok", Tokens::new(5, 1))]).await;
    let started = Instant::now();
    let (result, notices) = complete(&provider(&server, KEY), &hello(), &[]).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(started.elapsed() >= Duration::from_millis(900), "waited only {:?}", started.elapsed());
    assert_eq!(notices, [RetryNotice { reason: "429".into(), delay: Duration::from_secs(1), attempt: 2 }]);
}

#[tokio::test]
async fn a_garbage_body_is_a_bad_response() {
    let server = AnthropicServer::start(vec![ScriptedReply::raw(200, r#"{"id":"msg_01","type":"message","content":[{"#)]).await;
    let (result, notices) = complete(&provider(&server, KEY), &hello(), &[]).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadResponse);
    assert_eq!(err.http_status, Some(200));
    assert!(err.message.contains(r#"{"id":"msg_01","type":"message","content":[{"#), "{}", err.message);
    assert!(notices.is_empty());
}

#[tokio::test]
async fn an_invalid_request_is_a_bad_response_with_the_api_message() {
    let server = AnthropicServer::start(vec![
        ScriptedReply::error(400, "invalid_request_error", "prompt is too long: 212000 tokens > 200000 maximum"),
        ScriptedReply::text("never", Tokens::new(1, 1)),
    ])
    .await;
    let (result, notices) = complete(&provider(&server, KEY), &hello(), &[]).await;
    let err = result.unwrap_err();
    assert_eq!((err.kind, err.http_status), (ErrorKind::BadResponse, Some(400)));
    assert!(err.message.contains("prompt is too long: 212000 tokens > 200000 maximum"), "{}", err.message);
    assert!(err.message.starts_with("provider \"anthropic\": HTTP 400"), "{}", err.message);
    assert!(notices.is_empty());
    assert_eq!(server.remaining(), 1);
}

#[test]
fn request_bodies_of_awkward_conversations_pass_the_mock() {
    let tool_use = |id: &str| ContentBlock::ToolUse { id: id.into(), name: "list_files".into(), input: json!({}) };
    let result = |id: &str, is_error| ContentBlock::ToolResult { tool_use_id: id.into(), content: String::new(), is_error };
    let messages = vec![
        Message::user_text("Fix it"),
        Message::user_text("   "),
        Message { role: Role::Assistant, content: vec![ContentBlock::text(""), tool_use("toolu_a"), tool_use("toolu_b")] },
        Message { role: Role::User, content: vec![ContentBlock::text("Results:"), result("toolu_b", true), result("toolu_a", false)] },
        Message { role: Role::Assistant, content: vec![ContentBlock::text("\n")] },
        Message::user_text("Continue."),
        Message { role: Role::Assistant, content: vec![ContentBlock::text("Done.")] },
        Message { role: Role::Assistant, content: vec![tool_use("toolu_c")] },
        Message { role: Role::User, content: vec![result("toolu_c", false)] },
    ];
    let tools = Registry::all().specs();
    for (tools, system) in [(&tools[..], "sys"), (&[][..], "")] {
        for caching in [true, false] {
            let request = LlmRequest { system, messages: &messages, tools, max_tokens: None };
            let body = request_body("claude-sonnet-4-5", &request, caching);
            assert_eq!(validate_request(&body), Ok(()), "{body:#}");
        }
    }
}

/// Posts `body` straight to the mock with the given headers, as a client that gets it wrong would.
async fn post(server: &AnthropicServer, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut request = HttpClient::default()
        .get()
        .post(format!("{}/v1/messages", server.base_url()))
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn the_mock_rejects_what_the_real_api_rejects() {
    let server = AnthropicServer::start_with_key(
        KEY,
        vec![ScriptedReply::text("fine", Tokens::new(3, 1)), ScriptedReply::text("merged", Tokens::new(3, 1))],
    )
    .await;
    let auth = [("x-api-key", KEY), ("anthropic-version", ANTHROPIC_VERSION)];
    let user = |text: &str| json!({"role": "user", "content": text});
    let call = |id: &str| json!({"type": "tool_use", "id": id, "name": "read_file", "input": {}});
    let answer = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "ok"});
    let asks = || json!({"role": "assistant", "content": [call("toolu_a"), call("toolu_b")]});
    let body = |messages: Value| json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages});

    let unanswered = body(json!([user("go"), asks(), {"role": "user", "content": [answer("toolu_a")]}]));
    let (status, reply) = post(&server, &auth, &unanswered.to_string()).await;
    assert_eq!(status, 400);
    assert_eq!(reply["type"], "error");
    assert_eq!(reply["error"]["type"], "invalid_request_error");
    assert_eq!(
        reply["error"]["message"],
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_b. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    );

    let cases = [
        (json!({"model": "claude-sonnet-4-5", "messages": [user("go")]}), "max_tokens: Field required"),
        (body(json!([{"role": "system", "content": "be terse"}, user("go")])), "messages.0.role: Input should be 'user' or 'assistant'"),
        (body(json!([{"role": "assistant", "content": "hi"}, user("go")])), r#"messages: first message must use the "user" role"#),
        (
            body(
                json!([user("go"), asks(), {"role": "user", "content": [{"type": "text", "text": "results:"}, answer("toolu_a"), answer("toolu_b")]}]),
            ),
            "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_a, toolu_b",
        ),
        (body(json!([user("go"), asks()])), "`tool_use` ids were found without `tool_result` blocks immediately after"),
        (
            body(json!([user("go"), {"role": "assistant", "content": "ok"}, {"role": "user", "content": [answer("toolu_z")]}])),
            "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_z",
        ),
        (body(json!([{"role": "user", "content": [{"type": "text", "text": ""}]}])), "messages: text content blocks must be non-empty"),
        (body(json!([user(" \n")])), "messages: text content blocks must contain non-whitespace text"),
        (
            body(json!([user("go"), {"role": "assistant", "content": []}, user("again")])),
            "messages.1: all messages must have non-empty content except for the optional final assistant message",
        ),
        (
            json!({"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": [user("go")], "max_tokns": 5}),
            "max_tokns: Extra inputs are not permitted",
        ),
        (
            json!({"model": "claude-sonnet-4-5", "max_tokens": 8, "system": [
                {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "c", "cache_control": {"type": "ephemeral"}}],
              "messages": [{"role": "user", "content": [
                {"type": "text", "text": "d", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "e", "cache_control": {"type": "ephemeral"}}]}]}),
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        ),
    ];
    for (request, expected) in cases {
        let (status, reply) = post(&server, &auth, &request.to_string()).await;
        assert_eq!(status, 400, "{request}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{request}: {message}");
    }

    let valid = body(json!([user("go")])).to_string();
    let (status, reply) = post(&server, &[("anthropic-version", ANTHROPIC_VERSION)], &valid).await;
    assert_eq!((status, reply["error"]["message"].as_str().unwrap()), (401, "x-api-key header is required"));
    assert_eq!(reply["error"]["type"], "authentication_error");
    let (status, reply) = post(&server, &[("x-api-key", KEY)], &valid).await;
    assert_eq!((status, reply["error"]["message"].as_str().unwrap()), (400, "anthropic-version: header is required"));
    let (status, _) = post(&server, &auth, "{not json").await;
    assert_eq!(status, 400);
    assert_eq!(server.remaining(), 2, "rejected requests do not use the script");

    let (status, reply) = post(&server, &auth, &valid).await;
    assert_eq!(status, 200);
    assert_eq!(validate_response(&reply), Ok(()), "the mock's own replies have the API's shape");
    // Consecutive turns of one role are combined by the API, not refused.
    let consecutive = body(json!([user("go"), user("and more"), {"role": "assistant", "content": "ok"}, user("then?")]));
    let (status, reply) = post(&server, &auth, &consecutive.to_string()).await;
    assert_eq!((status, reply["content"][0]["text"].as_str()), (200, Some("merged")));
    let (status, reply) = post(&server, &auth, &valid).await;
    assert_eq!(status, 500);
    assert!(reply["error"]["message"].as_str().unwrap().contains("script exhausted"), "{reply}");
}

#[tokio::test]
async fn scripted_replies_follow_the_response_shape() {
    let server = AnthropicServer::start(vec![
        ScriptedReply::tool_uses(
            vec![ToolUse::new("toolu_1", "read_file", json!({"file_path": "a"})), ToolUse::new("toolu_2", "x", json!({}))],
            Tokens::new(10, 5).cache_read(2).cache_creation(3),
        )
        .with_text("Let me look.")
        .with_thinking("Two files."),
        ScriptedReply::text("cut", Tokens::new(1, 1)).with_stop_reason("max_tokens"),
    ])
    .await;
    let valid = r#"{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"go"}]}"#;
    let headers = [("x-api-key", "any"), ("anthropic-version", ANTHROPIC_VERSION)];
    for stop in ["tool_use", "max_tokens"] {
        let (status, body) = post(&server, &headers, valid).await;
        assert_eq!(status, 200);
        assert_eq!(validate_response(&body), Ok(()), "{body}");
        assert_eq!(body["stop_reason"], stop);
    }
}

// --- The real binary -----------------------------------------------------------------------

/// A project folder whose dracode.toml defines provider `mock` of type `kind` pointing at
/// `server` (no default provider: tasks pick it with `--provider mock`).
fn setup(server: &AnthropicServer, kind: &str, manifest: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("dracode.toml"),
        format!("[providers.mock]\ntype = \"{kind}\"\nbase_url = \"{}\"\nmodel = \"claude-sonnet-4-5\"\n", server.base_url()),
    )
    .unwrap();
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    tmp
}

async fn run(dir: &Path, key: Option<&'static str>) -> (i32, String, Vec<Value>) {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut command = dracode(&dir);
        if let Some(key) = key {
            command.env("ANTHROPIC_API_KEY", key);
        }
        let output = command.args(["run", "tasks.toml", "--out", "out", "--provider", "mock"]).output().unwrap();
        let results = dir.join("out/results.jsonl");
        let all = if results.exists() { read_jsonl(&results) } else { Vec::new() };
        (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned(), all)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_that_writes_a_file_passes_with_normalised_token_sums() {
    let server = AnthropicServer::start_with_key(
        KEY,
        vec![
            ScriptedReply::tool_use(
                "toolu_01",
                "write_file",
                json!({"file_path": "src/new.txt", "content": "hello\n"}),
                Tokens::new(100, 20).cache_creation(1500),
            ),
            ScriptedReply::tool_use(
                "toolu_02",
                "edit_file",
                json!({"file_path": "a.txt", "old_string": "one", "new_string": "uno"}),
                Tokens::new(150, 30).cache_read(1500),
            )
            .with_thinking("Now the edit."),
            ScriptedReply::text("Wrote src/new.txt and edited a.txt.", Tokens::new(200, 10).cache_read(1500).cache_creation(50)),
        ],
    )
    .await;
    // The manifest of the OpenAI scenario, word for word: only `--provider mock` differs.
    let tmp = setup(
        &server,
        "anthropic",
        "[defaults]\nrepo = \"repo\"\nisolation = \"none\"\n[[tasks]]\nid = \"write\"\nprompt = \"Create src/new.txt\"\n",
    );
    let repo = tmp.path().join("repo");
    git_repo(&repo, &[("a.txt", "one\ntwo\n")]);
    let (code, stderr, all) = run(tmp.path(), Some(KEY)).await;
    assert_eq!(code, 0, "{stderr}");
    let task = finished(&all, "write");
    assert_eq!(task["status"], "passed");
    assert_eq!(task["result"], "Wrote src/new.txt and edited a.txt.");
    // Sums of what the server reported, with cache reads and writes counted as input.
    assert_eq!(task["usage"]["input_tokens"], (100 + 1500) + (150 + 1500) + (200 + 1500 + 50));
    assert_eq!(task["usage"]["cached_input_tokens"], 3000);
    assert_eq!(task["usage"]["cache_creation_input_tokens"], 1550);
    assert_eq!(task["usage"]["output_tokens"], 60);
    assert_eq!(task["usage"]["total_tokens"], 5000 + 60);
    assert_eq!(task["usage"]["requests"], 3);
    assert_eq!(all.last().unwrap()["usage"]["total_tokens"], 5060);
    // claude-sonnet-4 prices: 450 plain at $3, 3000 cache reads at $0.30, 1550 cache writes at
    // $3.75, 60 out at $15 per million.
    let cost = task["total_cost_usd"].as_f64().unwrap();
    assert!((cost - 0.008_962_5).abs() < 1e-9, "{cost}");
    let turns = events(&all, "turn.completed");
    let stops: Vec<&str> = turns.iter().map(|t| t["stop_reason"].as_str().unwrap()).collect();
    assert_eq!(stops, ["tool_use", "tool_use", "end_turn"]);
    assert_eq!(std::fs::read_to_string(repo.join("src/new.txt")).unwrap(), "hello\n");
    assert_eq!(std::fs::read_to_string(repo.join("a.txt")).unwrap(), "uno\ntwo\n");

    let received = server.received();
    assert!(received.iter().all(|r| r.status == 200 && r.headers["x-api-key"] == KEY));
    let last = &server.requests()[2];
    assert_eq!(last["model"], "claude-sonnet-4-5");
    assert!(last["max_tokens"].as_u64().unwrap() > 0);
    assert!(!last["system"][0]["text"].as_str().unwrap().is_empty(), "the agent's system prompt is top-level");
    assert_eq!(last["tools"].as_array().unwrap().last().unwrap()["cache_control"]["type"], "ephemeral");
    let results = &last["messages"][4]["content"];
    assert_eq!(results[0]["tool_use_id"], "toolu_02");
    assert!(results[0].get("is_error").is_none(), "{results}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_claude_alias_answers_every_call_and_reports_tool_errors() {
    let server = AnthropicServer::start(vec![
        ScriptedReply::tool_uses(
            vec![
                ToolUse::new("toolu_a", "read_file", json!({"file_path": "missing.txt"})),
                ToolUse::new("toolu_b", "list_files", json!({})),
            ],
            Tokens::new(50, 10),
        )
        .with_text("Looking around."),
        ScriptedReply::text("done", Tokens::new(80, 5)),
    ])
    .await;
    let tmp = setup(
        &server,
        "claude",
        "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\n[[tasks]]\nid = \"multi\"\nprompt = \"look around\"\n",
    );
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::fs::write(tmp.path().join("ws/present.txt"), "x").unwrap();
    let (code, stderr, all) = run(tmp.path(), Some(KEY)).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(finished(&all, "multi")["status"], "passed");
    let second = &server.requests()[1];
    let answers = second["messages"][2]["content"].as_array().unwrap();
    assert_eq!(answers.len(), 2);
    assert_eq!((answers[0]["tool_use_id"].as_str(), answers[0]["is_error"].as_bool()), (Some("toolu_a"), Some(true)));
    assert!(answers[0]["content"].as_str().unwrap().starts_with("Error [FILE_NOT_FOUND]"), "{}", answers[0]);
    assert_eq!(answers[1]["tool_use_id"], "toolu_b");
    assert!(answers[1].get("is_error").is_none());
    assert!(answers[1]["content"].as_str().unwrap().contains("present.txt"));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_key_the_task_is_not_configured_and_nothing_is_sent() {
    let server = AnthropicServer::start(vec![ScriptedReply::text("never", Tokens::new(1, 1))]).await;
    let tmp = setup(&server, "anthropic", "[[tasks]]\nid = \"nokey\"\nprompt = \"x\"\n");
    let (code, _, all) = run(tmp.path(), None).await;
    assert_eq!(code, 5, "could not be judged");
    let task = finished(&all, "nokey");
    assert_eq!(task["status"], "not_configured");
    assert!(task["error"]["message"].as_str().unwrap().contains("ANTHROPIC_API_KEY"), "{task}");
    assert!(server.received().is_empty(), "no request was sent");
}
