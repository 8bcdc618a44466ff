//! The `move_file` tool: renames or moves a file or directory inside the workspace.

use super::{BlockingTool, ErrorCode, ToolContext, ToolError};
use dracode_sandbox::Sandbox;
use schemars::JsonSchema;
use serde::Deserialize;

/// The `move_file` tool.
pub struct MoveFile;

// The arguments of `move_file`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// Current path of the file or directory, relative to workspace root.
    source: String,
    /// New path, relative to workspace root.
    destination: String,
    /// Replace the destination if it already exists.
    #[serde(default)]
    overwrite: bool,
    /// Create missing parent directories of the destination.
    #[serde(default = "yes")]
    create_directories: bool,
}

fn yes() -> bool {
    true
}

impl BlockingTool for MoveFile {
    const NAME: &'static str = "move_file";
    const DESCRIPTION: &'static str = "Move or rename a file or directory within the workspace. Returns OK with the old and new paths.";
    type Args = Args;
    fn run(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
        move_entry(&ctx.sandbox, &args)
    }
}

fn move_entry(sandbox: &Sandbox, args: &Args) -> Result<String, ToolError> {
    // Both ends name links themselves: rename(2) moves or replaces a link, never its target.
    let source = sandbox.resolve_entry(&args.source)?;
    let destination = sandbox.resolve_entry(&args.destination)?;
    sandbox.check_changeable(&source, &args.source)?;
    sandbox.check_changeable(&destination, &args.destination)?;
    if source == sandbox.root() || destination == sandbox.root() {
        return Err(ToolError::new(ErrorCode::InvalidArguments, "cannot move the workspace root"));
    }
    // Both ends are acted on through their parent directories, opened beneath the root.
    let from = sandbox.open_parent(&source).map_err(|e| ToolError::io(&e, &args.source))?;
    from.metadata().map_err(|e| ToolError::io(&e, &args.source))?;
    if source == destination {
        return Err(ToolError::new(ErrorCode::InvalidArguments, "source and destination are the same path"));
    }
    // Checked before anything is removed: overwriting a directory that holds the source would
    // delete the source first.
    if source.starts_with(&destination) || destination.starts_with(&source) {
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            "cannot move a directory into itself or over a directory that contains the source",
        ));
    }
    if std::fs::symlink_metadata(&destination).is_ok() {
        if !args.overwrite {
            return Err(ToolError::new(
                ErrorCode::AlreadyExists,
                format!("{} already exists; set overwrite to true to replace it", args.destination),
            ));
        }
        // rename(2) only replaces an empty directory; the caller asked for a replacement.
        let existing = sandbox.open_parent(&destination).map_err(|e| ToolError::io(&e, &args.destination))?;
        if existing.is_dir().map_err(|e| ToolError::io(&e, &args.destination))? {
            existing.remove_all().map_err(|e| ToolError::io(&e, &args.destination))?;
        }
    }
    super::ensure_parent(sandbox, &destination, args.create_directories)?;
    let to = sandbox.open_parent(&destination).map_err(|e| ToolError::io(&e, &args.destination))?;
    from.rename_to(&to).map_err(|e| ToolError::io(&e, &args.source))?;
    Ok(format!("OK: moved {} to {}", sandbox.relative(&source), sandbox.relative(&destination)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool as _;
    use crate::tools::test_context;
    use serde_json::json;

    fn setup() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        std::fs::write(dir.path().join("b.txt"), "b").unwrap();
        std::fs::create_dir_all(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/in.txt"), "in").unwrap();
        dir
    }

    #[tokio::test]
    async fn moves_renames_and_overwrites() {
        let dir = setup();
        let root = dir.path();
        let ctx = test_context(root);
        let out = MoveFile.call(&ctx, json!({"source": "a.txt", "destination": "new/deep/a.txt"})).await.unwrap();
        assert_eq!(out, "OK: moved a.txt to new/deep/a.txt");
        assert_eq!(std::fs::read_to_string(root.join("new/deep/a.txt")).unwrap(), "a");
        assert!(!root.join("a.txt").exists());
        MoveFile.call(&ctx, json!({"source": "d", "destination": "e"})).await.unwrap();
        assert_eq!(std::fs::read_to_string(root.join("e/in.txt")).unwrap(), "in");
        MoveFile.call(&ctx, json!({"source": "b.txt", "destination": "new/deep/a.txt", "overwrite": true})).await.unwrap();
        assert_eq!(std::fs::read_to_string(root.join("new/deep/a.txt")).unwrap(), "b");
    }

    #[tokio::test]
    async fn each_error_has_its_code() {
        let dir = setup();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let ctx = test_context(dir.path());
        let cases = [
            (json!({"source": "missing", "destination": "x"}), ErrorCode::FileNotFound),
            (json!({"source": "a.txt", "destination": "b.txt"}), ErrorCode::AlreadyExists),
            (json!({"source": "a.txt", "destination": "no/dir/a.txt", "create_directories": false}), ErrorCode::DirectoryNotFound),
            (json!({"source": "a.txt", "destination": "../a.txt"}), ErrorCode::PathOutsideWorkspace),
            (json!({"source": "a.txt", "destination": "out/a.txt"}), ErrorCode::PathOutsideWorkspace),
            (json!({"source": "/etc/hostname", "destination": "h"}), ErrorCode::PathOutsideWorkspace),
            (json!({"source": ".", "destination": "x"}), ErrorCode::InvalidArguments),
            (json!({"source": "a.txt", "destination": "./a.txt"}), ErrorCode::InvalidArguments),
            (json!({"source": "d/in.txt", "destination": "d", "overwrite": true}), ErrorCode::InvalidArguments),
            (json!({"source": "d", "destination": "d/sub"}), ErrorCode::InvalidArguments),
            (json!({"from": "a.txt", "to": "c.txt"}), ErrorCode::InvalidArguments),
        ];
        for (input, want) in cases {
            let err = MoveFile.call(&ctx, input.clone()).await.expect_err(&input.to_string());
            assert_eq!(err.code, want, "{input}: {err}");
        }
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "a");
        assert_eq!(std::fs::read_to_string(dir.path().join("d/in.txt")).unwrap(), "in");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    /// Moves `d/keep` (which exists only outside) into the workspace, and a workspace file into
    /// `d/`, while `d` keeps being swapped for a symlink to that folder: nothing may leave or
    /// enter the outside folder, with openat2 or without.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_swapped_for_a_symlink_cannot_redirect_moves() {
        for fallback in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("d")).unwrap();
            std::fs::write(outside.path().join("keep"), "x").unwrap();
            std::fs::write(dir.path().join("mine"), "x").unwrap();
            let mut ctx = test_context(dir.path());
            if fallback {
                ctx.sandbox = Sandbox::without_openat2(dir.path()).unwrap();
            }
            crate::tools::race::with_swapping_dir(dir.path(), outside.path(), |i| {
                let (source, destination) = if i % 2 == 0 { ("d/keep", "got") } else { ("mine", "d/mine") };
                let args = crate::tools::parse_args(json!({"source": source, "destination": destination})).unwrap();
                let result = <MoveFile as crate::tools::BlockingTool>::run(&ctx, args);
                let names: Vec<_> = std::fs::read_dir(outside.path()).unwrap().flatten().map(|e| e.file_name()).collect();
                assert_eq!(names, ["keep"], "fallback={fallback}: moved across the workspace boundary (call {i}: {result:?})");
                match result {
                    // Moving `mine` into the real `d` and back keeps the next call meaningful.
                    Ok(_) => {
                        let args = crate::tools::parse_args(json!({"source": "d/mine", "destination": "mine"})).unwrap();
                        let _ = <MoveFile as crate::tools::BlockingTool>::run(&ctx, args);
                        true
                    }
                    Err(e) if e.code == ErrorCode::FileNotFound => true,
                    Err(e) if e.code == ErrorCode::PathOutsideWorkspace => false,
                    other => panic!("fallback={fallback}: {other:?}"),
                }
            });
        }
    }
}
