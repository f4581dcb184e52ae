//! `kind: mcp` tools: a small MCP client (JSON-RPC over streamable HTTP) that sends through the
//! same `net::Transport` as HTTP tools. The allow-list, response masking, size caps, recording
//! and offline replay therefore apply unchanged, and a fixture holds each MCP request and reply
//! (`initialize`, `tools/list`, `tools/call`) as an `mcp` exchange.
//!
//! Only the client side of four messages is needed, so this is not rmcp's client: that one owns
//! its HTTP connection (its own reqwest client and SSE reader), which would bypass the transport
//! that records, replays and masks every other request toolrun makes.

pub(crate) mod allow;
mod auth;
pub(crate) mod content;
mod discover;
mod exchange;
mod lines;
mod listing;
mod live_session;
mod modern;
mod pool;
mod rpc;
mod sse;
mod stderr;
mod stdin;
pub(crate) mod stdio;
mod stdio_rpc;

pub(crate) use auth::login;
use exchange::{cancel_abandoned, excerpt, Rpc};
use listing::{check_listed, list_tools};

use crate::registry::{McpServer, McpTool, Tool, ToolKind};
use crate::tools::http::{allowed_hosts, check_host};
use crate::tools::{ErrorKind, ToolEnv, ToolError};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use stdio::Process;

/// The revision offered; a server may answer with any of `SUPPORTED` (all have streamable
/// HTTP, which 2024-11-05 did not).
const PROTOCOL: &str = "2025-11-25";
const SUPPORTED: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];
/// Largest MCP reply read: far beyond any tool list or result a model could use.
const MAX_BYTES: u64 = 4 << 20;
/// `tools/list` pages followed before giving up on a server that never stops paginating.
const MAX_PAGES: usize = 100;
/// Most bytes of a whole tool listing (all its pages): what is kept stays bounded whatever the
/// pages' count and size.
const MAX_LISTING_BYTES: u64 = 16 << 20;
/// Longest line read from a stdio server: a reply of `MAX_BYTES`, with room for the masker to
/// read a secret straddling the cap whole.
const LINE_CAP: usize = (MAX_BYTES as usize) + (64 << 10);
/// How much sooner than the engine a call gives up waiting, to cancel it with the server first.
const CANCEL_MARGIN: Duration = Duration::from_millis(200);
/// Times a stream that closes before its response is resumed.
const MAX_RESUMES: usize = 10;
/// The wait before resuming a stream that named none (`retry:`), as the official SDKs wait.
const DEFAULT_RETRY_MS: u64 = 1000;
const USER_AGENT: &str = concat!("toolrun/", env!("CARGO_PKG_VERSION"));
/// Longest wait for a server to acknowledge the end of a session: the run is already over.
const END_TIMEOUT: Duration = Duration::from_secs(5);

/// One server's MCP session within a run (kept by the transport, so each run has its own).
#[derive(Default)]
pub(crate) struct ClientSession {
    conn: tokio::sync::Mutex<Option<Connected>>,
    next_id: AtomicU64,
    /// A reply carried `notifications/tools/list_changed`: the tools are listed again.
    list_changed: std::sync::atomic::AtomicBool,
    /// Why the tools the model was offered no longer hold, once a new listing said so.
    stale: std::sync::Mutex<Option<String>>,
    /// A stdio server's process, started by the first message that goes live.
    stdio: tokio::sync::Mutex<Option<Arc<Process>>>,
    /// Requests whose caller went away before their answer: to be cancelled.
    abandoned: std::sync::Mutex<Vec<u64>>,
    /// Calls in flight over HTTP, by request id, and where messages about each go (see
    /// `exchange::Inbox`).
    inboxes: std::sync::Mutex<Vec<(u64, tokio::sync::mpsc::Sender<Value>)>>,
    /// Session ids a live server gave this run (see `live_session`).
    live_ids: std::sync::Mutex<Vec<String>>,
    /// The session this run opened for live requests carrying a recorded session id: (the
    /// recorded id, the live one).
    own: tokio::sync::Mutex<Option<(String, Option<String>)>>,
    /// The input schema of each tool listed at 2026-07-28, by remote name: a call's
    /// `Mcp-Param-*` headers mirror the arguments its `x-mcp-header` annotations name.
    schemas: std::sync::Mutex<Vec<(String, Value)>>,
}

impl ClientSession {
    fn stale(&self) -> Option<String> {
        self.stale.lock().ok().and_then(|s| s.clone())
    }
}

pub(crate) const LIST_CHANGED: &str = "notifications/tools/list_changed";

#[derive(Clone)]
struct Connected {
    session_id: Option<String>,
    protocol: String,
}

pub(crate) async fn execute(
    tool: &Tool,
    mcp: &McpTool,
    args: &Value,
    env: &ToolEnv<'_>,
) -> Result<super::Output, ToolError> {
    let redactor = env.secrets.redactor();
    env.transport.mask_with(&redactor);
    let result = call(tool, mcp, args, env).await;
    result.map_err(|mut e| {
        e.message = redactor.str(&e.message);
        if let Some(d) = &mut e.details {
            redactor.value(d);
        }
        e
    })
}

async fn call(
    tool: &Tool,
    mcp: &McpTool,
    args: &Value,
    env: &ToolEnv<'_>,
) -> Result<super::Output, ToolError> {
    let started = tokio::time::Instant::now();
    let server = &mcp.server;
    let (session, conn) = connected(server, env).await?;
    if let Some(why) = session.stale() {
        return Err(ToolError::new(ErrorKind::ExecutionError, why));
    }
    let params = json!({ "name": mcp.remote_name, "arguments": args });
    let rpc = Rpc {
        server,
        env,
        conn: Some(&conn),
        // Ends just before the engine's own timeout for the call, so the server is told
        // (`notifications/cancelled`) before the engine gives up on it.
        timeout: tool
            .timeout
            .saturating_sub(started.elapsed())
            .saturating_sub(CANCEL_MARGIN),
    };
    cancel_abandoned(&rpc, &session).await;
    let result = rpc.request(&session, "tools/call", params).await;
    if session.list_changed.swap(false, Ordering::SeqCst) {
        relist(server, &session, &conn, env).await;
    }
    // The request's own deadline is what was left of the tool's: the error names the
    // `timeout:` the user wrote, not that remainder.
    let result = result.map_err(|e| match e.kind {
        ErrorKind::Timeout => ToolError {
            message: format!(
                "MCP server `{}` did not answer `tools/call` of `{}` within the tool's `timeout:` of {:?} (the request was cancelled); raise `timeout:` if it needs longer",
                server.name,
                mcp.remote_name,
                tool.timeout,
            ),
            ..e
        },
        _ => e,
    });
    let content = content::take(
        &server.name,
        &mcp.remote_name,
        &result?,
        &env.secrets.redactor(),
    )?;
    Ok(super::Output {
        value: content.observation,
        mcp: content.kept,
        images: content.images,
        ..super::Output::default()
    })
}

/// The server said its tools changed (in the event stream of a reply): they are listed and
/// checked again, against what the model was offered. A change to a tool the spec uses (gone,
/// another schema or description, other annotations) leaves the session stale: the run stops
/// with `mcp_error`, and later calls are refused. A change elsewhere is only an event.
async fn relist(server: &McpServer, session: &ClientSession, conn: &Connected, env: &ToolEnv<'_>) {
    let checked = match list_tools(server, session, conn, env).await {
        Ok(tools) => check_listed(server, env, &tools),
        Err(e) => Err(e),
    };
    let stale = checked.err().map(|e| {
        format!(
            "MCP server `{}` changed its tools during the run ({LIST_CHANGED}), and the model was offered them as they were: {}",
            server.name, e.message
        )
    });
    env.events.emit_with(
        "mcp_tools_changed",
        || json!({ "server": server.name, "stale": stale }),
    );
    if let (Some(why), Ok(mut slot)) = (stale, session.stale.lock()) {
        *slot = Some(env.secrets.redactor().str(&why));
    }
}

/// Why a run must stop: a server changed tools the model was offered (see [`relist`]).
pub(crate) fn changed_tools(env: &ToolEnv<'_>) -> Option<String> {
    env.registry
        .mcp_servers()
        .into_iter()
        .find_map(|server| env.transport.session::<ClientSession>(&server.name).stale())
}

/// Bounds the stdio servers this transport, and every one scoped from it (a gateway's client
/// sessions), runs at once (`serve --max-processes`; see `pool`).
pub(crate) fn limit_processes(transport: &crate::net::Transport, max: usize) {
    transport.shared::<pool::Pool>(pool::KEY).limit(max);
}

/// Connects to every server whose tools the policy lets a model call, lists its tools and
/// checks them against the spec: a missing tool or a changed pinned schema stops the run
/// before the model is called. Returns the first problem, as a message for the trace.
pub(crate) async fn connect_all(env: &ToolEnv<'_>) -> Result<(), String> {
    let mut seen: Vec<&str> = Vec::new();
    let used = env
        .registry
        .callable_tools()
        .filter_map(|tool| match &tool.kind {
            ToolKind::Mcp(m) => Some(&m.server),
            _ => None,
        });
    // A `tools: "*"` server is listed at the start of every run: its tools are the run's.
    let every = env.registry.wildcards.iter().map(|w| &w.server);
    for server in used.chain(every).collect::<Vec<_>>() {
        if seen.contains(&server.name.as_str()) {
            continue;
        }
        seen.push(&server.name);
        if let Err(e) = connected(server, env).await {
            return Err(env.secrets.redactor().str(&e.message));
        }
    }
    Ok(())
}

/// Connects to the server of the tool named `name`, when it is a `kind: mcp` tool, so its
/// listed schema is known before its arguments are checked (a call outside a run).
pub(crate) async fn connect_tool(env: &ToolEnv<'_>, name: &str) -> Result<(), ToolError> {
    match env.registry.tool(name).map(|t| &t.kind) {
        Some(ToolKind::Mcp(m)) => connected(&m.server, env).await.map(|_| ()),
        Some(_) => Ok(()),
        // Perhaps a tool of a `tools: "*"` server: known once it is listed.
        None => {
            for w in &env.registry.wildcards {
                connected(&w.server, env).await?;
            }
            Ok(())
        }
    }
}

/// Ends the run's session with every MCP server it connected to, as the streamable HTTP
/// transport asks of a client that no longer needs one: an HTTP DELETE carrying the
/// `Mcp-Session-Id`, so the server can free it now rather than when it expires. Best effort: a
/// server may refuse with 405 (it does not let clients end sessions), and no answer changes
/// how the run ended; each outcome is an `mcp_session_ended` event.
pub(crate) async fn end_all(env: &ToolEnv<'_>) {
    for server in env.registry.mcp_servers() {
        let session = env.transport.session::<ClientSession>(&server.name);
        // Taken: a later call on this transport (a served session) connects afresh.
        let conn = session.conn.lock().await.take();
        if server.stdio.is_some() {
            end_process(server, &session, env).await;
            continue;
        }
        let Some(conn) = conn else {
            continue;
        };
        let rpc = Rpc {
            server,
            env,
            conn: Some(&conn),
            timeout: END_TIMEOUT,
        };
        cancel_abandoned(&rpc, &session).await;
        if conn.session_id.is_none() {
            continue; // a stateless server: there is nothing to end
        }
        end_session(server, &conn, env).await;
        // Ended: a later session (a served one's) opens its own again if it needs one.
        session.own.lock().await.take();
    }
}

/// Ends every stdio server process started through `transport` or a transport scoped from it
/// (a gateway's client sessions), and starts none after: the last thing `serve` does before its
/// runtime shuts down. [`end_all`] ends each session's process, but a session's own ending
/// (its client went away) may still be under way in a task the shutdown drops, and a call in
/// flight may have started a process after its session's was taken: those outlived `serve`.
pub(crate) async fn end_every_process(transport: &crate::net::Transport) {
    let every = transport.shared::<pool::Pool>(pool::KEY).close();
    futures_util::future::join_all(every.iter().map(|p| p.end())).await;
}

/// A stdio server ends with the run (see `stdio::Process::end`); how it ended and the kept
/// end of its stderr, masked, are an `mcp_server_ended` event.
async fn end_process(server: &McpServer, session: &ClientSession, env: &ToolEnv<'_>) {
    let Some(process) = session.stdio.lock().await.take() else {
        return;
    };
    let how = process.end().await;
    let redactor = env.secrets.redactor();
    env.events.emit_with("mcp_server_ended", || {
        json!({ "server": server.name, "ended": how, "stderr": redactor.str(&process.stderr_text()) })
    });
}

async fn end_session(server: &McpServer, conn: &Connected, env: &ToolEnv<'_>) {
    let rpc = Rpc {
        server,
        env,
        conn: Some(conn),
        timeout: server.timeout.min(END_TIMEOUT),
    };
    let req = match rpc.build("DELETE", None).await {
        Ok(r) => match rpc.live_request(&r, false).await {
            Ok(Some(r)) => r,
            // Made from a recording, and never opened live: no server knows it.
            _ => return,
        },
        Err(e) => {
            env.events.emit_with(
                "mcp_session_ended",
                || json!({ "server": server.name, "error": e.message }),
            );
            return;
        }
    };
    let Some(sent) = rpc.send_unrecorded(&req, rpc.timeout, 64 << 10).await else {
        return;
    };
    let outcome = match sent {
        Ok(r) if (200..300).contains(&r.status) => json!({ "status": r.status }),
        // The spec's answer for "clients may not end sessions here": the server lets it expire.
        Ok(r) if r.status == 405 => {
            json!({ "status": 405, "note": "the server does not let clients end sessions" })
        }
        Ok(r) => json!({ "status": r.status, "error": excerpt(&r.body) }),
        Err(e) => json!({ "error": rpc.net_error("DELETE", e).message }),
    };
    env.events.emit_with("mcp_session_ended", || {
        let mut o = outcome;
        o["server"] = json!(server.name);
        o
    });
}

/// The run's session with `server`, made on first use: `initialize`, the `initialized`
/// notification, then `tools/list`, checked against the spec.
async fn connected(
    server: &McpServer,
    env: &ToolEnv<'_>,
) -> Result<(Arc<ClientSession>, Connected), ToolError> {
    let session = env.transport.session::<ClientSession>(&server.name);
    let mut conn = session.conn.lock().await;
    if let Some(c) = conn.as_ref() {
        return Ok((session.clone(), c.clone()));
    }
    if server.stdio.is_none() {
        check_server_host(server, env)?;
    }
    let made = handshake(server, &session, env).await?;
    let checked = match list_tools(server, &session, &made, env).await {
        Ok(tools) => check_listed(server, env, &tools).map(|()| tools),
        Err(e) => Err(e),
    };
    let tools = match checked {
        Ok(tools) => tools,
        Err(e) => {
            // Never to be used: the server need not keep it until it expires.
            if made.session_id.is_some() {
                end_session(server, &made, env).await;
            }
            return Err(e);
        }
    };
    env.events.emit_with("mcp_connected", || {
        json!({ "server": server.name, "protocol": made.protocol, "session": made.session_id, "tools": tools.iter().filter_map(|t| t.get("name")).collect::<Vec<_>>() })
    });
    *conn = Some(made.clone());
    Ok((session.clone(), made))
}

/// An HTTP server's host obeys the spec's allow-list, as an `http` tool's does.
fn check_server_host(server: &McpServer, env: &ToolEnv<'_>) -> Result<(), ToolError> {
    let url = url::Url::parse(&server.url)
        .map_err(|e| ToolError::new(ErrorKind::ExecutionError, e.to_string()))?;
    if check_host(&url, allowed_hosts(env.registry)) {
        return Ok(());
    }
    Err(ToolError::new(
        ErrorKind::Denied,
        format!(
            "refused to contact MCP server `{}`: {} is not in the spec's allowed hosts (policy.network.allow_hosts)",
            server.name,
            url.host_str().unwrap_or_default()
        ),
    ))
}

async fn handshake(
    server: &McpServer,
    session: &ClientSession,
    env: &ToolEnv<'_>,
) -> Result<Connected, ToolError> {
    let rpc = Rpc {
        server,
        env,
        conn: None,
        timeout: server.timeout,
    };
    let pinned = server.protocol.as_deref();
    if pinned.map_or_else(|| discovers(server, env), modern::is_modern) {
        match discover::discover(&rpc, session).await? {
            discover::Discovered::Modern(made) => return Ok(made),
            discover::Discovered::Legacy(why) if pinned.is_some() => {
                return Err(server_error(
                    server,
                    format!(
                        "does not speak MCP {} (`protocol:` of its entry): {why}",
                        modern::MODERN
                    ),
                ))
            }
            discover::Discovered::Legacy(why) => env.events.emit_with(
                "mcp_legacy_server",
                || json!({ "server": server.name, "why": why }),
            ),
        }
    }
    let params = initialize_params(pinned.unwrap_or(PROTOCOL));
    let (result, headers) = rpc.exchange(session, "initialize", params).await?;
    let protocol = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !SUPPORTED.contains(&protocol.as_str()) {
        return Err(server_error(
            server,
            format!(
                "speaks MCP revision `{protocol}`; toolrun speaks {}",
                SUPPORTED.join(", ")
            ),
        ));
    }
    let made = Connected {
        session_id: headers.header("mcp-session-id").map(str::to_string),
        protocol,
    };
    let rpc = Rpc {
        conn: Some(&made),
        ..rpc
    };
    rpc.notify("notifications/initialized").await?;
    Ok(made)
}
/// Whether a server is asked `server/discover` (2026-07-28) before `initialize`: an HTTP
/// server is, unless the run replays (or adds to) a recording made of an `initialize` without
/// one: a recording made before toolrun spoke 2026-07-28 replays as it was made. A stdio
/// server keeps `initialize` first: older ones may never answer what precedes it.
fn discovers(server: &McpServer, env: &ToolEnv<'_>) -> bool {
    if server.stdio.is_some() {
        return false;
    }
    let purpose = crate::net::Purpose::Mcp(&server.name);
    let method = |name: &'static str| move |b: &Value| b.get("method") == Some(&json!(name));
    let transport = env.transport;
    transport.tape_holds(purpose, "POST", &method("server/discover"))
        || !transport.tape_holds(purpose, "POST", &method("initialize"))
}

/// What toolrun says of itself in `initialize`, asking for the `protocol` revision.
fn initialize_params(protocol: &str) -> Value {
    json!({
        "protocolVersion": protocol,
        "capabilities": rpc::capabilities(),
        "clientInfo": { "name": "toolrun", "version": env!("CARGO_PKG_VERSION") },
    })
}

fn server_error(server: &McpServer, what: String) -> ToolError {
    ToolError::new(
        ErrorKind::ExecutionError,
        format!("MCP server `{}` ({}) {what}", server.name, server.url),
    )
}
