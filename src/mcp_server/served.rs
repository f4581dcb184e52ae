//! What every session of a served registry shares, in one process: the compiled spec and its
//! MCP tool list, the setup (network, secrets, events, approvals, clock), the call log, the
//! count of calls running (which shutdown waits for), the key 2026-07-28 request states are
//! signed with and the tasks (`tasks`). `server`'s handlers, one per session or 2026-07-28
//! request, hold it; where a call comes from ([`Origin`]) is said the same way to each.

use super::confirm::Confirmation;
pub(crate) use super::notices::Stream;
use super::record::{CallLog, LoggedCall};
use crate::net::Transport;
use crate::registry::Registry;
use crate::setup::Setup;
use rmcp::model::ProgressToken;
use rmcp::service::Peer;
use rmcp::RoleServer;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Everything every session shares: the compiled spec, the network door, secrets and logs.
pub(crate) struct Served {
    pub(crate) registry: Registry,
    /// Network, events, secrets, approvals (`--approve`) and the clock, read at each call.
    pub(crate) setup: Setup,
    pub(super) tools: Vec<rmcp::model::Tool>,
    /// Where every call goes when the session is recorded (`--record`) or replayed.
    pub(super) log: Option<CallLog>,
    /// Set once the server stops and has waited for the calls still running: those left are
    /// cut off, answered and recorded so.
    pub(super) cut: tokio::sync::watch::Sender<bool>,
    pub(super) sessions: AtomicU64,
    /// Calls running now, whether or not their client is still there: `serve` lets them end
    /// (and be recorded) before it ends the sessions.
    pub(super) calls: AtomicUsize,
    /// The transports of the client sessions still open: their own sessions with remote MCP
    /// servers. Each ends with its client session; those still open end when `serve` ends.
    pub(crate) upstream: Mutex<Vec<Arc<Transport>>>,
    /// Signs the `requestState` of 2026-07-28 confirmations (`--state-key-env`, else random).
    pub(crate) state_key: super::state::StateKey,
    /// The 2026-07-28 calls running as tasks, and the results of those that ended.
    pub(crate) tasks: super::tasks::Tasks,
    /// Some tool runs as a task (`task:`): the tasks extension is served.
    pub(crate) has_tasks: bool,
    /// With `serve.auth` over HTTP: each subject's counts for its 2026-07-28 requests.
    pub(crate) subjects: Option<super::subjects::Subjects>,
}

impl Served {
    pub(crate) fn new(
        registry: Registry,
        setup: Setup,
        log: Option<CallLog>,
    ) -> Result<Served, String> {
        let tools = registry
            .callable_tools()
            .map(|t| {
                serde_json::from_value(crate::registry::api_formats::mcp(t))
                    .map_err(|e| format!("tool `{}` is not a valid MCP tool: {e}", t.name))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let has_tasks = registry.callable_tools().any(|t| t.task.is_some());
        Ok(Served {
            registry,
            setup,
            tools,
            log,
            cut: tokio::sync::watch::Sender::new(false),
            sessions: AtomicU64::new(0),
            calls: AtomicUsize::new(0),
            upstream: Mutex::new(Vec::new()),
            state_key: super::state::StateKey::random()?,
            tasks: super::tasks::Tasks::new(Default::default()),
            has_tasks,
            subjects: None,
        })
    }

    /// States signed with `key` (shared by the replicas), when given, not this process's own.
    pub(crate) fn with_state_key(mut self, key: Option<super::state::StateKey>) -> Served {
        if let Some(key) = key {
            self.state_key = key;
        }
        self
    }

    /// Tasks kept within `bounds` (`--max-tasks`, `--task-ttl`).
    pub(crate) fn with_task_bounds(mut self, bounds: super::tasks::TaskBounds) -> Served {
        self.tasks = super::tasks::Tasks::new(bounds);
        self
    }

    /// 2026-07-28 requests counted per authenticated subject, not each on its own.
    pub(crate) fn with_subjects(mut self, subjects: Option<super::subjects::Subjects>) -> Served {
        self.subjects = subjects;
        self
    }

    /// What ending a transport's sessions with remote MCP servers needs.
    pub(crate) fn upstream_env<'a>(
        &'a self,
        transport: &'a Transport,
    ) -> crate::tools::ToolEnv<'a> {
        crate::tools::ToolEnv {
            registry: &self.registry,
            secrets: &self.setup.secrets,
            transport,
            events: &self.setup.events,
            query: "",
            now_unix_ms: 0,
            call_id: "",
            notify: None,
            session: None,
        }
    }

    /// How many calls are running now.
    pub(crate) fn calls_running(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Waits, for `within` at most, until no call is running; then a moment more when some were,
    /// for their answers to be written.
    pub(crate) async fn calls_end(&self, within: std::time::Duration) {
        let deadline = Instant::now() + within;
        let step = std::time::Duration::from_millis(10);
        if self.calls_running() == 0 {
            return;
        }
        while self.calls_running() > 0 && Instant::now() < deadline {
            tokio::time::sleep(step).await;
        }
        tokio::time::sleep(step).await;
    }

    /// Cuts off the calls still running: each answers its client that the server stopped
    /// before it ended, and is recorded so.
    pub(crate) fn cut_off(&self) {
        self.cut.send_replace(true);
    }

    /// The calls kept in memory (a replay's).
    pub(crate) fn logged_calls(&self) -> Vec<LoggedCall> {
        match &self.log {
            Some(CallLog::Memory(l)) => l.lock().map(|l| l.clone()).unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// The call logged last is one the recording says was cut off: it is kept so, with the
    /// answer recorded (a replay ran it only to admit it).
    pub(crate) fn mark_cut_off(&self, response: Value, why: &str) {
        if let Some(CallLog::Memory(log)) = &self.log {
            if let Some(call) = log.lock().ok().as_mut().and_then(|l| l.last_mut()) {
                call.cut_off = Some(why.to_string());
                call.response = response;
                call.result = None;
                call.error = None;
            }
        }
    }

    /// The recording being written, when `serve --record` writes one.
    pub(crate) fn recording(&self) -> Option<&crate::fixture::session_log::SessionLog> {
        match &self.log {
            Some(CallLog::Stream(f)) => Some(f),
            _ => None,
        }
    }
}

/// A call counted (in [`Served::calls`], say) until it has been answered and logged.
pub(crate) struct Running<'a>(&'a AtomicUsize);

impl<'a> Running<'a> {
    pub(crate) fn new(calls: &'a AtomicUsize) -> Running<'a> {
        calls.fetch_add(1, Ordering::SeqCst);
        Running(calls)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Where a served call comes from, which decides its clock and who confirms it.
pub(crate) enum Origin<'a> {
    /// A connected client: the server's clock; the client's user confirms through MCP
    /// elicitation when the client declared that capability. Notifications go to it, progress
    /// only when the request carried this progress token. No client: a 2026-07-28 request
    /// `stateless_direct` answers (it has none to notify or ask).
    /// The hang-up is the call's own event stream's, when it came over streamable HTTP.
    /// The stream is the call's own event stream when toolrun writes it (`direct`): its
    /// notifications go there, else through rmcp (which sends logs on the session's stream).
    Client(
        Option<&'a Peer<RoleServer>>,
        Option<ProgressToken>,
        Option<&'a super::resume::Hangup>,
        Option<&'a Stream>,
    ),
    /// A recorded call being replayed: its clock, and its recorded answer (`None`: nobody was
    /// asked).
    Recording {
        now_unix_ms: i64,
        confirmation: Option<Confirmation>,
    },
}
