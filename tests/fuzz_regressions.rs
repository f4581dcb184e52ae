//! Inputs found by the fuzz targets in `fuzz/` (and a few written by hand in their spirit), fed
//! through the same library calls, so a fixed crash stays fixed without nightly or cargo-fuzz.
//!
//! Each file in `tests/fuzz_regressions/<target>/` is one input, byte for byte as the fuzzer
//! saved it. Add a reproducer by copying `fuzz/artifacts/<target>/crash-*` there.

use serde_json::json;
use std::path::{Path, PathBuf};

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no inputs in {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, bytes)
        })
        .collect()
}

/// The bodies of the fuzz targets live in `toolrun::fuzzing`: the same code runs here on stable.
#[test]
fn spec_compile() {
    for (path, bytes) in inputs("spec_compile") {
        eprintln!("{}", path.display());
        toolrun::fuzzing::spec_compile(&bytes);
    }
}

#[test]
fn model_response() {
    for (path, bytes) in inputs("model_response") {
        eprintln!("{}", path.display());
        toolrun::fuzzing::model_response(&bytes);
    }
}

#[test]
fn calculator() {
    for (path, bytes) in inputs("calculator") {
        eprintln!("{}", path.display());
        toolrun::fuzzing::calculator(&bytes);
    }
}

/// The builtins target calls the library directly (`toolrun::builtins`); this keeps that API
/// public and every builtin answering hostile arguments with an error, not a panic.
#[test]
fn builtins() {
    use toolrun::builtins::{all, call, BuiltinContext};
    let ctx = BuiltinContext {
        now_unix_ms: i64::MIN,
    };
    for info in all() {
        let schema = (info.input_schema)();
        assert!(
            schema.get("properties").is_some(),
            "{}: {schema}",
            info.name
        );
        for args in [json!({}), json!({ "extra": null }), json!([1])] {
            let _ = call(info.name, &args, &ctx);
        }
    }
}

/// The templates target's checks with hand-picked hostile values: no argument may move the
/// request to another host, add a path segment, a query parameter or a header.
#[test]
fn templates() {
    let hostile = [
        "..",
        ".",
        "%2e%2E",
        "a/../../admin",
        "@evil.example",
        "evil.example:443/",
        "x?admin=1&q=2",
        "#frag",
        "\\\\evil.example",
        "line\r\nX-Injected: 1",
        "{{ 7 * 7 }}",
        "{% for i in range(99999) %}x{% endfor %}",
        "\u{0}\u{1b}[31m\u{202e}",
        "",
    ];
    for a in hostile {
        for b in hostile {
            let args = json!({ "a": a, "b": b, "n": a, "list": [a, b], "fail": false });
            for v in toolrun::fuzzing::templates(&args, "{{ 7 * 7 }}") {
                // A value is data: its template syntax is never evaluated.
                assert!(!v.to_string().contains("49"), "{v}");
            }
        }
    }
}

/// The masker's property (no decoding of masked text yields the secret) on the saved inputs,
/// then on a few thousand generated ones: a cheap stand-in for `fuzz/run.sh` on stable
/// (`MASKER_ITERATIONS=1000000` for a longer search, `MASKER_SEED=N` for another one).
#[test]
fn masker() {
    for (path, bytes) in inputs("masker") {
        eprintln!("{}", path.display());
        toolrun::fuzzing::masker(&bytes);
    }
    let setting = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let mut state: u64 = setting("MASKER_SEED", 0x9E37_79B9_7F4A_7C15).max(1);
    for _ in 0..setting("MASKER_ITERATIONS", 3000) {
        let len = 20 + (state % 60) as usize;
        let data: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        toolrun::fuzzing::masker(&data);
    }
}

/// Property: every vendored OpenAPI document, and each of them with a parameter name or a path
/// key swapped for a hostile one (names that collide once made identifiers, template syntax,
/// protected and malformed header names, paths that try to leave the base URL), imports into a
/// spec that passes `check`, or is refused with a message; never a spec with errors.
#[test]
fn openapi_import_of_vendored_documents_and_their_mutations() {
    const NAMES: [&str; 12] = [
        "a-b",
        "a_b",
        "a.b",
        "{{ secrets.KEY }}",
        "Host",
        "Content-Length",
        "x\\r\\ny",
        "ключ",
        "",
        "1st",
        "a b",
        "args",
    ];
    const PATHS: [&str; 6] = [
        "/{{ x }}",
        "/a?b=1",
        "/../x",
        "/a#f",
        ".evil.example/x",
        "@e/x",
    ];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openapi");
    let mut docs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/data/openapi")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        // The OpenAI description (2 MB) is imported and checked whole in tests/import_openapi.rs.
        .filter(|p| !p.ends_with("openai-openapi.yaml"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 4, "{docs:?}");
    let mut variants = 0;
    for doc in docs {
        let text = std::fs::read_to_string(&doc).expect("document");
        toolrun::fuzzing::openapi_import(text.as_bytes());
        let lines: Vec<&str> = text.lines().collect();
        let names: Vec<usize> = (0..lines.len())
            .filter(|&i| {
                lines[i]
                    .trim_start()
                    .trim_start_matches("- ")
                    .starts_with("name: ")
            })
            .take(4)
            .collect();
        let paths: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].starts_with("  /") && lines[i].ends_with(':'))
            .take(3)
            .collect();
        for &i in &names {
            for name in NAMES {
                let (indent, _) = lines[i].split_once("name: ").expect("a name line");
                let line = format!("{indent}name: \"{name}\"");
                variants += 1;
                toolrun::fuzzing::openapi_import(replaced(&lines, i, &line).as_bytes());
            }
        }
        for &i in &paths {
            for path in PATHS {
                variants += 1;
                let line = format!("  \"{path}\":");
                toolrun::fuzzing::openapi_import(replaced(&lines, i, &line).as_bytes());
            }
        }
    }
    assert!(variants > 100, "only {variants} variants");
}

fn replaced(lines: &[&str], at: usize, with: &str) -> String {
    let mut out: Vec<&str> = lines.to_vec();
    out[at] = with;
    out.join("\n")
}
