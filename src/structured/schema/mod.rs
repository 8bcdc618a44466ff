//! JSON Schema validation for `output_schema` (docs/src/structured-output.md), by the `jsonschema`
//! crate.
//!
//! A schema with `$schema` is read as the draft it names (draft-04, -06, -07, 2019-09, 2020-12).
//! One without is read as draft 2020-12 and, when 2020-12 refuses one of the older spellings
//! (array-form `items`, `"$id": "#name"` anchors, boolean `exclusiveMinimum`/`exclusiveMaximum`),
//! as draft-07 and then draft-04. `format` is an annotation in every
//! draft (never asserted). `$ref` follows JSON pointers, `$id`, `$anchor` and `$dynamicRef`
//! inside the same document only: the retriever refuses every other URI, so nothing is ever
//! fetched and a schema whose `$ref` points outside itself is refused when compiled. Regexes run
//! on `fancy-regex` (ECMA-262 classes; look-around and backreferences, with a backtracking
//! limit).
//!
//! [`JsonSchema::compile`] checks the schema against its draft's meta-schema and resolves its
//! refs; [`JsonSchema::errors`] lists every failing instance path with its reason.

mod refusal;

use jsonschema::{Draft, ValidationError};
use serde_json::Value;

/// A compiled JSON Schema.
#[derive(Debug, Clone)]
pub struct JsonSchema {
    validator: jsonschema::Validator,
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

/// Longest message of one [`Invalid`], in characters (a message quotes the failing value).
const MAX_MESSAGE: usize = 300;

impl JsonSchema {
    /// Compiles `schema` (an object or a boolean); an error says where and why it is not valid.
    pub fn compile(schema: &Value) -> Result<JsonSchema, SchemaError> {
        let schema = &sorted_constants(schema);
        let first = match build(schema, None) {
            Ok(validator) => return Ok(JsonSchema { validator }),
            Err(error) => refusal::describe(schema, &error),
        };
        if schema.get("$schema").is_none() && refusal::older_spelling(&first.pointer) {
            for draft in [Draft::Draft7, Draft::Draft4] {
                if let Ok(validator) = build(schema, Some(draft)) {
                    return Ok(JsonSchema { validator });
                }
            }
        }
        Err(first)
    }

    /// Every way `instance` fails the schema; empty when it is valid.
    pub fn errors(&self, instance: &Value) -> Vec<Invalid> {
        let instance = sorted(instance);
        self.validator
            .iter_errors(&instance)
            .map(|error| Invalid { instance_path: error.instance_path().to_string(), message: bounded(error.to_string()) })
            .collect()
    }

    /// Whether `instance` is valid.
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.validator.is_valid(&sorted(instance))
    }
}

/// The validator of `schema` as `draft` (`None`: as its `$schema` says, else 2020-12).
fn build(schema: &Value, draft: Option<Draft>) -> Result<jsonschema::Validator, ValidationError<'static>> {
    let mut options = jsonschema::options().should_validate_formats(false).with_retriever(refusal::NoRemote);
    if let Some(draft) = draft {
        options = options.with_draft(draft);
    }
    options.build(schema)
}

/// `value` with the keys of every object sorted. The crate compares objects (`const`, `enum`,
/// `uniqueItems`) key by key in order, which with serde_json's `preserve_order` would make
/// `{"a":1,"b":2}` differ from `{"b":2,"a":1}`; with both sides sorted it does not.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut map: serde_json::Map<String, Value> = map.iter().map(|(k, v)| (k.clone(), sorted(v))).collect();
            map.sort_keys();
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// `schema` with the values of its `const` and `enum` keywords [`sorted`] (the rest keeps its
/// order, which the messages follow).
fn sorted_constants(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    let value = if key == "const" || key == "enum" { sorted(value) } else { sorted_constants(value) };
                    (key.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(sorted_constants).collect()),
        other => other.clone(),
    }
}

/// `message` cut after [`MAX_MESSAGE`] characters.
fn bounded(message: String) -> String {
    match message.char_indices().nth(MAX_MESSAGE) {
        Some((cut, _)) => format!("{}…", &message[..cut]),
        None => message,
    }
}

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod tests;
