//! The stdio transport of `kind: mcp`: a server program toolrun starts (never through a shell),
//! speaking newline-delimited JSON-RPC on its stdin and stdout, as the MCP specification
//! (2025-11-25) defines it. Each message goes through `Transport::send_via`, so recording,
//! replay, masking and the size cap are those of HTTP, and a replay starts nothing.
//!
//! The program runs in its own process group, so everything it starts ends with it: at the end
//! of the run its stdin is closed, then the group gets SIGTERM, then SIGKILL after a grace
//! period (the order the specification asks of a client), and the leader is reaped. Its stderr
//! is kept (the last 64 KiB) for errors and the `mcp_server_ended` event. Should toolrun itself
//! be killed, on Linux the server gets SIGTERM from the kernel (see `end_with_toolrun`).
//!
//! Elsewhere than Unix (no process groups or signals) `spawn` refuses with "not supported on
//! this platform", so the reader and the process plumbing are compiled but unused there.
#![cfg_attr(not(unix), allow(dead_code))]

use crate::net::{HttpResponse, NetError};
use crate::redact::Redactor;
use crate::registry::{Elicitation, StdioCommand};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::BufReader;
use tokio::process::Child;
use tokio::sync::oneshot;

use super::allow::absolute_path;
use super::lines::{read_line, Line};
use super::stderr::{keep_stderr, with_stderr, Tail};
use super::stdin::{Stdin, WRITE_TIMEOUT};

/// What [`Process::end`] says of a process already ended.
pub(crate) const ALREADY_ENDED: &str = "already ended";
/// How long the server has to exit after its stdin closes, and again after SIGTERM.
const GRACE: Duration = Duration::from_secs(2);
/// What an official SDK passes on of the client's environment by default; nothing else is.
pub(crate) const INHERITED: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

type Reply = Result<HttpResponse, NetError>;
/// What a waiting call does with a message the server sent about it (JSON text: a notification,
/// or a request already answered), as with a chunk of an HTTP reply.
type OnNote<'a> = &'a (dyn Fn(&[u8]) -> bool + Sync);
/// Records an answer toolrun wrote to the server (JSON text), as a message sent.
pub(crate) type OnAnswer = Box<dyn Fn(&[u8]) + Send + Sync>;

/// Requests sent and not yet answered, by their JSON-RPC id (as JSON text).
#[derive(Default)]
struct Pending {
    waiting: HashMap<String, Waiter>,
    /// Why the server can answer nothing more (it exited), once it can't.
    closed: Option<String>,
    /// Counts requests as they are sent: the earliest one waiting is the lowest.
    sent: u64,
    /// The server's requests about no request waiting (it sent them between calls, or about a
    /// call given up on): they go with the next answer, so a replay answers them there.
    unclaimed: Vec<Asked>,
    /// The latest requests given up on (their timeout), by id: a late answer to one is not a
    /// server's mistake, an answer to a request never sent is.
    given_up: std::collections::VecDeque<String>,
}

/// Requests given up on whose ids are remembered, at most.
const GIVEN_UP_KEPT: usize = 256;

/// A request from the server and the answer written to it (`None`: it could not be written).
/// The answer is recorded once the request goes with a reply, so every answer recorded is one
/// a replay gives: a request that goes with none (the server crashed) leaves no answer behind.
type Asked = (Value, Option<String>);

/// One request waiting for its answer, and what the server sent about it meanwhile.
struct Waiter {
    tx: oneshot::Sender<Reply>,
    /// Its progress, its log lines and the server's requests, for the call to make events of.
    notes: tokio::sync::mpsc::Sender<Value>,
    /// The server's requests that go with its answer (reported and recorded with it).
    kept: Vec<Asked>,
    sent: u64,
}

impl Pending {
    /// An answer no request waits for: a late one to a request given up on is dropped; one
    /// under an id toolrun never sent fails the request it is most likely for (as [`about`]
    /// places what names no request), at once, rather than leaving it to wait out its timeout
    /// and blame the server's speed.
    ///
    /// [`about`]: Pending::about
    fn unrequested(&mut self, id: &Value) {
        let key = id.to_string();
        if let Some(at) = self.given_up.iter().position(|k| *k == key) {
            self.given_up.remove(at);
            return;
        }
        let Some(earliest) = self
            .waiting
            .iter()
            .min_by_key(|(_, w)| w.sent)
            .map(|(k, _)| k.clone())
        else {
            return;
        };
        if let Some(w) = self.waiting.remove(&earliest) {
            let _ = w.tx.send(Err(NetError::Io(format!(
                "it sent a response for id {key}, which no request toolrun sent has (this one is {earliest}): a server must answer each request under its own id"
            ))));
        }
    }

    /// The request a message from the server is about. stdio carries one stream, so only
    /// progress names its request (`progressToken`, which toolrun sets to the request's id);
    /// a log line or a request from the server (elicitation, ping, roots, sampling) carries no
    /// relation on the wire, and goes with the one request waiting, or with the earliest of
    /// several (the one the server has worked on longest).
    fn about(&mut self, message: &Value) -> Option<&mut Waiter> {
        if message.get("method").and_then(Value::as_str) == Some("notifications/progress") {
            let token = message.pointer("/params/progressToken")?;
            return self.waiting.get_mut(&token.to_string());
        }
        self.waiting.values_mut().min_by_key(|w| w.sent)
    }
}

/// A running stdio server.
pub(crate) struct Process {
    pgid: i32,
    stdin: Arc<Stdin>,
    pending: Arc<Mutex<Pending>>,
    stderr: Arc<Mutex<Tail>>,
    child: Arc<tokio::sync::Mutex<Option<Child>>>,
    /// Being ended (or ended): it takes no more calls.
    ended: Mutex<bool>,
    /// Ended and reaped: only then may it go without a signal (see `Drop`).
    reaped: std::sync::atomic::AtomicBool,
    /// Ended to make room for another (see `pool`): its session starts a new one.
    retired: std::sync::atomic::AtomicBool,
    /// When a message was last sent to it: the process idle the longest makes room first.
    last_used: Mutex<std::time::Instant>,
}

/// Starts the server: `program` with the spec's arguments, in the project root, with only the
/// inherited variables and the spec's `env:` (already rendered), in a process group of its own.
pub(crate) fn spawn(
    cmd: &StdioCommand,
    program: &Path,
    env: Vec<(String, String)>,
    line_cap: usize,
    elicitation: Elicitation,
    on_answer: Option<OnAnswer>,
    redactor: Redactor,
) -> std::io::Result<Process> {
    #[cfg(not(unix))]
    {
        let _ = (
            cmd,
            program,
            env,
            line_cap,
            elicitation,
            on_answer,
            redactor,
        );
        Err(std::io::Error::other(
            "stdio MCP servers are not supported on this platform (they need process groups and signals); use a streamable-HTTP server (`url:`)",
        ))
    }
    #[cfg(unix)]
    {
        let mut command = tokio::process::Command::new(program);
        command
            .args(&cmd.argv[1..])
            .env_clear()
            .envs(INHERITED.iter().filter_map(|k| {
                let v = std::env::var_os(k)?;
                Some((*k, if *k == "PATH" { absolute_path(&v) } else { v }))
            }))
            .envs(env)
            .current_dir(&cmd.dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        #[cfg(target_os = "linux")]
        {
            end_with_toolrun(&mut command);
            default_scheduling(&mut command);
        }
        let mut child = command.spawn()?;
        let pgid = child.id().map(|p| p as i32).unwrap_or(0);
        let stdin = Arc::new(Stdin::new(child.stdin.take()));
        let pending = Arc::new(Mutex::new(Pending::default()));
        let stderr = Arc::new(Mutex::new(Tail::new(redactor)));
        let child_out = child.stdout.take();
        let child_err = child.stderr.take();
        let child = Arc::new(tokio::sync::Mutex::new(Some(child)));
        let (err_done_tx, err_done) = oneshot::channel();
        if let Some(err) = child_err {
            tokio::spawn(keep_stderr(err, stderr.clone(), err_done_tx));
        }
        if let Some(out) = child_out {
            let reader = Reader {
                stdin: stdin.clone(),
                pending: pending.clone(),
                stderr: stderr.clone(),
                child: child.clone(),
                line_cap,
                elicitation,
                on_answer,
            };
            tokio::spawn(reader.run(out, err_done));
        }
        Ok(Process {
            pgid,
            stdin,
            pending,
            stderr,
            child,
            ended: Mutex::new(false),
            reaped: Default::default(),
            retired: Default::default(),
            last_used: Mutex::new(std::time::Instant::now()),
        })
    }
}

/// On Linux the server gets SIGTERM when toolrun ends without ending it (SIGKILL, a crash): the
/// kernel's parent-death signal, set in the child before it runs the program. It reaches the
/// program toolrun starts, not what that program starts in turn (a launcher such as `npx` passes
/// it on only if it forwards SIGTERM), and a program that ignores SIGTERM outlives toolrun.
/// The signal follows the thread that started the server, and toolrun starts servers only from
/// threads that outlive the run.
#[cfg(target_os = "linux")]
fn end_with_toolrun(command: &mut tokio::process::Command) {
    // SAFETY: getpid before the fork; in the child only prctl and getppid, which are
    // async-signal-safe, and an error made without allocating.
    let parent = unsafe { libc::getpid() };
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // toolrun ended before the signal was set: the server has no one to serve.
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// The server runs under the system's default scheduling policy, whatever policy the thread
/// that starts it has (`serve`'s is a batch thread, which a child would inherit).
#[cfg(target_os = "linux")]
fn default_scheduling(command: &mut tokio::process::Command) {
    // SAFETY: in the child only sched_setscheduler, which is async-signal-safe; a policy it
    // cannot change leaves the server as it was.
    unsafe {
        command.pre_exec(|| {
            let param = libc::sched_param { sched_priority: 0 };
            libc::sched_setscheduler(0, libc::SCHED_OTHER, &param);
            Ok(())
        });
    }
}

/// Server requests kept beside one answer at most: a server sending requests without end
/// keeps memory bounded (each is still answered).
const MAX_KEPT_REQUESTS: usize = 100;
/// Messages about one call waiting for it to read them, at most (past that, they are dropped:
/// they are only events).
const NOTES_KEPT: usize = 256;

/// A change of the tool list the server announced, kept for the next answer.
#[derive(Default)]
struct Kept {
    changed: Option<Value>,
}

/// Reads the server's stdout: answers go to the requests waiting for them, requests from the
/// server are answered at once and kept with the answer to the request they are about (see
/// [`Pending::about`]), as a reply sent as an event stream keeps them, and
/// `notifications/tools/list_changed` is kept beside the next answer, for the caller to list
/// again.
struct Reader {
    stdin: Arc<Stdin>,
    pending: Arc<Mutex<Pending>>,
    stderr: Arc<Mutex<Tail>>,
    child: Arc<tokio::sync::Mutex<Option<Child>>>,
    line_cap: usize,
    /// The entry's `elicitation:`: how a request for input is answered.
    elicitation: Elicitation,
    /// Records each answer written (once its request goes with a reply), when the run records:
    /// a replay compares its own answers with them.
    on_answer: Option<OnAnswer>,
}

impl Reader {
    async fn run(self, out: tokio::process::ChildStdout, err_done: oneshot::Receiver<()>) {
        let mut out = BufReader::new(out);
        let mut line = Vec::new();
        let mut changed = Kept::default();
        let why = loop {
            line.clear();
            match read_line(&mut out, &mut line, self.line_cap).await {
                Ok(Line::End) => break "closed its stdout".to_string(),
                Err(e) => break format!("could not be read: {e}"),
                Ok(Line::TooLong) => self.answer_all_truncated(&line),
                Ok(Line::Full) => self.dispatch(&line, &mut changed).await,
            }
        };
        // Its stderr says why, usually: wait (briefly) until it is read to the end.
        let _ = tokio::time::timeout(GRACE, err_done).await;
        let status = {
            let mut child = self.child.lock().await;
            match child.as_mut() {
                Some(c) => match tokio::time::timeout(GRACE, c.wait()).await {
                    Ok(Ok(s)) => format!(" ({s})"),
                    _ => String::new(),
                },
                None => String::new(),
            }
        };
        let why = format!("the server's process {why}{status}");
        let waiting = match self.pending.lock() {
            Ok(mut p) => {
                p.closed = Some(why.clone());
                std::mem::take(&mut p.waiting)
            }
            Err(_) => HashMap::new(),
        };
        let stderr = self.stderr.lock().map(|t| t.text()).unwrap_or_default();
        for (_, w) in waiting {
            let _ = w.tx.send(Err(NetError::Io(with_stderr(&why, &stderr))));
        }
    }

    async fn dispatch(&self, line: &[u8], kept: &mut Kept) {
        let Ok(message) = serde_json::from_slice::<Value>(line) else {
            return; // not JSON-RPC: a server that logs to stdout by mistake; its answers still count
        };
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        let id = message.get("id").cloned();
        match (method.as_deref(), id) {
            (Some(_), Some(_)) => {
                let answer = self.answer_request(&message).await;
                let Ok(mut p) = self.pending.lock() else {
                    return;
                };
                // Kept with the answer it is about, so the request is reported and recorded
                // with it (a replay answers it again and compares).
                let p = &mut *p;
                let kept = match p.about(&message) {
                    Some(w) => {
                        let _ = w.notes.try_send(message.clone());
                        &mut w.kept
                    }
                    None => &mut p.unclaimed,
                };
                if kept.len() < MAX_KEPT_REQUESTS {
                    kept.push((message, answer));
                }
            }
            (Some(super::LIST_CHANGED), None) => kept.changed = Some(message),
            (Some(_), None) => {
                // Dropped when no call waits for them or they pile up: they are only events.
                if let Some(w) = self
                    .pending
                    .lock()
                    .ok()
                    .as_mut()
                    .and_then(|p| p.about(&message))
                {
                    let _ = w.notes.try_send(message);
                }
            }
            (None, Some(id)) => {
                let (waiter, mut asked) = match self.pending.lock() {
                    // An answer no call waits for (one given up on) takes nothing along.
                    Ok(mut p) => match p.waiting.remove(&id.to_string()) {
                        Some(w) => (Some(w), std::mem::take(&mut p.unclaimed)),
                        None => {
                            p.unrequested(&id);
                            (None, Vec::new())
                        }
                    },
                    Err(_) => (None, Vec::new()),
                };
                let Some(mut waiter) = waiter else { return };
                asked.append(&mut waiter.kept);
                let mut all = Vec::with_capacity(asked.len() + 2);
                for (request, answer) in asked {
                    if let (Some(record), Some(answer)) = (&self.on_answer, answer) {
                        record(answer.as_bytes());
                    }
                    all.push(request);
                }
                all.extend(kept.changed.take());
                let body = if all.is_empty() {
                    line.to_vec()
                } else {
                    all.push(message);
                    json!(all).to_string().into_bytes()
                };
                let _ = waiter.tx.send(Ok(response(body, false)));
            }
            (None, None) => {}
        }
    }

    /// A server's request gets an answer at once, so the call it came with can complete: the
    /// same answers as over HTTP (`ping`, `elicitation/create` as the entry says, -32601 for
    /// what toolrun did not declare; see `rpc::answer`).
    async fn answer_request(&self, request: &Value) -> Option<String> {
        let answer = super::rpc::answer(request, self.elicitation).to_string();
        // Bounded: a server that reads nothing more must not stop its stdout being read.
        let written = self
            .stdin
            .write_line(answer.as_bytes(), WRITE_TIMEOUT)
            .await;
        written.is_ok().then_some(answer)
    }

    /// A message past the cap cannot be matched to its request (its id may be past the cut):
    /// every request waiting fails as an HTTP reply past the cap would.
    fn answer_all_truncated(&self, line: &[u8]) {
        let waiting = match self.pending.lock() {
            Ok(mut p) => std::mem::take(&mut p.waiting),
            Err(_) => return,
        };
        for (_, w) in waiting {
            let _ = w.tx.send(Ok(response(line.to_vec(), true)));
        }
    }
}

pub(crate) fn response(body: Vec<u8>, truncated: bool) -> HttpResponse {
    HttpResponse {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body,
        truncated,
    }
}

impl Process {
    /// Sends one message; a request (`id` given) waits for its answer, a notification (or an
    /// answer) not. What the server sends about the request meanwhile goes to `on_note` (as
    /// JSON text): its progress, its log lines, and its requests (already answered).
    pub(crate) async fn send(
        &self,
        message: &[u8],
        id: Option<&Value>,
        timeout: Duration,
        on_note: Option<OnNote<'_>>,
    ) -> Reply {
        let waiting = match id {
            Some(id) => {
                let (tx, rx) = oneshot::channel();
                let (notes, notes_rx) = tokio::sync::mpsc::channel(NOTES_KEPT);
                let mut p = self
                    .pending
                    .lock()
                    .map_err(|_| NetError::Io("poisoned".into()))?;
                if let Some(why) = &p.closed {
                    return Err(NetError::Io(with_stderr(why, &self.stderr_text())));
                }
                p.sent += 1;
                let waiter = Waiter {
                    tx,
                    notes,
                    kept: Vec::new(),
                    sent: p.sent,
                };
                p.waiting.insert(id.to_string(), waiter);
                Some((rx, notes_rx))
            }
            None => None,
        };
        if let Ok(mut t) = self.last_used.lock() {
            *t = std::time::Instant::now();
        }
        // The write and the answer share the call's time: a server that stops reading its
        // stdin fails the call when it would have timed out, never later.
        let started = tokio::time::Instant::now();
        if let Err(e) = self.stdin.write_line(message, timeout).await {
            self.forget(id);
            let why = format!("the server's process does not take input ({e})");
            return Err(NetError::Io(with_stderr(&why, &self.stderr_text())));
        }
        let timeout = timeout.saturating_sub(started.elapsed());
        let Some((rx, mut notes_rx)) = waiting else {
            return Ok(response(Vec::new(), false));
        };
        let note = |n: Value| {
            if let Some(f) = on_note {
                f(n.to_string().as_bytes());
            }
        };
        let answer = async {
            let notes = async {
                while let Some(n) = notes_rx.recv().await {
                    note(n);
                }
                std::future::pending::<()>().await
            };
            tokio::select! {
                r = rx => r,
                // Never ends: the answer ends the wait.
                _ = notes => std::future::pending().await,
            }
        };
        let answered = tokio::time::timeout(timeout, answer).await;
        // What the server sent before its answer is the call's, even when read after it.
        while let Ok(n) = notes_rx.try_recv() {
            note(n);
        }
        match answered {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(NetError::Io("the server's process ended".into())),
            Err(_) => {
                self.forget(id);
                Err(NetError::Timeout)
            }
        }
    }

    /// Whether it is ended and reaped: nothing of it is left to end.
    pub(crate) fn is_reaped(&self) -> bool {
        self.reaped.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether it can answer nothing more: it exited (or crashed), or is being ended.
    pub(crate) fn is_over(&self) -> bool {
        use std::sync::atomic::Ordering;
        self.retired.load(Ordering::SeqCst)
            || self.ended.lock().map_or(true, |e| *e)
            || self.pending.lock().map_or(true, |p| p.closed.is_some())
    }

    /// Marks it as ended to make room: its session's next call starts another.
    pub(crate) fn retire(&self) {
        self.retired
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a request to it waits for its answer.
    pub(crate) fn busy(&self) -> bool {
        self.pending.lock().is_ok_and(|p| !p.waiting.is_empty())
    }

    pub(crate) fn last_used(&self) -> std::time::Instant {
        self.last_used
            .lock()
            .map_or_else(|_| std::time::Instant::now(), |t| *t)
    }

    fn forget(&self, id: Option<&Value>) {
        if let (Some(id), Ok(mut p)) = (id, self.pending.lock()) {
            if let Some(w) = p.waiting.remove(&id.to_string()) {
                let room = MAX_KEPT_REQUESTS.saturating_sub(p.unclaimed.len());
                p.unclaimed.extend(w.kept.into_iter().take(room));
                if p.given_up.len() == GIVEN_UP_KEPT {
                    p.given_up.pop_front();
                }
                p.given_up.push_back(id.to_string());
            }
        }
    }

    /// The kept end of its stderr, masked.
    pub(crate) fn stderr_text(&self) -> String {
        self.stderr.lock().map(|t| t.text()).unwrap_or_default()
    }

    /// Ends the server as the specification asks: stdin closed, then SIGTERM to its process
    /// group, then SIGKILL, each after a grace period; the leader is reaped, so nothing it
    /// started outlives the run and no zombie is left. Returns how it ended.
    ///
    /// Whoever calls it returns only once the server is reaped: a second caller waits for the
    /// first (it holds the child), and one whose ending was given up on half-way (its task
    /// dropped as `serve` shut down) is finished by the next. Returning at once when another
    /// had begun let `serve` exit while a busy server that ignores SIGTERM was still in its
    /// grace period, and the server outlived it.
    pub(crate) async fn end(&self) -> String {
        if let Ok(mut e) = self.ended.lock() {
            *e = true;
        }
        self.stdin.close().await;
        let mut child = self.child.lock().await;
        let Some(c) = child.as_mut() else {
            return ALREADY_ENDED.into();
        };
        let mut how = "exited when its stdin closed";
        let mut status = tokio::time::timeout(GRACE, c.wait()).await.ok();
        let mut rest = "";
        if status.is_none() || group_alive(self.pgid) {
            signal_group(self.pgid, Signal::Term);
            if status.is_none() {
                how = "ended by SIGTERM";
                status = tokio::time::timeout(GRACE, c.wait()).await.ok();
            }
            wait_group(self.pgid).await;
            rest = "; processes it started ended by SIGTERM";
        }
        if status.is_none() || group_alive(self.pgid) {
            if status.is_none() {
                how = "killed (SIGKILL) after not ending on SIGTERM";
            }
            signal_group(self.pgid, Signal::Kill);
            status = Some(c.wait().await);
            // SIGKILL is delivered when each process next runs: the run ends after they do.
            wait_group(self.pgid).await;
            rest = "; processes it started killed (SIGKILL)";
        }
        *child = None;
        self.reaped.store(true, std::sync::atomic::Ordering::SeqCst);
        let status = match status {
            Some(Ok(s)) => s.to_string(),
            _ => "status unknown".into(),
        };
        format!("{how} ({status}){rest}")
    }
}

impl Drop for Process {
    /// A run that ends without [`Process::end`] (an error, a panic), or whose ending was given
    /// up on half-way, still leaves nothing behind: the group is killed, and the leader reaped
    /// when it can be now (else by its reader, which waits for it once its stdout closes).
    fn drop(&mut self) {
        if self.reaped.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        signal_group(self.pgid, Signal::Kill);
        if let Ok(mut child) = self.child.try_lock() {
            if let Some(c) = child.as_mut() {
                let _ = c.start_kill();
                let _ = c.try_wait();
            }
        }
    }
}

enum Signal {
    Term,
    Kill,
}

#[cfg(unix)]
fn signal_group(pgid: i32, signal: Signal) {
    if pgid <= 1 {
        return;
    }
    let sig = match signal {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    // SAFETY: killpg only sends a signal; the group is the one the server was started in.
    unsafe {
        libc::killpg(pgid, sig);
    }
}

#[cfg(unix)]
fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 sends nothing; it asks whether any process of the group is left.
    pgid > 1 && unsafe { libc::killpg(pgid, 0) } == 0
}

#[cfg(not(unix))]
fn signal_group(_: i32, _: Signal) {}

#[cfg(not(unix))]
fn group_alive(_: i32) -> bool {
    false
}

/// Until what the server started has ended too, for at most the grace period.
async fn wait_group(pgid: i32) {
    let until = tokio::time::Instant::now() + GRACE;
    while group_alive(pgid) && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
