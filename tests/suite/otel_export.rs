//! OpenTelemetry export (`--features otel`) against a real OTLP/HTTP receiver: a Python server
//! that decodes every request with the OpenTelemetry protobuf types
//! (`tests/support/otlp_receiver.py`; needs `pip install opentelemetry-proto`, python from
//! `DRACODE_OTLP_PYTHON`, else `python3`). Without it the test is skipped with a note, unless
//! `DRACODE_REQUIRE_OTLP=1`.

use crate::support::cli::{crate_root, dracode, events, finished, read_jsonl};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};

struct Receiver {
    child: Child,
    port: u16,
}

impl Receiver {
    fn start() -> Option<Receiver> {
        let python = std::env::var("DRACODE_OTLP_PYTHON").unwrap_or_else(|_| "python3".to_string());
        let usable = Command::new(&python).args(["-c", "import opentelemetry.proto.collector.trace.v1.trace_service_pb2"]).output();
        if !usable.is_ok_and(|o| o.status.success()) {
            assert!(
                std::env::var("DRACODE_REQUIRE_OTLP").as_deref() != Ok("1"),
                "{python} cannot import opentelemetry-proto and DRACODE_REQUIRE_OTLP=1"
            );
            eprintln!("note: {python} has no opentelemetry-proto (pip install opentelemetry-proto): OTLP export test skipped");
            return None;
        }
        let mut child = Command::new(&python)
            .arg(crate_root().join("tests/support/otlp_receiver.py"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut first = String::new();
        let stdout = child.stdout.as_mut().unwrap();
        let mut byte = [0u8; 1];
        while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
            first.push(byte[0] as char);
        }
        Some(Receiver { port: first.trim().parse().unwrap(), child })
    }

    /// Every span and histogram point received so far (the exporter sends before dracode
    /// exits).
    fn spans(mut self) -> Vec<Value> {
        self.child.kill().unwrap();
        let stdout = self.child.stdout.take().unwrap();
        BufReader::new(stdout).lines().map(|l| serde_json::from_str(&l.unwrap()).unwrap()).collect()
    }
}

fn named<'a>(spans: &'a [Value], prefix: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with(prefix))).collect()
}

/// The histogram points of `metric`.
fn points<'a>(records: &'a [Value], metric: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["metric"] == metric).collect()
}

fn int_attr(span: &Value, key: &str) -> u64 {
    span["attributes"][key]["intValue"].as_str().unwrap_or_else(|| panic!("{key} in {span}")).parse().unwrap()
}

fn run(dir: &Path, port: u16, extra: &[&str]) -> Vec<Value> {
    let out = dir.join("out");
    let status = dracode(dir)
        .arg("run")
        .arg(crate_root().join("examples/quickstart.toml"))
        .arg("--out")
        .arg(&out)
        .args(extra)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{port}"))
        .env("OTEL_EXPORTER_OTLP_HEADERS", "x-team=ci")
        .env("GITHUB_RUN_ID", "77")
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(0), "{}", String::from_utf8_lossy(&status.stderr));
    read_jsonl(&out.join("results.jsonl"))
}

#[test]
fn spans_per_run_task_llm_call_and_tool_call_carry_the_runs_token_counts() {
    let Some(receiver) = Receiver::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let all = run(tmp.path(), receiver.port, &[]);
    let records = receiver.spans();
    let (spans, metrics): (Vec<Value>, Vec<Value>) = records.into_iter().partition(|r| r.get("span_id").is_some());

    let roots = named(&spans, "dracode run");
    assert_eq!(roots.len(), 1, "{spans:?}");
    let root = roots[0];
    let run_finished = all.last().unwrap();
    assert_eq!(int_attr(root, "gen_ai.usage.input_tokens"), run_finished["usage"]["input_tokens"].as_u64().unwrap());
    assert_eq!(int_attr(root, "gen_ai.usage.output_tokens"), run_finished["usage"]["output_tokens"].as_u64().unwrap());
    assert!(spans.iter().all(|s| s["trace_id"] == root["trace_id"]), "one trace per run");
    assert_eq!(root["resource"]["service.name"]["stringValue"], "dracode");
    assert_eq!(root["resource"]["cicd.pipeline.run.id"]["stringValue"], "77");
    assert_eq!(root["header_x_team"], "ci", "OTEL_EXPORTER_OTLP_HEADERS are sent");

    let tasks = named(&spans, "invoke_agent dracode");
    assert_eq!(tasks.len(), 2, "one span per task");
    for task in &tasks {
        assert_eq!(task["parent_span_id"], root["span_id"]);
        let id = task["attributes"]["dracode.task.id"]["stringValue"].as_str().unwrap();
        let done = finished(&all, id);
        assert_eq!(task["attributes"]["dracode.task.status"]["stringValue"], "passed");
        assert_eq!(int_attr(task, "gen_ai.usage.input_tokens"), done["usage"]["input_tokens"].as_u64().unwrap());
        assert_eq!(int_attr(task, "gen_ai.usage.output_tokens"), done["usage"]["output_tokens"].as_u64().unwrap());
    }

    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), events(&all, "turn.completed").len(), "one span per LLM call");
    let chat_input: u64 = chats.iter().map(|c| int_attr(c, "gen_ai.usage.input_tokens")).sum();
    assert_eq!(chat_input, run_finished["usage"]["input_tokens"].as_u64().unwrap());
    for chat in &chats {
        assert_eq!(chat["attributes"]["gen_ai.operation.name"]["stringValue"], "chat");
        assert_eq!(chat["attributes"]["gen_ai.request.model"]["stringValue"], "replay");
        assert!(chat["attributes"]["gen_ai.response.finish_reasons"]["arrayValue"]["values"].is_array(), "{chat}");
        assert!(tasks.iter().any(|t| t["span_id"] == chat["parent_span_id"]), "under its task");
    }
    let tools = named(&spans, "execute_tool ");
    assert_eq!(tools.len(), events(&all, "tool.completed").len(), "one span per tool call");
    assert!(tools.iter().all(|t| t["attributes"].get("gen_ai.tool.call.arguments").is_none()), "no content without --otel-log-content");

    // The metrics: token usage per token type, summed over every call, and call durations.
    let usage = points(&metrics, "gen_ai.client.token.usage");
    for (kind, total) in [("input", &run_finished["usage"]["input_tokens"]), ("output", &run_finished["usage"]["output_tokens"])] {
        let point = usage.iter().find(|p| p["attributes"]["gen_ai.token.type"] == kind).unwrap_or_else(|| panic!("{kind}: {usage:?}"));
        assert_eq!(point["sum"].as_f64().unwrap(), total.as_f64().unwrap(), "{point}");
        assert_eq!(point["count"].as_str().unwrap().parse::<usize>().unwrap(), chats.len());
        assert_eq!(point["attributes"]["gen_ai.operation.name"], "chat");
        assert_eq!(point["unit"], "{token}");
        assert_eq!(point["temporality"], 2, "cumulative");
    }
    let duration = points(&metrics, "gen_ai.client.operation.duration");
    assert_eq!(duration.len(), 1, "{duration:?}");
    assert_eq!(duration[0]["unit"], "s");
}

#[test]
fn content_only_on_request_and_a_dead_receiver_never_fails_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    // Nothing listens on port 9 of 127.0.0.1: the export fails, the run does not.
    run(tmp.path(), 9, &[]);

    let Some(receiver) = Receiver::start() else { return };
    run(tmp.path(), receiver.port, &["--otel-log-content"]);
    let spans = receiver.spans();
    let tools = named(&spans, "execute_tool ");
    assert!(!tools.is_empty());
    assert!(tools.iter().all(|t| t["attributes"]["gen_ai.tool.call.arguments"]["stringValue"].is_string()), "{tools:?}");
}

/// `gen_ai.provider.name` names the provider per the GenAI conventions (`openai`,
/// `azure.ai.openai`), not the alias the config gives it (`mock`, `corp`): on the task spans,
/// the call spans and the metrics alike.
#[tokio::test(flavor = "multi_thread")]
async fn the_provider_name_follows_the_conventions_not_the_config_alias() {
    use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
    let Some(receiver) = Receiver::start() else { return };
    let openai = OpenAiServer::start_with_key("sk-otel-123456789", vec![ScriptedReply::text("done", Tokens::new(9, 2))]).await;
    let azure = OpenAiServer::start_azure("azure-otel-123456789", vec![ScriptedReply::text("done", Tokens::new(8, 2))]).await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::fs::write(
        tmp.path().join("dracode.toml"),
        format!(
            "[providers.mock]\ntype = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o\"\n\n\
             [providers.corp]\ntype = \"azure\"\nbase_url = \"{}\"\nmodel = \"my-deployment\"\napi_key = \"azure-otel-123456789\"\n",
            openai.base_url(),
            azure.base_url()
        ),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[defaults]\nrepo = \"ws\"\nisolation = \"none\"\nrequire_change = false\n\n\
         [[tasks]]\nid = \"a\"\nprompt = \"Say done.\"\nprovider = \"mock\"\n\n\
         [[tasks]]\nid = \"b\"\nprompt = \"Say done.\"\nprovider = \"corp\"\n",
    )
    .unwrap();
    let out = run_exporting(tmp.path(), receiver.port, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let records = receiver.spans();
    let provider = |r: &Value| {
        let attribute = &r["attributes"]["gen_ai.provider.name"];
        attribute["stringValue"].as_str().or(attribute.as_str()).unwrap_or_else(|| panic!("no provider in {r}")).to_string()
    };
    for (task, expected) in [("a", "openai"), ("b", "azure.ai.openai")] {
        let spans = named(&records, "invoke_agent dracode");
        let span = spans.iter().find(|s| s["attributes"]["dracode.task.id"]["stringValue"] == task).unwrap();
        assert_eq!(provider(span), expected, "task {task}");
        let chats: Vec<&Value> = named(&records, "chat ").into_iter().filter(|c| c["parent_span_id"] == span["span_id"]).collect();
        assert_eq!(chats.len(), 1);
        assert_eq!(provider(chats[0]), expected, "the call of task {task}");
    }
    let mut metric_providers: Vec<String> = points(&records, "gen_ai.client.token.usage").iter().map(|p| provider(p)).collect();
    metric_providers.sort();
    metric_providers.dedup();
    assert_eq!(metric_providers, ["azure.ai.openai", "openai"]);
}

/// Every span whose status is ERROR says why in `error.type` (the OpenTelemetry conventions): a
/// task whose check fails, and the run it makes exit 1.
#[tokio::test(flavor = "multi_thread")]
async fn every_error_span_carries_error_type() {
    use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
    let Some(receiver) = Receiver::start() else { return };
    let openai = OpenAiServer::start_with_key("sk-otel-123456789", vec![ScriptedReply::text("done", Tokens::new(9, 2))]).await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::fs::write(tmp.path().join("dracode.toml"), format!("[providers.openai]\nbase_url = \"{}\"\n", openai.base_url())).unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[[tasks]]\nid = \"a\"\nprompt = \"Say done.\"\nrepo = \"ws\"\nisolation = \"none\"\nrequire_change = false\ncheck = \"exit 3\"\n",
    )
    .unwrap();
    let out = run_exporting(tmp.path(), receiver.port, &["--provider", "openai"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let records = receiver.spans();
    let errors: Vec<&Value> = records.iter().filter(|r| r["status"]["code"] == "STATUS_CODE_ERROR").collect();
    assert_eq!(errors.len(), 2, "the task and the run: {records:?}");
    for span in errors {
        let kind = span["attributes"]["error.type"]["stringValue"].as_str();
        assert!(kind.is_some_and(|k| !k.is_empty()), "no error.type on {}: {span}", span["name"]);
    }
}

/// `dracode run tasks.toml --out out` in `dir` (with `extra` arguments), exporting its spans to the
/// receiver on `port`, off the async workers.
async fn run_exporting(dir: &std::path::Path, port: u16, extra: &[&str]) -> std::process::Output {
    let (dir, extra): (std::path::PathBuf, Vec<String>) = (dir.to_path_buf(), extra.iter().map(ToString::to_string).collect());
    tokio::task::spawn_blocking(move || {
        dracode(&dir)
            .env("OPENAI_API_KEY", "sk-otel-123456789")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{port}"))
            .args(["run", "tasks.toml", "--out", "out"])
            .args(extra)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}
