//! `toolrun serve` as spans in the MCP semantic conventions: one SERVER span per request it
//! answers, `{mcp.method.name} {target}`, continuing the client's trace when the request
//! carries `traceparent` (the HTTP header, or `params._meta` as MCP's SEP-414 puts it).

use super::span::Kind;
use super::span::{now_ns, Parent, Span};
use crate::redact::Redactor;
use serde_json::Value;

/// One request as served.
pub(crate) struct Request<'a> {
    pub(crate) method: &'a str,
    /// The tool of a `tools/call`.
    pub(crate) tool: Option<&'a str>,
    /// `traceparent` from the HTTP request, else from `params._meta`.
    pub(crate) traceparent: Option<&'a str>,
    pub(crate) session_id: Option<&'a str>,
    pub(crate) protocol_version: Option<String>,
    pub(crate) request_id: String,
    /// `tcp` (streamable HTTP) or `pipe` (stdio).
    pub(crate) transport: &'static str,
    pub(crate) start_ns: u64,
}

/// What the request got back: the `tools/call` result, or a protocol error.
pub(crate) enum Answer<'a> {
    Result(Option<&'a Value>),
    Error(&'a str),
}

pub(crate) fn served(
    req: &Request<'_>,
    arguments: Option<&Value>,
    answer: Answer<'_>,
    redactor: &Redactor,
) {
    let Some(exporter) = super::active() else {
        return;
    };
    let parent = req
        .traceparent
        .and_then(Parent::from_traceparent)
        .unwrap_or_else(super::command_parent);
    let name = match req.tool {
        Some(t) => format!("{} {}", req.method, redactor.str(t)),
        None => req.method.to_string(),
    };
    let mut span = Span::new(parent, name, Kind::Server);
    span.start_ns = req.start_ns;
    span.end_ns = now_ns().max(req.start_ns);
    span.set("mcp.method.name", req.method)
        .set("jsonrpc.request.id", redactor.str(&req.request_id))
        .set("network.transport", req.transport);
    if let Some(id) = req.session_id {
        span.set("mcp.session.id", redactor.str(id));
    }
    if let Some(v) = &req.protocol_version {
        span.set("mcp.protocol.version", v.clone());
    }
    if let Some(tool) = req.tool {
        span.set("gen_ai.operation.name", "execute_tool")
            .set("gen_ai.tool.name", redactor.str(tool));
    }
    let content = exporter.config.content;
    match answer {
        Answer::Result(Some(result)) => {
            if result["isError"] == true {
                let error = &result["structuredContent"]["error"];
                let kind = error["kind"].as_str().unwrap_or("tool_error");
                span.set("error.type", kind.to_string());
                span.error = Some(redactor.str(error["message"].as_str().unwrap_or(kind)));
            }
            if content {
                let mut shown = result.clone();
                redactor.value(&mut shown);
                span.set("gen_ai.tool.call.result", shown.to_string());
            }
        }
        Answer::Result(None) => {}
        Answer::Error(message) => {
            span.set("error.type", "jsonrpc_error");
            span.error = Some(redactor.str(message));
        }
    }
    if let (true, Some(args)) = (content, arguments) {
        let mut shown = args.clone();
        redactor.value(&mut shown);
        span.set("gen_ai.tool.call.arguments", shown.to_string());
    }
    exporter.send(vec![span]);
}

/// A remote MCP server's session as a run saw it (`mcp_connected`).
#[derive(Clone, Debug, Default)]
pub(crate) struct ClientSession {
    pub(crate) protocol: Option<String>,
    pub(crate) session: Option<String>,
}

/// Sessions by server name, for the runs of this process that export.
static SESSIONS: std::sync::Mutex<Vec<(String, ClientSession)>> = std::sync::Mutex::new(Vec::new());

/// Listens for MCP connections when export is on and the spec uses MCP servers; otherwise the
/// events stay as quiet (and as cheap) as they were.
pub(crate) fn watch_sessions(
    events: &mut crate::events::Events,
    registry: &crate::registry::Registry,
) {
    if super::active().is_none() {
        return;
    }
    let uses_mcp = registry
        .tools
        .iter()
        .any(|t| matches!(t.kind, crate::registry::ToolKind::Mcp(_)));
    if !uses_mcp {
        return;
    }
    events.tap(|event, data| {
        if event != "mcp_connected" {
            return;
        }
        let Some(server) = data["server"].as_str() else {
            return;
        };
        let seen = ClientSession {
            protocol: data["protocol"].as_str().map(str::to_string),
            session: data["session"].as_str().map(str::to_string),
        };
        if let Ok(mut sessions) = SESSIONS.lock() {
            sessions.retain(|(s, _)| s != server);
            sessions.push((server.to_string(), seen));
        }
    });
}

/// The `tools/call {tool}` CLIENT span of a call to a remote MCP server, under its
/// `execute_tool` span.
pub(crate) fn client_span(tool: &Span, server: &crate::registry::McpServer, remote: &str) -> Span {
    let mut span = Span::new(
        tool.as_parent(),
        format!("tools/call {remote}"),
        Kind::Client,
    );
    span.start_ns = tool.start_ns;
    span.end_ns = tool.end_ns;
    span.set("mcp.method.name", "tools/call")
        .set("gen_ai.operation.name", "execute_tool")
        .set("gen_ai.tool.name", remote.to_string());
    if server.stdio.is_some() {
        span.set("network.transport", "pipe");
    } else if let Ok(u) = url::Url::parse(&server.url) {
        span.set("network.transport", "tcp");
        if let Some(host) = u.host_str() {
            span.set("server.address", host.to_string());
        }
        if let Some(port) = u.port_or_known_default() {
            span.set("server.port", i64::from(port));
        }
    }
    let seen = SESSIONS
        .lock()
        .ok()
        .and_then(|s| {
            s.iter()
                .find(|(n, _)| *n == server.name)
                .map(|(_, c)| c.clone())
        })
        .unwrap_or_default();
    if let Some(v) = seen.protocol {
        span.set("mcp.protocol.version", v);
    }
    if let Some(id) = seen.session {
        span.set("mcp.session.id", id);
    }
    if let Some(e) = &tool.error {
        span.set("error.type", "tool_error");
        span.error = Some(e.clone());
    }
    span
}
