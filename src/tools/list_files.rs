//! The `list_files` tool: the workspace's files as the model should see them (ignored files
//! and `.git` left out), sorted, one workspace-relative path per line.

use super::{BlockingTool, ErrorCode, ToolContext, ToolError, workspace_walker};
use dracode_sandbox::Sandbox;
use schemars::JsonSchema;
use serde::Deserialize;

/// Most entries listed; the rest are counted.
const MAX_ENTRIES: usize = 2_000;

/// The `list_files` tool.
pub struct ListFiles;

// The arguments of `list_files`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// Directory to list, relative to workspace root.
    #[serde(default = "dot")]
    directory: String,
    /// List files in all subdirectories too (directories themselves are then not listed).
    #[serde(default)]
    recursive: bool,
}

fn dot() -> String {
    ".".to_string()
}

impl BlockingTool for ListFiles {
    const NAME: &'static str = "list_files";
    const READ_ONLY: bool = true;
    const DESCRIPTION: &'static str = "List the files in a workspace directory, optionally recursively, skipping git-ignored files. \
         Returns one path relative to the workspace root per line; directories end with '/'.";
    type Args = Args;
    fn run(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
        list(&ctx.sandbox, &args)
    }
}

fn list(sandbox: &Sandbox, args: &Args) -> Result<String, ToolError> {
    let shown = &args.directory;
    let dir = sandbox.resolve(shown).map_err(ToolError::from).map_err(|e| match e.code {
        ErrorCode::FileNotFound => ToolError::new(ErrorCode::DirectoryNotFound, format!("directory not found: {shown}")),
        _ => e,
    })?;
    if !dir.is_dir() {
        return Err(ToolError::new(ErrorCode::DirectoryNotFound, format!("not a directory: {shown}")));
    }
    let mut entries = Vec::new();
    // Unreadable entries are skipped: a partial listing is more useful than none.
    for entry in workspace_walker(&dir, args.recursive).build().flatten() {
        // The walker reads directories by path: a directory swapped for a symlink meanwhile
        // would be listed from outside. Only names that exist beneath the root are shown.
        if entry.depth() == 0 || !sandbox.exists_beneath(entry.path()) {
            continue;
        }
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        if args.recursive && is_dir {
            continue;
        }
        let mut rel = sandbox.relative(entry.path());
        if is_dir {
            rel.push('/');
        }
        entries.push(rel);
    }
    if entries.is_empty() {
        return Ok(format!("(no files in {shown})"));
    }
    entries.sort_unstable();
    let more = entries.len().saturating_sub(MAX_ENTRIES);
    entries.truncate(MAX_ENTRIES);
    let mut out = entries.join("\n");
    if more > 0 {
        out.push_str(&format!("\n… {more} more (list a subdirectory to see them)"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool as _;
    use crate::tools::test_context;
    use serde_json::json;
    use std::fs;

    fn setup() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("src/util")).unwrap();
        fs::create_dir_all(root.join(".git/objects")).unwrap();
        fs::create_dir_all(root.join("target/debug")).unwrap();
        fs::create_dir_all(root.join(".github")).unwrap();
        for f in ["README.md", "src/main.rs", "src/util/mod.rs", "target/debug/bin", ".git/HEAD", ".github/ci.yml", "debug.log"] {
            fs::write(root.join(f), "x").unwrap();
        }
        fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
        dir
    }

    #[tokio::test]
    async fn lists_flat_and_recursive_honouring_gitignore() {
        let dir = setup();
        let ctx = test_context(dir.path());
        let cases = [
            (json!({}), ".github/\n.gitignore\nREADME.md\nsrc/"),
            (json!({"directory": "src"}), "src/main.rs\nsrc/util/"),
            (json!({"directory": "src", "recursive": true}), "src/main.rs\nsrc/util/mod.rs"),
            (json!({"recursive": true}), ".github/ci.yml\n.gitignore\nREADME.md\nsrc/main.rs\nsrc/util/mod.rs"),
            (json!({"directory": "./src/util/"}), "src/util/mod.rs"),
        ];
        for (input, want) in cases {
            assert_eq!(ListFiles.call(&ctx, input.clone()).await.unwrap(), want, "{input}");
        }
    }

    #[tokio::test]
    async fn caps_long_listings() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..MAX_ENTRIES + 5 {
            fs::write(dir.path().join(format!("f{i:05}")), "").unwrap();
        }
        let out = ListFiles.call(&test_context(dir.path()), json!({})).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), MAX_ENTRIES + 1);
        assert_eq!(lines[0], "f00000");
        assert!(lines[MAX_ENTRIES].starts_with("… 5 more"), "{}", lines[MAX_ENTRIES]);
    }

    #[tokio::test]
    async fn each_error_has_its_code() {
        let dir = setup();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let ctx = test_context(dir.path());
        let cases = [
            (json!({"directory": "nope"}), ErrorCode::DirectoryNotFound),
            (json!({"directory": "README.md"}), ErrorCode::DirectoryNotFound),
            (json!({"directory": ".."}), ErrorCode::PathOutsideWorkspace),
            (json!({"directory": "/"}), ErrorCode::PathOutsideWorkspace),
            (json!({"directory": "out"}), ErrorCode::PathOutsideWorkspace),
            (json!({"recursive": "yes"}), ErrorCode::InvalidArguments),
        ];
        for (input, want) in cases {
            let err = ListFiles.call(&ctx, input.clone()).await.expect_err(&input.to_string());
            assert_eq!(err.code, want, "{input}: {err}");
        }
    }

    #[tokio::test]
    async fn empty_directory_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let out = ListFiles.call(&test_context(dir.path()), json!({})).await.unwrap();
        assert_eq!(out, "(no files in .)");
    }

    #[tokio::test]
    async fn symlinks_out_of_the_workspace_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.txt"), "x").unwrap();
        fs::write(dir.path().join("inside.txt"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("outdir")).unwrap();
        // The link is named, as an entry of the workspace; what it points at is not listed.
        let out = ListFiles.call(&test_context(dir.path()), json!({"recursive": true})).await.unwrap();
        assert_eq!(out, "inside.txt\noutdir");
    }

    /// Lists `d` while `d` keeps being swapped for a symlink to a folder outside: no name from
    /// that folder may ever be shown.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_swapped_for_a_symlink_cannot_redirect_listings() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        fs::write(dir.path().join("d/inside.txt"), "x").unwrap();
        fs::write(outside.path().join("secret-name.txt"), "x").unwrap();
        let ctx = test_context(dir.path());
        crate::tools::race::with_swapping_dir(dir.path(), outside.path(), |i| {
            let args = crate::tools::parse_args(json!({"directory": "d"})).unwrap();
            match <ListFiles as crate::tools::BlockingTool>::run(&ctx, args) {
                Ok(out) => {
                    assert!(!out.contains("secret-name"), "listed outside the workspace (call {i}): {out}");
                    true
                }
                Err(e) if e.code == ErrorCode::PathOutsideWorkspace => false,
                Err(e) => panic!("{e}"),
            }
        });
    }
}
