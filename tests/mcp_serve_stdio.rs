//! `toolrun serve` over stdio under a client that writes faster than it is answered: at most
//! `--max-requests` requests are handled at once, stdin is not read past them (the client's
//! writes wait in the pipe), and every request read is answered once. Raw JSON-RPC lines, so the
//! test decides when each is written. Everything binds and contacts 127.0.0.1 only.

mod support;

use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin};
use std::sync::mpsc::Receiver;
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
    let (child, mut stdin, rx, errors) =
        support::serve_stdio(spec.path(), &["--max-requests", &CAP.to_string()]);
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

/// With `--max-requests 1`, a call waiting for its client's confirmation does not keep the
/// client's answer unread: the question lends its place until it is answered, so another
/// request is answered meanwhile, then the answer is read and the call runs.
#[test]
fn stdio_reads_the_answer_to_a_question_while_every_place_is_taken() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/mcp_served.yaml");
    let (child, mut stdin, rx, errors) = support::serve_stdio(&spec, &["--max-requests", "1"]);
    support::write_line(
        &mut stdin,
        &initialize(json!({ "elicitation": { "form": {} } })),
    );
    next_where(&rx, |m| m["id"] == 0);
    support::write_line(&mut stdin, &initialized());
    support::write_line(
        &mut stdin,
        &call(1, "refund_order", json!({ "order_id": 42 })),
    );
    let question = next_where(&rx, |m| m["method"] == "elicitation/create");
    support::write_line(
        &mut stdin,
        &call(2, "lookup_order", json!({ "order_id": 42 })),
    );
    let lookup = next_where(&rx, |m| m["id"] == 2);
    assert_eq!(lookup["result"]["isError"], false, "{lookup:#}");
    let answer = json!({ "jsonrpc": "2.0", "id": question["id"],
        "result": { "action": "accept", "content": { "approve": true } } });
    support::write_line(&mut stdin, &answer);
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

/// The most a stdio line may hold, as an HTTP request's body (`jsonrpc::MAX_BODY_BYTES`).
const LIMIT: usize = 4 * 1024 * 1024;

/// A `ping` whose params make the line `size` bytes long, with its `id` first or last.
fn big_ping(id: u64, size: usize, id_first: bool) -> String {
    let pad = "x".repeat(size);
    if id_first {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"pad":"{pad}"}}}}"#)
    } else {
        format!(r#"{{"jsonrpc":"2.0","method":"ping","params":{{"pad":"{pad}"}},"id":{id}}}"#)
    }
}

/// A session opened over stdio on `specs/mcp_served.yaml`.
fn opened() -> (Child, ChildStdin, Receiver<Value>, JoinHandle<String>) {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/mcp_served.yaml");
    let (child, mut stdin, rx, errors) = support::serve_stdio(&spec, &[] as &[&str]);
    support::write_line(&mut stdin, &initialize(json!({})));
    next_where(&rx, |m| m["id"] == 0);
    support::write_line(&mut stdin, &initialized());
    (child, stdin, rx, errors)
}

/// A 5 MiB line is more than a stdio message may hold (4 MiB, as an HTTP body): it is answered
/// with an Invalid Request error, with its id when the first 4 MiB show it and `null` when they
/// do not, and the next request is answered as usual. rmcp took lines up to 16 MiB, and dropped
/// a longer one without an answer.
#[test]
fn stdio_answers_a_line_over_4_mib_with_an_error_and_serves_the_next() {
    let (child, mut stdin, rx, errors) = opened();
    let size = 5 * 1024 * 1024;
    writeln!(stdin, "{}", big_ping(1, size, true)).expect("write the long line");
    let refused = next_where(&rx, |m| m.get("id").is_some());
    assert_eq!(refused["id"], 1, "{refused:#}");
    assert_eq!(refused["error"]["code"], -32600, "{refused:#}");
    assert_eq!(
        refused["error"]["message"], "Invalid Request: the message is larger than 4 MiB",
        "{refused:#}"
    );
    support::write_line(
        &mut stdin,
        &json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" }),
    );
    let pong = next_where(&rx, |m| m.get("id").is_some());
    assert_eq!(pong, json!({ "jsonrpc": "2.0", "id": 2, "result": {} }));

    // The id comes after 5 MiB: it cannot be read, so the answer's id is null.
    writeln!(stdin, "{}", big_ping(3, size, false)).expect("write the long line");
    let refused = next_where(&rx, |m| m.get("id").is_some());
    assert_eq!(refused["id"], Value::Null, "{refused:#}");
    assert_eq!(refused["error"]["code"], -32600, "{refused:#}");
    // A line of exactly 4 MiB is a message.
    let line = big_ping(4, 0, true);
    writeln!(stdin, "{}", big_ping(4, LIMIT - line.len(), true)).expect("write a 4 MiB line");
    let pong = next_where(&rx, |m| m.get("id").is_some());
    assert_eq!(pong, json!({ "jsonrpc": "2.0", "id": 4, "result": {} }));
    drop(stdin);
    exits_0(child, errors);
}

/// The process's peak resident memory (Linux's `VmHWM`), in bytes.
#[cfg(target_os = "linux")]
fn peak_memory(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .expect("VmHWM in /proc/PID/status");
    kib * 1024
}

/// 20 calls of 5 MiB each, written at once to a tool whose service holds every call until the
/// test lets go: each line is read only as far as the limit and answered as too large, so the
/// server's peak memory grows by about one line's limit, not by 20 lines (rmcp took them all,
/// and all 20 were held at once).
#[cfg(target_os = "linux")]
#[test]
fn stdio_memory_stays_bounded_under_a_flood_of_oversize_lines() {
    use std::sync::Condvar;
    const LINES: u64 = 20;
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let held = gate.clone();
    let service = TestServer::start(move |_| {
        let (open, cond) = &*held;
        let open = open.lock().unwrap_or_else(|e| e.into_inner());
        let _ = cond.wait_timeout_while(open, HANG, |open| !*open);
        Response::text(200, "ok")
    });
    let port = service.addr().port();
    let spec = support::temp_file(
        "mcp-serve-stdio-flood",
        "held.yaml",
        &format!(
            "version: 1\nname: held\ntools:\n  held:\n    description: Answers when the service does.\n    kind: http\n    input: {{ type: object, properties: {{ n: {{ type: integer }}, pad: {{ type: string }} }} }}\n    request: {{ url: \"{}/held\", query: {{ n: \"{{{{ args.n }}}}\" }} }}\npolicy: {{ network: {{ allow_hosts: [\"127.0.0.1:{port}\"] }} }}\n",
            service.base_url()
        ),
    );
    let (child, mut stdin, rx, errors) = support::serve_stdio(spec.path(), &[] as &[&str]);
    support::write_line(&mut stdin, &initialize(json!({})));
    next_where(&rx, |m| m["id"] == 0);
    support::write_line(&mut stdin, &initialized());
    let before = peak_memory(child.id());
    let writer = thread::spawn(move || {
        let pad = "x".repeat(5 * 1024 * 1024);
        for n in 1..=LINES {
            support::write_line(&mut stdin, &call(n, "held", json!({ "n": n, "pad": pad })));
        }
        support::write_line(
            &mut stdin,
            &json!({ "jsonrpc": "2.0", "id": 100, "method": "ping" }),
        );
        stdin
    });
    let mut answers = Vec::new();
    loop {
        let answer = next_where(&rx, |m| m.get("id").is_some());
        if answer["id"] == 100 {
            break;
        }
        answers.push(answer);
    }
    let peak = peak_memory(child.id());
    *gate.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
    gate.1.notify_all();
    let stdin = writer.join().expect("writer");
    while answers.len() < LINES as usize {
        answers.push(next_where(&rx, |m| m.get("id").is_some()));
    }
    drop(stdin);
    exits_0(child, errors);
    let grown = peak.saturating_sub(before);
    assert!(
        grown < 5 * LIMIT,
        "peak memory grew by {} MiB (from {} MiB) under {LINES} lines of 5 MiB; a line should \
         cost at most its {} MiB limit",
        grown >> 20,
        before >> 20,
        LIMIT >> 20
    );
    for answer in &answers {
        assert_eq!(answer["error"]["code"], -32600, "{answer:#}");
    }
    let mut ids: Vec<u64> = answers.iter().filter_map(|a| a["id"].as_u64()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=LINES).collect::<Vec<_>>());
}

/// A line that is not JSON, and one that is not UTF-8, each get a parse error (-32700, id null),
/// and the session goes on. rmcp answered neither (its client waited for an answer).
#[test]
fn stdio_answers_a_line_that_is_not_json_or_not_utf8_with_a_parse_error() {
    let (child, mut stdin, rx, errors) = opened();
    let not_utf8: &[u8] =
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}\n";
    for (n, line) in [&b"this is not json\n"[..], not_utf8]
        .into_iter()
        .enumerate()
    {
        stdin.write_all(line).expect("write a bad line");
        let id = 10 + n;
        support::write_line(
            &mut stdin,
            &json!({ "jsonrpc": "2.0", "id": id, "method": "ping" }),
        );
        let refused = next_where(&rx, |m| m.get("id").is_some());
        assert_eq!(refused["id"], Value::Null, "{refused:#}");
        assert_eq!(refused["error"]["code"], -32700, "{refused:#}");
        let pong = next_where(&rx, |m| m.get("id").is_some());
        assert_eq!(pong, json!({ "jsonrpc": "2.0", "id": id, "result": {} }));
    }
    drop(stdin);
    exits_0(child, errors);
}
