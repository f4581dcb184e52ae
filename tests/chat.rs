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
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with("AAPL is 178.15.\n"), "{stdout}{stderr}");
    assert!(!stdout.contains("2815"), "{stdout}{stderr}");
    assert!(stderr.contains("toolrun: turn "), "{stderr}");
    assert!(stdout.ends_with("That was turn 3.\n"), "{stdout}{stderr}");
}

fn in_terminal(args: &str, input: &str) -> (i32, String) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let command = format!("{} chat {args}", env!("CARGO_BIN_EXE_toolrun"));
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(&root)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("`script` runs (util-linux)");
    {
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).unwrap();
        // Ctrl-D on the terminal: the end of the session.
        stdin.write_all(b"\x04").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn on_a_terminal_a_confirmation_is_asked_inline_and_the_tool_call_shown() {
    let (code, screen) = in_terminal("specs/guardrails.yaml", "Refund order 42\ny\n");
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
