//! The same manifest, unchanged, runs against every provider type: only `--provider` differs.
//! Each server speaks its own wire format strictly; every run must pass with the token sums the
//! server reported.

use crate::support::anthropic_server as anthropic;
use crate::support::cli::{dracode, finished, read_jsonl};
use crate::support::gemini_server as gemini;
use crate::support::ollama_server as ollama;
use crate::support::openai_server as openai;
use serde_json::{Value, json};
use std::path::Path;

/// One task that writes a file, then finishes.
const MANIFEST: &str = "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\n[[tasks]]\nid = \"write\"\nprompt = \"Create hello.txt\"\n";

fn write_call() -> Value {
    json!({"file_path": "hello.txt", "content": "hi\n"})
}

/// Runs the manifest with `--provider NAME` and returns the task's `task.finished`.
async fn run(dir: &Path, provider: &str, env: &[(&str, &str)]) -> Value {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(dir.join("tasks.toml"), MANIFEST).unwrap();
    let (dir, provider) = (dir.to_path_buf(), provider.to_string());
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        let out = dracode(&dir).envs(env).args(["run", "tasks.toml", "--out", "out", "--provider", &provider]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{provider}: {}", String::from_utf8_lossy(&out.stderr));
        let all = read_jsonl(&dir.join("out/results.jsonl"));
        let task = finished(&all, "write").clone();
        assert!(std::fs::read_to_string(dir.join("out/diffs/write.patch")).unwrap().contains("+hi"));
        task
    })
    .await
    .unwrap()
}

fn config(dir: &Path, name: &str, body: &str) {
    std::fs::write(dir.join("dracode.toml"), format!("[providers.{name}]\n{body}")).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_and_azure() {
    let server = openai::OpenAiServer::start_with_key(
        "sk-openai-123456789",
        vec![
            openai::ScriptedReply::tool_call("c1", "write_file", write_call(), openai::Tokens::new(30, 5)),
            openai::ScriptedReply::text("done", openai::Tokens::new(40, 2)),
        ],
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    config(tmp.path(), "openai", &format!("base_url = \"{}\"\n", server.base_url()));
    let task = run(tmp.path(), "openai", &[("OPENAI_API_KEY", "sk-openai-123456789")]).await;
    assert_eq!(task["usage"]["input_tokens"], 70);
    assert_eq!(task["usage"]["output_tokens"], 7);

    let server = openai::OpenAiServer::start_azure(
        "azure-key-123456789",
        vec![
            openai::ScriptedReply::tool_call("c1", "write_file", write_call(), openai::Tokens::new(31, 5)),
            openai::ScriptedReply::text("done", openai::Tokens::new(41, 2)),
        ],
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    config(tmp.path(), "azure", "model = \"my-gpt4o-deployment\"\n");
    let endpoint = server.base_url();
    let task = run(tmp.path(), "azure", &[("AZURE_OPENAI_API_KEY", "azure-key-123456789"), ("AZURE_OPENAI_ENDPOINT", &endpoint)]).await;
    assert_eq!(task["usage"]["input_tokens"], 72);
    assert!(server.received().iter().all(|r| r.path == "/openai/deployments/my-gpt4o-deployment/chat/completions"));
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic() {
    let server = anthropic::AnthropicServer::start_with_key(
        "sk-ant-123456789",
        vec![
            anthropic::ScriptedReply::tool_use("toolu_1", "write_file", write_call(), anthropic::Tokens::new(30, 5)),
            anthropic::ScriptedReply::text("done", anthropic::Tokens::new(40, 2)),
        ],
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    config(tmp.path(), "anthropic", &format!("base_url = \"{}\"\n", server.base_url()));
    let task = run(tmp.path(), "anthropic", &[("ANTHROPIC_API_KEY", "sk-ant-123456789")]).await;
    assert_eq!(task["usage"]["input_tokens"], 70);
    assert_eq!(task["usage"]["output_tokens"], 7);
}

#[tokio::test(flavor = "multi_thread")]
async fn ollama_native() {
    let server = ollama::OllamaServer::start(
        "qwen2.5-coder",
        vec![ollama::Reply::Calls(vec![("write_file".into(), write_call())], 30, 5), ollama::Reply::Text("done".into(), 40, 2)],
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    config(tmp.path(), "ollama", "model = \"qwen2.5-coder\"\n");
    let task = run(tmp.path(), "ollama", &[("OLLAMA_HOST", &server.base_url())]).await;
    assert_eq!(task["usage"]["input_tokens"], 70);
    assert_eq!(task["usage"]["output_tokens"], 7);
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini() {
    let server = gemini::GeminiServer::start(
        "AIza-matrix-123456789",
        vec![
            gemini::Reply::Calls(vec![("write_file".into(), write_call())], [30, 5, 0, 0]),
            gemini::Reply::Text("done".into(), [40, 2, 0, 0]),
        ],
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    config(tmp.path(), "gemini", &format!("base_url = \"{}\"\n", server.base_url()));
    let task = run(tmp.path(), "gemini", &[("GEMINI_API_KEY", "AIza-matrix-123456789")]).await;
    assert_eq!(task["usage"]["input_tokens"], 70);
    assert_eq!(task["usage"]["output_tokens"], 7);
}
