//! On a terminal, a side-effecting tool asks y/N instead of stopping. `script` (util-linux, in
//! every Debian base system) gives the binary a real pseudo-terminal.

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn in_terminal(args: &str, answer: &str) -> (i32, String) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let command = format!("{} {args}", env!("CARGO_BIN_EXE_toolrun"));
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
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(answer.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn yes_on_the_prompt_runs_the_tool_and_is_recorded_as_an_approval() {
    let dir = support::temp_dir("interactive-yes");
    let fixture = dir.join("f.json");
    let (code, screen) = in_terminal(
        &format!(
            "run specs/guardrails.yaml --query 'Refund order 42' --record {}",
            fixture.display()
        ),
        "y\n",
    );
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen.contains("`refund_order` has side effects. Run it with {\"order_id\":42}? [y/N]"),
        "{screen}"
    );
    assert!(screen.contains("Refunded order 42."), "{screen}");
    let recorded: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    assert_eq!(recorded["approvals"], serde_json::json!(["refund_order"]));
    // The replay needs no terminal: the approval comes from the fixture. The fixture lives
    // outside the project, so the spec it names is given explicitly.
    let out = support::run(
        support::toolrun()
            .arg("replay")
            .arg(&fixture)
            .args(["--spec", "specs/guardrails.yaml"]),
    );
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn anything_but_yes_stops_for_confirmation() {
    let (code, screen) = in_terminal("run specs/guardrails.yaml --query 'Refund order 42'", "n\n");
    assert_eq!(code, 3, "{screen}");
    assert!(screen.contains("needs_confirmation"), "{screen}");
    assert!(!screen.contains("Refunded"), "{screen}");
}

/// Issue 36 §19: the y/N prompt blocked the run's only thread, so SIGTERM went unseen (or, before
/// the run had awaited anything, killed it with no trace). A signal at the prompt now ends the
/// run as anywhere else: trace written, stop reason `interrupted`, exit 143.
#[test]
fn sigterm_at_the_prompt_ends_the_run_with_its_trace() {
    use std::io::Read;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = support::temp_dir("interactive-sigterm");
    let trace = dir.join("t.json");
    let command = format!(
        "{} run specs/guardrails.yaml --query 'Refund order 42' --trace {}",
        env!("CARGO_BIN_EXE_toolrun"),
        trace.display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(&root)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("`script` runs (util-linux)");
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut screen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            screen.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&screen).contains("[y/N]") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("the prompt appears");
    let toolrun = support::toolrun_below(child.id()).expect("toolrun runs under script");
    let status = Command::new("kill")
        .args(["-TERM", &toolrun.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = std::time::Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the run did not end on SIGTERM at the prompt"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    drop(child.stdin.take());
    assert_eq!(code, Some(143));
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(t["stop_reason"], "interrupted", "{t:#}");
}
