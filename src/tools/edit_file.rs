//! The `edit_file` tool. TODO(helper): implement.

use super::{Tool, ToolContext, ToolError, ErrorCode};
use crate::llm::BoxFuture;

/// The `edit_file` tool.
pub struct EditFile;

impl Tool for EditFile {
    fn name(&self) -> &'static str {
        "edit_file"
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
