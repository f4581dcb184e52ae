//! Resumable call streams (SEP-1699 polling). A `tools/call` answered as an event stream is
//! read here, not by hyper: every event gets an id of toolrun's (`r<stream>-<index>`) and is
//! kept in its session's store until the stream has been delivered, so a client that went away
//! (or that the call asked to come back, `notify: [{reconnect: true}]`) gets the rest, result
//! included, on `GET` with `Last-Event-ID`. rmcp forgets a request's events once its result is
//! sent, which is why the store is toolrun's. Each session keeps at most [`MAX_EVENTS`] events
//! and [`MAX_BYTES`] bytes (the oldest go first), and sessions are bounded by `--max-sessions`.

use bytes::Bytes;
use futures_util::{stream, StreamExt};
use http_body_util::{combinators::BoxBody, BodyExt, StreamBody};
use hyper::body::{Body as _, Frame};
use hyper::{Response, StatusCode};
use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};

type Body = BoxBody<Bytes, Infallible>;

/// Events one session keeps at most.
pub(crate) const MAX_EVENTS: usize = 256;
/// Bytes of events one session keeps at most (a larger single event is kept alone).
pub(crate) const MAX_BYTES: usize = 1024 * 1024;

/// Closes one call's event stream to its client; the call goes on and its events are kept.
#[derive(Clone)]
pub(crate) struct Hangup(Arc<watch::Sender<bool>>);

impl Hangup {
    pub(crate) fn new() -> Hangup {
        Hangup(Arc::new(watch::channel(false).0))
    }

    pub(crate) fn hang_up(&self) {
        self.0.send_replace(true);
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.subscribe()
    }

    pub(crate) fn is_hung_up(&self) -> bool {
        *self.0.borrow()
    }
}

#[derive(Default)]
struct SessionEvents {
    next_stream: u64,
    /// (stream, index, the event as written), oldest first.
    events: VecDeque<(u64, u64, Bytes)>,
    bytes: usize,
    /// Streams whose call has ended: nothing more will come.
    done: HashSet<u64>,
}

/// Every session's kept events.
#[derive(Default)]
pub(crate) struct Store {
    sessions: Mutex<HashMap<String, SessionEvents>>,
    /// Bumped at each change, so that resumed streams wait for more.
    changed: watch::Sender<u64>,
}

impl Store {
    /// Forgets the sessions that are no longer open.
    pub(crate) fn retain(&self, open: impl Fn(&str) -> bool) {
        if let Ok(mut s) = self.sessions.lock() {
            s.retain(|id, _| open(id));
        }
    }

    pub(crate) fn forget(&self, session: &str) {
        if let Ok(mut s) = self.sessions.lock() {
            s.remove(session);
        }
    }

    fn open_stream(&self, session: &str) -> u64 {
        let Ok(mut s) = self.sessions.lock() else {
            return 0;
        };
        let events = s.entry(session.to_string()).or_default();
        events.next_stream += 1;
        events.next_stream
    }

    fn keep(&self, session: &str, stream: u64, index: u64, event: Bytes) {
        if let Ok(mut s) = self.sessions.lock() {
            if let Some(e) = s.get_mut(session) {
                e.bytes += event.len();
                e.events.push_back((stream, index, event));
                while e.events.len() > 1 && (e.events.len() > MAX_EVENTS || e.bytes > MAX_BYTES) {
                    if let Some((_, _, old)) = e.events.pop_front() {
                        e.bytes -= old.len();
                    }
                }
            }
        }
        self.changed.send_modify(|n| *n += 1);
    }

    /// A stream has ended; `delivered`: its client read all of it, so none of it is kept.
    fn close_stream(&self, session: &str, stream: u64, delivered: bool) {
        if let Ok(mut s) = self.sessions.lock() {
            if let Some(e) = s.get_mut(session) {
                e.done.insert(stream);
                if delivered {
                    e.events.retain(|(s, _, _)| *s != stream);
                    e.bytes = e.events.iter().map(|(_, _, b)| b.len()).sum();
                    e.done.remove(&stream);
                }
            }
        }
        self.changed.send_modify(|n| *n += 1);
    }

    /// The kept events of `stream` after `index`, and whether the stream has ended; `None` when
    /// the session has no such stream.
    fn after(&self, session: &str, stream: u64, index: u64) -> Option<(Vec<(u64, Bytes)>, bool)> {
        let s = self.sessions.lock().ok()?;
        let e = s.get(session)?;
        if stream == 0 || stream > e.next_stream {
            return None;
        }
        let events = e
            .events
            .iter()
            .filter(|(s, i, _)| *s == stream && *i > index)
            .map(|(_, i, b)| (*i, b.clone()))
            .collect();
        Some((events, e.done.contains(&stream)))
    }
}

/// A `Last-Event-ID` of toolrun's: (stream, index).
pub(crate) fn parse_id(id: &str) -> Option<(u64, u64)> {
    let (stream, index) = id.strip_prefix('r')?.split_once('-')?;
    Some((stream.parse().ok()?, index.parse().ok()?))
}

/// A response body made of what is sent on `rx` (by a task), until its sender is dropped.
pub(crate) fn channel_body(mut rx: mpsc::Receiver<Bytes>) -> Body {
    let frames = stream::poll_fn(move |cx| rx.poll_recv(cx)).map(|b| Ok(Frame::data(b)));
    BodyExt::boxed(StreamBody::new(frames))
}

/// Takes over a call's event-stream response: its events are renumbered and kept while a task
/// reads the call to its end, whether or not the client stays; `busy` is held until then.
/// `delivered`: events already read from it, which go to the client even if it hung up since.
pub(crate) fn keep_stream(
    store: &Arc<Store>,
    session: &str,
    hangup: &Hangup,
    resp: Response<Body>,
    delivered: Bytes,
    busy: impl Send + 'static,
) -> Response<Body> {
    let (parts, body) = resp.into_parts();
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let stream = store.open_stream(session);
    let (store, session) = (store.clone(), session.to_string());
    let hung_up = hangup.0.subscribe();
    tokio::spawn(async move {
        let mut reader = Reader {
            store,
            session,
            stream,
            index: 0,
            pending: String::new(),
        };
        pump(&mut reader, delivered, body, hung_up, tx).await;
        drop(busy);
    });
    Response::from_parts(parts, channel_body(rx))
}

/// Splits a call's stream into events, renumbered and kept.
struct Reader {
    store: Arc<Store>,
    session: String,
    stream: u64,
    index: u64,
    pending: String,
}

impl Reader {
    /// The events complete after `data`, as the client gets them.
    fn read(&mut self, data: &[u8]) -> Vec<Bytes> {
        self.pending
            .push_str(&String::from_utf8_lossy(data).replace("\r\n", "\n"));
        let mut out = Vec::new();
        while let Some(end) = self.pending.find("\n\n") {
            let raw: String = self.pending.drain(..end + 2).collect();
            out.push(match renumber(&raw, self.stream, self.index) {
                Some(event) => {
                    let event = Bytes::from(event);
                    let (store, session) = (&self.store, &self.session);
                    store.keep(session, self.stream, self.index, event.clone());
                    self.index += 1;
                    event
                }
                None => Bytes::from(raw),
            });
        }
        out
    }
}

async fn pump(
    reader: &mut Reader,
    delivered: Bytes,
    mut body: Body,
    mut hung_up: watch::Receiver<bool>,
    tx: mpsc::Sender<Bytes>,
) {
    let mut client = Some(tx);
    for event in reader.read(&delivered) {
        if let Some(c) = &client {
            if c.send(event).await.is_err() {
                client = None;
            }
        }
    }
    loop {
        let frame = tokio::select! {
            biased;
            Ok(()) = hung_up.changed(), if client.is_some() => {
                if *hung_up.borrow() {
                    client = None;
                }
                continue;
            }
            frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)) => frame,
        };
        let Some(Ok(frame)) = frame else { break };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        for event in reader.read(&data) {
            if *hung_up.borrow() {
                client = None;
            }
            if let Some(c) = &client {
                if c.send(event).await.is_err() {
                    client = None;
                }
            }
        }
    }
    let delivered = client.is_some() && !*hung_up.borrow();
    reader
        .store
        .close_stream(&reader.session, reader.stream, delivered);
}

/// An event with toolrun's id in place of rmcp's; `None` for a comment (a keep-alive), which is
/// passed on but not kept.
fn renumber(raw: &str, stream: u64, index: u64) -> Option<String> {
    let lines: Vec<&str> = raw
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("id:"))
        .collect();
    if lines.iter().all(|l| l.starts_with(':')) {
        return None;
    }
    let mut out = format!("id: r{stream}-{index}\n");
    for l in lines {
        out.push_str(l);
        out.push('\n');
    }
    out.push('\n');
    Some(out)
}

/// `GET` with a `Last-Event-ID` of toolrun's: the kept events after it, then the rest of the
/// stream as it comes, until the call has ended. `None`: not a stream this session has.
pub(crate) fn resume(
    store: &Arc<Store>,
    session: &str,
    last: (u64, u64),
) -> Option<Response<Body>> {
    let (stream, index) = last;
    store.after(session, stream, index)?;
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let (store, session) = (store.clone(), session.to_string());
    tokio::spawn(async move {
        let mut changed = store.changed.subscribe();
        let mut last = index;
        loop {
            changed.borrow_and_update();
            let Some((events, done)) = store.after(&session, stream, last) else {
                return;
            };
            for (i, event) in events {
                if tx.send(event).await.is_err() {
                    return;
                }
                last = i;
            }
            if done || changed.changed().await.is_err() {
                return;
            }
        }
    });
    let mut resp = Response::new(channel_body(rx));
    *resp.status_mut() = StatusCode::OK;
    let headers = resp.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    Some(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_renumbered_and_comments_passed_on() {
        assert_eq!(
            renumber("id: 0\nretry: 3000\ndata:\n\n", 2, 0).as_deref(),
            Some("id: r2-0\nretry: 3000\ndata:\n\n")
        );
        assert_eq!(renumber(": keep-alive\n\n", 2, 1), None);
        assert_eq!(parse_id("r2-7"), Some((2, 7)));
        assert_eq!(parse_id("0/3"), None);
    }

    #[test]
    fn a_session_keeps_a_bounded_number_of_events() {
        let store = Store::default();
        let stream = store.open_stream("s");
        for i in 0..(MAX_EVENTS as u64 + 10) {
            store.keep("s", stream, i, Bytes::from_static(b"data: {}\n\n"));
        }
        let (events, done) = store.after("s", stream, 0).expect("the stream");
        assert_eq!(events.len(), MAX_EVENTS);
        assert_eq!(events[0].0, 10);
        assert!(!done);
        let big = Bytes::from(vec![b'x'; MAX_BYTES / 2 + 1]);
        store.keep("s", stream, 1000, big.clone());
        store.keep("s", stream, 1001, big);
        let (events, _) = store.after("s", stream, 0).expect("the stream");
        assert_eq!(events.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1001]);
        store.close_stream("s", stream, false);
        assert!(store.after("s", stream, 0).expect("kept").1);
        store.forget("s");
        assert!(store.after("s", stream, 0).is_none());
    }
}
