//! Hostile argument values through a spec's templates: mock results and errors, and an HTTP
//! request (URL, query, headers, body). Rendering may fail; it must not panic, and no value may
//! move an HTTP request to another host or add a path segment or query parameter.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::OnceLock;
use toolrun::events::Events;
use toolrun::net::Transport;
use toolrun::redact::Secrets;
use toolrun::registry::{Registry, ToolKind};
use toolrun::tools::{http, mock, ToolEnv};

#[derive(Arbitrary, Debug)]
enum N {
    Int(i64),
    Float(f64),
    Str(String),
    Json(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    a: String,
    b: Option<String>,
    n: N,
    list: Vec<String>,
    fail: bool,
    query: String,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let text = include_str!("../specs/templates.yaml");
        let source = toolrun::spec::Source {
            display: "templates.yaml".into(),
            text: text.into(),
        };
        let compiled = toolrun::compile::compile(&source, Path::new("templates.yaml"));
        match compiled.registry {
            Some(r) => r,
            None => panic!("the harness spec must compile: {:?}", compiled.diagnostics),
        }
    })
}

fuzz_target!(|input: Input| {
    let registry = registry();
    let n = match input.n {
        N::Int(i) => Value::from(i),
        N::Float(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        N::Str(s) => Value::String(s),
        N::Json(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
    };
    let mut args = json!({ "a": input.a, "n": n, "list": input.list, "fail": input.fail });
    if let Some(b) = input.b {
        args["b"] = Value::String(b);
    }
    let secrets = Secrets::default();
    let transport = Transport::live();
    let events = Events::none();
    let env = ToolEnv {
        registry,
        secrets: &secrets,
        transport: &transport,
        events: &events,
        query: &input.query,
        now_unix_ms: 0,
        call_id: "call_1",
    };
    for name in ["echo", "fetch"] {
        let Some(tool) = registry.tool(name) else {
            panic!("no tool {name}");
        };
        match &tool.kind {
            ToolKind::Mock(responses) => {
                let _ = mock::execute(responses, &args, &env);
            }
            ToolKind::Http(h) => {
                let Ok(req) = http::prepare(h, &args, &env) else {
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
            }
            _ => {}
        }
    }
});
