//! A served session in the recording format (`serve --record`, see
//! [`crate::fixture::session_log`]), and back: every `tools/call` is a `served` exchange holding
//! what the client sent (and the clock and confirmation it ran with) and the result sent back,
//! with its place in its session's admission order and its trace entries; the exchanges the
//! tools made are lines of their own.

use super::confirm::Confirmation;
use crate::fixture::session_log::{self, Header};
use crate::fixture::{Exchange, Fixture, RecordedRequest, RecordedResponse};
use crate::redact::Redactor;
use crate::registry::Registry;
use crate::trace::{ToolErrorEntry, ToolResultEntry};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

pub(crate) use crate::fixture::session_log::SERVED;

/// Where a served session's calls are kept.
pub(crate) enum CallLog {
    /// Each call written to the recording as it is answered (`serve --record`).
    Stream(Arc<crate::fixture::session_log::SessionLog>),
    /// Each call kept, in the order it ran (a replay, which runs them one by one).
    Memory(Mutex<Vec<LoggedCall>>),
}

/// One served call as a fixture keeps it.
#[derive(Clone, Debug)]
pub(crate) struct LoggedCall {
    pub(crate) session: String,
    /// Whom the client's access token named (`serve.auth`).
    pub(crate) subject: Option<String>,
    pub(crate) name: String,
    pub(crate) arguments: Value,
    /// The clock the call ran with (built-ins' "now").
    pub(crate) now_unix_ms: i64,
    /// The client's answer when the call needed confirmation and the client was asked.
    pub(crate) confirmation: Option<Confirmation>,
    /// The `tools/call` result as sent to the client.
    pub(crate) response: Value,
    pub(crate) result: Option<ToolResultEntry>,
    pub(crate) error: Option<ToolErrorEntry>,
    /// Its place in its session's admission order (the approved try's, when it was confirmed).
    pub(crate) seq: u32,
    /// The window of the subject's counts the call was counted in (an authenticated subject's
    /// 2026-07-28 call), `None` when it counted in its session: `seq` is then the subject's.
    pub(crate) subject_window: Option<std::sync::Arc<str>>,
    /// The call was cut off before it ended, and why (the served exchange's `error`, `cut off:
    /// ...`): `response` is the error its client got, or would have (a cancelled request is not
    /// answered).
    pub(crate) cut_off: Option<String>,
}

/// What a served exchange's `error` says of a call the server cut off as it stopped.
pub(crate) const CUT_OFF: &str = "cut off: the server stopped before the call ended";
/// ... and of a call its client cancelled.
pub(crate) const CANCELLED: &str = "cut off: the client cancelled the call before it ended";

/// A served call's line in the recording.
pub(crate) fn line(call: &LoggedCall) -> Value {
    let mut line = serde_json::to_value(exchange(call)).unwrap_or_default();
    line["seq"] = json!(call.seq);
    if let Some(r) = &call.result {
        line["tool_result"] = serde_json::to_value(r).unwrap_or_default();
    }
    if let Some(e) = &call.error {
        line["tool_error"] = serde_json::to_value(e).unwrap_or_default();
    }
    line
}

/// A whole recording of a served session (`replay --update`): `http` are the tools' exchanges,
/// in order.
pub(crate) fn write_session(
    path: &std::path::Path,
    header: &Header,
    calls: &[LoggedCall],
    http: Vec<Exchange>,
    redactor: &Redactor,
) -> Result<(), String> {
    let lines = calls.iter().map(line).chain(
        http.iter()
            .map(|e| serde_json::to_value(e).unwrap_or_default()),
    );
    session_log::write_whole(path, header, lines, redactor)
}

/// The session as a trace: what ran and what failed, in the order the calls were logged (a
/// call cut off at shutdown has neither).
pub(crate) fn session_trace(registry: &Registry, calls: &[LoggedCall]) -> Value {
    let ended = || calls.iter().filter(|c| c.cut_off.is_none());
    let tool_results: Vec<Value> = ended()
        .filter_map(|c| c.result.as_ref())
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect();
    let tool_errors: Vec<Value> = ended()
        .filter_map(|c| c.error.as_ref())
        .filter_map(|e| serde_json::to_value(e).ok())
        .collect();
    session_log::session_trace(
        &registry.name,
        &registry.spec_sha256,
        tool_results,
        tool_errors,
    )
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
    if let Some(s) = &call.subject {
        body["subject"] = json!(s);
    }
    // What the subject's limits and loop detection read is theirs, not the call's session's:
    // the replay counts the subject's calls together again, from the tries it had made.
    if let (Some(window), Some(_)) = (&call.subject_window, &call.subject) {
        body["subject_counts"] = json!({
            "window": window,
            "tries_before": call.seq.saturating_sub(1),
        });
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
        error: call.cut_off.clone(),
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
        let counts = body.get("subject_counts");
        let window = counts.and_then(|c| c.get("window")).and_then(Value::as_str);
        let tries_before = counts
            .and_then(|c| c.get("tries_before"))
            .and_then(Value::as_u64)
            .and_then(|t| u32::try_from(t).ok());
        let subject_counts = match (counts, window, tries_before) {
            (None, ..) => None,
            (Some(_), Some(w), Some(t)) => Some((w, t)),
            _ => {
                return Err(bad(
                    "has a malformed `subject_counts` (`window`, `tries_before`)",
                ))
            }
        };
        calls.push(LoggedCall {
            session: e.source.clone(),
            subject: body
                .get("subject")
                .and_then(Value::as_str)
                .map(str::to_string),
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
            seq: subject_counts.map_or(0, |(_, t)| t.saturating_add(1)),
            subject_window: subject_counts.map(|(w, _)| w.into()),
            cut_off: e.error.clone(),
        });
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::FixtureSpec;

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
            trace: json!({ "stop_reason": crate::fixture::SESSION_ENDED }),
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
    fn a_subjects_counts_are_read_back_and_old_calls_have_none() {
        let f = fixture(vec![
            served(json!({ "name": "t", "subject": "alice",
                "subject_counts": { "window": "2h", "tries_before": 4 } })),
            served(json!({ "name": "t", "subject": "alice" })),
        ]);
        let calls = recorded_calls(&f).expect("well formed");
        assert_eq!(
            (calls[0].seq, calls[0].subject_window.as_deref()),
            (5, Some("2h"))
        );
        assert_eq!(
            (calls[1].seq, calls[1].subject_window.as_deref()),
            (0, None)
        );
        let body = &line(&calls[0])["request"]["body"];
        assert_eq!(
            body["subject_counts"],
            json!({ "window": "2h", "tries_before": 4 })
        );
        let f = fixture(vec![served(
            json!({ "name": "t", "subject_counts": { "window": 1 } }),
        )]);
        let e = recorded_calls(&f).err().unwrap_or_default();
        assert!(
            e.contains("exchange 0 (a served call) has a malformed `subject_counts`"),
            "{e}"
        );
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
