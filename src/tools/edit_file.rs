//! The `edit_file` tool: exact search-and-replace in one file.
//!
//! The search string must match exactly once unless `replace_all` is set, so an edit never
//! lands somewhere the model did not mean.

use super::{BlockingTool, ErrorCode, ToolContext, ToolError};
use dracode_sandbox::Sandbox;
use schemars::JsonSchema;
use serde::Deserialize;

/// The `edit_file` tool.
pub struct EditFile;

// The arguments of `edit_file`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// Path to the file relative to workspace root.
    file_path: String,
    /// The exact text to replace, including whitespace and indentation; it must occur exactly once unless replace_all is true.
    old_string: String,
    /// The text to put in its place.
    new_string: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    replace_all: bool,
}

impl BlockingTool for EditFile {
    const NAME: &'static str = "edit_file";
    const DESCRIPTION: &'static str = "Replace an exact string in a file with another (the old string must be unique unless \
         replace_all is true). Returns OK with the number of replacements.";
    type Args = Args;
    fn run(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
        edit(&ctx.sandbox, &args)
    }
}

fn edit(sandbox: &Sandbox, args: &Args) -> Result<String, ToolError> {
    let shown = &args.file_path;
    if args.old_string.is_empty() {
        return Err(ToolError::new(ErrorCode::InvalidArguments, "old_string is empty; to create or replace a whole file use write_file"));
    }
    if args.old_string == args.new_string {
        return Err(ToolError::new(ErrorCode::InvalidArguments, "old_string and new_string are identical"));
    }
    let path = sandbox.resolve(shown)?;
    sandbox.check_changeable(&path, shown)?;
    if path.is_dir() {
        return Err(ToolError::new(ErrorCode::InvalidArguments, format!("{shown} is a directory")));
    }
    let mut bytes = Vec::new();
    let mut file = sandbox.open_read(&path).map_err(|e| ToolError::io(&e, shown))?;
    std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| ToolError::io(&e, shown))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ToolError::new(ErrorCode::InvalidArguments, format!("{shown} is not valid UTF-8 text; use write_file")))?;
    let count = text.matches(args.old_string.as_str()).count();
    if count == 0 {
        return Err(ToolError::new(
            ErrorCode::NoMatch,
            format!("old_string was not found in {shown}; read the file and copy the text exactly, whitespace included"),
        ));
    }
    if count > 1 && !args.replace_all {
        return Err(ToolError::new(
            ErrorCode::AmbiguousMatch,
            format!(
                "old_string occurs {count} times in {shown}; include more surrounding lines to make it unique, or set replace_all to true"
            ),
        ));
    }
    let updated = text.replace(args.old_string.as_str(), &args.new_string);
    let mut file = sandbox.open_write(&path).map_err(|e| ToolError::io(&e, shown))?;
    std::io::Write::write_all(&mut file, updated.as_bytes()).map_err(|e| ToolError::io(&e, shown))?;
    let noun = if count == 1 { "replacement" } else { "replacements" };
    Ok(format!("OK: {count} {noun} in {}", sandbox.relative(&path)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool as _;
    use crate::tools::test_context;
    use serde_json::json;

    fn setup() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.rs"), "let a = 1;\nlet b = 1;\nlet c = 2;\n").unwrap();
        dir
    }

    #[tokio::test]
    async fn replaces_unique_or_all_matches() {
        let dir = setup();
        let ctx = test_context(dir.path());
        let file = dir.path().join("f.rs");
        let out = EditFile.call(&ctx, json!({"file_path": "f.rs", "old_string": "c = 2", "new_string": "c = 3"})).await.unwrap();
        assert_eq!(out, "OK: 1 replacement in f.rs");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "let a = 1;\nlet b = 1;\nlet c = 3;\n");
        let out =
            EditFile.call(&ctx, json!({"file_path": "f.rs", "old_string": "= 1", "new_string": "= 0", "replace_all": true})).await.unwrap();
        assert_eq!(out, "OK: 2 replacements in f.rs");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "let a = 0;\nlet b = 0;\nlet c = 3;\n");
    }

    #[tokio::test]
    async fn each_error_has_its_code_and_leaves_the_file_alone() {
        let dir = setup();
        std::fs::write(dir.path().join("bin"), b"\xff\xfe").unwrap();
        let ctx = test_context(dir.path());
        let cases = [
            (json!({"file_path": "f.rs", "old_string": "nope", "new_string": "x"}), ErrorCode::NoMatch),
            (json!({"file_path": "f.rs", "old_string": "= 1", "new_string": "x"}), ErrorCode::AmbiguousMatch),
            (json!({"file_path": "f.rs", "old_string": "", "new_string": "x"}), ErrorCode::InvalidArguments),
            (json!({"file_path": "f.rs", "old_string": "a", "new_string": "a"}), ErrorCode::InvalidArguments),
            (json!({"file_path": "bin", "old_string": "a", "new_string": "b"}), ErrorCode::InvalidArguments),
            (json!({"file_path": "g.rs", "old_string": "a", "new_string": "b"}), ErrorCode::FileNotFound),
            (json!({"file_path": "../f.rs", "old_string": "a", "new_string": "b"}), ErrorCode::PathOutsideWorkspace),
            (json!({"file_path": "f.rs", "old_string": "a"}), ErrorCode::InvalidArguments),
        ];
        for (input, want) in cases {
            let err = EditFile.call(&ctx, input.clone()).await.expect_err(&input.to_string());
            assert_eq!(err.code, want, "{input}: {err}");
        }
        assert_eq!(std::fs::read_to_string(dir.path().join("f.rs")).unwrap(), "let a = 1;\nlet b = 1;\nlet c = 2;\n");
    }

    #[tokio::test]
    async fn ambiguous_match_says_how_many() {
        let dir = setup();
        let ctx = test_context(dir.path());
        let err = EditFile.call(&ctx, json!({"file_path": "f.rs", "old_string": "let", "new_string": "const"})).await.unwrap_err();
        assert!(err.message.contains("occurs 3 times"), "{err}");
    }
}
