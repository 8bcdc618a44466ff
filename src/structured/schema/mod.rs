//! dracode's own JSON Schema validator, for `output_schema` (README "Structured output").
//!
//! Draft 2020-12 semantics, also reading draft-07 spellings (`definitions`, array-form `items`
//! with `additionalItems`, `dependencies`, `"$id": "#name"` anchors) and draft-04's boolean
//! `exclusiveMinimum`/`exclusiveMaximum`. Every assertion and applicator keyword of 2020-12 is
//! checked, `unevaluatedProperties`/`unevaluatedItems` included; `format`, `content*`, `title` …
//! are annotations (not asserted, as 2020-12 says by default). `$ref` follows JSON pointers,
//! `$id` and `$anchor` inside the same document; a remote `$ref` is refused when the schema is
//! compiled. `$dynamicRef` is resolved like `$ref` (its static target; no dynamic scope).
//! Regexes: see [`pattern`].
//!
//! [`JsonSchema::compile`] checks the schema (one pass indexes `$id`s and anchors, a second
//! checks every keyword's shape and resolves every `$ref`); [`JsonSchema::errors`] walks a value
//! and lists every failing instance path with its reason.

mod arrays;
mod check;
mod index;
mod objects;
pub mod pattern;
mod uri;
mod validate;
mod values;

use regex::Regex;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// A compiled JSON Schema.
///
/// The document is boxed and never changed: its schema objects are identified by address
/// (where the compile step resolved each `$ref`), so it is not `Clone` (share it in an `Arc`).
#[derive(Debug)]
pub struct JsonSchema {
    root: Box<Value>,
    /// Address of a schema object with `$ref` → JSON pointer of the target in `root`.
    refs: HashMap<usize, String>,
    /// The same for `$dynamicRef`.
    dynamic_refs: HashMap<usize, String>,
    regexes: HashMap<String, Regex>,
}

/// Why a schema is not a valid JSON Schema, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// JSON pointer into the schema of the keyword at fault ("" for the top).
    pub pointer: String,
    /// What is wrong.
    pub reason: String,
}

/// One way a value fails its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// JSON pointer of the failing part of the value ("" for the whole).
    pub instance_path: String,
    /// Why, e.g. `9 is greater than the maximum of 5`.
    pub message: String,
}

impl SchemaError {
    fn at(pointer: &str, reason: String) -> SchemaError {
        SchemaError { pointer: pointer.to_string(), reason }
    }
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() { "/" } else { &self.pointer };
        write!(f, "{} (at {at} in the schema)", self.reason)
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.instance_path.is_empty() { "/" } else { &self.instance_path };
        write!(f, "at {at}: {}", self.message)
    }
}

impl JsonSchema {
    /// Compiles `schema` (an object or a boolean); an error says where and why it is not valid.
    pub fn compile(schema: &Value) -> Result<JsonSchema, SchemaError> {
        let root = Box::new(schema.clone());
        let compiled = check::compile(&root)?;
        Ok(JsonSchema { root, refs: compiled.refs, dynamic_refs: compiled.dynamic_refs, regexes: compiled.regexes })
    }

    /// Every way `instance` fails the schema, in schema order; empty when it is valid.
    pub fn errors(&self, instance: &Value) -> Vec<Invalid> {
        let mut errors = Vec::new();
        validate::Walk::new(self).check(&self.root, instance, &mut errors);
        errors
    }

    /// Whether `instance` is valid.
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.errors(instance).is_empty()
    }
}

/// The identity of a schema object of the (boxed, unchanging) document.
fn address(map: &Map<String, Value>) -> usize {
    std::ptr::from_ref(map) as usize
}

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod differential;
#[cfg(test)]
mod tests;
