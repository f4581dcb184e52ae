//! `toolrun serve` stops a call its client cancelled: over stdio and on 2025-11-25 over HTTP by
//! `notifications/cancelled`, on 2026-07-28 by closing the request. The call's tool is an HTTP
//! tool whose service holds the request open and notes when toolrun's connection to it closes:
//! the cancelled call's upstream request is dropped, the call is not answered, its place is
//! free for the next call, and `--record` and `--events` have it as cut off. Everything binds
//! and contacts 127.0.0.1 only.

#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::Duration;

/// Only catches hangs: every wait here ends as soon as what it waits for happens. The held
/// tool's own timeout is longer, so only a cancellation ends its request within this.
const HANG: Duration = Duration::from_secs(120);

/// What the holding service saw.
#[derive(Debug, PartialEq)]
enum Seen {
    /// A request arrived (its path); it is held, never answered.
    Arrived(String),
    /// The connection of a request it held was closed by toolrun.
    Closed,
}

/// A service on 127.0.0.1 that never answers: it reads each request's head, reports it, then
/// reads on until toolrun closes the connection, and reports that. Its base URL and reports.
fn holding_service() -> (String, u16, Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let tx = tx.clone();
            thread::spawn(move || hold(stream, &tx));
        }
    });
    (format!("http://127.0.0.1:{port}"), port, rx)
}

fn hold(stream: TcpStream, tx: &Sender<Seen>) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(n) if n > 0 && header.trim().is_empty() => break,
            Ok(n) if n > 0 => {}
            _ => return,
        }
    }
    let _ = tx.send(Seen::Arrived(path));
    let mut rest = [0u8; 1024];
    loop {
        match reader.read(&mut rest) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let _ = tx.send(Seen::Closed);
}

#[track_caller]
fn next_seen(rx: &Receiver<Seen>) -> Seen {
    rx.recv_timeout(HANG)
        .unwrap_or_else(|e| panic!("the holding service saw nothing more within {HANG:?}: {e}"))
}

/// A spec with `hold` (an HTTP tool its service holds, with a timeout longer than [`HANG`])
/// and `calculate` (answers at once).
fn spec(dir: &Path, base: &str, port: u16) -> PathBuf {
    let spec = dir.join("cancel.yaml");
    std::fs::write(
        &spec,
        format!(
            "version: 1\nname: cancel\ntools:\n  hold:\n    description: Held by its service.\n    kind: http\n    input: {{ type: object }}\n    request: {{ url: \"{base}/hold\" }}\n    timeout: 600s\n  calculate:\n    description: Arithmetic.\n    kind: builtin\n    builtin: calculator\npolicy: {{ network: {{ allow_hosts: [\"127.0.0.1:{port}\"] }} }}\n"
        ),
    )
    .expect("spec");
    spec
}

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": name, "arguments": arguments } })
}

fn cancel(id: u64) -> Value {
    json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": id, "reason": "changed my mind" } })
}

fn record_args(dir: &Path) -> (PathBuf, PathBuf, Vec<String>) {
    let (fixture, events) = (dir.join("session.jsonl"), dir.join("events.jsonl"));
    let args = vec![
        "--record".to_string(),
        fixture.display().to_string(),
        "--events".to_string(),
        events.display().to_string(),
    ];
    (fixture, events, args)
}

/// The recording has the `hold` calls as cut off by their client, and `--events` has them cut
/// off; the `calculate` calls ended.
#[track_caller]
fn recorded_as_cancelled(fixture: &Path, events: &Path, held: usize) {
    let text = std::fs::read_to_string(fixture).expect("recording");
    let served: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["kind"] == "served")
        .collect();
    let cut: Vec<&Value> = served
        .iter()
        .filter(|v| {
            v.to_string().contains(r#"\"name\":\"hold\""#)
                || v.to_string().contains(r#""name":"hold""#)
        })
        .collect();
    assert_eq!(cut.len(), held, "{served:#?}");
    for c in cut {
        assert!(
            c["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("cut off")),
            "{c:#}"
        );
        assert!(
            c.to_string().contains("the client cancelled the call"),
            "{c:#}"
        );
    }
    let calls = support::events_named(events, "mcp_call");
    let cut_off = calls
        .iter()
        .filter(|e| e["name"] == "hold" && e["cut_off"] == true && e["cancelled"] == true)
        .count();
    assert_eq!(cut_off, held, "{calls:#?}");
}

/// The answer to request `id`; an answer to a cancelled request (`never`) fails the test.
#[track_caller]
fn answer_to(rx: &Receiver<Value>, id: u64, never: &[u64]) -> Value {
    loop {
        let message = rx
            .recv_timeout(HANG)
            .unwrap_or_else(|e| panic!("no answer to {id} within {HANG:?}: {e}"));
        let answered = message["id"].as_u64();
        assert!(
            answered.is_none_or(|a| !never.contains(&a)),
            "a cancelled request was answered: {message:#}"
        );
        if answered == Some(id) {
            return message;
        }
    }
}

/// Over stdio with `--max-requests 1`, a call cancelled by `notifications/cancelled` stops (its
/// upstream request is closed) and frees its place: the next call is read and answered, and the
/// cancelled one never is. (It used to run to its end, holding the only place.)
#[test]
fn stdio_a_cancelled_call_stops_frees_its_place_and_is_not_answered() {
    let (base, port, seen) = holding_service();
    let dir = support::temp_dir("mcp-serve-cancel-stdio");
    let spec = spec(dir.path(), &base, port);
    let (fixture, events, mut args) = record_args(dir.path());
    args.extend(["--max-requests".to_string(), "1".to_string()]);
    let (mut child, mut stdin, rx, errors) = support::serve_stdio(&spec, &args);
    support::write_line(
        &mut stdin,
        &json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": { "name": "t", "version": "1" } } }),
    );
    answer_to(&rx, 0, &[]);
    support::write_line(
        &mut stdin,
        &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
    );
    for id in [1, 3] {
        support::write_line(&mut stdin, &call(id, "hold", json!({})));
        assert_eq!(next_seen(&seen), Seen::Arrived("/hold".into()));
        support::write_line(&mut stdin, &cancel(id));
        assert_eq!(
            next_seen(&seen),
            Seen::Closed,
            "the upstream request was dropped"
        );
        support::write_line(
            &mut stdin,
            &call(id + 1, "calculate", json!({ "expression": "1+1" })),
        );
        let answer = answer_to(&rx, id + 1, &[1, 3]);
        assert_eq!(answer["result"]["isError"], false, "{answer:#}");
    }
    drop(stdin);
    let status = child.wait().expect("serve ends with its input");
    let stderr = errors.join().unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{stderr}");
    while let Ok(message) = rx.try_recv() {
        let id = message["id"].as_u64();
        assert!(!matches!(id, Some(1 | 3)), "answered: {message:#}");
    }
    recorded_as_cancelled(&fixture, &events, 2);
}

/// An HTTP server and what it said it listens on.
struct Http {
    child: Child,
    url: String,
    stderr: BufReader<std::process::ChildStderr>,
}

impl Http {
    fn start(spec: &Path, args: &[String]) -> Http {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (child, url, stderr) = support::serve_http(spec, &args, &[]);
        Http { child, url, stderr }
    }

    fn authority(&self) -> &str {
        support::served_authority(&self.url)
    }

    fn send(&self, headers: &[(&str, &str)], body: &Value) -> TcpStream {
        support::send_raw(
            self.authority(),
            "POST",
            "/mcp",
            headers,
            &body.to_string(),
            HANG,
        )
    }

    fn exchange(&self, headers: &[(&str, &str)], body: &Value) -> String {
        let wait = HANG;
        support::exchange_raw(
            self.authority(),
            "POST",
            "/mcp",
            headers,
            &body.to_string(),
            wait,
        )
    }

    /// A 2025-11-25 session, initialised: its id.
    fn session(&self) -> String {
        let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": { "name": "raw", "version": "1" } } });
        let response = self.exchange(&[], &init);
        let id = support::response_header(&response, "mcp-session-id")
            .unwrap_or_else(|| panic!("no session id in {response}"));
        let done = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        let ack = self.exchange(&session_headers(&id), &done);
        assert!(ack.starts_with("HTTP/1.1 202"), "{ack}");
        id
    }

    /// SIGTERM; its exit code and the rest of its stderr.
    fn stop(mut self) -> (i32, String) {
        support::terminate(&mut self.child, &mut self.stderr)
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn session_headers(id: &str) -> [(&str, &str); 2] {
    [
        ("Mcp-Session-Id", id),
        ("Mcp-Protocol-Version", "2025-11-25"),
    ]
}

/// On 2025-11-25 over HTTP, `notifications/cancelled` in a POST of its own stops the call of its
/// session (its upstream request is closed) and the call's response ends with no answer; the
/// same notification from another session stops nothing; the session's next call is answered.
#[test]
fn http_2025_a_cancelled_call_stops_and_is_not_answered() {
    let (base, port, seen) = holding_service();
    let dir = support::temp_dir("mcp-serve-cancel-http");
    let spec = spec(dir.path(), &base, port);
    let (fixture, events, args) = record_args(dir.path());
    let serve = Http::start(&spec, &args);
    let (session, other) = (serve.session(), serve.session());
    let headers = session_headers(&session);
    let mut held = serve.send(&headers, &call(1, "hold", json!({})));
    assert_eq!(next_seen(&seen), Seen::Arrived("/hold".into()));
    // Another session's cancellation of its own request 1 is not this call's.
    let ack = serve.exchange(&session_headers(&other), &cancel(1));
    assert!(ack.starts_with("HTTP/1.1 202"), "{ack}");
    thread::sleep(Duration::from_millis(300));
    assert!(
        seen.try_recv().is_err(),
        "another session cancelled the call"
    );
    let ack = serve.exchange(&headers, &cancel(1));
    assert!(ack.starts_with("HTTP/1.1 202"), "{ack}");
    assert_eq!(
        next_seen(&seen),
        Seen::Closed,
        "the upstream request was dropped"
    );
    let mut response = String::new();
    let _ = held.read_to_string(&mut response);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        !response.contains("\"id\":1"),
        "the cancelled call was answered: {response}"
    );
    let answer = serve.exchange(
        &headers,
        &call(2, "calculate", json!({ "expression": "1+1" })),
    );
    assert!(
        answer.contains(r#""id":2"#) && answer.contains(r#""isError":false"#),
        "{answer}"
    );
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
    recorded_as_cancelled(&fixture, &events, 1);
}

/// On 2026-07-28 a client cancels a call by closing its request: the call stops (its upstream
/// request is closed), answered by toolrun itself or (with a progress token) by rmcp, and the
/// next call is answered.
#[test]
fn http_2026_a_call_whose_client_hangs_up_stops() {
    let (base, port, seen) = holding_service();
    let dir = support::temp_dir("mcp-serve-cancel-2026");
    let spec = spec(dir.path(), &base, port);
    let (fixture, events, args) = record_args(dir.path());
    let serve = Http::start(&spec, &args);
    let request = |name: &str, arguments: Value, meta: Value| {
        let mut params = json!({ "name": name, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": {},
        } });
        for (k, v) in meta.as_object().into_iter().flatten() {
            params["_meta"][k] = v.clone();
        }
        json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params })
    };
    let headers = |name: &'static str| {
        [
            ("Mcp-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", name),
        ]
    };
    for meta in [json!({}), json!({ "progressToken": "p-1" })] {
        let held = serve.send(&headers("hold"), &request("hold", json!({}), meta.clone()));
        assert_eq!(next_seen(&seen), Seen::Arrived("/hold".into()), "{meta}");
        drop(held);
        assert_eq!(
            next_seen(&seen),
            Seen::Closed,
            "{meta}: the upstream request was dropped"
        );
        let body = request("calculate", json!({ "expression": "1+1" }), json!({}));
        let answer = serve.exchange(&headers("calculate"), &body);
        assert!(answer.contains(r#""isError":false"#), "{answer}");
    }
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
    recorded_as_cancelled(&fixture, &events, 2);
}

/// The official Python SDK's client gives up on a call (it sends `notifications/cancelled`):
/// over HTTP the call stops (its upstream request is closed) and the client's next call is
/// answered.
#[test]
fn the_python_sdk_cancelling_a_call_stops_it() {
    let (base, port, seen) = holding_service();
    let dir = support::temp_dir("mcp-serve-cancel-sdk");
    let spec = spec(dir.path(), &base, port);
    let serve = Http::start(&spec, &[]);
    let plan = json!([
        { "name": "hold", "arguments": {}, "abandon_after": 5 },
        { "name": "calculate", "arguments": { "expression": "1+1" } },
    ]);
    let mut cmd = std::process::Command::new(python::python());
    cmd.arg(python::script("client.py"))
        .args(["http", &serve.url])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let out = support::run_with_timeout(&mut cmd, Some(&plan.to_string()), HANG);
    assert_eq!(out.code, 0, "the MCP client failed\n{out:?}");
    let doc = out.json();
    assert_eq!(doc["calls"][0]["abandoned"], true, "{doc:#}");
    assert_eq!(doc["calls"][1]["isError"], false, "{doc:#}");
    // The call had reached its service well before the client gave up on it.
    assert_eq!(next_seen(&seen), Seen::Arrived("/hold".into()));
    assert_eq!(
        next_seen(&seen),
        Seen::Closed,
        "the upstream request was dropped"
    );
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
}
