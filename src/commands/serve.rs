//! `toolrun serve`: the registry as an MCP server, over stdio or streamable HTTP. The work is in
//! `crate::mcp`; this maps flags to it and its end to an exit code.

use crate::cli::ServeArgs;
use crate::events::Events;
use crate::exit;
use crate::fixture::Tape;
use crate::mcp::server::{Served, Session};
use crate::net::Transport;
use crate::redact::Secrets;
use rmcp::ServiceExt;
use std::net::SocketAddr;
use std::sync::Arc;

pub(crate) fn run(args: ServeArgs) -> i32 {
    match serve(args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            exit::USAGE
        }
    }
}

async fn connect_remote(
    registry: &crate::registry::Registry,
    transport: &Transport,
    events: &Events,
    secrets: &Secrets,
) -> Result<(), String> {
    transport.mask_with(&secrets.redactor());
    crate::tools::mcp::connect_all(&remote_env(registry, transport, events, secrets)).await
}

/// What talking to remote MCP servers outside any call needs (connecting, ending sessions).
fn remote_env<'a>(
    registry: &'a crate::registry::Registry,
    transport: &'a Transport,
    events: &'a Events,
    secrets: &'a Secrets,
) -> crate::tools::ToolEnv<'a> {
    crate::tools::ToolEnv {
        registry,
        secrets,
        transport,
        events,
        query: "",
        now_unix_ms: 0,
        call_id: "",
    }
}

fn serve(args: ServeArgs) -> Result<i32, String> {
    let registry = match super::load_registry(&args.spec) {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    for tool in &args.approve {
        if registry.tool(tool).is_none() {
            let hint = crate::diag::did_you_mean(tool, registry.tool_names())
                .map(|h| format!("; {h}"))
                .unwrap_or_default();
            return Err(format!(
                "--approve names `{tool}`, which is not a tool of this spec{hint}"
            ));
        }
    }
    crate::builtins::datetime::now_unix_ms(args.now.as_deref())?;
    // Checked before anything is bound: a bad flag never leaves a half-started server.
    let http = match &args.http {
        None => None,
        Some(text) => Some(http_settings(text, args.token_env.as_deref())?),
    };
    if http.is_none() && args.token_env.is_some() {
        return Err("--token-env applies to --http; stdio needs no token".into());
    }
    let (secrets, missing) = Secrets::from_env(&registry.secrets);
    if !missing.is_empty() {
        return Err(format!(
            "the spec reads secret(s) {} from the environment, but they are not set; export them and run again",
            missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ")
        ));
    }
    let redactor = secrets.redactor();
    let events = match &args.events {
        None => Events::none(),
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(|e| format!("cannot write events to `{}`: {e}", path.display()))?;
            Events::to_writer(Box::new(std::io::BufWriter::new(file)), redactor.clone())
        }
    };
    let tape = match &args.record {
        Some(path) if path.exists() => {
            return Err(format!(
                "fixture `{}` already exists; remove it or record to another path",
                path.display()
            ))
        }
        Some(_) => Some(Arc::new(Tape::recording(redactor.clone()))),
        None => None,
    };
    let transport = match &tape {
        Some(t) => Transport::with_tape(t.clone()),
        None => Transport::live(),
    }
    .allow_exec(&args.allow_exec);
    let rt = crate::session::runtime();
    // Remote MCP tools are listed and checked before a client sees `tools/list`, which then
    // carries their servers' descriptions and schemas; a missing tool is an error here.
    if let Err(why) = rt.block_on(connect_remote(&registry, &transport, &events, &secrets)) {
        eprintln!("error: {why}");
        return Ok(exit::FAILED);
    }
    let served = Arc::new(Served::new(
        registry,
        transport,
        events,
        secrets,
        args.approve.iter().cloned().collect(),
        args.now.clone(),
        args.record.is_some(),
    )?);
    let tool_count = served.registry.callable_tools().count();
    let result: Result<(), String> = rt.block_on(async {
        match http {
            Some((addr, token)) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
                let bound = listener.local_addr().map_err(|e| e.to_string())?;
                eprintln!(
                    "toolrun: serving {tool_count} tool(s) of `{}` on http://{bound}{}",
                    served.registry.name,
                    crate::mcp::http::ENDPOINT
                );
                crate::mcp::http::serve(served.clone(), listener, token, shutdown_signal()).await;
                Ok(())
            }
            None => {
                let running = Session::new(&served)
                    .serve(rmcp::transport::stdio())
                    .await
                    .map_err(|e| format!("the MCP client did not initialize the session: {e}"))?;
                let cancel = running.cancellation_token();
                tokio::select! {
                    _ = running.waiting() => {}
                    _ = shutdown_signal() => cancel.cancel(),
                }
                Ok(())
            }
        }
    });
    // The sessions this one opened with remote MCP servers end with it.
    let s = &*served;
    rt.block_on(crate::tools::mcp::end_all(&remote_env(
        &s.registry,
        &s.transport,
        &s.events,
        &s.secrets,
    )));
    // Whatever ended the session, what was recorded is written.
    if let (Some(path), Some(tape)) = (&args.record, &tape) {
        write_session_fixture(path, &args.spec, &served, tape)?;
    }
    result?;
    Ok(exit::SUCCESS)
}

/// The shortest bearer token accepted on an address other machines can reach.
const MIN_TOKEN_CHARS: usize = 16;

/// `--http ADDR:PORT` and its token: loopback needs none; any other address requires one, read
/// from the named environment variable.
fn http_settings(
    text: &str,
    token_env: Option<&str>,
) -> Result<(SocketAddr, Option<String>), String> {
    let addr: SocketAddr = text.parse().map_err(|_| {
        format!("--http takes ADDR:PORT, such as 127.0.0.1:8765 or [::1]:8765, not `{text}`")
    })?;
    let token = match token_env {
        None => None,
        Some(var) => match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Some(v.trim().to_string()),
            _ => {
                return Err(format!(
                    "--token-env names `{var}`, which is not set (or empty); export the bearer token there"
                ))
            }
        },
    };
    if !crate::mcp::http::is_loopback(&addr) {
        match &token {
            None => {
                return Err(format!(
                    "{addr} is reachable from other machines; pass --token-env VAR (a bearer token every request must carry) or bind 127.0.0.1"
                ))
            }
            // A short token can be guessed by anyone who can reach the port.
            Some(t) if t.chars().count() < MIN_TOKEN_CHARS => {
                return Err(format!(
                    "the token in `{}` has {} characters; on an address other machines can reach it needs at least {MIN_TOKEN_CHARS} (e.g. `openssl rand -hex 24`)",
                    token_env.unwrap_or_default(),
                    t.chars().count()
                ))
            }
            Some(_) => {}
        }
    }
    Ok((addr, token))
}

/// Ctrl-C or SIGTERM: the normal way to stop a server, so it ends cleanly with exit 0.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

/// The served calls, the HTTP exchanges their tools made and a trace, as one fixture.
fn write_session_fixture(
    path: &std::path::Path,
    spec: &std::path::Path,
    served: &Served,
    tape: &Tape,
) -> Result<(), String> {
    let fixture = crate::mcp::record::session_fixture(
        &served.registry,
        crate::fixture::fixture_spec(&served.registry, spec, path),
        &served.logged_calls(),
        tape.exchanges(),
        served.approvals.iter().cloned().collect(),
        crate::builtins::datetime::now_unix_ms(served.now.as_deref()).unwrap_or(0),
    );
    crate::fixture::write_fixture(path, &fixture, &served.redactor)
}
