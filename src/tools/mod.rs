//! Tool execution: one function per kind, all returning a JSON observation or a structured error
//! that goes back to the model (a tool error is never a crash).

pub(crate) mod builtin;
pub(crate) mod http;
pub(crate) mod mcp;
pub(crate) mod mock;
pub(crate) mod notify;
pub(crate) mod table;

use crate::events::Events;
use crate::net::Transport;
use crate::redact::Secrets;
use crate::registry::{Registry, Tool, ToolKind};
use serde_json::Value;

pub(crate) use crate::vocab::ErrorKind;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ToolError {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
    /// Facts for the trace that the model does not need (status, attempts, elapsed).
    pub(crate) details: Option<Value>,
}

impl ToolError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> ToolError {
        ToolError {
            kind,
            message: message.into(),
            details: None,
        }
    }
    pub(crate) fn with_details(mut self, details: Value) -> ToolError {
        self.details = Some(details);
        self
    }
}

/// A tool's answer: the observation, and for an HTTP tool the exchange that produced it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Output {
    pub(crate) value: Value,
    pub(crate) http: Option<HttpCall>,
    /// An MCP result's content items as the server sent them (see `mcp::content`), when there is
    /// more than text.
    pub(crate) mcp: Option<Value>,
    /// Images a model can be shown.
    pub(crate) images: Vec<crate::models::Image>,
}

impl From<Value> for Output {
    fn from(value: Value) -> Output {
        Output {
            value,
            ..Output::default()
        }
    }
}

/// What an HTTP tool call sent and got, for the trace, when an answer came (a call that got
/// none says what it tried in `tool_errors[].details`). The URL is the one that answered, after
/// redirects; the engine masks secrets in it before it is recorded.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct HttpCall {
    pub(crate) method: String,
    pub(crate) url: String,
    pub(crate) status: u16,
    /// Present when the call was retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) attempts: Option<u32>,
    /// Present when redirects were followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) redirects: Option<u32>,
}

impl HttpCall {
    /// The exchange of a call that got an error status, from its error's details (method, URL,
    /// status, attempts, redirects); `None` when no answer came (or none was sent: an injected
    /// fault has a status and no request).
    pub(crate) fn answered_with_error(details: &Value) -> Option<HttpCall> {
        let count = |key: &str| {
            details[key]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0)
        };
        Some(HttpCall {
            method: details["method"].as_str()?.to_string(),
            url: details["url"].as_str()?.to_string(),
            status: u16::try_from(details["status"].as_u64()?).ok()?,
            attempts: count("attempts").filter(|n| *n > 1),
            redirects: count("redirects"),
        })
    }
}

/// Everything a tool may touch while it runs. Nothing here reaches a shell.
pub(crate) struct ToolEnv<'a> {
    pub(crate) registry: &'a Registry,
    pub(crate) secrets: &'a Secrets,
    pub(crate) transport: &'a Transport,
    pub(crate) events: &'a Events,
    pub(crate) query: &'a str,
    /// The run's fixed "now" (recorded in fixtures, so replays see the same clock).
    pub(crate) now_unix_ms: i64,
    /// The id of the call, for progress events.
    pub(crate) call_id: &'a str,
    /// Where the call's notifications go besides `--events` (`toolrun serve`: its client).
    pub(crate) notify: Option<&'a notify::Notifier>,
    /// The served session the call belongs to (`toolrun serve`): each session counts its own
    /// call ids, so the call's events name it too.
    pub(crate) session: Option<&'a str>,
}

impl ToolEnv<'_> {
    /// An `--events` line about the call: with its session when it is a served one.
    pub(crate) fn call_event(&self, mut event: serde_json::Value) -> serde_json::Value {
        if let Some(session) = self.session {
            event["session"] = serde_json::json!(session);
        }
        event
    }
}

/// A template that failed while a tool ran: a bound it hit is `limit_exceeded`, anything else
/// (an undefined value, a type error) `execution_error`.
pub(crate) fn render_error(what: &str, e: crate::templates::RenderError) -> ToolError {
    let kind = if e.limit {
        ErrorKind::LimitExceeded
    } else {
        ErrorKind::ExecutionError
    };
    ToolError::new(kind, format!("{what}: {}", e.message))
}

pub(crate) async fn execute(
    tool: &Tool,
    args: &Value,
    env: &ToolEnv<'_>,
) -> Result<Output, ToolError> {
    match &tool.kind {
        ToolKind::Mock(responses) => mock::execute(responses, args, env).await,
        ToolKind::Table(table) => table::execute(table, args).map(Output::from),
        ToolKind::Builtin(name) => builtin::execute(name, args, env).map(Output::from),
        ToolKind::Http(http) => http::execute(tool, http, args, env).await,
        ToolKind::Mcp(m) => mcp::execute(tool, m, args, env).await,
    }
}
