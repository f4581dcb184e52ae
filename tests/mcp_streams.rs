//! `kind: mcp` against a server that does what real ones rarely do, fast: `tests/mcp/fake_server.py`
//! (standard library only) asks the client things on a call's stream, closes a stream before its
//! response, answers under another id, lists tools forever, or never answers. Through the binary.

#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{run, toolrun, write};

struct Fake {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Fake {
    fn start(mode: &str, dir: &Path) -> Fake {
        let log = dir.join(format!("{mode}.jsonl"));
        let mut child = Command::new(python::python())
            .arg(python::script("fake_server.py"))
            .args([mode, log.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the fake server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("port");
        let port = line
            .trim()
            .parse()
            .expect("the fake server prints its port");
        Fake { child, port, log }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Every message the server received, in order.
    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect()
    }

    fn methods(&self) -> Vec<String> {
        self.received()
            .iter()
            .map(|m| match m["body"]["method"].as_str() {
                Some(method) => method.to_string(),
                None => format!("{} {}", m["http"].as_str().unwrap(), m["body"]["id"]),
            })
            .collect()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fake server's spec, at 2025-11-25: what these tests check are that revision's streams
/// (a server's requests during a call, resumption, sessions).
fn spec(dir: &Path, url: &str, extra: &str) -> PathBuf {
    let text = format!(
        r#"version: 1
name: fake
tools:
  fake:
    kind: mcp
    url: {url}
    timeout: 60s
    protocol: "2025-11-25"
    tools: [work]
{extra}
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: work }}]
          - answer: "{{{{ results[0].status }}}}"
"#
    );
    write(dir, "fake.yaml", &text)
}

fn run_spec(spec: &Path, extra: &[&str]) -> support::Output {
    run(toolrun()
        .arg("run")
        .arg(spec)
        .args(["--query", "work", "--json"])
        .args(extra))
}

#[test]
fn requests_on_a_calls_stream_are_answered_at_once_recorded_and_replayed() {
    let dir = support::temp_dir("mcp-streams-requests");
    let fake = Fake::start("requests", &dir);
    let spec_path = spec(&dir, &fake.url(), "    elicitation: defaults");
    let fixture = dir.join("requests.fixture.json");
    let events_path = dir.join("events.jsonl");
    let out = run_spec(
        &spec_path,
        &[
            "--record",
            fixture.to_str().unwrap(),
            "--events",
            events_path.to_str().unwrap(),
        ],
    );
    out.assert_success();
    let got = &out.json()["tool_results"][0]["result"];
    assert_eq!(got["q-ping"]["result"], json!({}), "{out:?}");
    for q in ["q-sampling", "q-roots"] {
        assert_eq!(got[q]["error"]["code"], -32601, "{q}: {got}");
    }
    // `defaults`: every required field has a default, so the defaults are accepted.
    assert_eq!(
        got["q-elicit"]["result"],
        json!({ "action": "accept", "content": { "name": "Ada", "n": 3 } })
    );
    // The client declared elicitation, and sent a progress token with the call.
    let received = fake.received();
    assert_eq!(
        received[0]["body"]["params"]["capabilities"],
        json!({ "elicitation": {} })
    );
    let call = received
        .iter()
        .find(|m| m["body"]["method"] == "tools/call")
        .unwrap();
    assert_eq!(
        call["body"]["params"]["_meta"]["progressToken"],
        call["body"]["id"]
    );
    // Progress and log messages are events; so is each request and its answer.
    let progress = support::events_named(&events_path, "tool_progress");
    assert_eq!(progress.len(), 1, "{progress:?}");
    assert_eq!(progress[0]["progress"], 1);
    assert_eq!(progress[0]["total"], 2);
    assert_eq!(progress[0]["message"], "halfway");
    assert_eq!(progress[0]["tool"], "work");
    let logs = support::events_named(&events_path, "mcp_log");
    assert_eq!(logs[0]["data"], "working on it");
    assert_eq!(logs[0]["level"], "info");
    let asked = support::events_named(&events_path, "mcp_server_request");
    assert_eq!(asked.len(), 4, "{asked:?}");
    assert!(asked
        .iter()
        .any(|a| a["method"] == "elicitation/create" && a["answer"]["action"] == "accept"));
    // Offline, the recorded requests are answered again, as recorded.
    drop(fake);
    run(toolrun().arg("replay").arg(&fixture)).assert_success();
    // A spec that now declines answers otherwise than the recording: the replay fails, saying so.
    let text = std::fs::read_to_string(&spec_path).unwrap();
    write(
        &dir,
        "fake.yaml",
        &text.replace("elicitation: defaults", "elicitation: decline"),
    );
    let replayed = run(toolrun().arg("replay").arg(&fixture));
    replayed.assert_code(1);
    assert!(
        replayed
            .stdout
            .contains(r#"/body/result/action: expected "accept", got "decline""#)
            && replayed
                .stdout
                .contains("MCP server `fake` sent `elicitation/create` during `work`"),
        "{replayed:?}"
    );

    // By default a server's request for input is declined.
    let fake = Fake::start("requests", &dir);
    let spec_path = spec(&dir, &fake.url(), "");
    let out = run_spec(&spec_path, &[]);
    out.assert_success();
    assert_eq!(
        out.json()["tool_results"][0]["result"]["q-elicit"]["result"],
        json!({ "action": "decline" })
    );
}

#[test]
fn a_stream_closed_before_its_response_is_resumed_with_last_event_id() {
    let dir = support::temp_dir("mcp-streams-resume");
    let fake = Fake::start("resume", &dir);
    let spec_path = spec(&dir, &fake.url(), "");
    let fixture = dir.join("resume.fixture.json");
    let out = run_spec(&spec_path, &["--record", fixture.to_str().unwrap()]);
    out.assert_success();
    assert_eq!(
        out.json()["tool_results"][0]["result"],
        "resumed",
        "{out:?}"
    );
    let get = fake
        .received()
        .into_iter()
        .find(|m| m["http"] == "GET" && !m["headers"]["last-event-id"].is_null())
        .expect("a GET resumed the stream");
    // Header names as the client sent them (lower case on HTTP/1.1 from toolrun).
    assert_eq!(get["headers"]["last-event-id"], "e-1");
    assert_eq!(get["headers"]["accept"], "text/event-stream");
    assert_eq!(get["headers"]["mcp-session-id"], "fake-session");
    drop(fake);
    run(toolrun().arg("replay").arg(&fixture)).assert_success();
}

#[test]
fn a_response_under_another_id_is_an_error() {
    let dir = support::temp_dir("mcp-streams-id");
    let fake = Fake::start("wrong_id", &dir);
    let out = run_spec(&spec(&dir, &fake.url(), ""), &[]);
    let trace = out.json();
    let error = &trace["tool_errors"][0];
    assert_eq!(error["kind"], "execution_error", "{out:?}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("MCP server `fake`")
            && message.contains("answered `tools/call` (request id 3) with a response for id 999"),
        "{message}"
    );
}

#[test]
fn an_endless_listing_stops_at_its_byte_cap() {
    let dir = support::temp_dir("mcp-streams-pages");
    let fake = Fake::start("pages", &dir);
    let fixture = dir.join("pages.fixture.json");
    let out = run_spec(
        &spec(&dir, &fake.url(), ""),
        &["--record", fixture.to_str().unwrap()],
    );
    assert_eq!(out.code, 1, "{out:?}");
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "mcp_error", "{out:?}");
    let error = trace["error"].as_str().unwrap();
    assert!(
        error.contains("listed more than 16 MiB of tools"),
        "{error}"
    );
    // 1 MiB pages: it stopped after 16 of them, not at the 100-page limit.
    let pages = fake.methods().iter().filter(|m| *m == "tools/list").count();
    assert!(pages <= 17, "{pages} pages");
}

/// Issue 24 §7: endless 3.5 MB pages once drove toolrun, recording, to an allocation abort under
/// a memory cap. Under an address-space limit (512 MiB, about 2.5 times what this run needs; a
/// listing read to the page limit needs more than twice the limit), the run ends with the
/// listing's byte cap, exit 1, and no abort.
#[cfg(target_os = "linux")]
#[test]
fn an_endless_listing_recorded_under_a_memory_cap_stops_at_its_byte_cap() {
    use std::os::unix::process::CommandExt;
    let dir = support::temp_dir("mcp-streams-big-pages");
    let fake = Fake::start("big_pages", &dir);
    let fixture = dir.join("pages.fixture.json");
    let mut cmd = toolrun();
    cmd.arg("run")
        .arg(spec(&dir, &fake.url(), ""))
        .args(["--query", "work", "--json", "--record"])
        .arg(&fixture)
        // One malloc arena: the address space a run reserves does not grow with the machine's
        // cores (each arena reserves 64 MiB).
        .env("MALLOC_ARENA_MAX", "1");
    const LIMIT: u64 = 512 << 20;
    // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = run(&mut cmd);
    assert!(!out.stderr.contains("memory allocation"), "{out:?}");
    assert_eq!(out.code, 1, "{out:?}");
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "mcp_error", "{out:?}");
    let error = trace["error"].as_str().unwrap();
    assert!(
        error.contains("MCP server `fake`")
            && error.contains("listed more than 16 MiB of tools in 5 page(s)")
            && error.contains("Check the server"),
        "{error}"
    );
    let pages = fake.methods().iter().filter(|m| *m == "tools/list").count();
    assert_eq!(pages, 5, "{pages} pages");
}

/// Two calls at once in one HTTP session: the session's own stream, held by the call that
/// opened it, carries both calls' progress; each call gets its own (by its `progressToken`),
/// not the call that happened to read the stream.
#[test]
fn concurrent_calls_in_one_session_each_get_their_own_progress() {
    let dir = support::temp_dir("mcp-streams-crossed");
    let fake = Fake::start("crossed", &dir);
    let text = std::fs::read_to_string(spec(&dir, &fake.url(), ""))
        .unwrap()
        .replace(
            "          - tool_calls: [{ name: work }]",
            "          - tool_calls: [{ name: work, arguments: { n: 1 } }, { name: work, arguments: { n: 2 } }]",
        );
    let spec_path = write(&dir, "crossed.yaml", &text);
    let events_path = dir.join("events.jsonl");
    let out = run_spec(&spec_path, &["--events", events_path.to_str().unwrap()]);
    out.assert_success();
    let trace = out.json();
    let n_of = |id: &Value| {
        trace["tool_results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| &r["id"] == id)
            .unwrap_or_else(|| panic!("no call {id}"))["arguments"]["n"]
            .clone()
    };
    let progress = support::events_named(&events_path, "tool_progress");
    assert_eq!(progress.len(), 2, "{progress:#?}");
    for p in &progress {
        assert_eq!(
            p["message"],
            format!("for n={}", n_of(&p["id"])),
            "{progress:#?}"
        );
    }
    // The second call's GET was refused: one stream for the session, as the server allows.
    let gets = fake
        .methods()
        .iter()
        .filter(|m| m.starts_with("GET"))
        .count();
    assert_eq!(gets, 2, "{:?}", fake.methods());
}

#[test]
fn a_call_given_up_on_is_cancelled_with_the_server() {
    let dir = support::temp_dir("mcp-streams-cancel");
    let fake = Fake::start("hang", &dir);
    let text = std::fs::read_to_string(spec(&dir, &fake.url(), ""))
        .unwrap()
        // The call's timeout is what is tested; connecting keeps a bound that only catches a
        // hang (the Python server answers `initialize` slowly on a loaded machine).
        .replace("timeout: 60s", "timeout: 2s\n    startup_timeout: 60s");
    let spec_path = write(&dir, "fake-2s.yaml", &text);
    let out = run_spec(&spec_path, &[]);
    let trace = out.json();
    assert_eq!(trace["tool_errors"][0]["kind"], "timeout", "{out:?}");
    let cancelled: Vec<Value> = fake
        .received()
        .into_iter()
        .filter(|m| m["body"]["method"] == "notifications/cancelled")
        .collect();
    assert_eq!(cancelled.len(), 1, "{:?}", fake.methods());
    assert_eq!(cancelled[0]["body"]["params"]["requestId"], 3);

    // Ctrl-C in the middle of the call: the server is told before the session ends.
    let dir = support::temp_dir("mcp-streams-interrupt");
    let fake = Fake::start("hang", &dir);
    let spec_path = spec(&dir, &fake.url(), "");
    let mut child = toolrun()
        .arg("run")
        .arg(&spec_path)
        .args(["--query", "work"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !fake.methods().iter().any(|m| m == "tools/call") {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no call arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    let methods = fake.methods();
    let at = methods
        .iter()
        .position(|m| m == "notifications/cancelled")
        .unwrap_or_else(|| panic!("{methods:?}"));
    assert_eq!(
        methods.last().map(String::as_str),
        Some("DELETE null"),
        "{methods:?}"
    );
    assert!(at < methods.len() - 1);
}
