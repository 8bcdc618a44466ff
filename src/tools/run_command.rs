//! The `run_command` tool. TODO(helper): implement.

use super::{Tool, ToolContext, ToolError, ErrorCode};
use crate::llm::BoxFuture;

/// The `run_command` tool.
pub struct RunCommand;

impl Tool for RunCommand {
    fn name(&self) -> &'static str {
        "run_command"
    }
    fn description(&self) -> &'static str {
        "not built yet"
    }
    fn schema(&self) -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {}})
    }
    fn call<'a>(&'a self, _ctx: &'a ToolContext, _input: serde_json::Value) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async { Err(ToolError::new(ErrorCode::InvalidArguments, "not built yet")) })
    }
}
