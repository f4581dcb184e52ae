//! The bodies of the fuzz targets in `fuzz/`, in the library so the targets and the stable
//! regression tests (`tests/fuzz_regressions.rs`) exercise exactly the same code.
//! Every function must return normally for any input; a panic is a bug.

use crate::events::Events;
use crate::net::Transport;
use crate::redact::Secrets;
use crate::registry::{Registry, ToolKind};
use crate::tools::{http, mock, ToolEnv};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::OnceLock;

/// Any UTF-8 text as a spec: compiling it and rendering its diagnostics.
pub fn spec_compile(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let source = crate::spec::Source {
        display: "fuzz.yaml".into(),
        text: text.into(),
    };
    // A folder that does not exist: a `file:` table is looked up, but never found.
    let compiled =
        crate::compile::compile(&source, Path::new("/nonexistent-toolrun-fuzz/spec.yaml"));
    // Spans come from the parser; rendering a snippet under them must cope with any of them.
    for d in &compiled.diagnostics {
        let _ = crate::diag::render_human(d, Some(text));
        let _ = crate::diag::render_github(d);
    }
    let _ = crate::diag::to_json(&compiled.diagnostics);
}

/// Provider replies, as a hostile or broken server might send them. The first byte picks how the
/// rest is used: as a whole JSON reply, or as the parts a model controls (tool-call arguments,
/// tool names, text) inside an otherwise well-formed reply, which reaches deeper than random JSON.
pub fn model_response(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    // Up to the first NUL: a name; after it: arguments, input or text.
    let (name, body) = text.split_once('\0').unwrap_or(("lookup", text));
    let reply: Value = match mode % 4 {
        0 => match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) => return,
        },
        1 => json!({
            "choices": [{
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [{ "id": "call_1", "type": "function", "function": { "name": name, "arguments": body } }]
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
        _ => {
            json!({ "choices": [{ "message": { "role": "assistant", "content": body }, "finish_reason": name }] })
        }
    };
    let _ = crate::models::openai::parse_response(&reply, 1);
    let _ = crate::models::anthropic::parse_response(&reply, 1);
}

/// The calculator on any expression a model might send.
pub fn calculator(data: &[u8]) {
    let Ok(expression) = std::str::from_utf8(data) else {
        return;
    };
    let ctx = crate::builtins::BuiltinContext { now_unix_ms: 0 };
    let _ = crate::builtins::call("calculator", &json!({ "expression": expression }), &ctx);
}

/// The registry of `fuzz/specs/templates.yaml`: a mock tool and an HTTP tool whose templates
/// read every kind of argument.
pub fn templates_registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let source = crate::spec::Source {
            display: "templates.yaml".into(),
            text: include_str!("../fuzz/specs/templates.yaml").into(),
        };
        let compiled = crate::compile::compile(&source, Path::new("templates.yaml"));
        match compiled.registry {
            Some(r) => r,
            None => panic!("the harness spec must compile: {:?}", compiled.diagnostics),
        }
    })
}

/// Hostile argument values through the templates of a mock result and error and of an HTTP
/// request. Rendering may fail; no value may move the request to another host, add a path
/// segment, a query parameter, a fragment or a header. Returns the mock's results for callers
/// that check more.
pub fn templates(args: &Value, query: &str) -> Vec<Value> {
    let registry = templates_registry();
    let secrets = Secrets::default();
    let transport = Transport::live();
    let events = Events::none();
    let env = ToolEnv {
        registry,
        secrets: &secrets,
        transport: &transport,
        events: &events,
        query,
        now_unix_ms: 0,
        call_id: "call_1",
    };
    let mut results = Vec::new();
    for tool in &registry.tools {
        match &tool.kind {
            ToolKind::Mock(responses) => results.extend(mock::execute(responses, args, &env).ok()),
            ToolKind::Http(h) => {
                let Ok(req) = http::prepare(h, args, &env) else {
                    continue;
                };
                let url = match url::Url::parse(&req.url) {
                    Ok(u) => u,
                    Err(e) => panic!("prepare returned an unparsable URL {:?}: {e}", req.url),
                };
                assert_eq!(url.host_str(), Some("api.example.com"), "{}", req.url);
                let segments: Vec<&str> =
                    url.path_segments().map(|s| s.collect()).unwrap_or_default();
                assert_eq!(segments.len(), 4, "{}", req.url);
                assert_eq!((segments[0], segments[2]), ("v1", "items"), "{}", req.url);
                for (key, _) in url.query_pairs() {
                    assert!(matches!(&*key, "q" | "page" | "tag"), "{}", req.url);
                }
                assert!(url.fragment().is_none(), "{}", req.url);
                assert!(
                    !req.headers
                        .iter()
                        .any(|(k, _)| k.eq_ignore_ascii_case("x-injected")),
                    "{:?}",
                    req.headers
                );
            }
            _ => {}
        }
    }
    results
}
