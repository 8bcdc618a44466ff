//! The `kill_process` tool: stops a background process started by `run_persistent` (SIGTERM to
//! its process group, SIGKILL after a grace period) and returns its last output.

use super::{Tool, ToolContext, ToolError, parse_args, schema_of};
use dracode_llm::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

/// The `kill_process` tool.
pub struct KillProcess;

// The arguments of `kill_process`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The id run_persistent returned.
    process_id: String,
}

impl Tool for KillProcess {
    fn name(&self) -> &'static str {
        "kill_process"
    }
    fn description(&self) -> &'static str {
        "Stop a background process started with run_persistent (and everything it started) and show its final output."
    }
    fn schema(&self) -> serde_json::Value {
        schema_of::<Args>()
    }
    fn call<'a>(&'a self, ctx: &'a ToolContext, input: serde_json::Value) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            let args: Args = parse_args(input)?;
            let proc = ctx.processes.get(&args.process_id).ok_or_else(|| super::read_process_output::unknown(ctx, &args.process_id))?;
            let was_running = proc.stop().await;
            let (status, output) = proc.report();
            let verb = if was_running { "stopped" } else { "had already exited" };
            Ok(format!("process {:?} {verb}: {status}\n--- output ---\n{output}", args.process_id))
        })
    }
}
