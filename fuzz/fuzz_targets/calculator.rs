//! The calculator on any expression a model might send: an answer or an error, never a panic
//! (overflow included: debug assertions are on) and never unbounded work.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use toolrun::builtins::{call, BuiltinContext};

fuzz_target!(|data: &[u8]| {
    let Ok(expression) = std::str::from_utf8(data) else {
        return;
    };
    let ctx = BuiltinContext { now_unix_ms: 0 };
    let _ = call("calculator", &json!({ "expression": expression }), &ctx);
});
