//! The stdio half of [`Rpc`]: a message to a server program toolrun starts (never through a
//! shell, only when `--allow-exec` allows it), recorded and replayed as any exchange, and what
//! its reader answers on its own recorded beside it.

use super::allow::{self, Refusal};
use super::exchange::Rpc;
use super::pool::{self, Pool, Refused};
use super::rpc::{is_request, Incoming};
use super::stdio::{self, Process};
use super::{ClientSession, END_TIMEOUT, LINE_CAP, MAX_BYTES};
use crate::net::{HttpRequest, HttpResponse, NetError, Purpose, SendOptions};
use crate::registry::StdioCommand;
use crate::tools::{ErrorKind, ToolError};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

impl Rpc<'_, '_> {
    /// A request to a stdio server: its progress and log notifications are events as they
    /// arrive, as over HTTP, and so are the requests the server sent about it, which its reader
    /// answered at once (see `stdio::Pending::about` for which call a message is about). They
    /// come again with the answer: answered when it came live, answered now in a replay (see
    /// `leftovers`).
    pub(super) async fn stdio_call(
        &self,
        method: &str,
        cmd: &StdioCommand,
        body: &Value,
        incoming: &Incoming<'_, '_>,
    ) -> Result<(HttpResponse, Vec<String>), ToolError> {
        let on_note = |note: &[u8]| {
            if let Ok(note) = serde_json::from_slice::<Value>(note) {
                if is_request(&note) {
                    incoming.request(&note);
                } else {
                    incoming.notification(&note);
                }
            }
            true
        };
        let opts = SendOptions {
            timeout: self.timeout,
            max_bytes: MAX_BYTES,
            progress: None,
            on_chunk: Some(&on_note),
            reshape: None,
        };
        let went_live = AtomicBool::new(false);
        let sent = self.send_stdio(cmd, body, opts, Some(&went_live)).await?;
        let resp = sent.map_err(|e| self.net_error(method, e))?;
        let resp = self.checked(method, resp)?;
        let answered = match went_live.load(Ordering::SeqCst) {
            true => request_ids(&resp.body),
            false => Vec::new(),
        };
        Ok((resp, answered))
    }

    /// One message to a stdio server, recorded as a request `STDIN` to `stdio: COMMAND LINE`.
    /// The program is judged against `--allow-exec` before anything can start it, and started
    /// by the first message that goes live (a replay starts nothing).
    pub(super) async fn send_stdio<'o>(
        &self,
        cmd: &StdioCommand,
        body: &Value,
        opts: SendOptions<'o>,
        went_live: Option<&AtomicBool>,
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
        // Only a request waits for an answer (an answer to the server's request has an id too).
        let id = body.get("method").and(body.get("id")).cloned();
        let live = |opts: SendOptions<'o>| async move {
            if let Some(flag) = went_live {
                flag.store(true, Ordering::SeqCst);
            }
            let program = program.ok_or_else(|| NetError::Io("not started in a replay".into()))?;
            let process = self.process(cmd, &program).await?;
            process
                .send(&bytes, id.as_ref(), opts.timeout, opts.on_chunk)
                .await
        };
        Ok(self
            .env
            .transport
            .send_via(Purpose::Mcp(&self.server.name), &req, opts, live)
            .await)
    }

    /// Writes a notification to the server's process, if this run started one (a replay
    /// starts none), without recording it. Whether it was written.
    pub(super) async fn tell_stdio(&self, body: &Value) -> bool {
        let session = self
            .env
            .transport
            .session::<ClientSession>(&self.server.name);
        let process = session.stdio.lock().await.clone();
        let Some(process) = process else {
            return false;
        };
        let bytes = body.to_string().into_bytes();
        // Bounded: a server that reads nothing more (its stdin full) is not waited for.
        let told = process.send(&bytes, None, self.timeout, None);
        matches!(tokio::time::timeout(END_TIMEOUT, told).await, Ok(Ok(_)))
    }

    pub(super) fn admitted(&self, cmd: &StdioCommand) -> Result<std::path::PathBuf, ToolError> {
        let program = &cmd.argv[0];
        let (name, at) = (&self.server.name, &cmd.at);
        allow::admitted(cmd, self.env.transport.exec_allowed()).map_err(|r| match r {
            Refusal::NotAllowed => ToolError::new(
                ErrorKind::Denied,
                format!(
                    "MCP server `{name}` ({at}) runs the program `{program}`, and toolrun starts a program only when the command line allows it: add `--allow-exec {program}` (with any arguments) or `--allow-command {}` (exactly these) to the command (run, test, call or serve)",
                    shell_words(&cmd.argv)
                ),
            ),
            Refusal::NotFound => ToolError::new(
                ErrorKind::ExecutionError,
                format!(
                    "MCP server `{name}` ({at}): cannot find the program `{program}` (a name is looked up in PATH's absolute folders, a path against the project root {}); install it or fix `command:`",
                    cmd.dir.display()
                ),
            ),
            Refusal::Env(var) => ToolError::new(
                ErrorKind::Denied,
                format!(
                    "MCP server `{name}` ({at}) sets `{var}` in its `env:`, which chooses what code `{program}` runs (a loader, interpreter or search-path variable), so allowing the program does not allow it: add `--allow-env {var}` to the command if you trust the spec's value"
                ),
            ),
        })
    }

    /// The server's process for this run (or served session), started on first use with its
    /// `env:` rendered, and again on the next use after it crashed or was ended to make room for
    /// another session's (`--max-processes`): a session's server is never broken for good.
    pub(super) async fn process(
        &self,
        cmd: &StdioCommand,
        program: &std::path::Path,
    ) -> Result<Arc<Process>, NetError> {
        let session = self
            .env
            .transport
            .session::<ClientSession>(&self.server.name);
        let mut slot = session.stdio.lock().await;
        match slot.take() {
            Some(p) if !p.is_over() => {
                *slot = Some(p.clone());
                return Ok(p);
            }
            Some(over) => self.ended(&over).await,
            None => {}
        }
        let vars = self
            .render_with_secrets(&cmd.env)
            .await
            .into_iter()
            .map(|(name, value)| match value {
                Ok(v) => Ok((name.clone(), v)),
                Err(e) => Err(NetError::Io(format!(
                    "could not build its environment variable `{name}`: {}",
                    e.message
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let pool = self.env.transport.shared::<Pool>(pool::KEY);
        let start = || {
            stdio::spawn(
                cmd,
                program,
                vars,
                LINE_CAP,
                self.server.elicitation,
                self.answer_recorder(),
                self.env.secrets.redactor(),
            )
        };
        let (started, evicted) = pool.admit(&self.server.name, start).map_err(|e| match e {
            Refused::Failed(e) => {
                NetError::Connect(format!("cannot start `{}`: {e}", program.display()))
            }
            Refused::Full => NetError::Connect(format!(
                "it is not started: `serve` runs at most {} stdio server processes at once (--max-processes), and each has a call in flight; call again when one has answered, or raise --max-processes",
                pool.max()
            )),
            Refused::Closed => NetError::Connect(
                "it is not started: toolrun is ending, and ends every server it started".into(),
            ),
        })?;
        if let Some(evicted) = evicted {
            self.make_room(evicted, pool.max());
        }
        // A server of 2026-07-28 has no handshake: every request carries what it needs.
        if let Some(conn) = self.conn.filter(|c| !super::modern::is_modern(&c.protocol)) {
            introduce(&started, &conn.protocol, self.timeout).await?;
        }
        self.env.events.emit_with(
            "mcp_server_started",
            || json!({ "server": self.server.name, "program": program.display().to_string() }),
        );
        *slot = Some(started.clone());
        Ok(started)
    }

    /// A process that crashed (or was ended to make room) is reaped before the next one starts;
    /// how it ended is an `mcp_server_ended` event, unless that was said when it was ended.
    async fn ended(&self, process: &Process) {
        let how = process.end().await;
        if how == stdio::ALREADY_ENDED {
            return;
        }
        let stderr = self.env.secrets.redactor().str(&process.stderr_text());
        self.env.events.emit_with(
            "mcp_server_ended",
            || json!({ "server": self.server.name, "ended": how, "stderr": stderr }),
        );
    }

    /// Ends another session's idle process, which made room for this one, in the background
    /// (its grace periods are not this call's to wait).
    fn make_room(&self, evicted: pool::Evicted, max: usize) {
        let process = evicted.process;
        let ending = async move {
            process.end().await;
        };
        tokio::spawn(ending);
        self.env.events.emit_with("mcp_server_ended", || {
            json!({ "server": evicted.server, "ended": format!("ended to make room for another session's (--max-processes {max}); its session starts it again on its next call") })
        });
    }

    /// A stdio server whose recorded replies this run reuses, in a fixture recorded before
    /// toolrun recorded the answers it writes to a server's requests: such a recording has the
    /// server's requests and no answer to any (a later one records each answer given with a
    /// reply), so its requests are reported, not answered, and nothing is compared; answering
    /// them would fail the replay of every older fixture whose server asked something.
    pub(super) fn recorded_without_answers(&self) -> bool {
        self.server.stdio.is_some()
            && !self
                .env
                .transport
                .tape_holds(Purpose::Mcp(&self.server.name), "STDIN", &|b| {
                    b.get("method").is_none() && b.get("id").is_some()
                })
    }

    /// Records each answer the server's reader writes (a request `STDIN` to `stdio: COMMAND
    /// LINE`, as any message sent), so a replay, which answers the recorded requests itself,
    /// finds its answers recorded or reports how they differ.
    pub(super) fn answer_recorder(&self) -> Option<stdio::OnAnswer> {
        let tape = self.env.transport.recorder()?;
        let (name, url) = (self.server.name.clone(), self.server.url.clone());
        Some(Box::new(move |answer: &[u8]| {
            let req = HttpRequest {
                method: "STDIN".into(),
                url: url.clone(),
                headers: Vec::new(),
                body: Some(answer.to_vec()),
            };
            let sent = Ok(stdio::response(Vec::new(), false));
            tape.record(Purpose::Mcp(&name), &req, &sent);
        }))
    }
}

/// The handshake for a process started after the session was made from a recording (a
/// `--record-mode new` run whose first live message is a call): the recording has the
/// session's handshake, so this one is not recorded, but a server answers nothing before it.
async fn introduce(
    process: &Process,
    protocol: &str,
    timeout: std::time::Duration,
) -> Result<(), NetError> {
    let id = json!("toolrun-initialize");
    let init = json!({ "jsonrpc": "2.0", "id": id, "method": "initialize", "params": super::initialize_params(protocol) });
    let reply = process
        .send(init.to_string().as_bytes(), Some(&id), timeout, None)
        .await?;
    let answer: Value = serde_json::from_slice(&reply.body).unwrap_or_default();
    if answer.get("result").is_none() {
        return Err(NetError::Io(format!(
            "it refused `initialize` (needed before the first call this run makes to it live): {}",
            answer.get("error").unwrap_or(&answer)
        )));
    }
    let done = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    process
        .send(done.to_string().as_bytes(), None, timeout, None)
        .await
        .map(|_| ())
}

/// The ids (as JSON text) of the server's requests a reply carries.
fn request_ids(body: &[u8]) -> Vec<String> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Array(items)) => items
            .iter()
            .filter(|m| is_request(m))
            .map(|m| m["id"].to_string())
            .collect(),
        _ => Vec::new(),
    }
}

/// The command line `--allow-command` would take for `argv`, quoted for a shell.
fn shell_words(argv: &[String]) -> String {
    let line = allow::join_command_line(argv);
    format!("'{}'", line.replace('\'', r"'\''"))
}
