//! The Model Context Protocol side of toolrun, on the official SDK (`rmcp`).
//!
//! `server` serves a registry: a thin adapter that lists the tools a model may call and sends every
//! `tools/call` through the engine's own call path, so a served call and a loop call are the same
//! code; what its handlers share in one process is `served`. `http` puts that server on streamable
//! HTTP with the transport's guards (bearer token, `Origin` and `Host` checks); `resume` keeps each
//! session's call streams so that a client that went away gets the rest when it comes back with
//! `Last-Event-ID`; `answer` sends a single-message answer as one JSON body; `direct` answers the
//! common `tools/call` without rmcp's session machinery. A 2026-07-28 request has no session:
//! `stateless` answers it on its own, its confirmation asked as an input-required result whose
//! request state `state` signs. A call of a `task:` tool there may run as a task of the tasks
//! extension: `task_calls` makes it and answers `tasks/*`, `tasks` keeps the tasks of this process,
//! bounded. `stateless_direct` answers 2026-07-28's common `tools/call` and `tools/list` without
//! rmcp.
//! The core never imports this module.

pub(crate) mod answer;
pub(crate) mod auth;
pub(crate) mod cancel;
pub(crate) mod confirm;
pub(crate) mod direct;
pub(crate) mod http;
pub(crate) mod jsonrpc;
pub(crate) mod lines;
pub(crate) mod notices;
pub(crate) mod record;
pub(crate) mod replay;
pub(crate) mod result;
pub(crate) mod resume;
pub(crate) mod served;
pub(crate) mod server;
pub(crate) mod spans;
pub(crate) mod state;
pub(crate) mod stateless;
pub(crate) mod stateless_direct;
pub(crate) mod stdio;
pub(crate) mod subjects;
pub(crate) mod task_calls;
pub(crate) mod tasks;

/// A map keyed by session id, looked up several times a request: foldhash, seeded per process,
/// hashes a 36-character id for a fraction of SipHash's cost, and the keys are ids this server
/// made (a client's id is only ever looked up), so there are no chosen collisions to fear.
pub(crate) type SessionMap<V> = foldhash::HashMap<String, V>;

/// Connects to the remote MCP servers of a served registry (and lists their tools) before the
/// first client does, as `serve` does when it starts and its replay does from the recording:
/// a `tools: "*"` server's tools are then known before the first call.
pub(crate) async fn connect_remote(
    registry: &crate::registry::Registry,
    setup: &crate::setup::Setup,
) -> Result<(), String> {
    setup.transport.mask_with(&setup.redactor);
    crate::tools::mcp::connect_all(&crate::tools::ToolEnv {
        registry,
        secrets: &setup.secrets,
        transport: &setup.transport,
        events: &setup.events,
        query: "",
        now_unix_ms: 0,
        call_id: "",
        notify: None,
        session: None,
    })
    .await
}

/// A `Host` header's name, without its port and an IPv6 address's brackets (`[::1]:8080`,
/// `example.com:8080`).
pub(crate) fn host_name(host: &str) -> &str {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    };
    name.trim_start_matches('[').trim_end_matches(']')
}
