//! Tests of the test support code itself (`tests/support/`), with a plain std TCP client.

mod support;

use serde_json::json;
use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

// ---------------------------------------------------------------------------------------
// A minimal raw HTTP/1.1 client
// ---------------------------------------------------------------------------------------

struct Client {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

#[derive(Debug)]
struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// How a body arrives: with its framing, and how many `read` calls it took.
enum Framing {
    Length(u64),
    Chunked,
    None,
}

impl Client {
    fn connect(server: &TestServer) -> Client {
        let stream = TcpStream::connect(server.addr()).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        }
    }

    fn send(&mut self, raw: &str) {
        self.writer.write_all(raw.as_bytes()).expect("send");
    }

    fn get(&mut self, path: &str) -> RawResponse {
        self.send(&format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n"));
        self.response().expect("response")
    }

    fn line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(ErrorKind::UnexpectedEof, "eof"));
        }
        Ok(line.trim_end_matches(['\r', '\n']).to_string())
    }

    fn head(&mut self) -> io::Result<(u16, Vec<(String, String)>)> {
        let status_line = self.line()?;
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let mut headers = Vec::new();
        loop {
            let line = self.line()?;
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').expect("header line");
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
        Ok((status, headers))
    }

    fn framing(headers: &[(String, String)]) -> Framing {
        let get = |n: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            Framing::Chunked
        } else if let Some(len) = get("content-length") {
            Framing::Length(len.parse().unwrap())
        } else {
            Framing::None
        }
    }

    /// Reads a full response, keeping the body.
    fn response(&mut self) -> io::Result<RawResponse> {
        let (status, headers) = self.head()?;
        let mut body = Vec::new();
        if !(status == 204 || status == 304 || status < 200) {
            self.body(&headers, u64::MAX, |piece| body.extend_from_slice(piece))?;
        }
        Ok(RawResponse {
            status,
            headers,
            body,
        })
    }

    /// Streams the body through `sink` and stops after `max` bytes; returns the count.
    fn body(
        &mut self,
        headers: &[(String, String)],
        max: u64,
        mut sink: impl FnMut(&[u8]),
    ) -> io::Result<u64> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        match Client::framing(headers) {
            Framing::Length(len) => {
                while total < len.min(max) {
                    let want = ((len.min(max) - total) as usize).min(buf.len());
                    let n = self.reader.read(&mut buf[..want])?;
                    if n == 0 {
                        return Err(io::Error::new(ErrorKind::UnexpectedEof, "eof in body"));
                    }
                    sink(&buf[..n]);
                    total += n as u64;
                }
            }
            Framing::Chunked => loop {
                let size_line = self.line()?;
                let size = u64::from_str_radix(size_line.split(';').next().unwrap(), 16).unwrap();
                if size == 0 {
                    assert_eq!(self.line()?, "", "chunked body ends with an empty line");
                    break;
                }
                let mut left = size;
                while left > 0 {
                    let want = (left as usize).min(buf.len());
                    let n = self.reader.read(&mut buf[..want])?;
                    if n == 0 {
                        return Err(io::Error::new(ErrorKind::UnexpectedEof, "eof in chunk"));
                    }
                    sink(&buf[..n]);
                    total += n as u64;
                    left -= n as u64;
                }
                assert_eq!(self.line()?, "", "chunk ends with CRLF");
                if total >= max {
                    break;
                }
            },
            Framing::None => loop {
                let n = self.reader.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                sink(&buf[..n]);
                total += n as u64;
                if total >= max {
                    break;
                }
            },
        }
        Ok(total)
    }

    /// True when the server has closed the connection (EOF, or reset).
    fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.reader.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != ErrorKind::WouldBlock && e.kind() != ErrorKind::TimedOut,
        }
    }
}

fn echo_server() -> TestServer {
    TestServer::start(|req| {
        Response::json(
            200,
            json!({
                "method": req.method,
                "path": req.path,
                "nth": req.nth,
                "connection": req.connection,
                "body": req.text(),
            }),
        )
    })
}

// ---------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------

#[test]
fn binds_loopback_and_builds_urls() {
    let server = echo_server();
    assert!(server.addr().ip().is_loopback());
    assert_eq!(server.addr().ip().to_string(), "127.0.0.1");
    let port = server.addr().port();
    assert_eq!(
        server.url("/a/b?c=d"),
        format!("http://127.0.0.1:{port}/a/b?c=d")
    );
    assert_eq!(server.url("x"), format!("http://127.0.0.1:{port}/x"));
    assert_eq!(server.base_url(), format!("http://127.0.0.1:{port}"));
}

#[test]
fn keep_alive_serves_two_requests_on_one_connection() {
    let server = echo_server();
    let mut c = Client::connect(&server);
    let first = c.get("/one");
    let second = c.get("/two");
    assert_eq!(first.status, 200);
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert_eq!(
        first.header("connection"),
        None,
        "keep-alive is the default"
    );
    let first: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
    let second: serde_json::Value = serde_json::from_slice(&second.body).unwrap();
    assert_eq!(first["path"], "/one");
    assert_eq!(second["path"], "/two");
    assert_eq!(first["connection"], second["connection"]);
    assert_eq!(server.connections(), 1);

    // Pipelined: two requests in one write.
    c.send("GET /p1 HTTP/1.1\r\nHost: t\r\n\r\nGET /p2 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(c.response().unwrap().text().contains("/p1"));
    assert!(c.response().unwrap().text().contains("/p2"));
    assert_eq!(server.connections(), 1);

    // A second client gets a second connection number.
    let mut other = Client::connect(&server);
    other.get("/three");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 5);
    assert_eq!(reqs[0].connection, 1);
    assert_eq!(reqs[4].connection, 2);
    assert_eq!(server.connections(), 2);
}

#[test]
fn content_length_body_headers_and_json() {
    let server = echo_server();
    let mut c = Client::connect(&server);
    let body = r#"{"to":"a@example.com","n":[1,2]}"#;
    c.send(&format!(
        "POST /send?x=1 HTTP/1.1\r\nHost: t\r\nX-Custom:  spaced value \r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    let resp = c.response().unwrap();
    assert_eq!(resp.status, 200);
    // The connection is still usable: the body was consumed exactly.
    assert_eq!(c.get("/after").status, 200);

    let req = &server.requests()[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/send");
    assert_eq!(req.raw_target, "/send?x=1");
    assert_eq!(req.version, "HTTP/1.1");
    assert_eq!(req.header("x-custom"), Some("spaced value"));
    assert_eq!(req.header("CONTENT-TYPE"), Some("application/json"));
    assert_eq!(req.header("missing"), None);
    assert_eq!(req.body, body.as_bytes());
    assert_eq!(
        req.json(),
        Some(json!({"to": "a@example.com", "n": [1, 2]}))
    );
    assert_eq!(server.requests()[1].json(), None);
}

#[test]
fn chunked_request_body_is_reassembled() {
    let server = echo_server();
    let mut c = Client::connect(&server);
    c.send(concat!(
        "POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
        "5\r\nhello\r\n",
        "1;ext=1\r\n \r\n",
        "B\r\nchunked wor\r\n",
        "2\r\nld\r\n",
        "0\r\nX-Trailer: yes\r\n\r\n",
        "GET /next HTTP/1.1\r\nHost: t\r\n\r\n",
    ));
    let resp: serde_json::Value = serde_json::from_slice(&c.response().unwrap().body).unwrap();
    assert_eq!(resp["body"], "hello chunked world");
    let next: serde_json::Value = serde_json::from_slice(&c.response().unwrap().body).unwrap();
    assert_eq!(next["path"], "/next");
    assert_eq!(server.requests()[0].text(), "hello chunked world");
}

#[test]
fn expect_100_continue_is_answered() {
    let server = echo_server();
    let mut c = Client::connect(&server);
    c.send("POST /e HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
    let (status, _) = c.head().unwrap();
    assert_eq!(status, 100);
    c.send("abc");
    let resp = c.response().unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(server.requests()[0].body, b"abc");
}

#[test]
fn query_is_split_and_percent_decoded() {
    let server = echo_server();
    let mut c = Client::connect(&server);
    c.get("/search?q=caf%C3%A9+au%20lait&flag&x=1&x=2&bad=%zz%4&k%3Dx=a%26b&=v");
    let req = &server.requests()[0];
    assert_eq!(req.path, "/search");
    assert_eq!(
        req.raw_target,
        "/search?q=caf%C3%A9+au%20lait&flag&x=1&x=2&bad=%zz%4&k%3Dx=a%26b&=v"
    );
    assert_eq!(req.query_param("q"), Some("café au lait"));
    assert_eq!(req.query_param("flag"), Some(""));
    assert_eq!(req.query_param("x"), Some("1"));
    assert_eq!(req.query_param("bad"), Some("%zz%4"));
    assert_eq!(req.query_param("k=x"), Some("a&b"));
    assert_eq!(req.query_param("nope"), None);
    let xs: Vec<&str> = req
        .query
        .iter()
        .filter(|(k, _)| k == "x")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(xs, ["1", "2"]);
    assert_eq!(req.query.len(), 7);
    assert_eq!(percent_decode("a%2Fb%2fc"), "a/b/c");

    // The path itself is kept as sent.
    c.get("/a%20b/c");
    assert_eq!(server.requests()[1].path, "/a%20b/c");
    assert_eq!(server.hits("/a%20b/c"), 1);
}

#[test]
fn nth_counts_per_path_and_hits_and_requests_record_everything() {
    let server = TestServer::start(|req| match req.nth {
        1 => Response::text(500, "first call fails"),
        _ => Response::text(200, format!("call {}", req.nth)),
    });
    let mut c = Client::connect(&server);
    assert_eq!(c.get("/flaky").status, 500);
    assert_eq!(c.get("/flaky?again=1").status, 200);
    assert_eq!(c.get("/other").status, 500);
    let third = c.get("/flaky");
    assert_eq!(third.status, 200);
    assert_eq!(third.text(), "call 3");
    assert_eq!(
        third.header("content-type"),
        Some("text/plain; charset=utf-8")
    );

    assert_eq!(server.hits("/flaky"), 3);
    assert_eq!(server.hits("/other"), 1);
    assert_eq!(server.hits("/never"), 0);
    let reqs = server.requests();
    let seen: Vec<(&str, usize)> = reqs
        .iter()
        .map(|r| (r.raw_target.as_str(), r.nth))
        .collect();
    assert_eq!(
        seen,
        [
            ("/flaky", 1),
            ("/flaky?again=1", 2),
            ("/other", 1),
            ("/flaky", 3)
        ]
    );
}

#[test]
fn custom_headers_status_and_empty_bodies() {
    let server = TestServer::start(|req| match req.path.as_str() {
        "/204" => Response::status(204),
        "/teapot" => Response::status(418).header("X-Why", "short and stout"),
        "/ct" => Response::text(200, "<p>").header("content-type", "text/html"),
        "/bytes" => Response::status(200).body(vec![0u8, 159, 146, 150]),
        _ => Response::json(200, json!({"ok": true})),
    });
    let mut c = Client::connect(&server);
    let r = c.get("/204");
    assert_eq!(r.status, 204);
    assert_eq!(r.header("content-length"), None);
    let r = c.get("/teapot");
    assert_eq!(
        (r.status, r.header("x-why")),
        (418, Some("short and stout"))
    );
    assert_eq!(r.header("content-length"), Some("0"));
    let r = c.get("/ct");
    assert_eq!(r.header("content-type"), Some("text/html"));
    assert_eq!(
        r.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            .count(),
        1
    );
    assert_eq!(c.get("/bytes").body, [0u8, 159, 146, 150]);

    // HEAD: headers with the length of the body, no body.
    c.send("HEAD /json HTTP/1.1\r\nHost: t\r\n\r\n");
    let (status, headers) = c.head().unwrap();
    assert_eq!(status, 200);
    assert!(headers
        .iter()
        .any(|(k, v)| k == "Content-Length" && v == "11"));
    assert_eq!(c.get("/json").text(), r#"{"ok":true}"#);
}

#[test]
fn delay_waits_before_headers() {
    let server =
        TestServer::start(|_| Response::text(200, "late").delay(Duration::from_millis(300)));
    let mut c = Client::connect(&server);
    let t = Instant::now();
    let resp = c.get("/slow");
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(resp.text(), "late");
    // The request is recorded before the delay.
    assert_eq!(server.hits("/slow"), 1);
}

#[test]
fn body_delay_sends_headers_first() {
    let server =
        TestServer::start(|_| Response::text(200, "body").body_delay(Duration::from_millis(300)));
    let mut c = Client::connect(&server);
    let t = Instant::now();
    c.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    let (status, headers) = c.head().unwrap();
    assert_eq!(status, 200);
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    let mut body = Vec::new();
    c.body(&headers, u64::MAX, |p| body.extend_from_slice(p))
        .unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(body, b"body");
}

#[test]
fn trickle_sends_the_body_slowly_in_pieces() {
    let server = TestServer::start(|req| {
        let resp = Response::text(200, "abcdefghijkl").trickle(3, Duration::from_millis(50));
        if req.path == "/chunked" {
            resp.chunked()
        } else {
            resp
        }
    });
    for path in ["/plain", "/chunked"] {
        let mut c = Client::connect(&server);
        let t = Instant::now();
        c.send(&format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"));
        let (_, headers) = c.head().unwrap();
        let mut pieces = Vec::new();
        c.body(&headers, u64::MAX, |p| pieces.push(p.to_vec()))
            .unwrap();
        let elapsed = t.elapsed();
        assert!(elapsed >= Duration::from_millis(200), "{path}: {elapsed:?}");
        assert!(
            pieces.len() >= 2,
            "{path}: arrived in {} piece(s)",
            pieces.len()
        );
        assert_eq!(pieces.concat(), b"abcdefghijkl");
    }
}

fn huge_body(server: &TestServer, path: &str) -> Vec<u8> {
    let mut c = Client::connect(server);
    c.get(path).body
}

#[test]
fn huge_filler_is_valid_json_of_exact_size() {
    let server = TestServer::start(|req| {
        let n: u64 = req.query_param("n").unwrap().parse().unwrap();
        let resp = Response::status(200).huge(n);
        if req.query_param("chunked").is_some() {
            resp.chunked()
        } else {
            resp
        }
    });
    assert_eq!(huge_body(&server, "/?n=0"), b"");
    assert_eq!(huge_body(&server, "/?n=1"), b"1");
    assert_eq!(huge_body(&server, "/?n=2"), b"[]");
    assert_eq!(huge_body(&server, "/?n=3"), b"[1]");
    assert_eq!(huge_body(&server, "/?n=4"), b"[1 ]");
    assert_eq!(huge_body(&server, "/?n=5"), b"[1,1]");
    for n in (3..40).chain([65_535, 65_536, 65_537, 200_001]) {
        for chunked in ["", "&chunked"] {
            let body = huge_body(&server, &format!("/?n={n}{chunked}"));
            assert_eq!(body.len() as u64, n, "n={n}{chunked}");
            let v: serde_json::Value =
                serde_json::from_slice(&body).unwrap_or_else(|e| panic!("n={n}{chunked}: {e}"));
            assert!(v.as_array().unwrap().iter().all(|x| x == 1));
        }
    }
}

#[test]
fn huge_streams_many_bytes_with_content_length() {
    const TOTAL: u64 = 48 * 1024 * 1024;
    let server = TestServer::start(|_| Response::status(200).huge(TOTAL));
    let mut c = Client::connect(&server);
    c.send("GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    let (status, headers) = c.head().unwrap();
    assert_eq!(status, 200);
    let len = headers.iter().find(|(k, _)| k == "Content-Length").unwrap();
    assert_eq!(len.1, TOTAL.to_string());
    let content_type = headers.iter().find(|(k, _)| k == "Content-Type").unwrap();
    assert_eq!(content_type.1, "application/json");
    let (mut first, mut last, mut ones) = (None, 0u8, 0u64);
    let count = c
        .body(&headers, u64::MAX, |p| {
            first.get_or_insert(p[0]);
            last = p[p.len() - 1];
            ones += p.iter().filter(|&&b| b == b'1').count() as u64;
        })
        .unwrap();
    assert_eq!(count, TOTAL);
    assert_eq!((first, last), (Some(b'['), b']'));
    assert_eq!(ones, (TOTAL - 3) / 2 + 1);
    // Same connection still works afterwards.
    c.send("GET /big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let (status, _) = c.head().unwrap();
    assert_eq!(status, 200);
}

#[test]
fn huge_is_generated_lazily_and_survives_a_client_hanging_up() {
    // 1 TiB could never be held in memory: only the first MiB is read.
    const TOTAL: u64 = 1 << 40;
    let server = TestServer::start(|req| {
        if req.path == "/ok" {
            Response::text(200, "fine")
        } else {
            Response::status(200).huge(TOTAL).chunked()
        }
    });
    let mut c = Client::connect(&server);
    c.send("GET /huge HTTP/1.1\r\nHost: t\r\n\r\n");
    let (_, headers) = c.head().unwrap();
    assert!(headers
        .iter()
        .any(|(k, v)| k == "Transfer-Encoding" && v == "chunked"));
    let read = c.body(&headers, 1 << 20, |_| {}).unwrap();
    assert!(read >= 1 << 20);
    drop(c);
    // The server notices the hang-up and keeps serving others.
    let mut c2 = Client::connect(&server);
    assert_eq!(c2.get("/ok").text(), "fine");
}

#[test]
fn redirect_sets_location() {
    let server = TestServer::start(|req| match req.path.as_str() {
        "/old" => Response::redirect(302, "/new"),
        "/perm" => Response::redirect(308, "http://127.0.0.1:1/elsewhere"),
        _ => Response::text(200, "new"),
    });
    let mut c = Client::connect(&server);
    let r = c.get("/old");
    assert_eq!((r.status, r.header("location")), (302, Some("/new")));
    assert_eq!(r.body, b"");
    let r = c.get("/perm");
    assert_eq!(
        (r.status, r.header("location")),
        (308, Some("http://127.0.0.1:1/elsewhere"))
    );
    assert_eq!(c.get("/new").text(), "new");
}

#[test]
fn close_without_response_drops_the_connection_after_reading_the_request() {
    let server = TestServer::start(|req| {
        if req.nth == 1 {
            Response::close_without_response()
        } else {
            Response::text(200, "second time lucky")
        }
    });
    let mut c = Client::connect(&server);
    c.send("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
    assert!(c.is_closed(), "no byte may arrive");
    let req = &server.requests()[0];
    assert_eq!((req.path.as_str(), req.body.as_slice()), ("/x", &b"hi"[..]));
    let mut c = Client::connect(&server);
    assert_eq!(c.get("/x").text(), "second time lucky");
    assert_eq!(server.hits("/x"), 2);
}

#[test]
fn close_without_response_can_be_delayed() {
    let server =
        TestServer::start(|_| Response::close_without_response().delay(Duration::from_millis(200)));
    let mut c = Client::connect(&server);
    let t = Instant::now();
    c.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(c.is_closed());
    assert!(t.elapsed() >= Duration::from_millis(200));
}

#[test]
fn abort_after_cuts_the_body_short() {
    let server = TestServer::start(|req| {
        let resp = Response::text(200, "0123456789").abort_after(4);
        if req.path == "/chunked" {
            resp.chunked()
        } else {
            resp
        }
    });
    for path in ["/plain", "/chunked"] {
        let mut c = Client::connect(&server);
        c.send(&format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n"));
        let (status, headers) = c.head().unwrap();
        assert_eq!(status, 200);
        let mut got = Vec::new();
        let err = c
            .body(&headers, u64::MAX, |p| got.extend_from_slice(p))
            .expect_err("the body must be cut short");
        assert_eq!(err.kind(), ErrorKind::UnexpectedEof, "{path}");
        assert_eq!(got, b"0123", "{path}");
    }
}

#[test]
fn connection_close_and_http_1_0_end_the_connection() {
    let server = echo_server();
    let mut c = Client::connect(&server);
    c.send("GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let r = c.response().unwrap();
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.is_closed());

    let mut c = Client::connect(&server);
    c.send("GET /b HTTP/1.0\r\n\r\n");
    assert_eq!(c.response().unwrap().status, 200);
    assert!(c.is_closed());

    let mut c = Client::connect(&server);
    c.send("GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(c.response().unwrap().status, 200);
    assert_eq!(c.get("/d").status, 200);

    let server = TestServer::start(|_| Response::text(200, "bye").close());
    let mut c = Client::connect(&server);
    let r = c.get("/");
    assert_eq!(
        (r.text().as_str(), r.header("connection")),
        ("bye", Some("close"))
    );
    assert!(c.is_closed());
}

#[test]
fn malformed_requests_get_400() {
    let server = echo_server();
    let mut c = Client::connect(&server);
    c.send("NONSENSE\r\n\r\n");
    let r = c.response().unwrap();
    assert_eq!(r.status, 400);
    assert!(c.is_closed());
    assert!(server.requests().is_empty());
}

#[test]
fn handler_panic_answers_500_and_fails_the_test_on_drop() {
    let server = TestServer::start(|req| {
        assert_eq!(req.path, "/expected", "handler assertion");
        Response::status(200)
    });
    let mut c = Client::connect(&server);
    let r = c.get("/surprise");
    assert_eq!(r.status, 500);
    assert!(r.text().contains("handler assertion"), "{}", r.text());
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(server)));
    let msg = dropped.expect_err("drop must re-raise the handler panic");
    let msg = msg.downcast_ref::<String>().unwrap();
    assert!(msg.contains("GET /surprise"), "{msg}");
}

#[test]
fn drop_does_not_hang_on_busy_or_idle_connections() {
    let in_handler = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&in_handler);
    let server = TestServer::start(move |req| {
        seen.fetch_add(1, Ordering::SeqCst);
        match req.path.as_str() {
            "/slow" => Response::text(200, "never").delay(Duration::from_secs(60)),
            "/trickle" => Response::status(200)
                .huge(1 << 30)
                .trickle(1, Duration::from_secs(1)),
            _ => Response::text(200, "ok"),
        }
    });
    let addr = server.addr();
    let mut idle = Client::connect(&server);
    assert_eq!(idle.get("/").status, 200);
    let mut slow = Client::connect(&server);
    slow.send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
    let mut trickle = Client::connect(&server);
    trickle.send("GET /trickle HTTP/1.1\r\nHost: t\r\n\r\n");
    trickle.head().unwrap();
    let _half = TcpStream::connect(addr).unwrap(); // connected, sent nothing
    let deadline = Instant::now() + Duration::from_secs(5);
    while in_handler.load(Ordering::SeqCst) < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }

    let t = Instant::now();
    drop(server);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "drop took {:?}",
        t.elapsed()
    );
    for c in [&mut idle, &mut slow] {
        assert!(c.is_closed());
    }
    assert!(TcpStream::connect(addr).is_err(), "listener must be closed");
}

#[test]
fn refused_port_refuses() {
    let port = refused_port();
    let err = TcpStream::connect(("127.0.0.1", port)).expect_err("nothing listens there");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn a_refused_port_cannot_be_taken_by_another_server() {
    // Another test's server once bound the released port and answered the refused-port test.
    let port = refused_port();
    let err = std::net::TcpListener::bind(("127.0.0.1", port)).expect_err("the port is held");
    assert_eq!(err.kind(), ErrorKind::AddrInUse);
    let err = TcpStream::connect(("127.0.0.1", port)).expect_err("still nothing listens there");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn many_clients_at_once() {
    let server = Arc::new(echo_server());
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let server = Arc::clone(&server);
            std::thread::spawn(move || {
                let mut c = Client::connect(&server);
                for _ in 0..5 {
                    assert_eq!(c.get(&format!("/t{i}")).status, 200);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(server.requests().len(), 40);
    assert_eq!(server.connections(), 8);
    assert_eq!(server.hits("/t3"), 5);
    let mut nths: Vec<usize> = server
        .requests()
        .iter()
        .filter(|r| r.path == "/t3")
        .map(|r| r.nth)
        .collect();
    nths.sort();
    assert_eq!(nths, [1, 2, 3, 4, 5]);
}

// ---------------------------------------------------------------------------------------
// Process and file helpers
// ---------------------------------------------------------------------------------------

#[test]
fn toolrun_command_has_a_clean_environment() {
    let cmd = toolrun();
    assert!(cmd.get_program().to_string_lossy().contains("toolrun"));
    let envs: Vec<(String, Option<String>)> = cmd
        .get_envs()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.map(|v| v.to_string_lossy().into_owned()),
            )
        })
        .collect();
    assert!(envs.contains(&("NO_COLOR".to_string(), Some("1".to_string()))));
    // The suite's own spec cache, never the user's `~/.cache/toolrun`.
    let cache = test_cache_dir().to_string_lossy().into_owned();
    assert!(envs.contains(&("TOOLRUN_CACHE_DIR".to_string(), Some(cache))));
    assert!(envs.iter().all(|(k, _)| [
        "PATH",
        "HOME",
        "TMPDIR",
        "SYSTEMROOT",
        "NO_COLOR",
        "TOOLRUN_CACHE_DIR"
    ]
    .contains(&k.as_str())));
    let out = run(&mut toolrun());
    // The binary starts and exits by itself; its behaviour is tested elsewhere.
    assert!((0..128).contains(&out.code), "{out:?}");
}

#[cfg(unix)]
#[test]
fn run_captures_code_and_streams() {
    let out = run(std::process::Command::new("sh").args([
        "-c",
        "echo out; echo err >&2; echo \"env=${OPENAI_API_KEY:-unset}\"; exit 3",
    ]));
    assert_eq!(out.code, 3);
    assert_eq!(out.stderr, "err\n");
    assert!(out.stdout.starts_with("out\n"));
    out.assert_code(3);

    let out = run_with_stdin(&mut std::process::Command::new("cat"), "{\"piped\": true}");
    out.assert_success();
    assert_eq!(out.json(), json!({"piped": true}));

    let out = run(std::process::Command::new("sh").args(["-c", "kill -9 $$"]));
    assert_eq!(out.code, 128 + 9);
}

#[cfg(unix)]
#[test]
fn run_kills_a_command_that_hangs() {
    let t = Instant::now();
    let result = std::panic::catch_unwind(|| {
        run_with_timeout(
            std::process::Command::new("sh").args(["-c", "echo started; exec sleep 30"]),
            None,
            Duration::from_millis(300),
        )
    });
    let msg = result.expect_err("must panic on timeout");
    let msg = msg.downcast_ref::<String>().unwrap();
    assert!(
        msg.contains("still running") && msg.contains("started"),
        "{msg}"
    );
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn temp_dir_and_write() {
    let a = temp_dir("self test/a");
    let b = temp_dir("self test/a");
    assert_ne!(a.path(), b.path());
    assert!(a.is_dir() && b.is_dir());
    assert!(a.starts_with(std::env::temp_dir()));
    assert_eq!(std::fs::read_dir(&a).unwrap().count(), 0);
    let p = write(&a, "sub/dir/spec.yaml", "version: 1\n");
    assert_eq!(p, a.join("sub/dir/spec.yaml"));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "version: 1\n");
    let (a_path, b_path) = (a.to_path_buf(), b.to_path_buf());
    drop(a);
    drop(b);
    assert!(
        !a_path.exists() && !b_path.exists(),
        "a passing test's files are removed"
    );
}

#[test]
fn temp_dir_of_a_failing_test_is_kept() {
    let path = std::sync::Mutex::new(None);
    let failed = std::panic::catch_unwind(|| {
        let dir = temp_dir("self test/failing");
        write(&dir, "left.txt", "look at me");
        *path.lock().unwrap() = Some(dir.to_path_buf());
        panic!("a failing test");
    });
    assert!(failed.is_err());
    let path = path.into_inner().unwrap().expect("the test ran");
    assert!(path.join("left.txt").is_file(), "{}", path.display());
    std::fs::remove_dir_all(&path).unwrap();
}

#[test]
fn redact_durations_in_text() {
    let pretty = "{\n  \"duration_ms\": 0.02,\n  \"elapsed_ms\" :  1234,\n  \"latency_ms\": -1.5e3,\n  \"steps\": 3,\n  \"name\": \"duration_ms\",\n  \"note\": \"\\\"duration_ms\\\": 5\",\n  \"nested\": [{\"run_duration_ms\": 7}],\n  \"duration_ms_label\": 9,\n  \"timeout_ms\": \"n/a\"\n}";
    let expected = "{\n  \"duration_ms\": 0,\n  \"elapsed_ms\" :  0,\n  \"latency_ms\": 0,\n  \"steps\": 3,\n  \"name\": \"duration_ms\",\n  \"note\": \"\\\"duration_ms\\\": 5\",\n  \"nested\": [{\"run_duration_ms\": 0}],\n  \"duration_ms_label\": 9,\n  \"timeout_ms\": \"n/a\"\n}";
    assert_eq!(redact_durations(pretty), expected);
    let compact = r#"{"a":{"duration_ms":12},"elapsed":3.5,"b":"x"}"#;
    assert_eq!(
        redact_durations(compact),
        r#"{"a":{"duration_ms":0},"elapsed":0,"b":"x"}"#
    );
    let junit =
        r#"<testsuite name="s" tests="2" time="0.123"><testcase name="t" time="12"/></testsuite>"#;
    assert_eq!(
        redact_durations(junit),
        r#"<testsuite name="s" tests="2" time="0"><testcase name="t" time="0"/></testsuite>"#
    );
    let stamped =
        r#"{"started_at": "2026-01-02T03:04:05.678Z","note":"started_at","x":{"started_at":null}}"#;
    assert_eq!(
        redact_durations(stamped),
        r#"{"started_at": "1970-01-01T00:00:00.000Z","note":"started_at","x":{"started_at":null}}"#
    );
    let human = "ran 3 steps in 12ms: \"unterminated";
    assert_eq!(redact_durations(human), human);
    assert_eq!(redact_durations(""), "");
}

#[test]
fn redact_durations_in_values() {
    let mut v = json!({
        "duration_ms": 0.02,
        "tool_results": [{"duration_ms": 3, "result": 178.15}],
        "elapsed": 1,
        "timeout_ms": "5s",
        "started_at": "2026-01-02T03:04:05.678Z",
        "steps": 3
    });
    redact_durations_json(&mut v);
    assert_eq!(
        v,
        json!({
            "duration_ms": 0,
            "tool_results": [{"duration_ms": 0, "result": 178.15}],
            "elapsed": 0,
            "timeout_ms": "5s",
            "started_at": "1970-01-01T00:00:00.000Z",
            "steps": 3
        })
    );
}

#[test]
fn a_missing_snapshot_fails_and_is_written_only_when_asked() {
    let dir = temp_dir("snapshots");
    let path = dir.join("nested").join("trace.json");
    let err = check_snapshot_with(&path, "{}\n", false).unwrap_err();
    assert!(err.contains("UPDATE_SNAPSHOTS=1"), "{err}");
    assert!(
        !path.exists(),
        "a missing snapshot must not be written unasked"
    );
    check_snapshot_with(&path, "{}\n", true).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}\n");
    check_snapshot_with(&path, "{}\n", false).unwrap();
    let diff = check_snapshot_with(&path, "[]\n", false).unwrap_err();
    assert!(diff.contains("- {}") && diff.contains("+ []"), "{diff}");
}

#[test]
fn line_diff_is_readable() {
    assert_eq!(line_diff("a\nb\nc\n", "a\nx\nc\n"), "  a\n- b\n+ x\n  c\n");
}
