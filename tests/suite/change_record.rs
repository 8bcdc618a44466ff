//! Issue 18, end to end through the real binary with a scripted model (`replay`): the change
//! record cannot be hidden, protected paths are put back before the check, dracode's git tools
//! stay on the task's own repository, and patches apply at the repository's root.

use crate::support::cli::{dracode, finished, git, git_repo, read_jsonl};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A user repository whose test fails until the agent fixes `calc.py` (or cheats).
fn project(root: &Path) -> PathBuf {
    let repo = root.join("repo");
    git_repo(
        &repo,
        &[("calc.py", "def add(a, b):\n    return a - b\n"), ("test.sh", "grep -q 'a + b' calc.py\n"), ("README.md", "calc\n")],
    );
    repo
}

/// A tool call turn of the scripted model.
fn call(id: &str, name: &str, input: Value) -> Value {
    json!({"content": [{"type": "tool_use", "id": id, "name": name, "input": input}], "stop_reason": "tool_use"})
}

/// A shell command turn.
fn shell(id: &str, command: &str) -> Value {
    call(id, "run_command", json!({"command": command, "shell": true, "timeout_seconds": 20}))
}

/// Runs one task `t` scripted by `turns` (then a final answer) with `fields` in the task;
/// returns the exit code, the events and the out folder.
fn run(root: &Path, turns: Vec<Value>, fields: &str) -> (i32, Vec<Value>, PathBuf) {
    let mut turns = turns;
    turns.push(json!({"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}));
    std::fs::write(root.join("t.json"), Value::Array(turns).to_string()).unwrap();
    let manifest = format!("[[tasks]]\nid = \"t\"\nprompt = \"fix add\"\nprovider = \"replay\"\nreplay = \"t.json\"\n{fields}\n");
    std::fs::write(root.join("m.toml"), manifest).unwrap();
    let out = root.join("out");
    let _ = std::fs::remove_dir_all(&out);
    let output = dracode(root).args(["run", "m.toml", "--out"]).arg(&out).output().unwrap();
    let code = output.status.code().unwrap_or(-1);
    assert!(out.join("results.jsonl").exists(), "no results: {}", String::from_utf8_lossy(&output.stderr));
    (code, read_jsonl(&out.join("results.jsonl")), out)
}

/// The shell command that "fixes" the test by editing it, then hides the edit with `hide`.
fn cheat_then(hide: &str) -> String {
    format!("printf 'exit 0\\n' > test.sh && {hide}")
}

#[test]
fn hiding_tricks_leave_the_change_recorded() {
    let tricks = [
        ("skip-worktree", cheat_then("git update-index --skip-worktree test.sh")),
        ("assume-unchanged", cheat_then("git update-index --assume-unchanged test.sh")),
        ("info/exclude", "printf 'true\\n' > shadow.sh && echo shadow.sh >> .git/info/exclude".to_string()),
        ("dot-git replaced", cheat_then("rm -rf .git && printf 'gitdir: /nonexistent\\n' > .git")),
    ];
    for (name, command) in tricks {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        project(&root);
        let (_, events, out) = run(&root, vec![shell("c1", &command)], "repo = \"repo\"\nisolation = \"worktree\"");
        let task = finished(&events, "t");
        let files: Vec<&str> = task["files_changed"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        let expected = if name == "info/exclude" { "shadow.sh" } else { "test.sh" };
        assert_eq!(files, [expected], "{name}: {task}");
        let patch = std::fs::read_to_string(out.join("diffs/t.patch")).unwrap_or_default();
        assert!(patch.contains(&format!("b/{expected}")), "{name}: the patch shows the change: {patch}");
    }
}

#[test]
fn a_protected_test_edited_by_the_agent_is_put_back_and_the_task_fails() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    project(&root);
    let turns = vec![
        call("w1", "write_file", json!({"file_path": "test.sh", "content": "exit 0\n"})),
        shell("c1", "printf 'exit 0\\n' > test.sh; echo 'def add(a, b):\n    return a + b' > calc.py"),
    ];
    let (code, events, out) = run(&root, turns, "repo = \"repo\"\nisolation = \"copy\"\ncheck = \"sh test.sh\"\nprotect = [\"test.sh\"]");
    let refused = events.iter().find(|e| e["type"] == "tool.completed" && e["call_id"] == "w1").expect("w1 completed");
    assert!(refused["output"].as_str().unwrap().contains("PROTECTED_PATH"), "{refused}");
    let task = finished(&events, "t");
    assert_eq!((task["status"].as_str(), task["error"]["kind"].as_str()), (Some("failed"), Some("protected")), "{task}");
    assert_eq!(task["protected"], json!(["test.sh"]));
    assert_eq!(task["check"]["exit_code"], 0, "the check graded the user's own test against the agent's fix");
    let patch = std::fs::read_to_string(out.join("diffs/t.patch")).unwrap();
    assert!(patch.contains("calc.py") && !patch.contains("test.sh"), "{patch}");
    assert_eq!(code, 1);
}

#[test]
fn a_protected_path_that_is_left_alone_lets_the_check_decide() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    project(&root);
    let fix = call("w1", "write_file", json!({"file_path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}));
    let (code, events, _) = run(&root, vec![fix], "repo = \"repo\"\ncheck = \"sh test.sh\"\nprotect = [\"test.sh\", \".github/**\"]");
    assert_eq!(finished(&events, "t")["status"], "passed");
    assert_eq!(code, 0);
}

#[test]
fn a_git_redirect_cannot_reach_the_users_repository() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let repo = project(&root);
    let before = (git(&repo, &["for-each-ref"]), git(&repo, &["log", "--all", "--format=%H %an %s"]));
    let redirect = format!(
        "rm -rf .git && printf 'gitdir: {}/.git\\n' > .git && mkdir -p .github/workflows && echo pwn > .github/workflows/pwn.yml",
        repo.display()
    );
    let turns = vec![
        shell("c1", &redirect),
        call("b1", "git_branch", json!({"action": "create", "name": "evil"})),
        call("g1", "git_commit", json!({"message": "Trusted change"})),
        call("l1", "git_log", json!({})),
    ];
    let tools = "tools = [\"run_command\", \"git_branch\", \"git_commit\", \"git_log\"]";
    let (_, events, _) = run(&root, turns, &format!("repo = \"repo\"\nisolation = \"worktree\"\n{tools}"));
    for id in ["b1", "g1", "l1"] {
        let done = events.iter().find(|e| e["type"] == "tool.completed" && e["call_id"] == id).expect("completed");
        assert!(done["output"].as_str().unwrap().contains("no longer the repository this task started with"), "{id}: {done}");
    }
    let after = (git(&repo, &["for-each-ref"]), git(&repo, &["log", "--all", "--format=%H %an %s"]));
    assert_eq!(before, after, "the user's refs and history are unchanged");
    let task = finished(&events, "t");
    assert!(task["files_changed"].as_array().unwrap().iter().any(|f| f == ".github/workflows/pwn.yml"), "{task}");
}

#[test]
fn a_subfolder_tasks_patch_applies_at_the_repository_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let repo = root.join("repo");
    git_repo(&repo, &[("pkg/app/main.py", "print(1)\n"), ("top.txt", "top\n")]);
    let edit = call("w1", "write_file", json!({"file_path": "main.py", "content": "print(2)\n"}));
    let (code, events, out) = run(&root, vec![edit], "repo = \"repo/pkg/app\"");
    assert_eq!((code, finished(&events, "t")["files_changed"].clone()), (0, json!(["pkg/app/main.py"])));
    let patch = out.join("diffs/t.patch");
    git(&repo, &["apply", "--check", &patch.display().to_string()]);
    git(&repo, &["apply", &patch.display().to_string()]);
    assert_eq!(std::fs::read_to_string(repo.join("pkg/app/main.py")).unwrap(), "print(2)\n");
}

#[test]
fn a_folder_outside_git_with_isolation_none_gets_a_patch() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("plain")).unwrap();
    std::fs::write(root.join("plain/a.txt"), "1\n").unwrap();
    let edit = call("w1", "write_file", json!({"file_path": "a.txt", "content": "2\n"}));
    let (code, events, out) = run(&root, vec![edit], "repo = \"plain\"\nisolation = \"none\"\nrequire_change = true");
    assert_eq!((code, finished(&events, "t")["status"].clone()), (0, json!("passed")));
    assert!(std::fs::read_to_string(out.join("diffs/t.patch")).unwrap().contains("+2"));
    assert!(!root.join("plain/.git").exists());
}

/// 8 tasks at `--jobs 8` under `--max-cost-usd 1` against a priced model whose every call costs
/// about $0.20 (1,000 tokens in, its whole 20,000-token allowance out, at gpt-4o's price).
#[tokio::test(flavor = "multi_thread")]
async fn a_run_cost_cap_holds_under_concurrency() {
    use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
    let reply = || {
        ScriptedReply::tool_call("c", "list_files", json!({}), Tokens::new(1_000, 20_000)).with_delay(std::time::Duration::from_millis(300))
    };
    let server = OpenAiServer::start((0..64).map(|_| reply()).collect()).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let config =
        format!("provider = \"mock\"\n[providers.mock]\ntype = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o\"\n", server.base_url());
    std::fs::write(root.join("dracode.toml"), config).unwrap();
    let tasks: String = (0..8)
        .map(|i| {
            format!("[[tasks]]\nid = \"t{i}\"\nprompt = \"list\"\nmax_output_tokens = 20000\nmax_iterations = 4\nrequire_change = false\n")
        })
        .collect();
    std::fs::write(root.join("m.toml"), format!("[defaults]\nisolation = \"copy\"\n{tasks}")).unwrap();
    let output = dracode(&root)
        .env("OPENAI_API_KEY", "sk-x")
        .args(["run", "m.toml", "--jobs", "8", "--max-cost-usd", "1", "--out", "out"])
        .output()
        .unwrap();
    let events = read_jsonl(&root.join("out/results.jsonl"));
    let spent: f64 = events.iter().filter(|e| e["type"] == "task.finished").map(|e| e["total_cost_usd"].as_f64().unwrap_or(0.0)).sum();
    let run_total = events.iter().find(|e| e["type"] == "run.finished").unwrap()["total_cost_usd"].as_f64().unwrap();
    assert!((spent - run_total).abs() < 1e-6, "{spent} vs {run_total}");
    // One call's estimation error: the input estimate is below the 1,000 tokens reported.
    assert!(spent <= 1.0 + 0.0025, "spent ${spent} under a $1 cap: {}", String::from_utf8_lossy(&output.stderr));
    let cut = events.iter().filter(|e| e["type"] == "task.finished" && e["status"] == "budget_exceeded").count();
    assert!(cut > 0 && spent > 0.6, "spent {spent}, {cut} cut");
}

#[test]
fn a_cost_cap_on_a_model_without_a_price_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    project(&root);
    let config = "provider = \"own\"\n[providers.own]\ntype = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"my-finetune\"\n";
    std::fs::write(root.join("dracode.toml"), config).unwrap();
    let manifest = "[[tasks]]\nid = \"t\"\nprompt = \"x\"\nrepo = \"repo\"\nmax_cost_usd = 0.5\n";
    std::fs::write(root.join("m.toml"), manifest).unwrap();
    for args in [vec!["validate", "m.toml"], vec!["run", "m.toml", "--out", "out"]] {
        let output = dracode(&root).env("OPENAI_API_KEY", "sk-x").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("m.toml:1") && stderr.contains("task \"t\"") && stderr.contains("my-finetune has no price"), "{stderr}");
    }
    std::fs::write(root.join("m.toml"), manifest.replace("max_cost_usd = 0.5\n", "")).unwrap();
    let output =
        dracode(&root).env("OPENAI_API_KEY", "sk-x").args(["run", "m.toml", "--out", "out", "--max-cost-usd", "1"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--max-cost-usd 1") && stderr.contains("t (my-finetune)"), "{stderr}");
}

#[test]
fn what_the_check_leaves_behind_is_not_the_agents_change() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    project(&root);
    let fix = call("w1", "write_file", json!({"file_path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}));
    let check = "check = \"mkdir -p __pycache__ && echo bytecode > __pycache__/calc.pyc && sh test.sh\"";
    let (code, events, out) = run(&root, vec![fix], &format!("repo = \"repo\"\n{check}"));
    let task = finished(&events, "t");
    assert_eq!((code, task["status"].as_str()), (0, Some("passed")), "{task}");
    assert_eq!(task["files_changed"], json!(["calc.py"]), "the check's output is not in the record");
    assert!(!std::fs::read_to_string(out.join("diffs/t.patch")).unwrap().contains("__pycache__"));
}

/// A write the file tools refused because the path is protected changes nothing, so the task is
/// judged by its check alone — and the refusal stays on record: `protected_refused` names the
/// path as the workspace has it, however the model wrote it (before, nothing in `task.finished`
/// showed it).
#[test]
fn a_refused_write_to_a_protected_path_is_on_record_and_the_check_decides() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    project(&root);
    let turns = vec![
        call("w1", "write_file", json!({"file_path": "./test.sh", "content": "exit 0\n"})),
        call("w2", "delete_file", json!({"path": "test.sh"})),
        call("w3", "write_file", json!({"file_path": "calc.py", "content": "def add(a, b):\n    return a + b\n"})),
    ];
    let (code, events, _) = run(&root, turns, "repo = \"repo\"\nisolation = \"copy\"\ncheck = \"sh test.sh\"\nprotect = [\"test.sh\"]");
    let task = finished(&events, "t");
    assert_eq!(task["status"], "passed", "{task}");
    assert_eq!(task["protected_refused"], json!(["test.sh"]), "once, workspace-relative: {task}");
    assert!(task.get("protected").is_none(), "nothing protected was changed: {task}");
    assert_eq!(code, 0);
}
