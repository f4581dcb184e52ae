//! `toolrun serve`: the registry as an MCP server, over stdio or streamable HTTP. The work is in
//! `crate::mcp_server`; this maps flags to it and its end to an exit code.

use crate::cli::ServeArgs;
use crate::exit;
use crate::fixture::session_log::{Header, SessionLog};
use crate::mcp_server::record::CallLog;
use crate::mcp_server::server::{Served, ServedSession};
use crate::setup::{Inputs, Network, Output, Setup};
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

fn serve(args: ServeArgs) -> Result<i32, String> {
    let registry = match super::load_registry(&args.spec) {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    let http = transport(&args, &registry)?;
    let state_key = (args.state_key_env.as_deref())
        .map(crate::mcp_server::state::StateKey::from_env)
        .transpose()?;
    let mut inputs = Inputs::from_flags(&args.setup);
    if let Some(path) = &args.record {
        if path.exists() {
            return Err(format!(
                "fixture `{}` already exists; remove it or record to another path",
                path.display()
            ));
        }
        inputs
            .outputs
            .push(Output::in_new_folders(path, "--record"));
        inputs.network = Network::Record { previous: None };
    }
    if args.max_processes == 0 {
        return Err("--max-processes must be at least 1".into());
    }
    if args.max_requests == 0 {
        return Err("--max-requests must be at least 1".into());
    }
    let setup = Setup::open(&registry, inputs)?;
    crate::tools::mcp::limit_processes(&setup.transport, args.max_processes);
    // As `run` does when its fixture cannot be written: the work failed.
    let recorded = recording(&args, &registry, &setup).map_err(|why| eprintln!("error: {why}"));
    let Ok(log) = recorded else {
        return Ok(exit::FAILED);
    };
    schedule(args.scheduling);
    let rt = crate::setup::runtime();
    // Listening for SIGTERM from here on: one that came between announcing the address and
    // polling took the default action, and the stdio servers started below were left running.
    let stop = {
        let _entered = rt.enter();
        crate::setup::shutdown()
    };
    // Remote MCP tools are listed and checked before a client sees `tools/list`, which then
    // carries their servers' descriptions and schemas; a missing tool is an error here.
    if let Err(why) = rt.block_on(crate::mcp_server::connect_remote(&registry, &setup)) {
        eprintln!("error: {why}");
        // A server that did not start in time is ended as at the end, not left to a signal.
        rt.block_on(crate::tools::mcp::end_every_process(&setup.transport));
        return Ok(exit::FAILED);
    }
    // Over stdio the client started this process: there is no one else to keep out.
    let auth = match http {
        Some(_) => rt.block_on(crate::mcp_server::auth::Auth::new(&registry, &setup))?,
        None => None,
    };
    // Checked with or without `serve.auth`, which alone gives subjects to count.
    let subjects = Some(subjects(&args, registry.serve)?).filter(|_| auth.is_some());
    let served = Served::new(registry, setup, log)?.with_state_key(state_key);
    let served = served.with_task_bounds(task_bounds(&args)?);
    let served = Arc::new(served.with_subjects(subjects));
    let tool_count = served.registry.callable_tools().count();
    let result: Result<(), String> = rt.block_on(async {
        match http {
            Some(((addr, token), bounds)) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
                let bound = listener.local_addr().map_err(|e| e.to_string())?;
                eprintln!(
                    "toolrun: serving {tool_count} tool(s) of `{}` on http://{bound}{}",
                    served.registry.name,
                    crate::mcp_server::http::ENDPOINT
                );
                let guards = (token, auth.map(Arc::new));
                crate::mcp_server::http::serve(served.clone(), listener, guards, bounds, stop)
                    .await;
                Ok(())
            }
            None => serve_stdio(&served, args.max_requests, stop).await,
        }
    });
    // Whatever ended the session, the recording says it ended, before the remote servers are
    // ended: a stdio client that closed stdin gives its server 2 s before SIGTERM and SIGKILL
    // (the official SDKs), and a stdio server's helpers that ignore SIGTERM take that long to
    // end. Ending them records nothing.
    let mut code = exit::SUCCESS;
    if let Some(log) = served.recording() {
        log.end(served.setup.clock.now_unix_ms());
        if let Some(why) = log.failure() {
            eprintln!("error: {why}");
            code = exit::FAILED;
        }
    }
    // The sessions this one opened with remote MCP servers end with it: its own, and each
    // client session's.
    // All at once: a client that closed stdio gives its server little time to exit.
    let upstream = served
        .upstream
        .lock()
        .map(|u| u.clone())
        .unwrap_or_default();
    let mut envs = vec![served.upstream_env(&served.setup.transport)];
    envs.extend(upstream.iter().map(|t| served.upstream_env(t)));
    rt.block_on(futures_util::future::join_all(
        envs.iter().map(crate::tools::mcp::end_all),
    ));
    // Then every process still running, whoever was ending it: none outlives `serve`.
    rt.block_on(crate::tools::mcp::end_every_process(
        &served.setup.transport,
    ));
    // Over stdio, stdin is read by a blocking thread that a dropped runtime waits for until the
    // client closes stdin: a SIGTERM'd server would hang there.
    rt.shutdown_background();
    result?;
    Ok(code)
}

/// `--record`: the recording, created with its header, which the tape streams every exchange
/// to from the first on (the remote servers' listing).
fn recording(
    args: &ServeArgs,
    registry: &crate::registry::Registry,
    setup: &Setup,
) -> Result<Option<CallLog>, String> {
    let (Some(path), Some(tape)) = (&args.record, &setup.tape) else {
        return Ok(None);
    };
    let header = || Header {
        spec: crate::fixture::fixture_spec(registry, &args.spec, path),
        now_unix_ms: setup.clock.now_unix_ms(),
        approvals: setup.approvals.iter().cloned().collect(),
    };
    let log = Arc::new(SessionLog::create(path, header, setup.redactor.clone())?);
    let sink = log.clone();
    tape.stream_to(Box::new(move |e| sink.exchange(&e)));
    Ok(Some(CallLog::Stream(log)))
}

/// `--http` and its settings, or stdio (`None`), checked against the spec before anything is
/// bound: a bad flag never leaves a half-started server.
fn transport(
    args: &ServeArgs,
    registry: &crate::registry::Registry,
) -> Result<Option<(HttpSettings, crate::mcp_server::http::Bounds)>, String> {
    let oauth = registry.serve_auth.is_some();
    if oauth && args.token_env.is_some() {
        return Err("the spec's `serve.auth` takes OAuth access tokens; --token-env is for a static token instead (drop one of them)".into());
    }
    if let Some(text) = &args.http {
        let settings = http_settings(text, args.token_env.as_deref(), oauth)?;
        return Ok(Some((settings, bounds(args)?)));
    }
    if args.token_env.is_some() {
        return Err("--token-env applies to --http; stdio needs no token".into());
    }
    // Over stdio no request carries a token (the MCP authorization spec is for HTTP): serving
    // anyway would hand tools the spec meant to protect to whatever feeds stdin, such as a
    // stdio-to-HTTP bridge. Refused rather than warned about, which a bridge's log would hide.
    if oauth {
        return Err("the spec's `serve.auth` protects `serve --http` only: over stdio no token is checked, so its tools would be served to whoever writes to stdin; serve it with --http ADDR:PORT (127.0.0.1 for this machine only), or over stdio from a spec without `serve.auth`".into());
    }
    // Stdin is the client's: a question asked there would be read as a message.
    crate::oauth::consent::forbid("stdin carries the MCP session (`serve` over stdio)");
    Ok(None)
}

/// `--http`'s address and its `--token-env` token.
type HttpSettings = (SocketAddr, Option<String>);

/// `--max-tasks`, `--task-ttl`, `--replica-id`.
fn task_bounds(args: &ServeArgs) -> Result<crate::mcp_server::tasks::TaskBounds, String> {
    if args.max_tasks == 0 {
        return Err("--max-tasks must be at least 1".into());
    }
    let ttl = crate::specfile::read::parse_duration(&args.task_ttl)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            format!(
                "--task-ttl takes a duration such as 10m or 1h, not `{}`",
                args.task_ttl
            )
        })?;
    // A header value and an HAProxy server name as it is, and never the `.` that ends it in
    // a task id.
    let replica = args.replica_id.clone();
    if let Some(name) = &replica {
        let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
        if name.is_empty() || name.len() > 32 || !name.chars().all(allowed) {
            return Err(format!(
                "--replica-id takes 1 to 32 of a-z, 0-9 and `-` (e.g. replica1, toolrun-0), not `{name}`"
            ));
        }
    }
    Ok(crate::mcp_server::tasks::TaskBounds {
        max: args.max_tasks,
        ttl,
        replica,
    })
}

/// `--max-sessions`, `--session-idle`, `--max-connections`, `--read-timeout`.
fn bounds(args: &ServeArgs) -> Result<crate::mcp_server::http::Bounds, String> {
    let duration = |flag: &str, text: &str| {
        crate::specfile::read::parse_duration(text)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("{flag} takes a duration such as 10s, 30m or 2h, not `{text}`"))
    };
    let count = |flag: &str, n: usize| {
        if n == 0 {
            Err(format!("{flag} must be at least 1"))
        } else {
            Ok(n)
        }
    };
    Ok(crate::mcp_server::http::Bounds {
        max_connections: count("--max-connections", args.max_connections)?,
        read_timeout: duration("--read-timeout", &args.read_timeout)?,
        max_sessions: count("--max-sessions", args.max_sessions)?,
        session_idle: duration("--session-idle", &args.session_idle)?,
    })
}

/// `--max-subjects` and `--subject-window`: each authenticated subject's counts of its
/// 2026-07-28 calls.
fn subjects(
    args: &ServeArgs,
    limits: crate::registry::ServeLimits,
) -> Result<crate::mcp_server::subjects::Subjects, String> {
    if args.max_subjects == 0 {
        return Err("--max-subjects must be at least 1".into());
    }
    let text = &args.subject_window;
    let window = crate::specfile::read::parse_duration(text)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            format!("--subject-window takes a duration such as 30m, 1h or 24h, not `{text}`")
        })?;
    let window = (window, text.as_str());
    Ok(crate::mcp_server::subjects::Subjects::new(
        limits,
        args.max_subjects,
        window,
    ))
}

/// The shortest bearer token accepted on an address other machines can reach.
const MIN_TOKEN_CHARS: usize = 16;

/// `--http ADDR:PORT` and its token: loopback needs none; any other address requires one, read
/// from the named environment variable.
fn http_settings(text: &str, token_env: Option<&str>, oauth: bool) -> Result<HttpSettings, String> {
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
    if !crate::mcp_server::http::is_loopback(&addr) && !oauth {
        match &token {
            None => {
                return Err(format!(
                    "{addr} is reachable from other machines; pass --token-env VAR (a bearer token every request must carry), set `serve.auth` in the spec, or bind 127.0.0.1"
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

/// Puts the server's thread (the one the runtime runs every connection and call on) under
/// `SCHED_BATCH` unless told otherwise. A served call is a ping-pong between processes: the
/// client's request wakes toolrun, toolrun's request wakes the upstream, its answer wakes
/// toolrun, toolrun's answer wakes the client. Under `SCHED_OTHER` each wakeup may preempt the
/// process that caused it, one context switch more a time on a busy CPU; a batch thread waits
/// instead for that process to block, which it is about to do. Measured side by side
/// (`benches/serve_bench.py`): 83 → 68 µs of server CPU a call, calls/s and p50 unchanged.
/// The stdio MCP servers it starts run under the default policy (`tools::mcp::stdio`). A system
/// that refuses the change (a seccomp filter, say) serves as before.
fn schedule(policy: crate::cli::Scheduling) {
    #[cfg(target_os = "linux")]
    if policy == crate::cli::Scheduling::Batch {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` lives for the call; pid 0 is the calling thread, and the policy is
        // one an unprivileged thread may take.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_BATCH, &param);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = policy;
}

/// One MCP session over stdin and stdout, until the client leaves or a signal comes.
async fn serve_stdio(
    served: &Arc<Served>,
    max_requests: usize,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    let mut stop = std::pin::pin!(stop);
    // A signal while the client has not yet initialized ends the server too: the
    // handlers are registered, so nothing else would.
    // Boxed: rmcp's session future is deep enough that selecting on it inline overflows the
    // compiler's layout query depth.
    let transport = crate::mcp_server::stdio::transport(max_requests);
    let starting = Box::pin(ServedSession::new(served).serve(transport));
    let running = tokio::select! {
        r = starting => r.map_err(
            |e| format!("the MCP client did not initialize the session: {e}"),
        )?,
        _ = &mut stop => return Ok(()),
    };
    let cancel = running.cancellation_token();
    let stopped = tokio::select! {
        _ = running.waiting() => false,
        _ = &mut stop => true,
    };
    // Calls still running end first (for a few seconds at most), so that their
    // answers go out and a recording has them; those that do not are cut off.
    served.calls_end(std::time::Duration::from_secs(3)).await;
    served.cut_off();
    served.calls_end(std::time::Duration::from_secs(1)).await;
    if stopped {
        cancel.cancel();
    }
    Ok(())
}
