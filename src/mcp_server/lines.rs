//! The stdio transport's lines: one JSON-RPC message a line on stdin, read at most
//! [`MAX_BODY_BYTES`] at a time, and every line that is not a message answered.
//!
//! rmcp's own stdio transport took a line of up to 16 MiB (four times what an HTTP request's
//! body may hold), so `--max-requests` requests could hold 16 MiB each, and it threw away a line
//! past that, and a line that is not JSON, without a word: its client waited for an answer that
//! never came. JSON-RPC 2.0 answers both: a line that is not JSON gets a parse error (-32700,
//! `"id": null`), and one that is too long an Invalid Request (-32600) with its `id` when the
//! part read shows it, else `null`. Only the first [`MAX_BODY_BYTES`] of a line are kept (to
//! find its `id`); the rest is read and dropped as it comes, so the line costs no more memory
//! than an HTTP body does, and the session goes on with the next line.
//!
//! rmcp did not answer a line that is not JSON so that a peer echoing what it gets as more
//! garbage could not start an endless exchange; the answer here is a well-formed JSON-RPC error,
//! which is read and not answered, so an echo ends there.

use super::jsonrpc::{error_message, MAX_BODY_BYTES};
use bytes::BytesMut;
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

type Writing = Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>>;

/// Messages read from `R` a line at a time, and written to `W` likewise.
pub(crate) struct Lines<R, W> {
    read: LineReader<BufReader<R>>,
    out: Arc<Mutex<Out<W>>>,
    /// The answer to a line that is not a message, written before the next line is read (kept
    /// here so that a receive cancelled meanwhile leaves it to the next).
    answering: Option<Writing>,
}

struct Out<W> {
    write: W,
    /// What a cancelled write left unwritten: it goes out first, so a line is never cut.
    pending: BytesMut,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> Lines<R, W> {
    pub(crate) fn new(read: R, write: W) -> Self {
        Self::with_limit(read, write, MAX_BODY_BYTES)
    }

    fn with_limit(read: R, write: W, limit: usize) -> Self {
        Lines {
            read: LineReader {
                read: BufReader::new(read),
                line: Vec::new(),
                limit,
                skipping: None,
            },
            out: Arc::new(Mutex::new(Out {
                write,
                pending: BytesMut::new(),
            })),
            answering: None,
        }
    }
}

/// Writes `line` and its `\n` after whatever is being written, and flushes.
fn write_line<W: AsyncWrite + Unpin + Send + 'static>(
    out: &Arc<Mutex<Out<W>>>,
    mut line: Vec<u8>,
) -> Writing {
    let out = out.clone();
    line.push(b'\n');
    Box::pin(async move {
        let mut out = out.lock().await;
        let Out { write, pending } = &mut *out;
        pending.extend_from_slice(&line);
        drop(line);
        write.write_all_buf(pending).await?;
        write.flush().await
    })
}

impl<R, W> Transport<RoleServer> for Lines<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let written = serde_json::to_vec(&item).map(|line| write_line(&self.out, line));
        async move {
            match written {
                Ok(writing) => writing.await,
                Err(e) => Err(e.into()),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(answering) = &mut self.answering {
                let written = answering.await;
                self.answering = None;
                written.ok()?;
            }
            let refusal = match self.read.next().await {
                Read::Line => {
                    let parsed = parse(&self.read.line);
                    self.read.done();
                    match parsed {
                        Ok(Some(message)) => return Some(message),
                        Ok(None) => continue,
                        Err(refusal) => refusal,
                    }
                }
                Read::TooLong(id) => error_message(
                    id,
                    -32600,
                    &format!(
                        "Invalid Request: the message is larger than {} MiB",
                        self.read.limit >> 20
                    ),
                ),
                // A line the end of input cut short is not answered: no one is left to read it.
                Read::End => return None,
            };
            let line = refusal.to_string().into_bytes();
            self.answering = Some(write_line(&self.out, line));
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let out = self.out.clone();
        async move {
            let mut out = out.lock().await;
            let Out { write, pending } = &mut *out;
            write.write_all_buf(pending).await?;
            write.flush().await
        }
    }
}

enum Read {
    /// A whole line is in `line`, without its `\n`.
    Line,
    /// A line longer than the limit ended; the `id` its start shows (`null` if none).
    TooLong(Value),
    /// The end of input, or a read that failed.
    End,
}

struct LineReader<R> {
    read: R,
    line: Vec<u8>,
    limit: usize,
    /// While the rest of a line past the limit is dropped: the `id` its start showed.
    skipping: Option<Value>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// The next line. Cancellable: nothing is consumed from the reader but what was kept in
    /// `line` or `skipping` (there is no await between the two), so the next call goes on.
    async fn next(&mut self) -> Read {
        loop {
            let (consumed, ended) = {
                let available = match self.read.fill_buf().await {
                    Ok(available) if !available.is_empty() => available,
                    _ => return Read::End,
                };
                let newline = available.iter().position(|b| *b == b'\n');
                let content = &available[..newline.unwrap_or(available.len())];
                if self.skipping.is_none() && self.line.len() + content.len() > self.limit {
                    let room = self.limit - self.line.len();
                    append(&mut self.line, self.limit, &content[..room]);
                    self.skipping = Some(id_of(&self.line));
                    // The start was kept only to find the id: the line's memory goes now.
                    self.line = Vec::new();
                }
                if self.skipping.is_none() {
                    append(&mut self.line, self.limit, content);
                }
                (
                    newline.map_or(available.len(), |at| at + 1),
                    newline.is_some(),
                )
            };
            self.read.consume(consumed);
            if ended {
                return match self.skipping.take() {
                    Some(id) => Read::TooLong(id),
                    None => Read::Line,
                };
            }
        }
    }

    /// The line was handled: its room is kept for the next one unless it is large.
    fn done(&mut self) {
        self.line.clear();
        self.line.shrink_to(64 * 1024);
    }
}

/// Grows `line` by doubling, as a `Vec` does, but never past `limit`.
fn append(line: &mut Vec<u8>, limit: usize, bytes: &[u8]) {
    let needed = line.len() + bytes.len();
    if needed > line.capacity() {
        let room = (line.capacity() * 2).min(limit).max(needed);
        line.reserve_exact(room - line.len());
    }
    line.extend_from_slice(bytes);
}

/// The message a line holds; nothing for a blank line or a notification that is not right
/// (nothing to answer); or the error answering it.
fn parse(line: &[u8]) -> Result<Option<RxJsonRpcMessage<RoleServer>>, Value> {
    // RFC 8259 lets a parser ignore a byte order mark, and rmcp did; a line may end in CRLF.
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let e = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(message) => return Ok(Some(message)),
        Err(e) => e,
    };
    if matches!(
        e.classify(),
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof
    ) {
        // Not JSON (not UTF-8 either is a syntax error): no id can be read from it.
        return Err(error_message(
            Value::Null,
            -32700,
            &format!("Parse error: {e}"),
        ));
    }
    let seen = scan(line);
    // JSON-RPC answers no notification, even one that is not right (rmcp ignored those it
    // did not know).
    if seen.method && !seen.id_key {
        return Ok(None);
    }
    Err(error_message(
        seen.id.unwrap_or(Value::Null),
        -32600,
        "Invalid Request: not a JSON-RPC 2.0 request, notification or response this server knows",
    ))
}

/// A message's `id` as far as `bytes` (its start, or all of it) show it: a string or a number,
/// else `null`.
fn id_of(bytes: &[u8]) -> Value {
    scan(bytes).id.unwrap_or(Value::Null)
}

#[derive(Default)]
struct Seen {
    id: Option<Value>,
    /// An `id` key was read (its value may not be a valid id).
    id_key: bool,
    method: bool,
}

/// Reads the top-level object's keys up to its `id`, skipping the other values without keeping
/// them (a large `params` costs no memory), and stops there: the rest may be cut off.
fn scan(bytes: &[u8]) -> Seen {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut seen = Seen::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // Ends in an error whenever the bytes are cut short or the id was found; what was seen
    // before stands.
    let _ = (&mut de).deserialize_map(Scan(&mut seen));
    seen
}

struct Scan<'a>(&'a mut Seen);

impl<'de> Visitor<'de> for Scan<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "id" => {
                    self.0.id_key = true;
                    let id = map.next_value_seed(IdValue)?;
                    // A number the end of the bytes cut short would read as a shorter one:
                    // the id stands only if something follows it.
                    map.next_key::<IgnoredAny>()?;
                    self.0.id = Some(id);
                    return Ok(());
                }
                "method" => self.0.method = true,
                _ => {}
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

/// A JSON-RPC id: a string or a number; anything else is refused without being read into
/// memory.
struct IdValue;

impl<'de> serde::de::DeserializeSeed<'de> for IdValue {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IdValue {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string or a number")
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(v.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::JsonRpcMessage;
    use serde_json::json;
    use tokio::io::AsyncReadExt;

    /// A transport with the given limit on the client's end of two pipes.
    fn lines(
        limit: usize,
    ) -> (
        Lines<tokio::io::DuplexStream, tokio::io::DuplexStream>,
        tokio::io::DuplexStream,
        tokio::io::DuplexStream,
    ) {
        let (client_in, server_in) = tokio::io::duplex(1024);
        let (server_out, client_out) = tokio::io::duplex(64 * 1024);
        (
            Lines::with_limit(server_in, server_out, limit),
            client_in,
            client_out,
        )
    }

    fn ping(id: u32) -> String {
        format!(
            "{}\n",
            json!({ "jsonrpc": "2.0", "id": id, "method": "ping" })
        )
    }

    async fn answers(mut client_out: tokio::io::DuplexStream) -> Vec<Value> {
        let mut text = String::new();
        client_out
            .read_to_string(&mut text)
            .await
            .unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// Writes `input` and closes it while reading every message the transport hands on.
    async fn run(limit: usize, input: Vec<u8>) -> (Vec<RxJsonRpcMessage<RoleServer>>, Vec<Value>) {
        let (mut t, mut client_in, client_out) = lines(limit);
        let writer = tokio::spawn(async move {
            let _ = client_in.write_all(&input).await;
        });
        let mut got = Vec::new();
        while let Some(message) = t.receive().await {
            got.push(message);
        }
        let _ = writer.await;
        drop(t);
        (got, answers(client_out).await)
    }

    #[tokio::test]
    async fn a_line_past_the_limit_is_answered_with_its_id_and_the_next_is_read() {
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"big\",\"method\":\"ping\",\"params\":{{\"pad\":\"{}\"}}}}\n",
            "x".repeat(10_000)
        );
        let input = [long, ping(2)].concat().into_bytes();
        let (got, answers) = run(1000, input).await;
        assert_eq!(got.len(), 1);
        assert!(matches!(got[0], JsonRpcMessage::Request(_)));
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0]["id"], "big");
        assert_eq!(answers[0]["error"]["code"], -32600);
    }

    #[tokio::test]
    async fn a_long_line_whose_id_is_past_the_limit_is_answered_with_id_null() {
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"params\":{{\"pad\":\"{}\"}},\"id\":3}}\n",
            "x".repeat(10_000)
        );
        let (got, answers) = run(1000, [long, ping(2)].concat().into_bytes()).await;
        assert_eq!(got.len(), 1);
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0]["id"], Value::Null);
        assert_eq!(answers[0]["error"]["code"], -32600);
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_is_a_message() {
        let line = ping(1);
        let (got, answers) = run(line.len() - 1, line.into_bytes()).await;
        assert_eq!((got.len(), answers.len()), (1, 0));
    }

    #[tokio::test]
    async fn lines_that_are_not_json_get_a_parse_error_and_reading_goes_on() {
        let mut input = b"this is not json\n".to_vec();
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}\n");
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":4,\n");
        input.extend_from_slice(b"\n\r\n   \n");
        input.extend_from_slice(b"\xEF\xBB\xBF");
        input.extend_from_slice(ping(5).as_bytes());
        let (got, answers) = run(MAX_BODY_BYTES, input).await;
        assert_eq!(got.len(), 1, "the BOM-prefixed ping");
        assert_eq!(answers.len(), 3, "{answers:?}");
        for answer in &answers {
            assert_eq!(answer["id"], Value::Null, "{answer}");
            assert_eq!(answer["error"]["code"], -32700, "{answer}");
        }
    }

    #[tokio::test]
    async fn json_that_is_not_a_message_is_an_invalid_request_and_notifications_are_not_answered() {
        let input = [
            "{\"foo\":\"boo\"}\n",
            "[1,2]\n",
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":5}\n",
            "{\"jsonrpc\":\"2.0\",\"method\":42}\n",
        ]
        .concat();
        let (got, answers) = run(MAX_BODY_BYTES, input.into_bytes()).await;
        assert!(got.is_empty());
        let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
        assert_eq!(ids, [&Value::Null, &Value::Null, &json!(7)], "{answers:?}");
        assert!(answers.iter().all(|a| a["error"]["code"] == -32600));
    }

    #[test]
    fn an_id_cut_short_is_not_read() {
        assert_eq!(id_of(b"{\"jsonrpc\":\"2.0\",\"id\":12"), Value::Null);
        assert_eq!(
            id_of(b"{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"x"),
            json!(12)
        );
        assert_eq!(id_of(b"{\"id\":{\"a\":1},\"method\":\"x\"}"), Value::Null);
        assert_eq!(id_of(b"[{\"id\":1}]"), Value::Null);
    }
}
