//! The `read_process_output` tool: a background process's status and the output it produced so
//! far (the newest bytes, up to the task's output limit), optionally after waiting for more.

use super::{ErrorCode, Tool, ToolContext, ToolError, parse_args, schema_of};
use dracode_llm::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// The `read_process_output` tool.
pub struct ReadProcessOutput;

/// The longest one call waits for new output.
const MAX_WAIT: f64 = 60.0;

// The arguments of `read_process_output`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The id run_persistent returned.
    process_id: String,
    /// First wait up to this many seconds (at most 60) for new output or the process's exit; default 0.
    #[serde(default)]
    wait_seconds: f64,
}

impl Tool for ReadProcessOutput {
    fn name(&self) -> &'static str {
        "read_process_output"
    }
    fn description(&self) -> &'static str {
        "Show a background process's status (running, or its exit code) and its combined stdout/stderr so far \
         (the newest part when long). Optionally wait a few seconds for new output first."
    }
    fn schema(&self) -> serde_json::Value {
        schema_of::<Args>()
    }
    fn read_only(&self) -> bool {
        true
    }
    fn call<'a>(&'a self, ctx: &'a ToolContext, input: serde_json::Value) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move { read(ctx, parse_args(input)?).await })
    }
}

async fn read(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
    if !(0.0..=MAX_WAIT).contains(&args.wait_seconds) {
        return Err(ToolError::new(ErrorCode::InvalidArguments, format!("wait_seconds must be between 0 and {MAX_WAIT}")));
    }
    let proc = ctx.processes.get(&args.process_id).ok_or_else(|| unknown(ctx, &args.process_id))?;
    if args.wait_seconds > 0.0 && proc.running() {
        proc.wait_change(Duration::from_secs_f64(args.wait_seconds)).await;
    }
    let (status, output) = proc.report();
    let output = if output.is_empty() { "(no output yet)".to_string() } else { output };
    Ok(format!("process {:?}: {status}\ncommand: {}\n--- output ---\n{output}", args.process_id, proc.command))
}

/// The error for an id that names no process, listing those that exist.
pub(crate) fn unknown(ctx: &ToolContext, id: &str) -> ToolError {
    let ids = ctx.processes.ids();
    let known = if ids.is_empty() { "none was started".to_string() } else { format!("known: {}", ids.join(", ")) };
    ToolError::new(ErrorCode::InvalidArguments, format!("no background process {id:?} ({known})"))
}
