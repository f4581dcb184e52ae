//! `toolrun check --env-report` (issue 36 §4): every environment variable a spec reads, where it
//! is declared, what uses it and the hosts a run may send it to, as a table and as JSON.
//! `UPDATE_SNAPSHOTS=1 cargo test --test env_report` rewrites the snapshots; review the diff.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::{run, toolrun};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/env_report")
}

/// Run from the folder, so the paths in the report are the file names.
fn check(args: &[&str]) -> support::Output {
    run(toolrun().current_dir(dir()).arg("check").args(args))
}

#[test]
fn the_table_lists_every_variable_with_where_it_may_go() {
    let out = check(&["--env-report", "review.yaml"]);
    assert_eq!(out.code, 0, "{out:?}");
    support::assert_snapshot(&dir().join("review.stdout"), &out.stdout);
    // The diagnostics stay on stderr, as without the flag.
    assert!(out.stderr.contains("warning[W105]"), "{out:?}");
}

#[test]
fn the_json_document_adds_the_environment_beside_the_diagnostics() {
    let out = check(&["--env-report", "--format", "json", "review.yaml"]);
    assert_eq!(out.code, 0, "{out:?}");
    support::assert_snapshot(&dir().join("review.json"), &out.stdout);
    let doc = out.json();
    let plain = check(&["--format", "json", "review.yaml"]).json();
    assert_eq!(
        doc["diagnostics"], plain,
        "the diagnostics are the same array"
    );
    let github = doc["environment"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["variable"] == "GITHUB_TOKEN")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(github["declared_at"], "review.yaml:45:18", "{github}");
    assert_eq!(
        github["hosts"],
        serde_json::json!(["models.example.net:443"])
    );
    // A secret in a body goes to the tool's own host only: a redirect to another origin that
    // would repeat it is refused (issue 36), as one in headers is dropped.
    let hosts_of = |name: &str| {
        doc["environment"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["variable"] == name)
            .map(|e| e["hosts"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        hosts_of("NOTES_KEY"),
        serde_json::json!(["notes.example.com"])
    );
    assert_eq!(
        hosts_of("PAYMENTS_KEY"),
        serde_json::json!(["payments.example.com:8443"]),
        "{doc}"
    );
}

#[test]
fn a_spec_with_errors_is_named_not_reported_and_other_formats_are_refused() {
    let out = check(&["--env-report", "review.yaml", "broken.yaml"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout
            .contains("broken.yaml: not reported (the spec has errors, and cannot run)"),
        "{out:?}"
    );
    assert!(out.stdout.contains("PAYMENTS_KEY"), "{out:?}");
    for format in ["sarif", "github"] {
        let out = check(&["--env-report", "--format", format, "review.yaml"]);
        assert_eq!(out.code, 2, "{out:?}");
        assert!(out
            .stderr
            .contains("--env-report works with --format human or json"));
    }
}
