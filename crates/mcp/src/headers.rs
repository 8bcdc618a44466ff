//! The request headers the current revision's streamable HTTP mirrors from the body: `Mcp-Name`
//! and `Mcp-Param-{Name}` for tool parameters annotated with `x-mcp-header`, with values that
//! are not plain ASCII sent as `=?base64?…?=`.

use base64::Engine;
use serde_json::{Map, Value};

/// Where in a tool's arguments one mirrored header takes its value.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamHeader {
    /// `Mcp-Param-{name}`.
    pub header: String,
    /// The chain of `properties` keys to the value.
    pub path: Vec<String>,
}

/// Why a tool's `x-mcp-header` annotations refuse the tool.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HeaderError {
    /// The annotation of property `key` is not a string.
    #[error("`x-mcp-header` of {key:?} is not a string")]
    NotAString {
        /// The property.
        key: String,
    },
    /// The name is empty or not an HTTP token.
    #[error("`x-mcp-header` {name:?} is not an HTTP header name")]
    NotAHeaderName {
        /// The annotation's value.
        name: String,
    },
    /// The annotated property is not a string, integer or boolean.
    #[error("`x-mcp-header` {name:?} is on {key:?}, which is not a string, integer or boolean")]
    NotPrimitive {
        /// The annotation's value.
        name: String,
        /// The property.
        key: String,
    },
    /// An annotation outside a chain of `properties`, under `keyword`.
    #[error("`x-mcp-header` under `{keyword}`, which is not a chain of `properties`")]
    Unreachable {
        /// The keyword it sits under.
        keyword: String,
    },
    /// Two annotations name the same header (ignoring case).
    #[error("`x-mcp-header` {header:?} is used twice")]
    Duplicate {
        /// The header (`Mcp-Param-{name}`).
        header: String,
    },
}

/// The headers a tool's `inputSchema` asks for, or why the tool must be refused (an empty,
/// non-token or duplicate name, or an annotation on a non-primitive or unreachable property).
pub fn param_headers(schema: &Map<String, Value>) -> Result<Vec<ParamHeader>, HeaderError> {
    let mut found = Vec::new();
    collect(schema, &mut Vec::new(), &mut found)?;
    if let Some(keyword) = stray_annotation(&Value::Object(schema.clone()), true) {
        return Err(HeaderError::Unreachable { keyword });
    }
    let mut seen: Vec<String> = Vec::new();
    for param in &found {
        let lower = param.header.to_ascii_lowercase();
        if seen.contains(&lower) {
            return Err(HeaderError::Duplicate { header: param.header.clone() });
        }
        seen.push(lower);
    }
    Ok(found)
}

/// Adds the annotated properties under `schema`'s `properties` (at `path`) to `out`.
fn collect(schema: &Map<String, Value>, path: &mut Vec<String>, out: &mut Vec<ParamHeader>) -> Result<(), HeaderError> {
    let Some(Value::Object(properties)) = schema.get("properties") else { return Ok(()) };
    for (key, property) in properties {
        let Value::Object(property) = property else { continue };
        path.push(key.clone());
        if let Some(name) = property.get("x-mcp-header") {
            let name = name.as_str().ok_or_else(|| HeaderError::NotAString { key: key.clone() })?;
            if name.is_empty() || !name.bytes().all(is_tchar) {
                return Err(HeaderError::NotAHeaderName { name: name.to_string() });
            }
            let primitive = matches!(property.get("type").and_then(Value::as_str), Some("string" | "integer" | "boolean"));
            if !primitive {
                return Err(HeaderError::NotPrimitive { name: name.to_string(), key: key.clone() });
            }
            out.push(ParamHeader { header: format!("Mcp-Param-{name}"), path: path.clone() });
        }
        collect(property, path, out)?;
        path.pop();
    }
    Ok(())
}

/// The keyword under which an `x-mcp-header` sits outside a `properties` chain, if any.
fn stray_annotation(schema: &Value, reachable: bool) -> Option<String> {
    let Value::Object(map) = schema else {
        return schema.as_array().and_then(|items| items.iter().find_map(|i| stray_annotation(i, false)));
    };
    if !reachable && map.contains_key("x-mcp-header") {
        return Some("a composition, array or reference keyword".into());
    }
    for (key, value) in map {
        let found = if key == "properties" {
            value.as_object().and_then(|props| props.values().find_map(|p| stray_annotation(p, reachable)))
        } else {
            stray_annotation(value, false).map(|_| key.clone())
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The `(header, value)` pairs of a call's `arguments` (absent and null values are omitted).
pub fn param_values(params: &[ParamHeader], arguments: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for param in params {
        let value = param.path.iter().try_fold(arguments, |v, key| v.get(key));
        let text = match value {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => continue,
        };
        out.push((param.header.clone(), header_value(&text)));
    }
    out
}

/// `text` as a header value: as it is when it is plain visible ASCII without surrounding
/// whitespace, else `=?base64?…?=` of its UTF-8.
pub fn header_value(text: &str) -> String {
    let plain =
        text.bytes().all(|b| (0x20..=0x7e).contains(&b)) && text.trim() == text && !(text.starts_with("=?base64?") && text.ends_with("?="));
    if plain { text.to_string() } else { format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(text)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn annotated_parameters_are_mirrored_and_encoded() {
        let s = schema(json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "opts": {"type": "object", "properties": {"v": {"type": "boolean", "x-mcp-header": "V"}}},
            "q": {"type": "string"}}}));
        let params = param_headers(&s).unwrap();
        let values = param_values(&params, &json!({"region": "Hello, 世界", "n": 42, "opts": {"v": false}, "q": "x"}));
        assert_eq!(
            values,
            [
                ("Mcp-Param-Region".to_string(), "=?base64?SGVsbG8sIOS4lueVjA==?=".to_string()),
                ("Mcp-Param-N".into(), "42".into()),
                ("Mcp-Param-V".into(), "false".into())
            ]
        );
        assert_eq!(param_values(&params, &json!({"region": null})), []);
        assert_eq!(header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
    }

    #[test]
    fn invalid_annotations_refuse_the_tool() {
        for bad in [
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}),
            json!({"properties": {"a": {"type": "object", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
        ] {
            assert!(param_headers(&schema(bad.clone())).is_err(), "{bad}");
        }
    }
}
