//! What both live providers share: one HTTP exchange with retries and events, the tools a
//! policy lets the model see, liberal parsing of tool-call arguments, and error messages that
//! carry the provider's own words but never the API key.

use super::gate;
use super::stream::{self, Assembler};
use super::{Message, ModelError};
use crate::events::Events;
use crate::net::{retry, HttpRequest, HttpResponse, NetError, Purpose, SendOptions, Transport};
use crate::registry::{LiveModel, ToolChoice};
use serde_json::{json, Value};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Model replies are small; anything this large is a misbehaving server, not a reply.
pub(crate) const MAX_RESPONSE_BYTES: u64 = 16 << 20;
/// A server asking for a longer pause than this is not waited for: the run fails now with
/// the server's message rather than hanging silently for minutes.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(60);

/// One provider's view of an exchange, so the retry loop can name it in events and errors.
pub(crate) struct Endpoint<'a> {
    pub(crate) model_name: &'a str,
    pub(crate) provider: &'static str,
    pub(crate) settings: &'a LiveModel,
    pub(crate) api_key: Option<&'a str>,
    pub(crate) url: String,
    /// Provider headers (auth, versions); the model's own `headers:` override them by name.
    pub(crate) headers: Vec<(String, String)>,
}

/// `base_url` + `path`, with the model's `query:` parameters (Azure's `api-version`).
pub(crate) fn url(settings: &LiveModel, path: &str) -> String {
    let mut url = format!("{}{path}", settings.base_url);
    if settings.query.is_empty() {
        return url;
    }
    let query = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&settings.query)
        .finish();
    url.push(if url.contains('?') { '&' } else { '?' });
    url.push_str(&query);
    url
}

/// The header carrying the key: the provider's own (`default`), or the key verbatim in the
/// model's `api_key_header:` (Azure's `api-key`). No key, no header.
pub(crate) fn key_header(
    settings: &LiveModel,
    key: Option<&str>,
    default: impl FnOnce(&str) -> (String, String),
) -> Option<(String, String)> {
    let key = key?;
    Some(match &settings.api_key_header {
        Some(name) => (name.clone(), key.to_string()),
        None => default(key),
    })
}

/// The tools and how the model may use them, in a request of either OpenAI API (chat or
/// Responses; `tool_choice` gives the API's shape). OpenAI rejects `tools: []`, and
/// `tool_choice` or `parallel_tool_calls` without tools: without tools all three are left out.
pub(crate) fn insert_tools(
    body: &mut serde_json::Map<String, Value>,
    tools: Vec<Value>,
    settings: &LiveModel,
    messages: &[Message],
    tool_choice: fn(&ToolChoice) -> Value,
) {
    if tools.is_empty() {
        return;
    }
    body.insert("tools".into(), Value::Array(tools));
    body.insert(
        "tool_choice".into(),
        tool_choice(effective_tool_choice(settings, messages)),
    );
    if let Some(p) = settings.parallel_tool_calls {
        body.insert("parallel_tool_calls".into(), json!(p));
    }
}

/// `required` and `{ tool: NAME }` hold until the model has called a tool; after that the
/// choice is `auto`, or a forced call would repeat until a limit stops the run (the OpenAI
/// Agents SDK resets it the same way).
pub(crate) fn effective_tool_choice<'a>(
    settings: &'a LiveModel,
    messages: &[Message],
) -> &'a ToolChoice {
    let called = messages
        .iter()
        .any(|m| matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()));
    match &settings.tool_choice {
        ToolChoice::Required | ToolChoice::Tool(_) if called => &ToolChoice::Auto,
        choice => choice,
    }
}

/// The model's `extra_body:` over the request. `check` refuses keys toolrun writes, so
/// nothing built here is replaced.
pub(crate) fn merge_extra_body(body: &mut serde_json::Map<String, Value>, settings: &LiveModel) {
    for (k, v) in &settings.extra_body {
        body.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

/// How the reply comes: one JSON document, or server-sent events folded back into one.
#[derive(Clone, Copy)]
pub(crate) enum ReplyForm {
    Json,
    Stream(fn() -> Box<dyn Assembler>),
}

/// Posts `body` and returns the JSON of a 2xx reply (a stream folded into the reply the
/// non-streaming API would have sent). Retries 429, 5xx and failed connections
/// (`settings.retries` times) with the shared backoff, honouring `Retry-After`; a timeout is
/// not retried, since the per-request `timeout` is the user's budget for it. Every request
/// that may reach the server passes the model's [`gate`] first, and a 429 closes it for every
/// worker of the process.
pub(crate) async fn post_json(
    ep: &Endpoint<'_>,
    body: &Value,
    form: ReplyForm,
    transport: &Transport,
    events: &Events,
) -> Result<Value, ModelError> {
    let req = http_request(ep, body, form)?;
    let attempts = ep.settings.retries.saturating_add(1);
    let deltas = Deltas::new(ep.model_name, events);
    // A replay has no server to protect: only requests that may reach one pass the gate.
    let gate = transport
        .may_go_live()
        .then(|| gate::for_model(ep.settings));
    let mut attempt = 0;
    loop {
        attempt += 1;
        let pass = match &gate {
            Some(g) => Some(g.enter().await),
            None => None,
        };
        events.emit(
            "model_http_request",
            json!({ "model": ep.model_name, "provider": ep.provider, "url": ep.url, "attempt": attempt, "body": body }),
        );
        let started = Instant::now();
        let live = match form {
            ReplyForm::Stream(make) => Some(Mutex::new(stream::Reader::new(make()))),
            ReplyForm::Json => None,
        };
        let on_chunk = |bytes: &[u8]| {
            if let Some(Ok(mut r)) = live.as_ref().map(Mutex::lock) {
                r.feed(bytes, &mut |t| deltas.push(t));
            }
            true
        };
        let opts = SendOptions {
            timeout: ep.settings.timeout,
            max_bytes: MAX_RESPONSE_BYTES,
            progress: None,
            on_chunk: live
                .as_ref()
                .map(|_| &on_chunk as &(dyn Fn(&[u8]) -> bool + Sync)),
            reshape: None,
        };
        let result = transport
            .send(Purpose::Model(ep.model_name), &req, opts)
            .await;
        let streamed_live = live
            .and_then(|m| m.into_inner().ok())
            .is_some_and(|r| r.fed > 0);
        let closed = gate
            .as_ref()
            .is_some_and(|g| close_on_429(g, &result, attempt, ep.model_name));
        drop(pass);
        match outcome(ep, events, attempt, attempt >= attempts, started, result) {
            // The closed gate holds this worker too, for the same wait.
            Next::Retry(_) if closed => {}
            Next::Retry(wait) => transport.pause(wait).await,
            Next::Fail(e) => return Err(e),
            Next::Reply(resp) => {
                let reply = read_reply(ep, &resp, form, streamed_live, &deltas);
                deltas.flush();
                return reply;
            }
        }
    }
}

/// A 429 asks the client, not one connection, to slow down: every worker of this model waits
/// the server's `Retry-After` (or the backoff), unless that is longer than we would wait.
/// Returns whether the gate was closed.
fn close_on_429(
    gate: &gate::Gate,
    result: &Result<HttpResponse, NetError>,
    attempt: u32,
    model_name: &str,
) -> bool {
    let Ok(resp) = result else {
        return false;
    };
    if resp.status != 429 {
        return false;
    }
    match retry_delay(Some(resp), attempt, model_name.as_bytes()) {
        Some(wait) => {
            gate.close_for(wait);
            true
        }
        None => false,
    }
}

/// The request: JSON in, the reply form's media type accepted, provider headers (auth,
/// versions) overridden by the model's own `headers:` by name.
fn http_request(
    ep: &Endpoint<'_>,
    body: &Value,
    form: ReplyForm,
) -> Result<HttpRequest, ModelError> {
    let accept = match form {
        ReplyForm::Json => "application/json",
        ReplyForm::Stream(_) => "text/event-stream",
    };
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("accept".to_string(), accept.to_string()),
    ];
    for (k, v) in ep.headers.iter().chain(&ep.settings.headers) {
        headers.retain(|(h, _)| !h.eq_ignore_ascii_case(k));
        headers.push((k.clone(), v.clone()));
    }
    let bytes = serde_json::to_vec(body)
        .map_err(|e| ModelError::new(format!("cannot encode the request: {e}")))?;
    Ok(HttpRequest {
        method: "POST".into(),
        url: ep.url.clone(),
        headers,
        body: Some(bytes),
    })
}

enum Next {
    Retry(Duration),
    Fail(ModelError),
    Reply(HttpResponse),
}

/// What one attempt's result means: a 2xx reply, a wait before the next attempt, or the
/// error that ends the call. Reports the attempt as `model_http_response`.
fn outcome(
    ep: &Endpoint<'_>,
    events: &Events,
    attempt: u32,
    last: bool,
    started: Instant,
    result: Result<HttpResponse, NetError>,
) -> Next {
    let seed = ep.model_name.as_bytes();
    let resp = match result {
        Ok(resp) => resp,
        Err(NetError::Connect(m)) if !last => {
            emit_failure(
                ep,
                events,
                attempt,
                &format!("connection failed: {m}"),
                started,
            );
            return Next::Retry(retry::MODELS.delay(attempt, seed));
        }
        Err(e) => {
            emit_failure(ep, events, attempt, &e.to_string(), started);
            let what = match e {
                NetError::Timeout => format!("no reply within {}", humantime(ep.settings.timeout)),
                other => other.to_string(),
            };
            return Next::Fail(error(
                ep,
                format!("{what} ({})", tries(attempt)),
                None,
                None,
            ));
        }
    };
    let text = String::from_utf8_lossy(&resp.body).into_owned();
    let parsed: Option<Value> = serde_json::from_str(&text).ok();
    events.emit(
        "model_http_response",
        json!({
            "model": ep.model_name,
            "status": resp.status,
            "attempt": attempt,
            "duration_ms": started.elapsed().as_secs_f64() * 1000.0,
            "body": parsed.clone().unwrap_or_else(|| Value::String(text.clone())),
        }),
    );
    if (200..300).contains(&resp.status) {
        return Next::Reply(resp);
    }
    let retryable = resp.status == 429 || (500..600).contains(&resp.status);
    let detail = provider_message(parsed.as_ref(), &text);
    if retryable && !last {
        return match retry_delay(Some(&resp), attempt, seed) {
            Some(wait) => Next::Retry(wait),
            None => {
                let msg = format!(
                    "HTTP {}: {detail} (the server asks to retry after more than {}s)",
                    resp.status,
                    RETRY_AFTER_MAX.as_secs()
                );
                Next::Fail(error(ep, msg, Some(resp.status), Some(text)))
            }
        };
    }
    let suffix = if retryable {
        format!(" ({})", tries(attempt))
    } else {
        String::new()
    };
    Next::Fail(error(
        ep,
        format!("HTTP {}: {detail}{suffix}", resp.status),
        Some(resp.status),
        Some(text),
    ))
}

/// A 2xx body as the reply JSON. A stream is folded again from the whole (masked) body, so the
/// reply is the same live and in a replay; its text goes out as deltas here only when it did
/// not while arriving (a replay, a compressed stream). A server that ignored `stream` and sent
/// JSON is read as JSON.
fn read_reply(
    ep: &Endpoint<'_>,
    resp: &HttpResponse,
    form: ReplyForm,
    streamed_live: bool,
    deltas: &Deltas<'_>,
) -> Result<Value, ModelError> {
    if resp.truncated {
        return Err(error(
            ep,
            format!("the reply is larger than {} MiB", MAX_RESPONSE_BYTES >> 20),
            Some(resp.status),
            None,
        ));
    }
    let text = String::from_utf8_lossy(&resp.body);
    let json = serde_json::from_str::<Value>(&text).ok();
    match (form, json) {
        (_, Some(v)) => Ok(v),
        (ReplyForm::Stream(make), None) => {
            let mut reader = stream::Reader::new(make());
            let mut text_out = |t: &str| {
                if !streamed_live {
                    deltas.push(t);
                }
            };
            reader.feed(&resp.body, &mut text_out);
            Ok(reader.finish(&mut text_out))
        }
        (ReplyForm::Json, None) => Err(error(
            ep,
            format!("the reply is not JSON: {}", snippet(&text)),
            Some(resp.status),
            Some(text.into_owned()),
        )),
    }
}

/// Answer text as it streams in, as `model_text_delta` events. Text is held back to the last
/// whitespace: a secret split across two chunks is then masked whole (secrets hold no spaces).
struct Deltas<'a> {
    model: &'a str,
    events: &'a Events,
    pending: Mutex<String>,
}

impl<'a> Deltas<'a> {
    fn new(model: &'a str, events: &'a Events) -> Deltas<'a> {
        Deltas {
            model,
            events,
            pending: Mutex::new(String::new()),
        }
    }

    fn push(&self, text: &str) {
        if !self.events.is_active() {
            return;
        }
        let Ok(mut pending) = self.pending.lock() else {
            return;
        };
        pending.push_str(text);
        if let Some(cut) = pending.rfind(char::is_whitespace) {
            let cut = cut + pending[cut..].chars().next().map_or(1, char::len_utf8);
            let ready: String = pending.drain(..cut).collect();
            self.emit(ready);
        }
    }

    fn flush(&self) {
        let rest = self
            .pending
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default();
        if !rest.is_empty() {
            self.emit(rest);
        }
    }

    fn emit(&self, text: String) {
        self.events.emit(
            "model_text_delta",
            json!({ "model": self.model, "text": text }),
        );
    }
}

fn emit_failure(ep: &Endpoint<'_>, events: &Events, attempt: u32, message: &str, started: Instant) {
    events.emit(
        "model_http_response",
        json!({
            "model": ep.model_name,
            "attempt": attempt,
            "duration_ms": started.elapsed().as_secs_f64() * 1000.0,
            "error": message,
        }),
    );
}

fn tries(attempt: u32) -> String {
    if attempt == 1 {
        "1 attempt".into()
    } else {
        format!("{attempt} attempts")
    }
}

fn humantime(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// How long to wait before the next attempt: the server's `retry-after-ms` / `Retry-After`
/// (seconds or a date) when given, else the shared backoff. `None`: the server asks for more
/// than we are willing to wait.
pub(crate) fn retry_delay(
    resp: Option<&HttpResponse>,
    attempt: u32,
    seed: &[u8],
) -> Option<Duration> {
    let wait = retry::MODELS.next(resp, attempt, seed);
    (wait <= RETRY_AFTER_MAX).then_some(wait)
}

/// The provider's own explanation: `error.message` (OpenAI, Anthropic), else the shapes other
/// compatible servers use (`error` as a string, `message`, FastAPI's `detail`), else the text.
pub(crate) fn provider_message(parsed: Option<&Value>, text: &str) -> String {
    let from_json = parsed.and_then(|v| {
        let err = v.get("error");
        err.and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .or_else(|| err.and_then(Value::as_str))
            .or_else(|| v.get("message").and_then(Value::as_str))
            .or_else(|| v.get("detail").and_then(Value::as_str))
            .map(str::to_string)
            .or_else(|| {
                v.get("detail")
                    .filter(|d| !d.is_null())
                    .map(Value::to_string)
            })
    });
    match from_json {
        Some(m) if !m.trim().is_empty() => m,
        _ if text.trim().is_empty() => "(empty body)".into(),
        _ => snippet(text),
    }
}

pub(crate) fn snippet(text: &str) -> String {
    const MAX: usize = 300;
    let t = text.trim();
    match t.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
}

/// A reply the provider stopped at the token limit (`why` names its field). Text alone is an
/// answer that ends early; a reply with tool calls is malformed, as their arguments may be
/// truncated JSON (`with_calls` is what the trace keeps of it).
pub(crate) fn cut_off(text: String, with_calls: &[&Value], why: &str) -> super::Decision {
    let limit =
        format!("cut off at the model's token limit ({why}); raise the model's `max_tokens`");
    if with_calls.is_empty() {
        super::Decision::CutOff {
            text,
            reason: format!("the answer was {limit}"),
        }
    } else {
        super::Decision::Malformed {
            raw: Value::Array(with_calls.iter().map(|v| (*v).clone()).collect()).to_string(),
            reason: format!("the tool calls were {limit}"),
        }
    }
}

/// Errors name the model and provider, and never carry the key, even when a server echoes it:
/// masked with the masker every output goes through, so an echo that is JSON-escaped (`\/`,
/// `\u0026`, as Go's and PHP's encoders write) or percent-encoded is masked too, not only the
/// key as written (issue 36 §1).
fn error(
    ep: &Endpoint<'_>,
    message: String,
    status: Option<u16>,
    raw: Option<String>,
) -> ModelError {
    let redactor = match ep.api_key {
        Some(k) if !k.is_empty() => {
            crate::redact::Redactor::named([("api_key".to_string(), k.to_string())])
        }
        _ => crate::redact::Redactor::default(),
    };
    let mask = |s: String| redactor.str(&s);
    ModelError {
        message: mask(format!(
            "model `{}` ({}): {message}",
            ep.model_name, ep.provider
        )),
        status,
        raw: raw.map(mask),
    }
}

/// Tool-call arguments as models send them: a JSON object, a string holding one, or an empty
/// string / null for a call without arguments (several servers do this). Anything else is
/// `Err(raw text)`, which the engine reports as `invalid_arguments`.
pub(crate) fn parse_arguments(value: Option<&Value>) -> Result<Value, String> {
    match value {
        None | Some(Value::Null) => Ok(json!({})),
        Some(Value::Object(_)) => Ok(value.cloned().unwrap_or_default()),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(json!({})),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err(s.clone()),
        },
        Some(other) => Err(other.to_string()),
    }
}

/// The arguments to echo back in the conversation as a JSON object. Arguments that never
/// parsed are sent as `{}`: some servers (vLLM) parse them to render their chat template and
/// reject the whole request otherwise; the tool's error message already tells the model what
/// was wrong with what it sent.
pub(crate) fn arguments_object(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => v,
            _ => json!({}),
        },
        _ => json!({}),
    }
}

/// Tool-call ids as returned, unless missing, empty or repeated in one reply: then a stable
/// `call_<step>_<i>`, so every tool result still answers exactly one call.
pub(crate) fn call_id(
    raw: Option<&Value>,
    step: u32,
    index: usize,
    seen: &mut Vec<String>,
) -> String {
    let given = match raw {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let id = match given {
        Some(id) if !seen.contains(&id) => id,
        _ => {
            let mut id = format!("call_{step}_{index}");
            while seen.contains(&id) {
                id.push('_');
            }
            id
        }
    };
    seen.push(id.clone());
    id
}

pub(crate) fn u64_field(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .map(|f| f as u64)
    })
}

/// Tests share the integration tests' fake servers, so unit and binary tests check requests
/// against the same reading of the API references.
#[cfg(test)]
pub(crate) use crate::test_support::{http, providers};

#[cfg(test)]
pub(crate) mod testing {
    use crate::models::client::{LiveClient, Wire};
    use crate::registry::Registry;
    use crate::specfile::Source;
    use std::path::Path;

    pub(crate) fn registry(yaml: &str) -> Registry {
        let source = Source::new("test.yaml", yaml);
        let compiled = crate::compile::compile(&source, Path::new("test.yaml"));
        match compiled.registry {
            Some(r) => r,
            None => panic!(
                "spec does not compile: {:?}",
                compiled
                    .diagnostics
                    .iter()
                    .map(|d| &d.message)
                    .collect::<Vec<_>>()
            ),
        }
    }

    /// The settings of the first (live) model of `yaml`, pointed at a fake server's `base_url`.
    pub(crate) fn settings_at(yaml: &str, base_url: String) -> crate::registry::LiveModel {
        let reg = registry(yaml);
        let mut settings = match &reg.models[0].kind {
            crate::registry::ModelKind::OpenAi(l) | crate::registry::ModelKind::Anthropic(l) => {
                l.clone()
            }
            _ => panic!("the spec's first model is not a live one"),
        };
        settings.base_url = base_url;
        settings.timeout = std::time::Duration::from_secs(5);
        settings
    }

    /// What `decide` gets at `step` of `messages`, before any tool result.
    pub(crate) fn input<'a>(
        registry: &'a Registry,
        messages: &'a [crate::models::Message],
        step: u32,
    ) -> crate::models::DecideInput<'a> {
        crate::models::DecideInput {
            registry,
            messages,
            query: "q",
            results: &[],
            step,
        }
    }

    /// A live client of `yaml`'s first model at a fake server, holding the fake key.
    pub(crate) fn client(wire: &'static Wire, yaml: &str, base_url: String) -> LiveClient {
        let reg = registry(yaml);
        let name = reg.models[0].name.clone();
        let settings = settings_at(yaml, base_url);
        LiveClient::with_key(wire, &name, settings, Some(super::providers::KEY.into()))
    }

    /// One `decide` of `m` over `yaml`'s tools, with no events and a live transport.
    pub(crate) fn decide(
        m: &mut LiveClient,
        yaml: &str,
        messages: &[crate::models::Message],
        step: u32,
    ) -> Result<crate::models::ModelTurn, crate::models::ModelError> {
        let reg = registry(yaml);
        block_on(m.decide(
            input(&reg, messages, step),
            &crate::net::Transport::live(),
            &crate::events::Events::none(),
        ))
    }

    pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36 §1: a server that echoes the key JSON-escaped, as Go's and PHP's encoders write
    /// it, does not get it into the error's message or raw body.
    #[test]
    fn an_error_masks_the_key_in_every_spelling() {
        let settings = testing::settings_at(
            "version: 1\nname: t\nmodels:\n  g: { kind: openai, model: m, base_url: 'http://127.0.0.1:1' }\n",
            "http://127.0.0.1:1/v1".into(),
        );
        let key = "sk-tr/Qw7+9x&y<z>k=long-enough";
        let ep = Endpoint {
            model_name: "g",
            provider: "openai",
            settings: &settings,
            api_key: Some(key),
            url: String::new(),
            headers: Vec::new(),
        };
        let escaped = r"sk-tr\/Qw7+9x\u0026y\u003cz\u003ek=long-enough";
        let e = error(
            &ep,
            format!("HTTP 401: Incorrect API key provided: {escaped}"),
            Some(401),
            Some(format!("{{\"errors\":[\"{escaped}\", \"{key}\"]}}")),
        );
        assert_eq!(
            e.message,
            "model `g` (openai): HTTP 401: Incorrect API key provided: ***"
        );
        assert!(!e.raw.unwrap_or_default().contains("sk-tr"));
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        assert_eq!(
            retry_delay(
                Some(&HttpResponse::too_many_requests(&[("Retry-After", "2")])),
                1,
                b""
            ),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_delay(
                Some(&HttpResponse::too_many_requests(&[("Retry-After", "3600")])),
                1,
                b""
            ),
            None
        );
        // An HTTP date is honoured like seconds.
        let wait = retry_delay(
            Some(&HttpResponse::too_many_requests(&[(
                "Retry-After",
                &retry::http_date_in(20),
            )])),
            2,
            b"",
        )
        .expect("under the cap");
        assert!(wait > Duration::from_secs(17), "{wait:?}");
        assert_eq!(
            retry_delay(Some(&HttpResponse::too_many_requests(&[])), 1, b"x"),
            Some(retry::MODELS.delay(1, b"x"))
        );
    }

    #[test]
    fn provider_messages_from_every_shape() {
        let p = |s: &str| provider_message(serde_json::from_str(s).ok().as_ref(), s);
        assert_eq!(
            p(r#"{"error":{"message":"Incorrect API key","type":"invalid_request_error"}}"#),
            "Incorrect API key"
        );
        assert_eq!(
            p(
                r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#
            ),
            "invalid x-api-key"
        );
        assert_eq!(p(r#"{"error":"model not found"}"#), "model not found");
        assert_eq!(
            p(r#"{"object":"error","message":"bad","type":"BadRequestError"}"#),
            "bad"
        );
        assert_eq!(p(r#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(p("upstream exploded"), "upstream exploded");
        assert_eq!(p(""), "(empty body)");
    }

    #[test]
    fn arguments_are_read_liberally() {
        assert_eq!(
            parse_arguments(Some(&json!("{\"a\":1}"))),
            Ok(json!({"a": 1}))
        );
        assert_eq!(parse_arguments(Some(&json!({"a": 1}))), Ok(json!({"a": 1})));
        assert_eq!(parse_arguments(Some(&json!(""))), Ok(json!({})));
        assert_eq!(parse_arguments(None), Ok(json!({})));
        assert_eq!(parse_arguments(Some(&Value::Null)), Ok(json!({})));
        assert_eq!(
            parse_arguments(Some(&json!("{\"a\":"))),
            Err("{\"a\":".into())
        );
        assert_eq!(parse_arguments(Some(&json!("[1]"))), Err("[1]".into()));
        assert_eq!(parse_arguments(Some(&json!([1]))), Err("[1]".into()));
    }

    #[test]
    fn ids_are_kept_or_synthesized_uniquely() {
        let mut seen = Vec::new();
        assert_eq!(call_id(Some(&json!("abc")), 1, 0, &mut seen), "abc");
        assert_eq!(call_id(Some(&json!("abc")), 1, 1, &mut seen), "call_1_1");
        assert_eq!(call_id(None, 1, 2, &mut seen), "call_1_2");
        assert_eq!(call_id(Some(&json!("")), 1, 3, &mut seen), "call_1_3");
        assert_eq!(call_id(Some(&json!(7)), 1, 4, &mut seen), "7");
    }
}
