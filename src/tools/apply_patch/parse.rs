//! Reads a patch into file operations, from either of the two formats `apply_patch` accepts:
//!
//! - the envelope OpenAI's coding models emit (`*** Begin Patch` … `*** End Patch`, with
//!   `*** Add File:`, `*** Update File:` + optional `*** Move to:`, `*** Delete File:`, `@@`
//!   hunks and `*** End of File`), read leniently the way codex does (a heredoc wrapper around
//!   it is dropped; the first hunk of a file may omit its `@@`; blank lines between hunks are
//!   skipped; a hunk with no lines is an error);
//! - a unified diff (`diff --git`, `---`/`+++`, `@@ -a,b +c,d @@`), as `git diff` prints it,
//!   with `/dev/null` for added and deleted files and `rename from`/`rename to`. Hunk line counts
//!   are not trusted (models miscount): a hunk runs until the next `@@`, file header or the end.
//!
//! Parsing is pure; nothing here touches the file system.

/// One change to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileOp {
    /// Create `path` with `contents`.
    Add { path: String, contents: String },
    /// Remove `path`.
    Delete { path: String },
    /// Change `path` by `hunks`, then rename it to `move_to` if given.
    Update { path: String, move_to: Option<String>, hunks: Vec<Hunk> },
}

/// One hunk: the lines to find (`old`) and what replaces them (`new`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Hunk {
    /// The texts after `@@` in the envelope format: lines to find first, in order (a class,
    /// then a method of it: Codex's stacked `@@` lines), so the hunk matches after the last.
    pub anchors: Vec<String>,
    /// Context and removed lines, in order.
    pub old: Vec<String>,
    /// Context and added lines, in order.
    pub new: Vec<String>,
    /// For each of `new`, the index in `old` of the same context line (`None`: added). A
    /// context line matched loosely keeps the file's own whitespace.
    pub context_of: Vec<Option<usize>>,
    /// `*** End of File`: the old lines end the file.
    pub at_eof: bool,
    /// A unified diff's old start line: 1-based where the old lines start, or, for a hunk that
    /// only adds, the line after which the new lines go (0: at the top).
    pub line_hint: Option<usize>,
    /// A unified diff's `\ No newline at end of file` after the new side's last line.
    pub new_lacks_newline: bool,
    /// The same marker after the old side's last line.
    pub old_lacks_newline: bool,
    /// From the `*** Begin Patch` envelope, whose updated files always end with a newline (as
    /// codex writes them); a unified diff says so itself with `\ No newline at end of file`.
    pub envelope: bool,
}

/// A patch that could not be read: the 1-based line of the patch and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("patch line {line}: {message}")]
pub(crate) struct ParseError {
    /// The line of the patch text (1-based; 0 for the patch as a whole).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

fn fail<T>(line: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError { line, message: message.into() })
}

/// Reads `text` in whichever format it is in.
pub(crate) fn parse(text: &str) -> Result<Vec<FileOp>, ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let body = strip_heredoc(&lines);
    let first = body.lines.iter().position(|l| !l.trim().is_empty());
    match first.map(|i| body.lines[i].trim()) {
        Some("*** Begin Patch") => Envelope::new(body).parse(),
        Some(_) if body.lines.iter().any(|l| l.starts_with("--- ") || l.starts_with("diff --git ")) => {
            Unified { lines: body.lines, offset: body.offset, pos: 0 }.parse()
        }
        _ => fail(1, "not a patch: expected `*** Begin Patch` on the first line, or a unified diff (`--- a/file`, `+++ b/file`, `@@`)"),
    }
}

/// The lines of a patch and the number of lines dropped before them (for line numbers).
struct Body<'a> {
    lines: &'a [&'a str],
    offset: usize,
}

/// Drops a shell heredoc wrapper (`<<'EOF'` … `EOF`, or `apply_patch <<EOF` …), which models
/// used to the shell form of the tool sometimes send.
fn strip_heredoc<'a>(lines: &'a [&'a str]) -> Body<'a> {
    let trimmed_end = lines.iter().rposition(|l| !l.trim().is_empty()).map_or(0, |i| i + 1);
    let lines = &lines[..trimmed_end];
    if let (Some(first), Some(last)) = (lines.first(), lines.last())
        && lines.len() >= 2
        && first.trim_start().trim_start_matches("apply_patch").trim().starts_with("<<")
    {
        let tag = first.trim().rsplit("<<").next().unwrap_or("").trim().trim_matches(|c| c == '\'' || c == '"');
        if !tag.is_empty() && last.trim() == tag {
            return Body { lines: &lines[1..lines.len() - 1], offset: 1 };
        }
    }
    Body { lines, offset: 0 }
}

/// The `*** Begin Patch` envelope.
struct Envelope<'a> {
    lines: &'a [&'a str],
    offset: usize,
    pos: usize,
    /// Where the patch's last line is `*** End Patch` (whitespace around it allowed, as codex
    /// allows it): reading stops there, so an indented end marker is never taken for a
    /// context line.
    end: Option<usize>,
}

impl<'a> Envelope<'a> {
    fn new(body: Body<'a>) -> Self {
        let last = body.lines.iter().rposition(|l| !l.trim().is_empty());
        let end = last.filter(|&i| body.lines[i].trim() == "*** End Patch");
        Envelope { lines: body.lines, offset: body.offset, pos: 0, end }
    }

    /// The 1-based patch line of the current position.
    fn line_no(&self) -> usize {
        self.pos + self.offset + 1
    }

    fn peek(&self) -> Option<&'a str> {
        if self.end.is_some_and(|end| self.pos >= end) {
            return None;
        }
        self.lines.get(self.pos).copied()
    }

    fn parse(mut self) -> Result<Vec<FileOp>, ParseError> {
        while self.peek().is_some_and(|l| l.trim().is_empty()) {
            self.pos += 1;
        }
        self.pos += 1; // `*** Begin Patch`
        let mut ops = Vec::new();
        loop {
            let Some(line) = self.peek() else {
                if self.end.is_some() {
                    break;
                }
                return fail(self.line_no(), "the patch ends without `*** End Patch`");
            };
            let header = line.trim();
            let at = self.line_no();
            self.pos += 1;
            if header == "*** End Patch" {
                break;
            } else if let Some(path) = header.strip_prefix("*** Add File:") {
                let path = path_of(path, at)?;
                ops.push(FileOp::Add { path, contents: self.added_lines()? });
            } else if let Some(path) = header.strip_prefix("*** Delete File:") {
                ops.push(FileOp::Delete { path: path_of(path, at)? });
            } else if let Some(path) = header.strip_prefix("*** Update File:") {
                let path = path_of(path, at)?;
                let move_to = match self.peek().map(str::trim).and_then(|l| l.strip_prefix("*** Move to:")) {
                    Some(to) => {
                        let to = path_of(to, self.line_no())?;
                        self.pos += 1;
                        Some(to)
                    }
                    None => None,
                };
                let hunks = self.hunks()?;
                if hunks.is_empty() && move_to.is_none() {
                    return fail(at, format!("`*** Update File: {path}` has no hunks"));
                }
                ops.push(FileOp::Update { path, move_to, hunks });
            } else if header.is_empty() {
                continue;
            } else {
                return fail(
                    at,
                    format!("expected `*** Add File:`, `*** Update File:`, `*** Delete File:` or `*** End Patch`, found {line:?}"),
                );
            }
        }
        if ops.is_empty() {
            return fail(0, "the patch changes no file");
        }
        Ok(ops)
    }

    /// The `+` lines of an added file, as its contents.
    fn added_lines(&mut self) -> Result<String, ParseError> {
        let mut contents = String::new();
        while let Some(line) = self.peek() {
            // The next header, indented or not (a `+` line is the only content here).
            if line.trim_start().starts_with("***") {
                break;
            }
            let Some(text) = line.strip_prefix('+') else {
                return fail(self.line_no(), format!("every line of an added file starts with `+`, found {line:?}"));
            };
            contents.push_str(text);
            contents.push('\n');
            self.pos += 1;
        }
        Ok(contents)
    }

    /// The hunks of an updated file, up to the next `***` header. As in codex, blank lines
    /// where a hunk would start (before the first, after `*** End of File`) are skipped, and a
    /// hunk without lines is an error.
    fn hunks(&mut self) -> Result<Vec<Hunk>, ParseError> {
        let mut hunks: Vec<Hunk> = Vec::new();
        // The hunk being read and the patch line it starts on.
        let mut current: Option<(Hunk, usize)> = None;
        while let Some(line) = self.peek() {
            if line.trim() == "*** End of File" {
                let Some((mut hunk, at)) = current.take() else {
                    return fail(self.line_no(), "`*** End of File` outside a hunk");
                };
                hunk.at_eof = true;
                hunks.push(non_empty(hunk, at)?);
                self.pos += 1;
                continue;
            }
            if line.starts_with("***") {
                break;
            }
            if current.is_none() && line.trim().is_empty() {
                self.pos += 1;
                continue;
            }
            if let Some(anchor) = line.strip_prefix("@@") {
                let anchor = anchor.trim();
                match current.as_mut() {
                    // `@@` lines in a row narrow one hunk's place (Codex's grammar: a change is
                    // `(change_context | change_line)+`).
                    Some((hunk, _)) if hunk.old.is_empty() && hunk.new.is_empty() => {}
                    _ => {
                        if let Some((hunk, at)) = current.take() {
                            hunks.push(non_empty(hunk, at)?);
                        }
                        current = Some((Hunk { envelope: true, ..Hunk::default() }, self.line_no()));
                    }
                }
                if let Some((hunk, _)) = current.as_mut().filter(|_| !anchor.is_empty()) {
                    hunk.anchors.push(anchor.to_string());
                }
                self.pos += 1;
                continue;
            }
            let at = self.line_no();
            let (hunk, _) = current.get_or_insert_with(|| (Hunk { envelope: true, ..Hunk::default() }, at));
            if !push_hunk_line(hunk, line) {
                return fail(at, format!("a hunk line starts with ' ', '-' or '+', found {line:?}"));
            }
            self.pos += 1;
        }
        if let Some((hunk, at)) = current {
            hunks.push(non_empty(hunk, at)?);
        }
        Ok(hunks)
    }
}

/// `hunk` (starting on patch line `at`), or the error codex also gives for a hunk with no lines.
fn non_empty(hunk: Hunk, at: usize) -> Result<Hunk, ParseError> {
    if hunk.old.is_empty() && hunk.new.is_empty() {
        return fail(at, "update hunk does not contain any lines: a `@@` line is followed by ' ', '-' or '+' lines");
    }
    Ok(hunk)
}

/// Adds one ` `/`-`/`+` line (an empty line counts as empty context) to `hunk`; false for any
/// other line.
fn push_hunk_line(hunk: &mut Hunk, line: &str) -> bool {
    match line.chars().next() {
        None | Some(' ') => {
            let text = line.get(1..).unwrap_or_default();
            hunk.context_of.push(Some(hunk.old.len()));
            hunk.old.push(text.to_string());
            hunk.new.push(text.to_string());
        }
        Some('-') => hunk.old.push(line[1..].to_string()),
        Some('+') => {
            hunk.context_of.push(None);
            hunk.new.push(line[1..].to_string());
        }
        Some(_) => return false,
    }
    true
}

/// A header's path, trimmed; an empty one is an error.
fn path_of(raw: &str, line: usize) -> Result<String, ParseError> {
    let path = raw.trim();
    if path.is_empty() {
        return fail(line, "the file header names no path");
    }
    Ok(path.to_string())
}

/// A unified diff.
struct Unified<'a> {
    lines: &'a [&'a str],
    offset: usize,
    pos: usize,
}

/// What the headers of one file section of a unified diff said.
#[derive(Default)]
struct Section {
    old: Option<String>,
    new: Option<String>,
    hunks: Vec<Hunk>,
}

impl Unified<'_> {
    fn line_no(&self) -> usize {
        self.pos + self.offset + 1
    }

    fn parse(mut self) -> Result<Vec<FileOp>, ParseError> {
        let mut ops = Vec::new();
        let mut section: Option<Section> = None;
        while let Some(&line) = self.lines.get(self.pos) {
            let at = self.line_no();
            self.pos += 1;
            if let Some(names) = line.strip_prefix("diff --git ") {
                ops.extend(finish(section.take(), at)?);
                let (old, new) = split_git_names(names);
                section = Some(Section { old, new, hunks: Vec::new() });
            } else if let Some(old) = line.strip_prefix("--- ")
                && self.lines.get(self.pos).is_some_and(|l| l.starts_with("+++ "))
            {
                let new = &self.lines[self.pos][4..];
                self.pos += 1;
                let (old, new) = (diff_name(old), diff_name(new));
                match section.as_mut() {
                    // The names under a `diff --git` line.
                    Some(current) if current.hunks.is_empty() => (current.old, current.new) = (old, new),
                    _ => {
                        ops.extend(finish(section.take(), at)?);
                        section = Some(Section { old, new, hunks: Vec::new() });
                    }
                }
            } else if let Some(from) = line.strip_prefix("rename from ") {
                section.get_or_insert_with(Section::default).old = Some(from.trim().to_string());
            } else if let Some(to) = line.strip_prefix("rename to ") {
                section.get_or_insert_with(Section::default).new = Some(to.trim().to_string());
            } else if line.starts_with("new file mode") {
                section.get_or_insert_with(Section::default).old = None;
            } else if line.starts_with("deleted file mode") {
                section.get_or_insert_with(Section::default).new = None;
            } else if line.starts_with("@@") {
                let Some(current) = section.as_mut() else {
                    return fail(at, "a hunk before any `--- a/file` / `+++ b/file` header");
                };
                current.hunks.push(self.hunk(line, at)?);
            } else if line.starts_with("Binary files ") || line.starts_with("GIT binary patch") {
                return fail(at, "binary patches are not supported; use write_file with encoding \"base64\"");
            }
            // Anything else (`index`, mode lines, `similarity index`, prose) carries nothing.
        }
        ops.extend(finish(section, self.line_no())?);
        if ops.is_empty() {
            return fail(0, "the diff changes no file");
        }
        Ok(ops)
    }

    /// One `@@ -a,b +c,d @@` hunk; its lines run until the next hunk or file header.
    fn hunk(&mut self, header: &str, at: usize) -> Result<Hunk, ParseError> {
        let Some(start) = header.strip_prefix("@@ -").and_then(|r| r.split([',', ' ']).next()).and_then(|n| n.parse::<usize>().ok()) else {
            return fail(at, format!("a unified-diff hunk header looks like `@@ -12,5 +12,6 @@`, found {header:?}"));
        };
        let mut hunk = Hunk { line_hint: Some(start), ..Hunk::default() };
        let mut last_side = ' ';
        while let Some(&line) = self.lines.get(self.pos) {
            let next_is_new_header = self.lines.get(self.pos + 1).is_some_and(|l| l.starts_with("+++ "));
            if line.starts_with("@@") || line.starts_with("diff --git ") || (line.starts_with("--- ") && next_is_new_header) {
                break;
            }
            if line.starts_with('\\') {
                match last_side {
                    '-' => hunk.old_lacks_newline = true,
                    '+' => hunk.new_lacks_newline = true,
                    _ => (hunk.old_lacks_newline, hunk.new_lacks_newline) = (true, true),
                }
            } else if push_hunk_line(&mut hunk, line) {
                last_side = line.chars().next().unwrap_or(' ');
            } else {
                break;
            }
            self.pos += 1;
        }
        // Blank lines after the last hunk are separators, not context.
        while hunk.old.last().is_some_and(String::is_empty) && hunk.new.last().is_some_and(String::is_empty) && self.pos == self.lines.len()
        {
            hunk.old.pop();
            hunk.new.pop();
            hunk.context_of.pop();
        }
        Ok(hunk)
    }
}

/// The file operation of a finished unified-diff section.
fn finish(section: Option<Section>, at: usize) -> Result<Option<FileOp>, ParseError> {
    let Some(Section { old, new, hunks }) = section else { return Ok(None) };
    match (old, new) {
        (None, None) => fail(at, "a file section names no file (both sides are /dev/null)"),
        (None, Some(path)) => {
            let mut contents = String::new();
            let mut lacks_newline = false;
            for hunk in &hunks {
                if !hunk.old.is_empty() {
                    return fail(at, format!("{path} is added (--- /dev/null) but a hunk removes or keeps lines"));
                }
                hunk.new.iter().for_each(|l| {
                    contents.push_str(l);
                    contents.push('\n');
                });
                lacks_newline = hunk.new_lacks_newline;
            }
            if lacks_newline {
                contents.pop();
            }
            Ok(Some(FileOp::Add { path, contents }))
        }
        (Some(path), None) => Ok(Some(FileOp::Delete { path })),
        (Some(path), Some(to)) => {
            let move_to = (to != path).then_some(to);
            if hunks.is_empty() && move_to.is_none() {
                return Ok(None);
            }
            Ok(Some(FileOp::Update { path, move_to, hunks }))
        }
    }
}

/// A `---`/`+++` name without its `a/`/`b/` prefix or timestamp; `/dev/null` is `None`.
fn diff_name(raw: &str) -> Option<String> {
    let name = raw.split('\t').next().unwrap_or(raw).trim();
    if name == "/dev/null" {
        return None;
    }
    Some(name.strip_prefix("a/").or_else(|| name.strip_prefix("b/")).unwrap_or(name).to_string())
}

/// The two names of a `diff --git a/x b/x` line (split at ` b/`).
fn split_git_names(names: &str) -> (Option<String>, Option<String>) {
    match names.split_once(" b/") {
        Some((old, new)) => (diff_name(old), Some(new.trim().to_string())),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(path: &str, hunks: Vec<Hunk>) -> FileOp {
        FileOp::Update { path: path.into(), move_to: None, hunks }
    }

    fn hunk(old: &[&str], new: &[&str]) -> (Vec<String>, Vec<String>) {
        (old.iter().map(|s| (*s).to_string()).collect(), new.iter().map(|s| (*s).to_string()).collect())
    }

    #[test]
    fn the_first_hunk_may_omit_its_header_and_crlf_patches_read_the_same() {
        for text in [
            "*** Begin Patch\n*** Update File: a.txt\n x\n-y\n+z\n*** End Patch\n",
            "*** Begin Patch\r\n*** Update File: a.txt\r\n x\r\n-y\r\n+z\r\n*** End Patch\r\n",
        ] {
            let ops = parse(text).unwrap();
            let FileOp::Update { hunks, .. } = &ops[0] else { panic!("{ops:?}") };
            assert_eq!((hunks[0].old.clone(), hunks[0].new.clone()), hunk(&["x", "y"], &["x", "z"]));
            assert_eq!(hunks[0].context_of, [Some(0), None]);
        }
    }

    #[test]
    fn a_unified_diff_inside_prose_and_a_code_fence_is_read() {
        let text = "Here is the change:\n```diff\n--- a/src/x.rs\n+++ b/src/x.rs\n@@ -7,2 +7,2 @@ fn main() {\n a\n-b\n+c\n```\nDone.\n";
        let ops = parse(text).unwrap();
        let (old, new) = hunk(&["a", "b"], &["a", "c"]);
        let want = Hunk { old, new, context_of: vec![Some(0), None], line_hint: Some(7), ..Hunk::default() };
        assert_eq!(ops, [update("src/x.rs", vec![want])]);
    }

    #[test]
    fn errors_name_the_patch_line() {
        let cases = [
            ("*** Begin Patch\n*** Frobnicate File: a\n*** End Patch", 2, "expected `*** Add File:`"),
            ("*** Begin Patch\n*** Update File: a\n@@\n x\nbogus\n*** End Patch", 5, "a hunk line starts with"),
            ("*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch", 3, "starts with `+`"),
            ("*** Begin Patch\n*** Update File: a\n*** End Patch", 2, "has no hunks"),
            ("*** Begin Patch\n*** Add File:   \n*** End Patch", 2, "names no path"),
            // An empty hunk is an error, as in codex: before `*** End of File`, another hunk,
            // the next file or the end.
            ("*** Begin Patch\n*** Update File: a\n@@\n*** End of File\n*** End Patch", 3, "does not contain any lines"),
            ("*** Begin Patch\n*** Update File: a\n-a\n+b\n@@\n*** Delete File: b\n*** End Patch", 5, "does not contain any lines"),
            ("*** Begin Patch\n*** Update File: a\n@@\n-a\n+b\n@@\n*** End Patch", 6, "does not contain any lines"),
            ("*** Begin Patch\n*** End Patch", 0, "changes no file"),
            ("@@ -1 +1 @@\n-a\n+b\n--- a/x\n+++ b/x\n", 1, "before any"),
            ("diff --git a/i.png b/i.png\n--- a/i.png\n+++ b/i.png\nBinary files a/i.png and b/i.png differ\n", 4, "binary patches"),
            ("just some words", 1, "not a patch"),
        ];
        for (text, line, piece) in cases {
            let err = parse(text).expect_err(text);
            assert_eq!(err.line, line, "{text:?}: {err}");
            assert!(err.message.contains(piece), "{text:?}: {err}");
        }
    }

    #[test]
    fn blank_lines_between_hunks_are_skipped() {
        // After `*** End of File` (which ends a hunk) and before the first hunk, as codex does;
        // inside a hunk a blank line stays an empty context line.
        let text = "*** Begin Patch\n*** Update File: a\n\n@@\n-x\n+y\n*** End of File\n\n\n*** Update File: b\n@@\n-p\n\n+q\n*** End of File\n \n*** End Patch\n";
        let ops = parse(text).unwrap();
        let (FileOp::Update { hunks: a, .. }, FileOp::Update { hunks: b, .. }) = (&ops[0], &ops[1]) else { panic!("{ops:?}") };
        assert_eq!((a.len(), b.len()), (1, 1), "{ops:?}");
        assert_eq!((a[0].old.clone(), a[0].new.clone()), hunk(&["x"], &["y"]));
        assert_eq!((b[0].old.clone(), b[0].new.clone()), hunk(&["p", ""], &["", "q"]));
        assert!(a[0].at_eof && b[0].at_eof);
    }

    #[test]
    fn a_heredoc_wrapper_is_dropped() {
        for first in ["<<'EOF'", "apply_patch <<\"EOF\"", "<<EOF"] {
            let text = format!("{first}\n*** Begin Patch\n*** Delete File: a\n*** End Patch\nEOF\n");
            assert_eq!(parse(&text).unwrap(), [FileOp::Delete { path: "a".into() }], "{first}");
        }
    }
}
