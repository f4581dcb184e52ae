//! toolrun as a client in the official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in tests/npm): the suite starts its test server for a scenario and runs
//! `tests/mcp/conformance_client.sh` (the repository's wrapper: a spec with one `kind: mcp` entry,
//! driven through the binary) with the server's URL: the 2025-11-25 suite (0.1.16) and the
//! 2026-07-28 one (0.2.0-alpha.12). The authorization scenarios (`auth/*`) run toolrun's OAuth
//! client: a person's login on a terminal (`script`), who answers yes when toolrun asks whether
//! to log in and whose `$BROWSER` follows the redirect, or `grant: client_credentials`.

#[path = "npm/npm.rs"]
mod npm;
mod support;

fn scenario(name: &str) {
    run_scenario("@modelcontextprotocol/conformance", name, &[]);
}

/// A scenario of the 2026-07-28 suite (0.2.0-alpha.12, as `conformance-2026`), run at that
/// revision's wire, as its requirement set runs it.
fn scenario_2026(name: &str) {
    run_scenario("conformance-2026", name, &["--spec-version", "2026-07-28"]);
}

fn run_scenario(package: &str, name: &str, extra: &[&str]) {
    let wrapper =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/conformance_client.sh");
    let results = support::temp_dir(&format!("conformance-{}", name.replace('/', "-")));
    let mut cmd = npm::node_command(&format!("{package}/dist/index.js"));
    cmd.args(["client", "--command"])
        .arg(format!("bash {}", wrapper.display()))
        .args(["--scenario", name, "-o"])
        .arg(&results)
        .args(extra)
        .env("TOOLRUN_BIN", env!("CARGO_BIN_EXE_toolrun"))
        .env("NO_COLOR", "1");
    let out = support::run(&mut cmd);
    assert_eq!(out.code, 0, "scenario `{name}` failed\n{out:?}");
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains("OVERALL: PASSED") && all.contains(" 0 failed"),
        "{out:?}"
    );
}

#[test]
fn initialize_with_every_tool_of_a_server_that_lists_none() {
    scenario("initialize");
}

#[test]
fn tools_call() {
    scenario("tools_call");
}

#[test]
fn sse_retry_resumes_after_retry_with_last_event_id() {
    scenario("sse-retry");
}

#[test]
fn elicitation_is_answered_with_the_requested_defaults() {
    scenario("elicitation-sep1034-client-defaults");
}

// The 2026-07-28 requirement set's client scenarios that are not authorization (`auth/*`).

#[test]
fn tools_call_at_2026_07_28() {
    scenario_2026("tools_call");
}

#[test]
fn every_request_carries_its_metadata_and_a_refused_version_is_retried() {
    scenario_2026("request-metadata");
}

#[test]
fn input_required_is_answered_with_the_request_state_echoed() {
    scenario_2026("sep-2322-client-request-state");
}

#[test]
fn posts_name_their_method_and_target_in_headers() {
    scenario_2026("http-standard-headers");
}

#[test]
fn annotated_arguments_are_mirrored_into_headers() {
    scenario_2026("http-custom-headers");
}

#[test]
fn tools_with_malformed_header_annotations_are_left_out() {
    scenario_2026("http-invalid-tool-headers");
}

#[test]
fn a_network_ref_in_a_schema_is_never_fetched() {
    scenario_2026("json-schema-ref-no-deref");
}

#[test]
fn the_2026_requirement_set_lists_no_other_client_scenario_but_auth() {
    let mut cmd = npm::node_command("conformance-2026/dist/index.js");
    cmd.args(["list", "--client", "--requirements", "2026-07-28"]);
    let out = support::run(&mut cmd);
    assert_eq!(out.code, 0, "{out:?}");
    let client = out
        .stdout
        .split("Client scenarios")
        .nth(1)
        .and_then(|s| s.split("\n\n").next())
        .unwrap_or_default();
    let listed: Vec<&str> = client
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .filter(|s| !s.starts_with("auth/"))
        .collect();
    assert_eq!(
        listed,
        [
            "tools_call",
            "request-metadata",
            "sep-2322-client-request-state",
            "http-standard-headers",
            "http-custom-headers",
            "http-invalid-tool-headers",
            "json-schema-ref-no-deref"
        ],
        "{out:?}"
    );
}

/// Every `auth/*` scenario the suite requires of a 2025-11-25 client, the two client-credentials
/// extensions, and the 2025-03-26 back-compatibility pair.
const AUTH_2025_11_25: &[&str] = &[
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
];

#[test]
fn every_2025_11_25_authorization_scenario_and_the_client_credentials_extensions() {
    for name in AUTH_2025_11_25 {
        scenario(name);
    }
}

/// Every `auth/*` client scenario the 2026-07-28 requirement set lists (checked against the
/// suite's own list below), run at that revision's wire.
const AUTH_2026_07_28: &[&str] = &[
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
];

#[test]
fn every_2026_07_28_authorization_scenario() {
    for name in AUTH_2026_07_28 {
        scenario_2026(name);
    }
}

#[test]
fn the_client_credentials_extensions_of_the_2026_suite() {
    for name in [
        "auth/client-credentials-basic",
        "auth/client-credentials-jwt",
    ] {
        run_scenario("conformance-2026", name, &[]);
    }
}

#[test]
fn the_2026_requirement_set_lists_these_authorization_scenarios() {
    let mut cmd = npm::node_command("conformance-2026/dist/index.js");
    cmd.args(["list", "--client", "--requirements", "2026-07-28"]);
    let out = support::run(&mut cmd);
    assert_eq!(out.code, 0, "{out:?}");
    let required = out
        .stdout
        .split("Run and reported")
        .next()
        .unwrap_or_default();
    let listed: Vec<&str> = required
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .filter(|s| s.starts_with("auth/"))
        .collect();
    assert_eq!(listed, AUTH_2026_07_28, "{out:?}");
}

#[test]
fn an_unknown_scenario_fails_the_suite() {
    let wrapper =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/conformance_client.sh");
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(&wrapper)
        .arg("http://127.0.0.1:9/mcp")
        .env("MCP_CONFORMANCE_SCENARIO", "no-such-scenario");
    let out = support::run(&mut cmd);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr
            .contains("does not take part in scenario `no-such-scenario`"),
        "{out:?}"
    );
}
