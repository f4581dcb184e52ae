//! `toolrun serve --http` as an OAuth resource server (`serve.auth`, issue 32 item 4), against a
//! real authorization server: oidc-provider (npm, pinned in tests/npm) issuing JWT access tokens
//! for the served resource, and opaque ones checked through its introspection endpoint. Clients:
//! raw requests, and the official Python SDK's OAuth clients. Everything on 127.0.0.1.

#[path = "npm/npm.rs"]
mod npm;
#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `tests/serve_auth/as.mjs`, copied beside `node_modules` so that its imports resolve.
fn script() -> PathBuf {
    let dir = npm::npm_dir();
    let path = dir.join("serve_auth_as.mjs");
    let text = include_str!("serve_auth/as.mjs");
    if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
        std::fs::write(&path, text).expect("write the provider script");
    }
    path
}

fn node(args: &[&str], stdin: &str) -> String {
    let mut cmd = Command::new(npm::node());
    cmd.arg(script()).args(args);
    let out = support::run_with_stdin(&mut cmd, stdin);
    assert_eq!(out.code, 0, "node {args:?}: {out:?}");
    out.stdout.trim().to_string()
}

/// oidc-provider on `port`, its keys in `keys` (a restart signs with the same ones).
struct Provider {
    child: Child,
    issuer: String,
    keys: PathBuf,
}

impl Provider {
    fn start(port: u16, keys: &Path, resource: &str) -> Provider {
        let mut child = Command::new(npm::node())
            .arg(script())
            .args([
                "serve",
                &port.to_string(),
                keys.to_str().expect("utf-8"),
                resource,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start oidc-provider");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let issuer = loop {
            match lines.next() {
                Some(Ok(l)) if l.starts_with("ready ") => break l[6..].to_string(),
                Some(Ok(_)) => continue,
                _ => {
                    let _ = child.kill();
                    panic!("oidc-provider did not start");
                }
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Provider {
            child,
            issuer,
            keys: keys.to_path_buf(),
        }
    }

    /// A client credentials token of `client` for `resource`.
    fn token(&self, client: &str, resource: &str, scope: &str) -> String {
        let secret = format!("{client}-secret");
        node(
            &["token", &self.issuer, client, &secret, resource, scope],
            "",
        )
    }

    /// A JWT for `audience` signed with the issuer's key `key` (or as `none`, `hs-public` and
    /// `stranger` name: unsigned, HS256 with the public key, a key the issuer does not have),
    /// `extra` claims over a valid client credentials token's.
    fn mint(&self, key: &str, audience: &str, extra: Value) -> String {
        let mut claims = json!({ "iss": self.issuer, "aud": audience, "sub": "minted",
            "exp": now() + 300, "scope": "tools.read" });
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            claims[k] = v;
        }
        let want = json!({ "key": key, "claims": claims });
        node(
            &["mint", self.keys.to_str().expect("utf-8")],
            &want.to_string(),
        )
    }
}

/// What most tests start from: oidc-provider on a free port (`as_port`), its keys in `dir`,
/// issuing tokens for the resource to be served at `audience` on another free `port`, and the
/// spec in `dir` naming both: `(provider, as_port, port, audience, spec)`.
fn set_up(dir: &Path) -> (Provider, u16, u16, String, PathBuf) {
    let (as_port, port) = (free_port(), free_port());
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let provider = Provider::start(as_port, &dir.join("keys.json"), &audience);
    let spec = spec(dir, &provider.issuer, &audience);
    (provider, as_port, port, audience, spec)
}

/// An issuer that never answers: its listener (accepting nothing, so a test can see that no
/// one connected) and its URL.
fn silent_issuer() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let issuer = format!("http://{}", listener.local_addr().expect("addr"));
    (listener, issuer)
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const SPEC: &str = r#"version: 1
name: payments
secrets: [RS_ID, RS_SECRET]
serve:
  auth:
    issuer: ISSUER
    audience: AUDIENCE
    scopes: [tools.read]
    client_id: "{{ secrets.RS_ID }}"
    client_secret: "{{ secrets.RS_SECRET }}"
tools:
  lookup:
    description: Looks an order up.
    kind: mock
    responses: [{ result: found }]
  refund:
    description: Refunds an order.
    kind: mock
    scopes: [payments.write]
    responses: [{ result: refunded }]
"#;

struct Serve {
    child: Child,
    authority: String,
    _stderr: BufReader<std::process::ChildStderr>,
}

impl Serve {
    fn start(spec: &Path, port: u16, args: &[&str]) -> Serve {
        Serve::start_with(spec, port, args, &[])
    }

    fn start_with(spec: &Path, port: u16, args: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut cmd = support::toolrun();
        cmd.envs(env.iter().copied());
        cmd.arg("serve")
            .arg(spec)
            .args(["--http", &format!("127.0.0.1:{port}")])
            .args(args)
            .env("RS_ID", "resource-server")
            .env("RS_SECRET", "resource-server-secret");
        let (child, _, stderr) = support::spawn_served(&mut cmd);
        Serve {
            child,
            authority: format!("127.0.0.1:{port}"),
            _stderr: stderr,
        }
    }

    /// A raw request; the whole response.
    fn request(&self, method: &str, path: &str, token: Option<&str>, body: &str) -> String {
        self.request_with(method, path, token, &[], body)
    }

    fn request_with(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: &str,
    ) -> String {
        let mut stream = std::net::TcpStream::connect(&self.authority).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("mcp-protocol-version"))
        {
            auth.push_str("MCP-Protocol-Version: 2025-11-25\r\n");
        }
        for (k, v) in headers {
            auth.push_str(&format!("{k}: {v}\r\n"));
        }
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.authority,
            body.len()
        );
        stream.write_all(req.as_bytes()).expect("send");
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response
    }

    /// A POST in session `id`.
    fn request_in(&self, id: &str, token: &str, body: &str) -> String {
        let headers = [("Mcp-Session-Id", id)];
        self.request_with("POST", "/mcp", Some(token), &headers, body)
    }

    fn initialize(&self, token: Option<&str>) -> String {
        let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": { "name": "raw", "version": "1" } } });
        self.request("POST", "/mcp", token, &init.to_string())
    }

    /// `initialize`, `initialized`, then `tools/list` and a call of each tool in the session;
    /// the tools listed and each call's whole response.
    fn session(&self, token: &str) -> (Vec<String>, Vec<String>) {
        let response = self.initialize(Some(token));
        let id = support::response_header(&response, "mcp-session-id")
            .unwrap_or_else(|| panic!("no session in {response}"));
        let send = |body: Value| self.request_in(&id, token, &body.to_string());
        send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        let listed = send(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }));
        let tools: Vec<String> = body_json(&listed)["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools in {listed}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap_or_default().to_string())
            .collect();
        let calls = ["lookup", "refund"]
            .iter()
            .map(|name| {
                send(json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": { "name": name, "arguments": {} } }))
            })
            .collect();
        (tools, calls)
    }
}

impl Serve {
    /// SIGTERM, and its exit code.
    fn stop(mut self) -> Option<i32> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child.wait().expect("wait").code()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn status(response: &str) -> &str {
    response.lines().next().unwrap_or_default()
}

/// The JSON of a response's body, whether plain JSON or one server-sent event.
fn body_json(response: &str) -> Value {
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
    let data = body
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or(body);
    serde_json::from_str(data.trim()).unwrap_or(Value::Null)
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

/// The spec with this issuer and audience, in `dir`.
fn spec(dir: &Path, issuer: &str, audience: &str) -> PathBuf {
    let text = SPEC.replace("ISSUER", issuer).replace("AUDIENCE", audience);
    support::write(dir, "payments.yaml", &text)
}

#[test]
fn jwt_and_opaque_tokens_of_a_real_authorization_server_and_every_refusal() {
    let dir = support::temp_dir("serve-auth");
    let (provider, _, port, audience, spec) = set_up(&dir);
    let events = dir.join("events.jsonl");
    let record = dir.join("session.json");
    let serve = Serve::start(
        &spec,
        port,
        &[
            "--events",
            events.to_str().expect("utf-8"),
            "--record",
            record.to_str().expect("utf-8"),
        ],
    );

    // The protected-resource metadata, where RFC 9728 puts it for this resource.
    let metadata_url = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    let metadata = serve.request("GET", "/.well-known/oauth-protected-resource/mcp", None, "");
    assert!(status(&metadata).contains("200"), "{metadata}");
    let doc = body_json(&metadata);
    assert_eq!(doc["resource"], audience.as_str());
    assert_eq!(doc["authorization_servers"], json!([provider.issuer]));
    assert_eq!(
        doc["scopes_supported"],
        json!(["payments.write", "tools.read"])
    );

    // No token: 401 and the challenge naming the metadata and the scope every call needs.
    let refused = serve.initialize(None);
    assert!(status(&refused).contains("401"), "{refused}");
    assert_eq!(
        support::response_header(&refused, "www-authenticate").as_deref(),
        Some(format!("Bearer resource_metadata=\"{metadata_url}\", scope=\"tools.read\"").as_str())
    );

    // A client credentials token with both scopes sees and calls both tools.
    let all = provider.token("ci", &audience, "tools.read payments.write");
    let (tools, calls) = serve.session(&all);
    assert_eq!(tools, ["lookup", "refund"]);
    assert!(calls[1].contains("refunded"), "{}", calls[1]);

    // A session is its opener's: another subject's token cannot use it.
    let opened = serve.initialize(Some(&all));
    let id = support::response_header(&opened, "mcp-session-id").expect("a session");
    let reader = provider.token("reader", &audience, "tools.read");
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }).to_string();
    let foreign = serve.request_in(&id, &reader, &list);
    assert!(status(&foreign).contains("403"), "{foreign}");
    assert!(
        foreign.contains("opened with another subject's token"),
        "{foreign}"
    );
    assert!(status(&serve.request_in(&id, &all, &list)).contains("200"));

    // A token without `payments.write` sees only `lookup`, and calling `refund` is 403.
    let (tools, calls) = serve.session(&reader);
    assert_eq!(tools, ["lookup"]);
    assert!(calls[0].contains("found"), "{}", calls[0]);
    assert!(status(&calls[1]).contains("403"), "{}", calls[1]);
    let challenge = support::response_header(&calls[1], "www-authenticate").unwrap_or_default();
    support::assert_contains(
        &challenge,
        &[
            "error=\"insufficient_scope\"",
            "scope=\"tools.read payments.write\"",
            &metadata_url,
        ],
    );

    // An opaque token, through the issuer's introspection endpoint.
    let opaque = provider.token("opaque", &audience, "tools.read payments.write");
    assert_eq!(opaque.matches('.').count(), 0, "{opaque}");
    let (tools, _) = serve.session(&opaque);
    assert_eq!(tools, ["lookup", "refund"]);

    // ES256 and EdDSA signatures by the issuer's keys are taken as RS256 ones are.
    let mint = |key: &str, extra: Value| provider.mint(key, &audience, extra);
    for key in ["k-rsa", "k-ec", "k-ed"] {
        let response = serve.initialize(Some(&mint(key, json!({}))));
        assert!(status(&response).contains("200"), "{key}: {response}");
    }

    // Every refusal is a 401 that says why.
    let other = format!("http://127.0.0.1:{}/other", free_port());
    let cases = [
        (
            "wrong audience",
            mint("k-rsa", json!({ "aud": "https://elsewhere.example/mcp" })),
            "is for `https://elsewhere.example/mcp`, not for this server",
        ),
        (
            "wrong issuer",
            mint("k-rsa", json!({ "iss": "https://login.example.com" })),
            "issued by `https://login.example.com`",
        ),
        (
            "expired",
            mint("k-rsa", json!({ "exp": now() - 600 })),
            "the token expired",
        ),
        (
            "alg none",
            mint("none", json!({})),
            "unsigned (`alg: none`)",
        ),
        (
            "HS256 with the public key",
            mint("hs-public", json!({})),
            "signed with `HS256`, a shared secret",
        ),
        (
            "unknown kid",
            mint("stranger", json!({})),
            "key `k-stranger` is not among the issuer's keys",
        ),
        (
            "another resource",
            provider.token("ci", &other, "tools.read"),
            "not for this server",
        ),
    ];
    for (what, token, says) in &cases {
        let response = serve.initialize(Some(token));
        assert!(status(&response).contains("401"), "{what}: {response}");
        let challenge = support::response_header(&response, "www-authenticate").unwrap_or_default();
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
        assert!(response.contains(says), "{what}: {response}");
    }

    // The subject, never the token, in the events and the recording.
    drop(serve);
    let text = std::fs::read_to_string(&events).expect("events");
    let subjects: Vec<Value> = support::events_named(&events, "mcp_call")
        .iter()
        .map(|e| e["subject"].clone())
        .collect();
    assert_eq!(
        subjects,
        [
            json!("ci"),
            json!("ci"),
            json!("reader"),
            json!("opaque"),
            json!("opaque")
        ]
    );
    let recorded = std::fs::read_to_string(&record).unwrap_or_default();
    assert!(recorded.contains("\"subject\":\"reader\""), "{recorded}");
    for token in [&all, &reader, &opaque] {
        assert!(!text.contains(token.as_str()) && !recorded.contains(token.as_str()));
    }
    // The recording replays offline: no issuer, no token.
    drop(provider);
    let mut replay = support::toolrun();
    replay.arg("replay").arg(&record).arg("--spec").arg(&spec);
    support::run(&mut replay).assert_success();
}

#[test]
fn spans_name_the_subject_never_the_token() {
    let dir = support::temp_dir("serve-auth-otel");
    let (provider, _, port, audience, spec) = set_up(&dir);
    let collector = support::TestServer::start(|_| support::Response::json(200, json!({})));
    let endpoint = collector.url("");
    let env = [
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            endpoint.trim_end_matches('/'),
        ),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_BSP_EXPORT_TIMEOUT", "10000"),
    ];
    let serve = Serve::start_with(&spec, port, &[], &env);
    let token = provider.token("ci", &audience, "tools.read payments.write");
    serve.session(&token);
    assert_eq!(serve.stop(), Some(0));
    let bodies: Vec<String> = collector.requests().iter().map(|r| r.text()).collect();
    let all = bodies.join("\n");
    assert!(!all.contains(&token), "the token went out in a span");
    let spans: Vec<Value> = bodies
        .iter()
        .filter_map(|b| serde_json::from_str::<Value>(b).ok())
        .flat_map(|b| {
            b["resourceSpans"][0]["scopeSpans"][0]["spans"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    let named = |name: &str| spans.iter().filter(|s| s["name"] == name).count();
    assert!(
        named("tools/call refund") == 1 && named("tools/list") == 1,
        "{spans:#?}"
    );
    for span in &spans {
        let user = span["attributes"]
            .as_array()
            .and_then(|a| a.iter().find(|kv| kv["key"] == "user.id"))
            .map(|kv| kv["value"]["stringValue"].clone());
        assert_eq!(user, Some(json!("ci")), "{span:#}");
    }
}

#[test]
fn keys_the_issuer_could_not_give_are_fetched_again_once_it_is_back() {
    let dir = support::temp_dir("serve-auth-down");
    let (provider, as_port, port, audience, spec) = set_up(&dir);
    let token = provider.token("ci", &audience, "tools.read");
    let keys = provider.keys.clone();
    drop(provider);

    let serve = Serve::start(&spec, port, &[]);
    let down = serve.initialize(Some(&token));
    assert!(status(&down).contains("401"), "{down}");
    assert!(
        down.contains("cannot fetch the metadata of issuer"),
        "{down}"
    );

    let _back = Provider::start(as_port, &keys, &audience);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = serve.initialize(Some(&token));
        if status(&response).contains("200") {
            break;
        }
        assert!(Instant::now() < deadline, "never taken again: {response}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn the_python_sdks_oauth_clients_find_the_issuer_and_get_in() {
    let dir = support::temp_dir("serve-auth-python");
    let (provider, _, port, audience, spec) = set_up(&dir);
    let _serve = Serve::start(&spec, port, &[]);
    let client = |args: &[&str]| {
        let mut cmd = Command::new(python::python());
        cmd.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve_auth/oauth_client.py"))
            .args([audience.as_str(), provider.issuer.as_str()])
            .args(args);
        let out = support::run(&mut cmd);
        assert_eq!(out.code, 0, "{out:?}");
        out.json()
    };
    let got = client(&[
        "client_credentials",
        "reader",
        "reader-secret",
        "tools.read",
    ]);
    assert_eq!(
        got,
        json!({ "tools": ["lookup"], "calls": { "lookup": "found" } })
    );
    // The challenge's scope is what the SDK asks for first: `refund` is not listed; calling it
    // anyway is 403 `insufficient_scope`, and the SDK steps up to the scope that names.
    let got = client(&["authorization_code", "app", "tools.read", "refund"]);
    assert_eq!(
        got,
        json!({ "tools": ["lookup"], "calls": { "lookup": "found", "refund": "refunded" } })
    );
}

#[test]
fn check_knows_the_keys_and_never_reaches_the_issuer() {
    let dir = support::temp_dir("serve-auth-check");
    let (listener, issuer) = silent_issuer();
    let good = spec(&dir, &issuer, "https://tools.example.com/mcp");
    support::run(support::toolrun().arg("check").arg(&good)).assert_success();
    // The introspection credentials may go to the issuer: --env-report says so.
    let report = support::run(
        support::toolrun()
            .args(["check", "--env-report"])
            .arg(&good),
    );
    let host = issuer.trim_start_matches("http://");
    let lines: Vec<&str> = report
        .stdout
        .lines()
        .filter(|l| l.starts_with("RS_"))
        .collect();
    assert_eq!(lines.len(), 2, "{}", report.stdout);
    for line in lines {
        assert!(
            line.contains("serve auth introspection") && line.ends_with(host),
            "{line}"
        );
    }
    assert!(listener.accept().is_err(), "check contacted the issuer");
    // A static token and OAuth at once is a usage error, before anything is bound.
    let both = support::run(
        support::toolrun()
            .arg("serve")
            .arg(&good)
            .args(["--http", "127.0.0.1:0", "--token-env", "T"])
            .env("T", "0123456789abcdef0123"),
    );
    both.assert_code(2);
    assert!(
        both.stderr
            .contains("--token-env is for a static token instead"),
        "{both:?}"
    );

    let typo = SPEC
        .replace("issuer: ISSUER", "isuer: https://login.example.com/")
        .replace("AUDIENCE", "http://tools.example.com/mcp")
        .replace(
            "    scopes: [payments.write]",
            "    scopes: [\"payments write\"]",
        )
        .replace(
            "version: 1",
            "version: 1\npolicy: { network: { allow_hosts: [api.example.com] } }",
        );
    let bad = support::write(&dir, "bad.yaml", &typo);
    let out = support::run(support::toolrun().arg("check").arg(&bad));
    out.assert_code(1);
    support::assert_contains(
        &out.stderr,
        &[
            "unknown key `isuer`",
            "did you mean `issuer`",
            "`serve.auth.audience` `http://tools.example.com/mcp` is plain http",
            "`payments write` is not an OAuth scope",
        ],
    );
    let disallowed = SPEC
        .replace("ISSUER", "https://login.example.com/")
        .replace("AUDIENCE", "https://tools.example.com/mcp")
        .replace(
            "version: 1",
            "version: 1\npolicy: { network: { allow_hosts: [api.example.com] } }",
        );
    let out = support::run(support::toolrun().arg("check").arg(support::write(
        &dir,
        "hosts.yaml",
        &disallowed,
    )));
    out.assert_code(1);
    assert!(
        out.stderr.contains("`serve.auth.issuer` is on host `login.example.com`, which `policy.network.allow_hosts` does not list"),
        "{}",
        out.stderr
    );
}

/// `serve.auth` protects `--http` only: served over stdio, nothing would check a token, so the
/// spec's tools would go to whoever writes to stdin (a stdio-to-HTTP bridge, say). `serve`
/// refuses that at start (exit 2), before it reads a message or reaches the issuer.
#[test]
fn serving_a_spec_with_serve_auth_over_stdio_is_refused() {
    let dir = support::temp_dir("serve-auth-stdio");
    let (listener, issuer) = silent_issuer();
    let spec = spec(&dir, &issuer, "https://tools.example.com/mcp");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let out = support::run_with_stdin(
        support::toolrun().arg("serve").arg(&spec),
        &format!("{init}\n"),
    );
    out.assert_code(2);
    assert!(
        out.stderr.contains(
            "the spec's `serve.auth` protects `serve --http` only: over stdio no token is checked"
        ),
        "{out:?}"
    );
    assert!(
        out.stderr.contains("serve it with --http ADDR:PORT"),
        "{out:?}"
    );
    assert!(out.stdout.is_empty(), "nothing served: {out:?}");
    assert!(listener.accept().is_err(), "the issuer was reached");
}

/// MCP 2026-07-28 (no session: each request carries its version in `_meta`) is held to the
/// same token checks at the HTTP layer: its listing, its calls, their events, and the tools an
/// unknown name's did-you-mean may name.
#[test]
fn stateless_requests_are_held_to_the_same_scopes() {
    let dir = support::temp_dir("serve-auth-2026");
    let (provider, _, port, audience, spec) = set_up(&dir);
    let events = dir.join("events.jsonl");
    let serve = Serve::start(&spec, port, &["--events", events.to_str().expect("utf-8")]);
    let reader = provider.token("reader", &audience, "tools.read");
    let request = |token: Option<&str>, method: &str, params: Value| {
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        let name = params["name"].as_str().unwrap_or_default().to_string();
        let mut headers = vec![
            ("Mcp-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
        ];
        if !name.is_empty() {
            headers.push(("Mcp-Name", name.as_str()));
        }
        let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params });
        serve.request_with("POST", "/mcp", token, &headers, &body.to_string())
    };
    let none = request(None, "tools/list", json!({}));
    assert!(status(&none).contains("401"), "{none}");
    let listed = request(Some(&reader), "tools/list", json!({}));
    let names: Vec<Value> = body_json(&listed)["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(names, [json!("lookup")]);
    let refund = request(
        Some(&reader),
        "tools/call",
        json!({ "name": "refund", "arguments": {} }),
    );
    assert!(status(&refund).contains("403"), "{refund}");
    let lookup = request(
        Some(&reader),
        "tools/call",
        json!({ "name": "lookup", "arguments": {} }),
    );
    assert!(lookup.contains("found"), "{lookup}");
    // A mistyped name gets a did-you-mean only among the tools the token may see: the reader is
    // not told that `refund` exists; a token that may call it is.
    let typo = json!({ "name": "refunds", "arguments": {} });
    let hidden = request(Some(&reader), "tools/call", typo.clone());
    assert!(hidden.contains("unknown tool `refunds`"), "{hidden}");
    assert!(!hidden.contains("`refund`"), "{hidden}");
    let writer = provider.token("ci", &audience, "tools.read payments.write");
    let shown = request(Some(&writer), "tools/call", typo);
    assert!(shown.contains("did you mean `refund`?"), "{shown}");
    drop(serve);
    let subjects: Vec<Value> = support::events_named(&events, "mcp_call")
        .iter()
        .map(|e| e["subject"].clone())
        .collect();
    assert_eq!(subjects, [json!("reader")]);
}

/// toolrun's own OAuth client (`auth: { oauth: ... }` on a `kind: mcp` tool) against toolrun's
/// own resource server, with tokens from oidc-provider: both ends of issue 32 at once.
#[test]
fn toolruns_own_oauth_client_calls_through_it() {
    let dir = support::temp_dir("serve-auth-toolrun-client");
    let (_provider, as_port, port, audience, served) = set_up(&dir);
    let _serve = Serve::start(&served, port, &[]);
    let client = support::write(
        &dir,
        "client.yaml",
        &format!(
            r#"version: 1
name: payments_client
secrets: [CI_ID, CI_SECRET]
policy: {{ network: {{ allow_hosts: ["127.0.0.1:{port}", "127.0.0.1:{as_port}"] }} }}
tools:
  payments:
    kind: mcp
    url: {audience}
    tools: [lookup, refund]
    auth:
      oauth:
        client_id: "{{{{ secrets.CI_ID }}}}"
        client_secret: "{{{{ secrets.CI_SECRET }}}}"
        scopes: [tools.read, payments.write]
        grant: client_credentials
"#
        ),
    );
    let state = dir.join("state");
    for (tool, answer) in [("lookup", "found"), ("refund", "refunded")] {
        let out = support::run(
            support::toolrun()
                .args(["call"])
                .arg(&client)
                .args([tool, "--args", "{}"])
                .env("CI_ID", "ci-client")
                .env("CI_SECRET", "ci-client-secret")
                .env("XDG_STATE_HOME", &state),
        );
        assert_eq!(out.code, 0, "{tool}: {out:?}");
        assert!(out.stdout.contains(answer), "{tool}: {out:?}");
    }
}

/// A person's login with toolrun's own client: `toolrun auth login` opens the authorization URL
/// with `$BROWSER` (a script that signs in at oidc-provider and lands on toolrun's loopback
/// listener), and later calls use the stored token.
#[test]
fn toolruns_own_login_then_calls_through_it() {
    let dir = support::temp_dir("serve-auth-toolrun-login");
    let (_provider, as_port, port, audience, served) = set_up(&dir);
    let _serve = Serve::start(&served, port, &[]);
    let client = support::write(
        &dir,
        "client.yaml",
        &format!(
            r#"version: 1
name: payments_login
policy: {{ network: {{ allow_hosts: ["127.0.0.1:{port}", "127.0.0.1:{as_port}"] }} }}
tools:
  payments:
    kind: mcp
    url: {audience}
    tools: [lookup]
    auth:
      oauth:
        client_id: app-native
        scopes: [tools.read]
"#
        ),
    );
    let browser = support::write(
        &dir,
        "browser.sh",
        &format!(
            "#!/bin/sh\nexec '{}' '{}' browse \"$1\"\n",
            python::python().display(),
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/serve_auth/oauth_client.py")
                .display()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let state = dir.join("state");
    let login = support::run(
        support::toolrun()
            .args(["auth", "login"])
            .arg(&client)
            .arg("payments")
            .env("BROWSER", &browser)
            .env("XDG_STATE_HOME", &state),
    );
    assert_eq!(login.code, 0, "{login:?}");
    let out = support::run(
        support::toolrun()
            .arg("call")
            .arg(&client)
            .args(["lookup", "--args", "{}"])
            .env("XDG_STATE_HOME", &state)
            .env("CI", "true"),
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("found"), "{out:?}");
}

/// What introspection says of an active opaque token is believed for a short while: a client
/// sending the same token with each request costs the issuer one introspection, not one a
/// request. Never past the token's `exp` (one expired but within the leeway is asked about each
/// time), and a token found inactive is asked about again.
#[test]
fn introspection_of_an_active_token_is_cached_briefly() {
    use support::http::{Response, TestServer};
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let aud = audience.clone();
    let issuer = TestServer::start(move |req| {
        let base = format!("http://{}", req.header("host").unwrap_or_default());
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/.well-known/oauth-authorization-server") => Response::json(
                200,
                json!({ "issuer": base, "jwks_uri": format!("{base}/jwks"), "introspection_endpoint": format!("{base}/introspect") }),
            ),
            ("POST", "/introspect") => {
                let body = req.text();
                let exp = if body.contains("token=live") {
                    now() + 3600
                } else if body.contains("token=late") {
                    now() - 10
                } else {
                    return Response::json(200, json!({ "active": false }));
                };
                Response::json(
                    200,
                    json!({ "active": true, "iss": base, "aud": aud, "sub": "someone", "scope": "tools.read", "exp": exp }),
                )
            }
            _ => Response::status(404),
        }
    });
    let dir = support::temp_dir("serve-auth-introspection-cache");
    let spec = spec(&dir, &issuer.base_url(), &audience);
    let serve = Serve::start(&spec, port, &[]);
    let asked = |token: &str| {
        issuer
            .requests()
            .iter()
            .filter(|r| r.path == "/introspect" && r.text().contains(&format!("token={token}")))
            .count()
    };
    for token in ["live", "live", "live", "late", "late", "revoked", "revoked"] {
        let answer = serve.initialize(Some(token));
        let expected = if token == "revoked" { "401" } else { "200" };
        assert!(status(&answer).contains(expected), "{token}: {answer}");
    }
    assert_eq!(asked("live"), 1, "an active token is introspected once");
    assert_eq!(asked("late"), 2, "never cached past its `exp`");
    assert_eq!(asked("revoked"), 2, "an inactive answer is not cached");
}

/// MCP 2026-07-28 has no session: with `serve.auth`, the `serve:` limits and loop detection
/// count per authenticated subject (issue 31 item 4), in a map of `--max-subjects` subjects at
/// most, the one used least recently evicted (its count starts again).
#[test]
fn stateless_limits_count_per_subject_in_a_bounded_map() {
    let dir = support::temp_dir("serve-auth-subjects");
    let (provider, _, port, audience, _) = set_up(&dir);
    // The usual spec, written again with the limits.
    let text = SPEC
        .replace("ISSUER", &provider.issuer)
        .replace("AUDIENCE", &audience)
        .replace("serve:\n", "serve:\n  max_tool_calls: 3\n  max_repeated_calls: 2\n")
        .replace(
            "    kind: mock\n    responses: [{ result: found }]",
            "    kind: mock\n    input: { type: object, properties: { q: { type: integer } } }\n    responses: [{ result: found }]",
        );
    let spec = support::write(&dir, "payments.yaml", &text);
    let recording = dir.join("session.jsonl");
    let recording_arg = recording.to_string_lossy().into_owned();
    let args = [
        "--max-subjects",
        "2",
        "--subject-window",
        "2h",
        "--record",
        &recording_arg,
    ];
    let serve = Serve::start(&spec, port, &args);
    let tokens: std::collections::HashMap<&str, String> = ["reader", "ci", "ci-client"]
        .into_iter()
        .map(|c| (c, provider.token(c, &audience, "tools.read")))
        .collect();
    // A lookup by `client` with these arguments: the tool's text, or the error's.
    let call = |client: &str, arguments: Value| -> String {
        let params = json!({ "name": "lookup", "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": {},
        } });
        let headers = [
            ("Mcp-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "lookup"),
        ];
        let body = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params });
        let response = serve.request_with(
            "POST",
            "/mcp",
            Some(&tokens[client]),
            &headers,
            &body.to_string(),
        );
        let result = &body_json(&response)["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        match result["isError"].as_bool() {
            Some(false) => text.to_string(),
            Some(true) => format!("error: {text}"),
            None => panic!("{client}: not a call's result: {response}"),
        }
    };
    let ok = |client: &str, arguments: Value| {
        let got = call(client, arguments.clone());
        assert_eq!(got, "found", "{client} {arguments}");
    };
    let refused = |client: &str, arguments: Value, says: &str| {
        let got = call(client, arguments.clone());
        assert!(
            got.starts_with("error:") && got.contains(says),
            "{client} {arguments}: {got}"
        );
    };
    // Each request on its own would never be a loop nor over the limit: reader's are counted
    // together, across requests (and connections).
    ok("reader", json!({ "q": 1 }));
    ok("reader", json!({ "q": 1 }));
    refused(
        "reader",
        json!({ "q": 1 }),
        "2 times in a row with these arguments by this subject (serve.max_repeated_calls)",
    );
    ok("reader", json!({ "q": 2 }));
    refused(
        "reader",
        json!({ "q": 3 }),
        "this subject may make at most 3 tool calls in 2h (serve.max_tool_calls)",
    );
    // Another subject is not held to reader's count.
    ok("ci", json!({ "q": 1 }));
    // A third subject evicts the one used least recently (reader; ci was used after it)...
    ok("ci-client", json!({}));
    ok("ci", json!({ "q": 2 }));
    // ...whose count starts again (and evicts ci-client, now the least recent)...
    ok("reader", json!({ "q": 4 }));
    // ...while ci kept its own: its third call is its last.
    ok("ci", json!({ "q": 3 }));
    refused(
        "ci",
        json!({ "q": 4 }),
        "this subject may make at most 3 tool calls in 2h",
    );
    serve.stop();
    replays_as_counted_per_subject(&dir, &recording);
    // Only a token's subject is counted: without `serve.auth`, each request counts on its own
    // (tests/mcp_serve_2026.rs); these flags are checked all the same.
    let bad = support::toolrun()
        .arg("serve")
        .arg(&spec)
        .args(["--http", "127.0.0.1:0", "--subject-window", "0s"])
        .env("RS_ID", "resource-server")
        .env("RS_SECRET", "resource-server-secret")
        .output()
        .expect("run toolrun");
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.contains("--subject-window takes a duration"),
        "{stderr}"
    );
}

/// The recording of `stateless_limits_count_per_subject_in_a_bounded_map`: each 2026-07-28 call
/// is a session of its own, yet its refusals replay, since each call says it counted in its
/// subject's counts (the subject, never the token) and with how many tries before it; a
/// recording whose refusal was edited into a success fails the replay.
fn replays_as_counted_per_subject(dir: &Path, recording: &Path) {
    let text = std::fs::read_to_string(recording).expect("the recording");
    let served: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["kind"] == "served")
        .collect();
    assert_eq!(served.len(), 11, "{text}");
    for line in &served {
        let body = &line["request"]["body"];
        assert_eq!(body["subject_counts"]["window"], "2h", "{line}");
        assert!(body["subject_counts"]["tries_before"].is_u64(), "{line}");
        assert!(!line.to_string().contains("eyJ"), "no token: {line}");
    }
    let refused = |l: &&Value| l["response"]["body"]["isError"] == true;
    assert_eq!(served.iter().filter(refused).count(), 3, "{text}");
    let replay = |path: &Path| support::run(support::toolrun().arg("replay").arg(path));
    let out = replay(recording);
    assert_eq!(out.code, 0, "{out:?}");
    // The limit's first refusal (reader's) edited into a success: the replay refuses it again.
    let limit = "this subject may make at most 3 tool calls";
    let mut edited = false;
    let tampered: Vec<String> = text
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("a JSON line");
            if v["kind"] == "served" && l.contains(limit) && !edited {
                edited = true;
                v["response"]["body"] =
                    json!({ "content": [{ "type": "text", "text": "found" }], "isError": false });
                if let Some(line) = v.as_object_mut() {
                    line.remove("tool_error");
                }
            }
            v.to_string()
        })
        .collect();
    assert!(edited, "a refusal was edited: {text}");
    let path = support::write(dir, "tampered.jsonl", &tampered.join("\n"));
    let out = replay(&path);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout.contains("now answers differently")
            || out.stderr.contains("now answers differently"),
        "{out:?}"
    );
}
