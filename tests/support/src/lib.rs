//! Shared helpers for toolrun's integration tests: include with `mod support;`.
//!
//! - [`TestServer`] / [`Response`] / [`Request`]: a std-only HTTP/1.1 server on 127.0.0.1
//!   (see `http.rs`), and [`refused_port`] for "connection refused".
//! - [`clean_command`], [`run`], [`run_with_stdin`], [`Output`]: run the real binary with a clean
//!   environment, capture its exit code and streams, and never hang a test.
//! - [`temp_dir`], [`write`]: scratch files, removed after a passing test.
//! - [`redact_durations`], [`redact_durations_json`]: stable snapshots of traces.
//! - [`assert_contains`]: every expected piece of a text, or the text and what it lacks.
//! - [`specs`]: spec texts shared by several test files.
//! - [`terminal`]: the binary on a pseudo-terminal, typed at as a person would.
//! - [`browser`]: headless Chromium, to see a report page as it renders.
//!
//! A library of its own (a dev-dependency), so it is compiled once, not once per test binary;
//! `tests/support/mod.rs` re-exports it and adds `toolrun()`, which needs the binary's path.

pub mod browser;
pub mod http;
pub mod providers;
pub mod responses;
pub mod specs;
pub mod terminal;

pub use http::{percent_decode, refused_port, Request, Response, TestServer};

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long [`run`] and [`run_with_stdin`] let the binary run before killing it.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// A command for the binary at `bin` with a clean environment: everything cleared except
/// `PATH`, `HOME` (and `TMPDIR`, `SYSTEMROOT` where set), plus `NO_COLOR=1` and the tests' own
/// spec cache ([`test_cache_dir`]), so the suite never writes to the user's `~/.cache/toolrun`.
/// No proxy variables survive, so requests to 127.0.0.1 go straight to the test server. The
/// working directory is left to the caller; add secrets with `.env(..)`.
pub fn clean_command(bin: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear();
    for key in ["PATH", "HOME", "TMPDIR", "SYSTEMROOT"] {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    cmd.env("NO_COLOR", "1");
    cmd.env("TOOLRUN_CACHE_DIR", test_cache_dir());
    cmd
}

/// The spec cache every test command uses (`TOOLRUN_CACHE_DIR`), under the temporary folder:
/// shared by the suite's processes like a user's cache would be, and bounded as any cache is.
pub fn test_cache_dir() -> PathBuf {
    std::env::temp_dir()
        .join("toolrun-tests")
        .join("spec-cache")
}

/// What a finished command left behind.
#[derive(Clone, PartialEq, Eq)]
pub struct Output {
    /// The exit code; on Unix, `128 + signal` when killed by a signal.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Panics (showing both streams) unless the exit code is `code`.
    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &Output {
        assert_eq!(self.code, code, "unexpected exit code\n{self:?}");
        self
    }

    /// Panics (showing both streams) unless the exit code is 0.
    #[track_caller]
    pub fn assert_success(&self) -> &Output {
        self.assert_code(0)
    }

    /// stdout parsed as one JSON document; panics (showing both streams) if it is not.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        match serde_json::from_str(&self.stdout) {
            Ok(v) => v,
            Err(e) => panic!("stdout is not JSON: {e}\n{self:?}"),
        }
    }
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exit code: {}\n--- stdout ---\n{}\n--- stderr ---\n{}\n--- end ---",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `cmd` with stdin closed, waits (at most [`DEFAULT_RUN_TIMEOUT`]) and captures it.
#[track_caller]
pub fn run(cmd: &mut Command) -> Output {
    run_with_timeout(cmd, None, DEFAULT_RUN_TIMEOUT)
}

/// Like [`run`], with `stdin` written to the command's standard input.
#[track_caller]
pub fn run_with_stdin(cmd: &mut Command, stdin: &str) -> Output {
    run_with_timeout(cmd, Some(stdin), DEFAULT_RUN_TIMEOUT)
}

/// Starts `cmd` (`toolrun serve … --http ADDR`) with stdin and stdout closed, and reads the URL
/// it announces (see [`served_url`]).
pub fn spawn_served(
    cmd: &mut Command,
) -> (
    std::process::Child,
    String,
    std::io::BufReader<std::process::ChildStderr>,
) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolrun serve");
    let (url, stderr) = served_url(&mut child);
    (child, url, stderr)
}

/// The URL `toolrun serve --http ADDR` announces on the first line of its stderr (spawned with
/// stderr piped), and the rest of that stderr: keep the reader alive while the server runs, or
/// its later writes meet a closed pipe.
pub fn served_url(
    child: &mut std::process::Child,
) -> (String, std::io::BufReader<std::process::ChildStderr>) {
    use std::io::BufRead;
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr piped"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("first line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    (url, stderr)
}

/// The `HOST:PORT` of a URL `toolrun serve --http` announced (`http://HOST:PORT/mcp`).
pub fn served_authority(url: &str) -> &str {
    url.trim_start_matches("http://").trim_end_matches("/mcp")
}

/// Stops a served `child` as a service manager would, with SIGTERM; its exit code (-1 if a
/// signal ended it) and the rest of its `stderr`.
pub fn terminate(child: &mut std::process::Child, stderr: &mut impl Read) -> (i32, String) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().expect("wait");
    let mut rest = String::new();
    let _ = stderr.read_to_string(&mut rest);
    (status.code().unwrap_or(-1), rest)
}

/// A JSON-RPC peer's process over piped stdio (`toolrun serve SPEC` without `--http`, `toolrun
/// lsp`), started from `cmd`: its stdin, its stdout's messages on the receiver (a line that is not
/// JSON comes as a string), and the thread gathering its stderr.
pub fn spawn_stdio_peer(
    cmd: &mut Command,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::sync::mpsc::Receiver<serde_json::Value>,
    thread::JoinHandle<String>,
) {
    use std::io::BufRead;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the stdio peer");
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let message = serde_json::from_str(&line).unwrap_or(serde_json::Value::String(line));
            if tx.send(message).is_err() {
                break;
            }
        }
    });
    let mut stderr = child.stderr.take().expect("piped stderr");
    let errors = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    (child, stdin, rx, errors)
}

/// Writes one message to a stdio peer, a line of JSON.
pub fn write_line(stdin: &mut std::process::ChildStdin, message: &serde_json::Value) {
    writeln!(stdin, "{message}").expect("write a message");
}

/// Sends a raw HTTP/1.1 request to `authority` on a connection of its own: a JSON `body`,
/// `Accept`ing JSON or an event stream, `Connection: close`, and `headers` besides. The
/// connection, to read the answer from (each read waiting at most `wait`).
pub fn send_raw(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    wait: Duration,
) -> std::net::TcpStream {
    let mut stream = std::net::TcpStream::connect(authority).expect("connect");
    stream.set_read_timeout(Some(wait)).expect("timeout");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).expect("send");
    stream
}

/// A header of a raw HTTP response (as [`exchange_raw`] returns it), by name in any case,
/// looked for in the head only; its value trimmed.
pub fn response_header(response: &str, name: &str) -> Option<String> {
    response.split("\r\n\r\n").next()?.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// [`send_raw`], and the whole response (status line, headers, body) read to its end.
pub fn exchange_raw(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    wait: Duration,
) -> String {
    let mut stream = send_raw(authority, method, path, headers, body, wait);
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

/// Runs `cmd`, feeding it `stdin` (or a closed stdin). If it is still running after
/// `timeout` it is killed and the test panics, showing what it printed so far.
#[track_caller]
pub fn run_with_timeout(cmd: &mut Command, stdin: Option<&str>, timeout: Duration) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", cmd.get_program()));

    let stdin_thread = match (stdin, child.stdin.take()) {
        (Some(text), Some(mut pipe)) => {
            let text = text.to_string();
            // A broken pipe (the command exited without reading) is not an error here.
            Some(thread::spawn(move || {
                let _ = pipe.write_all(text.as_bytes());
            }))
        }
        _ => None,
    };
    let mut out_pipe = child.stdout.take().expect("piped stdout");
    let mut err_pipe = child.stderr.take().expect("piped stderr");
    let out_thread = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out_pipe.read_to_end(&mut buf);
        buf
    });
    let err_thread = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err_pipe.read_to_end(&mut buf);
        buf
    });

    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().expect("wait for killed child");
            }
            Ok(None) => thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("waiting for {:?}: {e}", cmd.get_program()),
        }
    };
    if let Some(t) = stdin_thread {
        let _ = t.join();
    }
    let output = Output {
        code: exit_code(status),
        stdout: String::from_utf8_lossy(&out_thread.join().unwrap_or_default()).into_owned(),
        stderr: String::from_utf8_lossy(&err_thread.join().unwrap_or_default()).into_owned(),
    };
    if timed_out {
        panic!(
            "{:?} still running after {timeout:?}; killed\n{output:?}",
            cmd.get_program()
        );
    }
    output
}

fn exit_code(status: ExitStatus) -> i32 {
    if let Some(code) = status.code() {
        return code;
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return 128 + sig;
        }
    }
    -1
}

/// Every `.rs` file below `dir`, sorted, for the tests that read `src/` as text.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// A fresh, empty directory under `std::env::temp_dir()/toolrun-tests/`, unique to this
/// call (name, process id, counter and time), created. It is removed when the returned guard is
/// dropped, unless the test is failing (panicking) then, or `TOOLRUN_KEEP_TEST_DIRS` is set:
/// a failing test leaves its files to look at and says where they are on stderr.
pub fn temp_dir(name: &str) -> TempDir {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir = std::env::temp_dir()
        .join("toolrun-tests")
        .join(format!("{safe}-{}-{n}-{nanos}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap_or_else(|e| panic!("remove {}: {e}", dir.display()));
    }
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    TempDir { path: dir }
}

/// A scratch directory from [`temp_dir`]; use it as a `Path`.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A file in a scratch directory of its own, for helpers that make one file and return it: the
/// directory lives (and is removed, see [`temp_dir`]) with the returned value. Use it as a `Path`.
#[derive(Debug)]
pub struct TempFile {
    path: PathBuf,
    _dir: TempDir,
}

/// Writes `contents` to `name` in a fresh [`temp_dir`] called `dir_name`.
pub fn temp_file(dir_name: &str, name: &str, contents: &str) -> TempFile {
    let dir = temp_dir(dir_name);
    TempFile {
        path: write(&dir, name, contents),
        _dir: dir,
    }
}

impl TempFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

macro_rules! as_path {
    ($t:ty) => {
        impl std::ops::Deref for $t {
            type Target = Path;
            fn deref(&self) -> &Path {
                &self.path
            }
        }
        impl AsRef<Path> for $t {
            fn as_ref(&self) -> &Path {
                &self.path
            }
        }
        impl AsRef<std::ffi::OsStr> for $t {
            fn as_ref(&self) -> &std::ffi::OsStr {
                self.path.as_os_str()
            }
        }
    };
}
as_path!(TempDir);
as_path!(TempFile);

impl Drop for TempDir {
    fn drop(&mut self) {
        if thread::panicking() || std::env::var_os("TOOLRUN_KEEP_TEST_DIRS").is_some() {
            eprintln!("test files kept in {}", self.path.display());
        } else {
            // Best effort: a server thread may still hold a file open; the next run does not care.
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Writes `contents` to `dir/name` (creating parent directories) and returns the path.
pub fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .unwrap_or_else(|e| panic!("create {}: {e}", parent.display()));
    }
    std::fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

/// Panics unless `text` contains every one of `expected`, naming the missing ones and
/// showing the whole text.
#[track_caller]
pub fn assert_contains(text: &str, expected: &[&str]) {
    let missing: Vec<&&str> = expected.iter().filter(|e| !text.contains(**e)).collect();
    assert!(missing.is_empty(), "missing {missing:?} in:\n{text}");
}

/// Whether a JSON key names a measured duration (`duration_ms`, `elapsed_ms`, `*_ms`,
/// `*_us`, `*_ns`, `*_secs`, `*_seconds`, `duration`, `elapsed`, `latency`).
pub fn is_duration_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["_ms", "_us", "_ns", "_secs", "_seconds"]
        .iter()
        .any(|suffix| k.ends_with(suffix))
        || matches!(k.as_str(), "duration" | "elapsed" | "latency")
}

/// Whether a JSON key names a wall-clock start time (`started_at`), which differs between runs
/// like a duration.
pub fn is_timestamp_key(key: &str) -> bool {
    key == "started_at"
}

/// What [`redact_durations`] writes for every start time.
pub const EPOCH: &str = "1970-01-01T00:00:00.000Z";

/// Replaces the number after every duration key (see [`is_duration_key`]) in JSON text,
/// `"duration_ms": 12.5` → `"duration_ms": 0`, every `started_at` string with [`EPOCH`], and
/// every JUnit `time="1.23"` attribute
/// with `time="0"`, so that traces and reports can be compared as snapshots. Works on
/// compact and pretty JSON, on JSON Lines and on JSON embedded in other text.
pub fn redact_durations(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut copied = 0; // s[..copied] is already in `out`
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            // A JSON string: find its end, honouring escapes.
            let start = i + 1;
            let mut j = start;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            if j >= b.len() {
                break;
            }
            let mut k = skip_ws(b, j + 1);
            if k < b.len() && b[k] == b':' && is_timestamp_key(&s[start..j]) {
                let v = skip_ws(b, k + 1);
                if b.get(v) == Some(&b'"') {
                    let mut e = v + 1;
                    while e < b.len() && b[e] != b'"' {
                        e += if b[e] == b'\\' { 2 } else { 1 };
                    }
                    out.push_str(&s[copied..v]);
                    out.push_str(&format!("\"{EPOCH}\""));
                    copied = (e + 1).min(b.len());
                    i = copied;
                    continue;
                }
            }
            if k < b.len() && b[k] == b':' && is_duration_key(&s[start..j]) {
                k = skip_ws(b, k + 1);
                let end = scan_number(b, k);
                if end > k {
                    out.push_str(&s[copied..k]);
                    out.push('0');
                    copied = end;
                    i = end;
                    continue;
                }
            }
            i = j + 1;
            continue;
        }
        if b[i..].starts_with(b"time=\"") && (i == 0 || b[i - 1].is_ascii_whitespace()) {
            let v = i + 6;
            let end = scan_number(b, v);
            if end > v && b.get(end) == Some(&b'"') {
                out.push_str(&s[copied..v]);
                out.push('0');
                copied = end;
                i = end + 1; // past the closing quote
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&s[copied..]);
    out
}

/// Sets every numeric value under a duration key (see [`is_duration_key`]) to 0 and every start
/// time to [`EPOCH`], at any depth.
pub fn redact_durations_json(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                if val.is_number() && is_duration_key(k) {
                    *val = serde_json::Value::from(0);
                } else if val.is_string() && is_timestamp_key(k) {
                    *val = serde_json::Value::from(EPOCH);
                } else {
                    redact_durations_json(val);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_durations_json),
        _ => {}
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// End of a JSON number starting at `i` (`i` itself when there is none).
fn scan_number(b: &[u8], start: usize) -> usize {
    let mut i = start;
    if i < b.len() && b[i] == b'-' {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i == digits_start {
        return start;
    }
    if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    i
}

/// Compares `actual` with the snapshot file at `path`. With `UPDATE_SNAPSHOTS=1` in the
/// environment the file is (re)written instead. A missing snapshot is an error, never written
/// on the quiet: a test must not pass against nothing.
pub fn check_snapshot(path: &Path, actual: &str) -> Result<(), String> {
    check_snapshot_with(path, actual, std::env::var_os("UPDATE_SNAPSHOTS").is_some())
}

/// [`check_snapshot`] with the update switch passed in (for testing it).
pub fn check_snapshot_with(path: &Path, actual: &str, update: bool) -> Result<(), String> {
    if update {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("create {}: {e}", parent.display()))?;
        }
        return std::fs::write(path, actual).map_err(|e| format!("write {}: {e}", path.display()));
    }
    let expected = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            return Err(format!(
                "snapshot {} cannot be read ({e}); run with UPDATE_SNAPSHOTS=1 to write it, then review it",
                path.display()
            ))
        }
    };
    if expected == actual {
        return Ok(());
    }
    Err(format!(
        "--- {} (- snapshot, + actual; UPDATE_SNAPSHOTS=1 to accept)\n{}",
        path.display(),
        line_diff(&expected, actual)
    ))
}

/// Panics with a diff unless `actual` matches the snapshot at `path` (see [`check_snapshot`]).
#[track_caller]
pub fn assert_snapshot(path: &Path, actual: &str) {
    if let Err(e) = check_snapshot(path, actual) {
        panic!("{e}");
    }
}

/// A line diff (longest common subsequence) in the usual `-`/`+` form.
pub fn line_diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        } else {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        }
    }
    out
}

/// The events in an `--events` file a finished command wrote, in order (none when it wrote no
/// file); every line must be a JSON event.
pub fn events_in(events: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(events)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("event line"))
        .collect()
}

/// The events called `name` in an `--events` file (see [`events_in`]).
pub fn events_named(events: &Path, name: &str) -> Vec<serde_json::Value> {
    let mut all = events_in(events);
    all.retain(|e| e["event"] == name);
    all
}

/// The pid of the `toolrun` process below `parent` (a `script` running it on a pseudo-terminal).
/// `script` starts the command through `$SHELL -c`: bash execs it, but dash (what `script` uses
/// when SHELL is unset, as in CI) stays in between, and a signal to that shell never reaches toolrun.
pub fn toolrun_below(parent: u32) -> Option<u32> {
    let mut pending = vec![parent];
    while let Some(pid) = pending.pop() {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
            {
                let comm =
                    std::fs::read_to_string(format!("/proc/{child}/comm")).unwrap_or_default();
                if comm.trim() == "toolrun" {
                    return Some(child);
                }
                pending.push(child);
            }
        }
    }
    None
}
