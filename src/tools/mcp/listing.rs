//! `tools/list`: the listing followed page by page within its bounds, checked against what the
//! spec names or pins, and `tools: "*"` turned into the run's tools.

use super::exchange::Rpc;
use super::{server_error, ClientSession, Connected, MAX_LISTING_BYTES, MAX_PAGES};
use crate::registry::{ListedTool, McpServer, Tool, ToolKind, Wildcard};
use crate::tools::{ToolEnv, ToolError};
use serde_json::{json, Value};

pub(super) async fn list_tools(
    server: &McpServer,
    session: &ClientSession,
    conn: &Connected,
    env: &ToolEnv<'_>,
) -> Result<Vec<Value>, ToolError> {
    let rpc = Rpc {
        server,
        env,
        conn: Some(conn),
        timeout: server.timeout,
    };
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut bytes = 0u64;
    for page_no in 1..=MAX_PAGES {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let mut page = rpc.request(session, "tools/list", params).await?;
        bytes += json_size(&page);
        if bytes > MAX_LISTING_BYTES {
            return Err(server_error(
                server,
                format!("listed more than {} MiB of tools in {page_no} page(s), and toolrun reads no more of a listing: no model can use that much. Check the server (a listing that never ends is a fault), or use a server that offers fewer tools", MAX_LISTING_BYTES >> 20),
            ));
        }
        if let Some(Value::Array(items)) = page.get_mut("tools").map(Value::take) {
            tools.extend(items);
        }
        cursor = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        if cursor.is_none() {
            if super::modern::is_modern(&conn.protocol) {
                super::modern::keep_callable(server, session, env, &mut tools);
            }
            return Ok(tools);
        }
    }
    Err(server_error(
        server,
        format!("listed more than {MAX_PAGES} pages of tools"),
    ))
}

/// The size of `v` as JSON text, counted without writing it.
pub(super) fn json_size(v: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// Every tool the spec names must be listed, with the pinned schema where one is pinned.
pub(super) fn check_listed(
    server: &McpServer,
    env: &ToolEnv<'_>,
    listed: &[Value],
) -> Result<(), ToolError> {
    let names: Vec<&str> = listed
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .collect();
    for (remote, local) in &server.tools {
        let Some(found) = listed
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(remote.as_str()))
        else {
            let hint = crate::diag::did_you_mean(remote, names.iter().copied())
                .unwrap_or_else(|| format!("it offers: {}", names.join(", ")));
            return Err(server_error(
                server,
                format!(
                    "has no tool `{remote}`; {hint}. Fix `tools:` of `{}` in the spec",
                    server.name
                ),
            ));
        };
        let Some(tool) = env.registry.tool(local) else {
            continue;
        };
        let ToolKind::Mcp(m) = &tool.kind else {
            continue;
        };
        let schema = found
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| json!({ "type": "object" }));
        if m.pinned_input && schema != tool.input_schema {
            return Err(server_error(
                server,
                format!(
                    "lists tool `{remote}` with an input schema that differs from the one pinned in the spec (`input:` of `{local}`):\n{}\nUpdate the pinned schema if the change is expected",
                    crate::fixture::json_diff(&tool.input_schema, &schema)
                ),
            ));
        }
        let listed = ListedTool {
            description: found
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            input_schema: schema,
            confirm_hint: match m.declared_side_effects {
                Some(_) => None,
                None => annotation_hint(found.get("annotations"))
                    .map(|h| format!("MCP server `{}` annotates `{remote}` with {h}", server.name)),
            },
            served: ListedTool::served_keys(found),
        };
        // Runs of one process share what models see: a server that changes its tools between
        // them would make one run's checks describe another run's tools.
        if let Err(listed) = m.listed.set(listed) {
            if m.listed.get() != Some(&listed) {
                return Err(server_error(
                    server,
                    format!("changed tool `{remote}` while toolrun was running; run again"),
                ));
            }
        }
    }
    if let Some(every) = env.registry.wildcard(&server.name) {
        take_every_tool(server, every, env, listed)?;
    }
    Ok(())
}

/// `tools: "*"`: every listed tool becomes a tool of the run, named as the server names it.
/// Runs of one process share them (as they share what a declared tool's server listed): a
/// server that lists other tools in a later run stops that run.
pub(super) fn take_every_tool(
    server: &McpServer,
    every: &Wildcard,
    env: &ToolEnv<'_>,
    listed: &[Value],
) -> Result<(), ToolError> {
    let mut found: Vec<Tool> = Vec::new();
    for item in listed {
        let name = item.get("name").and_then(Value::as_str).unwrap_or_default();
        if !is_tool_name(name) {
            return Err(server_error(server, format!(
                "lists a tool named `{name}`, which models cannot call (names are 1 to 64 letters, digits, `_` or `-`, not starting with a digit or `-`). List the tools to use in `tools:` of `{}`, renaming this one with `as:`", server.name
            )));
        }
        let taken = env.registry.tools.iter().any(|t| t.name == name)
            || found.iter().any(|t| t.name == name);
        if taken {
            return Err(server_error(server, format!(
                "lists a tool `{name}`, and the spec already has a tool of that name. List the tools to use in `tools:` of `{}`, renaming this one with `as:`", server.name
            )));
        }
        let listed = ListedTool {
            description: item
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            input_schema: item
                .get("inputSchema")
                .cloned()
                .unwrap_or_else(|| json!({ "type": "object" })),
            confirm_hint: match every.declared_side_effects {
                Some(_) => None,
                None => annotation_hint(item.get("annotations"))
                    .map(|h| format!("MCP server `{}` annotates `{name}` with {h}", server.name)),
            },
            served: ListedTool::served_keys(item),
        };
        found.push(every.tool(name, listed, env.registry.policy.allows(name)));
    }
    let Err(found) = every.found.set(found) else {
        return Ok(());
    };
    let before = every.found.get().map(Vec::as_slice).unwrap_or_default();
    let same = before.len() == found.len()
        && before
            .iter()
            .zip(&found)
            .all(|(a, b)| a.name == b.name && listed_of(a) == listed_of(b));
    if same {
        return Ok(());
    }
    Err(server_error(
        server,
        "lists other tools than it did earlier while toolrun was running (`tools: \"*\"`); run again".to_string(),
    ))
}

pub(super) fn listed_of(tool: &Tool) -> Option<&ListedTool> {
    match &tool.kind {
        ToolKind::Mcp(m) => m.listed.get(),
        _ => None,
    }
}

/// The rule every model provider accepts for a tool name (as `check` holds declared names to).
pub(super) fn is_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// What a tool's annotations say about changing its environment, when they say it might. The
/// MCP spec makes them untrusted hints, with defaults: `readOnlyHint` false, `destructiveHint`
/// true (meaningful when not read-only). So only a hint can add confirmation, never remove it:
/// an explicit `readOnlyHint: false`, or a `destructiveHint` without `readOnlyHint: true`
/// (even `false`: additive changes are changes), or `destructiveHint: true` beside a
/// contradicting `readOnlyHint: true`. Without either hint the server said nothing, and the spec
/// decides, as for any other tool.
pub(super) fn annotation_hint(annotations: Option<&Value>) -> Option<String> {
    let a = annotations?;
    let read_only = a.get("readOnlyHint").and_then(Value::as_bool);
    let destructive = a.get("destructiveHint").and_then(Value::as_bool);
    let said = match (read_only, destructive) {
        (Some(true), Some(true)) => "`readOnlyHint: true` but `destructiveHint: true`",
        (None, Some(true)) => "`destructiveHint: true`",
        (Some(false), Some(true)) => "`readOnlyHint: false, destructiveHint: true`",
        (Some(false), None) => "`readOnlyHint: false` (so `destructiveHint` defaults to true)",
        (Some(false), Some(false)) => "`readOnlyHint: false` (changes that only add)",
        (None, Some(false)) => "`destructiveHint: false` without `readOnlyHint: true` (which defaults to false: it changes its environment)",
        (Some(true), _) | (None, None) => return None,
    };
    Some(said.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hints_of_change_ask_for_confirmation() {
        let hint = |a: Value| annotation_hint(Some(&a));
        for asks in [
            json!({"destructiveHint": true}),
            json!({"readOnlyHint": false}),
            json!({"readOnlyHint": false, "destructiveHint": false}),
            json!({"destructiveHint": false}),
            json!({"readOnlyHint": true, "destructiveHint": true}),
        ] {
            assert!(hint(asks.clone()).is_some(), "{asks}");
        }
        for quiet in [
            json!({}),
            json!({"title": "Search", "openWorldHint": true, "idempotentHint": true}),
            json!({"readOnlyHint": true}),
            json!({"readOnlyHint": true, "destructiveHint": false}),
            json!({"readOnlyHint": "no"}),
        ] {
            assert_eq!(hint(quiet.clone()), None, "{quiet}");
        }
        assert_eq!(annotation_hint(None), None);
        assert!(hint(json!({"readOnlyHint": false}))
            .unwrap()
            .contains("defaults to true"));
    }
}
