//! A served session in the fixture format (`serve --record`), and back: every `tools/call` is a
//! `served` exchange holding what the client sent (and the clock and confirmation it ran with)
//! and the result sent back, each session's calls in the order it admitted them (calls at once
//! may end in another order); the HTTP exchanges the tools
//! made follow; the trace lists the session's tool results and errors.

use super::server::LoggedCall;
use crate::fixture::{Exchange, Fixture, FixtureSpec, RecordedRequest, RecordedResponse};
use crate::registry::Registry;
use serde_json::{json, Value};

/// The exchange kind of a call a client made to `toolrun serve`.
pub(crate) const SERVED: &str = "served";

use crate::fixture::SESSION_ENDED;

/// The fixture of a served session: `http` are the tools' HTTP exchanges, in order.
pub(crate) fn session_fixture(
    registry: &Registry,
    spec: FixtureSpec,
    calls: &[LoggedCall],
    http: Vec<Exchange>,
    approvals: Vec<String>,
    now_unix_ms: i64,
) -> Fixture {
    let mut exchanges: Vec<Exchange> = calls.iter().map(exchange).collect();
    exchanges.extend(http);
    let trace = session_trace(registry, calls);
    Fixture::recorded(
        spec,
        String::new(),
        "mcp".into(),
        now_unix_ms,
        approvals,
        exchanges,
        trace,
    )
}

/// The session as a trace: what ran and what failed, in the order the calls were logged.
pub(crate) fn session_trace(registry: &Registry, calls: &[LoggedCall]) -> Value {
    let tool_results: Vec<Value> = calls
        .iter()
        .filter_map(|c| c.result.as_ref())
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect();
    let tool_errors: Vec<Value> = calls
        .iter()
        .filter_map(|c| c.error.as_ref())
        .filter_map(|e| serde_json::to_value(e).ok())
        .collect();
    json!({
        "format_version": crate::trace::FORMAT_VERSION,
        "status": "ok",
        "stop_reason": SESSION_ENDED,
        "query": "",
        "model": "mcp",
        "spec": { "name": registry.name, "sha256": registry.spec_sha256 },
        "tool_call_count": tool_results.len(),
        "tool_results": tool_results,
        "tool_errors": tool_errors,
        "steps": 0,
        "messages": [],
    })
}

fn exchange(call: &LoggedCall) -> Exchange {
    let mut body = json!({
        "name": call.name,
        "arguments": call.arguments,
        "now_unix_ms": call.now_unix_ms,
    });
    if let Some(c) = &call.confirmation {
        body["confirmation"] = json!(c);
    }
    Exchange {
        kind: SERVED.into(),
        source: call.session.clone(),
        request: RecordedRequest {
            method: "tools/call".into(),
            url: format!("mcp:{}", call.name),
            headers: Default::default(),
            body: Some(body),
        },
        response: Some(RecordedResponse {
            status: 200,
            headers: Default::default(),
            body: call.response.clone(),
            truncated: false,
        }),
        error: None,
    }
}

/// The served calls of a fixture, in order, as they were logged (what the tool returned is in the
/// trace, not here); an exchange that is not a well-formed served call is an error naming its
/// position.
pub(crate) fn recorded_calls(fixture: &Fixture) -> Result<Vec<LoggedCall>, String> {
    let mut calls = Vec::new();
    for (i, e) in fixture.exchanges.iter().enumerate() {
        if e.kind != SERVED {
            continue;
        }
        let body = e.request.body.clone().unwrap_or(Value::Null);
        let bad = |what: &str| format!("exchange {i} (a served call) {what}");
        let name = body
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("has no tool `name` in its request body"))?;
        let confirmation = match body.get("confirmation") {
            None => None,
            Some(c) => Some(
                serde_json::from_value(c.clone())
                    .map_err(|err| bad(&format!("has a malformed `confirmation`: {err}")))?,
            ),
        };
        calls.push(LoggedCall {
            session: e.source.clone(),
            name: name.to_string(),
            arguments: body.get("arguments").cloned().unwrap_or(json!({})),
            now_unix_ms: body
                .get("now_unix_ms")
                .and_then(Value::as_i64)
                .unwrap_or(fixture.now_unix_ms),
            confirmation,
            response: e
                .response
                .as_ref()
                .map(|r| r.body.clone())
                .ok_or_else(|| bad("has no recorded response"))?,
            result: None,
            error: None,
            seq: 0,
        });
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(exchanges: Vec<Exchange>) -> Fixture {
        Fixture {
            format_version: crate::fixture::FORMAT_VERSION,
            toolrun_version: String::new(),
            spec: FixtureSpec {
                name: "s".into(),
                sha256: String::new(),
                path: "s.yaml".into(),
            },
            query: String::new(),
            model: "mcp".into(),
            now_unix_ms: 7,
            approvals: Vec::new(),
            exchanges,
            trace: json!({ "stop_reason": SESSION_ENDED }),
            judge: Vec::new(),
        }
    }

    fn served(body: Value) -> Exchange {
        Exchange {
            kind: SERVED.into(),
            source: "session_1".into(),
            request: RecordedRequest {
                method: "tools/call".into(),
                url: "mcp:t".into(),
                headers: Default::default(),
                body: Some(body),
            },
            response: Some(RecordedResponse {
                status: 200,
                headers: Default::default(),
                body: json!({ "isError": false }),
                truncated: false,
            }),
            error: None,
        }
    }

    #[test]
    fn recorded_calls_read_back_what_was_written() {
        let f = fixture(vec![served(json!({
            "name": "t", "arguments": { "a": 1 },
            "confirmation": { "action": "accept", "content": { "approve": true } }
        }))]);
        assert!(f.is_served_session());
        let calls = recorded_calls(&f).expect("well formed");
        assert_eq!(calls[0].name, "t");
        assert_eq!(
            calls[0].now_unix_ms, 7,
            "the fixture's clock when a call has none"
        );
        assert!(calls[0].confirmation.as_ref().is_some_and(|c| c.granted()));
    }

    #[test]
    fn malformed_served_calls_name_their_position() {
        let f = fixture(vec![served(json!({ "arguments": {} }))]);
        let e = recorded_calls(&f).err().unwrap_or_default();
        assert!(
            e.contains("exchange 0 (a served call) has no tool `name`"),
            "{e}"
        );
        let f = fixture(vec![served(json!({ "name": "t", "confirmation": "yes" }))]);
        let e = recorded_calls(&f).err().unwrap_or_default();
        assert!(e.contains("malformed `confirmation`"), "{e}");
    }
}
