//! Ctrl-C and SIGTERM mid-run: the trace of the run in progress is still written, atomically,
//! with everything observed so far.

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{Response, TestServer};

fn slow_server() -> TestServer {
    TestServer::start(|req| match req.path.as_str() {
        "/slow" => {
            Response::json(200, serde_json::json!({"ok": true})).delay(Duration::from_secs(20))
        }
        _ => Response::json(200, serde_json::json!({"ok": true})),
    })
}

fn spec(server: &TestServer) -> String {
    format!(
        r#"version: 1
name: slow
tools:
  quick:
    description: Answers at once with a fixed value.
    kind: mock
    responses: [{{ result: 1 }}]
  slow_service:
    description: Calls a service that takes a long time to answer.
    kind: http
    request: {{ url: "{url}" }}
    timeout: 60s
policy:
  network: {{ allow_hosts: ["{host}"] }}
limits: {{ tool_timeout: 60s, run_timeout: 120s }}
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: quick }}]
          - tool_calls: [{{ name: slow_service }}]
          - answer: done
tests:
  - name: slow_case
    query: go
    expect: {{ status: ok }}
"#,
        url = server.url("/slow"),
        host = server.addr()
    )
}

fn start(args: &[&str], dir: &std::path::Path) -> Child {
    let mut cmd: Command = support::toolrun();
    cmd.args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolrun starts")
}

fn wait_for_slow_request(server: &TestServer) {
    let started = Instant::now();
    while server.hits("/slow") == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the slow request never arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait(mut child: Child) -> i32 {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "toolrun did not stop after the signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigint_mid_run_writes_the_trace_and_exits_130() {
    let server = slow_server();
    let dir = support::temp_dir("sigint-run");
    let spec_path = support::write(&dir, "slow.yaml", &spec(&server));
    let trace = dir.join("trace.json");
    let child = start(
        &[
            "run",
            spec_path.to_str().unwrap(),
            "--query",
            "go",
            "--trace",
            trace.to_str().unwrap(),
        ],
        &dir,
    );
    wait_for_slow_request(&server);
    signal(&child, "INT");
    assert_eq!(wait(child), 130);
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(t["status"], "failed");
    assert_eq!(t["stop_reason"], "interrupted");
    assert_eq!(
        t["tool_results"][0]["name"], "quick",
        "what was observed before the signal is kept"
    );
    assert_eq!(t["steps"], 2);
    // Only the finished file is left: no temporary files beside it.
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn sigterm_mid_run_writes_the_trace_and_exits_143() {
    let server = slow_server();
    let dir = support::temp_dir("sigterm-run");
    let spec_path = support::write(&dir, "slow.yaml", &spec(&server));
    let trace = dir.join("trace.json");
    let child = start(
        &[
            "run",
            spec_path.to_str().unwrap(),
            "--query",
            "go",
            "--trace",
            trace.to_str().unwrap(),
        ],
        &dir,
    );
    wait_for_slow_request(&server);
    signal(&child, "TERM");
    assert_eq!(wait(child), 143);
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(t["stop_reason"], "interrupted");
}

#[test]
fn sigint_during_a_test_suite_reports_and_exits_130() {
    let server = slow_server();
    let dir = support::temp_dir("sigint-test");
    let spec_path = support::write(&dir, "slow.yaml", &spec(&server));
    let child = start(
        &["test", spec_path.to_str().unwrap(), "--allow-network"],
        &dir,
    );
    wait_for_slow_request(&server);
    signal(&child, "INT");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("FAIL slow::slow_case"), "{stdout}");
    assert!(stdout.contains("interrupted"), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("0 passed, 1 failed"));
}

/// A run recorded until Ctrl-C replays: the replay stops where the recording was cut off (the
/// request that never got its answer), as the recording did, instead of failing on it.
#[test]
fn a_run_recorded_until_sigint_replays() {
    let server = slow_server();
    let dir = support::temp_dir("sigint-record-run");
    let spec_path = support::write(&dir, "slow.yaml", &spec(&server));
    let fixture = dir.join("f.json");
    let child = start(
        &[
            "run",
            spec_path.to_str().unwrap(),
            "--query",
            "go",
            "--record",
            fixture.to_str().unwrap(),
        ],
        &dir,
    );
    wait_for_slow_request(&server);
    signal(&child, "INT");
    assert_eq!(wait(child), 130);
    let recorded: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    assert_eq!(recorded["trace"]["stop_reason"], "interrupted");
    drop(server);
    let replay = support::run(support::toolrun().arg("replay").arg(&fixture));
    replay.assert_success();
}

#[test]
fn sigint_during_a_replay_reports_and_exits_130() {
    let dir = support::temp_dir("sigint-replay");
    let spec_text = r#"version: 1
name: slow_replay
tools:
  quick:
    description: Answers at once with a fixed value.
    kind: mock
    responses: [{ result: 1 }]
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: quick }]
          - answer: done
"#;
    let spec_path = support::write(&dir, "s.yaml", spec_text);
    let fixture = dir.join("f.json");
    let out = support::run(
        support::toolrun()
            .arg("run")
            .arg(&spec_path)
            .args(["--query", "go", "--record"])
            .arg(&fixture),
    );
    assert_eq!(out.code, 0, "{out:?}");
    // The spec now makes the tool slow: the replay is still running when the signal comes.
    std::fs::write(&spec_path, spec_text.replace("    responses: [{ result: 1 }]", "    timeout: 60s\n    faults: [{ delay: 30s }]\n    responses: [{ result: 1 }]\nlimits: { tool_timeout: 60s, run_timeout: 120s }")).unwrap();
    let child = start(&["replay", fixture.to_str().unwrap()], &dir);
    // Nothing outside shows the replay is under way; it starts in milliseconds and then waits
    // 30 s on the delay, so a second is a wide margin.
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, "INT");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("interrupted"), "{stdout}");
    assert!(stdout.ends_with("0 passed, 1 failed\n"), "{stdout}");
}

/// Issue 23 §8: a test interrupted while recording leaves no fixture, so `--record missing`
/// records it next time instead of replaying half a run as if it were the recording.
#[test]
fn sigint_while_recording_writes_no_fixture() {
    let server = slow_server();
    let dir = support::temp_dir("sigint-record");
    let text = spec(&server).replace("tests:\n", "fixtures: fx\ntests:\n");
    let spec_path = support::write(&dir, "slow.yaml", &text);
    let child = start(
        &["test", spec_path.to_str().unwrap(), "--record", "missing"],
        &dir,
    );
    wait_for_slow_request(&server);
    signal(&child, "INT");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("FAIL slow::slow_case"), "{stdout}");
    assert!(
        stdout.contains("the run was interrupted: fixture `")
            && stdout.contains("slow_case.json` was not written"),
        "{stdout}"
    );
    assert!(
        !dir.join("fx/slow_case.json").exists(),
        "an interrupted run became a fixture"
    );
}

/// Issue 36 §19: the handlers were tokio tasks, polled only once a run awaited something: a
/// SIGTERM before that (here while a large table loads, which never awaits) killed `run` with no
/// trace. It now ends the run as a signal does anywhere else: the trace, stop reason
/// `interrupted`, exit 143.
#[test]
fn sigterm_before_the_run_awaits_anything_still_writes_the_trace_and_exits_143() {
    let dir = support::temp_dir("sigterm-sync");
    let mut csv = String::from("id,name,city\n");
    for i in 0..400_000 {
        csv.push_str(&format!("{i},name{i},city{}\n", i % 100));
    }
    let table = support::write(&dir, "big.csv", &csv);
    let spec_path = support::write(
        &dir,
        "big.yaml",
        "version: 1\nname: big\ntools:\n  t:\n    description: Looks rows up in a big table.\n    kind: table\n    file: big.csv\nmodels:\n  m:\n    kind: scripted\n    scripts:\n      - turns:\n          - answer: done\n",
    );
    let trace = dir.join("trace.json");
    let table = table.canonicalize().unwrap();
    let child = start(
        &[
            "run",
            spec_path.to_str().unwrap(),
            "--query",
            "go",
            "--trace",
            trace.to_str().unwrap(),
        ],
        &dir,
    );
    // Signalled while it reads the table, before the run starts.
    let started = Instant::now();
    let reading = || {
        std::fs::read_dir(format!("/proc/{}/fd", child.id()))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == table))
    };
    while !reading() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the table was never opened"
        );
    }
    signal(&child, "TERM");
    assert_eq!(wait(child), 143);
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(t["stop_reason"], "interrupted");
    assert_eq!(t["status"], "failed");
}
