//! The manifest reference, `docs/src/reference/manifest.md`, against the binary's own schema
//! (`dracode schema manifest`): every property of every table the schema has is a row of the
//! page's section for that table, and every row names a property the schema has there — so a
//! field added to the code must be documented, and a field removed must leave the page.
//!
//! How the page maps onto the schema, with no list of fields here: a reference section is a
//! heading followed by a `| field | type | default | meaning |` table whose rows begin with the
//! field's name in backticks. The heading's first code span is the table's header as a manifest
//! writes it — `[[tasks]]`, `[tasks.limits]`, `[mcp_servers.NAME.oauth]`, an upper-case part such
//! as `NAME` or `TOOL` standing for any key — and a heading without one is the top level. The
//! header is followed through the schema (`$ref` into `$defs`, `anyOf`/`oneOf`/`allOf` branches,
//! array `items`, `additionalProperties` for an upper-case part) to the object or objects it
//! names, and the section must list exactly their properties. Every object with properties that
//! can be reached from the schema's root must have a section; an object reached on several paths
//! (`[defaults]` and `[[tasks]]` are both a task's fields) needs one.

use crate::support::cli::{crate_root, dracode};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The page, relative to the crate's root.
const PAGE: &str = "docs/src/reference/manifest.md";
/// The header row of a reference table.
const HEADER: [&str; 4] = ["field", "type", "default", "meaning"];

/// The manifest's JSON Schema, as `dracode schema manifest` prints it.
struct Schema {
    root: Value,
}

impl Schema {
    /// The node at JSON pointer `pointer` (`""` is the root).
    fn at(&self, pointer: &str) -> &Value {
        self.root.pointer(pointer).unwrap_or_else(|| panic!("the schema has nothing at {pointer:?}"))
    }

    /// The objects `pointer` stands for: itself when it has `properties` or an
    /// `additionalProperties` schema, the target of its `$ref`, the objects of its
    /// `anyOf`/`oneOf`/`allOf` branches and of its array `items`. Pointers after `$ref`s.
    fn objects(&self, pointer: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_objects(pointer, &mut out, 0);
        out
    }

    fn collect_objects(&self, pointer: &str, out: &mut Vec<String>, depth: usize) {
        assert!(depth < 32, "the schema's $refs and branches at {pointer:?} do not end");
        let node = self.at(pointer);
        if let Some(target) = node.get("$ref").and_then(Value::as_str) {
            let target = target.strip_prefix('#').unwrap_or_else(|| panic!("a $ref outside the schema: {target:?}"));
            self.collect_objects(target, out, depth + 1);
        }
        let is_container =
            node.get("properties").is_some_and(Value::is_object) || node.get("additionalProperties").is_some_and(Value::is_object);
        if is_container && !out.iter().any(|p| p == pointer) {
            out.push(pointer.to_string());
        }
        for keyword in ["anyOf", "oneOf", "allOf"] {
            for i in 0..node.get(keyword).and_then(Value::as_array).map_or(0, Vec::len) {
                self.collect_objects(&format!("{pointer}/{keyword}/{i}"), out, depth + 1);
            }
        }
        if node.get("items").is_some_and(Value::is_object) {
            self.collect_objects(&format!("{pointer}/items"), out, depth + 1);
        }
    }

    /// The property names of the object at `pointer` (none for a map such as `env`).
    fn properties(&self, pointer: &str) -> BTreeSet<String> {
        self.at(pointer).get("properties").and_then(Value::as_object).map(|p| p.keys().cloned().collect()).unwrap_or_default()
    }

    /// The objects below the object at `pointer`, each with the key that leads to it (`NAME` for
    /// an `additionalProperties` schema).
    fn children(&self, pointer: &str) -> Vec<(String, String)> {
        let node = self.at(pointer);
        let mut out = Vec::new();
        for key in self.properties(pointer) {
            for child in self.objects(&format!("{pointer}/properties/{}", escape(&key))) {
                out.push((key.clone(), child));
            }
        }
        if node.get("additionalProperties").is_some_and(Value::is_object) {
            for child in self.objects(&format!("{pointer}/additionalProperties")) {
                out.push(("NAME".to_string(), child));
            }
        }
        out
    }

    /// Every object with properties reachable from the root, with the first path to it
    /// (`tasks.limits`; empty for the root), in breadth-first order.
    fn tables(&self) -> Vec<(String, String)> {
        let mut seen = BTreeSet::new();
        let mut queue: VecDeque<(String, String)> = self.objects("").into_iter().map(|p| (p, String::new())).collect();
        let mut tables = Vec::new();
        while let Some((pointer, path)) = queue.pop_front() {
            if !seen.insert(pointer.clone()) {
                continue;
            }
            if !self.properties(&pointer).is_empty() {
                tables.push((pointer.clone(), path.clone()));
            }
            for (key, child) in self.children(&pointer) {
                let child_path = if path.is_empty() { key } else { format!("{path}.{key}") };
                queue.push_back((child, child_path));
            }
        }
        tables
    }

    /// The objects with properties a table header's keys lead to (`["tasks", "limits"]`); an
    /// upper-case key is any key (`additionalProperties`). `Err` says where the path leaves the schema.
    fn resolve(&self, keys: &[String]) -> Result<Vec<String>, String> {
        let mut current = self.objects("");
        for (i, key) in keys.iter().enumerate() {
            let any_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_uppercase() || c == '_');
            let mut next = Vec::new();
            for pointer in &current {
                let node = self.at(pointer);
                let child = if any_key {
                    node.get("additionalProperties").filter(|a| a.is_object()).map(|_| format!("{pointer}/additionalProperties"))
                } else {
                    node.get("properties").and_then(|p| p.get(key)).map(|_| format!("{pointer}/properties/{}", escape(key)))
                };
                for object in child.map(|c| self.objects(&c)).unwrap_or_default() {
                    if !next.contains(&object) {
                        next.push(object);
                    }
                }
            }
            if next.is_empty() {
                return Err(format!("the schema has no table at `{}`", keys[..=i].join(".")));
            }
            current = next;
        }
        current.retain(|p| !self.properties(p).is_empty());
        if current.is_empty() { Err(format!("the schema's `{}` has no fields of its own", keys.join("."))) } else { Ok(current) }
    }
}

/// A key as a JSON pointer writes it.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// One reference section of the page: its heading, the table it documents and its rows.
struct Section {
    heading: String,
    /// The header as the heading writes it (`[[tasks]]`; empty for the top level).
    header: String,
    /// Its keys (`["tasks", "limits"]`; empty for the top level).
    keys: Vec<String>,
    /// Each field cell's name, with its line number.
    fields: Vec<(String, usize)>,
}

impl Section {
    /// The section as the messages name it: its table header, or "the top level".
    fn name(&self) -> String {
        if self.keys.is_empty() { format!("\"{}\" (the top level)", self.heading) } else { format!("`{}`", self.header) }
    }
}

/// The keys of a heading's table header: `[[tasks]]` and `[tasks]` are `["tasks"]`, no code span
/// is the top level; `Err` for a code span that is no table header.
fn header_keys(heading: &str) -> Result<Vec<String>, String> {
    let Some(span) = heading.split('`').nth(1) else { return Ok(Vec::new()) };
    let inner = span.trim().trim_start_matches('[').trim_end_matches(']');
    if !span.trim().starts_with('[') || inner.is_empty() || inner.len() + 2 > span.trim().len() {
        return Err(format!("the heading {heading:?} of a reference table must name it as a table header, such as `[tasks.limits]`"));
    }
    Ok(inner.split('.').map(|k| k.trim().to_string()).collect())
}

/// The cells of a table row (`| a | b |`), trimmed; pipes inside code spans are not cell borders.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    let (mut out, mut cell, mut in_code) = (Vec::new(), String::new(), false);
    for c in inner.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                cell.push(c);
            }
            '|' if !in_code => out.push(std::mem::take(&mut cell).trim().to_string()),
            _ => cell.push(c),
        }
    }
    out.push(cell.trim().to_string());
    out
}

/// The reference sections of `page`; problems (a malformed row or heading) go to `problems`.
fn sections(page: &str, problems: &mut Vec<String>) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let (mut heading, mut in_fence, mut in_table) = (String::new(), false, false);
    for (i, line) in page.lines().enumerate() {
        let number = i + 1;
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        if line.starts_with('#') {
            heading = line.trim_start_matches('#').trim().to_string();
            in_table = false;
            continue;
        }
        if !line.trim_start().starts_with('|') {
            in_table = false;
            continue;
        }
        let row = cells(line);
        if row.iter().map(String::as_str).eq(HEADER) {
            match header_keys(&heading) {
                Ok(keys) => {
                    let header = heading.split('`').nth(1).unwrap_or_default().trim().to_string();
                    out.push(Section { heading: heading.clone(), header, keys, fields: Vec::new() });
                }
                Err(e) => problems.push(format!("{PAGE}:{number}: {e}")),
            }
            in_table = true;
            continue;
        }
        if !in_table || row.iter().all(|c| c.chars().all(|c| matches!(c, '-' | ':' | ' '))) {
            continue;
        }
        let Some(section) = out.last_mut() else { continue };
        let first = &row[0];
        let name = first.strip_prefix('`').and_then(|f| f.strip_suffix('`')).filter(|n| !n.is_empty() && !n.contains('`'));
        match name {
            Some(name) => section.fields.push((name.to_string(), number)),
            None => problems.push(format!(
                "{PAGE}:{number}: in {}, a row whose first cell is not a field name in backticks: {first:?}",
                section.name()
            )),
        }
    }
    out
}

/// Every problem of `page` against `schema`, one line each.
fn drift(schema: &Schema, page: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let sections = sections(page, &mut problems);
    let mut covered: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for section in &sections {
        let objects = match schema.resolve(&section.keys) {
            Ok(objects) => objects,
            Err(e) => {
                problems.push(format!("{PAGE}: section {}: {e}", section.name()));
                continue;
            }
        };
        let expected: BTreeSet<String> = objects.iter().flat_map(|p| schema.properties(p)).collect();
        for pointer in &objects {
            covered.entry(pointer.clone()).or_default().push(section.name());
        }
        let mut listed = BTreeSet::new();
        for (field, line) in &section.fields {
            if !listed.insert(field.as_str()) {
                problems.push(format!("{PAGE}:{line}: section {} lists field `{field}` twice", section.name()));
            } else if !expected.contains(field) {
                problems.push(format!(
                    "{PAGE}:{line}: section {} has a row for `{field}`, but the schema has no such field there (it has: {})",
                    section.name(),
                    expected.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
                ));
            }
        }
        for field in expected.iter().filter(|f| !listed.contains(f.as_str())) {
            problems.push(format!("{PAGE}: section {} has no row for the schema's field `{field}`", section.name()));
        }
    }
    for (pointer, path) in schema.tables() {
        if covered.contains_key(&pointer) {
            continue;
        }
        let table = if path.is_empty() { "the top level".to_string() } else { format!("`[{path}]`") };
        for field in schema.properties(&pointer) {
            problems
                .push(format!("{PAGE}: the schema's field `{field}` of {table} (#{pointer}) has no row: no section documents that table"));
        }
    }
    problems
}

#[test]
fn the_manifest_reference_lists_every_field_of_the_schema_and_no_other() {
    let tmp = tempfile::tempdir().unwrap();
    let out = dracode(tmp.path()).args(["schema", "manifest"]).assert().success().get_output().stdout.clone();
    let schema = Schema { root: serde_json::from_slice(&out).expect("`dracode schema manifest` prints JSON") };
    let page = std::fs::read_to_string(crate_root().join(PAGE)).unwrap_or_else(|e| panic!("{PAGE}: {e}"));
    let problems = drift(&schema, &page);
    assert!(
        problems.is_empty(),
        "the manifest reference has drifted from `dracode schema manifest` ({} problems):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_manifest_reference_links_to_pages_and_headings_that_exist() {
    let page_path = crate_root().join(PAGE);
    let page = std::fs::read_to_string(&page_path).unwrap();
    let dir = page_path.parent().unwrap();
    let mut broken = Vec::new();
    // The links and mdBook's heading ids as the other documentation tests read them.
    for (line, target) in crate::support::docs::links(&page) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = target.split_once('#').map_or((target.as_str(), None), |(f, a)| (f, Some(a)));
        let text = if file.is_empty() { Some(page.clone()) } else { std::fs::read_to_string(dir.join(file)).ok() };
        match (text, anchor) {
            (None, _) => broken.push(format!("{PAGE}:{line}: {target}: no such page")),
            (Some(text), Some(anchor)) if !crate::support::docs::anchors(&text).iter().any(|a| a == anchor) => {
                broken.push(format!("{PAGE}:{line}: {target}: no heading or anchor `{anchor}` there"));
            }
            _ => {}
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_check_follows_refs_branches_and_maps_and_names_what_drifted() {
    let schema = Schema {
        root: serde_json::json!({
            "type": "object",
            "properties": {
                "jobs": { "type": "array", "items": { "$ref": "#/$defs/Job" } },
                "servers": { "type": "object", "additionalProperties": { "$ref": "#/$defs/Server" } }
            },
            "$defs": {
                "Job": { "type": "object", "properties": {
                    "id": { "type": "string" },
                    "net": { "anyOf": [{ "type": "boolean" }, { "type": "object", "properties": { "allow": {}, "deny": {} } }] }
                } },
                "Server": { "type": "object", "properties": { "url": { "type": ["string", "null"] } } }
            }
        }),
    };
    let page = "# T\n\n```toml\n# [[jobs]]\n```\n\n## Top level\n\n| field | type | default | meaning |\n|---|---|---|---|\n\
        | `jobs` | a | b | c |\n| `servers` | a | b | c \\| d |\n\n## `[[jobs]]`\n\n| field | type | default | meaning |\n|---|---|---|---|\n\
        | `id` | a | b | `x | y` |\n| `net` | a | b | c |\n\n## `[jobs.net]`\n\n| field | type | default | meaning |\n|---|---|---|---|\n\
        | `allow` | a | b | c |\n| `deny` | a | b | c |\n\n## `[servers.NAME]`\n\n| field | type | default | meaning |\n|---|---|---|---|\n\
        | `url` | a | b | c |\n";
    assert_eq!(drift(&schema, page), Vec::<String>::new());
    let without_deny = page.replace("| `deny` | a | b | c |\n", "");
    let problems = drift(&schema, &without_deny);
    assert!(problems.len() == 1 && problems[0].contains("`[jobs.net]`") && problems[0].contains("`deny`"), "{problems:?}");
    let extra = page.replace("| `url` |", "| `url` | a | b | c |\n| `token` |");
    let problems = drift(&schema, &extra);
    assert!(problems.len() == 1 && problems[0].contains("`[servers.NAME]`") && problems[0].contains("`token`"), "{problems:?}");
    let no_servers = page.split("## `[servers.NAME]`").next().unwrap().to_string();
    let problems = drift(&schema, &no_servers);
    assert!(problems.len() == 1 && problems[0].contains("`url` of `[servers.NAME]`"), "{problems:?}");
}
