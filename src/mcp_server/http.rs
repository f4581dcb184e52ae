//! Streamable HTTP for `toolrun serve --http`: rmcp's service behind the guards MCP asks of a
//! local server. The endpoint is `/mcp`; a bearer token (when configured) is checked on every
//! request; a browser `Origin` must name this server or a loopback host (DNS rebinding); rmcp
//! checks `Host` against loopback names unless a token makes that moot.

use super::server::{Served, ServedSession};
use super::{answer, direct, resume, stateless_direct};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::SessionId;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::HashSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Body = BoxBody<Bytes, Infallible>;

pub(crate) const ENDPOINT: &str = "/mcp";

struct Guard {
    service: StreamableHttpService<ServedSession, LocalSessionManager>,
    token: Option<String>,
    /// `serve.auth`: OAuth access tokens instead of one static token.
    auth: Option<Arc<super::auth::Auth>>,
    sessions: Arc<LocalSessionManager>,
    max_sessions: usize,
    /// When each session was last active, and its requests in flight: the oldest idle one
    /// makes room for a new one, and one idle past `--session-idle` ends.
    activity: Arc<Mutex<super::SessionMap<Activity>>>,
    /// Each session's call streams, for clients that come back with `Last-Event-ID`.
    store: Arc<resume::Store>,
    /// Each session's handler, for the calls answered without rmcp (`direct`).
    direct: direct::Sessions,
    /// Tells those calls when they have run long.
    ticker: Arc<direct::Ticker>,
    /// 2026-07-28 requests answered without rmcp.
    stateless: stateless_direct::Requests,
    /// `--read-timeout`: a request's body, too, must arrive within it.
    read_timeout: Duration,
    /// Set when the server stops: calls in flight may end, new requests are refused (503).
    draining: std::sync::atomic::AtomicBool,
}

struct Activity {
    last: Instant,
    in_flight: u32,
}

/// A request of a session in flight: its session is not idle until the answer has been made,
/// however long the call takes without a message (rmcp's own keep-alive counts that as idle
/// time, so it is off and sessions are expired here).
struct Busy {
    activity: Arc<Mutex<super::SessionMap<Activity>>>,
    session: String,
}

impl Busy {
    /// `None` for a session this server does not know (rmcp answers 404).
    fn new(guard: &Guard, session: &str) -> Option<Busy> {
        let mut all = guard.activity.lock().ok()?;
        let a = all.get_mut(session)?;
        a.in_flight += 1;
        a.last = Instant::now();
        Some(Busy {
            activity: guard.activity.clone(),
            session: session.to_string(),
        })
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Ok(mut all) = self.activity.lock() {
            if let Some(a) = all.get_mut(&self.session) {
                a.in_flight = a.in_flight.saturating_sub(1);
                a.last = Instant::now();
            }
        }
    }
}

/// What one server may hold at once, so that a flood of connections or sessions cannot take
/// it down or starve the clients that have the token.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    /// Connections open at once; more are answered 503 and closed.
    pub(crate) max_connections: usize,
    /// A request's headers, and its body, must arrive within this long.
    pub(crate) read_timeout: Duration,
    /// MCP sessions at once; a new one ends the session idle the longest.
    pub(crate) max_sessions: usize,
    /// A session without a request, or a call still running, for this long ends.
    pub(crate) session_idle: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            max_connections: 1024,
            read_timeout: Duration::from_secs(10),
            max_sessions: 500,
            session_idle: Duration::from_secs(30 * 60),
        }
    }
}

/// Is `addr` one that only this machine can reach?
pub(crate) fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Serves until `shutdown` resolves, then stops accepting, ends the MCP sessions and lets
/// requests in flight finish (for at most a few seconds).
pub(crate) async fn serve(
    served: Arc<Served>,
    listener: tokio::net::TcpListener,
    (token, auth): (Option<String>, Option<Arc<super::auth::Auth>>),
    bounds: Bounds,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut config = StreamableHttpServerConfig::default();
    if token.is_some() || auth.is_some() {
        // Rebinding cannot forge a bearer token, and a server reachable by name must accept it.
        config = config.disable_allowed_hosts();
    }
    let sessions_done = config.cancellation_token.clone();
    let factory_served = served.clone();
    let mut manager = LocalSessionManager::default();
    // Idle sessions are ended by `expire_idle`, which knows the calls in flight.
    manager.session_config.keep_alive = None;
    // rmcp keeps each finished call's stream for late resumption (60s by default) and scans all
    // of them at every message of the session: at 1,000 calls a second, 60,000 entries a scan.
    // Call streams are resumed from toolrun's own store (`resume`), so they go at once.
    manager.session_config.completed_cache_ttl = Duration::ZERO;
    let sessions = Arc::new(manager);
    let service = StreamableHttpService::new(
        move || {
            let session = ServedSession::new(&factory_served);
            direct::created(&session);
            Ok(session)
        },
        sessions.clone(),
        config,
    );
    let guard = Arc::new(Guard {
        service,
        token,
        auth,
        sessions,
        max_sessions: bounds.max_sessions,
        activity: Arc::default(),
        store: Arc::new(resume::Store::default()),
        direct: direct::Sessions::default(),
        ticker: Arc::new(direct::Ticker::default()),
        stateless: stateless_direct::Requests::new(served.clone()),
        read_timeout: bounds.read_timeout,
        draining: std::sync::atomic::AtomicBool::new(false),
    });
    let expiry = tokio::spawn(expire_idle(guard.clone(), bounds.session_idle));
    let ticker = tokio::spawn(guard.ticker.clone().run());
    let permits = Arc::new(tokio::sync::Semaphore::new(bounds.max_connections));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut accept = |stream: tokio::net::TcpStream| {
        let _ = stream.set_nodelay(true);
        match permits.clone().try_acquire_owned() {
            Ok(permit) => connections.spawn(connection(
                guard.clone(),
                stream,
                permit,
                bounds.read_timeout,
                stop_rx.clone(),
            )),
            Err(_) => connections.spawn(refuse(stream)),
        };
        // Reap finished connections so a long-lived server does not keep their handles.
        while connections.try_join_next().is_some() {}
    };
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors and the like: wait a little rather than spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        accept(stream);
    }
    // The connections the system has already accepted would be reset when the listener closes,
    // with their requests perhaps sent: a load balancer cannot tell whether those ran, so it
    // cannot retry them elsewhere. They are taken and refused (503: not run, retry elsewhere).
    guard
        .draining
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // (Asked of the system itself: tokio's own accept knows only of those it has been told of.)
    if let Ok(listener) = listener.into_std() {
        while let Ok((stream, _)) = listener.accept() {
            let stream = stream.set_nonblocking(true).map(|()| stream);
            if let Ok(stream) = stream.and_then(tokio::net::TcpStream::from_std) {
                accept(stream);
            }
        }
    }
    expiry.abort();
    ticker.abort();
    drain(&served, &guard).await;
    sessions_done.cancel();
    guard.direct.clear();
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    connections.abort_all();
}

/// Serves one connection until it ends, or until the server stops and its answers in flight
/// have been sent.
async fn connection(
    guard: Arc<Guard>,
    stream: tokio::net::TcpStream,
    _permit: tokio::sync::OwnedSemaphorePermit,
    read_timeout: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let io = hyper_util::rt::TokioIo::new(stream);
    let asked = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let first = asked.clone();
    let svc = hyper::service::service_fn(move |req| {
        let guard = guard.clone();
        first.store(true, std::sync::atomic::Ordering::SeqCst);
        async move { Ok::<_, Infallible>(handle(&guard, req).await) }
    });
    // Headers that never finish do not hold a connection: hyper closes it.
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(read_timeout)
        .serve_connection(io, svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.changed() => {
            // A connection accepted as the server stopped may have its first request on the
            // way, unread: closed now, that request would get no answer, and a load balancer
            // could not tell whether it ran. It gets a moment to arrive, and is refused (503).
            if !asked.load(std::sync::atomic::Ordering::SeqCst)
                && tokio::time::timeout(Duration::from_secs(1), conn.as_mut()).await.is_ok()
            {
                return;
            }
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// The server stops: new requests are refused, and the calls in flight end first, so that
/// their clients get their results and a recording has them (ending the sessions ends their
/// answers' streams, and the runtime then drops the calls); answers being made count too, as do
/// calls whose client has gone. Those still running after a few seconds are cut off: their
/// clients are told, and the recording says so.
async fn drain(served: &Served, guard: &Guard) {
    guard
        .draining
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let settled = || served.calls_running() == 0 && !answering(guard);
    let deadline = Instant::now() + Duration::from_secs(3);
    while !settled() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    served.cut_off();
    let deadline = Instant::now() + Duration::from_secs(1);
    while !settled() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether a request of a session is still being answered.
fn answering(guard: &Guard) -> bool {
    guard
        .activity
        .lock()
        .is_ok_and(|all| all.values().any(|a| a.in_flight > 0))
}

/// A connection over the cap: told so, briefly, and closed.
async fn refuse(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let busy = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(busy)).await;
}

/// The sessions rmcp has open.
async fn open_sessions(guard: &Guard) -> Vec<SessionId> {
    guard
        .sessions
        .sessions
        .read()
        .await
        .keys()
        .cloned()
        .collect()
}

/// Before a new session starts: at the cap, the session idle the longest ends (its client gets
/// 404 and may start again, as MCP says); one with a call in flight only when all have one.
async fn make_room(guard: &Guard) {
    let open = open_sessions(guard).await;
    let ids: HashSet<&str> = open.iter().map(|o| o.as_ref()).collect();
    guard.store.retain(|id| ids.contains(id));
    guard.direct.retain(|id| ids.contains(id));
    let oldest = {
        let Ok(mut seen) = guard.activity.lock() else {
            return;
        };
        seen.retain(|id, _| ids.contains(id.as_str()));
        if open.len() < guard.max_sessions {
            return;
        }
        // A session not seen yet is one whose `initialize` is being answered: the newest.
        open.iter()
            .min_by_key(|id| match seen.get(id.as_ref()) {
                Some(a) => (false, a.in_flight > 0, Some(a.last)),
                None => (true, true, None),
            })
            .cloned()
    };
    if let Some(id) = oldest {
        end_session(guard, &id).await;
    }
}

async fn end_session(guard: &Guard, id: &SessionId) {
    let _ = guard.sessions.close_session(id).await;
    guard.store.forget(id.as_ref());
    guard.direct.remove(id.as_ref());
    if let Ok(mut seen) = guard.activity.lock() {
        seen.remove(id.as_ref());
    }
}

/// Ends the sessions without a request in flight or a new one for `idle` (`--session-idle`).
async fn expire_idle(guard: Arc<Guard>, idle: Duration) {
    let tick = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
    loop {
        tokio::time::sleep(tick).await;
        let open = open_sessions(&guard).await;
        // A session rmcp ended by itself lets go of its handler here (and of its upstream
        // sessions, which end with the handler).
        guard
            .direct
            .retain(|id| open.iter().any(|o| o.as_ref() == id));
        let expired: Vec<SessionId> = {
            let Ok(mut seen) = guard.activity.lock() else {
                return;
            };
            let ids: HashSet<&str> = open.iter().map(|o| o.as_ref()).collect();
            seen.retain(|id, _| ids.contains(id.as_str()));
            let now = Instant::now();
            open.iter()
                .filter(|id| {
                    let a = seen.entry(id.to_string()).or_insert(Activity {
                        last: now,
                        in_flight: 0,
                    });
                    a.in_flight == 0 && now.duration_since(a.last) >= idle
                })
                .cloned()
                .collect()
        };
        for id in expired {
            end_session(&guard, &id).await;
        }
    }
}

/// A request of a session: its session was active now.
fn saw_session(guard: &Guard, id: &str) {
    if let Ok(mut seen) = guard.activity.lock() {
        if let Some(a) = seen.get_mut(id) {
            a.last = Instant::now();
        }
    }
}

async fn handle(guard: &Guard, req: Request<Incoming>) -> Response<Body> {
    let (resp, made) = direct::creating(guarded(guard, req)).await;
    // A new session's id comes with the answer to its `initialize`.
    let new = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok());
    if let Some(id) = new {
        if let Ok(mut seen) = guard.activity.lock() {
            let a = seen.entry(id.to_string()).or_insert(Activity {
                last: Instant::now(),
                in_flight: 0,
            });
            a.last = Instant::now();
        }
        if let Some(session) = made {
            guard.direct.insert(id, session);
        }
    }
    resp
}

async fn guarded(guard: &Guard, mut req: Request<Incoming>) -> Response<Body> {
    if let Some(metadata) = guard
        .auth
        .as_ref()
        .and_then(|a| a.metadata(req.uri().path()))
    {
        return metadata;
    }
    if req.uri().path() != ENDPOINT {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: the MCP endpoint is /mcp\n",
        );
    }
    if let Err(refused) = admit(guard, &mut req).await {
        return refused;
    }
    if let Some(origin) = req.headers().get(hyper::header::ORIGIN) {
        let host = req
            .headers()
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok());
        if !origin_allowed(origin.to_str().unwrap_or(""), host) {
            return plain(
                StatusCode::FORBIDDEN,
                "forbidden: this Origin may not call this MCP server\n",
            );
        }
    }
    let session = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let posted = req.method() == hyper::Method::POST && is_json(req.headers());
    let draining = guard.draining.load(std::sync::atomic::Ordering::SeqCst);
    // While the server stops, a new event stream is refused; a resumed one (a call in flight
    // may still answer there) goes on.
    if draining
        && req.method() == hyper::Method::GET
        && !req.headers().contains_key("last-event-id")
    {
        return super::jsonrpc::draining(&[], false);
    }
    match &session {
        // A JSON POST marks its session active as it starts and as it ends (`Busy`).
        Some(_) if posted => {}
        Some(id) => saw_session(guard, id),
        // A new session is made room for when its `initialize` has been read (`post`).
        None => {}
    }
    match *req.method() {
        hyper::Method::POST if posted => post(guard, req, session.as_deref()).await,
        hyper::Method::GET => {
            let last = req
                .headers()
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .and_then(resume::parse_id);
            let resumed = match session.zip(last) {
                // The events of a session that has ended are gone with it: rmcp answers 404.
                Some((s, last)) if is_open(guard, &s).await => {
                    resume::resume(&guard.store, &s, last)
                }
                Some((s, _)) => {
                    guard.store.forget(&s);
                    None
                }
                None => None,
            };
            match resumed {
                Some(resp) => resp,
                None => Box::pin(guard.service.handle(req)).await,
            }
        }
        hyper::Method::DELETE => {
            if let Some(s) = &session {
                guard.store.forget(s);
                guard.direct.remove(s);
            }
            let mut resp = Box::pin(guard.service.handle(req)).await;
            // rmcp answers 202; the specification's clients expect 200 or 204 for a session
            // that ended (the Python SDK logs "Session termination failed: 202" otherwise).
            if resp.status() == StatusCode::ACCEPTED {
                *resp.status_mut() = StatusCode::NO_CONTENT;
            }
            resp
        }
        // rmcp's futures are large: boxed, they do not make every request's future as large,
        // which is moved (copied) several times on its way to hyper.
        _ => Box::pin(guard.service.handle(req)).await,
    }
}

/// The request's credentials: an OAuth access token (`serve.auth`), whose principal rides on
/// the request, or the static `--token-env` token.
async fn admit(guard: &Guard, req: &mut Request<Incoming>) -> Result<(), Response<Body>> {
    if let Some(auth) = &guard.auth {
        let principal = auth.authenticate(req.headers()).await?;
        // A session is its opener's: another subject's token does not reach into it.
        let session = req
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok());
        let owner = session.and_then(|s| guard.direct.subject(s));
        if let Some(refused) = auth.foreign(owner.as_deref(), &principal) {
            return Err(refused);
        }
        req.extensions_mut().insert(Arc::new(principal));
    } else if let Some(token) = &guard.token {
        let given = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        if !given.is_some_and(|g| same_secret(g, token)) {
            let mut resp = plain(
                StatusCode::UNAUTHORIZED,
                "unauthorized: send `Authorization: Bearer <token>`\n",
            );
            resp.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Bearer"),
            );
            return Err(resp);
        }
    }
    Ok(())
}

/// A JSON POST: a `tools/call` that needs nothing of rmcp's is answered here (`direct`), as
/// are 2026-07-28's common `tools/call` and `tools/list` (`stateless_direct`); anything else
/// goes to rmcp, and its single-message answers are made JSON (`answer`).
async fn post(guard: &Guard, req: Request<Incoming>, session: Option<&str>) -> Response<Body> {
    let busy = session.and_then(|s| Busy::new(guard, s));
    let (mut parts, body) = match super::jsonrpc::read(req, guard.read_timeout).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    // While the server stops, what asks for something new is refused; what the calls still
    // running need (the client's answer to a question they asked) goes on.
    if guard.draining.load(std::sync::atomic::Ordering::SeqCst) {
        if let Some(refused) = super::jsonrpc::refused_while_draining(&body) {
            return refused;
        }
    }
    let principal = parts.extensions.get::<Arc<super::auth::Principal>>();
    if let Some(refused) = guard
        .auth
        .as_ref()
        .zip(principal)
        .and_then(|(a, p)| a.refuse(p, &body))
    {
        return refused;
    }
    // A call answered here is cancelled here; one rmcp answers, by rmcp.
    if let (Some(s), Some(_)) = (session, &busy) {
        if guard.direct.cancel(s, &body) {
            return super::jsonrpc::accepted();
        }
    }
    let token = guard.token.is_some() || guard.auth.is_some();
    // Taken: a `tools/call` or `tools/list` (never an `initialize`), read once.
    if session.is_none() {
        if let Some(taken) = guard.stateless.take(&parts, &body, token) {
            return taken.answer(&guard.stateless).await;
        }
    }
    // Only an `initialize` sent alone opens a session (one in a batch is refused): the cap
    // is held message by message, and a message that opens none ends no session for room.
    if session.is_none() && super::jsonrpc::opens_session(&body) {
        Box::pin(make_room(guard)).await;
    }
    if let (Some(s), Some(_)) = (session, &busy) {
        if let Some(call) = direct::call(&guard.direct, s, &parts.headers, &body, token) {
            if is_open(guard, s).await {
                let (store, ticker) = (&guard.store, &*guard.ticker);
                return direct::answer(call, &parts.headers, (store, ticker), s, busy).await;
            }
        }
    }
    // The call's hang-up reaches rmcp's handler with the request (see `resume`).
    let hangup = resume::Hangup::new();
    parts.extensions.insert(hangup.clone());
    let resp = Box::pin(super::jsonrpc::post(&guard.service, parts, body)).await;
    if resp.status() == StatusCode::OK && is_event_stream(resp.headers()) {
        Box::pin(answer::answer(&guard.store, session, &hangup, resp, busy)).await
    } else {
        resp
    }
}

async fn is_open(guard: &Guard, session: &str) -> bool {
    guard
        .sessions
        .has_session(&SessionId::from(session))
        .await
        .unwrap_or(false)
}

/// The credentials of an `Authorization: Bearer` header; the scheme is matched
/// case-insensitively (RFC 9110 section 11.1).
pub(crate) fn bearer(value: &str) -> Option<&str> {
    let (scheme, rest) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

/// A JSON body, which toolrun reads itself so that malformed JSON and batches get the answers
/// JSON-RPC specifies; anything else is rmcp's to refuse (415).
fn is_json(headers: &hyper::HeaderMap) -> bool {
    headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
}

fn is_event_stream(headers: &hyper::HeaderMap) -> bool {
    headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Compares in time independent of where the first difference is.
fn same_secret(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A browser page may call only if it was served by this server's own host, or by a loopback
/// host: a page on `evil.example` that rebinds its name to 127.0.0.1 is refused.
pub(crate) fn origin_allowed(origin: &str, host_header: Option<&str>) -> bool {
    let Ok(url) = url::Url::parse(origin) else {
        return false;
    };
    if !matches!(url.scheme(), "http" | "https") {
        return false;
    }
    let Some(origin_host) = url.host_str() else {
        return false;
    };
    let origin_host = origin_host.trim_start_matches('[').trim_end_matches(']');
    let loopback = origin_host.eq_ignore_ascii_case("localhost")
        || origin_host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        return true;
    }
    let Some(host) = host_header else {
        return false;
    };
    super::host_name(host).eq_ignore_ascii_case(origin_host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_of_loopback_or_this_host_only() {
        assert!(origin_allowed(
            "http://localhost:3000",
            Some("127.0.0.1:8765")
        ));
        assert!(origin_allowed("http://127.0.0.1", Some("127.0.0.1:8765")));
        assert!(origin_allowed("http://[::1]:9", None));
        assert!(origin_allowed(
            "https://mcp.example.com",
            Some("mcp.example.com:8765")
        ));
        assert!(!origin_allowed(
            "http://evil.example",
            Some("127.0.0.1:8765")
        ));
        assert!(!origin_allowed("http://evil.example", None));
        assert!(!origin_allowed("null", Some("127.0.0.1:8765")));
        assert!(!origin_allowed("file:///x", Some("127.0.0.1:8765")));
        assert!(!origin_allowed(
            "http://127.0.0.1.evil.example",
            Some("127.0.0.1:8765")
        ));
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer abc "), Some("abc"));
        assert_eq!(bearer("BEARER  abc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abd", "abc"));
        assert!(!same_secret("ab", "abc"));
        assert!(!same_secret("", "abc"));
    }
}
