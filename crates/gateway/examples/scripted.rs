//! A gateway answering from a script, to drive the real agents against it by hand.
//!
//! `cargo run -p dracode-gateway --example scripted -- TOKEN [--fail STATUS] [--cmd COMMAND] [--reasoning]`
//!
//! Prints `PORT <n>` on stdout once listening, then logs each decoded call on stderr. A call
//! that offers a shell tool and carries no tool result yet is answered with a call of that tool
//! running COMMAND (default `echo hi > out.txt`); any other call with the text `done`. With
//! `--fail STATUS` every call is refused with that status; with `--reasoning` each answer starts
//! with a reasoning block (text and an opaque signature).
#![allow(clippy::print_stdout, clippy::print_stderr, reason = "a command-line example")]

use std::io::Write;
use std::sync::Arc;

use dracode_gateway::{Backend, BoxFuture, Call, Gateway, Refusal};
use dracode_llm::{ContentBlock, LlmResponse, StopReason, ToolSpec, Usage};
use serde_json::{Value, json};

/// Shell tools of the four agents, in the order they are tried.
const SHELLS: [&str; 5] = ["Bash", "exec_command", "shell", "run_shell_command", "bash"];

/// The script.
struct Scripted {
    fail: Option<u16>,
    reasoning: bool,
    command: String,
}

/// Arguments for `tool` that run `command`, built from its schema.
fn arguments(tool: &ToolSpec, command: &str) -> Value {
    let props = tool.parameters.get("properties").cloned().unwrap_or_else(|| json!({}));
    let key = if props.get("command").is_some() {
        "command"
    } else if props.get("cmd").is_some() {
        "cmd"
    } else {
        "command"
    };
    let mut args = json!({});
    args[key] =
        if props.pointer(&format!("/{key}/type")) == Some(&json!("array")) { json!(["bash", "-lc", command]) } else { json!(command) };
    for required in tool.parameters.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if args.get(required).is_some() {
            continue;
        }
        args[required] = match (required, props.pointer(&format!("/{required}/type")).and_then(Value::as_str)) {
            ("description", _) => json!("Write out.txt"),
            (_, Some("array")) => json!([]),
            (_, Some("integer" | "number")) => json!(10000),
            (_, Some("boolean")) => json!(false),
            _ => json!("."),
        };
    }
    args
}

impl Backend for Scripted {
    fn call(&self, call: Call) -> BoxFuture<'_, Result<LlmResponse, Refusal>> {
        Box::pin(async move {
            let tools: Vec<&str> = call.tools.iter().map(|t| t.name.as_str()).collect();
            let answered = call.messages.iter().flat_map(|m| &m.content).any(|b| matches!(b, ContentBlock::ToolResult { .. }));
            let last = call.messages.last().map(|m| serde_json::to_string(&m.content).unwrap_or_default()).unwrap_or_default();
            let last: String = last.chars().take(300).collect();
            let signatures: Vec<&str> = call
                .messages
                .iter()
                .flat_map(|m| &m.content)
                .filter_map(|b| {
                    if let ContentBlock::Reasoning { signature, .. } = b { Some(signature.as_deref().unwrap_or("-")) } else { None }
                })
                .collect();
            eprintln!(
                "CALL format={} model={} stream={} max_tokens={:?} system={}B messages={} reasoning={signatures:?} tools={tools:?} last={last}",
                call.format.as_str(),
                call.model,
                call.stream,
                call.max_tokens,
                call.system.len(),
                call.messages.len()
            );
            if let Some(status) = self.fail {
                return Err(Refusal { status, message: "dracode: task token budget exhausted".into() });
            }
            let shell = SHELLS.iter().find_map(|name| call.tools.iter().find(|t| t.name == *name));
            let usage = Usage::from_counts(100, 20);
            let response = match shell {
                Some(tool) if !answered => LlmResponse {
                    content: vec![ContentBlock::ToolUse {
                        id: "call_scripted_1".into(),
                        name: tool.name.clone(),
                        input: arguments(tool, &self.command),
                    }],
                    stop_reason: StopReason::ToolUse,
                    usage,
                    model: None,
                },
                _ => LlmResponse { content: vec![ContentBlock::text("done")], stop_reason: StopReason::EndTurn, usage, model: None },
            };
            let mut response = response;
            if self.reasoning {
                let thought = ContentBlock::Reasoning {
                    text: "Planning the step.".into(),
                    signature: Some("c2lnbmF0dXJl".into()),
                    id: None,
                    redacted: false,
                };
                response.content.insert(0, thought);
            }
            Ok(response)
        })
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let token = args.first().cloned().unwrap_or_else(|| "dracode-token".into());
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let fail = flag("--fail").and_then(|s| s.parse().ok());
    let command = flag("--cmd").unwrap_or_else(|| "echo hi > out.txt".into());
    let reasoning = args.iter().any(|a| a == "--reasoning");
    let gateway = Gateway::start(token, Arc::new(Scripted { fail, reasoning, command })).await?;
    println!("PORT {}", gateway.addr().port());
    std::io::stdout().flush()?;
    tokio::signal::ctrl_c().await?;
    drop(gateway);
    Ok(())
}
