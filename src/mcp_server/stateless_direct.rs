//! MCP 2026-07-28's common `tools/call` and `tools/list`, answered without rmcp. Such a request
//! has no session: rmcp reads it into typed messages, makes a handler and a service loop for it
//! alone, runs the handler in a task of its own and frames its answer as an event stream, which
//! `answer` reads back into one JSON body — more of the server's CPU than the call itself. Here
//! the request is answered on the connection's task by the same code as rmcp's handler: a
//! handler of its own ([`ServedSession`], as rmcp makes one a request) running the call under
//! the same [`stateless`] request (its client's capabilities and log level), so the limits, loop
//! detection, `mcp_call` event, recording, span and answer are those of rmcp's path (tested side
//! by side in tests/mcp_serve_2026.rs). A client that hangs up cancels its call, as 2026-07-28
//! has a client cancel (and rmcp's path does): the tool's work is dropped and the call is
//! recorded as cut off.
//!
//! Left to rmcp, so that what a client sees there is rmcp's behaviour: a request it would refuse
//! or read otherwise (a header that does not say what the body says, metadata missing or of
//! another revision, a session id, `Mcp-Param-*` headers or a tool whose schema asks for them, a
//! cursor, a member this reader does not know), a confirmation's retry (`requestState`,
//! `inputResponses`), a tool that may be held for confirmation, a call that may notify its
//! client before its result (progress, logs, a remote MCP tool's), an unknown tool, and every
//! call of a spec with `task:` tools (the tasks extension's).

use super::auth::Principal;
use super::cancel::cancellable;
use super::direct::{self, accepts_both, loopback_host, Detached};
use super::result::CallResult;
use super::server::{Origin, Served, ServedSession};
use super::stateless::{self, OneRequest};
use crate::telemetry::mcp as telemetry;
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::Response;
use rmcp::model::{
    CallToolResult, ClientCapabilities, ProgressToken, RequestMetaObject, ResultType,
};
use rmcp::ErrorData;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use tokio_util::sync::CancellationToken;

type Body = BoxBody<Bytes, Infallible>;

/// What answering a served registry's 2026-07-28 requests needs, worked out once.
pub(crate) struct Requests {
    served: Arc<Served>,
    /// The tools whose calls may be answered here: those without `x-mcp-header` parameters in
    /// their schema (rmcp checks them against `Mcp-Param-*` headers), each with whether a call
    /// of it can notify its client before its result, without and with a progress token.
    tools: foldhash::HashMap<String, (bool, bool)>,
    /// The `tools/list` result of a request without `serve.auth`'s principal, written once.
    listed: OnceLock<Vec<u8>>,
}

impl Requests {
    pub(crate) fn new(served: Arc<Served>) -> Requests {
        // A handler made only to ask what may notify; it makes no call.
        let asked = ServedSession::new(&served);
        let tools = (served.tools.iter())
            .filter(|t| {
                serde_json::to_string(&t.input_schema)
                    .is_ok_and(|s| !s.contains("\"x-mcp-header\""))
            })
            .map(|t| {
                let notifies = (
                    asked.may_notify(&t.name, false),
                    asked.may_notify(&t.name, true),
                );
                (t.name.to_string(), notifies)
            })
            .collect();
        Requests {
            served,
            tools,
            listed: OnceLock::new(),
        }
    }

    /// The request in a POST without a session, when it is one answered here; `token`: a
    /// token guards the server (rmcp then checks no `Host`). `None`: rmcp's.
    pub(crate) fn take(
        &self,
        parts: &hyper::http::request::Parts,
        body: &[u8],
        token: bool,
    ) -> Option<Taken> {
        let headers = &parts.headers;
        if headers.contains_key("mcp-session-id")
            || !accepts_both(headers)
            || !(token || loopback_host(headers))
            || sole(headers, "mcp-protocol-version")? != V2026
            || headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
        {
            return None;
        }
        let text = std::str::from_utf8(body).ok()?;
        let message: Message = serde_json::from_str(text).ok()?;
        if message.jsonrpc != "2.0"
            // rmcp's request ids are strings and integers.
            || !(message.id.is_string() || message.id.is_i64())
            || sole(headers, "mcp-method")? != message.method
        {
            return None;
        }
        let params = message.params;
        let meta = params.meta;
        if meta.protocol_version()?.as_str() != V2026 {
            return None;
        }
        let capabilities = meta.client_capabilities()?;
        let principal = parts.extensions.get::<Arc<Principal>>().cloned();
        let call = match (&*message.method, params.name) {
            ("tools/list", None) if params.arguments.is_none() => None,
            ("tools/call", Some(name)) => {
                let found = (name, params.arguments, capabilities);
                Some(self.call(headers, found, &meta, principal.as_deref())?)
            }
            _ => return None,
        };
        let traceparent = meta
            .get_traceparent()
            .or_else(|| headers.get("traceparent").and_then(|v| v.to_str().ok()))
            .map(String::from);
        Some(Taken {
            id: message.id,
            call,
            traceparent,
            principal,
        })
    }

    /// A `tools/call` of `name` answered here, with a handler of its own.
    fn call(
        &self,
        headers: &HeaderMap,
        (name, arguments, capabilities): (String, Option<Map<String, Value>>, ClientCapabilities),
        meta: &RequestMetaObject,
        principal: Option<&Principal>,
    ) -> Option<Call> {
        // rmcp reads `Mcp-Name` as Base64 when it is wrapped so: only a plain one is read here.
        let named = sole(headers, "mcp-name")?;
        if named != name || named.starts_with("=?base64?") {
            return None;
        }
        let served = &*self.served;
        // A spec with `task:` tools has its calls made tasks or not by rmcp's path.
        if served.has_tasks {
            return None;
        }
        let tool = served.registry.tool(&name)?;
        let confirms = (tool.confirm || tool.confirm_hint().is_some())
            && !served.setup.approvals.contains(&name);
        let progress = meta.get_progress_token();
        let notifies = match self.tools.get(&name)? {
            (without, _) if progress.is_none() => *without,
            (_, with) => *with,
        };
        if confirms || notifies {
            return None;
        }
        let session = ServedSession::new(&self.served);
        if let Some(p) = principal {
            let _ = session.subject.set(p.subject.as_str().into());
        }
        Some(Call {
            session,
            name,
            arguments: Value::Object(arguments.unwrap_or_default()),
            progress,
            one: OneRequest::asking(Some(capabilities), meta),
        })
    }
}

/// `ProtocolVersion::V_2026_07_28` (its `as_str` is no `const fn`).
const V2026: &str = "2026-07-28";

/// The one value of a header that rmcp reads as text; none, several or not text: `None`.
fn sole<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    match values.next() {
        Some(_) => None,
        None => first.to_str().ok(),
    }
}

/// The body, read as `direct`'s 2025-11-25 one is, with these params: a member not named here
/// makes the request rmcp's.
type Message<'a> = direct::Message<'a, Params>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
    #[serde(rename = "_meta")]
    meta: RequestMetaObject,
}

/// A request taken by [`Requests::take`].
pub(crate) struct Taken {
    id: Value,
    /// `None`: a `tools/list`.
    call: Option<Call>,
    /// From `params._meta`, else the HTTP request's.
    traceparent: Option<String>,
    principal: Option<Arc<Principal>>,
}

/// A `tools/call` taken, with the handler it runs in.
struct Call {
    session: ServedSession,
    name: String,
    arguments: Value,
    progress: Option<ProgressToken>,
    one: OneRequest,
}

impl Taken {
    /// Answers the request as rmcp's handler would: one JSON body.
    pub(crate) async fn answer(self, requests: &Requests) -> Response<Body> {
        let start = crate::telemetry::clock();
        let served = &*requests.served;
        let principal = self.principal.as_deref();
        let span = |method, tool| telemetry::Request {
            method,
            tool,
            traceparent: self.traceparent.as_deref(),
            session_id: None,
            subject: principal.map(|p| p.subject.as_str()),
            protocol_version: Some(V2026.to_string()),
            request_id: match &self.id {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
            transport: "tcp",
            start_ns: start.unwrap_or_default(),
        };
        let result = match self.call {
            None => {
                if start.is_some() {
                    let answer = telemetry::Answer::Result(None);
                    let req = span("tools/list", None);
                    telemetry::served(&req, None, answer, &served.setup.redactor);
                }
                // The tools the caller may see, as `ServedSession::visible_tools` has them.
                let listing = |principal: Option<&Principal>| {
                    let registry = &served.registry;
                    let tools = served.tools.iter().filter(|t| {
                        principal.is_none_or(|p| {
                            registry.tool(&t.name).is_some_and(|t| p.has_all(&t.scopes))
                        })
                    });
                    let result = stateless::listing(tools.cloned().collect(), true);
                    serde_json::to_vec(&result).unwrap_or_default()
                };
                match principal {
                    None => Ok(requests.listed.get_or_init(|| listing(None)).clone()),
                    Some(p) => Ok(listing(Some(p))),
                }
            }
            Some(Call {
                session,
                name,
                arguments,
                progress,
                one,
            }) => {
                let kept = arguments.clone();
                // A span reads the result as JSON.
                let as_text = start.is_none();
                // Dropped with this request (its client hung up), the call is cancelled: what
                // is left of it runs only to be recorded as cut off.
                let cancel = CancellationToken::new();
                let _hung_up = cancel.clone().drop_guard();
                let work = Detached(Some(Box::pin(cancellable(cancel, async move {
                    let one = Arc::new(one);
                    let origin = Origin::Client(None, progress, None, None);
                    let call = session.answer(&name, arguments, origin, as_text);
                    let response = stateless::scope(Some(one.clone()), call).await;
                    (response, name, one)
                }))));
                let (response, name, one) = work.await;
                let subject = principal.map(|p| p.subject.as_str());
                let call = super::state::Call(&name, &kept, subject);
                let asked = stateless::asked(&served.state_key, &one, call);
                if start.is_some() {
                    let asked = asked.as_ref().and_then(|a| serde_json::to_value(a).ok());
                    let value = asked.unwrap_or_else(|| response.to_value());
                    let answer = telemetry::Answer::Result(Some(&value));
                    let req = span("tools/call", Some(&name));
                    telemetry::served(&req, Some(&kept), answer, &served.setup.redactor);
                }
                match asked {
                    Some(asked) => Ok(serde_json::to_vec(&asked).unwrap_or_default()),
                    None => complete(response),
                }
            }
        };
        json_answer(&self.id, result)
    }
}

/// A call's result as rmcp writes it on 2026-07-28: `resultType` first, then the members of
/// rmcp's `CallToolResult` in its order. A text result is written out as it is (no JSON tree
/// made for it); any other goes through rmcp's type, as on rmcp's path.
fn complete(result: CallResult) -> Result<Vec<u8>, ErrorData> {
    match result {
        CallResult::Text { text, structured } => {
            let mut out = Vec::with_capacity(80 + text.len() * if structured { 2 } else { 1 });
            out.extend_from_slice(br#"{"resultType":"complete","content":[{"type":"text","text":"#);
            // Writing JSON into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut out, &text);
            out.extend_from_slice(b"}]");
            if structured {
                out.extend_from_slice(br#","structuredContent":"#);
                out.extend_from_slice(text.as_bytes());
            }
            out.extend_from_slice(br#","isError":false}"#);
            Ok(out)
        }
        CallResult::Json(value) => {
            let mut result: CallToolResult = serde_json::from_value(value)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            result.result_type = Some(ResultType::COMPLETE);
            serde_json::to_vec(&result).map_err(|e| ErrorData::internal_error(e.to_string(), None))
        }
    }
}

/// The JSON-RPC response holding `result` (JSON already written) or the error, as one body.
fn json_answer(id: &Value, result: Result<Vec<u8>, ErrorData>) -> Response<Body> {
    let body = match result {
        Ok(result) => {
            let mut body = Vec::with_capacity(48 + result.len());
            body.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            let _ = serde_json::to_writer(&mut body, id);
            body.extend_from_slice(b",\"result\":");
            body.extend_from_slice(&result);
            body.push(b'}');
            body
        }
        Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error })
            .to_string()
            .into(),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed());
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ProtocolVersion;

    #[test]
    fn the_revision_is_rmcps() {
        assert_eq!(V2026, ProtocolVersion::V_2026_07_28.as_str());
    }

    #[test]
    fn a_header_is_read_only_when_it_is_one_text_value() {
        let mut h = HeaderMap::new();
        assert_eq!(sole(&h, "mcp-method"), None);
        h.append("mcp-method", HeaderValue::from_static("tools/call"));
        assert_eq!(sole(&h, "mcp-method"), Some("tools/call"));
        h.append("mcp-method", HeaderValue::from_static("tools/call"));
        assert_eq!(sole(&h, "mcp-method"), None);
        let mut h = HeaderMap::new();
        h.append(
            "mcp-name",
            HeaderValue::from_bytes(&[0xff]).expect("a header value"),
        );
        assert_eq!(sole(&h, "mcp-name"), None);
    }

    #[test]
    fn members_rmcp_reads_leave_the_request_to_it() {
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        let parse = |params: &str| {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{{params}}}}}"#
            );
            serde_json::from_str::<Message>(&body).is_ok()
        };
        assert!(parse(&format!(
            r#""name":"t","arguments":{{"a":1}},{meta}"#
        )));
        assert!(!parse(&format!(r#""name":"t","requestState":"x",{meta}"#)));
        assert!(!parse(&format!(
            r#""name":"t","inputResponses":{{}},{meta}"#
        )));
        assert!(!parse(&format!(r#""name":"t","task":{{}},{meta}"#)));
        assert!(!parse(r#""name":"t""#));
    }

    #[test]
    fn a_text_result_is_written_as_rmcp_writes_it() {
        let object = json!({ "a": "x\"y\n", "b": [1, 2.5, null] });
        for (text, structured) in [
            (object.to_string(), true),
            ("plain \"text\"\n".into(), false),
        ] {
            let result = CallResult::Text { text, structured };
            let through_rmcp = complete(CallResult::Json(result.to_value())).expect("read");
            let written = complete(result).expect("written");
            assert_eq!(
                String::from_utf8(written).expect("utf-8"),
                String::from_utf8(through_rmcp).expect("utf-8")
            );
        }
    }
}
