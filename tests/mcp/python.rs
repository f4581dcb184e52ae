//! The official MCP Python SDK (and other Python programs the interop tests drive), in venvs made
//! once per target directory by `setup.sh`. Included by several test binaries, each using part.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The MCP venv's interpreter; panics with pip's output when the venv cannot be made.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| venv("mcp-venv", "tests/mcp/requirements.txt"))
        .clone()
}

/// The interpreter of a venv named `name` (under the target directory) holding the packages of
/// `requirements` (relative to the repository); made by `setup.sh` unless it is current.
pub fn venv(name: &str, requirements: &str) -> PathBuf {
    let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash")
        .arg(root.join("tests/mcp/setup.sh"))
        .arg(&venv)
        .arg(root.join(requirements))
        .output()
        .expect("run tests/mcp/setup.sh");
    assert!(
        out.status.success(),
        "cannot set up the Python venv `{name}` (needs python3 and PyPI):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    venv.join("bin/python")
}

pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp")
        .join(name)
}
