//! A registry served over MCP. `tools/list` is what `toolrun tools --format mcp` prints;
//! `tools/call` goes through [`Engine::call_in_session`], so validation, policy, limits, loop
//! detection, faults, timeouts, truncation and masking are the loop's own. Each MCP session
//! (each client connection) gets its own limits and loop counters, as a run does.

use super::cancel::{cancellable, InFlight};
use super::confirm::{self, Confirmation};
use super::record::{CallLog, LoggedCall};
use super::result::{error_result, to_mcp_result, CallResult};
pub(crate) use super::served::{Origin, Running, Served, Stream};
use super::spans::served_request;
use super::task_calls;
use crate::engine::{CallOutcome, CallSession};
use crate::net::Transport;
use crate::telemetry::mcp as telemetry;
use crate::tools::notify::{self, Notice, Notifier};
use crate::trace::PendingCall;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CancelledNotificationParam, GetTaskParams, GetTaskResult, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, UpdateTaskParams, TASKS_EXTENSION_ID,
};
use rmcp::service::{NotificationContext, Peer, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// One MCP session: its own limits and loop counters over the shared registry.
#[derive(Clone)]
pub(crate) struct ServedSession {
    served: Arc<Served>,
    /// Numbered at the first call: clients probe with throwaway sessions that never call.
    id: Arc<std::sync::OnceLock<Arc<str>>>,
    state: Arc<CallSession>,
    /// The least severe log level the client wants (`logging/setLevel`; 0, debug, until then).
    log_level: Arc<AtomicUsize>,
    /// This client's own transport, with its own sessions with the remote MCP servers of
    /// `kind: mcp` tools, made at its first call: a 2026-07-28 request calls through the
    /// server's, and a client that only probes calls nothing (see [`Upstream`]).
    upstream: Arc<std::sync::OnceLock<Upstream>>,
    /// The client, once it has initialised: what calls answered without rmcp (`direct`)
    /// notify and ask through.
    peer: Arc<std::sync::OnceLock<Peer<RoleServer>>>,
    /// Whom the access token of its `initialize` named (`serve.auth`).
    pub(crate) subject: Arc<std::sync::OnceLock<Arc<str>>>,
    /// Its calls rmcp answers still running, for its client's `notifications/cancelled`.
    requests: InFlight<rmcp::model::RequestId>,
}

/// Dropped with the last clone of a client session's handler, which rmcp drops when the session
/// ends (the client's DELETE, `--session-idle`, eviction by `--max-sessions`): its sessions with
/// remote MCP servers end then (a DELETE upstream, a stdio server's process group ended), and
/// its transport is let go, so neither processes nor memory grow with the sessions served.
struct Upstream {
    served: Arc<Served>,
    transport: Arc<Transport>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        // Outside a runtime (`serve` is over) there is nothing left to end: `serve` ended them.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (served, transport) = (self.served.clone(), self.transport.clone());
        rt.spawn(async move {
            crate::tools::mcp::end_all(&served.upstream_env(&transport)).await;
            if let Ok(mut all) = served.upstream.lock() {
                all.retain(|t| !Arc::ptr_eq(t, &transport));
            }
        });
    }
}

impl Upstream {
    /// A transport of the client's own, registered for `serve` to end its sessions at the end.
    fn new(served: &Arc<Served>) -> Upstream {
        let transport = Arc::new(served.setup.transport.scoped());
        if let Ok(mut all) = served.upstream.lock() {
            all.push(transport.clone());
        }
        Upstream {
            served: served.clone(),
            transport,
        }
    }
}

impl ServedSession {
    pub(crate) fn new(served: &Arc<Served>) -> ServedSession {
        ServedSession {
            upstream: Arc::default(),
            served: served.clone(),
            id: Arc::new(std::sync::OnceLock::new()),
            state: Arc::new(CallSession::served(served.registry.serve)),
            log_level: Arc::new(AtomicUsize::new(0)),
            peer: Arc::new(std::sync::OnceLock::new()),
            subject: Arc::default(),
            requests: InFlight::default(),
        }
    }

    /// A replayed session, under the name it was recorded with (a live session is numbered
    /// when it first calls, which a replay running calls one by one need not repeat).
    pub(crate) fn named(served: &Arc<Served>, id: &str) -> ServedSession {
        let session = ServedSession::new(served);
        let _ = session.id.set(id.into());
        session
    }

    /// A replayed 2026-07-28 call of an authenticated subject: counted in `counts`, the
    /// subject's as the replay rebuilt them, as the recorded call was counted in its subject's.
    pub(crate) fn counted_in(self, subject: &str, counts: Arc<CallSession>) -> ServedSession {
        let _ = self.subject.set(subject.into());
        ServedSession {
            state: counts,
            ..self
        }
    }

    /// The client, once it has initialised.
    pub(crate) fn peer(&self) -> Option<&Peer<RoleServer>> {
        self.peer.get()
    }

    pub(crate) fn served(&self) -> &Served {
        &self.served
    }

    pub(crate) fn subject(&self) -> Option<&str> {
        self.subject.get().map(|s| &**s)
    }

    /// The tools this request's caller may see: with `serve.auth`, those its token's scopes
    /// cover (`tools/list` shows them, and only they are suggested for a mistyped name).
    fn visible_tools<'s>(
        &'s self,
        context: &'s RequestContext<RoleServer>,
    ) -> impl Iterator<Item = &'s rmcp::model::Tool> + 's {
        let parts = context.extensions.get::<hyper::http::request::Parts>();
        let principal = parts.and_then(|p| p.extensions.get::<Arc<super::auth::Principal>>());
        let registry = &self.served.registry;
        self.served.tools.iter().filter(move |t| {
            principal.is_none_or(|p| registry.tool(&t.name).is_some_and(|t| p.has_all(&t.scopes)))
        })
    }

    fn id(&self) -> &str {
        self.numbered()
    }

    /// The session's id, shared with the engine for its calls' events.
    fn numbered(&self) -> &Arc<str> {
        self.id.get_or_init(|| {
            let n = self.served.sessions.fetch_add(1, Ordering::Relaxed) + 1;
            format!("session_{n}").into()
        })
    }

    /// One try of a call through the engine, counted in this session.
    /// `approved_once`: the client's user confirmed this call (elicitation).
    async fn attempt(
        &self,
        name: &str,
        arguments: &Value,
        (now_unix_ms, admitted): (i64, &AtomicU32),
        approved_once: bool,
        notify: Option<&Arc<Notifier>>,
    ) -> CallOutcome {
        let served = &*self.served;
        let mut engine = served.setup.engine(&served.registry);
        // A 2026-07-28 request has no session to keep remote servers' sessions for: it uses the
        // server's own (a stdio server would otherwise start for each request).
        if super::stateless::current().is_none() {
            let upstream = self.upstream.get_or_init(|| Upstream::new(&self.served));
            engine.transport = &upstream.transport;
        }
        let mut opts = served.setup.call_options();
        opts.now_unix_ms = now_unix_ms;
        if approved_once {
            opts.approvals.insert(name.to_string());
        }
        opts.notify = notify.cloned();
        opts.session = Some(self.numbered().clone());
        // The engine admits the call when first polled, before anything else of this thread
        // runs (the runtime has one): as the next try. A call cut off at shutdown is recorded
        // in that place.
        let counts = self.counts();
        admitted.store(counts.tries() + 1, Ordering::Relaxed);
        // Boxed: the engine's future is kilobytes, which every future wrapped around it (the
        // answer's, the select on shutdown, a 2026-07-28 request's scope) would copy as it is
        // made and moved; one allocation a call costs less than those copies.
        Box::pin(engine.call_in_session(&counts, name, arguments.clone(), &opts)).await
    }

    /// Where a call is counted: in its session, or, for a 2026-07-28 request of an
    /// authenticated subject, in that subject's counts (else its request's own handler).
    fn counts(&self) -> Arc<CallSession> {
        let subjects = self.served.subjects.as_ref();
        match (subjects, self.subject(), super::stateless::current()) {
            (Some(subjects), Some(subject), Some(_)) => subjects.counts(subject),
            _ => self.state.clone(),
        }
    }

    /// The window of the subject's counts a call is counted in (see [`ServedSession::counts`]),
    /// `None` when it counts in its session: a recording keeps it, so that its replay counts
    /// the subject's calls together again.
    fn subject_window(&self) -> Option<Arc<str>> {
        let subjects = self.served.subjects.as_ref();
        match (subjects, self.subject(), super::stateless::current()) {
            (Some(subjects), Some(_), Some(_)) => Some(subjects.window_text().into()),
            _ => self.state.subject_window(),
        }
    }

    /// Whether a call of `name` can send its client anything before its result: a mock's
    /// `notify:` items, an HTTP tool's retries and downloads when the client asked for progress
    /// (`progress`), a remote MCP tool's. Nothing is set up to forward for the others.
    pub(crate) fn may_notify(&self, name: &str, progress: bool) -> bool {
        use crate::registry::ToolKind;
        match self.served.registry.tool(name).map(|t| &t.kind) {
            Some(ToolKind::Mock(responses)) => responses.iter().any(|r| r.notify.is_some()),
            Some(ToolKind::Http(_)) => progress,
            Some(ToolKind::Mcp(_)) => true,
            _ => false,
        }
    }

    /// Asks whoever can confirm a call that is waiting for a person; `None` when nobody can.
    async fn confirmation(
        &self,
        pending: &PendingCall,
        origin: Origin<'_>,
    ) -> Option<Confirmation> {
        // A 2026-07-28 request's client says in the request whether it can be asked.
        let one = super::stateless::current();
        match origin {
            Origin::Client(peer, ..)
                if one.as_ref().map_or_else(
                    || peer.is_some_and(confirm::client_can_confirm),
                    |o| o.can_confirm,
                ) =>
            {
                let served = &*self.served;
                let description = served
                    .registry
                    .tool(&pending.name)
                    .map(|t| t.description.as_str())
                    .unwrap_or_default();
                let mut form = confirm::request(pending, description);
                served.setup.redactor.value(&mut form);
                // 2026-07-28: the answer comes with the client's retry, or the form is asked
                // (in a task, through the task).
                if let Some(one) = one {
                    return one.ask(form).await;
                }
                Some(confirm::ask(peer?, form).await)
            }
            Origin::Client(..) => None,
            Origin::Recording { confirmation, .. } => confirmation,
        }
    }

    /// Runs one call and returns the MCP `CallToolResult` as JSON. Tool errors, rejections and
    /// missing approvals are results with `isError: true`, never protocol failures: the client's
    /// model reads them and can recover, as in a run. A call that needs confirmation is put to
    /// the client's user when the client can be asked (the session's lock is released while
    /// they decide), and runs once if they approve; admission is checked again then.
    pub(crate) async fn call(&self, name: &str, arguments: Value, origin: Origin<'_>) -> Value {
        self.answer(name, arguments, origin, false)
            .await
            .into_value()
    }

    /// [`ServedSession::call`], whose result may be [`CallResult::Text`] when `as_text`.
    pub(crate) async fn answer(
        &self,
        name: &str,
        arguments: Value,
        origin: Origin<'_>,
        as_text: bool,
    ) -> CallResult {
        let served = &*self.served;
        let _running = Running::new(&served.calls);
        let started = Instant::now();
        let now_unix_ms = match &origin {
            Origin::Recording { now_unix_ms, .. } => *now_unix_ms,
            Origin::Client(..) => served.setup.clock.now_unix_ms(),
        };
        // Notices go out in order, each before the result, sent as they come by a future that
        // runs beside the call (in the same task: a task spawned per call costs more).
        let (notify, forwarding) = match &origin {
            Origin::Client(peer, token, hangup, stream)
                if self.may_notify(name, token.is_some()) =>
            {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Notice>();
                let notify: Arc<Notifier> = Arc::new(move |n: Notice| {
                    let _ = tx.send(n);
                });
                let forwarding = super::notices::forward(
                    peer.cloned(),
                    token.clone(),
                    ((*hangup).cloned(), (*stream).cloned()),
                    // A 2026-07-28 request names its own level.
                    super::stateless::current().map_or_else(
                        || self.log_level.clone(),
                        |o| Arc::new(AtomicUsize::new(o.log_rank)),
                    ),
                    rx,
                );
                (Some(notify), Some(Box::pin(forwarding)))
            }
            _ => (None, None),
        };
        let arguments_ref = &arguments;
        let admitted = AtomicU32::new(0);
        let clock = (now_unix_ms, &admitted);
        let work = async move {
            let mut outcome = self
                .attempt(name, arguments_ref, clock, false, notify.as_ref())
                .await;
            let mut confirmation = None;
            if let Some(pending) = &outcome.pending {
                // Boxed, as the engine's call is: asking a client is a large future, and rare.
                confirmation = Box::pin(self.confirmation(pending, origin)).await;
                if confirmation.as_ref().is_some_and(Confirmation::granted) {
                    outcome = self
                        .attempt(name, arguments_ref, clock, true, notify.as_ref())
                        .await;
                }
            }
            // A confirmed call is admitted when approved: the session's other calls admitted
            // while its user thought come first, in the recording as in its replay.
            let seq = outcome.seq;
            // The forwarding ends once it has sent what the call reported.
            drop(notify);
            (outcome, confirmation, seq)
        };
        let joined = async {
            tokio::join!(work, async {
                if let Some(f) = forwarding {
                    f.await;
                }
            })
            .0
        };
        let ran = self.until_cut(joined).await;
        let (mut outcome, confirmation, seq) = match ran {
            Ok(ran) => ran,
            Err(why) => {
                let seq = admitted.load(Ordering::Relaxed);
                return self.cut_off(name, arguments, (now_unix_ms, seq), started, why);
            }
        };
        let mut response = match (&outcome.pending, &confirmation) {
            (Some(p), Some(answer)) => {
                let (kind, message) = answer.refusal(&p.name);
                CallResult::Json(error_result(kind, &message))
            }
            _ => to_mcp_result(&mut outcome, served.log.is_some(), as_text),
        };
        response.mask(&served.setup.redactor);
        served.setup.events.emit_with("mcp_call", || {
            json!({
                "session": self.id(),
                "subject": self.subject(),
                "name": name,
                "arguments": arguments,
                "is_error": response.is_error(),
                "kind": outcome.error.as_ref().map(|e| e.kind),
                "confirmation": confirmation.as_ref().map(|c| &c.action),
                "duration_ms": crate::trace::millis(started.elapsed()),
            })
        });
        // A call that asked for confirmation ran nothing: its retry is the call recorded.
        let asked = super::stateless::current().is_some_and(|o| o.was_asked());
        if served.log.is_some() && !asked {
            self.log(LoggedCall {
                session: self.id().to_string(),
                subject: self.subject().map(str::to_string),
                name: name.to_string(),
                arguments,
                now_unix_ms,
                confirmation,
                response: response.to_value(),
                result: outcome.result.take(),
                error: outcome.error.take(),
                seq,
                subject_window: self.subject_window(),
                cut_off: None,
            });
        }
        response
    }

    /// Runs `work` until it ends, or the server cuts calls off at shutdown, or the call's task
    /// or its request is cancelled (`Err` says which, as the call's answer or record tells).
    async fn until_cut<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> Result<T, &'static str> {
        let mut cut = self.served.cut.subscribe();
        let task = super::stateless::current().and_then(|o| o.task().cloned());
        let cancelled = async {
            match &task {
                Some(task) => task.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let request = super::cancel::current();
        let withdrawn = async {
            match &request {
                Some(request) => request.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            ran = work => Ok(ran),
            _ = cut.wait_for(|cut| *cut) => Err(CUT_AT_SHUTDOWN),
            _ = cancelled => Err(CANCELLED),
            _ = withdrawn => Err(WITHDRAWN),
        }
    }

    /// Keeps a call answered: a recording's line (each session's calls may end in another
    /// order than they were admitted; the line's `seq` says which, and reading the recording
    /// puts them back in order), or a replay's entry (its calls run one by one, in order).
    fn log(&self, call: LoggedCall) {
        match &self.served.log {
            Some(CallLog::Stream(file)) => file.write(super::record::line(&call)),
            Some(CallLog::Memory(log)) => {
                if let Ok(mut log) = log.lock() {
                    log.push(call);
                }
            }
            None => {}
        }
    }

    /// The answer of a call cut off before it ended (the tool's work is dropped): the server
    /// stopped, or its task was cancelled; `why` says which. Its record keeps it so: a replay
    /// knows it never ended.
    fn cut_off(
        &self,
        name: &str,
        arguments: Value,
        (now_unix_ms, seq): (i64, u32),
        started: Instant,
        why: &str,
    ) -> CallResult {
        let served = &*self.served;
        let response = CallResult::Json(error_result("execution_error", why));
        served.setup.events.emit_with("mcp_call", || {
            json!({
                "session": self.id(),
                "subject": self.subject(),
                "name": name,
                "arguments": arguments,
                "is_error": true,
                "cut_off": true,
                "cancelled": why != CUT_AT_SHUTDOWN,
                "duration_ms": crate::trace::millis(started.elapsed()),
            })
        });
        if served.log.is_some() {
            self.log(LoggedCall {
                session: self.id().to_string(),
                subject: self.subject().map(str::to_string),
                name: name.to_string(),
                arguments,
                now_unix_ms,
                confirmation: None,
                response: response.to_value(),
                result: None,
                error: None,
                seq,
                subject_window: self.subject_window(),
                cut_off: Some(
                    match why {
                        CUT_AT_SHUTDOWN => super::record::CUT_OFF,
                        _ => super::record::CANCELLED,
                    }
                    .to_string(),
                ),
            });
        }
        response
    }
}

/// Why a call was cut off, as its client is told and its record keeps.
const CUT_AT_SHUTDOWN: &str = "the server stopped before the call ended (it was cut off after the time calls get to end at shutdown); whether the tool finished its work is unknown";
const CANCELLED: &str = "the call's task was cancelled (tasks/cancel) before the call ended; whether the tool finished its work is unknown";
const WITHDRAWN: &str = "the client cancelled the call (notifications/cancelled, or it closed the request of a 2026-07-28 call) before it ended; whether the tool finished its work is unknown";

impl ServerHandler for ServedSession {
    #[allow(deprecated)] // logging: deprecated after 2025-11-25, the revisions served here have it
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        );
        // The tasks extension, where a tool runs as a task (`task:`); a 2026-07-28 client sees it.
        if self.served.has_tasks {
            let extensions = info.capabilities.extensions.get_or_insert_default();
            extensions.insert(TASKS_EXTENSION_ID.into(), Default::default());
        }
        info.server_info.name = "toolrun".into();
        info.server_info.version = env!("CARGO_PKG_VERSION").into();
        info.server_info.title = Some(self.served.registry.name.clone());
        info.instructions = self.served.registry.description.clone();
        info
    }

    /// Up to 2026-07-28, negotiated per request: a session of 2025-11-25 or before counts limits
    /// and loop detection per session; a 2026-07-28 request, which has none, per request.
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let start = crate::telemetry::clock();
        context.peer.set_peer_info(request.clone());
        let _ = self.peer.set(context.peer.clone());
        let parts = context.extensions.get::<hyper::http::request::Parts>();
        if let Some(p) = parts.and_then(|p| p.extensions.get::<Arc<super::auth::Principal>>()) {
            let _ = self.subject.set(p.subject.as_str().into());
        }
        // A session has no tasks here: the extension is 2026-07-28's (its calls run at once).
        let result = self.negotiate_initialize(&request).map(|mut r| {
            if let Some(e) = r.capabilities.extensions.as_mut() {
                e.remove(TASKS_EXTENSION_ID);
            }
            r.capabilities.extensions = r.capabilities.extensions.filter(|e| !e.is_empty());
            r
        });
        if let Some(start) = start {
            let mut req = served_request(&context, "initialize", None, start, None);
            req.protocol_version = Some(request.protocol_version.to_string());
            let answer = match &result {
                Ok(_) => telemetry::Answer::Result(None),
                Err(e) => telemetry::Answer::Error(e.code.0, &e.message),
            };
            telemetry::served(&req, None, answer, &self.served.setup.redactor);
        }
        result
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if let Some(start) = crate::telemetry::clock() {
            let req = served_request(&context, "tools/list", None, start, None);
            telemetry::served(
                &req,
                None,
                telemetry::Answer::Result(None),
                &self.served.setup.redactor,
            );
        }
        let tools = self.visible_tools(&context).cloned().collect();
        let stateless = super::stateless::is_stateless(&context);
        Ok(super::stateless::listing(tools, stateless))
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let name = serde_json::to_value(request.level).unwrap_or_default();
        let rank = notify::rank(name.as_str().unwrap_or("debug"));
        self.log_level.store(rank, Ordering::Relaxed);
        Ok(())
    }

    /// 2026-07-28 `subscriptions/listen` is acknowledged; nothing changes while serve runs (the
    /// tool list is fixed), so no notification follows. Each stream holds a connection, which
    /// `--max-connections` bounds, and ends when its client goes or serve stops.
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(requested.clone())
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.served.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let start = crate::telemetry::clock();
        // An unknown tool is the protocol error the specification names (-32602); arguments
        // that do not fit stay a tool error the client's model can correct (SEP-1303).
        if self.served.registry.tool(&request.name).is_none() {
            // Only names the caller may see: a suggestion must not reveal a tool its scopes hide.
            let visible = self.visible_tools(&context).map(|t| t.name.as_ref());
            let hint = crate::diag::did_you_mean(&request.name, visible)
                .map(|h| format!("; {h}"))
                .unwrap_or_default();
            let error = ErrorData::invalid_params(
                format!(
                    "unknown tool `{}`{hint}; `tools/list` names the tools this server has",
                    request.name
                ),
                None,
            );
            if let Some(start) = start {
                let req = served_request(&context, "tools/call", Some(&request.name), start, None);
                let answer = telemetry::Answer::Error(error.code.0, &error.message);
                telemetry::served(&req, None, answer, &self.served.setup.redactor);
            }
            return Err(error);
        }
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let stateless = super::stateless::is_stateless(&context);
        let parts = context.extensions.get::<hyper::http::request::Parts>();
        let principal = parts.and_then(|p| p.extensions.get::<Arc<super::auth::Principal>>());
        let subject = principal.map(|p| p.subject.as_str());
        // A request without a session (MCP 2026-07-28) names its subject itself.
        if let Some(s) = subject {
            let _ = self.subject.set(s.into());
        }
        let mut found = match stateless {
            true => {
                let key = &self.served.state_key;
                let found = super::stateless::retry(key, &context, &request, (&arguments, subject));
                Some(found?)
            }
            false => None,
        };
        // Only a spec with `task:` tools pays for what a task's call needs.
        if stateless && self.served.has_tasks {
            let (session, peer, name) = (self.clone(), context.peer.clone(), request.name.clone());
            // A task's call, as any: no progress token (the request that made it is answered).
            let run = move |one, arguments| async move {
                let origin = Origin::Client(Some(&peer), None, None, None);
                let work = session.call(&name, arguments, origin);
                super::stateless::scope(Some(one), work).await
            };
            let (call, at) = ((&request, &arguments), (&context, start));
            if let Some(answered) = task_calls::as_task(&self.served, call, &mut found, at, run) {
                return answered;
            }
        }
        let one = found.map(Arc::new);
        let token = context.meta.get_progress_token();
        let hangup = parts.and_then(|p| p.extensions.get::<super::resume::Hangup>());
        let origin = Origin::Client(Some(&context.peer), token, hangup, None);
        let work = self.call(&request.name, arguments.clone(), origin);
        let (cancel, _place) = super::cancel::of_request(&self.requests, &context, stateless);
        let work = cancellable(cancel, work);
        let response = super::stateless::scope(one.clone(), work).await;
        let key = &self.served.state_key;
        let call = super::state::Call(&request.name, &arguments, subject);
        let asked = one.and_then(|o| super::stateless::asked(key, &o, call));
        if let Some(start) = start {
            // A 2026-07-28 request has no session; its handler's number is no client's.
            let session = (!stateless).then(|| self.id());
            let req = served_request(&context, "tools/call", Some(&request.name), start, session);
            let asked = asked.as_ref().and_then(|a| serde_json::to_value(a).ok());
            let answer = telemetry::Answer::Result(Some(asked.as_ref().unwrap_or(&response)));
            telemetry::served(&req, Some(&arguments), answer, &self.served.setup.redactor);
        }
        if let Some(asked) = asked {
            return Ok(CallToolResponse::InputRequired(asked));
        }
        let mut result: CallToolResult = serde_json::from_value(response)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        // Required from protocol 2026-07-28 on; rmcp drops it again for older clients.
        result.result_type = Some(rmcp::model::ResultType::COMPLETE);
        Ok(CallToolResponse::Complete(result))
    }
    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        if let Some(id) = &notification.request_id {
            self.requests.cancel(id);
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        task_calls::task_request(&self.served, "tasks/get", &context, |tasks, subject| {
            tasks.get(&request.task_id, subject)
        })
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (id, answers) = (request.task_id, request.input_responses);
        task_calls::task_request(&self.served, "tasks/update", &context, |tasks, subject| {
            tasks.update(&id, subject, answers)
        })
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        task_calls::task_request(&self.served, "tasks/cancel", &context, |tasks, subject| {
            tasks.cancel(&request.task_id, subject)
        })
    }

    /// A request rmcp could not read as the method it names: tasks/get, tasks/update and
    /// tasks/cancel with params that do not fit (-32602); any other method is not served here.
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        Err(task_calls::misread(&request.method))
    }
}
