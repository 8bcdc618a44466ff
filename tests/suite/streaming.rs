//! Streamed answers on every wire format, against local servers that stream as the real APIs
//! do: the same answer streamed and unstreamed gives the same response and the same exact
//! usage; a stream cut short (or failing with an overloaded error) is retried; `stream = false`
//! sends the unstreamed body; `idle_timeout` measures silence on the wire, so an answer that
//! keeps trickling passes and one that goes silent stalls.

use crate::support::anthropic_server::{self, AnthropicServer};
use crate::support::cli::{dracode, finished, read_jsonl};
use crate::support::gemini_server::{self, GeminiServer};
use crate::support::ollama_server::{self, OllamaServer};
use crate::support::openai_server::{self, OpenAiServer, ScriptedReply, Tokens};
use crate::support::provider::{fast_retries, resolved};
use crate::support::sse;
use crate::support::trickle_server::{Plan, TrickleServer};
use dracode_llm::anthropic::AnthropicMessages;
use dracode_llm::gemini::GeminiGenerateContent;
use dracode_llm::http::HttpClient;
use dracode_llm::ollama::OllamaChat;
use dracode_llm::openai::ChatCompletions;
use dracode_llm::preset::{ProviderType, ResolvedProvider};
use dracode_llm::{ContentBlock, ErrorKind, LlmError, LlmRequest, LlmResponse, Message, Provider, RetryNotice, StopReason, Usage};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `settings` with streaming on or off.
fn streaming(mut settings: ResolvedProvider, on: bool) -> ResolvedProvider {
    settings.stream = on;
    settings
}

/// One call saying hello, with the retry notices it caused.
async fn hello(provider: &dyn Provider) -> (Result<LlmResponse, LlmError>, Vec<RetryNotice>) {
    let messages = [Message::user_text("Say hello")];
    let notices = Mutex::new(Vec::new());
    let on_retry = |notice: RetryNotice| notices.lock().unwrap().push(notice);
    let request = LlmRequest { system: "You are a coding agent.", messages: &messages, tools: &[], max_tokens: Some(1024) };
    let result = provider.complete(request, &on_retry).await;
    (result, notices.into_inner().unwrap())
}

/// Calls `streamed` then `unstreamed` (two providers on one server whose script holds each
/// answer twice) for each of `answers` answers; asserts both give the same response with no
/// retry, and returns the streamed responses.
async fn same_both_ways(streamed: &dyn Provider, unstreamed: &dyn Provider, answers: usize) -> Vec<LlmResponse> {
    let mut responses = Vec::new();
    for _ in 0..answers {
        let (a, notices_a) = hello(streamed).await;
        let (b, notices_b) = hello(unstreamed).await;
        let (a, b) = (a.expect("streamed answer"), b.expect("unstreamed answer"));
        assert_eq!(a, b, "the streamed answer is the unstreamed one");
        assert!(notices_a.is_empty() && notices_b.is_empty(), "{notices_a:?} {notices_b:?}");
        responses.push(a);
    }
    responses
}

fn usage(input: u64, output: u64, cached: u64, reasoning: u64) -> Usage {
    Usage { cached_input_tokens: cached, reasoning_output_tokens: reasoning, ..Usage::from_counts(input, output) }
}

#[tokio::test]
async fn openai_streams_with_the_usage_chunk_and_matches_the_unstreamed_answer() {
    let call =
        ScriptedReply::tool_call("call_1", "read_file", json!({"file_path": "src/main.rs", "limit": 40}), Tokens::new(120, 30).cached(64))
            .with_text("Let me look.");
    let text = ScriptedReply::text("All done: the bug was an off-by-one.", Tokens::new(300, 12).reasoning(5));
    let server = OpenAiServer::start(vec![call.clone(), call, text.clone(), text]).await;
    let settings = resolved(ProviderType::Openai, &server.base_url(), "gpt-4o", Some("sk-test"));
    let streamed = ChatCompletions::new(&streaming(settings.clone(), true), HttpClient::default()).unwrap();
    let unstreamed = ChatCompletions::new(&streaming(settings, false), HttpClient::default()).unwrap();
    let responses = same_both_ways(&streamed, &unstreamed, 2).await;
    assert_eq!(
        responses[0].content,
        [
            ContentBlock::text("Let me look."),
            ContentBlock::ToolUse {
                id: "call_1".into(),
                name: "read_file".into(),
                input: json!({"file_path": "src/main.rs", "limit": 40})
            }
        ]
    );
    assert_eq!((responses[0].stop_reason.clone(), responses[0].usage), (StopReason::ToolUse, usage(120, 30, 64, 0)));
    assert_eq!(responses[1].usage, usage(300, 12, 0, 5));
    let bodies = server.requests();
    for (i, body) in bodies.iter().enumerate() {
        if i % 2 == 0 {
            assert_eq!((&body["stream"], &body["stream_options"]), (&json!(true), &json!({"include_usage": true})), "{body}");
        } else {
            assert!(body.get("stream").is_none() && body.get("stream_options").is_none(), "stream = false: {body}");
        }
    }
}

#[tokio::test]
async fn the_openai_mock_refuses_stream_options_without_stream() {
    let server = OpenAiServer::start(vec![]).await;
    let body = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": true}});
    let reply = dracode_llm::http::HttpClient::default()
        .get()
        .post(format!("{}/chat/completions", server.base_url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 400);
    let answer: Value = reply.json().await.unwrap();
    assert_eq!(answer["error"]["message"], "The 'stream_options' parameter is only allowed when 'stream' is enabled.");
}

#[tokio::test]
async fn anthropic_streams_events_and_matches_the_unstreamed_answer() {
    use anthropic_server::{ScriptedReply, Tokens, ToolUse};
    let call = ScriptedReply::tool_uses(
        vec![ToolUse::new("toolu_01", "list_files", json!({"directory": "src"}))],
        Tokens::new(50, 40).cache_read(1000).cache_creation(200),
    )
    .with_text("Listing.")
    .with_thinking("The user wants a listing.");
    let text = ScriptedReply::text("Finished.", Tokens::new(80, 7));
    let server = AnthropicServer::start(vec![call.clone(), call, text.clone(), text]).await;
    let settings = resolved(ProviderType::Anthropic, &server.base_url(), "claude-sonnet-4-5", Some("sk-ant-test"));
    let streamed = AnthropicMessages::new(&streaming(settings.clone(), true), HttpClient::default()).unwrap();
    let unstreamed = AnthropicMessages::new(&streaming(settings, false), HttpClient::default()).unwrap();
    let responses = same_both_ways(&streamed, &unstreamed, 2).await;
    assert!(
        matches!(&responses[0].content[0], ContentBlock::Reasoning { text, signature: Some(_), .. } if text == "The user wants a listing."),
        "thinking_delta and signature_delta fold into the thinking block"
    );
    assert_eq!(
        responses[0].content[2],
        ContentBlock::ToolUse { id: "toolu_01".into(), name: "list_files".into(), input: json!({"directory": "src"}) }
    );
    let first = responses[0].usage;
    assert_eq!(
        (first.input_tokens, first.output_tokens, first.cached_input_tokens, first.cache_creation_input_tokens),
        (1250, 40, 1000, 200),
        "input counts from message_start, output from message_delta"
    );
    assert_eq!((responses[1].usage.input_tokens, responses[1].usage.output_tokens), (80, 7));
    let bodies = server.requests();
    assert_eq!(bodies.iter().map(|b| b.get("stream").cloned()).collect::<Vec<_>>(), [Some(json!(true)), None, Some(json!(true)), None]);
}

#[tokio::test]
async fn gemini_streams_over_sse_and_matches_the_unstreamed_answer() {
    use gemini_server::Reply;
    let calls = Reply::Calls(vec![("read_file".into(), json!({"file_path": "a.rs"})), ("list_files".into(), json!({}))], [100, 20, 40, 6]);
    let text = Reply::Text("A longer answer, streamed in pieces.".into(), [150, 9, 0, 0]);
    let server = GeminiServer::start("AIza-test", vec![calls.clone(), calls, text.clone(), text]).await;
    let settings = resolved(ProviderType::Gemini, &server.base_url(), "gemini-2.5-flash", Some("AIza-test"));
    let streamed = GeminiGenerateContent::new(&streaming(settings.clone(), true), HttpClient::default()).unwrap();
    let unstreamed = GeminiGenerateContent::new(&streaming(settings, false), HttpClient::default()).unwrap();
    let responses = same_both_ways(&streamed, &unstreamed, 2).await;
    assert_eq!(responses[0].content.len(), 2);
    assert_eq!(responses[0].usage, usage(100, 26, 40, 6), "the last usageMetadata of the stream");
    assert_eq!(responses[1].content, [ContentBlock::text("A longer answer, streamed in pieces.")], "pieces joined into one block");
    assert_eq!(responses[1].usage, usage(150, 9, 0, 0));
    let urls: Vec<String> = server.requests().into_iter().map(|(url, _)| url).collect();
    assert_eq!(urls[0], "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    assert_eq!(urls[1], "/v1beta/models/gemini-2.5-flash:generateContent");
}

#[tokio::test]
async fn ollama_streams_ndjson_and_matches_the_unstreamed_answer() {
    use ollama_server::Reply;
    let calls = Reply::CallsWithoutIds(vec![("read_file".into(), json!({"file_path": "a.rs"}))], 60, 14);
    let text = Reply::Text("Streamed three characters a line.".into(), 90, 11);
    let server = OllamaServer::start("qwen2.5-coder", vec![calls.clone(), calls, text.clone(), text]).await;
    let settings = resolved(ProviderType::Ollama, &server.base_url(), "qwen2.5-coder", None);
    let streamed = OllamaChat::new(&streaming(settings.clone(), true), HttpClient::default()).unwrap();
    let unstreamed = OllamaChat::new(&streaming(settings, false), HttpClient::default()).unwrap();
    let responses = same_both_ways(&streamed, &unstreamed, 2).await;
    assert_eq!((responses[0].stop_reason.clone(), responses[0].usage), (StopReason::ToolUse, Usage::from_counts(60, 14)));
    assert_eq!(responses[1].content, [ContentBlock::text("Streamed three characters a line.")]);
    assert_eq!(responses[1].usage, Usage::from_counts(90, 11), "counts of the done line");
    let flags: Vec<Value> = server.requests().iter().map(|b| b["stream"].clone()).collect();
    assert_eq!(flags, [json!(true), json!(false), json!(true), json!(false)]);
}

#[tokio::test]
async fn a_cut_stream_is_retried_and_its_usage_counted_once() {
    let whole = ScriptedReply::text("Hello there, all good.", Tokens::new(40, 8));
    let server = OpenAiServer::start(vec![whole.clone().cut_after(4), whole]).await;
    let settings = resolved(ProviderType::Openai, &server.base_url(), "gpt-4o", Some("sk-test"));
    let provider = ChatCompletions::new(&settings, HttpClient::default()).unwrap().with_retry_policy(fast_retries());
    let (result, notices) = hello(&provider).await;
    let response = result.expect("the second try is whole");
    assert_eq!(response.content, [ContentBlock::text("Hello there, all good.")]);
    assert_eq!(response.usage, Usage::from_counts(40, 8), "the cut try adds nothing");
    assert_eq!(notices.iter().map(|n| n.reason.as_str()).collect::<Vec<_>>(), ["network"]);
    assert_eq!(server.received().len(), 2);

    // Cut every time: a transient network error once the retries are spent.
    let server = OpenAiServer::start(vec![ScriptedReply::text("never whole", Tokens::new(1, 1)).cut_after(2); 4]).await;
    let settings = resolved(ProviderType::Openai, &server.base_url(), "gpt-4o", Some("sk-test"));
    let provider = ChatCompletions::new(&settings, HttpClient::default()).unwrap().with_retry_policy(fast_retries());
    let error = hello(&provider).await.0.unwrap_err();
    assert_eq!(error.kind, ErrorKind::Network);
    assert!(
        error.message.contains("stream was cut before its end") && error.message.ends_with("(gave up after 4 tries)"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn an_anthropic_stream_that_is_cut_or_overloaded_midway_is_retried() {
    use anthropic_server::{ScriptedReply, Tokens};
    let whole = ScriptedReply::text("Recovered.", Tokens::new(30, 4));
    let server = AnthropicServer::start(vec![whole.clone().overloaded_after(3), whole.clone().cut_after(5), whole]).await;
    let settings = resolved(ProviderType::Anthropic, &server.base_url(), "claude-sonnet-4-5", Some("sk-ant-test"));
    let provider = AnthropicMessages::new(&settings, HttpClient::default()).unwrap().with_retry_policy(fast_retries());
    let (result, notices) = hello(&provider).await;
    let response = result.expect("the third try is whole");
    assert_eq!((response.content.clone(), response.usage), (vec![ContentBlock::text("Recovered.")], Usage::from_counts(30, 4)));
    assert_eq!(notices.iter().map(|n| n.reason.as_str()).collect::<Vec<_>>(), ["server", "network"], "overloaded, then cut");
}

#[tokio::test]
async fn the_provider_timeout_bounds_silence_not_a_live_stream() {
    let body = sse::openai_text_stream("gpt-4o", "slow but steady", 10, 3);
    let plan = Plan::Trickle { content_type: sse::EVENT_STREAM.into(), body, pieces: 10, every: Duration::from_millis(400) };
    let server = TrickleServer::start(plan).await;
    let mut settings = resolved(ProviderType::Openai, &server.base_url(), "gpt-4o", Some("sk-test"));
    settings.timeout = Duration::from_secs(2);
    let provider = ChatCompletions::new(&settings, HttpClient::default()).unwrap().with_retry_policy(fast_retries());
    let started = Instant::now();
    let (result, notices) = hello(&provider).await;
    assert_eq!(result.expect("a 4 s stream under a 2 s timeout").content, [ContentBlock::text("slow but steady")]);
    assert!(notices.is_empty() && started.elapsed() >= Duration::from_millis(3500), "{notices:?} {:?}", started.elapsed());

    let silent = TrickleServer::start(Plan::Silent).await;
    let mut settings = resolved(ProviderType::Openai, &silent.base_url(), "gpt-4o", Some("sk-test"));
    settings.timeout = Duration::from_millis(500);
    let provider = ChatCompletions::new(&settings, HttpClient::default()).unwrap().with_retry_policy(fast_retries());
    let error = hello(&provider).await.0.unwrap_err();
    assert_eq!(error.kind, ErrorKind::Network);
    assert!(error.message.contains("reading the stream timed out: no byte for 500ms"), "{}", error.message);
    assert_eq!(silent.requests().len(), 4, "retried like any timeout");
}

/// A project whose `mock` provider (OpenAI type, `extra` provider settings) is at `base_url`,
/// with one task `slow` (`task_extra` task fields).
fn project(base_url: &str, extra: &str, task_extra: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let config =
        format!("provider = \"mock\"\n[providers.mock]\ntype = \"openai\"\nbase_url = \"{base_url}\"\nmodel = \"gpt-4o\"\n{extra}");
    std::fs::write(tmp.path().join("dracode.toml"), config).unwrap();
    let manifest = format!("[defaults]\nrepo = \".\"\nrequire_change = false\n[[tasks]]\nid = \"slow\"\nprompt = \"say hi\"\n{task_extra}");
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    tmp
}

/// Runs the project in `dir`: exit code, stderr, events.
async fn run(dir: &Path) -> (i32, String, Vec<Value>) {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let output = dracode(&dir).env("OPENAI_API_KEY", "sk-test").args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
        let all = read_jsonl(&dir.join("out/results.jsonl"));
        (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned(), all)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_trickling_for_six_seconds_passes_with_a_two_second_idle_timeout() {
    let body = sse::openai_text_stream("gpt-4o", "Nothing to change; the code is fine.", 25, 9);
    let plan = Plan::Trickle { content_type: sse::EVENT_STREAM.into(), body, pieces: 12, every: Duration::from_millis(500) };
    let server = TrickleServer::start(plan).await;
    let tmp = project(&server.base_url(), "", "idle_timeout = \"2s\"\n");
    let started = Instant::now();
    let (code, stderr, all) = run(tmp.path()).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(started.elapsed() >= Duration::from_secs(5), "the answer really took ~6 s: {:?}", started.elapsed());
    let task = finished(&all, "slow");
    assert_eq!(task["status"], "passed", "{task}");
    assert_eq!((task["usage"]["input_tokens"].as_u64(), task["usage"]["output_tokens"].as_u64()), (Some(25), Some(9)));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_silent_after_its_headers_stalls_the_task_near_the_idle_limit() {
    let server = TrickleServer::start(Plan::Silent).await;
    let tmp = project(&server.base_url(), "", "idle_timeout = \"2s\"\n");
    let started = Instant::now();
    let (code, stderr, all) = run(tmp.path()).await;
    let elapsed = started.elapsed();
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(finished(&all, "slow")["status"], "stalled");
    assert!(elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(20), "stalled near 2 s, not the 600 s timeout: {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_false_in_the_config_sends_the_unstreamed_body() {
    let server = OpenAiServer::start(vec![openai_server::ScriptedReply::text("hi", Tokens::new(5, 1))]).await;
    let tmp = project(&server.base_url(), "stream = false\n", "");
    let (code, stderr, all) = run(tmp.path()).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(finished(&all, "slow")["status"], "passed");
    let bodies = server.requests();
    assert_eq!(bodies.len(), 1);
    assert!(bodies[0].get("stream").is_none() && bodies[0].get("stream_options").is_none(), "{}", bodies[0]);
}

#[tokio::test]
async fn a_server_that_ignores_stream_and_answers_json_is_read_as_json() {
    let completion = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "qwen2.5-coder",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "plain JSON"}, "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    });
    let server = OpenAiServer::start(vec![ScriptedReply::json(200, completion)]).await;
    let settings = resolved(ProviderType::Vllm, &server.base_url(), "qwen2.5-coder", None);
    let provider = ChatCompletions::new(&settings, HttpClient::default()).unwrap();
    let (result, notices) = hello(&provider).await;
    let response = result.expect("the JSON answer is used");
    assert_eq!((response.content, response.usage), (vec![ContentBlock::text("plain JSON")], Usage::from_counts(12, 3)));
    assert!(notices.is_empty());
    assert_eq!(server.requests()[0]["stream"], true, "it was asked to stream");
}
