//! Renders tool specs in each provider's format (`dracode tools --format …`); the provider
//! adapters use the same functions, so what `dracode tools` prints is what is sent.

use crate::llm::ToolSpec;
use serde_json::{Value, json};

/// A provider's tool format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ToolFormat {
    /// OpenAI Chat Completions `tools` (also Azure, Copilot, vLLM, …).
    Openai,
    /// Anthropic Messages `tools`.
    Anthropic,
    /// Gemini `tools[].functionDeclarations`.
    Gemini,
    /// MCP `tools/list` result entries.
    Mcp,
}

/// One tool in OpenAI's `{"type":"function","function":{…}}` shape.
pub fn openai_tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        }
    })
}

/// One tool in Anthropic's `{"name","description","input_schema"}` shape.
pub fn anthropic_tool(spec: &ToolSpec) -> Value {
    json!({ "name": spec.name, "description": spec.description, "input_schema": spec.parameters })
}

/// One Gemini function declaration; the schema reduced to the OpenAPI subset Gemini accepts.
pub fn gemini_declaration(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name,
        "description": spec.description,
        "parameters": gemini_schema(&spec.parameters),
    })
}

/// One MCP tool (`inputSchema`).
pub fn mcp_tool(spec: &ToolSpec) -> Value {
    json!({ "name": spec.name, "description": spec.description, "inputSchema": spec.parameters })
}

/// Drops the JSON Schema keywords Gemini's `Schema` object rejects (`default`,
/// `additionalProperties`, `$schema`, `title`, …) and turns `"type": ["x","null"]` into
/// `"type": "x", "nullable": true`.
pub fn gemini_schema(schema: &Value) -> Value {
    const KEEP: &[&str] = &[
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "properties",
        "required",
        "items",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "anyOf",
        "propertyOrdering",
    ];
    match schema {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (key, value) in map {
                if !KEEP.contains(&key.as_str()) {
                    continue;
                }
                let value = match key.as_str() {
                    "properties" => match value {
                        Value::Object(props) => Value::Object(props.iter().map(|(k, v)| (k.clone(), gemini_schema(v))).collect()),
                        other => other.clone(),
                    },
                    "items" => gemini_schema(value),
                    // Gemini knows only these formats (uint32, uint64, … are rejected).
                    "format" => match value.as_str() {
                        Some("float" | "double" | "int32" | "int64" | "enum" | "date-time") => value.clone(),
                        _ => continue,
                    },
                    "anyOf" => match value {
                        Value::Array(items) => Value::Array(items.iter().map(gemini_schema).collect()),
                        other => other.clone(),
                    },
                    "type" => match value {
                        Value::Array(types) => {
                            let non_null: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                            if non_null.len() < types.len() {
                                out.insert("nullable".into(), Value::Bool(true));
                            }
                            non_null.first().map(|t| (*t).clone()).unwrap_or(Value::from("string"))
                        }
                        other => other.clone(),
                    },
                    _ => value.clone(),
                };
                out.insert(key.clone(), value);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// Every spec rendered as the provider expects it inside a request.
pub fn render(specs: &[ToolSpec], format: ToolFormat) -> Value {
    match format {
        ToolFormat::Openai => Value::Array(specs.iter().map(openai_tool).collect()),
        ToolFormat::Anthropic => Value::Array(specs.iter().map(anthropic_tool).collect()),
        ToolFormat::Gemini => {
            json!([{ "functionDeclarations": specs.iter().map(gemini_declaration).collect::<Vec<_>>() }])
        }
        ToolFormat::Mcp => json!({ "tools": specs.iter().map(mcp_tool).collect::<Vec<_>>() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ToolSpec {
        ToolSpec {
            name: "list_files".into(),
            description: "List files".into(),
            parameters: json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "directory": {"type": ["string", "null"], "description": "dir"},
                    "recursive": {"type": "boolean", "default": false}
                }
            }),
        }
    }

    #[test]
    fn gemini_drops_unsupported_keywords_and_maps_nullable() {
        let decl = gemini_declaration(&spec());
        let params = &decl["parameters"];
        assert!(params.get("additionalProperties").is_none());
        assert!(params["properties"]["recursive"].get("default").is_none());
        assert_eq!(params["properties"]["directory"]["type"], "string");
        assert_eq!(params["properties"]["directory"]["nullable"], true);
        let unsigned = gemini_schema(&json!({"type": "integer", "format": "uint64", "minimum": 0}));
        assert!(unsigned.get("format").is_none(), "{unsigned}");
        assert_eq!(gemini_schema(&json!({"type": "integer", "format": "int64"}))["format"], "int64");
    }

    #[test]
    fn each_format_has_its_shape() {
        let specs = [spec()];
        assert_eq!(render(&specs, ToolFormat::Openai)[0]["function"]["name"], "list_files");
        assert!(render(&specs, ToolFormat::Anthropic)[0]["input_schema"].is_object());
        assert!(render(&specs, ToolFormat::Gemini)[0]["functionDeclarations"][0]["parameters"].is_object());
        assert!(render(&specs, ToolFormat::Mcp)["tools"][0]["inputSchema"].is_object());
    }
}
