//! On a terminal, a side-effecting tool asks y/N instead of stopping. `script` (util-linux, in
//! every Debian base system) gives the binary a real pseudo-terminal.

mod support;

use std::process::Command;

#[test]
fn yes_on_the_prompt_runs_the_tool_and_is_recorded_as_an_approval() {
    let dir = support::temp_dir("interactive-yes");
    let fixture = dir.join("f.json");
    let fixture_arg = fixture.display().to_string();
    let (code, screen) = support::in_terminal(
        &[
            "run",
            "specs/guardrails.yaml",
            "--query",
            "Refund order 42",
            "--record",
            &fixture_arg,
        ],
        &[],
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
    let (code, screen) = support::in_terminal(
        &["run", "specs/guardrails.yaml", "--query", "Refund order 42"],
        &[],
        "n\n",
    );
    assert_eq!(code, 3, "{screen}");
    assert!(screen.contains("needs_confirmation"), "{screen}");
    assert!(!screen.contains("Refunded"), "{screen}");
}

/// Issue 36 §19: the y/N prompt blocked the run's only thread, so SIGTERM went unseen (or, before
/// the run had awaited anything, killed it with no trace). A signal at the prompt now ends the
/// run as anywhere else: trace written, stop reason `interrupted`, exit 143.
#[test]
fn sigterm_at_the_prompt_ends_the_run_with_its_trace() {
    let dir = support::temp_dir("interactive-sigterm");
    let trace = dir.join("t.json");
    let trace_arg = trace.display().to_string();
    let mut term = support::toolrun_in_terminal(
        &[
            "run",
            "specs/guardrails.yaml",
            "--query",
            "Refund order 42",
            "--trace",
            &trace_arg,
        ],
        &[],
    );
    term.wait_for("[y/N]");
    let toolrun = support::toolrun_below(term.id()).expect("toolrun runs under script");
    let status = Command::new("kill")
        .args(["-TERM", &toolrun.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = term.wait_exit("the run did not end on SIGTERM at the prompt");
    assert_eq!(code, 143);
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(t["stop_reason"], "interrupted", "{t:#}");
}
