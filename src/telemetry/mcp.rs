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
    /// `traceparent` from `params._meta`, else from the HTTP request.
    pub(crate) traceparent: Option<&'a str>,
    pub(crate) session_id: Option<&'a str>,
    /// Whom the request's access token named (`serve.auth`); never the token.
    pub(crate) subject: Option<&'a str>,
    pub(crate) protocol_version: Option<String>,
    pub(crate) request_id: String,
    /// `tcp` (streamable HTTP) or `pipe` (stdio).
    pub(crate) transport: &'static str,
    pub(crate) start_ns: u64,
}

/// What the request got back: the `tools/call` result, or a JSON-RPC error (code, message).
pub(crate) enum Answer<'a> {
    Result(Option<&'a Value>),
    Error(i32, &'a str),
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
    if !parent.sampled {
        return;
    }
    // A refused call names a tool nobody serves: whatever a client sends would become a span
    // name, and backends index span names. Only a served tool is the name's target.
    let name = match (req.tool, &answer) {
        (Some(t), Answer::Result(_)) => format!("{} {}", req.method, redactor.str(t)),
        _ => req.method.to_string(),
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
    if let Some(subject) = req.subject {
        span.set("user.id", redactor.str(subject));
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
                // The MCP conventions name a result with `isError` `tool_error`; which error
                // it was stays beside it.
                let said = redactor.str(error["message"].as_str().unwrap_or(kind));
                span.fail("tool_error", said)
                    .set("toolrun.error.kind", kind.to_string());
            }
            if content {
                let mut shown = result.clone();
                redactor.value(&mut shown);
                span.set("gen_ai.tool.call.result", shown.to_string());
            }
        }
        Answer::Result(None) => {}
        // The MCP conventions: a JSON-RPC error is `error.type` and `rpc.response.status_code`,
        // both the error's code as a string.
        Answer::Error(code, message) => {
            span.fail(code.to_string(), redactor.str(message))
                .set("rpc.response.status_code", code.to_string());
        }
    }
    if let (true, Some(args)) = (content, arguments) {
        let mut shown = args.clone();
        redactor.value(&mut shown);
        span.set("gen_ai.tool.call.arguments", shown.to_string());
    }
    exporter.send(vec![span]);
}

/// One `tools/call` a run sent to a remote MCP server, as its exchange (live, recorded or
/// replayed) shows it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ClientCall {
    pub(crate) server: String,
    /// The server's name for the tool.
    pub(crate) remote: String,
    pub(crate) arguments: Value,
    pub(crate) request_id: Option<String>,
    pub(crate) session: Option<String>,
    pub(crate) protocol: Option<String>,
    /// `tcp` (streamable HTTP) or `pipe` (stdio).
    pub(crate) transport: &'static str,
    pub(crate) address: Option<String>,
    pub(crate) port: Option<i64>,
    /// The reply's JSON-RPC error code, when the server answered with one.
    pub(crate) rpc_error: Option<i64>,
    /// The reply was a result with `isError`: the tool itself failed.
    pub(crate) is_error: bool,
}

/// Whether a run of `registry` keeps its exchanges for its MCP CLIENT spans: export is on and
/// the spec has `kind: mcp` tools. Otherwise a live run records nothing, as before.
pub(crate) fn wants_exchanges(registry: &crate::registry::Registry) -> bool {
    super::active().is_some()
        && registry
            .tools
            .iter()
            .any(|t| matches!(t.kind, crate::registry::ToolKind::Mcp(_)))
}

/// The `tools/call` requests among a run's exchanges, in order, each with its session's id and
/// protocol revision (from the request's headers over HTTP, from `initialize` over stdio).
pub(crate) fn client_calls(exchanges: &[crate::fixture::Exchange]) -> Vec<ClientCall> {
    let mut protocols: Vec<(&str, String)> = Vec::new();
    let mut calls = Vec::new();
    for e in exchanges.iter().filter(|e| e.kind == "mcp") {
        let Some(body) = e.request.body.as_ref().filter(|b| b.is_object()) else {
            continue;
        };
        let header = |k: &str| e.request.headers.get(k).cloned();
        match body["method"].as_str() {
            Some("initialize") => {
                let reply = e
                    .response
                    .as_ref()
                    .and_then(|r| reply_to(&r.body, &body["id"]));
                if let Some(v) = reply
                    .as_ref()
                    .and_then(|r| r["result"]["protocolVersion"].as_str())
                {
                    protocols.retain(|(s, _)| *s != e.source);
                    protocols.push((&e.source, v.to_string()));
                }
            }
            Some("tools/call") => {
                let stdio = e.request.method == "STDIN";
                let url = (!stdio)
                    .then(|| url::Url::parse(&e.request.url).ok())
                    .flatten();
                let request_id = match &body["id"] {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                };
                let reply = e
                    .response
                    .as_ref()
                    .and_then(|r| reply_to(&r.body, &body["id"]));
                let reply = reply.as_ref();
                let protocol = header("mcp-protocol-version").or_else(|| {
                    protocols
                        .iter()
                        .find(|(s, _)| *s == e.source)
                        .map(|(_, v)| v.clone())
                });
                calls.push(ClientCall {
                    server: e.source.clone(),
                    remote: body["params"]["name"].as_str().unwrap_or("").to_string(),
                    arguments: body["params"]["arguments"].clone(),
                    request_id,
                    session: header("mcp-session-id"),
                    protocol,
                    transport: if stdio { "pipe" } else { "tcp" },
                    address: url.as_ref().and_then(|u| u.host_str().map(str::to_string)),
                    port: url
                        .as_ref()
                        .and_then(url::Url::port_or_known_default)
                        .map(i64::from),
                    rpc_error: reply.and_then(|r| r["error"]["code"].as_i64()),
                    is_error: reply.is_some_and(|r| r["result"]["isError"] == true),
                });
            }
            _ => {}
        }
    }
    calls
}

/// The JSON-RPC reply to `id` in a response body: the JSON itself, or one message of an event
/// stream or of several lines.
fn reply_to(body: &Value, id: &Value) -> Option<Value> {
    match body {
        Value::Object(_) => Some(body.clone()),
        Value::String(text) => text
            .lines()
            .map(|l| l.strip_prefix("data:").unwrap_or(l))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m["id"] == *id),
        _ => None,
    }
}

/// The `tools/call {tool}` CLIENT span of a call to a remote MCP server, under its
/// `execute_tool` span.
pub(crate) fn client_span(tool: &Span, call: &ClientCall, redactor: &Redactor) -> Span {
    let remote = redactor.str(&call.remote);
    let mut span = Span::new(
        tool.as_parent(),
        format!("tools/call {remote}"),
        Kind::Client,
    );
    span.start_ns = tool.start_ns;
    span.end_ns = tool.end_ns;
    span.set("mcp.method.name", "tools/call")
        .set("gen_ai.operation.name", "execute_tool")
        .set("gen_ai.tool.name", remote)
        .set("network.transport", call.transport);
    if let Some(host) = &call.address {
        span.set("server.address", redactor.str(host));
    }
    if let Some(port) = call.port {
        span.set("server.port", port);
    }
    for (key, value) in [
        ("jsonrpc.request.id", &call.request_id),
        ("mcp.session.id", &call.session),
        ("mcp.protocol.version", &call.protocol),
    ] {
        if let Some(v) = value {
            span.set(key, redactor.str(v));
        }
    }
    if let Some(e) = &tool.error {
        // The MCP conventions: a JSON-RPC error is its code, a result with `isError` is
        // `tool_error`; a call that got neither (a timeout, a lost server) keeps toolrun's kind.
        let kind = match (call.rpc_error, call.is_error) {
            (Some(code), _) => {
                span.set("rpc.response.status_code", code.to_string());
                code.to_string()
            }
            (None, true) => "tool_error".to_string(),
            (None, false) => tool.error_type().unwrap_or("tool_error").to_string(),
        };
        span.fail(kind, e.clone());
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::Exchange;
    use serde_json::json;

    fn exchange(method: &str, url: &str, headers: Value, body: Value, reply: Value) -> Exchange {
        serde_json::from_value(json!({
            "kind": "mcp", "source": "notes",
            "request": { "method": method, "url": url, "headers": headers, "body": body },
            "response": { "status": 200, "headers": {}, "body": reply },
        }))
        .unwrap()
    }

    #[test]
    fn calls_take_their_session_from_headers_or_from_initialize_over_stdio() {
        let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {} });
        let call = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": { "name": "echo", "arguments": { "text": "hi" } } });
        // Over stdio the reply is a line among others; over HTTP an event of a stream.
        let lines = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-06-18\"}}";
        let stdio = [
            exchange(
                "STDIN",
                "stdio: python s.py",
                json!({}),
                init.clone(),
                json!(lines),
            ),
            exchange(
                "STDIN",
                "stdio: python s.py",
                json!({}),
                call.clone(),
                json!({}),
            ),
        ];
        let calls = client_calls(&stdio);
        assert_eq!(calls.len(), 1);
        let c = &calls[0];
        assert_eq!((c.transport, c.remote.as_str()), ("pipe", "echo"));
        assert_eq!(c.protocol.as_deref(), Some("2025-06-18"));
        assert_eq!(c.request_id.as_deref(), Some("7"));
        assert_eq!((c.session.as_deref(), c.address.as_deref()), (None, None));
        assert_eq!(c.arguments, json!({ "text": "hi" }));

        let sse = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-03-26\"}}\n";
        let headers = json!({ "mcp-session-id": "s-1", "mcp-protocol-version": "2025-11-25" });
        let http = [
            exchange(
                "POST",
                "http://127.0.0.1:9/mcp",
                json!({}),
                init,
                json!(sse),
            ),
            exchange("POST", "http://127.0.0.1:9/mcp", headers, call, json!({})),
        ];
        let c = &client_calls(&http)[0];
        assert_eq!(c.transport, "tcp");
        assert_eq!(c.session.as_deref(), Some("s-1"));
        // The request's own header wins over what `initialize` answered.
        assert_eq!(c.protocol.as_deref(), Some("2025-11-25"));
        assert_eq!((c.address.as_deref(), c.port), (Some("127.0.0.1"), Some(9)));
        assert_eq!((c.rpc_error, c.is_error), (None, false));
    }

    #[test]
    fn a_calls_reply_says_whether_the_server_or_the_tool_failed() {
        let call = |id: u64| json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": "echo", "arguments": {} } });
        let refused = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"unknown tool\"}}\n";
        let failed =
            json!({ "jsonrpc": "2.0", "id": 2, "result": { "isError": true, "content": [] } });
        let calls = client_calls(&[
            exchange("POST", "http://h/mcp", json!({}), call(1), json!(refused)),
            exchange("POST", "http://h/mcp", json!({}), call(2), failed),
        ]);
        assert_eq!(
            (calls[0].rpc_error, calls[0].is_error),
            (Some(-32602), false)
        );
        assert_eq!((calls[1].rpc_error, calls[1].is_error), (None, true));
        let mut tool = Span::new(Parent::root(), "execute_tool echo", Kind::Internal);
        tool.set("error.type", "timeout");
        tool.error = Some("failed".into());
        let attr = |s: &Span, key: &str| {
            s.attributes
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        let redactor = Redactor::default();
        let refused = client_span(&tool, &calls[0], &redactor);
        assert_eq!(attr(&refused, "error.type"), Some("-32602".into()));
        assert_eq!(
            attr(&refused, "rpc.response.status_code"),
            Some("-32602".into())
        );
        let failed = client_span(&tool, &calls[1], &redactor);
        assert_eq!(attr(&failed, "error.type"), Some("tool_error".into()));
        let unanswered = ClientCall {
            is_error: false,
            ..calls[1].clone()
        };
        let timed_out = client_span(&tool, &unanswered, &redactor);
        assert_eq!(attr(&timed_out, "error.type"), Some("timeout".into()));
    }
}
