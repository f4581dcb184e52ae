//! Compiled tools as each API expects them. Live providers send exactly what `toolrun tools
//! --format` prints, so what users inspect is what models see.

use crate::registry::{Tool, ToolKind};
use serde_json::{json, Value};

pub(crate) fn openai(tool: &Tool) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description(),
            "parameters": tool.input_schema(),
        }
    })
}

pub(crate) fn anthropic(tool: &Tool) -> Value {
    json!({
        "name": tool.name,
        "description": tool.description(),
        "input_schema": tool.input_schema(),
    })
}

/// MCP `tools/list` entries, with behaviour hints derived from the spec.
pub(crate) fn mcp(tool: &Tool) -> Value {
    let read_only = !tool.side_effects
        && match &tool.kind {
            ToolKind::Http(h) => matches!(h.method.as_str(), "GET" | "HEAD" | "OPTIONS"),
            // What a remote tool does is its server's business.
            ToolKind::Mcp(_) => false,
            _ => true,
        };
    let open_world = matches!(tool.kind, ToolKind::Http(_) | ToolKind::Mcp(_));
    json!({
        "name": tool.name,
        "title": tool.name.replace(['_', '-'], " "),
        "description": tool.description(),
        "inputSchema": tool.input_schema(),
        "annotations": {
            "readOnlyHint": read_only,
            "destructiveHint": tool.side_effects || tool.confirm_hint().is_some(),
            "idempotentHint": tool.idempotent,
            "openWorldHint": open_world,
        }
    })
}
