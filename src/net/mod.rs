//! The one door to the network. HTTP tools and live models both send through a `Transport`, so
//! recording and replaying fixtures is just another transport: the engine never knows it replays.

use crate::redact::Redactor;
pub(crate) mod decode;
pub(crate) mod exec_env;
mod plain;
pub(crate) mod retry;

use std::any::Any;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HttpRequest {
    pub(crate) method: String,
    pub(crate) url: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Option<Vec<u8>>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HttpResponse {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    /// The body was cut at `max_bytes`.
    pub(crate) truncated: bool,
}

impl HttpResponse {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A 429 with these headers and no body: what retry tests look at.
    #[cfg(test)]
    pub(crate) fn too_many_requests(headers: &[(&str, &str)]) -> HttpResponse {
        HttpResponse {
            status: 429,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: Vec::new(),
            truncated: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NetError {
    Timeout,
    Connect(String),
    Io(String),
    /// Replay: no recorded exchange answers this request. Never falls back to the network.
    NotRecorded(String),
}

impl std::fmt::Display for NetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetError::Timeout => write!(f, "timed out"),
            NetError::Connect(m) => write!(f, "connection failed: {m}"),
            NetError::Io(m) => write!(f, "{m}"),
            NetError::NotRecorded(m) => write!(f, "no recorded exchange: {m}"),
        }
    }
}

/// Receives each piece of a body as it arrives; `false` ends the body there (an MCP event
/// stream that stays open once the awaited message is in).
pub(crate) type OnChunk<'a> = &'a (dyn Fn(&[u8]) -> bool + Sync);

#[derive(Clone, Copy)]
pub(crate) struct SendOptions<'a> {
    /// Covers connect, headers and the whole body.
    pub(crate) timeout: Duration,
    pub(crate) max_bytes: u64,
    /// Called with the bytes received so far while a body streams in.
    pub(crate) progress: Option<&'a (dyn Fn(u64) + Sync)>,
    /// Called with each piece of a 2xx body as it arrives (live traffic only, and only when the
    /// body is not compressed): streamed replies are shown before they end.
    pub(crate) on_chunk: Option<OnChunk<'a>>,
    /// Turns a live response into the form it is used, masked and recorded in (an MCP reply
    /// sent as server-sent events becomes its one JSON-RPC message), so a replay hands the
    /// caller exactly what the live run had.
    pub(crate) reshape: Option<fn(HttpResponse) -> HttpResponse>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Purpose<'a> {
    Tool(&'a str),
    Model(&'a str),
    /// A `kind: mcp` entry talking to its server (named by the entry).
    Mcp(&'a str),
}

/// Recorded traffic: answers requests from a recording, or records live ones. Fixtures
/// (`crate::fixture::Tape`) implement it; the transport knows only this interface, so the network
/// layer never reaches up into fixtures.
pub(crate) trait Recorder: Send + Sync {
    /// The recorded answer to this request, if there is one.
    fn answer(
        &self,
        purpose: Purpose<'_>,
        req: &HttpRequest,
    ) -> Option<Result<HttpResponse, NetError>>;
    /// False in a replay: a request without a recorded answer fails instead of going out.
    fn may_go_live(&self) -> bool;
    /// Masks secrets in text that names a request (an unrecorded URL in an error).
    fn redact(&self, s: &str) -> String;
    /// In a replay of a turn its recording says was interrupted: the request just found
    /// without an answer is the one the interruption cut off, so the replay waits there as the
    /// recording did, until the interruption it has signalled ends the turn.
    fn cut_off_here(&self) -> bool {
        false
    }
    /// Arms (`Some`) or disarms the above for the turn being replayed: the first request without
    /// an answer sets `flag` instead of being a divergence.
    fn cut_off_at_a_miss(&self, flag: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>) {
        let _ = flag;
    }
    fn record(
        &self,
        purpose: Purpose<'_>,
        req: &HttpRequest,
        result: &Result<HttpResponse, NetError>,
    );
    /// Whether the tape holds (used or not) an exchange for `purpose` whose request has this
    /// method and a JSON body `body` accepts: what a protocol asks to tell recordings made
    /// before it recorded some kind of message from those made after.
    fn holds(
        &self,
        purpose: Purpose<'_>,
        method: &str,
        body: &dyn Fn(&serde_json::Value) -> bool,
    ) -> bool;
}

pub struct Transport {
    /// Shared with the transports `scoped` makes: one connection pool to each host for all of a
    /// gateway's clients, and the TLS roots loaded once, not per client session.
    client: Arc<OnceLock<Result<reqwest::Client, String>>>,
    /// HTTP tools' plain-HTTP requests' client, shared the same way (see [`plain`]).
    plain: Arc<plain::Pool>,
    /// Recording or replaying; `None` is plain live traffic.
    tape: Option<std::sync::Arc<dyn Recorder>>,
    /// Masks every secret in what comes back, before anything reads or cuts it (`mask_with`).
    redactor: std::sync::Mutex<Redactor>,
    /// What a protocol keeps for as long as this transport lives (one run): an MCP session
    /// per server. Typed by its owner, so this layer knows nothing of MCP.
    sessions: Kept,
    /// What the command line lets a run start (stdio MCP servers).
    exec_allowed: Arc<ExecRules>,
    /// What a protocol keeps across a gateway's client sessions (see [`Transport::shared`]).
    shared: Arc<Kept>,
}

type Kept = std::sync::Mutex<Vec<(String, Arc<dyn Any + Send + Sync>)>>;

/// The state under `key` in `all`, typed by its owner, made on first use.
fn kept<T: Default + Send + Sync + 'static>(all: &Kept, key: &str) -> Arc<T> {
    let mut all = match all.lock() {
        Ok(s) => s,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(found) = all
        .iter()
        .filter(|(k, _)| k == key)
        .find_map(|(_, v)| v.clone().downcast::<T>().ok())
    {
        return found;
    }
    let made = Arc::new(T::default());
    all.push((key.to_string(), made.clone()));
    made
}

/// What the command line lets a run start, as given: nothing a spec says widens it.
#[derive(Clone, Debug, Default)]
pub(crate) struct ExecRules {
    /// `--allow-exec`: programs allowed with any arguments.
    pub(crate) programs: Vec<String>,
    /// `--allow-command`: whole command lines, the program and exactly these arguments.
    pub(crate) commands: Vec<Vec<String>>,
    /// `--allow-env`: variables a spec's `env:` may set although they choose what code runs.
    pub(crate) env: Vec<String>,
}

impl Default for Transport {
    fn default() -> Self {
        Transport::live()
    }
}

impl Transport {
    pub fn live() -> Transport {
        Transport {
            client: Default::default(),
            plain: Default::default(),
            tape: None,
            redactor: Default::default(),
            sessions: Default::default(),
            exec_allowed: Default::default(),
            shared: Default::default(),
        }
    }

    /// Waits between retries — except in a replay, where the answers are already recorded and
    /// waiting would only make CI slower.
    pub(crate) async fn pause(&self, wait: Duration) {
        if self.tape.as_ref().is_some_and(|t| !t.may_go_live()) {
            return;
        }
        tokio::time::sleep(wait).await;
    }

    /// Whether a request may reach a server: live traffic or a recording, not a replay.
    pub(crate) fn may_go_live(&self) -> bool {
        self.tape.as_ref().is_none_or(|t| t.may_go_live())
    }

    /// The replay's tape, if any: a replay arms it where its recording was interrupted.
    pub(crate) fn tape(&self) -> Option<&std::sync::Arc<dyn Recorder>> {
        self.tape.as_ref()
    }

    pub(crate) fn with_tape(tape: std::sync::Arc<dyn Recorder>) -> Transport {
        Transport {
            client: Default::default(),
            plain: Default::default(),
            tape: Some(tape),
            redactor: Default::default(),
            sessions: Default::default(),
            exec_allowed: Default::default(),
            shared: Default::default(),
        }
    }

    /// A transport for one client of a gateway (`serve`): the same recording or replay, masking,
    /// allowed programs and HTTP client (connections are reused across clients; HTTP/1.1
    /// connections carry no session), with protocol sessions of its own, so no state of a remote
    /// server's session crosses from one client to another.
    pub(crate) fn scoped(&self) -> Transport {
        Transport {
            client: self.client.clone(),
            plain: self.plain.clone(),
            tape: self.tape.clone(),
            redactor: std::sync::Mutex::new(self.redactor()),
            sessions: Default::default(),
            exec_allowed: self.exec_allowed.clone(),
            shared: self.shared.clone(),
        }
    }

    /// Lets this run start what `rules` allow; a replay starts nothing whatever they say.
    pub(crate) fn allow_exec(mut self, rules: ExecRules) -> Transport {
        self.exec_allowed = Arc::new(rules);
        self
    }

    /// The recording this run writes, for what a protocol sends on its own initiative (a stdio
    /// MCP server's reader answering the server's requests); `None` unless the run records.
    pub(crate) fn recorder(&self) -> Option<std::sync::Arc<dyn Recorder>> {
        self.tape.clone().filter(|t| t.may_go_live())
    }

    /// Whether the recording this run replays (or adds to) holds such an exchange (see
    /// [`Recorder::holds`]); false for live traffic.
    pub(crate) fn tape_holds(
        &self,
        purpose: Purpose<'_>,
        method: &str,
        body: &dyn Fn(&serde_json::Value) -> bool,
    ) -> bool {
        self.tape
            .as_ref()
            .is_some_and(|t| t.holds(purpose, method, body))
    }

    pub(crate) fn exec_allowed(&self) -> &ExecRules {
        &self.exec_allowed
    }

    /// The state kept under `key` for this transport's lifetime, made on first use.
    pub(crate) fn session<T: Default + Send + Sync + 'static>(&self, key: &str) -> Arc<T> {
        kept(&self.sessions, key)
    }

    /// The state kept under `key` for this transport and every one [`Transport::scoped`] makes
    /// from it (all of a gateway's client sessions), made on first use.
    pub(crate) fn shared<T: Default + Send + Sync + 'static>(&self, key: &str) -> Arc<T> {
        kept(&self.shared, key)
    }

    /// From now on, responses are masked with these secrets too. A server that echoes a secret
    /// (in any encoding) hands it to no one: not the tool, the model, a trace or a fixture.
    pub(crate) fn mask_with(&self, redactor: &Redactor) {
        if let Ok(mut r) = self.redactor.lock() {
            r.merge(redactor);
        }
    }

    fn redactor(&self) -> Redactor {
        self.redactor.lock().map(|r| r.clone()).unwrap_or_default()
    }

    pub(crate) async fn send(
        &self,
        purpose: Purpose<'_>,
        req: &HttpRequest,
        opts: SendOptions<'_>,
    ) -> Result<HttpResponse, NetError> {
        self.send_via(purpose, req, opts, |opts| {
            self.send_live(purpose, req, opts)
        })
        .await
    }

    /// [`Transport::send`] for a request whose URL the caller has parsed already (`url` is
    /// `req.url`, parsed): it goes out without being parsed again. `may_resend`: the caller's
    /// word that sending the request twice does no harm (a safe method is not enough: a tool
    /// with side effects says no whatever its method), so a reused connection the server closed
    /// under it may take it again on a new one.
    pub(crate) async fn send_to(
        &self,
        purpose: Purpose<'_>,
        req: &HttpRequest,
        (url, may_resend): (&url::Url, bool),
        opts: SendOptions<'_>,
    ) -> Result<HttpResponse, NetError> {
        self.send_via(purpose, req, opts, |opts| {
            self.send_live_to(req, Some((url, may_resend)), opts)
        })
        .await
    }

    /// Like [`Transport::send`], with `live` doing what goes out of the process (a message to a
    /// stdio server): recording, replay, masking and the size cap are the same for it, and in a
    /// replay `live` is never called.
    pub(crate) async fn send_via<'o, F, Fut>(
        &self,
        purpose: Purpose<'_>,
        req: &HttpRequest,
        opts: SendOptions<'o>,
        live: F,
    ) -> Result<HttpResponse, NetError>
    where
        F: FnOnce(SendOptions<'o>) -> Fut,
        Fut: std::future::Future<Output = Result<HttpResponse, NetError>>,
    {
        // Read a secret's longest spelling past the limit, mask, then cut: a secret that
        // straddles the limit is masked whole, never cut into a prefix that escapes masking.
        let redactor = self.redactor();
        let max = opts.max_bytes;
        let opts = SendOptions {
            max_bytes: max.saturating_add(redactor.slack() as u64),
            ..opts
        };
        let reshape = opts.reshape;
        let Some(tape) = &self.tape else {
            let result = live(opts).await;
            return masked(result.map(|r| reshaped(r, reshape)), &redactor, max);
        };
        if let Some(answer) = tape.answer(purpose, req) {
            return answer;
        }
        if !tape.may_go_live() {
            if tape.cut_off_here() {
                std::future::pending::<()>().await;
            }
            return Err(NetError::NotRecorded(format!(
                "{} {}",
                req.method,
                tape.redact(&req.url)
            )));
        }
        let result = live(opts).await;
        let result = masked(result.map(|r| reshaped(r, reshape)), &redactor, max);
        tape.record(purpose, req, &result);
        result
    }

    /// A request that changes nothing a run observes (ending a protocol session): sent live
    /// or while recording, never recorded, and not sent at all in a replay (`None`), which has
    /// no server to tell. Fixtures recorded before such a request existed replay unchanged.
    pub(crate) async fn send_unrecorded(
        &self,
        purpose: Purpose<'_>,
        req: &HttpRequest,
        opts: SendOptions<'_>,
    ) -> Option<Result<HttpResponse, NetError>> {
        if !self.may_go_live() {
            return None;
        }
        let max = opts.max_bytes;
        let result = self.send_live(purpose, req, opts).await;
        Some(masked(result, &self.redactor(), max))
    }

    /// Built on first use: a run with only mock tools never pays for TLS set-up.
    fn client(&self) -> Result<&reqwest::Client, NetError> {
        self.client
            .get_or_init(|| {
                let _ = rustls::crypto::ring::default_provider().install_default();
                reqwest::Client::builder()
                    // Redirects are followed by the caller, which checks every hop's host.
                    .redirect(reqwest::redirect::Policy::none())
                    .no_proxy()
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| NetError::Io(format!("HTTP client: {e}")))
    }

    /// The request as it goes out, with no recording, replay or masking (a caller doing its
    /// own through [`Transport::send_via`]).
    pub(crate) async fn send_live(
        &self,
        _purpose: Purpose<'_>,
        req: &HttpRequest,
        opts: SendOptions<'_>,
    ) -> Result<HttpResponse, NetError> {
        self.send_live_to(req, None, opts).await
    }

    /// [`Transport::send_live`]; `url`, when given, is `req.url` parsed (with the caller's word
    /// on sending it again, see [`Transport::send_to`]): a plain-HTTP one goes out over hyper's
    /// connections directly (see [`plain`]).
    async fn send_live_to(
        &self,
        req: &HttpRequest,
        target: Option<(&url::Url, bool)>,
        opts: SendOptions<'_>,
    ) -> Result<HttpResponse, NetError> {
        let url = target.map(|(u, _)| u);
        let may_resend = target.is_some_and(|(_, r)| r);
        // The timeout counts from here: building the client on first use (TLS set-up) is part
        // of the time the caller gave this request.
        let now = tokio::time::Instant::now();
        let deadline = now
            .checked_add(opts.timeout)
            .unwrap_or(now + Duration::from_secs(86_400));
        let work = async {
            if let Some(url) = url.filter(|u| u.scheme() == "http") {
                // The connection goes back to the pool once the body is read (`_lease` drops).
                let (response, _lease) = plain::send(&self.plain, req, url, may_resend).await?;
                let (head, body) = response.into_parts();
                return read_body(&head, body, &opts, plain::body_error).await;
            }
            let resp: hyper::Response<reqwest::Body> = self.send_reqwest(req, url).await?.into();
            let (head, body) = resp.into_parts();
            read_body(&head, body, &opts, classify).await
        };
        match tokio::time::timeout_at(deadline, work).await {
            Ok(r) => r,
            Err(_) => Err(NetError::Timeout),
        }
    }

    /// Sends through reqwest; the response's body is still to be read.
    async fn send_reqwest(
        &self,
        req: &HttpRequest,
        url: Option<&url::Url>,
    ) -> Result<reqwest::Response, NetError> {
        let client = self.client()?;
        let method = reqwest::Method::from_bytes(req.method.as_bytes())
            .map_err(|e| NetError::Io(e.to_string()))?;
        let mut builder = match url {
            Some(url) => client.request(method, url.clone()),
            None => client.request(method, &req.url),
        };
        for (k, v) in &req.headers {
            builder = builder.header(k, v);
        }
        if !req
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("accept-encoding"))
        {
            builder = builder.header("accept-encoding", decode::ACCEPTED);
        }
        if let Some(body) = &req.body {
            builder = builder.body(body.clone());
        }
        builder.send().await.map_err(classify)
    }
}

/// Reads a response's body as it arrives, within `max_bytes`, reporting progress and handing
/// each piece to `on_chunk`; `error` says what a body that broke off is.
async fn read_body<B>(
    head: &hyper::http::response::Parts,
    body: B,
    opts: &SendOptions<'_>,
    error: fn(B::Error) -> NetError,
) -> Result<HttpResponse, NetError>
where
    B: hyper::body::Body<Data = bytes::Bytes>,
{
    use http_body_util::BodyExt;
    let status = head.status.as_u16();
    let headers = head
        .headers
        .iter()
        .map(|(k, v)| {
            // Almost every value is visible ASCII: copied as it is, without the UTF-8 check.
            let v = match v.to_str() {
                Ok(text) => text.to_string(),
                Err(_) => String::from_utf8_lossy(v.as_bytes()).into_owned(),
            };
            (k.as_str().to_string(), v)
        })
        .collect();
    let mut body_bytes = Vec::new();
    let mut truncated = false;
    let on_chunk = opts
        .on_chunk
        .filter(|_| (200..300).contains(&status) && head.headers.get("content-encoding").is_none());
    // An empty piece first: the body begins (a stream's reader knows it is open).
    if let Some(f) = on_chunk {
        f(&[]);
    }
    let mut body = std::pin::pin!(body);
    while let Some(frame) = body.as_mut().frame().await {
        // Trailers and frames of other kinds carry no body.
        let Ok(chunk) = frame.map_err(error)?.into_data() else {
            continue;
        };
        let more = on_chunk.is_none_or(|f| f(&chunk));
        let room = (opts.max_bytes as usize).saturating_sub(body_bytes.len());
        if chunk.len() > room {
            body_bytes.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body_bytes.extend_from_slice(&chunk);
        if let Some(p) = opts.progress {
            p(body_bytes.len() as u64);
        }
        if !more {
            break;
        }
    }
    decoded(
        HttpResponse {
            status,
            headers,
            body: body_bytes,
            truncated,
        },
        opts.max_bytes,
    )
}

fn reshaped(r: HttpResponse, reshape: Option<fn(HttpResponse) -> HttpResponse>) -> HttpResponse {
    match reshape {
        Some(f) => f(r),
        None => r,
    }
}

fn masked(
    result: Result<HttpResponse, NetError>,
    redactor: &Redactor,
    max_bytes: u64,
) -> Result<HttpResponse, NetError> {
    if redactor.is_empty() {
        return result;
    }
    match result {
        Ok(mut r) => {
            let max = usize::try_from(max_bytes).unwrap_or(usize::MAX);
            let (body, truncated) = redactor.cut_bytes(&r.body, max, r.truncated);
            r.body = body;
            r.truncated = truncated;
            for (_, v) in &mut r.headers {
                *v = redactor.str(v);
            }
            Ok(r)
        }
        Err(NetError::Connect(m)) => Err(NetError::Connect(redactor.str(&m))),
        Err(NetError::Io(m)) => Err(NetError::Io(redactor.str(&m))),
        Err(e) => Err(e),
    }
}

/// The body as the server meant it: `Content-Encoding` undone, the size cap applied to the
/// decoded bytes, and the encoding headers dropped since they no longer describe the body
/// (a recorded fixture holds the decoded reply).
fn decoded(mut resp: HttpResponse, max_bytes: u64) -> Result<HttpResponse, NetError> {
    let Some(encoding) = resp.header("content-encoding").map(str::to_string) else {
        return Ok(resp);
    };
    let body = std::mem::take(&mut resp.body);
    let d = decode::decode(&encoding, body, max_bytes, resp.truncated).map_err(NetError::Io)?;
    resp.body = d.body;
    resp.truncated = d.truncated;
    resp.headers.retain(|(k, _)| {
        !k.eq_ignore_ascii_case("content-encoding") && !k.eq_ignore_ascii_case("content-length")
    });
    Ok(resp)
}

/// What happened, as the innermost cause of an error says it ("Connection refused (os error
/// 111)"): the outer ones add only what the caller already knows.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message = s.to_string();
        source = s.source();
    }
    message
}

fn classify(e: reqwest::Error) -> NetError {
    if e.is_timeout() {
        return NetError::Timeout;
    }
    // reqwest's own text names the URL, which may hold a secret and says nothing the caller does
    // not know; the innermost cause ("Connection refused (os error 111)") is what happened.
    let e = e.without_url();
    let msg = innermost(&e);
    if e.is_connect() {
        NetError::Connect(msg)
    } else {
        NetError::Io(msg)
    }
}
