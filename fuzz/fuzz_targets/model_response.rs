//! Provider replies, as a hostile or broken server might send them. The first byte picks how the
//! rest is used: as a whole JSON reply, or as the parts a model controls (tool-call arguments,
//! tool names, text) inside an otherwise well-formed reply, which reaches deeper than random JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use toolrun::models::{anthropic, openai};

fuzz_target!(|data: &[u8]| {
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
});
