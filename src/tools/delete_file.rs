//! The `delete_file` tool: removes a file, a symlink (never its target), or a directory.

use super::{BlockingTool, ErrorCode, ToolContext, ToolError};
use dracode_sandbox::Sandbox;
use schemars::JsonSchema;
use serde::Deserialize;

/// The `delete_file` tool.
pub struct DeleteFile;

// The arguments of `delete_file`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// Path of the file or directory to delete, relative to workspace root.
    path: String,
    /// Delete a non-empty directory and everything in it.
    #[serde(default)]
    recursive: bool,
}

impl BlockingTool for DeleteFile {
    const NAME: &'static str = "delete_file";
    const DESCRIPTION: &'static str = "Delete a file or directory in the workspace (a non-empty directory needs recursive=true). \
         Returns OK naming what was deleted.";
    type Args = Args;
    fn run(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
        delete(&ctx.sandbox, &args)
    }
}

fn delete(sandbox: &Sandbox, args: &Args) -> Result<String, ToolError> {
    let shown = &args.path;
    let path = sandbox.resolve_entry(shown)?;
    sandbox.check_changeable(&path, shown)?;
    if path == sandbox.root() {
        return Err(ToolError::new(ErrorCode::InvalidArguments, "refusing to delete the workspace root"));
    }
    // The entry is acted on through its parent directory, opened beneath the root.
    let entry = sandbox.open_parent(&path).map_err(|e| ToolError::io(&e, shown))?;
    let is_dir = entry.is_dir().map_err(|e| ToolError::io(&e, shown))?;
    let rel = sandbox.relative(&path);
    if !is_dir {
        entry.remove().map_err(|e| ToolError::io(&e, shown))?;
        return Ok(format!("OK: deleted {rel}"));
    }
    let result = if args.recursive { entry.remove_all() } else { entry.remove() };
    match result {
        Ok(()) => Ok(format!("OK: deleted directory {rel}")),
        Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!("directory {rel} is not empty; set recursive to true to delete it and everything in it"),
        )),
        Err(e) => Err(ToolError::io(&e, shown)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool as _;
    use crate::tools::test_context;
    use serde_json::json;

    #[tokio::test]
    async fn deletes_files_links_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("f.txt"), "x").unwrap();
        std::fs::create_dir_all(root.join("empty")).unwrap();
        std::fs::create_dir_all(root.join("full/deep")).unwrap();
        std::fs::write(root.join("full/deep/g.txt"), "x").unwrap();
        std::fs::write(root.join("target.txt"), "keep").unwrap();
        std::os::unix::fs::symlink(root.join("target.txt"), root.join("link")).unwrap();
        let ctx = test_context(root);
        let cases = [
            (json!({"path": "f.txt"}), "OK: deleted f.txt"),
            (json!({"path": "empty"}), "OK: deleted directory empty"),
            (json!({"path": "full", "recursive": true}), "OK: deleted directory full"),
            (json!({"path": "link"}), "OK: deleted link"),
        ];
        for (input, want) in cases {
            assert_eq!(DeleteFile.call(&ctx, input.clone()).await.unwrap(), want, "{input}");
        }
        for gone in ["f.txt", "empty", "full", "link"] {
            assert!(std::fs::symlink_metadata(root.join(gone)).is_err(), "{gone} still exists");
        }
        assert_eq!(std::fs::read_to_string(root.join("target.txt")).unwrap(), "keep");
    }

    #[tokio::test]
    async fn each_error_has_its_code() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "x").unwrap();
        std::fs::create_dir_all(dir.path().join("full")).unwrap();
        std::fs::write(dir.path().join("full/g.txt"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let ctx = test_context(dir.path());
        let cases = [
            (json!({"path": "missing"}), ErrorCode::FileNotFound),
            (json!({"path": "full"}), ErrorCode::InvalidArguments),
            (json!({"path": "."}), ErrorCode::InvalidArguments),
            (json!({"path": "", "recursive": true}), ErrorCode::InvalidArguments),
            (json!({"path": "../x"}), ErrorCode::PathOutsideWorkspace),
            (json!({"path": "out/keep"}), ErrorCode::PathOutsideWorkspace),
            (json!({"file_path": "full"}), ErrorCode::InvalidArguments),
        ];
        for (input, want) in cases {
            let err = DeleteFile.call(&ctx, input.clone()).await.expect_err(&input.to_string());
            assert_eq!(err.code, want, "{input}: {err}");
        }
        assert!(dir.path().join("full/g.txt").exists());
        // Deleting the link to a directory outside removes the link, not what it points at.
        let out = DeleteFile.call(&ctx, json!({"path": "out", "recursive": true})).await.unwrap();
        assert_eq!(out, "OK: deleted out");
        assert!(outside.path().join("keep").exists());
    }

    /// Deletes `d/keep` (which exists only outside) while `d` keeps being swapped for a
    /// symlink to that folder: the outside file must survive, with openat2 or without.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_swapped_for_a_symlink_cannot_redirect_deletes() {
        for fallback in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("d")).unwrap();
            std::fs::write(outside.path().join("keep"), "x").unwrap();
            let mut ctx = test_context(dir.path());
            if fallback {
                ctx.sandbox = Sandbox::without_openat2(dir.path()).unwrap();
            }
            crate::tools::race::with_swapping_dir(dir.path(), outside.path(), |i| {
                let args = crate::tools::parse_args(json!({"path": "d/keep"})).unwrap();
                let result = <DeleteFile as crate::tools::BlockingTool>::run(&ctx, args);
                assert!(outside.path().join("keep").exists(), "fallback={fallback}: deleted outside the workspace (call {i})");
                match result {
                    Err(e) if e.code == ErrorCode::FileNotFound => true,
                    Err(e) if e.code == ErrorCode::PathOutsideWorkspace => false,
                    other => panic!("fallback={fallback}: {other:?}"),
                }
            });
        }
    }
}
