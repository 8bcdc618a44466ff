//! The troubleshooting page (`docs/src/troubleshooting.md`) cannot drift from the binary: each
//! message it quotes (a ```text block after a `<!-- troubleshooting: NAME -->` line) is made by
//! running dracode on case NAME here, and must be what it printed; and every error kind, status
//! and exit code the results crate defines is on the page.

use crate::support::cli::{crate_root, dracode, git_repo, read_jsonl};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The page, relative to the crate's root.
const PAGE: &str = "docs/src/troubleshooting.md";

/// The folder the page's quoted paths stand for: a case's scratch folder is shown as this.
const SHOWN_HOME: &str = "/home/me";

/// The page's quoted blocks, by case name.
fn quoted_blocks(page: &str) -> BTreeMap<String, Vec<String>> {
    let mut blocks = BTreeMap::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("<!-- troubleshooting: ").and_then(|r| r.strip_suffix(" -->")) else { continue };
        assert_eq!(lines.next(), Some("```text"), "the block of case {name} is a ```text block right after its marker");
        let quoted: Vec<String> = lines.by_ref().take_while(|l| *l != "```").map(str::to_string).collect();
        assert!(blocks.insert(name.to_string(), quoted).is_none(), "case {name} is quoted twice");
    }
    blocks
}

/// A manifest of one replayed task on the quickstart project, with `extra` lines in its task.
fn replayed(extra: &str) -> String {
    format!(
        "[defaults]\nprovider = \"replay\"\nreplay = \"rec\"\nrepo = \"repo\"\n\n[[tasks]]\nid = \"fix-greeting\"\nprompt = \"Fix greet.sh.\"\n{extra}\n"
    )
}

/// The scratch folder of a case: the quickstart project as a git repository in `repo/`, the
/// quickstart's recordings and one that overwrites `test.sh` in `rec/`, a file outside the
/// repository in `secrets/`.
fn scratch(dir: &Path) {
    let project = crate_root().join("examples/quickstart/project");
    let read = |name: &str| std::fs::read_to_string(project.join(name)).unwrap();
    git_repo(&dir.join("repo"), &[("greet.sh", &read("greet.sh")), ("test.sh", &read("test.sh"))]);
    std::fs::create_dir_all(dir.join("rec")).unwrap();
    let replays = crate_root().join("examples/quickstart/replay/fix-greeting.json");
    std::fs::copy(replays, dir.join("rec/fix-greeting.json")).unwrap();
    let tamper = serde_json::json!({"provider": "openai", "model": "replay", "responses": [
        {"content": [{"type": "tool_use", "id": "c1", "name": "run_command", "input": {"command": "echo 'exit 0' > test.sh", "shell": true}}],
         "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn"}]});
    std::fs::write(dir.join("rec/tamper.json"), tamper.to_string()).unwrap();
    std::fs::create_dir_all(dir.join("secrets")).unwrap();
    std::fs::write(dir.join("secrets/token.txt"), "s3cret\n").unwrap();
}

/// A port on the loopback interface that nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Case `name`: (its manifest, the arguments after `dracode`, the exit code it must give).
fn case(name: &str, dir: &Path) -> (String, Vec<String>, i32) {
    let run = |extra: &[&str]| ["run", "tasks.toml", "--out", "out"].iter().chain(extra).map(ToString::to_string).collect::<Vec<_>>();
    let secret = dir.join("secrets/token.txt");
    match name {
        "manifest-error" => {
            let text = "[[tasks]]\nid = \"fix-greeting\"\nprompt = \"Fix greet.sh.\"\nmax_iterations = \"ten\"\n";
            (text.into(), vec!["validate".into(), "tasks.toml".into()], 2)
        }
        "no-task" => (replayed(""), run(&["--filter", "nothing-matches"]), 4),
        "setup" => (format!("[setup]\ncommand = \"exit 3\"\n\n{}", replayed("check = \"sh test.sh\"")), run(&[]), 5),
        "check-unrunnable" => (replayed("check = \"no-such-test-runner\""), run(&[]), 5),
        "read-refused" => (replayed(&format!("check = \"sh test.sh && cat {}\"", secret.display())), run(&[]), 5),
        "host-refused" => (replayed("check = \"sh test.sh && curl -sS http://203.0.113.7/\""), run(&[]), 1),
        "protected" => {
            let text = replayed("check = \"sh test.sh\"\nprotect = [\"test.sh\"]").replace("fix-greeting", "tamper");
            (text, run(&[]), 1)
        }
        "budget" => (replayed("check = \"sh test.sh\"\nmax_tokens = 2000"), run(&[]), 1),
        "not-configured" => (replayed("check = \"sh test.sh\"").replace("provider = \"replay\"\n", ""), run(&["--provider", "openai"]), 5),
        "unreachable" => {
            let config = format!(
                "[providers.local]\ntype = \"openai\"\nbase_url = \"http://127.0.0.1:{}/v1\"\napi_key = \"sk-local\"\nmodel = \"gpt-4o-mini\"\n",
                closed_port()
            );
            std::fs::write(dir.join("dracode.toml"), config).unwrap();
            (replayed("check = \"sh test.sh\"").replace("provider = \"replay\"\n", ""), run(&["--provider", "local"]), 5)
        }
        other => panic!("{PAGE} quotes case {other}, which this test does not know: add it to `case`"),
    }
}

/// What case `name` printed: its stdout and stderr, and each task's error message and check
/// output from `results.jsonl`, with the scratch folder shown as [`SHOWN_HOME`].
fn printed(name: &str) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    scratch(&dir);
    let (manifest, args, code) = case(name, &dir);
    std::fs::write(dir.join("tasks.toml"), manifest).unwrap();
    let out = dracode(&dir).args(&args).output().unwrap();
    let mut text = format!("{}\n{}\n", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(code), "case {name}: dracode {args:?} exits {code}; it printed:\n{text}");
    if let Ok(lines) = std::fs::read_to_string(dir.join("out/results.jsonl")).map(|_| read_jsonl(&dir.join("out/results.jsonl"))) {
        for finished in lines.iter().filter(|e| e["type"] == "task.finished") {
            for field in [&finished["error"]["message"], &finished["check"]["output_tail"]] {
                text.push_str(field.as_str().unwrap_or_default());
                text.push('\n');
            }
        }
    }
    text.replace(&dir.display().to_string(), SHOWN_HOME)
}

#[test]
fn every_message_the_troubleshooting_page_quotes_is_what_dracode_prints() {
    let page = std::fs::read_to_string(crate_root().join(PAGE)).unwrap();
    let blocks = quoted_blocks(&page);
    assert!(blocks.len() >= 10, "{PAGE} quotes the messages of its cases: found {}", blocks.len());
    let mut wrong = Vec::new();
    for (name, quoted) in &blocks {
        let text = printed(name);
        for line in quoted.iter().filter(|l| !l.trim().is_empty()) {
            if !text.contains(line.as_str()) {
                wrong.push(format!("case {name}: {PAGE} quotes\n  {line}\nbut dracode printed:\n{text}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// The names a `#/$defs/NAME` of the events schema lists: every string of an `enum` or a
/// `const` in it (an enum's variants may be either; a task kind is an `anyOf` of both).
fn enum_names(schema: &Value, def: &str) -> Vec<String> {
    fn walk(node: &Value, names: &mut Vec<String>) {
        match node {
            Value::Object(map) => {
                for (key, value) in map {
                    match (key.as_str(), value) {
                        ("const", Value::String(name)) => names.push(name.clone()),
                        ("enum", Value::Array(all)) => names.extend(all.iter().filter_map(|v| v.as_str().map(str::to_string))),
                        _ => walk(value, names),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, names)),
            _ => {}
        }
    }
    let mut names = Vec::new();
    walk(&schema["$defs"][def], &mut names);
    assert!(!names.is_empty(), "the events schema lists the names of {def}");
    names
}

#[test]
fn the_troubleshooting_page_names_every_error_kind_status_and_exit_code() {
    use dracode_results::exit_codes::*;
    let page = std::fs::read_to_string(crate_root().join(PAGE)).unwrap();
    let schema = dracode_results::records::events_schema();
    let mut names = enum_names(&schema, "FailureKind");
    names.extend(enum_names(&schema, "ErrorKind"));
    names.extend(dracode_results::Status::ALL.iter().map(|s| s.as_str().to_string()));
    let codes = [OK, TASKS_FAILED, USAGE, ARTIFACTS_FAILED, NO_TASKS, NOT_JUDGED, INTERRUPTED, TERMINATED];
    names.extend(codes.iter().map(i32::to_string));
    let missing: Vec<&String> = names.iter().filter(|name| !page.contains(&format!("`{name}`"))).collect();
    assert!(missing.is_empty(), "{PAGE} does not name (in backticks) {missing:?}");
}
