//! `toolrun chat` (issue 33 §2), through the real binary: without a terminal one user turn per
//! line of stdin and each answer on its own line; the model (scripted) sees the turns before;
//! end of input ends the session with the conversation's trace. On a pseudo-terminal
//! (`script`): a confirmation asked inline.

mod support;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const STOCKS: &str = include_str!("data/conversations/stocks.yaml");

fn chat_piped(dir: &std::path::Path, args: &[&str], input: &str) -> std::process::Output {
    let mut child = support::toolrun()
        .current_dir(dir)
        .arg("chat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn stdin_turns_make_one_conversation_whose_second_answer_needs_the_first() {
    let dir = support::temp_dir("chat-piped");
    support::write(&dir, "s.yaml", STOCKS);
    let out = chat_piped(
        &dir,
        &["s.yaml", "--trace", "t.json"],
        "What is AAPL at?\n\nAnd my gain on 100 bought at 150?\n",
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    // Turn 2's script needs turn 1's answer in the history; alone it asks "Which stock?".
    assert_eq!(stdout, "AAPL is 178.15.\nYour gain is 2815.\n", "{stderr}");
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("t.json")).unwrap()).unwrap();
    let turns = trace["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{trace:#}");
    assert_eq!(turns[1]["query"], "And my gain on 100 bought at 150?");
    assert_eq!(trace["final_output"], "Your gain is 2815.");
    assert_eq!(trace["tool_call_count"], 2);

    // The same second question alone: the other script, so the history is what decided.
    let alone = chat_piped(&dir, &["s.yaml"], "And my gain on 100 bought at 150?\n");
    assert_eq!(String::from_utf8_lossy(&alone.stdout), "Which stock?\n");
}

#[test]
fn a_failed_turn_is_reported_and_the_session_goes_on() {
    let dir = support::temp_dir("chat-limits");
    // Limits count over the conversation: the second turn's tool call is one too many.
    let spec = STOCKS.replace("models:\n", "limits: { max_tool_calls: 1 }\nmodels:\n");
    support::write(&dir, "s.yaml", &spec);
    let out = chat_piped(
        &dir,
        &["s.yaml"],
        "What is AAPL at?\nAnd my gain on 100 bought at 150?\nThanks\n",
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    // A turn stopped by a limit needs review: the session ends as such a run would (3).
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(stdout.starts_with("AAPL is 178.15.\n"), "{stdout}{stderr}");
    assert!(!stdout.contains("2815"), "{stdout}{stderr}");
    assert!(stderr.contains("toolrun: turn "), "{stderr}");
    assert!(stdout.ends_with("That was turn 3.\n"), "{stdout}{stderr}");
}

#[test]
fn the_session_exits_with_its_worst_turns_code_as_run_would() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let spec = "specs/guardrails.yaml";
    let code = |input: &str| {
        let out = chat_piped(&root, &[spec], input);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), stderr)
    };
    let (ok, stderr) = code("Where is order 42?\n");
    assert_eq!(ok, Some(0), "{stderr}");
    // Without a terminal nobody confirms: the refund stops for a person, as `run` does (3).
    let (confirm, stderr) = code("Refund order 42\nWhere is order 42?\n");
    assert_eq!(confirm, Some(3), "{stderr}");
    assert!(stderr.contains("needs_confirmation"), "{stderr}");
    // A turn that failed (two malformed replies) outranks it, whichever came first.
    let (failed, stderr) = code("prose please\nRefund order 42\n");
    assert_eq!(failed, Some(1), "{stderr}");
    assert!(stderr.contains("malformed_decision"), "{stderr}");
}

/// `toolrun chat ARGS` on a pseudo-terminal with `input` typed, then Ctrl-D: the end of the
/// session.
fn in_terminal(args: &[&str], input: &str) -> (i32, String) {
    let args: Vec<&str> = ["chat"].iter().chain(args).copied().collect();
    support::in_terminal(&args, &[], &format!("{input}\x04"))
}

#[test]
fn on_a_terminal_a_confirmation_is_asked_inline_and_the_tool_call_shown() {
    let (code, screen) = in_terminal(&["specs/guardrails.yaml"], "Refund order 42\ny\n");
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen.contains("`refund_order` has side effects. Run it with {\"order_id\":42}? [y/N]"),
        "{screen}"
    );
    assert!(
        screen.contains("· refund_order({\"order_id\":42})"),
        "{screen}"
    );
    assert!(screen.contains("Refunded order 42."), "{screen}");
}

/// Waits (generously: only a hang fails it) until `cond` holds.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{what} never happened"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_on_a_terminal_stops_the_answer_not_the_session_and_ctrl_d_ends_it() {
    let server = support::TestServer::start(|req| match req.path.as_str() {
        "/slow" => support::Response::json(200, serde_json::json!({"ok": true}))
            .delay(std::time::Duration::from_secs(30)),
        _ => support::Response::json(200, serde_json::json!({"ok": true})),
    });
    let dir = support::temp_dir("chat-ctrl-c");
    let spec = format!(
        r#"version: 1
name: slow
tools:
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
      - when: "(?i)slow"
        turns:
          - tool_calls: [{{ name: slow_service }}]
          - answer: never shown
      - turns:
          - answer: "Still here at turn {{{{ turn }}}}."
"#,
        url = server.url("/slow"),
        host = server.addr()
    );
    let spec_path = support::write(&dir, "slow.yaml", &spec);
    let trace = dir.join("t.json");
    let recording = dir.join("r.json");
    let (spec_arg, trace_arg, recording_arg) = (
        spec_path.display().to_string(),
        trace.display().to_string(),
        recording.display().to_string(),
    );
    let mut term = support::toolrun_in_terminal(
        &[
            "chat",
            &spec_arg,
            "--trace",
            &trace_arg,
            "--record",
            &recording_arg,
        ],
        &[],
    );
    term.type_keys("go slow\n");
    until("the slow request", || server.hits("/slow") > 0);
    let toolrun = support::toolrun_below(term.id()).expect("toolrun runs under script");
    let status = Command::new("kill")
        .args(["-INT", &toolrun.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    term.wait_for("interrupted");
    term.type_keys("are you there?\n");
    term.wait_for("Still here at turn 2.");
    // Ctrl-D on the terminal ends the session; a second one declines to save it as a test.
    term.type_keys("\x04");
    term.wait_for("Save this conversation");
    term.type_keys("\x04");
    let code = term.wait_exit("the end of the session never happened");
    let (_, shown) = term.finish_raw();
    assert_eq!(code, 0, "{shown}");
    assert!(!shown.contains("never shown"), "{shown}");
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let turns = t["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{t:#}");
    assert_eq!(turns[0]["stop_reason"], "interrupted", "{t:#}");
    assert_eq!(turns[1]["final_output"], "Still here at turn 2.", "{t:#}");

    // The call the interruption cut off is answered in the history, as interrupted: neither
    // the trace nor the recording keeps a tool call without its result.
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    for doc in [&t, &fixture["trace"]] {
        let messages = doc["messages"].as_array().unwrap();
        let results: Vec<&serde_json::Value> = messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| &m["tool_call_id"])
            .collect();
        let calls: Vec<&serde_json::Value> = messages
            .iter()
            .filter_map(|m| m["tool_calls"].as_array())
            .flatten()
            .map(|c| &c["id"])
            .collect();
        assert_eq!(calls.len(), 1, "{doc:#}");
        assert_eq!(calls, results, "{doc:#}");
        let closed = messages.iter().find(|m| m["role"] == "tool").unwrap();
        assert!(
            closed["content"].as_str().unwrap().contains("interrupted"),
            "{closed:#}"
        );
    }
    // The recording replays: its first turn stops where the request was cut off, again.
    drop(server);
    let replay = support::run(support::toolrun().arg("replay").arg(&recording));
    replay.assert_success();
}

#[test]
fn a_recorded_chat_replays_turn_by_turn() {
    let dir = support::temp_dir("chat-record");
    support::write(&dir, "s.yaml", STOCKS);
    let input = "What is AAPL at?\nAnd my gain on 100 bought at 150?\n";
    let out = chat_piped(&dir, &["s.yaml", "--record", "chat.json"], input);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("chat.json")).unwrap()).unwrap();
    assert_eq!(fixture["query"], "What is AAPL at?");
    assert_eq!(fixture["trace"]["turns"].as_array().unwrap().len(), 2);
    let replay = support::run(
        support::toolrun()
            .current_dir(&dir)
            .args(["replay", "chat.json"]),
    );
    replay.assert_success();
    // A recording into a folder not made yet names its spec from that folder.
    let out = chat_piped(&dir, &["s.yaml", "--record", "new/chat.json"], input);
    assert_eq!(out.status.code(), Some(0));
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("new/chat.json")).unwrap()).unwrap();
    assert_eq!(fixture["spec"]["path"], "../s.yaml");
    let replay = support::run(
        support::toolrun()
            .current_dir(std::env::temp_dir())
            .arg("replay")
            .arg(dir.join("new/chat.json"))
            .arg("--root")
            .arg(&dir),
    );
    replay.assert_success();
    // A recording never overwrites one.
    let again = chat_piped(&dir, &["s.yaml", "--record", "chat.json"], input);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
}

#[test]
fn save_appends_a_passing_multi_turn_test_and_leaves_the_rest_of_the_file_alone() {
    let dir = support::temp_dir("chat-save");
    // `tests:` in the middle, with comments around, so the edit has something to disturb.
    let (head, tests) = STOCKS.split_once("tests:\n").unwrap();
    let before = format!("# my tests\ntests:\n{tests}\n# tools and models below\n{head}");
    support::write(&dir, "s.yaml", &before);
    let out = chat_piped(
        &dir,
        &["s.yaml"],
        "What is AAPL at?\nAnd my gain on 100 bought at 150?\n/save from chat\n/save from chat\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("saved the conversation as test `from chat`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("already has a test named `from chat`"),
        "{stderr}"
    );
    let after = std::fs::read_to_string(dir.join("s.yaml")).unwrap();
    let saved = r#"  - name: "from chat"
    turns:
      - query: "What is AAPL at?"
        expect: { tool_calls: ["get_stock_price"], output_contains: "AAPL is 178.15." }
      - query: "And my gain on 100 bought at 150?"
        expect: { tool_calls: ["calculate_expression"], output_contains: "Your gain is 2815." }
"#;
    assert_eq!(
        after,
        format!("# my tests\ntests:\n{tests}{saved}\n# tools and models below\n{head}")
    );
    let check = support::run(
        support::toolrun()
            .current_dir(&dir)
            .args(["check", "s.yaml"]),
    );
    check.assert_success();
    let test = support::run(support::toolrun().current_dir(&dir).args([
        "test",
        "s.yaml",
        "--filter",
        "from chat",
    ]));
    test.assert_success();
    assert!(test.stdout.contains("PASS convo::from chat"), "{test:?}");
}

#[test]
fn resume_continues_a_conversation_from_its_trace() {
    let dir = support::temp_dir("chat-resume");
    support::write(&dir, "s.yaml", STOCKS);
    let first = chat_piped(
        &dir,
        &["s.yaml", "--trace", "t1.json"],
        "What is AAPL at?\n",
    );
    assert_eq!(String::from_utf8_lossy(&first.stdout), "AAPL is 178.15.\n");
    // The second turn's script needs the first answer in the history and its price in
    // `results`; the third is chosen by its number.
    let out = chat_piped(
        &dir,
        &["s.yaml", "--resume", "t1.json", "--trace", "t2.json"],
        "And my gain on 100 bought at 150?\nThanks\n",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Your gain is 2815.\nThat was turn 3.\n",
        "{stderr}"
    );
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("t2.json")).unwrap()).unwrap();
    assert_eq!(trace["turns"].as_array().unwrap().len(), 3, "{trace:#}");
    assert_eq!(trace["turns"][0]["query"], "What is AAPL at?");
    assert_eq!(trace["tool_call_count"], 2);
    let ids: Vec<&str> = trace["tool_results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_1", "call_2"]);

    // Limits go on counting where the trace stopped.
    let limited = STOCKS.replace("models:\n", "limits: { max_tool_calls: 1 }\nmodels:\n");
    support::write(&dir, "l.yaml", &limited);
    let out = chat_piped(
        &dir,
        &["l.yaml", "--resume", "t1.json"],
        "And my gain on 100 bought at 150?\n",
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("2815"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("toolrun: turn "));
}

#[test]
fn on_a_terminal_the_end_of_the_session_offers_to_save_it_as_a_test() {
    let dir = support::temp_dir("chat-save-on-exit");
    let spec = dir.join("s.yaml");
    std::fs::write(&spec, STOCKS).unwrap();
    let (code, screen) = in_terminal(
        &[&spec.display().to_string()],
        // The session's turn, Ctrl-D, then the name asked for.
        "What is AAPL at?\n\x04kept\n",
    );
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen.contains("Save this conversation as a test"),
        "{screen}"
    );
    let after = std::fs::read_to_string(&spec).unwrap();
    assert!(after.starts_with(STOCKS), "{after}");
    assert!(after.ends_with("  - name: \"kept\"\n    turns:\n      - query: \"What is AAPL at?\"\n        expect: { tool_calls: [\"get_stock_price\"], output_contains: \"AAPL is 178.15.\" }\n"), "{after}");
    let test = support::run(
        support::toolrun()
            .args(["test"])
            .arg(&spec)
            .args(["--filter", "kept"]),
    );
    test.assert_success();
}

#[test]
fn a_session_on_a_live_model_saves_a_test_that_replays_offline() {
    use support::providers::{openai_answer, openai_tool_calls, Fake};
    let fake = Fake::openai(vec![
        openai_tool_calls(&[("call_a", "get_stock_price", r#"{"ticker":"AAPL"}"#)]),
        openai_answer("AAPL is 178.15."),
    ]);
    // Two models, the scripted one the default: the test must name the live one.
    let extra = "  scripted:\n    kind: scripted\n    scripts:\n      - turns: [{ answer: \"scripted\" }]\ndefault_model: scripted\n";
    let spec = fake.spec_file("", extra);
    let dir = spec.path().parent().unwrap().to_path_buf();
    let mut child = support::toolrun()
        .current_dir(&dir)
        .args(["chat", "spec.yaml", "--model", "live"])
        .env("TEST_KEY", support::providers::KEY)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"What is AAPL at?\n/save live chat\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("fixtures/live_chat.json"), "{stderr}");
    assert_eq!(fake.remaining(), 0, "{stderr}");
    let saved = std::fs::read_to_string(spec.path()).unwrap();
    assert!(
        saved.ends_with("  - name: \"live chat\"\n    model: \"live\"\n    fixture: \"fixtures/live_chat.json\"\n    turns:\n      - query: \"What is AAPL at?\"\n        expect: { tool_calls: [\"get_stock_price\"], output_contains: \"AAPL is 178.15.\" }\n"),
        "{saved}"
    );
    // The server gone and no key: the test replays what the session recorded.
    drop(fake);
    let test = support::run(
        support::toolrun()
            .current_dir(&dir)
            .env_remove("TEST_KEY")
            .args(["test", "spec.yaml", "--filter", "live chat"]),
    );
    test.assert_success();
    assert!(
        test.stdout.contains("PASS live_openai::live chat"),
        "{test:?}"
    );
    support::run(
        support::toolrun()
            .current_dir(&dir)
            .args(["check", "spec.yaml"]),
    )
    .assert_success();
}

#[test]
fn an_mcp_server_is_started_once_for_the_whole_conversation() {
    let dir = support::temp_dir("chat-mcp-once");
    // The server: toolrun itself, serving a mock over stdio.
    support::write(
        &dir,
        "served.yaml",
        r#"version: 1
name: served
tools:
  ping:
    description: Answers pong.
    kind: mock
    responses:
      - result: pong
"#,
    );
    let toolrun = env!("CARGO_BIN_EXE_toolrun");
    let served = dir.join("served.yaml");
    let spec = format!(
        r#"version: 1
name: client
tools:
  remote:
    kind: mcp
    description: The served spec over stdio.
    command: [{toolrun:?}, serve, {served:?}]
    tools: [ping]
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: ping }}]
          - answer: "Turn {{{{ turn }}}}: {{{{ last.result }}}}."
tests:
  - name: two_turns
    turns:
      - query: one
        expect: {{ output_contains: "Turn 1: pong" }}
      - query: two
        expect: {{ output_contains: "Turn 2: pong" }}
"#,
        served = served.display().to_string(),
    );
    support::write(&dir, "client.yaml", &spec);
    let input = "one\ntwo\nthree\n/save kept\n";
    let out = chat_piped(
        &dir,
        &[
            "client.yaml",
            "--allow-exec",
            toolrun,
            "--events",
            "events.jsonl",
            "--record",
            "r.json",
        ],
        input,
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        stdout, "Turn 1: pong.\nTurn 2: pong.\nTurn 3: pong.\n",
        "{stderr}"
    );
    // One process, started at the first turn and ended with the session, not one per turn.
    let events = dir.join("events.jsonl");
    assert_eq!(
        support::events_named(&events, "mcp_server_started").len(),
        1,
        "{}",
        std::fs::read_to_string(&events).unwrap()
    );
    assert_eq!(support::events_named(&events, "mcp_server_ended").len(), 1);
    // The recording (one initialize) replays as a conversation of the same kind.
    support::run(
        support::toolrun()
            .current_dir(&dir)
            .args(["replay", "r.json"]),
    )
    .assert_success();
    // A multi-turn test keeps its server for its conversation too.
    let test = support::run(support::toolrun().current_dir(&dir).args([
        "test",
        "client.yaml",
        "--allow-network",
        "--allow-exec",
        toolrun,
        "--events",
        "test-events.jsonl",
    ]));
    test.assert_success();
    let events = dir.join("test-events.jsonl");
    assert_eq!(
        support::events_named(&events, "mcp_server_started").len(),
        1,
        "{test:?}"
    );
    // What the server answered was recorded: the saved test replays it, no server started.
    let saved = std::fs::read_to_string(dir.join("client.yaml")).unwrap();
    assert!(
        saved.contains("  - name: \"kept\"\n    fixture: \"fixtures/kept.json\"\n"),
        "{saved}"
    );
    let test = support::run(support::toolrun().current_dir(&dir).args([
        "test",
        "client.yaml",
        "--filter",
        "kept",
    ]));
    test.assert_success();
}
