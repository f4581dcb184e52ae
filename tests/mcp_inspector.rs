//! `toolrun serve` driven by the MCP Inspector's CLI (`@modelcontextprotocol/inspector`, pinned,
//! Node 22, installed by the test itself: tests/npm): every example spec is listed with
//! `--strict` (no tool-schema portability problems) and its closed-world tools are called, over
//! streamable HTTP and over stdio. Binds and contacts 127.0.0.1 only: tools that reach the
//! network (`openWorldHint`) are listed, never called.

#[path = "npm/npm.rs"]
mod npm;
mod support;

use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Secrets the example specs declare: any value will do, nothing is sent anywhere.
const SECRETS: &[&str] = &["NOTES_KEY", "JOBS_API_KEY", "WEATHER_KEY"];

fn inspector(target: &[&str], args: &[&str]) -> support::Output {
    let mut cmd = Command::new(npm::node());
    cmd.arg(npm::package_file(
        "@modelcontextprotocol/inspector/clients/launcher/build/index.js",
    ));
    cmd.arg("--cli").args(target).args(args);
    let bin = npm::npm_dir().join("node_modules/.bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin];
    paths.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(paths).unwrap_or_default());
    for s in SECRETS {
        cmd.env(s, "example-secret-0123456789");
    }
    support::run(&mut cmd)
}

/// Arguments that fit a tool's input schema: its required properties, each a value of its type
/// (the examples' order 42 and ticker AAPL where they ask for one).
fn arguments(schema: &Value) -> Value {
    let mut args = Map::new();
    let required = schema["required"].as_array().cloned().unwrap_or_default();
    for name in required.iter().filter_map(Value::as_str) {
        let prop = &schema["properties"][name];
        // The examples' own data: an order and a ticker they know.
        let value = match (prop.get("enum"), prop["type"].as_str()) {
            _ if name == "ticker" => json!("AAPL"),
            _ if name == "order_id" => json!(42),
            (Some(Value::Array(e)), _) if !e.is_empty() => e[0].clone(),
            (_, Some("integer")) | (_, Some("number")) => {
                json!(prop["minimum"].as_i64().unwrap_or(1))
            }
            (_, Some("boolean")) => json!(true),
            (_, Some("array")) => json!([]),
            (_, Some("object")) => json!({}),
            _ => json!("1+1"),
        };
        args.insert(name.to_string(), value);
    }
    Value::Object(args)
}

struct Http {
    child: std::process::Child,
    url: String,
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_http(spec: &Path) -> Http {
    let mut cmd = support::toolrun();
    cmd.arg("serve").arg(spec).args(["--http", "127.0.0.1:0"]);
    for s in SECRETS {
        cmd.env(s, "example-secret-0123456789");
    }
    let (child, url, _stderr) = support::spawn_served(&mut cmd);
    Http { child, url }
}

/// The example specs `toolrun serve` starts from alone (`mcp_notes` needs its MCP server).
fn example_specs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs");
    let mut specs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("specs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| !p.ends_with("mcp_notes.yaml"))
        .collect();
    specs.sort();
    specs
}

#[test]
fn the_inspector_lists_strictly_and_calls_every_example_spec_over_http_and_stdio() {
    let toolrun = env!("CARGO_BIN_EXE_toolrun");
    let (mut calls, mut answered) = (0, 0);
    for spec in example_specs() {
        let http = serve_http(&spec);
        let spec_arg = spec.to_str().expect("utf-8 path");
        // A stdio server gets only the environment the Inspector passes with `-e`.
        let env: Vec<String> = SECRETS
            .iter()
            .map(|s| format!("{s}=example-secret-0123456789"))
            .collect();
        let mut stdio: Vec<&str> = Vec::new();
        for e in &env {
            stdio.extend(["-e", e.as_str()]);
        }
        stdio.extend([toolrun, "serve", spec_arg]);
        let over_http = [http.url.as_str(), "--transport", "http"];
        let targets: [&[&str]; 2] = [&over_http, &stdio];
        for target in targets {
            let listed = inspector(target, &["--method", "tools/list", "--strict"]);
            assert_eq!(listed.code, 0, "{} {target:?}: {listed:?}", spec.display());
            let tools = listed.json()["tools"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert!(!tools.is_empty(), "{}: {listed:?}", spec.display());
            let closed = tools
                .iter()
                .find(|t| t["annotations"]["openWorldHint"] == false);
            let Some(tool) = closed else { continue };
            let name = tool["name"].as_str().expect("name");
            let args = arguments(&tool["inputSchema"]).to_string();
            let called = inspector(
                target,
                &[
                    "--method",
                    "tools/call",
                    "--tool-name",
                    name,
                    "--tool-args-json",
                    &args,
                ],
            );
            let result: Value = serde_json::from_str(
                called
                    .stdout
                    .split("\n{\"error\"")
                    .next()
                    .unwrap_or_default(),
            )
            .unwrap_or_else(|e| panic!("{} {name} {args}: {e}: {called:?}", spec.display()));
            assert!(
                result["content"].is_array(),
                "{} {name}: {called:?}",
                spec.display()
            );
            calls += 1;
            answered += usize::from(result["isError"] == false);
        }
    }
    assert!(calls >= 10, "only {calls} calls were made");
    assert_eq!(
        answered, calls,
        "only {answered} of {calls} calls succeeded"
    );
}

/// The Inspector on both MCP revisions `serve` speaks: `--protocol-era modern` pins 2026-07-28
/// (no `initialize`, no fallback: a server without it fails the run), `legacy` a 2025-11-25
/// session; over HTTP and stdio, each lists strictly and calls.
#[test]
fn the_inspector_works_on_both_revisions_over_http_and_stdio() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/mcp_served.yaml");
    let http = serve_http(&spec);
    let toolrun = env!("CARGO_BIN_EXE_toolrun");
    let spec_arg = spec.to_str().expect("utf-8 path");
    let over_http = [http.url.as_str(), "--transport", "http"];
    let over_stdio = [toolrun, "serve", spec_arg];
    let targets: [&[&str]; 2] = [&over_http, &over_stdio];
    for era in ["modern", "legacy"] {
        for target in targets {
            let listed = inspector(
                target,
                &["--protocol-era", era, "--method", "tools/list", "--strict"],
            );
            assert_eq!(listed.code, 0, "{era} {target:?}: {listed:?}");
            let tools = listed.json()["tools"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert!(
                tools.iter().any(|t| t["name"] == "lookup_order"),
                "{era} {target:?}: {listed:?}"
            );
            let called = inspector(
                target,
                &[
                    "--protocol-era",
                    era,
                    "--method",
                    "tools/call",
                    "--tool-name",
                    "lookup_order",
                    "--tool-args-json",
                    r#"{"order_id":42}"#,
                ],
            );
            assert_eq!(called.code, 0, "{era} {target:?}: {called:?}");
            let result = called.json();
            assert_eq!(result["isError"], false, "{era} {target:?}: {called:?}");
            assert_eq!(
                result["structuredContent"]["status"], "shipped",
                "{era} {target:?}: {called:?}"
            );
        }
    }
}
