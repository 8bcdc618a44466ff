//! `apply_patch` through the real binary: an OpenAI model is offered the tool it knows, its
//! patch lands in the task's diff artifact, and a patch that does not apply is an error the
//! model sees, with nothing half-applied.

use crate::support::cli::{dracode, events, finished, git_repo, read_jsonl};
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
use serde_json::{Value, json};

const KEY: &str = "sk-test-0123456789abcdef";

const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\npub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n";

const PATCH: &str = r"*** Begin Patch
*** Update File: src/lib.rs
@@ pub fn add(a: i32, b: i32) -> i32 {
-    a + b
+    a.wrapping_add(b)
@@ pub fn sub(a: i32, b: i32) -> i32 {
-    a - b
+    a.wrapping_sub(b)
*** Add File: src/mul.rs
+pub fn mul(a: i32, b: i32) -> i32 {
+    a * b
+}
*** Update File: docs/old.md
*** Move to: docs/new.md
@@
 # Notes
-draft
+final
*** End Patch
";

/// Touches src/lib.rs correctly but docs/new.md with context it does not have.
const BAD_PATCH: &str = r"*** Begin Patch
*** Update File: src/lib.rs
@@
-    a.wrapping_add(b)
+    a.saturating_add(b)
*** Update File: docs/new.md
@@
 # Notes
-nonexistent line
+x
*** End Patch
";

fn tool_result_texts(body: &Value) -> Vec<String> {
    body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").map(|m| m["content"].to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_model_patches_files_and_the_diff_shows_it() {
    let server = OpenAiServer::start(vec![
        ScriptedReply::tool_call("c1", "apply_patch", json!({ "input": PATCH }), Tokens::new(50, 20)),
        ScriptedReply::tool_call("c2", "apply_patch", json!({ "input": BAD_PATCH }), Tokens::new(60, 20)),
        ScriptedReply::text("done", Tokens::new(70, 2)),
    ])
    .await;
    let tmp = tempfile::tempdir().unwrap();
    git_repo(&tmp.path().join("repo"), &[("src/lib.rs", LIB), ("docs/old.md", "# Notes\ndraft\n")]);
    std::fs::write(
        tmp.path().join("dracode.toml"),
        format!(
            // A Chat Completions server: a Codex model would get the Responses API unless told.
            "provider = \"mock\"\n[providers.mock]\ntype = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-5-codex\"\nwire_api = \"chat\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    // No `tools` field: the defaults, which for an OpenAI model include apply_patch.
    std::fs::write(tmp.path().join("tasks.toml"), "[[tasks]]\nid = \"patch\"\nprompt = \"Use wrapping arithmetic\"\nrepo = \"repo\"\n")
        .unwrap();
    let dir = tmp.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        dracode(&dir).env("OPENAI_API_KEY", KEY).args(["run", "tasks.toml", "--out", "out"]).output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    let requests = server.requests();
    let offered = requests[0]["tools"].as_array().unwrap().iter().find(|t| t["function"]["name"] == "apply_patch").cloned();
    let offered = offered.expect("apply_patch is offered to an OpenAI model by default");
    assert!(offered["function"]["description"].as_str().unwrap().contains("*** Begin Patch"), "{offered}");
    assert_eq!(offered["function"]["parameters"]["required"], json!(["input"]));

    // The first patch applied; the second failed with the file, hunk and nearest lines named.
    let first = tool_result_texts(&requests[1]).join("\n");
    assert!(first.contains("OK: applied 3 operations") && first.contains("M docs/old.md -> docs/new.md"), "{first}");
    let second = tool_result_texts(&requests[2]).pop().unwrap();
    assert!(second.contains("Error [NO_MATCH]: docs/new.md: hunk 1 did not apply"), "{second}");
    assert!(second.contains("Nearest lines in docs/new.md") && second.contains("Nothing was changed"), "{second}");

    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    let done = finished(&all, "patch");
    assert_eq!(done["status"], "passed", "{done}");
    assert_eq!(done["files_changed"], json!(["docs/new.md", "docs/old.md", "src/lib.rs", "src/mul.rs"]));
    let oks: Vec<&Value> = events(&all, "tool.completed").into_iter().filter(|e| e["name"] == "apply_patch").map(|e| &e["ok"]).collect();
    assert_eq!(oks, [&json!(true), &json!(false)], "the good patch succeeded, the bad one failed");

    // The diff artifact holds the first patch's changes and nothing of the second.
    let diff = std::fs::read_to_string(tmp.path().join("out").join(done["diff_path"].as_str().unwrap())).unwrap();
    for line in ["-    a + b", "+    a.wrapping_add(b)", "+    a.wrapping_sub(b)", "+pub fn mul(a: i32, b: i32) -> i32 {", "+final"] {
        assert!(diff.contains(line), "{line:?} not in the diff:\n{diff}");
    }
    assert!(!diff.contains("saturating_add"), "the failed patch was half-applied:\n{diff}");
}

/// The file-tool extensions through the real binary (a replayed model): `create_directory`,
/// `write_file`/`read_file` with base64 for binary content, `delete_file` of a whole directory.
#[test]
fn create_directory_base64_files_and_recursive_delete_work_in_a_task() {
    let tmp = tempfile::tempdir().unwrap();
    git_repo(&tmp.path().join("repo"), &[("old/a.txt", "a\n"), ("old/deep/b.txt", "b\n"), ("keep.txt", "k\n")]);
    let call = |id: &str, name: &str, input: Value| json!({"content": [{"type": "tool_use", "id": id, "name": name, "input": input}], "stop_reason": "tool_use"});
    // 0x00 0xFF 0x10 0x80: not UTF-8.
    let replay = json!([
        call("c1", "create_directory", json!({"path": "assets/icons"})),
        call("c2", "write_file", json!({"file_path": "assets/icons/dot.bin", "content": "AP8QgA==", "encoding": "base64"})),
        call("c3", "read_file", json!({"file_path": "assets/icons/dot.bin", "encoding": "base64"})),
        call("c4", "delete_file", json!({"path": "old", "recursive": true})),
        call("c5", "create_directory", json!({"path": "../outside"})),
        {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
    ]);
    std::fs::write(tmp.path().join("rec.json"), replay.to_string()).unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[[tasks]]\nid = \"files\"\nprompt = \"p\"\nprovider = \"replay\"\nreplay = \"rec.json\"\nrepo = \"repo\"\n\
         tools = [\"create_directory\", \"write_file\", \"read_file\", \"delete_file\"]\n",
    )
    .unwrap();
    let out = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    let outputs: Vec<String> = events(&all, "tool.completed").iter().map(|e| e["output"].as_str().unwrap().to_string()).collect();
    assert_eq!(outputs[0], "OK: created directory assets/icons");
    assert_eq!(outputs[1], "OK: wrote 4 bytes to assets/icons/dot.bin");
    assert_eq!(outputs[2], "AP8QgA==", "the bytes come back as written");
    assert_eq!(outputs[3], "OK: deleted directory old");
    assert!(outputs[4].starts_with("Error [PATH_OUTSIDE_WORKSPACE]"), "{}", outputs[4]);
    assert!(!tmp.path().join("outside").exists());
    let done = finished(&all, "files");
    assert_eq!(done["status"], "passed", "{done}");
    assert_eq!(done["files_changed"], json!(["assets/icons/dot.bin", "old/a.txt", "old/deep/b.txt"]));
}

/// Codex's leniency and strictness, through a replayed model: ASCII context finds typographic
/// dashes, quotes and spaces in the file; a blank line after `*** End of File` is not a new
/// hunk; an empty hunk (`@@` then `*** End of File`) is an error and changes no file.
#[test]
fn apply_patch_is_as_lenient_and_as_strict_as_codex() {
    let tmp = tempfile::tempdir().unwrap();
    let typographic = "fn greet() {\n    // Hello \u{2013} it\u{2019}s \u{201C}here\u{201D}\u{a0}now\n    old();\n}\n";
    git_repo(&tmp.path().join("repo"), &[("typo.rs", typographic), ("eof.txt", "a\nb\n"), ("empty.txt", "x\ny\n")]);
    let call = |id: &str, patch: &str| json!({"content": [{"type": "tool_use", "id": id, "name": "apply_patch", "input": {"input": patch}}], "stop_reason": "tool_use"});
    let replay = json!([
        // Plain ASCII for the en dash, the curly quotes and the no-break space.
        call("c1", "*** Begin Patch\n*** Update File: typo.rs\n@@ fn greet() {\n     // Hello - it's \"here\" now\n-    old();\n+    new();\n*** End Patch\n"),
        call("c2", "*** Begin Patch\n*** Update File: eof.txt\n@@\n a\n-b\n+B\n*** End of File\n\n*** End Patch\n"),
        call("c3", "*** Begin Patch\n*** Update File: empty.txt\n@@\n-x\n+X\n@@\n*** End of File\n*** End Patch\n"),
        {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
    ]);
    std::fs::write(tmp.path().join("rec.json"), replay.to_string()).unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[[tasks]]\nid = \"codex\"\nprompt = \"p\"\nprovider = \"replay\"\nreplay = \"rec.json\"\nrepo = \"repo\"\ntools = [\"apply_patch\"]\n",
    )
    .unwrap();
    let out = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    let outputs: Vec<String> = events(&all, "tool.completed").iter().map(|e| e["output"].as_str().unwrap().to_string()).collect();
    assert_eq!(outputs[0], "OK: applied 1 operation\nM typo.rs", "the typographic file was found");
    assert_eq!(outputs[1], "OK: applied 1 operation\nM eof.txt", "the blank line after *** End of File is no hunk");
    assert!(outputs[2].starts_with("Error [INVALID_ARGUMENTS]: patch line 6:"), "{}", outputs[2]);
    assert!(outputs[2].contains("does not contain any lines") && outputs[2].contains("nothing was changed"), "{}", outputs[2]);

    let done = finished(&all, "codex");
    assert_eq!(done["status"], "passed", "{done}");
    assert_eq!(done["files_changed"], json!(["eof.txt", "typo.rs"]), "the empty hunk's patch changed nothing");
    let diff = std::fs::read_to_string(tmp.path().join("out").join(done["diff_path"].as_str().unwrap())).unwrap();
    // The kept context line keeps its typographic characters; only the changed line differs.
    assert!(diff.contains("-    old();\n+    new();") && diff.contains("-b\n+B"), "{diff}");
    assert!(!diff.contains("Hello - it's") && !diff.contains("+X"), "{diff}");
}
