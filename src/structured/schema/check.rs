//! The second pass over a schema, its compile step: every keyword has the right shape, every
//! regex compiles, every `$ref` resolves (to a JSON pointer into the document).

use super::index::{self, Index};
use super::uri;
use super::{SchemaError, address, pattern};
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// The names `type` accepts.
pub(super) const TYPE_NAMES: &[&str] = &["array", "boolean", "integer", "null", "number", "object", "string"];

/// What the compile step found, for validation.
#[derive(Debug, Default)]
pub(super) struct Compiled {
    /// Address of a schema object with `$ref` → pointer of the target.
    pub refs: HashMap<usize, String>,
    /// Address of a schema object with `$dynamicRef` → pointer of the target.
    pub dynamic_refs: HashMap<usize, String>,
    /// Each `pattern` and `patternProperties` key, compiled.
    pub regexes: HashMap<String, Regex>,
}

/// Checks the document `root`; an error names where and why it is not a valid schema.
pub(super) fn compile(root: &Value) -> Result<Compiled, SchemaError> {
    let mut checker =
        Checker { index: Index::build(root), root, compiled: Compiled::default(), visited: HashSet::new(), pending: Vec::new() };
    checker.schema(root, "", index::DEFAULT_BASE)?;
    while let Some((pointer, base)) = checker.pending.pop() {
        if let Some(target) = root.pointer(&pointer) {
            checker.schema(target, &pointer, &base)?;
        }
    }
    Ok(checker.compiled)
}

struct Checker<'r> {
    index: Index,
    root: &'r Value,
    compiled: Compiled,
    /// Schema objects already checked (by address).
    visited: HashSet<usize>,
    /// Targets of `$ref`s still to check, with their base URI (they may lie outside every
    /// known subschema, as `#/properties/a/x-unknown` does).
    pending: Vec<(String, String)>,
}

impl Checker<'_> {
    fn schema(&mut self, schema: &Value, pointer: &str, base: &str) -> Result<(), SchemaError> {
        let map = match schema {
            Value::Bool(_) => return Ok(()),
            Value::Object(map) => map,
            other => return Err(SchemaError::at(pointer, format!("a schema must be an object or a boolean, not {}", describe(other)))),
        };
        if !self.visited.insert(address(map)) {
            return Ok(());
        }
        let base = index::rebase(map, base);
        for (key, value) in map {
            self.keyword(map, key, value, &format!("{pointer}/{}", uri::escape(key)), &base)?;
        }
        for (relative, subschema) in index::subschemas(map) {
            self.schema(subschema, &format!("{pointer}/{relative}"), &base)?;
        }
        Ok(())
    }

    fn keyword(&mut self, map: &Map<String, Value>, key: &str, value: &Value, at: &str, base: &str) -> Result<(), SchemaError> {
        let wrong = |expected: &str| Err(SchemaError::at(at, format!("\"{key}\" must be {expected}, not {}", describe(value))));
        match key {
            "type" => check_type(value, at),
            "enum" if !value.is_array() => wrong("an array"),
            "required" if !is_string_array(value) => wrong("an array of strings"),
            "dependentRequired" if !value.as_object().is_some_and(|m| m.values().all(is_string_array)) => {
                wrong("an object whose values are arrays of strings")
            }
            "dependencies" if !value.as_object().is_some_and(|m| m.values().all(|v| is_string_array(v) || is_schema(v))) => {
                wrong("an object whose values are arrays of strings or schemas")
            }
            "properties" | "$defs" | "definitions" | "dependentSchemas" if !value.is_object() => wrong("an object of schemas"),
            "patternProperties" => self.patterns_keys(value, at),
            "allOf" | "anyOf" | "oneOf" | "prefixItems" if value.as_array().is_none_or(Vec::is_empty) => {
                wrong("a non-empty array of schemas")
            }
            "items" if !(is_schema(value) || value.is_array()) => wrong("a schema or an array of schemas"),
            "maxLength" | "minLength" | "maxItems" | "minItems" | "maxProperties" | "minProperties" | "minContains" | "maxContains"
                if count(value).is_none() =>
            {
                wrong("a non-negative integer")
            }
            "minimum" | "maximum" if !value.is_number() => wrong("a number"),
            "exclusiveMinimum" | "exclusiveMaximum" if !(value.is_number() || value.is_boolean()) => wrong("a number"),
            "multipleOf" if !value.as_f64().is_some_and(|m| m > 0.0) => wrong("a number greater than 0"),
            "uniqueItems" if !value.is_boolean() => wrong("a boolean"),
            "$id" | "$anchor" | "$dynamicAnchor" | "$schema" | "format" | "$ref" | "$dynamicRef" if !value.is_string() => wrong("a string"),
            "pattern" if !value.is_string() => wrong("a string"),
            "pattern" => self.regex(value.as_str().unwrap_or_default(), at),
            "$ref" | "$dynamicRef" => self.reference(map, key, value.as_str().unwrap_or_default(), at, base),
            _ => Ok(()),
        }
    }

    fn patterns_keys(&mut self, value: &Value, at: &str) -> Result<(), SchemaError> {
        let Some(patterns) = value.as_object() else {
            return Err(SchemaError::at(at, format!("\"patternProperties\" must be an object of schemas, not {}", describe(value))));
        };
        patterns.keys().try_for_each(|p| self.regex(p, &format!("{at}/{}", uri::escape(p))))
    }

    fn regex(&mut self, source: &str, at: &str) -> Result<(), SchemaError> {
        if !self.compiled.regexes.contains_key(source) {
            let regex = pattern::compile(source).map_err(|e| SchemaError::at(at, format!("bad regex {source:?}: {e}")))?;
            self.compiled.regexes.insert(source.to_string(), regex);
        }
        Ok(())
    }

    fn reference(&mut self, map: &Map<String, Value>, key: &str, reference: &str, at: &str, base: &str) -> Result<(), SchemaError> {
        let absolute = uri::resolve(base, reference);
        let (resource, fragment) = uri::split_fragment(&absolute);
        let fragment = fragment.unwrap_or_default();
        let Some(resource_pointer) = self.index.resources.get(resource) else {
            let remote = ["http:", "https:", "ftp:", "file:"].iter().any(|s| resource.starts_with(s));
            let why = if remote { "not supported: remote $ref" } else { "$ref does not resolve:" };
            return Err(SchemaError::at(at, format!("{why} {reference:?} (only refs inside the schema are followed)")));
        };
        let target = if fragment.is_empty() || fragment.starts_with('/') {
            Some(format!("{resource_pointer}{}", percent_encoding::percent_decode_str(fragment).decode_utf8_lossy()))
        } else {
            self.index.anchors.get(&absolute).cloned()
        };
        let Some(target) = target.filter(|t| self.root.pointer(t).is_some()) else {
            return Err(SchemaError::at(at, format!("$ref does not resolve: {reference:?}")));
        };
        self.pending.push((target.clone(), resource.to_string()));
        let table = if key == "$ref" { &mut self.compiled.refs } else { &mut self.compiled.dynamic_refs };
        table.insert(address(map), target);
        Ok(())
    }
}

fn check_type(value: &Value, at: &str) -> Result<(), SchemaError> {
    let names: Vec<&Value> = match value {
        Value::Array(names) => names.iter().collect(),
        single => vec![single],
    };
    for name in names {
        match name.as_str() {
            Some(known) if TYPE_NAMES.contains(&known) => {}
            Some(unknown) => {
                return Err(SchemaError::at(at, format!("unknown type {unknown:?} (the types are {})", TYPE_NAMES.join(", "))));
            }
            None => return Err(SchemaError::at(at, format!("\"type\" must be a type name or an array of them, not {}", describe(name)))),
        }
    }
    Ok(())
}

/// A non-negative integer (`2.0` too), as a count.
pub(super) fn count(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| value.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1e19).map(|f| f as u64))
}

fn is_string_array(value: &Value) -> bool {
    value.as_array().is_some_and(|a| a.iter().all(Value::is_string))
}

fn is_schema(value: &Value) -> bool {
    value.is_object() || value.is_boolean()
}

/// `value` shown in a message about the schema: its type, and the value when short.
fn describe(value: &Value) -> String {
    let text = value.to_string();
    let kind = match value {
        Value::Null => return "null".into(),
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    if text.chars().count() <= 40 { format!("{kind} ({text})") } else { kind.to_string() }
}
