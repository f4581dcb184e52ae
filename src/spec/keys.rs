//! The complete set of keys each place in a spec allows. The decoder rejects anything else (with a
//! did-you-mean) and `toolrun schema` is checked against these lists in tests, so they cannot drift.

pub const TOP: &[&str] = &[
    "version",
    "name",
    "description",
    "system",
    "default_model",
    "tools",
    "secrets",
    "policy",
    "limits",
    "models",
    "tests",
    "replay",
    "fixtures",
];

/// Keys every tool kind accepts.
pub const TOOL_COMMON: &[&str] = &[
    "description",
    "kind",
    "side_effects",
    "idempotent",
    "max_calls",
    "timeout",
    "faults",
];
pub const TOOL_MOCK: &[&str] = &["input", "responses"];
pub const TOOL_TABLE: &[&str] = &["rows", "file"];
pub const TOOL_BUILTIN: &[&str] = &["builtin"];
pub const TOOL_HTTP: &[&str] = &["input", "request", "response", "retries"];
pub const TOOL_KINDS: &[&str] = &["mock", "table", "builtin", "http"];

pub fn tool_kind_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "mock" => TOOL_MOCK,
        "table" => TOOL_TABLE,
        "builtin" => TOOL_BUILTIN,
        "http" => TOOL_HTTP,
        _ => &[],
    }
}

pub fn all_tool_keys() -> Vec<&'static str> {
    let mut keys: Vec<&str> = TOOL_COMMON.to_vec();
    for kind in TOOL_KINDS {
        for k in tool_kind_keys(kind) {
            if !keys.contains(k) {
                keys.push(k);
            }
        }
    }
    keys
}

pub const MOCK_RESPONSE: &[&str] = &["when", "result", "error"];
pub const ERROR_OBJECT: &[&str] = &["kind", "message"];
pub const REQUEST: &[&str] = &["method", "url", "query", "headers", "body", "body_text"];
pub const HTTP_RESPONSE: &[&str] = &["pointer", "max_bytes", "max_redirects"];
pub const FAULT: &[&str] = &[
    "fail_first",
    "kind",
    "message",
    "timeout",
    "http_status",
    "oversized_output",
    "delay",
];

pub const POLICY: &[&str] = &[
    "allow",
    "deny",
    "confirm",
    "max_identical_calls",
    "max_repeated_errors",
    "detect_alternation",
    "network",
];
pub const NETWORK: &[&str] = &["allow_hosts"];
pub const LIMITS: &[&str] = &[
    "max_steps",
    "max_tool_calls",
    "max_parallel_tools",
    "tool_timeout",
    "run_timeout",
    "max_tool_output_chars",
    "max_tokens_total",
];

pub const MODEL_KINDS: &[&str] = &["scripted", "openai", "anthropic"];
pub const MODEL_SCRIPTED: &[&str] = &["kind", "scripts"];
pub const MODEL_LIVE: &[&str] = &[
    "kind",
    "model",
    "base_url",
    "api_key_env",
    "temperature",
    "max_tokens",
    "retries",
    "timeout",
    "headers",
    "price",
    "tool_choice",
    "parallel_tool_calls",
    "extra_body",
    "stream",
    "query",
    "api_key_header",
];
pub const TOOL_CHOICE: &[&str] = &["tool"];
/// The request keys toolrun writes itself; `extra_body` may not replace them.
pub const OWNED_BODY_KEYS: &[(&str, &str)] = &[
    ("model", "the model's `model:`"),
    ("messages", "the conversation toolrun builds"),
    ("system", "the spec's `system:`"),
    ("tools", "the spec's `tools:` and `policy:`"),
    ("functions", "the spec's `tools:` and `policy:`"),
    ("tool_choice", "the model's `tool_choice:`"),
    ("function_call", "the model's `tool_choice:`"),
    ("parallel_tool_calls", "the model's `parallel_tool_calls:`"),
    ("stream", "the model's `stream:`"),
    ("stream_options", "the model's `stream:`"),
    ("max_tokens", "the model's `max_tokens:`"),
    ("temperature", "the model's `temperature:`"),
];
/// `price:` on a live model: USD per million tokens.
pub const PRICE: &[&str] = &["input", "output"];
pub const SCRIPT: &[&str] = &["when", "turns"];
pub const TURN: &[&str] = &["answer", "tool_calls", "raw"];
pub const SCRIPTED_CALL: &[&str] = &["name", "arguments", "arguments_raw", "malformed"];

pub const TEST: &[&str] = &[
    "name", "query", "model", "fixture", "now", "approve", "faults", "expect",
];
pub const EXPECT: &[&str] = &[
    "status",
    "stop_reason",
    "tool_calls",
    "tool_calls_include",
    "tool_calls_exclude",
    "arguments",
    "error_kinds",
    "output_contains",
    "output_not_contains",
    "output_matches",
    "max_tool_calls",
];
pub const REPLAY: &[&str] = &["ignore"];
