//! The command-line reference (`docs/src/reference/cli.md`) checked against the binary, both
//! ways: every subcommand `--help` lists (groups such as `auth` and `mcp` too, recursively) has
//! its `## dracode …` section, and every long flag of its `Options:` is named in that section;
//! every `## dracode …` heading names a real subcommand, and every flag a section's table
//! documents exists on that command. Nothing is listed here: the commands and flags are read from
//! `dracode --help`, so a flag added, renamed or removed without the page fails this test.

use crate::support::cli::{crate_root, dracode};
use std::collections::{BTreeMap, BTreeSet};

/// The page, relative to the crate's root.
const PAGE: &str = "docs/src/reference/cli.md";

/// A subcommand as `--help` shows it.
#[derive(Debug)]
struct Subcommand {
    /// Its long flags (`--out`, …), without `--help` and `--version`.
    flags: BTreeSet<String>,
    /// The help that listed it (`dracode mcp --help`), for the messages.
    listed_by: String,
}

/// `dracode ARGS… --help`'s stdout; panics with stderr when it fails.
fn help(args: &[String]) -> String {
    let out = dracode(&crate_root()).args(args).arg("--help").output().unwrap();
    assert!(out.status.success(), "dracode {} --help failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The lines of `help`'s section `name` (`Commands:`, `Options:`): from its heading to the next
/// line that is not indented (the next heading, or the free text after the options).
fn section<'a>(help: &'a str, name: &str) -> Vec<&'a str> {
    let mut lines = help.lines().skip_while(|l| *l != name);
    lines.next();
    lines.take_while(|l| l.is_empty() || l.starts_with(' ')).collect()
}

/// The subcommands a `Commands:` block lists: lines indented exactly two spaces whose first word
/// is followed by at least two spaces (clap indents a description's continuation further), but
/// clap's own `help`.
fn commands(help: &str) -> Vec<String> {
    section(help, "Commands:")
        .into_iter()
        .filter_map(|line| {
            let rest = line.strip_prefix("  ").filter(|r| !r.starts_with(' '))?;
            let (word, after) = rest.split_once(' ')?;
            after.starts_with(' ').then(|| word.to_string())
        })
        .filter(|word| word != "help")
        .collect()
}

/// The long flags of an `Options:` block. A flag line is indented 2 (`-q, --quiet`) or 6 (a flag
/// with no short form) spaces; its description follows on the same line (clap's compact layout)
/// or on the lines after it, indented further (the long layout, which also lists possible values
/// as `- value:` lines: indented 10, so never taken for a flag). Only the flag that opens the
/// line counts, not one its description mentions.
fn flags(help: &str) -> BTreeSet<String> {
    section(help, "Options:")
        .into_iter()
        .filter_map(|line| {
            let indent = line.len() - line.trim_start().len();
            let rest = line.trim_start();
            if !(2..=6).contains(&indent) || !rest.starts_with('-') {
                return None;
            }
            // `-q, --quiet`: past the short form.
            let rest = match rest.split_once(", ") {
                Some((short, long)) if !short.starts_with("--") => long,
                _ => rest,
            };
            let name: String = rest.strip_prefix("--")?.chars().take_while(|c| is_identifier(*c)).collect();
            (!name.is_empty()).then(|| format!("--{name}"))
        })
        .filter(|flag| flag != "--help" && flag != "--version")
        .collect()
}

/// Every subcommand of the binary, leaves and groups, by name (`auth copilot`), read from
/// `dracode --help` recursively.
fn subcommands() -> BTreeMap<String, Subcommand> {
    fn walk(path: &[String], all: &mut BTreeMap<String, Subcommand>) {
        let text = help(path);
        let parent = if path.is_empty() { "dracode --help".to_string() } else { format!("dracode {} --help", path.join(" ")) };
        for name in commands(&text) {
            let mut child = path.to_vec();
            child.push(name);
            let child_help = help(&child);
            all.insert(child.join(" "), Subcommand { flags: flags(&child_help), listed_by: parent.clone() });
            if !commands(&child_help).is_empty() {
                walk(&child, all);
            }
        }
    }
    let mut all = BTreeMap::new();
    walk(&[], &mut all);
    // A parser that finds nothing would make every check below pass.
    assert!(all.len() > 1, "found no subcommands in `dracode --help`: has clap's layout changed?");
    assert!(all.values().any(|c| !c.flags.is_empty()), "found no flags in any `--help`: has clap's layout changed?");
    assert!(all.keys().any(|name| name.contains(' ')), "found no nested subcommands: has clap's layout changed?");
    all
}

/// A character of a flag's name: after `--out`, anything else ends it.
fn is_identifier(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// The page's `## dracode NAME` sections, by NAME (`mcp login`): the text from the heading to
/// the next `#`/`##` heading (a `###` inside belongs to it). Headings inside code blocks are
/// not headings.
fn page_sections(page: &str) -> BTreeMap<String, String> {
    let mut sections = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    let mut in_code = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        let heading = !in_code && (line.starts_with("# ") || line.starts_with("## "));
        if heading {
            if let Some((name, body)) = current.take() {
                sections.insert(name, body);
            }
            if let Some(name) = line.strip_prefix("## dracode ") {
                current = Some((name.trim().to_string(), String::new()));
            }
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((name, body)) = current {
        sections.insert(name, body);
    }
    sections
}

/// Whether `text` names `flag`: `--flag` not followed (nor preceded) by a character of a
/// name, so `--cache` is not found in `--cache-dir` (nor `--no-cache`).
fn mentions(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + flag.len()..].chars().next();
        !before.is_some_and(is_identifier) && !after.is_some_and(is_identifier)
    })
}

/// The flags a section documents. Scope: only the first cell of its tables' rows (the flag
/// column: `` | `--out DIR` | … | ``, `` | `-q`, `--quiet` | … | ``), so that prose, which may
/// name another command's flag (`as run --shard`), never trips the check; the overview table
/// above the first section is in no section. A row that says it needs the cargo feature `otel`
/// is left out when this test was built without it.
fn documented_flags(body: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for row in body.lines().filter(|l| l.starts_with('|')) {
        if !cfg!(feature = "otel") && row.contains("feature `otel`") {
            continue;
        }
        // `\|` is a `|` inside a cell (`--format text\|json`), not a cell's end.
        let row = row.replace("\\|", "/");
        let first_cell = row.trim_start_matches('|').split('|').next().unwrap_or_default();
        for (at, _) in first_cell.match_indices("--") {
            if first_cell[..at].chars().next_back().is_some_and(is_identifier) {
                continue;
            }
            let name: String = first_cell[at + 2..].chars().take_while(|c| is_identifier(*c)).collect();
            // A name starts with a letter or digit: `|---|` is a table's rule, not a flag.
            if name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
                found.insert(format!("--{name}"));
            }
        }
    }
    found.retain(|f| f != "--help" && f != "--version");
    found
}

fn page() -> String {
    std::fs::read_to_string(crate_root().join(PAGE)).unwrap_or_else(|e| panic!("{PAGE}: {e}"))
}

#[test]
fn every_subcommand_has_a_section() {
    let sections = page_sections(&page());
    let missing: Vec<String> = subcommands()
        .iter()
        .filter(|(name, _)| !sections.contains_key(*name))
        .map(|(name, command)| format!("`## dracode {name}` (listed by `{}`)", command.listed_by))
        .collect();
    assert!(missing.is_empty(), "{PAGE} has no section for these subcommands:\n  {}", missing.join("\n  "));
}

#[test]
fn every_flag_is_named_in_its_commands_section() {
    let sections = page_sections(&page());
    let mut missing = Vec::new();
    for (name, command) in subcommands() {
        let Some(body) = sections.get(&name) else { continue }; // every_subcommand_has_a_section says so
        for flag in command.flags.iter().filter(|f| !mentions(body, f)) {
            missing.push(format!("`{flag}` (in `dracode {name} --help`) is not named in `## dracode {name}`"));
        }
    }
    assert!(missing.is_empty(), "{PAGE} leaves out flags:\n  {}", missing.join("\n  "));
}

#[test]
fn every_documented_command_and_flag_exists() {
    let commands = subcommands();
    let mut unknown = Vec::new();
    for (name, body) in page_sections(&page()) {
        let Some(command) = commands.get(&name) else {
            unknown.push(format!("`## dracode {name}`: no such subcommand in `dracode --help`"));
            continue;
        };
        for flag in documented_flags(&body).difference(&command.flags) {
            unknown.push(format!("`## dracode {name}` documents `{flag}`, which `dracode {name} --help` does not list"));
        }
    }
    assert!(unknown.is_empty(), "{PAGE} documents what the binary does not have:\n  {}", unknown.join("\n  "));
}
