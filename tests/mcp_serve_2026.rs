//! `toolrun serve --http` on MCP 2026-07-28 (no session: each request carries its protocol
//! version, client and capabilities in `_meta`) beside 2025-11-25 sessions, through the built
//! binary with raw HTTP: discovery, listings with caching hints, calls, the answers to bad
//! requests, confirmation as an input-required result with a signed request state, limits
//! counted per request; and the official Python SDK (PyPI `mcp` 2.3.0) on both revisions.
//! Binds and contacts 127.0.0.1 only.

#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

const V2026: &str = "2026-07-28";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn example() -> PathBuf {
    root().join("specs/mcp_served.yaml")
}

struct Serve {
    child: Child,
    url: String,
    stderr: BufReader<std::process::ChildStderr>,
}

impl Serve {
    fn start(spec: &Path, args: &[&str], env: &[(&str, &str)]) -> Serve {
        let (child, url, stderr) = support::serve_http(spec, args, env);
        Serve { child, url, stderr }
    }

    fn authority(&self) -> &str {
        support::served_authority(&self.url)
    }

    /// POSTs `body` with these headers (besides the content type, `Accept` and `Host`); the
    /// status, the headers (lower-case names) and the body.
    fn post(&self, headers: &[(&str, &str)], body: &str) -> Answer {
        let wait = Duration::from_secs(30);
        let response = support::exchange_raw(self.authority(), "POST", "/mcp", headers, body, wait);
        Answer::parse(&response)
    }

    /// A 2026-07-28 request: the headers the revision asks for, `_meta` with its version, a
    /// client and `capabilities`.
    fn request(&self, method: &str, params: Value, capabilities: Value) -> Answer {
        self.request_with(method, params, capabilities, &[])
    }

    /// [`Serve::request`] with more headers; members of `params._meta` are kept.
    fn request_with(
        &self,
        method: &str,
        mut params: Value,
        capabilities: Value,
        more: &[(&str, &str)],
    ) -> Answer {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": V2026,
            "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        if let Some(given) = params["_meta"].as_object() {
            for (k, v) in given {
                meta[k] = v.clone();
            }
        }
        params["_meta"] = meta;
        let name = params["name"].as_str().map(String::from);
        let mut headers = vec![("Mcp-Protocol-Version", V2026), ("Mcp-Method", method)];
        if let Some(name) = &name {
            headers.push(("Mcp-Name", name));
        }
        headers.extend_from_slice(more);
        let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params });
        self.post(&headers, &body.to_string())
    }

    fn call(&self, name: &str, arguments: Value, capabilities: Value) -> Answer {
        let params = json!({ "name": name, "arguments": arguments });
        self.request("tools/call", params, capabilities)
    }

    /// A 2025-11-25 session: `initialize` and `notifications/initialized`; its id.
    fn session(&self) -> String {
        let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": { "name": "raw", "version": "1" } } });
        let answer = self.post(&[], &init.to_string());
        assert_eq!(answer.status, 200, "{answer:?}");
        let id = answer.headers["mcp-session-id"].clone();
        let done = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        let ack = self.post(&in_session(&id), &done.to_string());
        assert_eq!(ack.status, 202, "{ack:?}");
        id
    }

    /// SIGTERM, then the exit code and the rest of stderr.
    fn stop(mut self) -> (i32, String) {
        support::terminate(&mut self.child, &mut self.stderr)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn in_session(id: &str) -> [(&str, &str); 2] {
    [
        ("Mcp-Session-Id", id),
        ("Mcp-Protocol-Version", "2025-11-25"),
    ]
}

#[derive(Debug)]
struct Answer {
    status: u16,
    headers: std::collections::HashMap<String, String>,
    /// The JSON-RPC messages: the JSON body, or the event stream's `data:`.
    messages: Vec<Value>,
}

impl Answer {
    fn parse(response: &str) -> Answer {
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((response, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let messages = match serde_json::from_str::<Value>(body) {
            Ok(v) => vec![v],
            Err(_) => body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str(d.trim()).ok())
                .collect(),
        };
        Answer {
            status,
            headers,
            messages,
        }
    }

    /// The response among the messages.
    fn response(&self) -> &Value {
        self.messages
            .iter()
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
            .unwrap_or_else(|| panic!("no response in {self:?}"))
    }

    fn result(&self) -> &Value {
        let r = &self.response()["result"];
        assert!(!r.is_null(), "not a result: {self:?}");
        r
    }

    fn error_code(&self) -> i64 {
        self.response()["error"]["code"].as_i64().unwrap_or(0)
    }
}

fn elicitation() -> Value {
    json!({ "elicitation": {} })
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn both_revisions_are_served_side_by_side_negotiated_per_request() {
    let serve = Serve::start(&example(), &[], &[]);
    let discover = serve.request("server/discover", json!({}), json!({}));
    assert_eq!(discover.status, 200, "{discover:?}");
    let found = discover.result();
    assert_eq!(
        found["supportedVersions"],
        json!([
            "2024-11-05",
            "2025-03-26",
            "2025-06-18",
            "2025-11-25",
            V2026
        ]),
        "{found:#}"
    );
    assert_eq!(
        found["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "toolrun"
    );
    assert!(found["capabilities"]["tools"].is_object(), "{found:#}");

    let listed = serve.request("tools/list", json!({}), json!({}));
    assert!(
        !listed.headers.contains_key("mcp-session-id"),
        "no session on 2026-07-28: {listed:?}"
    );
    let list = listed.result();
    assert_eq!(list["ttlMs"], 300_000, "{list:#}");
    assert_eq!(list["cacheScope"], "private", "{list:#}");
    let names: Vec<&str> = list["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"calculate"), "{names:?}");

    let call = serve.call("calculate", json!({ "expression": "6*7" }), json!({}));
    assert_eq!(call.status, 200, "{call:?}");
    assert_eq!(call.result()["resultType"], "complete");
    assert_eq!(call.result()["isError"], false, "{call:?}");
    assert!(text(call.result()).contains("42"), "{call:?}");

    // A 2025-11-25 session on the same server, meanwhile, is as it was: no caching hints.
    let id = serve.session();
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
    let old = serve.post(&in_session(&id), &list.to_string());
    assert_eq!(old.status, 200, "{old:?}");
    assert!(old.result().get("ttlMs").is_none(), "{old:?}");
    assert!(old.result().get("resultType").is_none(), "{old:?}");
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "calculate", "arguments": { "expression": "1+1" } } });
    let old = serve.post(&in_session(&id), &call.to_string());
    assert!(text(old.result()).contains('2'), "{old:?}");
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn bad_2026_requests_get_json_rpc_errors_with_the_right_status() {
    let serve = Serve::start(&example(), &[], &[]);
    // No `_meta`: 400, invalid params.
    let bare = json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {} });
    let headers = [
        ("Mcp-Protocol-Version", V2026),
        ("Mcp-Method", "tools/list"),
    ];
    let answer = serve.post(&headers, &bare.to_string());
    assert_eq!(
        (answer.status, answer.error_code()),
        (400, -32602),
        "{answer:?}"
    );
    assert_eq!(answer.response()["id"], 3);

    // A version toolrun does not speak: 400, and exactly the versions it does.
    let meta = json!({ "io.modelcontextprotocol/protocolVersion": "2099-01-01",
        "io.modelcontextprotocol/clientCapabilities": {} });
    let body = json!({ "jsonrpc": "2.0", "id": 4, "method": "server/discover",
        "params": { "_meta": meta } });
    let headers = [
        ("Mcp-Protocol-Version", "2099-01-01"),
        ("Mcp-Method", "server/discover"),
    ];
    let answer = serve.post(&headers, &body.to_string());
    assert_eq!(
        (answer.status, answer.error_code()),
        (400, -32022),
        "{answer:?}"
    );
    assert_eq!(answer.response()["id"], 4);
    let data = &answer.response()["error"]["data"];
    assert_eq!(
        data["supported"],
        json!([
            "2024-11-05",
            "2025-03-26",
            "2025-06-18",
            "2025-11-25",
            V2026
        ]),
        "{answer:?}"
    );
    assert_eq!(data["requested"], "2099-01-01");

    // Headers that say something else than the body: 400, header mismatch.
    let call = json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "calculate", "arguments": { "expression": "1" },
        "_meta": { "io.modelcontextprotocol/protocolVersion": V2026,
                   "io.modelcontextprotocol/clientCapabilities": {} } } });
    for headers in [
        [
            ("Mcp-Protocol-Version", V2026),
            ("Mcp-Method", "tools/list"),
            ("Mcp-Name", "calculate"),
        ],
        [
            ("Mcp-Protocol-Version", V2026),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "refund_order"),
        ],
        [
            ("Mcp-Protocol-Version", "2025-11-25"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "calculate"),
        ],
    ] {
        let answer = serve.post(&headers, &call.to_string());
        assert_eq!(
            (answer.status, answer.error_code()),
            (400, -32020),
            "{headers:?}: {answer:?}"
        );
    }

    // Methods the revision removed, and unknown ones: 404, method not found.
    for method in ["initialize", "ping", "logging/setLevel", "no/such/method"] {
        let answer = serve.request(method, json!({}), json!({}));
        assert_eq!(
            (answer.status, answer.error_code()),
            (404, -32601),
            "{method}: {answer:?}"
        );
    }

    // An unknown tool and arguments that do not fit: the answers of a session's.
    let answer = serve.call("no_such_tool", json!({}), json!({}));
    assert_eq!(answer.error_code(), -32602, "{answer:?}");
    let answer = serve.call("refund_order", json!({ "order_id": "x" }), json!({}));
    assert_eq!(answer.result()["isError"], true, "{answer:?}");

    // Malformed JSON, and a body that is not JSON-RPC.
    let headers = [("Mcp-Protocol-Version", V2026)];
    let answer = serve.post(&headers, "{\"jsonrpc\":");
    assert_eq!(
        (answer.status, answer.error_code()),
        (400, -32700),
        "{answer:?}"
    );

    // `subscriptions/listen` is acknowledged first thing on its stream.
    let mut stream = std::net::TcpStream::connect(serve.authority()).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let body = json!({ "jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": {
        "notifications": { "toolsListChanged": true },
        "_meta": { "io.modelcontextprotocol/protocolVersion": V2026,
                   "io.modelcontextprotocol/clientCapabilities": {} } } })
    .to_string();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: {V2026}\r\nMcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        serve.authority(),
        body.len()
    );
    stream.write_all(req.as_bytes()).expect("send");
    let mut reader = BufReader::new(stream);
    let first = (0..40)
        .filter_map(|_| {
            let mut line = String::new();
            reader.read_line(&mut line).ok()?;
            Some(line)
        })
        .find_map(|l| serde_json::from_str::<Value>(l.strip_prefix("data:")?.trim()).ok())
        .expect("an event on the listen stream");
    assert_eq!(
        first["method"], "notifications/subscriptions/acknowledged",
        "{first}"
    );
    // The server still stops promptly with the stream open.
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
}

/// The common 2026-07-28 `tools/call` and `tools/list` are answered by toolrun without rmcp; a
/// `Mcp-Param-*` header that names no parameter (rmcp ignores it, toolrun's own path leaves such
/// a request to rmcp) sends the same request through rmcp. Both must answer alike, whatever the
/// tool gives: structured results, text, truncation, content items, tool errors, refused
/// arguments, confirmations, HTTP tools, builtins, unknown tools, listings.
#[test]
fn requests_answered_without_rmcp_answer_as_rmcp_does() {
    let (_upstream, spec) =
        support::specs::direct_spec("mcp-serve-2026-direct", "serve: { max_tool_calls: 1 }\n");
    let serve = Serve::start(spec.path(), &[], &[]);
    let call = |name: &str, arguments: Value| json!({ "name": name, "arguments": arguments });
    let traced = json!({ "traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
        "io.modelcontextprotocol/logLevel": "debug", "progressToken": "p" });
    let requests = [
        ("tools/call", call("lookup", json!({ "id": 1 })), json!({})),
        ("tools/call", call("lookup", json!({ "id": 2 })), json!({})),
        ("tools/call", call("lookup", json!({ "id": 3 })), json!({})),
        ("tools/call", call("lookup", json!({ "id": 4 })), json!({})),
        ("tools/call", call("lookup", json!({ "id": 5 })), json!({})),
        ("tools/call", call("lookup", json!({ "id": 6 })), json!({})),
        (
            "tools/call",
            call("lookup", json!({ "id": "x" })),
            json!({}),
        ),
        ("tools/call", json!({ "name": "lookup" }), json!({})),
        ("tools/call", call("picture", json!({})), json!({})),
        ("tools/call", call("refund", json!({ "id": 1 })), json!({})),
        (
            "tools/call",
            call("refund", json!({ "id": 1 })),
            elicitation(),
        ),
        (
            "tools/call",
            call("echo", json!({ "q": "hello" })),
            json!({}),
        ),
        (
            "tools/call",
            call("calc", json!({ "expression": "6 * 7" })),
            json!({}),
        ),
        ("tools/call", call("no_such_tool", json!({})), json!({})),
        (
            "tools/call",
            json!({ "name": "lookup", "arguments": { "id": 1 }, "_meta": traced }),
            json!({}),
        ),
        ("tools/list", json!({}), json!({})),
        ("tools/list", json!({ "_meta": traced }), elicitation()),
    ];
    for (method, params, capabilities) in requests {
        let direct = serve.request(method, params.clone(), capabilities.clone());
        let rmcp = [("Mcp-Param-Unused", "1")];
        let through_rmcp = serve.request_with(method, params.clone(), capabilities, &rmcp);
        let context = format!("{method} {params}:\n{direct:?}\n{through_rmcp:?}");
        assert_eq!(direct.status, through_rmcp.status, "{context}");
        assert_eq!(
            direct.headers.get("content-type"),
            through_rmcp.headers.get("content-type"),
            "{context}"
        );
        // A request state is signed with its expiry, which the two need not share.
        let unsealed = |answer: &Answer| {
            let mut messages = answer.messages.clone();
            for m in &mut messages {
                if let Some(state) = m["result"].get_mut("requestState") {
                    assert!(state.as_str().is_some_and(|s| s.starts_with("v1.")), "{m}");
                    *state = json!("sealed");
                }
            }
            messages
        };
        assert_eq!(unsealed(&direct), unsealed(&through_rmcp), "{context}");
        assert_eq!(direct.messages.len(), 1, "{context}");
    }
    // What the answers say, so that the two agreeing on nothing would fail.
    let ask = |name: &str, arguments: Value| serve.call(name, arguments, json!({}));
    let answer = ask("calc", json!({ "expression": "6 * 7" }));
    assert_eq!(
        answer.headers["content-type"], "application/json",
        "{answer:?}"
    );
    assert_eq!(answer.result()["resultType"], "complete", "{answer:?}");
    assert_eq!(text(answer.result()), "42", "{answer:?}");
    let echoed = ask("echo", json!({ "q": "direct" }));
    assert_eq!(text(echoed.result()), r#"{"q":"direct"}"#, "{echoed:?}");
    assert_eq!(echoed.result()["structuredContent"]["q"], "direct");
    let refused = ask("refund", json!({ "id": 2 }));
    assert!(
        text(refused.result()).contains("needs_confirmation"),
        "{refused:?}"
    );
    let listed = serve.request("tools/list", json!({}), json!({}));
    assert_eq!(listed.result()["ttlMs"], 300_000, "{listed:?}");
    assert_eq!(listed.result()["tools"].as_array().map(Vec::len), Some(5));
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
}

/// A key the replicas share (`--state-key-env`), in the variable of that name.
const KEY_VAR: &str = "TOOLRUN_TEST_STATE_KEY";
const KEY: &str = "b3f1c0d9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9";

fn replica(keyed: bool) -> Serve {
    if keyed {
        Serve::start(&example(), &["--state-key-env", KEY_VAR], &[(KEY_VAR, KEY)])
    } else {
        Serve::start(&example(), &[], &[])
    }
}

/// The client's retry of `refund_order` with these arguments, state and input responses.
fn retry(serve: &Serve, order: Value, state: &str, responses: Value) -> Answer {
    let params = json!({ "name": "refund_order", "arguments": { "order_id": order },
        "inputResponses": responses, "requestState": state });
    serve.request("tools/call", params, elicitation())
}

fn approve() -> Value {
    json!({ "confirm": { "action": "accept", "content": { "approve": true } } })
}

/// The state the server would make for `refund_order` of `order` expiring at `expires_ms`,
/// signed with [`KEY`]: what a replica sharing the key makes (`mcp_server::state`).
fn forged_state(order: i64, expires_ms: i64) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;
    use sha2::Digest as _;
    let payload =
        URL_SAFE_NO_PAD.encode(format!(r#"{{"tool":"refund_order","exp":{expires_ms}}}"#));
    let mut call = sha2::Sha256::new();
    call.update(b"refund_order\0");
    call.update(format!(r#"{{"order_id":{order}}}"#).as_bytes());
    let mut signed = b"toolrun/mcp/confirmation/v1\0".to_vec();
    signed.extend_from_slice(payload.as_bytes());
    signed.push(0);
    signed.extend_from_slice(&call.finalize());
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, KEY.as_bytes());
    let tag = ring::hmac::sign(&key, &signed);
    format!("v1.{payload}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

#[test]
fn a_confirmation_is_an_input_required_result_whose_signed_retry_runs_the_call() {
    let (a, b, other) = (replica(true), replica(true), replica(false));
    let asked = a.call("refund_order", json!({ "order_id": 42 }), elicitation());
    let result = asked.result();
    assert_eq!(result["resultType"], "input_required", "{asked:?}");
    let form = &result["inputRequests"]["confirm"];
    assert_eq!(form["method"], "elicitation/create", "{asked:?}");
    assert!(
        form["params"]["requestedSchema"]["properties"]["approve"].is_object(),
        "{form}"
    );
    let state = result["requestState"].as_str().expect("a requestState");
    // The state carries the tool and its expiry, never the arguments.
    use base64::Engine as _;
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(state.split('.').nth(1).expect("a payload"))
        .expect("base64url");
    let payload = String::from_utf8(payload).expect("utf-8");
    assert!(
        payload.contains("refund_order") && !payload.contains("order_id"),
        "{payload}"
    );

    // Another replica with the same key completes what the first asked.
    let done = retry(&b, json!(42), state, approve());
    assert_eq!(
        done.result()["structuredContent"]["refunded"],
        true,
        "{done:?}"
    );
    // Refused: other arguments, a changed state, another key, an expired state.
    let tampered = format!("{state}-TAMPERED");
    let now_ms = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms");
    for (serve, order, state, why) in [
        (&a, 43, state, "other arguments"),
        (&a, 42, tampered.as_str(), "changed"),
        (&other, 42, state, "another key"),
    ] {
        let refused = retry(serve, json!(order), state, approve());
        assert_eq!(refused.error_code(), -32602, "{why}: {refused:?}");
    }
    let expired = retry(&a, json!(42), &forged_state(42, now_ms - 1), approve());
    assert_eq!(expired.error_code(), -32602, "{expired:?}");
    assert!(
        expired.response()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("expired"),
        "{expired:?}"
    );
    // The same forgery, not yet expired, is what a replica makes: accepted.
    let fresh = retry(&a, json!(42), &forged_state(42, now_ms + 60_000), approve());
    assert_eq!(
        fresh.result()["structuredContent"]["refunded"],
        true,
        "{fresh:?}"
    );

    // The user declined: not run.
    let declined = retry(
        &a,
        json!(42),
        state,
        json!({ "confirm": { "action": "decline" } }),
    );
    assert_eq!(declined.result()["isError"], true, "{declined:?}");
    assert_eq!(
        declined.result()["structuredContent"]["error"]["kind"],
        "denied"
    );
    // No answer among the responses, or answers without the state: asked again.
    for (state, responses) in [
        (Some(state), json!({ "other": { "action": "accept" } })),
        (None, approve()),
    ] {
        let mut params = json!({ "name": "refund_order", "arguments": { "order_id": 42 },
            "inputResponses": responses });
        if let Some(state) = state {
            params["requestState"] = json!(state);
        }
        let again = a.request("tools/call", params, elicitation());
        assert_eq!(again.result()["resultType"], "input_required", "{again:?}");
    }
    // An answer that is not an elicitation result: invalid params.
    let bad = retry(&a, json!(42), state, json!({ "confirm": 12345 }));
    assert_eq!(bad.error_code(), -32602, "{bad:?}");
    // A client that cannot be asked (no elicitation) gets the tool error it always did.
    let plain = a.call("refund_order", json!({ "order_id": 42 }), json!({}));
    assert_eq!(
        plain.result()["structuredContent"]["error"]["kind"],
        "needs_confirmation",
        "{plain:?}"
    );
    for serve in [a, b, other] {
        let (code, stderr) = serve.stop();
        assert_eq!(code, 0, "{stderr}");
    }
}

#[test]
fn a_state_key_that_is_missing_or_short_is_refused_before_serving() {
    for (value, says) in [("", "not set"), ("short", "at least 32")] {
        let mut cmd = support::toolrun();
        cmd.arg("serve")
            .arg(example())
            .args(["--http", "127.0.0.1:0", "--state-key-env", KEY_VAR])
            .env(KEY_VAR, value);
        let out = support::run_with_timeout(&mut cmd, None, Duration::from_secs(60));
        assert_eq!(out.code, 2, "{out:?}");
        assert!(out.stderr.contains(says), "{}", out.stderr);
    }
}

/// On 2026-07-28 there is no session to count in: `serve:` limits and loop detection count
/// per request, while a 2025-11-25 session's calls count together as before.
#[test]
fn serve_limits_count_per_session_on_2025_and_per_request_on_2026() {
    let spec = support::temp_file(
        "mcp-serve-2026-limits",
        "s.yaml",
        "version: 1\nname: limited\ntools:\n  calculate:\n    description: Arithmetic.\n    kind: builtin\n    builtin: calculator\nserve: { max_tool_calls: 1, max_repeated_calls: 1 }\n",
    );
    let serve = Serve::start(spec.path(), &[], &[]);
    let id = serve.session();
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "calculate", "arguments": { "expression": "1+1" } } });
    let first = serve.post(&in_session(&id), &call.to_string());
    assert_eq!(first.result()["isError"], false, "{first:?}");
    let second = serve.post(&in_session(&id), &call.to_string());
    assert_eq!(
        second.result()["structuredContent"]["error"]["kind"],
        "limit_exceeded",
        "{second:?}"
    );
    for _ in 0..3 {
        let each = serve.call("calculate", json!({ "expression": "1+1" }), json!({}));
        assert_eq!(each.result()["isError"], false, "{each:?}");
    }
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
}

/// The Python SDK's client (`tests/mcp/client.py`) in protocol `mode`, with `args` after the
/// script and the plan of calls on stdin; its JSON output.
fn sdk(mode: &str, args: &[&str], env: &[(&str, &str)], plan: &Value) -> Value {
    let mut cmd = Command::new(python::python());
    cmd.arg(python::script("client.py")).args(args);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CLIENT_MODE", mode);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = support::run_with_stdin(&mut cmd, &plan.to_string());
    assert_eq!(out.code, 0, "the MCP client failed\n{out:?}");
    out.json()
}

fn refund(order: i64, answer: &str) -> Value {
    json!({ "name": "refund_order", "arguments": { "order_id": order }, "confirm": answer })
}

/// The SDK's modern client path (it probes `server/discover`) speaks 2026-07-28 to `serve`,
/// over HTTP and stdio: calls, and confirmations answered through input-required results; in
/// legacy mode the same client gets a 2025-11-25 session and is asked on the call's stream.
#[test]
fn the_python_sdk_works_on_both_revisions_over_http_and_stdio() {
    let serve = Serve::start(&example(), &[], &[]);
    let bin = env!("CARGO_BIN_EXE_toolrun");
    let spec = example();
    let spec = spec.to_str().expect("utf-8");
    let plan = json!([
        { "name": "calculate", "arguments": { "expression": "6*7" } },
        refund(42, "accept"),
        refund(43, "decline"),
        { "name": "lookup_order", "arguments": { "order_id": 42 } },
    ]);
    for (mode, protocol) in [("auto", V2026), ("legacy", "2025-11-25")] {
        for target in [
            vec!["--elicit", "http", serve.url.as_str()],
            vec!["--elicit", "stdio", bin, "serve", spec],
        ] {
            let doc = sdk(mode, &target, &[], &plan);
            let context = format!("{mode} {}: {doc:#}", target[1]);
            assert_eq!(doc["protocol"], protocol, "{context}");
            let calls = &doc["calls"];
            assert_eq!(
                calls[0]["structuredContent"],
                json!({ "result": 42 }),
                "{context}"
            );
            assert_eq!(calls[1]["structuredContent"]["refunded"], true, "{context}");
            assert_eq!(
                calls[2]["structuredContent"]["error"]["kind"], "denied",
                "{context}"
            );
            assert_eq!(
                calls[3]["structuredContent"]["status"], "shipped",
                "{context}"
            );
            // The user was shown the same form either way, once per confirmed call.
            let asked = doc["elicitations"].as_array().expect("elicitations");
            assert_eq!(asked.len(), 2, "{context}");
            assert!(
                asked[0]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("refund_order"),
                "{context}"
            );
        }
    }
    // Logs reach a 2026-07-28 client only when it opts in with a log level.
    let logging = root().join("specs/mcp_conformance_server.yaml");
    let logged = Serve::start(&logging, &[], &[]);
    let plan = json!([{ "name": "test_tool_with_logging", "arguments": {} }]);
    let quiet = sdk(
        "auto",
        &["http", &logged.url],
        &[("CLIENT_LOG_LEVEL", "")],
        &plan,
    );
    assert!(quiet.get("logs").is_none(), "{quiet:#}");
    let told = sdk(
        "auto",
        &["http", &logged.url],
        &[("CLIENT_LOG_LEVEL", "info")],
        &plan,
    );
    assert_eq!(told["protocol"], V2026, "{told:#}");
    assert_eq!(told["logs"].as_array().map(Vec::len), Some(3), "{told:#}");
    let warned = sdk(
        "auto",
        &["http", &logged.url],
        &[("CLIENT_LOG_LEVEL", "warning")],
        &plan,
    );
    assert_eq!(warned["logs"], json!([]), "{warned:#}");
    for serve in [serve, logged] {
        let (code, stderr) = serve.stop();
        assert_eq!(code, 0, "{stderr}");
    }
}

/// The JSON lines of a `--record` recording: (header, served calls).
fn served_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("recording");
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["kind"] == "served")
        .collect()
}

/// `serve --record` records 2026-07-28 calls, each request its own session, a confirmed call
/// with its user's answer (the round that asked ran nothing and is not a call), and `replay`
/// replays them offline; changing the answer in the recording makes the replay diverge.
#[test]
fn recorded_2026_calls_and_confirmations_replay() {
    let dir = support::temp_dir("mcp-serve-2026-record");
    let fixture = dir.path().join("session.jsonl");
    let serve = Serve::start(
        &example(),
        &["--record", fixture.to_str().expect("utf-8")],
        &[],
    );
    let looked = serve.call("lookup_order", json!({ "order_id": 42 }), json!({}));
    assert_eq!(looked.result()["isError"], false, "{looked:?}");
    for (order, answer) in [
        (42, approve()),
        (43, json!({ "confirm": { "action": "decline" } })),
    ] {
        let asked = serve.call("refund_order", json!({ "order_id": order }), elicitation());
        let state = asked.result()["requestState"]
            .as_str()
            .expect("a state")
            .to_string();
        let done = retry(&serve, json!(order), &state, answer);
        assert_eq!(done.result()["resultType"], "complete", "{done:?}");
    }
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
    let served = served_lines(&fixture);
    assert_eq!(served.len(), 3, "{served:#?}");
    let sessions: std::collections::HashSet<&str> =
        served.iter().filter_map(|s| s["source"].as_str()).collect();
    assert_eq!(sessions.len(), 3, "one session a request: {served:#?}");
    let refunds: Vec<&Value> = served
        .iter()
        .filter(|s| s["request"]["body"]["name"] == "refund_order")
        .collect();
    assert_eq!(
        refunds[0]["request"]["body"]["confirmation"]["action"],
        "accept"
    );
    assert_eq!(refunds[0]["response"]["body"]["isError"], false);
    assert_eq!(
        refunds[1]["request"]["body"]["confirmation"]["action"],
        "decline"
    );
    let replay = |path: &Path| {
        let mut cmd = support::toolrun();
        cmd.arg("replay").arg(path).arg("--spec").arg(example());
        support::run(&mut cmd)
    };
    let out = replay(&fixture);
    assert_eq!(out.code, 0, "{out:?}");
    // The recorded answer is what the replay gives: a decline made an accept diverges.
    let text = std::fs::read_to_string(&fixture).expect("recording");
    let changed = dir.path().join("changed.jsonl");
    std::fs::write(
        &changed,
        text.replace("\"decline\"", "\"accept\",\"content\":{\"approve\":true}"),
    )
    .expect("write");
    let out = replay(&changed);
    assert_eq!(out.code, 1, "{out:?}");
}

/// A gateway's remote MCP server is not started again for each 2026-07-28 request (they have no
/// session to keep one for): those calls share the server's own connection to it, which it
/// opened to list the tools; a 2025-11-25 session still gets one of its own.
#[test]
fn a_gateway_does_not_start_its_stdio_server_per_2026_request() {
    let dir = support::temp_dir("mcp-serve-2026-gateway");
    let logs = dir.path().join("logs");
    let python = python::python().display().to_string();
    let spec = support::write(
        dir.path(),
        "gateway.yaml",
        &format!(
            "version: 1\nname: gateway\ntools:\n  probe:\n    kind: mcp\n    description: A probe server.\n    command: [\"{python}\", \"{}\", \"{}\"]\n    timeout: 30s\n    tools: [echo]\n",
            python::script("stdio_server.py").display(),
            logs.display(),
        ),
    );
    let serve = Serve::start(&spec, &["--allow-exec", &python], &[]);
    for _ in 0..3 {
        let echoed = serve.call("echo", json!({ "text": "hi" }), json!({}));
        assert!(text(echoed.result()).contains("hi"), "{echoed:?}");
    }
    let started = || {
        std::fs::read_to_string(logs.join("pids.jsonl"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert_eq!(started(), 1, "only the listing's server");
    let (code, stderr) = serve.stop();
    assert_eq!(code, 0, "{stderr}");
}
