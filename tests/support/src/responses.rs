//! OpenAI's Responses API (`POST /v1/responses`) for [`crate::providers::Fake::responses`]:
//! request validation per the API reference (and the errors the real service gives for a
//! stateless conversation that is not whole), and canned replies, streamed or not.

use crate::http::Response;
use crate::providers::{
    check_keys, check_number, fail, sse, valid_tool_name, Check, INPUT_TOKENS, OUTPUT_TOKENS,
};
use serde_json::{json, Value};

const REQUEST_KEYS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "max_output_tokens",
    "stream",
    "stream_options",
    "store",
    "include",
    "reasoning",
    "previous_response_id",
    "metadata",
    "text",
    "truncation",
    "user",
    "service_tier",
    "background",
    "prompt_cache_key",
    "safety_identifier",
    "top_logprobs",
    "max_tool_calls",
];

const INCLUDES: &[&str] = &[
    "reasoning.encrypted_content",
    "message.output_text.logprobs",
    "file_search_call.results",
    "web_search_call.action.sources",
    "message.input_image.image_url",
    "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
];

/// A Responses request, as the API reference describes it.
pub fn check(body: &Value) -> Check {
    let Some(obj) = body.as_object() else {
        return fail("the body must be a JSON object");
    };
    check_keys(obj, REQUEST_KEYS, "request")?;
    if !body["model"].is_string() {
        return fail("model: a string is required");
    }
    if let Some(i) = body.get("instructions") {
        if !i.is_string() {
            return fail("instructions must be a string");
        }
    }
    for key in ["stream", "store", "parallel_tool_calls"] {
        if body.get(key).is_some_and(|v| !v.is_boolean()) {
            return fail(format!("`{key}` must be a boolean"));
        }
    }
    check_number(body, "temperature", 0.0, 2.0)?;
    check_number(body, "top_p", 0.0, 1.0)?;
    if let Some(n) = body.get("max_output_tokens") {
        if !n.as_u64().is_some_and(|n| n >= 16) {
            return fail(format!("Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got {n} instead."));
        }
    }
    if let Some(inc) = body.get("include") {
        let ok = inc.as_array().is_some_and(|a| {
            a.iter()
                .all(|v| v.as_str().is_some_and(|s| INCLUDES.contains(&s)))
        });
        if !ok {
            return fail(format!("include: unknown values in {inc}"));
        }
    }
    if let Some(r) = body.get("reasoning") {
        check_reasoning(r)?;
    }
    check_tools(body)?;
    let store = body.get("store").and_then(Value::as_bool).unwrap_or(true);
    match &body["input"] {
        Value::String(_) => Ok(()),
        Value::Array(items) => check_input(items, store),
        _ => fail("input: a string or a list of items is required"),
    }
}

fn check_reasoning(r: &Value) -> Check {
    let Some(o) = r.as_object() else {
        return fail("reasoning must be an object");
    };
    check_keys(o, &["effort", "summary", "generate_summary"], "reasoning")?;
    let ok = |k: &str, allowed: &[&str]| {
        r.get(k)
            .is_none_or(|v| v.as_str().is_some_and(|s| allowed.contains(&s)))
    };
    if !ok(
        "effort",
        &["none", "minimal", "low", "medium", "high", "xhigh"],
    ) || !ok("summary", &["auto", "concise", "detailed"])
    {
        return fail(format!("reasoning: invalid value in {r}"));
    }
    Ok(())
}

/// The function tools' names; `tool_choice` must name one of them.
fn check_tools(body: &Value) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    if let Some(tools) = body.get("tools") {
        let Some(tools) = tools.as_array() else {
            return fail("tools must be an array");
        };
        for t in tools {
            let Some(o) = t.as_object() else {
                return fail("tools[]: an object is required");
            };
            if t["type"] != "function" {
                return fail(format!("tools[]: unsupported tool type {}", t["type"]));
            }
            check_keys(
                o,
                &["type", "name", "description", "parameters", "strict"],
                "function tool",
            )?;
            let name = t["name"].as_str().unwrap_or("");
            if !valid_tool_name(name) {
                return fail(format!("tools[].name: invalid function name `{name}`"));
            }
            if !t["parameters"].is_object() {
                return fail(format!("tools[].parameters of `{name}` must be an object"));
            }
            // The API's default is strict, which refuses a schema that is not closed.
            let closed = t["parameters"]["additionalProperties"] == json!(false);
            if t.get("strict") != Some(&json!(false)) && !closed {
                return fail(format!("Invalid schema for function '{name}': In context=(), 'additionalProperties' is required to be supplied and to be false."));
            }
            names.push(name.to_string());
        }
    }
    match body.get("tool_choice") {
        None => {}
        Some(Value::String(s)) if ["auto", "none", "required"].contains(&s.as_str()) => {
            if s == "required" && names.is_empty() {
                return fail("tool_choice 'required' needs tools");
            }
        }
        Some(c) if c["type"] == "function" => {
            let n = c["name"].as_str().unwrap_or("");
            if !names.iter().any(|t| t == n) {
                return fail(format!("Tool choice '{n}' not found in 'tools' parameter."));
            }
        }
        Some(other) => return fail(format!("tool_choice: invalid value {other}")),
    }
    Ok(names)
}

fn check_input(items: &[Value], store: bool) -> Check {
    let mut open_calls: Vec<String> = Vec::new();
    let mut answered: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let kind = item["type"]
            .as_str()
            .unwrap_or(if item.get("role").is_some() {
                "message"
            } else {
                ""
            });
        match kind {
            "message" => {
                let role = item["role"].as_str().unwrap_or("");
                if !["user", "assistant", "system", "developer"].contains(&role) {
                    return fail(format!("input[{i}].role: invalid role `{role}`"));
                }
                if !(item["content"].is_string() || item["content"].is_array()) {
                    return fail(format!(
                        "input[{i}].content: a string or parts are required"
                    ));
                }
            }
            "function_call" => {
                let id = item["call_id"].as_str().unwrap_or("");
                if id.is_empty() || !item["name"].is_string() || !item["arguments"].is_string() {
                    return fail(format!(
                        "input[{i}]: a function_call needs call_id, name and arguments (a string)"
                    ));
                }
                open_calls.push(id.to_string());
            }
            "function_call_output" => {
                let id = item["call_id"].as_str().unwrap_or("");
                if !open_calls.iter().any(|c| c == id) {
                    return fail(format!(
                        "No tool call found for function call output with call_id {id}."
                    ));
                }
                if !item["output"].is_string() && !item["output"].is_array() {
                    return fail(format!("input[{i}].output must be a string or parts"));
                }
                answered.push(id.to_string());
            }
            "reasoning" => {
                let id = item["id"].as_str().unwrap_or("");
                if id.is_empty() || !item["summary"].is_array() {
                    return fail(format!("input[{i}]: a reasoning item needs id and summary"));
                }
                if !store && !item["encrypted_content"].is_string() {
                    return fail(format!("Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."));
                }
                let next = items.get(i + 1);
                let follows = next.is_some_and(|n| {
                    n["type"] == "function_call"
                        || n["type"] == "reasoning"
                        || n["role"] == "assistant"
                });
                if !follows {
                    return fail(format!("Item '{id}' of type 'reasoning' was provided without its required following item."));
                }
            }
            other => return fail(format!("input[{i}]: unknown item type `{other}`")),
        }
    }
    match open_calls.iter().find(|c| !answered.contains(c)) {
        Some(c) => fail(format!("No tool output found for function call {c}.")),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------
// Canned replies
// ---------------------------------------------------------------------------------------

/// A Responses object with these output items; `usage` reports [`INPUT_TOKENS`] and
/// [`OUTPUT_TOKENS`] with `cached` and `reasoning` inside them.
pub fn object(output: Vec<Value>, cached: u64, reasoning: u64) -> Value {
    json!({
        "id": "resp_fake", "object": "response", "created_at": 1_700_000_000, "status": "completed",
        "error": null, "incomplete_details": null, "model": "fake-responses", "output": output,
        "usage": {
            "input_tokens": INPUT_TOKENS, "input_tokens_details": { "cached_tokens": cached },
            "output_tokens": OUTPUT_TOKENS, "output_tokens_details": { "reasoning_tokens": reasoning },
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        },
    })
}

pub fn message(text: &str) -> Value {
    json!({ "id": "msg_fake", "type": "message", "status": "completed", "role": "assistant",
            "content": [{ "type": "output_text", "text": text, "annotations": [] }] })
}

pub fn call(call_id: &str, name: &str, arguments: &str) -> Value {
    json!({ "id": format!("fc_{call_id}"), "type": "function_call", "status": "completed",
            "call_id": call_id, "name": name, "arguments": arguments })
}

/// A reasoning item with one summary and opaque encrypted content.
pub fn reasoning(id: &str, summary: &str) -> Value {
    json!({ "id": id, "type": "reasoning",
            "summary": [{ "type": "summary_text", "text": summary }],
            "encrypted_content": format!("gAAAAB-{id}-opaque==") })
}

pub fn reply(output: Vec<Value>) -> Response {
    Response::json(200, object(output, 0, 0))
}

pub fn answer(text: &str) -> Response {
    reply(vec![message(text)])
}

/// Tool calls as `(call_id, name, arguments text)`.
pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Response {
    reply(calls.iter().map(|(i, n, a)| call(i, n, a)).collect())
}

/// The events the API streams for `response` (a finished Responses object): created, each
/// item added, its text or arguments in pieces, done, then `end` (`response.completed`, or
/// none at all for a stream cut short).
pub fn stream(response: &Value, end: Option<&str>) -> Response {
    let mut events = vec![(
        None,
        json!({ "type": "response.created", "response": { "id": "resp_fake", "object": "response", "status": "in_progress", "output": [] } }),
    )];
    let items = response["output"].as_array().cloned().unwrap_or_default();
    for (i, item) in items.iter().enumerate() {
        let mut added = item.clone();
        if item["type"] == "message" {
            added["content"] = json!([]);
        }
        if item["type"] == "function_call" {
            added["arguments"] = json!("");
        }
        events.push((
            None,
            json!({ "type": "response.output_item.added", "output_index": i, "item": added }),
        ));
        let (kind, text) = match item["type"].as_str() {
            Some("message") => (
                "response.output_text.delta",
                item["content"][0]["text"].as_str().unwrap_or(""),
            ),
            Some("function_call") => (
                "response.function_call_arguments.delta",
                item["arguments"].as_str().unwrap_or(""),
            ),
            _ => ("", ""),
        };
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(4) {
            events.push((None, json!({ "type": kind, "output_index": i, "content_index": 0, "delta": piece.iter().collect::<String>() })));
        }
        events.push((
            None,
            json!({ "type": "response.output_item.done", "output_index": i, "item": item }),
        ));
    }
    if let Some(end) = end {
        events.push((None, json!({ "type": end, "response": response })));
    }
    sse(&events, false)
}
