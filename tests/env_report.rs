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

/// An OAuth client's `client_id`, `client_secret` and `private_key` go to the authorization
/// server, which the MCP server names only at run time (or, without protected-resource
/// metadata, is the MCP server's own origin): the report says so rather than "sent nowhere".
#[test]
fn oauth_client_credentials_are_listed_as_sent_to_the_authorization_server() {
    let out = check(&["--env-report", "oauth.yaml"]);
    assert_eq!(out.code, 0, "{out:?}");
    support::assert_snapshot(&dir().join("oauth.stdout"), &out.stdout);
    let doc = check(&["--env-report", "--format", "json", "oauth.yaml"]).json();
    let entry = |name: &str| {
        doc["environment"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["variable"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let secret = entry("NOTES_SECRET");
    assert_eq!(
        secret["hosts"],
        serde_json::json!(["notes.example.com"]),
        "{secret}"
    );
    assert_eq!(
        secret["unknown_hosts"],
        serde_json::json!([
            "the authorization server the MCP server `notes` names (discovered at run time)"
        ]),
        "{secret}"
    );
    assert_eq!(secret["used_by"][0]["name"], "notes", "{secret}");
    let key = entry("SIGNING_KEY");
    assert_eq!(
        key["hosts"],
        serde_json::json!(["files.example.com:8443"]),
        "{key}"
    );
    assert!(
        key["unknown_hosts"][0]
            .as_str()
            .unwrap_or_default()
            .contains("assertions signed with it go to the authorization server"),
        "{key}"
    );
}

/// With `policy.network.allow_hosts` a run refuses an authorization server outside it, so the
/// OAuth client's secret may go to those hosts only.
#[test]
fn with_an_allow_list_oauth_credentials_go_only_to_its_hosts() {
    let doc = check(&["--env-report", "--format", "json", "oauth_allowed.yaml"]).json();
    let secret = doc["environment"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["variable"] == "NOTES_SECRET")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        secret["hosts"],
        serde_json::json!(["login.example.com", "notes.example.com"]),
        "{secret}"
    );
    assert_eq!(secret["unknown_hosts"], serde_json::json!([]), "{secret}");
}
