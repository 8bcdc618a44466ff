//! The documentation holds together: the README is a front page with the newcomer's two
//! commands at the top, every link in it and in the book (`docs/src/`) leads somewhere, the
//! book's table of contents and its pages agree, the built book (`mdbook build docs`) has no
//! dead link, and every page of the documentation the code cites exists.
//!
//! The built-book test needs mdBook: `DRACODE_MDBOOK` names the binary, else `mdbook` on the
//! `PATH`; without one it is skipped with a note, and with `DRACODE_REQUIRE_MDBOOK=1` (set by
//! `.ci/run`, which installs mdBook) a missing one fails.

use crate::support::cli::crate_root;
use crate::support::docs::{Page, all_pages, anchors, book_pages, book_src, links};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

#[test]
fn the_readme_is_a_front_page_with_the_two_commands_at_the_top() {
    let readme = std::fs::read_to_string(crate_root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: the front page stays at most 300 (the rest belongs in docs/src)");
    let top: Vec<&str> = readme.lines().take(40).collect();
    for command in ["cargo run --release -- run examples/quickstart.toml", "cargo test"] {
        assert!(
            top.iter().any(|l| l.trim_start().starts_with(command)),
            "README.md's first 40 lines have no line starting with `{command}`"
        );
    }
}

/// Resolves `target` (a link's path, without its fragment) against `page`'s folder, lexically.
fn resolve(page: &Path, target: &str) -> PathBuf {
    let mut path = page.parent().unwrap().to_path_buf();
    for part in Path::new(target).components() {
        match part {
            Component::ParentDir => {
                path.pop();
            }
            Component::Normal(name) => path.push(name),
            _ => {}
        }
    }
    path
}

fn is_external(target: &str) -> bool {
    target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:")
}

/// The problems with one link of `page`, if any.
fn check_link(page: &Page, target: &str, texts: &BTreeMap<PathBuf, String>) -> Option<String> {
    let (path, fragment) = target.split_once('#').map_or((target, None), |(p, f)| (p, Some(f)));
    let file = if path.is_empty() { page.path.clone() } else { resolve(&page.path, path) };
    let in_book = page.path.starts_with(book_src());
    if in_book && !file.starts_with(book_src()) {
        return Some(format!("`{target}` leaves docs/src: the built book cannot serve it"));
    }
    if !file.exists() {
        return Some(format!("`{target}`: no such file"));
    }
    let fragment = fragment?;
    let text = texts.get(&file)?;
    (!anchors(text).iter().any(|a| a == fragment)).then(|| format!("`{target}`: no heading or id `{fragment}` there"))
}

#[test]
fn every_relative_link_in_the_readme_and_the_book_resolves() {
    let pages = all_pages();
    let texts: BTreeMap<PathBuf, String> = pages.iter().map(|p| (p.path.clone(), p.text.clone())).collect();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        for (line, target) in links(&page.text) {
            if is_external(&target) {
                continue;
            }
            checked += 1;
            if let Some(problem) = check_link(page, &target, &texts) {
                broken.push(format!("{}:{line}: {problem}", page.name()));
            }
        }
    }
    assert!(checked > 100, "only {checked} relative links found: is the link parser broken?");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The pages `docs/src/SUMMARY.md` lists, in its order.
fn summary_entries() -> Vec<String> {
    let summary = std::fs::read_to_string(book_src().join("SUMMARY.md")).unwrap();
    links(&summary).into_iter().map(|(_, target)| target).collect()
}

#[test]
fn the_books_contents_list_every_page_once_and_only_pages_that_exist() {
    let listed = summary_entries();
    let mut seen = BTreeSet::new();
    for entry in &listed {
        assert!(book_src().join(entry).is_file(), "SUMMARY.md lists {entry}, which is not in docs/src");
        assert!(seen.insert(entry.clone()), "SUMMARY.md lists {entry} twice");
    }
    for page in book_pages() {
        let name = page.path.strip_prefix(book_src()).unwrap().display().to_string();
        if name != "SUMMARY.md" {
            assert!(seen.contains(&name), "docs/src/{name} is not in SUMMARY.md: no reader finds it");
        }
    }
}

/// Every `docs/src/….md` (with its `#anchor`) that `text` names.
fn cited_docs(text: &str) -> Vec<(String, Option<String>)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("docs/src/") {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_alphanumeric() || "/._-#".contains(c))).unwrap_or(tail.len());
        let cited = tail[..end].trim_end_matches('.');
        if let Some((path, anchor)) = cited.split_once('#') {
            found.push((path.to_string(), Some(anchor.to_string())));
        } else if cited.ends_with(".md") {
            found.push((cited.to_string(), None));
        }
        rest = &tail[end..];
    }
    found
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for path in entries.flatten().map(|e| e.path()) {
        if path.is_dir() && !path.ends_with("fixtures") {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| ["rs", "sh", "yml", "toml", "py"].iter().any(|x| e == *x)) {
            out.push(path);
        }
    }
}

#[test]
fn every_page_of_the_documentation_the_code_cites_exists() {
    let root = crate_root();
    let mut files =
        vec![root.join("action.yml"), root.join("build.rs"), root.join(".ci/run"), root.join("Cargo.toml"), root.join("deny.toml")];
    for dir in ["src", "crates", "tests", "benches", "scripts", ".github", "examples"] {
        source_files(&root.join(dir), &mut files);
    }
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let readme_headings = anchors(&readme);
    let mut problems = Vec::new();
    let mut cited = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let name = file.strip_prefix(&root).unwrap().display();
        if text.contains(&["INTERFACE", ".md"].concat()) {
            problems.push(format!("{name} cites a file that is not in the repository: {}", ["INTERFACE", ".md"].concat()));
        }
        for (path, anchor) in cited_docs(&text) {
            cited += 1;
            let Ok(page) = std::fs::read_to_string(root.join(&path)) else {
                problems.push(format!("{name} cites {path}, which does not exist"));
                continue;
            };
            if let Some(anchor) = anchor.filter(|a| !anchors(&page).contains(a)) {
                problems.push(format!("{name} cites {path}#{anchor}: no such heading there"));
            }
        }
        for section in readme_sections_cited(&text) {
            if !readme_headings.contains(&crate::support::docs::heading_id(&section)) {
                problems.push(format!("{name} cites the README's \"{section}\", which is not a heading of README.md"));
            }
        }
    }
    assert!(cited >= 10, "only {cited} citations of docs/src found: is the scan broken?");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The sections named by citations of a README section: the word README (not in a string
/// literal), then optionally `'s`, a comma, a colon or a parenthesis, then the heading in quotes.
fn readme_sections_cited(text: &str) -> Vec<String> {
    let mut sections = Vec::new();
    for (at, _) in text.match_indices("README") {
        if text[..at].ends_with('"') || text[at + 6..].starts_with('"') {
            continue;
        }
        let tail = text[at + 6..].trim_start_matches(['\'', '’', 's', ',', ':', ' ', '(']);
        if let Some((quoted, _)) = tail.strip_prefix('"').and_then(|t| t.split_once('"'))
            && !quoted.is_empty()
            && !quoted.contains('\n')
            && quoted.len() < 80
        {
            sections.push(quoted.to_string());
        }
    }
    sections
}

/// The mdBook binary: `DRACODE_MDBOOK`, else `mdbook` on the PATH; `None` after a note (a
/// panic under `DRACODE_REQUIRE_MDBOOK=1`).
fn mdbook() -> Option<PathBuf> {
    let named = std::env::var_os("DRACODE_MDBOOK").map(PathBuf::from);
    let found = named
        .or_else(|| std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).map(|d| d.join("mdbook")).find(|p| p.is_file()));
    if found.is_none() {
        if std::env::var_os("DRACODE_REQUIRE_MDBOOK").is_some_and(|v| v == "1") {
            panic!("mdbook not found and DRACODE_REQUIRE_MDBOOK=1: `cargo install mdbook --locked`, or name it in DRACODE_MDBOOK");
        }
        eprintln!("note: mdbook not found (DRACODE_MDBOOK, PATH): the built book's links are not checked");
    }
    found
}

/// Every `attr="value"` of an HTML page.
fn attribute_values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let needle = format!(" {attr}=\"");
    html.match_indices(&needle)
        .filter_map(|(at, _)| {
            let rest = &html[at + needle.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .collect()
}

fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for path in std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()) {
        if path.is_dir() {
            html_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "html") {
            out.push(path);
        }
    }
}

#[test]
fn the_built_book_has_no_dead_link() {
    let Some(mdbook) = mdbook() else { return };
    let out = tempfile::tempdir().unwrap();
    let built = std::process::Command::new(&mdbook)
        .args(["build", "docs", "--dest-dir"])
        .arg(out.path())
        .current_dir(crate_root())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", mdbook.display()));
    let log = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "mdbook build docs failed:\n{log}");
    assert!(!log.contains("WARN") && !log.contains("ERROR"), "mdbook build docs warned:\n{log}");
    let mut pages = Vec::new();
    html_files(out.path(), &mut pages);
    let ids: BTreeMap<PathBuf, Vec<String>> = pages
        .iter()
        .map(|p| {
            let html = std::fs::read_to_string(p).unwrap();
            (p.clone(), attribute_values(&html, "id").into_iter().map(str::to_string).collect())
        })
        .collect();
    let mut dead = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let html = std::fs::read_to_string(page).unwrap();
        for target in attribute_values(&html, "href").into_iter().chain(attribute_values(&html, "src")) {
            if is_external(target) || target.starts_with("javascript:") || target == "#" || target.is_empty() {
                continue;
            }
            checked += 1;
            let (path, fragment) = target.split_once('#').map_or((target, None), |(p, f)| (p, Some(f)));
            let file = if path.is_empty() { page.clone() } else { resolve(page, path) };
            let name = page.strip_prefix(out.path()).unwrap().display().to_string();
            if !file.exists() {
                dead.push(format!("{name}: {target}: no such file in the book"));
            } else if let (Some(fragment), Some(known)) = (fragment, ids.get(&file))
                && !known.iter().any(|id| id == fragment)
            {
                dead.push(format!("{name}: {target}: no id `{fragment}` there"));
            }
        }
    }
    assert!(pages.len() > 20 && checked > 500, "{} pages and {checked} links: did the book build?", pages.len());
    assert!(dead.is_empty(), "dead links in the built book:\n{}", dead.join("\n"));
}
