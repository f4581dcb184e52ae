use crate::cli::{ToolsArgs, ToolsFormat};
use crate::exit;
use crate::registry::{api_formats, ToolKind};
use serde_json::{json, Value};

pub(crate) fn run(args: ToolsArgs) -> i32 {
    let registry = match super::load_registry(&args.spec) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let list: Vec<Value> = registry
        .callable_tools()
        .map(|t| match args.format {
            ToolsFormat::Openai => api_formats::openai(t),
            ToolsFormat::OpenaiResponses => api_formats::openai_responses(t),
            ToolsFormat::Anthropic => api_formats::anthropic(t),
            ToolsFormat::Mcp => api_formats::mcp(t),
        })
        .collect();
    let doc = match args.format {
        ToolsFormat::Mcp => json!({ "tools": list }),
        _ => Value::Array(list),
    };
    println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    // Offline, what a server lists is unknown: a remote tool's description or schema that the
    // spec does not pin is a placeholder here, and the model will see the server's.
    for tool in registry.callable_tools() {
        if let ToolKind::Mcp(m) = &tool.kind {
            let (what, pin) = match (m.pinned_description, m.pinned_input) {
                (true, true) => continue,
                (false, false) => (
                    "description and schema",
                    "them with `description:` and `input:`",
                ),
                (false, true) => ("description", "it with `description:`"),
                (true, false) => ("schema", "it with `input:`"),
            };
            eprintln!(
                "note: `{}` is a tool of MCP server `{}`: a run gives the model the {what} the server lists, not what is shown here (pin {pin})",
                crate::term::visible_line(&tool.name),
                crate::term::visible_line(&m.server.name),
            );
        }
    }
    // Offline, a `tools: "*"` server's tools are unknown: say why they are missing.
    for w in &registry.wildcards {
        eprintln!(
            "note: the tools of MCP server `{}` (`tools: \"*\"`) are known only when a run lists them; they are not shown",
            crate::term::visible_line(&w.server.name)
        );
    }
    exit::SUCCESS
}
