//! Every builtin with arbitrary arguments. Argument names are drawn mostly from the builtin's own
//! schema, so the fuzzer spends its time past the "unknown argument" check.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use toolrun::builtins::{all, call, BuiltinContext};

#[derive(Arbitrary, Debug)]
enum Arg {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Null,
    List(Vec<String>),
    /// Parsed as JSON when it is JSON (a `data` document for json_query), else a string.
    Json(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    builtin: u8,
    now_unix_ms: i64,
    args: Vec<(u8, Arg)>,
}

fn to_json(arg: Arg) -> Value {
    match arg {
        Arg::Str(s) => Value::String(s),
        Arg::Int(i) => Value::from(i),
        Arg::Float(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Arg::Bool(b) => Value::Bool(b),
        Arg::Null => Value::Null,
        Arg::List(items) => Value::Array(items.into_iter().map(Value::String).collect()),
        Arg::Json(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
    }
}

fuzz_target!(|input: Input| {
    let builtins = all();
    let info = &builtins[input.builtin as usize % builtins.len()];
    let schema = (info.input_schema)();
    let names: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let mut map = Map::new();
    for (pick, arg) in input.args {
        // One pick in 32 is a name the schema does not know.
        let name = match names.get(pick as usize % (names.len() + 1)) {
            Some(n) if pick % 32 != 31 => n.clone(),
            _ => format!("extra{pick}"),
        };
        map.insert(name, to_json(arg));
    }
    let ctx = BuiltinContext {
        now_unix_ms: input.now_unix_ms,
    };
    let _ = call(info.name, &Value::Object(map), &ctx);
});
