//! Helpers for the snapshot tests of each format (and of the crates above this one, with the
//! `test-support` feature): settings, a tool spec, the endpoint a format sends to.

use crate::http::HttpClient;
use crate::http_provider::build_endpoint;
use crate::preset::{ProviderType, ResolvedProvider};
use crate::wire::WireFormat;
use serde_json::Value;
use std::collections::BTreeMap;

/// Settings of a `kind` provider at `base_url` for `model`, with the key `<key>`.
pub fn settings(kind: ProviderType, base_url: &str, model: &str) -> ResolvedProvider {
    ResolvedProvider {
        name: kind.as_str().into(),
        kind,
        model: Some(model.into()),
        base_url: Some(base_url.into()),
        api_key: Some("<key>".into()),
        timeout: std::time::Duration::from_secs(5),
        stream: true,
        max_tokens: None,
        reasoning: None,
        wire_api: None,
        headers: BTreeMap::new(),
        api_version: None,
        limits: Default::default(),
        replay_path: None,
        emptied: Default::default(),
    }
}

/// A tool whose schema has what Gemini rejects (`additionalProperties`, `default`, a
/// nullable type).
pub fn list_files_spec() -> crate::ToolSpec {
    crate::ToolSpec {
        name: "list_files".into(),
        description: "List files".into(),
        parameters: serde_json::json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "directory": {"type": ["string", "null"], "description": "dir"},
                "recursive": {"type": "boolean", "default": false}
            }
        }),
    }
}

/// The URL and headers (sorted) a `W` provider with `settings` sends to.
pub fn endpoint<W: WireFormat>(settings: &ResolvedProvider) -> Value {
    let wire = W::for_provider(settings);
    let endpoint = build_endpoint(&wire, settings, HttpClient::default()).unwrap_or_else(|e| panic!("unsendable settings: {e}"));
    let headers: BTreeMap<&str, &str> = endpoint.headers.iter().map(|(k, v)| (k.as_str(), v.to_str().unwrap_or("<binary>"))).collect();
    serde_json::json!({"url": endpoint.url, "headers": headers})
}
