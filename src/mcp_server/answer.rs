//! A POST's answer as one `application/json` body when it is a single message. rmcp's session
//! mode frames every answer as an event stream with a priming event; the streamable HTTP
//! transport (2025-03-26 on) lets a server answer with a JSON body instead when the client
//! accepts both (rmcp has already answered 406 to a client that does not), and reading one JSON
//! body costs a client far less than an event stream (the Python SDK: ~0.5 ms a call).
//!
//! rmcp's stream is read here until it decides the matter: the response first, with nothing
//! before it but the priming event, is answered as JSON; anything else before it (a progress or
//! log notification, an elicitation request), the call's hang-up (`reconnect`), or a call still
//! running after [`LONG_CALL`] keeps the event stream, with what was read so far put back in
//! front, so that such a client gets its notifications as they come and an event id to resume
//! from (`resume`).

use super::resume::{self, Hangup};
use bytes::Bytes;
use futures_util::{stream, StreamExt};
use http_body_util::{combinators::BoxBody, BodyExt, BodyStream, Full, StreamBody};
use hyper::body::Frame;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::Response;
use serde::de::IgnoredAny;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

type Body = BoxBody<Bytes, Infallible>;

/// A call still running after this long is answered as an event stream, whose priming event
/// gives its client an id to come back with if the connection drops.
pub(crate) const LONG_CALL: Duration = Duration::from_secs(1);

/// What one event of rmcp's stream is, for the choice between JSON and an event stream.
#[derive(Debug, PartialEq)]
enum Event<'a> {
    /// No data (a priming event) or a comment (a keep-alive): nothing a JSON body needs.
    Empty,
    /// A JSON-RPC response: the answer.
    Response(&'a [u8]),
    /// A notification or a request of the server's: the client needs an event stream.
    Other,
}

/// Answers a POST that rmcp answered with an event stream: as JSON when the stream holds only
/// the response, else as the event stream, kept for resumption when it belongs to a session.
/// `busy` is held until the answer has been made (with the stream's pump when it is kept).
pub(crate) async fn answer(
    store: &Arc<resume::Store>,
    session: Option<&str>,
    hangup: &Hangup,
    resp: Response<Body>,
    busy: impl Send + 'static,
) -> Response<Body> {
    let (mut parts, mut body) = resp.into_parts();
    let mut hung_up = hangup.subscribe();
    let mut read: Vec<u8> = Vec::new();
    let mut scanned = 0;
    let long_call = tokio::time::sleep(LONG_CALL);
    tokio::pin!(long_call);
    'reading: loop {
        let frame = tokio::select! {
            biased;
            _ = hung_up.changed() => break,
            _ = &mut long_call => break,
            frame = body.frame() => frame,
        };
        let Some(Ok(frame)) = frame else { break };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        read.extend_from_slice(&data);
        while let Some(end) = event_end(&read[scanned..]) {
            let event = &read[scanned..scanned + end.0];
            scanned += end.1;
            match classify(event) {
                Event::Empty => continue,
                Event::Response(json) if !*hung_up.borrow() => {
                    let json = Bytes::copy_from_slice(json);
                    parts
                        .headers
                        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                    parts.headers.remove(CACHE_CONTROL);
                    parts.headers.remove("x-accel-buffering");
                    return Response::from_parts(parts, Full::new(json).boxed());
                }
                _ => break 'reading,
            }
        }
    }
    // The client gets what was read before it hung up; when it did, that is at least the
    // stream's first event, the priming event with the id to come back with.
    let mut cut = read.len();
    if *hung_up.borrow() {
        while event_end(&read).is_none() {
            match body.frame().await {
                Some(Ok(frame)) => read.extend_from_slice(frame.data_ref().map_or(&[][..], |d| d)),
                _ => break,
            }
        }
        cut = event_end(&read).map_or(read.len(), |e| e.1);
    }
    let mut rest = Bytes::from(read);
    let Some(session) = session else {
        return Response::from_parts(parts, prefixed(rest, body));
    };
    let delivered = rest.split_to(cut);
    let resp = Response::from_parts(parts, prefixed(rest, body));
    resume::keep_stream(store, session, hangup, resp, delivered, busy)
}

/// Where the first complete event in `text` ends: (its length, the length with the blank line
/// that ends it).
fn event_end(text: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    while i + 1 < text.len() {
        if text[i] == b'\n' {
            if text[i + 1] == b'\n' {
                return Some((i, i + 2));
            }
            if text[i + 1] == b'\r' && text.get(i + 2) == Some(&b'\n') {
                return Some((i, i + 3));
            }
        }
        i += 1;
    }
    None
}

fn classify(event: &[u8]) -> Event<'_> {
    let mut data: Option<&[u8]> = None;
    for line in event.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(d) = line.strip_prefix(b"data:") {
            if data.is_some() {
                // Data over several lines is not what rmcp writes: leave it to the stream.
                return Event::Other;
            }
            data = Some(d.strip_prefix(b" ").unwrap_or(d));
        }
    }
    let Some(data) = data.filter(|d| !d.iter().all(u8::is_ascii_whitespace)) else {
        return Event::Empty;
    };
    /// The members that tell a response from a notification or a request.
    #[derive(serde::Deserialize)]
    struct Shape {
        id: Option<IgnoredAny>,
        method: Option<IgnoredAny>,
    }
    match serde_json::from_slice::<Shape>(data) {
        Ok(Shape {
            id: Some(_),
            method: None,
        }) => Event::Response(data),
        _ => Event::Other,
    }
}

/// The bytes already read, then the rest of the stream.
fn prefixed(head: Bytes, rest: Body) -> Body {
    let head = (!head.is_empty()).then(|| Ok(Frame::data(head)));
    BodyExt::boxed(StreamBody::new(
        stream::iter(head).chain(BodyStream::new(rest)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_told_apart() {
        assert_eq!(classify(b"data:\nid: 0\nretry: 3000"), Event::Empty);
        assert_eq!(classify(b": keep-alive"), Event::Empty);
        assert_eq!(
            classify(b"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"method\":1}}"),
            Event::Response(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"method\":1}}")
        );
        assert_eq!(
            classify(b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}"),
            Event::Other
        );
        assert_eq!(
            classify(b"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"elicitation/create\"}"),
            Event::Other
        );
        assert_eq!(
            classify(b"data: {\"id\":1,\ndata: \"result\":{}}"),
            Event::Other
        );
        assert_eq!(classify(b"data: not json"), Event::Other);
        assert_eq!(event_end(b"data: x\n\nrest"), Some((7, 9)));
        assert_eq!(event_end(b"data: x\r\n\r\nrest"), Some((8, 11)));
        assert_eq!(event_end(b"data: x\n"), None);
    }
}
