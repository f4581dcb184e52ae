//! `toolrun lsp` end to end with a real client library: the pytest-lsp suite in
//! `tests/lsp/test_lsp.py` (open, change, diagnostics, hover, completion, definition,
//! references, symbols, code action, shutdown), in a venv of pinned packages made once per
//! target directory by `tests/mcp/setup.sh`.
#![cfg(unix)]

#[path = "mcp/python.rs"]
mod python;

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_pytest_lsp_suite_passes() {
    let python = python::venv("lsp-venv", "tests/lsp/requirements.txt");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(root.join("tests/lsp/test_lsp.py"))
        .env("TOOLRUN_BIN", env!("CARGO_BIN_EXE_toolrun"))
        .env(
            "TOOLRUN_CACHE_DIR",
            std::env::temp_dir().join("toolrun-tests/spec-cache"),
        )
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the pytest-lsp suite failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" passed"), "{stdout}");
}
