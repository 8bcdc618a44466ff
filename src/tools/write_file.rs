//! The `write_file` tool: creates or overwrites a file with the given text.

use super::{BlockingTool, ErrorCode, ToolContext, ToolError};
use dracode_sandbox::Sandbox;
use schemars::JsonSchema;
use serde::Deserialize;

/// The `write_file` tool.
pub struct WriteFile;

// The arguments of `write_file`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// Path to the file relative to workspace root.
    file_path: String,
    /// Text content to write to the file (replaces any existing content); with encoding "base64", the file's bytes base64-encoded.
    content: String,
    /// "utf-8" (default): content is the text; "base64": content is base64 of the bytes, for binary files.
    #[serde(default)]
    encoding: super::read_file::Encoding,
    /// Create missing parent directories.
    #[serde(default = "yes")]
    create_directories: bool,
}

fn yes() -> bool {
    true
}

impl BlockingTool for WriteFile {
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "Create a file or overwrite it with the given text (or, with encoding \"base64\", the given bytes). \
         Returns OK with the number of bytes written.";
    type Args = Args;
    fn run(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
        write(&ctx.sandbox, &args)
    }
}

fn write(sandbox: &Sandbox, args: &Args) -> Result<String, ToolError> {
    let shown = &args.file_path;
    let bytes = match args.encoding {
        super::read_file::Encoding::Utf8 => std::borrow::Cow::Borrowed(args.content.as_bytes()),
        super::read_file::Encoding::Base64 => std::borrow::Cow::Owned(decode_base64(&args.content)?),
    };
    let path = sandbox.resolve_for_write(shown)?;
    sandbox.check_changeable(&path, shown)?;
    if path.is_dir() {
        return Err(ToolError::new(ErrorCode::InvalidArguments, format!("{shown} is a directory")));
    }
    super::ensure_parent(sandbox, &path, args.create_directories)?;
    let is_dir = |e: &std::io::Error| e.raw_os_error() == Some(libc::EISDIR);
    let mut file = sandbox.open_write(&path).map_err(|e| match is_dir(&e) {
        true => ToolError::new(ErrorCode::InvalidArguments, format!("{shown} is a directory")),
        false => ToolError::io(&e, shown),
    })?;
    std::io::Write::write_all(&mut file, &bytes).map_err(|e| ToolError::io(&e, shown))?;
    Ok(format!("OK: wrote {} bytes to {}", bytes.len(), sandbox.relative(&path)))
}

/// The bytes of base64 `content` (standard alphabet, padding optional, line breaks ignored).
fn decode_base64(content: &str) -> Result<Vec<u8>, ToolError> {
    use base64::Engine as _;
    let compact: String = content.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new().with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    engine
        .decode(compact.as_bytes())
        .map_err(|e| ToolError::new(ErrorCode::InvalidArguments, format!("content is not valid base64 ({e}); nothing was written")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool as _;
    use crate::tools::test_context;
    use serde_json::json;

    #[tokio::test]
    async fn writes_creates_and_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let out = WriteFile.call(&ctx, json!({"file_path": "a.txt", "content": "hello"})).await.unwrap();
        assert_eq!(out, "OK: wrote 5 bytes to a.txt");
        WriteFile.call(&ctx, json!({"file_path": "a.txt", "content": "bye"})).await.unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "bye");
        let out = WriteFile.call(&ctx, json!({"file_path": "new/dir/b.txt", "content": "é"})).await.unwrap();
        assert_eq!(out, "OK: wrote 2 bytes to new/dir/b.txt");
        assert_eq!(std::fs::read_to_string(dir.path().join("new/dir/b.txt")).unwrap(), "é");
    }

    #[tokio::test]
    async fn each_error_has_its_code() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let ctx = test_context(dir.path());
        let cases = [
            (json!({"file_path": "x/y.txt", "content": "", "create_directories": false}), ErrorCode::DirectoryNotFound),
            (json!({"file_path": "../y.txt", "content": ""}), ErrorCode::PathOutsideWorkspace),
            (json!({"file_path": "/tmp/dracode-write-test.txt", "content": ""}), ErrorCode::PathOutsideWorkspace),
            (json!({"file_path": "sub", "content": ""}), ErrorCode::InvalidArguments),
            (json!({"file_path": "y.txt"}), ErrorCode::InvalidArguments),
            (json!({"file_path": "y.txt", "content": 3}), ErrorCode::InvalidArguments),
            (json!({"file_path": "y.txt", "content": "not base64!", "encoding": "base64"}), ErrorCode::InvalidArguments),
            (json!({"file_path": "y.txt", "content": "", "encoding": "hex"}), ErrorCode::InvalidArguments),
            (json!({"file_path": "../y.bin", "content": "AAE=", "encoding": "base64"}), ErrorCode::PathOutsideWorkspace),
        ];
        for (input, want) in cases {
            let err = WriteFile.call(&ctx, input.clone()).await.expect_err(&input.to_string());
            assert_eq!(err.code, want, "{input}: {err}");
        }
        assert!(!dir.path().join("x").exists());
        assert!(!dir.path().join("y.txt").exists());
    }

    #[tokio::test]
    async fn base64_content_is_written_as_raw_bytes() {
        use base64::Engine as _;
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let bytes: Vec<u8> = (0..=255u8).rev().collect();
        let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
        // Wrapped at 76 columns like MIME, as a model may send it.
        let wrapped: String = encoded.as_bytes().chunks(76).map(|c| format!("{}\n", std::str::from_utf8(c).unwrap())).collect();
        let out = WriteFile.call(&ctx, json!({"file_path": "img/blob.bin", "content": wrapped, "encoding": "base64"})).await.unwrap();
        assert_eq!(out, "OK: wrote 256 bytes to img/blob.bin");
        assert_eq!(std::fs::read(dir.path().join("img/blob.bin")).unwrap(), bytes);
        let out = WriteFile.call(&ctx, json!({"file_path": "two.bin", "content": "AAE", "encoding": "base64"})).await.unwrap();
        assert_eq!(out, "OK: wrote 2 bytes to two.bin");
    }

    #[tokio::test]
    async fn does_not_write_through_a_symlinked_directory_outside() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let ctx = test_context(dir.path());
        let err = WriteFile.call(&ctx, json!({"file_path": "link/x.txt", "content": "x"})).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::PathOutsideWorkspace);
        assert!(!outside.path().join("x.txt").exists());
    }

    /// Writes through `d` while `d` keeps being swapped for a symlink to a folder outside:
    /// nothing may ever land outside, whether the kernel has openat2 or not.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_swapped_for_a_symlink_cannot_redirect_writes() {
        for fallback in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("d")).unwrap();
            let mut ctx = test_context(dir.path());
            if fallback {
                ctx.sandbox = Sandbox::without_openat2(dir.path()).unwrap();
            }
            crate::tools::race::with_swapping_dir(dir.path(), outside.path(), |i| {
                // Alternately a file in `d` and one in a new directory below it.
                let file_path = if i % 2 == 0 { format!("d/f{i}.txt") } else { format!("d/sub{i}/f.txt") };
                let args = crate::tools::parse_args(json!({"file_path": file_path, "content": "x"})).unwrap();
                let written = match <WriteFile as crate::tools::BlockingTool>::run(&ctx, args) {
                    Ok(_) => true,
                    Err(e) if e.code == ErrorCode::PathOutsideWorkspace => false,
                    Err(e) => panic!("fallback={fallback} {file_path}: {e}"),
                };
                let leaked: Vec<_> = std::fs::read_dir(outside.path()).unwrap().flatten().map(|e| e.file_name()).collect();
                assert!(leaked.is_empty(), "fallback={fallback}: written outside the workspace: {leaked:?} (call {i})");
                written
            });
        }
    }

    #[test]
    fn schema_shows_the_default() {
        let schema = WriteFile.schema();
        assert_eq!(schema["properties"]["create_directories"]["default"], json!(true));
        assert_eq!(schema["required"], json!(["file_path", "content"]));
    }
}
