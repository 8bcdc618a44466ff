//! Where a schema's subschemas are, and the first pass over them: the resources (`$id`) and
//! anchors (`$anchor`, `$dynamicAnchor`, draft-07's `"$id": "#name"`) a `$ref` can name.

use super::uri;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The base URI of a schema without `$id`: not fetchable, so only refs inside it resolve.
pub(super) const DEFAULT_BASE: &str = "dracode:/schema.json";

/// Keywords whose value is one schema.
const ONE_SCHEMA: &[&str] = &[
    "additionalProperties",
    "propertyNames",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
    "items",
];
/// Keywords whose value is an array of schemas (`items` too, in draft-07's array form).
const SCHEMA_ARRAYS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value is an object of schemas (`dependencies` too, where a value is not an array).
const SCHEMA_MAPS: &[&str] = &["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];

/// The subschemas right under a schema object, each with its pointer relative to it
/// (`properties/a`, `allOf/0`).
pub(super) fn subschemas(map: &Map<String, Value>) -> Vec<(String, &Value)> {
    let mut found = Vec::new();
    for (key, value) in map {
        let keyword = key.as_str();
        match value {
            Value::Array(schemas) if SCHEMA_ARRAYS.contains(&keyword) => {
                found.extend(schemas.iter().enumerate().map(|(i, s)| (format!("{keyword}/{i}"), s)));
            }
            Value::Object(schemas) if SCHEMA_MAPS.contains(&keyword) => {
                let entries = schemas.iter().filter(|(_, s)| !(keyword == "dependencies" && s.is_array()));
                found.extend(entries.map(|(name, s)| (format!("{}/{}", uri::escape(keyword), uri::escape(name)), s)));
            }
            _ if ONE_SCHEMA.contains(&keyword) => found.push((keyword.to_string(), value)),
            _ => {}
        }
    }
    found
}

/// The base URI inside a schema object: its `$id` resolved against the outer base.
pub(super) fn rebase(map: &Map<String, Value>, base: &str) -> String {
    match map.get("$id").and_then(Value::as_str) {
        Some(id) if !id.starts_with('#') => uri::split_fragment(&uri::resolve(base, id)).0.to_string(),
        _ => base.to_string(),
    }
}

/// Every resource and anchor of a schema document, by absolute URI, as JSON pointers into it.
#[derive(Debug, Default)]
pub(super) struct Index {
    /// Absolute URI (no fragment) → pointer of the schema with that `$id` (the root: "").
    pub resources: HashMap<String, String>,
    /// `URI#name` → pointer of the schema with that anchor.
    pub anchors: HashMap<String, String>,
}

impl Index {
    /// The index of the document `root`.
    pub fn build(root: &Value) -> Index {
        let mut index = Index::default();
        index.resources.insert(DEFAULT_BASE.to_string(), String::new());
        index.visit(root, String::new(), DEFAULT_BASE);
        index
    }

    fn visit(&mut self, schema: &Value, pointer: String, base: &str) {
        let Some(map) = schema.as_object() else { return };
        let base = rebase(map, base);
        if map.contains_key("$id") || pointer.is_empty() {
            self.resources.entry(base.clone()).or_insert_with(|| pointer.clone());
        }
        let draft7_anchor = map.get("$id").and_then(Value::as_str).and_then(|id| id.strip_prefix('#'));
        let anchors = ["$anchor", "$dynamicAnchor"].map(|k| map.get(k).and_then(Value::as_str));
        for name in anchors.into_iter().chain([draft7_anchor]).flatten() {
            self.anchors.entry(format!("{base}#{name}")).or_insert_with(|| pointer.clone());
        }
        for (relative, subschema) in subschemas(map) {
            self.visit(subschema, format!("{pointer}/{relative}"), &base);
        }
    }
}
