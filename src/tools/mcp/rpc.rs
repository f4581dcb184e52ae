//! The transport-independent half of the MCP client: what toolrun answers when a server sends
//! it a request during a call (`ping`, `elicitation/create`, `sampling/createMessage`,
//! `roots/list`), and what a server's notifications (`notifications/progress`,
//! `notifications/message`) become. Streamable HTTP (`mcp`) and stdio (`mcp::stdio`) both hand
//! every message that is not the awaited response to [`Incoming::handle`].

use crate::registry::{Elicitation, McpServer};
use crate::tools::ToolEnv;
use serde_json::{json, Map, Value};

/// "Method not found": what a client answers for a capability it did not declare.
const NOT_FOUND: i64 = -32601;

/// What toolrun declares in `initialize`: it answers elicitation (declining, or accepting the
/// requested defaults, as the server's entry says) and nothing else a server may ask.
pub(crate) fn capabilities() -> Value {
    // `{}` is form mode in 2025-11-25, and what earlier revisions understand.
    json!({ "elicitation": {} })
}

/// The answer to a request the server sent (a message with `method` and `id`).
pub(crate) fn answer(request: &Value, elicitation: Elicitation) -> Value {
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = request.get("method").and_then(Value::as_str).unwrap_or("");
    let result = match method {
        "ping" => json!({}),
        "elicitation/create" => elicit(request.get("params"), elicitation),
        _ => {
            return json!({ "jsonrpc": "2.0", "id": id, "error": {
                "code": NOT_FOUND,
                "message": format!("toolrun does not offer `{method}` (it declared no such capability)"),
            } })
        }
    };
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// `defaults` accepts with every default the requested schema gives, when each required field
/// has one (SEP-1034); otherwise, and for `decline` or a URL-mode request, it declines.
fn elicit(params: Option<&Value>, policy: Elicitation) -> Value {
    let decline = json!({ "action": "decline" });
    let Some(params) = params else { return decline };
    if policy == Elicitation::Decline
        || params
            .get("mode")
            .and_then(Value::as_str)
            .is_some_and(|m| m != "form")
    {
        return decline;
    }
    let schema = params.get("requestedSchema");
    let properties = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let mut content = Map::new();
    for (name, field) in properties.into_iter().flatten() {
        if let Some(d) = field.get("default") {
            content.insert(name.clone(), d.clone());
        }
    }
    let required = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let complete = required
        .iter()
        .all(|r| r.as_str().is_some_and(|r| content.contains_key(r)));
    if !complete {
        return decline;
    }
    json!({ "action": "accept", "content": content })
}

/// A server's messages during one call of `tool` (the remote name).
pub(crate) struct Incoming<'a, 'e> {
    pub(crate) server: &'a McpServer,
    pub(crate) env: &'a ToolEnv<'e>,
    pub(crate) tool: &'a str,
}

impl Incoming<'_, '_> {
    /// A request from the server: its answer, which the caller sends; an `mcp_server_request`
    /// event says what was asked and answered.
    pub(crate) fn request(&self, request: &Value) -> Value {
        let reply = answer(request, self.server.elicitation);
        self.env.events.emit_with("mcp_server_request", || {
            self.env.call_event(json!({
                "id": self.env.call_id,
                "server": self.server.name,
                "tool": self.tool,
                "method": request.get("method"),
                "answer": reply.get("result").or_else(|| reply.get("error")),
            }))
        });
        reply
    }

    /// A notification: progress moves the call's progress (`tool_progress`), a log message is an
    /// `mcp_log` event; anything else is ignored. Events are masked by their writer.
    pub(crate) fn notification(&self, note: &Value) {
        let params = note.get("params").cloned().unwrap_or(Value::Null);
        match note.get("method").and_then(Value::as_str) {
            Some("notifications/progress") => self.env.events.emit_with("tool_progress", || {
                self.env.call_event(json!({
                    "id": self.env.call_id,
                    "tool": self.tool,
                    "server": self.server.name,
                    "progress": params.get("progress"),
                    "total": params.get("total"),
                    "message": params.get("message"),
                }))
            }),
            Some("notifications/message") => self.env.events.emit_with("mcp_log", || {
                self.env.call_event(json!({
                    "id": self.env.call_id,
                    "server": self.server.name,
                    "tool": self.tool,
                    "level": params.get("level"),
                    "logger": params.get("logger"),
                    "data": params.get("data"),
                }))
            }),
            _ => {}
        }
    }
}

/// Is `message` a request from the server (it has both a method and an id)?
pub(crate) fn is_request(message: &Value) -> bool {
    message.get("method").is_some() && message.get("id").is_some_and(|i| !i.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, params: Value) -> Value {
        json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params })
    }

    #[test]
    fn ping_is_answered_and_undeclared_capabilities_are_not_found() {
        let a = answer(&request("ping", json!({})), Elicitation::Decline);
        assert_eq!(a, json!({ "jsonrpc": "2.0", "id": 7, "result": {} }));
        for m in ["sampling/createMessage", "roots/list", "x/y"] {
            let a = answer(&request(m, json!({})), Elicitation::Defaults);
            assert_eq!(a["error"]["code"], -32601, "{m}");
            assert_eq!(a["id"], 7);
        }
    }

    #[test]
    fn elicitation_declines_unless_defaults_cover_every_required_field() {
        let schema = json!({ "message": "?", "requestedSchema": { "type": "object", "properties": {
            "name": { "type": "string", "default": "John Doe" },
            "age": { "type": "integer", "default": 30 },
            "email": { "type": "string" },
        }, "required": ["name"] } });
        let elicit = |policy, params: &Value| {
            answer(&request("elicitation/create", params.clone()), policy)["result"].clone()
        };
        assert_eq!(
            elicit(Elicitation::Decline, &schema),
            json!({ "action": "decline" })
        );
        assert_eq!(
            elicit(Elicitation::Defaults, &schema),
            json!({ "action": "accept", "content": { "name": "John Doe", "age": 30 } })
        );
        let mut missing = schema.clone();
        missing["requestedSchema"]["required"] = json!(["name", "email"]);
        assert_eq!(
            elicit(Elicitation::Defaults, &missing),
            json!({ "action": "decline" })
        );
        let url =
            json!({ "mode": "url", "url": "https://x", "message": "?", "elicitationId": "1" });
        assert_eq!(
            elicit(Elicitation::Defaults, &url),
            json!({ "action": "decline" })
        );
    }
}
