//! Structured results (issue #12) through the real binary: the final-answer tool on the
//! OpenAI, Anthropic and Gemini wire formats (strict local servers), repairs with the
//! validation error in the next request, `findings.sarif` against the SARIF 2.1.0 schema, and
//! bad schemas refused at `validate`.

use crate::support::anthropic_server as anthropic;
use crate::support::cli::{crate_root, dracode, finished, git_repo, read_jsonl};
use crate::support::gemini_server as gemini;
use crate::support::openai_server as openai;
use serde_json::{Value, json};
use std::path::Path;

/// Three tasks run one after the other: `valid` answers at once; `repair` answers wrongly,
/// then ends with plain text, then answers well; `never` answers wrongly twice with
/// `output_retries = 1`.
const MANIFEST: &str = r#"[defaults]
repo = "ws"
isolation = "copy"
output_schema = { type = "object", properties = { risk = { type = "integer", minimum = 1, maximum = 5 }, reasons = { type = "array", items = { type = "string" } } }, required = ["risk", "reasons"], additionalProperties = false }

[[tasks]]
id = "valid"
prompt = "Rate the risk of this change."

[[tasks]]
id = "repair"
prompt = "Rate the risk of this change."

[[tasks]]
id = "never"
prompt = "Rate the risk of this change."
output_retries = 1
"#;

/// What the scripted model does in one turn.
enum Turn {
    Answer(Value),
    Text(&'static str),
}

fn script() -> Vec<Turn> {
    let good = json!({"risk": 2, "reasons": ["small diff", "tests cover it"]});
    let bad = json!({"risk": 9, "reasons": ["huge"]});
    vec![
        Turn::Answer(good.clone()),
        Turn::Answer(bad.clone()),
        Turn::Text("The risk is low."),
        Turn::Answer(json!({"risk": 3, "reasons": []})),
        Turn::Answer(bad.clone()),
        Turn::Answer(json!({"risk": "high"})),
    ]
}

/// Runs the manifest against a configured provider and checks what every provider must give.
fn run_and_check(dir: &Path, provider: &str, env: &[(&str, &str)]) {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(dir.join("tasks.toml"), MANIFEST).unwrap();
    let out = dracode(dir)
        .envs(env.iter().copied())
        .args(["run", "tasks.toml", "--out", "out", "--jobs", "1", "--provider", provider])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{provider}: one task fails: {stderr}");
    let all = read_jsonl(&dir.join("out/results.jsonl"));

    let valid = finished(&all, "valid");
    assert_eq!(valid["status"], "passed", "{provider}: {valid}");
    assert_eq!(valid["structured_output"], json!({"risk": 2, "reasons": ["small diff", "tests cover it"]}));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("out/outputs/valid.json")).unwrap()).unwrap();
    assert_eq!(written, valid["structured_output"]);

    let repair = finished(&all, "repair");
    assert_eq!(repair["status"], "passed", "{provider}: {repair}");
    assert_eq!(repair["structured_output"], json!({"risk": 3, "reasons": []}));
    assert_eq!(repair["num_turns"], 3);

    let never = finished(&all, "never");
    assert_eq!(never["status"], "failed", "{provider}: {never}");
    assert_eq!(never["error"]["kind"], "agent");
    let message = never["error"]["message"].as_str().unwrap();
    assert!(message.contains("at /risk: \"high\" is not of type \"integer\""), "{provider}: {message}");
    assert!(message.contains("at /: \"reasons\" is a required property"), "{provider}: {message}");
    assert!(never["structured_output"].is_null());
    assert!(!dir.join("out/outputs/never.json").exists());

    let summary = std::fs::read_to_string(dir.join("out/summary.md")).unwrap();
    assert!(summary.contains("### Structured output") && summary.contains("<details><summary>repair</summary>"), "{summary}");
}

/// The checks on the request bodies every format shares: the tool is offered, the repair turns
/// carry the validation error and the request for the tool.
fn assert_requests(provider: &str, bodies: &[Value], tool_names: impl Fn(&Value) -> Vec<String>) {
    assert_eq!(bodies.len(), 6, "{provider}: one request per scripted turn");
    assert!(tool_names(&bodies[0]).contains(&"final_answer".to_string()), "{provider}: the final-answer tool is offered");
    let second = bodies[2].to_string();
    assert!(second.contains("at /risk: 9 is greater than the maximum of 5"), "{provider}: the repair turn carries the error: {second}");
    let third = bodies[3].to_string();
    assert!(third.contains("Call the final_answer tool now"), "{provider}: a plain-text end is asked for the tool: {third}");
    let system = bodies[0].to_string();
    assert!(system.contains("call the final_answer tool"), "{provider}: the system prompt says how to answer");
}

fn openai_turn(i: usize, turn: Turn) -> openai::ScriptedReply {
    match turn {
        Turn::Answer(args) => openai::ScriptedReply::tool_call(&format!("call_{i}"), "final_answer", args, openai::Tokens::new(20, 5)),
        Turn::Text(text) => openai::ScriptedReply::text(text, openai::Tokens::new(20, 5)),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_answers_are_validated_and_repaired() {
    let replies = script().into_iter().enumerate().map(|(i, t)| openai_turn(i, t)).collect();
    let server = openai::OpenAiServer::start_with_key("sk-structured-123456789", replies).await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("dracode.toml"), format!("[providers.openai]\nbase_url = \"{}\"\n", server.base_url())).unwrap();
    let dir = tmp.path().to_path_buf();
    tokio::task::spawn_blocking(move || run_and_check(&dir, "openai", &[("OPENAI_API_KEY", "sk-structured-123456789")])).await.unwrap();
    let names = |b: &Value| b["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect();
    let bodies = server.requests();
    assert_requests("openai", &bodies, names);
    let tool = bodies[0]["tools"].as_array().unwrap().iter().find(|t| t["function"]["name"] == "final_answer").unwrap().clone();
    assert_eq!(tool["function"]["parameters"]["properties"]["risk"]["maximum"], 5, "the schema is the tool's parameters");
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_answers_are_validated_and_repaired() {
    let replies = script()
        .into_iter()
        .enumerate()
        .map(|(i, turn)| match turn {
            Turn::Answer(input) => {
                anthropic::ScriptedReply::tool_use(&format!("toolu_{i}"), "final_answer", input, anthropic::Tokens::new(20, 5))
            }
            Turn::Text(text) => anthropic::ScriptedReply::text(text, anthropic::Tokens::new(20, 5)),
        })
        .collect();
    let server = anthropic::AnthropicServer::start_with_key("sk-ant-structured-123456789", replies).await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("dracode.toml"), format!("[providers.anthropic]\nbase_url = \"{}\"\n", server.base_url())).unwrap();
    let dir = tmp.path().to_path_buf();
    tokio::task::spawn_blocking(move || run_and_check(&dir, "anthropic", &[("ANTHROPIC_API_KEY", "sk-ant-structured-123456789")]))
        .await
        .unwrap();
    let names = |b: &Value| b["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
    assert_requests("anthropic", &server.requests(), names);
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_answers_are_validated_and_repaired() {
    let replies = script()
        .into_iter()
        .map(|turn| match turn {
            Turn::Answer(args) => gemini::Reply::Calls(vec![("final_answer".into(), args)], [20, 5, 0, 0]),
            Turn::Text(text) => gemini::Reply::Text(text.into(), [20, 5, 0, 0]),
        })
        .collect();
    let server = gemini::GeminiServer::start("AIza-structured-123456789", replies).await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("dracode.toml"), format!("[providers.gemini]\nbase_url = \"{}\"\n", server.base_url())).unwrap();
    let dir = tmp.path().to_path_buf();
    tokio::task::spawn_blocking(move || run_and_check(&dir, "gemini", &[("GEMINI_API_KEY", "AIza-structured-123456789")])).await.unwrap();
    let bodies: Vec<Value> = server.requests().into_iter().map(|(_, body)| body).collect();
    let names = |b: &Value| {
        b["tools"][0]["functionDeclarations"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap().to_string()).collect()
    };
    assert_requests("gemini", &bodies, names);
    let declaration =
        bodies[0]["tools"][0]["functionDeclarations"].as_array().unwrap().iter().find(|d| d["name"] == "final_answer").unwrap().clone();
    assert!(declaration["parameters"].get("additionalProperties").is_none(), "Gemini gets its schema subset");
}

/// A review task in a project folder inside a git repository: its findings become
/// `findings.sarif` (valid SARIF 2.1.0, paths from the repository root) and GitHub annotations;
/// a finding outside the workspace is dropped with a warning.
#[tokio::test(flavor = "multi_thread")]
async fn findings_become_sarif_and_annotations() {
    let answer = json!({"findings": [
        {"rule_id": "unsafe-block", "message": "unchecked pointer read,\nsee line 3", "file": "src/lib.rs", "start_line": 2, "end_line": 3, "severity": "warning"},
        {"rule_id": "unwrap", "message": "may panic", "file": "src/main.rs", "start_line": 7, "severity": "error"},
        {"rule_id": "unsafe-block", "message": "another", "file": "./src/lib.rs", "start_line": 9, "severity": "note"},
        {"rule_id": "escape", "message": "not here", "file": "../../etc/passwd", "start_line": 1, "severity": "error"}
    ]});
    let replies = vec![openai::ScriptedReply::tool_call("call_1", "final_answer", answer, openai::Tokens::new(20, 5))];
    let server = openai::OpenAiServer::start_with_key("sk-findings-123456789", replies).await;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    git_repo(&root, &[("proj/src/lib.rs", "fn a() {}\nunsafe { }\n"), ("proj/src/main.rs", "fn main() {}\n"), (".gitignore", "out/\n")]);
    std::fs::write(root.join("dracode.toml"), format!("[providers.openai]\nbase_url = \"{}\"\n", server.base_url())).unwrap();
    std::fs::write(
        root.join("review.toml"),
        "[[tasks]]\nid = \"review\"\nprompt = \"Review the unsafe code.\"\nrepo = \"proj\"\nisolation = \"copy\"\noutput = \"findings\"\n",
    )
    .unwrap();
    let out = run_openai(&root, "review.toml", &[("OPENAI_API_KEY", "sk-findings-123456789"), ("GITHUB_ACTIONS", "true")]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let annotation = "::warning file=proj/src/lib.rs,line=2,endLine=3,title=unsafe-block (warning) [dracode task review]::unchecked pointer read,%0Asee line 3";
    assert!(stderr.lines().any(|l| l == annotation), "{stderr}");
    // Each finding's severity is its annotation's level: error, warning, notice.
    assert_eq!(stderr.lines().filter(|l| l.starts_with("::warning ")).count(), 1, "{stderr}");
    let error = "::error file=proj/src/main.rs,line=7,endLine=7,title=unwrap (error) [dracode task review]::may panic";
    assert!(stderr.lines().any(|l| l == error), "{stderr}");
    let notice = "::notice file=proj/src/lib.rs,line=9,endLine=9,title=unsafe-block (note) [dracode task review]::another";
    assert!(stderr.lines().any(|l| l == notice), "{stderr}");
    assert!(stderr.contains("finding \"escape\" on \"../../etc/passwd\" dropped: the file is outside the workspace"), "{stderr}");

    let text = std::fs::read_to_string(tmp.path().join("out/findings.sarif")).unwrap();
    let log: Value = serde_json::from_str(&text).unwrap();
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(crate_root().join("tests/fixtures/schemas/sarif-schema-2.1.0.json")).unwrap())
            .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&log).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert_eq!(errors, Vec::<String>::new(), "findings.sarif is valid SARIF 2.1.0");
    let run = &log["runs"].as_array().unwrap()[0];
    assert_eq!(log["runs"].as_array().unwrap().len(), 1);
    assert_eq!(run["tool"]["driver"]["name"], "dracode");
    let rules: Vec<&str> = run["tool"]["driver"]["rules"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(rules, ["unsafe-block", "unwrap"], "rules de-duplicated, the dropped finding's rule absent");
    let uris: Vec<&str> = run["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, ["proj/src/lib.rs", "proj/src/main.rs", "proj/src/lib.rs"], "paths from the repository root");
    assert_eq!(run["results"][1]["level"], "error");
}

/// A schema that is not a JSON Schema (an unknown type, a remote `$ref`), and a schema file
/// that does not exist, are input errors at `validate` naming file, line, task, field and where
/// in the schema.
#[test]
fn bad_schemas_are_refused_at_validate() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\n\n[[tasks]]\nid = \"typo\"\nprompt = \"p\"\noutput_schema = { type = \"objekt\" }\n\n[[tasks]]\nid = \"missing\"\nprompt = \"p\"\noutput_schema_file = \"schemas/none.json\"\n\n[[tasks]]\nid = \"remote\"\nprompt = \"p\"\noutput_schema_file = \"remote.json\"\n",
    )
    .unwrap();
    let remote = r#"{"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}"#;
    std::fs::write(tmp.path().join("remote.json"), remote).unwrap();
    let out = dracode(tmp.path()).args(["validate", "tasks.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("tasks.toml:8:1: task \"typo\": field \"output_schema\": not a valid JSON Schema: unknown type \"objekt\""),
        "{stderr}"
    );
    assert!(stderr.contains("(at /type in the schema)"), "{stderr}");
    let refused = "tasks.toml:18:1: task \"remote\": field \"output_schema_file\": not a valid JSON Schema: not supported: remote $ref \"https://example.com/a.json\"";
    assert!(stderr.contains(refused) && stderr.contains("(at /properties/a/$ref in the schema)"), "{stderr}");
    assert!(stderr.contains("tasks.toml:13:1: task \"missing\": field \"output_schema_file\": cannot read"), "{stderr}");
}

/// `output_schema = true` is the JSON Schema that accepts anything: the task runs and whatever
/// the model answers (here a bare string) is its structured output.
#[tokio::test(flavor = "multi_thread")]
async fn a_true_schema_accepts_any_answer() {
    let replies =
        vec![openai::ScriptedReply::tool_call("call_1", "final_answer", json!({"value": "free text"}), openai::Tokens::new(20, 5))];
    let server = openai::OpenAiServer::start_with_key("sk-boolean-123456789", replies).await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::fs::write(tmp.path().join("dracode.toml"), format!("[providers.openai]\nbase_url = \"{}\"\n", server.base_url())).unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[[tasks]]\nid = \"anything\"\nprompt = \"Say something.\"\nrepo = \"ws\"\nisolation = \"copy\"\noutput_schema = true\n",
    )
    .unwrap();
    let out = run_openai(tmp.path(), "tasks.toml", &[("OPENAI_API_KEY", "sk-boolean-123456789")]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    let task = finished(&all, "anything");
    assert_eq!(task["status"], "passed", "{task}");
    assert_eq!(task["structured_output"], json!("free text"));
}

/// `output_schema = false` is a schema no answer can match: the task could never pass, so
/// `validate` refuses it (exit 2) naming file, line, task and field.
#[test]
fn a_false_schema_is_refused_at_validate() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\n\n[[tasks]]\nid = \"never\"\nprompt = \"p\"\noutput_schema = false\n",
    )
    .unwrap();
    let out = dracode(tmp.path()).args(["validate", "tasks.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let refused =
        "tasks.toml:8:1: task \"never\": field \"output_schema\": the schema `false` accepts no answer: the task could never pass";
    assert!(stderr.contains(refused), "{stderr}");
}

/// `dracode run MANIFEST --out out --provider openai` in `dir` with `env`, off the async workers
/// (the mock OpenAI server runs on them).
async fn run_openai(dir: &Path, manifest: &str, env: &[(&str, &str)]) -> std::process::Output {
    let (dir, manifest) = (dir.to_path_buf(), manifest.to_string());
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        dracode(&dir).envs(env).args(["run", &manifest, "--out", "out", "--provider", "openai"]).output().unwrap()
    })
    .await
    .unwrap()
}
