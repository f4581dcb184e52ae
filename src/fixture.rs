//! Fixtures: one strict JSON file per recorded run — the model and HTTP exchanges, the clock,
//! the approvals and the resulting trace — replayed offline with a `Tape` in the transport.

use crate::net::{HttpRequest, HttpResponse, NetError, Purpose, Recorder};
use crate::redact::Redactor;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Mutex;

pub(crate) const FORMAT_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct FixtureSpec {
    pub(crate) name: String,
    pub(crate) sha256: String,
    /// Relative to the fixture's folder, so a repository can be cloned anywhere.
    pub(crate) path: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Fixture {
    pub(crate) format_version: u32,
    pub(crate) toolrun_version: String,
    pub(crate) spec: FixtureSpec,
    pub(crate) query: String,
    pub(crate) model: String,
    pub(crate) now_unix_ms: i64,
    #[serde(default)]
    pub(crate) approvals: Vec<String>,
    #[serde(default)]
    pub(crate) exchanges: Vec<Exchange>,
    pub(crate) trace: Value,
}

/// What the trace of a session recorded by `toolrun serve --record` has as its `stop_reason`:
/// there is no loop to stop.
pub(crate) const SESSION_ENDED: &str = "session_ended";

impl Fixture {
    /// A recording made by this build (`run --record`, `test --record`, `serve --record`).
    /// Approvals are sorted and unique, so two recordings of the same run compare equal.
    pub(crate) fn recorded(
        spec: FixtureSpec,
        query: String,
        model: String,
        now_unix_ms: i64,
        mut approvals: Vec<String>,
        exchanges: Vec<Exchange>,
        trace: Value,
    ) -> Fixture {
        approvals.sort();
        approvals.dedup();
        Fixture {
            format_version: FORMAT_VERSION,
            toolrun_version: env!("CARGO_PKG_VERSION").to_string(),
            spec,
            query,
            model,
            now_unix_ms,
            approvals,
            exchanges,
            trace,
        }
    }

    /// Written by `serve --record` (calls an MCP client made), not by a run.
    pub(crate) fn is_served_session(&self) -> bool {
        self.trace.get("stop_reason").and_then(Value::as_str) == Some(SESSION_ENDED)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Exchange {
    /// `model` or `http`.
    pub(crate) kind: String,
    /// The model or tool that made the request.
    pub(crate) source: String,
    pub(crate) request: RecordedRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) response: Option<RecordedResponse>,
    /// A transport failure instead of a response: `timeout`, `connect: ...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordedRequest {
    pub(crate) method: String,
    pub(crate) url: String,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) body: Option<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RecordedResponse {
    pub(crate) status: u16,
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Value,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) truncated: bool,
}

/// Header names whose values are credentials, whatever a secret's value is.
pub(crate) fn is_sensitive_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie" | "x-api-key" | "api-key"
    ) || n.contains("token")
        || n.contains("secret")
        || n.contains("password")
        || n.ends_with("-key")
}

/// JSON bodies are kept as JSON (readable diffs, key order irrelevant); anything else as text.
fn body_value(bytes: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => v,
        Err(_) => Value::String(String::from_utf8_lossy(bytes).into_owned()),
    }
}

fn body_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        other => other.to_string().into_bytes(),
    }
}

pub(crate) fn record_request(req: &HttpRequest) -> RecordedRequest {
    RecordedRequest {
        method: req.method.clone(),
        url: req.url.clone(),
        headers: req
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.to_ascii_lowercase(),
                    if is_sensitive_header(k) {
                        crate::redact::MASK.to_string()
                    } else {
                        v.clone()
                    },
                )
            })
            .collect(),
        body: req.body.as_deref().map(body_value),
    }
}

/// Every form of every secret in the URL, the header values and the body becomes the mask.
fn mask_request(r: &mut RecordedRequest, redactor: &Redactor) {
    if redactor.is_empty() {
        return;
    }
    r.url = redactor.str(&r.url);
    for v in r.headers.values_mut() {
        *v = redactor.str(v);
    }
    if let Some(b) = &mut r.body {
        redactor.value(b);
    }
}

fn purpose_parts(p: Purpose<'_>) -> (&'static str, String) {
    match p {
        Purpose::Tool(n) => ("http", n.to_string()),
        Purpose::Model(n) => ("model", n.to_string()),
        Purpose::Mcp(n) => ("mcp", n.to_string()),
    }
}

/// Removes the ignored JSON Pointers (volatile fields) before two bodies are compared.
pub(crate) fn without_pointers(mut v: Value, pointers: &[String]) -> Value {
    for p in pointers {
        let Some((parent, last)) = p.rsplit_once('/') else {
            continue;
        };
        let key = last.replace("~1", "/").replace("~0", "~");
        match v.pointer_mut(parent) {
            Some(Value::Object(m)) => {
                m.remove(&key);
            }
            Some(Value::Array(items)) => {
                if let Ok(i) = key.parse::<usize>() {
                    if i < items.len() {
                        items[i] = Value::Null;
                    }
                }
            }
            _ => {}
        }
    }
    v
}

/// The toolrun version an MCP client announces in `initialize`: an upgrade is not a divergence.
const MCP_VOLATILE: &str = "/params/clientInfo/version";

fn comparable(r: &RecordedRequest, ignore: &[String]) -> Value {
    let mcp_ignore;
    let ignore = match &r.body {
        Some(b) if b.pointer(MCP_VOLATILE).is_some() && b.get("jsonrpc").is_some() => {
            mcp_ignore = [ignore, &[MCP_VOLATILE.to_string()]].concat();
            &mcp_ignore[..]
        }
        _ => ignore,
    };
    let headers: BTreeMap<&String, &String> = r
        .headers
        .iter()
        .filter(|(k, _)| !is_sensitive_header(k))
        .collect();
    json!({
        "method": r.method,
        "url": r.url,
        "headers": headers,
        "body": r.body.clone().map(|b| without_pointers(b, ignore)),
    })
}

enum Mode {
    /// Every request goes live and is recorded.
    Record,
    /// Recorded answers first, live for the rest (`--record-mode new`).
    RecordNew,
    /// Recorded answers only: the network is never touched.
    Replay,
}

struct Slot {
    exchange: Exchange,
    used: bool,
}

pub(crate) struct Tape {
    mode: Mode,
    slots: Mutex<Vec<Slot>>,
    /// Exchanges in the order they happened in this run (what a recording writes).
    log: Mutex<Vec<Exchange>>,
    mismatches: Mutex<Vec<String>>,
    /// Requests a replay refused, as `(kind, source, "METHOD url")`: what an offline test
    /// would have sent to the network.
    refused: Mutex<Vec<(String, String, String)>>,
    ignore: Vec<String>,
    redactor: Redactor,
}

impl Tape {
    pub(crate) fn recording(redactor: Redactor) -> Tape {
        Tape::new(Mode::Record, Vec::new(), Vec::new(), redactor)
    }
    pub(crate) fn recording_new(
        previous: Vec<Exchange>,
        ignore: Vec<String>,
        redactor: Redactor,
    ) -> Tape {
        Tape::new(Mode::RecordNew, previous, ignore, redactor)
    }
    /// `redactor` masks the stand-ins a replay sends for secrets (`***`, or `%2A%2A%2A` once
    /// URL-encoded) back to the mask, on both sides of every comparison.
    pub(crate) fn replaying(
        exchanges: Vec<Exchange>,
        ignore: Vec<String>,
        redactor: Redactor,
    ) -> Tape {
        Tape::new(Mode::Replay, exchanges, ignore, redactor)
    }
    /// Nothing recorded and nothing live: every request is refused and remembered, so an
    /// offline test can say which tool or model would have reached the network.
    pub(crate) fn offline() -> Tape {
        Tape::replaying(Vec::new(), Vec::new(), Redactor::default())
    }
    fn new(mode: Mode, exchanges: Vec<Exchange>, ignore: Vec<String>, redactor: Redactor) -> Tape {
        Tape {
            mode,
            slots: Mutex::new(
                exchanges
                    .into_iter()
                    .map(|mut exchange| {
                        mask_request(&mut exchange.request, &redactor);
                        Slot {
                            exchange,
                            used: false,
                        }
                    })
                    .collect(),
            ),
            log: Mutex::new(Vec::new()),
            mismatches: Mutex::new(Vec::new()),
            refused: Mutex::new(Vec::new()),
            ignore,
            redactor,
        }
    }

    pub(crate) fn exchanges(&self) -> Vec<Exchange> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub(crate) fn refused(&self) -> Vec<(String, String, String)> {
        self.refused.lock().map(|r| r.clone()).unwrap_or_default()
    }

    pub(crate) fn mismatches(&self) -> Vec<String> {
        self.mismatches
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    pub(crate) fn unused(&self) -> Vec<String> {
        self.slots
            .lock()
            .map(|s| {
                s.iter()
                    .filter(|s| !s.used)
                    .map(|s| {
                        format!(
                            "{} request from `{}`: {} {}",
                            s.exchange.kind,
                            s.exchange.source,
                            s.exchange.request.method,
                            s.exchange.request.url
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Recorder for Tape {
    fn may_go_live(&self) -> bool {
        !matches!(self.mode, Mode::Replay)
    }

    fn redact(&self, s: &str) -> String {
        self.redactor.str(s)
    }

    /// A recorded answer for this request, if the tape has one. Parallel calls may arrive in
    /// any order, so the first unused exchange with an equal request answers, not the next one.
    fn answer(
        &self,
        purpose: Purpose<'_>,
        req: &HttpRequest,
    ) -> Option<Result<HttpResponse, NetError>> {
        if matches!(self.mode, Mode::Record) {
            return None;
        }
        let (kind, source) = purpose_parts(purpose);
        // Recorded requests were masked; this one is masked alike, so a secret (or a replay's
        // stand-in for it) compares equal in whatever encoding it was sent.
        let mut wanted = record_request(req);
        mask_request(&mut wanted, &self.redactor);
        let want = comparable(&wanted, &self.ignore);
        let mut slots = self.slots.lock().ok()?;
        let found = slots.iter_mut().find(|s| {
            !s.used
                && s.exchange.kind == kind
                && s.exchange.source == source
                && comparable(&s.exchange.request, &self.ignore) == want
        });
        match found {
            Some(slot) => {
                slot.used = true;
                let exchange = slot.exchange.clone();
                drop(slots);
                if let Ok(mut log) = self.log.lock() {
                    log.push(exchange.clone());
                }
                Some(match (&exchange.response, &exchange.error) {
                    (Some(r), _) => Ok(HttpResponse {
                        status: r.status,
                        headers: r
                            .headers
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                        body: body_bytes(&r.body),
                        truncated: r.truncated,
                    }),
                    (None, Some(e)) if e == "timeout" => Err(NetError::Timeout),
                    (None, Some(e)) => Err(NetError::Connect(e.clone())),
                    (None, None) => {
                        Err(NetError::Io("the recorded exchange has no response".into()))
                    }
                })
            }
            None if matches!(self.mode, Mode::Replay) => {
                let closest = slots
                    .iter()
                    .filter(|s| !s.used && s.exchange.kind == kind && s.exchange.source == source)
                    .chain(slots.iter().filter(|s| !s.used))
                    .next()
                    .map(|s| comparable(&s.exchange.request, &self.ignore));
                let report = match closest {
                    Some(expected) => format!(
                        "{kind} request from `{source}` has no recorded answer; closest unused recorded request:\n{}",
                        json_diff(&expected, &want)
                    ),
                    None => format!(
                        "{kind} request from `{source}` has no recorded answer (every recorded exchange is used): {} {}",
                        wanted.method, wanted.url
                    ),
                };
                drop(slots);
                if let Ok(mut m) = self.mismatches.lock() {
                    m.push(report);
                }
                if let Ok(mut r) = self.refused.lock() {
                    r.push((
                        kind.to_string(),
                        source.clone(),
                        format!("{} {}", wanted.method, wanted.url),
                    ));
                }
                Some(Err(NetError::NotRecorded(format!(
                    "{} {}",
                    wanted.method, wanted.url
                ))))
            }
            None => None,
        }
    }

    fn record(
        &self,
        purpose: Purpose<'_>,
        req: &HttpRequest,
        result: &Result<HttpResponse, NetError>,
    ) {
        let (kind, source) = purpose_parts(purpose);
        let (response, error) = match result {
            Ok(r) => (
                Some(RecordedResponse {
                    status: r.status,
                    headers: r
                        .headers
                        .iter()
                        .filter(|(k, _)| {
                            !matches!(k.to_ascii_lowercase().as_str(), "date" | "set-cookie")
                        })
                        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                        .collect(),
                    body: body_value(&r.body),
                    truncated: r.truncated,
                }),
                None,
            ),
            Err(NetError::Timeout) => (None, Some("timeout".to_string())),
            Err(e) => (None, Some(e.to_string())),
        };
        let mut exchange = Exchange {
            kind: kind.into(),
            source,
            request: record_request(req),
            response,
            error,
        };
        mask_request(&mut exchange.request, &self.redactor);
        if let Some(r) = &mut exchange.response {
            for v in r.headers.values_mut() {
                *v = self.redactor.str(v);
            }
            self.redactor.value(&mut r.body);
        }
        if let Some(e) = &mut exchange.error {
            *e = self.redactor.str(e);
        }
        if let Ok(mut log) = self.log.lock() {
            log.push(exchange);
        }
    }
}

/// A readable diff of two JSON documents: one line per differing path.
pub(crate) fn json_diff(expected: &Value, actual: &Value) -> String {
    let mut lines = Vec::new();
    diff_at("", expected, actual, &mut lines);
    if lines.len() > 40 {
        let more = lines.len() - 40;
        lines.truncate(40);
        lines.push(format!("  ... and {more} more differences"));
    }
    lines.join("\n")
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 160 {
        format!("{}…", s.chars().take(160).collect::<String>())
    } else {
        s
    }
}

fn diff_at(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let p = format!("{path}/{k}");
                match y.get(k) {
                    Some(w) => diff_at(&p, v, w, out),
                    None => out.push(format!("  {p}: expected {}, missing now", short(v))),
                }
            }
            for (k, w) in y {
                if !x.contains_key(k) {
                    out.push(format!("  {path}/{k}: not recorded, now {}", short(w)));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                let p = format!("{path}/{i}");
                match (x.get(i), y.get(i)) {
                    (Some(v), Some(w)) => diff_at(&p, v, w, out),
                    (Some(v), None) => {
                        out.push(format!("  {p}: expected {}, missing now", short(v)))
                    }
                    (None, Some(w)) => out.push(format!("  {p}: not recorded, now {}", short(w))),
                    (None, None) => {}
                }
            }
        }
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => {}
        _ if a == b => {}
        _ => out.push(format!(
            "  {}: expected {}, got {}",
            if path.is_empty() { "/" } else { path },
            short(a),
            short(b)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_name_each_path() {
        let a = json!({"url": "https://a/x", "body": {"n": 1, "k": [1, 2]}});
        let b = json!({"url": "https://a/y", "body": {"n": 1, "k": [1]}});
        assert_eq!(json_diff(&a, &b), "  /url: expected \"https://a/x\", got \"https://a/y\"\n  /body/k/1: expected 2, missing now");
    }

    #[test]
    fn ignored_pointers_do_not_count() {
        let a = json!({"id": "123", "q": "x"});
        let b = json!({"id": "456", "q": "x"});
        assert_eq!(
            without_pointers(a, &["/id".into()]),
            without_pointers(b, &["/id".into()])
        );
    }

    #[test]
    fn credentials_never_reach_a_recorded_request() {
        let req = HttpRequest {
            method: "GET".into(),
            url: "https://x/".into(),
            headers: vec![
                ("Authorization".into(), "Bearer abc".into()),
                ("X-Custom-Token".into(), "t".into()),
                ("Accept".into(), "a".into()),
            ],
            body: None,
        };
        let r = record_request(&req);
        assert_eq!(r.headers["authorization"], "***");
        assert_eq!(r.headers["x-custom-token"], "***");
        assert_eq!(r.headers["accept"], "a");
    }
}
