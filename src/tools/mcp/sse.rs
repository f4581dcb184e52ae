//! Server-sent events as the streamable HTTP transport (revision 2025-11-25) uses them: a reply
//! to a POST, or a stream resumed with GET and `Last-Event-ID`, carries the server's requests and
//! notifications before the response. [`Watch`] reads one as it arrives, so a request is answered
//! while the server waits for it and the body ends as soon as the response is in (a resumed GET
//! stream stays open); [`to_json`] turns the whole body into what is recorded and replayed.

use super::rpc::{is_request, Incoming};
use crate::net::HttpResponse;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Events parsed from pieces of a stream, with the resumption state the stream set.
#[derive(Default)]
pub(crate) struct Parser {
    line: Vec<u8>,
    data: Vec<String>,
    /// The last `id:` seen: where a resumed stream continues from.
    pub(crate) last_id: Option<String>,
    /// The last `retry:` seen, in milliseconds: how long to wait before resuming.
    pub(crate) retry: Option<u64>,
}

impl Parser {
    /// Feeds bytes; returns the JSON messages of the events they completed.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Vec<Value> {
        let mut done = Vec::new();
        for &b in chunk {
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
            if line.is_empty() {
                let data = std::mem::take(&mut self.data).join("\n");
                if let Ok(v) = serde_json::from_str::<Value>(&data) {
                    done.push(v);
                }
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line.as_str(), ""),
            };
            match field {
                "data" => self.data.push(value.to_string()),
                "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
                "retry" => {
                    if let Ok(ms) = value.parse::<u64>() {
                        self.retry = Some(ms);
                    }
                }
                _ => {} // `event:`, comments (`: keep-alive`)
            }
        }
        done
    }
}

/// The resumption point of a whole stream body: its last event id and `retry:`.
pub(crate) fn resume_point(body: &[u8]) -> (Option<String>, Option<u64>) {
    let mut p = Parser::default();
    p.feed(body);
    p.feed(b"\n\n");
    (p.last_id, p.retry)
}

/// Reads a stream as it arrives (the transport's `on_chunk`): requests from the server go to
/// `requests` to be answered at once, notifications become events, and reading stops once the
/// response to request `want` is in.
pub(crate) struct Watch<'a, 'b, 'e> {
    parser: Mutex<Parser>,
    want: Value,
    requests: tokio::sync::mpsc::UnboundedSender<Value>,
    incoming: &'a Incoming<'b, 'e>,
    done: AtomicBool,
    /// Notifications go to `requests` too, for the reader to route (the session's own stream).
    notes_too: bool,
}

impl<'a, 'b, 'e> Watch<'a, 'b, 'e> {
    pub(crate) fn new(
        want: Value,
        requests: tokio::sync::mpsc::UnboundedSender<Value>,
        incoming: &'a Incoming<'b, 'e>,
    ) -> Self {
        Watch {
            parser: Mutex::new(Parser::default()),
            want,
            requests,
            incoming,
            done: AtomicBool::new(false),
            notes_too: false,
        }
    }

    /// Notifications are sent on as requests are, not made events here.
    pub(crate) fn notes_too(mut self) -> Self {
        self.notes_too = true;
        self
    }

    /// One piece of the body; `false` once the response is in.
    pub(crate) fn feed(&self, chunk: &[u8]) -> bool {
        let messages = match self.parser.lock() {
            Ok(mut p) => p.feed(chunk),
            Err(_) => return true,
        };
        for m in messages {
            if is_request(&m) || (self.notes_too && m.get("method").is_some()) {
                let _ = self.requests.send(m);
            } else if m.get("method").is_some() {
                self.incoming.notification(&m);
            } else if m.get("id") == Some(&self.want) {
                self.done.store(true, Ordering::SeqCst);
            }
        }
        !self.done.load(Ordering::SeqCst)
    }
}

const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// A reply sent as server-sent events becomes the JSON-RPC messages that matter in it: what a
/// fixture records and a replay hands back. The response alone when nothing else matters; else
/// `[requests the server sent..., notifications/tools/list_changed, response]`, so a replay
/// answers the same requests and lists the tools again. Progress and log notifications are
/// dropped (they were events when they arrived). A stream without a response is left as it came:
/// the caller resumes it from its last event id.
pub(crate) fn to_json(mut resp: HttpResponse) -> HttpResponse {
    let is_stream = resp
        .header("content-type")
        .is_some_and(|c| c.to_ascii_lowercase().starts_with("text/event-stream"));
    if !is_stream {
        return resp;
    }
    let mut parser = Parser::default();
    let mut messages = parser.feed(&resp.body);
    messages.extend(parser.feed(b"\n\n"));
    let Some(at) = messages.iter().rposition(|m| {
        m.get("method").is_none() && (m.get("result").is_some() || m.get("error").is_some())
    }) else {
        return resp;
    };
    let response = messages.swap_remove(at);
    let mut kept: Vec<Value> = messages.iter().filter(|m| is_request(m)).cloned().collect();
    if let Some(n) = messages
        .iter()
        .find(|m| m.get("method").and_then(Value::as_str) == Some(LIST_CHANGED))
    {
        kept.push(n.clone());
    }
    let body = if kept.is_empty() {
        response
    } else {
        kept.push(response);
        json!(kept)
    };
    resp.body = body.to_string().into_bytes();
    for (k, v) in &mut resp.headers {
        if k.eq_ignore_ascii_case("content-type") {
            *v = "application/json".into();
        }
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(body: &str) -> HttpResponse {
        HttpResponse {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: body.as_bytes().to_vec(),
            truncated: false,
        }
    }

    fn body(r: &HttpResponse) -> Value {
        serde_json::from_slice(&r.body).unwrap()
    }

    #[test]
    fn an_event_stream_becomes_the_messages_that_matter() {
        let r = to_json(stream(
            "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"ok\":true}}\r\n\r\n",
        ));
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(
            body(&r),
            json!({"jsonrpc": "2.0", "id": 3, "result": {"ok": true}})
        );
        // Data split over several lines is joined with newlines, as SSE defines.
        let r = to_json(stream("data: {\"id\":1,\ndata: \"result\":2}\n\n"));
        assert_eq!(body(&r), json!({"id": 1, "result": 2}));
        // Requests from the server and a change of the tool list are kept before the response.
        let r = to_json(stream(
            "data: {\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"ping\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}",
        ));
        assert_eq!(
            body(&r),
            json!([{"jsonrpc": "2.0", "id": 0, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, {"jsonrpc": "2.0", "id": 4, "result": {}}])
        );
        // A stream without a response is left as it came, to be resumed.
        let r = to_json(stream("id: e-1\nretry: 500\ndata: \n\n"));
        assert!(r
            .header("content-type")
            .unwrap()
            .starts_with("text/event-stream"));
        assert_eq!(resume_point(&r.body), (Some("e-1".into()), Some(500)));
    }

    #[test]
    fn pieces_split_anywhere_give_the_same_events() {
        let text = ": keep-alive\r\nid: 1\r\ndata: {\"id\":1,\"result\":{}}\r\n\r\nretry: 20\nid: 2\ndata: {\"method\":\"m\"}\n\n";
        for cut in 0..text.len() {
            let mut p = Parser::default();
            let mut got = p.feed(&text.as_bytes()[..cut]);
            got.extend(p.feed(&text.as_bytes()[cut..]));
            assert_eq!(got.len(), 2, "cut at {cut}");
            assert_eq!((p.last_id.as_deref(), p.retry), (Some("2"), Some(20)));
        }
    }
}
