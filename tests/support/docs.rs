//! Reading the documentation as a test sees it: the README and the book's Markdown pages
//! (`docs/src/`), the links in them, and the anchors mdBook gives their headings.

use super::cli::crate_root;
use std::path::{Path, PathBuf};

/// One Markdown file: its path (absolute) and text.
pub struct Page {
    /// The file.
    pub path: PathBuf,
    /// Its content.
    pub text: String,
}

impl Page {
    fn read(path: PathBuf) -> Page {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Page { path, text }
    }

    /// The path from the repository's root, for messages.
    pub fn name(&self) -> String {
        self.path.strip_prefix(crate_root()).unwrap_or(&self.path).display().to_string()
    }
}

/// The book's source folder.
pub fn book_src() -> PathBuf {
    crate_root().join("docs/src")
}

/// Every `.md` file under `docs/src`, sorted.
pub fn book_pages() -> Vec<Page> {
    let mut paths = Vec::new();
    collect_md(&book_src(), &mut paths);
    paths.sort();
    paths.into_iter().map(Page::read).collect()
}

/// The README and every page of the book.
pub fn all_pages() -> Vec<Page> {
    let mut pages = vec![Page::read(crate_root().join("README.md"))];
    pages.extend(book_pages());
    pages
}

fn collect_md(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_md(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// The text outside fenced code blocks, line by line with 1-based line numbers; inline code
/// spans are blanked, so a link written as code is not a link.
pub fn prose_lines(text: &str) -> Vec<(usize, String)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            lines.push((i + 1, blank_code_spans(line)));
        }
    }
    lines
}

fn blank_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(c);
        } else {
            out.push(if in_code { ' ' } else { c });
        }
    }
    out
}

/// The fenced code blocks of a page in `language` (`toml`, `yaml`), as written: a fence may be
/// indented (a block inside a list item), its lines are taken as they are.
pub fn code_blocks(text: &str, language: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut current, fence) {
            (None, Some(info)) if info.trim() == language => current = Some(Vec::new()),
            (Some(lines), Some("")) => {
                blocks.push(lines.join("\n"));
                current = None;
            }
            (Some(lines), _) => lines.push(line),
            (None, _) => {}
        }
    }
    blocks
}

/// Every Markdown link and image target on a page (`[text](target)`, `![alt](target)`), with
/// its line number, outside code.
pub fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose_lines(text) {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            found.push((number, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    found
}

/// The anchors a page offers: mdBook's id of each heading (lowercased; alphanumerics, `-` and
/// `_` kept, whitespace made `-`, the rest dropped; a repeated id gets `-1`, `-2`, …) and every
/// explicit `id="…"`.
pub fn anchors(text: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = heading_id(heading.trim());
        let mut id = base.clone();
        let mut n = 0;
        while ids.contains(&id) {
            n += 1;
            id = format!("{base}-{n}");
        }
        ids.push(id);
    }
    ids.extend(text.lines().filter_map(explicit_id));
    ids
}

fn explicit_id(line: &str) -> Option<String> {
    let at = line.find("id=\"")?;
    let rest = &line[at + 4..];
    Some(rest[..rest.find('"')?].to_string())
}

/// mdBook's id for a heading's text.
pub fn heading_id(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().collect::<String>())
            } else if c.is_whitespace() {
                Some("-".to_string())
            } else {
                None
            }
        })
        .collect()
}
