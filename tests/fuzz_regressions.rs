//! Inputs found by the fuzz targets in `fuzz/` (and a few written by hand in their spirit), fed
//! through the same library calls, so a fixed crash stays fixed without nightly or cargo-fuzz.
//!
//! Each file in `tests/fuzz_regressions/<target>/` is one input, byte for byte as the fuzzer
//! saved it. Add a reproducer by copying `fuzz/artifacts/<target>/crash-*` there.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use toolrun::builtins::{self, BuiltinContext};
use toolrun::models::{anthropic, openai};

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

/// Mirrors `fuzz/fuzz_targets/spec_compile.rs`.
#[test]
fn spec_compile() {
    for (path, bytes) in inputs("spec_compile") {
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        eprintln!("{}", path.display());
        let source = toolrun::spec::Source {
            display: "fuzz.yaml".into(),
            text: text.into(),
        };
        let compiled =
            toolrun::compile::compile(&source, Path::new("/nonexistent-toolrun-fuzz/spec.yaml"));
        for d in &compiled.diagnostics {
            let _ = toolrun::diag::render_human(d, Some(text));
            let _ = toolrun::diag::render_github(d);
        }
        let _ = toolrun::diag::to_json(&compiled.diagnostics);
    }
}

/// Mirrors `fuzz/fuzz_targets/model_response.rs`.
#[test]
fn model_response() {
    for (path, bytes) in inputs("model_response") {
        let Some((&mode, rest)) = bytes.split_first() else {
            continue;
        };
        let Ok(text) = std::str::from_utf8(rest) else {
            continue;
        };
        eprintln!("{}", path.display());
        let (name, body) = text.split_once('\0').unwrap_or(("lookup", text));
        let reply: Value = match mode % 4 {
            0 => match serde_json::from_str(text) {
                Ok(v) => v,
                Err(_) => continue,
            },
            1 => json!({
                "choices": [{
                    "message": {
                        "role": "assistant",
                        "content": null,
                        "tool_calls": [{
                            "id": "call_1",
                            "type": "function",
                            "function": { "name": name, "arguments": body }
                        }]
                    },
                    "finish_reason": "tool_calls"
                }],
                "usage": { "prompt_tokens": 1, "completion_tokens": 1 }
            }),
            2 => {
                let input: Value = serde_json::from_str(body).unwrap_or(Value::String(body.into()));
                json!({
                    "type": "message",
                    "role": "assistant",
                    "content": [
                        { "type": "text", "text": name },
                        { "type": "tool_use", "id": "toolu_1", "name": name, "input": input }
                    ],
                    "stop_reason": "tool_use",
                    "usage": { "input_tokens": 1, "output_tokens": 1 }
                })
            }
            _ => json!({
                "choices": [{
                    "message": { "role": "assistant", "content": body },
                    "finish_reason": name
                }]
            }),
        };
        let _ = openai::parse_response(&reply, 1);
        let _ = anthropic::parse_response(&reply, 1);
    }
}

/// Mirrors `fuzz/fuzz_targets/calculator.rs`.
#[test]
fn calculator() {
    let ctx = BuiltinContext { now_unix_ms: 0 };
    for (path, bytes) in inputs("calculator") {
        let Ok(expression) = std::str::from_utf8(&bytes) else {
            continue;
        };
        eprintln!("{}", path.display());
        let _ = builtins::call("calculator", &json!({ "expression": expression }), &ctx);
    }
}

/// Mirrors `fuzz/fuzz_targets/templates.rs` with hand-picked hostile values: no argument may
/// move the request to another host, add a path segment or a query parameter, or a header.
#[test]
fn templates() {
    use toolrun::events::Events;
    use toolrun::net::Transport;
    use toolrun::redact::Secrets;
    use toolrun::registry::ToolKind;
    use toolrun::tools::{http, mock, ToolEnv};

    let source = toolrun::spec::Source {
        display: "templates.yaml".into(),
        text: include_str!("../fuzz/specs/templates.yaml").into(),
    };
    let compiled = toolrun::compile::compile(&source, Path::new("templates.yaml"));
    let registry = compiled.registry.expect("the fuzz spec compiles");
    let secrets = Secrets::default();
    let transport = Transport::live();
    let events = Events::none();
    let env = ToolEnv {
        registry: &registry,
        secrets: &secrets,
        transport: &transport,
        events: &events,
        query: "{{ 7 * 7 }}",
        now_unix_ms: 0,
        call_id: "call_1",
    };
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
            for name in ["echo", "fetch"] {
                let tool = registry.tool(name).expect("tool");
                match &tool.kind {
                    ToolKind::Mock(responses) => {
                        if let Ok(v) = mock::execute(responses, &args, &env) {
                            // A value is data: its template syntax is never evaluated.
                            assert!(!v.to_string().contains("49"), "{v}");
                        }
                    }
                    ToolKind::Http(h) => {
                        let Ok(req) = http::prepare(h, &args, &env) else {
                            continue;
                        };
                        let url = url::Url::parse(&req.url).expect("a valid URL");
                        assert_eq!(url.host_str(), Some("api.example.com"), "{}", req.url);
                        let segments: Vec<&str> = url.path_segments().unwrap().collect();
                        assert_eq!(segments.len(), 4, "{}", req.url);
                        assert_eq!((segments[0], segments[2]), ("v1", "items"), "{}", req.url);
                        for (key, _) in url.query_pairs() {
                            assert!(matches!(&*key, "q" | "page" | "tag"), "{}", req.url);
                        }
                        assert!(url.fragment().is_none(), "{}", req.url);
                        assert!(
                            !req.headers.iter().any(|(k, _)| k == "X-Injected"),
                            "{:?}",
                            req.headers
                        );
                    }
                    _ => {}
                }
            }
        }
    }
}
