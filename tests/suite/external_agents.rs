//! Real coding agents as a task's agent (`agent = "claude-code"`, `"codex"`): installed from the
//! npm registry at the pinned versions (tests/support/agents.rs), run by the real binary in the
//! task's sandbox against dracode's endpoint, which forwards to the strict local servers of the
//! provider's wire format — servers that accept only the real key, which the agent never has.

use crate::support::agents::{installed, path_with};
use crate::support::anthropic_server::{self, AnthropicServer};
use crate::support::cli::{dracode, events, finished, git_repo, read_jsonl};
use crate::support::gemini_server::{self, GeminiServer};
use crate::support::openai_server::{self, OpenAiServer};
use crate::support::responses_server::{self, Out, Reply, ResponsesServer};
use serde_json::{Value, json};
use std::path::Path;

/// The provider's real key: only dracode holds it.
const REAL_KEY: &str = "sk-real-provider-key-4f1d2c9a7b";

/// The planted bug and the check that catches it.
const BUGGY: &str = "def add(a, b):\n    return a - b\n";
const CHECK: &str = "python3 -c 'import calc; assert calc.add(2, 3) == 5'";
const FIX: &str = "sed -i 's/a - b/a + b/' calc.py";
/// What the agent runs to see its own environment and configuration.
const LOOK: &str = "env; cat \"$HOME\"/.claude.json \"$HOME\"/.codex/config.toml 2>/dev/null; ls -la \"$HOME\"";

/// A project: a repository with the planted bug, a config naming provider `mock` of `kind` at
/// `base_url`, and a manifest of one task run by `agent`.
fn project(kind: &str, base_url: &str, model: &str, agent: &str, extra: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let config = format!("[providers.mock]\ntype = \"{kind}\"\nbase_url = \"{base_url}\"\nmodel = \"{model}\"\n{extra}");
    std::fs::write(tmp.path().join("dracode.toml"), config).unwrap();
    let manifest = format!(
        "[defaults]\nrepo = \"repo\"\nprovider = \"mock\"\nagent = \"{agent}\"\ncheck = \"{}\"\ncheck_before = true\n\n[[tasks]]\nid = \"fix\"\nprompt = \"Fix add in calc.py\"\n",
        CHECK.replace('"', "\\\"")
    );
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    git_repo(&tmp.path().join("repo"), &[("calc.py", BUGGY)]);
    tmp
}

/// Adds `line` to the manifest's `[defaults]` in `dir`.
fn add_default(dir: &Path, line: &str) {
    let manifest = std::fs::read_to_string(dir.join("tasks.toml")).unwrap().replace("[[tasks]]", &format!("{line}\n\n[[tasks]]"));
    std::fs::write(dir.join("tasks.toml"), manifest).unwrap();
}

/// Runs the manifest with the agent's folder on PATH and the real key in both providers'
/// variables: exit code, stderr, results.jsonl.
async fn run(dir: &Path, bin: &Path, args: &[&str]) -> (i32, String, Vec<Value>) {
    let (dir, path) = (dir.to_path_buf(), path_with(bin));
    let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let output = dracode(&dir)
            .env("PATH", path)
            .env("ANTHROPIC_API_KEY", REAL_KEY)
            .env("OPENAI_API_KEY", REAL_KEY)
            .env("GEMINI_API_KEY", REAL_KEY)
            .args(&args)
            .output()
            .unwrap();
        let results = dir.join("out/results.jsonl");
        let all = if results.exists() { read_jsonl(&results) } else { Vec::new() };
        (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned(), all)
    })
    .await
    .unwrap()
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    crate::support::cli::files_containing(dir, needle).iter().map(|p| p.display().to_string()).collect()
}

/// What a passing fix looks like in the results: red before, green after, the server's tokens.
fn assert_fixed(all: &[Value], stderr: &str, input: u64, output: u64, calls: u64) {
    let task = finished(all, "fix");
    assert_eq!(task["status"], "passed", "{stderr}\n{task:#}");
    assert_eq!(task["check"]["before"], 1, "{task:#}");
    assert_eq!(task["check"]["exit_code"], 0, "{task:#}");
    assert_eq!(task["usage"]["input_tokens"], input, "{task:#}");
    assert_eq!(task["usage"]["output_tokens"], output, "{task:#}");
    assert_eq!(task["num_turns"], calls, "{task:#}");
    let version = crate::support::agents::pinned(task["agent"]["name"].as_str().unwrap_or_default()).2;
    assert_eq!(task["agent"]["version"], version, "{task:#}");
    let started: Vec<&str> = events(all, "tool.started").iter().map(|e| e["tool"].as_str().unwrap_or_default()).collect();
    assert!(!started.is_empty(), "the agent's tool calls are events");
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_fixes_a_planted_bug_and_never_holds_the_key() {
    let Some(bin) = installed("claude-code") else { return };
    let tokens = anthropic_server::Tokens::new;
    let server = AnthropicServer::start_with_key(
        REAL_KEY,
        vec![
            anthropic_server::ScriptedReply::tool_use("toolu_1", "Bash", json!({"command": FIX, "description": "fix"}), tokens(300, 20)),
            anthropic_server::ScriptedReply::tool_use("toolu_2", "Bash", json!({"command": LOOK, "description": "look"}), tokens(400, 20)),
            anthropic_server::ScriptedReply::text("Fixed add.", tokens(500, 5)),
        ],
    )
    .await;
    let tmp = project("anthropic", &server.base_url(), "claude-sonnet-4-5", "claude-code", "");
    let (code, stderr, all) = run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_fixed(&all, &stderr, 1200, 45, 3);
    let sent: Vec<String> = server.requests().iter().map(Value::to_string).collect();
    assert_eq!(sent.len(), 3);
    // The agent ran `env` and read its configuration; the results went back to the model.
    assert!(sent[2].contains("ANTHROPIC_BASE_URL=http://127.0.0.1:"), "{}", sent[2]);
    assert!(sent.iter().all(|body| !body.contains(REAL_KEY)), "the key reached the agent");
    assert_eq!(files_holding(tmp.path(), REAL_KEY), Vec::<String>::new(), "the key is in no file");
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_fixes_a_planted_bug_and_never_holds_the_key() {
    let Some(bin) = installed("codex") else { return };
    let tokens = responses_server::Tokens::new;
    let server = ResponsesServer::start(
        REAL_KEY,
        vec![
            Reply::answer(vec![Out::call("call_1", "exec_command", json!({"cmd": FIX}))], tokens(300, 20)),
            Reply::answer(vec![Out::call("call_2", "exec_command", json!({"cmd": LOOK}))], tokens(400, 20)),
            Reply::text("Fixed add.", tokens(500, 5)),
        ],
    )
    .await;
    let tmp = project("openai", &server.base_url(), "gpt-5.5", "codex", "wire_api = \"responses\"\n");
    let (code, stderr, all) = run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_fixed(&all, &stderr, 1200, 45, 3);
    let sent: Vec<String> = server.received().iter().filter_map(|r| r.body.as_ref().map(Value::to_string)).collect();
    assert_eq!(sent.len(), 3);
    assert!(sent[2].contains("DRACODE_AGENT_TOKEN=dracode-"), "{}", sent[2]);
    assert!(sent.iter().all(|body| !body.contains(REAL_KEY)), "the key reached the agent");
    assert_eq!(files_holding(tmp.path(), REAL_KEY), Vec::<String>::new(), "the key is in no file");
}

#[tokio::test(flavor = "multi_thread")]
async fn max_iterations_stops_a_real_agent_after_two_calls() {
    let Some(bin) = installed("claude-code") else { return };
    let tokens = anthropic_server::Tokens::new;
    let call = |n: u32| {
        anthropic_server::ScriptedReply::tool_use(
            &format!("toolu_{n}"),
            "Bash",
            json!({"command": format!("echo {n} >> log.txt")}),
            tokens(100, 10),
        )
    };
    let server = AnthropicServer::start_with_key(REAL_KEY, vec![call(1), call(2), call(3), call(4)]).await;
    let tmp = project("anthropic", &server.base_url(), "claude-sonnet-4-5", "claude-code", "");
    add_default(tmp.path(), "max_iterations = 2");
    let (code, stderr, all) = run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out"]).await;
    assert_ne!(code, 0, "{stderr}");
    let task = finished(&all, "fix");
    assert_eq!(task["status"], "max_iterations", "{stderr}\n{task:#}");
    assert_eq!(server.remaining(), 2, "the third call never reached the provider");
    assert_eq!(task["usage"]["input_tokens"], 200, "{task:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_on_an_openai_type_provider_passes_the_same_task() {
    let Some(bin) = installed("claude-code") else { return };
    let tokens = openai_server::Tokens::new;
    let server = OpenAiServer::start_with_key(
        REAL_KEY,
        vec![
            openai_server::ScriptedReply::tool_call("call_1", "Bash", json!({"command": FIX, "description": "fix"}), tokens(300, 20)),
            openai_server::ScriptedReply::text("Fixed add.", tokens(500, 5)),
        ],
    )
    .await;
    let tmp = project("openai", &server.base_url(), "qwen3-coder", "claude-code", "");
    let (code, stderr, all) = run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_fixed(&all, &stderr, 800, 25, 2);
    // Claude Code's Anthropic request became a Chat Completions request with its tools.
    let first = &server.requests()[0];
    assert!(first["tools"].as_array().unwrap().iter().any(|t| t["function"]["name"] == "Bash"), "{first}");
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_on_an_anthropic_provider_passes_the_same_task() {
    let Some(bin) = installed("codex") else { return };
    let tokens = anthropic_server::Tokens::new;
    let server = AnthropicServer::start_with_key(
        REAL_KEY,
        vec![
            anthropic_server::ScriptedReply::tool_use("toolu_1", "exec_command", json!({"cmd": FIX}), tokens(300, 20)),
            anthropic_server::ScriptedReply::text("Fixed add.", tokens(500, 5)),
        ],
    )
    .await;
    let tmp = project("anthropic", &server.base_url(), "claude-sonnet-4-5", "codex", "");
    let (code, stderr, all) = run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_fixed(&all, &stderr, 800, 25, 2);
    let first = &server.requests()[0];
    assert!(first["tools"].as_array().unwrap().iter().any(|t| t["name"] == "exec_command"), "{first}");
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_cli_completes_a_task() {
    let Some(bin) = installed("gemini-cli") else { return };
    let server = GeminiServer::start(
        REAL_KEY,
        vec![
            gemini_server::Reply::Calls(vec![("run_shell_command".into(), json!({"command": FIX}))], [300, 20, 0, 0]),
            gemini_server::Reply::Text("Fixed add.".into(), [500, 5, 0, 0]),
        ],
    )
    .await;
    let tmp = project("gemini", &server.base_url(), "gemini-2.5-pro", "gemini-cli", "");
    let (code, stderr, all) = run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_fixed(&all, &stderr, 800, 25, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_claude_code_run_replays_offline_to_the_same_verdict() {
    let Some(bin) = installed("claude-code") else { return };
    let tokens = anthropic_server::Tokens::new;
    let server = AnthropicServer::start_with_key(
        REAL_KEY,
        vec![
            anthropic_server::ScriptedReply::tool_use("toolu_1", "Bash", json!({"command": FIX, "description": "fix"}), tokens(300, 20)),
            anthropic_server::ScriptedReply::text("Fixed add.", tokens(500, 5)),
        ],
    )
    .await;
    let tmp = project("anthropic", &server.base_url(), "claude-sonnet-4-5", "claude-code", "");
    let recordings = tmp.path().join("recordings");
    let (code, stderr, recorded) =
        run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out", "--record", recordings.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{stderr}");
    drop(server);
    std::fs::remove_dir_all(tmp.path().join("out")).unwrap();
    let (code, stderr, replayed) =
        run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out", "--replay", recordings.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{stderr}");
    let (before, after) = (finished(&recorded, "fix"), finished(&replayed, "fix"));
    assert_eq!(after["status"], "passed", "{after:#}");
    assert_eq!((&after["check"]["before"], &after["check"]["exit_code"]), (&before["check"]["before"], &before["check"]["exit_code"]));
    assert_eq!(after["usage"], before["usage"]);
    // Priced as the model that answered when it was recorded, not as `replay` ($0).
    assert!(before["total_cost_usd"].as_f64().unwrap() > 0.0, "{before:#}");
    assert_eq!(after["total_cost_usd"], before["total_cost_usd"], "{after:#}");
    assert_eq!(after["files_changed"], before["files_changed"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_script_driving_claude_code_is_refused_as_the_built_in_agent_is() {
    let Some(bin) = installed("claude-code") else { return };
    let tokens = anthropic_server::Tokens::new;
    let tmp = tempfile::tempdir().unwrap();
    // The user's HOME is the test's folder (tests/support/cli.rs): a key the agent must not read.
    let secret = "PRIVATE-KEY-a1b2c3d4e5";
    std::fs::create_dir_all(tmp.path().join(".ssh")).unwrap();
    std::fs::write(tmp.path().join(".ssh/id_ed25519"), secret).unwrap();
    let outside = tmp.path().join("outside.txt");
    let attack = format!(
        "cat {home}/.ssh/id_ed25519; echo pwned > {out}; python3 -c \"import socket; socket.create_connection(('192.0.2.1', 80), timeout=3)\"; echo done",
        home = tmp.path().display(),
        out = outside.display()
    );
    let server = AnthropicServer::start_with_key(
        REAL_KEY,
        vec![
            anthropic_server::ScriptedReply::tool_use("toolu_1", "Bash", json!({"command": attack, "description": "x"}), tokens(300, 20)),
            anthropic_server::ScriptedReply::text("Done.", tokens(500, 5)),
        ],
    )
    .await;
    let project = project("anthropic", &server.base_url(), "claude-sonnet-4-5", "claude-code", "");
    for name in ["dracode.toml", "tasks.toml", "repo"] {
        std::fs::rename(project.path().join(name), tmp.path().join(name)).unwrap();
    }
    let (_, stderr, all) = run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out"]).await;
    let results: Vec<&Value> = events(&all, "tool.completed");
    assert_eq!(results.len(), 1, "{stderr}");
    let output = results[0]["output"].as_str().unwrap();
    assert!(output.contains("done"), "the script ran: {output}");
    assert!(!output.contains(secret), "the agent read the user's key: {output}");
    assert!(server.requests().iter().all(|r| !r.to_string().contains(secret)), "the key reached the model");
    assert!(!outside.exists(), "the agent wrote outside its workspace");
    let denied = events(&all, "network.denied");
    assert!(denied.iter().any(|d| d["host"] == "192.0.2.1" && d["phase"] == "agent"), "{denied:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn opencode_completes_a_task() {
    let Some(bin) = installed("opencode") else { return };
    let tokens = openai_server::Tokens::new;
    let server = OpenAiServer::start_with_key(
        REAL_KEY,
        vec![
            // opencode first asks a title for the session (no tools), then works.
            openai_server::ScriptedReply::text("Fix add", tokens(50, 3)),
            openai_server::ScriptedReply::tool_call("call_1", "bash", json!({"command": FIX, "description": "fix"}), tokens(300, 20)),
            openai_server::ScriptedReply::text("Fixed add.", tokens(500, 5)),
        ],
    )
    .await;
    let tmp = project("openai", &server.base_url(), "qwen3-coder", "opencode", "");
    let (code, stderr, all) = run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_fixed(&all, &stderr, 850, 28, 3);
    // Its plugin install from the npm registry, at every start, is refused (docs/src/agents.md).
    let denied = events(&all, "network.denied");
    assert!(denied.iter().all(|d| d["phase"] == "agent" && d["lookup"] == true), "{denied:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repair_is_a_follow_up_turn_in_the_agents_own_session() {
    let Some(bin) = installed("claude-code") else { return };
    let tokens = anthropic_server::Tokens::new;
    let wrong = "sed -i 's/a - b/a * b/' calc.py";
    let server = AnthropicServer::start_with_key(
        REAL_KEY,
        vec![
            anthropic_server::ScriptedReply::tool_use("toolu_1", "Bash", json!({"command": wrong, "description": "x"}), tokens(300, 20)),
            anthropic_server::ScriptedReply::text("Done.", tokens(400, 5)),
            anthropic_server::ScriptedReply::tool_use(
                "toolu_2",
                "Bash",
                json!({"command": "sed -i 's/a \\* b/a + b/' calc.py", "description": "x"}),
                tokens(500, 20),
            ),
            anthropic_server::ScriptedReply::text("Fixed add.", tokens(600, 5)),
        ],
    )
    .await;
    let tmp = project("anthropic", &server.base_url(), "claude-sonnet-4-5", "claude-code", "");
    add_default(tmp.path(), "check_repairs = 1");
    let (code, stderr, all) = run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out"]).await;
    assert_eq!(code, 0, "{stderr}");
    let task = finished(&all, "fix");
    assert_eq!((&task["status"], &task["repairs"]), (&json!("passed"), &json!(1)), "{task:#}");
    // The repair's first call holds the whole first round, then the check's failure.
    let repair = server.requests()[2].to_string();
    assert!(repair.contains("toolu_1") && repair.contains("Done."), "not the same session: {repair}");
    assert!(repair.contains("AssertionError") || repair.contains("exit code 1"), "{repair}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_is_not_installed_is_named_before_any_task_runs() {
    let tmp = project("anthropic", "http://127.0.0.1:9", "claude-sonnet-4-5", "codex", "");
    let empty = tempfile::tempdir().unwrap();
    let (code, stderr, _) = run(tmp.path(), empty.path(), &["validate", "tasks.toml"]).await;
    assert_eq!(code, 5, "{stderr}");
    assert!(
        stderr.contains("tasks.toml:8:1: task \"fix\": not configured: agent \"codex\": its program `codex` is not on PATH"),
        "{stderr}"
    );
    assert!(stderr.contains("npm install -g @openai/codex"), "{stderr}");
    let (code, stderr, all) = run(tmp.path(), empty.path(), &["run", "tasks.toml", "--out", "out"]).await;
    assert_eq!(code, 5, "{stderr}");
    let task = finished(&all, "fix");
    assert_eq!(task["status"], "not_configured", "{task:#}");
    assert!(events(&all, "turn.completed").is_empty());
    // An unknown agent is a manifest error.
    let manifest = std::fs::read_to_string(tmp.path().join("tasks.toml")).unwrap().replace("\"codex\"", "\"goose\"");
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    let (code, stderr, _) = run(tmp.path(), empty.path(), &["validate", "tasks.toml"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("field \"agent\": unknown agent \"goose\"; the agents are dracode, claude-code, codex, gemini-cli, opencode"),
        "{stderr}"
    );
}

/// An `[agents.NAME]` table running Gemini CLI as an Agent Client Protocol agent (`gemini --acp`).
const GEMINI_ACP: &str = r#"
[agents.gemini-acp]
command = ["gemini", "--acp", "-m", "{model}"]
protocol = "acp"
endpoint = "gemini"
env = { GEMINI_API_KEY = "{token}", GOOGLE_GEMINI_BASE_URL = "{endpoint}", GEMINI_CLI_TRUST_WORKSPACE = "true" }
files = { ".gemini/settings.json" = '{"security": {"auth": {"selectedType": "gemini-api-key"}}, "general": {"enableAutoUpdate": false}, "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false}, "tools": {"shell": {"enableInteractiveShell": false}}}' }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn an_acp_agent_fixes_a_planted_bug_and_repairs_in_the_same_session() {
    let Some(bin) = installed("gemini-cli") else { return };
    let wrong = "sed -i 's/a - b/a * b/' calc.py";
    let server = GeminiServer::start(
        REAL_KEY,
        vec![
            gemini_server::Reply::Calls(vec![("run_shell_command".into(), json!({"command": wrong}))], [300, 20, 0, 0]),
            gemini_server::Reply::Text("Done.".into(), [400, 5, 0, 0]),
            gemini_server::Reply::Calls(
                vec![("run_shell_command".into(), json!({"command": "sed -i 's/a \\* b/a + b/' calc.py"}))],
                [500, 20, 0, 0],
            ),
            gemini_server::Reply::Text("Fixed add.".into(), [600, 5, 0, 0]),
        ],
    )
    .await;
    let tmp = project("gemini", &server.base_url(), "gemini-2.5-pro", "gemini-acp", GEMINI_ACP);
    add_default(tmp.path(), "check_repairs = 1");
    let (code, stderr, all) = run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out"]).await;
    assert_eq!(code, 0, "{stderr}");
    let task = finished(&all, "fix");
    assert_eq!((&task["status"], &task["repairs"]), (&json!("passed"), &json!(1)), "{stderr}\n{task:#}");
    assert_eq!((&task["check"]["before"], &task["check"]["exit_code"]), (&json!(1), &json!(0)), "{task:#}");
    assert_eq!(task["usage"]["input_tokens"], 1800, "{task:#}");
    assert_eq!(task["agent"]["name"], "gemini-acp", "{task:#}");
    // One session: the repair's first call carries the first round's conversation.
    let (_, repair) = &server.requests()[2];
    let repair = repair.to_string();
    assert!(repair.contains("a * b") && repair.contains("Done."), "not the same session: {repair}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_acp_table_that_cannot_run_is_a_clear_error() {
    let empty = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[agents.goose]\ncommand = [\"goose\", \"acp\"]\nprotocol = \"acp\"\n",
            "goose",
            "[agents.goose] endpoint \"\": say which wire format the agent speaks: anthropic-messages, openai-responses, chat-completions, gemini",
        ),
        ("[agents.goose]\nprotocol = \"acp\"\nendpoint = \"gemini\"\n", "goose", "[agents.goose] needs a `command`"),
        (
            "[agents.goose]\ncommand = [\"goose\"]\nprotocol = \"mcp\"\nendpoint = \"gemini\"\n",
            "goose",
            "[agents.goose] protocol \"mcp\": the one protocol is \"acp\"",
        ),
        (
            "[agents.codex]\ncommand = [\"codex\"]\nprotocol = \"acp\"\n",
            "codex",
            "[agents.codex] sets `protocol`: codex is run by its own command line",
        ),
    ];
    for (table, agent, message) in cases {
        let tmp = project("anthropic", "http://127.0.0.1:9", "claude-sonnet-4-5", agent, table);
        let (code, stderr, _) = run(tmp.path(), empty.path(), &["validate", "tasks.toml", "--offline"]).await;
        assert_eq!(code, 2, "{table}: {stderr}");
        assert!(stderr.contains(&format!("task \"fix\": field \"agent\": {message}")), "{table}: {stderr}");
    }
    // A well-formed table whose program is missing: not configured.
    let tmp = project(
        "anthropic",
        "http://127.0.0.1:9",
        "claude-sonnet-4-5",
        "goose",
        "[agents.goose]\ncommand = [\"goose\", \"acp\"]\nprotocol = \"acp\"\nendpoint = \"anthropic-messages\"\n",
    );
    let (code, stderr, _) = run(tmp.path(), empty.path(), &["validate", "tasks.toml"]).await;
    assert_eq!(code, 5, "{stderr}");
    assert!(
        stderr.contains("agent \"goose\": its program `goose` is not on PATH; install it or give its path in `[agents.goose] command`"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_could_pass_the_cost_cap_is_refused_before_it_is_sent() {
    let Some(bin) = installed("codex") else { return };
    let server = ResponsesServer::start(REAL_KEY, vec![Reply::text("Fixed add.", responses_server::Tokens::new(500, 5))]).await;
    let tmp = project("openai", &server.base_url(), "gpt-5.5", "codex", "wire_api = \"responses\"\n");
    add_default(tmp.path(), "max_cost_usd = 0.0001");
    let (code, stderr, all) = run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out"]).await;
    assert_ne!(code, 0, "{stderr}");
    let task = finished(&all, "fix");
    assert_eq!(task["status"], "budget_exceeded", "{stderr}\n{task:#}");
    assert!(task["error"]["message"].as_str().unwrap().contains("max_cost_usd of $0.0001"), "{task:#}");
    assert_eq!(server.remaining(), 1, "the call was never sent to the provider");
    assert_eq!(task["usage"]["requests"], 0, "{task:#}");
}

/// The live processes whose command line holds `needle` (zombies excepted).
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let live = |pid: &u32| std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(live)
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle)))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_past_its_timeout_is_stopped_and_nothing_of_it_runs_on() {
    let Some(bin) = installed("claude-code") else { return };
    let slow = anthropic_server::ScriptedReply::text("too late", anthropic_server::Tokens::new(10, 1))
        .with_delay(std::time::Duration::from_secs(30));
    let server = AnthropicServer::start_with_key(REAL_KEY, vec![slow]).await;
    let tmp = project("anthropic", &server.base_url(), "claude-sonnet-4-5", "claude-code", "");
    let marker = format!("marker-{}", tmp.path().file_name().unwrap().to_string_lossy());
    let manifest =
        std::fs::read_to_string(tmp.path().join("tasks.toml")).unwrap().replace("Fix add in calc.py", &format!("Fix add ({marker})"));
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    add_default(tmp.path(), "timeout = \"3s\"");
    let started = std::time::Instant::now();
    let (_, stderr, all) = run(tmp.path(), &bin, &["run", "tasks.toml", "--out", "out"]).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(25), "the run waited for the slow answer");
    let task = finished(&all, "fix");
    assert_eq!(task["status"], "timeout", "{stderr}\n{task:#}");
    // Stopping takes at most the supervisor's 2 s grace (SIGTERM, then SIGKILL): 6 s is ample.
    let mut left = processes_mentioning(&marker);
    for _ in 0..60 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        left = processes_mentioning(&marker);
    }
    let described: Vec<String> =
        left.iter().map(|pid| std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default().replace('\0', " ")).collect();
    assert!(left.is_empty(), "the agent runs on after its task ended: {described:?}");
}
