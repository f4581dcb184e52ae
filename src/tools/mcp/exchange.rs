//! JSON-RPC exchanges with one server: a POST per message over streamable HTTP (the reply JSON
//! or an event stream, resumed if it closes early) or a line on a stdio server's pipes
//! (`stdio_rpc`); requests given up on are cancelled with the server.

use super::rpc::{is_request, Incoming};
use super::{modern, sse};
use super::{
    server_error, ClientSession, Connected, DEFAULT_RETRY_MS, END_TIMEOUT, LIST_CHANGED, MAX_BYTES,
    MAX_RESUMES, USER_AGENT,
};
use crate::net::{HttpRequest, HttpResponse, NetError, Purpose, SendOptions};
use crate::registry::McpServer;
use crate::templates;
use crate::tools::{ErrorKind, ToolEnv, ToolError};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Longest wait for the session's standalone stream to open before a call is sent.
const STANDALONE_WAIT: Duration = Duration::from_secs(2);

/// The result of a response, or its JSON-RPC error as a tool error.
pub(super) fn result_of(
    server: &McpServer,
    method: &str,
    message: Value,
) -> Result<Value, ToolError> {
    if let Some(err) = message.get("error") {
        let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
        let text = err.get("message").and_then(Value::as_str).unwrap_or("");
        // -32602: invalid params — the server refused the arguments.
        let kind = if code == -32602 {
            ErrorKind::InvalidArguments
        } else {
            ErrorKind::ExecutionError
        };
        return Err(ToolError::new(
            kind,
            format!(
                "MCP server `{}` refused `{method}` (error {code}): {text}",
                server.name
            ),
        ));
    }
    match message.get("result") {
        Some(r) => Ok(r.clone()),
        None => Err(server_error(
            server,
            format!("answered `{method}` without a result"),
        )),
    }
}

/// A request whose caller went away before its answer (the run was interrupted, or the engine
/// gave up on the call): noted in the session, so the server is told at the next chance.
pub(super) struct InFlight<'s> {
    session: &'s ClientSession,
    id: u64,
    open: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.open {
            if let Ok(mut a) = self.session.abandoned.lock() {
                a.push(self.id);
            }
        }
    }
}

/// A `tools/call` in flight over HTTP, known to its session: what the session's own stream (a
/// GET held open by whichever call opened it) carries about this call reaches it, not the
/// call that happens to read that stream.
pub(super) struct Inbox<'s> {
    session: &'s ClientSession,
    id: u64,
    rx: tokio::sync::Mutex<tokio::sync::mpsc::Receiver<Value>>,
}

/// Where a message from the session's own stream goes.
enum Route {
    Mine,
    Other(tokio::sync::mpsc::Sender<Value>),
    Nobody,
}

/// Messages about one call waiting for it, at most (past that, dropped: they are only events).
const INBOX_KEPT: usize = 256;

impl<'s> Inbox<'s> {
    fn open(session: &'s ClientSession, id: u64) -> Inbox<'s> {
        let (tx, rx) = tokio::sync::mpsc::channel(INBOX_KEPT);
        if let Ok(mut calls) = session.inboxes.lock() {
            calls.push((id, tx));
        }
        Inbox {
            session,
            id,
            rx: tokio::sync::Mutex::new(rx),
        }
    }

    /// Progress goes to the call whose `progressToken` it names (toolrun sets it to the call's
    /// request id); a log line or a request carries no relation on a stream of its own, and
    /// goes with the earliest call in flight, as over stdio.
    fn route(&self, message: &Value) -> Route {
        let Ok(calls) = self.session.inboxes.lock() else {
            return Route::Mine;
        };
        let target =
            if message.get("method").and_then(Value::as_str) == Some("notifications/progress") {
                let token = message.pointer("/params/progressToken");
                calls.iter().find(|(id, _)| token == Some(&json!(id)))
            } else {
                calls.iter().min_by_key(|(id, _)| *id)
            };
        match target {
            Some((id, _)) if *id == self.id => Route::Mine,
            Some((_, tx)) => Route::Other(tx.clone()),
            None => Route::Nobody,
        }
    }

    async fn next(inbox: Option<&Inbox<'_>>) -> Option<Value> {
        match inbox {
            Some(i) => i.rx.lock().await.recv().await,
            None => std::future::pending().await,
        }
    }
}

impl Drop for Inbox<'_> {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.session.inboxes.lock() {
            calls.retain(|(id, _)| *id != self.id);
        }
    }
}

/// Tells the server about every request of this session left behind (see [`InFlight`]).
pub(super) async fn cancel_abandoned(rpc: &Rpc<'_, '_>, session: &ClientSession) {
    let ids = match session.abandoned.lock() {
        Ok(mut a) => std::mem::take(&mut *a),
        Err(_) => return,
    };
    for id in ids {
        rpc.cancel(
            id,
            "the call was abandoned (interrupted, or past its timeout)",
        )
        .await;
    }
}

/// JSON-RPC over streamable HTTP: one POST per message, the reply JSON or an event stream.
#[derive(Clone, Copy)]
pub(super) struct Rpc<'a, 'e> {
    pub(super) server: &'a McpServer,
    pub(super) env: &'a ToolEnv<'e>,
    pub(super) conn: Option<&'a Connected>,
    pub(super) timeout: Duration,
}

impl Rpc<'_, '_> {
    /// A request and its result, with the reply's headers (the session id comes in one).
    /// Requests the server sends meanwhile are answered (see `rpc`), a stream that closes
    /// before the response is resumed, and a request left behind (a timeout, Ctrl-C) is
    /// cancelled.
    pub(super) async fn exchange(
        &self,
        session: &ClientSession,
        method: &str,
        mut params: Value,
    ) -> Result<(Value, HttpResponse), ToolError> {
        // Ids count per session from 1, in the order requests are made: a replay sends the
        // same ids, so requests compare equal.
        let id = session.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        let tool = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if method == "tools/call" {
            // Progress notifications name the request they are about by this token.
            params["_meta"] = json!({ "progressToken": id });
        }
        if let Some(c) = self.conn.filter(|c| modern::is_modern(&c.protocol)) {
            modern::add_meta(&mut params, &c.protocol);
        }
        let incoming = Incoming {
            server: self.server,
            env: self.env,
            tool: &tool,
        };
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let mut in_flight = InFlight {
            session,
            id,
            open: true,
        };
        let inbox = (method == "tools/call" && self.server.stdio.is_none())
            .then(|| Inbox::open(session, id));
        let sent = self
            .streamed(method, &body, id, &incoming, inbox.as_ref())
            .await;
        in_flight.open = false;
        let (mut resp, answered) = match sent {
            Err(e) if e.kind == ErrorKind::Timeout => {
                self.cancel(id, &format!("no answer within {:?}", self.timeout))
                    .await;
                return Err(e);
            }
            other => other?,
        };
        let message: Value = serde_json::from_slice(&resp.body).map_err(|_| {
            self.fail(format!(
                "answered `{method}` with something that is not a JSON-RPC message: {}",
                excerpt(&resp.body)
            ))
        })?;
        resp.body.clear();
        let message = self
            .leftovers(session, method, message, &answered, &incoming)
            .await?;
        if message.get("id") != Some(&json!(id)) {
            return Err(self.fail(format!(
                "answered `{method}` (request id {id}) with a response for id {}: a server must answer each request under its own id",
                message.get("id").map(Value::to_string).unwrap_or_else(|| "none".into())
            )));
        }
        result_of(self.server, method, message).map(|r| (r, resp))
    }

    /// The response among the messages a reply carried (see `sse::to_json`): requests the
    /// server sent that were not answered as they arrived (a replay) are answered now, and a
    /// change of the tool list is noted. A replay's answer must be the recorded one: one that
    /// differs (the entry's `elicitation:` changed since the recording) fails the call, and the
    /// replay with it, as a differing argument does; a stdio server's recording made before its
    /// answers were recorded has none to compare with (see `recorded_without_answers`).
    pub(super) async fn leftovers(
        &self,
        session: &ClientSession,
        method: &str,
        message: Value,
        answered: &[String],
        incoming: &Incoming<'_, '_>,
    ) -> Result<Value, ToolError> {
        let Value::Array(items) = message else {
            return Ok(message);
        };
        let mut response = Value::Null;
        for m in items {
            if is_request(&m) {
                if !answered.contains(&m["id"].to_string()) {
                    let reply = incoming.request(&m);
                    if self.recorded_without_answers() {
                        // A run adding to that recording (`--record-mode new`) writes the
                        // answer given now, so its fixture has an answer to every request.
                        if let Some(record) = self.answer_recorder() {
                            record(reply.to_string().as_bytes());
                        }
                        continue;
                    }
                    let sent = self.post("a server request", &reply).await;
                    if sent.is_err() && !self.env.transport.may_go_live() {
                        // Not `fail`: the server's URL (a stdio command line) would push the
                        // point past what a report's diff shows of the message.
                        return Err(ToolError::new(ErrorKind::ExecutionError, format!(
                            "MCP server `{}` sent `{}` during `{}`, and this replay answers it with {} where the recording has another answer (see the replay's report): the entry's `elicitation:` (or toolrun) changed since it was recorded. Record the fixture again if the new answer is meant",
                            self.server.name,
                            m["method"].as_str().unwrap_or_default(),
                            incoming.tool,
                            reply.get("result").or_else(|| reply.get("error")).unwrap_or(&Value::Null),
                        )));
                    }
                }
            } else if m.get("method").and_then(Value::as_str) == Some(LIST_CHANGED) {
                // A listing that came with the notice is itself the new list (a stdio server
                // may say so as it starts, before it answers the first `tools/list`).
                if method != "tools/list" {
                    session.list_changed.store(true, Ordering::SeqCst);
                }
            } else if m.get("method").is_none() {
                response = m;
            }
        }
        Ok(response)
    }

    /// Sends a request and reads its reply: over stdio the process answers; over HTTP a POST,
    /// whose event stream is watched as it arrives and resumed with GET and `Last-Event-ID`
    /// (after the `retry:` the server asked for) when it closes before the response. Returns
    /// the reply and the ids of the server requests answered meanwhile.
    pub(super) async fn streamed(
        &self,
        method: &str,
        body: &Value,
        id: u64,
        incoming: &Incoming<'_, '_>,
        inbox: Option<&Inbox<'_>>,
    ) -> Result<(HttpResponse, Vec<String>), ToolError> {
        if let Some(cmd) = &self.server.stdio {
            return self.stdio_call(method, cmd, body, incoming).await;
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        let req = self.build("POST", Some(body)).await?;
        let standalone = method == "tools/call"
            && self.env.transport.may_go_live()
            && self.conn.is_some_and(|c| c.session_id.is_some());
        let (mut resp, mut answered) = self
            .watched(method, req, (id, inbox), incoming, self.timeout, standalone)
            .await?;
        let mut resumed = 0;
        let mut last_id = None;
        while resp
            .header("content-type")
            .is_some_and(|c| c.to_ascii_lowercase().starts_with("text/event-stream"))
        {
            let (id_seen, retry) = sse::resume_point(&resp.body);
            last_id = id_seen.or(last_id);
            let Some(from) = last_id.clone() else {
                return Err(self.fail(format!("closed its event stream before answering `{method}`, with no event id to resume it from")));
            };
            if resumed == MAX_RESUMES {
                return Err(self.fail(format!(
                    "closed its event stream {MAX_RESUMES} times before answering `{method}`"
                )));
            }
            resumed += 1;
            let wait = Duration::from_millis(retry.unwrap_or(DEFAULT_RETRY_MS));
            self.env.transport.pause(wait).await;
            let req = self.stream_request(Some(from)).await?;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let (more, also) = self
                .watched(method, req, (id, inbox), incoming, left, false)
                .await?;
            resp = more;
            answered.extend(also);
        }
        Ok((resp, answered))
    }

    /// One HTTP request whose event stream is read as it arrives: the server's requests are
    /// answered at once (each answer a POST of its own), while the stream goes on. With
    /// `standalone`, the session's own stream (GET) is open meanwhile, as the official clients
    /// keep it: a server may send its requests there rather than on the call's stream. What
    /// comes there is answered but not recorded (a replay has the call's reply, not that stream),
    /// and goes to the call it is about (see [`Inbox::route`]); what other calls' streams
    /// carry about this one comes through its `inbox`.
    pub(super) async fn watched(
        &self,
        method: &str,
        req: HttpRequest,
        (id, inbox): (u64, Option<&Inbox<'_>>),
        incoming: &Incoming<'_, '_>,
        timeout: Duration,
        standalone: bool,
    ) -> Result<(HttpResponse, Vec<String>), ToolError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let watch = sse::Watch::new(json!(id), tx, incoming);
        let on_chunk = |c: &[u8]| watch.feed(c);
        let (gtx, mut grx) = tokio::sync::mpsc::unbounded_channel();
        let gwatch = sse::Watch::new(Value::Null, gtx, incoming).notes_too();
        let opened = tokio::sync::Notify::new();
        let g_chunk = |c: &[u8]| {
            opened.notify_one();
            gwatch.feed(c)
        };
        let get = async {
            if standalone {
                self.standalone(&g_chunk, timeout).await;
            }
            opened.notify_one(); // refused (405) or ended: nothing to wait for
            std::future::pending::<()>().await
        };
        tokio::pin!(get);
        if standalone {
            // A request the server sends before it has the stream would be lost.
            tokio::select! {
                _ = opened.notified() => {}
                _ = &mut get => {}
                _ = tokio::time::sleep(STANDALONE_WAIT) => {}
            }
        }
        let opts = SendOptions {
            timeout,
            max_bytes: MAX_BYTES,
            progress: None,
            on_chunk: Some(&on_chunk),
            reshape: Some(sse::to_json),
        };
        let send = self.send_http(&req, opts);
        tokio::pin!(send);
        let mut answered = Vec::new();
        let sent = loop {
            tokio::select! {
                sent = &mut send => break sent,
                Some(request) = rx.recv() => {
                    let reply = incoming.request(&request);
                    answered.push(request["id"].to_string());
                    let _ = self.post("a server request", &reply).await;
                }
                Some(message) = grx.recv() => {
                    self.on_session_stream(message, inbox, incoming).await;
                }
                Some(message) = Inbox::next(inbox) => forwarded(incoming, &message),
                _ = &mut get => {}
            }
        };
        // What reached this call's inbox before its response is the call's too.
        if let Some(mut rx) = inbox.and_then(|i| i.rx.try_lock().ok()) {
            while let Ok(message) = rx.try_recv() {
                forwarded(incoming, &message);
            }
        }
        let resp = sent.map_err(|e| self.net_error(method, e))?;
        self.checked(method, resp).map(|r| (r, answered))
    }

    /// A message on the session's own stream: a request is answered at once (not recorded),
    /// and the message is an event of the call it is about.
    async fn on_session_stream(
        &self,
        message: Value,
        inbox: Option<&Inbox<'_>>,
        incoming: &Incoming<'_, '_>,
    ) {
        let route = inbox.map_or(Route::Mine, |i| i.route(&message));
        if is_request(&message) {
            let reply = match route {
                Route::Mine => incoming.request(&message),
                _ => super::rpc::answer(&message, self.server.elicitation),
            };
            self.send_quietly(&reply).await;
        } else if matches!(route, Route::Mine) {
            incoming.notification(&message);
        }
        if let Route::Other(tx) = route {
            let _ = tx.try_send(message);
        }
    }

    /// The session's standalone stream (GET without `Last-Event-ID`), read by `on_chunk` until
    /// the caller stops polling; never recorded, and not opened in a replay.
    async fn standalone(&self, on_chunk: &(dyn Fn(&[u8]) -> bool + Sync), timeout: Duration) {
        let Ok(req) = self.stream_request(None).await else {
            return;
        };
        // A recorded session is opened live by a call, not by its stream: until a call goes
        // live, the server knows no session to stream.
        let Ok(Some(req)) = self.live_request(&req, false).await else {
            return;
        };
        let req = Box::pin(self.authorized_quietly(&req)).await;
        let opts = SendOptions {
            timeout,
            max_bytes: MAX_BYTES,
            progress: None,
            on_chunk: Some(on_chunk),
            reshape: None,
        };
        let _ = self
            .env
            .transport
            .send_unrecorded(Purpose::Mcp(&self.server.name), &req, opts)
            .await;
    }

    /// A GET for an event stream: the session's own, or one resumed after `last_event`.
    async fn stream_request(&self, last_event: Option<String>) -> Result<HttpRequest, ToolError> {
        let mut req = self.build("GET", None).await?;
        req.headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case("accept"));
        req.headers
            .push(("Accept".into(), "text/event-stream".into()));
        if let Some(from) = last_event {
            req.headers.push(("Last-Event-ID".into(), from));
        }
        Ok(req)
    }

    /// A message that changes nothing a run observes (an answer on the standalone stream, a
    /// cancellation): sent live, never recorded, not sent in a replay. Best effort.
    async fn send_quietly(&self, body: &Value) -> bool {
        let Ok(req) = self.build("POST", Some(body)).await else {
            return false;
        };
        let Ok(Some(req)) = self.live_request(&req, false).await else {
            return false;
        };
        self.send_unrecorded(&req, END_TIMEOUT, 64 << 10)
            .await
            .is_some()
    }

    /// Tells the server a request will not be waited for (`notifications/cancelled`). Best
    /// effort and never recorded: a replay has no server to tell.
    pub(super) async fn cancel(&self, id: u64, reason: &str) {
        let body = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": id, "reason": reason } });
        let told = match self.server.stdio {
            Some(_) => self.tell_stdio(&body).await,
            None => self.send_quietly(&body).await,
        };
        if told {
            self.env.events.emit_with(
                "mcp_cancelled",
                || json!({ "server": self.server.name, "request_id": id, "reason": reason }),
            );
        }
    }

    pub(super) async fn notify(&self, method: &str) -> Result<(), ToolError> {
        let body = json!({ "jsonrpc": "2.0", "method": method });
        self.post(method, &body).await.map(|_| ())
    }

    pub(super) async fn post(&self, method: &str, body: &Value) -> Result<HttpResponse, ToolError> {
        let opts = SendOptions {
            timeout: self.timeout,
            max_bytes: MAX_BYTES,
            progress: None,
            on_chunk: None,
            reshape: Some(sse::to_json),
        };
        let sent = match &self.server.stdio {
            Some(cmd) => self.send_stdio(cmd, body, opts, None).await?,
            None => {
                let req = self.build("POST", Some(body)).await?;
                self.send_http(&req, opts).await
            }
        };
        let resp = sent.map_err(|e| self.net_error(method, e))?;
        self.checked(method, resp)
    }

    /// Renders `list` (a server's headers or environment) over the run's secrets, in order,
    /// stopping at the first that fails: its error is the last item, so a caller reports
    /// problems in the order it meets them.
    pub(super) async fn render_with_secrets<'l>(
        &self,
        list: &'l [(String, templates::TemplateId)],
    ) -> Vec<(&'l String, Result<String, templates::RenderError>)> {
        // Only the secrets these templates name (issue 36 §2), never the whole map.
        let named = (self.env.registry.templates).secrets_named(list.iter().map(|(_, id)| id));
        let data =
            json!({ "secrets": self.env.secrets.as_json_of(&|n| named.iter().any(|s| s == n)) });
        let ctx = templates::Ctx::new(&data);
        let mut rendered = Vec::with_capacity(list.len());
        for (name, id) in list {
            let value = self.env.registry.templates.render_text(id, &ctx).await;
            let failed = value.is_err();
            rendered.push((name, value));
            if failed {
                break;
            }
        }
        rendered
    }

    /// A reply past the size cap or with an HTTP error status is an error naming the server.
    pub(super) fn checked(
        &self,
        method: &str,
        resp: HttpResponse,
    ) -> Result<HttpResponse, ToolError> {
        if resp.truncated {
            return Err(self.fail(format!(
                "answered `{method}` with more than {MAX_BYTES} bytes"
            )));
        }
        if !(200..300).contains(&resp.status) {
            let hint = match resp.status {
                401 | 403 if self.server.oauth.is_some() => {
                    " (its OAuth token was refused; `toolrun auth status` shows what is stored)"
                }
                401 | 403 => {
                    " (check the credentials in `headers:`, or give the entry `auth: { oauth: {} }` if it uses OAuth)"
                }
                404 if self.conn.is_some_and(|c| c.session_id.is_some()) => {
                    " (the server ended the session)"
                }
                _ => "",
            };
            return Err(ToolError::new(
                ErrorKind::HttpStatus,
                format!(
                    "MCP server `{}` answered `{method}` with HTTP {}{hint}: {}",
                    self.server.name,
                    resp.status,
                    excerpt(&resp.body)
                ),
            )
            .with_details(json!({ "status": resp.status, "url": self.server.url })));
        }
        Ok(resp)
    }

    pub(super) async fn build(
        &self,
        method: &str,
        body: Option<&Value>,
    ) -> Result<HttpRequest, ToolError> {
        let mut headers = vec![
            (
                "Accept".to_string(),
                "application/json, text/event-stream".to_string(),
            ),
            ("User-Agent".to_string(), USER_AGENT.to_string()),
        ];
        if body.is_some() {
            headers.insert(0, ("Content-Type".into(), "application/json".into()));
        }
        if let Some(c) = self.conn {
            headers.push(("MCP-Protocol-Version".into(), c.protocol.clone()));
            if let Some(id) = &c.session_id {
                headers.push(("Mcp-Session-Id".into(), id.clone()));
            }
            if let (true, Some(body)) = (modern::is_modern(&c.protocol), body) {
                let schema = self.listed_schema(body);
                headers.extend(modern::standard_headers(body, schema.as_ref()));
            }
        }
        for (name, value) in self.render_with_secrets(&self.server.headers).await {
            let value = value.map_err(|e| {
                crate::tools::render_error(
                    &format!(
                        "could not build header `{name}` of MCP server `{}`",
                        self.server.name
                    ),
                    e,
                )
            })?;
            if value.trim().is_empty() {
                continue;
            }
            if reqwest::header::HeaderValue::from_str(&value).is_err() {
                return Err(ToolError::new(
                    ErrorKind::ExecutionError,
                    format!("header `{name}` of MCP server `{}` would contain a line break or control character", self.server.name),
                ));
            }
            headers.push((name.clone(), value));
        }
        Ok(HttpRequest {
            method: method.into(),
            url: self.server.url.clone(),
            headers,
            body: body.map(|b| b.to_string().into_bytes()),
        })
    }

    /// The input schema the server listed for the tool a `tools/call` body calls.
    fn listed_schema(&self, body: &Value) -> Option<Value> {
        let name = body.pointer("/params/name").and_then(Value::as_str)?;
        let session = self
            .env
            .transport
            .session::<ClientSession>(&self.server.name);
        let schemas = session.schemas.lock().ok()?;
        schemas
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.clone())
    }

    pub(super) fn fail(&self, what: String) -> ToolError {
        server_error(self.server, what)
    }

    pub(super) fn net_error(&self, method: &str, e: NetError) -> ToolError {
        let name = &self.server.name;
        match e {
            NetError::Timeout => ToolError::new(
                ErrorKind::Timeout,
                format!(
                    "MCP server `{name}` did not answer `{method}` within {:.1}s (the request was cancelled); raise `{key}:` of its entry if it needs longer",
                    self.timeout.as_secs_f64(),
                    // A call's own timeout is its tool's; connecting has its own bound.
                    key = match method {
                        "tools/call" => "timeout",
                        _ => "startup_timeout",
                    },
                ),
            ),
            NetError::NotRecorded(m) => ToolError::new(
                ErrorKind::Network,
                format!("MCP server `{name}`: no recorded exchange answers `{method}` ({m})"),
            ),
            NetError::Connect(m) | NetError::Io(m) if self.server.stdio.is_some() => {
                ToolError::new(
                    ErrorKind::Network,
                    format!(
                        "MCP server `{name}` ({}) did not answer `{method}`: {m}",
                        self.server.url
                    ),
                )
            }
            NetError::Connect(m) | NetError::Io(m) => ToolError::new(
                ErrorKind::Network,
                format!(
                    "cannot reach MCP server `{name}` at {}: {m}",
                    self.server.url
                ),
            ),
        }
    }
}

/// A message another call read about this one: an event of this call (a request among them
/// was answered by the call that read it).
fn forwarded(incoming: &Incoming<'_, '_>, message: &Value) {
    if is_request(message) {
        incoming.request(message);
    } else {
        incoming.notification(message);
    }
}

pub(super) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut s: String = text.chars().take(300).collect();
    if text.chars().count() > 300 {
        s.push('…');
    }
    s
}
