//! The events reference (`docs/src/reference/output.md`, "Every event's fields") cannot drift
//! from the binary: every event type of `dracode schema events`, every field of each, and every
//! object an event holds has its section and rows there — and every section and row there names
//! something the schema has. Fields shared by every event (the envelope) are one table of their own.

use crate::support::cli::{crate_root, dracode};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The schema's sections: `""` for the envelope, each event type, each object of `$defs`; each
/// with its field names.
fn schema_sections() -> BTreeMap<String, BTreeSet<String>> {
    let out = dracode(&crate_root()).args(["schema", "events"]).output().unwrap();
    assert!(out.status.success(), "dracode schema events failed");
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys = |v: &Value| -> BTreeSet<String> { v["properties"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default() };
    let events = schema["oneOf"].as_array().expect("the events schema is a oneOf of event types");
    let envelope = events.iter().map(keys).reduce(|a, b| a.intersection(&b).cloned().collect()).unwrap();
    let mut sections = BTreeMap::from([(String::new(), envelope.clone())]);
    for event in events {
        let name = event["properties"]["type"]["const"].as_str().expect("each event type's `type` is a const").to_string();
        sections.insert(name, keys(event).difference(&envelope).cloned().collect());
    }
    for (name, def) in schema["$defs"].as_object().unwrap() {
        if def["properties"].is_object() {
            sections.insert(name.clone(), keys(def));
        }
    }
    sections
}

/// The page's sections from "Every event's fields" on: `""` for the table before the first
/// `###`, then each `### name` (backticks dropped) with the first cells of its table's rows, and
/// the line of each row.
fn page_sections(page: &str) -> BTreeMap<String, BTreeMap<String, usize>> {
    let start = page.find("## Every event's fields").expect("output.md has a section \"Every event's fields\"");
    let first_line = page[..start].lines().count();
    let mut sections: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::from([(String::new(), BTreeMap::new())]);
    let mut current = String::new();
    for (i, line) in page[start..].lines().enumerate() {
        if let Some(heading) = line.strip_prefix("### ") {
            current = heading.trim().trim_matches('`').to_string();
            let fresh = sections.insert(current.clone(), BTreeMap::new()).is_none();
            assert!(fresh, "output.md:{}: a second section `{current}`", first_line + i + 1);
        } else if let Some(cell) = line.strip_prefix("| `").and_then(|rest| rest.split_once('`')) {
            let rows = sections.get_mut(&current).unwrap();
            let fresh = rows.insert(cell.0.to_string(), first_line + i + 1).is_none();
            assert!(fresh, "output.md:{}: `{}` twice in section `{current}`", first_line + i + 1, cell.0);
        }
    }
    sections
}

#[test]
fn every_event_field_and_object_of_the_schema_is_in_the_events_reference_and_nothing_else() {
    let schema = schema_sections();
    assert!(schema.len() > 20 && schema.contains_key("task.finished"), "the schema walk found {} sections", schema.len());
    let page = std::fs::read_to_string(crate_root().join("docs/src/reference/output.md")).unwrap();
    let documented = page_sections(&page);
    let label = |s: &str| if s.is_empty() { "the envelope".to_string() } else { format!("`{s}`") };
    let mut problems = Vec::new();
    for (section, fields) in &schema {
        let Some(rows) = documented.get(section) else {
            problems.push(format!("no section for {} (`### {section}`)", label(section)));
            continue;
        };
        for field in fields.iter().filter(|f| !rows.contains_key(*f)) {
            problems.push(format!("{}: no row for the schema's field `{field}`", label(section)));
        }
        for (field, line) in rows.iter().filter(|(f, _)| !fields.contains(*f)) {
            problems.push(format!("output.md:{line}: {} has a row for `{field}`, which the schema does not have there", label(section)));
        }
    }
    for section in documented.keys().filter(|s| !schema.contains_key(*s)) {
        problems.push(format!("output.md: a section `{section}`, which is neither an event type nor an object of the schema"));
    }
    assert!(problems.is_empty(), "the events reference has drifted from `dracode schema events`:\n{}", problems.join("\n"));
}
