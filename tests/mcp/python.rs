//! The official MCP Python SDK, in a venv made once per target directory by `setup.sh`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The venv's interpreter; panics with pip's output when the venv cannot be made.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mcp-venv");
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp");
            let out = Command::new("bash")
                .arg(dir.join("setup.sh"))
                .arg(&venv)
                .output()
                .expect("run tests/mcp/setup.sh");
            assert!(
                out.status.success(),
                "cannot set up the MCP Python SDK venv (needs python3 and PyPI):\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            venv.join("bin/python")
        })
        .clone()
}

pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp")
        .join(name)
}
