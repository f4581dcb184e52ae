//! The one run setup (`src/setup.rs`) behind `run`, `call`, `serve` and `test`: the same checks,
//! in the same words, before any work; `--events` and `--record` checked and written the same
//! way whichever command writes them.

mod support;

use std::path::{Path, PathBuf};

/// A spec with a secret, a tool that needs confirmation and a scripted model and test that use
/// it, so every command has something to set up.
const SPEC: &str = r#"version: 1
name: setup_checks
secrets: [SETUP_TOKEN]
tools:
  send_note:
    description: Sends a note (pretend side effects).
    kind: builtin
    builtin: calculator
    side_effects: true
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: send_note, arguments: { expression: "1 + 1" } }]
          - answer: "sent {{ last.result }}"
tests:
  - name: sends
    query: send it
    approve: [send_note]
    expect: { status: ok, output_contains: "sent 2" }
"#;

const TOKEN: &str = "setup-token-0123456789abcdef";

fn spec(dir: &Path) -> PathBuf {
    support::write(dir, "spec.yaml", SPEC)
}

/// `run`, `call`, `serve` and `test` over `spec` with `extra` flags; stdin is empty, so a
/// server that starts ends at once.
fn each_command(spec: &Path, extra: &[&str], token: bool) -> Vec<(&'static str, support::Output)> {
    let spec = spec.to_str().unwrap();
    let commands: [(&str, Vec<&str>); 4] = [
        ("run", vec!["run", spec, "--query", "send it"]),
        (
            "call",
            vec![
                "call",
                spec,
                "send_note",
                "--args",
                r#"{"expression": "2"}"#,
            ],
        ),
        ("serve", vec!["serve", spec]),
        ("test", vec!["test", spec, "--allow-network"]),
    ];
    commands
        .into_iter()
        .map(|(name, args)| {
            let mut cmd = support::toolrun();
            cmd.args(&args).args(extra);
            if token {
                cmd.env("SETUP_TOKEN", TOKEN);
            }
            (name, support::run_with_stdin(&mut cmd, ""))
        })
        .collect()
}

fn error_line<'a>(out: &'a support::Output, starts: &str) -> &'a str {
    out.stderr
        .lines()
        .chain(out.stdout.lines())
        .map(str::trim)
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .find(|l| l.starts_with(starts))
        .unwrap_or_else(|| panic!("no line starting with {starts:?}\n{out:?}"))
}

#[test]
fn a_missing_secret_is_worded_the_same_by_every_command() {
    let dir = support::temp_dir("setup_secret");
    let spec = spec(&dir);
    let expected = "the spec reads secret(s) `SETUP_TOKEN` from the environment, but they are not set; export them and run again";
    for (name, out) in each_command(&spec, &["--approve", "send_note"], false) {
        // `test` reports it as the case's failure (exit 1); the others stop at once (exit 2).
        out.assert_code(if name == "test" { 1 } else { 2 });
        assert_eq!(
            error_line(&out, "the spec reads"),
            expected,
            "{name}: {out:?}"
        );
    }
}

#[test]
fn an_approve_typo_is_worded_the_same_by_every_command() {
    let dir = support::temp_dir("setup_approve");
    let spec = spec(&dir);
    let expected =
        "--approve names `send_nte`, which is not a tool of this spec; did you mean `send_note`?";
    for (name, out) in each_command(&spec, &["--approve", "send_nte"], true) {
        out.assert_code(2);
        assert_eq!(
            error_line(&out, "--approve names"),
            expected,
            "{name}: {out:?}"
        );
        assert!(out.stdout.is_empty(), "{name}: nothing ran: {out:?}");
    }
}

#[test]
fn approve_and_now_reach_every_command() {
    let dir = support::temp_dir("setup_reach");
    let spec = spec(&dir);
    // Without `--approve`, `run` and `call` stop for a person (exit 3); with it, they run.
    for (name, out) in each_command(&spec, &[], true) {
        if name == "run" || name == "call" {
            out.assert_code(3);
        }
    }
    for (name, out) in each_command(&spec, &["--approve", "send_note"], true) {
        match name {
            "run" => assert_eq!(out.stdout.trim(), "sent 2", "{out:?}"),
            "call" => assert_eq!(out.stdout.trim(), "2", "{out:?}"),
            _ => {}
        }
    }
    // A clock that does not parse is refused by each, before anything runs.
    for (name, out) in each_command(&spec, &["--now", "yesterday-ish"], true) {
        out.assert_code(2);
        assert!(out.stdout.is_empty(), "{name}: {out:?}");
    }
}

#[test]
fn serve_events_onto_a_symlink_replaces_the_link_like_run() {
    let dir = support::temp_dir("setup_symlink");
    let spec = spec(&dir);
    for command in ["run", "serve"] {
        let victim = support::write(&dir, &format!("{command}-victim.txt"), "keep me\n");
        let link = dir.join(format!("{command}-events.jsonl"));
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let mut cmd = support::toolrun();
        cmd.env("SETUP_TOKEN", TOKEN).arg(command).arg(&spec);
        if command == "run" {
            cmd.args(["--query", "send it", "--approve", "send_note"]);
        }
        cmd.arg("--events").arg(&link);
        let out = support::run_with_stdin(&mut cmd, "");
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "keep me\n",
            "{command} wrote through the symlink: {out:?}"
        );
        let meta = std::fs::symlink_metadata(&link).unwrap();
        assert!(meta.file_type().is_file(), "{command}: {out:?}");
    }
}

#[test]
fn serve_checks_its_destinations_before_serving() {
    let dir = support::temp_dir("setup_serve_dest");
    let spec = spec(&dir);
    let file = support::write(&dir, "plain.txt", "x");
    let cases = [
        ("--record", file.join("session.json"), "is not a folder"),
        (
            "--events",
            dir.join("missing/events.jsonl"),
            "does not exist",
        ),
    ];
    for (flag, path, why) in cases {
        let mut cmd = support::toolrun();
        cmd.env("SETUP_TOKEN", TOKEN)
            .arg("serve")
            .arg(&spec)
            .arg(flag)
            .arg(&path);
        // A session that would be served: it must not start.
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let out = support::run_with_stdin(&mut cmd, &format!("{init}\n"));
        out.assert_code(2);
        assert!(
            out.stderr.contains(flag) && out.stderr.contains(why),
            "{flag}: {out:?}"
        );
        assert!(out.stdout.is_empty(), "{flag}: nothing was served: {out:?}");
        assert!(!path.exists(), "{flag}: {out:?}");
    }
}

#[test]
fn test_and_call_write_events_too() {
    let dir = support::temp_dir("setup_events");
    let spec = spec(&dir);
    for command in ["test", "call"] {
        let events = dir.join(format!("{command}.jsonl"));
        let mut cmd = support::toolrun();
        cmd.env("SETUP_TOKEN", TOKEN).arg(command).arg(&spec);
        if command == "call" {
            cmd.args([
                "send_note",
                "--args",
                r#"{"expression": "2"}"#,
                "--approve",
                "send_note",
            ]);
        }
        cmd.arg("--events").arg(&events);
        support::run(&mut cmd).assert_success();
        let text = std::fs::read_to_string(&events).unwrap();
        assert!(text.contains(r#""event":"tool_"#), "{command}: {text}");
        assert!(!text.contains(TOKEN), "{command}: {text}");
    }
}
