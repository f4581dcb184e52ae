//! JSON-RPC over `POST /mcp` as the specification words it, around rmcp's service: malformed
//! JSON is HTTP 400 with error -32700 (rmcp answers 415), a message that is JSON but not
//! JSON-RPC is 400 with -32600, and a batch (an array, the 2025-03-26 revision's) is answered
//! with one array of responses instead of a 415 (an `initialize` in it with an error: it must
//! come alone). The body is read here once, bounded in size
//! and in time, and handed on as it came: the common single message is parsed only by rmcp.

use super::server::ServedSession;
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::StreamableHttpService;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::time::Duration;

type Body = BoxBody<Bytes, Infallible>;
type Service = StreamableHttpService<ServedSession, LocalSessionManager>;

/// rmcp's own limit on a request body, and the stdio transport's on a line (`super::lines`): a
/// message costs as much memory at most over either.
pub(crate) const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The request's body, read whole (bounded in size, and in time by `--read-timeout`: a client
/// that starts a body and stops sending holds a connection), or the answer refusing it.
pub(crate) async fn read(
    req: Request<Incoming>,
    timeout: Duration,
) -> Result<(hyper::http::request::Parts, Bytes), Response<Body>> {
    let (parts, body) = req.into_parts();
    let bytes =
        match tokio::time::timeout(timeout, Limited::new(body, MAX_BODY_BYTES).collect()).await {
            Err(_) => {
                return Err(plain(
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive in time\n",
                ))
            }
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                return Err(plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "the request body is larger than 4 MiB\n",
                ))
            }
            Ok(Err(_)) => {
                return Err(plain(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read\n",
                ))
            }
            Ok(Ok(collected)) => collected.to_bytes(),
        };
    Ok((parts, bytes))
}

/// A message read by [`read`], answered by rmcp's service (a batch, message by message).
pub(crate) async fn post(
    service: &Service,
    parts: hyper::http::request::Parts,
    bytes: Bytes,
) -> Response<Body> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return batch(service, &parts, &bytes).await;
    }
    // The common case: one message, handed on with its own headers (no copy of them).
    let resp = service
        .handle(Request::from_parts(parts, Full::new(bytes.clone())))
        .await;
    if resp.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return resp;
    }
    // rmcp could not read the message: say why in JSON-RPC's terms.
    match serde_json::from_slice::<Value>(&bytes) {
        Err(e) => error_response(Value::Null, -32700, &format!("Parse error: {e}")),
        Ok(message) => error_response(
            message.get("id").cloned().unwrap_or(Value::Null),
            -32600,
            "Invalid Request: not a JSON-RPC 2.0 request, notification or response this server knows",
        ),
    }
}

/// A batch: each message goes through the service on its own, as if posted alone, and the
/// responses come back together (notifications and responses have none).
async fn batch(
    service: &Service,
    parts: &hyper::http::request::Parts,
    bytes: &[u8],
) -> Response<Body> {
    let messages = match serde_json::from_slice::<Value>(bytes) {
        Err(e) => return error_response(Value::Null, -32700, &format!("Parse error: {e}")),
        Ok(Value::Array(items)) if !items.is_empty() => items,
        Ok(_) => return error_response(Value::Null, -32600, "Invalid Request: an empty batch"),
    };
    let mut answers = Vec::new();
    let mut session = None;
    for message in messages {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let is_request = message.get("method").is_some() && message.get("id").is_some();
        // MCP: `initialize` must not be part of a batch. Each would open a session, past
        // `--max-sessions` (the room for one is made once a request).
        if message.get("method").and_then(Value::as_str) == Some("initialize") {
            answers.push(error_message(
                id,
                -32600,
                "Invalid Request: `initialize` may not be part of a batch; send it alone",
            ));
            continue;
        }
        let resp = service
            .handle(rebuild(parts, Bytes::from(message.to_string())))
            .await;
        if let Some(s) = resp.headers().get("mcp-session-id") {
            session = Some(s.clone());
        }
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let found = responses(&content_type, &body);
        if found.is_empty() && is_request {
            let text = String::from_utf8_lossy(&body).trim().to_string();
            let code = if status == StatusCode::UNSUPPORTED_MEDIA_TYPE {
                -32600
            } else {
                -32603
            };
            answers.push(error_message(
                id,
                code,
                &format!("HTTP {}: {text}", status.as_u16()),
            ));
        }
        answers.extend(found);
    }
    if answers.is_empty() {
        return accepted();
    }
    let mut resp = json_response(StatusCode::OK, &Value::Array(answers));
    if let Some(s) = session {
        resp.headers_mut().insert("mcp-session-id", s);
    }
    resp
}

/// The JSON-RPC responses in one answer of the service: a JSON body, or the `data:` of an
/// event stream's events (notifications along the way are not part of a batch's answer).
fn responses(content_type: &str, body: &[u8]) -> Vec<Value> {
    let is_response = |v: &Value| {
        v.get("id").is_some() && (v.get("result").is_some() || v.get("error").is_some())
    };
    if content_type.starts_with("application/json") {
        return serde_json::from_slice::<Value>(body)
            .ok()
            .filter(is_response)
            .into_iter()
            .collect();
    }
    let text = String::from_utf8_lossy(body).replace("\r\n", "\n");
    text.split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            serde_json::from_str::<Value>(&data.join("\n")).ok()
        })
        .filter(is_response)
        .collect()
}

fn rebuild(parts: &hyper::http::request::Parts, body: Bytes) -> Request<Full<Bytes>> {
    let mut req = Request::new(Full::new(body));
    *req.method_mut() = parts.method.clone();
    *req.uri_mut() = parts.uri.clone();
    *req.version_mut() = parts.version;
    *req.headers_mut() = parts.headers.clone();
    // The call's hang-up (see `resume`) reaches the tool this way.
    *req.extensions_mut() = parts.extensions.clone();
    req
}

/// Whether a body is an `initialize` request, the one message that opens a session.
pub(crate) fn opens_session(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .is_ok_and(|m| m.get("method").and_then(Value::as_str) == Some("initialize"))
}

/// The JSON-RPC error of a request made while the server stops.
const DRAINING: i64 = -32000;
const DRAINING_TEXT: &str =
    "the server is shutting down; send the request to another server or when it is back";

/// The answer to a body that asks for something new (a request: a call, a new session) while
/// the server stops: 503 with a JSON-RPC error for each request in it; `None` for a body that
/// only answers or notifies.
pub(crate) fn refused_while_draining(body: &[u8]) -> Option<Response<Body>> {
    let message: Value = serde_json::from_slice(body).ok()?;
    let asks = |m: &Value| m.get("method").is_some() && m.get("id").is_some();
    match &message {
        Value::Array(items) => {
            let ids: Vec<Value> = items
                .iter()
                .filter(|m| asks(m))
                .map(|m| m["id"].clone())
                .collect();
            (!ids.is_empty()).then(|| draining(&ids, true))
        }
        m if asks(m) => Some(draining(&[m["id"].clone()], false)),
        _ => None,
    }
}

/// 202 with no body: what a POST of notifications (or responses) alone is answered.
pub(crate) fn accepted() -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::new()).boxed());
    *resp.status_mut() = StatusCode::ACCEPTED;
    resp
}

/// 503, `Retry-After`, and a JSON-RPC error for each of `ids` (an array of them for a batch).
pub(crate) fn draining(ids: &[Value], batch: bool) -> Response<Body> {
    let error = |id: &Value| error_message(id.clone(), DRAINING, DRAINING_TEXT);
    let body = if batch {
        Value::Array(ids.iter().map(error).collect())
    } else {
        error(ids.first().unwrap_or(&Value::Null))
    };
    let mut resp = json_response(StatusCode::SERVICE_UNAVAILABLE, &body);
    resp.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    // A client (or load balancer) that kept the connection for its next request would race the
    // server closing it as it stops: that request could be lost with no answer.
    resp.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    resp
}

pub(crate) fn error_message(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

fn error_response(id: Value, code: i64, message: &str) -> Response<Body> {
    json_response(StatusCode::BAD_REQUEST, &error_message(id, code, message))
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *resp.status_mut() = status;
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_read_from_json_and_event_streams() {
        let sse = b"id: 0/0\nretry: 3000\ndata:\n\nid: 1/0\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\nid: 2/0\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n";
        assert_eq!(
            responses("text/event-stream", sse),
            vec![json!({ "jsonrpc": "2.0", "id": 3, "result": {} })]
        );
        assert_eq!(
            responses(
                "application/json",
                br#"{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"m"}}"#
            )
            .len(),
            1
        );
        assert!(responses("application/json", b"not json").is_empty());
    }
}
