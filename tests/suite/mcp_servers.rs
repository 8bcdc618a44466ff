//! `[mcp_servers.NAME]`: MCP servers' tools offered to the model as `NAME__tool`, through the
//! real binary and a strict OpenAI-format mock that records what reached the model. One test
//! uses a real server nobody here wrote (`@modelcontextprotocol/server-filesystem` from npm,
//! installed on first use into the test cache); the others a tiny scripted server of ours
//! (`tests/fixtures/mcp/scripted_server.py`) for the error paths.

use crate::support::cli::{dracode, events, finished, git_repo, read_jsonl};
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
use crate::support::sandbox::alive;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The npm package of the real server, and the version pinned so a new release cannot change
/// what is tested.
const FS_PACKAGE: &str = "@modelcontextprotocol/server-filesystem";
const FS_VERSION: &str = "2026.8.31";

/// A project folder with a git repo `repo` (tasks run in it in place); returns the folder and
/// the repo's real path.
pub(super) fn project() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    git_repo(&tmp.path().join("repo"), &[("notes.txt", "the secret word is marmalade\n")]);
    let repo = tmp.path().join("repo").canonicalize().unwrap();
    (tmp, repo)
}

/// Writes a dracode.toml pointing the `mock` provider at `server`, and the manifest.
/// Writes `dracode.toml` (the mock provider) and `tasks.toml`; the servers' own files (the
/// scripted server, the installed filesystem server) are outside every workspace, so the tasks
/// list them in `read_paths` for their confined servers to read.
pub(super) fn configure(dir: &Path, server: &OpenAiServer, manifest: &str) {
    let fixtures = crate::support::cli::crate_root().join("tests/fixtures/mcp");
    let installed = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let read_paths = format!("[defaults]\nread_paths = [{:?}, {:?}]\n", fixtures.display().to_string(), installed.display().to_string());
    let manifest = manifest.replacen("[defaults]\n", &read_paths, 1);
    std::fs::write(
        dir.join("dracode.toml"),
        format!("provider = \"mock\"\n[providers.mock]\ntype = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o\"\n", server.base_url()),
    )
    .unwrap();
    std::fs::write(dir.join("tasks.toml"), manifest).unwrap();
}

pub(super) async fn run(dir: &Path) -> (i32, String, Vec<Value>) {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let output = dracode(&dir).env("OPENAI_API_KEY", "sk-test").args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let results = dir.join("out/results.jsonl");
        let all = if results.exists() { read_jsonl(&results) } else { Vec::new() };
        (output.status.code().unwrap_or(-1), stderr, all)
    })
    .await
    .unwrap()
}

/// The names of the tools offered in a request.
pub(super) fn offered(body: &Value) -> Vec<String> {
    body["tools"].as_array().map(|t| t.iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect()).unwrap_or_default()
}

/// The content of the `tool` message answering `call_id` in a request.
pub(super) fn tool_answer(body: &Value, call_id: &str) -> String {
    let messages = body["messages"].as_array().unwrap();
    let answer = messages.iter().find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id);
    answer.and_then(|m| m["content"].as_str()).unwrap_or_else(|| panic!("no tool answer to {call_id} in {body}")).to_string()
}

/// Processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| alive(*pid))
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle)))
        .collect()
}

/// The real filesystem server's entry point, installed with npm into the test cache on first
/// use; `None` (after printing why) when npm or the registry is not available — unless
/// `DRACODE_REQUIRE_MCP_SERVER` is set (CI), which makes that a failure.
fn filesystem_server() -> Option<PathBuf> {
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mcp-server-filesystem-{FS_VERSION}"));
    let entry = prefix.join("node_modules").join(FS_PACKAGE).join("dist/index.js");
    if !entry.is_file() {
        let installed = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
            .arg(&prefix)
            .arg(format!("{FS_PACKAGE}@{FS_VERSION}"))
            .output();
        let why = match installed {
            Ok(out) if out.status.success() && entry.is_file() => None,
            Ok(out) => Some(format!("npm install {FS_PACKAGE}@{FS_VERSION} failed: {}", String::from_utf8_lossy(&out.stderr))),
            Err(e) => Some(format!("cannot run npm: {e}")),
        };
        if let Some(why) = why {
            assert!(std::env::var_os("DRACODE_REQUIRE_MCP_SERVER").is_none(), "{why}");
            eprintln!("skipping the real MCP server test: {why}");
            return None;
        }
    }
    Some(entry)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_filesystem_mcp_server_reads_and_writes_the_workspace_for_the_model() {
    let Some(entry) = filesystem_server() else { return };
    let (tmp, repo) = project();
    let server = OpenAiServer::start(vec![
        ScriptedReply::tool_call("call_1", "fs__read_text_file", json!({"path": repo.join("notes.txt")}), Tokens::new(100, 10)),
        ScriptedReply::tool_call(
            "call_2",
            "fs__write_file",
            json!({"path": repo.join("answer.txt"), "content": "marmalade\n"}),
            Tokens::new(120, 10),
        ),
        ScriptedReply::text("The word is marmalade.", Tokens::new(140, 5)),
    ])
    .await;
    let manifest = format!(
        "[mcp_servers.fs]\ncommand = \"node\"\nargs = [{entry:?}, \".\"]\n\n\
         [defaults]\nrepo = \"repo\"\nisolation = \"none\"\nrequire_change = false\n\n[[tasks]]\nid = \"read\"\nprompt = \"What is the secret word?\"\n",
        entry = entry.display().to_string()
    );
    configure(tmp.path(), &server, &manifest);

    let (code, stderr, all) = run(tmp.path()).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(finished(&all, "read")["status"], "passed", "{stderr}");
    let requests = server.requests();
    let tools = offered(&requests[0]);
    assert!(tools.contains(&"fs__read_text_file".to_string()) && tools.contains(&"read_file".to_string()), "{tools:?}");
    // The file's text went from the MCP server back to the model.
    assert!(tool_answer(&requests[1], "call_1").contains("the secret word is marmalade"), "{}", requests[1]);
    // The server ran in the workspace and could write there.
    assert_eq!(std::fs::read_to_string(repo.join("answer.txt")).unwrap(), "marmalade\n");
    let completed = events(&all, "tool.completed");
    assert!(completed.iter().any(|e| e["name"] == "fs__read_text_file" && e["ok"] == true), "{completed:?}");
    // Nothing of the server is left running.
    assert_eq!(processes_mentioning(&entry.display().to_string()), Vec::<u32>::new());
}

/// `[mcp_servers.NAME]` running our scripted server with `extra` arguments.
pub(super) fn scripted_server(name: &str, extra: &[&str], settings: &str) -> String {
    let script = crate::support::cli::crate_root().join("tests/fixtures/mcp/scripted_server.py");
    let mut args = vec![format!("{:?}", script.display().to_string())];
    args.extend(extra.iter().map(|a| format!("{a:?}")));
    format!("[mcp_servers.{name}]\ncommand = \"python3\"\nargs = [{}]\n{settings}\n", args.join(", "))
}

pub(super) const TASK: &str =
    "[defaults]\nrepo = \"repo\"\nisolation = \"none\"\nrequire_change = false\n\n[[tasks]]\nid = \"t\"\nprompt = \"Use the tools.\"\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_scripted_server_answers_under_sanitized_names_with_errors_and_timeouts_the_model_sees() {
    let confined = crate::support::sandbox::supported();
    let (tmp, repo) = project();
    let outside = tmp.path().canonicalize().unwrap();
    let server = OpenAiServer::start(vec![
        ScriptedReply::tool_call("c1", "s__echo", json!({"text": "hello"}), Tokens::new(10, 1)),
        ScriptedReply::tool_call("c2", "s__fail", json!({}), Tokens::new(10, 1)),
        ScriptedReply::tool_call("c3", "s__hang", json!({}), Tokens::new(10, 1)),
        ScriptedReply::tool_call("c4", "s__dotted_name_with_spaces", json!({}), Tokens::new(10, 1)),
        ScriptedReply::tool_call("c5", "s__touch", json!({"path": outside.join("escaped.txt")}), Tokens::new(10, 1)),
        ScriptedReply::text("done", Tokens::new(10, 1)),
    ])
    .await;
    let settings = "timeout = \"1s\"\nenv = { PID_FILE = \"server.pid\" }";
    configure(tmp.path(), &server, &format!("{}{TASK}", scripted_server("s", &[], settings)));

    let (code, stderr, all) = run(tmp.path()).await;
    assert_eq!(code, 0, "{stderr}");
    // Stopping the server (and the hung call's cancellation) logs nothing on the terminal.
    assert!(!stderr.contains("WARN") && !stderr.contains("ERROR"), "{stderr}");
    let requests = server.requests();
    let tools = offered(&requests[0]);
    for name in ["s__echo", "s__fail", "s__hang", "s__dotted_name_with_spaces"] {
        assert!(tools.contains(&name.to_string()), "{name} not in {tools:?}");
    }
    assert_eq!(tool_answer(&requests[1], "c1"), format!("echo: hello (cwd {})", repo.display()));
    assert_eq!(tool_answer(&requests[2], "c2"), "Error [MCP_TOOL_ERROR]: the scripted tool failed");
    let timed_out = tool_answer(&requests[3], "c3");
    assert!(timed_out.starts_with("Error [TIMEOUT]: s__hang did not answer within 1s"), "{timed_out}");
    assert_eq!(tool_answer(&requests[4], "c4"), "called dotted.name with spaces");
    // The server runs confined like run_command: it cannot write outside the workspace.
    if confined {
        let refused = tool_answer(&requests[5], "c5");
        assert!(refused.starts_with("Error [MCP_TOOL_ERROR]: refused:"), "{refused}");
        assert!(!outside.join("escaped.txt").exists());
    }
    let failed: Vec<_> = events(&all, "tool.completed").into_iter().filter(|e| e["ok"] == false).map(|e| e["name"].clone()).collect();
    assert_eq!(failed[..2], [json!("s__fail"), json!("s__hang")]);
    // The server's own env reached it, and it was stopped with the task.
    let pid: u32 = std::fs::read_to_string(repo.join("server.pid")).unwrap().trim().parse().unwrap();
    assert!(!alive(pid), "the MCP server {pid} outlived dracode");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_start_or_list_its_tools_ends_the_task_as_a_tool_error() {
    for (extra, command, expected) in [
        (vec!["--crash-on-list"], None, "crashing on tools/list as asked"),
        (vec![], Some("no-such-mcp-server-binary"), "could not start no-such-mcp-server-binary"),
    ] {
        let (tmp, _repo) = project();
        let server = OpenAiServer::start(vec![ScriptedReply::text("never asked", Tokens::new(1, 1))]).await;
        let mut servers = scripted_server("broken", &extra, "");
        if let Some(command) = command {
            servers = format!("[mcp_servers.broken]\ncommand = {command:?}\n");
        }
        configure(tmp.path(), &server, &format!("{servers}{TASK}"));
        let (code, stderr, all) = run(tmp.path()).await;
        let task = finished(&all, "t");
        // A tool failure fails the task (as every `tool` error does), naming the server.
        assert_eq!(task["status"], "failed", "{stderr}");
        assert_eq!(task["error"]["kind"], "tool");
        let message = task["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("MCP server \"broken\" failed to start: ") && message.contains(expected), "{message}");
        assert_ne!(code, 0);
        assert!(server.requests().is_empty(), "the model was called although the task could not start");
    }
}

#[test]
fn bad_mcp_server_settings_are_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[mcp_servers.fs]\nargs = [\".\"]\n[mcp_servers.web]\nurl = \"ftp://example\"\n[mcp_servers.shared]\ncommand = \"x\"\nscope = \"run\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"p\"\n",
    )
    .unwrap();
    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let needles = ["`mcp_servers.fs.command`: set `command`", "`mcp_servers.web.url`: \"ftp://example\" is not an http"];
    for needle in needles {
        assert!(stderr.contains(needle), "{needle:?} missing from: {stderr}");
    }
    // `scope = "run"` is accepted; a scope that is neither `task` nor `run` is refused.
    assert!(!stderr.contains("mcp_servers.shared"), "{stderr}");
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[mcp_servers.s]\ncommand = \"x\"\nscope = \"forever\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"p\"\n",
    )
    .unwrap();
    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("tasks.toml:") && stderr.contains("unknown variant `forever`, expected `task` or `run`"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamable_http_server_is_reached_by_its_url() {
    let (tmp, _repo) = project();
    let port_file = tmp.path().join("port");
    let script = crate::support::cli::crate_root().join("tests/fixtures/mcp/scripted_server.py");
    let _http_server = KillOnDrop(std::process::Command::new("python3").arg(&script).arg("--http").arg(&port_file).spawn().unwrap());
    let mut waited = 0;
    while !port_file.exists() && waited < 300 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        waited += 1;
    }
    let port = std::fs::read_to_string(&port_file).expect("the HTTP MCP server wrote its port");
    let server = OpenAiServer::start(vec![
        ScriptedReply::tool_call("c1", "web__echo", json!({"text": "over http"}), Tokens::new(10, 1)),
        ScriptedReply::text("done", Tokens::new(10, 1)),
    ])
    .await;
    configure(tmp.path(), &server, &format!("[mcp_servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n\n{TASK}"));
    let (code, stderr, all) = run(tmp.path()).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(finished(&all, "t")["status"], "passed");
    assert!(tool_answer(&server.requests()[1], "c1").starts_with("echo: over http"), "{:?}", server.requests());
}

/// A child process killed (and reaped) when the test ends, passed or not.
pub(super) struct KillOnDrop(pub(super) std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The pid and working directory a `whoami` answer reports.
fn whoami(answer: &str) -> (u32, PathBuf) {
    let rest = answer.strip_prefix("pid ").unwrap_or_else(|| panic!("not a whoami answer: {answer}"));
    let (pid, cwd) = rest.split_once(" cwd ").unwrap();
    (pid.parse().unwrap(), PathBuf::from(cwd))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_scope_server_is_started_once_shared_by_parallel_tasks_confined_to_its_folder_and_stopped() {
    let confined = crate::support::sandbox::supported();
    let (tmp, repo) = project();
    let calls = |n: &str| {
        ScriptedReply::tool_calls(
            vec![
                crate::support::openai_server::ToolCall::new(&format!("{n}1"), "shared__whoami", json!({})),
                crate::support::openai_server::ToolCall::new(
                    &format!("{n}2"),
                    "shared__touch",
                    json!({"path": repo.join(format!("{n}.txt"))}),
                ),
                crate::support::openai_server::ToolCall::new(&format!("{n}3"), "shared__touch", json!({"path": format!("{n}-own.txt")})),
            ],
            Tokens::new(10, 1),
        )
    };
    let first = OpenAiServer::start(vec![calls("a"), ScriptedReply::text("done", Tokens::new(10, 1))]).await;
    let second = OpenAiServer::start(vec![calls("b"), ScriptedReply::text("done", Tokens::new(10, 1))]).await;
    let servers = scripted_server("shared", &[], "scope = \"run\"");
    let tasks = "[defaults]\nrepo = \"repo\"\nisolation = \"none\"\nrequire_change = false\n\n[[tasks]]\nid = \"one\"\nprompt = \"Use the tools.\"\n\n[[tasks]]\nid = \"two\"\nprovider = \"mock2\"\nprompt = \"Use the tools.\"\nrepo = \"repo2\"\n";
    git_repo(&tmp.path().join("repo2"), &[("notes.txt", "x\n")]);
    configure(tmp.path(), &first, &format!("{servers}{tasks}"));
    let config = std::fs::read_to_string(tmp.path().join("dracode.toml")).unwrap();
    let mock2 = format!("[providers.mock2]\ntype = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o\"\n", second.base_url());
    std::fs::write(tmp.path().join("dracode.toml"), format!("{config}{mock2}")).unwrap();

    let dir = tmp.path().to_path_buf();
    let (code, stderr, all) = tokio::task::spawn_blocking(move || {
        let output =
            dracode(&dir).env("OPENAI_API_KEY", "sk-test").args(["run", "tasks.toml", "--out", "out", "--jobs", "2"]).output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stderr).into_owned(),
            read_jsonl(&dir.join("out/results.jsonl")),
        )
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(finished(&all, "one")["status"], "passed");
    assert_eq!(finished(&all, "two")["status"], "passed");
    let (a, b) = (first.requests(), second.requests());
    assert!(offered(&a[0]).contains(&"shared__whoami".to_string()), "{:?}", offered(&a[0]));
    // Both tasks talked to the same process: started once for the run.
    let (pid_a, cwd_a) = whoami(&tool_answer(&a[1], "a1"));
    let (pid_b, cwd_b) = whoami(&tool_answer(&b[1], "b1"));
    assert_eq!(pid_a, pid_b, "the run-scope server was started more than once");
    assert_eq!(cwd_a, cwd_b);
    // It works in a folder of its own, not in either repository.
    assert!(!cwd_a.starts_with(&repo) && !cwd_a.starts_with(tmp.path()), "{}", cwd_a.display());
    assert_eq!(tool_answer(&a[1], "a3"), "created");
    assert_eq!(tool_answer(&b[1], "b3"), "created");
    if confined {
        for (requests, call, file) in [(&a, "a2", "a.txt"), (&b, "b2", "b.txt")] {
            let refused = tool_answer(&requests[1], call);
            assert!(refused.starts_with("Error [MCP_TOOL_ERROR]: refused:"), "{refused}");
            assert!(!repo.join(file).exists());
        }
    }
    // Stopped after the last task, its folder removed.
    assert!(!alive(pid_a), "the run-scope MCP server {pid_a} outlived the run");
    assert!(!cwd_a.exists(), "{} was left behind", cwd_a.display());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_scope_server_that_cannot_start_fails_each_task_that_uses_it_as_a_tool_error() {
    let (tmp, _repo) = project();
    let server = OpenAiServer::start(vec![ScriptedReply::text("never asked", Tokens::new(1, 1))]).await;
    let servers = scripted_server("broken", &["--crash-on-list"], "scope = \"run\"");
    configure(tmp.path(), &server, &format!("{servers}{TASK}"));
    let (code, stderr, all) = run(tmp.path()).await;
    let task = finished(&all, "t");
    assert_eq!(task["status"], "failed", "{stderr}");
    assert_eq!(task["error"]["kind"], "tool");
    let message = task["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("MCP server \"broken\" failed to start: ") && message.contains("crashing on tools/list"), "{message}");
    assert_ne!(code, 0);
    assert!(server.requests().is_empty());
}

/// Issue 29: a stdio server whose own files lie outside what the task's commands may read dies
/// on a refused read; the task's failure names the path and `read_paths`, not just the
/// server's stack trace.
#[tokio::test(flavor = "multi_thread")]
async fn sandbox_an_mcp_server_refused_a_read_of_its_own_files_names_the_path_and_read_paths() {
    if !crate::support::sandbox::supported() {
        return;
    }
    let (tmp, _repo) = project();
    let files = tmp.path().canonicalize().unwrap().join("server-files");
    std::fs::create_dir_all(&files).unwrap();
    let script = files.join("server.py");
    std::fs::copy(crate::support::cli::crate_root().join("tests/fixtures/mcp/scripted_server.py"), &script).unwrap();
    let server = OpenAiServer::start(vec![ScriptedReply::text("never asked", Tokens::new(1, 1))]).await;
    let servers = format!("[mcp_servers.s]\ncommand = \"python3\"\nargs = [{:?}]\n", script.display().to_string());
    std::fs::write(
        tmp.path().join("dracode.toml"),
        format!("provider = \"mock\"\n[providers.mock]\ntype = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o\"\n", server.base_url()),
    )
    .unwrap();
    std::fs::write(tmp.path().join("tasks.toml"), format!("{servers}{TASK}")).unwrap();
    let (_code, stderr, all) = run(tmp.path()).await;
    let task = finished(&all, "t");
    assert_eq!(task["error"]["kind"], "tool", "{stderr}");
    let message = task["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("MCP server \"s\" failed to start: "), "{message}");
    let hint = format!(
        "the sandbox refused it a read of `{}`, outside what the task's commands may read (add `{}` to the task's `read_paths`)",
        script.display(),
        files.display()
    );
    assert!(message.contains(&hint), "no read_paths hint in: {message}");
    assert!(server.requests().is_empty(), "the model was called although the task could not start");
}
