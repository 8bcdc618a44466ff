//! Renders tool specs in each provider's format (`dracode tools --format …`). Each wire format
//! owns its tool JSON ([`WireFormat::render_tools`]); this prints what the format sends, plus
//! MCP's `tools/list`, which no provider speaks.

use dracode_llm::ToolSpec;
use dracode_llm::anthropic::MessagesFormat;
use dracode_llm::gemini::GenerateContentFormat;
use dracode_llm::openai::ChatCompletionsFormat;
use dracode_llm::responses::ResponsesFormat;
use dracode_llm::wire::WireFormat;
use serde_json::{Value, json};

/// A provider's tool format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// OpenAI Chat Completions `tools` (also Azure, Copilot, vLLM, …).
    Openai,
    /// OpenAI Responses API `tools` (`wire_api = "responses"`): `apply_patch` as a free-form
    /// `custom` tool with its grammar, the others as flat `function` tools.
    Responses,
    /// Anthropic Messages `tools`.
    Anthropic,
    /// Gemini `tools[].functionDeclarations`.
    Gemini,
    /// MCP `tools/list` result entries.
    Mcp,
}

/// One MCP tool (`inputSchema`).
pub fn mcp_tool(spec: &ToolSpec) -> Value {
    json!({ "name": spec.name, "description": spec.description, "inputSchema": spec.parameters })
}

/// Every spec rendered as the provider expects it inside a request.
pub fn render(specs: &[ToolSpec], format: ToolFormat) -> Value {
    match format {
        ToolFormat::Openai => ChatCompletionsFormat::render_tools(specs),
        ToolFormat::Responses => ResponsesFormat::render_tools(specs),
        ToolFormat::Anthropic => MessagesFormat::render_tools(specs),
        ToolFormat::Gemini => GenerateContentFormat::render_tools(specs),
        ToolFormat::Mcp => json!({ "tools": specs.iter().map(mcp_tool).collect::<Vec<_>>() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dracode_llm::snapshot::list_files_spec as spec;

    #[test]
    fn each_format_has_its_shape() {
        let specs = [spec()];
        assert_eq!(render(&specs, ToolFormat::Openai)[0]["function"]["name"], "list_files");
        assert_eq!(render(&specs, ToolFormat::Responses)[0]["name"], "list_files");
        assert!(render(&specs, ToolFormat::Anthropic)[0]["input_schema"].is_object());
        assert!(render(&specs, ToolFormat::Gemini)[0]["functionDeclarations"][0]["parameters"].is_object());
        assert!(render(&specs, ToolFormat::Mcp)["tools"][0]["inputSchema"].is_object());
    }
}
