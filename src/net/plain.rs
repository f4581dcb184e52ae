//! HTTP tools' plain-HTTP requests, sent with hyper's pooled client directly (the client reqwest
//! itself sends with). reqwest, which sends everything else and all HTTPS, passes a request
//! through layers this transport has no use for (redirects, timeouts, proxies and decompression
//! are off or done here), and its redirect policy and URL conversions parse the URL twice more
//! and copy the headers twice: about 30,000 instructions of a served call's 283,000. What goes
//! on the wire is the same: the request's headers as given (reqwest's one default, `Accept:
//! */*`, is never missing from an HTTP tool's request), `Host` and `Content-Length` by hyper, and
//! the connection set up and pooled as reqwest sets up its own.

use super::{innermost, HttpRequest, NetError};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::time::Duration;

pub(super) type PlainClient = Client<HttpConnector, Full<Bytes>>;

/// reqwest's settings for its own connections: no Nagle delay, keep-alive probes after 15 s,
/// idle connections kept 90 s.
pub(super) fn client() -> PlainClient {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_keepalive(Some(Duration::from_secs(15)));
    http.set_keepalive_interval(Some(Duration::from_secs(15)));
    http.set_keepalive_retries(Some(3));
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(http)
}

/// Sends `req`, whose URL `url` is (parsed, `http:`); the response's body is still to be read.
pub(super) async fn send(
    client: &PlainClient,
    req: &HttpRequest,
    url: &url::Url,
) -> Result<hyper::Response<Incoming>, NetError> {
    let invalid = |e: &dyn std::fmt::Display| NetError::Io(e.to_string());
    let mut request = hyper::Request::new(Full::new(
        req.body.clone().map(Bytes::from).unwrap_or_default(),
    ));
    *request.method_mut() =
        hyper::Method::from_bytes(req.method.as_bytes()).map_err(|e| invalid(&e))?;
    *request.uri_mut() = hyper::Uri::try_from(url.as_str()).map_err(|e| invalid(&e))?;
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
    client.request(request).await.map_err(|e| {
        let message = innermost(&e);
        if e.is_connect() {
            NetError::Connect(message)
        } else {
            NetError::Io(message)
        }
    })
}

/// A body that broke off while it was read.
pub(super) fn body_error(e: hyper::Error) -> NetError {
    NetError::Io(innermost(&e))
}
