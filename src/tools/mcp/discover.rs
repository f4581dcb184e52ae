//! Negotiating the revision with a server (`server/discover` at 2026-07-28, else the
//! `initialize` of older revisions) and requests that complete over rounds of input
//! (2026-07-28's `input_required`); the wire details are `modern`'s.

use super::exchange::Rpc;
use super::modern::{add_meta, retry_params, MODERN};
use super::rpc::Incoming;
use super::{sse, ClientSession, Connected, MAX_BYTES, SUPPORTED};
use crate::net::SendOptions;
use crate::tools::{ErrorKind, ToolError};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;

/// JSON-RPC errors of 2026-07-28 that say the request was understood and refused, not that the
/// server speaks an older revision.
const UNSUPPORTED_VERSION: i64 = -32022;
const MODERN_REFUSALS: &[i64] = &[-32020, -32021];
/// Rounds of `input_required` answered for one request before giving up on a server that
/// never stops asking.
const MAX_INPUT_ROUNDS: usize = 10;

/// What `server/discover` found.
pub(super) enum Discovered {
    /// A server of 2026-07-28: the session's revision, with no session id.
    Modern(Connected),
    /// A server of an older revision: why, for the `initialize` that follows.
    Legacy(String),
}

/// Asks the server `server/discover` at 2026-07-28; a refusal naming that revision among the
/// supported ones is retried once (the conformance suite's server refuses the first request).
pub(super) async fn discover(
    rpc: &Rpc<'_, '_>,
    session: &ClientSession,
) -> Result<Discovered, ToolError> {
    let mut retried = false;
    loop {
        let conn = Connected {
            session_id: None,
            protocol: MODERN.to_string(),
        };
        let rpc = Rpc {
            conn: Some(&conn),
            ..*rpc
        };
        let id = session.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        let mut params = json!({});
        add_meta(&mut params, MODERN);
        let body =
            json!({ "jsonrpc": "2.0", "id": id, "method": "server/discover", "params": params });
        let opts = SendOptions {
            timeout: rpc.timeout,
            max_bytes: MAX_BYTES,
            progress: None,
            on_chunk: None,
            reshape: Some(sse::to_json),
        };
        let sent = match &rpc.server.stdio {
            Some(cmd) => rpc.send_stdio(cmd, &body, opts, None).await?,
            None => {
                let req = rpc.build("POST", Some(&body)).await?;
                rpc.send_http(&req, opts).await
            }
        };
        let resp = sent.map_err(|e| rpc.net_error("server/discover", e))?;
        let status = resp.status;
        let message = reply_to(&resp.body, id);
        let error = message.as_ref().and_then(|m| m.get("error"));
        let code = error.and_then(|e| e.get("code")).and_then(Value::as_i64);
        if resp.truncated || matches!(status, 401 | 403) || status >= 500 {
            return Err(rpc
                .checked("server/discover", resp)
                .err()
                .unwrap_or_else(|| {
                    rpc.fail(format!(
                        "answered `server/discover` with more than {MAX_BYTES} bytes"
                    ))
                }));
        }
        if let Some(result) = message.as_ref().and_then(|m| m.get("result")) {
            if (200..300).contains(&status) {
                let Some(versions) = result.get("supportedVersions").and_then(Value::as_array)
                else {
                    return Ok(Discovered::Legacy(
                        "its `server/discover` result names no supportedVersions".into(),
                    ));
                };
                return chosen(&rpc, versions, conn.clone());
            }
        }
        if code == Some(UNSUPPORTED_VERSION) {
            let supported = error
                .and_then(|e| e.pointer("/data/supported"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if supported.contains(&json!(MODERN)) && !retried {
                retried = true;
                continue;
            }
            return chosen(&rpc, &supported, conn.clone());
        }
        if let Some(code) = code.filter(|c| MODERN_REFUSALS.contains(c)) {
            let text = error.and_then(|e| e.get("message")).and_then(Value::as_str);
            return Err(rpc.fail(format!(
                "refused `server/discover` (error {code}): {}",
                text.unwrap_or_default()
            )));
        }
        return Ok(Discovered::Legacy(match code {
            Some(code) => format!("it answered `server/discover` with error {code}"),
            None => format!("it answered `server/discover` with HTTP {status}"),
        }));
    }
}

/// The revision to speak given the ones a server supports: 2026-07-28, else an older one
/// toolrun speaks (by `initialize`), else none in common.
fn chosen(rpc: &Rpc<'_, '_>, versions: &[Value], conn: Connected) -> Result<Discovered, ToolError> {
    if versions.contains(&json!(MODERN)) {
        return Ok(Discovered::Modern(conn));
    }
    if versions
        .iter()
        .any(|v| v.as_str().is_some_and(|v| SUPPORTED.contains(&v)))
    {
        return Ok(Discovered::Legacy("it supports an older revision".into()));
    }
    let named: Vec<String> = versions.iter().map(Value::to_string).collect();
    Err(rpc.fail(format!(
        "supports MCP revisions {}; toolrun speaks {MODERN}, {}",
        named.join(", "),
        SUPPORTED.join(", ")
    )))
}

/// The JSON-RPC message of a reply that answers request `id` (an event stream's messages come
/// as an array), or the only message there is.
fn reply_to(body: &[u8], id: u64) -> Option<Value> {
    match serde_json::from_slice::<Value>(body).ok()? {
        Value::Array(items) => items
            .into_iter()
            .find(|m| m.get("id") == Some(&json!(id)) && m.get("method").is_none()),
        one => Some(one),
    }
}

impl Rpc<'_, '_> {
    /// A request's complete result: one that asks for input is answered and the request sent
    /// again, under a new id, until it is complete (see [`retry_params`]).
    pub(super) async fn request(
        &self,
        session: &ClientSession,
        method: &str,
        mut params: Value,
    ) -> Result<Value, ToolError> {
        let tool = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let incoming = Incoming {
            server: self.server,
            env: self.env,
            tool: &tool,
        };
        for _ in 0..=MAX_INPUT_ROUNDS {
            let result = self.exchange(session, method, params.clone()).await?.0;
            match retry_params(&result, &params, &incoming) {
                Ok(None) => return Ok(result),
                Ok(Some(again)) => params = again,
                Err(why) => return Err(self.fail(why)),
            }
        }
        Err(ToolError::new(
            ErrorKind::ExecutionError,
            format!(
                "MCP server `{}` asked for input {MAX_INPUT_ROUNDS} times in answer to `{method}` and never completed it",
                self.server.name
            ),
        ))
    }
}
