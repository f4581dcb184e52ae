//! Include with `mod support;`: the shared support library (`tests/support/src`, compiled once)
//! plus `toolrun()`, which must be compiled into each test binary to know the binary's path.

#![allow(dead_code, unused_imports)]

pub use toolrun_test_support::*;

/// `toolrun` with a clean environment (see [`clean_command`]).
pub fn toolrun() -> std::process::Command {
    clean_command(std::path::Path::new(env!("CARGO_BIN_EXE_toolrun")))
}

/// `toolrun serve SPEC --http 127.0.0.1:0 ARGS` with `env` set, started (see [`spawn_served`]):
/// the child, the URL it announced, the rest of its stderr (keep it while the server runs).
pub fn serve_http(
    spec: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (
    std::process::Child,
    String,
    std::io::BufReader<std::process::ChildStderr>,
) {
    let mut cmd = toolrun();
    cmd.arg("serve")
        .arg(spec)
        .args(["--http", "127.0.0.1:0"])
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    spawn_served(&mut cmd)
}

/// `toolrun serve SPEC ARGS` over piped stdio (see [`spawn_stdio_peer`]).
pub fn serve_stdio(
    spec: &std::path::Path,
    args: &[impl AsRef<std::ffi::OsStr>],
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::sync::mpsc::Receiver<serde_json::Value>,
    std::thread::JoinHandle<String>,
) {
    spawn_stdio_peer(toolrun().arg("serve").arg(spec).args(args))
}

/// `toolrun ARGS` on a pseudo-terminal in the project's folder, with `envs` (see
/// [`terminal::Terminal::start`]), driven as a person would.
pub fn toolrun_in_terminal(args: &[&str], envs: &[(&str, String)]) -> terminal::Terminal {
    terminal::Terminal::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_toolrun")),
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")),
        args,
        envs,
    )
}

/// `toolrun ARGS` on a pseudo-terminal in the project's folder, with `envs` and `input` typed
/// at once, then the input ended: its exit code and all it wrote (see [`terminal::in_terminal`]).
pub fn in_terminal(args: &[&str], envs: &[(&str, String)], input: &str) -> (i32, String) {
    terminal::in_terminal(
        std::path::Path::new(env!("CARGO_BIN_EXE_toolrun")),
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")),
        args,
        envs,
        input,
    )
}

/// `toolrun ARGS` run in `dir` (see [`run`]).
pub fn toolrun_in(dir: &std::path::Path, args: &[&str]) -> Output {
    let mut cmd = toolrun();
    cmd.current_dir(dir).args(args);
    run(&mut cmd)
}

/// Chromium, installed by the repo's `.ci/install-chromium` when missing (see
/// [`browser::chromium`]).
pub fn chromium() -> Option<std::path::PathBuf> {
    browser::chromium(std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
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
