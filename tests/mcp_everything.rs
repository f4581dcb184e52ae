//! `kind: mcp` tools against MCP implementations nobody here wrote: the reference server
//! `@modelcontextprotocol/server-everything` over streamable HTTP (every content type, progress,
//! logging, elicitation), pinned and installed by `tests/npm/setup.sh`. Everything goes through
//! the binary with a scripted model or `toolrun call`.

#[path = "npm/npm.rs"]
mod npm;
#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use support::{run, toolrun, write};

/// The reference server on a free loopback port; killed when dropped.
struct Everything {
    child: Child,
    port: u16,
}

impl Everything {
    fn start() -> Everything {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut cmd = npm::node_command("@modelcontextprotocol/server-everything/dist/index.js");
        let mut child = cmd
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start server-everything");
        // It says so on stderr once it listens.
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        loop {
            match lines.next() {
                Some(Ok(l)) if l.contains("listening on port") => break,
                Some(Ok(_)) => continue,
                _ => {
                    let _ = child.kill();
                    panic!("server-everything did not start");
                }
            }
        }
        // Keep reading, so a full pipe never blocks the server.
        std::thread::spawn(move || for _ in lines {});
        Everything { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A spec using `tools` (YAML flow list) of the server at `url`, the scripted model playing
/// `turns` (YAML lines at the indentation of a turn), `extra` added to the server's entry.
fn spec(url: &str, tools: &str, extra: &str, turns: &str) -> String {
    format!(
        r#"version: 1
name: everything
tools:
  everything:
    kind: mcp
    description: The MCP reference server.
    url: {url}
    timeout: 30s
    tools: {tools}
{extra}
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
{turns}
"#
    )
}

fn call(spec: &Path, tool: &str, args: &str, env: &[(&str, &str)]) -> support::Output {
    run(toolrun()
        .envs(env.iter().copied())
        .arg("call")
        .arg(spec)
        .arg(tool)
        .args(["--args", args, "--json"]))
}

#[test]
fn arguments_are_checked_against_the_listed_schema_on_every_path() {
    let dir = support::temp_dir("mcp-everything-args");
    let server = Everything::start();
    let bad = r#"{"a": "DROP TABLE", "b": 1}"#;
    let turns = format!(
        "          - tool_calls: [{{ name: get-sum, arguments: {bad}, malformed: true }}]\n          - answer: \"{{{{ results[0].error.kind }}}}\""
    );
    let spec_path = write(
        &dir,
        "s.yaml",
        &spec(&server.url(), "[get-sum]", "", &turns),
    );
    let cache = dir.join("cache");
    let cache = cache.to_str().unwrap();
    let expect_invalid = |out: &support::Output, what: &str| {
        let text = format!("{}{}", out.stdout, out.stderr);
        assert!(text.contains("invalid_arguments"), "{what}: {out:?}");
        assert!(
            text.contains("/a: ") && text.contains("is not of type"),
            "{what}: {out:?}"
        );
    };
    // `toolrun call`, cache off and cold.
    for env in [
        [("TOOLRUN_CACHE_DIR", "off")],
        [("TOOLRUN_CACHE_DIR", cache)],
    ] {
        let out = call(&spec_path, "get-sum", bad, &env);
        assert_eq!(out.code, 1, "{out:?}");
        expect_invalid(&out, "call");
    }
    // A run: cache off, cold (first run), warm.
    let cold = dir.join("cold");
    for env in [
        ("TOOLRUN_CACHE_DIR", "off"),
        ("TOOLRUN_CACHE_DIR", cold.to_str().unwrap()),
        ("TOOLRUN_CACHE_DIR", cold.to_str().unwrap()),
    ] {
        let out = run(toolrun()
            .env(env.0, env.1)
            .arg("run")
            .arg(&spec_path)
            .args(["--query", "sum", "--json"]));
        let trace = out.json();
        assert_eq!(
            trace["tool_errors"][0]["kind"], "invalid_arguments",
            "{out:?}"
        );
        assert_eq!(trace["final_output"], "invalid_arguments", "{out:?}");
        expect_invalid(&out, "run");
    }
    // `serve` as a gateway, driven by the official Python client.
    let mut cmd = std::process::Command::new(python::python());
    cmd.arg(python::script("client.py"))
        .args(["stdio", env!("CARGO_BIN_EXE_toolrun"), "serve"])
        .arg(&spec_path)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TOOLRUN_CACHE_DIR", "off");
    let plan = json!([{ "name": "get-sum", "arguments": { "a": "DROP TABLE", "b": 1 } }]);
    let out = support::run_with_stdin(&mut cmd, &plan.to_string());
    assert_eq!(out.code, 0, "the MCP client failed\n{out:?}");
    let served = &out.json()["calls"][0];
    assert_eq!(served["isError"], true, "{out:?}");
    assert!(served.to_string().contains("invalid_arguments"), "{out:?}");
    // Good arguments pass.
    let out = call(
        &spec_path,
        "get-sum",
        r#"{"a": 2, "b": 3}"#,
        &[("TOOLRUN_CACHE_DIR", "off")],
    );
    out.assert_success();
    assert!(out.stdout.contains("5"), "{out:?}");
}
