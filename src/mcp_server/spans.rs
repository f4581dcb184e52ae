//! The span of a request rmcp's handler answers, read from its context: the HTTP request's
//! headers when it came over HTTP, and the protocol revision of the session or, on 2026-07-28,
//! of the request itself.

use crate::telemetry::mcp as telemetry;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::Value;
use std::sync::Arc;

/// A request as its span describes it: the HTTP request's headers when it came over HTTP.
pub(crate) fn served_request<'a>(
    context: &'a RequestContext<RoleServer>,
    method: &'a str,
    tool: Option<&'a str>,
    start_ns: u64,
    session: Option<&'a str>,
) -> telemetry::Request<'a> {
    let parts = context.extensions.get::<hyper::http::request::Parts>();
    let principal = parts.and_then(|p| p.extensions.get::<Arc<super::auth::Principal>>());
    let header = |name: &str| {
        parts
            .and_then(|p| p.headers.get(name))
            .and_then(|v| v.to_str().ok())
    };
    let request_id = match serde_json::to_value(&context.id) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    };
    telemetry::Request {
        method,
        tool,
        // The MCP conventions: the request's own context (`params._meta`) is the parent; the
        // HTTP request's only stands in when it has none.
        traceparent: context
            .meta
            .get_traceparent()
            .or_else(|| header("traceparent")),
        session_id: header("mcp-session-id").or(session),
        subject: principal.map(|p| p.subject.as_str()),
        protocol_version: context.protocol_version().map(|v| v.to_string()),
        request_id,
        transport: if parts.is_some() { "tcp" } else { "pipe" },
        start_ns,
    }
}
