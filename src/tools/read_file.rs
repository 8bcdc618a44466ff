//! The `read_file` tool: a file's text, whole or a 1-based inclusive line range.
//!
//! Whole files are capped at [`MAX_BYTES`] so one call cannot flood the context; bigger files
//! are read by line range, streamed so a huge log is never loaded whole.

use super::{BlockingTool, ErrorCode, ToolContext, ToolError};
use dracode_sandbox::Sandbox;
use schemars::JsonSchema;
use serde::Deserialize;
use std::io::{BufRead, BufReader, Read};

/// Largest whole file returned, and largest range output.
const MAX_BYTES: u64 = 256 * 1024;

/// The `read_file` tool.
pub struct ReadFile;

// The arguments of `read_file`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// Path to the file relative to workspace root.
    file_path: String,
    /// First line to return (1-based, inclusive). Use with end_line to read part of a large file.
    // i64 rather than u64: schemars would emit `"format": "uint64"`, which Gemini rejects.
    #[serde(default)]
    #[schemars(range(min = 1))]
    start_line: Option<i64>,
    /// Last line to return (1-based, inclusive); defaults to the end of the file.
    #[serde(default)]
    #[schemars(range(min = 1))]
    end_line: Option<i64>,
    /// "utf-8" (default) returns the text; "base64" returns the file's bytes base64-encoded, for binary files (whole files only, at most 256 KiB).
    #[serde(default)]
    encoding: Encoding,
}

/// How a file tool's content is carried: as text, or as base64 of the raw bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
// Variants carry no doc comments: those would turn the schema's plain `enum` into a `oneOf`
// of `const`s, which some providers reject.
pub(crate) enum Encoding {
    // UTF-8 text.
    #[default]
    #[serde(rename = "utf-8", alias = "utf8", alias = "UTF-8")]
    Utf8,
    // Standard base64 (RFC 4648) of the bytes.
    #[serde(rename = "base64")]
    Base64,
}

impl BlockingTool for ReadFile {
    const NAME: &'static str = "read_file";
    const READ_ONLY: bool = true;
    const DESCRIPTION: &'static str = "Read a text file in the workspace and return its contents, optionally only lines \
         start_line..end_line. Files over 256 KiB must be read by line range. encoding \"base64\" returns a binary file's bytes.";
    type Args = Args;
    fn run(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
        read(&ctx.sandbox, &args)
    }
}

fn read(sandbox: &Sandbox, args: &Args) -> Result<String, ToolError> {
    let shown = &args.file_path;
    let to_line = |n: Option<i64>| match n {
        Some(n) => u64::try_from(n)
            .ok()
            .filter(|&n| n >= 1)
            .map(Some)
            .ok_or_else(|| ToolError::new(ErrorCode::InvalidArguments, "line numbers start at 1")),
        None => Ok(None),
    };
    let (start_line, end_line) = (to_line(args.start_line)?, to_line(args.end_line)?);
    if let (Some(start), Some(end)) = (start_line, end_line)
        && end < start
    {
        return Err(ToolError::new(ErrorCode::InvalidArguments, format!("end_line {end} is before start_line {start}")));
    }
    if args.encoding == Encoding::Base64 && (start_line.is_some() || end_line.is_some()) {
        return Err(ToolError::new(ErrorCode::InvalidArguments, "start_line and end_line do not apply with encoding \"base64\""));
    }
    let path = sandbox.resolve(shown)?;
    // Opened beneath the root, then examined through the fd: what is read is what was checked.
    let file = sandbox.open_read(&path).map_err(|e| ToolError::io(&e, shown))?;
    let meta = file.metadata().map_err(|e| ToolError::io(&e, shown))?;
    if meta.is_dir() {
        return Err(ToolError::new(ErrorCode::InvalidArguments, format!("{shown} is a directory; use list_files to see its contents")));
    }
    let (bytes, truncated) = if start_line.is_none() && end_line.is_none() {
        if meta.len() > MAX_BYTES {
            return Err(ToolError::new(
                ErrorCode::FileTooLarge,
                format!("{shown} is {} bytes (limit {MAX_BYTES}); read it in parts with start_line and end_line", meta.len()),
            ));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(MAX_BYTES).read_to_end(&mut bytes).map_err(|e| ToolError::io(&e, shown))?;
        if args.encoding == Encoding::Base64 {
            use base64::Engine as _;
            return Ok(base64::engine::general_purpose::STANDARD.encode(&bytes)).map(|b| if b.is_empty() { "(empty)".into() } else { b });
        }
        (bytes, false)
    } else {
        read_lines(file, start_line.unwrap_or(1), end_line.unwrap_or(u64::MAX), shown)?
    };
    let mut text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let mut text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            text.push_str("\n[note: the file is not valid UTF-8; invalid bytes are shown as U+FFFD]");
            text
        }
    };
    if truncated {
        text.push_str(&format!("\n[output stopped at {MAX_BYTES} bytes; request a smaller line range]"));
    }
    if text.is_empty() {
        // Some providers reject an empty tool result.
        text.push_str("(empty)");
    }
    Ok(text)
}

/// Lines `start..=end` of `file`, at most [`MAX_BYTES`]; true when cut short by the cap.
fn read_lines(file: std::fs::File, start: u64, end: u64, shown: &str) -> Result<(Vec<u8>, bool), ToolError> {
    let mut reader = BufReader::new(file);
    let mut out = Vec::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(|e| ToolError::io(&e, shown))?;
        if n == 0 {
            break;
        }
        number += 1;
        if number < start {
            continue;
        }
        if out.len() as u64 + line.len() as u64 > MAX_BYTES {
            return Ok((out, true));
        }
        out.extend_from_slice(&line);
        if number >= end {
            break;
        }
    }
    if number < start {
        return Err(ToolError::new(ErrorCode::InvalidArguments, format!("start_line {start} is past the end of {shown} ({number} lines)")));
    }
    Ok((out, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool as _;
    use crate::tools::test_context;
    use serde_json::json;

    async fn run(dir: &std::path::Path, input: serde_json::Value) -> Result<String, ToolError> {
        ReadFile.call(&test_context(dir), input).await
    }

    #[tokio::test]
    async fn reads_whole_files_and_line_ranges() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "one\ntwo\nthree\nfour\n").unwrap();
        std::fs::write(dir.path().join("empty"), "").unwrap();
        let cases = [
            (json!({"file_path": "f.txt"}), "one\ntwo\nthree\nfour\n"),
            (json!({"file_path": "f.txt", "start_line": 2, "end_line": 3}), "two\nthree\n"),
            (json!({"file_path": "f.txt", "start_line": 3}), "three\nfour\n"),
            (json!({"file_path": "f.txt", "end_line": 1}), "one\n"),
            (json!({"file_path": "f.txt", "start_line": 4, "end_line": 99}), "four\n"),
            (json!({"file_path": "./f.txt", "start_line": 1, "end_line": 1}), "one\n"),
            (json!({"file_path": "empty"}), "(empty)"),
        ];
        for (input, want) in cases {
            assert_eq!(run(dir.path(), input.clone()).await.unwrap(), want, "{input}");
        }
    }

    #[tokio::test]
    async fn each_error_has_its_code() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "one\ntwo\n").unwrap();
        std::fs::write(dir.path().join("big.txt"), "x\n".repeat(200_000)).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let cases = [
            (json!({"file_path": "missing.txt"}), ErrorCode::FileNotFound),
            (json!({"file_path": "../outside.txt"}), ErrorCode::PathOutsideWorkspace),
            (json!({"file_path": "/etc/passwd"}), ErrorCode::PathOutsideWorkspace),
            (json!({"file_path": "big.txt"}), ErrorCode::FileTooLarge),
            (json!({"file_path": "sub"}), ErrorCode::InvalidArguments),
            (json!({"file_path": "f.txt", "start_line": 0}), ErrorCode::InvalidArguments),
            (json!({"file_path": "f.txt", "end_line": -2}), ErrorCode::InvalidArguments),
            (json!({"file_path": "f.txt", "start_line": 3, "end_line": 2}), ErrorCode::InvalidArguments),
            (json!({"file_path": "f.txt", "start_line": 9}), ErrorCode::InvalidArguments),
            (json!({"path": "f.txt"}), ErrorCode::InvalidArguments),
            (json!({"file_path": "f.txt", "bogus": 1}), ErrorCode::InvalidArguments),
            (json!({"file_path": "f.txt", "encoding": "latin1"}), ErrorCode::InvalidArguments),
            (json!({"file_path": "f.txt", "encoding": "base64", "start_line": 1}), ErrorCode::InvalidArguments),
            (json!({"file_path": "big.txt", "encoding": "base64"}), ErrorCode::FileTooLarge),
            (json!({"file_path": "../f.txt", "encoding": "base64"}), ErrorCode::PathOutsideWorkspace),
        ];
        for (input, want) in cases {
            let err = run(dir.path(), input.clone()).await.expect_err(&input.to_string());
            assert_eq!(err.code, want, "{input}: {err}");
        }
    }

    #[tokio::test]
    async fn too_large_error_tells_how_to_read_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.txt"), "x\n".repeat(200_000)).unwrap();
        let err = run(dir.path(), json!({"file_path": "big.txt"})).await.unwrap_err();
        assert!(err.message.contains("start_line"), "{err}");
        let part = run(dir.path(), json!({"file_path": "big.txt", "start_line": 199_999})).await.unwrap();
        assert_eq!(part, "x\nx\n");
    }

    #[tokio::test]
    async fn invalid_utf8_is_shown_lossily_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bin"), b"ok \xff\xfe end").unwrap();
        let text = run(dir.path(), json!({"file_path": "bin"})).await.unwrap();
        assert!(text.starts_with("ok \u{FFFD}\u{FFFD} end"), "{text}");
        assert!(text.contains("not valid UTF-8"), "{text}");
    }

    /// Reads `d/f.txt` while `d` keeps being swapped for a symlink to a folder holding another
    /// `f.txt`: the outside file's content must never come back, with openat2 or without.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_swapped_for_a_symlink_cannot_redirect_reads() {
        for fallback in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("d")).unwrap();
            std::fs::write(dir.path().join("d/f.txt"), "inside").unwrap();
            std::fs::write(outside.path().join("f.txt"), "SECRET outside").unwrap();
            let mut ctx = test_context(dir.path());
            if fallback {
                ctx.sandbox = Sandbox::without_openat2(dir.path()).unwrap();
            }
            crate::tools::race::with_swapping_dir(dir.path(), outside.path(), |i| {
                let args = crate::tools::parse_args(json!({"file_path": "d/f.txt"})).unwrap();
                match <ReadFile as crate::tools::BlockingTool>::run(&ctx, args) {
                    Ok(text) => {
                        assert_eq!(text, "inside", "fallback={fallback}: read outside the workspace (call {i})");
                        true
                    }
                    Err(e) if e.code == ErrorCode::PathOutsideWorkspace => false,
                    Err(e) => panic!("fallback={fallback}: {e}"),
                }
            });
        }
    }

    #[tokio::test]
    async fn base64_returns_a_binary_file_byte_for_byte() {
        use base64::Engine as _;
        let dir = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..=255u8).chain([0, 0xff, b'\n']).collect();
        std::fs::write(dir.path().join("blob.bin"), &bytes).unwrap();
        std::fs::write(dir.path().join("empty"), b"").unwrap();
        let text = run(dir.path(), json!({"file_path": "blob.bin", "encoding": "base64"})).await.unwrap();
        assert_eq!(base64::engine::general_purpose::STANDARD.decode(&text).unwrap(), bytes);
        assert_eq!(run(dir.path(), json!({"file_path": "empty", "encoding": "base64"})).await.unwrap(), "(empty)");
        let text = run(dir.path(), json!({"file_path": "blob.bin", "encoding": "utf-8"})).await.unwrap();
        assert!(text.contains("not valid UTF-8"), "{text}");
    }

    #[test]
    fn schema_lists_parameters_with_descriptions() {
        let schema = ReadFile.schema();
        assert_eq!(schema["required"], json!(["file_path"]));
        assert!(schema["properties"]["start_line"]["description"].is_string());
        assert_eq!(schema["properties"]["start_line"]["minimum"], json!(1));
        assert_eq!(schema["properties"]["encoding"]["enum"], json!(["utf-8", "base64"]), "{schema}");
    }
}
