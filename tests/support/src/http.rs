//! A small, std-only HTTP/1.1 server for integration tests.
//!
//! It binds `127.0.0.1:0` (never any other address), serves every connection on its
//! own thread with keep-alive, records every request, and answers with whatever the
//! handler returns. Responses can be delayed, trickled, made huge (streamed, never held
//! in memory), cut short, or replaced by a dropped connection, so that timeouts, size
//! caps, retries and network errors can all be exercised against the real binary.
//!
//! ```ignore
//! let server = TestServer::start(|req| match req.nth {
//!     1 => Response::text(500, "try again"),
//!     _ => Response::json(200, serde_json::json!({ "current": { "temp_c": 21 } })),
//! });
//! let url = server.url("/v1/weather");
//! // ... run toolrun against `url` ...
//! assert_eq!(server.hits("/v1/weather"), 2);
//! ```

#![allow(dead_code)]

use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Longest request line or header line accepted, and the most header bytes in total.
const MAX_HEAD_BYTES: u64 = 1 << 20;
/// Size of the pieces a streamed body is written in (unless trickled).
const WRITE_CHUNK: usize = 64 * 1024;

type Handler = dyn Fn(&Request) -> Response + Send + Sync + 'static;

/// A running test server. Dropping it stops it: the listener closes and every open
/// connection is shut down, without waiting on slow responses.
pub struct TestServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

struct Shared {
    handler: Box<Handler>,
    stop: AtomicBool,
    log: Mutex<Log>,
    /// Open connections (clones of their sockets), so that drop can shut them down.
    conns: Mutex<HashMap<usize, TcpStream>>,
    conn_count: AtomicUsize,
    /// Messages of handler panics; re-raised when the server is dropped.
    panics: Mutex<Vec<String>>,
}

#[derive(Default)]
struct Log {
    requests: Vec<Request>,
    per_path: HashMap<String, usize>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl TestServer {
    /// Binds `127.0.0.1:0` and serves each connection on its own thread until dropped.
    ///
    /// A panic inside the handler (a failed assertion, say) answers that request with a
    /// 500 and closes its connection, then fails the test when the server is dropped.
    pub fn start(handler: impl Fn(&Request) -> Response + Send + Sync + 'static) -> TestServer {
        TestServer::start_on(0, handler)
    }

    /// A fixed port, for re-recording committed fixtures whose specs name the port.
    pub fn start_on(
        port: u16,
        handler: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) -> TestServer {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("test server: bind 127.0.0.1");
        let addr = listener.local_addr().expect("test server: local_addr");
        let shared = Arc::new(Shared {
            handler: Box::new(handler),
            stop: AtomicBool::new(false),
            log: Mutex::new(Log::default()),
            conns: Mutex::new(HashMap::new()),
            conn_count: AtomicUsize::new(0),
            panics: Mutex::new(Vec::new()),
        });
        let accept_shared = Arc::clone(&shared);
        let accept_thread = thread::Builder::new()
            .name(format!("test-server-{}", addr.port()))
            .spawn(move || accept_loop(listener, accept_shared))
            .expect("test server: spawn accept thread");
        TestServer {
            addr,
            shared,
            accept_thread: Some(accept_thread),
        }
    }

    /// The bound address, always `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/path` (a leading `/` on `path` is optional; a query is kept).
    pub fn url(&self, path: &str) -> String {
        if path.starts_with('/') {
            format!("http://{}{}", self.addr, path)
        } else {
            format!("http://{}/{}", self.addr, path)
        }
    }

    /// Every request received so far, in the order they arrived (a request is recorded
    /// before its handler runs, so this includes requests still being answered).
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.shared.log).requests.clone()
    }

    /// How many requests arrived for `path` (compared with [`Request::path`], no query).
    pub fn hits(&self, path: &str) -> usize {
        lock(&self.shared.log)
            .per_path
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    /// How many TCP connections were accepted (to check connection reuse).
    pub fn connections(&self) -> usize {
        self.shared.conn_count.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` requests have arrived or `timeout` passes; returns them.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<Request> {
        let deadline = Instant::now() + timeout;
        loop {
            let reqs = self.requests();
            if reqs.len() >= n || Instant::now() >= deadline {
                return reqs;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

impl fmt::Debug for TestServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop, which is blocked in accept().
        let woke = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)).is_ok();
        if let Some(handle) = self.accept_thread.take() {
            if woke {
                let _ = handle.join();
            }
        }
        // The accept thread has exited, so every accepted connection is registered.
        for (_, conn) in lock(&self.shared.conns).drain() {
            let _ = conn.shutdown(Shutdown::Both);
        }
        if !thread::panicking() {
            let panics = lock(&self.shared.panics);
            if !panics.is_empty() {
                panic!("test server handler panicked:\n{}", panics.join("\n"));
            }
        }
    }
}

/// A port on 127.0.0.1 with nothing listening on it, for "connection refused" tests.
///
/// A port bound and released is free for the next `bind(0)`: a test server started by another
/// test in the same process took it and answered 200. So the port is the local end of a
/// connected client socket instead: nothing listens there (a connection to it is refused), and
/// no listener can be bound to it while the socket lives, which is the rest of the process
/// (both ends are leaked on purpose).
pub fn refused_port() -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind 127.0.0.1:0");
    let client = TcpStream::connect(listener.local_addr().expect("local_addr"))
        .expect("connect to own listener");
    let (server_end, _) = listener.accept().expect("accept own client");
    let port = client.local_addr().expect("local_addr").port();
    std::mem::forget(client);
    std::mem::forget(server_end);
    port
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(_) => {
                thread::sleep(Duration::from_millis(1));
                continue;
            }
        };
        let id = shared.conn_count.fetch_add(1, Ordering::SeqCst) + 1;
        let _ = stream.set_nodelay(true);
        if let Ok(clone) = stream.try_clone() {
            lock(&shared.conns).insert(id, clone);
        }
        let conn_shared = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name(format!("test-server-conn-{id}"))
            .spawn(move || {
                serve_connection(stream, id, &conn_shared);
                lock(&conn_shared.conns).remove(&id);
            });
        if spawned.is_err() {
            if let Some(conn) = lock(&shared.conns).remove(&id) {
                let _ = conn.shutdown(Shutdown::Both);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------

/// One request as the server received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path of the target, without the query, exactly as sent (not percent-decoded).
    pub path: String,
    /// Query parameters in order, percent-decoded (`+` decodes to a space).
    pub query: Vec<(String, String)>,
    /// The request target exactly as sent (`/path?query`).
    pub raw_target: String,
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub version: String,
    /// Headers in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body, with any chunked transfer encoding removed.
    pub body: Vec<u8>,
    /// 1-based index of this request among those for the same `path`
    /// (so a handler can fail the first call and succeed afterwards).
    pub nth: usize,
    /// 1-based index of the TCP connection it arrived on (equal values: a reused connection).
    pub connection: usize,
}

impl Request {
    /// The first header with this name, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of this header, compared case-insensitively.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The body parsed as JSON, if it is JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The first query parameter with this (decoded) name.
    pub fn query_param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn wants_keep_alive(&self) -> bool {
        let conn = self.header("connection").unwrap_or("").to_ascii_lowercase();
        let has = |token: &str| conn.split(',').any(|t| t.trim() == token);
        if self.version == "HTTP/1.0" {
            has("keep-alive")
        } else {
            !has("close")
        }
    }
}

fn bad_request(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Reads one line (up to `\n`), bounded; `Ok(None)` on EOF before any byte.
fn read_line<R: BufRead>(reader: &mut R) -> io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = reader
        .by_ref()
        .take(MAX_HEAD_BYTES)
        .read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(if n as u64 >= MAX_HEAD_BYTES {
            bad_request("line too long")
        } else {
            io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed mid-line")
        });
    }
    buf.pop();
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| bad_request("line is not UTF-8"))
}

/// Reads one request; `Ok(None)` when the client closed the connection between requests.
fn read_request<R: BufRead>(reader: &mut R, writer: &mut TcpStream) -> io::Result<Option<Request>> {
    // Tolerate empty lines before the request line (RFC 9112 §2.2).
    let line = loop {
        match read_line(reader)? {
            None => return Ok(None),
            Some(l) if l.is_empty() => continue,
            Some(l) => break l,
        }
    };
    let mut parts = line.split(' ');
    let (method, raw_target, version) =
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(m), Some(t), Some(v), None)
                if !m.is_empty() && !t.is_empty() && v.starts_with("HTTP/1.") =>
            {
                (m.to_string(), t.to_string(), v.to_string())
            }
            _ => return Err(bad_request(format!("bad request line {line:?}"))),
        };

    let mut headers = Vec::new();
    let mut head_bytes = line.len() as u64;
    loop {
        let line = read_line(reader)?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed in headers")
        })?;
        if line.is_empty() {
            break;
        }
        head_bytes += line.len() as u64 + 2;
        if head_bytes > MAX_HEAD_BYTES {
            return Err(bad_request("headers too large"));
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| bad_request(format!("bad header line {line:?}")))?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }

    let (path, query) = split_target(&raw_target);
    let mut req = Request {
        method,
        path,
        query,
        raw_target,
        version,
        headers,
        body: Vec::new(),
        nth: 0,
        connection: 0,
    };

    if req
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }

    let chunked = req
        .header_all("transfer-encoding")
        .iter()
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("chunked"));
    if chunked {
        req.body = read_chunked_body(reader)?;
    } else if let Some(len) = req.header("content-length") {
        let len: u64 = len
            .trim()
            .parse()
            .map_err(|_| bad_request(format!("bad content-length {len:?}")))?;
        let mut body = Vec::new();
        reader.by_ref().take(len).read_to_end(&mut body)?;
        if body.len() as u64 != len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed mid-body",
            ));
        }
        req.body = body;
    }
    Ok(Some(req))
}

fn read_chunked_body<R: BufRead>(reader: &mut R) -> io::Result<Vec<u8>> {
    let eof = || {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed in chunked body",
        )
    };
    let mut body = Vec::new();
    loop {
        let line = read_line(reader)?.ok_or_else(eof)?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(size_text, 16)
            .map_err(|_| bad_request(format!("bad chunk size line {line:?}")))?;
        if size == 0 {
            // Trailer fields, then the empty line.
            loop {
                let trailer = read_line(reader)?.ok_or_else(eof)?;
                if trailer.is_empty() {
                    return Ok(body);
                }
            }
        }
        let before = body.len();
        reader.by_ref().take(size).read_to_end(&mut body)?;
        if (body.len() - before) as u64 != size {
            return Err(eof());
        }
        let end = read_line(reader)?.ok_or_else(eof)?;
        if !end.is_empty() {
            return Err(bad_request("chunk not followed by CRLF"));
        }
    }
}

/// Splits a request target into its path and decoded query pairs.
fn split_target(target: &str) -> (String, Vec<(String, String)>) {
    let mut t = target;
    // absolute-form (as sent to proxies): drop the scheme and authority.
    if let Some(rest) = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
    {
        t = rest.find('/').map_or("/", |i| &rest[i..]);
    }
    let t = t.split('#').next().unwrap_or("");
    let (path, query) = match t.split_once('?') {
        Some((p, q)) => (p, q),
        None => (t, ""),
    };
    let query = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    (path.to_string(), query)
}

/// Decodes `%XX` escapes and `+` (as a space); malformed escapes are kept literally.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = |b: u8| (b as char).to_digit(16);
                match (
                    bytes.get(i + 1).and_then(|&b| hex(b)),
                    bytes.get(i + 2).and_then(|&b| hex(b)),
                ) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                    }
                    _ => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Body {
    Bytes(Vec<u8>),
    /// This many bytes of filler, generated while sending.
    Filler(u64),
}

impl Body {
    fn len(&self) -> u64 {
        match self {
            Body::Bytes(b) => b.len() as u64,
            Body::Filler(n) => *n,
        }
    }
}

/// What the server sends back: built with the constructors and builder methods below.
#[derive(Clone, Debug)]
pub struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
    delay: Option<Duration>,
    body_delay: Option<Duration>,
    trickle: Option<(usize, Duration)>,
    chunked: bool,
    close: bool,
    abort_after: Option<u64>,
    drop_connection: bool,
}

impl Response {
    /// An empty response with this status.
    pub fn status(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Body::Bytes(Vec::new()),
            delay: None,
            body_delay: None,
            trickle: None,
            chunked: false,
            close: false,
            abort_after: None,
            drop_connection: false,
        }
    }

    /// A JSON body (`Content-Type: application/json`).
    pub fn json(status: u16, v: serde_json::Value) -> Response {
        Response::status(status)
            .header("Content-Type", "application/json")
            .body(serde_json::to_vec(&v).expect("serialize JSON"))
    }

    /// A text body (`Content-Type: text/plain; charset=utf-8`).
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        Response::status(status)
            .header("Content-Type", "text/plain; charset=utf-8")
            .body(body.into().into_bytes())
    }

    /// A redirect: this status (301, 302, 303, 307, 308) with a `Location` header.
    pub fn redirect(status: u16, location: &str) -> Response {
        Response::status(status).header("Location", location)
    }

    /// Reads the request, then drops the connection without sending a byte.
    /// (`.delay(d)` waits before dropping.)
    pub fn close_without_response() -> Response {
        Response {
            drop_connection: true,
            ..Response::status(0)
        }
    }

    /// Adds a header. A `Content-Type` set here replaces the default one; a
    /// `Content-Length` or `Transfer-Encoding` set here is sent as is, and the server
    /// then adds no framing header of its own.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Response {
        let name = name.into();
        if name.eq_ignore_ascii_case("content-type") {
            self.headers
                .retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
        }
        self.headers.push((name, value.into()));
        self
    }

    /// Replaces the body with these bytes (keeping the headers).
    pub fn body(mut self, bytes: impl Into<Vec<u8>>) -> Response {
        self.body = Body::Bytes(bytes.into());
        self
    }

    /// Waits this long before sending the status line and headers.
    pub fn delay(mut self, d: Duration) -> Response {
        self.delay = Some(d);
        self
    }

    /// Sends the headers, then waits this long before sending the body.
    pub fn body_delay(mut self, d: Duration) -> Response {
        self.body_delay = Some(d);
        self
    }

    /// Sends the body `chunk` bytes at a time, waiting `every` before each piece.
    pub fn trickle(mut self, chunk: usize, every: Duration) -> Response {
        self.trickle = Some((chunk.max(1), every));
        self
    }

    /// Replaces the body with `total_bytes` of filler, generated while sending (never
    /// held in memory): a JSON array `[1,1,...,1]` (padded with a space when needed;
    /// fewer than 3 bytes: `""`, `"1"`, `"[]"`). Sent with `Content-Length` unless
    /// `.chunked()` is also given. Sets `Content-Type: application/json` if none is set.
    pub fn huge(mut self, total_bytes: u64) -> Response {
        self.body = Body::Filler(total_bytes);
        if !self
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            self.headers
                .push(("Content-Type".to_string(), "application/json".to_string()));
        }
        self
    }

    /// Compresses the body with `encoding` (`gzip`, `deflate`, `br`, `zstd`) and says so in
    /// `Content-Encoding`.
    pub fn encoded(mut self, encoding: &str) -> Response {
        let Body::Bytes(plain) = &self.body else {
            panic!("only a byte body can be encoded")
        };
        let packed = match encoding {
            "gzip" => gzip(plain),
            "deflate" => {
                use std::io::Write;
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(plain).expect("deflate");
                e.finish().expect("deflate")
            }
            "br" => brotli(plain),
            "zstd" => zstd(plain),
            other => panic!("no encoder for {other}"),
        };
        self.body = Body::Bytes(packed);
        self.header("Content-Encoding", encoding)
    }

    /// Sends the body with `Transfer-Encoding: chunked` instead of `Content-Length`.
    pub fn chunked(mut self) -> Response {
        self.chunked = true;
        self
    }

    /// Sends `Connection: close` and closes the connection after this response.
    pub fn close(mut self) -> Response {
        self.close = true;
        self
    }

    /// Sends the headers and only the first `bytes` of the body, then drops the
    /// connection (a body cut short by a network failure).
    pub fn abort_after(mut self, bytes: u64) -> Response {
        self.abort_after = Some(bytes);
        self
    }
}

/// Generates the `huge` filler: `[1,1,...,1]`, exactly `total` bytes.
struct Filler {
    total: u64,
    pos: u64,
    /// `1,1,1,...` long enough to copy any run from.
    pattern: Vec<u8>,
}

impl Filler {
    fn new(total: u64) -> Filler {
        Filler {
            total,
            pos: 0,
            pattern: Vec::new(),
        }
    }

    /// End (exclusive) of the `1,1,...,` run, which starts at 1; 0 when there is none.
    fn run_end(&self) -> u64 {
        if self.total < 3 {
            return 0;
        }
        let k = (self.total - 3) / 2;
        1 + 2 * k
    }

    fn byte_at(&self, p: u64) -> u8 {
        match self.total {
            1 => b'1',
            2 => [b'[', b']'][p as usize],
            _ => {
                let run_end = self.run_end();
                if p == 0 {
                    b'['
                } else if p == self.total - 1 {
                    b']'
                } else if p < run_end {
                    if (p - 1) % 2 == 0 {
                        b'1'
                    } else {
                        b','
                    }
                } else if p == run_end {
                    b'1'
                } else {
                    b' '
                }
            }
        }
    }

    /// Fills the front of `buf`; returns how many bytes were produced (0 at the end).
    fn fill(&mut self, buf: &mut [u8]) -> usize {
        let n = (buf.len() as u64).min(self.total - self.pos) as usize;
        if self.pattern.len() < n + 2 {
            self.pattern = b"1,".iter().copied().cycle().take(n + 2).collect();
        }
        let run_end = self.run_end();
        let mut i = 0;
        while i < n {
            let p = self.pos + i as u64;
            if p >= 1 && p < run_end {
                let len = (n - i).min((run_end - p) as usize);
                let phase = ((p - 1) % 2) as usize;
                buf[i..i + len].copy_from_slice(&self.pattern[phase..phase + len]);
                i += len;
            } else {
                buf[i] = self.byte_at(p);
                i += 1;
            }
        }
        self.pos += n as u64;
        n
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Sleeps for `d` in short slices; false if the server was stopped meanwhile.
fn sleep_unless_stopped(d: Duration, shared: &Shared) -> bool {
    let deadline = Instant::now() + d;
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        thread::sleep((deadline - now).min(Duration::from_millis(10)));
    }
}

fn stopped() -> io::Error {
    io::Error::other("test server stopped")
}

fn serve_connection(stream: TcpStream, conn_id: usize, shared: &Shared) {
    let mut writer = stream;
    let mut reader = match writer.try_clone() {
        Ok(s) => BufReader::new(s),
        Err(_) => return,
    };
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let mut req = match read_request(&mut reader, &mut writer) {
            Ok(Some(req)) => req,
            Ok(None) => return,
            Err(e) => {
                if e.kind() == io::ErrorKind::InvalidData {
                    let msg = format!("test server: bad request: {e}\n");
                    let head = format!(
                        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        msg.len()
                    );
                    let _ = writer.write_all(head.as_bytes());
                    let _ = writer.write_all(msg.as_bytes());
                }
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
        };
        req.connection = conn_id;
        {
            let mut log = lock(&shared.log);
            let count = log.per_path.entry(req.path.clone()).or_insert(0);
            *count += 1;
            req.nth = *count;
            log.requests.push(req.clone());
        }
        let resp = match panic::catch_unwind(AssertUnwindSafe(|| (shared.handler)(&req))) {
            Ok(resp) => resp,
            Err(payload) => {
                let msg = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "(non-string panic)".to_string());
                let msg = format!("{} {}: {msg}", req.method, req.raw_target);
                lock(&shared.panics).push(msg.clone());
                Response::text(500, format!("test server handler panicked: {msg}\n")).close()
            }
        };
        let keep_alive = req.wants_keep_alive() && !resp.close && !resp.drop_connection;
        let result = write_response(&mut writer, &req, &resp, keep_alive, shared);
        if result.is_err() || !keep_alive {
            let _ = writer.flush();
            let _ = writer.shutdown(Shutdown::Both);
            return;
        }
    }
}

fn write_response(
    w: &mut TcpStream,
    req: &Request,
    resp: &Response,
    keep_alive: bool,
    shared: &Shared,
) -> io::Result<()> {
    if let Some(d) = resp.delay {
        if !sleep_unless_stopped(d, shared) {
            return Err(stopped());
        }
    }
    if resp.drop_connection {
        return Err(io::Error::other("close_without_response"));
    }

    let no_body_status = resp.status < 200 || resp.status == 204 || resp.status == 304;
    let send_body = !no_body_status && req.method != "HEAD";
    let user_framing = resp.headers.iter().any(|(k, _)| {
        k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("transfer-encoding")
    });
    let chunked = resp.chunked && !user_framing && !no_body_status;

    let mut head = format!("HTTP/1.1 {} {}\r\n", resp.status, reason(resp.status));
    for (k, v) in &resp.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !user_framing && !no_body_status {
        if chunked {
            head.push_str("Transfer-Encoding: chunked\r\n");
        } else {
            head.push_str(&format!("Content-Length: {}\r\n", resp.body.len()));
        }
    }
    if !keep_alive {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes())?;
    w.flush()?;

    if !send_body {
        return Ok(());
    }
    if let Some(d) = resp.body_delay {
        if !sleep_unless_stopped(d, shared) {
            return Err(stopped());
        }
    }

    let piece = resp.trickle.map_or(WRITE_CHUNK, |(chunk, _)| chunk);
    let limit = resp.abort_after.unwrap_or(u64::MAX);
    let mut sent: u64 = 0;
    let mut buf = vec![0u8; piece];
    let mut filler = match resp.body {
        Body::Filler(n) => Some(Filler::new(n)),
        Body::Bytes(_) => None,
    };
    let mut frame = Vec::new();
    loop {
        if sent >= limit {
            w.flush()?;
            return Err(io::Error::other("abort_after"));
        }
        let want = (buf.len() as u64).min(limit - sent) as usize;
        let n = match (&mut filler, &resp.body) {
            (Some(f), _) => f.fill(&mut buf[..want]),
            (None, Body::Bytes(bytes)) => {
                let start = sent as usize;
                let n = want.min(bytes.len() - start);
                buf[..n].copy_from_slice(&bytes[start..start + n]);
                n
            }
            (None, Body::Filler(_)) => unreachable!(),
        };
        if n == 0 {
            if resp.abort_after.is_some() {
                // The whole body fit under the limit: still drop the connection
                // (without a final chunk).
                w.flush()?;
                return Err(io::Error::other("abort_after"));
            }
            break;
        }
        if let Some((_, every)) = resp.trickle {
            if !sleep_unless_stopped(every, shared) {
                return Err(stopped());
            }
        }
        if shared.stop.load(Ordering::SeqCst) {
            return Err(stopped());
        }
        if chunked {
            frame.clear();
            frame.extend_from_slice(format!("{n:x}\r\n").as_bytes());
            frame.extend_from_slice(&buf[..n]);
            frame.extend_from_slice(b"\r\n");
            w.write_all(&frame)?;
        } else {
            w.write_all(&buf[..n])?;
        }
        sent += n as u64;
        if resp.trickle.is_some() {
            w.flush()?;
        }
    }
    if chunked {
        w.write_all(b"0\r\n\r\n")?;
    }
    w.flush()
}

// ---------------------------------------------------------------------------------------
// Encoders for compressed bodies
// ---------------------------------------------------------------------------------------

pub fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).expect("gzip");
    e.finish().expect("gzip")
}

pub fn zstd(data: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
}

/// A valid brotli stream made of uncompressed meta-blocks (RFC 7932 §9.2): decoders must
/// handle it like any other, and it needs no brotli encoder among the dependencies.
pub fn brotli(data: &[u8]) -> Vec<u8> {
    struct Bits {
        out: Vec<u8>,
        acc: u32,
        n: u32,
    }
    impl Bits {
        fn put(&mut self, value: u32, bits: u32) {
            for i in 0..bits {
                self.acc |= ((value >> i) & 1) << self.n;
                self.n += 1;
                if self.n == 8 {
                    self.out.push(self.acc as u8);
                    self.acc = 0;
                    self.n = 0;
                }
            }
        }
        fn align(&mut self) {
            if self.n > 0 {
                self.out.push(self.acc as u8);
                self.acc = 0;
                self.n = 0;
            }
        }
    }
    let mut b = Bits {
        out: Vec::new(),
        acc: 0,
        n: 0,
    };
    b.put(0, 1); // WBITS: 16
    for chunk in data.chunks(1 << 16) {
        b.put(0, 1); // ISLAST
        b.put(0, 2); // MNIBBLES: 4
        b.put(chunk.len() as u32 - 1, 16); // MLEN - 1
        b.put(1, 1); // ISUNCOMPRESSED
        b.align();
        b.out.extend_from_slice(chunk);
    }
    b.put(1, 1); // ISLAST
    b.put(1, 1); // ISLASTEMPTY
    b.align();
    b.out
}
