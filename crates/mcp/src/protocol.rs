//! What dracode says on the MCP wire, by protocol era: the versions it speaks, the per-request
//! `_meta` of the current (stateless) revision, the `initialize` handshake of the earlier ones,
//! the errors it recognises, and the tools and results it reads.

use serde_json::{Map, Value, json};

/// The current revision: stateless, every request carries its version in `_meta`.
pub const MODERN: &str = "2026-07-28";
/// The newest revision with the `initialize` handshake (and sessions on HTTP).
pub const LEGACY: &str = "2025-11-25";
/// Every version dracode speaks, newest first.
pub const SUPPORTED: &[&str] = &[MODERN, LEGACY, "2025-06-18", "2025-03-26"];

/// JSON-RPC "method not found".
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The current revision's `UnsupportedProtocolVersion` (its `data.supported` lists the server's).
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// The current revision's `HeaderMismatch` and `MissingRequiredClientCapability`.
pub const MODERN_ERRORS: &[i64] = &[-32020, -32021, UNSUPPORTED_VERSION];

/// Whether `version` is a stateless (per-request `_meta`) revision.
pub fn is_modern(version: &str) -> bool {
    version >= MODERN
}

/// `clientInfo`: dracode and its version.
pub fn client_info() -> Value {
    json!({ "name": "dracode", "version": env!("CARGO_PKG_VERSION") })
}

/// The client capabilities dracode declares in `version`: elicitation (form mode), which it
/// answers at once (see [`crate::elicit`]), from 2025-06-18 on, when the revision has it; no
/// sampling or roots.
pub fn client_capabilities(version: &str) -> Value {
    match version {
        "2025-03-26" => json!({}),
        "2025-06-18" => json!({"elicitation": {}}),
        _ => json!({"elicitation": {"form": {}}}),
    }
}

/// The `_meta` every request of a modern `version` carries.
pub fn request_meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": client_info(),
        "io.modelcontextprotocol/clientCapabilities": client_capabilities(version),
    })
}

/// `params` with the modern `_meta` of `version` added (a params object is made when absent).
pub fn with_meta(params: Value, version: &str) -> Value {
    let mut map = match params {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let meta = map.entry("_meta").or_insert_with(|| json!({}));
    if let (Value::Object(meta), Value::Object(ours)) = (meta, request_meta(version)) {
        meta.extend(ours);
    }
    Value::Object(map)
}

/// The `initialize` request of a legacy `version`.
pub fn initialize_params(version: &str) -> Value {
    json!({ "protocolVersion": version, "capabilities": client_capabilities(version), "clientInfo": client_info() })
}

/// A JSON-RPC error answered by the server.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// Its code.
    pub code: i64,
    /// Its message.
    pub message: String,
    /// Its `data`, if any.
    pub data: Option<Value>,
}

impl RpcError {
    /// Reads the `error` member of a response.
    pub fn from_value(error: &Value) -> RpcError {
        RpcError {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error.get("message").and_then(Value::as_str).unwrap_or("").to_string(),
            data: error.get("data").cloned(),
        }
    }

    /// The versions an `UnsupportedProtocolVersion` error says the server supports.
    pub fn supported_versions(&self) -> Vec<String> {
        let list = self.data.as_ref().and_then(|d| d.get("supported")).and_then(Value::as_array);
        list.map(|l| l.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default()
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (JSON-RPC error {})", self.message, self.code)
    }
}

/// The newest version of `offered` that dracode speaks.
pub fn best_of(offered: &[String]) -> Option<&'static str> {
    SUPPORTED.iter().copied().find(|v| offered.iter().any(|o| o == v))
}

/// One tool a server lists.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// Its name on the server.
    pub name: String,
    /// Its description.
    pub description: Option<String>,
    /// Its input schema, unchanged.
    pub input_schema: Map<String, Value>,
}

impl ToolDef {
    /// Reads one entry of a `tools/list` result; `None` without a name.
    pub fn from_value(tool: &Value) -> Option<ToolDef> {
        let name = tool.get("name")?.as_str()?.to_string();
        let description = tool.get("description").and_then(Value::as_str).map(str::to_string);
        let input_schema = match tool.get("inputSchema") {
            Some(Value::Object(schema)) => schema.clone(),
            _ => json!({ "type": "object" }).as_object().cloned().unwrap_or_default(),
        };
        Some(ToolDef { name, description, input_schema })
    }
}

/// What a tool call gave: its text for the model and whether it is an error result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Text blocks as they are, other content described (see [`content_text`]).
    pub text: String,
    /// `isError`.
    pub is_error: bool,
}

/// The text of a `tools/call` result: text blocks as they are, embedded text resources with
/// their URI; images, audio and binary resources are not passed to the model — a line says
/// what was left out; `structuredContent` when there is no content.
pub fn content_text(result: &Value) -> String {
    let blocks = result.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut parts: Vec<String> = blocks.iter().map(block_text).collect();
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        parts.push(structured.to_string());
    }
    parts.join("\n")
}

fn block_text(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
    match field("type") {
        "text" => field("text").to_string(),
        kind @ ("image" | "audio") => {
            format!("[{kind} content ({}) not shown: dracode passes only text to the model]", field("mimeType"))
        }
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or_default();
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri}]\n{text}"),
                None => format!("[binary resource {uri} not shown: dracode passes only text to the model]"),
            }
        }
        "resource_link" => format!("[resource link {} ({})]", field("uri"), field("name")),
        _ => block.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modern_requests_carry_version_client_info_and_capabilities() {
        let params = with_meta(json!({"name": "t", "_meta": {"progressToken": 1}}), MODERN);
        let meta = &params["_meta"];
        assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], MODERN);
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "dracode");
        assert_eq!(meta["progressToken"], 1);
        assert!(is_modern(MODERN) && !is_modern(LEGACY));
    }

    #[test]
    fn the_newest_common_version_is_chosen() {
        assert_eq!(best_of(&["2025-06-18".into(), LEGACY.into()]), Some(LEGACY));
        assert_eq!(best_of(&["1999-01-01".into()]), None);
    }

    #[test]
    fn non_text_content_is_described_not_dropped_silently() {
        let result = json!({"content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
        ]});
        let text = content_text(&result);
        assert!(text.starts_with("hi\n[image content (image/png) not shown"), "{text}");
        assert!(text.ends_with("[resource file:///a]\nbody"), "{text}");
        assert_eq!(content_text(&json!({"content": [], "structuredContent": {"n": 1}})), "{\"n\":1}");
    }
}
