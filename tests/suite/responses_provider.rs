//! Issue 20: OpenAI's Responses API through the real binary, against a local server that
//! speaks and validates it (`tests/support/responses_server.rs`): a Codex model's tool loop
//! with a free-form `apply_patch` call and reasoning carried between turns, streamed and not,
//! on OpenAI and Azure; the automatic choice of Responses for a Codex model; the overflow path;
//! the `wire_api` setting refused where it cannot apply; Chat Completions' 404 for such a model.

use crate::support::cli::{dracode, events, finished, read_jsonl};
use crate::support::openai_server::{OpenAiServer, ScriptedReply};
use crate::support::responses_server::{Out, Reply, ResponsesServer, Tokens};
use serde_json::{Value, json};
use std::path::Path;

const KEY: &str = "sk-test-responses-0123456789";

const PATCH: &str = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+uno\n two\n*** End Patch\n";

/// A project: `ws/a.txt`, provider `mock` with `settings`, a one-task manifest.
fn project(settings: &str, prompt: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("ws")).unwrap();
    let big: String = (0..1000).map(|i| format!("line {i:04} of a big file\n")).collect();
    std::fs::write(tmp.path().join("ws/a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(tmp.path().join("ws/big.txt"), big).unwrap();
    std::fs::write(tmp.path().join("dracode.toml"), format!("provider = \"mock\"\n[providers.mock]\n{settings}")).unwrap();
    let manifest =
        format!("[defaults]\nrepo = \"ws\"\nisolation = \"none\"\nrequire_change = false\n[[tasks]]\nid = \"t\"\nprompt = \"{prompt}\"\n");
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    tmp
}

async fn run(dir: &Path, env: &[(&str, &str)]) -> (i32, String, Vec<Value>) {
    let dir = dir.to_path_buf();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        let output = dracode(&dir).envs(env).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
        let results = dir.join("out/results.jsonl");
        let all = if results.exists() { read_jsonl(&results) } else { Vec::new() };
        (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned(), all)
    })
    .await
    .unwrap()
}

/// Reads a file, thinks, patches it with the free-form tool, answers: three responses.
fn tool_loop_script() -> Vec<Reply> {
    vec![
        Reply::answer(
            vec![Out::Reasoning("Read a.txt first.".into()), Out::call("call_read", "read_file", json!({"file_path": "a.txt"}))],
            Tokens::new(1200, 40).with(0, 16),
        ),
        Reply::answer(
            vec![
                Out::Reasoning("Replace one.".into()),
                Out::Text("Patching a.txt.".into()),
                Out::custom("call_patch", "apply_patch", PATCH),
            ],
            Tokens::new(1400, 90).with(1024, 32),
        ),
        Reply::text("Changed one to uno.", Tokens::new(1600, 8).with(1280, 0)),
    ]
}

/// The loop of [`tool_loop_script`] ran: passed, the file patched, usage the server's sums,
/// and each request carried the earlier turns' reasoning back and the patch as a custom call.
fn assert_tool_loop(server: &ResponsesServer, tmp: &Path, code: i32, stderr: &str, all: &[Value], stream: bool) {
    assert_eq!(code, 0, "{stderr}");
    let task = finished(all, "t");
    assert_eq!(task["status"], "passed", "{task}");
    assert_eq!(task["result"], "Changed one to uno.");
    assert_eq!(std::fs::read_to_string(tmp.join("ws/a.txt")).unwrap(), "uno\ntwo\n");
    // The server's sums: 1200 + 1400 + 1600 in (1024 + 1280 cached), 40 + 90 + 8 out (16 + 32
    // reasoning).
    let usage = &task["usage"];
    let counts = ["input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "total_tokens", "requests"];
    let got: Vec<u64> = counts.iter().map(|c| usage[c].as_u64().unwrap_or(u64::MAX)).collect();
    assert_eq!(got, [4200, 2304, 138, 48, 4338, 3], "{usage}");
    let turns = events(all, "turn.completed");
    assert_eq!(turns.iter().map(|t| t["stop_reason"].as_str().unwrap()).collect::<Vec<_>>(), ["tool_use", "tool_use", "end_turn"]);
    let received = server.received();
    assert_eq!(received.iter().map(|r| r.status).collect::<Vec<_>>(), [200, 200, 200], "{received:?}");
    let bodies: Vec<&Value> = received.iter().map(|r| r.body.as_ref().unwrap()).collect();
    for body in &bodies {
        assert_eq!((body["store"].clone(), body.get("stream").cloned()), (json!(false), stream.then_some(json!(true))));
        let patch_tool = body["tools"].as_array().unwrap().iter().find(|t| t["name"] == "apply_patch").unwrap();
        assert_eq!((patch_tool["type"].as_str(), patch_tool["format"]["syntax"].as_str()), (Some("custom"), Some("lark")));
    }
    let last = bodies[2]["input"].as_array().unwrap();
    let kinds: Vec<&str> = last.iter().map(|i| i["type"].as_str().unwrap()).collect();
    let expected = [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "reasoning",
        "message",
        "custom_tool_call",
        "custom_tool_call_output",
    ];
    assert_eq!(kinds, expected);
    assert!(last[1]["encrypted_content"].as_str().unwrap().starts_with("gAAAAB-rs_mock1_0"), "{}", last[1]);
    // The model's text goes back as the output message it came as: its id, `output_text`.
    assert!(last[5]["id"].as_str().is_some_and(|id| id.starts_with("msg_")), "{}", last[5]);
    let part = json!({"type": "output_text", "text": "Patching a.txt.", "annotations": [], "logprobs": []});
    assert_eq!((&last[5]["role"], &last[5]["status"], &last[5]["content"]), (&json!("assistant"), &json!("completed"), &json!([part])));
    assert_eq!(last[6]["input"], PATCH, "the raw patch goes back as the custom call's input");
    assert!(last[7]["output"].as_str().unwrap().contains("a.txt"), "{}", last[7]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_codex_task_runs_a_tool_loop_with_a_free_form_apply_patch_streamed_and_not() {
    for stream in [true, false] {
        let server = ResponsesServer::start(KEY, tool_loop_script()).await;
        let settings = format!(
            "type = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-5-codex\"\nwire_api = \"responses\"\nstream = {stream}\nreasoning = \"high\"\n",
            server.base_url()
        );
        let tmp = project(&settings, "Change one to uno in a.txt.");
        let (code, stderr, all) = run(tmp.path(), &[("OPENAI_API_KEY", KEY)]).await;
        assert_tool_loop(&server, tmp.path(), code, &stderr, &all, stream);
        let first = server.received()[0].body.clone().unwrap();
        assert_eq!(first["reasoning"], json!({"effort": "high", "summary": "auto"}));
        assert_eq!(first["include"], json!(["reasoning.encrypted_content"]));
        assert!(first["instructions"].as_str().is_some_and(|s| !s.is_empty()));
        let task = finished(&all, "t");
        assert!(task["total_cost_usd"].as_f64().unwrap() > 0.0, "gpt-5-codex has a price: {task}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_azure_deployment_runs_the_same_loop_through_the_v1_responses_url() {
    for stream in [true, false] {
        let server = ResponsesServer::start_azure(KEY, tool_loop_script()).await;
        let settings = format!(
            "type = \"azure\"\nbase_url = \"{}\"\nmodel = \"team-coder\"\nwire_api = \"responses\"\nstream = {stream}\n",
            server.base_url()
        );
        let tmp = project(&settings, "Change one to uno in a.txt.");
        let (code, stderr, all) = run(tmp.path(), &[("AZURE_OPENAI_API_KEY", KEY)]).await;
        assert_tool_loop(&server, tmp.path(), code, &stderr, &all, stream);
        let first = &server.received()[0];
        assert_eq!((first.path.as_str(), first.query.as_deref()), ("/openai/v1/responses", None));
        assert_eq!(first.headers.get("api-key").map(String::as_str), Some(KEY));
        assert_eq!(first.body.as_ref().unwrap()["model"], "team-coder", "the deployment is the model");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_codex_model_gets_the_responses_api_without_wire_api() {
    let server = ResponsesServer::start(KEY, vec![Reply::text("Nothing to change.", Tokens::new(50, 5))]).await;
    let settings = format!("type = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-5.1-codex-mini\"\n", server.base_url());
    let tmp = project(&settings, "Look around.");
    let (code, stderr, all) = run(tmp.path(), &[("OPENAI_API_KEY", KEY)]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(finished(&all, "t")["result"], "Nothing to change.");
    let received = server.received();
    assert_eq!(received.iter().map(|r| (r.path.as_str(), r.status)).collect::<Vec<_>>(), [("/v1/responses", 200)]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deployment_that_does_not_reason_gets_the_request_again_without_encrypted_reasoning() {
    let server = ResponsesServer::start_azure(
        KEY,
        vec![
            Reply::answer(vec![Out::call("call_1", "read_file", json!({"file_path": "a.txt"}))], Tokens::new(30, 5)),
            Reply::text("It says one, two.", Tokens::new(60, 6)),
        ],
    )
    .await;
    server.serve_a_model_that_does_not_reason();
    let settings =
        format!("type = \"azure\"\nbase_url = \"{}\"\nmodel = \"chat-deployment\"\nwire_api = \"responses\"\n", server.base_url());
    let tmp = project(&settings, "What does a.txt say?");
    let (code, stderr, all) = run(tmp.path(), &[("AZURE_OPENAI_API_KEY", KEY)]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(finished(&all, "t")["usage"]["requests"], 2);
    let received = server.received();
    assert_eq!(received.iter().map(|r| r.status).collect::<Vec<_>>(), [400, 200, 200], "refused once, then every body without it");
    assert!(received[1..].iter().all(|r| r.body.as_ref().unwrap().get("include").is_none()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_response_and_a_server_error_are_retried_like_any_transient_failure() {
    let server = ResponsesServer::start(
        KEY,
        vec![
            Reply::failed("server_error", "An error occurred while processing your request."),
            Reply::error(500, "server_error", None, "The server had an error while processing your request."),
            Reply::text("done", Tokens::new(7, 2)),
        ],
    )
    .await;
    let settings = format!("type = \"openai\"\nbase_url = \"{}\"\nmodel = \"o3-pro\"\n", server.base_url());
    let tmp = project(&settings, "Say done.");
    let (code, stderr, all) = run(tmp.path(), &[("OPENAI_API_KEY", KEY)]).await;
    assert_eq!(code, 0, "{stderr}");
    let task = finished(&all, "t");
    assert_eq!((task["status"].as_str(), task["usage"]["requests"].as_u64()), (Some("passed"), Some(1)), "{task}");
    assert_eq!(events(&all, "retry").len(), 2, "a `response.failed` event and a 500, each retried once");
    assert_eq!(server.remaining(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_completions_refused_for_a_responses_only_model_names_the_setting() {
    let message = "This model is only supported in v1/responses and not in v1/chat/completions.";
    let server = OpenAiServer::start(vec![ScriptedReply::error(404, "invalid_request_error", None, message)]).await;
    let settings = format!("type = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-5-codex\"\nwire_api = \"chat\"\n", server.base_url());
    let tmp = project(&settings, "Look around.");
    let (_, stderr, all) = run(tmp.path(), &[("OPENAI_API_KEY", KEY)]).await;
    let error = finished(&all, "t")["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(error.contains(message) && error.contains("wire_api = \"responses\""), "{error}\n{stderr}");
    assert!(!error.contains('\n'), "one line: {error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_context_window_refusal_is_compacted_streamed_and_not() {
    for stream in [true, false] {
        let server = ResponsesServer::start(
            KEY,
            vec![
                Reply::answer(vec![Out::call("call_big", "read_file", json!({"file_path": "big.txt"}))], Tokens::new(0, 10)),
                Reply::text("Read big.txt (1000 lines). Remaining: report.", Tokens::new(0, 20)),
                Reply::text("done", Tokens::new(0, 2)),
            ],
        )
        .await;
        server.set_context_limit(3000);
        let settings = format!(
            "type = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock-codex\"\nwire_api = \"responses\"\nstream = {stream}\n",
            server.base_url()
        );
        let tmp = project(&settings, "Read big.txt and report.");
        let (code, stderr, all) = run(tmp.path(), &[("OPENAI_API_KEY", KEY)]).await;
        assert_eq!(code, 0, "{stderr}");
        let task = finished(&all, "t");
        assert_eq!((task["status"].as_str(), task["result"].as_str()), (Some("passed"), Some("done")), "{task}");
        assert!(task["compactions"].as_u64().unwrap() >= 1, "{task}");
        assert!(events(&all, "context.compacted").iter().any(|e| e["method"] == "summary"));
        // The call, the refused one (a 400, or a `response.failed` stream), the summary, the end.
        let statuses: Vec<u16> = server.received().iter().map(|r| r.status).collect();
        assert_eq!(statuses, if stream { [200, 200, 200, 200] } else { [200, 400, 200, 200] }, "stream {stream}");
        assert_eq!(server.remaining(), 0);
    }
}

#[test]
fn wire_api_on_a_type_without_a_responses_api_is_exit_2_naming_file_and_key() {
    let tmp = project("type = \"vllm\"\nwire_api = \"responses\"\n", "x");
    for command in [&["validate", "tasks.toml"][..], &["run", "tasks.toml", "--out", "out"]] {
        let output = dracode(tmp.path()).args(command).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command:?}: {stderr}");
        assert!(stderr.contains("dracode.toml") && stderr.contains("`providers.mock.wire_api`") && stderr.contains("`vllm`"), "{stderr}");
    }
}

/// POSTs `body` to `server`'s Responses URL (with `path` instead when given) and key `key`: the
/// status and the error body.
async fn post(server: &ResponsesServer, path: Option<&str>, key: &str, body: &Value) -> (u16, Value) {
    let url = format!("{}{}", server.base_url(), path.unwrap_or("/responses"));
    // dracode's own client (it sets up TLS, which a bare `reqwest::Client` here would not).
    let http = dracode_llm::http::HttpClient::default();
    let reply = http.get().post(url).bearer_auth(key).json(body).send().await.unwrap();
    (reply.status().as_u16(), reply.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_local_server_refuses_what_the_api_refuses() {
    let script = vec![Reply::answer(vec![Out::Reasoning("r".into()), Out::call("call_1", "f", json!({}))], Tokens::new(1, 1))];
    let server = ResponsesServer::start(KEY, script).await;
    let user = json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]});
    let tool = json!({"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": false});
    let ok = json!({"model": "gpt-5-codex", "input": [user], "tools": [tool], "store": false, "include": ["reasoning.encrypted_content"]});
    let with = |key: &str, value: Value| {
        let mut body = ok.clone();
        body[key] = value;
        body
    };
    let refused = [
        (with("messages", json!([])), "Unknown parameter: 'messages'."),
        (with("max_output_tokens", json!(8)), "max_output_tokens"),
        (with("tools", json!([{"type": "function", "name": "f", "parameters": {}}])), "strict"),
        (with("input", json!([user, {"type": "function_call_output", "call_id": "call_9", "output": "x"}])), "No tool call found"),
        (with("input", json!([{"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "x"}])), "No tool output found"),
    ];
    for (body, expected) in refused {
        let (status, error) = post(&server, None, KEY, &body).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(error["error"]["type"], "invalid_request_error", "{error}");
        assert!(error["error"]["message"].as_str().unwrap().contains(expected), "{expected}: {error}");
    }
    assert_eq!(post(&server, Some("/chat/completions"), KEY, &ok).await.0, 404);
    assert_eq!(post(&server, None, "sk-wrong", &ok).await.0, 401);
    // Accepted: the reasoning it hands out must come back whole with the call it was made with.
    let (status, first) = post(&server, None, KEY, &ok).await;
    assert_eq!(status, 200, "{first}");
    let (reasoning, call) = (first["output"][0].clone(), first["output"][1].clone());
    let output = json!({"type": "function_call_output", "call_id": "call_1", "output": "ok"});
    let mut tampered = reasoning.clone();
    tampered["encrypted_content"] = json!("gAAAAB-forged");
    for (input, expected) in [
        (json!([user, call, output]), "without its required 'reasoning' item"),
        (json!([user, tampered, call, output]), "could not be verified"),
    ] {
        let (status, error) = post(&server, None, KEY, &with("input", input)).await;
        assert_eq!(status, 400);
        assert!(error["error"]["message"].as_str().unwrap().contains(expected), "{expected}: {error}");
    }
}
