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

/// The Responses API's function tools: flat, and `strict` said: the API's default is `true`,
/// which refuses any schema that is not closed with every property required.
pub(crate) fn openai_responses(tool: &Tool) -> Value {
    json!({
        "type": "function",
        "name": tool.name,
        "description": tool.description(),
        "parameters": tool.input_schema(),
        "strict": false,
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
    let mut def = json!({
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
    });
    if let ToolKind::Mcp(m) = &tool.kind {
        if let Some(listed) = m.listed.get() {
            as_listed(&mut def, listed, m.declared_side_effects);
        }
    }
    def
}

/// A remote tool as its server lists it (a faithful gateway): its title, annotations and output
/// schema, except what the spec says itself (`side_effects:`). Whether toolrun holds a call for
/// confirmation is its own business: a tool the server marks `destructiveHint: false` is served
/// so, though toolrun confirms it (its changes only add).
fn as_listed(def: &mut Value, listed: &crate::registry::ListedTool, declared: Option<bool>) {
    for (key, value) in &listed.served {
        match (key.as_str(), value, &mut def[key]) {
            // The server's hints win; the ones it left out keep toolrun's reading.
            ("annotations", Value::Object(theirs), Value::Object(ours)) => {
                ours.extend(theirs.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            _ => def[key] = value.clone(),
        }
    }
    if let Some(changes) = declared {
        let annotations = &mut def["annotations"];
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations["destructiveHint"] = json!(changes);
        if changes {
            annotations["readOnlyHint"] = json!(false);
        }
    }
}
