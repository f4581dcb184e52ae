//! A smoke test of `toolrun lsp` with Neovim's built-in LSP client, headless: diagnostics
//! arrive, hover answers, the did-you-mean quick fix is applied by the client and clears the
//! error, and the client stops the server. The client script is `tests/lsp/smoke.lua`.
#![cfg(unix)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

const SPEC: &str = "version: 1
tools:
  get_weather:
    kind: mock
    responses: [{ result: 1 }]
policy:
  allow: [get_wether]
";

/// Finds Neovim, installing it with `.ci/install-neovim` when it is missing. `None` only when
/// it cannot be installed here; CI sets TOOLRUN_REQUIRE_NEOVIM so it never skips.
fn neovim() -> Option<PathBuf> {
    let find = || {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join("nvim"))
                .find(|p| p.is_file())
        })
    };
    if let Some(p) = find() {
        return Some(p);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/install-neovim");
    let installed = Command::new("bash").arg(&script).status();
    if let Some(p) = find() {
        return Some(p);
    }
    let why = format!(
        "Neovim is not installed and `{}` could not install it ({installed:?})",
        script.display()
    );
    if std::env::var_os("TOOLRUN_REQUIRE_NEOVIM").is_some() {
        panic!("{why}");
    }
    eprintln!("\n!!!!!!!!\nSKIPPED the Neovim test: {why}\n!!!!!!!!\n");
    None
}

#[test]
fn neovims_client_gets_diagnostics_hover_and_a_quick_fix() {
    let Some(nvim) = neovim() else { return };
    let dir = support::temp_dir("lsp-neovim");
    let spec = support::write(dir.path(), "spec.yaml", SPEC);
    let out = dir.path().join("seen.txt");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lsp/smoke.lua");
    let mut cmd = support::clean_command(&nvim);
    cmd.args(["--headless", "--clean", "-c"])
        .arg(format!("luafile {}", script.display()))
        .env("TOOLRUN_BIN", env!("CARGO_BIN_EXE_toolrun"))
        .env("SPEC", &spec)
        .env("OUT", &out)
        .current_dir(dir.path());
    let done = support::run(&mut cmd);
    done.assert_success();
    let seen = std::fs::read_to_string(&out).unwrap_or_default();
    support::assert_contains(
        &seen,
        &[
            "diagnostic E012 6:10",
            "hover **tool** `get_weather` (kind `mock`)",
            "action Change to `get_weather`",
            "line   allow: [get_weather]",
            "clean true",
            "stopped true",
        ],
    );
    // The edit was the client's, to its buffer: the file is as written.
    assert_eq!(std::fs::read_to_string(&spec).unwrap_or_default(), SPEC);
}
