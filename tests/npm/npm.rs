//! The MCP implementations nobody here wrote (npm: the conformance suite, the reference servers,
//! the Inspector, Node 22), installed once per target directory by `tests/npm/setup.sh` from the
//! pinned lock beside it. Included by several test binaries, each using part.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The folder holding `node_modules`; panics with npm's output when it cannot be installed.
pub fn npm_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("npm-interop");
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new("bash")
            .arg(root.join("tests/npm/setup.sh"))
            .arg(&dir)
            .output()
            .expect("run tests/npm/setup.sh");
        assert!(
            out.status.success(),
            "cannot install the npm packages of tests/npm (needs npm and its registry):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
    .clone()
}

/// Node 22 from the `node` npm package (the machine's own Node may be older).
pub fn node() -> PathBuf {
    npm_dir().join("node_modules/.bin/node")
}

/// A package's file under `node_modules`, e.g. `@modelcontextprotocol/server-everything/dist/index.js`.
pub fn package_file(path: &str) -> PathBuf {
    npm_dir().join("node_modules").join(path)
}

/// `node FILE` with Node 22 first on `PATH`, for programs that start `node` themselves.
pub fn node_command(file: &str) -> Command {
    let mut cmd = Command::new(node());
    cmd.arg(package_file(file));
    let bin = npm_dir().join("node_modules/.bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin];
    paths.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(paths).unwrap_or_default());
    cmd
}
