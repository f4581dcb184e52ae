//! The JSON Schema of the spec format, for editors' YAML language servers (`toolrun schema`).
//!
//! Every object's `properties` come from the key lists in `keys.rs`, the same lists the decoder
//! checks, and each key's type and description from [`field`]. Tests check that every listed key
//! has an entry here and every entry is listed, so the schema cannot drift from the decoder.

use super::keys;
use serde_json::{json, Map, Value};

pub const SCHEMA_ID: &str = "https://github.com/toolrun/toolrun/raw/main/toolrun.schema.json";

/// Each object of the format: its `$defs` name, its complete key list, the keys it requires and
/// a description. The root is `spec`.
pub struct Place {
    pub def: &'static str,
    pub keys: &'static [&'static str],
    pub required: &'static [&'static str],
    pub description: &'static str,
}

pub fn places() -> Vec<Place> {
    let place = |def, keys, required, description| Place {
        def,
        keys,
        required,
        description,
    };
    vec![
        place("spec", keys::TOP, &["version"][..], "A toolrun spec: tools, policy, limits, models and tests."),
        place("tool_mock", tool_keys("mock"), &["kind", "responses"], "A `mock` tool: canned responses chosen by its arguments."),
        place("tool_table", tool_keys("table"), &["kind"], "A `table` tool: looks up rows of a small table (inline `rows` or a `file`)."),
        place("tool_builtin", tool_keys("builtin"), &["kind", "builtin"], "A `builtin` tool: a safe function shipped with toolrun."),
        place("tool_http", tool_keys("http"), &["kind", "request"], "An `http` tool: one templated HTTP request."),
        place("mock_response", keys::MOCK_RESPONSE, &[], "One mock response: `result` or `error`, chosen when `when` matches (no `when`: the fallback)."),
        place("error_object", keys::ERROR_OBJECT, &["message"], "A tool error with its kind."),
        place("request", keys::REQUEST, &["url"], "The HTTP request; strings are minijinja templates over `args`, `secrets` and `query`."),
        place("http_response", keys::HTTP_RESPONSE, &[], "How the HTTP response becomes the tool's result."),
        place("fault", keys::FAULT, &[], "An injected fault, for testing how the loop copes: exactly one of `fail_first`, `timeout`, `http_status`, `oversized_output`, `delay`."),
        place("policy", keys::POLICY, &[], "Which tools may run, which need confirmation, loop detection and network rules."),
        place("network", keys::NETWORK, &[], "Network rules for `http` tools."),
        place("limits", keys::LIMITS, &[], "Budgets that stop a run."),
        place("model_scripted", keys::MODEL_SCRIPTED, &["kind", "scripts"], "A scripted model: replies follow scripts, for offline tests."),
        place("model_live", keys::MODEL_LIVE, &["kind", "model"], "A live model behind an OpenAI-compatible or Anthropic API."),
        place("price", keys::PRICE, &["input", "output"], "What the model costs, in USD per million tokens; test results then carry cost."),
        place("script", keys::SCRIPT, &["turns"], "A script: the first whose `when` matches the query is played."),
        place("turn", keys::TURN, &[], "One model reply: exactly one of `answer`, `tool_calls` or `raw`."),
        place("scripted_call", keys::SCRIPTED_CALL, &["name"], "A tool call made by a scripted model."),
        place("test", keys::TEST, &["name"], "A test run by `toolrun test`."),
        place("expect", keys::EXPECT, &[], "What a test's run must show."),
        place("replay", keys::REPLAY, &[], "How `toolrun replay` compares traces."),
    ]
}

/// Tool places list the common keys first, then the kind's own: what the decoder accepts.
fn tool_keys(kind: &str) -> &'static [&'static str] {
    let own = keys::tool_kind_keys(kind);
    let all: Vec<&'static str> = keys::TOOL_COMMON.iter().chain(own).copied().collect();
    // Leaked once per kind per process: the lists are tiny and `toolrun schema` is short-lived.
    Box::leak(all.into_boxed_slice())
}

fn r(def: &str) -> Value {
    json!({ "$ref": format!("#/$defs/{def}") })
}

fn strings() -> Value {
    json!({ "type": "array", "items": { "type": "string" } })
}

fn tool_names() -> Value {
    json!({ "type": "array", "items": { "type": "string" }, "uniqueItems": true })
}

fn count(min: i64) -> Value {
    json!({ "type": "integer", "minimum": min })
}

/// The schema and description of `key` in `def`, or `None` when this table does not know it (a
/// test turns that into a failure naming the key).
pub fn field(def: &str, key: &str) -> Option<(Value, &'static str)> {
    let duration = r("duration");
    let f = match (def, key) {
        ("spec", "version") => (json!({ "const": 1 }), "Version of the spec format; always 1."),
        ("spec", "name") => (json!({ "type": "string" }), "Name of the spec (default: the file name)."),
        ("spec", "description") => (json!({ "type": "string" }), "What this spec's assistant does."),
        ("spec", "system") => (json!({ "type": "string" }), "System prompt sent to live models."),
        ("spec", "default_model") => (json!({ "type": "string" }), "The model `toolrun run` uses; needed when several are declared."),
        ("spec", "tools") => (
            json!({
                "type": "object",
                "propertyNames": { "pattern": "^[A-Za-z_][A-Za-z0-9_-]{0,63}$" },
                "additionalProperties": r("tool"),
            }),
            "Tools by name. Names must match ^[A-Za-z_][A-Za-z0-9_-]{0,63}$, the rule every provider accepts.",
        ),
        ("spec", "secrets") => (
            json!({ "type": "array", "items": { "type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$" }, "uniqueItems": true }),
            "The only environment variables templates may read, as `{{ secrets.NAME }}`.",
        ),
        ("spec", "policy") => (r("policy"), "Which tools may run, which need confirmation, loop detection, network rules."),
        ("spec", "limits") => (r("limits"), "Budgets that stop a run."),
        ("spec", "models") => (json!({ "type": "object", "additionalProperties": r("model") }), "Models by name."),
        ("spec", "tests") => (json!({ "type": "array", "items": r("test") }), "Tests run by `toolrun test`."),
        ("spec", "replay") => (r("replay"), "Settings for `toolrun replay`."),
        ("spec", "fixtures") => (json!({ "type": "string" }), "Folder of per-test fixtures, relative to the spec: a test's fixture is `DIR/<test name>.json` unless it sets `fixture:`. `toolrun test --record missing|all` writes them."),

        ("tool", "description") => (json!({ "type": "string", "minLength": 1 }), "What the tool does and returns; models choose tools by it."),
        ("tool", "kind") => (json!({ "enum": keys::TOOL_KINDS }), "How the tool runs: mock, table, builtin or http."),
        ("tool", "side_effects") => (json!({ "type": "boolean" }), "The tool changes the world; it needs confirmation before it runs."),
        ("tool", "idempotent") => (json!({ "type": "boolean" }), "Calling twice is the same as once, so retries are safe (default: from the method or kind)."),
        ("tool", "max_calls") => (count(1), "Most calls of this tool per run."),
        ("tool", "timeout") => (duration, "Timeout of one call (default: `limits.tool_timeout`)."),
        ("tool", "faults") => (json!({ "type": "array", "items": r("fault") }), "Injected faults, for testing how the loop copes."),
        ("tool_mock" | "tool_http", "input") => (
            json!({ "type": "object", "properties": { "type": { "const": "object" } } }),
            "JSON Schema of the arguments: an object schema.",
        ),
        ("tool_mock", "responses") => (
            json!({ "type": "array", "items": r("mock_response"), "minItems": 1 }),
            "Responses; the first whose `when` matches the arguments wins.",
        ),
        ("tool_table", "rows") => (json!({ "type": "array", "items": { "type": "object" } }), "The rows, each a mapping of column to value."),
        ("tool_table", "file") => (
            json!({ "type": "string", "pattern": "\\.([cC][sS][vV]|[jJ][sS][oO][nN])$" }),
            "A CSV or JSON file of rows, relative to the spec's folder (and inside it).",
        ),
        ("tool_builtin", "builtin") => {
            let names: Vec<&str> = crate::builtins::all().iter().map(|b| b.name).collect();
            (json!({ "enum": names }), "Which builtin; its input schema comes with it.")
        }
        ("tool_http", "request") => (r("request"), "The HTTP request to send."),
        ("tool_http", "response") => (r("http_response"), "How the response becomes the result."),
        ("tool_http", "retries") => (count(0), "Retries on network errors and 5xx, for idempotent calls only."),

        ("mock_response", "when") => (json!({ "type": "object" }), "Arguments that must match (a subset); no `when` makes this the fallback."),
        ("mock_response", "result") => (json!({}), "The result, any JSON value; strings are templates over `args` and `query`."),
        ("mock_response", "error") => (
            json!({ "anyOf": [{ "type": "string" }, r("error_object")] }),
            "An error message (kind `execution_error`), or `{kind, message}`.",
        ),
        ("error_object", "kind") => (json!({ "enum": crate::vocab::ErrorKind::NAMES }), "The error kind the model sees."),
        ("error_object", "message") => (json!({ "type": "string" }), "The message, a template over `args` and `query`."),

        ("request", "method") => (
            json!({ "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "get", "post", "put", "patch", "delete", "head", "options"] }),
            "HTTP method (default: GET).",
        ),
        ("request", "url") => (json!({ "type": "string" }), "The URL, http:// or https://, a template."),
        ("request", "query") => (json!({ "type": "object" }), "Query parameters, added URL-encoded; values are templates."),
        ("request", "headers") => (json!({ "type": "object", "additionalProperties": { "type": ["string", "integer"] } }), "Headers; values are templates."),
        ("request", "body") => (json!({}), "A JSON body; strings inside are templates."),
        ("request", "body_text") => (json!({ "type": "string" }), "A text body, a template (instead of `body`)."),
        ("http_response", "pointer") => (json!({ "type": "string", "pattern": "^(/.*)?$" }), "JSON Pointer into the response body; the result is what it points at."),
        ("http_response", "max_bytes") => (count(1), "Largest response body read, in bytes."),
        ("http_response", "max_redirects") => (count(0), "Redirects followed (each to an allowed host)."),

        ("fault", "fail_first") => (count(1), "Fail the first N calls."),
        ("fault", "kind") => (json!({ "enum": crate::vocab::ErrorKind::NAMES }), "Error kind of `fail_first` failures."),
        ("fault", "message") => (json!({ "type": "string" }), "Error message of `fail_first` failures."),
        ("fault", "timeout") => (json!({ "type": "boolean" }), "Every call times out."),
        ("fault", "http_status") => (json!({ "type": "integer", "minimum": 100, "maximum": 599 }), "Every call gets this HTTP status."),
        ("fault", "oversized_output") => (count(1), "Every call returns this many characters."),
        ("fault", "delay") => (duration, "Every call waits this long first (a slow tool; the tool's timeout still applies)."),

        ("policy", "allow") => (tool_names(), "Tools that may run; others are denied (default: all)."),
        ("policy", "deny") => (tool_names(), "Tools that never run."),
        ("policy", "confirm") => (tool_names(), "Tools that need confirmation (`--approve TOOL`); `side_effects: true` tools always do."),
        ("policy", "max_identical_calls") => (count(1), "Loop detection: most calls with the same tool and arguments."),
        ("policy", "max_repeated_errors") => (count(1), "Stop after this many errors in a row from one tool."),
        ("policy", "detect_alternation") => (json!({ "type": "boolean" }), "Loop detection: stop on A, B, A, B call patterns."),
        ("policy", "network") => (r("network"), "Network rules for `http` tools."),
        ("network", "allow_hosts") => (
            strings(),
            "Hosts `http` tools may reach (`api.example.com`, `127.0.0.1:8080`); default: the hosts written in URLs.",
        ),

        ("limits", "max_steps") => (count(1), "Most model calls per run."),
        ("limits", "max_tool_calls") => (count(1), "Most tool executions per run."),
        ("limits", "max_parallel_tools") => (count(1), "Most tool calls running at once."),
        ("limits", "tool_timeout") => (duration, "Default timeout of one tool call."),
        ("limits", "run_timeout") => (duration, "Timeout of the whole run."),
        ("limits", "max_tool_output_chars") => (count(16), "Longer observations are truncated, with a marker."),
        ("limits", "max_tokens_total") => (count(1), "Most tokens used by live models per run."),

        ("model_scripted", "kind") => (json!({ "const": "scripted" }), "A scripted model."),
        ("model_scripted", "scripts") => (json!({ "type": "array", "items": r("script") }), "Scripts; the first whose `when` matches the query plays."),
        ("model_live", "kind") => (json!({ "enum": ["openai", "anthropic"] }), "Which API: openai (any compatible server) or anthropic."),
        ("model_live", "model") => (json!({ "type": "string" }), "The provider's model name."),
        ("model_live", "base_url") => (json!({ "type": "string", "pattern": "^[hH][tT][tT][pP][sS]?://" }), "API base URL."),
        ("model_live", "api_key_env") => (json!({ "type": "string" }), "Environment variable holding the API key."),
        ("model_live", "temperature") => (json!({ "type": "number", "minimum": 0, "maximum": 2 }), "Sampling temperature."),
        ("model_live", "max_tokens") => (count(1), "Most tokens per reply."),
        ("model_live", "retries") => (count(0), "Retries on rate limits and server errors."),
        ("model_live", "timeout") => (duration, "Timeout of one model call."),
        ("model_live", "headers") => (json!({ "type": "object", "additionalProperties": { "type": "string" } }), "Extra HTTP headers; not Authorization, x-api-key or api-key (use `api_key_env`)."),
        ("model_live", "tool_choice") => (json!({ "oneOf": [{ "enum": ["auto", "required", "none"] }, { "type": "object", "properties": { "tool": { "type": "string" } }, "required": ["tool"], "additionalProperties": false }] }), "auto (default, sent whenever tools are), required, none, or { tool: NAME } to force one; a forced choice holds until the first tool call."),
        ("model_live", "parallel_tool_calls") => (json!({ "type": "boolean" }), "false: at most one tool call per turn."),
        ("model_live", "extra_body") => (json!({ "type": "object", "propertyNames": { "not": { "enum": keys::OWNED_BODY_KEYS.iter().map(|(k, _)| *k).collect::<Vec<_>>() } } }), "Provider knobs merged into every request body (seed, top_p, response_format, ...); not keys toolrun writes."),
        ("model_live", "stream") => (json!({ "type": "boolean" }), "Read the reply as server-sent events and print text as it arrives."),
        ("model_live", "query") => (json!({ "type": "object", "additionalProperties": { "type": "string" } }), "Query parameters added to every request (Azure: api-version)."),
        ("model_live", "api_key_header") => (json!({ "type": "string" }), "Send the key verbatim in this header (Azure: api-key) instead of the provider's own."),
        ("model_live", "price") => (r("price"), "USD per million tokens (`input`, `output`), for the cost in `toolrun test --results`."),
        ("price", "input") => (json!({ "type": "number", "minimum": 0 }), "USD per million input (prompt) tokens."),
        ("price", "output") => (json!({ "type": "number", "minimum": 0 }), "USD per million output (completion) tokens."),

        ("script", "when") => (json!({ "type": "string" }), "Regular expression (Rust syntax) matched against the query; none matches everything."),
        ("script", "turns") => (json!({ "type": "array", "items": r("turn"), "minItems": 1 }), "One turn per model call, in order."),
        ("turn", "answer") => (json!({ "type": "string" }), "The final answer, a template over `query`, `results`, `last`, `step`."),
        ("turn", "tool_calls") => (json!({ "type": "array", "items": r("scripted_call"), "minItems": 1 }), "Tool calls made in this turn."),
        ("turn", "raw") => (json!({ "type": "string" }), "A malformed reply: prose instead of a tool call."),
        ("scripted_call", "name") => (json!({ "type": "string" }), "The tool to call."),
        ("scripted_call", "arguments") => (json!({ "type": "object" }), "Arguments; strings are templates."),
        ("scripted_call", "arguments_raw") => (json!({ "type": "string" }), "Arguments as raw text, e.g. invalid JSON on purpose."),
        ("scripted_call", "malformed") => (json!({ "type": "boolean" }), "The call is wrong on purpose; skip the check-time validation."),

        ("test", "name") => (json!({ "type": "string" }), "Unique name of the test."),
        ("test", "query") => (json!({ "type": "string" }), "The query to run."),
        ("test", "model") => (json!({ "type": "string" }), "Model to use (default: `default_model`)."),
        ("test", "fixture") => (json!({ "type": "string" }), "A recorded fixture to replay instead, relative to the spec."),
        ("test", "now") => (json!({ "type": "string" }), "The clock for this test (RFC 3339), for `datetime` and templates; overrides `TOOLRUN_NOW`."),
        ("test", "approve") => (tool_names(), "Tools approved for this run."),
        ("test", "faults") => (
            json!({ "type": "object", "additionalProperties": { "type": "array", "items": r("fault") } }),
            "Faults injected for this test only, by tool name; they replace the tool's own `faults`.",
        ),
        ("test", "expect") => (r("expect"), "What the run must show."),
        ("expect", "status") => (json!({ "enum": crate::vocab::Status::NAMES }), "The run's status."),
        ("expect", "stop_reason") => (json!({ "enum": crate::vocab::StopReason::NAMES }), "The rule that ended the run."),
        ("expect", "tool_calls") => (strings(), "Exactly these tool calls, in order."),
        ("expect", "tool_calls_include") => (strings(), "These tools were called."),
        ("expect", "tool_calls_exclude") => (strings(), "These tools were not called."),
        ("expect", "arguments") => (json!({ "type": "array", "items": { "type": "object" } }), "Each call's arguments include these, in order."),
        ("expect", "error_kinds") => (json!({ "type": "array", "items": { "enum": crate::vocab::ErrorKind::NAMES } }), "Exactly these tool error kinds, in order."),
        ("expect", "output_contains") => (r("texts"), "The answer contains this text (or each of these)."),
        ("expect", "output_not_contains") => (r("texts"), "The answer contains none of these."),
        ("expect", "output_matches") => (json!({ "type": "string" }), "The answer matches this regular expression."),
        ("expect", "max_tool_calls") => (count(0), "At most this many tool calls."),
        ("replay", "ignore") => (
            json!({ "type": "array", "items": { "type": "string", "pattern": "^(/.*)?$" } }),
            "JSON Pointers of volatile fields, ignored when replay compares request bodies and traces.",
        ),
        _ => return None,
    };
    Some(f)
}

/// Common tool keys are described once, under `tool`.
fn lookup(def: &str, key: &str) -> Option<(Value, &'static str)> {
    field(def, key).or_else(|| {
        if def.starts_with("tool_") {
            field("tool", key)
        } else {
            None
        }
    })
}

fn object(place: &Place) -> Value {
    let mut props = Map::new();
    for key in place.keys {
        let (mut schema, description) = lookup(place.def, key).unwrap_or((json!({}), ""));
        // A tool kind's own def pins `kind`, so editors only offer that kind's keys.
        if *key == "kind" {
            if let Some(kind) = place.def.strip_prefix("tool_") {
                schema = json!({ "const": kind });
            }
        }
        // Siblings of `$ref` are allowed in 2020-12, so references get a description too.
        if let Value::Object(m) = &mut schema {
            m.insert("description".into(), json!(description));
        }
        props.insert((*key).to_string(), schema);
    }
    let mut obj = json!({
        "type": "object",
        "description": place.description,
        "properties": props,
        "additionalProperties": false,
    });
    if !place.required.is_empty() {
        obj["required"] = json!(place.required);
    }
    if place.def == "turn" {
        obj["minProperties"] = json!(1);
        obj["maxProperties"] = json!(1);
    }
    obj
}

/// `if kind is X then that def`: editors report the keys of the right kind, not a `oneOf` muddle.
fn dispatch(description: &str, kinds: &[(&str, &str)]) -> Value {
    let all: Vec<&str> = kinds.iter().map(|(k, _)| *k).collect();
    let branches: Vec<Value> = kinds
        .iter()
        .map(|(kind, def)| {
            json!({
                "if": { "properties": { "kind": { "const": kind } }, "required": ["kind"] },
                "then": r(def),
            })
        })
        .collect();
    json!({
        "type": "object",
        "description": description,
        "required": ["kind"],
        "properties": { "kind": { "enum": all, "description": format!("One of: {}.", all.join(", ")) } },
        "allOf": branches,
    })
}

pub fn spec_schema() -> Value {
    let mut defs = Map::new();
    let mut root = Value::Null;
    for place in places() {
        let obj = object(&place);
        if place.def == "spec" {
            root = obj;
        } else {
            defs.insert(place.def.to_string(), obj);
        }
    }
    let tool_kinds: Vec<(&str, String)> = keys::TOOL_KINDS
        .iter()
        .map(|k| (*k, format!("tool_{k}")))
        .collect();
    let tool_kinds: Vec<(&str, &str)> = tool_kinds.iter().map(|(k, d)| (*k, d.as_str())).collect();
    defs.insert(
        "tool".into(),
        dispatch(
            "A tool; `kind` decides which other keys it takes.",
            &tool_kinds,
        ),
    );
    let model_kinds: Vec<(&str, &str)> = keys::MODEL_KINDS
        .iter()
        .map(|k| {
            (
                *k,
                if *k == "scripted" {
                    "model_scripted"
                } else {
                    "model_live"
                },
            )
        })
        .collect();
    defs.insert(
        "model".into(),
        dispatch(
            "A model; `kind` decides which other keys it takes.",
            &model_kinds,
        ),
    );
    defs.insert(
        "duration".into(),
        json!({
            "type": "string",
            "pattern": "^\\s*([0-9]+(\\.[0-9]+)?\\s*(ms|s|m|h))+\\s*$",
            "description": "A duration with a unit: `500ms`, `5s`, `2m`, `1h`, `1m30s`.",
        }),
    );
    defs.insert(
        "texts".into(),
        json!({
            "anyOf": [{ "type": ["string", "number"] }, { "type": "array", "items": { "type": "string" } }],
            "description": "A text or a list of texts.",
        }),
    );
    let mut schema = Map::new();
    schema.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    schema.insert("$id".into(), json!(SCHEMA_ID));
    schema.insert("title".into(), json!("toolrun spec"));
    if let Value::Object(root) = root {
        schema.extend(root);
    }
    schema.insert("$defs".into(), Value::Object(defs));
    Value::Object(schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn keys_of(v: &Value) -> Vec<String> {
        v["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    #[test]
    fn every_object_has_exactly_the_decoders_keys() {
        let schema = spec_schema();
        for place in places() {
            let obj = if place.def == "spec" {
                &schema
            } else {
                &schema["$defs"][place.def]
            };
            let want: Vec<String> = place.keys.iter().map(|k| k.to_string()).collect();
            assert_eq!(keys_of(obj), want, "properties of `{}`", place.def);
            assert_eq!(
                obj["additionalProperties"],
                json!(false),
                "`{}` must refuse unknown keys",
                place.def
            );
        }
        // Every keys.rs list with a place in the schema.
        let tool_kinds: Vec<(&str, &[&str])> = keys::TOOL_KINDS
            .iter()
            .map(|k| (*k, keys::tool_kind_keys(k)))
            .collect();
        for (kind, own) in tool_kinds {
            let want: Vec<String> = keys::TOOL_COMMON
                .iter()
                .chain(own)
                .map(|k| k.to_string())
                .collect();
            assert_eq!(
                keys_of(&schema["$defs"][format!("tool_{kind}")]),
                want,
                "tool kind `{kind}`"
            );
        }
        for (def, list) in [
            ("mock_response", keys::MOCK_RESPONSE),
            ("error_object", keys::ERROR_OBJECT),
            ("request", keys::REQUEST),
            ("http_response", keys::HTTP_RESPONSE),
            ("fault", keys::FAULT),
            ("policy", keys::POLICY),
            ("network", keys::NETWORK),
            ("limits", keys::LIMITS),
            ("model_scripted", keys::MODEL_SCRIPTED),
            ("model_live", keys::MODEL_LIVE),
            ("price", keys::PRICE),
            ("script", keys::SCRIPT),
            ("turn", keys::TURN),
            ("scripted_call", keys::SCRIPTED_CALL),
            ("test", keys::TEST),
            ("expect", keys::EXPECT),
            ("replay", keys::REPLAY),
        ] {
            let want: Vec<String> = list.iter().map(|k| k.to_string()).collect();
            assert_eq!(keys_of(&schema["$defs"][def]), want, "`{def}`");
        }
        assert_eq!(
            keys_of(&schema),
            keys::TOP.iter().map(|k| k.to_string()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn every_key_is_described_and_every_description_is_used() {
        let mut used = BTreeSet::new();
        for place in places() {
            for key in place.keys {
                let found = lookup(place.def, key);
                assert!(
                    found.as_ref().is_some_and(|(_, d)| !d.is_empty()),
                    "no type/description for `{key}` in `{}`",
                    place.def
                );
                let owner = if field(place.def, key).is_some() {
                    place.def
                } else {
                    "tool"
                };
                used.insert((owner.to_string(), key.to_string()));
            }
            for required in place.required {
                assert!(
                    place.keys.contains(required),
                    "`{}` requires unknown key `{required}`",
                    place.def
                );
            }
        }
        // An entry for a key no list has is a key the decoder would reject: a drift the other way.
        let candidates: BTreeSet<(String, String)> = places()
            .iter()
            .map(|p| p.def)
            .chain(["tool"])
            .flat_map(|def| {
                keys::all_tool_keys()
                    .into_iter()
                    .chain(all_listed_keys())
                    .map(move |k| (def.to_string(), k.to_string()))
            })
            .filter(|(d, k)| field(d, k).is_some())
            .collect();
        let unused: Vec<_> = candidates.difference(&used).collect();
        assert!(
            unused.is_empty(),
            "descriptions for keys the decoder does not accept there: {unused:?}"
        );
    }

    fn all_listed_keys() -> Vec<&'static str> {
        places()
            .iter()
            .flat_map(|p| p.keys.iter().copied())
            .collect()
    }

    #[test]
    fn schema_is_valid_draft_2020_12() {
        let schema = spec_schema();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        jsonschema::meta::validate(&schema).expect("meta-valid");
        jsonschema::draft202012::new(&schema).expect("compiles");
    }

    fn validator() -> jsonschema::Validator {
        jsonschema::draft202012::new(&spec_schema()).expect("compiles")
    }

    fn errors(v: &jsonschema::Validator, doc: &str) -> Vec<String> {
        let json = crate::spec::yaml::parse(doc).expect("yaml").to_json();
        v.iter_errors(&json)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    #[test]
    fn every_example_spec_validates() {
        let v = validator();
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/specs");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).expect("specs/") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                let text = std::fs::read_to_string(&path).expect("read");
                let errs = errors(&v, &text);
                assert!(
                    errs.is_empty(),
                    "{} does not validate:\n{}",
                    path.display(),
                    errs.join("\n")
                );
                seen += 1;
            }
        }
        assert!(seen >= 2, "expected the example specs in {dir}");
    }

    #[test]
    fn wrong_keys_and_kinds_are_refused() {
        let v = validator();
        assert!(
            !errors(&v, "version: 1\nnmae: x\n").is_empty(),
            "unknown top-level key"
        );
        assert!(!errors(&v, "version: 2\n").is_empty(), "wrong version");
        let http_rows = "version: 1\ntools:\n  t:\n    kind: http\n    request: {url: 'https://a.test'}\n    rows: []\n";
        assert!(!errors(&v, http_rows).is_empty(), "`rows` on an http tool");
        let mock_ok = "version: 1\ntools:\n  t:\n    kind: mock\n    description: Returns one.\n    responses: [{result: 1}]\n";
        assert_eq!(errors(&v, mock_ok), Vec::<String>::new());
        assert!(
            !errors(&v, "version: 1\ntools:\n  t: {kind: mok}\n").is_empty(),
            "unknown kind"
        );
        let live_scripts = "version: 1\nmodels:\n  m: {kind: openai, model: x, scripts: []}\n";
        assert!(
            !errors(&v, live_scripts).is_empty(),
            "`scripts` on a live model"
        );
        assert!(
            !errors(&v, "version: 1\nlimits: {tool_timeout: 5}\n").is_empty(),
            "duration without unit"
        );
    }

    #[test]
    fn committed_schema_file_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/toolrun.schema.json");
        let fresh = format!(
            "{}\n",
            serde_json::to_string_pretty(&spec_schema()).expect("json")
        );
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(path, &fresh).expect("write toolrun.schema.json");
            return;
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(committed == fresh, "toolrun.schema.json is stale: run `UPDATE_SNAPSHOTS=1 cargo test committed_schema_file_is_current`");
    }
}
