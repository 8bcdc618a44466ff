//! MCP on the wire, through the real binary and our scripted server
//! (`tests/fixtures/mcp/scripted_server.py`), which speaks the current, stateless revision
//! (2026-07-28), the `initialize` revisions, or both, and logs what it received: the version
//! dracode agrees on with each, the `_meta`, headers and `clientInfo` it sends, `headers` and
//! bearer tokens of `url` servers (and that their values never reach an artifact), the one line
//! an authentication failure gives, and what the model reads when a server asks for input or
//! returns an image.

use super::mcp_servers::{KillOnDrop, TASK, configure, offered, project, scripted_server, tool_answer};
use crate::support::cli::{dracode, finished, read_jsonl};
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens, ToolCall};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const SCRIPT: &str = "tests/fixtures/mcp/scripted_server.py";

/// Starts the scripted server on HTTP with `args`; returns it (killed when dropped) and its URL.
fn http_server(dir: &Path, tag: &str, args: &[&str]) -> (KillOnDrop, String) {
    let port_file = dir.join(format!("{tag}.port"));
    let script = crate::support::cli::crate_root().join(SCRIPT);
    let child = std::process::Command::new("python3").arg(&script).arg("--http").arg(&port_file).args(args).spawn().unwrap();
    let guard = KillOnDrop(child);
    for _ in 0..300 {
        if port_file.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let port = std::fs::read_to_string(&port_file).expect("the HTTP MCP server wrote its port");
    (guard, format!("http://127.0.0.1:{port}/mcp"))
}

/// Runs `dracode run tasks.toml` in `dir` with `env` added; returns exit code, stdout+stderr,
/// and the events.
pub(super) async fn run_with(dir: &Path, env: &[(&str, &str)]) -> (i32, String, Vec<Value>) {
    let dir = dir.to_path_buf();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        let output = dracode(&dir).env("OPENAI_API_KEY", "sk-test").envs(env).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
        let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        let results = dir.join("out/results.jsonl");
        let all = if results.exists() { read_jsonl(&results) } else { Vec::new() };
        (output.status.code().unwrap_or(-1), printed, all)
    })
    .await
    .unwrap()
}

/// Every message a server logged.
fn logged(path: &Path) -> Vec<Value> {
    read_jsonl(path)
}

fn methods(log: &[Value]) -> Vec<String> {
    log.iter().filter_map(|m| m["method"].as_str()).map(str::to_string).collect()
}

fn log_arg(path: &Path) -> String {
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn servers_on_the_current_spec_and_on_2025_11_25_are_each_spoken_to_in_their_version_as_dracode() {
    let (tmp, repo) = project();
    let dir = tmp.path().canonicalize().unwrap();
    let mut logs: Vec<PathBuf> =
        ["modern-http", "legacy-http", "modern-stdio", "pinned"].iter().map(|n| dir.join(format!("{n}.log"))).collect();
    // The stdio server runs confined to the workspace: its log is there.
    logs[2] = repo.join("modern-stdio.log");
    let (_a, modern_url) = http_server(&dir, "modern", &["--era", "modern", "--log", &log_arg(&logs[0])]);
    let (_b, legacy_url) = http_server(&dir, "legacy", &["--era", "legacy", "--versions", "2025-11-25", "--log", &log_arg(&logs[1])]);
    let (_c, dual_url) = http_server(&dir, "dual", &["--era", "dual", "--log", &log_arg(&logs[3])]);
    let calls = ["mhttp", "lhttp", "mstdio", "pinned"].map(|s| ToolCall::new(&format!("c_{s}"), &format!("{s}__echo"), json!({"text": s})));
    let llm = OpenAiServer::start(vec![
        ScriptedReply::tool_calls(calls.to_vec(), Tokens::new(10, 1)),
        ScriptedReply::text("done", Tokens::new(10, 1)),
    ])
    .await;
    let servers = format!(
        "[mcp_servers.mhttp]\nurl = \"{modern_url}\"\n[mcp_servers.lhttp]\nurl = \"{legacy_url}\"\n\
         [mcp_servers.pinned]\nurl = \"{dual_url}\"\nprotocol_version = \"2025-11-25\"\n{}",
        scripted_server("mstdio", &["--era", "modern", "--log", &log_arg(&logs[2])], "")
    );
    configure(&dir, &llm, &format!("{servers}{TASK}"));

    let (code, printed, all) = run_with(&dir, &[]).await;
    assert_eq!(code, 0, "{printed}");
    assert_eq!(finished(&all, "t")["status"], "passed", "{printed}");
    let answers = llm.requests();
    for s in ["mhttp", "lhttp", "mstdio", "pinned"] {
        assert!(tool_answer(&answers[1], &format!("c_{s}")).starts_with(&format!("echo: {s} (cwd")), "{s}: {:?}", answers[1]);
    }
    let version = env!("CARGO_PKG_VERSION");
    // The current revision: no handshake; every request names its version and dracode in
    // `_meta`, and on HTTP mirrors version, method and tool name in headers.
    for log in [&logs[0], &logs[2]] {
        let log = logged(log);
        assert!(!methods(&log).contains(&"initialize".to_string()), "{log:?}");
        assert!(methods(&log).contains(&"tools/call".to_string()), "{log:?}");
        for request in log.iter().filter(|m| m["id"].is_number()) {
            let meta = &request["params"]["_meta"];
            assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{request}");
            assert_eq!(meta["io.modelcontextprotocol/clientInfo"], json!({"name": "dracode", "version": version}), "{request}");
        }
    }
    let call = logged(&logs[0]).into_iter().find(|m| m["method"] == "tools/call").unwrap();
    assert_eq!(call["headers"]["mcp-protocol-version"], "2026-07-28");
    assert_eq!((call["headers"]["mcp-method"].as_str(), call["headers"]["mcp-name"].as_str()), (Some("tools/call"), Some("echo")));
    // 2025-11-25: `initialize` naming dracode, then its session and version on every request.
    for log in [&logs[1], &logs[3]] {
        let log = logged(log);
        let init = log.iter().find(|m| m["method"] == "initialize").unwrap_or_else(|| panic!("no initialize in {log:?}"));
        assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
        assert_eq!(init["params"]["clientInfo"], json!({"name": "dracode", "version": version}));
        let call = log.iter().find(|m| m["method"] == "tools/call").unwrap();
        assert_eq!(
            (call["headers"]["mcp-protocol-version"].as_str(), call["headers"]["mcp-session-id"].as_str()),
            (Some("2025-11-25"), Some("scripted-session"))
        );
        assert!(call["params"].get("_meta").is_none(), "{call}");
    }
    // The pinned server speaks both eras: `protocol_version` skipped the probe.
    assert_eq!(methods(&logged(&logs[3]))[0], "initialize");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_version_is_negotiated_from_what_the_server_says_it_supports() {
    let (tmp, _repo) = project();
    let dir = tmp.path().canonicalize().unwrap();
    let log = dir.join("old.log");
    // Speaks only 2025-06-18: refuses the current revision's probe as an unknown method, and
    // answers `initialize` 2025-11-25 with its own version.
    let (_s, url) = http_server(&dir, "old", &["--era", "legacy", "--versions", "2025-06-18", "--log", &log_arg(&log)]);
    let llm = OpenAiServer::start(vec![
        ScriptedReply::tool_call("c1", "old__echo", json!({"text": "hi"}), Tokens::new(10, 1)),
        ScriptedReply::text("done", Tokens::new(10, 1)),
    ])
    .await;
    configure(&dir, &llm, &format!("[mcp_servers.old]\nurl = \"{url}\"\n\n{TASK}"));
    let (code, printed, _all) = run_with(&dir, &[]).await;
    assert_eq!(code, 0, "{printed}");
    let log = logged(&log);
    assert_eq!(methods(&log)[..3], ["server/discover", "initialize", "notifications/initialized"]);
    let call = log.iter().find(|m| m["method"] == "tools/call").unwrap();
    assert_eq!(call["headers"]["mcp-protocol-version"], "2025-06-18");
}

const HEADER_VALUE: &str = "opensesame-plain-words";
const TOKEN: &str = "tok-7Hq2Lx9Pz4Rw";

#[tokio::test(flavor = "multi_thread")]
async fn url_servers_get_their_headers_and_bearer_token_whose_values_never_reach_an_artifact() {
    let (tmp, _repo) = project();
    let dir = tmp.path().canonicalize().unwrap();
    let header = format!("X-Team-Key: {HEADER_VALUE}");
    let bearer = format!("Authorization: Bearer {TOKEN}");
    // Careless servers that echo the credential back into the tool result.
    let (_a, keyed) = http_server(&dir, "keyed", &["--era", "modern", "--require-header", &header, "--leak-header", "X-Team-Key"]);
    let (_b, tokened) = http_server(&dir, "tokened", &["--require-header", &bearer, "--leak-header", "Authorization"]);
    let llm = OpenAiServer::start(vec![
        ScriptedReply::tool_calls(
            vec![ToolCall::new("c1", "keyed__echo", json!({"text": "k"})), ToolCall::new("c2", "tokened__echo", json!({"text": "t"}))],
            Tokens::new(10, 1),
        ),
        ScriptedReply::text("done", Tokens::new(10, 1)),
    ])
    .await;
    let servers = format!(
        "[mcp_servers.keyed]\nurl = \"{keyed}\"\nheaders = {{ \"X-Team-Key\" = \"${{TEAM_HEADER}}\" }}\n\
         [mcp_servers.tokened]\nurl = \"{tokened}\"\nbearer_token_env_var = \"SERVER_PASS\"\n\n"
    );
    configure(&dir, &llm, &format!("{servers}{TASK}"));
    let (code, printed, all) = run_with(&dir, &[("TEAM_HEADER", HEADER_VALUE), ("SERVER_PASS", TOKEN)]).await;
    assert_eq!(code, 0, "{printed}");
    assert_eq!(finished(&all, "t")["status"], "passed");
    let answers = llm.requests();
    assert!(tool_answer(&answers[1], "c1").starts_with("echo: k"), "{:?}", answers[1]);
    assert!(tool_answer(&answers[1], "c2").starts_with("echo: t"), "{:?}", answers[1]);
    // The value reached the server (it answered) but the model, the terminal and every file
    // dracode wrote show it masked.
    assert!(tool_answer(&answers[1], "c1").ends_with("[X-Team-Key: [REDACTED]]"), "{}", tool_answer(&answers[1], "c1"));
    assert_nowhere(&dir.join("out"), &printed, &[HEADER_VALUE, TOKEN]);
    for request in &answers {
        assert!(!request.to_string().contains(HEADER_VALUE) && !request.to_string().contains(TOKEN), "sent to the model: {request}");
    }
}

/// Neither `printed` nor any file under `out` contains any of `secrets` (at least one).
pub(super) fn assert_nowhere(out: &Path, printed: &str, secrets: &[impl AsRef<str>]) {
    assert!(!secrets.is_empty());
    let secrets: Vec<&str> = secrets.iter().map(AsRef::as_ref).collect();
    for secret in &secrets {
        assert!(!printed.contains(secret), "{secret} printed: {printed}");
    }
    let mut stack = vec![out.to_path_buf()];
    let mut files = 0;
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            files += 1;
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            for secret in &secrets {
                assert!(!text.contains(secret), "{secret} written to {}", path.display());
            }
        }
    }
    assert!(files > 3, "no artifacts under {}", out.display());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_authentication_failure_is_one_line_naming_the_server_and_what_to_configure() {
    for (settings, expected) in [
        (
            "",
            "MCP server \"web\" failed to start: authentication required (HTTP 401): give it credentials with `headers`, `bearer_token_env_var` or `oauth` under [mcp_servers.web]",
        ),
        (
            "bearer_token_env_var = \"SERVER_PASS\"\n",
            "MCP server \"web\" failed to start: the server refused dracode's credentials (HTTP 401): check `headers`, `bearer_token_env_var` or `oauth` under [mcp_servers.web]",
        ),
    ] {
        let (tmp, _repo) = project();
        let dir = tmp.path().canonicalize().unwrap();
        let (_s, url) = http_server(&dir, "web", &["--era", "modern", "--require-header", "Authorization: Bearer right-token-123"]);
        let llm = OpenAiServer::start(vec![ScriptedReply::text("never asked", Tokens::new(1, 1))]).await;
        configure(&dir, &llm, &format!("[mcp_servers.web]\nurl = \"{url}\"\n{settings}\n{TASK}"));
        let (code, printed, all) = run_with(&dir, &[("SERVER_PASS", "wrong-token-456")]).await;
        assert_ne!(code, 0);
        let task = finished(&all, "t");
        assert_eq!(task["error"]["kind"], "tool", "{printed}");
        assert_eq!(task["error"]["message"], expected);
        for noise in ["rmcp", "reqwest", "Transport", "WARN"] {
            assert!(!printed.contains(noise), "{noise} in: {printed}");
        }
        assert!(!printed.contains("wrong-token-456"), "{printed}");
    }
}

/// `[mcp_servers.NAME]` of the scripted server on HTTP at `url`, with `settings`.
fn http_entry(name: &str, url: &str, settings: &str) -> String {
    format!("[mcp_servers.{name}]\nurl = \"{url}\"\ntimeout = \"20s\"\n{settings}\n")
}

const DECLINED: &str = "[dracode: the MCP server asked for user input (\"Which branch?\"); dracode runs unattended and declined]";

#[tokio::test(flavor = "multi_thread")]
async fn elicitation_in_the_middle_of_a_call_is_declined_at_once_on_every_transport_and_the_model_is_told() {
    let (tmp, _repo) = project();
    let dir = tmp.path().canonicalize().unwrap();
    let log = dir.join("lhttp.log");
    let (_s, modern) = http_server(&dir, "modern", &["--era", "modern"]);
    // A server slow to answer the GET: the stream must be open before the call asks on it.
    let (_l, legacy) = http_server(&dir, "lhttp", &["--era", "legacy", "--get-delay", "0.5", "--log", &log_arg(&log)]);
    let calls = vec![
        ToolCall::new("c1", "legacy__ask", json!({})),
        ToolCall::new("c2", "modern__ask", json!({})),
        ToolCall::new("c3", "modern__picture", json!({})),
        ToolCall::new("c4", "lhttp__ask", json!({})),
    ];
    let llm =
        OpenAiServer::start(vec![ScriptedReply::tool_calls(calls, Tokens::new(10, 1)), ScriptedReply::text("done", Tokens::new(10, 1))])
            .await;
    let servers =
        format!("{}{}{}", http_entry("modern", &modern, ""), http_entry("lhttp", &legacy, ""), scripted_server("legacy", &[], ""));
    configure(&dir, &llm, &format!("{servers}{TASK}"));
    let started = std::time::Instant::now();
    let (code, printed, _all) = run_with(&dir, &[]).await;
    assert_eq!(code, 0, "{printed}");
    let answers = &llm.requests()[1];
    // 2025-11-25 over stdio: the server waited for the answer to its request and got a decline.
    assert_eq!(tool_answer(answers, "c1"), format!("client answered: {{\"action\": \"decline\"}}\n{DECLINED}"));
    // The current revision: the call is retried with the elicitation declined and the state kept.
    assert_eq!(tool_answer(answers, "c2"), format!("client answered: {{\"action\": \"decline\"}} (state asked-once)\n{DECLINED}"));
    assert_eq!(tool_answer(answers, "c3"), "a red dot:\n[image content (image/png) not shown: dracode passes only text to the model]");
    assert!(offered(&llm.requests()[0]).contains(&"modern__picture".to_string()));
    // 2025-11-25 over HTTP: the question came on the server's own (GET) stream; the answer was
    // posted back with the session and version, and the call finished.
    assert_eq!(tool_answer(answers, "c4"), format!("client answered: {{\"action\": \"decline\"}}\n{DECLINED}"));
    let log = logged(&log);
    let init = log.iter().find(|m| m["method"] == "initialize").unwrap();
    assert_eq!(init["params"]["capabilities"], json!({"elicitation": {"form": {}}}));
    let answer = log.iter().find(|m| m.get("result").is_some()).expect("the client answered the server's request");
    assert_eq!(answer["result"], json!({"action": "decline"}));
    assert_eq!(
        (answer["headers"]["mcp-session-id"].as_str(), answer["headers"]["mcp-protocol-version"].as_str()),
        (Some("scripted-session"), Some("2025-11-25"))
    );
    // A hang detector only: the HTTP call would otherwise end at its 20 s limit.
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn elicitation_accept_defaults_accepts_with_the_schema_defaults_or_declines_when_a_required_field_has_none() {
    let (tmp, _repo) = project();
    let dir = tmp.path().canonicalize().unwrap();
    let (_s, modern) = http_server(&dir, "modern", &["--era", "modern"]);
    let (_l, legacy) = http_server(&dir, "lhttp", &["--era", "legacy"]);
    let calls = vec![
        ToolCall::new("c1", "legacy__ask", json!({"form": "defaults"})),
        ToolCall::new("c2", "legacy__ask", json!({"form": "required"})),
        ToolCall::new("c3", "modern__ask", json!({"form": "defaults"})),
        ToolCall::new("c4", "lhttp__ask", json!({"form": "defaults"})),
        ToolCall::new("c5", "lhttp__ask", json!({"form": "required"})),
    ];
    let llm =
        OpenAiServer::start(vec![ScriptedReply::tool_calls(calls, Tokens::new(10, 1)), ScriptedReply::text("done", Tokens::new(10, 1))])
            .await;
    let accept = "elicitation = \"accept_defaults\"";
    let servers = format!(
        "{}{}{}",
        http_entry("modern", &modern, accept),
        http_entry("lhttp", &legacy, accept),
        scripted_server("legacy", &[], accept)
    );
    configure(&dir, &llm, &format!("{servers}{TASK}"));
    let (code, printed, _all) = run_with(&dir, &[]).await;
    assert_eq!(code, 0, "{printed}");
    let answers = &llm.requests()[1];
    let accepted = "{\"action\": \"accept\", \"content\": {\"branch\": \"main\", \"depth\": 3, \"force\": false}}";
    let said = "[dracode: the MCP server asked for user input (\"Which branch?\"); dracode runs unattended and";
    let accepted_note = format!("{said} accepted with the schema's defaults: {{\"branch\":\"main\",\"depth\":3,\"force\":false}}]");
    let declined_note = format!("{said} declined (the required field \"token\" has no default)]");
    for (call, sent) in [("c1", ""), ("c3", " (state asked-once)"), ("c4", "")] {
        assert_eq!(tool_answer(answers, call), format!("client answered: {accepted}{sent}\n{accepted_note}"), "{call}");
    }
    for call in ["c2", "c5"] {
        assert_eq!(tool_answer(answers, call), format!("client answered: {{\"action\": \"decline\"}}\n{declined_note}"), "{call}");
    }
}

#[test]
fn an_unknown_elicitation_setting_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = "[mcp_servers.s]\ncommand = \"x\"\nelicitation = \"ask_the_user\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"p\"\n";
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("tasks.toml:"), "{stderr}");
    assert!(stderr.contains("`elicitation` must be \"decline\" or \"accept_defaults\", not \"ask_the_user\""), "{stderr}");
}
