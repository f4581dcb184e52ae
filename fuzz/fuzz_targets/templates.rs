//! Hostile argument values through a spec's templates: mock results and errors, and an HTTP
//! request (URL, query, headers, body). Rendering may fail; it must not panic, and no value may
//! move an HTTP request to another host or add a path segment or query parameter.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

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

fuzz_target!(|input: Input| {
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
    toolrun::fuzzing::templates(&args, &input.query);
});
