//! The `search_code` tool: grep over the workspace with ripgrep's own crates.
//!
//! The walk is parallel (`ignore`'s parallel walker, `.gitignore` honoured, binary files skipped
//! at the first NUL byte); matches are gathered per file and printed in path order, so the
//! output does not depend on thread timing. Only the first [`MAX_MATCHES`] in that order are
//! kept in memory; the rest are only counted.

use super::{BlockingTool, ErrorCode, ToolContext, ToolError, workspace_walker};
use dracode_sandbox::Sandbox;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::WalkState;
use ignore::overrides::OverrideBuilder;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

/// Most matches printed.
const MAX_MATCHES: usize = 200;
/// Longest line text printed; minified files have megabyte lines.
const MAX_LINE_CHARS: usize = 300;

/// The `search_code` tool.
pub struct SearchCode;

// The arguments of `search_code`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// Text or regex to search for.
    query: String,
    /// Directory (or single file) to search, relative to workspace root.
    #[serde(default = "dot")]
    directory: String,
    /// File name glob to restrict the search, e.g. *.rs or *.{js,ts}; a glob containing '/' is matched against the path below directory.
    #[serde(default = "star")]
    pattern: String,
    /// Search subdirectories too.
    #[serde(default = "yes")]
    recursive: bool,
    /// Treat query as a regular expression (Rust regex syntax) instead of literal text.
    #[serde(default)]
    regex: bool,
    /// Match case exactly.
    #[serde(default)]
    case_sensitive: bool,
}

fn dot() -> String {
    ".".to_string()
}

fn star() -> String {
    "*".to_string()
}

fn yes() -> bool {
    true
}

impl BlockingTool for SearchCode {
    const NAME: &'static str = "search_code";
    const READ_ONLY: bool = true;
    const DESCRIPTION: &'static str = "Search file contents in the workspace for text or a regex, skipping git-ignored and binary \
         files. Returns matching lines as 'path:line: text', at most 200.";
    type Args = Args;
    fn run(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
        search(&ctx.sandbox, &args)
    }
}

/// One matching line.
struct Hit {
    line: u64,
    text: String,
}

/// The first [`MAX_MATCHES`] hits in path order, and how many there were in all.
#[derive(Default)]
struct Hits {
    files: BTreeMap<String, Vec<Hit>>,
    kept: usize,
    total: usize,
}

impl Hits {
    fn add(&mut self, path: String, hits: Vec<Hit>, count: usize) {
        self.total += count;
        self.kept += hits.len();
        self.files.insert(path, hits);
        // Drop whole files from the end while what remains still fills the quota.
        while let Some(mut last) = self.files.last_entry() {
            let len = last.get_mut().len();
            if self.kept - len < MAX_MATCHES {
                break;
            }
            self.kept -= len;
            last.remove();
        }
    }

    fn render(self) -> String {
        let mut out = String::new();
        let mut printed = 0;
        'files: for (path, hits) in &self.files {
            for hit in hits {
                if printed == MAX_MATCHES {
                    break 'files;
                }
                out.push_str(&format!("{path}:{}: {}\n", hit.line, hit.text));
                printed += 1;
            }
        }
        if self.total > printed {
            out.push_str(&format!("… truncated: showing {printed} of {} matches; narrow the query, directory or pattern\n", self.total));
        }
        out.pop();
        out
    }
}

/// Collects one file's matches; a binary file's are thrown away.
struct FileSink {
    hits: Vec<Hit>,
    count: usize,
    binary: bool,
}

impl Sink for FileSink {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.count += 1;
        if self.hits.len() < MAX_MATCHES {
            self.hits.push(Hit { line: mat.line_number().unwrap_or(0), text: line_text(mat.bytes()) });
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, std::io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A matched line as printed: lossy UTF-8, line ending removed, long lines shortened.
fn line_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches(['\n', '\r']);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

fn matcher(args: &Args) -> Result<RegexMatcher, ToolError> {
    if args.query.is_empty() {
        return Err(ToolError::new(ErrorCode::InvalidArguments, "query is empty"));
    }
    RegexMatcherBuilder::new()
        .case_insensitive(!args.case_sensitive)
        .fixed_strings(!args.regex)
        // Matches never span lines, which lets the searcher work line by line at full speed.
        .line_terminator(Some(b'\n'))
        .build(&args.query)
        .map_err(|e| ToolError::new(ErrorCode::InvalidArguments, format!("invalid regex {:?}: {e}", args.query)))
}

fn search(sandbox: &Sandbox, args: &Args) -> Result<String, ToolError> {
    let matcher = matcher(args)?;
    let shown = &args.directory;
    let dir = sandbox.resolve(shown).map_err(ToolError::from).map_err(|e| match e.code {
        ErrorCode::FileNotFound => ToolError::new(ErrorCode::DirectoryNotFound, format!("directory not found: {shown}")),
        _ => e,
    })?;
    let mut walker = workspace_walker(&dir, args.recursive);
    let pattern = args.pattern.trim();
    if !pattern.is_empty() && pattern != "*" {
        let mut overrides = OverrideBuilder::new(&dir);
        overrides.add(pattern).map_err(|e| ToolError::new(ErrorCode::InvalidArguments, format!("invalid pattern {pattern:?}: {e}")))?;
        let overrides =
            overrides.build().map_err(|e| ToolError::new(ErrorCode::InvalidArguments, format!("invalid pattern {pattern:?}: {e}")))?;
        walker.overrides(overrides);
    }
    let hits = Mutex::new(Hits::default());
    walker.build_parallel().run(|| {
        let matcher = matcher.clone();
        let hits = &hits;
        let mut searcher = SearcherBuilder::new().binary_detection(BinaryDetection::quit(b'\0')).line_number(true).build();
        Box::new(move |entry| {
            // Unreadable entries are skipped: partial results beat none.
            let Ok(entry) = entry else { return WalkState::Continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            if let Some((found, count)) = search_file(sandbox, &mut searcher, &matcher, entry.path()) {
                let rel = sandbox.relative(entry.path());
                hits.lock().unwrap_or_else(std::sync::PoisonError::into_inner).add(rel, found, count);
            }
            WalkState::Continue
        })
    });
    let hits = hits.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    if hits.total == 0 {
        return Ok(format!("No matches for {:?}", args.query));
    }
    Ok(hits.render())
}

/// The hits in one text file, or `None` for no match, a binary file or a read error. The file
/// is opened beneath the root: a directory swapped for a symlink during the walk cannot make
/// it read a file outside.
fn search_file(sandbox: &Sandbox, searcher: &mut Searcher, matcher: &RegexMatcher, path: &Path) -> Option<(Vec<Hit>, usize)> {
    let mut sink = FileSink { hits: Vec::new(), count: 0, binary: false };
    let file = sandbox.open_read(path).ok()?;
    searcher.search_file(matcher, &file, &mut sink).ok()?;
    (!sink.binary && sink.count > 0).then_some((sink.hits, sink.count))
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
        fs::create_dir_all(root.join("src/deep")).unwrap();
        fs::create_dir_all(root.join("web")).unwrap();
        fs::create_dir_all(root.join("target")).unwrap();
        fs::write(root.join("src/main.rs"), "fn main() {\n    let agent = Agent::new();\n}\n").unwrap();
        fs::write(root.join("src/deep/agent.rs"), "pub struct Agent;\nimpl Agent {}\n").unwrap();
        fs::write(root.join("web/app.ts"), "const agent = 1;\n").unwrap();
        fs::write(root.join("web/app.js"), "var AGENT = 2;\n").unwrap();
        fs::write(root.join("notes.md"), "The agent (a.k.a. Agent) reads files.\n").unwrap();
        fs::write(root.join("target/out.rs"), "Agent in build output\n").unwrap();
        fs::write(root.join("image.bin"), b"Agent\0\x01\x02binary").unwrap();
        fs::write(root.join(".gitignore"), "target/\n").unwrap();
        dir
    }

    #[tokio::test]
    async fn finds_matches_with_each_option() {
        let dir = setup();
        let ctx = test_context(dir.path());
        let cases = [
            (
                json!({"query": "agent"}),
                "notes.md:1: The agent (a.k.a. Agent) reads files.\n\
                 src/deep/agent.rs:1: pub struct Agent;\n\
                 src/deep/agent.rs:2: impl Agent {}\n\
                 src/main.rs:2:     let agent = Agent::new();\n\
                 web/app.js:1: var AGENT = 2;\n\
                 web/app.ts:1: const agent = 1;",
            ),
            (
                json!({"query": "Agent", "case_sensitive": true, "pattern": "*.rs"}),
                "src/deep/agent.rs:1: pub struct Agent;\n\
                 src/deep/agent.rs:2: impl Agent {}\n\
                 src/main.rs:2:     let agent = Agent::new();",
            ),
            (json!({"query": "agent", "pattern": "*.{js,ts}"}), "web/app.js:1: var AGENT = 2;\nweb/app.ts:1: const agent = 1;"),
            (json!({"query": "agent", "directory": "src", "recursive": false}), "src/main.rs:2:     let agent = Agent::new();"),
            (
                json!({"query": "agent", "pattern": "src/deep/*"}),
                "src/deep/agent.rs:1: pub struct Agent;\nsrc/deep/agent.rs:2: impl Agent {}",
            ),
            (json!({"query": "struct \\w+;", "regex": true}), "src/deep/agent.rs:1: pub struct Agent;"),
            (json!({"query": "a.k.a"}), "notes.md:1: The agent (a.k.a. Agent) reads files."),
            (json!({"query": "a.k.a", "directory": "notes.md"}), "notes.md:1: The agent (a.k.a. Agent) reads files."),
            (json!({"query": "(a.k.a"}), "notes.md:1: The agent (a.k.a. Agent) reads files."),
            (json!({"query": "zzz"}), "No matches for \"zzz\""),
            (json!({"query": "binary"}), "No matches for \"binary\""),
        ];
        for (input, want) in cases {
            assert_eq!(SearchCode.call(&ctx, input.clone()).await.unwrap(), want, "{input}");
        }
    }

    #[tokio::test]
    async fn caps_output_in_path_order() {
        let dir = tempfile::tempdir().unwrap();
        for f in 0..30 {
            let body: String = (0..10).map(|i| format!("hit {i}\n")).collect();
            fs::write(dir.path().join(format!("f{f:02}.txt")), body).unwrap();
        }
        let out = SearchCode.call(&test_context(dir.path()), json!({"query": "hit"})).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), MAX_MATCHES + 1);
        assert_eq!(lines[0], "f00.txt:1: hit 0");
        assert_eq!(lines[MAX_MATCHES - 1], "f19.txt:10: hit 9");
        assert_eq!(lines[MAX_MATCHES], "… truncated: showing 200 of 300 matches; narrow the query, directory or pattern");
    }

    #[tokio::test]
    async fn long_lines_are_shortened() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("min.js"), format!("needle{}", "x".repeat(5000))).unwrap();
        let out = SearchCode.call(&test_context(dir.path()), json!({"query": "needle"})).await.unwrap();
        assert!(out.len() < 400 && out.ends_with('…'), "{}", out.len());
    }

    #[tokio::test]
    async fn each_error_has_its_code() {
        let dir = setup();
        let ctx = test_context(dir.path());
        let cases = [
            (json!({"query": "(unclosed", "regex": true}), ErrorCode::InvalidArguments),
            (json!({"query": ""}), ErrorCode::InvalidArguments),
            (json!({"query": "x", "pattern": "{a,"}), ErrorCode::InvalidArguments),
            (json!({"query": "x", "directory": "nope"}), ErrorCode::DirectoryNotFound),
            (json!({"query": "x", "directory": "../"}), ErrorCode::PathOutsideWorkspace),
            (json!({"query": "root", "directory": "/etc"}), ErrorCode::PathOutsideWorkspace),
            (json!({"pattern": "*.rs"}), ErrorCode::InvalidArguments),
        ];
        for (input, want) in cases {
            let err = SearchCode.call(&ctx, input.clone()).await.expect_err(&input.to_string());
            assert_eq!(err.code, want, "{input}: {err}");
        }
    }

    #[tokio::test]
    async fn symlinks_out_of_the_workspace_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.txt"), "needle outside\n").unwrap();
        fs::write(dir.path().join("inside.txt"), "needle inside\n").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("outdir")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("outfile")).unwrap();
        let out = SearchCode.call(&test_context(dir.path()), json!({"query": "needle"})).await.unwrap();
        assert_eq!(out, "inside.txt:1: needle inside");
    }
}
