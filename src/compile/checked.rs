//! Remembers which spec texts passed every schema check, so a run of an unchanged spec skips
//! the costliest part of compiling: checking tool input schemas against the JSON Schema
//! meta-schema and building their validators. `check` always checks everything.
//!
//! A spec is remembered by the SHA-256 of its text (the trace's `spec.sha256`) and this toolrun's
//! version, as an empty file
//! under `$TOOLRUN_CACHE_DIR` (default `$XDG_CACHE_HOME/toolrun` or `~/.cache/toolrun`);
//! `TOOLRUN_CACHE_DIR=off` turns the cache off. Failing to read or write it only costs time.

use std::path::PathBuf;

/// Bumped when the schema checks change, so specs checked by older rules are checked again.
const CHECKS_VERSION: u32 = 1;

fn cache_dir() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = env("TOOLRUN_CACHE_DIR") {
        return (dir != "off").then(|| PathBuf::from(dir));
    }
    env("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("toolrun"))
}

fn marker(spec_sha256: &str) -> Option<PathBuf> {
    let name = format!(
        "{spec_sha256}-{}-{CHECKS_VERSION}",
        env!("CARGO_PKG_VERSION")
    );
    Some(cache_dir()?.join("checked").join(name))
}

/// Did the text with this SHA-256 pass every check before?
pub(super) fn was_checked(spec_sha256: &str) -> bool {
    marker(spec_sha256).is_some_and(|m| m.is_file())
}

/// Records that the text with this SHA-256 passed every check.
pub(super) fn mark_checked(spec_sha256: &str) {
    let Some(m) = marker(spec_sha256) else {
        return;
    };
    if m.is_file() {
        return;
    }
    if let Some(dir) = m.parent() {
        if std::fs::create_dir_all(dir).is_ok() {
            let _ = std::fs::write(&m, b"");
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::Source;
    use std::path::Path;

    const SPEC: &str = "version: 1\ntools:\n  t:\n    kind: mock\n    description: Returns one thing.\n    input: {type: object, properties: {n: {type: integer}}}\n    responses: [{result: 1}]\n  c:\n    kind: builtin\n    builtin: calculator\n";

    #[test]
    fn a_trusted_compile_builds_no_validator_and_a_full_one_keeps_what_it_checked() {
        let source = Source::new("t.yaml", SPEC);
        let full = super::super::compile(&source, Path::new("t.yaml"));
        let full = full.registry.expect("compiles");
        assert!(full.tool("t").unwrap().validator.is_built());
        // Generated schemas are never worth checking: built on first call either way.
        assert!(!full.tool("c").unwrap().validator.is_built());
        let sha = full.spec_sha256.clone();
        let fast = super::super::compile_with(&source, Path::new("t.yaml"), sha, true);
        let fast = fast.registry.expect("compiles");
        for tool in &fast.tools {
            assert!(!tool.validator.is_built(), "{}", tool.name);
        }
        let t = fast.tool("t").unwrap();
        assert!(!t
            .validator()
            .unwrap()
            .is_valid(&serde_json::json!({"n": "x"})));
    }
}
