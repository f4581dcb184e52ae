//! What a stdio MCP server toolrun starts may run, and how its processes are bounded, through the
//! binary, with a small server in plain Python (`tests/mcp/raw_server.py`) that does what a
//! well-behaved one never does: stop reading its stdin, crash, report its environment.
#![cfg(target_os = "linux")]

mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use support::{run, run_with_timeout, toolrun, write, Output};

/// Long enough for anything that does not hang; a hang fails the test instead of stalling it.
const HANG: Duration = Duration::from_secs(90);

/// The real interpreter (not a shim on PATH that finds it through its own environment).
fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let out = Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .expect("python3 on PATH");
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        })
        .clone()
}

fn server_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/raw_server.py")
}

/// A spec whose entry `raw` runs `command` (a YAML flow list) with `extra` keys (indented four),
/// taking `tools`, and whose scripted model makes `turns`.
fn spec(dir: &Path, command: &str, extra: &str, tools: &str, turns: &str) -> PathBuf {
    let text = format!(
        r#"version: 1
name: exec
tools:
  raw:
    kind: mcp
    description: A raw server.
    command: {command}
{extra}    tools: [{tools}]
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
{turns}
"#
    );
    write(dir, "exec.yaml", &text)
}

/// `[PYTHON, raw_server.py, ARGS...]`
fn raw_command(args: &[&str]) -> String {
    let mut parts = vec![
        python().display().to_string(),
        server_script().display().to_string(),
    ];
    parts.extend(args.iter().map(|a| a.to_string()));
    serde_json::to_string(&parts).unwrap()
}

fn allow_python(cmd: &mut Command) -> &mut Command {
    cmd.arg("--allow-exec").arg(python())
}

/// A server that stops reading its stdin and sends requests until its stdout is full: the call
/// fails within its timeout, and the run ends (the server with it), where it hung for ever.
#[test]
fn a_server_that_stops_reading_fails_the_call_and_the_run_ends() {
    let dir = support::temp_dir("exec-flood-run");
    let spec = spec(
        &dir,
        &raw_command(&["flood"]),
        // The call's timeout is what is tested; the Python server's start-up keeps a bound
        // that only catches a hang (it takes seconds on a loaded machine).
        "    timeout: 3s\n    startup_timeout: 60s\n",
        "echo",
        r#"          - tool_calls: [{ name: echo, arguments: { text: hi } }]
          - answer: "{{ last.status }}""#,
    );
    let out = run_with_timeout(
        allow_python(
            toolrun()
                .arg("run")
                .arg(&spec)
                .args(["--query", "q", "--json"]),
        ),
        None,
        HANG,
    );
    let trace = out.json();
    assert_eq!(trace["final_output"], "error", "{out:?}");
    let error = &trace["tool_errors"][0];
    assert!(
        ["timeout", "execution_error"].contains(&error["kind"].as_str().unwrap_or_default()),
        "{out:?}"
    );
}

/// The MCP client side of `toolrun serve` over stdio: one JSON-RPC message a line.
struct StdioServe {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl StdioServe {
    fn start(spec: &Path, args: &[&std::ffi::OsStr]) -> StdioServe {
        let mut child = toolrun()
            .arg("serve")
            .arg(spec)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut serve = StdioServe {
            child,
            stdin,
            stdout,
        };
        serve.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
        );
        serve.read();
        serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        serve
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    /// SIGTERM, then how long it took to end (at most [`HANG`], else the test fails).
    fn terminate(mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + HANG;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                panic!("toolrun serve still running {HANG:?} after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Waits until `dir` holds `n` files (at most [`HANG`]).
fn wait_for_files(dir: &Path, n: usize) {
    let until = Instant::now() + HANG;
    while std::fs::read_dir(dir).map_or(0, |d| d.count()) < n {
        assert!(
            Instant::now() < until,
            "fewer than {n} files in {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM to `serve` whose upstream stopped reading, with a call of it in flight: `serve` ends
/// promptly, where it waited for ever on a write to the full pipe.
#[test]
fn sigterm_ends_serve_whose_stdio_upstream_stopped_reading() {
    let dir = support::temp_dir("exec-flood-serve");
    let flooding = dir.join("flooding");
    std::fs::create_dir_all(&flooding).unwrap();
    let spec = spec(
        &dir,
        &raw_command(&["flood", &flooding.display().to_string()]),
        "    timeout: 600s\n",
        "echo",
        "          - answer: unused",
    );
    let mut serve = StdioServe::start(&spec, &["--allow-exec".as_ref(), python().as_os_str()]);
    serve.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}}}));
    // Serve's own process (listed at start) and the session's both flood.
    wait_for_files(&flooding, 2);
    let status = serve.terminate();
    assert!(status.code().is_some(), "{status:?}");
}

/// `toolrun call SPEC TOOL --args ARGS EXTRA...` in `cwd` (with `PATH` as given, when given).
fn call(spec: &Path, tool: &str, args: &str, extra: &[&std::ffi::OsStr]) -> Output {
    run(toolrun()
        .arg("call")
        .arg(spec)
        .arg(tool)
        .args(["--args", args, "--json"])
        .args(extra))
}

/// An executable script `name` in `dir` that runs the raw server with `args`.
fn server_file(dir: &Path, name: &str, args: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let text = format!(
        "#!{}\nimport os, sys\nos.execv(sys.executable, [sys.executable, {:?}] + {args} + sys.argv[1:])\n",
        python().display(),
        server_script().display().to_string(),
    );
    let path = write(dir, name, &text);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A spec's `env:` may not set what chooses the code the allowed program runs: `PYTHONPATH`
/// pointing into the project would run the project's `sitecustomize.py` inside the allowed
/// interpreter. Refused, naming the variable and `--allow-env`; allowed by name, it runs.
#[test]
fn env_that_chooses_code_is_refused_unless_allowed_by_name() {
    let dir = support::temp_dir("exec-env");
    let planted = dir.join("planted");
    std::fs::create_dir_all(&planted).unwrap();
    let ran = dir.join("ran");
    write(
        &planted,
        "sitecustomize.py",
        &format!("open({:?}, 'w').close()\n", ran.display().to_string()),
    );
    let spec = spec(
        &dir,
        &raw_command(&["serve"]),
        &format!(
            "    env: {{ PYTHONPATH: {:?}, LOG_LEVEL: warn }}\n",
            planted.display().to_string()
        ),
        "echo",
        "          - answer: unused",
    );
    let py = python();
    let refused = call(
        &spec,
        "echo",
        r#"{"text": "hi"}"#,
        &["--allow-exec".as_ref(), py.as_os_str()],
    );
    assert_eq!(refused.code, 1, "{refused:?}");
    support::assert_contains(&refused.stderr, &["`PYTHONPATH`", "--allow-env PYTHONPATH"]);
    assert!(!ran.exists(), "the planted module ran: {refused:?}");
    // The same for `run`: the run stops before the model is called, naming the flag.
    let out = run(allow_python(
        toolrun()
            .arg("run")
            .arg(&spec)
            .args(["--query", "q", "--json"]),
    ));
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.json()["stop_reason"], "mcp_error", "{out:?}");
    assert!(out.stdout.contains("--allow-env PYTHONPATH"), "{out:?}");
    assert!(!ran.exists(), "the planted module ran: {out:?}");

    let allowed = call(
        &spec,
        "echo",
        r#"{"text": "hi"}"#,
        &[
            "--allow-exec".as_ref(),
            py.as_os_str(),
            "--allow-env".as_ref(),
            "PYTHONPATH".as_ref(),
        ],
    );
    allowed.assert_success();
    assert!(ran.exists(), "{allowed:?}");
}

/// `--allow-command` allows one command line, the program and exactly its arguments: the same
/// program with other arguments (a launcher told to run something else) does not start.
#[test]
fn allow_command_allows_exactly_one_command_line() {
    let dir = support::temp_dir("exec-command-line");
    let spec = spec(
        &dir,
        &raw_command(&["serve"]),
        "",
        "echo",
        "          - answer: unused",
    );
    let line = |mode: &str| {
        format!(
            "{} '{}' {mode}",
            python().display(),
            server_script().display()
        )
    };
    let ok = call(
        &spec,
        "echo",
        r#"{"text": "hi"}"#,
        &["--allow-command".as_ref(), line("serve").as_ref()],
    );
    ok.assert_success();
    assert!(ok.stdout.contains("hi"), "{ok:?}");
    let other = call(
        &spec,
        "echo",
        r#"{"text": "hi"}"#,
        &["--allow-command".as_ref(), line("flood").as_ref()],
    );
    assert_eq!(other.code, 1, "{other:?}");
    support::assert_contains(&other.stderr, &["--allow-exec", "--allow-command"]);
    let bad = call(
        &spec,
        "echo",
        "{}",
        &["--allow-command".as_ref(), "node 'server.js".as_ref()],
    );
    bad.assert_code(2);
    assert!(bad.stderr.contains("--allow-command"), "{bad:?}");
}

/// `--allow-exec ./server` allows the file `./server` is where toolrun runs, not whatever the
/// spec spells `./server` (which is in the project root).
#[test]
fn a_relative_allow_exec_matches_the_file_not_the_spelling() {
    let project = support::temp_dir("exec-relative-project");
    let elsewhere = support::temp_dir("exec-relative-elsewhere");
    server_file(&project, "server", r#"["serve"]"#);
    server_file(&elsewhere, "server", r#"["serve"]"#);
    let spec = spec(
        &project,
        r#"["./server"]"#,
        "",
        "echo",
        "          - answer: unused",
    );
    let allow = ["--allow-exec", "./server"];
    let mut from_elsewhere = toolrun();
    from_elsewhere.current_dir(&elsewhere);
    let refused = run(from_elsewhere
        .arg("call")
        .arg(&spec)
        .args(["echo", "--args", r#"{"text": "hi"}"#])
        .args(allow));
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("--allow-exec ./server"),
        "{refused:?}"
    );
    let mut from_project = toolrun();
    from_project.current_dir(&project);
    let ok = run(from_project
        .arg("call")
        .arg(&spec)
        .args(["echo", "--args", r#"{"text": "hi"}"#])
        .args(allow));
    ok.assert_success();
}

/// A relative `PATH` entry is never searched, for the program or by it: `bin` on `PATH` would
/// find the project's own `bin/server` for `command: [server]`; and the server's `PATH` keeps
/// only the absolute entries.
#[test]
fn relative_path_entries_are_never_searched() {
    let project = support::temp_dir("exec-relative-path");
    let bin = project.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    server_file(&bin, "server", r#"["serve"]"#);
    let path = format!("bin::.:{}", std::env::var("PATH").unwrap());
    let bare = spec(
        &project,
        r#"["server"]"#,
        "",
        "echo",
        "          - answer: unused",
    );
    let mut cmd = toolrun();
    cmd.current_dir(&project).env("PATH", &path);
    let out = run(cmd.arg("call").arg(&bare).args([
        "echo",
        "--args",
        r#"{"text": "hi"}"#,
        "--allow-exec",
        "server",
    ]));
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("cannot find the program `server`"),
        "{out:?}"
    );

    let env_spec = spec(
        &project,
        &raw_command(&["serve"]),
        "",
        "env",
        "          - answer: unused",
    );
    let mut cmd = toolrun();
    cmd.current_dir(&project).env("PATH", &path);
    let out = run(allow_python(cmd.arg("call").arg(&env_spec).args([
        "env",
        "--args",
        r#"{"name": "PATH"}"#,
        "--json",
    ])));
    out.assert_success();
    // The tool's text is the JSON of what the server saw.
    let expected = serde_json::to_string(&std::env::var("PATH").unwrap()).unwrap();
    assert!(
        out.stdout
            .contains(&serde_json::to_string(&expected).unwrap()),
        "{out:?}"
    );
}

/// `toolrun serve --http` for the raw client below.
struct Gateway {
    child: std::process::Child,
    authority: String,
    _stderr: BufReader<std::process::ChildStderr>,
}

impl Gateway {
    fn start(spec: &Path, args: &[&std::ffi::OsStr]) -> Gateway {
        let mut cmd = toolrun();
        cmd.arg("serve")
            .arg(spec)
            .args(["--http", "127.0.0.1:0"])
            .args(args);
        let (child, url, stderr) = support::spawn_served(&mut cmd);
        let authority = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string();
        Gateway {
            child,
            authority,
            _stderr: stderr,
        }
    }

    /// POSTs one message; the response's head and the JSON-RPC messages of its body.
    fn post(&self, session: Option<&str>, body: &Value) -> (String, Vec<Value>) {
        use std::io::Read;
        let mut stream = std::net::TcpStream::connect(&self.authority).unwrap();
        stream.set_read_timeout(Some(HANG)).unwrap();
        let body = body.to_string();
        let session = session.map_or(String::new(), |s| format!("Mcp-Session-Id: {s}\r\n"));
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n{session}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.authority,
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (head, rest) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let rest = match head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            true => dechunk(rest),
            false => rest.to_string(),
        };
        let messages = match serde_json::from_str::<Value>(&rest) {
            Ok(Value::Array(items)) => items,
            Ok(one) => vec![one],
            Err(_) => rest
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str(d.trim()).ok())
                .collect(),
        };
        (head.to_string(), messages)
    }

    /// A new MCP session: its id.
    fn session(&self) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}});
        let (head, _) = self.post(None, &init);
        let id = support::response_header(&head, "mcp-session-id")
            .unwrap_or_else(|| panic!("no session id in {head}"));
        self.post(
            Some(&id),
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        id
    }

    /// `tools/call` of `tool` in `session`: its JSON-RPC answer.
    fn call(&self, session: &str, tool: &str) -> Value {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}});
        let (head, messages) = self.post(Some(session), &call);
        messages
            .into_iter()
            .find(|m| m.get("id") == Some(&json!(1)))
            .unwrap_or_else(|| panic!("no answer to the call: {head}"))
    }

    /// The process id a `pid` call in `session` reports.
    fn pid(&self, session: &str) -> u64 {
        let answer = self.call(session, "pid");
        let text = answer["result"]["content"][0]["text"].as_str();
        text.and_then(|t| t.trim().parse().ok())
            .unwrap_or_else(|| panic!("no pid in {answer}"))
    }

    /// The processes `serve` started that are still running (not zombies).
    fn children(&self) -> Vec<u64> {
        let me = self.child.id().to_string();
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ppid ...: comm may hold anything, so read after its last `)`.
            let Some((_, after)) = stat.rsplit_once(')') else {
                continue;
            };
            let fields: Vec<&str> = after.split_whitespace().collect();
            if fields.get(1) == Some(&me.as_str()) && fields.first() != Some(&"Z") {
                found.extend(
                    entry
                        .file_name()
                        .to_str()
                        .and_then(|p| p.parse::<u64>().ok()),
                );
            }
        }
        found
    }

    /// SIGTERM, and its exit status once it has ended.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child.wait().unwrap()
    }

    /// Waits until `serve` runs at most `n` processes (at most [`HANG`]); fails if it never does.
    fn wait_for_at_most(&self, n: usize) {
        let until = Instant::now() + HANG;
        loop {
            let now = self.children();
            if now.len() <= n {
                return;
            }
            assert!(Instant::now() < until, "serve runs {now:?}, more than {n}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// A gateway of a stdio server runs at most `--max-processes` of them across its sessions: an
/// abandoned session's idle process makes room for a new session's, and the session whose
/// process was ended gets a new one on its next call, as does one whose server crashed.
#[test]
fn a_gateway_bounds_its_stdio_processes_and_starts_a_crashed_one_again() {
    let dir = support::temp_dir("exec-gateway");
    let spec = spec(
        &dir,
        &raw_command(&["serve"]),
        "",
        "pid, crash",
        "          - answer: unused",
    );
    let py = python();
    let gateway = Gateway::start(
        &spec,
        &[
            "--allow-exec".as_ref(),
            py.as_os_str(),
            "--max-processes".as_ref(),
            "2".as_ref(),
        ],
    );
    let mut sessions = Vec::new();
    for _ in 0..4 {
        let session = gateway.session();
        let pid = gateway.pid(&session);
        gateway.wait_for_at_most(2);
        sessions.push((session, pid));
    }
    // Every session was served, each by a process of its own.
    let mut pids: Vec<u64> = sessions.iter().map(|(_, p)| *p).collect();
    pids.dedup();
    assert_eq!(pids.len(), 4, "{sessions:?}");
    // The first session's process made room for a later one: its next call starts another.
    let (first, first_pid) = &sessions[0];
    let again = gateway.pid(first);
    assert_ne!(again, *first_pid);
    gateway.wait_for_at_most(2);
    // A crash fails that call; the session's next call starts the server again.
    let (last, last_pid) = &sessions[3];
    let crashed = gateway.call(last, "crash");
    assert_eq!(crashed["result"]["isError"], true, "{crashed}");
    let text = crashed["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("crashing on purpose"), "{crashed}");
    let restarted = gateway.pid(last);
    assert_ne!(restarted, *last_pid);
    assert!(gateway.children().contains(&restarted));
    gateway.wait_for_at_most(2);
}

/// A server that only SIGKILL ends (`RAW_IGNORE_TERM`: neither toolrun's SIGTERM nor the
/// kernel's parent-death signal does), with a helper process of its own, as `npx` has node
/// (which nothing but ending the group ends), each writing its pid to `pids`; `env` adds to its
/// `env:`.
fn stubborn_spec(dir: &Path, pids: &Path, env: &str, extra: &str) -> PathBuf {
    std::fs::create_dir_all(pids).unwrap();
    let env = format!(
        "    env: {{ RAW_PID_DIR: \"{}\", RAW_IGNORE_TERM: \"1\", RAW_HELPER: \"1\"{env} }}\n{extra}",
        pids.display()
    );
    spec(
        dir,
        &raw_command(&["serve"]),
        &env,
        "echo, pid, sleep",
        r#"          - tool_calls: [{ name: echo, arguments: { text: hi } }]
          - answer: "{{ last.status }}""#,
    )
}

/// The servers whose pids are in `pids` that still run (not zombies), each killed now so that
/// a failing test leaves none behind.
fn survivors(pids: &Path) -> Vec<u32> {
    let mut alive = Vec::new();
    for entry in std::fs::read_dir(pids).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix("pid-")
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ...: comm may hold anything, so read after its last `)`.
        let state = stat.rsplit_once(')').map(|(_, after)| after.trim_start());
        if !state.is_some_and(|s| s.starts_with('Z')) {
            alive.push(pid);
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
    alive
}

/// SIGTERM to `serve` over stdio while its session's server is busy with a call, or still
/// starting: every server it started is ended and reaped before it exits. The session's server
/// was being ended by a task of its own (its session ended), which `serve` did not wait for:
/// it exited in that task's grace period, and a server that ignores SIGTERM outlived it.
#[test]
fn serve_stopped_mid_call_or_mid_start_leaves_no_server_behind() {
    for (round, delay) in [("busy", "0"), ("starting", "3")] {
        let dir = support::temp_dir(&format!("exec-no-survivor-{round}"));
        let pids = dir.join("pids");
        let delay = format!(", RAW_START_DELAY: \"{delay}\"");
        let spec = stubborn_spec(&dir, &pids, &delay, "    timeout: 60s\n");
        let mut serve = StdioServe::start(&spec, &["--allow-exec".as_ref(), python().as_os_str()]);
        // The gateway's own server is up (it listed its tools); the call starts the session's.
        serve.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"seconds": 30}}}));
        // Both servers and their helpers.
        wait_for_files(&pids, 4);
        let status = serve.terminate();
        assert!(status.code().is_some(), "{round}: {status:?}");
        let left = survivors(&pids);
        assert!(
            left.is_empty(),
            "{round}: serve exited and left {left:?} running"
        );
    }
}

/// The same through `serve --http`, with sessions busy, one ended by its client just before,
/// and a run whose server does not start within `startup_timeout:`.
#[test]
fn every_way_a_gateway_or_run_ends_leaves_no_server_behind() {
    let dir = support::temp_dir("exec-no-survivor-http");
    let pids = dir.join("pids");
    let spec = stubborn_spec(&dir, &pids, "", "    timeout: 60s\n");
    let mut gateway = Gateway::start(&spec, &["--allow-exec".as_ref(), python().as_os_str()]);
    let ended = gateway.session();
    gateway.pid(&ended);
    let busy: Vec<String> = (0..2).map(|_| gateway.session()).collect();
    let authority = gateway.authority.clone();
    for session in &busy {
        let (authority, session) = (authority.clone(), session.clone());
        // Answered (with an error) only when `serve` stops: nobody waits for it.
        std::thread::spawn(move || {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "sleep", "arguments": {"seconds": 30}}})
            .to_string();
            let Ok(mut stream) = std::net::TcpStream::connect(&authority) else {
                return;
            };
            let _ = write!(
                stream,
                "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = std::io::Read::read_to_end(&mut stream, &mut Vec::new());
        });
    }
    // The gateway's own, the ended session's and the two busy ones, and their helpers.
    wait_for_files(&pids, 8);
    let mut stream = std::net::TcpStream::connect(&authority).unwrap();
    write!(
        stream,
        "DELETE /mcp HTTP/1.1\r\nHost: {authority}\r\nMCP-Protocol-Version: 2025-06-18\r\nMcp-Session-Id: {ended}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    std::io::Read::read_to_end(&mut stream, &mut Vec::new()).unwrap();
    let status = gateway.terminate();
    assert!(status.code().is_some(), "{status:?}");
    let left = survivors(&pids);
    assert!(
        left.is_empty(),
        "serve --http exited and left {left:?} running"
    );

    // A run whose server is still starting when `startup_timeout:` passes.
    let dir = support::temp_dir("exec-no-survivor-run");
    let pids = dir.join("pids");
    let extra = "    timeout: 60s\n    startup_timeout: 1s\n";
    let spec = stubborn_spec(&dir, &pids, ", RAW_START_DELAY: \"60\"", extra);
    let out = run_with_timeout(
        allow_python(toolrun().arg("run").arg(&spec).args(["--query", "q"])),
        None,
        HANG,
    );
    out.assert_code(1);
    assert!(
        (out.stdout.clone() + &out.stderr).contains("startup_timeout"),
        "{out:?}"
    );
    let left = survivors(&pids);
    assert!(left.is_empty(), "run exited and left {left:?} running");
}
