//! `kind: mcp` tools against MCP implementations nobody here wrote: the reference server
//! `@modelcontextprotocol/server-everything` over streamable HTTP (every content type, progress,
//! logging, elicitation), pinned and installed by `tests/npm/setup.sh`. Everything goes through
//! the binary with a scripted model or `toolrun call`.

#[path = "npm/npm.rs"]
mod npm;
#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use support::providers::{self, Fake};
use support::{run, toolrun, write};

/// The reference server on a free loopback port; killed when dropped.
struct Everything {
    child: Child,
    port: u16,
}

impl Everything {
    fn start() -> Everything {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut cmd = npm::node_command("@modelcontextprotocol/server-everything/dist/index.js");
        let mut child = cmd
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start server-everything");
        // It says so on stderr once it listens.
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        loop {
            match lines.next() {
                Some(Ok(l)) if l.contains("listening on port") => break,
                Some(Ok(_)) => continue,
                _ => {
                    let _ = child.kill();
                    panic!("server-everything did not start");
                }
            }
        }
        // Keep reading, so a full pipe never blocks the server.
        std::thread::spawn(move || for _ in lines {});
        Everything { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A spec using `tools` (YAML flow list) of the server at `url`, the scripted model playing
/// `turns` (YAML lines at the indentation of a turn), `extra` added to the server's entry.
fn spec(url: &str, tools: &str, extra: &str, turns: &str) -> String {
    format!(
        r#"version: 1
name: everything
tools:
  everything:
    kind: mcp
    description: The MCP reference server.
    url: {url}
    timeout: 30s
    tools: {tools}
{extra}
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
{turns}
"#
    )
}

fn call(spec: &Path, tool: &str, args: &str, env: &[(&str, &str)]) -> support::Output {
    run(toolrun()
        .envs(env.iter().copied())
        .arg("call")
        .arg(spec)
        .arg(tool)
        .args(["--args", args, "--json"]))
}

#[test]
fn arguments_are_checked_against_the_listed_schema_on_every_path() {
    let dir = support::temp_dir("mcp-everything-args");
    let server = Everything::start();
    let bad = r#"{"a": "DROP TABLE", "b": 1}"#;
    let turns = format!(
        "          - tool_calls: [{{ name: get-sum, arguments: {bad}, malformed: true }}]\n          - answer: \"{{{{ results[0].error.kind }}}}\""
    );
    let spec_path = write(
        &dir,
        "s.yaml",
        &spec(&server.url(), "[get-sum]", "", &turns),
    );
    let cache = dir.join("cache");
    let cache = cache.to_str().unwrap();
    let expect_invalid = |out: &support::Output, what: &str| {
        let text = format!("{}{}", out.stdout, out.stderr);
        assert!(text.contains("invalid_arguments"), "{what}: {out:?}");
        assert!(
            text.contains("/a: ") && text.contains("is not of type"),
            "{what}: {out:?}"
        );
    };
    // `toolrun call`, cache off and cold.
    for env in [
        [("TOOLRUN_CACHE_DIR", "off")],
        [("TOOLRUN_CACHE_DIR", cache)],
    ] {
        let out = call(&spec_path, "get-sum", bad, &env);
        assert_eq!(out.code, 1, "{out:?}");
        expect_invalid(&out, "call");
    }
    // A run: cache off, cold (first run), warm.
    let cold = dir.join("cold");
    for env in [
        ("TOOLRUN_CACHE_DIR", "off"),
        ("TOOLRUN_CACHE_DIR", cold.to_str().unwrap()),
        ("TOOLRUN_CACHE_DIR", cold.to_str().unwrap()),
    ] {
        let out = run(toolrun()
            .env(env.0, env.1)
            .arg("run")
            .arg(&spec_path)
            .args(["--query", "sum", "--json"]));
        let trace = out.json();
        assert_eq!(
            trace["tool_errors"][0]["kind"], "invalid_arguments",
            "{out:?}"
        );
        assert_eq!(trace["final_output"], "invalid_arguments", "{out:?}");
        expect_invalid(&out, "run");
    }
    // `serve` as a gateway, driven by the official Python client.
    let mut cmd = std::process::Command::new(python::python());
    cmd.arg(python::script("client.py"))
        .args(["stdio", env!("CARGO_BIN_EXE_toolrun"), "serve"])
        .arg(&spec_path)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TOOLRUN_CACHE_DIR", "off");
    let plan = json!([{ "name": "get-sum", "arguments": { "a": "DROP TABLE", "b": 1 } }]);
    let out = support::run_with_stdin(&mut cmd, &plan.to_string());
    assert_eq!(out.code, 0, "the MCP client failed\n{out:?}");
    let served = &out.json()["calls"][0];
    assert_eq!(served["isError"], true, "{out:?}");
    assert!(served.to_string().contains("invalid_arguments"), "{out:?}");
    // Good arguments pass.
    let out = call(
        &spec_path,
        "get-sum",
        r#"{"a": 2, "b": 3}"#,
        &[("TOOLRUN_CACHE_DIR", "off")],
    );
    out.assert_success();
    assert!(out.stdout.contains("5"), "{out:?}");
}

fn run_spec(spec: &Path, extra: &[&str]) -> support::Output {
    run(toolrun()
        .env("TOOLRUN_CACHE_DIR", "off")
        .arg("run")
        .arg(spec)
        .args(["--query", "show me everything", "--json"])
        .args(extra))
}

#[test]
fn every_content_type_reaches_the_trace_the_templates_and_the_fixture() {
    let dir = support::temp_dir("mcp-everything-content");
    let server = Everything::start();
    let turns = r#"          - tool_calls:
              - { name: get-tiny-image, arguments: {} }
              - { name: get-resource-reference, arguments: { resourceType: Text, resourceId: 1 } }
              - { name: get-resource-reference, arguments: { resourceType: Blob, resourceId: 2 } }
              - { name: get-resource-links, arguments: { count: 2 } }
              - { name: get-structured-content, arguments: { location: Chicago } }
          - answer: "{{ results[0].mcp.content[1].type }} {{ results[0].mcp.content[1].mimeType }}; {{ results[3].mcp.content[1].type }}; {{ results[4].result.temperature }}""#;
    let spec_path = write(
        &dir,
        "s.yaml",
        &spec(
            &server.url(),
            "[get-tiny-image, get-resource-reference, get-resource-links, get-structured-content]",
            "",
            turns,
        ),
    );
    let fixture = dir.join("content.fixture.json");
    let out = run_spec(&spec_path, &["--record", fixture.to_str().unwrap()]);
    out.assert_success();
    let trace = out.json();
    let results = &trace["tool_results"];
    // Every item is kept as the server sent it; the model reads text, embedded text resources
    // verbatim and a placeholder naming the type and size of the rest.
    let image = &results[0]["mcp"]["content"][1];
    assert_eq!(image["type"], "image", "{out:?}");
    assert_eq!(image["mimeType"], "image/png");
    assert!(image["data"].as_str().unwrap().starts_with("iVBORw0KGgo"));
    assert_eq!(
        results[0]["result"],
        "Here's the image you requested:\n[image image/png, 4033 bytes]\nThe image above is the MCP logo."
    );
    let text = results[1]["result"].as_str().unwrap();
    assert!(
        text.contains("\nResource 1: This is a plaintext resource"),
        "{text}"
    );
    assert_eq!(
        results[1]["mcp"]["content"][1]["resource"]["mimeType"],
        "text/plain"
    );
    // The blob holds the server's local time of day, so its size varies ("1:04:17 AM" is a
    // byte shorter than "10:04:17 AM"): the placeholder must name the size of what was sent.
    let blob = results[2]["result"].as_str().unwrap();
    let sent = results[2]["mcp"]["content"][1]["resource"]["blob"]
        .as_str()
        .expect("the blob as sent");
    let decoded_len = sent.len() / 4 * 3 - sent.chars().rev().take_while(|&c| c == '=').count();
    assert!(
        blob.contains(&format!(
            "[resource text/plain demo://resource/dynamic/blob/2, {decoded_len} bytes]"
        )),
        "{blob}"
    );
    let links = results[3]["result"].as_str().unwrap();
    assert!(
        links.contains("[resource_link Text Resource 2 demo://resource/dynamic/text/2 text/plain]"),
        "{links}"
    );
    assert_eq!(results[4]["result"]["temperature"], 36);
    assert_eq!(results[4]["mcp"]["structuredContent"]["temperature"], 36);
    // Templates see the content.
    assert_eq!(trace["final_output"], "image image/png; resource_link; 36");
    // The fixture holds the reply as sent, and replays offline.
    let recorded = std::fs::read_to_string(&fixture).unwrap();
    assert!(
        recorded.contains("\"mimeType\": \"image/png\""),
        "image in the fixture"
    );
    drop(server);
    let replayed = run(toolrun().arg("replay").arg(&fixture));
    replayed.assert_success();
}

/// A spec whose model is the fake provider `kind` at `base_url` and whose one tool is the
/// reference server's `get-tiny-image`.
fn live_image_spec(dir: &Path, kind: &str, base_url: &str, mcp_url: &str) -> std::path::PathBuf {
    let text = format!(
        r#"version: 1
name: images
tools:
  everything:
    kind: mcp
    url: {mcp_url}
    tools: [get-tiny-image]
models:
  live:
    kind: {kind}
    model: test-model
    base_url: {base_url}
    api_key_env: TEST_KEY
"#
    );
    write(dir, &format!("{kind}.yaml"), &text)
}

fn run_live(spec: &Path) -> support::Output {
    run(toolrun()
        .env("TEST_KEY", providers::KEY)
        .env("TOOLRUN_CACHE_DIR", "off")
        .arg("run")
        .arg(spec)
        .args(["--query", "what is in the picture?", "--json"]))
}

#[test]
fn images_reach_anthropic_as_image_blocks_and_openai_as_a_following_user_message() {
    let dir = support::temp_dir("mcp-everything-images");
    let server = Everything::start();
    let fake = Fake::anthropic(vec![
        providers::anthropic_tool_use(None, &[("toolu_1", "get-tiny-image", json!({}))]),
        providers::anthropic_answer("The MCP logo."),
    ]);
    let spec_path = live_image_spec(&dir, "anthropic", &fake.base_url(), &server.url());
    run_live(&spec_path).assert_success();
    assert_eq!(fake.violations(), Vec::<String>::new());
    let result = &fake.bodies()[1]["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{result}");
    assert_eq!(
        result["content"][0]["text"],
        "Here's the image you requested:\n[image image/png, 4033 bytes]\nThe image above is the MCP logo."
    );
    assert_eq!(result["content"][1]["type"], "image");
    assert_eq!(result["content"][1]["source"]["type"], "base64");
    assert_eq!(result["content"][1]["source"]["media_type"], "image/png");
    assert!(result["content"][1]["source"]["data"]
        .as_str()
        .unwrap()
        .starts_with("iVBORw0KGgo"));

    let fake = Fake::openai(vec![
        providers::openai_tool_calls(&[("call_1", "get-tiny-image", "{}")]),
        providers::openai_answer("The MCP logo."),
    ]);
    let spec_path = live_image_spec(&dir, "openai", &fake.base_url(), &server.url());
    run_live(&spec_path).assert_success();
    assert_eq!(fake.violations(), Vec::<String>::new());
    let messages = fake.bodies()[1]["messages"].as_array().unwrap().clone();
    let tool = messages.iter().position(|m| m["role"] == "tool").unwrap();
    assert!(messages[tool]["content"]
        .as_str()
        .unwrap()
        .contains("[image image/png, 4033 bytes]"));
    let shown = &messages[tool + 1];
    assert_eq!(shown["role"], "user");
    assert_eq!(shown["content"][1]["type"], "image_url");
    assert!(shown["content"][1]["image_url"]["url"]
        .as_str()
        .unwrap()
        .starts_with("data:image/png;base64,iVBORw0KGgo"));
}

#[test]
fn progress_becomes_events_and_an_elicitation_is_answered_recorded_and_replayed() {
    let dir = support::temp_dir("mcp-everything-requests");
    let server = Everything::start();
    let turns = r#"          - tool_calls: [{ name: trigger-long-running-operation, arguments: { duration: 0.4, steps: 2 } }]
          - tool_calls: [{ name: trigger-elicitation-request, arguments: {} }]
          - answer: done"#;
    let spec_path = write(
        &dir,
        "s.yaml",
        &spec(
            &server.url(),
            "[trigger-long-running-operation, trigger-elicitation-request]",
            "    side_effects: false",
            turns,
        ),
    );
    let fixture = dir.join("requests.fixture.json");
    let events = dir.join("events.jsonl");
    let out = run_spec(
        &spec_path,
        &[
            "--record",
            fixture.to_str().unwrap(),
            "--events",
            events.to_str().unwrap(),
        ],
    );
    out.assert_success();
    let trace = out.json();
    assert_eq!(
        trace["tool_results"][0]["result"],
        "Long running operation completed. Duration: 0.4 seconds, Steps: 2."
    );
    // The server asked for input during the call: declined (the default), and the call ended.
    let declined = trace["tool_results"][1]["result"].as_str().unwrap();
    assert!(declined.contains("declined"), "{declined}");
    let events = support::events_in(&events);
    let progress: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "tool_progress")
        .collect();
    assert_eq!(progress.len(), 2, "{progress:?}");
    assert_eq!(
        (
            progress[1]["progress"].clone(),
            progress[1]["total"].clone()
        ),
        (json!(2), json!(2))
    );
    assert!(events.iter().any(|e| e["event"] == "mcp_server_request"
        && e["method"] == "elicitation/create"
        && e["answer"]["action"] == "decline"));
    // The request and the answer are in the fixture, and the replay answers it again.
    let recorded = std::fs::read_to_string(&fixture).unwrap();
    assert!(recorded.contains("elicitation/create") && recorded.contains("\"decline\""));
    drop(server);
    run(toolrun().arg("replay").arg(&fixture)).assert_success();
}

/// `toolrun serve` as a gateway to the reference server, driven by the official Python SDK:
/// the tools keep the title, annotations and output schema their server lists (the spec's
/// `side_effects:` outranks the annotations), and their content reaches the client unchanged.
#[test]
fn a_gateway_serves_remote_tools_as_their_server_lists_them_and_relays_their_content() {
    let dir = support::temp_dir("mcp-everything-gateway");
    let server = Everything::start();
    let gateway = format!(
        r#"version: 1
name: gateway
tools:
  everything:
    kind: mcp
    description: The MCP reference server.
    url: {}
    timeout: 30s
    tools:
      - echo
      - get-tiny-image
      - get-structured-content
      - name: toggle-simulated-logging
        side_effects: true
"#,
        server.url()
    );
    let spec_path = write(&dir, "gateway.yaml", &gateway);
    let mut cmd = std::process::Command::new(python::python());
    cmd.arg(python::script("client.py"))
        .args(["stdio", env!("CARGO_BIN_EXE_toolrun"), "serve"])
        .arg(&spec_path);
    let plan = json!([
        { "name": "get-tiny-image", "arguments": {} },
        { "name": "get-structured-content", "arguments": { "location": "Chicago" } },
    ]);
    let out = support::run_with_stdin(&mut cmd, &plan.to_string());
    assert_eq!(out.code, 0, "{out:?}");
    let doc = out.json();
    let tool = |name: &str| -> Value {
        doc["tools"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["name"] == name).cloned())
            .unwrap_or_else(|| panic!("no {name} in {doc:#}"))
    };
    let echo = tool("echo");
    assert_eq!(echo["title"], "Echo Tool");
    assert_eq!(
        echo["annotations"],
        json!({ "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false })
    );
    assert_eq!(
        tool("get-structured-content")["outputSchema"]["type"],
        "object"
    );
    // The spec says this one changes things: that outranks the server's word.
    let toggle = tool("toggle-simulated-logging");
    assert_eq!(toggle["title"], "Toggle Simulated Logging");
    assert_eq!(toggle["annotations"]["destructiveHint"], true);

    let image = &doc["calls"][0]["content"];
    let item = image
        .as_array()
        .and_then(|c| c.iter().find(|i| i["type"] == "image"))
        .unwrap_or_else(|| panic!("no image in {image:#}"));
    assert_eq!(item["mimeType"], "image/png");
    assert!(
        item["data"].as_str().unwrap_or_default().len() > 100,
        "{item}"
    );
    let weather = &doc["calls"][1];
    assert_eq!(weather["isError"], false, "{weather:#}");
    assert!(
        weather["structuredContent"]["temperature"].is_number(),
        "{weather:#}"
    );
}

#[test]
fn over_stdio_an_elicitation_is_answered_as_over_http() {
    let dir = support::temp_dir("mcp-everything-stdio-elicit");
    let node = npm::node();
    let every = npm::package_file("@modelcontextprotocol/server-everything/dist/index.js");
    let text = format!(
        r#"version: 1
name: elicit
tools:
  everything:
    kind: mcp
    command: ["{node}", "{every}", stdio]
    timeout: 60s
    side_effects: false
    tools: [trigger-elicitation-request]
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: trigger-elicitation-request, arguments: {{}} }}]
          - answer: "{{{{ results[0].result }}}}"
"#,
        node = node.display(),
        every = every.display(),
    );
    let spec_path = write(&dir, "elicit.yaml", &text);
    let out = run(toolrun()
        .env("TOOLRUN_CACHE_DIR", "off")
        .arg("run")
        .arg(&spec_path)
        .args(["--query", "ask me", "--json", "--allow-exec"])
        .arg(&node));
    out.assert_success();
    let answer = out.json()["final_output"].as_str().unwrap().to_string();
    assert!(answer.contains("declined"), "{out:?}");
}

/// `--record-mode new` adds live calls to a recording whose session (the handshake, the
/// listing) replays: the recorded `Mcp-Session-Id` is one the live server does not know (it
/// ended with the recording run), so the added calls, and the answer to the server's request
/// during one, go with a session the run opens itself (its own `initialize`, unrecorded),
/// which it ends. The grown fixture keeps one handshake and replays offline.
#[test]
fn calls_added_to_a_recording_go_live_with_a_session_the_server_knows() {
    let dir = support::temp_dir("mcp-everything-record-new");
    let server = Everything::start();
    let tools = "[echo, trigger-elicitation-request]";
    let one = r#"          - tool_calls: [{ name: echo, arguments: { message: one } }]
          - answer: "{{ last.result }}""#;
    let spec_path = write(
        &dir,
        "s.yaml",
        &spec(&server.url(), tools, "    side_effects: false", one),
    );
    let fixture = dir.join("grown.fixture.json");
    let record = |extra: &[&str]| {
        let mut args = vec!["--record", fixture.to_str().unwrap()];
        args.extend(extra);
        run_spec(&spec_path, &args)
    };
    let out = record(&[]);
    out.assert_success();
    assert_eq!(out.json()["final_output"], "Echo: one", "{out:?}");
    let three = r#"          - tool_calls: [{ name: echo, arguments: { message: one } }]
          - tool_calls: [{ name: echo, arguments: { message: two } }]
          - tool_calls: [{ name: trigger-elicitation-request, arguments: {} }]
          - answer: "{{ results[1].result }}""#;
    write(
        &dir,
        "s.yaml",
        &spec(&server.url(), tools, "    side_effects: false", three),
    );
    let events = dir.join("events.jsonl");
    let out = record(&["--record-mode", "new", "--events", events.to_str().unwrap()]);
    out.assert_success();
    let trace = out.json();
    assert_eq!(trace["tool_errors"], json!([]), "{out:?}");
    assert_eq!(trace["final_output"], "Echo: two", "{out:?}");
    let declined = trace["tool_results"][2]["result"].as_str().unwrap();
    assert!(declined.contains("declined"), "{declined}");
    let events = support::events_in(&events);
    let ended: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "mcp_session_ended")
        .collect();
    assert_eq!(ended.len(), 1, "{events:#?}");
    assert_eq!(ended[0]["status"], 200, "the server knew the session ended");
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let exchanges = recorded["exchanges"].as_array().unwrap();
    let bodies: Vec<&Value> = exchanges.iter().map(|e| &e["request"]["body"]).collect();
    let methods: Vec<&str> = bodies
        .iter()
        .map(|b| b["method"].as_str().unwrap_or("(an answer)"))
        .collect();
    // One handshake, the one recorded first (the server speaks 2025-11-25: it refused
    // `server/discover`, and `initialize` followed); the elicitation's answer is recorded too.
    assert_eq!(
        methods,
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "tools/call",
            "(an answer)",
            "tools/call"
        ],
        "{recorded:#}"
    );
    assert_eq!(bodies[6]["result"]["action"], "decline");
    assert!(
        exchanges[0]["response"]["status"]
            .as_u64()
            .is_some_and(|s| (400..500).contains(&s)),
        "{recorded:#}"
    );
    // Every request carries the recorded session, so a replay matches them.
    let session = &exchanges[2]["request"]["headers"]["mcp-session-id"];
    assert!(session.is_string(), "{recorded:#}");
    assert!(
        exchanges[2..]
            .iter()
            .all(|e| &e["request"]["headers"]["mcp-session-id"] == session),
        "{recorded:#}"
    );
    drop(server);
    run(toolrun().arg("replay").arg(&fixture)).assert_success();
}
