//! `execute` against the real test server (127.0.0.1 only), without the engine.

use super::test_server::{refused_port, Response, TestServer};
use super::*;
use crate::codes::Code;
use crate::events::Events;
use crate::net::Transport;
use crate::redact::Secrets;
use crate::specfile::Source;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

const MODEL: &str =
    "models:\n  s:\n    kind: scripted\n    scripts:\n      - turns:\n          - answer: done\n";

/// A spec with one tool `t` whose body (indented under the tool) is `tool`.
fn spec(allow: &[&str], tool: &str) -> Registry {
    let hosts = allow
        .iter()
        .map(|h| format!("\"{h}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let policy = if allow.is_empty() {
        String::new()
    } else {
        format!("policy:\n  network:\n    allow_hosts: [{hosts}]\n")
    };
    let tool: String = tool.lines().map(|l| format!("    {l}\n")).collect();
    let text = format!(
        "version: 1\nname: t\nsecrets: [KEY]\n{policy}tools:\n  t:\n    description: A tool under test for HTTP.\n    kind: http\n{tool}{MODEL}"
    );
    let compiled = crate::compile::compile(
        &Source::new("t.yaml", text.clone()),
        std::path::Path::new("t.yaml"),
    );
    match compiled.registry {
        Some(r) => r,
        None => panic!("spec does not compile: {:#?}\n{text}", compiled.diagnostics),
    }
}

fn secrets() -> Secrets {
    let mut s = Secrets::default();
    s.insert("KEY", "sk-live/s3cr3t+value".into());
    s
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn call(reg: &Registry, args: Value) -> Result<Value, ToolError> {
    call_with(reg, args, &Events::none())
}

fn call_with(reg: &Registry, args: Value, events: &Events) -> Result<Value, ToolError> {
    let transport = Transport::live();
    let secrets = secrets();
    let tool = reg.tool("t").unwrap();
    let ToolKind::Http(http) = &tool.kind else {
        panic!("not http")
    };
    let env = ToolEnv {
        registry: reg,
        secrets: &secrets,
        transport: &transport,
        events,
        query: "q",
        now_unix_ms: 0,
        call_id: "call_1",
        notify: None,
        session: None,
    };
    runtime()
        .block_on(execute(tool, http, &args, &env))
        .map(|out| out.value)
}

fn host(server: &TestServer) -> String {
    server.addr().to_string()
}

#[test]
fn pointer_query_headers_and_hostile_path_arguments() {
    let server = TestServer::start(|req| {
        Response::json(
            200,
            json!({"current": {"temp_c": 21, "path": req.path, "raw": req.raw_target, "auth": req.header("authorization"), "q": req.query}}),
        )
    });
    let reg = spec(
        &[],
        &format!(
            "input: {{ type: object, properties: {{ city: {{ type: string }}, units: {{ type: string }} }} }}\n\
             request:\n  url: \"{}/v1/{{{{ args.city }}}}/now?raw={{{{ args.city | urlencode }}}}\"\n  query: {{ units: \"{{{{ args.units }}}}\", skip: null }}\n  headers: {{ Authorization: \"Bearer {{{{ secrets.KEY }}}}\" }}\n\
             response: {{ pointer: /current }}",
            server.base_url()
        ),
    );
    let out = call(&reg, json!({"city": "../admin?x=1#f", "units": "a&b=c"})).unwrap();
    assert_eq!(out["temp_c"], 21);
    assert_eq!(out["path"], "/v1/..%2Fadmin%3Fx%3D1%23f/now", "{out}");
    assert_eq!(
        out["q"],
        json!([["raw", "../admin?x=1#f"], ["units", "a&b=c"]])
    );
    // The server saw the secret; the observation only ever holds the mask.
    assert_eq!(out["auth"], "Bearer ***");
    let req = &server.requests()[0];
    assert_eq!(
        req.header("authorization"),
        Some("Bearer sk-live/s3cr3t+value")
    );
}

#[test]
fn a_whole_dot_segment_is_refused() {
    let server = TestServer::start(|_| Response::json(200, json!({})));
    let reg = spec(&[], &format!("input: {{ type: object, properties: {{ p: {{ type: string }} }} }}\nrequest: {{ url: \"{}/files/{{{{ args.p }}}}/x\" }}", server.base_url()));
    for p in ["..", "."] {
        let e = call(&reg, json!({ "p": p })).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArguments, "{p}: {e:?}");
    }
    // `%2e` arrives encoded as `%252e`: a name, not a dot segment.
    call(&reg, json!({ "p": "%2e%2E" })).unwrap();
    assert!(server
        .requests()
        .iter()
        .all(|r| r.path == "/files/%252e%252E/x"));
}

#[test]
fn retries_5xx_then_succeeds_and_gives_up_after_n_plus_one() {
    let server = TestServer::start(|req| match (req.path.as_str(), req.nth) {
        ("/flaky", 1) => Response::text(500, "boom"),
        ("/flaky", _) => Response::json(200, json!({"ok": true})),
        _ => Response::text(503, "down for maintenance"),
    });
    let reg = spec(
        &[],
        &format!(
            "request: {{ url: \"{}/flaky\" }}\nretries: 2",
            server.base_url()
        ),
    );
    assert_eq!(call(&reg, json!({})).unwrap(), json!({"ok": true}));
    assert_eq!(server.hits("/flaky"), 2);

    let reg = spec(
        &[],
        &format!(
            "request: {{ url: \"{}/down\" }}\nretries: 2",
            server.base_url()
        ),
    );
    let e = call(&reg, json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::HttpStatus);
    assert!(
        e.message.contains("503")
            && e.message.contains("after 3 attempts")
            && e.message.contains("down for maintenance"),
        "{}",
        e.message
    );
    let d = e.details.unwrap();
    assert_eq!(
        (d["status"].clone(), d["attempts"].clone()),
        (json!(503), json!(3))
    );
    assert_eq!(server.hits("/down"), 3);
}

#[test]
fn a_post_is_never_replayed() {
    let server = TestServer::start(|_| Response::text(502, "bad gateway"));
    let reg = spec(
        &[],
        &format!(
            "request: {{ method: POST, url: \"{}/send\", body: {{ to: x }} }}\nretries: 3",
            server.base_url()
        ),
    );
    let e = call(&reg, json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::HttpStatus);
    assert_eq!(e.details.unwrap()["attempts"], 1);
    assert_eq!(server.hits("/send"), 1);
    assert_eq!(server.requests()[0].json(), Some(json!({"to": "x"})));
}

#[test]
fn honours_retry_after_seconds() {
    let server = TestServer::start(|req| match req.nth {
        1 => Response::text(429, "slow down").header("Retry-After", "1"),
        _ => Response::json(200, json!(1)),
    });
    let reg = spec(
        &[],
        &format!(
            "request: {{ url: \"{}/r\" }}\nretries: 1",
            server.base_url()
        ),
    );
    let started = Instant::now();
    assert_eq!(call(&reg, json!({})).unwrap(), json!(1));
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn retry_after_beyond_the_timeout_gives_up_at_once() {
    let server = TestServer::start(|_| Response::text(429, "later").header("Retry-After", "30"));
    let reg = spec(
        &[],
        &format!(
            "request: {{ url: \"{}/r\" }}\nretries: 3\ntimeout: 2s",
            server.base_url()
        ),
    );
    let e = call(&reg, json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::HttpStatus);
    assert!(e.message.contains("wait at least 30s"), "{}", e.message);
    assert_eq!(server.hits("/r"), 1);
}

#[test]
fn slow_server_times_out() {
    let server = TestServer::start(|_| Response::json(200, json!(1)).delay(Duration::from_secs(3)));
    let reg = spec(
        &[],
        &format!(
            "request: {{ url: \"{}/slow\" }}\ntimeout: 300ms\nretries: 2",
            server.base_url()
        ),
    );
    let started = Instant::now();
    let e = call(&reg, json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout, "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(e.message.contains("0.3s"), "{}", e.message);
}

#[test]
fn huge_body_is_cut_while_streaming_with_progress() {
    let server = TestServer::start(|_| Response::status(200).huge(1 << 30).chunked());
    let reg = spec(
        &[],
        &format!(
            "request: {{ url: \"{}/huge\" }}\nresponse: {{ max_bytes: 300000 }}",
            server.base_url()
        ),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut events = Events::none();
    let s = Arc::clone(&seen);
    events.tap(move |name, data| s.lock().unwrap().push((name.to_string(), data.clone())));
    let out = call_with(&reg, json!({}), &events).unwrap();
    assert_eq!(out["truncated"], true);
    assert_eq!(out["bytes"], 300000);
    assert!(out["body"].as_str().unwrap().starts_with("[1,1,"));
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 3 && seen.len() <= 6, "{}", seen.len());
    assert_eq!(seen[0].1["id"], "call_1");
    assert_eq!(seen[0].1["tool"], "t");
}

#[test]
fn redirects_are_followed_checked_and_strip_credentials() {
    let other = TestServer::start(|req| {
        Response::json(
            200,
            json!({"auth": req.header("authorization"), "method": req.method}),
        )
    });
    let other_url = other.url("/landing");
    let server = TestServer::start(move |req| match req.path.as_str() {
        "/see-other" => Response::redirect(303, "/final"),
        "/final" => Response::json(
            200,
            json!({"method": req.method, "auth": req.header("authorization")}),
        ),
        "/away" => Response::redirect(307, &other_url),
        "/evil" => Response::redirect(302, "http://localhost:1/x"),
        _ => Response::redirect(302, "/loop"),
    });
    let tool = |path: &str, method: &str| {
        format!(
            "request: {{ method: {method}, url: \"{}{path}\", headers: {{ Authorization: \"Bearer {{{{ secrets.KEY }}}}\" }}, body_text: hi }}\nresponse: {{ max_redirects: 3 }}",
            server.base_url()
        )
    };
    let both = [host(&server), host(&other)];
    let both: Vec<&str> = both.iter().map(String::as_str).collect();
    let out = call(&spec(&both, &tool("/see-other", "POST")), json!({})).unwrap();
    assert_eq!(out, json!({"method": "GET", "auth": "Bearer ***"}));

    let out = call(&spec(&both, &tool("/away", "PUT")), json!({})).unwrap();
    assert_eq!(out, json!({"method": "PUT", "auth": null}));

    let e = call(&spec(&both, &tool("/evil", "GET")), json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Denied);
    assert!(e.message.contains("localhost:1"), "{}", e.message);

    let e = call(&spec(&both, &tool("/loop", "GET")), json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::HttpStatus);
    assert!(e.message.contains("more than 3"), "{}", e.message);
    assert_eq!(server.hits("/loop"), 4, "the first request and 3 redirects");
}

#[test]
fn hosts_outside_the_allow_list_are_denied_before_any_request() {
    let server = TestServer::start(|_| Response::json(200, json!(1)));
    // A host or port taken from an argument does not compile (E020), whatever the allow-list.
    for url in ["http://{{ args.h }}/x", "http://127.0.0.1:{{ args.h }}/x"] {
        let text = format!("version: 1\nname: t\npolicy: {{ network: {{ allow_hosts: [api.example.com] }} }}\ntools:\n  t:\n    description: A tool under test for HTTP.\n    kind: http\n    input: {{ type: object, properties: {{ h: {{ type: string }} }} }}\n    request: {{ url: \"{url}\" }}\n{MODEL}");
        let compiled =
            crate::compile::compile(&Source::new("t.yaml", text), std::path::Path::new("t.yaml"));
        assert!(compiled.registry.is_none(), "{url}");
        assert!(
            compiled.diagnostics.iter().any(|d| d.code == Code::E020),
            "{url}: {:?}",
            compiled.diagnostics
        );
    }
    // A template that takes the whole URL from an argument is still held to the list.
    let reg = spec(&["api.example.com"], "input: { type: object, properties: { u: { type: string } } }\nrequest: { url: \"{{ args.u }}\" }");
    for u in [
        server.url("/x"),
        "http://api.example.com@127.0.0.1/".into(),
        "file:///etc/passwd".into(),
    ] {
        let e = call(&reg, json!({ "u": u })).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Denied, "{u}: {e:?}");
    }
    assert!(server.requests().is_empty());
}

#[test]
fn text_bodies_missing_pointers_and_refused_connections() {
    let server = TestServer::start(|req| match req.path.as_str() {
        "/html" => Response::text(200, "<p>hello</p>").header("Content-Type", "text/html"),
        _ => Response::json(200, json!({"current": {"temp": 1, "wind": 2}})),
    });
    let reg = spec(
        &[],
        &format!("request: {{ url: \"{}/html\" }}", server.base_url()),
    );
    assert_eq!(call(&reg, json!({})).unwrap(), json!("<p>hello</p>"));

    let reg = spec(
        &[],
        &format!(
            "request: {{ url: \"{}/json\" }}\nresponse: {{ pointer: /current/humidity }}",
            server.base_url()
        ),
    );
    let e = call(&reg, json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(
        e.message.contains("`/current` has the keys: temp, wind"),
        "{}",
        e.message
    );

    let port = refused_port();
    let reg = spec(
        &[],
        &format!("request: {{ url: \"http://127.0.0.1:{port}/x\" }}\nretries: 1"),
    );
    let e = call(&reg, json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Network, "{e:?}");
    assert_eq!(e.details.unwrap()["attempts"], 2);
}

#[test]
fn secrets_echoed_back_are_masked_in_results_and_errors() {
    let server = TestServer::start(|req| {
        let echo = format!(
            "you sent {} with {}",
            req.raw_target,
            req.header("x-key").unwrap_or("")
        );
        if req.path == "/fail" {
            Response::text(400, echo)
        } else {
            Response::text(200, echo)
        }
    });
    let tool = |path: &str| {
        format!("request: {{ url: \"{}{path}?k={{{{ secrets.KEY }}}}\", headers: {{ X-Key: \"{{{{ secrets.KEY }}}}\" }} }}", server.base_url())
    };
    let out = call(&spec(&[], &tool("/ok")), json!({})).unwrap();
    assert_eq!(out, json!("you sent /ok?k=*** with ***"));
    let e = call(&spec(&[], &tool("/fail")), json!({})).unwrap_err();
    let all = format!("{} {}", e.message, e.details.unwrap());
    assert!(!all.contains("s3cr3t") && all.contains("k=***"), "{all}");
}

#[test]
fn parallel_calls_are_in_flight_together() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (f, p) = (Arc::clone(&in_flight), Arc::clone(&peak));
    let server = TestServer::start(move |_| {
        let now = f.fetch_add(1, Ordering::SeqCst) + 1;
        p.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(200));
        f.fetch_sub(1, Ordering::SeqCst);
        Response::json(200, json!(1))
    });
    let reg = spec(
        &[],
        &format!("request: {{ url: \"{}/slow\" }}", server.base_url()),
    );
    let transport = Transport::live();
    let (secrets, events) = (secrets(), Events::none());
    let tool = reg.tool("t").unwrap();
    let ToolKind::Http(http) = &tool.kind else {
        panic!()
    };
    let ids: Vec<String> = (0..8).map(|i| format!("call_{i}")).collect();
    let envs: Vec<ToolEnv> = ids
        .iter()
        .map(|id| ToolEnv {
            registry: &reg,
            secrets: &secrets,
            transport: &transport,
            events: &events,
            query: "q",
            now_unix_ms: 0,
            call_id: id,
            notify: None,
            session: None,
        })
        .collect();
    let args = json!({});
    let results = runtime().block_on(futures_util::future::join_all(
        envs.iter().map(|env| execute(tool, http, &args, env)),
    ));
    assert!(results
        .iter()
        .all(|r| r.as_ref().map(|o| &o.value) == Ok(&json!(1))));
    assert_eq!(peak.load(Ordering::SeqCst), 8);
}

#[test]
fn urlencode_on_an_argument_encodes_once() {
    let server = TestServer::start(|req| Response::json(200, json!(req.raw_target)));
    let reg = spec(&[], &format!("input: {{ type: object, properties: {{ c: {{ type: string }} }} }}\nrequest: {{ url: \"{}/w?city={{{{ args.c | urlencode }}}}&n={{{{ 3 }}}}\" }}", server.base_url()));
    assert_eq!(
        call(&reg, json!({"c": "São Paulo&x=1"})).unwrap(),
        json!("/w?city=S%C3%A3o%20Paulo%26x%3D1&n=3")
    );
}

/// Issue 36 §2: a template that reads the whole `secrets` map (which `check` refuses, E046)
/// still finds only the secrets its tool names when it runs: another tool's key never goes out.
#[test]
fn a_template_reading_the_whole_secrets_map_sees_only_the_secrets_its_tool_names() {
    let server = TestServer::start(|req| Response::json(200, json!({ "q": req.query })));
    let mut reg = spec(
        &[],
        &format!(
            "input: {{ type: object, properties: {{}} }}\n\
             request:\n  url: \"{}/w\"\n  headers: {{ Authorization: \"Bearer {{{{ secrets.KEY }}}}\" }}",
            server.base_url()
        ),
    );
    let every = reg.templates.add("{{ secrets | items }}").unwrap();
    let whole = reg.templates.add("{{ secrets }}").unwrap();
    let Some(ToolKind::Http(http)) = reg
        .tools
        .iter_mut()
        .find(|t| t.name == "t")
        .map(|t| &mut t.kind)
    else {
        panic!("no http tool t")
    };
    http.query
        .push(("all".into(), crate::templates::TValue::Text(every)));
    http.query
        .push(("map".into(), crate::templates::TValue::Text(whole)));
    let transport = Transport::live();
    let mut secrets = secrets();
    secrets.insert("PAYMENTS_KEY", "pk-live-payments-0123456789".into());
    let tool = reg.tool("t").unwrap();
    let ToolKind::Http(http) = &tool.kind else {
        panic!("not http")
    };
    let env = ToolEnv {
        registry: &reg,
        secrets: &secrets,
        transport: &transport,
        events: &Events::none(),
        query: "q",
        now_unix_ms: 0,
        call_id: "call_1",
        notify: None,
        session: None,
    };
    runtime()
        .block_on(execute(tool, http, &json!({}), &env))
        .unwrap();
    let sent = server.requests();
    let target = &sent[0].raw_target;
    assert!(
        !target.contains("pk-live") && !target.contains("PAYMENTS"),
        "{target}"
    );
    assert!(target.contains("KEY"), "{target}");
}
