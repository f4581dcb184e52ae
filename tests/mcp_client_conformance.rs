//! toolrun as a client in the official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in tests/npm): the suite starts its test server for a scenario and runs
//! `tests/mcp/conformance_client.sh` (the repository's wrapper: a spec with one `kind: mcp` entry,
//! driven through the binary) with the server's URL. Authorization scenarios (`auth/*`) are out
//! of scope.

#[path = "npm/npm.rs"]
mod npm;
mod support;

fn scenario(name: &str) {
    let wrapper =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/conformance_client.sh");
    let results = support::temp_dir(&format!("conformance-{name}"));
    let mut cmd = npm::node_command("@modelcontextprotocol/conformance/dist/index.js");
    cmd.args(["client", "--command"])
        .arg(format!("bash {}", wrapper.display()))
        .args(["--scenario", name, "-o"])
        .arg(&results)
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

#[test]
fn an_unknown_scenario_fails_the_suite() {
    let wrapper =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/conformance_client.sh");
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(&wrapper)
        .arg("http://127.0.0.1:9/mcp")
        .env("MCP_CONFORMANCE_SCENARIO", "auth/basic-cimd");
    let out = support::run(&mut cmd);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr
            .contains("does not take part in scenario `auth/basic-cimd`"),
        "{out:?}"
    );
}
