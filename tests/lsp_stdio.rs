//! `toolrun lsp` through the binary, spoken to over stdio by a small client written here: the
//! fast tests of the language server (the end-to-end suite with a real client library is
//! `tests/lsp.rs`).

mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// Generous: only catches a hang.
const WAIT: Duration = Duration::from_secs(60);

pub const SPEC: &str = r#"version: 1
tools:
  get_weather:
    kind: mock
    description: Weather of a city.
    input: { type: object, properties: { city: { type: string } } }
    responses:
      - result: { temp: 20 }
policy:
  allow: [get_wether]
models:
  bot:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: get_weather, arguments: { city: Paris } }]
          - answer: done
tests:
  - name: t
    query: q
    expect: { output_contains: "😀", status: complted }
"#;

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    incoming: Receiver<Value>,
    next_id: i64,
    /// Notifications seen while waiting for something else.
    seen: Vec<Value>,
}

impl Client {
    fn start(dir: &Path) -> Client {
        let mut child = support::toolrun()
            .arg("lsp")
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn toolrun lsp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("Content-Length: ") {
                        length = v.parse().expect("length");
                    }
                }
                let mut body = vec![0; length];
                if r.read_exact(&mut body).is_err() {
                    return;
                }
                let v: Value = serde_json::from_slice(&body).expect("JSON from the server");
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut c = Client {
            child,
            stdin,
            incoming: rx,
            next_id: 0,
            seen: Vec::new(),
        };
        let init = c.request(
            "initialize",
            json!({ "processId": null, "rootUri": null, "capabilities": {} }),
        );
        assert_eq!(
            init["result"]["capabilities"]["textDocumentSync"]["change"], 2,
            "{init}"
        );
        c.notify("initialized", json!({}));
        c
    }

    fn raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to the server");
        stdin.flush().expect("flush");
    }

    fn send(&mut self, v: Value) {
        let body = v.to_string();
        self.raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// The whole response (`result` or `error`).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        self.wait(|m| m["id"] == id && m.get("method").is_none())
    }

    fn wait(&mut self, want: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.seen.iter().position(&want) {
            return self.seen.remove(i);
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let m = self
                .incoming
                .recv_timeout(left)
                .expect("the server answers");
            if want(&m) {
                return m;
            }
            self.seen.push(m);
        }
    }

    /// The next diagnostics published for `uri` at `version`.
    fn diagnostics(&mut self, uri: &str, version: i64) -> Vec<Value> {
        let m = self.wait(|m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && m["params"]["version"] == version
        });
        m["params"]["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn open(&mut self, uri: &str, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": "yaml", "version": 1, "text": text } }),
        );
    }

    fn change(&mut self, uri: &str, version: i64, changes: Value) {
        self.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version }, "contentChanges": changes }),
        );
    }

    /// Shuts down, exits and gives the exit code.
    fn finish(mut self) -> i32 {
        let r = self.request("shutdown", Value::Null);
        assert_eq!(r["result"], Value::Null, "{r}");
        self.notify("exit", Value::Null);
        self.exit_code()
    }

    fn exit_code(&mut self) -> i32 {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| {
            let p = e.expect("entry").path();
            (
                p.display().to_string(),
                std::fs::read(&p).unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn diagnostics_are_checks_own_with_utf16_ranges_and_follow_incremental_changes() {
    let dir = support::temp_dir("lsp-diag");
    let spec = support::write(dir.path(), "spec.yaml", SPEC);
    let before = files(dir.path());
    let check = support::run(
        support::toolrun()
            .args(["check", "--format", "json"])
            .arg(&spec),
    )
    .json();
    let mut c = Client::start(dir.path());
    let u = uri(&spec);
    c.open(&u, SPEC);
    let got = c.diagnostics(&u, 1);
    let codes: Vec<&str> = got
        .iter()
        .map(|d| d["code"].as_str().unwrap_or(""))
        .collect();
    let want: Vec<&str> = check
        .as_array()
        .expect("list")
        .iter()
        .map(|d| d["code"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(codes, want, "{got:#?}");
    for (d, c) in got.iter().zip(check.as_array().expect("list")) {
        assert!(
            d["message"]
                .as_str()
                .unwrap_or("")
                .starts_with(c["message"].as_str().unwrap_or("-")),
            "{d}"
        );
        let sev = if c["severity"] == "error" { 1 } else { 2 };
        assert_eq!(d["severity"], sev);
        assert_eq!(
            d["range"]["start"]["line"],
            c["line"].as_i64().unwrap_or(0) - 1
        );
        assert_eq!(d["source"], "toolrun");
        let href = d["codeDescription"]["href"].as_str().unwrap_or("");
        assert!(
            href.ends_with(&format!(
                "docs/codes.md#{}",
                c["code"].as_str().unwrap_or("").to_lowercase()
            )),
            "{href}"
        );
    }
    let e012 = got.iter().find(|d| d["code"] == "E012").expect("E012");
    assert_eq!(
        e012["range"],
        json!({ "start": { "line": 9, "character": 10 }, "end": { "line": 9, "character": 20 } })
    );
    assert_eq!(e012["data"]["fix"], "get_weather");
    // `😀` counts two UTF-16 units: check's character column 45 is LSP's 0-based 45.
    let e033 = got.iter().find(|d| d["code"] == "E033").expect("E033");
    assert_eq!(
        e033["range"],
        json!({ "start": { "line": 20, "character": 45 }, "end": { "line": 20, "character": 53 } })
    );
    // Incremental: `wether` -> `weather`, then `complted` -> `completed`... which is no status
    // either: the E033 stays, E012 and W104 go.
    c.change(&u, 2, json!([{ "range": { "start": { "line": 9, "character": 15 }, "end": { "line": 9, "character": 20 } }, "text": "eather" }]));
    let got = c.diagnostics(&u, 2);
    let codes: Vec<&str> = got
        .iter()
        .map(|d| d["code"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(codes, ["E033"], "{got:#?}");
    // A full change.
    c.change(
        &u,
        3,
        json!([{ "text": SPEC.replace("complted", "ok").replace("get_wether", "get_weather") }]),
    );
    assert_eq!(c.diagnostics(&u, 3), Vec::<Value>::new());
    // Closing withdraws them.
    c.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": u } }),
    );
    let m = c.wait(|m| {
        m["method"] == "textDocument/publishDiagnostics" && m["params"]["version"].is_null()
    });
    assert_eq!(m["params"]["diagnostics"], json!([]));
    assert_eq!(c.finish(), 0);
    assert_eq!(
        files(dir.path()),
        before,
        "the server wrote to the workspace"
    );
}

/// Code, 1-based line and column, and message of each diagnostic `check` gives for `text`
/// (written to `spec` first).
fn checks_own(spec: &Path, text: &str) -> Vec<(String, i64, i64, String)> {
    std::fs::write(spec, text).expect("write the spec");
    let check = support::run(
        support::toolrun()
            .args(["check", "--format", "json"])
            .arg(spec),
    )
    .json();
    let field = |d: &Value, k: &str| d[k].as_str().unwrap_or("").to_string();
    let number = |d: &Value, k: &str| d[k].as_i64().unwrap_or(0);
    check
        .as_array()
        .expect("list")
        .iter()
        .map(|d| {
            let at = (number(d, "line"), number(d, "column"));
            (field(d, "code"), at.0, at.1, field(d, "message"))
        })
        .collect()
}

/// The same, from the server's diagnostics (its message adds the label and help).
fn servers(got: &[Value], want: &[(String, i64, i64, String)]) -> Vec<(String, i64, i64, String)> {
    got.iter()
        .zip(
            want.iter()
                .map(|w| w.3.as_str())
                .chain(std::iter::repeat("")),
        )
        .map(|(d, message)| {
            let text = d["message"].as_str().unwrap_or("");
            let start = &d["range"]["start"];
            (
                d["code"].as_str().unwrap_or("").to_string(),
                start["line"].as_i64().unwrap_or(-1) + 1,
                start["character"].as_i64().unwrap_or(-1) + 1,
                if text.starts_with(message) {
                    message
                } else {
                    text
                }
                .to_string(),
            )
        })
        .collect()
}

/// The server keeps each tool's compile between changes (issue 35: a 1,000-tool spec's
/// diagnostics within 50 ms): an edited tool, a tool moved down by a line, and a tool whose
/// declared secrets or allowed hosts changed elsewhere must each get `check`'s
/// diagnostics, not the ones kept.
#[test]
fn diagnostics_follow_edits_of_a_tool_and_of_what_a_kept_tool_depends_on() {
    let base = r#"version: 1
secrets: [API_KEY]
tools:
  lookup:
    kind: http
    description: Looks a record up by its id.
    input: { type: object, properties: { id: { type: string } } }
    request:
      method: GET
      url: "http://127.0.0.1:9/records/{{ args.id }}"
      headers: { X-Key: "{{ secrets.API_KEY }}" }
  other:
    kind: mock
    description: Says whether the service is up.
    responses:
      - result: { up: true }
policy:
  allow: [lookup, other]
  network: { allow_hosts: ["127.0.0.1:9"] }
"#;
    let dir = support::temp_dir("lsp-kept");
    let spec = dir.path().join("spec.yaml");
    let u = uri(&spec);
    let mut c = Client::start(dir.path());
    c.open(&u, base);
    let want = checks_own(&spec, base);
    assert_eq!(servers(&c.diagnostics(&u, 1), &want), want);
    assert!(want.is_empty(), "{want:?}");
    let edits = [
        // The tool itself: an argument its schema does not have.
        ("E017", base.replace("{{ args.id }}", "{{ args.ident }}")),
        // A line above every tool: each keeps its diagnostics, a line further down.
        (
            "E017",
            format!(
                "# a comment\n{}",
                base.replace("{{ args.id }}", "{{ args.ident }}")
            ),
        ),
        // What the tool's template reads: a secret no longer declared.
        (
            "E018",
            base.replace("secrets: [API_KEY]", "secrets: [API_TOKEN]"),
        ),
        // The hosts the tool may reach.
        (
            "E020",
            base.replace(
                r#"allow_hosts: ["127.0.0.1:9"]"#,
                r#"allow_hosts: ["127.0.0.1:8"]"#,
            ),
        ),
        // Back as it was.
        ("", base.to_string()),
    ];
    for (version, (code, text)) in (2..).zip(edits) {
        c.change(&u, version, json!([{ "text": text }]));
        let got = c.diagnostics(&u, version);
        let want = checks_own(&spec, &text);
        assert_eq!(servers(&got, &want), want, "{text}");
        let codes: Vec<&str> = want.iter().map(|w| w.0.as_str()).collect();
        assert!(codes.contains(&code) || code.is_empty(), "{code}: {want:?}");
    }
    assert_eq!(c.finish(), 0);
}

#[test]
fn bad_input_gets_an_error_or_an_empty_answer_never_a_crash() {
    let dir = support::temp_dir("lsp-bad");
    let mut c = Client::start(dir.path());
    // Not YAML: check's parse error, as a diagnostic.
    let u = uri(&dir.path().join("broken.yaml"));
    c.open(&u, "version: 1\ntools: [\n  - : : {\n\u{0}");
    let got = c.diagnostics(&u, 1);
    assert!(
        !got.is_empty() && got.iter().all(|d| d["severity"] == 1),
        "{got:#?}"
    );
    // 10 MB of text: check's size limit.
    let big_uri = uri(&dir.path().join("big.yaml"));
    let big = format!("version: 1\ndescription: \"{}\"\n", "x".repeat(10 << 20));
    c.open(&big_uri, &big);
    let got = c.diagnostics(&big_uri, 1);
    assert_eq!(got[0]["code"], "E004", "{got:#?}");
    // A change whose range is past the end is clamped.
    c.change(&u, 2, json!([{ "range": { "start": { "line": 999, "character": 5 }, "end": { "line": 1999, "character": 0 } }, "text": "x" }]));
    c.diagnostics(&u, 2);
    // A duplicate key: the first definition is a related location.
    let dup = uri(&dir.path().join("dup.yaml"));
    c.open(&dup, "version: 1\nname: a\nname: b\n");
    let got = c.diagnostics(&dup, 1);
    let e005 = got.iter().find(|d| d["code"] == "E005").expect("E005");
    assert_eq!(
        e005["relatedInformation"],
        json!([{ "location": { "uri": dup, "range": { "start": { "line": 1, "character": 0 }, "end": { "line": 1, "character": 4 } } }, "message": "first defined here" }])
    );
    // An unsaved buffer is checked too, against the working folder.
    c.open("untitled:Untitled-1", "version: 1\ntools: {}\n");
    c.diagnostics("untitled:Untitled-1", 1);
    // A change to a document that is not open, and a notification with nonsense parameters.
    c.change("file:///nowhere.yaml", 2, json!([{ "text": "x" }]));
    c.notify("textDocument/didOpen", json!({ "textDocument": 5 }));
    // Requests about unknown documents, unknown methods, bad parameters.
    let r = c.request("textDocument/unknownThing", json!({}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    // Bytes that are not JSON, then a message too large to read: skipped.
    c.raw(b"Content-Length: 5\r\n\r\n{{{{{");
    c.raw(b"Content-Length: 99999999999\r\n\r\n");
    // ... the server skips that many bytes, so this client cannot go on: a fresh one can.
    drop(c);
    let mut c = Client::start(dir.path());
    c.raw(b"Content-Length: 5\r\n\r\n{{{{{");
    let r = c.request("textDocument/unknownThing", json!({}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert_eq!(c.finish(), 0);
}

#[test]
fn a_client_that_leaves_without_shutdown_ends_the_server() {
    let dir = support::temp_dir("lsp-leave");
    let mut c = Client::start(dir.path());
    c.stdin = None;
    assert_eq!(c.exit_code(), 1);
    let mut c = Client::start(dir.path());
    c.notify("exit", Value::Null);
    assert_eq!(c.exit_code(), 1);
    // After `shutdown`, requests are refused; `exit` then ends with 0.
    let mut c = Client::start(dir.path());
    let r = c.request("shutdown", Value::Null);
    assert_eq!(r["result"], Value::Null);
    let r = c.request("textDocument/hover", json!({}));
    assert_eq!(r["error"]["code"], -32600, "{r}");
    c.notify("exit", Value::Null);
    assert_eq!(c.exit_code(), 0);
}

pub const FEATURES: &str = r#"version: 1
secrets: [API_KEY]
tools:
  get_weather:
    kind: mock
    description: Weather of a city.
    input: { type: object, properties: { city: { type: string } } }
    responses:
      - result: { temp: 20 }
  calc:
    kind: builtin
    builtin: calculator
  fetch:
    kind: http
    description: Fetch.
    request:
      url: "https://api.example.com/x?key={{ secrets.API_KEY }}"
policy:
  allow: [get_weather, calc, fetch]
models:
  bot:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: get_weather, arguments: { city: Paris } }]
          - answer: done
default_model: bot
tests:
  - name: t
    query: q
    fixture: fx.json
    expect: { tool_calls: [get_weather], status: ok }
# E012
"#;

/// The position (0-based line, UTF-16 column) of the `n`-th occurrence of `needle` in the
/// text, `plus` units into it.
fn find(text: &str, needle: &str, n: usize, plus: u32) -> Value {
    let at = text.match_indices(needle).nth(n).expect("needle").0;
    let line = text[..at].matches('\n').count();
    let col = text[..at]
        .rsplit('\n')
        .next()
        .unwrap_or("")
        .encode_utf16()
        .count() as u32;
    json!({ "line": line, "character": col + plus })
}

fn at(uri: &str, position: Value) -> Value {
    json!({ "textDocument": { "uri": uri }, "position": position })
}

fn labels(result: &Value) -> Vec<String> {
    let list = result.get("items").unwrap_or(result);
    list.as_array().map_or_else(Vec::new, |items| {
        items
            .iter()
            .map(|i| i["label"].as_str().unwrap_or("").to_string())
            .collect()
    })
}

#[test]
fn hover_completion_definition_references_and_symbols() {
    let dir = support::temp_dir("lsp-features");
    let spec = support::write(dir.path(), "spec.yaml", FEATURES);
    support::write(dir.path(), "fx.json", "{}");
    let before = files(dir.path());
    let mut c = Client::start(dir.path());
    let u = uri(&spec);
    c.open(&u, FEATURES);
    c.diagnostics(&u, 1);
    let t = FEATURES;

    // Hover: a tool where it is used, a secret in a template, a key, a diagnostic code.
    let h = c.request("textDocument/hover", at(&u, find(t, "get_weather", 1, 3)));
    let text = h["result"]["contents"]["value"]
        .as_str()
        .unwrap_or("")
        .to_string();
    support::assert_contains(
        &text,
        &[
            "**tool** `get_weather`",
            "kind `mock`",
            "Weather of a city.",
            "\"city\"",
        ],
    );
    let h = c.request("textDocument/hover", at(&u, find(t, "API_KEY }}", 0, 2)));
    assert!(
        h["result"]["contents"]["value"]
            .as_str()
            .unwrap_or("")
            .contains("**secret** `API_KEY`"),
        "{h}"
    );
    let h = c.request(
        "textDocument/hover",
        at(&u, find(t, "description: Weather", 0, 2)),
    );
    assert!(
        h["result"]["contents"]["value"]
            .as_str()
            .unwrap_or("")
            .contains("models choose tools by it"),
        "{h}"
    );
    let h = c.request("textDocument/hover", at(&u, find(t, "E012", 0, 1)));
    assert!(
        h["result"]["contents"]["value"]
            .as_str()
            .unwrap_or("")
            .contains("E012"),
        "{h}"
    );
    let h = c.request(
        "textDocument/hover",
        at(&u, json!({ "line": 99, "character": 0 })),
    );
    assert_eq!(h["result"], Value::Null, "{h}");

    // Completion.
    let names = |c: &mut Client, p: Value| {
        labels(&c.request("textDocument/completion", at(&u, p))["result"])
    };
    let got = names(&mut c, find(t, "get_weather, calc", 0, 0));
    assert!(
        ["get_weather", "calc", "fetch"]
            .iter()
            .all(|n| got.contains(&n.to_string())),
        "{got:?}"
    );
    let got = names(&mut c, find(t, "API_KEY }}", 0, 0));
    assert_eq!(got, ["API_KEY"]);
    let got = names(&mut c, find(t, "calculator", 0, 0));
    assert!(got.contains(&"datetime".to_string()), "{got:?}");
    let got = names(&mut c, find(t, "ok }", 0, 0));
    assert!(got.contains(&"needs_review".to_string()), "{got:?}");
    let got = names(&mut c, find(t, "bot\ntests", 0, 0));
    assert_eq!(got, ["bot"]);
    let got = names(&mut c, find(t, "get_weather, arguments", 0, 0));
    assert!(got.contains(&"fetch".to_string()), "{got:?}");
    let got = names(&mut c, find(t, "mock", 0, 0));
    assert!(
        got.contains(&"http".to_string()) && !got.contains(&"scripted".to_string()),
        "{got:?}"
    );
    let got = names(&mut c, find(t, "request:", 0, 0));
    assert!(
        got.contains(&"retries".to_string()) && !got.contains(&"responses".to_string()),
        "{got:?}"
    );
    // Keys the mapping has already are not offered again.
    let has = |got: &[String], key: &str| got.iter().any(|g| g == key);
    assert!(!has(&got, "kind") && !has(&got, "description"), "{got:?}");
    let got = names(&mut c, find(t, "query: q", 0, 0));
    assert!(has(&got, "approve") && has(&got, "query"), "{got:?}");
    for key in ["name", "fixture", "expect"] {
        assert!(!has(&got, key), "{key}: {got:?}");
    }

    // Definition: tool, model, secret, fixture file.
    let d = c.request(
        "textDocument/definition",
        at(&u, find(t, "get_weather", 1, 1)),
    );
    assert_eq!(
        d["result"]["range"]["start"],
        find(t, "get_weather", 0, 0),
        "{d}"
    );
    let d = c.request(
        "textDocument/definition",
        at(&u, find(t, "bot\ntests", 0, 1)),
    );
    assert_eq!(d["result"]["range"]["start"], find(t, "bot", 0, 0), "{d}");
    let d = c.request(
        "textDocument/definition",
        at(&u, find(t, "API_KEY }}", 0, 1)),
    );
    assert_eq!(
        d["result"]["range"]["start"],
        find(t, "API_KEY", 0, 0),
        "{d}"
    );
    let d = c.request("textDocument/definition", at(&u, find(t, "fx.json", 0, 1)));
    assert!(
        d["result"]["uri"]
            .as_str()
            .unwrap_or("")
            .ends_with("/fx.json"),
        "{d}"
    );

    // References of a tool, from its declaration.
    let mut p = at(&u, find(t, "get_weather", 0, 1));
    p["context"] = json!({ "includeDeclaration": true });
    let r = c.request("textDocument/references", p);
    assert_eq!(r["result"].as_array().map(Vec::len), Some(4), "{r}");

    // The outline.
    let s = c.request(
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": u } }),
    );
    let outline: Vec<(String, Vec<String>)> = s["result"]
        .as_array()
        .expect("symbols")
        .iter()
        .map(|g| {
            (
                g["name"].as_str().unwrap_or("").to_string(),
                labels_of(&g["children"]),
            )
        })
        .collect();
    assert_eq!(
        outline,
        [
            (
                "tools".to_string(),
                vec!["get_weather".to_string(), "calc".into(), "fetch".into()]
            ),
            ("models".to_string(), vec!["bot".to_string()]),
            ("secrets".to_string(), vec!["API_KEY".to_string()]),
            ("tests".to_string(), vec!["t".to_string()]),
        ]
    );

    // Requests about a document that is not open: empty.
    let h = c.request(
        "textDocument/hover",
        at("file:///nowhere.yaml", json!({ "line": 0, "character": 0 })),
    );
    assert_eq!(h["result"], Value::Null, "{h}");
    let h = c.request("textDocument/hover", json!({ "nonsense": true }));
    assert_eq!(h["error"]["code"], -32602, "{h}");
    assert_eq!(c.finish(), 0);
    assert_eq!(
        files(dir.path()),
        before,
        "the server wrote to the workspace"
    );
}

fn labels_of(v: &Value) -> Vec<String> {
    v.as_array().map_or_else(Vec::new, |a| {
        a.iter()
            .map(|s| s["name"].as_str().unwrap_or("").to_string())
            .collect()
    })
}

#[test]
fn a_did_you_mean_is_a_quick_fix() {
    let dir = support::temp_dir("lsp-fix");
    let spec = support::write(dir.path(), "spec.yaml", SPEC);
    let mut c = Client::start(dir.path());
    let u = uri(&spec);
    c.open(&u, SPEC);
    let diags = c.diagnostics(&u, 1);
    let e012 = diags
        .iter()
        .find(|d| d["code"] == "E012")
        .expect("E012")
        .clone();
    let r = c.request(
        "textDocument/codeAction",
        json!({
            "textDocument": { "uri": u },
            "range": e012["range"],
            "context": { "diagnostics": [e012] },
        }),
    );
    let actions = r["result"].as_array().expect("actions").clone();
    assert_eq!(actions.len(), 1, "{r}");
    assert_eq!(actions[0]["kind"], "quickfix");
    assert_eq!(actions[0]["title"], "Change to `get_weather`");
    let edits = &actions[0]["edit"]["changes"][&u];
    assert_eq!(
        edits,
        &json!([{ "range": e012["range"], "newText": "get_weather" }])
    );
    // The client applies it: E012 and W104 are gone.
    c.change(
        &u,
        2,
        json!([{ "range": edits[0]["range"], "text": "get_weather" }]),
    );
    let codes: Vec<Value> = c
        .diagnostics(&u, 2)
        .iter()
        .map(|d| d["code"].clone())
        .collect();
    assert_eq!(codes, [json!("E033")]);
    // A diagnostic without a suggestion has no fix.
    let e033 = diags
        .iter()
        .find(|d| d["code"] == "E033")
        .expect("E033")
        .clone();
    let r = c.request("textDocument/codeAction", json!({
        "textDocument": { "uri": u }, "range": e033["range"], "context": { "diagnostics": [e033] },
    }));
    assert_eq!(r["result"], json!([]));
    assert_eq!(c.finish(), 0);
}

/// Issue 35 §5 / issue 33 §3: go to definition from a data test's `from:` to its data file.
#[test]
fn definition_goes_from_a_data_tests_from_to_its_file() {
    let dir = support::temp_dir("lsp-from");
    let text = "version: 1\ntools:\n  t:\n    description: Answers with one.\n    kind: mock\n    input: { type: object }\n    responses: [ { result: 1 } ]\ntests:\n  - name: \"case_{{ row.id }}\"\n    from: data/cases.csv\n    query: \"{{ row.q }}\"\n";
    let spec = support::write(dir.path(), "spec.yaml", text);
    support::write(dir.path(), "data/cases.csv", "id,q\n1,hi\n");
    let mut c = Client::start(dir.path());
    let u = uri(&spec);
    c.open(&u, text);
    c.diagnostics(&u, 1);
    let d = c.request(
        "textDocument/definition",
        at(&u, find(text, "data/cases.csv", 0, 3)),
    );
    assert!(
        d["result"]["uri"]
            .as_str()
            .unwrap_or("")
            .ends_with("/data/cases.csv"),
        "{d}"
    );
    assert_eq!(c.finish(), 0);
}
