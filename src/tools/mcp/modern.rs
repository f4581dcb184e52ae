//! The client side of MCP revision 2026-07-28, beside the `initialize` handshake of 2025-11-25
//! and older: no session, `server/discover` instead of `initialize`, every request carrying
//! toolrun's protocol version, name and capabilities in `_meta` (SEP-2575), the `Mcp-Method`,
//! `Mcp-Name` and `Mcp-Param-*` headers over HTTP (SEP-2243), and a server's need for input
//! answered in a retry of the request rather than by a request of its own (SEP-2322:
//! `resultType: input_required`, `inputResponses`, `requestState`).
//!
//! A server is asked `server/discover` first; one that answers it with an error that is not a
//! 2026-07-28 rejection (an HTTP 4xx, "method not found", a result without `supportedVersions`)
//! speaks an older revision and gets `initialize`, as the reference clients (rmcp, the Python
//! SDK) fall back.

use super::rpc::Incoming;
use super::ClientSession;
use crate::registry::McpServer;
use crate::tools::ToolEnv;
use base64::Engine;
use serde_json::{json, Map, Value};

/// The revision of `server/discover` and per-request metadata.
pub(super) const MODERN: &str = "2026-07-28";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT: &str = "io.modelcontextprotocol/clientInfo";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// Whether a session's revision is 2026-07-28 or later (revisions are dates: they order as text).
pub(super) fn is_modern(protocol: &str) -> bool {
    protocol >= MODERN
}

/// Adds the per-request metadata of `protocol` to a request's `params`, keeping what its
/// `_meta` already holds (a progress token).
pub(super) fn add_meta(params: &mut Value, protocol: &str) {
    if !params.is_object() {
        *params = json!({});
    }
    let meta = params
        .as_object_mut()
        .map(|p| p.entry("_meta").or_insert_with(|| json!({})));
    if let Some(Value::Object(meta)) = meta {
        meta.insert(META_VERSION.into(), json!(protocol));
        meta.insert(
            META_CLIENT.into(),
            json!({ "name": "toolrun", "version": env!("CARGO_PKG_VERSION") }),
        );
        meta.insert(META_CAPABILITIES.into(), super::rpc::capabilities());
    }
}

/// The headers SEP-2243 asks of a POST: `Mcp-Method` on every message with a method,
/// `Mcp-Name` for the methods that name their target, and `Mcp-Param-NAME` for each argument
/// of a `tools/call` whose property the listed `schema` annotates with `x-mcp-header`.
pub(super) fn standard_headers(body: &Value, schema: Option<&Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(method) = body.get("method").and_then(Value::as_str) else {
        return out;
    };
    out.push(("Mcp-Method".to_string(), method.to_string()));
    let params = body.get("params");
    let key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
        _ => None,
    };
    if let Some(name) = key.and_then(|k| params?.get(k)?.as_str()) {
        out.push(("Mcp-Name".to_string(), header_value(name)));
    }
    let arguments = params.and_then(|p| p.get("arguments"));
    if let (true, Some(schema), Some(arguments)) = (method == "tools/call", schema, arguments) {
        for (path, header) in annotations(schema) {
            let value = path.iter().try_fold(arguments, |v, k| v.get(k));
            let text = match value {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                // Null, absent or not a primitive: no header (SEP-2243 omits it).
                _ => continue,
            };
            out.push((format!("Mcp-Param-{header}"), header_value(&text)));
        }
    }
    out
}

/// A value as it can travel in a header: as it is when it is visible ASCII without leading or
/// trailing blanks, else `=?base64?...?=`.
fn header_value(value: &str) -> String {
    let blank_ends = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    let unsafe_char = value.chars().any(|c| !(' '..='~').contains(&c));
    let looks_encoded = value.starts_with("=?base64?") && value.ends_with("?=");
    if blank_ends || unsafe_char || looks_encoded {
        let b64 = base64::engine::general_purpose::STANDARD.encode(value);
        return format!("=?base64?{b64}?=");
    }
    value.to_string()
}

/// Every `x-mcp-header` annotation reached from the schema's root through `properties` alone,
/// as (the property's path, the header name) — the well-formed ones only.
fn annotations(schema: &Value) -> Vec<(Vec<&str>, &str)> {
    let mut out = Vec::new();
    collect(
        schema.get("properties"),
        &mut Vec::new(),
        &mut |path, prop| {
            if let Some(Value::String(h)) = prop.get("x-mcp-header") {
                if !h.is_empty() {
                    out.push((path.to_vec(), h.as_str()));
                }
            }
        },
    );
    out
}

fn collect<'a>(
    properties: Option<&'a Value>,
    path: &mut Vec<&'a str>,
    each: &mut dyn FnMut(&[&'a str], &'a Value),
) {
    let Some(Value::Object(properties)) = properties else {
        return;
    };
    for (name, prop) in properties {
        path.push(name);
        each(path, prop);
        collect(prop.get("properties"), path, each);
        path.pop();
    }
}

/// Why a listed tool's `x-mcp-header` annotations make it unusable (SEP-2243: a client must
/// not call such a tool): each names a non-empty HTTP token, unique without regard to case,
/// on a `string`, `integer` or `boolean` property reached through `properties` alone.
pub(super) fn bad_annotation(schema: &Value) -> Option<String> {
    if schema.get("x-mcp-header").is_some() {
        return Some("`x-mcp-header` on the schema itself, not on a property".into());
    }
    if schema
        .as_object()
        .is_some_and(|s| off_chain(s.iter(), true))
    {
        return Some("`x-mcp-header` inside a schema that is not a property".into());
    }
    let mut seen: Vec<String> = Vec::new();
    let mut why = None;
    collect(
        schema.get("properties"),
        &mut Vec::new(),
        &mut |path, prop| {
            let Some(header) = prop.get("x-mcp-header") else {
                return;
            };
            if why.is_some() {
                return;
            }
            let at = path.join(".");
            let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
            why = match header.as_str() {
                None => Some(format!("property `{at}`: `x-mcp-header` is not a string")),
                Some("") => Some(format!("property `{at}`: `x-mcp-header` is empty")),
                Some(h) if !h.chars().all(tchar) => Some(format!(
                    "property `{at}`: `x-mcp-header` `{h}` is not an HTTP header name"
                )),
                Some(h) if seen.contains(&h.to_ascii_lowercase()) => Some(format!(
                    "property `{at}`: `x-mcp-header` `{h}` names a header another property names"
                )),
                Some(h) => {
                    seen.push(h.to_ascii_lowercase());
                    match prop.get("type").and_then(Value::as_str) {
                    Some("string" | "integer" | "boolean") => None,
                    other => Some(format!(
                        "property `{at}`: `x-mcp-header` on a property of type {}, not string, integer or boolean",
                        other.unwrap_or("(none)")
                    )),
                }
                }
            };
        },
    );
    why
}

/// Whether an `x-mcp-header` sits anywhere but on a property reached through `properties`.
fn off_chain<'a>(
    mut schema: impl Iterator<Item = (&'a String, &'a Value)>,
    on_chain: bool,
) -> bool {
    let sub = |v: &Value, on: bool| match v {
        Value::Object(m) => off_chain(m.iter(), on),
        Value::Array(items) => items.iter().any(|i| match i {
            Value::Object(m) => off_chain(m.iter(), false),
            _ => false,
        }),
        _ => false,
    };
    schema.any(|(k, v)| match k.as_str() {
        "x-mcp-header" => !on_chain,
        "properties" => v
            .as_object()
            .is_some_and(|m| m.values().any(|p| sub(p, on_chain))),
        "$defs" | "definitions" | "dependencies" | "dependentSchemas" | "patternProperties" => v
            .as_object()
            .is_some_and(|m| m.values().any(|p| sub(p, false))),
        // Instance data or property names, never schemas.
        "default" | "const" | "enum" | "examples" | "dependentRequired" => false,
        _ => sub(v, false),
    })
}

/// Leaves out of a 2026-07-28 listing each tool whose `x-mcp-header` annotations are
/// malformed (SEP-2243: a client must not call it; the others stay usable), each an
/// `mcp_tool_refused` event, and keeps the schemas of the rest for their calls' headers.
pub(super) fn keep_callable(
    server: &McpServer,
    session: &ClientSession,
    env: &ToolEnv<'_>,
    tools: &mut Vec<Value>,
) {
    tools.retain(|tool| {
        let schema = tool.get("inputSchema").unwrap_or(&Value::Null);
        let Some(why) = bad_annotation(schema) else {
            return true;
        };
        env.events.emit_with(
            "mcp_tool_refused",
            || json!({ "server": server.name, "tool": tool.get("name"), "why": why }),
        );
        false
    });
    if let Ok(mut kept) = session.schemas.lock() {
        *kept = tools
            .iter()
            .filter_map(|t| {
                let name = t.get("name")?.as_str()?;
                Some((name.to_string(), t.get("inputSchema")?.clone()))
            })
            .collect();
    }
}

/// What a request is sent again with when its result asks for input (`resultType:
/// input_required`): each of its `inputRequests` answered as the same request sent by itself
/// would be (the entry's `elicitation:`; a method toolrun does not offer fails the request),
/// and its `requestState` echoed as it came. `None`: the result is complete.
pub(super) fn retry_params(
    result: &Value,
    params: &Value,
    incoming: &Incoming<'_, '_>,
) -> Result<Option<Value>, String> {
    if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return Ok(None);
    }
    let mut again = params.clone();
    if let Some(p) = again.as_object_mut() {
        p.remove("inputResponses");
        p.remove("requestState");
    }
    if let Some(requests) = result.get("inputRequests").and_then(Value::as_object) {
        let mut responses = Map::new();
        for (key, request) in requests {
            let method = request.get("method").and_then(Value::as_str).unwrap_or("");
            let asked = json!({ "jsonrpc": "2.0", "id": key, "method": method, "params": request.get("params") });
            let reply = incoming.request(&asked);
            let Some(answer) = reply.get("result") else {
                return Err(format!(
                    "asked for `{method}` (input required), which toolrun does not offer"
                ));
            };
            responses.insert(key.clone(), answer.clone());
        }
        again["inputResponses"] = Value::Object(responses);
    }
    if let Some(state) = result.get("requestState") {
        again["requestState"] = state.clone();
    }
    Ok(Some(again))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_travel_plain_or_in_base64() {
        assert_eq!(header_value("us-west1"), "us-west1");
        assert_eq!(header_value("us west 1"), "us west 1");
        assert_eq!(header_value(""), "");
        for v in [
            " padded ",
            "Hello, 世界",
            "line1\nline2",
            "\tx",
            "=?base64?x?=",
        ] {
            let h = header_value(v);
            let inner = h
                .strip_prefix("=?base64?")
                .and_then(|h| h.strip_suffix("?="));
            let decoded = base64::engine::general_purpose::STANDARD.decode(inner.unwrap());
            assert_eq!(decoded.unwrap(), v.as_bytes(), "{v:?}");
        }
    }

    #[test]
    fn params_are_mirrored_only_where_annotated_and_present() {
        let schema = json!({ "type": "object", "properties": {
            "region": { "type": "string", "x-mcp-header": "Region" },
            "n": { "type": "integer", "x-mcp-header": "N" },
            "v": { "type": "boolean", "x-mcp-header": "V" },
            "query": { "type": "string" },
        } });
        let body = json!({ "method": "tools/call", "params": { "name": "my-tool", "arguments": {
            "region": "eu", "n": 42, "v": null, "query": "SELECT 1" } } });
        let headers = standard_headers(&body, Some(&schema));
        assert_eq!(
            headers,
            [
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "my-tool"),
                ("Mcp-Param-Region", "eu"),
                ("Mcp-Param-N", "42"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn malformed_annotations_are_found() {
        let with = |prop: Value| json!({ "type": "object", "properties": { "p": prop } });
        assert_eq!(
            bad_annotation(&with(json!({ "type": "string", "x-mcp-header": "R" }))),
            None
        );
        for bad in [
            json!({ "type": "string", "x-mcp-header": "" }),
            json!({ "type": "object", "x-mcp-header": "D" }),
            json!({ "type": "number", "x-mcp-header": "S" }),
            json!({ "type": "string", "x-mcp-header": "My Region" }),
            json!({ "type": "string", "x-mcp-header": "Région" }),
            json!({ "type": "array", "items": { "type": "string", "x-mcp-header": "I" } }),
        ] {
            assert!(bad_annotation(&with(bad.clone())).is_some(), "{bad}");
        }
        let twice = json!({ "properties": {
            "a": { "type": "string", "x-mcp-header": "MyField" },
            "b": { "type": "string", "x-mcp-header": "myfield" } } });
        assert!(bad_annotation(&twice).is_some());
    }
}
