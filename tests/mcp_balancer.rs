//! Three `toolrun serve --http` replicas behind HAProxy, run by the test as its own child (never
//! the system service) with the repository's `deploy/haproxy.cfg`, only its addresses replaced:
//! a 2025-11-25 session sticks to the replica that answered its `initialize` (the official
//! Python SDK's clients complete their calls), and stopping a replica under load loses no call
//! with SIGTERM (serve drains; HAProxy retries what was refused elsewhere) and at most those in
//! flight with SIGKILL, on both revisions (2026-07-28 without sessions, round robin). On 2026-07-28 (round robin) the conformance suite gives what it gives
//! against one replica, and a confirmation asked by one replica completes on another when they
//! share `--state-key-env`. HAProxy is Debian's package, installed by `.ci/install-haproxy` when
//! missing; CI sets TOOLRUN_REQUIRE_HAPROXY so these tests never skip there. 127.0.0.1 only.
#![cfg(unix)]

#[path = "npm/npm.rs"]
mod npm;
#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One tool that takes a while, so that calls are in flight on every replica at any moment.
const SPEC: &str = "version: 1
name: balanced
tools:
  echo:
    description: Answers with its argument, after a while.
    kind: mock
    input:
      type: object
      properties: { n: { type: integer } }
      required: [n]
      additionalProperties: false
    faults: [{ delay: 20ms }]
    responses:
      - result: { n: \"{{ args.n }}\" }
";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Finds HAProxy, installing it with `.ci/install-haproxy` when it is missing. `None` only when
/// it cannot be installed here; CI sets TOOLRUN_REQUIRE_HAPROXY so it never skips.
fn haproxy() -> Option<PathBuf> {
    let find = || {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain([PathBuf::from("/usr/sbin")])
            .map(|p| p.join("haproxy"))
            .find(|p| p.is_file())
    };
    if let Some(p) = find() {
        return Some(p);
    }
    let script = root().join(".ci/install-haproxy");
    let installed = Command::new("bash").arg(&script).status();
    if let Some(p) = find() {
        return Some(p);
    }
    let why = format!(
        "HAProxy is not installed and `{}` could not install it ({installed:?})",
        script.display()
    );
    if std::env::var_os("TOOLRUN_REQUIRE_HAPROXY").is_some() {
        panic!("{why}");
    }
    eprintln!("\n!!!!!!!!\nSKIPPED the load balancer test: {why}\n!!!!!!!!\n");
    None
}

/// The repository's HAProxy config with the test's addresses: the balancer's own on its `bind`
/// line and the replicas' on its `server` lines. Nothing else is changed.
pub fn haproxy_config(front: u16, replicas: &[u16]) -> String {
    let text =
        std::fs::read_to_string(root().join("deploy/haproxy.cfg")).expect("deploy/haproxy.cfg");
    let mut servers = 0;
    let mut binds = 0;
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["bind", _] => {
                    binds += 1;
                    line.replace(words[1], &format!("127.0.0.1:{front}"))
                }
                ["server", _, addr, ..] => {
                    servers += 1;
                    let port = replicas
                        .get(servers - 1)
                        .expect("as many replicas as servers");
                    line.replace(addr, &format!("127.0.0.1:{port}"))
                }
                _ => line.to_string(),
            }
        })
        .collect();
    assert_eq!(
        (binds, servers),
        (1, replicas.len()),
        "deploy/haproxy.cfg:\n{text}"
    );
    lines.join("\n") + "\n"
}

struct Replica {
    child: Child,
    port: u16,
    events: PathBuf,
    stderr: BufReader<ChildStderr>,
}

impl Replica {
    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success(), "kill {signal}");
    }

    /// Waits for the replica to end; its exit code and the rest of its stderr.
    fn wait(&mut self) -> (Option<i32>, String) {
        let status = self.child.wait().expect("wait for the replica");
        let mut rest = String::new();
        let _ = self.stderr.read_to_string(&mut rest);
        (status.code(), rest)
    }

    /// The calls the replica served, by the `mcp_call` events it wrote.
    fn calls(&self) -> usize {
        support::events_named(&self.events, "mcp_call").len()
    }
}

struct Balancer {
    _dir: support::TempDir,
    replicas: Vec<Replica>,
    haproxy: Child,
    /// The balancer's MCP endpoint.
    url: String,
    /// HAProxy's log: a line a request, naming the replica that answered.
    log: PathBuf,
}

impl Balancer {
    /// Three replicas of a spec of this text and HAProxy in front (see [`Balancer::start_with`]).
    fn start(spec: &str, args: &[&str], env: &[(&str, &str)]) -> Option<Balancer> {
        let dir = support::temp_dir("mcp-balancer");
        let spec = support::write(dir.path(), "spec.yaml", spec);
        Balancer::start_in(dir, &spec, args, env)
    }

    /// Three replicas of `spec` (`toolrun serve --http 127.0.0.1:0 ARGS`) and HAProxy in front.
    fn start_with(spec: &Path, args: &[&str], env: &[(&str, &str)]) -> Option<Balancer> {
        Balancer::start_in(support::temp_dir("mcp-balancer"), spec, args, env)
    }

    fn start_in(
        dir: support::TempDir,
        spec: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Option<Balancer> {
        let haproxy = haproxy()?;
        let replicas: Vec<Replica> = (1..=3)
            .map(|i| {
                let events = dir.path().join(format!("events-{i}.jsonl"));
                let mut cmd = support::toolrun();
                cmd.arg("serve")
                    .arg(spec)
                    .args(["--http", "127.0.0.1:0", "--events"])
                    .arg(&events)
                    // Named as its `server` line in deploy/haproxy.cfg: task ids start with it.
                    .args(["--replica-id", &format!("replica{i}")])
                    .args(args);
                for (k, v) in env {
                    cmd.env(k, v);
                }
                let (child, url, stderr) = support::spawn_served(&mut cmd);
                let port = url
                    .trim_start_matches("http://127.0.0.1:")
                    .trim_end_matches("/mcp")
                    .parse()
                    .unwrap_or_else(|_| panic!("a port in {url}"));
                Replica {
                    child,
                    port,
                    events,
                    stderr,
                }
            })
            .collect();
        let ports: Vec<u16> = replicas.iter().map(|r| r.port).collect();
        let log = dir.path().join("haproxy.log");
        // The balancer's port is found free, then bound by HAProxy: another process may take it
        // in between, so a start that fails is tried again on another.
        for _ in 0..5 {
            let front = free_port();
            let config = support::write(dir.path(), "haproxy.cfg", &haproxy_config(front, &ports));
            let mut child = Command::new(&haproxy)
                .arg("-f")
                .arg(&config)
                .arg("-db")
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(&log).expect("haproxy log"))
                .stderr(std::fs::File::create(dir.path().join("haproxy.err")).expect("log"))
                .spawn()
                .expect("start haproxy");
            if listening(&mut child, front) {
                return Some(Balancer {
                    url: format!("http://127.0.0.1:{front}/mcp"),
                    _dir: dir,
                    replicas,
                    haproxy: child,
                    log,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let err = std::fs::read_to_string(dir.path().join("haproxy.err")).unwrap_or_default();
        panic!("haproxy did not start:\n{err}");
    }

    /// HAProxy's log lines of requests answered with a 5xx status, or not answered at all.
    fn failures_logged(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                words
                    .iter()
                    .position(|w| w.contains('/') && w.starts_with("toolrun/"))
                    .is_some_and(|at| {
                        words
                            .get(at + 2)
                            .is_some_and(|s| s.starts_with('5') || *s == "-1")
                    })
            })
            .map(String::from)
            .collect()
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.haproxy.kill();
        let _ = self.haproxy.wait();
        for r in &mut self.replicas {
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Whether HAProxy came to listen on `port` (false: it ended, its port taken).
fn listening(child: &mut Child, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("haproxy did not listen on {port} in 30s");
}

#[test]
fn python_sdk_sessions_stick_to_their_replica_through_haproxy() {
    let Some(lb) = Balancer::start(SPEC, &[], &[]) else {
        return;
    };
    // Four clients at once, 50 calls each: their sessions are spread over the replicas, and
    // every request of a session must reach the replica that holds it.
    let mut cmd = Command::new(python::python());
    cmd.arg(python::script("balanced_client.py"))
        .arg(&lb.url)
        .args(["4", "50", "echo"]);
    let out = support::run_with_timeout(&mut cmd, None, Duration::from_secs(300));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).expect("the client's JSON");
    let clients = doc["clients"].as_array().expect("clients");
    assert_eq!(clients.len(), 4);
    for (k, client) in clients.iter().enumerate() {
        assert_eq!(client["protocol"], "2025-11-25", "{client}");
        let expected: Vec<Value> = (0..50)
            .map(|i| json!(format!("{{\"n\":{}}}", k * 50 + i)))
            .collect();
        assert_eq!(client["texts"].as_array(), Some(&expected), "client {k}");
    }
    let served: Vec<usize> = lb.replicas.iter().map(Replica::calls).collect();
    assert_eq!(served.iter().sum::<usize>(), 200, "{served:?}");
    assert!(
        served.iter().filter(|&&n| n > 0).count() >= 2,
        "the sessions were not spread over the replicas: {served:?}"
    );
    assert_eq!(lb.failures_logged(), Vec::<String>::new());
}

/// What a run of calls came to.
#[derive(Debug, Default)]
struct Tally {
    /// Calls answered with their result.
    answered: usize,
    /// Calls that got no result, and why.
    lost: BTreeMap<u32, String>,
    /// The calls in flight when the replica was stopped.
    in_flight_at_stop: HashSet<u32>,
    /// Sessions started again after their replica went (404, as MCP says).
    new_sessions: usize,
}

/// How the clients of a run of calls speak.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Revision {
    /// 2025-11-25: each client in a session, stuck to the replica that holds it.
    #[default]
    Sessions,
    /// 2026-07-28: no session, each call to any replica (round robin).
    Stateless,
}

/// The shared state of one run of calls.
#[derive(Default)]
struct Load {
    revision: Revision,
    next: AtomicU32,
    answered: AtomicUsize,
    new_sessions: AtomicUsize,
    in_flight: Mutex<HashSet<u32>>,
    lost: Mutex<BTreeMap<u32, String>>,
}

/// A failed exchange: whether its call was refused before it ran (and may be sent again), or
/// got no result.
enum Failed {
    SessionGone,
    Lost(String),
}

fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        // Only catches a hang: no call takes more than a fraction of this.
        .timeout(Duration::from_secs(60))
        .build()
        .expect("reqwest client")
}

/// POSTs one JSON-RPC message; the status, the session id header and the message answering
/// `id`, whether it came as JSON or in an event stream.
async fn post(
    client: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &Value,
) -> Result<(u16, Option<String>, Option<Value>), String> {
    let headers = match session {
        Some(s) => vec![
            ("Mcp-Session-Id", s),
            ("Mcp-Protocol-Version", "2025-11-25"),
        ],
        None => Vec::new(),
    };
    post_with(client, url, &headers, body).await
}

/// [`post`] with these headers.
async fn post_with(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> Result<(u16, Option<String>, Option<Value>), String> {
    let mut req = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.map_err(|e| format!("{e:?}"))?;
    let status = resp.status().as_u16();
    let id = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let text = resp.text().await.map_err(|e| format!("{e:?}"))?;
    let message = serde_json::from_str::<Value>(&text).ok().or_else(|| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("id") == body.get("id"))
    });
    Ok((status, id, message))
}

/// A new 2025-11-25 session through the balancer (tried again while replicas come and go).
async fn initialize(client: &reqwest::Client, url: &str) -> String {
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": { "name": "balanced-load", "version": "1" } } });
    let done = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let mut why = String::new();
    for _ in 0..10 {
        match post(client, url, None, &init).await {
            Ok((200, Some(id), _)) => match post(client, url, Some(&id), &done).await {
                Ok((202, _, _)) => return id,
                other => why = format!("initialized: {other:?}"),
            },
            other => why = format!("initialize: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no session through the balancer: {why}");
}

/// `echo` with `n` in `session`, or on 2026-07-28 (no session) without one: its result, or why
/// there is none.
async fn call(
    client: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    n: u32,
) -> Result<(), Failed> {
    let mut body = json!({ "jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
        "params": { "name": "echo", "arguments": { "n": n } } });
    let sent = match session {
        Some(session) => post(client, url, Some(session), &body).await,
        None => {
            body["params"]["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": { "name": "balanced-load", "version": "1" },
                "io.modelcontextprotocol/clientCapabilities": {},
            });
            let headers = [
                ("Mcp-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "echo"),
            ];
            post_with(client, url, &headers, &body).await
        }
    };
    let (status, _, message) = sent.map_err(Failed::Lost)?;
    // Only a session can be gone: on 2026-07-28 a 404 is an answer, and no result.
    if status == 404 && session.is_some() {
        return Err(Failed::SessionGone);
    }
    let text = message
        .as_ref()
        .and_then(|m| m["result"]["content"][0]["text"].as_str());
    match text {
        Some(t) if status == 200 && t == format!("{{\"n\":{n}}}") => Ok(()),
        _ => Err(Failed::Lost(format!("HTTP {status}: {message:?}"))),
    }
}

/// One client: its own session (none on 2026-07-28), calls one after another until `total`
/// have been made.
async fn worker(client: reqwest::Client, url: String, load: Arc<Load>, total: u32) {
    let mut session = match load.revision {
        Revision::Sessions => Some(initialize(&client, &url).await),
        Revision::Stateless => None,
    };
    loop {
        let n = load.next.fetch_add(1, Ordering::SeqCst);
        if n >= total {
            return;
        }
        load.in_flight.lock().expect("lock").insert(n);
        loop {
            match call(&client, &url, session.as_deref(), n).await {
                Ok(()) => {
                    load.answered.fetch_add(1, Ordering::SeqCst);
                }
                // The call was refused before it ran: in a new session, it is made again.
                Err(Failed::SessionGone) => {
                    session = Some(initialize(&client, &url).await);
                    load.new_sessions.fetch_add(1, Ordering::SeqCst);
                    continue;
                }
                Err(Failed::Lost(why)) => {
                    load.lost.lock().expect("lock").insert(n, why);
                }
            }
            break;
        }
        load.in_flight.lock().expect("lock").remove(&n);
    }
}

/// `total` calls through the balancer from `concurrency` clients at once; once `stop_after`
/// have been answered, `stop` runs (between two steps of the clients: no call starts while it
/// runs, so the calls in flight after it are those that were in flight while it ran).
fn load(
    (url, revision): (&str, Revision),
    total: u32,
    concurrency: usize,
    stop_after: usize,
    stop: impl FnOnce(),
) -> Tally {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let client = http_client();
        let load = Arc::new(Load {
            revision,
            ..Load::default()
        });
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..concurrency {
            workers.spawn(worker(client.clone(), url.to_string(), load.clone(), total));
        }
        let deadline = Instant::now() + Duration::from_secs(300);
        while load.answered.load(Ordering::SeqCst) < stop_after {
            assert!(Instant::now() < deadline, "the calls hang");
            assert!(!workers.is_empty(), "the calls ended early");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        stop();
        let in_flight_at_stop = load.in_flight.lock().expect("lock").clone();
        while let Some(done) = workers.join_next().await {
            done.expect("a client panicked");
        }
        let lost = load.lost.lock().expect("lock").clone();
        Tally {
            answered: load.answered.load(Ordering::SeqCst),
            lost,
            in_flight_at_stop,
            new_sessions: load.new_sessions.load(Ordering::SeqCst),
        }
    })
}

#[test]
fn sigterm_to_a_replica_under_load_loses_no_call() {
    sigterm_under_load(Revision::Sessions);
}

/// The same on 2026-07-28: no session, each call to the next replica (round robin).
#[test]
fn sigterm_to_a_replica_under_stateless_load_loses_no_call() {
    sigterm_under_load(Revision::Stateless);
}

/// 1,000 calls at concurrency 8, one replica stopped (SIGTERM) after 300: none lost, each run
/// exactly once.
fn sigterm_under_load(revision: Revision) {
    let Some(mut lb) = Balancer::start(SPEC, &[], &[]) else {
        return;
    };
    let tally = load((&lb.url, revision), 1000, 8, 300, || {
        lb.replicas[0].signal("-TERM")
    });
    let (code, stderr) = lb.replicas[0].wait();
    let served: Vec<usize> = lb.replicas.iter().map(Replica::calls).collect();
    eprintln!(
        "{revision:?}: SIGTERM at 300 of 1,000 calls: {} in flight, {} answered, {} lost, {} sessions started again; calls a replica: {served:?}",
        tally.in_flight_at_stop.len(),
        tally.answered,
        tally.lost.len(),
        tally.new_sessions
    );
    assert_eq!(code, Some(0), "the replica did not stop cleanly:\n{stderr}");
    assert_eq!(tally.lost, BTreeMap::new(), "calls were lost");
    assert_eq!(tally.answered, 1000);
    // Each call ran once: what a stopping replica refused had not run.
    assert_eq!(served.iter().sum::<usize>(), 1000, "{served:?}");
    assert!(served[0] > 0 && served[0] < 1000, "{served:?}");
    if revision == Revision::Stateless {
        // Round robin: the replicas left took the rest between them.
        assert!(served[1] > 0 && served[2] > 0, "{served:?}");
        assert_eq!(tally.new_sessions, 0);
    }
    assert_eq!(lb.failures_logged(), Vec::<String>::new());
}

#[test]
fn sigkill_to_a_replica_under_load_loses_at_most_its_calls_in_flight() {
    sigkill_under_load(Revision::Sessions);
}

/// The same on 2026-07-28 (round robin, no session).
#[test]
fn sigkill_to_a_replica_under_stateless_load_loses_at_most_its_calls_in_flight() {
    sigkill_under_load(Revision::Stateless);
}

/// 1,000 calls at concurrency 8, one replica killed (SIGKILL) after 300: only calls in flight
/// then are lost, counted and reported; every other call is answered.
fn sigkill_under_load(revision: Revision) {
    let Some(mut lb) = Balancer::start(SPEC, &[], &[]) else {
        return;
    };
    // The replica's connections close as it dies, after the signal: the calls in flight are
    // counted once it has died.
    let tally = load((&lb.url, revision), 1000, 8, 300, || {
        lb.replicas[0].signal("-KILL");
        let _ = lb.replicas[0].child.wait();
    });
    eprintln!(
        "{revision:?}: SIGKILL at 300 of 1,000 calls: {} in flight, {} answered, {} lost {:?}, {} sessions started again",
        tally.in_flight_at_stop.len(),
        tally.answered,
        tally.lost.len(),
        tally.lost.keys().collect::<Vec<_>>(),
        tally.new_sessions
    );
    let lost: HashSet<u32> = tally.lost.keys().copied().collect();
    assert!(
        lost.is_subset(&tally.in_flight_at_stop),
        "calls made after the replica was killed were lost: {:?} (in flight: {:?})",
        tally.lost,
        tally.in_flight_at_stop
    );
    assert_eq!(tally.answered + lost.len(), 1000);
    // What HAProxy could not deliver, it says, and only of the replica that was killed.
    for line in lb.failures_logged() {
        assert!(line.contains("toolrun/replica1 "), "{line}");
    }
}

/// What a load balancer relies on, without one: a connection opened before SIGTERM whose
/// request comes after it is answered 503 (not run: the balancer sends it elsewhere) and then
/// closed, not closed unanswered (the balancer could not tell whether it ran; HAProxy drops the
/// client's connection then).
#[test]
fn a_request_on_a_connection_opened_before_sigterm_is_refused_not_dropped() {
    use std::io::Write;
    let dir = support::temp_dir("mcp-balancer-early");
    let spec = support::write(dir.path(), "spec.yaml", SPEC);
    let (mut serve, url, mut stderr) = support::spawn_served(
        support::toolrun()
            .arg("serve")
            .arg(&spec)
            .args(["--http", "127.0.0.1:0"]),
    );
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut early = std::net::TcpStream::connect(addr).expect("connect");
    early
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let _ = Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status();
    // Once serve has stopped listening, it is stopping.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(addr).is_ok() {
        assert!(
            Instant::now() < deadline,
            "serve kept listening after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let body = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": { "name": "early", "version": "1" } } })
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = early.write_all(request.as_bytes());
    let mut answer = String::new();
    let _ = early.read_to_string(&mut answer);
    let status = serve.wait().expect("wait");
    let mut rest = String::new();
    let _ = stderr.read_to_string(&mut rest);
    assert_eq!(status.code(), Some(0), "{rest}");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer:?}");
    support::assert_contains(
        &answer.to_ascii_lowercase(),
        &["connection: close", "retry-after: 1", "shutting down"],
    );
}

/// The page's fenced block of this language (the first one).
fn fenced<'a>(page: &'a str, language: &str) -> &'a str {
    let open = format!("```{language}\n");
    let start = page
        .find(&open)
        .unwrap_or_else(|| panic!("no {open:?} block"))
        + open.len();
    let len = page[start..].find("\n```").expect("the block ends") + 1;
    &page[start..start + len]
}

#[test]
fn the_documented_haproxy_config_is_the_one_the_tests_run() {
    let page = std::fs::read_to_string(root().join("docs/deploy.md")).expect("docs/deploy.md");
    let config = std::fs::read_to_string(root().join("deploy/haproxy.cfg")).expect("config");
    assert_eq!(
        fenced(&page, "haproxy"),
        config,
        "docs/deploy.md and deploy/haproxy.cfg differ"
    );
}

/// The Kubernetes StatefulSet's `args:` start `toolrun serve` (only the spec's path and the
/// address changed): every flag exists and every value is one it takes.
#[test]
fn the_documented_kubernetes_args_start_serve() {
    let page = std::fs::read_to_string(root().join("docs/deploy.md")).expect("docs/deploy.md");
    let manifest = fenced(&page, "yaml");
    let args: Vec<String> = manifest
        .lines()
        .skip_while(|l| l.trim() != "args:")
        .skip(1)
        .map_while(|l| l.trim().strip_prefix("- "))
        .map(|a| a.trim_matches('"').to_string())
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("serve"), "{args:?}");
    let dir = support::temp_dir("mcp-balancer-k8s");
    let spec = support::write(dir.path(), "spec.yaml", SPEC);
    let args: Vec<String> = args
        .into_iter()
        .map(|a| match a.as_str() {
            "/spec/spec.yaml" => spec.display().to_string(),
            "0.0.0.0:8765" => "127.0.0.1:0".to_string(),
            // Kubernetes puts the pod's name there: a StatefulSet's first pod.
            "$(POD_NAME)" => "toolrun-0".to_string(),
            _ => a,
        })
        .collect();
    assert!(args.iter().any(|a| a == "--token-env"), "{args:?}");
    assert!(args.iter().any(|a| a == "--replica-id"), "{args:?}");
    let (mut serve, url, _stderr) = support::spawn_served(
        support::toolrun()
            .args(&args)
            .env("MCP_TOKEN", "a-token-of-sixteen-chars-or-more")
            .env(KEY_VAR, KEY),
    );
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(url.ends_with("/mcp"), "{url}");
}

/// The variable holding the request-state key the replicas share (`--state-key-env`).
const KEY_VAR: &str = "TOOLRUN_STATE_KEY";
const KEY: &str = "5e2d7c1a9b8f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f";

/// Runs the 2026-07-28 conformance suite (tests/npm's `conformance-2026`) against `url`, with
/// the repository's expected failures; its output, and each scenario's mark (✓, ✗ or ~).
fn conformance_2026(url: &str) -> (support::Output, BTreeMap<String, String>) {
    let results = support::temp_dir("mcp-balancer-conformance");
    let mut suite = Command::new(npm::node());
    suite
        .arg(npm::package_file("conformance-2026/dist/index.js"))
        .args(["server", "--url", url, "--requirements", "2026-07-28"])
        .arg("-o")
        .arg(results.path().join("results"))
        .arg("--expected-failures")
        .arg(root().join("tests/mcp/conformance-2026-expected-failures.yml"))
        .current_dir(results.path());
    let out = support::run_with_timeout(&mut suite, None, Duration::from_secs(600));
    let marks = out
        .stdout
        .lines()
        .filter_map(|l| {
            let (mark, rest) = l.trim().split_once(' ')?;
            let (name, _) = rest.split_once(':')?;
            ["✓", "✗", "~"]
                .contains(&mark)
                .then(|| (name.to_string(), mark.to_string()))
        })
        .collect();
    (out, marks)
}

#[test]
fn the_2026_07_28_suite_through_the_balancer_gives_what_one_replica_gives() {
    let spec = root().join("specs/mcp_conformance_server.yaml");
    let args = ["--state-key-env", KEY_VAR];
    let Some(lb) = Balancer::start_with(&spec, &args, &[(KEY_VAR, KEY)]) else {
        return;
    };
    let (mut one, url, _stderr) = support::spawn_served(
        support::toolrun()
            .arg("serve")
            .arg(&spec)
            .args(["--http", "127.0.0.1:0"])
            .args(args)
            .env(KEY_VAR, KEY),
    );
    let (alone, alone_marks) = conformance_2026(&url);
    let _ = one.kill();
    let _ = one.wait();
    let (balanced, balanced_marks) = conformance_2026(&lb.url);
    assert_eq!(alone.code, 0, "{}\n{}", alone.stdout, alone.stderr);
    assert_eq!(balanced.code, 0, "{}\n{}", balanced.stdout, balanced.stderr);
    assert!(alone_marks.len() > 20, "{}", alone.stdout);
    // The tasks extension's scenarios too: a task's requests reach the replica its id names.
    assert!(
        alone_marks.keys().any(|s| s.starts_with("tasks-")),
        "{}",
        alone.stdout
    );
    assert_eq!(balanced_marks, alone_marks, "{}", balanced.stdout);
    // Round robin: every replica answered part of the suite.
    let log = std::fs::read_to_string(&lb.log).unwrap_or_default();
    for i in 1..=3 {
        assert!(log.contains(&format!("toolrun/replica{i} ")), "{log}");
    }
}

/// A 2026-07-28 request (no session) through the balancer: its status, the replica that
/// answered it (from HAProxy's log), and its response message.
fn request_2026(lb: &Balancer, nth: usize, method: &str, params: Value) -> (u16, Value) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "balanced", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": { "io.modelcontextprotocol/tasks": {} },
        },
    });
    // A tool's name, or a task's id (tasks/get, tasks/update, tasks/cancel).
    let name = params["name"]
        .as_str()
        .or(params["taskId"].as_str())
        .unwrap_or_default()
        .to_string();
    let body = json!({ "jsonrpc": "2.0", "id": nth, "method": method, "params": params });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let resp = http_client()
            .post(&lb.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", method)
            .header("Mcp-Name", name)
            .body(body.to_string())
            .send()
            .await
            .expect("through the balancer");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("an answer");
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .or_else(|| {
                text.lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                    .find(|m| m.get("id") == body.get("id"))
            })
            .unwrap_or_else(|| panic!("no response in {text}"));
        (status, message)
    })
}

/// The replicas that answered HAProxy's first `requests` requests, in order. HAProxy writes a
/// request's line when its stream closes, which can be after the client has read the response,
/// so the lines are waited for (the bound only catches a hang).
fn replicas_answering(lb: &Balancer, requests: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answered: Vec<String> = std::fs::read_to_string(&lb.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("toolrun/")))
            .map(String::from)
            .collect();
        if answered.len() >= requests || Instant::now() > deadline {
            return answered;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A call held for confirmation, asked by one replica: its answer, through the balancer, runs
/// on the next one (round robin) when the replicas share the state key, and is refused there
/// when each has its own.
fn confirm_across_replicas(shared: bool) -> Option<(Vec<String>, Value)> {
    let spec = format!(
        "{SPEC}  refund:\n    description: Refunds an order.\n    kind: mock\n    side_effects: true\n    input: {{ type: object, properties: {{ order_id: {{ type: integer }} }}, required: [order_id] }}\n    responses:\n      - result: {{ refunded: true }}\n"
    );
    let lb = if shared {
        Balancer::start(&spec, &["--state-key-env", KEY_VAR], &[(KEY_VAR, KEY)])?
    } else {
        Balancer::start(&spec, &[], &[])?
    };
    let call = json!({ "name": "refund", "arguments": { "order_id": 42 } });
    let (status, asked) = request_2026(&lb, 1, "tools/call", call.clone());
    assert_eq!(status, 200, "{asked}");
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].clone();
    let mut answer = call;
    answer["inputResponses"] =
        json!({ "confirm": { "action": "accept", "content": { "approve": true } } });
    answer["requestState"] = state;
    let (_, done) = request_2026(&lb, 2, "tools/call", answer);
    Some((replicas_answering(&lb, 2), done))
}

#[test]
fn a_confirmation_asked_by_one_replica_completes_on_another_sharing_the_state_key() {
    let Some((answered_by, done)) = confirm_across_replicas(true) else {
        return;
    };
    assert_eq!(answered_by.len(), 2, "{answered_by:?}");
    assert_ne!(answered_by[0], answered_by[1], "round robin");
    assert_eq!(
        done["result"]["structuredContent"]["refunded"], true,
        "{done}"
    );
    // Each with a key of its own, the other replica refuses the state it cannot check.
    let Some((answered_by, refused)) = confirm_across_replicas(false) else {
        return;
    };
    assert_ne!(answered_by[0], answered_by[1], "round robin");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

/// Tools run as tasks: one asks for a confirmation, one runs until cancelled.
fn task_spec() -> String {
    format!(
        "{SPEC}  wipe:\n    description: Wipes the cache once someone confirms it.\n    kind: mock\n    task: optional\n    side_effects: true\n    input: {{ type: object, properties: {{}} }}\n    responses:\n      - result: wiped\n  slow:\n    description: Takes its time.\n    kind: mock\n    task: optional\n    timeout: 120s\n    faults: [{{ delay: 20s }}]\n    input: {{ type: object, properties: {{}} }}\n    responses:\n      - result: finally\n"
    )
}

/// Polls the task through the balancer until it has `status` or has ended.
fn until(lb: &Balancer, nth: &mut usize, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        *nth += 1;
        let (code, got) = request_2026(lb, *nth, "tasks/get", json!({ "taskId": id }));
        assert_eq!(code, 200, "{got}");
        let now = got["result"]["status"].as_str().unwrap_or_default();
        let ended = ["completed", "failed", "cancelled"].contains(&now);
        if now == status || ended || Instant::now() > deadline {
            return got["result"].clone();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The replica a task id names (what comes before its first `.`).
fn named(id: &str) -> String {
    format!(
        "toolrun/{}",
        id.split_once('.').expect("a replica in the id").0
    )
}

#[test]
fn a_task_made_through_the_balancer_is_polled_confirmed_and_cancelled_on_its_replica() {
    let Some(lb) = Balancer::start(&task_spec(), &[], &[]) else {
        return;
    };
    let mut nth = 1;
    let (_, made) = request_2026(
        &lb,
        nth,
        "tools/call",
        json!({ "name": "wipe", "arguments": {} }),
    );
    assert_eq!(made["result"]["resultType"], "task", "{made}");
    let wipe = made["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_string();
    let waiting = until(&lb, &mut nth, &wipe, "input_required");
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let answer = json!({ "confirm": { "action": "accept", "content": { "approve": true } } });
    nth += 1;
    let (_, ack) = request_2026(
        &lb,
        nth,
        "tasks/update",
        json!({ "taskId": wipe, "inputResponses": answer }),
    );
    assert_eq!(ack["result"], json!({ "resultType": "complete" }), "{ack}");
    let wiped = until(&lb, &mut nth, &wipe, "completed");
    assert_eq!(wiped["result"]["content"][0]["text"], "wiped", "{wiped}");

    nth += 1;
    let (_, made) = request_2026(
        &lb,
        nth,
        "tools/call",
        json!({ "name": "slow", "arguments": {} }),
    );
    let slow = made["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_string();
    nth += 1;
    let (_, ack) = request_2026(&lb, nth, "tasks/cancel", json!({ "taskId": slow }));
    assert_eq!(ack["result"], json!({ "resultType": "complete" }), "{ack}");
    assert_eq!(
        until(&lb, &mut nth, &slow, "cancelled")["status"],
        "cancelled"
    );

    // Round robin made the two tasks on two replicas; every request of a task reached its own.
    let answered = replicas_answering(&lb, nth);
    let first_slow = answered
        .iter()
        .rposition(|r| r == &named(&wipe))
        .expect("wipe's replica answered")
        + 1;
    assert_ne!(named(&wipe), named(&slow), "{answered:?}");
    assert!(
        answered[1..first_slow].iter().all(|r| *r == named(&wipe)),
        "{answered:?}"
    );
    assert!(
        answered[first_slow + 1..]
            .iter()
            .all(|r| *r == named(&slow)),
        "{answered:?}"
    );
    assert_eq!(answered[0], named(&wipe), "{answered:?}");
    assert_eq!(answered[first_slow], named(&slow), "{answered:?}");

    // An id naming another replica, or none that exists, is a task it does not know: -32602,
    // never an error of the balancer's.
    let (_, suffix) = slow.split_once('.').expect("a replica in the id");
    let other = if named(&slow) == "toolrun/replica1" {
        "replica2"
    } else {
        "replica1"
    };
    for (i, id) in [
        format!("{other}.{suffix}"),
        format!("replica9.{suffix}"),
        suffix.to_string(),
    ]
    .iter()
    .enumerate()
    {
        let (code, got) = request_2026(&lb, 1000 + i, "tasks/get", json!({ "taskId": id }));
        assert_eq!(code, 200, "{id}: {got}");
        assert_eq!(got["error"]["code"], -32602, "{id}: {got}");
    }
}
