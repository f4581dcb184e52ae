//! Fake OpenAI Chat Completions and Anthropic Messages servers on 127.0.0.1.
//!
//! Each validates every request the way the public API reference describes (and the way the
//! real services answer: 400 with the provider's error shape, 401 for a wrong key), then
//! answers with the next response of a script. What would be rejected for real is recorded as
//! a violation, so a test can assert that toolrun never sent a request the API would refuse.
//!
//! Where OpenAI-compatible servers are stricter than OpenAI (vLLM, Ollama, llama.cpp), the
//! fake enforces the stricter rule, since toolrun must work with all of them: an assistant
//! message with `tool_calls` and `content: null` is rejected.
//!
//! Also compiled into toolrun's unit tests (see `src/models/live.rs`), hence `super::http`.

#![allow(dead_code)]

use super::http::{Request, Response, TestServer};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// The API key the fakes accept, for both providers.
pub const KEY: &str = "sk-test-123";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    OpenAi,
    Anthropic,
    /// Azure OpenAI: Chat Completions under `/openai/deployments/NAME`, an `api-version`
    /// query parameter and the key in an `api-key` header.
    Azure,
    /// OpenAI's Responses API (`POST /v1/responses`), validated by [`crate::responses`].
    Responses,
}

/// The deployment the Azure fake serves.
pub const AZURE_DEPLOYMENT: &str = "gpt-4o-prod";

pub struct Fake {
    pub server: TestServer,
    api: Api,
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    script: Mutex<VecDeque<Response>>,
    violations: Mutex<Vec<String>>,
    bodies: Mutex<Vec<Value>>,
    /// Like a local server (Ollama, vLLM without `--api-key`): any key, or none, is fine.
    keyless: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Fake {
    /// Serves `POST /v1/chat/completions`; point `base_url` at [`Fake::base_url`].
    pub fn openai(script: Vec<Response>) -> Fake {
        Fake::start(Api::OpenAi, script, false)
    }

    /// Like [`Fake::openai`], but accepts requests without a key, as local servers do.
    pub fn openai_keyless(script: Vec<Response>) -> Fake {
        Fake::start(Api::OpenAi, script, true)
    }

    /// Serves `POST /v1/responses`; its [`Fake::spec_file`] model says `api: responses`.
    pub fn responses(script: Vec<Response>) -> Fake {
        Fake::start(Api::Responses, script, false)
    }

    /// Serves `POST /v1/messages`; point `base_url` at [`Fake::base_url`].
    pub fn anthropic(script: Vec<Response>) -> Fake {
        Fake::start(Api::Anthropic, script, false)
    }

    /// Serves Azure OpenAI's `POST /openai/deployments/gpt-4o-prod/chat/completions`.
    pub fn azure(script: Vec<Response>) -> Fake {
        Fake::start(Api::Azure, script, false)
    }

    /// A keyless OpenAI-compatible server on a fixed port (re-recording committed fixtures).
    pub fn openai_keyless_on(port: u16, script: Vec<Response>) -> Fake {
        Fake::start_on(Api::OpenAi, script, true, port)
    }

    fn start(api: Api, script: Vec<Response>, keyless: bool) -> Fake {
        Fake::start_on(api, script, keyless, 0)
    }

    fn start_on(api: Api, script: Vec<Response>, keyless: bool, port: u16) -> Fake {
        let state = Arc::new(State {
            script: Mutex::new(script.into()),
            keyless,
            ..State::default()
        });
        let shared = Arc::clone(&state);
        let server = TestServer::start_on(port, move |req| handle(api, &shared, req));
        Fake { server, api, state }
    }

    /// A [`live_spec`] for this fake's provider, at its [`Fake::base_url`], in a scratch folder.
    pub fn spec_file(&self, model_extra: &str, extra: &str) -> crate::TempFile {
        let kind = match self.api {
            Api::Anthropic => "anthropic",
            Api::OpenAi | Api::Azure | Api::Responses => "openai",
        };
        let model_extra = if self.api == Api::Responses {
            format!("    api: responses\n{model_extra}")
        } else {
            model_extra.to_string()
        };
        crate::temp_file(
            &format!("fake_{kind}"),
            "spec.yaml",
            &live_spec(kind, &self.base_url(), &model_extra, extra),
        )
    }

    /// What to put in a spec's `base_url`: `http://127.0.0.1:PORT/v1` for OpenAI (whose base
    /// URLs end in `/v1`), `http://127.0.0.1:PORT` for Anthropic.
    pub fn base_url(&self) -> String {
        match self.api {
            Api::OpenAi | Api::Responses => self.server.url("/v1"),
            Api::Anthropic => self.server.base_url(),
            Api::Azure => self
                .server
                .url(&format!("/openai/deployments/{AZURE_DEPLOYMENT}")),
        }
    }

    /// Every request received, valid or not.
    pub fn requests(&self) -> Vec<Request> {
        self.server.requests()
    }

    /// The JSON bodies of the requests that passed validation (and were authorised).
    pub fn bodies(&self) -> Vec<Value> {
        lock(&self.state.bodies).clone()
    }

    /// Why requests were rejected with 400 (or found the script exhausted).
    pub fn violations(&self) -> Vec<String> {
        lock(&self.state.violations).clone()
    }

    /// Responses still unused.
    pub fn remaining(&self) -> usize {
        lock(&self.state.script).len()
    }
}

fn handle(api: Api, state: &State, req: &Request) -> Response {
    let path = match api {
        Api::OpenAi => "/v1/chat/completions".to_string(),
        Api::Anthropic => "/v1/messages".to_string(),
        Api::Responses => "/v1/responses".to_string(),
        Api::Azure => format!("/openai/deployments/{AZURE_DEPLOYMENT}/chat/completions"),
    };
    if req.path != path || req.method != "POST" {
        return error(
            api,
            404,
            "not_found_error",
            &format!("unknown endpoint {} {}", req.method, req.path),
        );
    }
    match api {
        _ if state.keyless => {}
        Api::OpenAi | Api::Responses => {
            let auth = req.header("authorization").unwrap_or("");
            if auth != format!("Bearer {KEY}") {
                // The worst case: a server that echoes the key it was given in full.
                let given = auth.strip_prefix("Bearer ").unwrap_or(auth);
                return error(
                    api,
                    401,
                    "invalid_api_key",
                    &format!("Incorrect API key provided: {given}."),
                );
            }
        }
        Api::Anthropic => {
            if req.header("x-api-key") != Some(KEY) {
                return error(api, 401, "authentication_error", "invalid x-api-key");
            }
        }
        Api::Azure => {
            if req.header("api-key") != Some(KEY) {
                return error(
                    api,
                    401,
                    "401",
                    "Access denied due to invalid subscription key or wrong API endpoint.",
                );
            }
            if req.query_param("api-version").is_none_or(str::is_empty) {
                return error(api, 404, "404", "Resource not found (missing api-version)");
            }
        }
    }
    let checked = if !req
        .header("content-type")
        .unwrap_or("")
        .contains("application/json")
    {
        Err("Content-Type must be application/json".to_string())
    } else {
        match (api, req.json()) {
            (_, None) => Err("the body is not JSON".to_string()),
            (Api::OpenAi | Api::Azure, Some(body)) => check_openai(&body).map(|()| body),
            (Api::Anthropic, Some(body)) => check_anthropic(req, &body).map(|()| body),
            (Api::Responses, Some(body)) => crate::responses::check(&body).map(|()| body),
        }
    };
    match checked {
        Ok(body) => {
            lock(&state.bodies).push(body);
            match lock(&state.script).pop_front() {
                Some(resp) => resp,
                None => {
                    lock(&state.violations)
                        .push("script exhausted: no canned response left".into());
                    error(api, 500, "api_error", "fake server: script exhausted")
                }
            }
        }
        Err(why) => {
            lock(&state.violations).push(why.clone());
            error(api, 400, "invalid_request_error", &why)
        }
    }
}

/// Errors in each provider's documented shape.
pub fn error(api: Api, status: u16, kind: &str, message: &str) -> Response {
    match api {
        Api::OpenAi | Api::Azure | Api::Responses => Response::json(
            status,
            json!({ "error": { "message": message, "type": kind, "param": null, "code": kind } }),
        ),
        Api::Anthropic => Response::json(
            status,
            json!({ "type": "error", "error": { "type": kind, "message": message } }),
        ),
    }
}

// ---------------------------------------------------------------------------------------
// Canned replies
// ---------------------------------------------------------------------------------------

/// Every canned reply reports this usage, so tests can check the sums.
pub const INPUT_TOKENS: u64 = 10;
pub const OUTPUT_TOKENS: u64 = 5;

/// A Chat Completions reply with this `message` and `finish_reason`.
pub fn openai_reply(message: Value, finish_reason: &str) -> Response {
    Response::json(
        200,
        json!({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 1_700_000_000, "model": "fake",
            "choices": [{ "index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason }],
            "usage": { "prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS, "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS },
        }),
    )
}

pub fn openai_answer(text: &str) -> Response {
    openai_reply(
        json!({ "role": "assistant", "content": text, "refusal": null }),
        "stop",
    )
}

/// Tool calls as `(id, name, arguments text)`; several make a parallel call.
pub fn openai_tool_calls(calls: &[(&str, &str, &str)]) -> Response {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({ "id": id, "type": "function", "function": { "name": name, "arguments": args } }))
        .collect();
    openai_reply(
        json!({ "role": "assistant", "content": null, "refusal": null, "tool_calls": calls }),
        "tool_calls",
    )
}

/// Server-sent events as servers frame them: a keep-alive comment first, CRLF line ends
/// (allowed, and the framing a parser most often gets wrong), each event ended by a blank line,
/// and the body sent a few bytes at a time so events and characters are split across reads.
pub fn sse(events: &[(Option<&str>, Value)], done: bool) -> Response {
    let mut body = String::from(": keep-alive\r\n\r\n");
    for (name, data) in events {
        if let Some(n) = name {
            body.push_str(&format!("event: {n}\r\n"));
        }
        body.push_str(&format!("data: {data}\r\n\r\n"));
    }
    if done {
        body.push_str("data: [DONE]\r\n\r\n");
    }
    Response::status(200)
        .header("Content-Type", "text/event-stream")
        .body(body.into_bytes())
        .chunked()
        .trickle(7, std::time::Duration::from_millis(1))
}

fn openai_chunk(delta: Value, finish: Value) -> (Option<&'static str>, Value) {
    (
        None,
        json!({ "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "fake",
                "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }] }),
    )
}

fn openai_usage_chunk() -> (Option<&'static str>, Value) {
    (
        None,
        json!({ "id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [],
                "usage": { "prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS, "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS } }),
    )
}

/// [`openai_answer`] streamed: the text in pieces of a few characters, then the usage chunk.
pub fn openai_stream_answer(text: &str) -> Response {
    openai_stream_answer_ending(text, "stop")
}

/// [`openai_stream_answer`] with this `finish_reason` (`length`: cut off at `max_tokens`).
pub fn openai_stream_answer_ending(text: &str, finish_reason: &str) -> Response {
    let mut events = vec![openai_chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(4) {
        events.push(openai_chunk(
            json!({"content": piece.iter().collect::<String>()}),
            Value::Null,
        ));
    }
    events.push(openai_chunk(json!({}), json!(finish_reason)));
    events.push(openai_usage_chunk());
    sse(&events, true)
}

/// [`openai_tool_calls`] streamed as OpenAI does: id and name in a call's first chunk, then
/// the arguments a few characters at a time, calls told apart by `index`.
pub fn openai_stream_tool_calls(calls: &[(&str, &str, &str)]) -> Response {
    let mut events = vec![openai_chunk(
        json!({"role": "assistant", "content": null}),
        Value::Null,
    )];
    for (i, (id, name, args)) in calls.iter().enumerate() {
        events.push(openai_chunk(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        let chars: Vec<char> = args.chars().collect();
        for piece in chars.chunks(5) {
            events.push(openai_chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": piece.iter().collect::<String>()}}]}),
                Value::Null,
            ));
        }
    }
    events.push(openai_chunk(json!({}), json!("tool_calls")));
    events.push(openai_usage_chunk());
    sse(&events, true)
}

fn anthropic_start() -> Vec<(Option<&'static str>, Value)> {
    vec![(
        Some("message_start"),
        json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
               "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1}}}),
    )]
}

fn anthropic_end(events: &mut Vec<(Option<&'static str>, Value)>, stop: &str) {
    events.push((
        Some("message_delta"),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": OUTPUT_TOKENS}}),
    ));
    events.push((Some("message_stop"), json!({"type": "message_stop"})));
}

/// [`anthropic_answer`] streamed: text deltas of a few characters, a ping among them.
pub fn anthropic_stream_answer(text: &str) -> Response {
    anthropic_stream_answer_ending(text, "end_turn")
}

/// [`anthropic_stream_answer`] with this `stop_reason` (`max_tokens`: cut off).
pub fn anthropic_stream_answer_ending(text: &str, stop_reason: &str) -> Response {
    let mut events = anthropic_start();
    events.push((
        Some("content_block_start"),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ));
    events.push((Some("ping"), json!({"type": "ping"})));
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(4) {
        events.push((
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece.iter().collect::<String>()}}),
        ));
    }
    events.push((
        Some("content_block_stop"),
        json!({"type": "content_block_stop", "index": 0}),
    ));
    anthropic_end(&mut events, stop_reason);
    sse(&events, false)
}

/// [`anthropic_tool_use`] streamed: each input as `input_json_delta` fragments.
pub fn anthropic_stream_tool_use(calls: &[(&str, &str, Value)]) -> Response {
    let mut events = anthropic_start();
    for (i, (id, name, input)) in calls.iter().enumerate() {
        events.push((
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        let text = input.to_string();
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(5) {
            events.push((
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": piece.iter().collect::<String>()}}),
            ));
        }
        events.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": i}),
        ));
    }
    anthropic_end(&mut events, "tool_use");
    sse(&events, false)
}

/// A Messages reply with these content blocks and `stop_reason`.
pub fn anthropic_reply(content: Value, stop_reason: &str) -> Response {
    Response::json(
        200,
        json!({
            "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
            "content": content, "stop_reason": stop_reason, "stop_sequence": null,
            "usage": { "input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS },
        }),
    )
}

pub fn anthropic_answer(text: &str) -> Response {
    anthropic_reply(json!([{ "type": "text", "text": text }]), "end_turn")
}

/// `tool_use` blocks as `(id, name, input)`, after an optional text block.
pub fn anthropic_tool_use(text: Option<&str>, calls: &[(&str, &str, Value)]) -> Response {
    let mut blocks: Vec<Value> = text
        .map(|t| json!({ "type": "text", "text": t }))
        .into_iter()
        .collect();
    blocks.extend(calls.iter().map(
        |(id, name, input)| json!({ "type": "tool_use", "id": id, "name": name, "input": input }),
    ));
    anthropic_reply(Value::Array(blocks), "tool_use")
}

// ---------------------------------------------------------------------------------------
// Request validation
// ---------------------------------------------------------------------------------------

pub(crate) type Check = Result<(), String>;

pub(crate) fn fail<T>(msg: impl Into<String>) -> Result<T, String> {
    Err(msg.into())
}

pub(crate) fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub(crate) fn check_keys(
    obj: &serde_json::Map<String, Value>,
    allowed: &[&str],
    what: &str,
) -> Check {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => fail(format!("{what}: unrecognized argument `{k}`")),
        None => Ok(()),
    }
}

pub(crate) fn check_number(body: &Value, key: &str, min: f64, max: f64) -> Check {
    match body.get(key) {
        None => Ok(()),
        Some(v) => match v.as_f64() {
            Some(n) if (min..=max).contains(&n) => Ok(()),
            _ => fail(format!(
                "`{key}` must be a number between {min} and {max}, got {v}"
            )),
        },
    }
}

pub(crate) fn check_positive_int(body: &Value, key: &str, required: bool) -> Check {
    match body.get(key) {
        None if required => fail(format!("{key}: Field required")),
        None => Ok(()),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => Ok(()),
            _ => fail(format!("`{key}` must be a positive integer, got {v}")),
        },
    }
}

/// Chat Completions, per the API reference (plus the stricter compatible-server rules).
pub fn check_openai(body: &Value) -> Check {
    let Some(obj) = body.as_object() else {
        return fail("the body must be a JSON object");
    };
    check_keys(
        obj,
        &[
            "model",
            "messages",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "temperature",
            "top_p",
            "max_tokens",
            "max_completion_tokens",
            "stop",
            "seed",
            "n",
            "stream",
            "stream_options",
            "response_format",
            "user",
        ],
        "request",
    )?;
    if body
        .get("model")
        .and_then(Value::as_str)
        .is_none_or(|m| m.is_empty())
    {
        return fail("you must provide a model parameter");
    }
    check_number(body, "temperature", 0.0, 2.0)?;
    check_positive_int(body, "max_tokens", false)?;
    if body.get("stream").is_some_and(|s| !s.is_boolean()) {
        return fail("stream: Input should be a valid boolean");
    }
    if body.get("stream_options").is_some() && body.get("stream") != Some(&json!(true)) {
        return fail("The 'stream_options' parameter is only allowed when 'stream' is enabled.");
    }
    if let Some(tools) = body.get("tools") {
        let tools = tools.as_array().ok_or("`tools` must be an array")?;
        if tools.is_empty() {
            return fail("[] is too short - 'tools'");
        }
        for (i, t) in tools.iter().enumerate() {
            if t.get("type").and_then(Value::as_str) != Some("function") {
                return fail(format!("tools[{i}].type must be 'function'"));
            }
            let f = t
                .get("function")
                .ok_or(format!("tools[{i}].function is required"))?;
            if !f
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(valid_tool_name)
            {
                return fail(format!(
                    "tools[{i}].function.name must match ^[a-zA-Z0-9_-]{{1,64}}$"
                ));
            }
            if f.get("parameters").is_some_and(|p| !p.is_object()) {
                return fail(format!("tools[{i}].function.parameters must be an object"));
            }
        }
    }
    check_openai_tool_choice(body)?;
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("messages: Field required (an array)")?;
    if messages.is_empty() {
        return fail("[] is too short - 'messages'");
    }
    // Tool call ids of the latest assistant message that still await a tool message.
    let mut pending: Vec<String> = Vec::new();
    let unanswered = |pending: &[String]| {
        format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            pending.join(", ")
        )
    };
    for (i, m) in messages.iter().enumerate() {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or(format!("messages[{i}].role is required"))?;
        if role != "tool" && !pending.is_empty() {
            return fail(unanswered(&pending));
        }
        let content = m.get("content");
        let content_ok =
            |c: Option<&Value>| matches!(c, Some(Value::String(_)) | Some(Value::Array(_)));
        match role {
            "system" | "developer" | "user" => {
                if !content_ok(content) {
                    return fail(format!(
                        "messages[{i}].content is required (a string or an array of parts)"
                    ));
                }
            }
            "assistant" => {
                let calls = m.get("tool_calls").filter(|c| !c.is_null());
                match calls {
                    None => {
                        if !content_ok(content) {
                            return fail(format!("messages[{i}]: an assistant message needs `content` unless it has `tool_calls`"));
                        }
                    }
                    Some(calls) => {
                        if !content_ok(content) {
                            return fail(format!("messages[{i}]: `content` must be a string beside `tool_calls` (compatible servers reject null or missing content)"));
                        }
                        let calls = calls.as_array().filter(|c| !c.is_empty()).ok_or(format!(
                            "messages[{i}].tool_calls must be a non-empty array"
                        ))?;
                        for (j, c) in calls.iter().enumerate() {
                            let at = format!("messages[{i}].tool_calls[{j}]");
                            let id = c
                                .get("id")
                                .and_then(Value::as_str)
                                .filter(|s| !s.is_empty())
                                .ok_or(format!("{at}.id is required"))?;
                            if c.get("type").and_then(Value::as_str) != Some("function") {
                                return fail(format!("{at}.type: Input should be 'function'"));
                            }
                            let f = c
                                .get("function")
                                .ok_or(format!("{at}.function is required"))?;
                            if f.get("name")
                                .and_then(Value::as_str)
                                .is_none_or(|n| n.is_empty())
                            {
                                return fail(format!("{at}.function.name is required"));
                            }
                            if !f.get("arguments").is_some_and(Value::is_string) {
                                return fail(format!("{at}.function.arguments must be a string"));
                            }
                            if pending.iter().any(|p| p == id) {
                                return fail(format!("{at}: duplicate tool call id {id}"));
                            }
                            pending.push(id.to_string());
                        }
                    }
                }
            }
            "tool" => {
                let id = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or(format!("messages[{i}].tool_call_id: Field required"))?;
                if !content_ok(content) {
                    return fail(format!("messages[{i}].content is required"));
                }
                match pending.iter().position(|p| p == id) {
                    Some(k) => {
                        pending.remove(k);
                    }
                    None => {
                        return fail(format!(
                            "Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (messages[{i}].tool_call_id {id})"
                        ))
                    }
                }
            }
            other => return fail(format!("messages[{i}].role: invalid role '{other}'")),
        }
    }
    if !pending.is_empty() {
        return fail(unanswered(&pending));
    }
    Ok(())
}

/// `tool_choice` and `parallel_tool_calls`: OpenAI rejects both without `tools`, and a forced
/// function must be one of the tools.
fn check_openai_tool_choice(body: &Value) -> Check {
    let names = tool_names(body, |t| t.get("function").and_then(|f| f.get("name")));
    if body.get("parallel_tool_calls").is_some() {
        if names.is_none() {
            return fail("Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified.");
        }
        if !body["parallel_tool_calls"].is_boolean() {
            return fail("parallel_tool_calls: Input should be a valid boolean");
        }
    }
    let Some(choice) = body.get("tool_choice") else {
        return Ok(());
    };
    let Some(names) = names else {
        return fail("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.");
    };
    match choice {
        Value::String(s) if ["auto", "required", "none"].contains(&s.as_str()) => Ok(()),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            match o
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
            {
                Some(n) if names.iter().any(|t| t == n) => Ok(()),
                Some(n) => fail(format!(
                    "Invalid value for 'tool_choice': function '{n}' is not one of the tools"
                )),
                None => fail("tool_choice.function.name: Field required"),
            }
        }
        other => fail(format!("Invalid value for 'tool_choice': {other}")),
    }
}

/// Anthropic's `tool_choice`: `{type: auto|any|tool|none}`, a name only with `tool`,
/// `disable_parallel_tool_use` (a boolean) with all but `none`, and never without tools.
fn check_anthropic_tool_choice(body: &Value) -> Check {
    let Some(choice) = body.get("tool_choice") else {
        return Ok(());
    };
    let Some(names) = tool_names(body, |t| t.get("name")) else {
        return fail("tool_choice: may only be specified while providing tools");
    };
    let obj = choice
        .as_object()
        .ok_or("tool_choice: Input should be an object")?;
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
    let allowed: &[&str] = match kind {
        "auto" | "any" => &["type", "disable_parallel_tool_use"],
        "tool" => &["type", "name", "disable_parallel_tool_use"],
        "none" => &["type"],
        other => return fail(format!("tool_choice.type: Input tag '{other}' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'")),
    };
    check_keys(obj, allowed, &format!("tool_choice.{kind}"))?;
    if obj
        .get("disable_parallel_tool_use")
        .is_some_and(|d| !d.is_boolean())
    {
        return fail("tool_choice.disable_parallel_tool_use: Input should be a valid boolean");
    }
    if kind == "tool" {
        match obj.get("name").and_then(Value::as_str) {
            Some(n) if names.iter().any(|t| t == n) => {}
            Some(n) => return fail(format!("tool_choice.name: Tool '{n}' not found in tools")),
            None => return fail("tool_choice.tool.name: Field required"),
        }
    }
    Ok(())
}

/// The names of the request's tools; `None` without tools.
fn tool_names(body: &Value, name: impl Fn(&Value) -> Option<&Value>) -> Option<Vec<String>> {
    let tools = body.get("tools")?.as_array()?;
    Some(
        tools
            .iter()
            .filter_map(|t| name(t).and_then(Value::as_str).map(str::to_string))
            .collect(),
    )
}

/// Messages, per the API reference.
pub fn check_anthropic(req: &Request, body: &Value) -> Check {
    if req.header("anthropic-version").is_none() {
        return fail("anthropic-version: header is required");
    }
    check_anthropic_body(body)
}

/// The body rules of [`check_anthropic`], for checking a request built without sending it.
pub fn check_anthropic_body(body: &Value) -> Check {
    let Some(obj) = body.as_object() else {
        return fail("the body must be a JSON object");
    };
    check_keys(
        obj,
        &[
            "model",
            "messages",
            "max_tokens",
            "system",
            "tools",
            "tool_choice",
            "temperature",
            "top_p",
            "top_k",
            "stop_sequences",
            "metadata",
            "stream",
            "thinking",
        ],
        "request",
    )?;
    if body
        .get("model")
        .and_then(Value::as_str)
        .is_none_or(|m| m.is_empty())
    {
        return fail("model: Field required");
    }
    check_positive_int(body, "max_tokens", true)?;
    check_number(body, "temperature", 0.0, 1.0)?;
    check_anthropic_tool_choice(body)?;
    match body.get("system") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(blocks))
            if blocks
                .iter()
                .all(|b| b.get("type").and_then(Value::as_str) == Some("text")) => {}
        Some(_) => return fail("system: must be a string or an array of text blocks"),
    }
    if let Some(tools) = body.get("tools") {
        for (i, t) in tools
            .as_array()
            .ok_or("tools: must be an array")?
            .iter()
            .enumerate()
        {
            if let Some(o) = t.as_object() {
                check_keys(
                    o,
                    &[
                        "name",
                        "description",
                        "input_schema",
                        "cache_control",
                        "type",
                    ],
                    &format!("tools.{i}"),
                )?;
            }
            if !t
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(valid_tool_name)
            {
                return fail(format!(
                    "tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
                ));
            }
            if t.get("input_schema")
                .and_then(|s| s.get("type"))
                .and_then(Value::as_str)
                != Some("object")
            {
                return fail(format!(
                    "tools.{i}.input_schema.type: Input should be 'object'"
                ));
            }
        }
    }
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("messages: Field required")?;
    if messages.is_empty() {
        return fail("messages: at least one message is required");
    }
    let mut prev_role = "";
    // tool_use ids of the previous (assistant) message, which the next message must answer.
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        match role {
            "user" | "assistant" => {}
            "system" => return fail(format!("messages.{i}.role: Unexpected role \"system\". Use the top-level `system` parameter")),
            other => return fail(format!("messages.{i}.role: Input should be 'user' or 'assistant', got '{other}'")),
        }
        if i == 0 && role != "user" {
            return fail("messages: the first message must use the \"user\" role");
        }
        if role == prev_role {
            return fail(format!("messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"{role}\" roles in a row (messages.{i})"));
        }
        prev_role = role;
        let blocks: Vec<Value> = match m.get("content") {
            Some(Value::String(s)) if !s.is_empty() => vec![json!({ "type": "text", "text": s })],
            Some(Value::Array(b)) if !b.is_empty() => b.clone(),
            _ => {
                return fail(format!(
                    "messages.{i}: all messages must have non-empty content"
                ))
            }
        };
        let mut answered: Vec<String> = Vec::new();
        let mut seen_other = false;
        let mut uses: Vec<String> = Vec::new();
        for (j, b) in blocks.iter().enumerate() {
            let at = format!("messages.{i}.content.{j}");
            match (b.get("type").and_then(Value::as_str), role) {
                (Some("text"), _) => {
                    if b.get("text")
                        .and_then(Value::as_str)
                        .is_none_or(|t| t.is_empty())
                    {
                        return fail(format!("{at}: text content blocks must be non-empty"));
                    }
                    seen_other = true;
                }
                (Some("tool_use"), "assistant") => {
                    let id = b.get("id").and_then(Value::as_str).unwrap_or("");
                    if id.is_empty()
                        || !id
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                    {
                        return fail(format!(
                            "{at}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                        ));
                    }
                    if b.get("name")
                        .and_then(Value::as_str)
                        .is_none_or(|n| n.is_empty())
                    {
                        return fail(format!("{at}.name: Field required"));
                    }
                    if !b.get("input").is_some_and(Value::is_object) {
                        return fail(format!("{at}.input: Input should be a valid dictionary"));
                    }
                    uses.push(id.to_string());
                }
                (Some("tool_result"), "user") => {
                    let id = b
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .ok_or(format!("{at}.tool_use_id: Field required"))?;
                    if seen_other {
                        return fail(format!("{at}: tool_result blocks must come first in the user message, before any other content"));
                    }
                    match b.get("content") {
                        None | Some(Value::String(_)) | Some(Value::Array(_)) => {}
                        Some(_) => {
                            return fail(format!(
                                "{at}.content: must be a string or an array of content blocks"
                            ))
                        }
                    }
                    if b.get("is_error").is_some_and(|e| !e.is_boolean()) {
                        return fail(format!("{at}.is_error: Input should be a valid boolean"));
                    }
                    if !open.contains(&id.to_string()) {
                        return fail(format!(
                            "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        ));
                    }
                    answered.push(id.to_string());
                }
                (Some(t), r) => {
                    return fail(format!(
                        "{at}.type: `{t}` blocks are not allowed in a {r} message"
                    ))
                }
                (None, _) => return fail(format!("{at}.type: Field required")),
            }
        }
        let missing: Vec<&String> = open.iter().filter(|id| !answered.contains(id)).collect();
        if !missing.is_empty() {
            return fail(format!(
                "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        open = uses;
    }
    if !open.is_empty() {
        return fail(format!(
            "`tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
            open.join(", ")
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Specs
// ---------------------------------------------------------------------------------------

/// Checks a run against `fake` ended as a text answer cut off at `max_tokens` does: exit 3,
/// `needs_review`, stop reason `max_tokens`, the partial text `answer` kept, the provider's
/// field (`why`) named with the fix, one request, no retry.
pub fn assert_cut_off_answer(out: &crate::Output, fake: &Fake, answer: &str, why: &str) {
    out.assert_code(3);
    let trace = out.json();
    assert_eq!(
        (&trace["status"], &trace["stop_reason"]),
        (&json!("needs_review"), &json!("max_tokens")),
        "{out:?}"
    );
    assert_eq!(trace["final_output"], answer);
    let error = trace["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(why) && error.contains("raise the model's `max_tokens`"),
        "{error}"
    );
    assert_eq!(trace["tool_errors"], json!([]), "not a malformed decision");
    assert!(trace["usage"]["output_tokens"].as_u64() > Some(0));
    assert_eq!(fake.requests().len(), 1, "not asked again");
}

/// The `kind` of each of a trace's tool errors, in order.
pub fn error_kinds(trace: &Value) -> Vec<String> {
    trace["tool_errors"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A stock-assistant spec whose only model is `live`, a `kind` (openai | anthropic) model at
/// `base_url` reading its key from `TEST_KEY`. `extra` is appended at the top level (e.g. a
/// `limits:` block); `model_extra` lines go inside the model (e.g. `    timeout: 1s`).
pub fn live_spec(kind: &str, base_url: &str, model_extra: &str, extra: &str) -> String {
    format!(
        r#"version: 1
name: live_{kind}
description: Answers stock questions against a fake {kind} server.
system: You answer stock questions. Use the tools; never guess a price.
tools:
  get_stock_price:
    description: Returns the simulated current price for a ticker symbol.
    kind: mock
    input:
      type: object
      properties:
        ticker: {{ type: string, description: "Ticker symbol, e.g. AAPL" }}
      required: [ticker]
      additionalProperties: false
    responses:
      - when: {{ ticker: AAPL }}
        result: 178.15
      - when: {{ ticker: MSFT }}
        result: 411.2
      - error: "unknown ticker {{{{ args.ticker }}}}"
  calculate_expression:
    description: Evaluates an arithmetic expression safely.
    kind: builtin
    builtin: calculator
models:
  live:
    kind: {kind}
    model: test-model
    base_url: {base_url}
    api_key_env: TEST_KEY
    retries: 2
{model_extra}
{extra}
"#
    )
}
