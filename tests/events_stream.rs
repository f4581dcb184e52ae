//! The `--events` stream through the real binary (issue 36, item 11): a call's notifications are
//! capped, counting what was dropped; a FIFO whose reader leaves ends the stream with one warning
//! and the run goes on (no SIGPIPE death); a write error (a full disk, `/dev/full`) fails the
//! command as `--trace` does.

mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{Response, TestServer};

/// Lines a call's notifications may make (`events::MAX_NOTIFICATIONS_PER_CALL`).
const CAP: usize = 1000;

/// A mock `noisy` that sends `notices` log notifications before it answers, called twice;
/// and `slow`, an HTTP tool of `server`, called between them.
fn spec(dir: &Path, notices: usize, server: &TestServer) -> PathBuf {
    let notify: String = (0..notices)
        .map(|n| format!("          - {{ log: {{ level: info, data: \"line {n}\" }} }}\n"))
        .collect();
    support::write(
        dir,
        "noisy.yaml",
        &format!(
            r#"version: 1
name: noisy
limits: {{ max_tool_calls: 10 }}
tools:
  noisy:
    description: Logs a lot while it works.
    kind: mock
    input: {{ type: object, properties: {{}} }}
    responses:
      - notify:
{notify}        result: worked
  slow:
    description: Asks the slow service.
    kind: http
    input: {{ type: object, properties: {{}} }}
    request: {{ url: "{url}" }}
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: noisy, arguments: {{}} }}]
          - tool_calls: [{{ name: slow, arguments: {{}} }}]
          - tool_calls: [{{ name: noisy, arguments: {{}} }}]
          - answer: "done"
"#,
            url = server.url("/slow"),
        ),
    )
}

fn quick_server() -> TestServer {
    TestServer::start(|_| Response::json(200, json!("ok")))
}

#[test]
fn a_calls_notifications_are_capped_and_its_end_counts_the_dropped() {
    let dir = support::temp_dir("events-cap");
    let server = quick_server();
    let spec = spec(&dir, CAP + 200, &server);
    let events = dir.join("events.jsonl");
    let out = support::run(
        support::toolrun()
            .arg("run")
            .arg(&spec)
            .args(["--query", "go", "--events"])
            .arg(&events),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let lines = support::events_in(&events);
    let notices = lines.iter().filter(|l| l["event"] == "tool_notify").count();
    assert_eq!(notices, 2 * CAP, "each call's own cap");
    let finished: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "tool_finished" && l["name"] == "noisy")
        .collect();
    assert_eq!(finished.len(), 2);
    for f in finished {
        assert_eq!(f["notifications_dropped"], 200, "{f}");
    }
    let slow = lines
        .iter()
        .find(|l| l["event"] == "tool_finished" && l["name"] == "slow")
        .expect("slow's end");
    assert_eq!(slow.get("notifications_dropped"), None, "{slow}");
}

#[test]
fn a_full_disk_fails_the_command_as_the_trace_does() {
    let dir = support::temp_dir("events-full");
    let server = quick_server();
    let spec = spec(&dir, 3, &server);
    let trace = dir.join("trace.json");
    let out = support::run(
        support::toolrun()
            .arg("run")
            .arg(&spec)
            .args(["--query", "go", "--events", "/dev/full", "--trace"])
            .arg(&trace),
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("error: cannot write events to `/dev/full`: No space left on device"),
        "{out:?}"
    );
    assert_eq!(
        out.stderr.matches("/dev/full").count(),
        1,
        "said once: {out:?}"
    );
}

#[test]
fn a_fifo_whose_reader_leaves_ends_the_stream_with_a_warning_and_the_run_goes_on() {
    let dir = support::temp_dir("events-fifo");
    let fifo = dir.join("events.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    // The reader reads the first line, then leaves; the slow service answers only after that,
    // so the run's later lines meet a FIFO nobody reads.
    let left = Arc::new(AtomicBool::new(false));
    let reader = {
        let (fifo, left) = (fifo.clone(), left.clone());
        std::thread::spawn(move || {
            let mut lines = BufReader::new(std::fs::File::open(&fifo).expect("open the FIFO"));
            let mut first = String::new();
            lines.read_line(&mut first).expect("a line");
            drop(lines);
            left.store(true, Ordering::SeqCst);
            first
        })
    };
    let waited = left.clone();
    let server = TestServer::start(move |_| {
        let start = Instant::now();
        while !waited.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(5));
        }
        Response::json(200, json!("ok"))
    });
    let spec = spec(&dir, 3, &server);
    let trace = dir.join("trace.json");
    let out = support::run(
        support::toolrun()
            .arg("run")
            .arg(&spec)
            .args(["--query", "go", "--trace"])
            .arg(&trace)
            .arg("--events")
            .arg(&fifo),
    );
    let first = reader.join().expect("reader");
    assert!(first.contains("\"event\""), "{first:?}");
    assert_eq!(out.code, 0, "no SIGPIPE death (141): {out:?}");
    assert_eq!(out.stdout, "done\n");
    let warnings: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(warnings.len(), 1, "{out:?}");
    assert!(warnings[0].contains("went away"), "{out:?}");
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(trace["status"], "ok");
    assert_eq!(trace["tool_call_count"], 3);
}

#[test]
fn serve_keeps_serving_and_records_when_its_events_reader_leaves() {
    use std::io::{Read, Write};
    let dir = support::temp_dir("events-fifo-serve");
    let fifo = dir.join("events.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(std::fs::File::open(&fifo).expect("open the FIFO"));
            let mut first = String::new();
            lines.read_line(&mut first).expect("a line");
            first
        })
    };
    let server = quick_server();
    let spec = spec(&dir, 3, &server);
    let recording = dir.join("session.json");
    let mut serve = support::toolrun()
        .arg("serve")
        .arg(&spec)
        .arg("--events")
        .arg(&fifo)
        .arg("--record")
        .arg(&recording)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start serve");
    let mut stdin = serve.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(serve.stdout.take().expect("stdout"));
    let call = |id: u64| json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": "noisy", "arguments": {} } });
    let initialize = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    // The answer to request `id`, past the notifications before it.
    let mut answer_to = |id: u64| loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).expect("a line") > 0,
            "no answer to {id}"
        );
        let message: Value = serde_json::from_str(&line).expect("JSON-RPC");
        if message["id"] == id {
            return message;
        }
    };
    for message in [initialize, initialized, call(1)] {
        writeln!(stdin, "{message}").expect("send");
    }
    answer_to(0);
    assert_eq!(answer_to(1)["result"]["isError"], json!(false));
    // The reader has read its line and left by now: the second call's lines meet no reader.
    let first = reader.join().expect("reader");
    assert!(first.contains("\"event\""), "{first:?}");
    writeln!(stdin, "{}", call(2)).expect("send");
    let second = answer_to(2);
    assert!(second.to_string().contains("worked"), "{second}");
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("the rest");
    let status = serve.wait().expect("serve ends");
    let mut stderr = String::new();
    serve
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr");
    assert_eq!(status.code(), Some(0), "no SIGPIPE death: {stderr}");
    assert_eq!(stderr.matches("went away").count(), 1, "{stderr}");
    // The recording is written whole: each of its lines JSON, both calls in it.
    let recorded = std::fs::read_to_string(&recording).expect("the recording");
    for line in recorded.lines() {
        serde_json::from_str::<Value>(line).expect("a JSON line");
    }
    assert!(recorded.matches("worked").count() >= 2, "{recorded}");
}
