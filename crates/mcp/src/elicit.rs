//! A server's request for user input (`elicitation/create`), answered at once: dracode runs
//! unattended, so it declines — or, with `elicitation = "accept_defaults"`, accepts with the
//! defaults of the requested schema (declining when a required field has none). Either way a
//! note for the model says what the server asked and how dracode answered.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// How dracode answers a server's request for user input (`elicitation` of `[mcp_servers.NAME]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpElicitation {
    /// `{"action": "decline"}` (the default).
    #[default]
    Decline,
    /// `{"action": "accept"}` with the requested schema's defaults; declined when a required
    /// field has no default, or when the server asks for a URL to be opened.
    AcceptDefaults,
}

impl<'de> Deserialize<'de> for McpElicitation {
    /// `decline` or `accept_defaults`; anything else is refused naming the field.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match String::deserialize(deserializer)?.as_str() {
            "decline" => Ok(McpElicitation::Decline),
            "accept_defaults" => Ok(McpElicitation::AcceptDefaults),
            other => Err(serde::de::Error::custom(format!("`elicitation` must be \"decline\" or \"accept_defaults\", not {other:?}"))),
        }
    }
}

/// The `ElicitResult` for an `elicitation/create` request's `params`, and the note for the
/// model.
pub fn answer(params: &Value, policy: McpElicitation) -> (Value, String) {
    let asked = params.get("message").and_then(Value::as_str).unwrap_or("");
    let said = format!("[dracode: the MCP server asked for user input ({asked:?}); dracode runs unattended and");
    let decline = |why: &str| (json!({"action": "decline"}), format!("{said} declined{why}]"));
    if policy == McpElicitation::Decline {
        return decline("");
    }
    if params.get("mode").and_then(Value::as_str) == Some("url") {
        return decline(" (it asked for a URL to be opened, which needs a person)");
    }
    match defaults(params.get("requestedSchema")) {
        Ok(content) => {
            let note = format!("{said} accepted with the schema's defaults: {}]", Value::Object(content.clone()));
            (json!({"action": "accept", "content": content}), note)
        }
        Err(missing) => decline(&format!(" ({missing})")),
    }
}

/// A required property of a requested schema without a `default`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the required field {field:?} has no default")]
pub struct NoDefault {
    /// The property.
    pub field: String,
}

/// Every property of `schema` that has a `default`, with it; `Err` names a required property
/// without one.
fn defaults(schema: Option<&Value>) -> Result<Map<String, Value>, NoDefault> {
    let properties = schema.and_then(|s| s.get("properties")).and_then(Value::as_object).cloned().unwrap_or_default();
    let content: Map<String, Value> =
        properties.iter().filter_map(|(name, property)| Some((name.clone(), property.get("default")?.clone()))).collect();
    let required = schema.and_then(|s| s.get("required")).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
    for name in required {
        if !content.contains_key(name) {
            return Err(NoDefault { field: name.to_string() });
        }
    }
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_accepted_only_when_every_required_field_has_one() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "default": 3}, "s": {"type": "string"}}});
        let (result, note) = answer(&json!({"message": "Go?", "requestedSchema": schema}), McpElicitation::AcceptDefaults);
        assert_eq!(result, json!({"action": "accept", "content": {"n": 3}}));
        assert!(note.ends_with("accepted with the schema's defaults: {\"n\":3}]"), "{note}");
        let mut strict = schema.clone();
        strict["required"] = json!(["s"]);
        let (result, note) = answer(&json!({"message": "Go?", "requestedSchema": strict}), McpElicitation::AcceptDefaults);
        assert_eq!((result, note.ends_with("declined (the required field \"s\" has no default)]")), (json!({"action": "decline"}), true));
        let (result, _) = answer(&json!({"mode": "url", "url": "https://x"}), McpElicitation::AcceptDefaults);
        assert_eq!(result["action"], "decline");
        assert_eq!(answer(&json!({"requestedSchema": schema}), McpElicitation::Decline).0, json!({"action": "decline"}));
    }
}
