//! Applies one file's hunks to its text, in memory.
//!
//! Each hunk's old lines are looked for after the previous hunk, first exactly, then ignoring
//! trailing whitespace, then ignoring all leading and trailing whitespace, then also taking
//! typographic dashes, quotes and spaces for their ASCII forms (as codex does); the first pass that
//! finds them wins (within it, the match nearest a unified diff's line number, else the first).
//! A hunk that is not found is an error naming the hunk and showing the file's lines that come
//! closest, so the model can correct its context.

use super::parse::Hunk;

/// How many lines of expected and nearest text an error shows at most.
const SHOWN_LINES: usize = 12;

/// A hunk that could not be placed, with the message the model sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct NoMatch(pub String);

/// Why one hunk does not apply where it is looked for (the reason inside a [`NoMatch`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unplaced {
    /// The hunk's `@@ anchor` line is not in the file after the previous hunk.
    #[error("its `@@ {0}` line was not found")]
    Anchor(String),
    /// The hunk's context and removed lines are not in the file after the previous hunk.
    #[error("its context and removed lines were not found")]
    Lines,
}

/// `text` with `hunks` applied. Line endings (LF or CRLF) are kept, and so is the final
/// newline — added when an envelope-format patch updates a file without one, as codex does.
pub(crate) fn apply(shown: &str, text: &str, hunks: &[Hunk]) -> Result<String, NoMatch> {
    let crlf = text.contains("\r\n");
    let mut lines: Vec<String> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l).to_string()).collect();
    // The envelope format has no way to say "no newline at the end": its updated files end
    // with one, as codex writes them.
    let mut ends_with_newline = text.is_empty() || text.ends_with('\n') || hunks.iter().any(|h| h.envelope);
    if text.ends_with('\n') || text.is_empty() {
        lines.pop();
    }
    let mut edits: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut cursor = 0;
    for (index, hunk) in hunks.iter().enumerate() {
        let (start, len, new_len) = place(&lines, hunk, cursor).map_err(|why| no_match(shown, index + 1, hunk, &lines, cursor, why))?;
        edits.push((start, len, replacement(&lines[start..start + len], hunk, new_len)));
        cursor = start + len;
        if hunk.new_lacks_newline {
            ends_with_newline = false;
        } else if hunk.old_lacks_newline {
            ends_with_newline = true;
        }
    }
    for (start, len, new) in edits.into_iter().rev() {
        lines.splice(start..start + len, new);
    }
    let mut out = lines.join(if crlf { "\r\n" } else { "\n" });
    if ends_with_newline && !lines.is_empty() {
        out.push_str(if crlf { "\r\n" } else { "\n" });
    }
    Ok(out)
}

/// The first `new_len` new lines of `hunk`, its context lines taken from `matched` (the file's
/// lines it matched) so that a loose match never rewrites the whitespace of lines it keeps.
fn replacement(matched: &[String], hunk: &Hunk, new_len: usize) -> Vec<String> {
    let from_file = |(line, context): (&String, &Option<usize>)| context.and_then(|i| matched.get(i)).unwrap_or(line).clone();
    hunk.new.iter().zip(&hunk.context_of).take(new_len).map(from_file).collect()
}

/// Where `hunk` applies at or after `cursor`: the start line (0-based), how many lines it
/// replaces and how many of its new lines replace them; or why it does not apply.
fn place(lines: &[String], hunk: &Hunk, mut cursor: usize) -> Result<(usize, usize, usize), Unplaced> {
    for anchor in &hunk.anchors {
        let found = seek(lines, std::slice::from_ref(anchor), cursor, None, false).ok_or_else(|| Unplaced::Anchor(anchor.clone()))?;
        cursor = found + 1;
    }
    if hunk.old.is_empty() {
        // Only additions: after the anchor, at the unified diff's line, or at the end.
        let at = match (hunk.anchors.is_empty(), hunk.line_hint) {
            (false, _) => cursor,
            (true, Some(line)) => line.clamp(cursor, lines.len()),
            (true, None) => lines.len(),
        };
        return Ok((at, 0, hunk.new.len()));
    }
    let hint = hunk.line_hint.map(|l| l.saturating_sub(1));
    if let Some(start) = seek(lines, &hunk.old, cursor, hint, hunk.at_eof) {
        return Ok((start, hunk.old.len(), hunk.new.len()));
    }
    // A trailing blank context line the file does not have (a common slip) is dropped.
    if hunk.old.last().is_some_and(|l| l.trim().is_empty()) && hunk.new.last().is_some_and(|l| l.trim().is_empty()) {
        let old = &hunk.old[..hunk.old.len() - 1];
        if !old.is_empty()
            && let Some(start) = seek(lines, old, cursor, hint, hunk.at_eof)
        {
            return Ok((start, old.len(), hunk.new.len() - 1));
        }
    }
    Err(Unplaced::Lines)
}

/// The first start at or after `from` where `pattern` matches `lines`, trying exact,
/// trailing-whitespace-insensitive, whitespace-insensitive, then also typographic-punctuation-
/// insensitive comparison (see [`ascii_punctuation`]); with `at_eof`, only
/// a match that ends the file; with `hint`, the match nearest to it.
fn seek(lines: &[String], pattern: &[String], from: usize, hint: Option<usize>, at_eof: bool) -> Option<usize> {
    if pattern.len() > lines.len() {
        return None;
    }
    let last = lines.len() - pattern.len();
    if from > last {
        return None;
    }
    let passes: [fn(&str, &str) -> bool; 4] = [
        |a, b| a == b,
        |a, b| a.trim_end() == b.trim_end(),
        |a, b| a.trim() == b.trim(),
        |a, b| a.trim().chars().map(ascii_punctuation).eq(b.trim().chars().map(ascii_punctuation)),
    ];
    for same in passes {
        let fits = |start: usize| pattern.iter().zip(&lines[start..]).all(|(p, l)| same(l, p));
        let found = match (at_eof, hint) {
            (true, _) => fits(last).then_some(last),
            (false, Some(hint)) => (from..=last).filter(|&s| fits(s)).min_by_key(|&s| s.abs_diff(hint)),
            (false, None) => (from..=last).find(|&s| fits(s)),
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// `c` as ASCII when it is a typographic dash, quote or space (the set codex folds): models
/// write `-`, `'`, `"` and ` ` where files have EN DASH, curly quotes or NO-BREAK SPACE.
fn ascii_punctuation(c: char) -> char {
    match c {
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{2018}'..='\u{201B}' => '\'',
        '\u{201C}'..='\u{201F}' => '"',
        '\u{a0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        other => other,
    }
}

/// The error for hunk `number` of `shown`: what was expected and the nearest lines found.
fn no_match(shown: &str, number: usize, hunk: &Hunk, lines: &[String], cursor: usize, why: Unplaced) -> NoMatch {
    let mut message = format!("{shown}: hunk {number} did not apply: {why}");
    if cursor > 0 {
        message.push_str(&format!(" (searched from line {}, after the previous hunk)", cursor + 1));
    }
    message.push_str(".\nExpected lines:\n");
    for line in hunk.old.iter().take(SHOWN_LINES) {
        message.push_str(&format!("  {line}\n"));
    }
    match nearest(lines, &hunk.old) {
        Some(start) => {
            message.push_str(&format!("Nearest lines in {shown} (from line {}):\n", start + 1));
            for (i, line) in lines.iter().enumerate().skip(start).take(hunk.old.len().clamp(1, SHOWN_LINES)) {
                message.push_str(&format!("{:>5}| {line}\n", i + 1));
            }
        }
        None => message.push_str(&format!("No line of it occurs in {shown}.\n")),
    }
    message.push_str("Nothing was changed. Read the file and copy the context lines exactly.");
    NoMatch(message)
}

/// The start of the window of `lines` sharing the most lines (whitespace-insensitive) with
/// `pattern` position by position; `None` when no line is shared.
fn nearest(lines: &[String], pattern: &[String]) -> Option<usize> {
    let score = |start: usize| pattern.iter().zip(&lines[start..]).filter(|(p, l)| !p.trim().is_empty() && p.trim() == l.trim()).count();
    let (start, best) = (0..lines.len()).map(|s| (s, score(s))).max_by_key(|&(s, n)| (n, std::cmp::Reverse(s)))?;
    (best > 0).then_some(start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::apply_patch::parse::{FileOp, parse};

    /// The text after applying `patch`'s hunks (its only operation is an update) to `text`.
    fn patched(text: &str, patch: &str) -> Result<String, NoMatch> {
        match parse(patch).unwrap().remove(0) {
            FileOp::Update { hunks, .. } => apply("f", text, &hunks),
            other => panic!("{other:?}"),
        }
    }

    fn envelope(body: &str) -> String {
        format!("*** Begin Patch\n*** Update File: f\n{body}*** End Patch\n")
    }

    #[test]
    fn hunks_land_where_they_should() {
        let cases = [
            // No final newline: the envelope format adds one, as codex does …
            ("a\nb", envelope("@@\n a\n-b\n+c\n"), "a\nc\n"),
            // … while a unified diff keeps it missing when it says so.
            (
                "a\nb",
                "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n".to_string(),
                "a\nc",
            ),
            // *** End of File picks the occurrence that ends the file.
            ("x\nend\nx\nend\n", envelope("@@\n x\n-end\n+END\n*** End of File\n"), "x\nend\nx\nEND\n"),
            // A trailing blank context line the file lacks is dropped, not added.
            ("a\nb\n", envelope("@@\n a\n-b\n+c\n \n"), "a\nc\n"),
            // Stacked `@@` lines (Codex's prompt asks for them): the class, then its method, then
            // the lines — the same lines elsewhere are left alone.
            (
                "class Other:\n    def method():\n        x = 1\nclass BaseClass:\n    def other():\n        x = 1\n    def method():\n        x = 1\n",
                envelope("@@ class BaseClass:\n@@     def method():\n-        x = 1\n+        x = 2\n"),
                "class Other:\n    def method():\n        x = 1\nclass BaseClass:\n    def other():\n        x = 1\n    def method():\n        x = 2\n",
            ),
            // Only additions after an anchor go right after it.
            ("fn a() {\n}\nfn b() {\n}\n", envelope("@@ fn b() {\n+    body();\n"), "fn a() {\n}\nfn b() {\n    body();\n}\n"),
            // A -U0 unified diff inserts after the line it names.
            ("1\n2\n3\n", "--- a/f\n+++ b/f\n@@ -2,0 +3,1 @@\n+2.5\n".to_string(), "1\n2\n2.5\n3\n"),
            // The unified diff's line number picks between identical contexts.
            ("k\nv\nk\nv\n", "--- a/f\n+++ b/f\n@@ -3,2 +3,2 @@\n k\n-v\n+w\n".to_string(), "k\nv\nk\nw\n"),
            // An empty file gets its first lines.
            ("", envelope("@@\n+new\n"), "new\n"),
        ];
        for (text, patch, want) in cases {
            assert_eq!(patched(text, &patch).unwrap(), want, "{patch}");
        }
    }

    #[test]
    fn ascii_punctuation_finds_typographic_punctuation_as_codex_does() {
        // Dashes (hyphen, non-breaking hyphen, figure dash, en and em dash, bar, minus), curly
        // and low quotes, and odd spaces (no-break, en to hair, narrow, math, ideographic).
        let dashes = ["\u{2010}", "\u{2011}", "\u{2012}", "\u{2013}", "\u{2014}", "\u{2015}", "\u{2212}"];
        let singles = ["\u{2018}", "\u{2019}", "\u{201A}", "\u{201B}"];
        let doubles = ["\u{201C}", "\u{201D}", "\u{201E}", "\u{201F}"];
        let spaces = ["\u{a0}", "\u{2002}", "\u{2005}", "\u{2009}", "\u{200A}", "\u{202F}", "\u{205F}", "\u{3000}"];
        let groups = [(&dashes[..], "-"), (&singles[..], "'"), (&doubles[..], "\""), (&spaces[..], " ")];
        for (chars, ascii) in groups {
            for c in chars {
                let text = format!("keep {c} this\nold {c} line\n");
                let got = patched(&text, &envelope(&format!("@@\n keep {ascii} this\n-old {ascii} line\n+new\n")));
                // The context line keeps the file's own character.
                assert_eq!(got.unwrap(), format!("keep {c} this\nnew\n"), "{c:?}");
            }
        }
        // An exact match still comes first, even after a typographic one.
        assert_eq!(patched("a\u{2013}b\na-b\n", &envelope("@@\n-a-b\n+c\n")).unwrap(), "a\u{2013}b\nc\n");
        // Other characters are not folded: an ellipsis is not three dots.
        assert!(patched("wait\u{2026}\n", &envelope("@@\n-wait...\n+go\n")).is_err());
    }

    #[test]
    fn hunks_apply_in_order_and_never_before_the_previous_one() {
        let err = patched("a\nb\nc\n", &envelope("@@\n-c\n+C\n@@\n-a\n+A\n")).unwrap_err();
        assert!(err.0.contains("hunk 2 did not apply") && err.0.contains("searched from line 4"), "{err}");
        let err = patched("a\n", &envelope("@@ fn missing()\n-a\n+b\n")).unwrap_err();
        assert!(err.0.contains("`@@ fn missing()` line was not found"), "{err}");
        let err = patched("a\n", &envelope("@@\n-zzz\n+b\n")).unwrap_err();
        assert!(err.0.contains("No line of it occurs in f"), "{err}");
    }
}
