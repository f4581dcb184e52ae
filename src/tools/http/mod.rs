//! HTTP tools: build the request from templates, check every host against the allow-list, send
//! it (following redirects and retrying idempotent calls), and turn the response into an
//! observation or an error the model can act on. Secrets never leave here unredacted.
//!
//! Retries and redirects live here rather than in `net::Transport`, so a recording transport
//! sees (and a replaying one answers) every single exchange.

mod redirect;
mod request;

use super::{ErrorKind, HttpCall, Output, ToolEnv, ToolError};
use crate::net::{retry, HttpRequest, HttpResponse, NetError, Purpose, SendOptions};
use crate::redact::Redactor;
use crate::registry::{HostRule, HttpTool, Registry, Tool, ToolKind, UrlOrigin};
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redirect::SecretBody;
pub(crate) use request::prepare;
use request::prepare_parsed;

/// `tool_progress` events at most once per this many bytes, so a fast download does not flood.
const PROGRESS_EVERY: u64 = 64 * 1024;
/// Characters of an error body shown to the model: enough for `{"error": "..."}`, no more.
const EXCERPT_CHARS: usize = 300;
pub(super) const USER_AGENT: &str = concat!("toolrun/", env!("CARGO_PKG_VERSION"));

pub(crate) async fn execute(
    tool: &Tool,
    http: &HttpTool,
    args: &Value,
    env: &ToolEnv<'_>,
) -> Result<Output, ToolError> {
    let redactor = env.secrets.redactor();
    env.transport.mask_with(&redactor);
    let started = Instant::now();
    let result = match prepare_parsed(http, args, env).await {
        Ok((req, url)) => {
            Call {
                tool,
                http,
                env,
                redactor: &redactor,
                started,
                // `timeout: 100000000h` must not overflow the clock: cap it at a day.
                deadline: started + tool.timeout.min(Duration::from_secs(86_400))
                    - deadline_margin(tool.timeout),
            }
            .run(req, url)
            .await
        }
        Err(e) => Err(e),
    };
    // The observation goes back to the model and into the trace: a server echoing a secret must
    // not hand it to either, so the model sees `***` too. The body was masked as it arrived
    // (`Transport::mask_with`); messages built here may quote the URL, which holds secrets.
    match result {
        Ok(mut out) => {
            if let Some(h) = &mut out.http {
                redactor.mask_in_place(&mut h.url);
            }
            Ok(out)
        }
        Err(mut e) => {
            e.message = redactor.str(&e.message);
            if let Some(d) = &mut e.details {
                redactor.value(d);
            }
            Err(e)
        }
    }
}

/// The engine also bounds every call by the tool's timeout; ending a little earlier here means
/// the error that comes back is this module's (with attempts, URL and an actionable message)
/// rather than the engine's bare backstop.
fn deadline_margin(timeout: Duration) -> Duration {
    (timeout / 10).min(Duration::from_millis(50))
}

// ---------------------------------------------------------------------------------------------
// Sending: allow-list, redirects, retries

/// The hosts this spec may reach: `policy.network.allow_hosts`, or else the hosts written
/// literally in its HTTP tools' URLs (the same rule `toolrun check` applies). Worked out once per
/// registry: every call and every redirect reads it.
pub(crate) fn allowed_hosts(registry: &Registry) -> &[HostRule] {
    registry.allowed_hosts.get_or_init(|| {
        if !registry.policy.allow_hosts.is_empty() {
            return registry.policy.allow_hosts.clone();
        }
        registry
            .tools
            .iter()
            .filter_map(|t| match &t.kind {
                ToolKind::Http(h) => match &h.origin {
                    UrlOrigin::Literal(Some(rule)) => Some(rule.clone()),
                    _ => None,
                },
                ToolKind::Mcp(m) => m.server.host.clone(),
                _ => None,
            })
            // A `tools: "*"` server's URL is written as literally as a declared tool's.
            .chain(
                registry
                    .wildcards
                    .iter()
                    .filter_map(|w| w.server.host.clone()),
            )
            // So is `serve.auth`'s issuer, whose metadata and keys `serve` fetches.
            .chain(
                registry
                    .serve_auth
                    .as_ref()
                    .and_then(|a| a.issuer_host.clone()),
            )
            .collect()
    })
}

fn host_port(url: &url::Url) -> (&str, u16) {
    (
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or(0),
    )
}

fn display_host(url: &url::Url) -> String {
    let (host, port) = host_port(url);
    match url.port() {
        Some(_) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

pub(crate) fn check_host(url: &url::Url, allow: &[HostRule]) -> bool {
    let (host, port) = host_port(url);
    matches!(url.scheme(), "http" | "https")
        && !host.is_empty()
        && allow.iter().any(|r| r.matches(host, port))
}

struct Call<'a, 'e> {
    tool: &'a Tool,
    http: &'a HttpTool,
    env: &'a ToolEnv<'e>,
    /// Masks before anything is cut: a URL or an excerpt must not end in half a secret.
    redactor: &'a Redactor,
    started: Instant,
    deadline: Instant,
}

/// How one attempt (with its redirects) ended. The URL is the first one, borrowed, until a
/// redirect leads elsewhere.
enum Outcome<'u> {
    Response {
        resp: HttpResponse,
        /// The method of the request that got `resp`: a 303 (and a 301 or 302 after a POST)
        /// turns the declared method into GET.
        method: String,
        url: Cow<'u, url::Url>,
        redirects: u32,
        too_many_redirects: bool,
    },
    Net {
        error: NetError,
        /// The method of the request that failed.
        method: String,
        url: Cow<'u, url::Url>,
    },
    Denied {
        url: url::Url,
        from: url::Url,
    },
    /// A redirect to another origin that would repeat a body rendered from a secret.
    SecretBody(SecretBody),
}

impl Call<'_, '_> {
    fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Sends `req`, whose URL `first` is, parsed.
    async fn run(&self, req: HttpRequest, first: url::Url) -> Result<Output, ToolError> {
        let allow = allowed_hosts(self.env.registry);
        if !check_host(&first, allow) {
            return Err(self.denied(&first, None));
        }
        // A POST (or anything not idempotent) is sent once: replaying it could send two emails.
        let max_attempts = if self.tool.idempotent {
            self.http.retries + 1
        } else {
            1
        };
        let mut attempts = 0;
        let mut waited_note = None;
        let outcome = loop {
            attempts += 1;
            let outcome = self.attempt(&req, &first, allow).await;
            let (retryable, retry_after) = match &outcome {
                Outcome::Response {
                    resp,
                    too_many_redirects: false,
                    ..
                } if resp.status == 429 || resp.status >= 500 => (true, retry::retry_after(resp)),
                // Connection failures (refused, reset, closed before answering) are transient
                // more often than not; a timeout is not retried: the tool's time is spent.
                Outcome::Net {
                    error: NetError::Connect(_) | NetError::Io(_),
                    ..
                } => (true, None),
                _ => (false, None),
            };
            if !retryable || attempts >= max_attempts {
                break outcome;
            }
            let wait = retry_after
                .unwrap_or_else(|| retry::TOOLS.delay(attempts, self.env.call_id.as_bytes()));
            if wait >= self.deadline.saturating_duration_since(Instant::now()) {
                waited_note = Some(format!(
                    "not retried: waiting {} would pass the tool's {} timeout",
                    secs(wait),
                    secs(self.tool.timeout)
                ));
                break outcome;
            }
            // A client watching this call (a served one) hears why it takes longer.
            if let Some(notify) = self.env.notify {
                notify(crate::tools::notify::Notice::Progress {
                    progress: f64::from(attempts),
                    total: Some(f64::from(max_attempts)),
                    message: Some(format!(
                        "attempt {attempts} of {max_attempts} failed; retrying in {}",
                        secs(wait)
                    )),
                });
            }
            self.env.transport.pause(wait).await;
        };
        self.finish(outcome, attempts, max_attempts, waited_note)
    }

    /// One request, following redirects; each hop is checked against the allow-list.
    async fn attempt<'u>(
        &self,
        req: &HttpRequest,
        first: &'u url::Url,
        allow: &[HostRule],
    ) -> Outcome<'u> {
        // Copied only when a redirect changes them.
        let mut req = Cow::Borrowed(req);
        let mut url = Cow::Borrowed(first);
        let mut redirects = 0;
        loop {
            let remaining = self.deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Outcome::Net {
                    error: NetError::Timeout,
                    method: req.method.clone(),
                    url,
                };
            }
            let resp = match self.send(&req, &url, remaining).await {
                Ok(r) => r,
                Err(error) => {
                    return Outcome::Net {
                        error,
                        method: req.method.clone(),
                        url,
                    }
                }
            };
            let location = resp.header("location").map(str::to_string);
            let (true, Some(location)) =
                (matches!(resp.status, 301 | 302 | 303 | 307 | 308), location)
            else {
                return Outcome::Response {
                    resp,
                    method: req.method.clone(),
                    url,
                    redirects,
                    too_many_redirects: false,
                };
            };
            if redirects >= self.http.max_redirects {
                let too_many = self.http.max_redirects > 0;
                return Outcome::Response {
                    resp,
                    method: req.method.clone(),
                    url,
                    redirects,
                    too_many_redirects: too_many,
                };
            }
            let Ok(next) = url.join(&location) else {
                return Outcome::Response {
                    resp,
                    method: req.method.clone(),
                    url,
                    redirects,
                    too_many_redirects: false,
                };
            };
            if !check_host(&next, allow) {
                return Outcome::Denied {
                    url: next,
                    from: url.into_owned(),
                };
            }
            // 303 always, and 301/302 after a POST (as browsers and curl do), become a GET
            // without a body; 307 and 308 repeat the request as it was.
            let req = req.to_mut();
            if resp.status == 303 || (matches!(resp.status, 301 | 302) && req.method == "POST") {
                if req.method != "HEAD" {
                    req.method = "GET".into();
                }
                req.body = None;
                req.headers.retain(|(k, _)| {
                    !k.eq_ignore_ascii_case("content-type")
                        && !k.eq_ignore_ascii_case("content-length")
                });
            }
            if next.origin() != url.origin() {
                // A 307 or 308 (or a 301 or 302 of a PUT) repeats the body; one rendered from a
                // secret was meant for the first origin as much as an Authorization header is,
                // and unlike a header it cannot be dropped without changing the request.
                if req.body.is_some() {
                    let secrets = self.body_secrets();
                    if !secrets.is_empty() {
                        return Outcome::SecretBody(SecretBody {
                            url: next,
                            from: url.into_owned(),
                            status: resp.status,
                            secrets,
                        });
                    }
                }
                // Credentials were meant for the first host only, whatever the header is called.
                let redactor = self.env.secrets.redactor();
                req.headers.retain(|(k, v)| {
                    !matches!(
                        k.to_ascii_lowercase().as_str(),
                        "authorization" | "proxy-authorization" | "cookie"
                    ) && redactor.leaks(v).is_none()
                });
            }
            req.url = next.to_string();
            url = Cow::Owned(next);
            redirects += 1;
        }
    }

    async fn send(
        &self,
        req: &HttpRequest,
        url: &url::Url,
        timeout: Duration,
    ) -> Result<HttpResponse, NetError> {
        let env = self.env;
        let next_report = AtomicU64::new(PROGRESS_EVERY);
        let progress = |bytes: u64| {
            if bytes >= next_report.load(Ordering::Relaxed) {
                next_report.store(bytes + PROGRESS_EVERY, Ordering::Relaxed);
                env.events.emit(
                    "tool_progress",
                    env.call_event(
                        json!({ "id": env.call_id, "tool": self.tool.name, "bytes": bytes }),
                    ),
                );
                // A long download is progress to a client watching the call (a served one).
                if let Some(notify) = env.notify {
                    notify(crate::tools::notify::Notice::Progress {
                        progress: bytes as f64,
                        total: None,
                        message: Some(format!("{bytes} bytes received")),
                    });
                }
            }
        };
        let opts = SendOptions {
            timeout,
            max_bytes: self.http.max_bytes,
            progress: if env.events.is_active() || env.notify.is_some() {
                Some(&progress)
            } else {
                None
            },
            on_chunk: None,
            reshape: None,
        };
        // Sent again after the server may have read it only when the spec lets it be sent twice:
        // idempotent, no side effects, no confirmation asked for.
        let tool = self.tool;
        let may_resend = tool.idempotent && !tool.side_effects && !tool.confirm;
        env.transport
            .send_to(Purpose::Tool(&tool.name), req, (url, may_resend), opts)
            .await
    }

    fn details(&self, method: &str, url: &url::Url, attempts: u32) -> Map<String, Value> {
        let mut d = Map::new();
        d.insert("method".into(), json!(method));
        d.insert("url".into(), json!(url.as_str()));
        d.insert("attempts".into(), json!(attempts));
        d.insert("elapsed_ms".into(), json!(self.elapsed_ms()));
        d
    }

    fn denied(&self, url: &url::Url, from: Option<&url::Url>) -> ToolError {
        let host = display_host(url);
        let how = match from {
            Some(f) => format!(
                "the server at {} redirected to {host}, which",
                display_host(f)
            ),
            None => host.clone(),
        };
        let mut d = self.details(&self.http.method, url, 1);
        if let Some(f) = from {
            d.insert("redirected_from".into(), json!(f.as_str()));
        }
        let message = if matches!(url.scheme(), "http" | "https") {
            format!("refused to contact {host}: {how} is not in the spec's allowed hosts (policy.network.allow_hosts). This tool cannot reach it; do not retry.")
        } else {
            let scheme = url.scheme();
            let how = match from {
                Some(f) => format!(
                    "the server at {} redirected to a `{scheme}:` URL",
                    display_host(f)
                ),
                None => format!("the URL is a `{scheme}:` URL"),
            };
            format!("refused: {how}, and HTTP tools reach only http and https URLs. This tool cannot follow it; do not retry.")
        };
        ToolError::new(ErrorKind::Denied, message).with_details(Value::Object(d))
    }

    fn finish(
        &self,
        outcome: Outcome<'_>,
        attempts: u32,
        max_attempts: u32,
        note: Option<String>,
    ) -> Result<Output, ToolError> {
        let tries = if attempts > 1 {
            format!(" after {attempts} attempts")
        } else {
            String::new()
        };
        let with_note = |mut d: Map<String, Value>| {
            if let Some(n) = &note {
                d.insert("note".into(), json!(n));
            }
            if max_attempts > 1 {
                d.insert("max_attempts".into(), json!(max_attempts));
            }
            Value::Object(d)
        };
        match outcome {
            Outcome::Denied { url, from } => {
                let mut e = self.denied(&url, Some(&from));
                if let Some(Value::Object(d)) = &mut e.details {
                    d.insert("attempts".into(), json!(attempts));
                }
                Err(e)
            }
            Outcome::SecretBody(refused) => Err(self.secret_body(&refused, attempts)),
            Outcome::Net { error, method, url } => {
                let method = method.as_str();
                let d = with_note(self.details(method, &url, attempts));
                let target = format!("{method} {}", short(url.as_str(), self.redactor));
                let (kind, message) = match &error {
                    NetError::Timeout => (
                        ErrorKind::Timeout,
                        format!(
                            "{target} did not finish within the tool's {} timeout{tries}; the service is slow or down. Try again later, or ask for less.",
                            secs(self.tool.timeout)
                        ),
                    ),
                    NetError::Connect(m) => (
                        ErrorKind::Network,
                        format!("could not connect to {} ({m}){tries}; the service may be down. Try again later, or answer without this tool.", display_host(&url)),
                    ),
                    NetError::Io(m) => (
                        ErrorKind::Network,
                        format!("{target} failed{tries}: {m}. The connection broke; try again later."),
                    ),
                    NetError::NotRecorded(m) => (ErrorKind::Network, format!("{target}: {error}", error = NetError::NotRecorded(m.clone()))),
                };
                Err(ToolError::new(kind, message).with_details(d))
            }
            Outcome::Response {
                resp,
                method: owned_method,
                url,
                redirects,
                too_many_redirects,
            } => {
                let method = owned_method.as_str();
                let status = resp.status;
                // Built only for a message that needs them: a success has none.
                let details = || {
                    let mut d = self.details(method, &url, attempts);
                    d.insert("status".into(), json!(status));
                    if redirects > 0 {
                        d.insert("redirects".into(), json!(redirects));
                    }
                    d
                };
                if (200..300).contains(&status) {
                    let value = self.observation(resp, || with_note(details()))?;
                    // The method and the URL move into the record (the URL copied only when
                    // it is the first one, still borrowed).
                    let http = HttpCall {
                        method: owned_method,
                        url: String::from(url.into_owned()),
                        status,
                        attempts: (attempts > 1).then_some(attempts),
                        redirects: (redirects > 0).then_some(redirects),
                    };
                    return Ok(Output {
                        value,
                        http: Some(http),
                        ..Output::default()
                    });
                }
                let mut d = details();
                let excerpt = excerpt(&resp.body, self.redactor);
                if !excerpt.is_empty() {
                    d.insert("body_excerpt".into(), json!(excerpt));
                }
                let reason = reqwest::StatusCode::from_u16(resp.status)
                    .ok()
                    .and_then(|s| s.canonical_reason())
                    .unwrap_or("");
                let head = format!(
                    "{method} {} returned HTTP {} {reason}{tries}",
                    short(url.as_str(), self.redactor),
                    resp.status
                );
                let said = if excerpt.is_empty() {
                    String::new()
                } else {
                    format!(": {excerpt}")
                };
                let advice = self.advice(&resp, too_many_redirects, &mut d);
                Err(
                    ToolError::new(ErrorKind::HttpStatus, format!("{head}{said}. {advice}"))
                        .with_details(with_note(d)),
                )
            }
        }
    }

    /// What the model should do about a status that is not success; a 429's wait goes into
    /// the details too.
    fn advice(
        &self,
        resp: &HttpResponse,
        too_many_redirects: bool,
        d: &mut Map<String, Value>,
    ) -> String {
        match resp.status {
            300..=399 if too_many_redirects => format!("it redirected more than {} times (response.max_redirects); the URL is wrong or loops.", self.http.max_redirects),
            300..=399 => "it is a redirect this tool does not follow (response.max_redirects).".to_string(),
            400 | 422 => "The request was rejected: check the arguments against the tool's description and try again with corrected values.".to_string(),
            401 | 403 => "The service refused the tool's credentials; this is a configuration problem and retrying will not help.".to_string(),
            404 | 410 => "Nothing exists there: check the arguments (a name, an id) and try again with corrected values.".to_string(),
            429 => {
                let after = retry::retry_after(resp);
                if let Some(a) = after {
                    d.insert("retry_after_ms".into(), json!(a.as_millis() as u64));
                }
                match after {
                    Some(a) => format!("Rate limited: wait at least {} before calling it again, or answer without it.", secs(a)),
                    None => "Rate limited: wait before calling it again, or answer without it.".to_string(),
                }
            }
            500..=599 => "The service failed; try again later, or answer without this tool.".to_string(),
            _ => "The request did not succeed.".to_string(),
        }
    }

    fn observation(
        &self,
        resp: HttpResponse,
        details: impl FnOnce() -> Value,
    ) -> Result<Value, ToolError> {
        let content_type = resp.header("content-type").unwrap_or("");
        if resp.truncated {
            let total = resp
                .header("content-length")
                .and_then(|l| l.trim().parse::<u64>().ok());
            let mut obs = json!({
                "truncated": true,
                "bytes": resp.body.len(),
                "body": utf8_prefix(&resp.body),
                "note": format!(
                    "the response was cut at {} bytes (response.max_bytes){}; ask for less, e.g. a narrower query",
                    self.http.max_bytes,
                    if self.http.pointer.is_some() { ", so response.pointer could not be applied" } else { "" }
                ),
            });
            if let Some(t) = total {
                obs["total_bytes"] = json!(t);
            }
            return Ok(obs);
        }
        if resp.body.iter().all(u8::is_ascii_whitespace) {
            return match &self.http.pointer {
                Some(p) if !p.is_empty() => Err(ToolError::new(
                    ErrorKind::NotFound,
                    format!("the response was empty, so it has nothing at `{p}`"),
                )
                .with_details(details())),
                _ => Ok(Value::Null),
            };
        }
        // A declared non-JSON type (HTML, plain text) stays text even if it happens to parse.
        let json_allowed = content_type.is_empty()
            || (content_type.as_bytes())
                .windows(4)
                .any(|w| w.eq_ignore_ascii_case(b"json"));
        // Checked as UTF-8 once, not string by string: the same values, and the same failures
        // (bytes that are not UTF-8 are not JSON anywhere in it).
        let parsed = if json_allowed {
            std::str::from_utf8(&resp.body)
                .ok()
                .and_then(|text| serde_json::from_str::<Value>(text).ok())
        } else {
            None
        };
        match (parsed, &self.http.pointer) {
            (Some(v), None) => Ok(v),
            (Some(v), Some(p)) => match v.pointer(p) {
                Some(found) => Ok(found.clone()),
                None => Err(ToolError::new(ErrorKind::NotFound, missing_pointer(&v, p))
                    .with_details(details())),
            },
            (None, None) => Ok(Value::String(
                String::from_utf8_lossy(&resp.body).into_owned(),
            )),
            (None, Some(p)) => Err(ToolError::new(
                ErrorKind::ExecutionError,
                format!(
                    "the response is not JSON ({}), so `{p}` cannot be read from it: {}",
                    if content_type.is_empty() {
                        "no content type".to_string()
                    } else {
                        content_type.to_ascii_lowercase()
                    },
                    excerpt(&resp.body, self.redactor)
                ),
            )
            .with_details(details())),
        }
    }
}

/// "no `/current/temp`; `/current` has: humidity, wind" — the model (or the spec's author) sees
/// what the response does hold.
fn missing_pointer(v: &Value, pointer: &str) -> String {
    let parts: Vec<&str> = pointer.split('/').skip(1).collect();
    let mut deepest = (String::new(), v);
    for i in 0..parts.len() {
        let prefix = format!("/{}", parts[..=i].join("/"));
        match v.pointer(&prefix) {
            Some(found) => deepest = (prefix, found),
            None => break,
        }
    }
    let (at, node) = deepest;
    let at = if at.is_empty() {
        "the top level".to_string()
    } else {
        format!("`{at}`")
    };
    let holds = match node {
        Value::Object(m) => {
            let keys: Vec<&str> = m.keys().take(12).map(String::as_str).collect();
            format!(
                "{at} has the keys: {}{}",
                keys.join(", "),
                if m.len() > 12 { ", ..." } else { "" }
            )
        }
        Value::Array(a) => format!("{at} is a list of {} items", a.len()),
        other => format!("{at} is {}", type_name(other)),
    };
    format!("the response has nothing at `{pointer}`; {holds}")
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The longest valid UTF-8 prefix: a cut in the middle of a character must not become U+FFFD.
fn utf8_prefix(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(e) if e.error_len().is_none() => {
            String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned()
        }
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// The start of an error body on one line, for the message. Masked before it is cut, and the
/// body is read a secret's length past the excerpt, so no secret is cut in half.
fn excerpt(body: &[u8], redactor: &Redactor) -> String {
    let read = (EXCERPT_CHARS * 4 + redactor.slack()).min(body.len());
    let text = redactor.str(&utf8_prefix(&body[..read]));
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match redactor.shorten(&one_line, EXCERPT_CHARS) {
        (cut, 0) => cut,
        (cut, _) => format!("{cut}..."),
    }
}

pub(super) fn short(url: &str, redactor: &Redactor) -> String {
    match redactor.shorten(url, 200) {
        (cut, 0) => cut,
        (cut, _) => format!("{cut}..."),
    }
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s}s")
    } else {
        format!("{s:.1}s")
    }
}

#[cfg(test)]
use crate::test_support::http as test_server;

#[cfg(test)]
mod tests;
