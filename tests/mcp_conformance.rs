//! `toolrun serve` against the official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! server mode, every scenario), pinned and installed by the test itself (tests/npm). The spec
//! `specs/mcp_conformance_server.yaml` serves every scenario's tool; the scenarios a tool server
//! does not offer are listed, each with its reason, in tests/mcp/conformance-expected-failures.yml,
//! and the suite itself fails on a listed scenario that passes. Binds and contacts 127.0.0.1 only.

#[path = "npm/npm.rs"]
mod npm;
mod support;

use std::path::Path;
use std::process::Command;

#[test]
fn the_official_conformance_suite_passes_every_scenario_a_tool_server_offers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut serve, url, _stderr) = support::spawn_served(
        support::toolrun()
            .arg("serve")
            .arg(root.join("specs/mcp_conformance_server.yaml"))
            .args(["--http", "127.0.0.1:0"]),
    );

    let results = support::temp_dir("mcp-conformance");
    let mut suite = Command::new(npm::node());
    suite
        .arg(npm::package_file(
            "@modelcontextprotocol/conformance/dist/index.js",
        ))
        .args([
            "server",
            "--url",
            &url,
            "--suite",
            "all",
            "--expected-failures",
        ])
        .arg(root.join("tests/mcp/conformance-expected-failures.yml"))
        .current_dir(results.path());
    let out = support::run_with_timeout(&mut suite, None, std::time::Duration::from_secs(600));
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(
        out.code, 0,
        "the conformance suite found unexpected failures or stale entries\n{}\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stdout.contains("tools-call-with-progress"),
        "{}",
        out.stdout
    );
}
