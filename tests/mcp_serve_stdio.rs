//! `toolrun serve` over stdio under a client that writes faster than it is answered: at most
//! `--max-requests` requests are handled at once, stdin is not read past them (the client's
//! writes wait in the pipe), and every request read is answered once. Raw JSON-RPC lines, so the
//! test decides when each is written. Everything binds and contacts 127.0.0.1 only.

mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;
use support::{Response, TestServer};

/// Only catches hangs: every wait here ends as soon as what it waits for happens.
const HANG: Duration = Duration::from_secs(120);

fn initialize(capabilities: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities,
        "clientInfo": { "name": "t", "version": "1" } } })
}

fn initialized() -> Value {
    json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })
}

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": name, "arguments": arguments } })
}

/// `toolrun serve SPEC ARGS` with piped stdio: stdout's messages come on the receiver, stderr is
/// gathered by the thread returned.
fn serve(spec: &Path, args: &[&str]) -> (Child, ChildStdin, Receiver<Value>, JoinHandle<String>) {
    let mut child = support::toolrun()
        .arg("serve")
        .arg(spec)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolrun serve");
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let message = serde_json::from_str(&line).unwrap_or(Value::String(line));
            if tx.send(message).is_err() {
                break;
            }
        }
    });
    let mut stderr = child.stderr.take().expect("piped stderr");
    let errors = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    (child, stdin, rx, errors)
}

fn write_line(stdin: &mut ChildStdin, message: &Value) {
    writeln!(stdin, "{message}").expect("write a request");
}

/// The next message on stdout that `wanted` accepts (those before it are dropped).
#[track_caller]
fn next_where(rx: &Receiver<Value>, wanted: impl Fn(&Value) -> bool) -> Value {
    loop {
        match rx.recv_timeout(HANG) {
            Ok(message) if wanted(&message) => return message,
            Ok(_) => {}
            Err(e) => panic!("no such message from toolrun serve: {e}"),
        }
    }
}

#[track_caller]
fn exits_0(mut child: Child, errors: JoinHandle<String>) {
    let deadline = std::time::Instant::now() + HANG;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for serve") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("toolrun serve still running after {HANG:?}; killed");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let stderr = errors.join().unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{stderr}");
}

/// What the service the calls go to saw: each call is held there a while, so that calls read
/// at once are there at once.
#[derive(Default)]
struct Seen {
    here: usize,
    most_at_once: usize,
    arrived: usize,
    answered: usize,
    /// How many the service had answered when the client's last write went through.
    answered_when_written: Option<usize>,
}

fn holding_service() -> (TestServer, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let shared = seen.clone();
    let server = TestServer::start(move |_| {
        let lock = || shared.lock().unwrap_or_else(|e| e.into_inner());
        {
            let mut s = lock();
            s.arrived += 1;
            s.here += 1;
            s.most_at_once = s.most_at_once.max(s.here);
        }
        thread::sleep(Duration::from_millis(200));
        let mut s = lock();
        s.here -= 1;
        s.answered += 1;
        Response::text(200, "ok")
    });
    (server, seen)
}

/// A client writes 300 calls at once, each 8 KiB long, and closes stdin; `--max-requests 8`.
/// The service they call never has more than 8 at a time; the client's writes go through only
/// as fast as calls are answered (toolrun holds no more of its input than its 8 calls and what
/// the pipe and its read buffers hold), and every call is answered once. Read all at once, the
/// 300 calls were at the service together (each is held there 200 ms), and the client's last
/// write went through before most were answered.
#[test]
fn stdio_handles_at_most_max_requests_at_once_and_reads_no_further_meanwhile() {
    const CAP: usize = 8;
    const CALLS: u64 = 300;
    let (service, seen) = holding_service();
    let port = service.addr().port();
    let spec = support::temp_file(
        "mcp-serve-stdio-cap",
        "held.yaml",
        &format!(
            "version: 1\nname: held\ntools:\n  held:\n    description: Answers when the service does.\n    kind: http\n    input: {{ type: object, properties: {{ n: {{ type: integer }}, pad: {{ type: string }} }} }}\n    request: {{ url: \"{}/held\", query: {{ n: \"{{{{ args.n }}}}\" }} }}\npolicy: {{ network: {{ allow_hosts: [\"127.0.0.1:{port}\"] }} }}\nserve: {{ max_tool_calls: 5000 }}\n",
            service.base_url()
        ),
    );
    let (child, mut stdin, rx, errors) = serve(spec.path(), &["--max-requests", &CAP.to_string()]);
    let pad = "x".repeat(8 * 1024);
    let mut input = String::new();
    for message in [initialize(json!({})), initialized()]
        .into_iter()
        .chain((1..=CALLS).map(|n| call(n, "held", json!({ "n": n, "pad": pad }))))
    {
        input.push_str(&format!("{message}\n"));
    }
    let line = input.len() / (CALLS as usize + 2);
    let writer = {
        let seen = seen.clone();
        thread::spawn(move || {
            let written = stdin.write_all(input.as_bytes());
            let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
            s.answered_when_written = Some(s.answered);
            written
        })
    };
    let mut answered: Vec<u64> = Vec::new();
    while answered.len() < CALLS as usize {
        let answer = next_where(&rx, |m| m["id"].as_u64().is_some_and(|id| id > 0));
        assert_eq!(answer["result"]["content"][0]["text"], "ok", "{answer:#}");
        answered.extend(answer["id"].as_u64());
    }
    writer
        .join()
        .expect("writer")
        .expect("every request written");
    exits_0(child, errors);
    answered.sort_unstable();
    assert_eq!(
        answered,
        (1..=CALLS).collect::<Vec<_>>(),
        "each call answered once"
    );

    let s = seen.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(
        s.arrived, CALLS as usize,
        "each call reached the service once"
    );
    assert!(
        (1..=CAP).contains(&s.most_at_once),
        "{} calls at the service at once; --max-requests is {CAP}",
        s.most_at_once
    );
    // The client's last write went through once the pipe (64 KiB; 1 MiB is the most Linux
    // lets a pipe hold) and toolrun's read buffers (64 KiB, generously) held the rest: of what
    // toolrun had read by then, all but 8 calls were answered.
    let buffered = (1024 * 1024 + 64 * 1024) / line + 1;
    let least = CALLS as usize - CAP - buffered;
    let answered_then = s.answered_when_written.unwrap_or_default();
    assert!(
        answered_then >= least,
        "{answered_then} of {CALLS} calls answered when the client's last write went through; \
         toolrun read more than --max-requests ahead (at least {least} expected)"
    );
}

/// A call its client cancelled at once is not answered (rmcp drops the answer), but it runs on
/// to its end, and keeps its place meanwhile: a client writing calls each followed by its
/// cancellation still has at most `--max-requests` of them running.
#[test]
fn stdio_counts_a_cancelled_call_until_it_ends() {
    const CAP: usize = 2;
    let (service, seen) = holding_service();
    let port = service.addr().port();
    let spec = support::temp_file(
        "mcp-serve-stdio-cancel",
        "held.yaml",
        &format!(
            "version: 1\nname: held\ntools:\n  held:\n    description: Answers when the service does.\n    kind: http\n    input: {{ type: object, properties: {{ n: {{ type: integer }} }} }}\n    request: {{ url: \"{}/held\", query: {{ n: \"{{{{ args.n }}}}\" }} }}\npolicy: {{ network: {{ allow_hosts: [\"127.0.0.1:{port}\"] }} }}\n",
            service.base_url()
        ),
    );
    let (child, mut stdin, _rx, errors) = serve(spec.path(), &["--max-requests", &CAP.to_string()]);
    write_line(&mut stdin, &initialize(json!({})));
    write_line(&mut stdin, &initialized());
    for n in 1..=40 {
        write_line(&mut stdin, &call(n, "held", json!({ "n": n })));
        let cancel = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": { "requestId": n, "reason": "changed my mind" } });
        write_line(&mut stdin, &cancel);
    }
    drop(stdin);
    exits_0(child, errors);
    let s = seen.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        (1..=CAP).contains(&s.most_at_once),
        "{} calls at the service at once; --max-requests is {CAP}",
        s.most_at_once
    );
}

/// With `--max-requests 1`, a call waiting for its client's confirmation does not keep the
/// client's answer unread: the question lends its place until it is answered, so another
/// request is answered meanwhile, then the answer is read and the call runs.
#[test]
fn stdio_reads_the_answer_to_a_question_while_every_place_is_taken() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/mcp_served.yaml");
    let (child, mut stdin, rx, errors) = serve(&spec, &["--max-requests", "1"]);
    write_line(
        &mut stdin,
        &initialize(json!({ "elicitation": { "form": {} } })),
    );
    next_where(&rx, |m| m["id"] == 0);
    write_line(&mut stdin, &initialized());
    write_line(
        &mut stdin,
        &call(1, "refund_order", json!({ "order_id": 42 })),
    );
    let question = next_where(&rx, |m| m["method"] == "elicitation/create");
    write_line(
        &mut stdin,
        &call(2, "lookup_order", json!({ "order_id": 42 })),
    );
    let lookup = next_where(&rx, |m| m["id"] == 2);
    assert_eq!(lookup["result"]["isError"], false, "{lookup:#}");
    let answer = json!({ "jsonrpc": "2.0", "id": question["id"],
        "result": { "action": "accept", "content": { "approve": true } } });
    write_line(&mut stdin, &answer);
    let refund = next_where(&rx, |m| m["id"] == 1);
    assert_eq!(
        refund["result"]["structuredContent"],
        json!({ "refunded": true, "order_id": 42 }),
        "{refund:#}"
    );
    drop(stdin);
    exits_0(child, errors);
}

#[test]
fn max_requests_of_0_is_refused() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/mcp_served.yaml");
    let out = support::run(
        support::toolrun()
            .arg("serve")
            .arg(&spec)
            .args(["--max-requests", "0"]),
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("--max-requests must be at least 1"),
        "{}",
        out.stderr
    );
}
