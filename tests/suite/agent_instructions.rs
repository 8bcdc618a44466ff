//! What the agent is told before its first turn, read from the first request a local OpenAI
//! Chat Completions server receives: the repository's `AGENTS.md` files (the root's and those
//! of the folders down to `workdir`, nearest last, as the task's workspace holds them — not the
//! user's checkout), the check it is graded by and the protected globs; `agents_md`,
//! `tell_check` and `tell_protect` turn each off; an oversize file is cut with a note.

use crate::support::cli::{dracode, finished, git_repo, read_jsonl};
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
use serde_json::Value;

/// The check every task is graded by: distinctive, and it passes.
const CHECK: &str = "echo grading-command-42";

/// A file larger than one `AGENTS.md` may be shown: a head line, filler, a tail line.
fn oversize() -> String {
    format!("HEAD-OF-BIG\n{}TAIL-OF-BIG\n", "filler line of the big AGENTS.md\n".repeat(1500))
}

/// The system text of the request whose user message is `prompt`.
fn instructions_for(requests: &[Value], prompt: &str) -> String {
    let request = requests
        .iter()
        .find(|r| r["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "user" && text(&m["content"]) == prompt)))
        .unwrap_or_else(|| panic!("no request for {prompt:?}"));
    let messages = request["messages"].as_array().unwrap();
    messages.iter().filter(|m| m["role"] == "system" || m["role"] == "developer").map(|m| text(&m["content"])).collect()
}

/// A message's content as text (a string, or a list of text parts).
fn text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_first_request_tells_the_repositorys_agents_md_the_check_and_the_protected_paths() {
    let replies = (0..4).map(|_| ScriptedReply::text("Nothing to change.", Tokens::new(100, 5))).collect();
    let server = OpenAiServer::start(replies).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let big = oversize();
    git_repo(
        &dir.join("repo"),
        &[
            ("AGENTS.md", "ROOT-RULE: indent with tabs.\n"),
            ("pkg/AGENTS.md", "PKG-RULE: run make in pkg.\n"),
            ("pkg/deep/AGENTS.md", "DEEP-RULE: below the working folder.\n"),
            ("other/AGENTS.md", "OTHER-RULE: a sibling folder.\n"),
            ("big/AGENTS.md", &big),
            ("pkg/main.c", "int main(void) { return 0; }\n"),
        ],
    );
    // The user's checkout has an uncommitted edit: the task's workspace (at HEAD) does not.
    std::fs::write(dir.join("repo/AGENTS.md"), "DIRTY-RULE: not committed.\n").unwrap();
    std::fs::write(
        dir.join("dracode.toml"),
        format!("provider = \"mock\"\n[providers.mock]\ntype = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o\"\n", server.base_url()),
    )
    .unwrap();
    let manifest = format!(
        "[defaults]\nrepo = \"repo\"\nisolation = \"worktree\"\ncheck = \"{CHECK}\"\nprotect = [\"tests/**\", \"Cargo.lock\"]\n\n\
         [[tasks]]\nid = \"told\"\nprompt = \"task told\"\nworkdir = \"pkg\"\n\n\
         [[tasks]]\nid = \"quiet\"\nprompt = \"task quiet\"\nworkdir = \"pkg\"\nagents_md = false\ntell_check = false\ntell_protect = false\n\n\
         [[tasks]]\nid = \"no-check\"\nprompt = \"task no-check\"\nworkdir = \"pkg\"\ntell_check = false\n\n\
         [[tasks]]\nid = \"big\"\nprompt = \"task big\"\nworkdir = \"big\"\n"
    );
    std::fs::write(dir.join("tasks.toml"), manifest).unwrap();
    let (code, stderr) = tokio::task::spawn_blocking({
        let dir = dir.to_path_buf();
        move || {
            let out =
                dracode(&dir).env("OPENAI_API_KEY", "sk-test").args(["run", "tasks.toml", "--jobs", "1", "--out", "out"]).output().unwrap();
            (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
        }
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    let all = read_jsonl(&dir.join("out/results.jsonl"));
    for id in ["told", "quiet", "no-check", "big"] {
        assert_eq!(finished(&all, id)["status"], "passed", "{id}: {stderr}");
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "one request a task");

    let told = instructions_for(&requests, "task told");
    let (root, pkg) = (told.find("ROOT-RULE").expect(&told), told.find("PKG-RULE").expect(&told));
    assert!(root < pkg, "the root's file first, the nearest last: {told}");
    assert!(told.contains("<repository_instructions file=\"pkg/AGENTS.md\">"), "marked as the repository's text: {told}");
    for absent in ["DIRTY-RULE", "DEEP-RULE", "OTHER-RULE", "HEAD-OF-BIG"] {
        assert!(!told.contains(absent), "{absent} is not on the way from the workspace's root to pkg: {told}");
    }
    assert!(told.contains(&format!("`{CHECK}`")), "the check it is graded by: {told}");
    assert!(told.contains("`tests/**`, `Cargo.lock`"), "the protected globs: {told}");

    let quiet = instructions_for(&requests, "task quiet");
    for absent in ["ROOT-RULE", "PKG-RULE", "repository_instructions", CHECK, "tests/**"] {
        assert!(!quiet.contains(absent), "agents_md, tell_check and tell_protect = false, yet {absent:?} is told: {quiet}");
    }
    let no_check = instructions_for(&requests, "task no-check");
    assert!(!no_check.contains(CHECK) && no_check.contains("PKG-RULE") && no_check.contains("`tests/**`"), "{no_check}");

    let big_told = instructions_for(&requests, "task big");
    assert!(big_told.contains("HEAD-OF-BIG") && !big_told.contains("TAIL-OF-BIG"), "the file's head only");
    let note = format!("[dracode: big/AGENTS.md cut: the file has {} bytes", big.len());
    assert!(big_told.contains(&note), "a note says what was cut: {}", &big_told[big_told.len().saturating_sub(600)..]);
    assert!(big_told.len() < 40 * 1024, "at most 32 KiB of the file: {} bytes", big_told.len());

    // The transcript keeps the system prompt the model was given.
    let transcript: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("out/transcripts/told.json")).unwrap()).unwrap();
    assert!(transcript["system"].as_str().unwrap_or_default().contains("PKG-RULE"), "{transcript}");
}
