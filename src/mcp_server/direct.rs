//! `tools/call` answered without rmcp's session machinery. rmcp hands every request of a
//! session to a worker task over channels, parses it into typed messages, runs the handler in a
//! task of its own and frames the answer as an event stream, which `answer` then reads back into
//! one JSON body: most of a served call's CPU went there (issue 21's profile). A call is run
//! here instead, on the connection's task, through the same [`ServedSession::call`]: one JSON
//! body when nothing comes before its result, else an event stream toolrun writes itself — a
//! priming event with an id to come back with, the call's notifications (its progress, when the
//! request had a progress token; its logs, at the session's level) and its result — kept for
//! resumption (`resume`), as is the stream of a call that runs past [`LONG_CALL`] or asks its
//! client to come back later (`reconnect`). A client that hangs up does not cancel its call: it
//! runs to its end, and is answered (for a later `GET`) and recorded. A client cancels it with
//! `notifications/cancelled`, in a POST of its own in the same session: the tool's work is
//! dropped, the call is recorded as cut off, and its stream ends without an answer.
//!
//! What is left to rmcp: everything but `tools/call`, a call that needs a confirmation this
//! client would be asked for (an elicitation request rides the call's stream through rmcp's
//! session), and anything this reader does not recognise exactly — so what a client can
//! observe there is rmcp's behaviour.

use super::answer::LONG_CALL;
use super::cancel::{cancellable, InFlight, Place};
use super::result::{error_result, CallResult};
use super::resume::{self, Hangup};
use super::server::{Origin, Running, ServedSession, Stream};
use crate::telemetry::mcp as telemetry;
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::header::{HeaderMap, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use rmcp::model::{ProgressToken, ProtocolVersion};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::cell::RefCell;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

type Body = BoxBody<Bytes, Infallible>;

/// rmcp's event streams tell a client to come back after this long (`retry:`).
const RETRY: Duration = Duration::from_secs(3);
/// A comment on a long call's stream this often keeps proxies from closing it.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

tokio::task_local! {
    /// The session rmcp's factory made while this task handed it an `initialize`.
    static CREATED: RefCell<Option<ServedSession>>;
}

/// Called by the session factory: the session being made, for [`creating`] to pick up.
pub(crate) fn created(session: &ServedSession) {
    let _ = CREATED.try_with(|c| *c.borrow_mut() = Some(session.clone()));
}

/// Runs `work` (a POST without a session id, which may start one) and returns with it the
/// session it made, if any.
pub(crate) async fn creating<F: Future>(work: F) -> (F::Output, Option<ServedSession>) {
    CREATED
        .scope(RefCell::new(None), async move {
            let out = work.await;
            (out, CREATED.with(|c| c.borrow_mut().take()))
        })
        .await
}

/// The handlers of the open sessions, by session id (rmcp keeps its own behind its worker),
/// and the calls answered here still running.
#[derive(Default)]
pub(crate) struct Sessions(
    Mutex<super::SessionMap<ServedSession>>,
    /// By session id and request id (its JSON text).
    InFlight<(String, String)>,
);

/// A `notifications/cancelled`: which request it cancels.
#[derive(Deserialize)]
struct Cancelled<'a> {
    #[serde(borrow)]
    method: Cow<'a, str>,
    params: CancelledParams,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelledParams {
    request_id: Value,
}

impl Sessions {
    /// Whether `body`, a POST of session `session`, cancels a call answered here (then it has
    /// been cancelled); any other message, or a call rmcp answers, is rmcp's. Only the session
    /// that made a call finds it.
    pub(crate) fn cancel(&self, session: &str, body: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(body) else {
            return false;
        };
        if !text.contains("notifications/cancelled") {
            return false;
        }
        let Ok(message) = serde_json::from_str::<Cancelled>(text) else {
            return false;
        };
        if message.method != "notifications/cancelled" {
            return false;
        }
        let key = (session.to_string(), message.params.request_id.to_string());
        self.1.cancel(&key)
    }

    pub(crate) fn insert(&self, id: &str, session: ServedSession) {
        if let Ok(mut all) = self.0.lock() {
            all.insert(id.to_string(), session);
        }
    }

    pub(crate) fn remove(&self, id: &str) {
        // Dropped outside the lock: the last handle of a session ends its upstream sessions.
        let gone = self.0.lock().ok().and_then(|mut all| all.remove(id));
        drop(gone);
    }

    pub(crate) fn retain(&self, open: impl Fn(&str) -> bool) {
        let gone: Vec<ServedSession> = match self.0.lock() {
            Ok(mut all) => {
                let ids: Vec<String> = all.keys().filter(|id| !open(id)).cloned().collect();
                ids.iter().filter_map(|id| all.remove(id)).collect()
            }
            Err(_) => Vec::new(),
        };
        drop(gone);
    }

    pub(crate) fn clear(&self) {
        let gone = self.0.lock().map(|mut all| std::mem::take(&mut *all));
        drop(gone);
    }

    fn get(&self, id: &str) -> Option<ServedSession> {
        self.0.lock().ok()?.get(id).cloned()
    }

    /// Whom the session's client authenticated as (`serve.auth`).
    pub(crate) fn subject(&self, id: &str) -> Option<String> {
        self.get(id)?.subject().map(str::to_string)
    }
}

/// One clock for every call's [`LONG_CALL`]: a timer per call cost an entry in the runtime's
/// timer wheel and, being its earliest deadline, a wake-up of its driver (a system call and
/// a turn of the event loop a call). This one ticks only while calls are running.
#[derive(Default)]
pub(crate) struct Ticker {
    tick: watch::Sender<()>,
    running: AtomicUsize,
    started: Notify,
}

/// How often the ticker looks for calls that have become long.
const TICK: Duration = Duration::from_millis(200);

impl Ticker {
    /// Ticks every [`TICK`] while a call is running; runs until the server ends.
    pub(crate) async fn run(self: Arc<Self>) {
        loop {
            if self.running.load(Ordering::Acquire) == 0 {
                let started = self.started.notified();
                if self.running.load(Ordering::Acquire) == 0 {
                    started.await;
                }
            }
            tokio::time::sleep(TICK).await;
            self.tick.send_replace(());
        }
    }

    /// Resolves once `since` is [`LONG_CALL`] ago (to within a tick); counts a call running
    /// while it waits.
    async fn long_after(&self, since: Instant) {
        let mut ticks = self.tick.subscribe();
        let _running = Running::new(&self.running);
        // A wake-up the ticker does not need (it was ticking) costs it one tick at most.
        self.started.notify_one();
        while since.elapsed() < LONG_CALL {
            if ticks.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// A `tools/call` this module answers.
pub(crate) struct Call {
    session: ServedSession,
    /// Cancelled by the client's `notifications/cancelled` while the call runs.
    cancel: (CancellationToken, Place<(String, String)>),
    id: Value,
    name: String,
    arguments: Value,
    traceparent: Option<String>,
    progress: Option<ProgressToken>,
}

/// Read from the body as text checked once (`from_str` checks no string again), borrowing
/// what is only compared.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Message<'a, P> {
    #[serde(borrow)]
    pub(super) jsonrpc: Cow<'a, str>,
    pub(super) id: Value,
    #[serde(borrow)]
    pub(super) method: Cow<'a, str>,
    pub(super) params: P,
}

/// A `tools/call`'s params with nothing rmcp would treat specially (a `task`, say): other
/// members make the request rmcp's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    name: String,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
    #[serde(default, rename = "_meta")]
    meta: Option<Map<String, Value>>,
}

/// The call in a POST of session `session`, when it is one this module answers: a single
/// `tools/call` of a known tool, by a client that accepts what rmcp would send and whose
/// headers rmcp would not refuse, that needs no confirmation from the client. `None`: rmcp's.
pub(crate) fn call(
    sessions: &Sessions,
    session: &str,
    headers: &HeaderMap,
    body: &[u8],
    token: bool,
) -> Option<Call> {
    if !accepts_both(headers) || !version_is_served(headers) || !(token || loopback_host(headers)) {
        return None;
    }
    let text = std::str::from_utf8(body).ok()?;
    let message: Message<Params> = serde_json::from_str(text).ok()?;
    if message.jsonrpc != "2.0" || message.method != "tools/call" {
        return None;
    }
    // rmcp's request ids are strings and integers.
    if !(message.id.is_string() || message.id.is_i64()) {
        return None;
    }
    let meta = message.params.meta.unwrap_or_default();
    if meta.contains_key("protocolVersion") {
        return None;
    }
    let progress = match meta.get("progressToken") {
        None => None,
        Some(token) => Some(serde_json::from_value::<ProgressToken>(token.clone()).ok()?),
    };
    let served = sessions.get(session)?;
    if !answers_alone(&served, &message.params.name) {
        return None;
    }
    Some(Call {
        session: served,
        cancel: sessions
            .1
            .start((session.to_string(), message.id.to_string())),
        id: message.id,
        name: message.params.name,
        arguments: Value::Object(message.params.arguments.unwrap_or_default()),
        traceparent: meta
            .get("traceparent")
            .and_then(Value::as_str)
            .map(String::from),
        progress,
    })
}

/// Whether a call of `name` is answered here: the session has initialised, the tool is known,
/// and the call cannot need a confirmation that this client would be asked for.
fn answers_alone(session: &ServedSession, name: &str) -> bool {
    let Some(peer) = session.peer() else {
        return false;
    };
    let served = session.served();
    let Some(tool) = served.registry.tool(name) else {
        return false;
    };
    let confirms =
        (tool.confirm || tool.confirm_hint().is_some()) && !served.setup.approvals.contains(name);
    !(confirms && super::confirm::client_can_confirm(peer))
}

/// What the span of a call answered here says of its request.
struct Span {
    session_id: String,
    /// From `params._meta`, else the HTTP request's.
    traceparent: Option<String>,
    request_id: String,
}

/// The call through [`ServedSession::call`], with the same span as rmcp's handler gives it;
/// its notifications go to `stream`, a `reconnect` hangs up `hangup`.
async fn call_alone(
    call: Call,
    span: Option<Span>,
    stream: Option<&Stream>,
    hangup: Option<&Hangup>,
) -> CallResult {
    let session = &call.session;
    let Some(peer) = session.peer() else {
        let message = "the session has not initialised";
        return CallResult::Json(error_result("execution_error", message));
    };
    let start = span.as_ref().and_then(|_| crate::telemetry::clock());
    let traced = start.map(|_| call.arguments.clone());
    let origin = Origin::Client(Some(peer), call.progress.clone(), hangup, stream);
    // A span reads the result as JSON.
    let as_text = span.is_none();
    let answering = session.answer(&call.name, call.arguments, origin, as_text);
    let response = cancellable(call.cancel.0.clone(), answering).await;
    if let (Some(start), Some(span)) = (start, span) {
        let req = telemetry::Request {
            method: "tools/call",
            tool: Some(&call.name),
            traceparent: span.traceparent.as_deref(),
            session_id: Some(&span.session_id),
            subject: session.subject(),
            protocol_version: peer.peer_info().map(|i| i.protocol_version.to_string()),
            request_id: span.request_id,
            transport: "tcp",
            start_ns: start,
        };
        let value = response.to_value();
        let answer = telemetry::Answer::Result(Some(&value));
        telemetry::served(
            &req,
            traced.as_ref(),
            answer,
            &session.served().setup.redactor,
        );
    }
    response
}

/// The client takes both a JSON body and an event stream (else rmcp answers 406).
pub(crate) fn accepts_both(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(hyper::header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for entry in value.split(',') {
            let mut parts = entry.split(';');
            let essence = parts.next().unwrap_or_default().trim();
            // A weight of zero refuses the type; rmcp reads weights, and so is left such a client.
            if parts.any(|p| p.trim().to_ascii_lowercase().starts_with("q=")) {
                return false;
            }
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// No `MCP-Protocol-Version`, or one of the revisions served (later ones have per-request
/// metadata and header rules that rmcp checks).
fn version_is_served(headers: &HeaderMap) -> bool {
    match headers.get("mcp-protocol-version") {
        None => true,
        Some(v) => ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25)
            .iter()
            .any(|known| known.as_str().as_bytes() == v.as_bytes()),
    }
}

/// A `Host` that rmcp's DNS-rebinding check accepts without a token: a loopback name.
pub(crate) fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
    else {
        return false;
    };
    let name = super::host_name(host);
    name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1" || name == "::1"
}

/// Runs the call and answers it: one JSON body, or an event stream kept for resumption when
/// a notification comes first, the call asks its client to come back later, or it runs past
/// [`LONG_CALL`]. `busy` is held until the call has ended and been answered.
pub(crate) async fn answer(
    call: Call,
    headers: &HeaderMap,
    (store, ticker): (&Arc<resume::Store>, &Ticker),
    session: &str,
    busy: impl Send + 'static,
) -> Response<Body> {
    let started = Instant::now();
    let id = call.id.clone();
    // What only a span reads is made only when spans are exported.
    let span = crate::telemetry::clock().map(|_| Span {
        session_id: session.to_string(),
        traceparent: call
            .traceparent
            .clone()
            .or_else(|| header(headers, "traceparent").map(String::from)),
        request_id: match &id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        },
    });
    // A call that can send nothing before its result (most) needs no channel for that (a
    // channel's first block is over a kilobyte) and nothing to hang up.
    let (stream, mut notices, hangup) =
        if call.session.may_notify(&call.name, call.progress.is_some()) {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
            (Some(tx), Some(rx), Some(Hangup::new()))
        } else {
            (None, None, None)
        };
    let mut hung_up = hangup.as_ref().map(Hangup::subscribe);
    let cancel = call.cancel.0.clone();
    let work = {
        let hangup = hangup.clone();
        Box::pin(async move {
            let result = call_alone(call, span, stream.as_ref(), hangup.as_ref()).await;
            drop(busy);
            result
        })
    };
    let mut running = Detached(Some(work));
    let long_call = ticker.long_after(started);
    let mut early = Vec::new();
    let mut result = None;
    tokio::select! {
        biased;
        done = &mut running => match notices.as_mut().and_then(|n| n.try_recv().ok()) {
            // What the call sent before its result is in the channel by the time it returns;
            // a call that asked its client to come back later answers it there.
            None if cancel.is_cancelled() => return unanswered(),
            None if !hangup.as_ref().is_some_and(Hangup::is_hung_up) => {
                return json_answer(&id, &done)
            }
            None => result = Some(done),
            Some(first) => {
                early.push(first);
                result = Some(done);
            }
        },
        Some(first) = next(&mut notices) => early.push(first),
        _ = changed(&mut hung_up) => {}
        _ = long_call => {}
    }
    let streamed = Streamed {
        id,
        cancel,
        work: running.0.take(),
        result,
        early,
        notices,
    };
    event_stream(
        store,
        session,
        &hangup.unwrap_or_else(Hangup::new),
        streamed,
    )
}

/// The next notification, if the call has a channel for them.
async fn next(notices: &mut Option<tokio::sync::mpsc::UnboundedReceiver<Value>>) -> Option<Value> {
    match notices {
        Some(n) => n.recv().await,
        None => std::future::pending().await,
    }
}

/// Resolves when the call hangs up its client (a `reconnect`), if it can.
async fn changed(hung_up: &mut Option<watch::Receiver<bool>>) {
    if let Some(h) = hung_up {
        if h.changed().await.is_ok() {
            return;
        }
    }
    std::future::pending().await
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The answer to a POST whose call its client cancelled before it ended: an event stream that
/// ends with nothing on it (a cancelled request is not answered).
fn unanswered() -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::new()).boxed());
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

/// A JSON-RPC response of `result`, as one JSON body.
fn json_answer(id: &Value, result: &CallResult) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(response(id, result))).boxed());
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

type Work = Pin<Box<dyn Future<Output = CallResult> + Send>>;

/// A call answered as an event stream: what it has sent so far, and what is still to come.
struct Streamed {
    id: Value,
    /// Cancelled by the client: its stream ends without an answer.
    cancel: CancellationToken,
    /// The call, unless it has ended (then `result` is its result).
    work: Option<Work>,
    result: Option<CallResult>,
    early: Vec<Value>,
    notices: Option<tokio::sync::mpsc::UnboundedReceiver<Value>>,
}

/// The JSON-RPC response of `result`, written out as it goes (no JSON tree made for it).
fn response(id: &Value, result: &CallResult) -> Vec<u8> {
    let mut body = Vec::with_capacity(64 + result.size_hint());
    body.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    // Writing JSON values into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut body, id);
    body.extend_from_slice(b",\"result\":");
    result.write(&mut body);
    body.push(b'}');
    body
}

/// One event of a call's stream, holding the message `json`.
fn event(json: &[u8]) -> Bytes {
    [&b"data: "[..], json, b"\n\n"].concat().into()
}

/// A notification of a call's stream.
fn notification(message: &Value) -> Bytes {
    event(&serde_json::to_vec(message).unwrap_or_default())
}

/// A call's event stream: its priming event (an id to come back with, which reaches the client
/// even if the call has asked it to come back later), its notifications as they come, then its
/// result; the call runs in a task of its own from here, whether or not the client stays.
fn event_stream(
    store: &Arc<resume::Store>,
    session: &str,
    hangup: &Hangup,
    mut call: Streamed,
) -> Response<Body> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let priming = Bytes::from(format!("id: 0\nretry: {}\ndata:\n\n", RETRY.as_millis()));
    tokio::spawn(async move {
        for message in std::mem::take(&mut call.early) {
            let _ = tx.send(notification(&message)).await;
        }
        let mut keep_alive =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        let result = match (call.result.take(), call.work.take()) {
            (Some(result), _) => result,
            (None, None) => CallResult::Json(Value::Null),
            (None, Some(mut work)) => loop {
                // A client gone away is no reason to stop: the events are still kept.
                tokio::select! {
                    biased;
                    Some(message) = next(&mut call.notices) => {
                        let _ = tx.send(notification(&message)).await;
                    }
                    result = &mut work => break result,
                    _ = keep_alive.tick() => {
                        let _ = tx.send(Bytes::from_static(b": keep-alive\n\n")).await;
                    }
                }
            },
        };
        while let Some(message) = call.notices.as_mut().and_then(|n| n.try_recv().ok()) {
            let _ = tx.send(notification(&message)).await;
        }
        if !call.cancel.is_cancelled() {
            let _ = tx.send(event(&response(&call.id, &result))).await;
        }
    });
    let mut resp = Response::new(resume::channel_body(rx));
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resume::keep_stream(store, session, hangup, resp, priming, ())
}

/// A call that outlives its request: dropped before it has ended (the client hung up), it is
/// spawned to run to its end, so that it is answered for later and recorded.
pub(crate) struct Detached<T: Send + 'static = CallResult>(
    pub(crate) Option<Pin<Box<dyn Future<Output = T> + Send>>>,
);

impl<T: Send + 'static> Future for Detached<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(work) = self.0.as_mut() else {
            return Poll::Pending;
        };
        let out = work.as_mut().poll(cx);
        if out.is_ready() {
            self.0 = None;
        }
        out
    }
}

impl<T: Send + 'static> Drop for Detached<T> {
    fn drop(&mut self) {
        if let (Some(work), Ok(rt)) = (self.0.take(), tokio::runtime::Handle::try_current()) {
            rt.spawn(work);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn only_requests_rmcp_would_answer_alike_are_taken() {
        let both = [
            ("accept", "application/json, text/event-stream"),
            ("host", "127.0.0.1:8765"),
        ];
        assert!(accepts_both(&headers(&both)));
        assert!(!accepts_both(&headers(&[("accept", "application/json")])));
        assert!(!accepts_both(&headers(&[(
            "accept",
            "application/json, text/event-stream;q=0"
        )])));
        assert!(version_is_served(&headers(&[])));
        assert!(version_is_served(&headers(&[(
            "mcp-protocol-version",
            "2025-06-18"
        )])));
        assert!(!version_is_served(&headers(&[(
            "mcp-protocol-version",
            "2026-07-28"
        )])));
        assert!(loopback_host(&headers(&both)));
        assert!(loopback_host(&headers(&[("host", "localhost")])));
        assert!(loopback_host(&headers(&[("host", "[::1]:9")])));
        assert!(!loopback_host(&headers(&[("host", "evil.example:8765")])));
        assert!(!loopback_host(&headers(&[])));
    }

    #[test]
    fn a_call_with_members_rmcp_reads_is_left_to_it() {
        fn parse(body: &str) -> Option<Message<'_, Params>> {
            serde_json::from_str(body).ok()
        }
        assert!(parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}"#).is_some());
        assert!(parse(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":{}}}"#
        )
        .is_none());
        assert!(parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":[1]}}"#).is_none());
        assert!(
            parse(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#).is_none()
        );
    }

    #[test]
    fn the_answer_is_one_json_rpc_response() {
        let result = CallResult::Json(serde_json::json!({ "isError": false }));
        let resp = json_answer(&Value::from(7), &result);
        assert_eq!(resp.headers()[CONTENT_TYPE], "application/json");
    }

    #[test]
    fn a_text_result_is_written_as_its_json_would_be() {
        let object = serde_json::json!({ "a": "x\"y\n", "b": [1, 2.5, null], "c": { "d": true } });
        let results = [
            (object.to_string(), true),
            ("plain \"text\"\n\u{1}é".to_string(), false),
        ];
        for (text, structured) in results {
            let result = CallResult::Text { text, structured };
            let written = response(&Value::from("r-1"), &result);
            let expected = serde_json::json!({
                "jsonrpc": "2.0", "id": "r-1", "result": result.to_value()
            });
            assert_eq!(String::from_utf8(written).unwrap(), expected.to_string());
        }
        let value = CallResult::Text {
            text: object.to_string(),
            structured: true,
        }
        .into_value();
        assert_eq!(value["structuredContent"], object);
    }
}
