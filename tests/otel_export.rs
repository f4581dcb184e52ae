//! OpenTelemetry export through the real binary, received by a real OTLP receiver installed by
//! the tests (PyPI `oteltap`, pinned in tests/otel/requirements.txt): span names, kinds,
//! attributes, parent/child links, `traceparent` continuation and masking. Everything binds and
//! contacts 127.0.0.1 only.

#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::{json, Value};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Response, TestServer};

const SECRET: &str = "Zq+8/a=b c&d?e-f.g_h~i";
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
/// A trace a request names in its `params._meta`, beside `CALLER_TRACE` in its HTTP header.
const META_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

/// `oteltap` listening on a port of its own; every span it prints, as JSON.
struct Tap {
    child: Child,
    port: u16,
    spans: Arc<Mutex<Vec<Value>>>,
    raw: Arc<Mutex<String>>,
}

impl Tap {
    fn start() -> Tap {
        let python = python::venv("otel-venv", "tests/otel/requirements.txt");
        Tap::listening(|port| {
            let mut oteltap = Command::new(python.with_file_name("oteltap"));
            oteltap.args(["--port", &port.to_string()]);
            oteltap
        })
    }

    /// The OTLP/JSON receiver (tests/otel/json_receiver.py): decodes with the official message
    /// types, prints spans as oteltap does.
    fn start_json() -> Tap {
        let python = python::venv("otel-venv", "tests/otel/requirements.txt");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otel/json_receiver.py");
        Tap::listening(|port| {
            let mut receiver = Command::new(python);
            receiver.arg(script).arg(port.to_string());
            receiver
        })
    }

    /// The official receiver over HTTPS, with a CA, server and client certificates it makes in
    /// `dir` (`ca.pem`, `client.pem`, `client-key.pem`); `client_certs` asks clients for one.
    fn start_tls(dir: &Path, client_certs: bool) -> Tap {
        let python = python::venv("otel-venv", "tests/otel/requirements.txt");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otel/json_receiver.py");
        Tap::listening(|port| {
            let mut receiver = Command::new(python);
            receiver
                .arg(script)
                .arg(port.to_string())
                .arg("--tls")
                .arg(dir);
            if client_certs {
                receiver.arg("--client-certs");
            }
            receiver
        })
    }

    fn listening(command: impl FnOnce(u16) -> Command) -> Tap {
        // A port nobody holds right now (the receiver binds it next).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut child = command(port)
            .env("PYTHONUNBUFFERED", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the receiver");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut first = String::new();
        out.read_line(&mut first)
            .expect("the receiver's first line");
        assert!(first.contains("Listening"), "the receiver said {first:?}");
        let spans = Arc::new(Mutex::new(Vec::new()));
        let raw = Arc::new(Mutex::new(String::new()));
        let (s, r) = (spans.clone(), raw.clone());
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                r.lock().unwrap().push_str(&line);
                r.lock().unwrap().push('\n');
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if v.get("spanId").is_some() {
                        s.lock().unwrap().push(v);
                    }
                }
            }
        });
        Tap {
            child,
            port,
            spans,
            raw,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Waits (up to a minute, for a loaded machine) until `done` holds for the spans received.
    #[track_caller]
    fn wait(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let spans = self.spans.lock().unwrap().clone();
            if done(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "the receiver did not get the expected spans; it got:\n{spans:#?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn raw(&self) -> String {
        self.raw.lock().unwrap().clone()
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

#[track_caller]
fn one<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one span `{name}` expected in:\n{spans:#?}");
    found[0]
}

/// An attribute's value, as plain JSON (string, number, bool or list of strings).
fn attr(span: &Value, key: &str) -> Value {
    let Some(kv) = span["attributes"]
        .as_array()
        .and_then(|a| a.iter().find(|kv| kv["key"] == key))
    else {
        return Value::Null;
    };
    plain(&kv["value"])
}

fn plain(v: &Value) -> Value {
    if let Some(s) = v.get("stringValue") {
        return s.clone();
    }
    if let Some(i) = v.get("intValue") {
        return json!(i
            .as_str()
            .and_then(|s| s.parse::<i64>().ok())
            .or(i.as_i64()));
    }
    if let Some(d) = v.get("doubleValue") {
        return d.clone();
    }
    if let Some(b) = v.get("boolValue") {
        return b.clone();
    }
    if let Some(items) = v["arrayValue"]["values"].as_array() {
        return Value::Array(items.iter().map(plain).collect());
    }
    Value::Null
}

#[track_caller]
fn assert_child(child: &Value, parent: &Value) {
    assert_eq!(child["traceId"], parent["traceId"], "{child:#}\n{parent:#}");
    assert_eq!(
        child["parentSpanId"], parent["spanId"],
        "{child:#}\n{parent:#}"
    );
}

#[track_caller]
fn assert_clean(what: &str, text: &str) {
    for d in toolrun::fuzzing::decodings(text) {
        assert!(
            !d.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "the secret leaks from {what}:\n{text}"
        );
    }
    assert!(
        !text.contains("Zq+8") && !text.contains("Zq%2B8"),
        "{what}:\n{text}"
    );
}

/// An HTTP tool that sends the secret (URL and header) to a server that echoes it back.
fn leaky_spec(dir: &Path, server: &TestServer) -> PathBuf {
    support::write(
        dir,
        "leaky.yaml",
        &format!(
            r#"version: 1
name: leaky
secrets: [TOKEN]
tools:
  echo:
    description: Calls the echo service, which repeats what it received.
    kind: http
    input: {{ type: object, properties: {{}}, additionalProperties: false }}
    request: {{ url: "http://{host}/echo?t={{{{ secrets.TOKEN | urlencode }}}}", headers: {{ X-Token: "{{{{ secrets.TOKEN }}}}" }} }}
policy:
  network: {{ allow_hosts: ["{host}"] }}
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: echo, arguments: {{}} }}]
          - answer: "done"
tests:
  - name: answers done
    query: echo please
    expect: {{ output_contains: done }}
  - name: wants more
    query: echo please
    expect: {{ output_contains: "not in the answer" }}
"#,
            host = server.addr(),
        ),
    )
}

fn echo_server() -> TestServer {
    TestServer::start(|req| {
        Response::text(200, format!("{}\n{}\n{SECRET}", req.raw_target, req.text()))
    })
}

fn toolrun(tap: &Tap) -> Command {
    let mut cmd = support::toolrun();
    // Generous at exit: the receiver may be slow on a loaded machine.
    cmd.env("OTEL_BSP_EXPORT_TIMEOUT", "10000")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", tap.url())
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("TRACEPARENT");
    cmd
}

/// `toolrun` exporting to `tap` in the caller's trace `trace` (under its span `CALLER_SPAN`),
/// with one secret in its environment.
fn under_trace(tap: &Tap, trace: &str, (secret, value): (&str, &str)) -> Command {
    let mut cmd = toolrun(tap);
    cmd.env("TRACEPARENT", format!("00-{trace}-{CALLER_SPAN}-01"))
        .env(secret, value);
    cmd
}

/// `count` trace ids of the tests' own, `base + 1` on, as OTLP writes them (32 hex digits).
fn trace_ids(base: u64, count: u64) -> Vec<String> {
    (1..=count).map(|i| format!("{:032x}", base + i)).collect()
}

/// `toolrun run SPEC --query QUERY ARGS... --record FIXTURE`, which must succeed.
#[track_caller]
fn record(cmd: &mut Command, (spec, query): (&Path, &str), args: &[&OsStr], fixture: &Path) {
    let out = support::run(
        cmd.arg("run")
            .arg(spec)
            .args(["--query", query])
            .args(args)
            .arg("--record")
            .arg(fixture),
    );
    assert_eq!(out.code, 0, "{out:?}");
}

/// `toolrun export otel FILE --otlp TAP`: the collector named by the flag alone.
fn export_otel(cmd: &mut Command, tap: &Tap, file: &Path) -> support::Output {
    support::run(
        cmd.env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .args(["export", "otel"])
            .arg(file)
            .args(["--otlp", &tap.url()]),
    )
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The notes server (the official MCP Python SDK over streamable HTTP, tests/mcp) on a port of
/// its own, logging the headers it gets to `dir/headers.jsonl`.
fn notes_server(dir: &Path) -> (Child, u16) {
    let mut server = Command::new(python::python())
        .arg(python::script("notes_server.py"))
        .arg(dir.join("headers.jsonl"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the notes server");
    let mut line = String::new();
    BufReader::new(server.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("port");
    (
        server,
        line.trim().parse().expect("the notes server's port"),
    )
}

/// The notes server's spec (see `support::specs::notes_spec`) with one tool, `tools`, which
/// the scripted model calls once (as `called`) with `{ query: milk }` before it answers `found`.
fn notes_spec(port: u16, tools: &str, called: &str) -> String {
    support::specs::notes_spec(
        &format!("http://127.0.0.1:{port}/mcp"),
        tools,
        &format!(
            "          - tool_calls: [{{ name: {called}, arguments: {{ query: milk }} }}]\n          - answer: found"
        ),
    )
}

#[track_caller]
fn nanos(span: &Value, key: &str) -> u64 {
    span[key].as_str().unwrap().parse().unwrap()
}

#[test]
fn a_run_is_an_agent_span_over_chat_tool_and_http_spans_masked_and_in_the_callers_trace() {
    let tap = Tap::start();
    let server = echo_server();
    let dir = support::temp_dir("otel-run");
    let spec = leaky_spec(&dir, &server);
    let out = support::run(
        toolrun(&tap)
            .env("TOKEN", SECRET)
            .env("TRACEPARENT", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
            .arg("run")
            .arg(&spec)
            .args(["--query", "echo please", "--otlp-content"]),
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "done\n");
    assert_clean("stderr", &out.stderr);
    let spans = tap.wait(|s| s.len() >= 5);
    let run = one(&spans, "invoke_agent leaky");
    assert_eq!(run["kind"], 1, "INTERNAL");
    assert_eq!(
        run["traceId"], CALLER_TRACE,
        "TRACEPARENT continues the caller's trace"
    );
    assert_eq!(run["parentSpanId"], CALLER_SPAN);
    assert_eq!(attr(run, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(attr(run, "gen_ai.agent.name"), "leaky");
    assert_eq!(attr(run, "toolrun.status"), "ok");
    assert_eq!(attr(run, "toolrun.stop_reason"), "answer");
    assert!(attr(run, "gen_ai.conversation.id").is_string());
    let chats = named(&spans, "chat m");
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for chat in &chats {
        assert_eq!(chat["kind"], 3, "CLIENT");
        assert_child(chat, run);
        assert_eq!(attr(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(attr(chat, "gen_ai.provider.name"), "scripted");
        assert_eq!(
            attr(chat, "server.address"),
            Value::Null,
            "no server: {chat:#}"
        );
        assert_eq!(attr(chat, "gen_ai.request.model"), "m");
        assert_eq!(
            attr(chat, "gen_ai.response.model"),
            "m",
            "a scripted model's own name"
        );
    }
    let reasons: Vec<Value> = chats
        .iter()
        .map(|c| attr(c, "gen_ai.response.finish_reasons"))
        .collect();
    assert!(reasons.contains(&json!(["tool_calls"])), "{reasons:?}");
    assert!(reasons.contains(&json!(["stop"])), "{reasons:?}");
    let tool = one(&spans, "execute_tool echo");
    assert_child(tool, run);
    assert_eq!(attr(tool, "gen_ai.tool.name"), "echo");
    // An HTTP tool calls an external API from the agent's side: an `extension`.
    assert_eq!(attr(tool, "gen_ai.tool.type"), "extension");
    assert!(attr(tool, "gen_ai.tool.call.id").is_string());
    assert!(
        attr(tool, "gen_ai.tool.call.result")
            .as_str()
            .is_some_and(|r| r.contains("***")),
        "{tool:#}"
    );
    let http = one(&spans, "GET");
    assert_eq!(http["kind"], 3, "CLIENT");
    assert_child(http, tool);
    assert_eq!(attr(http, "http.request.method"), "GET");
    assert_eq!(attr(http, "http.response.status_code"), 200);
    let url = attr(http, "url.full");
    assert!(
        url.as_str().is_some_and(|u| u.contains("/echo?t=")),
        "{url}"
    );
    // Content went out (opted in), and not one byte of it holds the secret.
    assert!(attr(chats[0], "gen_ai.input.messages").is_string());
    assert_clean("the exported spans", &tap.raw());
    let start = |s: &Value| nanos(s, "startTimeUnixNano");
    assert!(start(tool) >= start(run) && nanos(tool, "endTimeUnixNano") >= start(tool));
}

#[test]
fn content_stays_home_unless_asked_and_a_dead_collector_is_one_warning() {
    let tap = Tap::start();
    let server = echo_server();
    let dir = support::temp_dir("otel-quiet");
    let spec = leaky_spec(&dir, &server);
    let out = support::run(
        toolrun(&tap)
            .env("TOKEN", SECRET)
            .arg("run")
            .arg(&spec)
            .args(["--query", "echo please"]),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let spans = tap.wait(|s| s.len() >= 5);
    for s in &spans {
        for key in [
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        ] {
            assert_eq!(attr(s, key), Value::Null, "{key} without opt-in:\n{s:#}");
        }
    }

    // Nobody listens on the refused port: same answer, same exit code, one warning.
    let refused = support::refused_port();
    let (trace, events) = (dir.join("trace.json"), dir.join("events.jsonl"));
    // A header value no spec declares: only toolrun's own rule keeps it out of every output.
    let header_only = "otlp-header-only-5e2a";
    let out = support::run(
        support::toolrun()
            .env("TOKEN", SECRET)
            .env(
                "OTEL_EXPORTER_OTLP_HEADERS",
                format!("authorization=Bearer {SECRET},x-key={header_only}"),
            )
            .arg("run")
            .arg(&spec)
            .args(["--query", "echo please", "--trace"])
            .arg(&trace)
            .arg("--events")
            .arg(&events)
            .args(["--otlp", &format!("http://127.0.0.1:{refused}")]),
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "done\n");
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("warning"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", out.stderr);
    assert!(
        warnings[0].contains("cannot export traces"),
        "{}",
        out.stderr
    );
    assert_clean("stderr", &out.stderr);
    for (what, text) in [
        ("stdout", out.stdout.clone()),
        ("stderr", out.stderr.clone()),
        ("the trace", std::fs::read_to_string(&trace).unwrap()),
        ("the events", std::fs::read_to_string(&events).unwrap()),
    ] {
        assert!(!text.contains(header_only), "{what}:\n{text}");
        assert_clean(what, &text);
    }
}

#[test]
fn test_attempts_carry_their_verdicts_as_evaluation_events() {
    let tap = Tap::start();
    let server = echo_server();
    let dir = support::temp_dir("otel-test");
    let spec = leaky_spec(&dir, &server);
    let out = support::run(
        toolrun(&tap)
            .env("TOKEN", SECRET)
            .arg("test")
            .arg(&spec)
            .arg("--allow-network"),
    );
    assert_eq!(out.code, 1, "one test fails\n{out:?}");
    let spans = tap.wait(|s| named(s, "invoke_agent leaky").len() >= 2);
    let root = one(&spans, "toolrun test");
    assert_eq!(attr(root, "toolrun.tests.passed"), 1);
    assert_eq!(attr(root, "toolrun.tests.failed"), 1);
    for (name, label) in [("answers done", "passed"), ("wants more", "failed")] {
        let test = one(&spans, &format!("test {name}"));
        assert_child(test, root);
        let attempt = one(&spans, &format!("test_attempt {name}"));
        assert_child(attempt, test);
        let event = attempt["events"]
            .as_array()
            .and_then(|e| e.iter().find(|e| e["name"] == "gen_ai.evaluation.result"))
            .unwrap_or_else(|| panic!("no evaluation event:\n{attempt:#}"));
        assert_eq!(attr(event, "gen_ai.evaluation.name"), name);
        assert_eq!(attr(event, "gen_ai.evaluation.score.label"), label);
        let score = if label == "passed" { 1.0 } else { 0.0 };
        assert_eq!(attr(event, "gen_ai.evaluation.score.value"), json!(score));
        let explanation = attr(event, "gen_ai.evaluation.explanation");
        if label == "failed" {
            assert!(
                explanation
                    .as_str()
                    .is_some_and(|e| e.contains("output_contains")),
                "{event:#}"
            );
        } else {
            assert_eq!(explanation, Value::Null);
        }
        let runs: Vec<&Value> = named(&spans, "invoke_agent leaky")
            .into_iter()
            .filter(|r| r["parentSpanId"] == attempt["spanId"])
            .collect();
        assert_eq!(runs.len(), 1, "the attempt's run is its child");
    }
    assert_clean("the exported spans", &tap.raw());
}

/// `2026-01-15T10:00:00.123Z` as nanoseconds since the epoch (days from the civil date).
/// `v` without the model calls' `server_address` / `server_port`, as recorded before calls
/// noted them.
fn forget_servers(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("server_address");
            o.remove("server_port");
            o.values_mut().for_each(forget_servers);
        }
        Value::Array(a) => a.iter_mut().for_each(forget_servers),
        _ => {}
    }
}

fn unix_nanos(t: &str) -> u64 {
    let n = |r: std::ops::Range<usize>| t[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19);
    (secs * 1000 + n(20..23)) as u64 * 1_000_000
}

#[test]
fn export_otel_sends_recorded_files_at_their_recorded_times() {
    let tap = Tap::start();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixture = root.join("fixtures/local_stack_inventory.json");
    let recorded = read_json(&fixture);
    let out = export_otel(&mut toolrun(&tap), &tap, &fixture);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("exported 1 run(s) from 1 file(s)"),
        "{out:?}"
    );
    let spans = tap.wait(|s| s.len() >= 7);
    let run = one(&spans, "invoke_agent local_stack");
    let started = recorded["trace"]["started_at"]
        .as_str()
        .expect("recorded start");
    assert_eq!(
        run["startTimeUnixNano"].as_str().unwrap(),
        unix_nanos(started).to_string(),
        "the recorded start, not now"
    );
    let http = one(&spans, "GET");
    assert_eq!(attr(http, "http.response.status_code"), 200);
    let inventory = one(&spans, "execute_tool inventory");
    assert_child(http, inventory);
    assert_eq!(attr(inventory, "gen_ai.tool.type"), "extension");
    let chats = named(&spans, "chat llama3.1");
    assert_eq!(chats.len(), 3);
    // A fixture recorded before model calls noted their server: it is read from the recorded
    // requests.
    let mut older = recorded.clone();
    forget_servers(&mut older);
    let older_dir = support::temp_dir("otel-older");
    let older_file = support::write(&older_dir, "older.json", &older.to_string());
    let trace = &trace_ids(0xabe0_0000, 1)[0];
    let out = export_otel(
        &mut under_trace(&tap, trace, ("UNUSED", "x")),
        &tap,
        &older_file,
    );
    assert_eq!(out.code, 0, "{out:?}");
    let later = tap.wait(|s| named(&in_trace(s, trace), "chat llama3.1").len() >= 3);
    for (chat, noted) in named(&in_trace(&later, trace), "chat llama3.1")
        .into_iter()
        .zip(chats)
    {
        for c in [chat, noted] {
            assert_eq!(attr(c, "server.address"), "127.0.0.1", "{c:#}");
            assert_eq!(attr(c, "server.port"), 18434, "{c:#}");
        }
    }

    let none = support::run(
        support::toolrun()
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .args(["export", "otel"])
            .arg(&fixture),
    );
    assert_eq!(none.code, 2, "{none:?}");
    assert!(none.stderr.contains("--otlp"), "{none:?}");

    // Sending is the command's whole job: a collector that is down or refuses the spans
    // fails it (1), with one warning and no claim that anything was exported.
    let refusing = TestServer::start(|_| Response::json(500, json!({ "error": "full" })));
    let refused = support::refused_port();
    for url in [
        format!("http://{}", refusing.addr()),
        format!("http://127.0.0.1:{refused}"),
    ] {
        let out = support::run(
            support::toolrun()
                .env("OTEL_BSP_EXPORT_TIMEOUT", "10000")
                .args(["export", "otel"])
                .arg(&fixture)
                .args(["--otlp", &url]),
        );
        assert_eq!(out.code, 1, "{url}: {out:?}");
        assert_eq!(out.stderr.matches("toolrun: warning").count(), 1, "{out:?}");
        assert!(
            out.stderr.contains("did not all reach the collector")
                && !out.stderr.contains("exported 1 run"),
            "{out:?}"
        );
    }
    assert_eq!(refusing.requests().len(), 1, "one batch, refused");
}

#[test]
fn serve_answers_with_mcp_server_spans_that_continue_the_clients_trace() {
    let tap = Tap::start();
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/mcp_served.yaml");
    let mut serve = toolrun(&tap);
    serve
        .arg("serve")
        .arg(&spec)
        .args(["--http", "127.0.0.1:0"]);
    let (mut child, url, mut stderr) = support::spawn_served(&mut serve);
    let headers = json!({ "traceparent": format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01") });
    let mut client = Command::new(python::python());
    client
        .arg(python::script("client.py"))
        .args(["http", &url])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CLIENT_HEADERS", headers.to_string());
    let plan = json!([
        { "name": "lookup_order", "arguments": { "order_id": 42 } },
        { "name": "lookup_order", "arguments": { "order_id": 7 } },
        { "name": "no_such_tool", "arguments": {} },
        // The MCP conventions: the request's own `params._meta` context is the parent, before
        // the HTTP request's.
        { "name": "lookup_order", "arguments": { "order_id": 42 }, "meta": { "traceparent": format!("00-{META_TRACE}-{CALLER_SPAN}-01") } },
    ]);
    let out = support::run_with_stdin(&mut client, &plan.to_string());
    assert_eq!(out.code, 0, "the MCP client failed\n{out:?}");
    let (code, rest) = support::terminate(&mut child, &mut stderr);
    assert_eq!(code, 0, "{rest}");
    let spans = tap.wait(|s| {
        named(s, "tools/call lookup_order").len() >= 3 && !named(s, "tools/call").is_empty()
    });
    for name in ["initialize", "tools/list"] {
        let s = named(&spans, name);
        assert!(!s.is_empty(), "no `{name}` span in:\n{spans:#?}");
        assert_eq!(s[0]["kind"], 2, "SERVER");
        assert_eq!(attr(s[0], "mcp.method.name"), name);
    }
    let calls = named(&spans, "tools/call lookup_order");
    let in_meta_trace = calls.iter().filter(|c| c["traceId"] == META_TRACE).count();
    assert_eq!(in_meta_trace, 1, "{calls:#?}");
    for call in &calls {
        assert_eq!(call["kind"], 2, "SERVER");
        assert!(
            call["traceId"] == CALLER_TRACE || call["traceId"] == META_TRACE,
            "the client's trace continues: {call:#}"
        );
        assert_eq!(call["parentSpanId"], CALLER_SPAN);
        assert_eq!(attr(call, "mcp.method.name"), "tools/call");
        assert_eq!(attr(call, "gen_ai.tool.name"), "lookup_order");
        assert!(attr(call, "mcp.session.id").is_string(), "{call:#}");
        assert!(attr(call, "mcp.protocol.version").is_string(), "{call:#}");
        assert!(attr(call, "jsonrpc.request.id").is_string(), "{call:#}");
        assert_eq!(attr(call, "network.transport"), "tcp");
    }
    // A result with isError is `tool_error`, as the MCP conventions say; toolrun's kind beside.
    let failed: Vec<&&Value> = calls
        .iter()
        .filter(|c| attr(c, "error.type") == "tool_error")
        .collect();
    assert_eq!(failed.len(), 1, "order 7 is not found:\n{calls:#?}");
    assert_eq!(attr(failed[0], "toolrun.error.kind"), "not_found");
    assert_eq!(failed[0]["status"]["code"], 2, "ERROR");
    // A JSON-RPC error, as the MCP conventions record it: its code, as a string, in both.
    // Its span is named by the method alone: a tool nobody serves makes no new span name.
    assert!(named(&spans, "tools/call no_such_tool").is_empty());
    let unknown = one(&spans, "tools/call");
    assert_eq!(attr(unknown, "gen_ai.tool.name"), "no_such_tool");
    assert_eq!(attr(unknown, "error.type"), "-32602", "{unknown:#}");
    assert_eq!(attr(unknown, "rpc.response.status_code"), "-32602");
    assert_eq!(unknown["status"]["code"], 2, "ERROR");
}

#[test]
fn a_remote_mcp_call_is_an_mcp_client_span_under_its_tool_span() {
    let tap = Tap::start();
    let dir = support::temp_dir("otel-mcp-client");
    let (mut server, port) = notes_server(&dir);
    let spec = support::write(
        &dir,
        "notes.yaml",
        &notes_spec(port, "      - search_notes", "search_notes"),
    );
    let out = support::run(
        toolrun(&tap)
            .env("NOTES_KEY", SECRET)
            .arg("run")
            .arg(&spec)
            .args(["--query", "what do I need to buy?", "--otlp-content"]),
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(out.code, 0, "{out:?}");
    let spans = tap.wait(|s| !named(s, "tools/call search_notes").is_empty());
    let tool = one(&spans, "execute_tool search_notes");
    let call = one(&spans, "tools/call search_notes");
    assert_eq!(call["kind"], 3, "CLIENT");
    assert_child(call, tool);
    assert_eq!(attr(tool, "gen_ai.tool.type"), "extension");
    assert_eq!(attr(call, "mcp.method.name"), "tools/call");
    assert_eq!(attr(call, "gen_ai.tool.name"), "search_notes");
    assert_eq!(attr(call, "server.port"), i64::from(port));
    assert!(attr(call, "mcp.protocol.version").is_string(), "{call:#}");
    assert!(attr(call, "mcp.session.id").is_string(), "{call:#}");
    assert_clean("the exported spans", &tap.raw());
}

#[test]
fn json_protocol_headers_and_resource_reach_the_collector_and_disabled_means_nothing_sent() {
    // A collector that keeps what it gets: the first answer 200, then 500.
    let collector = TestServer::start(|req| {
        if req.nth == 1 {
            Response::json(200, json!({}))
        } else {
            Response::json(500, json!({ "error": "full" }))
        }
    });
    let server = echo_server();
    let dir = support::temp_dir("otel-json");
    let spec = leaky_spec(&dir, &server);
    let run = |extra: &[(&str, String)]| {
        let mut cmd = support::toolrun();
        cmd.env("TOKEN", SECRET)
            .env(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://{}", collector.addr()),
            )
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
            .env(
                "OTEL_EXPORTER_OTLP_HEADERS",
                format!(
                    "authorization=Bearer%20{},x-team=agents",
                    "hdr-secret-value"
                ),
            )
            .env("OTEL_SERVICE_NAME", "stock-agent")
            .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci")
            .env(
                "OTEL_SEMCONV_STABILITY_OPT_IN",
                "gen_ai_latest_experimental",
            )
            .env("OTEL_BSP_EXPORT_TIMEOUT", "10000")
            .env_remove("TRACEPARENT")
            .env_remove("OTEL_SDK_DISABLED");
        for (k, v) in extra {
            cmd.env(k, v);
        }
        support::run(cmd.arg("run").arg(&spec).args(["--query", "echo please"]))
    };
    let out = run(&[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stderr.contains("warning"), "{out:?}");
    let got = collector.requests();
    assert_eq!(got.len(), 1, "one batch");
    let req = &got[0];
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", "/v1/traces")
    );
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.header("authorization"), Some("Bearer hdr-secret-value"));
    assert_eq!(req.header("x-team"), Some("agents"));
    let body: Value = serde_json::from_slice(&req.body).expect("OTLP/JSON");
    let resource = resource_of(&body);
    assert_eq!(resource["service.name"], "stock-agent");
    assert_eq!(resource["deployment.environment"], "ci");
    let spans = spans_of(&body);
    let chat = &named(&spans, "chat m")[0];
    assert_eq!(attr(chat, "gen_ai.provider.name"), "scripted");
    assert_eq!(
        attr(chat, "gen_ai.system"),
        Value::Null,
        "latest conventions only"
    );
    assert_clean("the JSON export", &String::from_utf8_lossy(&req.body));

    // The collector fails: one warning, the header's value never shown, exit code unchanged.
    let out = run(&[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stderr.matches("warning").count(), 1, "{out:?}");
    assert!(out.stderr.contains("HTTP 500"), "{out:?}");
    assert!(!out.stderr.contains("hdr-secret-value"), "{out:?}");

    // Disabled, or no traces exporter: nothing is sent.
    let out = run(&[("OTEL_SDK_DISABLED", "true".into())]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(collector.requests().len(), 2, "nothing sent when disabled");
    let out = run(&[("OTEL_TRACES_EXPORTER", "none".into())]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    assert_eq!(
        collector.requests().len(),
        2,
        "nothing sent without an exporter"
    );
    // An exporter toolrun does not have is a warning; OTLP goes out all the same.
    let out = run(&[("OTEL_TRACES_EXPORTER", "zipkin".into())]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("OTEL_TRACES_EXPORTER is `zipkin`"),
        "{out:?}"
    );
    assert_eq!(collector.requests().len(), 3);
}

/// The resource attributes of an OTLP/JSON request (one resource), as plain JSON.
fn resource_of(body: &Value) -> serde_json::Map<String, Value> {
    body["resourceSpans"][0]["resource"]["attributes"]
        .as_array()
        .expect("resource attributes")
        .iter()
        .map(|kv| (kv["key"].as_str().unwrap().to_string(), plain(&kv["value"])))
        .collect()
}

/// The spans of an OTLP/JSON request (one resource, one scope).
fn spans_of(body: &Value) -> Vec<Value> {
    body["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .expect("spans")
        .clone()
}

/// What one `toolrun call` under `env` sent to an http/json collector.
struct Sent {
    /// The resource's attributes, as plain JSON.
    resource: serde_json::Map<String, Value>,
    spans: Vec<Value>,
    request: support::Request,
    stderr: String,
}

fn sent_by_a_call(env: &[(&str, &str)]) -> Sent {
    let collector = TestServer::start(|_| Response::json(200, json!({})));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = support::toolrun();
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .env("OTEL_BSP_EXPORT_TIMEOUT", "10000")
        .envs(env.iter().copied())
        .arg("call")
        .arg(root.join("specs/stock_assistant.yaml"))
        .args(["get_stock_price", "--args", r#"{"ticker": "AAPL"}"#])
        .args(["--otlp", &format!("http://{}", collector.addr())]);
    let out = support::run(&mut cmd);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout.trim(), "178.15", "{out:?}");
    let mut got = collector.requests();
    assert_eq!(got.len(), 1, "one batch: {out:?}");
    let request = got.remove(0);
    let body: Value = serde_json::from_slice(&gunzipped(&request)).expect("OTLP/JSON");
    Sent {
        resource: resource_of(&body),
        spans: spans_of(&body),
        request,
        stderr: out.stderr,
    }
}

/// A request's body as sent before its `Content-Encoding` (gzip or none).
fn gunzipped(request: &support::Request) -> Vec<u8> {
    match request.header("content-encoding") {
        None => request.body.clone(),
        Some("gzip") => {
            let mut plain = Vec::new();
            flate2::read::GzDecoder::new(&request.body[..])
                .read_to_end(&mut plain)
                .expect("a gzip body");
            plain
        }
        Some(other) => panic!("unexpected content-encoding {other}"),
    }
}

#[test]
fn resource_attributes_and_traceparent_are_read_as_the_specifications_say() {
    // Keys and values percent-decoded (`,` and `=` must be encoded in both).
    let Sent {
        resource,
        spans,
        stderr,
        ..
    } = sent_by_a_call(&[(
        "OTEL_RESOURCE_ATTRIBUTES",
        "deployment.environment=ci%2Cprod, team%3Dname = a%3Db%20c ,",
    )]);
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(resource["deployment.environment"], "ci,prod");
    assert_eq!(resource["team=name"], "a=b c", "{resource:#?}");
    assert_eq!(resource["service.name"], "toolrun");
    assert_eq!(spans.len(), 1);

    // A malformed list is discarded whole, with one warning; the spans still go out.
    for bad in ["team=a,broken", "team=a,k=%E2%9", "team=a,=x"] {
        let Sent {
            resource,
            spans,
            stderr,
            ..
        } = sent_by_a_call(&[("OTEL_RESOURCE_ATTRIBUTES", bad)]);
        assert_eq!(stderr.matches("warning").count(), 1, "{bad}: {stderr}");
        assert!(
            stderr.contains("OTEL_RESOURCE_ATTRIBUTES is ignored"),
            "{stderr}"
        );
        assert!(!resource.contains_key("team"), "{bad}: {resource:#?}");
        assert_eq!(resource["service.name"], "toolrun");
        assert_eq!(spans.len(), 1, "{bad}");
    }

    // A malformed TRACEPARENT starts a trace of its own, silently; a later version is read by
    // its first four fields.
    let (id, span) = (CALLER_TRACE, CALLER_SPAN);
    for (traceparent, joins) in [
        (format!("00-{id}-{span}-01"), true),
        (format!("01-{id}-{span}-01-later-fields"), true),
        (format!("00-{id}-{span}-zz"), false),
        (format!("zz-{id}-{span}-01"), false),
        (format!("0-{id}-{span}-01"), false),
        (format!("00-{id}-{span}-01-extra"), false),
        (format!("00-{id}-{span}-01{}[31m", '\u{1b}'), false),
    ] {
        let Sent { spans, stderr, .. } = sent_by_a_call(&[("TRACEPARENT", &traceparent)]);
        assert_eq!(stderr, "", "{traceparent:?}");
        let call = one(&spans, "execute_tool get_stock_price");
        assert_eq!(
            call["traceId"] == CALLER_TRACE,
            joins,
            "{traceparent:?}: {call:#}"
        );
        let parent = if joins { CALLER_SPAN } else { "" };
        assert_eq!(
            call["parentSpanId"].as_str().unwrap_or(""),
            parent,
            "{traceparent:?}"
        );
    }
}

#[test]
fn settings_that_cannot_be_read_are_warnings_and_treated_as_unset() {
    let sent = sent_by_a_call(&[
        ("OTEL_BSP_EXPORT_TIMEOUT", "2s"),
        ("OTEL_SDK_DISABLED", "yes"),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "1"),
    ]);
    let warnings: Vec<&str> = sent.stderr.lines().collect();
    assert_eq!(warnings.len(), 3, "{}", sent.stderr);
    for name in [
        "OTEL_BSP_EXPORT_TIMEOUT",
        "OTEL_SDK_DISABLED",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    ] {
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with("toolrun: warning: ") && w.contains(name)),
            "{name}: {}",
            sent.stderr
        );
    }
    // Not disabled, no content: as if unset.
    let call = one(&sent.spans, "execute_tool get_stock_price");
    assert_eq!(
        attr(call, "gen_ai.tool.call.result"),
        Value::Null,
        "{call:#}"
    );
    // Values the specification defines are read without a word, and so are the content modes
    // of the GenAI instrumentations (content goes on spans).
    for (capture, on) in [
        ("True", true),
        ("span_only", true),
        ("SPAN_AND_EVENT", true),
        ("NO_CONTENT", false),
        ("false", false),
    ] {
        let sent = sent_by_a_call(&[
            ("OTEL_SDK_DISABLED", "FALSE"),
            (
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
                capture,
            ),
        ]);
        assert_eq!(sent.stderr, "", "{capture}");
        let call = one(&sent.spans, "execute_tool get_stock_price");
        let result = attr(call, "gen_ai.tool.call.result");
        assert_eq!(result.is_string(), on, "{capture}: {call:#}");
    }
    let sent = sent_by_a_call(&[(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "EVENT_ONLY",
    )]);
    assert!(sent.stderr.contains("spans only"), "{}", sent.stderr);
    let call = one(&sent.spans, "execute_tool get_stock_price");
    assert_eq!(attr(call, "gen_ai.tool.call.result"), Value::Null);
}

#[test]
fn traces_headers_take_the_place_of_the_general_ones() {
    let general = "authorization=Bearer%20general-secret,x-team=agents";
    let sent = sent_by_a_call(&[("OTEL_EXPORTER_OTLP_HEADERS", general)]);
    assert_eq!(
        sent.request.header_all("authorization"),
        ["Bearer general-secret"]
    );
    assert_eq!(sent.request.header("x-team"), Some("agents"));
    // The signal's own variable wins whole, as the SDKs read it: nothing of the general one
    // (a key for another backend) goes along.
    let sent = sent_by_a_call(&[
        ("OTEL_EXPORTER_OTLP_HEADERS", general),
        (
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "authorization=Bearer%20traces-secret",
        ),
    ]);
    assert_eq!(
        sent.request.header_all("authorization"),
        ["Bearer traces-secret"]
    );
    assert_eq!(sent.request.header("x-team"), None);
    assert!(!sent.stderr.contains("secret"), "{}", sent.stderr);
}

#[test]
fn an_endpoint_that_is_not_an_http_url_is_one_warning_that_does_not_show_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (flag, env) in [
        (Some("user:s3cret@127.0.0.1:4318"), None),
        (
            None,
            Some(("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:s3cret@h:4318")),
        ),
        (
            None,
            Some(("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://u:s3cret@/v1")),
        ),
    ] {
        let mut cmd = support::toolrun();
        cmd.arg("call")
            .arg(root.join("specs/stock_assistant.yaml"))
            .args(["get_stock_price", "--args", r#"{"ticker": "AAPL"}"#]);
        if let Some(url) = flag {
            cmd.args(["--otlp", url]);
        }
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = support::run(&mut cmd);
        assert_eq!((out.code, out.stdout.trim()), (0, "178.15"), "{out:?}");
        assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
        let source = flag.map_or_else(|| env.unwrap().0, |_| "--otlp");
        assert!(
            out.stderr.contains("is not an http(s) URL") && out.stderr.contains(source),
            "{out:?}"
        );
        assert!(!out.stderr.contains("s3cret"), "{out:?}");
    }
}

#[test]
fn call_and_replay_export_their_spans() {
    let tap = Tap::start();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = support::run(
        toolrun(&tap)
            .arg("call")
            .arg(root.join("specs/stock_assistant.yaml"))
            .args(["get_stock_price", "--args", r#"{"ticker": "AAPL"}"#]),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let out = support::run(
        toolrun(&tap)
            .arg("replay")
            .arg(root.join("fixtures/local_stack_inventory.json")),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let spans = tap.wait(|s| !named(s, "invoke_agent local_stack").is_empty());
    let call = one(&spans, "execute_tool get_stock_price");
    assert_eq!(call["parentSpanId"], "", "a root span");
    assert_eq!(attr(call, "gen_ai.tool.name"), "get_stock_price");
    // A mock runs in-process on the model's arguments: a `function`.
    assert_eq!(attr(call, "gen_ai.tool.type"), "function");
    let replay = spans
        .iter()
        .find(|s| s["name"].as_str().is_some_and(|n| n.starts_with("replay ")))
        .expect("a replay span");
    assert_eq!(replay["status"]["code"], Value::Null, "the replay matched");
    assert_child(one(&spans, "invoke_agent local_stack"), replay);
}

/// Whether each of `traces` holds a span `name`.
fn in_every_trace(spans: &[Value], traces: &[String], name: &str) -> bool {
    traces
        .iter()
        .all(|t| !named(&in_trace(spans, t), name).is_empty())
}

/// Spans of one trace (one command run under its own `TRACEPARENT`).
fn in_trace(spans: &[Value], trace: &str) -> Vec<Value> {
    spans
        .iter()
        .filter(|s| s["traceId"] == trace)
        .cloned()
        .collect()
}

#[test]
fn chat_spans_carry_the_providers_model_and_finish_reasons_live_replayed_and_exported() {
    use support::providers::{self, Fake, KEY};
    let tap = Tap::start();
    let dir = support::temp_dir("otel-provider");
    // The answer names a model and a finish reason that hold the key: masked like everything
    // else, in the fixture and in every exported byte.
    let keyed_model = format!("fake-{KEY}-v2");
    let openai_answer = Response::json(
        200,
        json!({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 1_700_000_000,
            "model": keyed_model,
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": "AAPL is 178.15.", "refusal": null }, "logprobs": null, "finish_reason": format!("stop-{KEY}") }],
            "usage": { "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15 },
        }),
    );
    let fakes = [
        (
            ("openai", ""),
            Fake::openai(vec![
                providers::openai_tool_calls(&[(
                    "call_a",
                    "get_stock_price",
                    r#"{"ticker":"AAPL"}"#,
                )]),
                openai_answer,
            ]),
            [["tool_calls"], ["stop-***"]],
            "fake-***-v2",
        ),
        (
            ("anthropic", ""),
            Fake::anthropic(vec![
                providers::anthropic_tool_use(
                    None,
                    &[("toolu_1", "get_stock_price", json!({ "ticker": "AAPL" }))],
                ),
                providers::anthropic_answer("AAPL is 178.15."),
            ]),
            [["tool_use"], ["end_turn"]],
            "fake",
        ),
        // Streamed replies: the model and reasons come from the events.
        (
            ("openai", "    stream: true"),
            Fake::openai(vec![
                providers::openai_stream_tool_calls(&[(
                    "call_a",
                    "get_stock_price",
                    r#"{"ticker":"AAPL"}"#,
                )]),
                providers::openai_stream_answer("AAPL is 178.15."),
            ]),
            [["tool_calls"], ["stop"]],
            "fake",
        ),
        (
            ("anthropic", "    stream: true"),
            Fake::anthropic(vec![
                providers::anthropic_stream_tool_use(&[(
                    "toolu_1",
                    "get_stock_price",
                    json!({ "ticker": "AAPL" }),
                )]),
                providers::anthropic_stream_answer("AAPL is 178.15."),
            ]),
            [["tool_use"], ["end_turn"]],
            "fake",
        ),
    ];
    for (n, ((kind, stream), fake, reasons, last_model)) in fakes.iter().enumerate() {
        let spec = support::write(
            &dir,
            &format!("{kind}-{n}.yaml"),
            &providers::live_spec(kind, &fake.base_url(), stream, ""),
        );
        let fixture = dir.join(format!("{kind}-{n}.json"));
        let base = fake.base_url();
        let port: u16 = base
            .trim_start_matches("http://127.0.0.1:")
            .split('/')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a local port");
        let traces = trace_ids(0xabc0_0000 + n as u64 * 16, 3);
        let with_parent = |i: usize| {
            let mut cmd = under_trace(&tap, &traces[i], ("TEST_KEY", KEY));
            cmd.env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true");
            cmd
        };
        record(
            &mut with_parent(0),
            (&spec, "What is AAPL at?"),
            &[],
            &fixture,
        );
        let recorded = std::fs::read_to_string(&fixture).unwrap();
        assert!(!recorded.contains(KEY), "{recorded}");
        let doc: Value = serde_json::from_str(&recorded).unwrap();
        let calls = &doc["trace"]["model_calls"];
        assert_eq!(calls[0]["response_model"], "fake", "{kind}: {calls:#}");
        assert_eq!(calls[0]["finish_reasons"], json!(reasons[0]), "{calls:#}");
        assert_eq!(calls[1]["response_model"], *last_model, "{calls:#}");
        assert_eq!(calls[1]["finish_reasons"], json!(reasons[1]), "{calls:#}");
        assert_eq!(calls[0]["server_address"], "127.0.0.1", "{calls:#}");
        assert_eq!(calls[0]["server_port"], port, "{calls:#}");

        let out = support::run(with_parent(1).arg("replay").arg(&fixture));
        assert_eq!(out.code, 0, "{kind}: {out:?}");
        let out = export_otel(&mut with_parent(2), &tap, &fixture);
        assert_eq!(out.code, 0, "{kind}: {out:?}");
        // Live, replayed and exported: the same two chat spans.
        for trace in &traces {
            let spans = tap.wait(|s| in_trace(s, trace).len() >= 4);
            let spans = in_trace(&spans, trace);
            let mut chats = named(&spans, "chat test-model");
            chats.sort_by_key(|c| nanos(c, "startTimeUnixNano"));
            assert_eq!(chats.len(), 2, "{kind} {trace}:\n{spans:#?}");
            for (chat, (model, reason)) in chats
                .iter()
                .zip([("fake", reasons[0]), (*last_model, reasons[1])])
            {
                assert_eq!(attr(chat, "gen_ai.provider.name"), *kind);
                assert_eq!(attr(chat, "gen_ai.request.model"), "test-model");
                assert_eq!(attr(chat, "gen_ai.response.model"), model, "{chat:#}");
                assert_eq!(attr(chat, "gen_ai.response.finish_reasons"), json!(reason));
                // The model's base URL: where its requests went.
                assert_eq!(attr(chat, "server.address"), "127.0.0.1", "{chat:#}");
                assert_eq!(attr(chat, "server.port"), i64::from(port), "{chat:#}");
                system_prompt_where_the_api_takes_it(kind, chat);
            }
        }
    }
    // A system prompt holding the key: masked in the system instructions that go out.
    let fake = Fake::anthropic(vec![providers::anthropic_answer("AAPL is 178.15.")]);
    let keyed = providers::live_spec("anthropic", &fake.base_url(), "", "").replace(
        "never guess a price.",
        &format!("never guess a price. Ref {KEY}."),
    );
    let spec = support::write(&dir, "anthropic-keyed.yaml", &keyed);
    let trace = &trace_ids(0xabd0_0000, 1)[0];
    let out = support::run(
        under_trace(&tap, trace, ("TEST_KEY", KEY))
            .args(["run", "--otlp-content", "--query", "What is AAPL at?"])
            .arg(&spec),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let spans = tap.wait(|s| in_trace(s, trace).len() >= 2);
    let spans = in_trace(&spans, trace);
    let system = attr(one(&spans, "chat test-model"), "gen_ai.system_instructions");
    assert!(
        system.as_str().is_some_and(|s| s.contains("Ref ***.")),
        "{system}"
    );
    let raw = tap.raw();
    for d in toolrun::fuzzing::decodings(&raw) {
        assert!(!d.windows(KEY.len()).any(|w| w == KEY.as_bytes()), "{raw}");
    }
}

/// Anthropic takes the system prompt apart from the messages (`system`): it is
/// `gen_ai.system_instructions`; OpenAI takes it as a message: it stays in the input messages.
fn system_prompt_where_the_api_takes_it(kind: &str, chat: &Value) {
    let parse = |key: &str| -> Value {
        serde_json::from_str(attr(chat, key).as_str().expect(key)).expect("JSON")
    };
    let input = parse("gen_ai.input.messages");
    let roles: Vec<&Value> = input
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["role"])
        .collect();
    let prompt = "You answer stock questions. Use the tools; never guess a price.";
    if kind == "anthropic" {
        assert_eq!(
            parse("gen_ai.system_instructions"),
            json!([{ "type": "text", "content": prompt }]),
            "{chat:#}"
        );
        assert!(!roles.contains(&&json!("system")), "{input:#}");
    } else {
        assert_eq!(attr(chat, "gen_ai.system_instructions"), Value::Null);
        assert_eq!(input[0]["role"], "system", "{input:#}");
        assert_eq!(input[0]["parts"][0]["content"], prompt, "{input:#}");
    }
}

/// A span as both protocols must carry it: name, kind, its parent's name, attributes (without
/// the conversation id, which is the run's own span id), events and status.
fn comparable(spans: &[Value]) -> Vec<Value> {
    let name_of = |id: &Value| {
        spans
            .iter()
            .find(|s| s["spanId"] == *id)
            .map_or(Value::Null, |s| s["name"].clone())
    };
    let attrs = |s: &Value| -> serde_json::Map<String, Value> {
        s["attributes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|kv| kv["key"] != "gen_ai.conversation.id")
            .map(|kv| (kv["key"].as_str().unwrap().to_string(), plain(&kv["value"])))
            .collect()
    };
    let mut out: Vec<Value> = spans
        .iter()
        .map(|s| {
            let events: Vec<Value> = s["events"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| json!({ "name": e["name"], "attributes": attrs(e) }))
                .collect();
            assert!(
                nanos(s, "endTimeUnixNano") >= nanos(s, "startTimeUnixNano"),
                "{s:#}"
            );
            json!({
                "name": s["name"],
                "kind": s["kind"],
                "parent": name_of(&s["parentSpanId"]),
                "attributes": attrs(s),
                "events": events,
                "status": s["status"],
            })
        })
        .collect();
    out.sort_by_key(|v| v.to_string());
    out
}

#[test]
fn http_json_exports_decode_with_the_official_types_and_carry_the_same_spans_as_protobuf() {
    let protobuf = Tap::start();
    let official_json = Tap::start_json();
    let server = echo_server();
    let dir = support::temp_dir("otel-json-official");
    let spec = leaky_spec(&dir, &server);
    let mut got = Vec::new();
    for (tap, protocol) in [(&protobuf, "http/protobuf"), (&official_json, "http/json")] {
        let out = support::run(
            toolrun(tap)
                .env("TOKEN", SECRET)
                .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
                .env("OTEL_SERVICE_NAME", "stock-agent")
                .arg("test")
                .arg(&spec)
                .args(["--allow-network", "--otlp-content"]),
        );
        assert_eq!(out.code, 1, "one test fails\n{out:?}");
        assert!(!out.stderr.contains("warning"), "{protocol}: {out:?}");
        let spans = tap.wait(|s| {
            named(s, "toolrun test").len() == 1 && named(s, "invoke_agent leaky").len() == 2
        });
        assert_clean(protocol, &tap.raw());
        got.push(spans);
    }
    let raw = official_json.raw();
    let refused: Vec<&str> = raw
        .lines()
        .filter(|l| l.starts_with("{\"error\""))
        .collect();
    assert!(refused.is_empty(), "the JSON receiver refused: {refused:?}");
    let json_spans = &got[1];
    let resource = &json_spans[0]["resource"]["attributes"];
    assert!(
        resource.as_array().is_some_and(|a| a
            .iter()
            .any(|kv| kv["key"] == "service.name" && kv["value"]["stringValue"] == "stock-agent")),
        "{resource:#}"
    );
    // The same tree, id for id in shape: 2 tests, their attempts, runs, chats, tools, requests.
    assert!(json_spans.len() >= 12, "{json_spans:#?}");
    assert_eq!(comparable(&got[0]), comparable(json_spans));
    let run = &named(json_spans, "invoke_agent leaky")[0];
    assert_eq!(run["traceId"].as_str().map(str::len), Some(32));
    assert_child(
        one(json_spans, "test answers done"),
        one(json_spans, "toolrun test"),
    );
}

#[test]
fn mcp_client_spans_are_the_same_live_in_test_attempts_calls_replayed_and_exported() {
    let tap = Tap::start();
    let dir = support::temp_dir("otel-mcp-paths");
    let (mut server, port) = notes_server(&dir);
    let tests = r#"tests:
  - name: replayed
    query: what do I need to buy?
    fixture: notes.json
    expect: { output_contains: found }
  - name: live
    query: what do I need to buy?
    expect: { output_contains: found }
"#;
    let notes = notes_spec(
        port,
        "      - name: search_notes\n        as: find_notes",
        "find_notes",
    );
    let spec = support::write(&dir, "notes.yaml", &(notes + tests));
    let fixture = dir.join("notes.json");
    let traces = trace_ids(0xdec0_0000, 5);
    let under = |i: usize| under_trace(&tap, &traces[i], ("NOTES_KEY", SECRET));
    record(
        &mut under(0),
        (&spec, "what do I need to buy?"),
        &[],
        &fixture,
    );
    // Both tests: the fixture's replayed, the other live against the server.
    let out = support::run(under(1).arg("test").arg(&spec).arg("--allow-network"));
    assert_eq!(out.code, 0, "{out:?}");
    // One call, no model: its execute_tool span is a root with the MCP span under it.
    let out = support::run(under(4).arg("call").arg(&spec).args([
        "find_notes",
        "--args",
        r#"{"query": "milk"}"#,
    ]));
    assert_eq!(out.code, 0, "{out:?}");
    let _ = server.kill();
    let _ = server.wait();
    // The server is gone: replay and export work from the recording alone.
    let out = support::run(under(2).arg("replay").arg(&fixture));
    assert_eq!(out.code, 0, "{out:?}");
    let out = export_otel(&mut under(3), &tap, &fixture);
    assert_eq!(out.code, 0, "{out:?}");

    let recorded = read_json(&fixture);
    let tool_started = unix_nanos(
        recorded["trace"]["tool_results"][0]["started_at"]
            .as_str()
            .unwrap(),
    );
    let session = recorded["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| e["request"]["headers"]["mcp-session-id"].as_str())
        .expect("the recorded session")
        .to_string();
    let all = tap.wait(|s| {
        in_every_trace(s, &traces, "tools/call search_notes")
            && named(&in_trace(s, &traces[1]), "tools/call search_notes").len() == 2
            && named(s, "toolrun test").len() == 1
    });
    let mut seen_sessions = Vec::new();
    for (i, trace) in traces.iter().enumerate() {
        let spans = in_trace(&all, trace);
        let calls = named(&spans, "tools/call search_notes");
        let tools = named(&spans, "execute_tool find_notes");
        assert_eq!(calls.len(), tools.len(), "{trace}:\n{spans:#?}");
        for call in calls {
            let tool = tools
                .iter()
                .find(|t| t["spanId"] == call["parentSpanId"])
                .unwrap_or_else(|| panic!("no tool span over {call:#}"));
            assert_eq!(call["kind"], 3, "CLIENT");
            assert_eq!(attr(call, "mcp.method.name"), "tools/call");
            assert_eq!(attr(call, "gen_ai.tool.name"), "search_notes");
            assert_eq!(attr(call, "network.transport"), "tcp");
            assert_eq!(attr(call, "server.address"), "127.0.0.1");
            assert_eq!(attr(call, "server.port"), i64::from(port));
            assert_eq!(attr(call, "mcp.protocol.version"), "2025-11-25", "{call:#}");
            assert!(
                attr(call, "jsonrpc.request.id")
                    .as_str()
                    .is_some_and(|id| id.parse::<u64>().is_ok()),
                "{call:#}"
            );
            assert_eq!(
                nanos(call, "startTimeUnixNano"),
                nanos(tool, "startTimeUnixNano")
            );
            assert_eq!(
                nanos(call, "endTimeUnixNano"),
                nanos(tool, "endTimeUnixNano")
            );
            let id = attr(call, "mcp.session.id");
            assert!(id.as_str().is_some_and(|s| s.len() >= 8), "{call:#}");
            seen_sessions.push((i, id, nanos(call, "startTimeUnixNano")));
        }
    }
    // Live, replayed, exported and the fixture-backed test: the recorded session, and the
    // recorded start where exported (a replay runs now); the live test had a session of its own.
    let recorded_session = json!(session);
    for (i, id, start) in &seen_sessions {
        match i {
            0 | 2 => assert_eq!(*id, recorded_session),
            3 => {
                assert_eq!(*id, recorded_session);
                assert_eq!(*start, tool_started, "the recorded start");
            }
            _ => {}
        }
    }
    let in_test: Vec<&Value> = seen_sessions
        .iter()
        .filter(|(i, _, _)| *i == 1)
        .map(|(_, id, _)| id)
        .collect();
    assert!(
        in_test.contains(&&recorded_session),
        "the replayed attempt: {in_test:?}"
    );
    assert!(
        in_test.iter().any(|id| **id != recorded_session),
        "the live attempt: {in_test:?}"
    );
    assert_clean("the exported spans", &tap.raw());
}

#[test]
fn each_test_attempt_is_sent_as_it_finishes_not_when_the_command_ends() {
    let tap = Tap::start();
    // The second test's tool asks this server, which answers `early` once the receiver holds
    // the first test's attempt (and `late` if it never comes: the spans waited for the end).
    let received = tap.spans.clone();
    let gate = TestServer::start(move |_| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let spans = received.lock().unwrap().clone();
            if !named(&spans, "test_attempt first").is_empty() {
                return Response::text(200, "early");
            }
            if Instant::now() > deadline {
                return Response::text(200, "late");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let dir = support::temp_dir("otel-attempts");
    let spec = support::write(
        &dir,
        "staged.yaml",
        &format!(
            r#"version: 1
name: staged
tools:
  gate:
    description: Says whether the first attempt was already exported.
    kind: http
    input: {{ type: object, properties: {{}}, additionalProperties: false }}
    request: {{ url: "http://{host}/gate" }}
policy:
  network: {{ allow_hosts: ["{host}"] }}
models:
  m:
    kind: scripted
    scripts:
      - when: first
        turns:
          - answer: "first done"
      - turns:
          - tool_calls: [{{ name: gate, arguments: {{}} }}]
          - answer: "{{{{ last.result }}}}"
tests:
  - name: first
    query: first
    expect: {{ output_contains: first done }}
  - name: second
    query: second
    expect: {{ output_contains: early }}
"#,
            host = gate.addr()
        ),
    );
    let out =
        support::run(
            toolrun(&tap)
                .arg("test")
                .arg(&spec)
                .args(["--allow-network", "--jobs", "1"]),
        );
    assert_eq!(
        out.code, 0,
        "the second test saw the first attempt exported\n{out:?}"
    );
    let spans = tap.wait(|s| named(s, "toolrun test").len() == 1);
    let root = one(&spans, "toolrun test");
    for name in ["first", "second"] {
        let test = one(&spans, &format!("test {name}"));
        assert_child(test, root);
        let attempt = one(&spans, &format!("test_attempt {name}"));
        assert_child(attempt, test);
        assert!(nanos(test, "startTimeUnixNano") <= nanos(attempt, "startTimeUnixNano"));
        assert!(nanos(test, "endTimeUnixNano") >= nanos(attempt, "endTimeUnixNano"));
    }
}

#[test]
fn a_stdio_mcp_call_is_a_pipe_client_span_live_and_exported() {
    let tap = Tap::start();
    let dir = support::temp_dir("otel-mcp-stdio");
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let spec = support::write(
        &dir,
        "probe.yaml",
        &support::specs::stdio_probe_spec(
            (&python::python(), &python::script("stdio_server.py"), &logs),
            "echo",
            &format!(
                r#"          - tool_calls: [{{ name: echo, arguments: {{ text: "{SECRET}" }} }}]
          - answer: echoed"#
            ),
        ),
    );
    let fixture = dir.join("probe.json");
    let traces = trace_ids(0xe000, 2);
    let under = |i: usize| under_trace(&tap, &traces[i], ("PROBE_TOKEN", SECRET));
    let python = python::python();
    record(
        &mut under(0),
        (&spec, "echo"),
        &[
            "--otlp-content".as_ref(),
            "--allow-exec".as_ref(),
            python.as_ref(),
        ],
        &fixture,
    );
    let out = export_otel(&mut under(1), &tap, &fixture);
    assert_eq!(out.code, 0, "{out:?}");
    let all = tap.wait(|s| in_every_trace(s, &traces, "tools/call echo"));
    let mut ids = Vec::new();
    for trace in &traces {
        let spans = in_trace(&all, trace);
        let call = one(&spans, "tools/call echo");
        assert_child(call, one(&spans, "execute_tool echo"));
        assert_eq!(call["kind"], 3, "CLIENT");
        assert_eq!(attr(call, "network.transport"), "pipe");
        assert!(attr(call, "mcp.protocol.version").is_string(), "{call:#}");
        assert_eq!(
            attr(call, "mcp.session.id"),
            Value::Null,
            "stdio has no session id"
        );
        assert_eq!(attr(call, "server.address"), Value::Null);
        ids.push(attr(call, "jsonrpc.request.id"));
    }
    assert!(ids[0].is_string() && ids[0] == ids[1], "{ids:?}");
    assert_clean("the exported spans", &tap.raw());
}

#[test]
fn a_remote_mcp_calls_error_type_says_whether_the_tool_failed_or_no_answer_came() {
    let tap = Tap::start();
    let dir = support::temp_dir("otel-mcp-errors");
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let python = python::python();
    let text = support::specs::stdio_probe_spec(
        (&python, &python::script("stdio_server.py"), &logs),
        "wait, fail",
        "          - tool_calls: [{ name: wait, arguments: {} }]\n          - tool_calls: [{ name: fail, arguments: {} }]\n          - answer: done",
    )
    // Far shorter than the minute `wait` takes; the Python server's start (`initialize` took
    // over 5s on a loaded machine) has a bound of its own that only catches a hang.
    .replace("timeout: 30s", "timeout: 20s\n    startup_timeout: 60s");
    let spec = support::write(&dir, "probe.yaml", &text);
    let fixture = dir.join("probe.json");
    let traces = trace_ids(0xe220, 2);
    let under = |i: usize| under_trace(&tap, &traces[i], ("PROBE_TOKEN", SECRET));
    record(
        &mut under(0),
        (&spec, "go"),
        &["--allow-exec".as_ref(), python.as_ref()],
        &fixture,
    );
    let out = export_otel(&mut under(1), &tap, &fixture);
    assert_eq!(out.code, 0, "{out:?}");
    let all = tap.wait(|s| {
        in_every_trace(s, &traces, "tools/call wait")
            && in_every_trace(s, &traces, "tools/call fail")
    });
    // Live and exported alike: the tool's own failure (a result with isError) is `tool_error`,
    // as the MCP conventions say; a call no answer came to keeps toolrun's kind.
    for trace in &traces {
        let spans = in_trace(&all, trace);
        for (tool, client, kind) in [
            ("wait", "timeout", "timeout"),
            ("fail", "tool_error", "execution_error"),
        ] {
            let call = one(&spans, &format!("tools/call {tool}"));
            let executed = one(&spans, &format!("execute_tool {tool}"));
            assert_child(call, executed);
            assert_eq!(attr(executed, "error.type"), kind, "{executed:#}");
            assert_eq!(attr(call, "error.type"), client, "{trace}: {call:#}");
            assert_eq!(attr(call, "rpc.response.status_code"), Value::Null);
            assert_eq!(call["status"]["code"], 2, "ERROR");
        }
    }
}

/// What an MCP client writes to `toolrun serve` over stdio: `initialize`, `initialized`, then
/// `requests`, a line each.
fn stdio_session(requests: impl IntoIterator<Item = Value>) -> String {
    let initialize = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    [initialize, initialized]
        .into_iter()
        .chain(requests)
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn a_collector_that_hangs_holds_a_bounded_queue_and_the_server_answers_everything() {
    // Takes every connection and never answers: the export thread waits on its first batch.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hung.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let held: Vec<_> = hung.incoming().map_while(Result::ok).collect();
        drop(held);
    });
    // Far more requests than the queue holds (2048) come in while the first batch hangs.
    let requests = 6000;
    let stdin = stdio_session(
        (1..=requests).map(|id| json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list" })),
    );
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/mcp_served.yaml");
    // The first export request hangs for as long as the test runs: with the default limit (10s)
    // a loaded machine can still be taking the requests in when it gives up, and that failure,
    // not the full queue, is then the one warning.
    let out = support::run_with_stdin(
        support::toolrun()
            .env("OTEL_EXPORTER_OTLP_TIMEOUT", "600000")
            .env("OTEL_BSP_EXPORT_TIMEOUT", "100")
            .arg("serve")
            .arg(&spec)
            .args(["--otlp", &format!("http://127.0.0.1:{port}")]),
        &stdin,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout.lines().count(),
        requests + 1,
        "every request answered"
    );
    let warnings: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(warnings.len(), 1, "{}", out.stderr);
    assert!(
        warnings[0].contains("is not keeping up") && warnings[0].contains("2048"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_caller_trace_that_is_not_sampled_gets_no_spans_and_a_served_request_decides_by_its_own() {
    let collector = TestServer::start(|_| Response::json(200, json!({})));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let unsampled = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-00");
    let toolrun = || {
        let mut cmd = support::toolrun();
        cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
            .env(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://{}", collector.addr()),
            )
            .env("OTEL_BSP_EXPORT_TIMEOUT", "10000")
            .env("TRACEPARENT", &unsampled);
        cmd
    };
    // The default parent-based sampler: the caller did not sample its trace, so neither does
    // the command.
    let out = support::run(
        toolrun()
            .arg("call")
            .arg(root.join("specs/stock_assistant.yaml"))
            .args(["get_stock_price", "--args", r#"{"ticker": "AAPL"}"#]),
    );
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:?}");
    let out = support::run(
        toolrun()
            .args(["export", "otel"])
            .arg(root.join("fixtures/local_stack_inventory.json")),
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("not sampled"), "{out:?}");
    assert_eq!(collector.requests().len(), 0, "nothing sent");

    // A served request with a sampled traceparent of its own is recorded; one without, or
    // with an unsampled one, is not.
    let sampled_trace = "0000000000000000000000000000a5a5";
    let call = |id: u64, meta: Value| json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": { "name": "lookup_order", "arguments": { "order_id": 42 }, "_meta": meta } });
    let stdin = stdio_session([
        call(
            1,
            json!({ "traceparent": format!("00-{sampled_trace}-{CALLER_SPAN}-01") }),
        ),
        call(
            2,
            json!({ "traceparent": format!("00-{sampled_trace}-{CALLER_SPAN}-00") }),
        ),
        call(3, json!({})),
    ]);
    let out = support::run_with_stdin(
        toolrun()
            .arg("serve")
            .arg(root.join("specs/mcp_served.yaml")),
        &stdin,
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout.lines().count(), 4, "{out:?}");
    let got = collector.requests();
    assert_eq!(got.len(), 1, "{out:?}");
    let spans = spans_of(&serde_json::from_slice(&got[0].body).unwrap());
    assert_eq!(spans.len(), 1, "{spans:#?}");
    assert_eq!(spans[0]["name"], "tools/call lookup_order");
    assert_eq!(spans[0]["traceId"], sampled_trace);
    assert_eq!(attr(&spans[0], "jsonrpc.request.id"), "1");
}

/// What the official receiver said about each request it took: `content_type`,
/// `content_encoding` and the trace ids of its spans.
fn requests_seen(tap: &Tap) -> Vec<Value> {
    tap.raw()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v.get("request").cloned())
        .collect()
}

#[test]
fn gzip_exports_carry_the_same_spans_to_receivers_that_decode_them() {
    let oteltap = Tap::start();
    let official = Tap::start_json();
    let server = echo_server();
    let dir = support::temp_dir("otel-gzip");
    let spec = leaky_spec(&dir, &server);
    // Receiver, protocol, OTEL_EXPORTER_OTLP_COMPRESSION, its TRACES_ twin, and whether the
    // request must arrive compressed (the twin, when set, wins). oteltap (1.0.0) answers a gzip
    // body with 400, so it gets the uncompressed reference, and the receiver built on the
    // official message types decodes the compressed ones, in both protocols.
    let runs = [
        (&oteltap, "http/protobuf", Some("gzip"), Some("none"), false),
        (&official, "http/json", None, None, false),
        (&official, "http/json", Some("none"), Some("gzip"), true),
        (&official, "http/protobuf", Some("GZIP"), None, true),
    ];
    let traces = trace_ids(0x6a1b_0000, runs.len() as u64);
    let mut got = Vec::new();
    for ((tap, protocol, general, signal, _), trace) in runs.iter().zip(&traces) {
        let mut cmd = under_trace(tap, trace, ("TOKEN", SECRET));
        cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol);
        for (k, v) in [
            ("OTEL_EXPORTER_OTLP_COMPRESSION", general),
            ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", signal),
        ] {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        let out = support::run(cmd.arg("run").arg(&spec).args([
            "--query",
            "echo please",
            "--otlp-content",
        ]));
        assert_eq!(
            (out.code, out.stderr.as_str()),
            (0, ""),
            "{protocol} {general:?} {signal:?}: {out:?}"
        );
        let spans = tap.wait(|s| in_trace(s, trace).len() >= 5);
        got.push(comparable(&in_trace(&spans, trace)));
    }
    for (run, spans) in got.iter().enumerate() {
        assert_eq!(spans.len(), 5, "{spans:#?}");
        assert_eq!(
            spans, &got[0],
            "run {run} differs from the uncompressed protobuf one"
        );
    }
    assert_clean("oteltap", &oteltap.raw());
    assert_clean("the official receiver", &official.raw());
    // The official receiver saw how each of its requests came.
    let seen = requests_seen(&official);
    assert!(!official.raw().contains("\"error\""), "{}", official.raw());
    for ((tap, protocol, _, _, compressed), trace) in runs.iter().zip(&traces) {
        if !std::ptr::eq(*tap, &official) {
            continue;
        }
        let request = seen
            .iter()
            .find(|r| {
                r["traces"]
                    .as_array()
                    .is_some_and(|t| t.contains(&json!(trace)))
            })
            .unwrap_or_else(|| panic!("no request for {trace}: {seen:#?}"));
        let content_type = match *protocol {
            "http/json" => "application/json",
            _ => "application/x-protobuf",
        };
        assert_eq!(request["content_type"], content_type, "{request:#}");
        let encoding = if *compressed {
            json!("gzip")
        } else {
            Value::Null
        };
        assert_eq!(request["content_encoding"], encoding, "{request:#}");
    }
}

#[test]
fn gzip_is_sent_with_its_content_encoding_and_a_compression_toolrun_lacks_is_one_warning() {
    let sent = sent_by_a_call(&[("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")]);
    assert_eq!(sent.stderr, "");
    assert_eq!(sent.request.header("content-encoding"), Some("gzip"));
    assert_eq!(sent.request.body[..2], [0x1f, 0x8b], "a gzip member");
    assert_eq!(
        sent.request.header("content-type"),
        Some("application/json")
    );
    one(&sent.spans, "execute_tool get_stock_price");
    // Not one toolrun has: one warning naming the variable and what it takes, sent plain.
    let sent = sent_by_a_call(&[("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd")]);
    assert_eq!(sent.stderr.lines().count(), 1, "{}", sent.stderr);
    assert!(
        sent.stderr
            .contains("OTEL_EXPORTER_OTLP_COMPRESSION is `zstd`")
            && sent.stderr.contains("gzip or none"),
        "{}",
        sent.stderr
    );
    assert_eq!(sent.request.header("content-encoding"), None);
    one(&sent.spans, "execute_tool get_stock_price");
    // An unreadable signal-specific value is passed over, as if unset: the general one holds.
    let sent = sent_by_a_call(&[
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
        ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "deflate"),
    ]);
    assert_eq!(sent.stderr.lines().count(), 1, "{}", sent.stderr);
    assert!(
        sent.stderr
            .contains("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION is `deflate`"),
        "{}",
        sent.stderr
    );
    assert_eq!(sent.request.header("content-encoding"), Some("gzip"));
}

/// `toolrun call` exporting to a collector that takes every connection and never answers.
fn call_with_a_hung_collector(env: &[(&str, &str)]) -> support::Output {
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hung.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let held: Vec<_> = hung.incoming().map_while(Result::ok).collect();
        drop(held);
    });
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = support::run(
        support::toolrun()
            .envs(env.iter().copied())
            .arg("call")
            .arg(root.join("specs/stock_assistant.yaml"))
            .args(["get_stock_price", "--args", r#"{"ticker": "AAPL"}"#])
            .args(["--otlp", &format!("http://127.0.0.1:{port}")]),
    );
    assert_eq!((out.code, out.stdout.trim()), (0, "178.15"), "{out:?}");
    out
}

#[test]
fn the_otlp_timeout_bounds_each_request_and_the_bsp_timeout_the_wait_at_exit() {
    // The request's own limit ends it long before the exit wait would (10 s): the signal's
    // variable wins over the general one (which would leave only the exit wait).
    let out = call_with_a_hung_collector(&[
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "600000"),
        ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "300"),
        ("OTEL_BSP_EXPORT_TIMEOUT", "10000"),
    ]);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].contains("cannot export traces")
            && lines[0].contains("no answer within 300 ms (OTEL_EXPORTER_OTLP_TIMEOUT"),
        "{}",
        out.stderr
    );
    // 0 is no limit on the request, as the specification reads a zero timeout: only the wait at
    // exit ends it.
    let out = call_with_a_hung_collector(&[
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "0"),
        ("OTEL_BSP_EXPORT_TIMEOUT", "300"),
    ]);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("within 300ms (OTEL_BSP_EXPORT_TIMEOUT)"),
        "{}",
        out.stderr
    );
    // Unreadable: one warning naming it and what it takes; the default (10 s) stays, so again
    // the wait at exit ends first.
    for bad in ["5s", "-1", "1.5"] {
        let out = call_with_a_hung_collector(&[
            ("OTEL_EXPORTER_OTLP_TIMEOUT", bad),
            ("OTEL_BSP_EXPORT_TIMEOUT", "300"),
        ]);
        let lines: Vec<&str> = out.stderr.lines().collect();
        assert_eq!(lines.len(), 2, "{}", out.stderr);
        assert!(
            lines[0].contains(&format!("OTEL_EXPORTER_OTLP_TIMEOUT is `{bad}`"))
                && lines[0].contains("whole number of milliseconds"),
            "{}",
            out.stderr
        );
        assert!(
            lines[1].contains("(OTEL_BSP_EXPORT_TIMEOUT)"),
            "{}",
            out.stderr
        );
    }
}

/// `toolrun call` exporting to `url` (under its own trace `trace`) with `env`: its stderr.
fn call_exporting_to(url: &str, trace: &str, env: &[(&str, &Path)]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = support::run(
        support::toolrun()
            .env("OTEL_BSP_EXPORT_TIMEOUT", "10000")
            .env("TRACEPARENT", format!("00-{trace}-{CALLER_SPAN}-01"))
            .envs(env.iter().copied())
            .arg("call")
            .arg(root.join("specs/stock_assistant.yaml"))
            .args(["get_stock_price", "--args", r#"{"ticker": "AAPL"}"#])
            .args(["--otlp", url]),
    );
    assert_eq!((out.code, out.stdout.trim()), (0, "178.15"), "{out:?}");
    out.stderr
}

#[test]
fn an_https_collector_is_trusted_through_the_otlp_certificate_and_gets_a_client_certificate() {
    let dir = support::temp_dir("otel-tls");
    let tap = Tap::start_tls(&dir, false);
    let url = format!("https://127.0.0.1:{}", tap.port);
    let (ca, client) = (dir.join("ca.pem"), dir.join("client.pem"));
    let missing = dir.join("missing.pem");
    let traces = trace_ids(0x7153_0000, 6);
    // Without the collector's CA toolrun does not trust it: one warning, nothing sent.
    let stderr = call_exporting_to(&url, &traces[0], &[]);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot export traces"), "{stderr}");
    // With it, the spans arrive; the signal's own variable wins over the general one, and one
    // that cannot be read is one warning and leaves the general one in force.
    for (trace, env, warning) in [
        (
            &traces[1],
            vec![("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca)],
            None,
        ),
        (
            &traces[2],
            vec![
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", &client),
                ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", &ca),
            ],
            None,
        ),
        (
            &traces[3],
            vec![
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca),
                ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", &missing),
            ],
            Some("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE: cannot read"),
        ),
    ] {
        let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
        let stderr = call_exporting_to(&url, trace, &env);
        match warning {
            None => assert_eq!(stderr, "", "{trace}"),
            Some(w) => {
                assert_eq!(stderr.lines().count(), 1, "{stderr}");
                assert!(stderr.contains(w), "{stderr}");
            }
        }
        let spans = tap.wait(|s| !in_trace(s, trace).is_empty());
        one(&in_trace(&spans, trace), "execute_tool get_stock_price");
    }

    // A collector that asks for a client certificate gets the one named (mTLS).
    let mtls_dir = support::temp_dir("otel-mtls");
    let mtls = Tap::start_tls(&mtls_dir, true);
    let url = format!("https://127.0.0.1:{}", mtls.port);
    let (ca, client, key) = (
        mtls_dir.join("ca.pem"),
        mtls_dir.join("client.pem"),
        mtls_dir.join("client-key.pem"),
    );
    let stderr = call_exporting_to(
        &url,
        &traces[4],
        &[
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", &key),
            ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", &client),
        ],
    );
    assert_eq!(stderr, "");
    let spans = mtls.wait(|s| !in_trace(s, &traces[4]).is_empty());
    one(
        &in_trace(&spans, &traces[4]),
        "execute_tool get_stock_price",
    );
    let seen = requests_seen(&mtls);
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0]["client"], "toolrun-test-client", "{seen:#?}");
    // Without one the collector refuses the connection; a key without its certificate is one
    // warning (and no client certificate), not a second failure of its own.
    let stderr = call_exporting_to(
        &url,
        &traces[5],
        &[
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", &key),
        ],
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].contains(
            "OTEL_EXPORTER_OTLP_CLIENT_KEY is set without OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"
        ),
        "{stderr}"
    );
    assert!(lines[1].contains("cannot export traces"), "{stderr}");
    assert_eq!(requests_seen(&mtls).len(), 1, "nothing more arrived");
    assert!(in_trace(&mtls.spans.lock().unwrap(), &traces[5]).is_empty());
}

#[test]
fn certificate_settings_that_cannot_be_used_are_one_warning_each_and_the_export_goes_on() {
    let dir = support::temp_dir("otel-bad-certs");
    let not_pem = support::write(&dir, "not.pem", "just text\n");
    let not_pem = not_pem.to_str().unwrap();
    for (env, says) in [
        (
            vec![(
                "OTEL_EXPORTER_OTLP_CERTIFICATE",
                "/nonexistent/toolrun/ca.pem",
            )],
            "OTEL_EXPORTER_OTLP_CERTIFICATE: cannot read `/nonexistent/toolrun/ca.pem`",
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", not_pem)],
            "holds no PEM certificate",
        ),
        (
            vec![
                ("OTEL_EXPORTER_OTLP_CLIENT_KEY", not_pem),
                ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", not_pem),
            ],
            "are not a PEM private key",
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", not_pem)],
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE is set without OTEL_EXPORTER_OTLP_CLIENT_KEY",
        ),
    ] {
        let sent = sent_by_a_call(&env);
        assert_eq!(sent.stderr.lines().count(), 1, "{env:?}: {}", sent.stderr);
        assert!(sent.stderr.contains(says), "{env:?}: {}", sent.stderr);
        assert!(!sent.stderr.contains("just text"), "{}", sent.stderr);
        one(&sent.spans, "execute_tool get_stock_price");
    }
}

/// A collector that answers with `script`, one answer a request, then 200 for good.
fn scripted_collector(script: Vec<Response>) -> TestServer {
    let next = Mutex::new(script.into_iter());
    TestServer::start(move |_| {
        let answer = next.lock().unwrap().next();
        answer.unwrap_or_else(|| Response::json(200, json!({})))
    })
}

/// `toolrun call` exporting (`http/json`) to `collector` with `env`; whatever the collector
/// answers, the call's own output and exit code stay the same.
fn call_into(collector: &TestServer, env: &[(&str, &str)]) -> support::Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = support::run(
        support::toolrun()
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
            .env("OTEL_BSP_EXPORT_TIMEOUT", "10000")
            .envs(env.iter().copied())
            .arg("call")
            .arg(root.join("specs/stock_assistant.yaml"))
            .args(["get_stock_price", "--args", r#"{"ticker": "AAPL"}"#])
            .args(["--otlp", &format!("http://{}", collector.addr())]),
    );
    assert_eq!((out.code, out.stdout.trim()), (0, "178.15"), "{out:?}");
    out
}

/// Every request carried the same batch (the call's one span).
fn same_batch_each_time(collector: &TestServer) -> usize {
    let requests = collector.requests();
    let first = &requests[0].body;
    for r in &requests {
        assert_eq!(&r.body, first, "a retry sends the same request");
    }
    let body: Value = serde_json::from_slice(first).expect("OTLP/JSON");
    assert_eq!(spans_of(&body).len(), 1);
    requests.len()
}

#[test]
fn answers_the_otlp_specification_calls_retryable_are_tried_again_until_taken() {
    let gone = Response::close_without_response;
    let with_after = |status, after: &str| Response::status(status).header("Retry-After", after);
    for (script, why) in [
        (vec![Response::status(503)], "503, backoff"),
        (vec![with_after(429, "1")], "429, Retry-After in seconds"),
        // An HTTP date that has passed: try again at once.
        (
            vec![with_after(503, "Sun, 06 Nov 1994 08:49:37 GMT")],
            "503, Retry-After as a date",
        ),
        (
            vec![Response::status(502), Response::status(504), gone()],
            "502, 504, a dropped connection",
        ),
    ] {
        let tries = script.len() + 1;
        let collector = scripted_collector(script);
        let out = call_into(&collector, &[]);
        assert_eq!(out.stderr, "", "{why}: taken in the end, nothing to say");
        assert_eq!(same_batch_each_time(&collector), tries, "{why}");
    }
}

#[test]
fn answers_the_otlp_specification_says_not_to_retry_are_one_try_and_one_warning() {
    // 400 (bad data), another 4xx and a 5xx the table does not list: the Status message says why.
    for status in [400, 413, 500] {
        let collector = scripted_collector(vec![Response::json(
            status,
            json!({ "code": 3, "message": "span\u{1b}[31m too old" }),
        )]);
        let out = call_into(&collector, &[]);
        assert_eq!(collector.requests().len(), 1, "{status}: {out:?}");
        assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
        assert!(
            out.stderr.contains(&format!(
                "the collector answered HTTP {status} (span\\u{{1b}}[31m too old); the run is not affected"
            )),
            "{out:?}"
        );
    }
}

#[test]
fn a_collector_that_keeps_answering_503_is_given_up_within_the_bounds() {
    let always = || TestServer::start(|_| Response::status(503));
    // Time enough at exit: every try the policy allows (5), then one warning.
    let collector = always();
    let out = call_into(&collector, &[]);
    assert_eq!(same_batch_each_time(&collector), 5, "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
    assert!(
        out.stderr
            .contains("the collector answered HTTP 503; tried 5 times; the run is not affected"),
        "{out:?}"
    );
    // The default wait at exit (1 s) is shorter than five tries' backoff: toolrun stops trying
    // when the next try would come after it, and says so.
    let collector = always();
    let out = call_into(&collector, &[("OTEL_BSP_EXPORT_TIMEOUT", "1000")]);
    let tries = same_batch_each_time(&collector);
    assert!((1..5).contains(&tries), "{tries}: {out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
    // (On a machine slow enough that a try itself outlasts the wait, the wait's own warning.)
    assert!(
        out.stderr.contains(&format!("tried {tries} times, and the next try would come after the wait at exit (1s, OTEL_BSP_EXPORT_TIMEOUT) ends"))
            || out.stderr.contains("within 1s (OTEL_BSP_EXPORT_TIMEOUT)"),
        "{out:?}"
    );
    // A Retry-After longer than toolrun waits: given up at once rather than retried early.
    let collector = TestServer::start(|_| Response::status(503).header("Retry-After", "3600"));
    let out = call_into(&collector, &[]);
    assert_eq!(collector.requests().len(), 1, "{out:?}");
    assert!(
        out.stderr.contains(
            "HTTP 503, asking to be tried again in 3600 s, longer than toolrun waits (30 s)"
        ),
        "{out:?}"
    );
    // `export otel`, whose job the sending is, fails (1) as for any batch not taken.
    let collector = always();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/local_stack_inventory.json");
    let out = support::run(
        support::toolrun()
            .env("OTEL_BSP_EXPORT_TIMEOUT", "10000")
            .args(["export", "otel"])
            .arg(&fixture)
            .args(["--otlp", &format!("http://{}", collector.addr())]),
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.stderr.matches("toolrun: warning").count(), 1, "{out:?}");
    assert_eq!(collector.requests().len(), 5, "{out:?}");
}

/// An `ExportTraceServiceResponse` with `partial_success` { rejected_spans, error_message }.
fn partial_success_proto(rejected: u8, message: &str) -> Vec<u8> {
    let mut partial = vec![0x08, rejected, 0x12, message.len() as u8];
    partial.extend_from_slice(message.as_bytes());
    let mut body = vec![0x0a, partial.len() as u8];
    body.extend(partial);
    body
}

#[test]
fn a_partial_success_is_not_retried_and_is_one_warning() {
    let collector = scripted_collector(vec![Response::json(
        200,
        json!({ "partialSuccess": { "rejectedSpans": "1", "errorMessage": "span too old" } }),
    )]);
    let out = call_into(&collector, &[]);
    assert_eq!(collector.requests().len(), 1, "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
    assert!(
        out.stderr
            .contains("rejected 1 of 1 spans: span too old; the run is not affected"),
        "{out:?}"
    );
    // In protobuf, and with nothing rejected: the collector's warning, passed on.
    let collector = scripted_collector(vec![Response::status(200)
        .header("Content-Type", "application/x-protobuf")
        .body(partial_success_proto(0, "use gzip"))]);
    let out = call_into(
        &collector,
        &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")],
    );
    assert_eq!(collector.requests().len(), 1, "{out:?}");
    assert_eq!(out.stderr.lines().count(), 1, "{out:?}");
    assert!(
        out.stderr.contains("took every span and says: use gzip"),
        "{out:?}"
    );
    // A collector that sends an empty `partial_success` has nothing to say.
    let collector = scripted_collector(vec![Response::json(200, json!({ "partialSuccess": {} }))]);
    let out = call_into(&collector, &[]);
    assert_eq!(out.stderr, "", "{out:?}");
}

/// `serve`'s spans name the revision each request spoke: 2026-07-28 for the Python SDK's modern
/// path (no session: no `mcp.session.id`; a confirmation's asking round is a span of its own),
/// 2025-11-25 for its legacy path on the same server.
#[test]
fn serve_spans_carry_the_mcp_revision_of_each_request() {
    let tap = Tap::start();
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/mcp_served.yaml");
    let mut serve = toolrun(&tap);
    serve
        .arg("serve")
        .arg(&spec)
        .args(["--http", "127.0.0.1:0"]);
    let (mut child, url, mut stderr) = support::spawn_served(&mut serve);
    for (mode, order) in [("auto", 42), ("legacy", 7)] {
        let mut client = Command::new(python::python());
        client
            .arg(python::script("client.py"))
            .args(["--elicit", "http", &url])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("CLIENT_MODE", mode);
        let plan = json!([
            { "name": "lookup_order", "arguments": { "order_id": order } },
            { "name": "refund_order", "arguments": { "order_id": order }, "confirm": "accept" },
        ]);
        let out = support::run_with_stdin(&mut client, &plan.to_string());
        assert_eq!(out.code, 0, "the MCP client failed\n{out:?}");
    }
    let (code, rest) = support::terminate(&mut child, &mut stderr);
    assert_eq!(code, 0, "{rest}");
    let spans = tap.wait(|s| {
        named(s, "tools/call lookup_order").len() >= 2
            && named(s, "tools/call refund_order").len() >= 3
    });
    let version = |s: &&Value| attr(s, "mcp.protocol.version");
    let lookups = named(&spans, "tools/call lookup_order");
    let modern: Vec<&&Value> = lookups
        .iter()
        .filter(|s| version(s) == "2026-07-28")
        .collect();
    let legacy: Vec<&&Value> = lookups
        .iter()
        .filter(|s| version(s) == "2025-11-25")
        .collect();
    assert_eq!((modern.len(), legacy.len()), (1, 1), "{lookups:#?}");
    assert!(
        attr(modern[0], "mcp.session.id").is_null(),
        "{:#}",
        modern[0]
    );
    assert!(
        attr(legacy[0], "mcp.session.id").is_string(),
        "{:#}",
        legacy[0]
    );
    let refunds = named(&spans, "tools/call refund_order");
    let asked_and_run = refunds
        .iter()
        .filter(|s| version(s) == "2026-07-28")
        .count();
    assert_eq!(asked_and_run, 2, "{refunds:#?}");
    for s in named(&spans, "tools/list") {
        assert!(version(&s).is_string(), "{s:#}");
    }
}

/// A 2026-07-28 request to `authority` (`serve --http`) with the tasks extension declared; its
/// JSON-RPC response.
fn post_2026(authority: &str, method: &str, mut params: Value) -> Value {
    use std::io::Write;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":
            { "extensions": { "io.modelcontextprotocol/tasks": {} } },
    });
    let name = params["name"].as_str().or(params["taskId"].as_str());
    let name = name
        .map(|n| format!("Mcp-Name: {n}\r\n"))
        .unwrap_or_default();
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let body = body.to_string();
    let mut stream = std::net::TcpStream::connect(authority).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{name}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(req.as_bytes()).expect("send");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or(Value::Null)
}

/// A served task's requests are server spans of 2026-07-28, as calls are: the `tools/call` that
/// made it (answered with the task), its `tasks/get` and its `tasks/cancel`.
#[test]
fn serve_spans_cover_the_requests_of_a_task() {
    let tap = Tap::start();
    let spec = support::temp_file(
        "otel-serve-tasks",
        "tasks.yaml",
        "version: 1\ntools:\n  slow:\n    description: Takes its time.\n    kind: mock\n    task: optional\n    timeout: 120s\n    faults: [{ delay: 60s }]\n    responses:\n      - result: done\n",
    );
    let mut serve = toolrun(&tap);
    serve
        .arg("serve")
        .arg(spec.path())
        .args(["--http", "127.0.0.1:0"]);
    let (mut child, url, mut stderr) = support::spawn_served(&mut serve);
    let authority = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let created = post_2026(
        authority,
        "tools/call",
        json!({ "name": "slow", "arguments": {} }),
    );
    let id = created["result"]["taskId"].as_str().expect("a task");
    let got = post_2026(authority, "tasks/get", json!({ "taskId": id }));
    assert_eq!(got["result"]["taskId"], id, "{got}");
    let ack = post_2026(authority, "tasks/cancel", json!({ "taskId": id }));
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let (code, rest) = support::terminate(&mut child, &mut stderr);
    assert_eq!(code, 0, "{rest}");
    let spans = tap.wait(|s| !named(s, "tasks/cancel").is_empty());
    for name in ["tools/call slow", "tasks/get", "tasks/cancel"] {
        let found = named(&spans, name);
        assert_eq!(found.len(), 1, "{name}: {spans:#?}");
        assert_eq!(
            attr(found[0], "mcp.protocol.version"),
            "2026-07-28",
            "{name}"
        );
    }
}
