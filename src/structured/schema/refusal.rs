//! Why a schema is refused, said in terms of the schema as written: the `jsonschema` crate's
//! compile error turned into a [`SchemaError`] (where in the schema, and why), and the retriever
//! that refuses every `$ref` outside the document.

use super::SchemaError;
use jsonschema::error::ValidationErrorKind as Kind;
use jsonschema::{ReferencingError, ValidationError};
use serde_json::Value;

/// Keywords whose value maps names to schemas (a property may be called `type`).
const SCHEMA_MAPS: &[&str] = &["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];
/// The names `type` accepts.
const TYPE_NAMES: &[&str] = &["array", "boolean", "integer", "null", "number", "object", "string"];

/// The retriever of `$ref`s outside the schema: it refuses every one, so no schema is fetched
/// (over HTTP, from a file or otherwise).
pub(super) struct NoRemote;

impl jsonschema::Retrieve for NoRemote {
    fn retrieve(&self, uri: &jsonschema::Uri<String>) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("{uri} is outside the schema").into())
    }
}

/// Whether a refusal at `pointer` (under draft 2020-12) may be an older draft's spelling that
/// draft-07 or draft-04 accepts.
pub(super) fn older_spelling(pointer: &str) -> bool {
    let keyword = pointer.rsplit('/').next().unwrap_or_default();
    ["items", "$id", "exclusiveMinimum", "exclusiveMaximum"].contains(&keyword)
}

/// The compile error of `schema` as a [`SchemaError`].
pub(super) fn describe(schema: &Value, error: &ValidationError<'_>) -> SchemaError {
    let at = |pointer: String, reason: String| SchemaError { pointer, reason };
    match error.kind() {
        Kind::Referencing(reference) => unresolved(schema, reference),
        Kind::Format { format } if format == "regex" => {
            let pointer = error.schema_path().to_string();
            let pattern = match schema.pointer(&pointer) {
                Some(Value::String(pattern)) => pattern.clone(),
                _ => unescape(pointer.rsplit('/').next().unwrap_or_default()),
            };
            at(pointer, format!("bad regex {pattern:?}: not a valid ECMA-262 regular expression"))
        }
        _ => {
            let pointer = error.instance_path().to_string();
            at(pointer.clone(), meta_schema_reason(schema, &pointer, error))
        }
    }
}

/// Why the part of the schema at `pointer` fails its draft's meta-schema.
fn meta_schema_reason(schema: &Value, pointer: &str, error: &ValidationError<'_>) -> String {
    let (parent, last) = pointer.rsplit_once('/').unwrap_or_default();
    let named = |p: &str| p.rsplit('/').next().is_some_and(|k| SCHEMA_MAPS.contains(&k));
    let type_pointer = if last == "type" && !named(parent) {
        Some(pointer)
    } else {
        parent.rsplit_once('/').filter(|(grand, key)| *key == "type" && !named(grand)).map(|_| parent)
    };
    if let Some(names) = type_pointer.and_then(|p| schema.pointer(p)) {
        return type_reason(names);
    }
    let branches = match error.kind() {
        Kind::AnyOf { context } | Kind::OneOfNotValid { context } => context.as_slice(),
        _ => &[],
    };
    let details: Vec<String> = branches.iter().filter_map(|branch| branch.first()).map(ToString::to_string).collect();
    let keyword = keyword(pointer).filter(|k| !k.is_empty());
    let prefix = keyword.map(|k| format!("\"{k}\": ")).unwrap_or_default();
    if details.is_empty() { format!("{prefix}{error}") } else { format!("{prefix}{error} ({})", details.join("; or ")) }
}

/// The keyword of the schema at `pointer` whose value is wrong (`/properties/x/minimum`:
/// `minimum`; `/allOf/0`: `allOf`; `/properties/type`: `properties`).
fn keyword(pointer: &str) -> Option<String> {
    let segments: Vec<&str> = pointer.split('/').skip(1).collect();
    let last = segments.iter().rposition(|s| s.parse::<usize>().is_err())?;
    let named = last > 0 && SCHEMA_MAPS.contains(&segments[last - 1]);
    Some(unescape(segments[if named { last - 1 } else { last }]))
}

/// Why `names`, the value of a `type` keyword, is wrong.
fn type_reason(names: &Value) -> String {
    let list: Vec<&Value> = match names {
        Value::Array(names) => names.iter().collect(),
        single => vec![single],
    };
    for name in list {
        match name.as_str() {
            Some(known) if TYPE_NAMES.contains(&known) => {}
            Some(unknown) => return format!("unknown type {unknown:?} (the types are {})", TYPE_NAMES.join(", ")),
            None => return format!("\"type\" must be a type name or an array of them, not {name}"),
        }
    }
    format!("\"type\" must be a type name or an array of distinct ones, not {names}")
}

/// A `$ref` that does not resolve inside the schema: where it is, as written.
fn unresolved(schema: &Value, error: &ReferencingError) -> SchemaError {
    let mut refs = Vec::new();
    references(schema, String::new(), &mut refs);
    let find = |matches: &dyn Fn(&str) -> bool| refs.iter().find(|(_, reference)| matches(reference)).cloned();
    let found = match error {
        ReferencingError::Unretrievable { uri, .. } => {
            let resource = uri.split('#').next().unwrap_or_default();
            find(&|r| r.split('#').next().is_some_and(|path| !path.is_empty() && resource.ends_with(path)))
        }
        ReferencingError::PointerToNowhere { pointer } => find(&|r| r.split_once('#').is_some_and(|(_, f)| f == pointer))
            .or_else(|| find(&|r| r.split_once('#').is_some_and(|(_, f)| f.starts_with('/')))),
        ReferencingError::NoSuchAnchor { anchor } | ReferencingError::InvalidAnchor { anchor } => {
            find(&|r| r.split_once('#').is_some_and(|(_, f)| f == anchor))
        }
        ReferencingError::UnknownSpecification { specification } => {
            let reason = format!(
                "unknown meta-schema {specification:?} (\"$schema\" may name draft-04, -06, -07, 2019-09 or 2020-12; no other is fetched)"
            );
            return SchemaError { pointer: "/$schema".into(), reason };
        }
        _ => None,
    };
    let Some((pointer, reference)) = found else {
        return SchemaError { pointer: String::new(), reason: format!("$ref does not resolve: {error}") };
    };
    let reason = match error {
        ReferencingError::Unretrievable { .. } if has_scheme(&reference) => {
            format!("not supported: remote $ref {reference:?} (only refs inside the schema are followed)")
        }
        ReferencingError::Unretrievable { .. } => {
            format!("$ref does not resolve: {reference:?} (only refs inside the schema are followed)")
        }
        _ => format!("$ref does not resolve: {reference:?}"),
    };
    SchemaError { pointer, reason }
}

/// Every `$ref` and `$dynamicRef` of `schema` with its pointer, in document order.
fn references(schema: &Value, pointer: String, found: &mut Vec<(String, String)>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                let at = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                match value {
                    Value::String(reference) if key == "$ref" || key == "$dynamicRef" => found.push((at, reference.clone())),
                    _ => references(value, at, found),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                references(item, format!("{pointer}/{i}"), found);
            }
        }
        _ => {}
    }
}

/// Whether `reference` starts with a URI scheme (`https:`, `file:`, `urn:` …).
fn has_scheme(reference: &str) -> bool {
    let Some((scheme, _)) = reference.split_once(':') else { return false };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
}

/// A JSON pointer segment unescaped (`~1` → `/`, `~0` → `~`).
fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}
