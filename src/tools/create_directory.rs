//! The `create_directory` tool: creates a directory and any missing parents.

use super::{BlockingTool, ErrorCode, ToolContext, ToolError};
use dracode_sandbox::Sandbox;
use schemars::JsonSchema;
use serde::Deserialize;

/// The `create_directory` tool.
pub struct CreateDirectory;

// The arguments of `create_directory`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// Path of the directory to create, relative to workspace root; missing parents are created too.
    path: String,
}

impl BlockingTool for CreateDirectory {
    const NAME: &'static str = "create_directory";
    const DESCRIPTION: &'static str =
        "Create a directory (and any missing parent directories) in the workspace. Returns OK; an existing directory is not an error.";
    type Args = Args;
    fn run(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
        create(&ctx.sandbox, &args)
    }
}

fn create(sandbox: &Sandbox, args: &Args) -> Result<String, ToolError> {
    let shown = &args.path;
    let path = sandbox.resolve_for_write(shown)?;
    sandbox.check_changeable(&path, shown)?;
    let rel = sandbox.relative(&path);
    if path.is_dir() {
        return Ok(format!("OK: directory {rel} already exists"));
    }
    if std::fs::symlink_metadata(&path).is_ok() {
        return Err(ToolError::new(ErrorCode::AlreadyExists, format!("{shown} already exists and is not a directory")));
    }
    // Each level is created with mkdirat in its parent opened beneath the root.
    sandbox.create_dir_all(&path).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOTDIR) => ToolError::new(ErrorCode::AlreadyExists, format!("a parent of {shown} is a file, not a directory")),
        _ => ToolError::io(&e, shown),
    })?;
    Ok(format!("OK: created directory {rel}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool as _;
    use crate::tools::test_context;
    use serde_json::json;

    #[tokio::test]
    async fn creates_nested_directories_and_accepts_existing_ones() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let out = CreateDirectory.call(&ctx, json!({"path": "src/utils/deep"})).await.unwrap();
        assert_eq!(out, "OK: created directory src/utils/deep");
        assert!(dir.path().join("src/utils/deep").is_dir());
        let out = CreateDirectory.call(&ctx, json!({"path": "src/utils"})).await.unwrap();
        assert_eq!(out, "OK: directory src/utils already exists");
    }

    #[tokio::test]
    async fn each_error_has_its_code_and_nothing_is_created_outside() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let ctx = test_context(dir.path());
        let cases = [
            (json!({"path": "file"}), ErrorCode::AlreadyExists),
            (json!({"path": "file/sub"}), ErrorCode::AlreadyExists),
            (json!({"path": "../escape"}), ErrorCode::PathOutsideWorkspace),
            (json!({"path": "/tmp/dracode-create-directory-test"}), ErrorCode::PathOutsideWorkspace),
            (json!({"path": "out/sub"}), ErrorCode::PathOutsideWorkspace),
            (json!({"dir": "x"}), ErrorCode::InvalidArguments),
        ];
        for (input, want) in cases {
            let err = CreateDirectory.call(&ctx, input.clone()).await.expect_err(&input.to_string());
            assert_eq!(err.code, want, "{input}: {err}");
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        assert!(!dir.path().join("../escape").exists());
    }
}
