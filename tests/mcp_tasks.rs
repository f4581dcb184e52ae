//! Long-running tools as tasks: the MCP tasks extension (`io.modelcontextprotocol/tasks`) on
//! `toolrun serve --http` at 2026-07-28, through the built binary with raw HTTP. A tool marked
//! `task:` runs as a task for a client that declared the extension: made, polled, asked for its
//! confirmation, cancelled; refused with -32021 when it runs only as a task and the client did
//! not declare it; kept within `--max-tasks` and `--task-ttl`; recorded and masked as a call.
//! Binds and contacts 127.0.0.1 only.

mod support;

use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Response, TestServer};

const V2026: &str = "2026-07-28";
const SECRET: &str = "tok-5d1e9a7c3b";

/// `report` is an HTTP tool whose service echoes the token it was sent, which no client may see.
const SPEC: &str = r#"
version: 1
name: tasks
secrets: [REPORT_TOKEN]
policy: { network: { allow_hosts: ["127.0.0.1:@PORT@"] } }
tools:
  report:
    description: Builds a report.
    kind: http
    task: optional
    input: { type: object, properties: { month: { type: string } } }
    request: { url: "@BASE@/report", headers: { Authorization: "Bearer {{ secrets.REPORT_TOKEN }}" } }
  export:
    description: Exports everything; only as a task.
    kind: mock
    task: required
    input: { type: object, properties: {} }
    responses:
      - result: exported
  slow:
    description: Takes its time.
    kind: mock
    task: optional
    timeout: 120s
    faults: [{ delay: 20s }]
    input: { type: object, properties: {} }
    responses:
      - result: finally
  wipe:
    description: Wipes the cache once someone confirms it.
    kind: mock
    task: optional
    side_effects: true
    input: { type: object, properties: {} }
    responses:
      - result: wiped
  plain:
    description: Answers at once.
    kind: mock
    input: { type: object, properties: {} }
    responses:
      - result: plain
"#;

struct Serve {
    child: std::process::Child,
    authority: String,
    _echo: TestServer,
    /// The `Mcp-Session-Id` of the last answer that carried one.
    session_id: std::cell::Cell<Option<String>>,
}

impl Serve {
    fn start(dir: &Path, args: &[&str]) -> Serve {
        let echo = TestServer::start(|req| {
            Response::json(
                200,
                json!({ "saw": req.header("authorization").unwrap_or_default() }),
            )
        });
        let base = echo.base_url();
        let port = base.rsplit(':').next().unwrap_or_default();
        let spec = dir.join("tasks.yaml");
        let text = SPEC.replace("@BASE@", &base).replace("@PORT@", port);
        std::fs::write(&spec, text).expect("spec");
        let (child, url, _stderr) = support::serve_http(&spec, args, &[("REPORT_TOKEN", SECRET)]);
        let authority = support::served_authority(&url).to_string();
        Serve {
            child,
            authority,
            _echo: echo,
            session_id: Default::default(),
        }
    }

    /// POSTs `body` with these headers; the status and the JSON-RPC response.
    fn post(&self, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
        let wait = Duration::from_secs(60);
        let response = support::exchange_raw(&self.authority, "POST", "/mcp", headers, body, wait);
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let session = support::response_header(head, "mcp-session-id");
        if session.is_some() {
            self.session_id.set(session);
        }
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let message = serde_json::from_str::<Value>(body).unwrap_or_else(|_| {
            body.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m.get("result").is_some() || m.get("error").is_some())
                .unwrap_or(Value::Null)
        });
        (status, message)
    }

    /// A 2026-07-28 request with these client capabilities; the status and the response.
    fn request(&self, method: &str, mut params: Value, capabilities: Value) -> (u16, Value) {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": V2026,
            "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        let name = params["name"]
            .as_str()
            .or(params["taskId"].as_str())
            .map(String::from);
        let mut headers = vec![("Mcp-Protocol-Version", V2026), ("Mcp-Method", method)];
        if let Some(name) = &name {
            headers.push(("Mcp-Name", name));
        }
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        self.post(&headers, &body.to_string())
    }

    fn call(&self, name: &str, capabilities: Value) -> Value {
        let params = json!({ "name": name, "arguments": { "month": "May" } });
        self.request("tools/call", params, capabilities).1
    }

    fn task(&self, method: &str, id: &str, more: Value) -> Value {
        let mut params = json!({ "taskId": id });
        if let (Some(p), Some(m)) = (params.as_object_mut(), more.as_object()) {
            p.extend(m.clone());
        }
        self.request(method, params, tasks()).1
    }

    /// Polls `tasks/get` until the task is in `status` (or has ended); generous, it only
    /// catches a task that never gets there.
    fn until(&self, id: &str, status: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let got = self.task("tasks/get", id, json!({}));
            let now = got["result"]["status"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let ended = ["completed", "failed", "cancelled"].contains(&now.as_str());
            if now == status || ended || Instant::now() > deadline {
                return got["result"].clone();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, and wait for the exit (the recording is written then).
    fn stop(mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tasks() -> Value {
    json!({ "extensions": { "io.modelcontextprotocol/tasks": {} }, "elicitation": {} })
}

fn task_id(created: &Value) -> String {
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_string()
}

#[test]
fn a_task_tool_runs_as_a_task_its_client_polls_answers_and_cancels() {
    let dir = support::temp_dir("mcp-tasks");
    let fixture = dir.path().join("served.jsonl");
    let events = dir.path().join("events.jsonl");
    let serve = Serve::start(
        dir.path(),
        &[
            "--record",
            fixture.to_str().expect("utf-8"),
            "--events",
            events.to_str().expect("utf-8"),
        ],
    );
    let (_, found) = serve.request("server/discover", json!({}), json!({}));
    let extensions = &found["result"]["capabilities"]["extensions"];
    assert!(
        extensions.get("io.modelcontextprotocol/tasks").is_some(),
        "{found}"
    );

    // Made, polled, and its result masked like every output.
    let created = serve.call("report", tasks());
    let id = task_id(&created);
    assert_eq!(created["result"]["status"], "working", "{created}");
    assert!(created["result"]["ttlMs"].as_u64().is_some(), "{created}");
    let done = serve.until(&id, "completed");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["saw"], "Bearer ***",
        "{done}"
    );
    assert!(!done.to_string().contains(SECRET), "{done}");

    // Without the extension: an optional task tool answers at once, a required one is refused.
    let at_once = serve.call("report", json!({}));
    assert_eq!(at_once["result"]["resultType"], "complete", "{at_once}");
    assert!(!at_once.to_string().contains(SECRET), "{at_once}");
    let refused = serve.call("export", json!({}));
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    let required = &refused["error"]["data"]["requiredCapabilities"]["extensions"];
    assert!(
        required.get("io.modelcontextprotocol/tasks").is_some(),
        "{refused}"
    );
    // A tool not marked `task:` never is one.
    let plain = serve.call("plain", tasks());
    assert_eq!(plain["result"]["resultType"], "complete", "{plain}");

    // A confirmation is asked inside the task and answered with tasks/update.
    let wipe = task_id(&serve.call("wipe", tasks()));
    let waiting = serve.until(&wipe, "input_required");
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let asked = &waiting["inputRequests"]["confirm"];
    assert_eq!(asked["method"], "elicitation/create", "{waiting}");
    let answer = json!({ "confirm": { "action": "accept", "content": { "approve": true } } });
    let ack = serve.task("tasks/update", &wipe, json!({ "inputResponses": answer }));
    assert_eq!(ack["result"], json!({ "resultType": "complete" }), "{ack}");
    let wiped = serve.until(&wipe, "completed");
    assert_eq!(wiped["result"]["isError"], false, "{wiped}");
    assert_eq!(wiped["result"]["content"][0]["text"], "wiped", "{wiped}");

    // Cancelled while it runs: the ack is empty, and the task ends `cancelled`.
    let slow = task_id(&serve.call("slow", tasks()));
    let ack = serve.task("tasks/cancel", &slow, json!({}));
    assert_eq!(ack["result"], json!({ "resultType": "complete" }), "{ack}");
    let cancelled = serve.until(&slow, "cancelled");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    // Cancelling an ended task changes nothing.
    let again = serve.task("tasks/cancel", &id, json!({}));
    assert_eq!(again["result"]["resultType"], "complete", "{again}");
    assert_eq!(serve.until(&id, "completed")["status"], "completed");

    serve.stop();
    // Each call is recorded as a call: the task's result (masked), the confirmed call with its
    // answer, the cancelled one as cut off.
    let text = std::fs::read_to_string(&fixture).expect("recording");
    assert!(!text.contains(SECRET), "{text}");
    let served: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["kind"] == "served")
        .collect();
    let named = |name: &str| -> Vec<&Value> {
        served
            .iter()
            .filter(|s| s["request"]["body"]["name"] == name)
            .collect()
    };
    assert_eq!(named("report").len(), 2, "{served:#?}");
    let wiped = named("wipe");
    assert_eq!(wiped.len(), 1, "{served:#?}");
    assert_eq!(
        wiped[0]["request"]["body"]["confirmation"]["action"],
        "accept"
    );
    let slow = named("slow");
    assert_eq!(slow.len(), 1, "{served:#?}");
    assert!(slow[0].to_string().contains("cancelled"), "{:#}", slow[0]);
    // Evented as calls are: each task's call is an `mcp_call`, the cancelled one cut off.
    let calls = support::events_named(&events, "mcp_call");
    let of = |name: &str| calls.iter().filter(|e| e["name"] == name).count();
    assert_eq!(
        (of("report"), of("wipe"), of("slow")),
        (2, 1, 1),
        "{calls:#?}"
    );
    assert!(
        calls
            .iter()
            .any(|e| e["name"] == "slow" && e["cut_off"] == true),
        "{calls:#?}"
    );
    assert!(!std::fs::read_to_string(&events)
        .unwrap_or_default()
        .contains(SECRET));
    // And replayed as any served call, offline (the cancelled call runs again to its end, to be
    // admitted as it was: its 20 s delay).
    let mut replay = support::toolrun();
    replay
        .arg("replay")
        .arg(&fixture)
        .arg("--spec")
        .arg(dir.path().join("tasks.yaml"));
    let out = support::run(&mut replay);
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn tasks_are_kept_within_their_count_and_time_and_bad_requests_get_errors() {
    let dir = support::temp_dir("mcp-tasks-bounds");
    let serve = Serve::start(dir.path(), &["--max-tasks", "2", "--task-ttl", "1s"]);
    let first = task_id(&serve.call("slow", tasks()));
    let second = task_id(&serve.call("slow", tasks()));
    // Both still run: a third is refused, not kept.
    let refused = serve.call("slow", tasks());
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("--max-tasks"), "{refused}");
    // Once one has ended, a new task takes its place.
    serve.task("tasks/cancel", &first, json!({}));
    assert_eq!(serve.until(&first, "cancelled")["status"], "cancelled");
    let third = task_id(&serve.call("report", tasks()));
    let gone = serve.task("tasks/get", &first, json!({}));
    assert_eq!(
        gone["error"]["code"], -32602,
        "the oldest ended task made room: {gone}"
    );
    // An ended task is forgotten once its ttl has passed since it ended.
    assert_eq!(serve.until(&third, "completed")["status"], "completed");
    std::thread::sleep(Duration::from_millis(2500));
    let expired = serve.task("tasks/get", &third, json!({}));
    assert_eq!(expired["error"]["code"], -32602, "{expired}");
    // A running task is not.
    let running = serve.task("tasks/get", &second, json!({}));
    assert_eq!(running["result"]["status"], "working", "{running}");

    // Bad input: JSON-RPC errors, never a hang; as for any 2026-07-28 request, a missing
    // capability is a 400, an unknown method a 404, params that do not fit an in-band -32602.
    let unknown = serve.task("tasks/get", "no-such-task", json!({}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let (status, undeclared) = serve.request("tasks/get", json!({ "taskId": second }), json!({}));
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
    assert_eq!(status, 400, "{undeclared}");
    let (status, garbage) = serve.request("tasks/get", json!({ "taskId": 5 }), tasks());
    assert_eq!(garbage["error"]["code"], -32602, "{garbage}");
    assert_eq!(status, 200, "{garbage}");
    let (status, garbage) = serve.request(
        "tasks/update",
        json!({ "taskId": second, "inputResponses": "yes" }),
        tasks(),
    );
    assert_eq!(garbage["error"]["code"], -32602, "{garbage}");
    assert_eq!(status, 200, "{garbage}");
    for removed in ["tasks/result", "tasks/list"] {
        let (status, answer) = serve.request(removed, json!({ "taskId": second }), tasks());
        assert_eq!(answer["error"]["code"], -32601, "{removed}: {answer}");
        assert_eq!(status, 404, "{removed}: {answer}");
    }
}

/// A 2025-11-25 session has no tasks: the extension is not offered at `initialize`, `tasks/*`
/// are not served, and a `task:` tool's call (even `required`) is answered at once.
#[test]
fn a_2025_session_calls_task_tools_at_once() {
    let dir = support::temp_dir("mcp-tasks-session");
    let serve = Serve::start(dir.path(), &[]);
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": { "extensions": { "io.modelcontextprotocol/tasks": {} } },
        "clientInfo": { "name": "raw", "version": "1" } } });
    let (status, answer) = serve.post(&[], &init.to_string());
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["result"]["capabilities"]["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_none(),
        "{answer}"
    );
    let id = serve.session_id.take().expect("a session id");
    let headers = [
        ("Mcp-Session-Id", id.as_str()),
        ("Mcp-Protocol-Version", "2025-11-25"),
    ];
    let done = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    serve.post(&headers, &done.to_string());
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "export", "arguments": {} } });
    let (_, answer) = serve.post(&headers, &call.to_string());
    assert_eq!(
        answer["result"]["content"][0]["text"], "exported",
        "{answer}"
    );
    let get = json!({ "jsonrpc": "2.0", "id": 2, "method": "tasks/get",
        "params": { "taskId": "x" } });
    let (_, answer) = serve.post(&headers, &get.to_string());
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
}

/// `--replica-id` starts every task id, and is a name a header and HAProxy carry as it is.
#[test]
fn replica_id_starts_task_ids_and_a_bad_one_is_refused() {
    let dir = support::temp_dir("mcp-tasks-replica");
    let serve = Serve::start(dir.path(), &["--replica-id", "toolrun-0"]);
    let id = task_id(&serve.call("export", tasks()));
    assert!(id.starts_with("toolrun-0."), "{id}");
    assert_eq!(serve.until(&id, "completed")["status"], "completed");
    // The same id with another replica's name is not this replica's task.
    let (_, random) = id.split_once('.').expect("a replica in the id");
    let other = serve.task("tasks/get", &format!("toolrun-1.{random}"), json!({}));
    assert_eq!(other["error"]["code"], -32602, "{other}");
    serve.stop();

    let spec = support::write(dir.path(), "bad.yaml", "version: 1\nname: bad\ntools: {}\n");
    for bad in ["Replica1", "replica.1", "", &"r".repeat(33)] {
        let out = support::run(support::toolrun().arg("serve").arg(&spec).args([
            "--http",
            "127.0.0.1:0",
            "--replica-id",
            bad,
        ]));
        assert_eq!(out.code, 2, "{bad:?}: {out:?}");
        assert!(
            out.stderr.contains("--replica-id takes"),
            "{bad:?}: {out:?}"
        );
    }
}
