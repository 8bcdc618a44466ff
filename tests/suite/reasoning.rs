//! The `reasoning` setting through the real binary: Anthropic extended thinking carried through
//! tool loops (against a mock that refuses what the API refuses), OpenAI's `reasoning_effort`,
//! Gemini's `thinkingConfig` and thought signatures, reasoning tokens in usage and cost, the
//! thinking text in the transcript.

use crate::support::anthropic_server::{AnthropicServer, ScriptedReply, Tokens};
use crate::support::cli::{dracode, events, finished, git_repo, read_jsonl};
use dracode_llm::anthropic::ANTHROPIC_VERSION;
use dracode_llm::http::HttpClient;
use serde_json::{Value, json};
use std::path::Path;

const ANTHROPIC_KEY: &str = "sk-ant-test-think-0123456789";

/// A project with provider `mock` (`provider_toml` lines added to it) and `manifest`, and a
/// repository `repo` holding `a.txt`.
fn project(provider_toml: &str, manifest: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("dracode.toml"), format!("[providers.mock]\n{provider_toml}")).unwrap();
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    git_repo(&tmp.path().join("repo"), &[("a.txt", "one\ntwo\n")]);
    tmp
}

/// Runs `dracode run tasks.toml --provider mock` in `dir` with `env`: exit code, stderr, events.
async fn run(dir: &Path, env: &'static [(&'static str, &'static str)]) -> (i32, String, Vec<Value>) {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut command = dracode(&dir);
        command.envs(env.iter().copied());
        let output = command.args(["run", "tasks.toml", "--out", "out", "--provider", "mock"]).output().unwrap();
        let results = dir.join("out/results.jsonl");
        let all = if results.exists() { read_jsonl(&results) } else { Vec::new() };
        (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned(), all)
    })
    .await
    .unwrap()
}

/// The three-turn tool loop of the Anthropic scenarios: think, write a file; think (again, in
/// the same turn: interleaved), edit; think, answer.
fn thinking_loop() -> Vec<ScriptedReply> {
    vec![
        ScriptedReply::tool_use("toolu_01", "write_file", json!({"file_path": "new.txt", "content": "hi\n"}), Tokens::new(100, 40))
            .with_thinking(&format!("First the new file. The key {ANTHROPIC_KEY} must not leak."))
            .with_redacted_thinking("EncryptedReasoning"),
        ScriptedReply::tool_use(
            "toolu_02",
            "edit_file",
            json!({"file_path": "a.txt", "old_string": "one", "new_string": "uno"}),
            Tokens::new(150, 30),
        )
        .with_thinking("Now the edit of a.txt."),
        ScriptedReply::text("Wrote new.txt and edited a.txt.", Tokens::new(200, 20)).with_thinking("Both done."),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_reasoning_high_carries_thinking_through_a_tool_loop_streamed_and_not() {
    for stream in [true, false] {
        let server = AnthropicServer::start_with_key(ANTHROPIC_KEY, thinking_loop()).await;
        let provider =
            format!("type = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-sonnet-4-5\"\nstream = {stream}\n", server.base_url());
        let manifest = "[defaults]\nrepo = \"repo\"\nisolation = \"none\"\n[[tasks]]\nid = \"think\"\nprompt = \"Create new.txt\"\nreasoning = \"high\"\n";
        let tmp = project(&provider, manifest);
        let (code, stderr, all) = run(tmp.path(), &[("ANTHROPIC_API_KEY", ANTHROPIC_KEY)]).await;
        let statuses: Vec<u16> = server.received().iter().map(|r| r.status).collect();
        assert_eq!(code, 0, "stream={stream}: {stderr}\n{:?}", server.requests().last());
        assert_eq!(statuses, [200, 200, 200], "stream={stream}: every turn accepted, thinking intact");
        let task = finished(&all, "think");
        assert_eq!((task["status"].as_str(), task["result"].as_str()), (Some("passed"), Some("Wrote new.txt and edited a.txt.")));
        assert_eq!(task["usage"]["output_tokens"], 90, "thinking is output");
        assert_eq!(std::fs::read_to_string(tmp.path().join("repo/a.txt")).unwrap(), "uno\ntwo\n");

        let requests = server.requests();
        for (request, received) in requests.iter().zip(server.received()) {
            assert_eq!(request["thinking"], json!({"type": "enabled", "budget_tokens": 16384}), "stream={stream}");
            assert_eq!(request["max_tokens"], 8192 + 16384, "the budget fits below max_tokens");
            assert_eq!(received.headers["anthropic-beta"], "interleaved-thinking-2025-05-14");
        }
        // The last request holds both earlier turns, each opening with its thinking as sent.
        let turns = requests[2]["messages"].as_array().unwrap();
        let first = &turns[1]["content"];
        assert_eq!(first[0]["type"], "thinking");
        assert_eq!(first[0]["thinking"], format!("First the new file. The key {ANTHROPIC_KEY} must not leak."));
        assert_eq!(first[1]["type"], "redacted_thinking");
        assert_eq!(first[2]["type"], "tool_use");
        assert_eq!(
            (turns[3]["content"][0]["thinking"].as_str(), turns[3]["content"][1]["id"].as_str()),
            (Some("Now the edit of a.txt."), Some("toolu_02"))
        );

        let transcript = std::fs::read_to_string(tmp.path().join("out/transcripts/think.json")).unwrap();
        assert!(transcript.contains("Now the edit of a.txt.") && transcript.contains("Both done."), "{transcript}");
        assert!(!transcript.contains(ANTHROPIC_KEY) && transcript.contains("The key [REDACTED] must not leak."), "masked");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_reasoning_level_raises_a_small_max_tokens_above_its_budget() {
    let server =
        AnthropicServer::start_with_key(ANTHROPIC_KEY, vec![ScriptedReply::text("Done.", Tokens::new(10, 5)).with_thinking("Easy.")]).await;
    let provider =
        format!("type = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-opus-4-1\"\nreasoning = \"low\"\n", server.base_url());
    let manifest = "[defaults]\nrepo = \"repo\"\nisolation = \"none\"\nmax_output_tokens = 1500\nrequire_change = false\n[[tasks]]\nid = \"small\"\nprompt = \"Say done\"\n";
    let tmp = project(&provider, manifest);
    let (code, stderr, _) = run(tmp.path(), &[("ANTHROPIC_API_KEY", ANTHROPIC_KEY)]).await;
    assert_eq!(code, 0, "{stderr}");
    let request = &server.requests()[0];
    assert_eq!(request["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
    assert_eq!(request["max_tokens"], 1500 + 2048, "the answer keeps its 1500 tokens beside the budget");
}

/// Posts `body` to the mock as a client would.
async fn post(server: &AnthropicServer, body: &Value) -> (u16, String) {
    let response = HttpClient::default()
        .get()
        .post(format!("{}/v1/messages", server.base_url()))
        .header("x-api-key", ANTHROPIC_KEY)
        .header("anthropic-version", ANTHROPIC_VERSION)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let reply: Value = response.json().await.unwrap();
    (status, reply.pointer("/error/message").and_then(Value::as_str).unwrap_or_default().to_string())
}

#[tokio::test]
async fn the_anthropic_mock_refuses_dropped_or_altered_thinking_and_an_oversized_budget() {
    let server = AnthropicServer::start_with_key(
        ANTHROPIC_KEY,
        vec![
            ScriptedReply::tool_use("toolu_1", "read_file", json!({"file_path": "a"}), Tokens::new(5, 5)).with_thinking("Read a."),
            ScriptedReply::text("ok", Tokens::new(5, 1)),
        ],
    )
    .await;
    let thinking = json!({"type": "enabled", "budget_tokens": 2048});
    let first =
        json!({"model": "claude-sonnet-4-5", "max_tokens": 4096, "thinking": thinking, "messages": [{"role": "user", "content": "go"}]});
    let reply = HttpClient::default()
        .get()
        .post(format!("{}/v1/messages", server.base_url()))
        .header("x-api-key", ANTHROPIC_KEY)
        .header("anthropic-version", ANTHROPIC_VERSION)
        .json(&first)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let issued = reply["content"][0].clone();
    assert_eq!(issued["type"], "thinking");
    let call = reply["content"][1].clone();
    let result = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]});
    let next = |assistant: Value, thinking: Value, max_tokens: u64| {
        json!({"model": "claude-sonnet-4-5", "max_tokens": max_tokens, "thinking": thinking,
               "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": assistant}, result]})
    };
    let mut altered = issued.clone();
    altered["signature"] = json!(format!("{}x", issued["signature"].as_str().unwrap()));
    let mut marked = issued.clone();
    marked["cache_control"] = json!({"type": "ephemeral"});
    let cases = [
        (
            next(json!([call.clone()]), thinking.clone(), 4096),
            "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block",
        ),
        (next(json!([altered, call.clone()]), thinking.clone(), 4096), "messages.1.content.0: Invalid `signature` in `thinking` block"),
        (
            next(json!([marked, call.clone()]), thinking.clone(), 4096),
            "messages.1.content.0.thinking.cache_control: Extra inputs are not permitted",
        ),
        (next(json!([issued.clone(), call.clone()]), thinking.clone(), 2048), "`max_tokens` must be greater than `thinking.budget_tokens`"),
        (
            next(json!([issued.clone(), call.clone()]), json!({"type": "enabled", "budget_tokens": 512}), 4096),
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        ),
    ];
    for (body, expected) in cases {
        let (status, message) = post(&server, &body).await;
        assert_eq!(status, 400, "{body}");
        assert!(message.starts_with(expected), "{message}");
    }
    assert_eq!(server.remaining(), 1, "refusals do not use the script");
    let (status, message) = post(&server, &next(json!([issued, call]), thinking, 4096)).await;
    assert_eq!((status, message.as_str()), (200, ""), "the turn with its thinking intact is accepted");
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_thinking_tokens_are_priced_as_output() {
    let server = AnthropicServer::start_with_key(ANTHROPIC_KEY, thinking_loop()).await;
    let provider =
        format!("type = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-sonnet-4-5\"\nreasoning = \"medium\"\n", server.base_url());
    let manifest = "[defaults]\nrepo = \"repo\"\nisolation = \"none\"\n[[tasks]]\nid = \"priced\"\nprompt = \"Create new.txt\"\n";
    let tmp = project(&provider, manifest);
    let (code, stderr, all) = run(tmp.path(), &[("ANTHROPIC_API_KEY", ANTHROPIC_KEY)]).await;
    assert_eq!(code, 0, "{stderr}");
    let task = finished(&all, "priced");
    // claude-sonnet-4 prices: 450 input at $3 and 90 output (thinking included) at $15 per million.
    let cost = task["total_cost_usd"].as_f64().unwrap();
    assert!((cost - (450.0 * 3.0 + 90.0 * 15.0) / 1e6).abs() < 1e-12, "{cost}");
    assert_eq!(events(&all, "turn.completed").len(), 3);
    assert_eq!(server.requests()[0]["thinking"]["budget_tokens"], 8192);
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_chat_requests_carry_reasoning_effort_and_reasoning_tokens_are_counted_and_priced() {
    use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
    let server = OpenAiServer::start_with_key(
        "sk-openai-think-0123456789",
        vec![
            ScriptedReply::tool_call(
                "call_1",
                "write_file",
                json!({"file_path": "new.txt", "content": "hi\n"}),
                Tokens::new(100, 60).reasoning(40),
            ),
            ScriptedReply::text("Wrote new.txt.", Tokens::new(200, 30).reasoning(12)),
        ],
    )
    .await;
    let provider = format!("type = \"openai\"\nbase_url = \"{}\"\nmodel = \"o4-mini\"\n", server.base_url());
    let manifest = "[defaults]\nrepo = \"repo\"\nisolation = \"none\"\nreasoning = \"medium\"\n[[tasks]]\nid = \"effort\"\nprompt = \"Create new.txt\"\n";
    let tmp = project(&provider, manifest);
    let (code, stderr, all) = run(tmp.path(), &[("OPENAI_API_KEY", "sk-openai-think-0123456789")]).await;
    assert_eq!(code, 0, "{stderr}");
    for request in server.requests() {
        assert_eq!(request["reasoning_effort"], "medium", "{request}");
    }
    let task = finished(&all, "effort");
    assert_eq!(task["usage"]["reasoning_output_tokens"], 52);
    assert_eq!(task["usage"]["output_tokens"], 90, "reasoning is part of the output");
    // o4-mini: $1.10 input, $4.40 output per million; reasoning is billed as output.
    let cost = task["total_cost_usd"].as_f64().unwrap();
    assert!((cost - (300.0 * 1.1 + 90.0 * 4.4) / 1e6).abs() < 1e-12, "{cost}");
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_3_gets_a_thinking_level_and_its_thought_signatures_come_back_streamed_and_not() {
    use crate::support::gemini_server::{GeminiServer, Reply};
    const KEY: &str = "AIza-think-0123456789";
    for stream in [true, false] {
        let call = |name: &str, args: Value, t: [u64; 4]| Reply::Calls(vec![(name.to_string(), args)], t);
        let server = GeminiServer::start(
            KEY,
            vec![
                Reply::Thinking(
                    "Write the file first.".into(),
                    Box::new(call("write_file", json!({"file_path": "new.txt", "content": "hi\n"}), [100, 10, 0, 30])),
                ),
                Reply::Thinking(
                    "Then the edit.".into(),
                    Box::new(call("edit_file", json!({"file_path": "a.txt", "old_string": "one", "new_string": "uno"}), [150, 12, 0, 20])),
                ),
                Reply::Thinking("All done.".into(), Box::new(Reply::Text("Wrote new.txt and edited a.txt.".into(), [200, 8, 0, 5]))),
            ],
        )
        .await;
        let provider =
            format!("type = \"gemini\"\nbase_url = \"{}\"\nmodel = \"gemini-3-pro-preview\"\nstream = {stream}\n", server.base_url());
        let manifest = "[defaults]\nrepo = \"repo\"\nisolation = \"none\"\n[[tasks]]\nid = \"thoughts\"\nprompt = \"Create new.txt\"\nreasoning = \"high\"\n";
        let tmp = project(&provider, manifest);
        let (code, stderr, all) = run(tmp.path(), &[("GEMINI_API_KEY", KEY)]).await;
        assert_eq!(code, 0, "stream={stream}: {stderr}");
        let requests = server.requests();
        assert_eq!(requests.len(), 3, "stream={stream}: no request refused");
        for (_, body) in &requests {
            assert_eq!(body["generationConfig"]["thinkingConfig"], json!({"thinkingLevel": "high", "includeThoughts": true}));
        }
        let history = requests[2].1["contents"].as_array().unwrap();
        for turn in [&history[1], &history[3]] {
            let parts = turn["parts"].as_array().unwrap();
            assert_eq!(parts[0]["thought"], true, "{turn}");
            assert!(parts[1]["thoughtSignature"].as_str().is_some_and(|s| s.starts_with("CiQB")), "the signature on its call: {turn}");
        }
        let task = finished(&all, "thoughts");
        assert_eq!(task["status"], "passed");
        assert_eq!(task["usage"]["reasoning_output_tokens"], 55);
        assert_eq!(task["usage"]["output_tokens"], 30 + 55);
        let transcript = std::fs::read_to_string(tmp.path().join("out/transcripts/thoughts.json")).unwrap();
        assert!(transcript.contains("Then the edit."), "{transcript}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ollama_requests_carry_think() {
    use crate::support::ollama_server::{OllamaServer, Reply};
    for (model, think) in [("qwen3:8b", json!(true)), ("gpt-oss:20b", json!("low"))] {
        let server = OllamaServer::start(model, vec![Reply::Text("done".into(), 10, 2)]).await;
        let provider = format!("type = \"ollama\"\nbase_url = \"{}\"\nmodel = \"{model}\"\nreasoning = \"low\"\n", server.base_url());
        let manifest =
            "[defaults]\nrepo = \"repo\"\nisolation = \"none\"\nrequire_change = false\n[[tasks]]\nid = \"t\"\nprompt = \"Say done\"\n";
        let tmp = project(&provider, manifest);
        let (code, stderr, _) = run(tmp.path(), &[]).await;
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(server.requests()[0]["think"], think, "{model}");
    }
}

#[tokio::test]
async fn the_gemini_mock_refuses_gemini_3_calls_without_their_signature_and_signatures_it_never_sent() {
    use crate::support::gemini_server::{GeminiServer, Reply};
    let server = GeminiServer::start("AIza-k", vec![Reply::Text("ok".into(), [1, 1, 0, 0])]).await;
    let post = |model: &str, call: Value| {
        let url = format!("{}/v1beta/models/{model}:generateContent", server.base_url());
        let body = json!({"contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [call]},
            {"role": "user", "parts": [{"functionResponse": {"name": "list_files", "response": {"output": "a"}}}]}
        ]});
        async move {
            let reply = HttpClient::default().get().post(url).header("x-goog-api-key", "AIza-k").json(&body).send().await.unwrap();
            (reply.status().as_u16(), reply.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap_or_default().to_string())
        }
    };
    let unsigned = json!({"functionCall": {"name": "list_files", "args": {}}});
    let (status, message) = post("gemini-3-pro-preview", unsigned.clone()).await;
    assert_eq!(status, 400);
    assert!(message.starts_with("Function call is missing a thought_signature in functionCall parts."), "{message}");
    let forged = json!({"functionCall": {"name": "list_files", "args": {}}, "thoughtSignature": "Zm9yZ2Vk"});
    assert_eq!(post("gemini-3-pro-preview", forged).await, (400, "Corrupted thought signature.".to_string()));
    assert_eq!(post("gemini-2.5-flash", unsigned).await.0, 200, "Gemini 2.5 does not require them");
}

#[tokio::test(flavor = "multi_thread")]
async fn recorded_thinking_replays_as_recorded() {
    // Recorded: the thinking blocks, signatures included, are in the recording.
    let server = AnthropicServer::start_with_key(ANTHROPIC_KEY, thinking_loop()).await;
    let provider =
        format!("type = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-sonnet-4-5\"\nreasoning = \"high\"\n", server.base_url());
    let manifest = "[defaults]\nrepo = \"repo\"\nisolation = \"copy\"\n[[tasks]]\nid = \"rec\"\nprompt = \"Create new.txt\"\n";
    let tmp = project(&provider, manifest);
    let dir = tmp.path().to_path_buf();
    let (status, recording) = tokio::task::spawn_blocking(move || {
        let mut record = dracode(&dir);
        record.env("ANTHROPIC_API_KEY", ANTHROPIC_KEY).args(["run", "tasks.toml", "--out", "out", "--provider", "mock", "--record", "rec"]);
        let status = record.output().unwrap().status.code();
        (status, std::fs::read_to_string(dir.join("rec/rec.json")).unwrap_or_default())
    })
    .await
    .unwrap();
    assert_eq!(status, Some(0));
    let recorded: Value = serde_json::from_str(&recording).unwrap();
    assert_eq!(recorded["responses"][1]["content"][0]["type"], "reasoning");
    assert!(recorded["responses"][1]["content"][0]["signature"].as_str().is_some_and(|s| !s.is_empty()), "{recording}");
    // Replayed: the same run, offline.
    let replay = "[defaults]\nrepo = \"repo\"\nisolation = \"copy\"\n[[tasks]]\nid = \"rec\"\nprompt = \"Create new.txt\"\nprovider = \"replay\"\nreplay = \"rec/rec.json\"\n";
    std::fs::write(tmp.path().join("replay.toml"), replay).unwrap();
    let dir = tmp.path().to_path_buf();
    let output =
        tokio::task::spawn_blocking(move || dracode(&dir).args(["run", "replay.toml", "--out", "out2"]).output().unwrap()).await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let transcript = std::fs::read_to_string(tmp.path().join("out2/transcripts/rec.json")).unwrap();
    assert!(transcript.contains("Now the edit of a.txt."));
}

#[tokio::test(flavor = "multi_thread")]
async fn compaction_keeps_turns_that_open_with_their_thinking() {
    let big: String = (0..1000).map(|i| format!("line {i:04} of a big file\n")).collect();
    let server = AnthropicServer::start_with_key(
        ANTHROPIC_KEY,
        vec![
            ScriptedReply::tool_use("toolu_01", "read_file", json!({"file_path": "big.txt"}), Tokens::new(0, 10)).with_thinking("Read it."),
            ScriptedReply::text("Read big.txt; nothing else to do.", Tokens::new(0, 20)).with_thinking("Summarise."),
            ScriptedReply::text("done", Tokens::new(0, 2)).with_thinking("Finish."),
        ],
    )
    .await;
    server.set_context_limit(3000);
    let provider =
        format!("type = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-sonnet-4-5\"\nreasoning = \"low\"\n", server.base_url());
    let manifest =
        "[defaults]\nrepo = \"repo\"\nisolation = \"copy\"\nrequire_change = false\n[[tasks]]\nid = \"long\"\nprompt = \"Read big.txt\"\n";
    let tmp = project(&provider, manifest);
    std::fs::write(tmp.path().join("repo/big.txt"), big).unwrap();
    let (code, stderr, all) = run(tmp.path(), &[("ANTHROPIC_API_KEY", ANTHROPIC_KEY)]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(finished(&all, "long")["compactions"].as_u64().unwrap() >= 1);
    let received = server.received();
    let refusals: Vec<String> =
        received.iter().filter(|r| r.status != 200).map(|r| format!("{}", r.body.as_ref().unwrap()["messages"])).collect();
    assert_eq!(refusals.len(), 1, "only the window refusal: {refusals:?}");
    let last = received.last().unwrap();
    assert_eq!(last.status, 200);
    let kept = &last.body.as_ref().unwrap()["messages"][1];
    assert_eq!(
        (kept["content"][0]["thinking"].as_str(), kept["content"][1]["id"].as_str()),
        (Some("Read it."), Some("toolu_01")),
        "{kept}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_4_6_and_later_get_adaptive_thinking_with_an_effort() {
    let server = AnthropicServer::start_with_key(
        ANTHROPIC_KEY,
        vec![
            ScriptedReply::tool_use("toolu_01", "write_file", json!({"file_path": "new.txt", "content": "hi\n"}), Tokens::new(10, 5))
                .with_thinking("Adaptive."),
            ScriptedReply::text("Done.", Tokens::new(10, 5)),
        ],
    )
    .await;
    let provider =
        format!("type = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-opus-4-7\"\nreasoning = \"medium\"\n", server.base_url());
    let manifest = "[defaults]\nrepo = \"repo\"\nisolation = \"none\"\n[[tasks]]\nid = \"adaptive\"\nprompt = \"Create new.txt\"\n";
    let tmp = project(&provider, manifest);
    let (code, stderr, _) = run(tmp.path(), &[("ANTHROPIC_API_KEY", ANTHROPIC_KEY)]).await;
    assert_eq!(code, 0, "{stderr}");
    for (request, received) in server.requests().iter().zip(server.received()) {
        assert_eq!(request["thinking"], json!({"type": "adaptive", "display": "summarized"}));
        assert_eq!(request["output_config"], json!({"effort": "medium"}));
        assert_eq!(request["max_tokens"], 8192 + 8192);
        assert!(!received.headers.contains_key("anthropic-beta"), "adaptive thinking interleaves without the beta flag");
    }
    assert_eq!(server.requests()[1]["messages"][1]["content"][0]["thinking"], "Adaptive.");
}
