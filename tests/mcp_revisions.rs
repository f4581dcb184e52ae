//! Which MCP revision a `kind: mcp` entry speaks: an HTTP server is asked `server/discover`
//! (2026-07-28) and one that refuses it as a 2025-11-25 server does gets `initialize`; the
//! entry's `protocol:` pins either. Against a server on 127.0.0.1 that speaks only 2025-11-25,
//! through the binary; the recording replays offline. And a stdio server (the Python SDK's)
//! pinned to 2026-07-28.

#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::{json, Value};
use std::path::Path;
use support::{Response, TestServer};

/// A server of 2025-11-25 as the official TypeScript SDK's stateful one answers: a request
/// before `initialize` (or without its session) is a 400 with JSON-RPC error -32000 and no id.
fn legacy_server() -> TestServer {
    TestServer::start(|req| {
        let Some(body) = req.json() else {
            return Response::status(405);
        };
        let id = body["id"].clone();
        let method = body["method"].as_str().unwrap_or_default();
        if method != "initialize" && req.header("mcp-session-id") != Some("s-1") {
            return Response::json(
                400,
                json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32000, "message": "Bad Request: Server not initialized" } }),
            );
        }
        let result = match method {
            "initialize" => {
                json!({ "protocolVersion": "2025-11-25", "capabilities": { "tools": {} }, "serverInfo": { "name": "legacy", "version": "1" } })
            }
            "tools/list" => {
                json!({ "tools": [{ "name": "echo", "inputSchema": { "type": "object", "properties": { "text": { "type": "string" } } } }] })
            }
            "tools/call" => {
                json!({ "content": [{ "type": "text", "text": body["params"]["arguments"]["text"] }] })
            }
            _ if id.is_null() => return Response::status(202),
            _ => json!({}),
        };
        Response::json(200, json!({ "jsonrpc": "2.0", "id": id, "result": result }))
            .header("Mcp-Session-Id", "s-1")
    })
}

fn spec(dir: &Path, url: &str, protocol: &str) -> std::path::PathBuf {
    let protocol = match protocol {
        "" => String::new(),
        p => format!("    protocol: \"{p}\"\n"),
    };
    support::write(
        dir,
        "legacy.yaml",
        &format!(
            r#"version: 1
name: legacy
tools:
  legacy:
    kind: mcp
    url: {url}
    timeout: 60s
{protocol}    tools: [echo]
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: echo, arguments: {{ text: hi }} }}]
          - answer: "{{{{ last.result }}}}"
"#
        ),
    )
}

/// The requests with a JSON-RPC body (not the session's stream, not its DELETE).
fn posts(server: &TestServer) -> Vec<support::Request> {
    let mut all = server.requests();
    all.retain(|r| r.json().is_some());
    all
}

fn methods(server: &TestServer) -> Vec<(String, Option<String>)> {
    posts(server)
        .iter()
        .filter_map(|r| {
            let body = r.json()?;
            let method = body["method"].as_str().map(str::to_string);
            let version = r.header("mcp-protocol-version").map(str::to_string);
            Some((method.unwrap_or_default(), version))
        })
        .collect()
}

#[test]
fn a_2025_11_25_server_refusing_discovery_gets_initialize_and_the_recording_replays() {
    let server = legacy_server();
    let dir = support::temp_dir("mcp-revisions-fallback");
    let spec = spec(&dir, &server.url("/mcp"), "");
    let fixture = dir.join("legacy.json");
    let events = dir.join("events.jsonl");
    let mut cmd = support::toolrun();
    cmd.arg("run")
        .arg(&spec)
        .args(["--query", "echo", "--json"]);
    cmd.arg("--record")
        .arg(&fixture)
        .arg("--events")
        .arg(&events);
    let out = support::run(&mut cmd);
    out.assert_success();
    assert_eq!(out.json()["final_output"], "hi", "{out:?}");
    let v = |s: &str| Some(s.to_string());
    assert_eq!(
        methods(&server),
        [
            ("server/discover".into(), v("2026-07-28")),
            ("initialize".into(), None),
            ("notifications/initialized".into(), v("2025-11-25")),
            ("tools/list".into(), v("2025-11-25")),
            ("tools/call".into(), v("2025-11-25")),
        ]
    );
    let legacy = support::events_named(&events, "mcp_legacy_server");
    assert_eq!(legacy.len(), 1, "{legacy:?}");
    assert!(
        legacy[0]["why"].as_str().unwrap().contains("-32000"),
        "{legacy:?}"
    );
    let connected = support::events_named(&events, "mcp_connected");
    assert_eq!(connected[0]["protocol"], "2025-11-25");
    // Only the 2026-07-28 request carries the headers of that revision.
    let requests = posts(&server);
    assert_eq!(requests[0].header("mcp-method"), Some("server/discover"));
    assert!(requests[1..]
        .iter()
        .all(|r| r.header("mcp-method").is_none()));
    let call: Value = requests[4].json().unwrap();
    assert_eq!(call["params"]["_meta"], json!({ "progressToken": 4 }));

    drop(server);
    let replayed = support::run(support::toolrun().arg("replay").arg(&fixture));
    replayed.assert_success();
    assert!(
        replayed.stdout.contains("1 passed, 0 failed"),
        "{replayed:?}"
    );
}

#[test]
fn protocol_pins_the_revision_either_way() {
    let server = legacy_server();
    let dir = support::temp_dir("mcp-revisions-pinned");
    let run = |protocol: &str| {
        let spec = spec(&dir, &server.url("/mcp"), protocol);
        let mut cmd = support::toolrun();
        cmd.arg("run")
            .arg(&spec)
            .args(["--query", "echo", "--json"]);
        support::run(&mut cmd)
    };
    // An older revision: `initialize` at it, never `server/discover`.
    let out = run("2025-06-18");
    out.assert_success();
    let sent = methods(&server);
    assert_eq!(sent[0], ("initialize".to_string(), None), "{sent:?}");
    assert!(sent.iter().all(|(m, _)| m != "server/discover"), "{sent:?}");
    let init: Value = posts(&server)[0].json().unwrap();
    assert_eq!(init["params"]["protocolVersion"], "2025-06-18");

    // 2026-07-28: no fallback; the server's refusal is the run's error.
    let before = posts(&server).len();
    let out = run("2026-07-28");
    out.assert_code(1);
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "mcp_error", "{out:?}");
    let why = trace["error"].as_str().unwrap();
    assert!(
        why.contains("does not speak MCP 2026-07-28 (`protocol:` of its entry)"),
        "{why}"
    );
    let after: Vec<_> = methods(&server).split_off(before);
    assert_eq!(
        after,
        [(
            "server/discover".to_string(),
            Some("2026-07-28".to_string())
        )]
    );
}

/// A stdio server gets `initialize` unless its entry pins 2026-07-28: then `server/discover`
/// and no handshake at all (the Python SDK's server speaks both), recorded and replayed.
#[test]
fn a_stdio_server_pinned_to_2026_07_28_is_discovered_and_replays() {
    let dir = support::temp_dir("mcp-revisions-stdio");
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let python = python::python();
    let text = support::specs::stdio_probe_spec(
        (&python, &python::script("stdio_server.py"), &logs),
        "echo",
        "          - tool_calls: [{ name: echo, arguments: { text: hi } }]\n          - answer: \"{{ last.result.result }}\"",
    )
    .replace("    timeout: 30s", "    timeout: 60s\n    protocol: \"2026-07-28\"");
    let spec = support::write(&dir, "probe.yaml", &text);
    let fixture = dir.join("probe.json");
    let mut cmd = support::toolrun();
    cmd.env("PROBE_TOKEN", "probe-token-0123456789")
        .arg("run")
        .arg(&spec)
        .args(["--query", "echo", "--json", "--allow-exec"])
        .arg(&python)
        .arg("--record")
        .arg(&fixture);
    let out = support::run(&mut cmd);
    out.assert_success();
    assert_eq!(out.json()["final_output"], "hi", "{out:?}");
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let bodies: Vec<&Value> = recorded["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["request"]["body"])
        .collect();
    let methods: Vec<&Value> = bodies.iter().map(|b| &b["method"]).collect();
    assert_eq!(methods, ["server/discover", "tools/list", "tools/call"]);
    for b in &bodies {
        let meta = &b["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
    }

    let replayed = support::run(support::toolrun().arg("replay").arg(&fixture));
    replayed.assert_success();
    assert!(
        replayed.stdout.contains("1 passed, 0 failed"),
        "{replayed:?}"
    );

    // Recorded by another toolrun version: the version every request's `_meta` names is not
    // compared, so an upgrade is not a divergence.
    let mut older = recorded.clone();
    for e in older["exchanges"].as_array_mut().unwrap() {
        e["request"]["body"]["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["version"] =
            json!("0.0.1");
    }
    let older_path = dir.join("older.json");
    std::fs::write(&older_path, serde_json::to_string_pretty(&older).unwrap()).unwrap();
    let replayed = support::run(support::toolrun().arg("replay").arg(&older_path));
    replayed.assert_success();
    assert!(
        replayed.stdout.contains("1 passed, 0 failed"),
        "{replayed:?}"
    );
}
