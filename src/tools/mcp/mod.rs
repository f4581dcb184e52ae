//! `kind: mcp` tools: a small MCP client (JSON-RPC over streamable HTTP) that sends through the
//! same `net::Transport` as HTTP tools. The allow-list, response masking, size caps, recording
//! and offline replay therefore apply unchanged, and a fixture holds each MCP request and reply
//! (`initialize`, `tools/list`, `tools/call`) as an `mcp` exchange.
//!
//! Only the client side of four messages is needed, so this is not rmcp's client: that one owns
//! its HTTP connection (its own reqwest client and SSE reader), which would bypass the transport
//! that records, replays and masks every other request toolrun makes.

pub(crate) mod content;
mod rpc;
mod sse;
pub(crate) mod stdio;

use crate::net::{HttpRequest, HttpResponse, NetError, Purpose, SendOptions};
use crate::registry::{ListedTool, McpServer, McpTool, StdioCommand, Tool, ToolKind, Wildcard};
use crate::templates;
use crate::tools::http::{allowed_hosts, check_host};
use crate::tools::{ErrorKind, ToolEnv, ToolError};
use rpc::{is_request, Incoming};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use stdio::{Process, Refusal};

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
pub(crate) struct Session {
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
}

impl Session {
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
async fn relist(server: &McpServer, session: &Session, conn: &Connected, env: &ToolEnv<'_>) {
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
        .find_map(|server| env.transport.session::<Session>(&server.name).stale())
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
        let session = env.transport.session::<Session>(&server.name);
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
    }
}

/// A stdio server ends with the run (see `stdio::Process::end`); how it ended and the kept
/// end of its stderr, masked, are an `mcp_server_ended` event.
async fn end_process(server: &McpServer, session: &Session, env: &ToolEnv<'_>) {
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
        Ok(r) => r,
        Err(e) => {
            env.events.emit_with(
                "mcp_session_ended",
                || json!({ "server": server.name, "error": e.message }),
            );
            return;
        }
    };
    let opts = SendOptions {
        timeout: rpc.timeout,
        max_bytes: 64 << 10,
        progress: None,
        on_chunk: None,
        reshape: None,
    };
    let Some(sent) = env
        .transport
        .send_unrecorded(Purpose::Mcp(&server.name), &req, opts)
        .await
    else {
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
) -> Result<(Arc<Session>, Connected), ToolError> {
    let session = env.transport.session::<Session>(&server.name);
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
    if check_host(&url, &allowed_hosts(env.registry)) {
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
    session: &Session,
    env: &ToolEnv<'_>,
) -> Result<Connected, ToolError> {
    let rpc = Rpc {
        server,
        env,
        conn: None,
        timeout: server.timeout,
    };
    let params = json!({
        "protocolVersion": PROTOCOL,
        "capabilities": rpc::capabilities(),
        "clientInfo": { "name": "toolrun", "version": env!("CARGO_PKG_VERSION") },
    });
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

async fn list_tools(
    server: &McpServer,
    session: &Session,
    conn: &Connected,
    env: &ToolEnv<'_>,
) -> Result<Vec<Value>, ToolError> {
    let rpc = Rpc {
        server,
        env,
        conn: Some(conn),
        timeout: server.timeout,
    };
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut bytes = 0u64;
    for page_no in 1..=MAX_PAGES {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let mut page = rpc.request(session, "tools/list", params).await?;
        bytes += json_size(&page);
        if bytes > MAX_LISTING_BYTES {
            return Err(server_error(
                server,
                format!("listed more than {} MiB of tools in {page_no} page(s), and toolrun reads no more of a listing: no model can use that much. Check the server (a listing that never ends is a fault), or use a server that offers fewer tools", MAX_LISTING_BYTES >> 20),
            ));
        }
        if let Some(Value::Array(items)) = page.get_mut("tools").map(Value::take) {
            tools.extend(items);
        }
        cursor = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_string);
        if cursor.is_none() {
            return Ok(tools);
        }
    }
    Err(server_error(
        server,
        format!("listed more than {MAX_PAGES} pages of tools"),
    ))
}

/// The size of `v` as JSON text, counted without writing it.
fn json_size(v: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// Every tool the spec names must be listed, with the pinned schema where one is pinned.
fn check_listed(server: &McpServer, env: &ToolEnv<'_>, listed: &[Value]) -> Result<(), ToolError> {
    let names: Vec<&str> = listed
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .collect();
    for (remote, local) in &server.tools {
        let Some(found) = listed
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(remote.as_str()))
        else {
            let hint = crate::diag::did_you_mean(remote, names.iter().copied())
                .unwrap_or_else(|| format!("it offers: {}", names.join(", ")));
            return Err(server_error(
                server,
                format!(
                    "has no tool `{remote}`; {hint}. Fix `tools:` of `{}` in the spec",
                    server.name
                ),
            ));
        };
        let Some(tool) = env.registry.tool(local) else {
            continue;
        };
        let ToolKind::Mcp(m) = &tool.kind else {
            continue;
        };
        let schema = found
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| json!({ "type": "object" }));
        if m.pinned_input && schema != tool.input_schema {
            return Err(server_error(
                server,
                format!(
                    "lists tool `{remote}` with an input schema that differs from the one pinned in the spec (`input:` of `{local}`):\n{}\nUpdate the pinned schema if the change is expected",
                    crate::fixture::json_diff(&tool.input_schema, &schema)
                ),
            ));
        }
        let listed = ListedTool {
            description: found
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            input_schema: schema,
            confirm_hint: match m.declared_side_effects {
                Some(_) => None,
                None => annotation_hint(found.get("annotations"))
                    .map(|h| format!("MCP server `{}` annotates `{remote}` with {h}", server.name)),
            },
        };
        // Runs of one process share what models see: a server that changes its tools between
        // them would make one run's checks describe another run's tools.
        if let Err(listed) = m.listed.set(listed) {
            if m.listed.get() != Some(&listed) {
                return Err(server_error(
                    server,
                    format!("changed tool `{remote}` while toolrun was running; run again"),
                ));
            }
        }
    }
    if let Some(every) = env.registry.wildcard(&server.name) {
        take_every_tool(server, every, env, listed)?;
    }
    Ok(())
}

/// `tools: "*"`: every listed tool becomes a tool of the run, named as the server names it.
/// Runs of one process share them (as they share what a declared tool's server listed): a
/// server that lists other tools in a later run stops that run.
fn take_every_tool(
    server: &McpServer,
    every: &Wildcard,
    env: &ToolEnv<'_>,
    listed: &[Value],
) -> Result<(), ToolError> {
    let mut found: Vec<Tool> = Vec::new();
    for item in listed {
        let name = item.get("name").and_then(Value::as_str).unwrap_or_default();
        if !is_tool_name(name) {
            return Err(server_error(server, format!(
                "lists a tool named `{name}`, which models cannot call (names are 1 to 64 letters, digits, `_` or `-`, not starting with a digit or `-`). List the tools to use in `tools:` of `{}`, renaming this one with `as:`", server.name
            )));
        }
        let taken = env.registry.tools.iter().any(|t| t.name == name)
            || found.iter().any(|t| t.name == name);
        if taken {
            return Err(server_error(server, format!(
                "lists a tool `{name}`, and the spec already has a tool of that name. List the tools to use in `tools:` of `{}`, renaming this one with `as:`", server.name
            )));
        }
        let listed = ListedTool {
            description: item
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            input_schema: item
                .get("inputSchema")
                .cloned()
                .unwrap_or_else(|| json!({ "type": "object" })),
            confirm_hint: match every.declared_side_effects {
                Some(_) => None,
                None => annotation_hint(item.get("annotations"))
                    .map(|h| format!("MCP server `{}` annotates `{name}` with {h}", server.name)),
            },
        };
        found.push(every.tool(name, listed));
    }
    let Err(found) = every.found.set(found) else {
        return Ok(());
    };
    let before = every.found.get().map(Vec::as_slice).unwrap_or_default();
    let same = before.len() == found.len()
        && before
            .iter()
            .zip(&found)
            .all(|(a, b)| a.name == b.name && listed_of(a) == listed_of(b));
    if same {
        return Ok(());
    }
    Err(server_error(
        server,
        "lists other tools than it did earlier while toolrun was running (`tools: \"*\"`); run again".to_string(),
    ))
}

fn listed_of(tool: &Tool) -> Option<&ListedTool> {
    match &tool.kind {
        ToolKind::Mcp(m) => m.listed.get(),
        _ => None,
    }
}

/// The rule every model provider accepts for a tool name (as `check` holds declared names to).
fn is_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// What a tool's annotations say about changing its environment, when they say it might. The
/// MCP spec makes them untrusted hints, with defaults: `readOnlyHint` false, `destructiveHint`
/// true (meaningful when not read-only). So only a hint can add confirmation, never remove it:
/// an explicit `readOnlyHint: false`, or a `destructiveHint` without `readOnlyHint: true`
/// (even `false`: additive changes are changes), or `destructiveHint: true` beside a
/// contradicting `readOnlyHint: true`. Without either hint the server said nothing, and the spec
/// decides, as for any other tool.
fn annotation_hint(annotations: Option<&Value>) -> Option<String> {
    let a = annotations?;
    let read_only = a.get("readOnlyHint").and_then(Value::as_bool);
    let destructive = a.get("destructiveHint").and_then(Value::as_bool);
    let said = match (read_only, destructive) {
        (Some(true), Some(true)) => "`readOnlyHint: true` but `destructiveHint: true`",
        (None, Some(true)) => "`destructiveHint: true`",
        (Some(false), Some(true)) => "`readOnlyHint: false, destructiveHint: true`",
        (Some(false), None) => "`readOnlyHint: false` (so `destructiveHint` defaults to true)",
        (Some(false), Some(false)) => "`readOnlyHint: false` (changes that only add)",
        (None, Some(false)) => "`destructiveHint: false` without `readOnlyHint: true` (which defaults to false: it changes its environment)",
        (Some(true), _) | (None, None) => return None,
    };
    Some(said.to_string())
}

fn server_error(server: &McpServer, what: String) -> ToolError {
    ToolError::new(
        ErrorKind::ExecutionError,
        format!("MCP server `{}` ({}) {what}", server.name, server.url),
    )
}

/// The result of a response, or its JSON-RPC error as a tool error.
fn result_of(server: &McpServer, method: &str, message: Value) -> Result<Value, ToolError> {
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
struct InFlight<'s> {
    session: &'s Session,
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

/// Tells the server about every request of this session left behind (see [`InFlight`]).
async fn cancel_abandoned(rpc: &Rpc<'_, '_>, session: &Session) {
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
struct Rpc<'a, 'e> {
    server: &'a McpServer,
    env: &'a ToolEnv<'e>,
    conn: Option<&'a Connected>,
    timeout: Duration,
}

impl Rpc<'_, '_> {
    async fn request(
        &self,
        session: &Session,
        method: &str,
        params: Value,
    ) -> Result<Value, ToolError> {
        self.exchange(session, method, params).await.map(|(v, _)| v)
    }

    /// A request and its result, with the reply's headers (the session id comes in one).
    /// Requests the server sends meanwhile are answered (see `rpc`), a stream that closes
    /// before the response is resumed, and a request left behind (a timeout, Ctrl-C) is
    /// cancelled.
    async fn exchange(
        &self,
        session: &Session,
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
        let sent = self.streamed(method, &body, id, &incoming).await;
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
            .await;
        if message.get("id") != Some(&json!(id)) {
            return Err(self.fail(format!(
                "answered `{method}` (request id {id}) with a response for id {}: a server must answer each request under its own id",
                message.get("id").map(Value::to_string).unwrap_or_else(|| "none".into())
            )));
        }
        result_of(self.server, method, message).map(|r| (r, resp))
    }

    /// The response among the messages a reply carried (see `sse::to_json`): requests the
    /// server sent that were not answered as they arrived (a replay, a stdio reply) are
    /// answered now, and a change of the tool list is noted.
    async fn leftovers(
        &self,
        session: &Session,
        method: &str,
        message: Value,
        answered: &[String],
        incoming: &Incoming<'_, '_>,
    ) -> Value {
        let Value::Array(items) = message else {
            return message;
        };
        let mut response = Value::Null;
        for m in items {
            if is_request(&m) {
                if !answered.contains(&m["id"].to_string()) {
                    let reply = incoming.request(&m);
                    let _ = self.post("a server request", &reply).await;
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
        response
    }

    /// Sends a request and reads its reply: over stdio the process answers; over HTTP a POST,
    /// whose event stream is watched as it arrives and resumed with GET and `Last-Event-ID`
    /// (after the `retry:` the server asked for) when it closes before the response. Returns
    /// the reply and the ids of the server requests answered meanwhile.
    async fn streamed(
        &self,
        method: &str,
        body: &Value,
        id: u64,
        incoming: &Incoming<'_, '_>,
    ) -> Result<(HttpResponse, Vec<String>), ToolError> {
        if self.server.stdio.is_some() {
            return self.post(method, body).await.map(|r| (r, Vec::new()));
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        let req = self.build("POST", Some(body)).await?;
        let (mut resp, mut answered) = self
            .watched(method, req, id, incoming, self.timeout)
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
            let mut req = self.build("GET", None).await?;
            req.headers
                .retain(|(k, _)| !k.eq_ignore_ascii_case("accept"));
            req.headers
                .push(("Accept".into(), "text/event-stream".into()));
            req.headers.push(("Last-Event-ID".into(), from));
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let (more, also) = self.watched(method, req, id, incoming, left).await?;
            resp = more;
            answered.extend(also);
        }
        Ok((resp, answered))
    }

    /// One HTTP request whose event stream is read as it arrives: the server's requests are
    /// answered at once (each answer a POST of its own), while the stream goes on.
    async fn watched(
        &self,
        method: &str,
        req: HttpRequest,
        id: u64,
        incoming: &Incoming<'_, '_>,
        timeout: Duration,
    ) -> Result<(HttpResponse, Vec<String>), ToolError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let watch = sse::Watch::new(json!(id), tx, incoming);
        let on_chunk = |c: &[u8]| watch.feed(c);
        let opts = SendOptions {
            timeout,
            max_bytes: MAX_BYTES,
            progress: None,
            on_chunk: Some(&on_chunk),
            reshape: Some(sse::to_json),
        };
        let send = self
            .env
            .transport
            .send(Purpose::Mcp(&self.server.name), &req, opts);
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
            }
        };
        let resp = sent.map_err(|e| self.net_error(method, e))?;
        self.checked(method, resp).map(|r| (r, answered))
    }

    /// Tells the server a request will not be waited for (`notifications/cancelled`). Best
    /// effort and never recorded: a replay has no server to tell.
    async fn cancel(&self, id: u64, reason: &str) {
        if self.server.stdio.is_some() {
            return;
        }
        let body = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": id, "reason": reason } });
        let Ok(req) = self.build("POST", Some(&body)).await else {
            return;
        };
        let opts = SendOptions {
            timeout: END_TIMEOUT,
            max_bytes: 64 << 10,
            progress: None,
            on_chunk: None,
            reshape: None,
        };
        let sent = self
            .env
            .transport
            .send_unrecorded(Purpose::Mcp(&self.server.name), &req, opts)
            .await;
        if sent.is_some() {
            self.env.events.emit_with(
                "mcp_cancelled",
                || json!({ "server": self.server.name, "request_id": id, "reason": reason }),
            );
        }
    }

    async fn notify(&self, method: &str) -> Result<(), ToolError> {
        let body = json!({ "jsonrpc": "2.0", "method": method });
        self.post(method, &body).await.map(|_| ())
    }

    async fn post(&self, method: &str, body: &Value) -> Result<HttpResponse, ToolError> {
        let opts = SendOptions {
            timeout: self.timeout,
            max_bytes: MAX_BYTES,
            progress: None,
            on_chunk: None,
            reshape: Some(sse::to_json),
        };
        let sent = match &self.server.stdio {
            Some(cmd) => self.send_stdio(cmd, body, opts).await?,
            None => {
                let req = self.build("POST", Some(body)).await?;
                self.env
                    .transport
                    .send(Purpose::Mcp(&self.server.name), &req, opts)
                    .await
            }
        };
        let resp = sent.map_err(|e| self.net_error(method, e))?;
        self.checked(method, resp)
    }

    /// A reply past the size cap or with an HTTP error status is an error naming the server.
    fn checked(&self, method: &str, resp: HttpResponse) -> Result<HttpResponse, ToolError> {
        if resp.truncated {
            return Err(self.fail(format!(
                "answered `{method}` with more than {MAX_BYTES} bytes"
            )));
        }
        if !(200..300).contains(&resp.status) {
            let hint = match resp.status {
                401 | 403 => " (check the credentials in `headers:`)",
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

    /// One message to a stdio server, recorded as a request `STDIN` to `stdio: COMMAND LINE`.
    /// The program is judged against `--allow-exec` before anything can start it, and started
    /// by the first message that goes live (a replay starts nothing).
    async fn send_stdio(
        &self,
        cmd: &StdioCommand,
        body: &Value,
        opts: SendOptions<'_>,
    ) -> Result<Result<HttpResponse, NetError>, ToolError> {
        let program = match self.env.transport.may_go_live() {
            true => Some(self.admitted(cmd)?),
            false => None,
        };
        let bytes = body.to_string().into_bytes();
        let req = HttpRequest {
            method: "STDIN".into(),
            url: self.server.url.clone(),
            headers: Vec::new(),
            body: Some(bytes.clone()),
        };
        let id = body.get("id").cloned();
        let live = |opts: SendOptions<'_>| async move {
            let program = program.ok_or_else(|| NetError::Io("not started in a replay".into()))?;
            let process = self.process(cmd, &program).await?;
            process.send(&bytes, id.as_ref(), opts.timeout).await
        };
        Ok(self
            .env
            .transport
            .send_via(Purpose::Mcp(&self.server.name), &req, opts, live)
            .await)
    }

    fn admitted(&self, cmd: &StdioCommand) -> Result<std::path::PathBuf, ToolError> {
        let program = &cmd.argv[0];
        let (name, at) = (&self.server.name, &cmd.at);
        stdio::admitted(cmd, self.env.transport.exec_allowed()).map_err(|r| match r {
            Refusal::NotAllowed => ToolError::new(
                ErrorKind::Denied,
                format!(
                    "MCP server `{name}` ({at}) runs the program `{program}`, and toolrun starts a program only when the command line allows it: add `--allow-exec {program}` to the command (run, test, call or serve)"
                ),
            ),
            Refusal::NotFound => ToolError::new(
                ErrorKind::ExecutionError,
                format!(
                    "MCP server `{name}` ({at}): cannot find the program `{program}` (a name is looked up on PATH, a path against the project root {}); install it or fix `command:`",
                    cmd.dir.display()
                ),
            ),
        })
    }

    /// The server's process for this run, started on first use with its `env:` rendered.
    async fn process(
        &self,
        cmd: &StdioCommand,
        program: &std::path::Path,
    ) -> Result<Arc<Process>, NetError> {
        let session = self.env.transport.session::<Session>(&self.server.name);
        let mut slot = session.stdio.lock().await;
        if let Some(p) = slot.as_ref() {
            return Ok(p.clone());
        }
        let data = json!({ "secrets": self.env.secrets.as_json() });
        let ctx = templates::Ctx::new(&data);
        let mut vars = Vec::new();
        for (name, id) in &cmd.env {
            let value = self
                .env
                .registry
                .templates
                .render_text(id, &ctx)
                .await
                .map_err(|e| {
                    NetError::Io(format!(
                        "could not build its environment variable `{name}`: {}",
                        e.message
                    ))
                })?;
            vars.push((name.clone(), value));
        }
        let started = stdio::spawn(cmd, program, vars, LINE_CAP)
            .map_err(|e| NetError::Connect(format!("cannot start `{}`: {e}", program.display())))?;
        let started = Arc::new(started);
        self.env.events.emit_with(
            "mcp_server_started",
            || json!({ "server": self.server.name, "program": program.display().to_string() }),
        );
        *slot = Some(started.clone());
        Ok(started)
    }

    async fn build(&self, method: &str, body: Option<&Value>) -> Result<HttpRequest, ToolError> {
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
        }
        let data = json!({ "secrets": self.env.secrets.as_json() });
        let ctx = templates::Ctx::new(&data);
        for (name, id) in &self.server.headers {
            let value = self
                .env
                .registry
                .templates
                .render_text(id, &ctx)
                .await
                .map_err(|e| {
                    super::render_error(
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

    fn fail(&self, what: String) -> ToolError {
        server_error(self.server, what)
    }

    fn net_error(&self, method: &str, e: NetError) -> ToolError {
        let name = &self.server.name;
        match e {
            NetError::Timeout => ToolError::new(
                ErrorKind::Timeout,
                format!(
                    "MCP server `{name}` did not answer `{method}` within {:.1}s (the request was cancelled); raise `timeout:` of its entry if it needs longer",
                    self.timeout.as_secs_f64()
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

fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut s: String = text.chars().take(300).collect();
    if text.chars().count() > 300 {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hints_of_change_ask_for_confirmation() {
        let hint = |a: Value| annotation_hint(Some(&a));
        for asks in [
            json!({"destructiveHint": true}),
            json!({"readOnlyHint": false}),
            json!({"readOnlyHint": false, "destructiveHint": false}),
            json!({"destructiveHint": false}),
            json!({"readOnlyHint": true, "destructiveHint": true}),
        ] {
            assert!(hint(asks.clone()).is_some(), "{asks}");
        }
        for quiet in [
            json!({}),
            json!({"title": "Search", "openWorldHint": true, "idempotentHint": true}),
            json!({"readOnlyHint": true}),
            json!({"readOnlyHint": true, "destructiveHint": false}),
            json!({"readOnlyHint": "no"}),
        ] {
            assert_eq!(hint(quiet.clone()), None, "{quiet}");
        }
        assert_eq!(annotation_hint(None), None);
        assert!(hint(json!({"readOnlyHint": false}))
            .unwrap()
            .contains("defaults to true"));
    }
}
