//! Include with `mod support;`: the shared support library (`tests/support/src`, compiled once)
//! plus `toolrun()`, which must be compiled into each test binary to know the binary's path.

#![allow(dead_code, unused_imports)]

pub use toolrun_test_support::*;

/// `toolrun` with a clean environment (see [`clean_command`]).
pub fn toolrun() -> std::process::Command {
    clean_command(std::path::Path::new(env!("CARGO_BIN_EXE_toolrun")))
}

/// `toolrun run SPEC --json --query QUERY`, with `key` as `TEST_KEY` (the key of
/// `providers::live_spec` models).
pub fn run_json(spec: &std::path::Path, key: Option<&str>, query: &str) -> Output {
    let mut cmd = toolrun();
    cmd.arg("run").arg(spec).args(["--json", "--query", query]);
    if let Some(k) = key {
        cmd.env("TEST_KEY", k);
    }
    run(&mut cmd)
}
