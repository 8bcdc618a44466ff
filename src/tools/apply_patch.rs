//! The `apply_patch` tool: adds, updates, moves and deletes files from one patch, all or
//! nothing.
//!
//! Two formats are read (see [`parse`]): the `*** Begin Patch` envelope OpenAI's coding models
//! are trained to emit (the grammar is in the tool's description, as codex offers it) and a
//! unified diff as `git diff` prints it. Every operation is first computed in memory — each
//! path resolved inside the workspace like the other file tools, each hunk placed (see
//! [`hunks`]) — and only when all of them succeed is anything written, through the sandbox's
//! beneath-the-root opens. A hunk that does not match, a path outside the workspace, or a file
//! that does not exist leaves the workspace untouched; should a write itself fail midway, the
//! files already written are put back.

mod hunks;
mod parse;

use super::{BlockingTool, ErrorCode, ToolContext, ToolError};
use dracode_sandbox::Sandbox;
use parse::FileOp;
use schemars::JsonSchema;
use serde::Deserialize;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The largest patch accepted (the tool specification's limit).
const MAX_PATCH_BYTES: usize = 5 * 1024 * 1024;

/// The largest file a patch may update.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The `apply_patch` tool.
pub struct ApplyPatch;

// The arguments of `apply_patch`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// The entire patch, from `*** Begin Patch` to `*** End Patch` (or a unified diff).
    #[serde(alias = "patch", alias = "diff")]
    input: String,
}

impl BlockingTool for ApplyPatch {
    const NAME: &'static str = "apply_patch";
    const DESCRIPTION: &'static str = r#"Edit files with a patch: add, update, move and delete files in one call. Either every change applies or none does.

The patch format is a stripped-down, file-oriented diff:

*** Begin Patch
[ one or more file operations ]
*** End Patch

Each operation starts with one of these headers:
*** Add File: <path> - create a file; every following line is a + line (its content).
*** Delete File: <path> - remove a file; nothing follows.
*** Update File: <path> - change a file in place; optionally followed at once by
*** Move to: <new path> - to rename it as well.

An update has one or more hunks, each introduced by @@ (optionally followed by a line to find first, such as a class or function header, when the context alone is not unique). Inside a hunk each line starts with ' ' (context, kept), '-' (removed) or '+' (added). Show about 3 lines of context above and below each change, copied exactly from the file. End a hunk that reaches the end of the file with *** End of File.

Grammar:
Patch := "*** Begin Patch" NEWLINE { FileOp } "*** End Patch" NEWLINE
FileOp := AddFile | DeleteFile | UpdateFile
AddFile := "*** Add File: " path NEWLINE { "+" line NEWLINE }
DeleteFile := "*** Delete File: " path NEWLINE
UpdateFile := "*** Update File: " path NEWLINE [ "*** Move to: " path NEWLINE ] { Hunk }
Hunk := "@@" [ " " header ] NEWLINE { (" " | "-" | "+") line NEWLINE } [ "*** End of File" NEWLINE ]

Example:
*** Begin Patch
*** Add File: hello.txt
+Hello world
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet():
-    print("Hi")
+    print("Hello, world!")
*** Delete File: obsolete.txt
*** End Patch

Paths are relative to the workspace root. A unified diff (--- a/file, +++ b/file, @@ -1,3 +1,4 @@) is accepted too. Returns OK and one line per file: A (added), M (modified, "-> new" when moved), D (deleted)."#;
    type Args = Args;
    fn run(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
        apply(&ctx.sandbox, &args.input)
    }
}

/// Applies `patch` in the workspace of `sandbox`, all or nothing.
fn apply(sandbox: &Sandbox, patch: &str) -> Result<String, ToolError> {
    if patch.len() > MAX_PATCH_BYTES {
        return Err(ToolError::new(
            ErrorCode::FileTooLarge,
            format!("the patch is {} bytes (limit {MAX_PATCH_BYTES}); split it into several calls", patch.len()),
        ));
    }
    let ops = parse::parse(patch).map_err(|e| ToolError::new(ErrorCode::InvalidArguments, format!("{e}; nothing was changed")))?;
    let mut plan = Plan { sandbox, staged: Vec::new(), summary: Vec::new() };
    for op in &ops {
        plan.stage(op)?;
    }
    plan.commit()
}

/// The patch's effect, computed in memory before anything is written.
struct Plan<'a> {
    sandbox: &'a Sandbox,
    /// Every path the patch touches and its new content (`None`: deleted), in patch order.
    staged: Vec<(PathBuf, Option<String>)>,
    /// One line per operation for the answer.
    summary: Vec<String>,
}

/// What a touched path held before the patch, to put back if a write fails.
enum Original {
    /// Nothing was there.
    Absent,
    /// A regular file with these bytes.
    File(Vec<u8>),
    /// Something not restorable (a symlink); left as the failed commit leaves it.
    Other,
}

impl Plan<'_> {
    /// Adds `op`'s effect to the plan, or says why it cannot apply.
    fn stage(&mut self, op: &FileOp) -> Result<(), ToolError> {
        match op {
            FileOp::Add { path, contents } => {
                let abs = self.writable(path)?;
                self.summary.push(format!("A {}", self.sandbox.relative(&abs)));
                self.set(abs, Some(contents.clone()));
            }
            FileOp::Delete { path } => {
                let abs = self.entry(path)?;
                if !self.exists(&abs, path)? {
                    return Err(ToolError::new(ErrorCode::FileNotFound, format!("cannot delete {path}: not found; nothing was changed")));
                }
                self.summary.push(format!("D {}", self.sandbox.relative(&abs)));
                self.set(abs, None);
            }
            FileOp::Update { path, move_to, hunks } => {
                let abs = self.writable(path)?;
                let Some(text) = self.current(&abs, path)? else {
                    return Err(ToolError::new(
                        ErrorCode::FileNotFound,
                        format!("cannot update {path}: not found (use *** Add File to create it); nothing was changed"),
                    ));
                };
                let updated = hunks::apply(path, &text, hunks).map_err(|e| ToolError::new(ErrorCode::NoMatch, e.0))?;
                let mut line = format!("M {}", self.sandbox.relative(&abs));
                let target = match move_to {
                    Some(to) => {
                        let dest = self.writable(to)?;
                        line.push_str(&format!(" -> {}", self.sandbox.relative(&dest)));
                        if dest != abs {
                            self.set(abs, None);
                        }
                        dest
                    }
                    None => abs,
                };
                self.summary.push(line);
                self.set(target, Some(updated));
            }
        }
        Ok(())
    }

    /// `path` resolved for writing; the root or an existing directory is refused.
    fn writable(&self, path: &str) -> Result<PathBuf, ToolError> {
        let abs = self.sandbox.resolve_for_write(path)?;
        self.sandbox.check_changeable(&abs, path)?;
        if abs == self.sandbox.root() || (abs.is_dir() && !self.is_staged(&abs)) {
            return Err(ToolError::new(ErrorCode::InvalidArguments, format!("{path} is a directory; nothing was changed")));
        }
        Ok(abs)
    }

    /// `path` itself (a symlink not followed), for deleting.
    fn entry(&self, path: &str) -> Result<PathBuf, ToolError> {
        let abs = self.sandbox.resolve_entry(path)?;
        self.sandbox.check_changeable(&abs, path)?;
        if abs == self.sandbox.root() || (abs.is_dir() && !abs.is_symlink() && !self.is_staged(&abs)) {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!("{path} is a directory; use delete_file to delete directories; nothing was changed"),
            ));
        }
        Ok(abs)
    }

    fn is_staged(&self, abs: &Path) -> bool {
        self.staged.iter().any(|(p, _)| p == abs)
    }

    /// Whether the entry `abs` (a symlink itself, not its target) exists as the patch so far
    /// leaves it.
    fn exists(&self, abs: &Path, shown: &str) -> Result<bool, ToolError> {
        if let Some((_, state)) = self.staged.iter().find(|(p, _)| p == abs) {
            return Ok(state.is_some());
        }
        match self.sandbox.open_parent(abs).and_then(|entry| entry.metadata()) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(ToolError::io(&e, shown)),
        }
    }

    /// The text at `abs` as the patch so far leaves it (`None`: no file).
    fn current(&self, abs: &Path, shown: &str) -> Result<Option<String>, ToolError> {
        if let Some((_, state)) = self.staged.iter().find(|(p, _)| p == abs) {
            return Ok(state.clone());
        }
        let mut file = match self.sandbox.open_read(abs) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ToolError::io(&e, shown)),
        };
        let meta = file.metadata().map_err(|e| ToolError::io(&e, shown))?;
        if meta.len() > MAX_FILE_BYTES {
            return Err(ToolError::new(ErrorCode::FileTooLarge, format!("{shown} is {} bytes (limit {MAX_FILE_BYTES})", meta.len())));
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| ToolError::io(&e, shown))?;
        String::from_utf8(bytes).map(Some).map_err(|_| {
            ToolError::new(ErrorCode::InvalidArguments, format!("{shown} is not UTF-8 text; use write_file with encoding \"base64\""))
        })
    }

    fn set(&mut self, abs: PathBuf, state: Option<String>) {
        match self.staged.iter_mut().find(|(p, _)| *p == abs) {
            Some(slot) => slot.1 = state,
            None => self.staged.push((abs, state)),
        }
    }

    /// Writes the plan; if a write fails, the paths already written are put back.
    fn commit(self) -> Result<String, ToolError> {
        let originals: Vec<Original> = self.staged.iter().map(|(abs, _)| self.original(abs)).collect();
        for (done, (abs, state)) in self.staged.iter().enumerate() {
            if let Err(err) = self.write(abs, state.as_deref()) {
                for ((abs, _), original) in self.staged.iter().zip(&originals).take(done + 1) {
                    self.restore(abs, original);
                }
                return Err(ToolError::new(err.code, format!("{}; the files already written were restored", err.message)));
            }
        }
        let noun = if self.summary.len() == 1 { "operation" } else { "operations" };
        Ok(format!("OK: applied {} {noun}\n{}", self.summary.len(), self.summary.join("\n")))
    }

    fn original(&self, abs: &Path) -> Original {
        let Ok(entry) = self.sandbox.open_parent(abs) else { return Original::Other };
        match entry.metadata() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Original::Absent,
            Ok(stat) if rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::RegularFile => {
                let mut bytes = Vec::new();
                match self.sandbox.open_read(abs).and_then(|mut f| f.read_to_end(&mut bytes)) {
                    Ok(_) => Original::File(bytes),
                    Err(_) => Original::Other,
                }
            }
            _ => Original::Other,
        }
    }

    fn write(&self, abs: &Path, state: Option<&str>) -> Result<(), ToolError> {
        let shown = self.sandbox.relative(abs);
        match state {
            Some(text) => {
                super::ensure_parent(self.sandbox, abs, true)?;
                let mut file = self.sandbox.open_write(abs).map_err(|e| ToolError::io(&e, &shown))?;
                file.write_all(text.as_bytes()).map_err(|e| ToolError::io(&e, &shown))
            }
            None => match self.sandbox.open_parent(abs).and_then(|entry| entry.remove()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(ToolError::io(&e, &shown)),
                _ => Ok(()),
            },
        }
    }

    /// Best effort: puts `original` back at `abs` after a failed commit.
    fn restore(&self, abs: &Path, original: &Original) {
        let result = match original {
            Original::Absent => self.sandbox.open_parent(abs).and_then(|entry| entry.remove()),
            Original::File(bytes) => self.sandbox.open_write(abs).and_then(|mut f| f.write_all(bytes)),
            Original::Other => Ok(()),
        };
        if let Err(e) = result {
            tracing::warn!("apply_patch could not restore {}: {e}", abs.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool as _;
    use crate::tools::test_context;
    use serde_json::json;
    use std::collections::BTreeMap;

    /// Every file under `root` (relative path → content), `.keep` markers left out.
    fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
        let mut files = BTreeMap::new();
        for entry in walkdir(root) {
            let rel = entry.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            if !rel.ends_with(".keep") {
                files.insert(rel, std::fs::read(&entry).unwrap());
            }
        }
        files
    }

    fn walkdir(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() { out.extend(walkdir(&path)) } else { out.push(path) }
        }
        out
    }

    fn copy_tree(from: &Path, to: &Path) {
        for (rel, bytes) in tree(from) {
            let dest = to.join(rel);
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            std::fs::write(dest, bytes).unwrap();
        }
    }

    fn show(files: &BTreeMap<String, Vec<u8>>) -> String {
        files.iter().map(|(k, v)| format!("--- {k}\n{}", String::from_utf8_lossy(v))).collect()
    }

    /// The hand-written corpus of tests/fixtures/patches (see its README): each patch yields
    /// exactly `after/`, or its error with the workspace left as `before/` and nothing written
    /// beside it.
    #[tokio::test]
    async fn corpus() {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/patches");
        let mut cases: Vec<PathBuf> = std::fs::read_dir(&corpus).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
        cases.sort();
        assert!(cases.len() >= 10, "corpus missing: {}", corpus.display());
        for case in cases {
            let name = case.file_name().unwrap().to_string_lossy().to_string();
            let outer = tempfile::tempdir().unwrap();
            let ws = outer.path().join("ws");
            std::fs::create_dir(&ws).unwrap();
            copy_tree(&case.join("before"), &ws);
            let patch = std::fs::read_to_string(case.join("patch")).unwrap();
            let result = ApplyPatch.call(&test_context(&ws), json!({ "input": patch })).await;
            if case.join("after").is_dir() {
                let out = result.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(out.starts_with("OK: applied"), "{name}: {out}");
                assert_eq!(show(&tree(&ws)), show(&tree(&case.join("after"))), "{name}");
            } else {
                let expected = std::fs::read_to_string(case.join("error")).unwrap();
                let mut expected = expected.lines();
                let err = result.expect_err(&name);
                assert_eq!(err.code.as_str(), expected.next().unwrap(), "{name}: {err}");
                for piece in expected.filter(|l| !l.is_empty()) {
                    assert!(err.message.contains(piece), "{name}: {piece:?} not in:\n{}", err.message);
                }
                assert_eq!(show(&tree(&ws)), show(&tree(&case.join("before"))), "{name}: the workspace changed");
                let beside: Vec<_> = std::fs::read_dir(outer.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
                assert_eq!(beside, vec![std::ffi::OsString::from("ws")], "{name}: written outside the workspace");
            }
        }
    }

    #[tokio::test]
    async fn a_symlink_out_of_the_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "keep\n").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("link.txt")).unwrap();
        let ctx = test_context(dir.path());
        for patch in [
            "*** Begin Patch\n*** Add File: out/new.txt\n+x\n*** End Patch",
            "*** Begin Patch\n*** Update File: out/secret.txt\n@@\n-keep\n+gone\n*** End Patch",
            "*** Begin Patch\n*** Update File: link.txt\n@@\n-keep\n+gone\n*** End Patch",
            "*** Begin Patch\n*** Add File: a.txt\n+a\n*** Update File: a.txt\n*** Move to: out/a.txt\n*** End Patch",
        ] {
            let err = ApplyPatch.call(&ctx, json!({ "input": patch })).await.unwrap_err();
            assert_eq!(err.code, ErrorCode::PathOutsideWorkspace, "{patch}: {err}");
        }
        assert_eq!(std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(), "keep\n");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
        assert!(!dir.path().join("a.txt").exists(), "half-applied");
        // Deleting the link removes the link, never its target.
        let out = ApplyPatch.call(&ctx, json!({ "input": "*** Begin Patch\n*** Delete File: link.txt\n*** End Patch" })).await.unwrap();
        assert_eq!(out, "OK: applied 1 operation\nD link.txt");
        assert!(std::fs::symlink_metadata(dir.path().join("link.txt")).is_err());
        assert_eq!(std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(), "keep\n");
    }

    /// Patches files in `d` while `d` keeps being swapped for a symlink to a folder outside:
    /// nothing may ever be written outside, whether the kernel has openat2 or not.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_swapped_for_a_symlink_cannot_redirect_a_patch() {
        for fallback in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("d")).unwrap();
            let sandbox = if fallback { Sandbox::without_openat2(dir.path()) } else { Sandbox::new(dir.path()) }.unwrap();
            crate::tools::race::with_swapping_dir(dir.path(), outside.path(), |i| {
                let patch = format!("*** Begin Patch\n*** Add File: d/f{i}.txt\n+x\n*** End Patch");
                let applied = match apply(&sandbox, &patch) {
                    Ok(_) => true,
                    Err(e) if e.code == ErrorCode::PathOutsideWorkspace => false,
                    Err(e) => panic!("fallback={fallback}: {e}"),
                };
                let leaked: Vec<_> = std::fs::read_dir(outside.path()).unwrap().flatten().map(|e| e.file_name()).collect();
                assert!(leaked.is_empty(), "fallback={fallback}: written outside the workspace: {leaked:?} (call {i})");
                applied
            });
        }
    }

    #[tokio::test]
    async fn later_operations_see_earlier_ones_and_line_endings_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("win.txt"), "one\r\ntwo\r\nthree\r\n").unwrap();
        let ctx = test_context(dir.path());
        let patch = "*** Begin Patch\n*** Add File: new.txt\n+first\n*** Update File: new.txt\n@@\n first\n+second\n\
                     *** Update File: win.txt\n@@\n one\n-two\n+TWO\n three\n*** End Patch\n";
        let out = ApplyPatch.call(&ctx, json!({ "patch": patch })).await.unwrap();
        assert_eq!(out, "OK: applied 3 operations\nA new.txt\nM new.txt\nM win.txt");
        assert_eq!(std::fs::read_to_string(dir.path().join("new.txt")).unwrap(), "first\nsecond\n");
        assert_eq!(std::fs::read_to_string(dir.path().join("win.txt")).unwrap(), "one\r\nTWO\r\nthree\r\n");
    }

    #[tokio::test]
    async fn a_failed_write_puts_back_what_was_already_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
        std::fs::write(dir.path().join("blocker"), "a file where a directory is needed\n").unwrap();
        let ctx = test_context(dir.path());
        // Planning succeeds (blocker/x.txt is a new path); writing it fails on the file `blocker`.
        let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Add File: blocker/x.txt\n+x\n*** End Patch";
        let err = ApplyPatch.call(&ctx, json!({ "input": patch })).await.unwrap_err();
        assert!(err.message.contains("restored"), "{err}");
        assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "alpha\n");
    }

    #[tokio::test]
    async fn an_ambiguous_hunk_applies_at_the_first_match_after_its_anchor() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.py"), "def a():\n    return 1\n\ndef b():\n    return 1\n").unwrap();
        let ctx = test_context(dir.path());
        let patch = "*** Begin Patch\n*** Update File: f.py\n@@ def b():\n-    return 1\n+    return 2\n*** End Patch";
        ApplyPatch.call(&ctx, json!({ "input": patch })).await.unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("f.py")).unwrap(), "def a():\n    return 1\n\ndef b():\n    return 2\n");
    }

    #[test]
    fn schema_and_description_carry_the_grammar() {
        let schema = ApplyPatch.schema();
        assert_eq!(schema["required"], json!(["input"]));
        assert_eq!(schema["properties"]["input"]["type"], json!("string"));
        for needle in ["*** Begin Patch", "*** Update File: ", "*** Move to: ", "*** End of File", "Hunk :="] {
            assert!(ApplyPatch.description().contains(needle), "{needle}");
        }
    }

    #[tokio::test]
    async fn input_that_is_no_patch_is_refused_with_the_expected_forms() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let err = ApplyPatch.call(&ctx, json!({ "input": "please change a.txt" })).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArguments);
        assert!(err.message.contains("*** Begin Patch"), "{err}");
        let err = ApplyPatch.call(&ctx, json!({ "text": "x" })).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArguments);
    }
}
