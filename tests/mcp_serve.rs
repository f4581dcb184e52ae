//! `toolrun serve` driven by the official MCP Python SDK (a client toolrun did not write), over
//! stdio and streamable HTTP. Everything binds and contacts 127.0.0.1 only.

#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::{Response, TestServer};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn example() -> PathBuf {
    root().join("specs/mcp_served.yaml")
}

/// The Python client: `args` after `client.py`, the plan of calls on stdin; its JSON output.
fn client(args: &[&str], env: &[(&str, &str)], plan: &Value) -> Value {
    let mut cmd = Command::new(python::python());
    cmd.arg(python::script("client.py")).args(args);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = support::run_with_stdin(&mut cmd, &plan.to_string());
    assert_eq!(out.code, 0, "the MCP client failed\n{out:?}");
    // The SDK logs a session it could not end (a DELETE answered other than 200/204).
    assert!(
        !out.stderr.contains("Session termination failed"),
        "{}",
        out.stderr
    );
    out.json()
}

fn stdio(spec: &Path, serve_args: &[&str], env: &[(&str, &str)], plan: Value) -> Value {
    let mut args = vec![
        "stdio",
        env!("CARGO_BIN_EXE_toolrun"),
        "serve",
        spec.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(serve_args);
    client(&args, env, &plan)
}

fn call(name: &str, arguments: Value) -> Value {
    json!({ "name": name, "arguments": arguments })
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[track_caller]
fn assert_error(result: &Value, kind: &str) {
    assert_eq!(result["isError"], true, "{result:#}");
    assert_eq!(
        result["structuredContent"]["error"]["kind"], kind,
        "{result:#}"
    );
}

/// An error of `kind` whose text says `says`.
#[track_caller]
fn assert_error_says(result: &Value, kind: &str, says: &str) {
    assert_error(result, kind);
    assert!(text(result).contains(says), "{result:#}");
}

#[test]
fn stdio_lists_what_tools_prints_and_calls_go_through_the_loop_path() {
    let doc = stdio(
        &example(),
        &[],
        &[],
        json!([
            call("lookup_order", json!({ "order_id": 42 })),
            call("lookup_order", json!({ "order_id": 7 })),
            call("lookup_order", json!({ "order_id": "42" })),
            call("lookup_ordr", json!({ "order_id": 42 })),
            call("refund_order", json!({ "order_id": 42 })),
            call("delivery_log", json!({ "order_id": 42 })),
            call("calculate", json!({ "expression": "(178.15 - 150) * 100" })),
            call("lookup_order", json!({ "order_id": 42 })),
            call("lookup_order", json!({ "order_id": 42 })),
            call("lookup_order", json!({ "order_id": 42 })),
        ]),
    );

    // tools/list is `toolrun tools --format mcp`, as the client parsed it.
    let mut cmd = support::toolrun();
    cmd.args(["tools", "--format", "mcp"]).arg(example());
    let exported = support::run(&mut cmd);
    exported.assert_success();
    let exported = exported.json()["tools"].clone();
    let listed = doc["tools"].as_array().expect("tools");
    assert_eq!(listed.len(), exported.as_array().map_or(0, Vec::len));
    for (got, want) in listed.iter().zip(exported.as_array().expect("array")) {
        for key in ["name", "description", "inputSchema", "annotations"] {
            assert_eq!(got[key], want[key], "{key} of {}", want["name"]);
        }
    }
    let refund = listed
        .iter()
        .find(|t| t["name"] == "refund_order")
        .expect("refund_order");
    assert_eq!(refund["annotations"]["destructiveHint"], true);
    assert_eq!(refund["annotations"]["readOnlyHint"], false);

    let calls = doc["calls"].as_array().expect("calls");
    assert_eq!(calls[0]["isError"], false, "{:#}", calls[0]);
    assert_eq!(
        calls[0]["structuredContent"],
        json!({ "order_id": 42, "status": "shipped", "carrier": "DHL" })
    );
    assert_eq!(
        serde_json::from_str::<Value>(text(&calls[0])).expect("JSON text"),
        calls[0]["structuredContent"]
    );
    assert_error(&calls[1], "not_found");
    assert_eq!(
        calls[1]["structuredContent"]["error"]["message"],
        "no order 7"
    );
    assert_error_says(&calls[2], "invalid_arguments", "/order_id");
    // An unknown tool is the protocol error MCP names, not a tool result.
    assert_eq!(calls[3]["error"]["code"], -32602, "{:#}", calls[3]);
    let said = calls[3]["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("did you mean `lookup_order`"), "{said}");
    assert_error_says(&calls[4], "needs_confirmation", "--approve refund_order");
    assert_eq!(calls[5]["isError"], false);
    assert!(text(&calls[5]).contains("…[truncated: "), "{:#}", calls[5]);
    assert!(
        calls[5].get("structuredContent").is_none(),
        "{:#}",
        calls[5]
    );
    assert_eq!(calls[6]["structuredContent"], json!({ "result": 2815 }));
    // serve.max_repeated_calls: 2 — the first lookup of 42 does not count against the later
    // ones; the third in a row is a loop.
    assert_eq!(calls[7]["isError"], false, "{:#}", calls[7]);
    assert_eq!(calls[8]["isError"], false, "{:#}", calls[8]);
    assert_error_says(&calls[9], "loop_detected", "2 times in a row");
}

#[test]
fn approve_lets_a_confirmed_tool_run() {
    let doc = stdio(
        &example(),
        &["--approve", "refund_order"],
        &[],
        json!([call("refund_order", json!({ "order_id": 42 }))]),
    );
    let result = &doc["calls"][0];
    assert_eq!(result["isError"], false, "{result:#}");
    assert_eq!(
        result["structuredContent"],
        json!({ "refunded": true, "order_id": 42 })
    );
}

const SECRET: &str = "desk-secret-7f3a9c";

/// A spec with a denied tool, a low call limit and an HTTP tool whose server echoes its secret.
fn guarded_spec(server: &TestServer) -> support::TempFile {
    support::temp_file(
        "mcp-serve-guarded",
        "s.yaml",
        &format!(
            "version: 1\nname: guarded\n\
             tools:\n\
             \x20 echo:\n    description: Echoes what the service saw.\n    kind: http\n\
             \x20   input: {{ type: object, properties: {{ q: {{ type: string }} }} }}\n\
             \x20   request: {{ url: \"{}/echo\", headers: {{ Authorization: \"Bearer {{{{ secrets.DESK_TOKEN }}}}\" }} }}\n\
             \x20 hidden:\n    description: A tool the policy blocks.\n    kind: builtin\n    builtin: calculator\n\
             secrets: [DESK_TOKEN]\n\
             policy: {{ deny: [hidden], network: {{ allow_hosts: [\"127.0.0.1:{}\"] }} }}\n\
             serve: {{ max_tool_calls: 2 }}\n",
            server.base_url(),
            server.base_url().rsplit(':').next().unwrap_or_default()
        ),
    )
}

fn echo_server() -> TestServer {
    TestServer::start(|req| {
        Response::json(
            200,
            json!({ "saw": req.header("authorization").unwrap_or_default() }),
        )
    })
}

#[test]
fn policy_limits_and_masking_apply_per_session() {
    let server = echo_server();
    let spec = guarded_spec(&server);
    let fixture = spec.with_file_name("session.json");
    let doc = stdio(
        &spec,
        &["--record", fixture.to_str().expect("utf-8")],
        &[("DESK_TOKEN", SECRET)],
        json!([
            call("hidden", json!({ "expression": "1+1" })),
            call("echo", json!({ "q": "a" })),
            call("echo", json!({ "q": "b" })),
            call("echo", json!({ "q": "c" })),
        ]),
    );
    let names: Vec<&str> = doc["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["echo"], "a denied tool is never listed");
    let calls = &doc["calls"];
    assert_error(&calls[0], "denied");
    assert_eq!(calls[1]["isError"], false, "{:#}", calls[1]);
    assert_eq!(calls[1]["structuredContent"]["saw"], "Bearer ***");
    assert!(
        !doc.to_string().contains(SECRET),
        "the secret leaked: {doc}"
    );
    assert_eq!(calls[2]["isError"], false);
    assert_error_says(
        &calls[3],
        "limit_exceeded",
        "the session may make at most 2 tool calls (serve.max_tool_calls)",
    );
    assert_eq!(server.hits("/echo"), 2, "the third call never ran");

    // The session replays with the service gone and no secret set: its HTTP exchanges answer.
    drop(server);
    let recorded = std::fs::read_to_string(&fixture).expect("fixture");
    assert!(!recorded.contains(SECRET), "the secret leaked: {recorded}");
    let out = replay(&fixture, &spec);
    out.assert_success();
    assert!(out.stdout.contains("1 passed, 0 failed"), "{out:?}");
}

/// `toolrun serve --http 127.0.0.1:0`, its URL read from the line it prints.
/// The headers of a request in `session`, at protocol `version`.
fn in_session<'a>(session: &'a str, version: &'a str) -> [(&'a str, &'a str); 2] {
    [
        ("Mcp-Session-Id", session),
        ("Mcp-Protocol-Version", version),
    ]
}

/// The headers of a `GET` coming back to `session` (at 2025-11-25) after event `last`.
fn resuming<'a>(session: &'a str, last: &'a str) -> [(&'a str, &'a str); 3] {
    [
        ("Mcp-Session-Id", session),
        ("Mcp-Protocol-Version", "2025-11-25"),
        ("Last-Event-ID", last),
    ]
}

struct HttpServe {
    child: Child,
    url: String,
    stderr: BufReader<std::process::ChildStderr>,
}

impl HttpServe {
    fn start(spec: &Path, args: &[&str], env: &[(&str, &str)]) -> HttpServe {
        let (child, url, stderr) = support::serve_http(spec, args, env);
        HttpServe { child, url, stderr }
    }

    fn authority(&self) -> &str {
        support::served_authority(&self.url)
    }

    /// A raw request; returns the status line.
    fn raw(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> String {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let response = self.exchange(method, path, headers, body);
        response.lines().next().unwrap_or_default().to_string()
    }

    /// A raw request with this body; returns the whole response (status line, headers, body).
    fn exchange(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
        let mut stream = self.send(method, path, headers, body, Duration::from_secs(10));
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response
    }

    /// A raw request whose answer is read as it comes: the reader past the request.
    fn open(&self, headers: &[(&str, &str)], body: &str) -> BufReader<std::net::TcpStream> {
        BufReader::new(self.send("POST", "/mcp", headers, body, Duration::from_secs(30)))
    }

    /// Sends a raw request on a connection of its own; the connection, to read the answer from
    /// (each read waiting at most `wait`).
    fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
        wait: Duration,
    ) -> std::net::TcpStream {
        support::send_raw(self.authority(), method, path, headers, body, wait)
    }

    /// `initialize` and `notifications/initialized` at `version`; the session's id.
    fn session(&self, version: &str) -> String {
        self.session_with(version, json!({}))
    }

    /// A session whose client declares these capabilities.
    fn session_with(&self, version: &str, capabilities: Value) -> String {
        let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": capabilities,
            "clientInfo": { "name": "raw", "version": "1" } } });
        let response = self.exchange("POST", "/mcp", &[], &init.to_string());
        let id = support::response_header(&response, "mcp-session-id")
            .unwrap_or_else(|| panic!("no session id in {response}"));
        let done = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        let ack = self.exchange(
            "POST",
            "/mcp",
            &[("Mcp-Session-Id", &id)],
            &done.to_string(),
        );
        assert!(ack.starts_with("HTTP/1.1 202"), "{ack}");
        id
    }

    /// SIGTERM, then the exit code and the rest of stderr.
    fn stop(mut self) -> (i32, String) {
        support::terminate(&mut self.child, &mut self.stderr)
    }
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn http_serves_sequential_and_concurrent_calls_records_and_stops_cleanly() {
    let dir = support::temp_dir("mcp-serve-http");
    let events = dir.join("events.jsonl");
    let fixture = dir.join("session.json");
    let serve = HttpServe::start(
        &example(),
        &[
            "--events",
            events.to_str().expect("utf-8"),
            "--record",
            fixture.to_str().expect("utf-8"),
        ],
        &[],
    );
    let doc = client(
        &["http", &serve.url],
        &[],
        &json!([
            call("lookup_order", json!({ "order_id": 42 })),
            { "concurrent": [
                call("calculate", json!({ "expression": "2*3" })),
                call("lookup_order", json!({ "order_id": 9 })),
                call("calculate", json!({ "expression": "7-1" })),
            ] },
            call("refund_order", json!({ "order_id": 42 })),
        ]),
    );
    let calls = &doc["calls"];
    assert_eq!(calls[0]["structuredContent"]["status"], "shipped");
    assert_eq!(calls[1]["structuredContent"], json!({ "result": 6 }));
    assert_error(&calls[2], "not_found");
    assert_eq!(calls[3]["structuredContent"], json!({ "result": 6 }));
    assert_error(&calls[4], "needs_confirmation");

    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "SIGTERM is a clean stop\n{stderr}");

    let lines = support::events_in(&events);
    let served: Vec<&Value> = lines.iter().filter(|e| e["event"] == "mcp_call").collect();
    assert_eq!(served.len(), 5, "{lines:#?}");
    assert!(
        served.iter().all(|e| e["session"] == "session_1"),
        "{served:#?}"
    );
    assert_eq!(served[4]["is_error"], true);

    let fixture: Value = recording(&fixture);
    assert_eq!(fixture["format_version"], 1);
    assert_eq!(fixture["model"], "mcp");
    let exchanges = fixture["exchanges"].as_array().expect("exchanges");
    assert_eq!(exchanges.len(), 5);
    assert_eq!(exchanges[0]["kind"], "served");
    assert_eq!(exchanges[0]["request"]["method"], "tools/call");
    let body = &exchanges[0]["request"]["body"];
    assert_eq!(body["name"], "lookup_order");
    assert_eq!(body["arguments"], json!({ "order_id": 42 }));
    assert!(
        body["now_unix_ms"].is_i64(),
        "the clock it ran with: {body}"
    );
    let mut sent = calls[0].clone();
    // The client fills in the 2026 `resultType` default itself; the wire had none.
    sent.as_object_mut().expect("object").remove("resultType");
    assert_eq!(exchanges[0]["response"]["body"], sent);
    // Four ran (one of them failed: `not_found`); the refund waited for an approval.
    assert_eq!(
        fixture["trace"]["tool_call_count"], 4,
        "{:#}",
        fixture["trace"]
    );
    replay(&dir.join("session.json"), &example()).assert_success();
}

/// `toolrun replay FIXTURE --spec SPEC`: a fixture under /tmp recorded from the repository's
/// spec points outside its project root, which replay refuses to follow on its own.
/// Each session counts its own call ids, so with two clients `call_1` is ambiguous: the
/// `tool_started` / `tool_finished` lines of a served call, and what its tool reports while it
/// runs (`tool_notify`), name its session, the same id its `mcp_call` line carries.
#[test]
fn tool_events_of_served_calls_name_their_session() {
    let dir = support::temp_dir("mcp-serve-event-sessions");
    let spec = dir.join("s.yaml");
    let text = std::fs::read_to_string(example()).expect("the example spec");
    let noisy = "  noisy:\n    description: Logs while it works.\n    kind: mock\n    input: { type: object }\n    responses:\n      - notify: [{ log: { level: info, data: working } }]\n        result: ok\n\nlimits:";
    std::fs::write(&spec, text.replacen("\nlimits:", &format!("\n{noisy}"), 1)).expect("spec");
    let events = dir.join("events.jsonl");
    let serve = HttpServe::start(&spec, &["--events", events.to_str().expect("utf-8")], &[]);
    let (first, second) = (serve.session("2025-11-25"), serve.session("2025-11-25"));
    let call = |session: &str, id: u32, name: &str, order_id: u32| {
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": name, "arguments": { "order_id": order_id } } });
        let headers = in_session(session, "2025-11-25");
        serve.exchange("POST", "/mcp", &headers, &body.to_string())
    };
    assert!(call(&first, 1, "lookup_order", 42).contains("shipped"));
    // An error is observed on its own path; its line names the session too.
    assert!(call(&second, 1, "lookup_order", 7).contains("not_found"));
    assert!(call(&first, 2, "lookup_order", 42).contains("shipped"));
    let noisy = call(&second, 2, "noisy", 1);
    assert!(noisy.contains(r#""text":"ok""#), "{noisy}");
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");

    let pairs = |name: &str| -> Vec<(String, String)> {
        support::events_named(&events, name)
            .iter()
            .map(|e| (e["session"].to_string(), e["id"].to_string()))
            .collect()
    };
    let named = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(s, c)| (json!(s).to_string(), json!(c).to_string()))
            .collect()
    };
    let expected = named(&[
        ("session_1", "call_1"),
        ("session_2", "call_1"),
        ("session_1", "call_2"),
        ("session_2", "call_2"),
    ]);
    assert_eq!(pairs("tool_started"), expected);
    assert_eq!(pairs("tool_finished"), expected);
    assert_eq!(pairs("tool_notify"), named(&[("session_2", "call_2")]));
    let served: Vec<Value> = support::events_named(&events, "mcp_call")
        .iter()
        .map(|e| e["session"].clone())
        .collect();
    assert_eq!(
        served,
        [
            json!("session_1"),
            json!("session_2"),
            json!("session_1"),
            json!("session_2")
        ]
    );
}

fn replay(fixture: &Path, spec: &Path) -> support::Output {
    let mut cmd = support::toolrun();
    cmd.arg("replay").arg(fixture).arg("--spec").arg(spec);
    support::run(&mut cmd)
}

#[test]
fn http_checks_the_bearer_token_the_origin_and_the_path() {
    let token = "serve-token-41d2";
    let serve = HttpServe::start(
        &example(),
        &["--token-env", "MCP_TOKEN"],
        &[("MCP_TOKEN", token)],
    );
    let bearer = format!("Bearer {token}");
    assert!(serve.raw("POST", "/mcp", &[]).contains(" 401 "));
    assert!(serve
        .raw("POST", "/mcp", &[("Authorization", "Bearer wrong")])
        .contains(" 401 "));
    assert!(serve
        .raw(
            "POST",
            "/mcp",
            &[
                ("Authorization", &bearer),
                ("Origin", "http://evil.example")
            ]
        )
        .contains(" 403 "));
    assert!(serve
        .raw("POST", "/other", &[("Authorization", &bearer)])
        .contains(" 404 "));
    // RFC 9110: the scheme's name is case-insensitive.
    let lower = format!("bearer {token}");
    let status = serve.raw("POST", "/mcp", &[("Authorization", &lower)]);
    assert!(!status.contains(" 401 "), "{status}");
    let doc = client(
        &["http", &serve.url, token],
        &[],
        &json!([call("calculate", json!({ "expression": "1+1" }))]),
    );
    assert_eq!(doc["calls"][0]["structuredContent"], json!({ "result": 2 }));
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

#[test]
fn http_refuses_to_start_badly() {
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (&["--http", "0.0.0.0:0"], &[], "pass --token-env VAR"),
        (
            &["--http", "0.0.0.0:0", "--token-env", "T"],
            &[("T", "fifteen-chars-x")],
            "has 15 characters; on an address other machines can reach it needs at least 16",
        ),
        (
            &["--http", "127.0.0.1:0", "--token-env", "NOT_SET"],
            &[],
            "`NOT_SET`, which is not set",
        ),
        (&["--http", "localhost"], &[], "--http takes ADDR:PORT"),
        (
            &["--http", "127.0.0.1:0", "--session-idle", "soon"],
            &[],
            "--session-idle takes a duration such as 10s, 30m or 2h, not `soon`",
        ),
        (
            &["--http", "127.0.0.1:0", "--max-sessions", "0"],
            &[],
            "--max-sessions must be at least 1",
        ),
        (
            &["--approve", "refund_ordr"],
            &[],
            "did you mean `refund_order`",
        ),
        (&["--token-env", "X"], &[("X", "t")], "applies to --http"),
    ];
    for (args, env, message) in cases {
        let mut cmd = support::toolrun();
        cmd.arg("serve").arg(example()).args(*args);
        for (k, v) in *env {
            cmd.env(k, v);
        }
        let out = support::run(&mut cmd);
        out.assert_code(2);
        assert!(out.stderr.contains(message), "{args:?}: {out:?}");
    }
}

fn refund(order_id: Value, answer: &str) -> Value {
    json!({ "name": "refund_order", "arguments": { "order_id": order_id }, "confirm": answer })
}

/// A client that declares elicitation is asked before a call that needs confirmation runs; its
/// user's answer decides, once per call. The session replays offline with the recorded answers.
#[test]
fn a_client_with_elicitation_confirms_each_call_and_the_session_replays() {
    let dir = support::temp_dir("mcp-serve-elicit");
    let spec = dir.join("s.yaml");
    std::fs::copy(example(), &spec).expect("copy the example spec");
    let fixture = dir.join("session.json");
    let doc = client(
        &[
            "--elicit",
            "stdio",
            env!("CARGO_BIN_EXE_toolrun"),
            "serve",
            spec.to_str().expect("utf-8"),
            "--record",
            fixture.to_str().expect("utf-8"),
        ],
        &[],
        &json!([
            refund(json!(42), "accept"),
            refund(json!(43), "decline"),
            refund(json!(44), "cancel"),
            refund(json!(45), "accept_unticked"),
            refund(json!("x"), "accept"),
            call("lookup_order", json!({ "order_id": 42 })),
        ]),
    );
    let calls = &doc["calls"];
    assert_eq!(calls[0]["isError"], false, "{:#}", calls[0]);
    assert_eq!(
        calls[0]["structuredContent"],
        json!({ "refunded": true, "order_id": 42 })
    );
    assert_error_says(&calls[1], "denied", "did not approve");
    assert_error_says(&calls[2], "needs_confirmation", "--approve refund_order");
    assert_error(&calls[3], "denied");
    // Invalid arguments are refused before anyone is asked.
    assert_error(&calls[4], "invalid_arguments");
    assert_eq!(calls[5]["isError"], false);

    let asked = doc["elicitations"].as_array().expect("elicitations");
    assert_eq!(
        asked.len(),
        4,
        "one question per refund with valid arguments"
    );
    for (question, id) in asked.iter().zip([42, 43, 44, 45]) {
        let message = question["message"].as_str().unwrap_or_default();
        assert!(message.contains("`refund_order`"), "{message}");
        assert!(
            message.contains(&format!("{{\"order_id\":{id}}}")),
            "{message}"
        );
        assert_eq!(question["mode"], "form");
        assert_eq!(
            question["requestedSchema"]["properties"]["approve"]["type"],
            "boolean"
        );
    }

    // The session replays offline: the recorded answers stand in for the person.
    let out = replay(&fixture, &spec);
    out.assert_success();
    assert!(out.stdout.contains("1 passed, 0 failed"), "{out:?}");

    // Had the person declined the first refund, the session would have gone differently.
    let mut recorded: Value = recording(&fixture);
    assert_eq!(
        recorded["exchanges"][0]["request"]["body"]["confirmation"],
        json!({ "action": "accept", "content": { "approve": true } })
    );
    recorded["exchanges"][0]["request"]["body"]["confirmation"] = json!({ "action": "decline" });
    let declined = dir.join("declined.json");
    std::fs::write(&declined, recorded.to_string()).expect("write");
    let out = replay(&declined, &spec);
    out.assert_code(1);
    assert!(
        out.stdout
            .contains("served call 1 (`refund_order` in session_1) now answers differently"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("/isError: expected false, got true"),
        "{out:?}"
    );

    // So would a changed spec; `--update` accepts what it answers now.
    let text = std::fs::read_to_string(&spec).expect("spec");
    std::fs::write(&spec, text.replace("refunded: true", "refunded: false")).expect("edit");
    let out = replay(&fixture, &spec);
    out.assert_code(1);
    assert!(
        out.stdout
            .contains("/structuredContent/refunded: expected true, got false"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("/tool_results/0/result/refunded"),
        "{out:?}"
    );
    let mut cmd = support::toolrun();
    cmd.arg("replay").arg(&fixture).arg("--update");
    cmd.arg("--spec").arg(&spec);
    support::run(&mut cmd).assert_success();
    replay(&fixture, &spec).assert_success();

    // A test cannot use a served session as the fixture of a run; it says what to do instead.
    let text = std::fs::read_to_string(&spec).expect("spec");
    std::fs::write(
        &spec,
        format!(
            "{text}\nmodels: {{ scripted: {{ kind: scripted, scripts: [{{ turns: [{{ answer: ok }}] }}] }} }}\n\
             tests:\n  - name: served\n    query: refund\n    fixture: session.json\n"
        ),
    )
    .expect("add a test");
    let mut cmd = support::toolrun();
    cmd.arg("test").arg(&spec);
    let out = support::run(&mut cmd);
    out.assert_code(1);
    assert!(
        out.stdout
            .contains("is a session recorded by `toolrun serve --record`, not a run"),
        "{out:?}"
    );
}

/// Over streamable HTTP the question travels on the call's own response stream.
#[test]
fn http_asks_a_client_with_elicitation_and_records_its_answers() {
    let dir = support::temp_dir("mcp-serve-http-elicit");
    let fixture = dir.join("session.json");
    let serve = HttpServe::start(
        &example(),
        &["--record", fixture.to_str().expect("utf-8")],
        &[],
    );
    let doc = client(
        &["--elicit", "http", &serve.url],
        &[],
        &json!([refund(json!(42), "accept"), refund(json!(42), "decline")]),
    );
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
    let calls = &doc["calls"];
    assert_eq!(calls[0]["structuredContent"]["refunded"], true, "{doc:#}");
    assert_error(&calls[1], "denied");
    assert_eq!(doc["elicitations"].as_array().map(Vec::len), Some(2));
    let recorded: Value = recording(&fixture);
    assert_eq!(
        recorded["exchanges"][1]["request"]["body"]["confirmation"]["action"],
        "decline"
    );
    assert_eq!(recorded["trace"]["tool_call_count"], 1);
    replay(&fixture, &example()).assert_success();
}

/// The JSON-RPC messages in a raw response: its JSON body, or its event stream's `data:`.
fn messages(response: &str) -> Vec<Value> {
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return match v {
            Value::Array(items) => items,
            other => vec![other],
        };
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

#[test]
fn http_speaks_json_rpc_as_specified() {
    let serve = HttpServe::start(&example(), &[], &[]);
    // Malformed JSON: 400 with a parse error, not 415.
    let bad = serve.exchange("POST", "/mcp", &[], "{\"jsonrpc\": \"2.0\", ");
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
    assert_eq!(messages(&bad)[0]["error"]["code"], -32700, "{bad}");
    let not_rpc = serve.exchange("POST", "/mcp", &[], "{\"hello\": 1}");
    assert!(not_rpc.starts_with("HTTP/1.1 400"), "{not_rpc}");
    assert_eq!(messages(&not_rpc)[0]["error"]["code"], -32600, "{not_rpc}");

    // A batch in a 2025-03-26 session: one array of responses; the notification has none.
    let session = serve.session("2025-03-26");
    let batch = json!([
        { "jsonrpc": "2.0", "id": 1, "method": "ping" },
        { "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 99 } },
        { "jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": { "name": "calculate", "arguments": { "expression": "6*7" } } },
        { "jsonrpc": "2.0", "id": 3, "method": "tools/call",
          "params": { "name": "lookup_ordr", "arguments": {} } },
        { "jsonrpc": "2.0", "id": 4, "method": "tools/call",
          "params": { "name": "lookup_order", "arguments": { "order_id": "x" } } },
    ]);
    let headers = in_session(&session, "2025-03-26");
    let answer = serve.exchange("POST", "/mcp", &headers, &batch.to_string());
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answers = messages(&answer);
    assert_eq!(answers.len(), 4, "{answer}");
    assert_eq!(
        answers[0],
        json!({ "jsonrpc": "2.0", "id": 1, "result": {} })
    );
    assert_eq!(
        answers[1]["result"]["structuredContent"],
        json!({ "result": 42 })
    );
    // An unknown tool is a protocol error (-32602) that names the near miss...
    assert_eq!(answers[2]["error"]["code"], -32602, "{answer}");
    let said = answers[2]["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("lookup_order"), "{said}");
    // ...while arguments that do not fit stay a tool error the model can correct (SEP-1303).
    assert_eq!(answers[3]["result"]["isError"], true, "{answer}");
    assert_eq!(
        answers[3]["result"]["structuredContent"]["error"]["kind"],
        "invalid_arguments"
    );

    // Ending the session: 204, and the session is gone.
    let end = serve.exchange("DELETE", "/mcp", &[("Mcp-Session-Id", &session)], "");
    assert!(end.starts_with("HTTP/1.1 204"), "{end}");
    let after = serve.exchange(
        "POST",
        "/mcp",
        &headers,
        &json!({ "jsonrpc": "2.0", "id": 5, "method": "ping" }).to_string(),
    );
    assert!(after.starts_with("HTTP/1.1 404"), "{after}");
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

const NOTIFYING: &str = r#"
version: 1
name: notifying
tools:
  slow_lookup:
    description: Looks something up slowly, saying how it goes.
    kind: mock
    input: { type: object, properties: { n: { type: integer } }, required: [n] }
    responses:
      - notify:
          - log: { level: warning, logger: lookup, data: "looking up {{ args.n }}" }
          - progress: { progress: 1, total: 2, message: half }
          - log: { level: debug, data: { step: 2 } }
        result: found
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: slow_lookup, arguments: { n: 3 } }]
          - answer: done
"#;

#[test]
fn notify_items_are_events_lines_in_runs_and_checked_by_check() {
    let spec = support::temp_file("mcp-notify", "notify.yaml", NOTIFYING);
    let events = spec.path().with_file_name("events.jsonl");
    let mut cmd = support::toolrun();
    cmd.arg("run")
        .arg(spec.path())
        .args(["--query", "find 3", "--events"])
        .arg(&events);
    support::run(&mut cmd).assert_success();
    let lines = support::events_named(&events, "tool_notify");
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert_eq!(
        lines[0]["log"],
        json!({ "level": "warning", "logger": "lookup", "data": "looking up 3" })
    );
    assert_eq!(
        lines[1]["progress"],
        json!({ "progress": 1.0, "total": 2.0, "message": "half" })
    );
    assert_eq!(lines[2]["log"]["data"], json!({ "step": 2 }));
    assert!(lines.iter().all(|l| l["id"] == lines[0]["id"]));

    let bad = NOTIFYING
        .replace("level: warning", "level: loud")
        .replace("- progress: { progress: 1,", "- progress: {");
    let bad = support::temp_file("mcp-notify", "bad.yaml", &bad);
    let mut cmd = support::toolrun();
    cmd.arg("check").arg(bad.path());
    let out = support::run(&mut cmd);
    out.assert_code(1);
    assert!(
        out.stdout.contains("unknown log level `loud`")
            || out.stderr.contains("unknown log level `loud`"),
        "{out:?}"
    );
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("`progress`"), "{all}");
}

#[test]
fn mock_content_is_served_unchanged_and_the_loop_reads_text_and_placeholders() {
    let spec = root().join("specs/mcp_conformance_server.yaml");
    let doc = stdio(
        &spec,
        &[],
        &[],
        json!([
            call("test_multiple_content_types", json!({})),
            call("test_audio_content", json!({})),
            call("test_simple_text", json!({})),
        ]),
    );
    let mixed = &doc["calls"][0];
    assert_eq!(mixed["isError"], false, "{mixed:#}");
    let items = mixed["content"].as_array().expect("content");
    assert_eq!(items.len(), 3, "{mixed:#}");
    assert_eq!(
        items[0],
        json!({ "type": "text", "text": "Multiple content types test:" })
    );
    assert_eq!(items[1]["type"], "image");
    assert_eq!(items[1]["mimeType"], "image/png");
    assert!(items[1]["data"]
        .as_str()
        .unwrap_or_default()
        .starts_with("iVBORw0KGgo"));
    assert_eq!(
        items[2]["resource"],
        json!({ "uri": "test://mixed-content-resource", "mimeType": "application/json",
                "text": "{\"test\":\"data\",\"value\":123}" })
    );
    assert_eq!(doc["calls"][1]["content"][0]["mimeType"], "audio/wav");
    assert_eq!(
        doc["calls"][2]["content"],
        json!([{ "type": "text", "text": "This is a simple text response for testing." }])
    );

    // Outside MCP the model reads the text and a placeholder for what it cannot read.
    let mut cmd = support::toolrun();
    cmd.args(["call"])
        .arg(&spec)
        .args(["test_multiple_content_types", "--json"]);
    let out = support::run(&mut cmd);
    out.assert_success();
    let record = out.json();
    let seen = record["result"].as_str().unwrap_or_default();
    assert!(
        seen.starts_with("Multiple content types test:\n[image image/png, "),
        "{record:#}"
    );
    assert!(
        seen.ends_with("{\"test\":\"data\",\"value\":123}"),
        "{record:#}"
    );

    let bad = r#"
version: 1
tools:
  t:
    description: Returns broken content to show what check says.
    kind: mock
    input: { type: object, properties: {} }
    responses:
      - content:
          - { type: picture, data: x }
          - { type: image, data: x }
          - { type: resource, resource: { uri: "test://x" } }
"#;
    let bad = support::temp_file("mcp-content", "bad.yaml", bad);
    let mut cmd = support::toolrun();
    cmd.arg("check").arg(bad.path());
    let out = support::run(&mut cmd);
    out.assert_code(1);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("unknown content type `picture`"), "{all}");
    assert!(all.contains("missing required key `mimeType`"), "{all}");
    assert!(all.contains("needs `uri` and `text` or `blob`"), "{all}");
}

#[test]
fn a_session_is_not_a_run_long_lived_clients_are_not_stopped() {
    let spec = r#"
version: 1
name: desk
tools:
  lookup:
    description: Looks an order up by its number.
    kind: mock
    input: { type: object, properties: { id: { type: integer } }, required: [id] }
    responses:
      - result: "order {{ args.id }}: shipped"
"#;
    let spec = support::temp_file("mcp-session-limits", "desk.yaml", spec);
    // A day of lookups: more than a run's 20 calls, the same orders again and again.
    let mut plan: Vec<Value> = (0..30)
        .map(|i| call("lookup", json!({ "id": i % 3 })))
        .collect();
    plan.extend((0..6).map(|_| call("lookup", json!({ "id": 7 }))));
    let doc = stdio(spec.path(), &[], &[], Value::Array(plan));
    let calls = doc["calls"].as_array().expect("calls");
    for (i, c) in calls.iter().take(35).enumerate() {
        assert_eq!(c["isError"], false, "call {i}: {c:#}");
    }
    // Back to back, the sixth identical call is a loop (serve.max_repeated_calls, default 5).
    assert_error_says(
        &calls[35],
        "loop_detected",
        "5 times in a row with these arguments in this session",
    );
}

#[test]
fn http_is_bounded_under_abuse() {
    let serve = HttpServe::start(
        &example(),
        &[
            "--max-connections",
            "20",
            "--read-timeout",
            "1s",
            "--max-sessions",
            "3",
            "--session-idle",
            "1s",
        ],
        &[],
    );
    // Twenty connections that never finish their headers fill the cap...
    let half_open: Vec<std::net::TcpStream> = (0..20)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(serve.authority()).expect("connect");
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .expect("half a request");
            s
        })
        .collect();
    // ...so the next one is told at once that the server is busy, not left hanging...
    let mut busy = String::new();
    for _ in 0..50 {
        busy = serve.raw("POST", "/mcp", &[]);
        if busy.contains(" 503 ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(busy.contains(" 503 "), "{busy}");
    // ...and the server closes each of them once its headers are overdue.
    for mut s in half_open {
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut rest = Vec::new();
        let closed =
            s.read_to_end(&mut rest).is_ok() || matches!(s.read(&mut [0u8; 1]), Ok(0) | Err(_));
        assert!(closed, "a half-open connection was kept");
    }
    // The client with a real request is served again.
    let doc = client(
        &["http", &serve.url],
        &[],
        &json!([call("calculate", json!({ "expression": "2+2" }))]),
    );
    assert_eq!(doc["calls"][0]["structuredContent"], json!({ "result": 4 }));

    // Sessions: at the cap, a new one ends the session idle the longest.
    let ping = json!({ "jsonrpc": "2.0", "id": 9, "method": "ping" }).to_string();
    let first = serve.session("2025-06-18");
    let others: Vec<String> = (0..3).map(|_| serve.session("2025-06-18")).collect();
    let answer = |id: &str| serve.exchange("POST", "/mcp", &[("Mcp-Session-Id", id)], &ping);
    assert!(
        answer(&first).starts_with("HTTP/1.1 404"),
        "{}",
        answer(&first)
    );
    assert!(
        answer(&others[2]).starts_with("HTTP/1.1 200"),
        "{}",
        answer(&others[2])
    );
    // And a session nobody uses ends by itself (--session-idle 1s). Each look is a request,
    // which keeps the session alive: look less often than it may idle.
    let mut gone = false;
    for _ in 0..15 {
        std::thread::sleep(Duration::from_secs(2));
        if answer(&others[0]).starts_with("HTTP/1.1 404") {
            gone = true;
            break;
        }
    }
    assert!(gone, "an idle session was kept");
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

#[test]
fn a_retried_http_call_reports_progress_to_a_client_with_a_progress_token() {
    let tries = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = tries.clone();
    let server = TestServer::start(move |_| {
        if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Response::json(503, json!({ "error": "busy" }))
        } else {
            Response::json(200, json!({ "price": 178.15 }))
        }
    });
    let port = server
        .base_url()
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string();
    let spec = support::temp_file(
        "mcp-serve-retry",
        "retry.yaml",
        &format!(
            "version: 1\nname: retry\ntools:\n  quote:\n    description: Gets a quote from the quote service.\n    kind: http\n    input: {{ type: object, properties: {{}} }}\n    request: {{ url: \"{}/quote\" }}\n    retries: 2\npolicy: {{ network: {{ allow_hosts: [\"127.0.0.1:{port}\"] }} }}\n",
            server.base_url()
        ),
    );
    let serve = HttpServe::start(spec.path(), &[], &[]);
    let session = serve.session("2025-06-18");
    let call = json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "quote", "arguments": {}, "_meta": { "progressToken": "p-1" } } });
    let headers = in_session(&session, "2025-06-18");
    let answer = serve.exchange("POST", "/mcp", &headers, &call.to_string());
    let got = messages(&answer);
    let progress = got
        .iter()
        .position(|m| m["method"] == "notifications/progress")
        .unwrap_or_else(|| panic!("no progress in {answer}"));
    let result = got.iter().position(|m| m["id"] == 5).expect("the result");
    assert!(progress < result, "{answer}");
    let p = &got[progress]["params"];
    assert_eq!(p["progressToken"], "p-1");
    assert_eq!(
        (p["progress"].as_f64(), p["total"].as_f64()),
        (Some(1.0), Some(3.0))
    );
    assert!(
        p["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("attempt 1 of 3 failed"),
        "{p}"
    );
    assert_eq!(got[result]["result"]["structuredContent"]["price"], 178.15);
}

/// The `id:` of the first event in a response that has one.
fn first_event_id(response: &str) -> String {
    response
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .unwrap_or_else(|| panic!("no event id in {response}"))
        .trim()
        .to_string()
}

#[test]
fn a_result_produced_while_the_client_is_away_arrives_on_its_resumed_get() {
    let progress: String = (1..=300)
        .map(|i| format!("          - progress: {{ progress: {i}, total: 300 }}\n"))
        .collect();
    let spec = support::temp_file(
        "mcp-serve-resume",
        "resume.yaml",
        &format!(
            "version: 1\nname: resume\ntools:\n  long_report:\n    description: Writes a long report; come back for it.\n    kind: mock\n    input: {{ type: object, properties: {{}} }}\n    responses:\n      - notify:\n          - reconnect: true\n{progress}        result: the report\n"
        ),
    );
    let serve = HttpServe::start(spec.path(), &[], &[]);
    let session = serve.session("2025-11-25");
    let call = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "long_report", "arguments": {}, "_meta": { "progressToken": "r" } } });
    let headers = in_session(&session, "2025-11-25");
    // The call's stream closes after its priming event (an id and `retry:`), before the result.
    let away = serve.exchange("POST", "/mcp", &headers, &call.to_string());
    assert!(away.starts_with("HTTP/1.1 200"), "{away}");
    assert!(away.contains("retry: 3000"), "{away}");
    assert!(!messages(&away).iter().any(|m| m["id"] == 7), "{away}");
    let last = first_event_id(&away);

    let resumed = resuming(&session, &last);
    let back = serve.exchange("GET", "/mcp", &resumed, "");
    assert!(back.starts_with("HTTP/1.1 200"), "{back}");
    let got = messages(&back);
    let result = got.iter().find(|m| m["id"] == 7).expect("the result");
    assert_eq!(result["result"]["content"][0]["text"], "the report");

    // The session keeps at most 256 events: coming back again from the same id, the call is
    // complete and only its newest 256 events (the last 255 progress reports and the result)
    // are left.
    let again = messages(&serve.exchange("GET", "/mcp", &resumed, ""));
    assert_eq!(again.len(), 256);
    assert_eq!(again[0]["params"]["progress"].as_f64(), Some(46.0));
    assert_eq!(again[255]["id"], 7);
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

/// Whether the process `pid` is gone (ended and reaped), waiting for it a while.
fn ends(pid: u64) -> bool {
    for _ in 0..1500 {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A gateway to `stdio_server.py`'s `echo`, which writes the pid of each probe it starts to
/// `logs/pids.jsonl`.
fn probe_gateway(dir: &Path) -> (PathBuf, PathBuf) {
    let logs = dir.join("logs");
    let spec = support::write(
        dir,
        "gateway.yaml",
        &format!(
            r#"version: 1
name: gateway
tools:
  probe:
    kind: mcp
    description: A probe server.
    command: ["{python}", "{script}", "{logs}"]
    timeout: 30s
    tools: [echo]
"#,
            python = python::python().display(),
            script = python::script("stdio_server.py").display(),
            logs = logs.display(),
        ),
    );
    (spec, logs)
}

/// The pid of the `i`th probe `probe_gateway`'s server started.
fn probe_leader(logs: &Path, i: usize) -> u64 {
    let text = std::fs::read_to_string(logs.join("pids.jsonl")).unwrap_or_default();
    let line: Value =
        serde_json::from_str(text.lines().nth(i).expect("a probe started")).expect("pid line");
    line["leader"].as_u64().unwrap()
}

/// A gateway's upstream session with a stdio server ends with its client session however that
/// ends: evicted by `--max-sessions`, or idle past `--session-idle`.
#[test]
fn a_gateways_stdio_server_ends_when_its_session_is_evicted_or_idles_out() {
    let dir = support::temp_dir("mcp-serve-gateway-ends");
    let (spec, logs) = probe_gateway(&dir);
    let python = python::python().display().to_string();
    let serve = HttpServe::start(
        &spec,
        &[
            "--allow-exec",
            &python,
            "--max-sessions",
            "1",
            // Long enough for a probe to start on a loaded machine: rmcp counts a call in
            // flight without messages as idle time.
            "--session-idle",
            "8s",
        ],
        &[],
    );
    let echo = |id: &str| {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": "echo", "arguments": { "text": "hi" } } });
        let r = serve.exchange("POST", "/mcp", &[("Mcp-Session-Id", id)], &body.to_string());
        assert!(r.contains("hi"), "{r}");
    };
    let leader = |i: usize| probe_leader(&logs, i);
    // Probe 0 listed the tools when `serve` started; probe 1 serves the first session.
    let first = serve.session("2025-06-18");
    echo(&first);
    let evicted = leader(1);
    // A second session at the cap of one evicts the first, and its probe ends.
    let second = serve.session("2025-06-18");
    assert!(ends(evicted), "the evicted session's server still runs");
    echo(&second);
    let idle = leader(2);
    // Nobody uses the second session: it idles out, and its probe ends.
    assert!(ends(idle), "the idle session's server still runs");
    assert!(
        Path::new(&format!("/proc/{}", leader(0))).exists(),
        "serve's own server ended early"
    );
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

/// The scheduling policy `/proc/PID/stat` gives a process (its 41st field): 0 is the default
/// (`SCHED_OTHER`), 3 `SCHED_BATCH`.
fn scheduling_policy(pid: u64) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // The command's name (the second field) may hold spaces; the fields after it do not.
    let (_, after) = stat.rsplit_once(')').expect("a command name");
    let policy = after.split_whitespace().nth(38).expect("a policy field");
    policy.parse().expect("a number")
}

/// `serve` runs as a batch thread (a client's request waits for the client to block rather
/// than preempting it), the stdio servers it starts under the default policy, and
/// `--scheduling normal` keeps the default for `serve` too.
#[cfg(target_os = "linux")]
#[test]
fn serve_runs_as_a_batch_thread_and_the_servers_it_starts_do_not() {
    let dir = support::temp_dir("mcp-serve-scheduling");
    let (spec, logs) = probe_gateway(&dir);
    let python = python::python().display().to_string();
    let serve = HttpServe::start(&spec, &["--allow-exec", &python], &[]);
    assert_eq!(scheduling_policy(u64::from(serve.child.id())), 3);
    // The probe that listed the tools as `serve` started.
    assert_eq!(scheduling_policy(probe_leader(&logs, 0)), 0);
    assert_eq!(serve.stop().0, 0);
    let serve = HttpServe::start(&example(), &["--scheduling", "normal"], &[]);
    assert_eq!(scheduling_policy(u64::from(serve.child.id())), 0);
    assert_eq!(serve.stop().0, 0);
}

/// The calls of one session run at once (they used to take turns): a service that answers only
/// when two of its calls have arrived serves both together. A session's budget still holds when
/// its calls arrive together: a call counts from when it is admitted, not when it ends.
#[test]
fn a_sessions_calls_run_at_once_within_its_limits() {
    let arrived = std::sync::Arc::new((std::sync::Mutex::new(0usize), std::sync::Condvar::new()));
    let seen = arrived.clone();
    let server = TestServer::start(move |_| {
        let (count, cv) = &*seen;
        let mut n = count.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        cv.notify_all();
        // A call that waits alone this long says so: its partner never came.
        let (n, _) = cv
            .wait_timeout_while(n, Duration::from_secs(30), |n| *n < 2)
            .unwrap_or_else(|e| e.into_inner());
        Response::json(200, json!({ "together": *n >= 2 }))
    });
    let port = server.addr().port();
    let spec = support::temp_file(
        "mcp-serve-together",
        "together.yaml",
        &format!(
            "version: 1\nname: together\ntools:\n  hold:\n    description: Waits for a partner call.\n    kind: http\n    input: {{ type: object, properties: {{ n: {{ type: integer }} }} }}\n    request: {{ url: \"{}/hold\", query: {{ n: \"{{{{ args.n }}}}\" }} }}\n  slow:\n    description: Answers after a while.\n    kind: mock\n    input: {{ type: object, properties: {{ n: {{ type: integer }} }} }}\n    faults: [{{ delay: 300ms }}]\n    responses:\n      - result: done\npolicy: {{ network: {{ allow_hosts: [\"127.0.0.1:{port}\"] }} }}\nserve: {{ max_tool_calls: 5 }}\n",
            server.base_url()
        ),
    );
    let serve = HttpServe::start(spec.path(), &[], &[]);
    let slow: Vec<Value> = (1..=6).map(|n| call("slow", json!({ "n": n }))).collect();
    let doc = client(
        &["http", &serve.url],
        &[],
        &json!([
            { "concurrent": [call("hold", json!({ "n": 1 })), call("hold", json!({ "n": 2 }))] },
            { "concurrent": slow },
        ]),
    );
    let calls = doc["calls"].as_array().expect("calls");
    assert_eq!(calls[0]["structuredContent"], json!({ "together": true }));
    assert_eq!(calls[1]["structuredContent"], json!({ "together": true }));
    // Two calls made, three left of five: six at once, and exactly three run.
    let ran = calls[2..].iter().filter(|c| c["isError"] == false).count();
    assert_eq!(ran, 3, "{calls:#?}");
    for c in calls[2..].iter().filter(|c| c["isError"] == true) {
        assert_error_says(c, "limit_exceeded", "at most 5 tool calls");
    }
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

/// A single-message answer is one `application/json` body (what the streamable HTTP transport
/// lets a server send a client that accepts both); a call that notifies on the way keeps its
/// event stream, notifications first.
#[test]
fn single_answers_are_json_and_calls_that_notify_stream() {
    let spec = support::temp_file("mcp-serve-json", "notify.yaml", NOTIFYING);
    let serve = HttpServe::start(spec.path(), &[], &[]);
    let session = serve.session("2025-11-25");
    let headers = in_session(&session, "2025-11-25");
    let content_type = |response: &str| {
        response
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-type")
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_default()
    };
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
    let listed = serve.exchange("POST", "/mcp", &headers, &list.to_string());
    assert_eq!(content_type(&listed), "application/json", "{listed}");
    assert_eq!(
        messages(&listed)[0]["result"]["tools"][0]["name"],
        "slow_lookup"
    );

    let call = |id: u32, meta: Value| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "slow_lookup", "arguments": { "n": id }, "_meta": meta } })
        .to_string()
    };
    // Progress for a progress token, and the call's logs, come on the call's own stream (a
    // client that never opens the session's GET stream gets them too), before the result.
    let streamed = serve.exchange(
        "POST",
        "/mcp",
        &headers,
        &call(2, json!({ "progressToken": "t" })),
    );
    assert_eq!(content_type(&streamed), "text/event-stream", "{streamed}");
    let got = messages(&streamed);
    let methods: Vec<Value> = got.iter().map(|m| m["method"].clone()).collect();
    assert_eq!(
        methods,
        [
            json!("notifications/message"),
            json!("notifications/progress"),
            json!("notifications/message"),
            Value::Null
        ],
        "{streamed}"
    );
    assert_eq!(got[0]["params"]["data"], "looking up 2");
    assert_eq!(got[1]["params"]["progressToken"], "t");
    assert_eq!(got[3]["result"]["content"][0]["text"], "found");
    // Logs below the level the client set, and progress nobody asked for, are not sent: with
    // nothing before the result, the answer is one JSON body.
    let level = json!({ "jsonrpc": "2.0", "id": 3, "method": "logging/setLevel",
        "params": { "level": "error" } });
    let set = serve.exchange("POST", "/mcp", &headers, &level.to_string());
    assert!(set.starts_with("HTTP/1.1 200"), "{set}");
    let plain = serve.exchange("POST", "/mcp", &headers, &call(4, json!({})));
    assert_eq!(content_type(&plain), "application/json", "{plain}");
    assert_eq!(messages(&plain)[0]["result"]["content"][0]["text"], "found");
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

/// A call that takes longer than `--session-idle` keeps its session: only a session without
/// a request in flight idles (rmcp's own keep-alive ended it mid-call).
#[test]
fn a_call_in_flight_keeps_its_session_alive() {
    let spec = support::temp_file(
        "mcp-serve-long-call",
        "long.yaml",
        "version: 1\nname: long\ntools:\n  slow:\n    description: Answers after a while.\n    kind: mock\n    input: { type: object, properties: {} }\n    faults: [{ delay: 4s }]\n    responses:\n      - result: done at last\n",
    );
    let serve = HttpServe::start(spec.path(), &["--session-idle", "1s"], &[]);
    let session = serve.session("2025-11-25");
    let headers = in_session(&session, "2025-11-25");
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "slow", "arguments": {} } });
    let answer = serve.exchange("POST", "/mcp", &headers, &call.to_string());
    let got = messages(&answer);
    let result = got.iter().find(|m| m["id"] == 2);
    assert_eq!(
        result.map(|r| &r["result"]["content"][0]["text"]),
        Some(&json!("done at last")),
        "{answer}"
    );
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

/// A session that idled out is gone with its kept events: coming back with `Last-Event-ID`
/// is 404 at once (the client starts a new session), not an answer from a dead session.
#[test]
fn a_resumed_get_of_an_idled_out_session_is_404() {
    let spec = support::temp_file(
        "mcp-serve-resume-idle",
        "resume.yaml",
        "version: 1\nname: resume\ntools:\n  report:\n    description: Writes a report; come back for it.\n    kind: mock\n    input: { type: object, properties: {} }\n    responses:\n      - notify:\n          - reconnect: true\n        result: the report\n",
    );
    let serve = HttpServe::start(spec.path(), &["--session-idle", "1s"], &[]);
    let session = serve.session("2025-11-25");
    let call = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": { "name": "report", "arguments": {} } });
    let headers = in_session(&session, "2025-11-25");
    let away = serve.exchange("POST", "/mcp", &headers, &call.to_string());
    let last = first_event_id(&away);
    let resumed = resuming(&session, &last);
    let back = serve.exchange("GET", "/mcp", &resumed, "");
    assert!(back.starts_with("HTTP/1.1 200"), "{back}");
    // Each look is a request, which keeps the session alive: look less often than it may idle.
    let mut gone = String::new();
    for _ in 0..15 {
        std::thread::sleep(Duration::from_secs(2));
        let again = serve.exchange("GET", "/mcp", &resumed, "");
        if !again.starts_with("HTTP/1.1 200") {
            gone = again;
            break;
        }
    }
    assert!(
        gone.starts_with("HTTP/1.1 404"),
        "the idle session still answered: {gone}"
    );
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

/// A keep-alive connection that sends nothing after its request is closed once
/// `--read-timeout` passes, so idle connections do not hold the connection cap.
#[test]
fn an_idle_keep_alive_connection_is_closed() {
    let serve = HttpServe::start(&example(), &["--read-timeout", "1s"], &[]);
    let mut stream = std::net::TcpStream::connect(serve.authority()).expect("connect");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        serve.authority(),
        body.len()
    );
    stream.write_all(req.as_bytes()).expect("send");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    // The answer (a 400: no session), then the end of the connection, not a wait.
    let mut got = Vec::new();
    let closed = stream.read_to_end(&mut got).is_ok();
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 "), "{text}");
    assert!(closed, "the idle connection was kept open: {text}");
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

/// A gateway's clients share its connections to a tool's host: two sessions, one after the
/// other, reach the service over one kept-alive connection (each session used to open its own
/// and load the TLS roots again).
#[test]
fn sessions_reuse_connections_to_a_tools_host() {
    let server = echo_server();
    let port = server.addr().port();
    let spec = support::temp_file(
        "mcp-serve-reuse",
        "reuse.yaml",
        &format!(
            "version: 1\nname: reuse\ntools:\n  echo:\n    description: Echoes.\n    kind: http\n    input: {{ type: object, properties: {{ q: {{ type: string }} }} }}\n    request: {{ url: \"{}/echo\", query: {{ q: \"{{{{ args.q }}}}\" }} }}\npolicy: {{ network: {{ allow_hosts: [\"127.0.0.1:{port}\"] }} }}\n",
            server.base_url()
        ),
    );
    let serve = HttpServe::start(spec.path(), &[], &[]);
    for q in ["first", "second"] {
        let doc = client(
            &["http", &serve.url],
            &[],
            &json!([
                call("echo", json!({ "q": q })),
                call("echo", json!({ "q": "again" }))
            ]),
        );
        assert_eq!(doc["calls"][1]["isError"], false, "{doc:#}");
    }
    assert_eq!(server.hits("/echo"), 4);
    assert_eq!(
        server.connections(),
        1,
        "each session opened its own connection"
    );
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

/// A session's calls that run at once may end in another order than they began: the recording
/// keeps them in the order the session admitted them, which is the order a replay runs them in
/// one by one, so call ids, limits and loop counts come out as they did and the session replays.
#[test]
fn a_recording_of_calls_at_once_keeps_their_admission_order_and_replays() {
    let (server, released) = gated_server();
    let port = server.addr().port();
    let dir = support::temp_dir("mcp-serve-record-order");
    let spec = dir.join("order.yaml");
    std::fs::write(
        &spec,
        format!(
            "version: 1\nname: order\ntools:\n  wait:\n    description: Answers once the test lets it.\n    kind: http\n    input: {{ type: object }}\n    request: {{ url: \"{}/wait\" }}\n  quick:\n    description: Answers at once.\n    kind: mock\n    input: {{ type: object }}\n    responses:\n      - result: done\npolicy: {{ network: {{ allow_hosts: [\"127.0.0.1:{port}\"] }} }}\nserve: {{ max_tool_calls: 2 }}\n",
            server.base_url()
        ),
    )
    .expect("spec");
    let fixture = dir.join("session.json");
    let serve = HttpServe::start(&spec, &["--record", fixture.to_str().expect("utf-8")], &[]);
    let session = serve.session("2025-11-25");
    let headers = in_session(&session, "2025-11-25");
    let call = |id: u32, name: &str| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": name, "arguments": {} } })
        .to_string()
    };
    // `wait` is admitted first (its request reached the service) and ends last.
    let waiting = {
        let (serve, headers, body) = (&serve, &headers, call(1, "wait"));
        std::thread::scope(|s| {
            let waiting = s.spawn(move || serve.exchange("POST", "/mcp", headers, &body));
            assert_eq!(
                server.wait_for_requests(1, Duration::from_secs(30)).len(),
                1
            );
            let quick = serve.exchange("POST", "/mcp", headers, &call(2, "quick"));
            assert!(quick.contains("done"), "{quick}");
            // The budget of two is spent: the third is refused while `wait` still runs.
            let third = serve.exchange("POST", "/mcp", headers, &call(3, "quick"));
            assert!(third.contains("limit_exceeded"), "{third}");
            open_gate(&released);
            waiting.join().expect("the waiting call")
        })
    };
    assert!(waiting.contains("waited"), "{waiting}");
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
    let recorded: Value = recording(&fixture);
    let names: Vec<&Value> = recorded["exchanges"]
        .as_array()
        .expect("exchanges")
        .iter()
        .filter(|e| e["kind"] == "served")
        .map(|e| &e["request"]["body"]["name"])
        .collect();
    assert_eq!(names, [&json!("wait"), &json!("quick"), &json!("quick")]);
    let ids: Vec<&Value> = recorded["trace"]["tool_results"]
        .as_array()
        .expect("tool results")
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(ids, [&json!("call_1"), &json!("call_2")], "{recorded:#}");
    replay(&fixture, &spec).assert_success();
}

/// A call that needs confirmation is admitted again when its client's user approves it, and
/// another call of the session may be admitted while they think: the recording keeps the calls
/// in the order they were admitted to run, with the call ids that order gives, and the replay,
/// which runs them one by one with the recorded answer, comes out the same.
#[test]
fn a_call_confirmed_while_another_runs_records_and_replays_in_admission_order() {
    let dir = support::temp_dir("mcp-serve-confirm-overlap");
    let fixture = dir.join("session.json");
    let serve = HttpServe::start(
        &example(),
        &["--record", fixture.to_str().expect("utf-8")],
        &[],
    );
    let session = serve.session_with("2025-11-25", json!({ "elicitation": { "form": {} } }));
    let headers = in_session(&session, "2025-11-25");
    let call = |id: u32, name: &str| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": name, "arguments": { "order_id": 42 } } })
        .to_string()
    };
    // The refund's question arrives on its stream; its user has not answered yet.
    let mut refund = serve.open(&headers, &call(1, "refund_order"));
    let question = std::iter::from_fn(|| {
        let mut line = String::new();
        (refund.read_line(&mut line).unwrap_or(0) > 0).then_some(line)
    })
    .filter_map(|l| serde_json::from_str::<Value>(l.strip_prefix("data:")?.trim()).ok())
    .find(|m| m["method"] == "elicitation/create")
    .expect("the server asks the client's user");
    // Meanwhile the session looks an order up.
    let lookup = serve.exchange("POST", "/mcp", &headers, &call(2, "lookup_order"));
    assert!(lookup.contains("shipped"), "{lookup}");
    let answer = json!({ "jsonrpc": "2.0", "id": question["id"],
        "result": { "action": "accept", "content": { "approve": true } } });
    let ack = serve.exchange("POST", "/mcp", &headers, &answer.to_string());
    assert!(ack.starts_with("HTTP/1.1 202"), "{ack}");
    let mut rest = String::new();
    let _ = refund.read_to_string(&mut rest);
    assert!(rest.contains(r#"\"refunded\":true"#), "{rest}");
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
    replay(&fixture, &example()).assert_success();

    let recorded: Value = recording(&fixture);
    let names: Vec<&Value> = recorded["exchanges"]
        .as_array()
        .expect("exchanges")
        .iter()
        .filter(|e| e["kind"] == "served")
        .map(|e| &e["request"]["body"]["name"])
        .collect();
    assert_eq!(names, [&json!("lookup_order"), &json!("refund_order")]);
    let ran: Vec<(&Value, &Value)> = recorded["trace"]["tool_results"]
        .as_array()
        .expect("tool results")
        .iter()
        .map(|r| (&r["name"], &r["id"]))
        .collect();
    assert_eq!(
        ran,
        [
            (&json!("lookup_order"), &json!("call_1")),
            (&json!("refund_order"), &json!("call_2"))
        ],
        "a call waiting for its user takes its number when it is admitted to run"
    );
}

/// Opened by the test to let a [`gated_server`]'s answers go.
type Gate = std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>;

/// A local server that answers every request `{"waited": true}` only once the test opens the
/// gate (or after 30 s).
fn gated_server() -> (TestServer, Gate) {
    let released: Gate =
        std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let gate = released.clone();
    let server = TestServer::start(move |_| {
        let (open, cv) = &*gate;
        let open = open.lock().unwrap_or_else(|e| e.into_inner());
        let _ = cv
            .wait_timeout_while(open, Duration::from_secs(30), |open| !*open)
            .unwrap_or_else(|e| e.into_inner());
        Response::json(200, json!({ "waited": true }))
    });
    (server, released)
}

fn open_gate(gate: &Gate) {
    let (open, cv) = &**gate;
    *open.lock().unwrap_or_else(|e| e.into_inner()) = true;
    cv.notify_all();
}

/// A spec whose one tool, `wait`, calls a [`gated_server`]: a call the test can hold in flight.
fn held_call_spec(name: &str) -> (TestServer, Gate, support::TempDir, PathBuf) {
    let (server, released) = gated_server();
    let port = server.addr().port();
    let dir = support::temp_dir(name);
    let spec = dir.join("stop.yaml");
    std::fs::write(
        &spec,
        format!(
            "version: 1\nname: stop\ntools:\n  wait:\n    description: Answers once the test lets it.\n    kind: http\n    input: {{ type: object }}\n    request: {{ url: \"{}/wait\" }}\npolicy: {{ network: {{ allow_hosts: [\"127.0.0.1:{port}\"] }} }}\n",
            server.base_url()
        ),
    )
    .expect("spec");
    (server, released, dir, spec)
}

/// SIGTERM while a call is running lets it end (for up to a few seconds): its client gets the
/// result and the recording has it (the sessions used to end at once, the client got a bare
/// event stream, and the call was missing from `--record`).
#[test]
fn a_call_in_flight_at_sigterm_is_answered_and_recorded() {
    let (server, released, dir, spec) = held_call_spec("mcp-serve-stop-in-flight");
    let fixture = dir.join("session.json");
    let serve = HttpServe::start(&spec, &["--record", fixture.to_str().expect("utf-8")], &[]);
    let session = serve.session("2025-11-25");
    let headers = in_session(&session, "2025-11-25");
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "wait", "arguments": {} } })
    .to_string();
    let answer = std::thread::scope(|s| {
        let (serve, headers, body) = (&serve, &headers, &body);
        let answer = s.spawn(move || serve.exchange("POST", "/mcp", headers, body));
        assert_eq!(
            server.wait_for_requests(1, Duration::from_secs(30)).len(),
            1
        );
        let _ = Command::new("kill")
            .args(["-TERM", &serve.child.id().to_string()])
            .status();
        // The call ends after the signal has arrived, well within the time it is given.
        std::thread::sleep(Duration::from_millis(500));
        open_gate(&released);
        answer.join().expect("the call")
    });
    assert!(answer.contains(r#"\"waited\":true"#), "{answer}");
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
    let served = served_calls(&fixture);
    assert_eq!(served.len(), 1, "{served:#?}");
    assert_eq!(served[0]["request"]["body"]["name"], "wait");
    replay(&fixture, &spec).assert_success();
}

/// Over stdio too, SIGTERM lets a call still running end and be answered and recorded, and the
/// server exits although its client keeps stdin open (it waited for stdin to close, and the
/// call was missing from `--record`).
#[test]
fn stdio_sigterm_answers_the_call_in_flight_and_exits_with_stdin_open() {
    let (server, released, dir, spec) = held_call_spec("mcp-serve-stdio-stop");
    let fixture = dir.join("session.json");
    let mut child = support::toolrun()
        .arg("serve")
        .arg(&spec)
        .arg("--record")
        .arg(&fixture)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start toolrun serve");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    for m in [
        json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": { "name": "raw", "version": "1" } } }),
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": "wait", "arguments": {} } }),
    ] {
        writeln!(stdin, "{m}").expect("send");
    }
    stdin.flush().expect("flush");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        let _ = tx.send(out);
    });
    assert_eq!(
        server.wait_for_requests(1, Duration::from_secs(30)).len(),
        1
    );
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    // The call ends after the signal has arrived, well within the time it is given.
    std::thread::sleep(Duration::from_millis(500));
    open_gate(&released);
    // stdin stays open meanwhile: the server must exit on the signal alone.
    let out = rx.recv_timeout(Duration::from_secs(60));
    let _ = child.kill();
    let status = child.wait().expect("wait");
    drop(stdin);
    let out = out.expect("toolrun serve exits on SIGTERM although stdin is open");
    assert_eq!(status.code(), Some(0));
    let answer = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["id"] == 1)
        .unwrap_or_else(|| panic!("no answer to the call in {out}"));
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({ "waited": true })
    );
    assert_eq!(served_calls(&fixture).len(), 1);
    replay(&fixture, &spec).assert_success();
}

/// Calls that need nothing of the call's own stream are answered by toolrun without rmcp's
/// session machinery; a progress token sends the same call through rmcp. Both must answer
/// alike, whatever the tool gives: structured results, text, truncation, content items, tool
/// errors, refused arguments, calls that need a confirmation nobody can give, HTTP tools.
#[test]
fn calls_answered_without_rmcp_answer_as_rmcp_does() {
    let (_server, spec) = support::specs::direct_spec("mcp-serve-direct", "");
    let serve = HttpServe::start(spec.path(), &[], &[]);
    let session = serve.session("2025-11-25");
    let headers = in_session(&session, "2025-11-25");
    let calls = [
        ("lookup", json!({ "id": 1 })),
        ("lookup", json!({ "id": 2 })),
        ("lookup", json!({ "id": 3 })),
        ("lookup", json!({ "id": 4 })),
        ("lookup", json!({ "id": 5 })),
        ("lookup", json!({ "id": "not a number" })),
        ("picture", json!({})),
        ("refund", json!({ "id": 1 })),
        ("echo", json!({ "q": "hello" })),
        ("calc", json!({ "expression": "6 * 7" })),
        ("no_such_tool", json!({})),
    ];
    for (n, (name, arguments)) in calls.iter().enumerate() {
        let request = |id: usize, meta: Value| {
            json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": { "name": name, "arguments": arguments, "_meta": meta } })
            .to_string()
        };
        let direct = serve.exchange("POST", "/mcp", &headers, &request(2 * n, json!({})));
        let through_rmcp = serve.exchange(
            "POST",
            "/mcp",
            &headers,
            &request(2 * n + 1, json!({ "progressToken": n })),
        );
        let (a, b) = (messages(&direct), messages(&through_rmcp));
        assert_eq!(a.len(), 1, "{direct}");
        let b = b.last().unwrap_or_else(|| panic!("{through_rmcp}"));
        assert_eq!(a[0]["id"], 2 * n);
        assert_eq!(b["id"], 2 * n + 1);
        for part in ["result", "error"] {
            assert_eq!(
                a[0][part], b[part],
                "{name} {arguments}: {part}\n{direct}\n{through_rmcp}"
            );
        }
        if *name != "no_such_tool" {
            assert!(a[0]["result"]["content"].is_array(), "{direct}");
        }
    }
    // What the results say, so that the two agreeing on nothing would fail.
    let text = |r: &str| messages(r)[0]["result"]["content"][0]["text"].clone();
    let ask = |name: &str, arguments: Value| {
        let body = json!({ "jsonrpc": "2.0", "id": 99, "method": "tools/call",
            "params": { "name": name, "arguments": arguments } });
        serve.exchange("POST", "/mcp", &headers, &body.to_string())
    };
    assert_eq!(text(&ask("calc", json!({ "expression": "6 * 7" }))), "42");
    let echoed = ask("echo", json!({ "q": "direct" }));
    assert_eq!(text(&echoed), r#"{"q":"direct"}"#, "{echoed}");
    let refused = ask("refund", json!({ "id": 2 }));
    assert!(
        text(&refused).to_string().contains("needs_confirmation"),
        "{refused}"
    );
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

/// A call answered without rmcp that runs past a second becomes an event stream with an id to
/// come back with; the client hanging up does not cancel it: it ends, its result waits for the
/// client's `GET` with `Last-Event-ID`, and the recording has it.
#[test]
fn a_long_call_answered_without_rmcp_outlives_its_client() {
    let (server, released, dir, spec) = held_call_spec("mcp-serve-direct-long");
    let fixture = dir.join("session.json");
    let serve = HttpServe::start(&spec, &["--record", fixture.to_str().expect("utf-8")], &[]);
    let session = serve.session("2025-11-25");
    let headers = in_session(&session, "2025-11-25");
    let body = json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": { "name": "wait", "arguments": {} } })
    .to_string();
    let mut stream = serve.send("POST", "/mcp", &headers, &body, Duration::from_secs(10));
    // Read until the priming event has come, then hang up with the call still held.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("retry:") {
        let n = stream.read(&mut buf).expect("the priming event");
        assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    let away = String::from_utf8_lossy(&seen).to_string();
    assert!(
        away.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{away}"
    );
    drop(stream);
    let last = first_event_id(&away);
    open_gate(&released);
    let back = serve.exchange("GET", "/mcp", &resuming(&session, &last), "");
    let got = messages(&back);
    let result = got
        .iter()
        .find(|m| m["id"] == 5)
        .unwrap_or_else(|| panic!("{back}"));
    assert!(
        result["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("waited"),
        "{back}"
    );
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(served_calls(&fixture).len(), 1);
    replay(&fixture, &spec).assert_success();
    drop(server);
}

/// A `serve --record` recording (JSON Lines: a header, then a line an exchange as it happened)
/// as the fixture toolrun reads it as: the served calls, each session's in the order it admitted
/// them (`seq`), then the other exchanges, and the trace their entries make. Written out as
/// JSON, it is a fixture `toolrun replay` reads too.
fn recording(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("recording");
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let mut fixture: Value = serde_json::from_str(lines.next().expect("a header")).expect("JSON");
    assert_eq!(fixture["format"], "toolrun-session", "{fixture}");
    let (mut served, mut others) = (Vec::<Value>::new(), Vec::new());
    for line in lines {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            break; // cut short by a kill
        };
        match v["kind"].as_str() {
            Some("served") => served.push(v),
            Some("ended") => fixture["ended"] = v,
            _ => others.push(v),
        }
    }
    let mut places: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    for (i, c) in served.iter().enumerate() {
        places
            .entry(c["source"].as_str().unwrap_or_default().to_string())
            .or_default()
            .push(i);
    }
    let mut order: Vec<usize> = (0..served.len()).collect();
    for at in places.values() {
        let mut by_seq = at.clone();
        by_seq.sort_by_key(|&i| served[i]["seq"].as_u64());
        for (&place, &call) in at.iter().zip(&by_seq) {
            order[place] = call;
        }
    }
    let served: Vec<Value> = order.into_iter().map(|i| served[i].clone()).collect();
    let entries =
        |key: &str| -> Vec<Value> { served.iter().filter_map(|c| c.get(key).cloned()).collect() };
    let (results, errors) = (entries("tool_result"), entries("tool_error"));
    // Read as a fixture (the header's `format` would say otherwise).
    fixture.as_object_mut().map(|f| f.remove("format"));
    fixture["query"] = json!("");
    fixture["trace"] = json!({
        "format_version": 1, "status": "ok", "stop_reason": "session_ended", "query": "",
        "model": "mcp", "spec": { "name": fixture["spec"]["name"], "sha256": fixture["spec"]["sha256"] },
        "tool_call_count": results.len(), "tool_results": results, "tool_errors": errors,
        "steps": 0, "messages": [],
    });
    fixture["exchanges"] = Value::Array(served.into_iter().chain(others).collect());
    fixture
}

/// The `served` exchanges of a `serve --record` recording: the calls it recorded.
fn served_calls(fixture: &Path) -> Vec<Value> {
    let recorded = recording(fixture);
    recorded["exchanges"]
        .as_array()
        .expect("exchanges")
        .iter()
        .filter(|e| e["kind"] == "served")
        .cloned()
        .collect()
}

/// A client that hangs up on a call within its first second (the answer would have been one
/// JSON body) does not cancel it: it runs to its end and is recorded, and its `mcp_call` line
/// is written.
#[test]
fn a_call_whose_client_hangs_up_early_still_runs_to_its_end() {
    let (server, released, dir, spec) = held_call_spec("mcp-serve-hang-up-early");
    let fixture = dir.join("session.json");
    let events = dir.join("events.jsonl");
    let serve = HttpServe::start(
        &spec,
        &[
            "--record",
            fixture.to_str().expect("utf-8"),
            "--events",
            events.to_str().expect("utf-8"),
        ],
        &[],
    );
    let session = serve.session("2025-11-25");
    let body = json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": { "name": "wait", "arguments": {} } })
    .to_string();
    let headers = in_session(&session, "2025-11-25");
    let stream = serve.send("POST", "/mcp", &headers, &body, Duration::from_secs(10));
    // The call has reached its tool: hang up, then let the tool answer.
    assert_eq!(
        server.wait_for_requests(1, Duration::from_secs(30)).len(),
        1
    );
    drop(stream);
    std::thread::sleep(Duration::from_millis(100));
    open_gate(&released);
    let mut calls = Vec::new();
    for _ in 0..200 {
        calls = support::events_named(&events, "mcp_call");
        if !calls.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(calls.len(), 1, "the call ended and was logged");
    assert_eq!(calls[0]["is_error"], false, "{:?}", calls[0]);
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(served_calls(&fixture).len(), 1);
    replay(&fixture, &spec).assert_success();
}

/// A connection kept alive across requests, read by `Content-Length` or chunks.
struct KeepAlive {
    reader: BufReader<std::net::TcpStream>,
    authority: String,
}

impl KeepAlive {
    fn open(serve: &HttpServe) -> KeepAlive {
        let stream = std::net::TcpStream::connect(serve.authority()).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        KeepAlive {
            reader: BufReader::new(stream),
            authority: serve.authority().to_string(),
        }
    }

    /// POSTs `body` to /mcp with these headers; the status line and the body.
    fn post(&mut self, headers: &[(&str, &str)], body: &str) -> (String, String) {
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.authority,
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.reader
            .get_mut()
            .write_all(req.as_bytes())
            .expect("send");
        let mut status = String::new();
        self.reader.read_line(&mut status).expect("status line");
        let (mut length, mut chunked) = (0usize, false);
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).expect("header");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').unwrap_or((line, ""));
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
            if k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked") {
                chunked = true;
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                let mut size = String::new();
                self.reader.read_line(&mut size).expect("chunk size");
                let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0u8; n + 2];
                self.reader.read_exact(&mut chunk).expect("chunk");
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        } else {
            body.resize(length, 0);
            self.reader.read_exact(&mut body).expect("body");
        }
        (
            status.trim_end().to_string(),
            String::from_utf8_lossy(&body).into_owned(),
        )
    }
}

/// A `tools/call` message.
fn call_message(id: u64, name: &str, arguments: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": name, "arguments": arguments } })
    .to_string()
}

/// `initialize` in a JSON-RPC batch is refused (MCP: it comes alone): a batch of them opened a
/// session each, past `--max-sessions` (the room for one was made once a request), and ended
/// the sessions of the clients already there.
#[test]
fn initialize_in_a_batch_is_refused_and_the_session_cap_holds() {
    let serve = HttpServe::start(&example(), &["--max-sessions", "2"], &[]);
    let first = serve.session("2025-03-26");
    let second = serve.session("2025-03-26");
    let init = |id: usize| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": { "name": "flood", "version": "1" } } })
    };
    let batch = Value::Array((0..200).map(init).collect()).to_string();
    let response = serve.exchange("POST", "/mcp", &[], &batch);
    let answers = messages(&response);
    let answers = answers[0].as_array().cloned().unwrap_or(answers);
    assert_eq!(answers.len(), 200, "{response}");
    assert!(
        answers.iter().all(|a| a["error"]["code"] == -32600
            && a["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("may not be part of a batch"))),
        "{answers:#?}"
    );
    assert!(
        !response.to_ascii_lowercase().contains("mcp-session-id"),
        "{response}"
    );
    // The sessions already open are still there.
    let ping = json!({ "jsonrpc": "2.0", "id": 9, "method": "ping" }).to_string();
    for id in [&first, &second] {
        let answer = serve.exchange("POST", "/mcp", &in_session(id, "2025-03-26"), &ping);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

/// A request body that stops arriving is answered 408 within `--read-timeout`: it held the
/// connection 30 s whatever the flag said.
#[test]
fn a_stalled_request_body_ends_at_the_read_timeout() {
    let serve = HttpServe::start(&example(), &["--read-timeout", "1s"], &[]);
    let mut stream = std::net::TcpStream::connect(serve.authority()).expect("connect");
    // Well past 1 s, well short of 30 s: a hang, not a measurement.
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\":",
        serve.authority()
    );
    stream.write_all(head.as_bytes()).expect("half a body");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    let (code, _) = serve.stop();
    assert_eq!(code, 0);
}

/// While the server stops (a call still running), a new request on a connection still open is
/// answered 503 with a JSON-RPC error (it was HTTP 500 with plain text), and the call in flight
/// is answered.
#[test]
fn requests_while_the_server_stops_are_refused_with_503_and_a_json_rpc_error() {
    let (server, released, _dir, spec) = held_call_spec("mcp-serve-draining");
    let serve = HttpServe::start(&spec, &[], &[]);
    let session = serve.session("2025-11-25");
    let headers = in_session(&session, "2025-11-25");
    let mut open = KeepAlive::open(&serve);
    let ping = json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }).to_string();
    let (status, _) = open.post(&headers, &ping);
    assert!(status.contains(" 200 "), "{status}");
    std::thread::scope(|s| {
        let (serve, headers) = (&serve, &headers);
        let held = s.spawn(move || {
            serve.exchange("POST", "/mcp", headers, &call_message(2, "wait", json!({})))
        });
        assert_eq!(
            server.wait_for_requests(1, Duration::from_secs(30)).len(),
            1
        );
        let _ = Command::new("kill")
            .args(["-TERM", &serve.child.id().to_string()])
            .status();
        // The server stops listening first: then it is stopping.
        for _ in 0..300 {
            if std::net::TcpStream::connect(serve.authority()).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let (status, body) = open.post(headers, &call_message(3, "wait", json!({})));
        assert!(status.contains(" 503 "), "{status}\n{body}");
        let error: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
        assert_eq!(error["id"], 3, "{error}");
        assert_eq!(error["error"]["code"], -32000, "{error}");
        assert!(
            error["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("shutting down")),
            "{error}"
        );
        open_gate(&released);
        let answer = held.join().expect("the held call");
        assert!(answer.contains(r#"\"waited\":true"#), "{answer}");
    });
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(server.hits("/wait"), 1, "the refused call never ran");
}

/// A call still running when the shutdown's grace is over is cut off: its client is told, the
/// recording has it marked cut off (it had neither), and the recording replays.
#[test]
fn a_call_cut_off_by_shutdown_is_answered_and_recorded_as_cut_off() {
    let (server, released, dir, spec) = held_call_spec("mcp-serve-cut-off");
    let fixture = dir.join("session.jsonl");
    let serve = HttpServe::start(&spec, &["--record", fixture.to_str().expect("utf-8")], &[]);
    let session = serve.session("2025-11-25");
    let headers = in_session(&session, "2025-11-25");
    let answer = std::thread::scope(|s| {
        let (serve, headers) = (&serve, &headers);
        let held = s.spawn(move || {
            serve.exchange("POST", "/mcp", headers, &call_message(1, "wait", json!({})))
        });
        assert_eq!(
            server.wait_for_requests(1, Duration::from_secs(30)).len(),
            1
        );
        let _ = Command::new("kill")
            .args(["-TERM", &serve.child.id().to_string()])
            .status();
        held.join().expect("the held call")
    });
    // The gate opens only once the server has given up on the call.
    open_gate(&released);
    assert!(answer.contains("stopped before the call ended"), "{answer}");
    assert!(answer.contains(r#""isError":true"#), "{answer}");
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
    let served = served_calls(&fixture);
    assert_eq!(served.len(), 1, "{served:#?}");
    assert!(
        served[0]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("cut off")),
        "{served:#?}"
    );
    assert!(recording(&fixture)["ended"].is_object(), "a clean stop");
    replay(&fixture, &spec).assert_success();
}

/// `serve --record` streams its recording as it goes: a server killed (SIGKILL) after 10,000
/// calls leaves a recording of every call it answered, which replays. (Recording cost more
/// each call, everything was held until shutdown and lost on SIGKILL, and replay was
/// quadratic.)
#[test]
fn a_killed_recording_server_leaves_a_recording_of_its_calls_that_replays() {
    const CALLS: u64 = 10_000;
    let dir = support::temp_dir("mcp-serve-killed-recording");
    let spec = dir.join("calc.yaml");
    std::fs::write(
        &spec,
        "version: 1\nname: calc\ntools:\n  calculate:\n    description: Arithmetic.\n    kind: builtin\n    builtin: calculator\nserve: { max_tool_calls: 100000 }\n",
    )
    .expect("spec");
    let fixture = dir.join("calls.jsonl");
    let mut serve = HttpServe::start(&spec, &["--record", fixture.to_str().expect("utf-8")], &[]);
    let session = serve.session("2025-11-25");
    let headers = in_session(&session, "2025-11-25");
    let mut open = KeepAlive::open(&serve);
    for i in 1..=CALLS {
        let arguments = json!({ "expression": format!("{i}+1") });
        let (status, body) = open.post(&headers, &call_message(i, "calculate", arguments));
        assert!(status.contains(" 200 "), "call {i}: {status}\n{body}");
        if i == 1 || i == CALLS {
            assert!(body.contains(&format!("{}", i + 1)), "{body}");
        }
    }
    serve.child.kill().expect("SIGKILL");
    let _ = serve.child.wait();
    let recorded = recording(&fixture);
    assert!(recorded["ended"].is_null(), "killed: no end line");
    let served = served_calls(&fixture);
    assert_eq!(served.len() as u64, CALLS);
    assert_eq!(recorded["trace"]["tool_call_count"], CALLS);
    // A generous bound that only a replay gone quadratic again would reach.
    let mut cmd = support::toolrun();
    cmd.arg("replay").arg(&fixture).arg("--spec").arg(&spec);
    let out = support::run_with_timeout(&mut cmd, None, Duration::from_secs(600));
    out.assert_success();
    assert!(out.stdout.contains("1 passed, 0 failed"), "{out:?}");
}

/// A recording `serve` cannot write is a failure (exit 1, as `run`'s fixture), not a usage error
/// (2), and nothing is served without it.
#[test]
fn serve_exits_1_when_its_recording_cannot_be_written() {
    let dir = support::temp_dir("mcp-serve-unwritable");
    // A name longer than the file system allows: the folder is fine, the file cannot be made.
    let fixture = dir.join(format!("{}.jsonl", "x".repeat(300)));
    let mut cmd = support::toolrun();
    cmd.arg("serve")
        .arg(example())
        .args(["--http", "127.0.0.1:0", "--record"])
        .arg(&fixture)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut code = None;
    for _ in 0..300 {
        if let Some(status) = child.try_wait().expect("wait") {
            code = status.code();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if code.is_none() {
        // It served instead: stop it and see how it ends.
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        code = child.wait().expect("wait").code();
    }
    let mut stderr = String::new();
    let _ = child
        .stderr
        .take()
        .map(|mut e| e.read_to_string(&mut stderr));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("cannot write the recording"), "{stderr}");
    assert!(!stderr.contains("serving"), "{stderr}");
}

/// Whether `pid` has a handler for SIGTERM (`SigCgt` in `/proc/PID/status`, bit 15).
#[cfg(target_os = "linux")]
fn catches_sigterm(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (15 - 1)) != 0)
}

/// A stdio `serve` listens for SIGTERM before its client initializes, and ends cleanly on it:
/// the handler used to be registered only once the session ran, so a SIGTERM before then took
/// the default action (and one between the HTTP address's announcement and the first poll did
/// too, leaving the stdio servers it had started behind).
#[cfg(target_os = "linux")]
#[test]
fn sigterm_ends_a_stdio_serve_whose_client_has_not_initialized() {
    let mut child = support::toolrun()
        .arg("serve")
        .arg(example())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    let pid = child.id();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !catches_sigterm(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "serve never listened for SIGTERM while waiting for initialize"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve did not end on SIGTERM before initialize");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    let _ = child
        .stderr
        .take()
        .map(|mut e| e.read_to_string(&mut stderr));
    assert_eq!(status.code(), Some(0), "{status:?}: {stderr}");
}

/// A client that writes all its requests and closes stdin at once gets every answer: the end
/// of input waits for the calls still running. rmcp ended its session there and gave them 5 s,
/// dropping every answer later than that, so calls that take 6 s lost them all.
#[test]
fn stdio_answers_every_request_read_before_the_end_of_input() {
    let spec = support::temp_file(
        "mcp-serve-stdio-drain",
        "slow.yaml",
        "version: 1\nname: slow\ntools:\n  slow:\n    description: Answers after a while.\n    kind: mock\n    input: { type: object, properties: { n: { type: integer } } }\n    faults: [{ delay: 6s }]\n    responses:\n      - result: done\nserve: { max_tool_calls: 5000 }\n",
    );
    let requests = 2000;
    let initialize = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    // Each call's own arguments: the same call repeated would meet loop detection instead.
    let calls = (1..=requests).map(|id| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": "slow", "arguments": { "n": id } } })
    });
    let stdin: String = [initialize, initialized]
        .into_iter()
        .chain(calls)
        .map(|l| format!("{l}\n"))
        .collect();
    // All of them running when stdin ends (the default --max-requests would read them in turns).
    let out = support::run_with_stdin(
        support::toolrun()
            .arg("serve")
            .arg(spec.path())
            .args(["--max-requests", "2000"]),
        &stdin,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut answered: Vec<i64> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["result"]["content"][0]["text"] == "done")
        .filter_map(|m| m["id"].as_i64())
        .collect();
    answered.sort_unstable();
    assert_eq!(
        answered,
        (1..=requests).collect::<Vec<i64>>(),
        "every call answered with its result\n{}",
        out.stderr
    );
}
