//! HTTP tools' plain-HTTP requests, sent over hyper's HTTP/1 connections directly, pooled here.
//! reqwest, which sends everything else and all HTTPS, passes a request through layers this
//! transport has no use for (redirects, timeouts, proxies and decompression are off or done
//! here), and the pooled client under it (hyper-util's) hashes its pool key twice a request,
//! works the `Host` header out from a parsed URI again and wraps each connection's task: a tenth
//! of the instructions a served call cost. What goes on the wire is what that client sent:
//! the request's headers as given (reqwest's one default, `Accept: */*`, is never missing from an
//! HTTP tool's request), then `Authorization: Basic` for credentials in the URL and `Host` (with
//! the port when it is not 80), each unless the request has its own, `Content-Length` by hyper,
//! the path and query as the request target. Connections are set up as reqwest sets up its own
//! (no Nagle delay, keep-alive probes), kept alive between requests, at most 32 idle per host
//! and credentials, and dropped after 90 s idle.

use super::{innermost, HttpRequest, NetError};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpSocket, TcpStream};

type Sender = SendRequest<Full<Bytes>>;

/// How long an idle connection is kept (hyper-util's pool default, which reqwest keeps).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Idle connections kept per host: enough for a gateway's bursts of parallel calls, and a bound
/// on what a burst leaves behind.
const MAX_IDLE_PER_HOST: usize = 32;

/// Idle connections by `user:password@host:port` (the URL's credentials, when it has any).
/// Expiry is checked when a connection is taken or given back (no timer per connection); the
/// hosts are few, so a list is searched, not a hashed map.
pub(super) struct Pool {
    idle: Mutex<Idle>,
    idle_timeout: Duration,
    max_idle_per_host: usize,
    /// Requests a closed idle connection gave back, sent again on another.
    #[cfg(test)]
    retried: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Idle {
    hosts: Vec<(String, Vec<(Sender, Instant)>)>,
    /// When the oldest idle connection expires: nothing to sweep before then.
    next_expiry: Option<Instant>,
}

impl Default for Pool {
    fn default() -> Pool {
        Pool::new(IDLE_TIMEOUT, MAX_IDLE_PER_HOST)
    }
}

impl Pool {
    fn new(idle_timeout: Duration, max_idle_per_host: usize) -> Pool {
        Pool {
            idle: Mutex::default(),
            idle_timeout,
            max_idle_per_host,
            #[cfg(test)]
            retried: Default::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The most recently used idle connection to `key` that can take a request now; the closed
    /// and the expired are dropped on the way.
    fn checkout(&self, key: &str) -> Option<Sender> {
        let mut idle = self.lock();
        if idle.hosts.is_empty() {
            return None;
        }
        let now = Instant::now();
        idle.sweep(now, self.idle_timeout);
        let at = idle.hosts.iter().position(|(k, _)| k == key)?;
        // A host's entry stays when its last connection is taken: the connection usually comes
        // back within the request.
        let conns = &mut idle.hosts[at].1;
        let found = std::iter::from_fn(|| conns.pop()).find(|(s, _)| s.is_ready());
        found.map(|(s, _)| s)
    }

    /// Keeps `sender` for the next request to `key`, once its connection can take one: at once
    /// when the response was read to its end (the connection is ready by then), or when it
    /// becomes ready; a connection that closes instead is dropped.
    fn give_back(self: &Arc<Self>, key: &str, mut sender: Sender) {
        if sender.is_ready() {
            return self.insert(key, sender);
        }
        if sender.is_closed() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (pool, key) = (Arc::clone(self), key.to_string());
        runtime.spawn(async move {
            if sender.ready().await.is_ok() {
                pool.insert(&key, sender);
            }
        });
    }

    fn insert(&self, key: &str, sender: Sender) {
        let mut idle = self.lock();
        let now = Instant::now();
        idle.sweep(now, self.idle_timeout);
        let at = match idle.hosts.iter().position(|(k, _)| k == key) {
            Some(at) => at,
            None => {
                // Hosts without idle connections leave when another host comes.
                idle.hosts.retain(|(_, conns)| !conns.is_empty());
                idle.hosts.push((key.to_string(), Vec::new()));
                idle.hosts.len() - 1
            }
        };
        let conns = &mut idle.hosts[at].1;
        if conns.len() >= self.max_idle_per_host {
            return;
        }
        conns.push((sender, now));
        let expiry = now + self.idle_timeout;
        idle.next_expiry = Some(idle.next_expiry.map_or(expiry, |e| e.min(expiry)));
    }

    #[cfg(test)]
    fn idle_count(&self, key: &str) -> usize {
        let idle = self.lock();
        let conns = idle.hosts.iter().find(|(k, _)| k == key);
        conns.map_or(0, |(_, c)| c.len())
    }
}

impl Idle {
    /// Drops every connection idle for `timeout` or more, if any is due.
    fn sweep(&mut self, now: Instant, timeout: Duration) {
        if self.next_expiry.is_none_or(|e| e > now) {
            return;
        }
        let mut next = None::<Instant>;
        for (_, conns) in &mut self.hosts {
            conns.retain(|(_, since)| now.duration_since(*since) < timeout);
            for (_, since) in conns.iter() {
                let expiry = *since + timeout;
                next = Some(next.map_or(expiry, |e| e.min(expiry)));
            }
        }
        self.hosts.retain(|(_, conns)| !conns.is_empty());
        self.next_expiry = next;
    }
}

/// A connection lent to one request: given back to the pool when dropped, which is once the
/// response's body has been read (or given up on, which closes the connection).
pub(super) struct Lease<'a> {
    pool: &'a Arc<Pool>,
    key: &'a str,
    sender: Option<Sender>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(sender) = self.sender.take() {
            self.pool.give_back(self.key, sender);
        }
    }
}

/// Sends `req`, whose URL `url` is (parsed, `http:`); the response's body is still to be read,
/// and the lease kept until it is. `may_resend`: the caller allows a request the server may
/// have read to be sent again (see [`Transport::send_to`](super::Transport::send_to)).
pub(super) async fn send<'a>(
    pool: &'a Arc<Pool>,
    req: &HttpRequest,
    url: &'a url::Url,
    may_resend: bool,
) -> Result<(hyper::Response<Incoming>, Lease<'a>), NetError> {
    let mut request = request(req, url)?;
    // Connections are pooled by the credentials in the URL too: one opened for `alice@host` is
    // never lent to a request for `bob@host` (a server may tie a login to its connection).
    let key = &url[url::Position::BeforeUsername..url::Position::AfterPort];
    loop {
        let (mut sender, reused) = match pool.checkout(key) {
            Some(sender) => (sender, true),
            None => (connect(url).await?, false),
        };
        match sender.try_send_request(request).await {
            Ok(response) => {
                let lease = Lease {
                    pool,
                    key,
                    sender: Some(sender),
                };
                return Ok((response, lease));
            }
            Err(mut e) => match e.take_message() {
                // An idle connection the server had closed as the request went out (it was
                // never sent): another connection takes it, as hyper-util's client did.
                Some(unsent) if reused => {
                    #[cfg(test)]
                    pool.retried
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    request = unsent;
                }
                // The same race, lost later: the close reached hyper only after the request
                // was written. The server may have read it and acted on it (a DELETE that
                // went through, its answer lost), so only a safe method's request (RFC 9110,
                // section 9.2.1) is sent again, and only when the caller allows it.
                None if reused
                    && may_resend
                    && safe(&req.method)
                    && closed_before_answer(e.error()) =>
                {
                    #[cfg(test)]
                    pool.retried
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    request = self::request(req, url)?;
                }
                _ => return Err(NetError::Io(innermost(e.error()))),
            },
        }
    }
}

/// Methods that ask for nothing to change (RFC 9110, section 9.2.1). PUT and DELETE are
/// idempotent, not safe: sent twice they do their work twice (a payment deleted, then a 404 in
/// place of the lost answer), and what the caller saw is not what happened.
fn safe(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS" | "TRACE")
}

/// The connection ended before an answer came: closed, reset or broken under the request.
fn closed_before_answer(e: &hyper::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>());
    e.is_incomplete_message()
        || io
            .is_some_and(|io| matches!(io.kind(), ConnectionReset | BrokenPipe | ConnectionAborted))
}

/// The request as hyper's connection writes it: origin-form target (the authority for
/// `CONNECT`), `Host` added after the request's own headers unless one is among them.
fn request(req: &HttpRequest, url: &url::Url) -> Result<hyper::Request<Full<Bytes>>, NetError> {
    use url::Position;
    let invalid = |e: &dyn std::fmt::Display| NetError::Io(e.to_string());
    let mut request = hyper::Request::new(Full::new(
        req.body.clone().map(Bytes::from).unwrap_or_default(),
    ));
    let method = hyper::Method::from_bytes(req.method.as_bytes()).map_err(|e| invalid(&e))?;
    let target = if method == hyper::Method::CONNECT {
        &url[Position::BeforeUsername..Position::AfterPort]
    } else {
        &url[Position::BeforePath..Position::AfterQuery]
    };
    *request.uri_mut() = hyper::Uri::try_from(target).map_err(|e| invalid(&e))?;
    *request.method_mut() = method;
    let headers = request.headers_mut();
    for (k, v) in &req.headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| invalid(&e))?;
        let value = HeaderValue::from_bytes(v.as_bytes()).map_err(|e| invalid(&e))?;
        headers.append(name, value);
    }
    if !headers.contains_key(hyper::header::ACCEPT_ENCODING) {
        headers.insert(
            hyper::header::ACCEPT_ENCODING,
            HeaderValue::from_static(super::decode::ACCEPTED),
        );
    }
    if let hyper::header::Entry::Vacant(auth) = headers.entry(hyper::header::AUTHORIZATION) {
        // Credentials in the URL are Basic credentials, as reqwest (which sends HTTPS) sends
        // them; a request's own `Authorization` wins.
        if let Some(credentials) = basic_credentials(url) {
            let mut value = HeaderValue::from_str(&credentials).map_err(|e| invalid(&e))?;
            value.set_sensitive(true);
            auth.insert(value);
        }
    }
    if let hyper::header::Entry::Vacant(host) = headers.entry(hyper::header::HOST) {
        let authority = &url[Position::BeforeHost..Position::AfterPort];
        host.insert(HeaderValue::from_str(authority).map_err(|e| invalid(&e))?);
    }
    Ok(request)
}

/// `Basic ...` for the user name and password in `url`, percent-decoded; `None` without them.
fn basic_credentials(url: &url::Url) -> Option<String> {
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    let decoded = |s: &str| percent_encoding::percent_decode_str(s).collect::<Vec<u8>>();
    let mut pair = decoded(url.username());
    pair.push(b':');
    pair.extend(decoded(url.password().unwrap_or("")));
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
    Some(format!("Basic {encoded}"))
}

/// A new connection to `url`'s host, its `Connection` driven by a task of its own.
async fn connect(url: &url::Url) -> Result<Sender, NetError> {
    let stream = tcp(url)
        .await
        .map_err(|e| NetError::Connect(innermost(&e)))?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let (sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| NetError::Io(innermost(&e)))?;
    tokio::spawn(connection);
    Ok(sender)
}

/// Connects to the host's addresses as hyper-util's connector does: those of the first
/// address's family one after another, and, when the host has addresses of the other family
/// too, those from 300 ms on or once the first family's have all failed; the first connection
/// made wins. A failure is the first error of the family tried last.
async fn tcp(url: &url::Url) -> std::io::Result<TcpStream> {
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs: Vec<SocketAddr> = match url.host() {
        Some(url::Host::Ipv4(ip)) => vec![SocketAddr::from((ip, port))],
        Some(url::Host::Ipv6(ip)) => vec![SocketAddr::from((ip, port))],
        Some(url::Host::Domain(name)) => tokio::net::lookup_host((name, port)).await?.collect(),
        None => Vec::new(),
    };
    let first_v4 = addrs.first().is_some_and(SocketAddr::is_ipv4);
    let (preferred, fallback): (Vec<SocketAddr>, Vec<SocketAddr>) =
        addrs.into_iter().partition(|a| a.is_ipv4() == first_v4);
    if fallback.is_empty() {
        return each(&preferred).await;
    }
    let mut preferred = std::pin::pin!(each(&preferred));
    let mut fallback = std::pin::pin!(each(&fallback));
    tokio::select! {
        biased;
        first = &mut preferred => return match first {
            Ok(stream) => Ok(stream),
            Err(_) => fallback.await,
        },
        () = tokio::time::sleep(Duration::from_millis(300)) => {}
    }
    tokio::select! {
        biased;
        first = &mut preferred => match first {
            Ok(stream) => Ok(stream),
            Err(_) => fallback.await,
        },
        first = &mut fallback => match first {
            Ok(stream) => Ok(stream),
            Err(_) => preferred.await,
        },
    }
}

/// The first connection made to one of `addrs`, tried in turn; or the first error.
async fn each(addrs: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut first = None;
    for addr in addrs {
        match one(*addr).await {
            Ok(stream) => return Ok(stream),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    Err(first.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotConnected, "Network unreachable")
    }))
}

async fn one(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As hyper-util's connector: a socket that cannot take these still connects.
    let _ = socket2::SockRef::from(&socket).set_tcp_keepalive(&keepalive());
    let stream = socket.connect(addr).await?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// reqwest's keep-alive probes: after 15 s idle, every 15 s, 3 unanswered ones end it.
fn keepalive() -> socket2::TcpKeepalive {
    let keepalive = socket2::TcpKeepalive::new().with_time(Duration::from_secs(15));
    #[cfg(any(target_os = "linux", target_os = "macos", target_os = "windows"))]
    let keepalive = keepalive
        .with_interval(Duration::from_secs(15))
        .with_retries(3);
    keepalive
}

/// A body that broke off while it was read.
pub(super) fn body_error(e: hyper::Error) -> NetError {
    NetError::Io(innermost(&e))
}

#[cfg(test)]
mod tests;
