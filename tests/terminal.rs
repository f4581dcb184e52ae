//! Nothing drives the user's terminal (issue 12 §5): control sequences in answers, spec text
//! and test reports reach human output as visible escapes; `--json` and files keep the exact
//! text.

mod support;

use support::{run, toolrun};

/// OSC 52: "set the clipboard to `hello`", then a carriage return and a bidi override.
const OSC52: &str = "\u{1b}]52;c;aGVsbG8=\u{7}";

fn assert_inert(what: &str, text: &str) {
    assert!(
        !text
            .chars()
            .any(|c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{202e}'),
        "{what} holds a raw control character: {text:?}"
    );
}

fn spec(dir: &std::path::Path) -> std::path::PathBuf {
    support::write(
        dir,
        "osc.yaml",
        r#"version: 1
name: osc
tools:
  note:
    description: Returns a note with terminal escapes in it.
    kind: mock
    responses:
      - result: "note \e]52;c;aGVsbG8=\a"
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: note, arguments: {} }]
          - answer: "copied \e]52;c;aGVsbG8=\a\rover \u202Eevil"
tests:
  - name: "osc \e]52;c;aGVsbG8=\a"
    query: q
    expect: { output_contains: "nothing like this" }
"#,
    )
}

#[test]
fn an_osc52_answer_is_shown_escaped_and_kept_exact_in_json_and_files() {
    let dir = support::temp_dir("terminal-run");
    let spec = spec(&dir);
    let trace = dir.join("trace.json");
    let out = run(toolrun()
        .arg("run")
        .arg(&spec)
        .args(["--query", "q", "--trace"])
        .arg(&trace));
    assert_eq!(out.code, 0, "{out:?}");
    assert_inert("stdout", &out.stdout);
    assert_eq!(
        out.stdout,
        "copied \\u{1b}]52;c;aGVsbG8=\\u{7}\\rover \\u{202e}evil\n"
    );
    let exact = format!("copied {OSC52}\rover \u{202e}evil");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(file["final_output"], exact.as_str());
    let json = run(toolrun()
        .arg("run")
        .arg(&spec)
        .args(["--query", "q", "--json"]));
    assert_eq!(json.json()["final_output"], exact.as_str());
}

#[test]
fn test_reports_and_diagnostics_show_escapes() {
    let dir = support::temp_dir("terminal-report");
    let spec = spec(&dir);
    let out = run(toolrun().arg("test").arg(&spec));
    assert_eq!(out.code, 1, "{out:?}");
    assert_inert("test stdout", &out.stdout);
    assert_inert("test stderr", &out.stderr);
    assert!(
        out.stdout.contains("osc \\u{1b}]52;c;aGVsbG8=\\u{7}"),
        "{out:?}"
    );

    let bad = support::write(
        &dir,
        "bad.yaml",
        "version: 1\nname: bad\n\"key\\e]52;c;aGVsbG8=\\a\": 1\n",
    );
    let out = run(toolrun().arg("check").arg(&bad));
    assert_eq!(out.code, 1, "{out:?}");
    assert_inert("check stderr", &out.stderr);
    assert!(out.stderr.contains("\\u{1b}]52"), "{out:?}");
}
