//! `dracode mcp-probe` (hidden): one server started as a task would start it (unconfined, in
//! the current directory), its tools listed and some called, each step printed as a JSON line.
//! It exists so that dracode's MCP client can be tested from outside — by the MCP conformance
//! suite, which launches a client per scenario.

use super::{Launch, McpServer, McpServerConfig, ServerFailed};
use serde_json::{Value, json};
use std::path::Path;

/// Why a probe could not be made: its arguments are wrong, or the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A `--call` without `=`.
    #[error("--call {call:?}: write TOOL=ARGUMENTS_JSON")]
    CallSyntax {
        /// The `--call` value.
        call: String,
    },
    /// A `--call`'s arguments are not JSON.
    #[error("--call {tool}: {reason}")]
    CallArguments {
        /// The tool.
        tool: String,
        /// Why.
        reason: serde_json::Error,
    },
    /// `--call-each` is not JSON.
    #[error("--call-each: {0}")]
    CallEachArguments(serde_json::Error),
    /// The server did not start.
    #[error(transparent)]
    Start(#[from] ServerFailed),
}

/// What to do once the server is started.
pub struct ProbePlan {
    /// `(tool, arguments)` calls, in order.
    pub calls: Vec<(String, Value)>,
    /// Arguments to call every listed tool with.
    pub call_each: Option<Value>,
    /// List tools with their input schemas.
    pub schemas: bool,
}

impl ProbePlan {
    /// Reads `TOOL=JSON` calls and the `--call-each` arguments.
    pub fn parse(calls: &[String], call_each: Option<&str>) -> Result<ProbePlan, ProbeError> {
        let mut parsed = Vec::new();
        for call in calls {
            let (tool, args) = call.split_once('=').ok_or_else(|| ProbeError::CallSyntax { call: call.clone() })?;
            let args = serde_json::from_str(args).map_err(|reason| ProbeError::CallArguments { tool: tool.to_string(), reason })?;
            parsed.push((tool.to_string(), args));
        }
        let call_each = call_each.map(serde_json::from_str).transpose().map_err(ProbeError::CallEachArguments)?;
        Ok(ProbePlan { calls: parsed, call_each, schemas: false })
    }
}

/// Starts server `name`, writes `{"protocol_version", "tools"}` and one line per call to
/// `out`; `Err` when the server does not start.
pub async fn run(
    name: &str,
    config: &McpServerConfig,
    plan: &ProbePlan,
    cwd: &Path,
    http: reqwest::Client,
    out: &mut dyn std::io::Write,
) -> Result<(), ProbeError> {
    let env = dracode_input::process_env();
    let launch = Launch { cwd, env: &env, tmp_dir: None, confine: None, http, redactor: dracode_secrets::Redactor::default() };
    let (server, tools) = McpServer::start(name, config, &launch).await.map_err(|error| ServerFailed { name: name.to_string(), error })?;
    let listed: Vec<Value> =
        tools.iter().map(|t| if plan.schemas { json!({"name": t.name, "inputSchema": t.input_schema}) } else { json!(t.name) }).collect();
    let mut print = |line: Value| {
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    print(json!({"protocol_version": server.protocol_version(), "tools": listed}));
    let each = plan.call_each.iter().flat_map(|args| tools.iter().map(move |t| (t.name.clone(), args.clone())));
    for (tool, args) in plan.calls.iter().cloned().chain(each) {
        let line = match server.call(&tool, args, config.call_timeout()).await {
            Ok(out) => json!({"tool": tool, "is_error": out.is_error, "text": out.text}),
            Err(e) => json!({"tool": tool, "error": format!("{e:?}")}),
        };
        print(line);
    }
    server.stop().await;
    Ok(())
}
