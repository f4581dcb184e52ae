//! `kind: mcp` tools against a real MCP server toolrun did not write: the official Python SDK's
//! MCPServer (`tests/mcp/notes_server.py`) over streamable HTTP on 127.0.0.1, started per test.
//! Runs go through the binary with a scripted model; fixtures are then replayed offline.

#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use support::specs::{notes_spec as spec, notes_spec_at};
use support::{run, toolrun, write};

const SECRET: &str = "notes-key-5b0d1e9a7c";

/// The Python notes server; killed when dropped.
struct NotesServer {
    child: Child,
    port: u16,
    headers_log: PathBuf,
}

impl NotesServer {
    fn start(dir: &Path) -> NotesServer {
        NotesServer::start_with(dir, &[])
    }

    /// With these environment variables (`NOTES_REFUSE_DELETE`, `NOTES_ANNOTATED`).
    fn start_with(dir: &Path, env: &[(&str, &str)]) -> NotesServer {
        let headers_log = dir.join("headers.jsonl");
        let mut child = Command::new(python::python())
            .arg(python::script("notes_server.py"))
            .arg(&headers_log)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the notes server");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        BufReader::new(stdout).read_line(&mut line).expect("port");
        let port = line.trim().parse().unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("the notes server did not print its port: {line:?}")
        });
        NotesServer {
            child,
            port,
            headers_log,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The headers of every request the server received, in order.
    fn received(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .map(|r| r["headers"].clone())
            .collect()
    }

    /// The method and status of the last request the server answered.
    fn last(&self) -> (Value, Value) {
        let log = self.requests();
        let last = log.last().cloned().unwrap_or_default();
        (last["method"].clone(), last["status"].clone())
    }

    /// `{method, path, headers, status}` of every request the server answered, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.headers_log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("json line"))
            .collect()
    }
}

impl Drop for NotesServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const TOOLS: &str = r#"      - search_notes
      - name: add_note
        as: remember
        description: Remembers a note for later.
      - delete_note"#;

const TURNS: &str = r#"          - tool_calls: [{ name: search_notes, arguments: { query: milk } }]
          - tool_calls: [{ name: remember, arguments: { title: plan, text: ship it } }]
          - tool_calls: [{ name: delete_note, arguments: { title: nothing-here } }]
          - answer: "{{ results[0].result.hits[0].title }}; {{ results[1].result.result }}; {{ results[2].error.kind }}""#;

fn run_notes(spec: &Path, extra: &[&str]) -> support::Output {
    run(toolrun()
        .env("NOTES_KEY", SECRET)
        .arg("run")
        .arg(spec)
        .args(["--query", "what do I need to buy?"])
        .args(extra))
}

/// The Python SDK's server speaks 2026-07-28: toolrun asks `server/discover` (no `initialize`,
/// no session), every request carries its `_meta` and the `Mcp-Method`/`Mcp-Name` headers, a
/// tool that asks its user is answered as the entry's `elicitation:` says in a retry that
/// echoes the request state, and the recording replays offline.
#[test]
fn a_2026_07_28_server_is_discovered_and_its_input_required_answered_then_replay_offline() {
    let dir = support::temp_dir("mcp-client-2026");
    let server = NotesServer::start_with(&dir, &[("NOTES_ELICIT", "1")]);
    let turns = r#"          - tool_calls: [{ name: search_notes, arguments: { query: milk } }]
          - tool_calls: [{ name: archive_notes, arguments: {} }]
          - answer: "{{ results[1].result.result }}""#;
    let text = notes_spec_at(
        &server.url(),
        "",
        "      - search_notes\n      - archive_notes",
        turns,
    )
    .replace(
        "    timeout: 60s",
        "    timeout: 60s\n    elicitation: defaults",
    );
    let spec_path = write(&dir, "notes.yaml", &text);
    let fixture = dir.join("notes.json");
    let events = dir.join("events.jsonl");
    let out = run_notes(
        &spec_path,
        &[
            "--json",
            "--record",
            fixture.to_str().unwrap(),
            "--events",
            events.to_str().unwrap(),
        ],
    );
    out.assert_success();
    assert_eq!(out.json()["final_output"], "archived 2 notes");
    let connected = support::events_named(&events, "mcp_connected");
    assert_eq!(connected[0]["protocol"], "2026-07-28", "{connected:?}");
    assert_eq!(connected[0]["session"], Value::Null, "{connected:?}");
    let asked = support::events_named(&events, "mcp_server_request");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["method"], "elicitation/create");
    assert_eq!(
        asked[0]["answer"],
        json!({ "action": "accept", "content": { "sure": true } })
    );

    // Only POSTs: no session, so no stream of its own and nothing to end.
    let requests = server.requests();
    assert!(
        requests.iter().all(|r| r["method"] == "POST"),
        "{requests:#?}"
    );
    for r in &requests {
        let headers = &r["headers"];
        assert_eq!(headers["mcp-protocol-version"], "2026-07-28", "{headers:#}");
        assert_eq!(headers["mcp-session-id"], Value::Null, "{headers:#}");
        assert_eq!(headers["x-api-key"], SECRET, "{headers:#}");
    }
    let methods: Vec<&Value> = requests
        .iter()
        .map(|r| &r["headers"]["mcp-method"])
        .collect();
    assert_eq!(
        methods,
        [
            "server/discover",
            "tools/list",
            "tools/call",
            "tools/call",
            "tools/call"
        ]
    );
    assert_eq!(requests[4]["headers"]["mcp-name"], "archive_notes");

    let fixture_text = std::fs::read_to_string(&fixture).unwrap();
    assert!(
        !fixture_text.contains(SECRET),
        "the secret leaked into the fixture"
    );
    let recorded: Value = serde_json::from_str(&fixture_text).unwrap();
    let bodies: Vec<&Value> = recorded["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["request"]["body"])
        .collect();
    let meta = &bodies[1]["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "toolrun"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({ "elicitation": {} })
    );
    // The retry: a new id, the answer under the server's key, its state as it came.
    let (first, retry) = (bodies[3], bodies[4]);
    assert_ne!(first["id"], retry["id"]);
    assert_eq!(first["params"]["inputResponses"], Value::Null);
    let responses = retry["params"]["inputResponses"].as_object().unwrap();
    assert_eq!(responses.len(), 1, "{retry:#}");
    assert_eq!(
        responses.values().next().unwrap(),
        &json!({ "action": "accept", "content": { "sure": true } })
    );
    let asked = &recorded["exchanges"][3]["response"]["body"]["result"];
    assert_eq!(asked["resultType"], "input_required", "{asked:#}");
    assert!(asked["requestState"].is_string(), "{asked:#}");
    assert_eq!(retry["params"]["requestState"], asked["requestState"]);

    // Offline: the server is gone, the fixture answers everything.
    drop(server);
    let replayed = run(toolrun().arg("replay").arg(&fixture));
    replayed.assert_success();
    assert!(
        replayed.stdout.contains("1 passed, 0 failed"),
        "{replayed:?}"
    );
}

#[test]
fn remote_renamed_and_failing_tools_run_with_a_masked_secret_header_then_replay_offline() {
    let dir = support::temp_dir("mcp-client-run");
    let server = NotesServer::start(&dir);
    let spec_path = write(&dir, "notes.yaml", &spec(&server.url(), TOOLS, TURNS));
    let fixture = dir.join("notes.json");
    let trace_path = dir.join("trace.json");
    let out = run_notes(
        &spec_path,
        &[
            "--json",
            "--record",
            fixture.to_str().unwrap(),
            "--trace",
            trace_path.to_str().unwrap(),
        ],
    );
    out.assert_success();
    let trace = out.json();
    assert_eq!(
        trace["final_output"],
        "groceries; added plan; execution_error"
    );
    let results = trace["tool_results"].as_array().unwrap();
    assert_eq!(
        results.iter().map(|r| &r["name"]).collect::<Vec<_>>(),
        ["search_notes", "remember", "delete_note"]
    );
    // JSON sent as text stays JSON; structured content is the result as it is.
    assert_eq!(
        results[0]["result"]["hits"][0],
        json!({ "title": "groceries", "text": "milk, eggs, coffee" })
    );
    assert_eq!(results[1]["result"], json!({ "result": "added plan" }));
    // `isError: true` is a tool error the model sees, not a crash.
    let errors = trace["tool_errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0]["name"], "delete_note");
    assert_eq!(errors[0]["kind"], "execution_error");
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap()
            .contains("no note titled 'nothing-here'"),
        "{errors:#?}"
    );
    // The model was offered the server's tools under the spec's names and descriptions.
    assert_eq!(trace["steps"], 4);

    // The secret reached the server on every request and nothing toolrun wrote.
    let received = server.received();
    assert!(received.len() >= 6, "{received:#?}");
    for headers in &received {
        assert_eq!(headers["x-api-key"], SECRET, "{headers:#}");
    }
    let fixture_text = std::fs::read_to_string(&fixture).unwrap();
    let trace_text = std::fs::read_to_string(&trace_path).unwrap();
    for (what, text) in [
        ("stdout", &out.stdout),
        ("stderr", &out.stderr),
        ("fixture", &fixture_text),
        ("trace", &trace_text),
    ] {
        assert!(!text.contains(SECRET), "the secret leaked into {what}");
    }

    // The fixture holds the MCP exchanges: initialize, initialized, tools/list, three calls.
    let recorded: Value = serde_json::from_str(&fixture_text).unwrap();
    let exchanges = recorded["exchanges"].as_array().unwrap();
    let methods: Vec<&str> = exchanges
        .iter()
        .map(|e| {
            assert_eq!(e["kind"], "mcp");
            assert_eq!(e["source"], "notes");
            assert_eq!(e["request"]["headers"]["x-api-key"], "***");
            e["request"]["body"]["method"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "tools/call",
            "tools/call"
        ]
    );
    assert_eq!(
        exchanges[4]["request"]["body"]["params"],
        json!({ "name": "add_note", "arguments": { "title": "plan", "text": "ship it" }, "_meta": { "progressToken": 4 } })
    );

    // Offline: the server is gone, the fixture answers everything.
    drop(server);
    let replayed = run(toolrun().arg("replay").arg(&fixture));
    replayed.assert_success();
    assert!(
        replayed.stdout.contains("1 passed, 0 failed"),
        "{replayed:?}"
    );
}

#[test]
fn offline_tests_refuse_live_mcp_and_replay_divergence_is_a_diff() {
    let dir = support::temp_dir("mcp-client-offline");
    let server = NotesServer::start(&dir);
    let url = server.url();
    let tests = r#"
tests:
  - name: recorded
    query: what do I need to buy?
    fixture: recorded.json
    expect: { status: ok, tool_calls: [search_notes, remember, delete_note] }
  - name: live
    query: what do I need to buy?
"#;
    let spec_path = write(&dir, "notes.yaml", &(spec(&url, TOOLS, TURNS) + tests));
    run_notes(
        &spec_path,
        &["--record", dir.join("recorded.json").to_str().unwrap()],
    )
    .assert_success();
    drop(server);

    let out = run(toolrun().arg("test").arg(&spec_path));
    out.assert_code(1);
    assert!(out.stdout.contains("PASS notes::recorded"), "{out:?}");
    assert!(out.stdout.contains("FAIL notes::live"), "{out:?}");
    assert!(
        out.stdout
            .contains("offline: tool `notes` would reach the network (POST http://127.0.0.1:"),
        "{out:?}"
    );
    assert!(out.stdout.contains("1 passed, 1 failed"), "{out:?}");

    // The model now asks the server something else: the replay names the differing field.
    let changed = spec(&url, TOOLS, &TURNS.replace("query: milk", "query: eggs")) + tests;
    write(&dir, "notes.yaml", &changed);
    let out = run(toolrun()
        .arg("test")
        .arg(&spec_path)
        .args(["--filter", "recorded"]));
    out.assert_code(1);
    assert!(
        out.stdout
            .contains("/body/params/arguments/query: expected \"milk\", got \"eggs\""),
        "{out:?}"
    );
    assert!(out.stdout.contains("mcp request from `notes`"), "{out:?}");
}

#[test]
fn a_missing_tool_or_a_changed_pinned_schema_stops_the_run_before_the_model() {
    let dir = support::temp_dir("mcp-client-mismatch");
    let server = NotesServer::start(&dir);
    let url = server.url();
    let one_call = "          - tool_calls: [{ name: search_notes, arguments: { query: milk } }]\n          - answer: done";

    let missing = write(
        &dir,
        "missing.yaml",
        &spec(&url, "      - search_notes\n      - serch_notes", one_call),
    );
    let out = run_notes(&missing, &["--json"]);
    out.assert_code(1);
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "mcp_error");
    assert_eq!(trace["status"], "failed");
    assert_eq!(trace["steps"], 0, "the model was called");
    let why = trace["error"].as_str().unwrap();
    assert!(why.contains("has no tool `serch_notes`"), "{why}");
    assert!(why.contains("search_notes"), "{why}");
    assert!(out.stderr.contains("mcp_error"), "{out:?}");

    // The schema the server lists, pinned: the run goes ahead.
    let pinned = r#"      - name: search_notes
        input:
          type: object
          title: search_notesArguments
          properties: { query: { title: Query, type: string } }
          required: [query]"#;
    let ok = write(&dir, "pinned.yaml", &spec(&url, pinned, one_call));
    run_notes(&ok, &[]).assert_success();

    // Pinned differently: a clear error naming the difference, before the model is called.
    let changed = pinned.replace(
        "properties: { query: { title: Query, type: string } }",
        "properties: { query: { title: Query, type: string }, limit: { type: integer } }",
    );
    let bad = write(&dir, "changed.yaml", &spec(&url, &changed, one_call));
    let out = run_notes(&bad, &["--json"]);
    out.assert_code(1);
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "mcp_error");
    assert_eq!(trace["steps"], 0);
    let why = trace["error"].as_str().unwrap();
    assert!(why.contains("differs from the one pinned"), "{why}");
    assert!(why.contains("/properties/limit: expected"), "{why}");
    // The session the check refused is ended at once.
    assert_eq!(server.last(), (json!("DELETE"), json!(200)));
}

#[test]
fn check_validates_mcp_tools_offline() {
    let dir = support::temp_dir("mcp-client-check");
    // Nothing listens: `check` must not try.
    let port = support::refused_port();
    let good = spec(
        &format!("http://127.0.0.1:{port}/mcp"),
        TOOLS,
        "          - answer: hi",
    ) + "policy:\n  confirm: [remember]\n  network: { allow_hosts: [\"127.0.0.1\"] }\n";
    let path = write(&dir, "good.yaml", &good);
    let out = run(toolrun().arg("check").arg(&path).arg("--deny-warnings"));
    out.assert_success();

    let bad = r#"version: 1
name: bad
tools:
  notes:
    kind: mcp
    url: "https://{{ secrets.HOST }}/mcp"
    tools: [search_notes]
  other:
    kind: mcp
    url: https://mcp.example.com/mcp
    headers: { X-Trace: "{{ args.q }}" }
    tools:
      - { name: search_notes, as: find, inputs: {} }
      - { name: search_notes }
  third:
    kind: mcp
    url: https://mcp.example.com/mcp
    request: { url: x }
    tools: [find]
policy:
  network: { allow_hosts: [api.example.com] }
models:
  m: { kind: scripted, scripts: [{ turns: [{ answer: hi }] }] }
"#;
    let path = write(&dir, "bad.yaml", bad);
    let out = run(toolrun().arg("check").arg(&path).args(["--format", "json"]));
    out.assert_code(1);
    let text = out.stdout.clone();
    for needle in [
        "the URL of an `mcp` tool is not a template",
        "unknown key `inputs`",
        "remote tool `search_notes` is listed twice",
        "`request` is not a field of a `mcp` tool",
        "tool `find` is declared twice",
        "calls host `mcp.example.com`, which `policy.network.allow_hosts` does not list",
        "template reads `args`, which is not available here",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in {text}");
    }
}

#[test]
fn echoed_secrets_are_masked_long_results_cut_and_slow_calls_time_out() {
    let dir = support::temp_dir("mcp-client-guards");
    let server = NotesServer::start(&dir);
    let tools = "      - whoami\n      - search_notes";
    let turns = r#"          - tool_calls: [{ name: whoami, arguments: {} }]
          - tool_calls: [{ name: search_notes, arguments: { query: e } }]
          - tool_calls: [{ name: slow_search, arguments: { query: x } }]
          - answer: "{{ results[0].result.result }} / {{ results[2].error.kind }}""#;
    // The slow tool (3 s) has an entry of its own whose calls time out after 1 s; connecting
    // to it, and the other calls, keep bounds that only catch a hang: a loaded CI machine's
    // Python server can take over a second to answer `initialize`.
    let slow = format!(
        "  slow:\n    kind: mcp\n    url: {}\n    headers: {{ X-Api-Key: \"{{{{ secrets.NOTES_KEY }}}}\" }}\n    timeout: 1s\n    startup_timeout: 60s\n    tools:\n      - slow_search\nmodels:",
        server.url()
    );
    let text = spec(&server.url(), tools, turns).replacen("models:", &slow, 1)
        + "limits:\n  max_tool_output_chars: 40\n";
    let spec_path = write(&dir, "guards.yaml", &text);
    let out = run_notes(&spec_path, &["--json"]);
    out.assert_success();
    assert!(!out.stdout.contains(SECRET) && !out.stderr.contains(SECRET));
    let trace = out.json();
    // The server echoed the key; the model and the trace see the mask.
    assert_eq!(trace["final_output"], "you called with key *** / timeout");
    let observations: Vec<&str> = trace["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(observations.len(), 3, "{observations:#?}");
    assert!(
        observations[1].contains("[truncated: "),
        "{observations:#?}"
    );
    assert_eq!(trace["tool_errors"][0]["kind"], "timeout", "{trace:#}");

    // One call, without a model: `toolrun call` connects on its own.
    let out = run(toolrun()
        .env("NOTES_KEY", SECRET)
        .arg("call")
        .arg(&spec_path)
        .arg("whoami")
        .args(["--args", "{}"]));
    out.assert_success();
    assert!(out.stdout.contains("you called with key ***"), "{out:?}");
    assert!(!out.stdout.contains(SECRET) && !out.stderr.contains(SECRET));
}

/// The official Python client drives `toolrun serve SPEC` over stdio through `plan` (see
/// `tests/mcp/client.py`); its output, after checking it succeeded.
fn serve_to_python_client(spec_path: &Path, plan: &Value) -> support::Output {
    let mut cmd = Command::new(python::python());
    cmd.arg(python::script("client.py"))
        .args(["stdio", env!("CARGO_BIN_EXE_toolrun"), "serve"])
        .arg(spec_path);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("NOTES_KEY", SECRET);
    let out = support::run_with_stdin(&mut cmd, &plan.to_string());
    assert_eq!(out.code, 0, "the MCP client failed\n{out:?}");
    out
}

#[test]
fn serve_offers_remote_tools_with_their_servers_definitions() {
    let dir = support::temp_dir("mcp-client-serve");
    let server = NotesServer::start(&dir);
    let spec_path = write(
        &dir,
        "gateway.yaml",
        &spec(&server.url(), TOOLS, "          - answer: unused"),
    );
    // The official Python client drives `toolrun serve`, which calls the Python notes server.
    let plan = json!([{ "name": "search_notes", "arguments": { "query": "milk" } }]);
    let out = serve_to_python_client(&spec_path, &plan);
    assert!(!out.stdout.contains(SECRET));
    let doc = out.json();
    let tools = doc["tools"].as_array().unwrap();
    let search = tools.iter().find(|t| t["name"] == "search_notes").unwrap();
    assert_eq!(
        search["description"],
        "Finds notes whose title or text contains the query (case-insensitive)."
    );
    assert_eq!(search["inputSchema"]["required"], json!(["query"]));
    let remember = tools.iter().find(|t| t["name"] == "remember").unwrap();
    assert_eq!(remember["description"], "Remembers a note for later.");
    assert_eq!(
        doc["calls"][0]["structuredContent"]["hits"][0]["title"],
        "groceries"
    );
    // When its client goes, `serve` ends its own session with the notes server.
    assert_eq!(server.last(), (json!("DELETE"), json!(200)));
}

/// What every session starts with.
const HANDSHAKE: [&str; 3] = ["initialize", "notifications/initialized", "tools/list"];

fn session_ends(events: &Path) -> Vec<Value> {
    support::events_named(events, "mcp_session_ended")
}

#[test]
fn the_session_ends_with_a_delete_when_the_run_ends_and_a_refusal_is_tolerated() {
    let dir = support::temp_dir("mcp-client-delete");
    let server = NotesServer::start(&dir);
    let one_call = "          - tool_calls: [{ name: search_notes, arguments: { query: milk } }]\n          - answer: done";
    let spec_path = write(
        &dir,
        "one.yaml",
        &spec(&server.url(), "      - search_notes", one_call),
    );
    let events = dir.join("events.jsonl");
    let fixture = dir.join("one.json");
    let out = run_notes(
        &spec_path,
        &[
            "--events",
            events.to_str().unwrap(),
            "--record",
            fixture.to_str().unwrap(),
        ],
    );
    out.assert_success();
    // While the call ran, the session's own stream (a GET) was open too.
    let log = server.requests();
    let gets: Vec<&Value> = log.iter().filter(|r| r["method"] == "GET").collect();
    assert_eq!(gets.len(), 1, "{log:#?}");
    assert_eq!(gets[0]["headers"]["accept"], "text/event-stream");
    let log: Vec<Value> = log.into_iter().filter(|r| r["method"] != "GET").collect();
    let methods: Vec<&str> = log.iter().map(|r| r["method"].as_str().unwrap()).collect();
    assert_eq!(
        methods,
        ["POST", "POST", "POST", "POST", "DELETE"],
        "{log:#?}"
    );
    // The DELETE names the session every request after `initialize` carried, with the spec's
    // headers, and the SDK's session manager ended it (200).
    let end = &log[4];
    let id = end["headers"]["mcp-session-id"]
        .as_str()
        .expect("a session id");
    assert!(log[1..4]
        .iter()
        .all(|r| r["headers"]["mcp-session-id"] == id));
    assert_eq!(end["headers"]["x-api-key"], SECRET);
    assert_eq!(end["status"], 200, "{end:#}");
    assert_eq!(
        session_ends(&events),
        [json!({ "event": "mcp_session_ended", "server": "notes", "status": 200 })]
    );
    // Ending a session is not part of what a run did: the fixture holds no DELETE, and its
    // replay sends none (nothing listens any more).
    let text = std::fs::read_to_string(&fixture).unwrap();
    assert!(!text.contains("DELETE"), "{text}");
    drop(server);
    run(toolrun().arg("replay").arg(&fixture)).assert_success();

    // `toolrun call` ends its session too.
    let call_dir = support::temp_dir("mcp-client-delete-call");
    let server = NotesServer::start(&call_dir);
    let spec_path = write(
        &dir,
        "call.yaml",
        &spec(&server.url(), "      - search_notes", one_call),
    );
    let out = run(toolrun()
        .env("NOTES_KEY", SECRET)
        .arg("call")
        .arg(&spec_path)
        .arg("search_notes")
        .args(["--args", r#"{"query": "milk"}"#]));
    out.assert_success();
    assert_eq!(server.last(), (json!("DELETE"), json!(200)));
    drop(server);

    // A server that does not let clients end sessions answers 405: the run is unaffected.
    let refusing_dir = support::temp_dir("mcp-client-delete-405");
    let refusing = NotesServer::start_with(&refusing_dir, &[("NOTES_REFUSE_DELETE", "1")]);
    let spec_path = write(
        &dir,
        "refusing.yaml",
        &spec(&refusing.url(), "      - search_notes", one_call),
    );
    let events = dir.join("refusing-events.jsonl");
    let out = run_notes(
        &spec_path,
        &["--json", "--events", events.to_str().unwrap()],
    );
    out.assert_success();
    assert_eq!(out.json()["final_output"], "done");
    assert_eq!(out.stderr, "", "a refused DELETE is not worth a word");
    assert_eq!(refusing.last(), (json!("DELETE"), json!(405)));
    let ended = session_ends(&events);
    assert_eq!(ended.len(), 1, "{ended:#?}");
    assert_eq!(ended[0]["status"], 405);
    assert!(ended[0]["note"]
        .as_str()
        .unwrap()
        .contains("does not let clients end sessions"));
}

/// The server's annotations (untrusted hints) can only add confirmation: `readOnlyHint: false`
/// or `destructiveHint: true` stop the run for a person; `readOnlyHint: true` removes none the
/// spec asked for; the spec's own `side_effects: false` outranks the hints.
#[test]
fn annotations_hinting_changes_need_confirmation_unless_the_spec_says_otherwise() {
    let dir = support::temp_dir("mcp-client-annotations");
    let server = NotesServer::start_with(&dir, &[("NOTES_ANNOTATED", "1")]);
    let tools =
        "      - count_notes\n      - search_notes\n      - append_note\n      - purge_notes";
    let turns = r#"          - tool_calls: [{ name: count_notes, arguments: {} }]
          - tool_calls: [{ name: search_notes, arguments: { query: milk } }]
          - tool_calls: [{ name: append_note, arguments: { title: todo, text: call mum } }]
          - tool_calls: [{ name: purge_notes, arguments: {} }]
          - answer: done"#;
    let spec_path = write(&dir, "hinted.yaml", &spec(&server.url(), tools, turns));
    // Read-only and un-annotated tools run; the additive one waits for a person.
    let out = run_notes(&spec_path, &["--json"]);
    out.assert_code(3);
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "needs_confirmation");
    assert_eq!(trace["pending_tool_call"]["name"], "append_note");
    let names = |t: &Value| -> Vec<String> {
        t["tool_results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&trace), ["count_notes", "search_notes"]);
    let why = trace["error"].as_str().unwrap();
    assert!(
        why.contains("MCP server `notes` annotates `append_note` with `readOnlyHint: false`"),
        "{why}"
    );
    assert!(
        why.contains("declare `side_effects: false`") && why.contains("--approve append_note"),
        "{why}"
    );

    // Approved, it runs; the destructive one is next to wait.
    let out = run_notes(&spec_path, &["--json", "--approve", "append_note"]);
    out.assert_code(3);
    let trace = out.json();
    assert_eq!(trace["pending_tool_call"]["name"], "purge_notes");
    assert!(
        trace["error"]
            .as_str()
            .unwrap()
            .contains("annotates `purge_notes` with `destructiveHint: true`"),
        "{trace:#}"
    );

    // The spec's word outranks the hints: `side_effects: false` runs it without asking, and a
    // read-only hint does not lift the confirmation the policy asks for.
    let trusted = tools
        .replace(
            "      - purge_notes",
            "      - { name: purge_notes, side_effects: false }",
        )
        .replace(
            "      - append_note",
            "      - { name: append_note, side_effects: false }",
        );
    let text = spec(&server.url(), &trusted, turns) + "policy:\n  confirm: [count_notes]\n";
    let spec_path = write(&dir, "trusted.yaml", &text);
    let out = run_notes(&spec_path, &["--json"]);
    out.assert_code(3);
    let trace = out.json();
    assert_eq!(trace["pending_tool_call"]["name"], "count_notes");
    assert_eq!(
        trace["error"],
        "`count_notes` needs confirmation before it runs; re-run with --approve count_notes"
    );
    let out = run_notes(&spec_path, &["--json", "--approve", "count_notes"]);
    out.assert_success();
    let trace = out.json();
    assert_eq!(
        names(&trace),
        ["count_notes", "search_notes", "append_note", "purge_notes"]
    );
    assert_eq!(
        trace["tool_results"][3]["result"],
        json!({ "result": "purged" })
    );

    // `toolrun serve` passes the server's hints on as the server lists them, to its own
    // clients: an additive tool it confirms is not destructive (it was served so).
    let gateway = write(&dir, "gateway.yaml", &spec(&server.url(), tools, turns));
    let doc = serve_to_python_client(&gateway, &json!([])).json();
    let destructive = |name: &str| {
        let tools = doc["tools"].as_array().unwrap();
        let tool = tools.iter().find(|t| t["name"] == name).unwrap();
        tool["annotations"]["destructiveHint"].clone()
    };
    assert_eq!(destructive("purge_notes"), true, "{doc:#}");
    assert_eq!(destructive("append_note"), false, "{doc:#}");
    assert_eq!(destructive("count_notes"), false, "{doc:#}");

    // `side_effects: true` on an entry is confirmed whatever the server says.
    let strict = spec(
        &server.url(),
        "      - { name: count_notes, side_effects: true }",
        "          - tool_calls: [{ name: count_notes, arguments: {} }]\n          - answer: done",
    );
    let spec_path = write(&dir, "strict.yaml", &strict);
    let out = run_notes(&spec_path, &["--json"]);
    out.assert_code(3);
    assert_eq!(out.json()["pending_tool_call"]["name"], "count_notes");
}

/// `notifications/tools/list_changed` in a reply: the tools are listed again and checked against
/// what the model was offered. A change elsewhere lets the run go on; a change to a tool it uses
/// stops it (`mcp_error`). Both replay offline, the notification and the new listing recorded.
#[test]
fn a_changed_tool_list_is_listed_again_and_a_changed_tool_stops_the_run() {
    let dir = support::temp_dir("mcp-client-list-changed");
    let server = NotesServer::start(&dir);
    let tools = "      - search_notes\n      - install_extra\n      - upgrade_search";
    let calls = |first: &str| {
        format!(
            "          - tool_calls: [{{ name: {first}, arguments: {{}} }}]\n          - tool_calls: [{{ name: search_notes, arguments: {{ query: milk }} }}]\n          - answer: \"{{{{ results[1].result.hits[0].title }}}}\""
        )
    };
    let record = |name: &str, first: &str| {
        let spec_path = write(
            &dir,
            &format!("{name}.yaml"),
            &spec(&server.url(), tools, &calls(first)),
        );
        let fixture = dir.join(format!("{name}.json"));
        let events = dir.join(format!("{name}.events"));
        let record = format!("--record={}", fixture.display());
        let out = run_notes(
            &spec_path,
            &["--json", &record, &format!("--events={}", events.display())],
        );
        let changed = support::events_named(&events, "mcp_tools_changed");
        let recorded: Value =
            serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
        let methods: Vec<String> = recorded["exchanges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                e["request"]["body"]["method"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        (out, changed, methods, fixture)
    };

    // Another tool appeared: listed again, nothing the run uses changed, the run goes on.
    let (out, changed, methods, fixture) = record("extra", "install_extra");
    out.assert_success();
    assert_eq!(out.json()["final_output"], "groceries");
    assert_eq!(
        changed,
        [json!({ "event": "mcp_tools_changed", "server": "notes", "stale": null })]
    );
    assert_eq!(methods[..3], HANDSHAKE);
    assert_eq!(methods[3..], ["tools/call", "tools/list", "tools/call"]);
    let extra = fixture.clone();

    // `search_notes` now needs a `limit`: the model was told otherwise, so the run stops.
    let (out, changed, methods, fixture) = record("upgrade", "upgrade_search");
    out.assert_code(1);
    let trace = out.json();
    assert_eq!(
        (&trace["status"], &trace["stop_reason"]),
        (&json!("failed"), &json!("mcp_error"))
    );
    assert_eq!(trace["steps"], 1, "no model call after the change");
    assert_eq!(
        trace["tool_results"][0]["result"],
        json!({ "result": "upgraded" })
    );
    let why = trace["error"].as_str().unwrap();
    assert!(
        why.contains("MCP server `notes` changed its tools during the run (notifications/tools/list_changed)")
            && why.contains("changed tool `search_notes`"),
        "{why}"
    );
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0]["stale"].as_str(), Some(why));
    assert_eq!(methods[..3], HANDSHAKE);
    assert_eq!(methods[3..], ["tools/call", "tools/list"]);

    // A served session has no run to stop: later calls of the changed server's tools fail.
    let fresh_dir = support::temp_dir("mcp-client-list-changed-serve");
    let fresh = NotesServer::start(&fresh_dir);
    let gateway = write(
        &dir,
        "gateway.yaml",
        &spec(&fresh.url(), tools, "          - answer: unused"),
    );
    let plan = json!([
        { "name": "upgrade_search", "arguments": {} },
        { "name": "search_notes", "arguments": { "query": "milk" } },
    ]);
    let doc = serve_to_python_client(&gateway, &plan).json();
    assert_eq!(
        doc["calls"][0]["structuredContent"]["result"], "upgraded",
        "{doc:#}"
    );
    assert_eq!(doc["calls"][1]["isError"], true, "{doc:#}");
    assert!(
        doc["calls"][1]
            .to_string()
            .contains("changed its tools during the run"),
        "{doc:#}"
    );
    drop(fresh);

    // Offline, the recorded notification leads to the same second listing and the same ends.
    drop(server);
    for f in [&extra, &fixture] {
        let replayed = run(toolrun().arg("replay").arg(f));
        replayed.assert_success();
        assert!(
            replayed.stdout.contains("1 passed, 0 failed"),
            "{replayed:?}"
        );
    }
}

#[test]
fn a_star_takes_every_tool_of_a_streamable_http_server_its_host_allowed_as_written() {
    let dir = support::temp_dir("mcp-client-star");
    let server = NotesServer::start(&dir);
    let turns = r#"          - tool_calls: [{ name: search_notes, arguments: { query: milk } }]
          - answer: "{{ last.result.hits[0].title }}""#;
    let spec_path = write(&dir, "star.yaml", &spec(&server.url(), "", turns)).to_path_buf();
    let text = std::fs::read_to_string(&spec_path)
        .unwrap()
        .replace("    tools:\n\n", "    tools: \"*\"\n");
    std::fs::write(&spec_path, text).unwrap();
    let checked = run(toolrun().arg("check").arg(&spec_path));
    checked.assert_success();
    assert!(checked.stderr.contains("warning[W113]"), "{checked:?}");
    let fixture = dir.join("star.json");
    let out = run_notes(
        &spec_path,
        &["--json", "--record", fixture.to_str().unwrap()],
    );
    out.assert_success();
    assert_eq!(out.json()["final_output"], "groceries");
    drop(server);
    let replayed = run(toolrun().arg("replay").arg(&fixture));
    replayed.assert_success();
}

/// A gateway (`toolrun serve --http` of a spec with `kind: mcp` tools) gives each of its clients
/// a session of its own with the remote server: upstream state never crosses clients.
#[test]
fn a_gateway_opens_one_upstream_session_per_client_session() {
    let dir = support::temp_dir("mcp-client-gateway-sessions");
    let server = NotesServer::start(&dir);
    let spec_path = write(
        &dir,
        "gateway.yaml",
        &spec(
            &server.url(),
            "      - search_notes",
            "          - answer: unused",
        ),
    );
    let (mut serve, url, _stderr) = support::spawn_served(
        toolrun()
            .env("NOTES_KEY", SECRET)
            .arg("serve")
            .arg(&spec_path)
            .args(["--http", "127.0.0.1:0"]),
    );
    let plan = json!([{ "name": "search_notes", "arguments": { "query": "milk" } }]);
    for _ in 0..2 {
        let mut cmd = Command::new(python::python());
        cmd.arg(python::script("client.py")).args(["http", &url]);
        let out = support::run_with_stdin(&mut cmd, &plan.to_string());
        assert_eq!(out.code, 0, "the MCP client failed\n{out:?}");
    }
    let calls: Vec<Value> = server
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "POST")
        .collect();
    // Each client closed its session (the SDK's DELETE): its upstream session ended with it,
    // while `serve` runs on.
    let deletes = || {
        server
            .requests()
            .into_iter()
            .filter(|r| r["method"] == "DELETE")
            .count()
    };
    for _ in 0..600 {
        if deletes() >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(deletes(), 2, "{:#?}", server.requests());
    assert!(serve.try_wait().unwrap().is_none(), "serve ended early");
    let _ = Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status();
    let _ = serve.wait();
    // The serve process's own session (listing at start), then one per client session.
    let mut ids: Vec<String> = calls
        .iter()
        .filter_map(|r| r["headers"]["mcp-session-id"].as_str().map(String::from))
        .collect();
    ids.dedup();
    assert_eq!(ids.len(), 3, "{calls:#?}");
    // The serve process's own session ended with `serve`, once each.
    let ended: Vec<Value> = server
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "DELETE")
        .collect();
    assert_eq!(ended.len(), 3, "{ended:#?}");
}
