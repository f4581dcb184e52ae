//! HTTP tools through the real binary, against the std-only test server on 127.0.0.1.
//!
//! Each test writes a spec whose scripted model calls the tool `t` once (or eight times), then
//! answers; the assertions read the trace printed by `toolrun run SPEC --query Q --json`.
//! Nothing here contacts an address outside 127.0.0.0/8.

mod support;

use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{refused_port, Response, TestServer};

const SECRET: &str = "sk-test-0a1b2c3d4e5f";

struct Spec<'a> {
    /// `policy.network.allow_hosts`; empty leaves the key out (hosts written in URLs are allowed).
    allow: Vec<String>,
    /// The YAML of tool `t` below `kind: http` (two-space indents, unindented).
    tool: &'a str,
    /// The scripted model's first turn: the calls, as a YAML flow list's items.
    calls: &'a str,
    /// A second turn's calls, made once the first turn's are answered (none when empty).
    then: &'a str,
}

impl Spec<'_> {
    fn yaml(&self) -> String {
        let policy = if self.allow.is_empty() {
            String::new()
        } else {
            let hosts: Vec<String> = self.allow.iter().map(|h| format!("\"{h}\"")).collect();
            format!(
                "policy:\n  network:\n    allow_hosts: [{}]\n",
                hosts.join(", ")
            )
        };
        let secrets = if self.tool.contains("secrets.") {
            "secrets: [API_KEY]\n"
        } else {
            ""
        };
        let tool: String = self.tool.lines().map(|l| format!("    {l}\n")).collect();
        // Every `args.X` the templates read must be a property of the input schema.
        let mut props: Vec<&str> = self
            .tool
            .split("args.")
            .skip(1)
            .map(|rest| {
                rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("")
            })
            .collect();
        props.sort();
        props.dedup();
        let props: Vec<String> = props.iter().map(|p| format!("{p}: {{}}")).collect();
        let then = if self.then.is_empty() {
            String::new()
        } else {
            format!("          - tool_calls: [{}]\n", self.then)
        };
        format!(
            "version: 1\nname: http_tools\n{secrets}{policy}\
             limits: {{ max_parallel_tools: 8, max_tool_calls: 8, max_steps: 4, run_timeout: 60s }}\n\
             tools:\n  t:\n    description: The HTTP tool under test.\n    kind: http\n    input: {{ type: object, properties: {{ {} }} }}\n{tool}\
             models:\n  scripted:\n    kind: scripted\n    scripts:\n      - turns:\n\
             \x20         - tool_calls: [{}]\n{then}\
             \x20         - answer: \"{{% if last.status == 'ok' %}}{{{{ last.result }}}}{{% else %}}{{{{ last.error.kind }}}}{{% endif %}}\"\n",
            props.join(", "),
            self.calls
        )
    }

    /// Runs the spec and returns its trace (the run itself must finish, whatever the tool did).
    fn run(&self) -> Value {
        self.run_with_secret(SECRET).0
    }

    /// Runs the spec with `API_KEY` set to `secret`: the trace, the output it came from, and
    /// the `--events` lines.
    fn run_with_secret(&self, secret: &str) -> (Value, support::Output, Vec<Value>) {
        let dir = support::temp_dir("http_tools");
        let path = support::write(&dir, "spec.yaml", &self.yaml());
        let events_path = dir.join("events.jsonl");
        let out = support::run(
            support::toolrun()
                .env("API_KEY", secret)
                .arg("run")
                .arg(&path)
                .args(["--query", "go", "--json", "--events"])
                .arg(&events_path),
        );
        let trace = out.json();
        let events = std::fs::read_to_string(&events_path).unwrap_or_default();
        assert!(
            !out.stdout.contains(secret)
                && !out.stderr.contains(secret)
                && !events.contains(secret),
            "the secret leaked\n{out:?}\n{events}"
        );
        let events = events
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (trace, out, events)
    }
}

fn one(tool: &str) -> Spec<'_> {
    Spec {
        allow: Vec::new(),
        tool,
        calls: "{ name: t, arguments: {} }",
        then: "",
    }
}

fn result(trace: &Value) -> &Value {
    assert_eq!(trace["tool_results"][0]["status"], "ok", "{trace:#}");
    &trace["tool_results"][0]["result"]
}

fn error(trace: &Value) -> &Value {
    assert_eq!(trace["tool_results"][0]["status"], "error", "{trace:#}");
    &trace["tool_errors"][0]
}

#[test]
fn success_with_pointer_extraction() {
    let server = TestServer::start(|_| {
        Response::json(
            200,
            json!({"current": {"temp_c": 21.5, "sky": "clear"}, "other": 1}),
        )
    });
    let tool = format!(
        "request: {{ url: \"{}/v1/weather\" }}\nresponse: {{ pointer: /current }}",
        server.base_url()
    );
    let trace = one(&tool).run();
    assert_eq!(result(&trace), &json!({"temp_c": 21.5, "sky": "clear"}));
    assert_eq!(trace["status"], "ok");

    let tool = format!(
        "request: {{ url: \"{}/v1/weather\" }}\nresponse: {{ pointer: /current/humidity }}",
        server.base_url()
    );
    let trace = one(&tool).run();
    let e = error(&trace);
    assert_eq!(e["kind"], "not_found");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("`/current` has the keys: temp_c, sky"),
        "{e}"
    );
}

#[test]
fn hostile_arguments_cannot_change_the_path_or_the_query() {
    let server =
        TestServer::start(|req| Response::json(200, json!({"path": req.path, "query": req.query})));
    let tool = format!(
        "request:\n  url: \"{}/v1/users/{{{{ args.name }}}}/profile?lang={{{{ args.lang | urlencode }}}}\"\n  query: {{ tag: \"{{{{ args.tag }}}}\" }}",
        server.base_url()
    );
    let spec = Spec {
        calls: r#"{ name: t, arguments: { name: "../admin?x=1", lang: "en&admin=1", tag: "a&b=c#d" } }"#,
        ..one(&tool)
    };
    let trace = spec.run();
    let r = result(&trace);
    assert_eq!(r["path"], "/v1/users/..%2Fadmin%3Fx%3D1/profile", "{r}");
    assert_eq!(
        r["query"],
        json!([["lang", "en&admin=1"], ["tag", "a&b=c#d"]])
    );
    assert_eq!(server.requests().len(), 1);

    // A value that is a whole `..` segment is refused before anything is sent.
    let spec = Spec {
        calls: r#"{ name: t, arguments: { name: "..", lang: en, tag: x } }"#,
        ..one(&tool)
    };
    assert_eq!(error(&spec.run())["kind"], "invalid_arguments");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_500_then_200_is_retried() {
    let server = TestServer::start(|req| match req.nth {
        1 => Response::text(500, "flaky"),
        _ => Response::json(200, json!({"ok": true})),
    });
    let tool = format!(
        "request: {{ url: \"{}/flaky\" }}\nretries: 2",
        server.base_url()
    );
    assert_eq!(result(&one(&tool).run()), &json!({"ok": true}));
    assert_eq!(server.hits("/flaky"), 2);
}

#[test]
fn a_500_forever_gives_up_after_retries_plus_one_attempts() {
    let server = TestServer::start(|_| Response::text(500, "database on fire"));
    let tool = format!(
        "request: {{ url: \"{}/broken\" }}\nretries: 2",
        server.base_url()
    );
    let trace = one(&tool).run();
    let e = error(&trace);
    assert_eq!(e["kind"], "http_status");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("HTTP 500")
            && message.contains("after 3 attempts")
            && message.contains("database on fire"),
        "{message}"
    );
    assert_eq!(e["details"]["status"], 500, "{e}");
    assert_eq!(e["details"]["attempts"], 3, "{e}");
    assert!(
        e["details"]["url"].as_str().unwrap().ends_with("/broken"),
        "{e}"
    );
    assert_eq!(server.hits("/broken"), 3);
    // The model saw the error kind and answered with it.
    assert_eq!(trace["final_output"], "http_status");
}

#[test]
fn a_429_waits_for_retry_after() {
    let server = TestServer::start(|req| match req.nth {
        1 => Response::text(429, "slow down").header("Retry-After", "1"),
        _ => Response::json(200, json!("fine")),
    });
    let tool = format!(
        "request: {{ url: \"{}/limited\" }}\nretries: 1",
        server.base_url()
    );
    let trace = one(&tool).run();
    assert_eq!(result(&trace), &json!("fine"));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        trace["tool_results"][0]["duration_ms"].as_f64().unwrap() >= 950.0,
        "{trace:#}"
    );
}

#[test]
fn retry_after_takes_all_three_http_date_forms() {
    // RFC 9110 §5.6.7: IMF-fixdate and the obsolete RFC 850 and asctime forms. A date in the
    // past means "now", so each is understood as a 0 ms wait (a date not understood: no wait).
    for date in [
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
    ] {
        let server = TestServer::start(move |_| {
            Response::text(429, "slow down").header("Retry-After", date)
        });
        let tool = format!(
            "request: {{ url: \"{}/limited\" }}\nretries: 0",
            server.base_url()
        );
        let e = error(&one(&tool).run()).clone();
        assert_eq!(e["kind"], "http_status", "{date}: {e}");
        assert_eq!(e["details"]["retry_after_ms"], 0, "{date}: {e}");
    }
}

#[test]
fn a_failed_post_is_not_retried() {
    let server = TestServer::start(|_| Response::text(503, "unavailable"));
    let tool = format!(
        "request: {{ method: POST, url: \"{}/send\", body: {{ to: \"{{{{ args.to }}}}\", n: \"{{{{ args.n }}}}\" }} }}\nretries: 3",
        server.base_url()
    );
    let spec = Spec {
        calls: "{ name: t, arguments: { to: a@example.com, n: 2 } }",
        ..one(&tool)
    };
    let e = error(&spec.run()).clone();
    assert_eq!(e["kind"], "http_status");
    assert_eq!(e["details"]["attempts"], 1);
    assert_eq!(server.hits("/send"), 1);
    // The body kept the argument's type.
    assert_eq!(
        server.requests()[0].json(),
        Some(json!({"to": "a@example.com", "n": 2}))
    );
}

#[test]
fn a_slow_server_times_out() {
    let server = TestServer::start(|_| Response::json(200, json!(1)).delay(Duration::from_secs(5)));
    let tool = format!(
        "request: {{ url: \"{}/slow\" }}\ntimeout: 400ms\nretries: 2",
        server.base_url()
    );
    let started = Instant::now();
    let trace = one(&tool).run();
    let e = error(&trace);
    assert_eq!(e["kind"], "timeout", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("0.4s timeout"),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[test]
fn a_slowly_trickled_body_arrives_whole() {
    let body = serde_json::to_string(&json!({"items": (0..200).collect::<Vec<_>>()})).unwrap();
    let len = body.len();
    let server = TestServer::start(move |_| {
        Response::text(200, body.clone())
            .header("Content-Type", "application/json")
            .trickle(64, Duration::from_millis(5))
    });
    let tool = format!(
        "request: {{ url: \"{}/trickle\" }}\ntimeout: 20s\nresponse: {{ pointer: /items/199 }}",
        server.base_url()
    );
    let trace = one(&tool).run();
    assert_eq!(result(&trace), &json!(199), "{len} bytes");
}

#[test]
fn a_huge_body_is_cut_at_max_bytes() {
    let server = TestServer::start(|_| Response::status(200).huge(1 << 30));
    let tool = format!(
        "request: {{ url: \"{}/huge\" }}\nresponse: {{ max_bytes: 2000 }}",
        server.base_url()
    );
    let trace = one(&tool).run();
    let r = result(&trace);
    assert_eq!(r["truncated"], true, "{r}");
    assert_eq!(r["bytes"], 2000);
    assert_eq!(r["total_bytes"], 1u64 << 30);
    assert!(r["body"].as_str().unwrap().starts_with("[1,1,1"));
}

#[test]
fn a_redirect_to_a_host_not_allowed_is_denied() {
    let server = TestServer::start(|req| match req.path.as_str() {
        "/moved" => Response::redirect(302, "/here"),
        "/here" => Response::json(200, json!("landed")),
        _ => Response::redirect(302, "http://localhost:9/steal"),
    });
    let tool = format!("request: {{ url: \"{}/moved\" }}", server.base_url());
    assert_eq!(result(&one(&tool).run()), &json!("landed"));

    let tool = format!("request: {{ url: \"{}/away\" }}", server.base_url());
    let trace = one(&tool).run();
    let e = error(&trace);
    assert_eq!(e["kind"], "denied");
    assert!(
        e["message"].as_str().unwrap().contains("localhost:9"),
        "{e}"
    );
    assert_eq!(server.hits("/away"), 1);
}

#[test]
fn a_non_json_body_comes_back_as_text() {
    let server = TestServer::start(|_| {
        Response::text(200, "It is sunny.\n").header("Content-Type", "text/plain")
    });
    let tool = format!("request: {{ url: \"{}/text\" }}", server.base_url());
    assert_eq!(result(&one(&tool).run()), &json!("It is sunny.\n"));
}

#[test]
fn connection_refused_is_a_network_error() {
    let port = refused_port();
    let tool = format!("request: {{ url: \"http://127.0.0.1:{port}/x\" }}\nretries: 1");
    let trace = one(&tool).run();
    let e = error(&trace);
    assert_eq!(e["kind"], "network", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains(&format!("127.0.0.1:{port}")),
        "{e}"
    );
    assert_eq!(e["details"]["attempts"], 2);
}

#[test]
fn a_secret_echoed_by_the_server_is_redacted() {
    let server = TestServer::start(|req| {
        Response::json(
            200,
            json!({"you_sent": req.header("authorization"), "target": req.raw_target}),
        )
    });
    let tool = format!(
        "request: {{ url: \"{}/echo?key={{{{ secrets.API_KEY }}}}\", headers: {{ Authorization: \"Bearer {{{{ secrets.API_KEY }}}}\" }} }}",
        server.base_url()
    );
    // `run` also asserts that the secret appears nowhere in stdout or stderr.
    let trace = one(&tool).run();
    assert_eq!(
        result(&trace),
        &json!({"you_sent": "Bearer ***", "target": "/echo?key=***"})
    );
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );
}

#[test]
fn eight_parallel_calls_are_in_flight_together() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (now, max) = (Arc::clone(&in_flight), Arc::clone(&peak));
    let server = TestServer::start(move |_| {
        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
        max.fetch_max(n, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(200));
        now.fetch_sub(1, Ordering::SeqCst);
        Response::json(200, json!("done"))
    });
    let tool = format!(
        "request: {{ url: \"{}/slow/{{{{ args.n }}}}\" }}\ntimeout: 10s",
        server.base_url()
    );
    let calls: Vec<String> = (1..=8)
        .map(|n| format!("{{ name: t, arguments: {{ n: {n} }} }}"))
        .collect();
    let calls = calls.join(", ");
    let trace = Spec {
        calls: &calls,
        ..one(&tool)
    }
    .run();
    let results = trace["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 8);
    assert!(results.iter().all(|r| r["status"] == "ok"), "{trace:#}");
    // Server side: every request was being answered while all the others were.
    assert_eq!(peak.load(Ordering::SeqCst), 8);
}

#[test]
fn without_allow_hosts_only_the_hosts_written_in_urls_are_reached() {
    let server = TestServer::start(|req| match req.path.as_str() {
        "/ok" => Response::json(200, json!("reached")),
        _ => Response::redirect(307, "http://127.0.0.2/"),
    });
    let tool = format!("request: {{ url: \"{}/ok\" }}", server.base_url());
    assert_eq!(result(&one(&tool).run()), &json!("reached"));
    let tool = format!("request: {{ url: \"{}/elsewhere\" }}", server.base_url());
    assert_eq!(error(&one(&tool).run())["kind"], "denied");
}

#[test]
fn with_allow_hosts_listed_an_unlisted_port_is_denied() {
    let server = TestServer::start(|_| Response::json(200, json!(1)));
    let other = TestServer::start(|_| Response::json(200, json!(2)));
    // The whole URL comes from an argument; only the first server's port is listed.
    let tool = "request: { url: \"{{ args.url }}\" }";
    let allow = vec![server.addr().to_string()];
    let calls = format!(
        "{{ name: t, arguments: {{ url: \"{}\" }} }}",
        server.url("/x")
    );
    assert_eq!(
        result(
            &Spec {
                allow: allow.clone(),
                tool,
                calls: &calls,
                then: "",
            }
            .run()
        ),
        &json!(1)
    );
    let calls = format!(
        "{{ name: t, arguments: {{ url: \"{}\" }} }}",
        other.url("/x")
    );
    assert_eq!(
        error(
            &Spec {
                allow,
                tool,
                calls: &calls,
                then: "",
            }
            .run()
        )["kind"],
        "denied"
    );
    assert!(other.requests().is_empty());
}

#[test]
fn a_long_download_reports_progress_events() {
    // 1 MiB, trickled: the watcher of `--events` sees bytes arrive before the result.
    let server = TestServer::start(|_| {
        Response::status(200)
            .huge(1 << 20)
            .trickle(64 << 10, std::time::Duration::from_millis(5))
    });
    let tool = format!(
        "request: {{ url: \"{}/big\" }}\nresponse: {{ max_bytes: 4194304 }}",
        server.base_url()
    );
    let spec = one(&tool);
    let dir = support::temp_dir("http_progress");
    let path = support::write(&dir, "spec.yaml", &spec.yaml());
    let events_path = dir.join("events.jsonl");
    let out = support::run(
        support::toolrun()
            .arg("run")
            .arg(&path)
            .args(["--query", "go", "--events"])
            .arg(&events_path),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let events = support::events_in(&events_path);
    let progress: Vec<u64> = events
        .iter()
        .filter(|e| e["event"] == "tool_progress")
        .map(|e| e["bytes"].as_u64().unwrap())
        .collect();
    assert!(
        progress.len() >= 4,
        "expected several progress events, got {progress:?}"
    );
    assert!(
        progress.windows(2).all(|w| w[0] < w[1]),
        "bytes only grow: {progress:?}"
    );
    let finished = events
        .iter()
        .position(|e| e["event"] == "tool_finished")
        .unwrap();
    let last_progress = events
        .iter()
        .rposition(|e| e["event"] == "tool_progress")
        .unwrap();
    assert!(last_progress < finished, "progress comes before the result");
}

#[test]
fn an_unset_optional_argument_leaves_its_header_out_as_it_does_a_query_parameter() {
    let server = TestServer::start(|_| Response::json(200, json!({"ok": true})));
    let tool = format!(
        "request: {{ url: \"{}/trace\", query: {{ q: \"{{{{ args.q }}}}\" }}, headers: {{ X-Trace: \"{{{{ args.q }}}}\", X-Fixed: fixed }} }}",
        server.base_url()
    );
    let spec = |calls| Spec {
        allow: vec![],
        tool: &tool,
        calls,
        then: "",
    };
    let trace = spec("{ name: t, arguments: {} }").run();
    assert_eq!(trace["status"], "ok", "{trace:#}");
    let trace = spec("{ name: t, arguments: { q: abc } }").run();
    assert_eq!(trace["status"], "ok", "{trace:#}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].header("x-trace"), None, "{:?}", requests[0]);
    assert_eq!(requests[0].header("x-fixed"), Some("fixed"));
    assert!(requests[0].query.is_empty(), "{:?}", requests[0]);
    assert_eq!(requests[1].header("x-trace"), Some("abc"));
    assert_eq!(
        requests[1].query,
        vec![("q".to_string(), "abc".to_string())]
    );
}

#[test]
fn compressed_bodies_are_decoded() {
    for enc in ["gzip", "deflate", "br", "zstd"] {
        let server = TestServer::start(move |req| {
            let accepts = req.header("accept-encoding").unwrap_or("");
            if !accepts.contains(enc) {
                return Response::text(400, format!("no {enc} in Accept-Encoding: {accepts}"));
            }
            Response::json(200, json!({"sky": "sunny", "enc": enc})).encoded(enc)
        });
        let tool = format!("request: {{ url: \"{}/w\" }}", server.base_url());
        assert_eq!(
            result(&one(&tool).run()),
            &json!({"sky": "sunny", "enc": enc}),
            "{enc}"
        );
    }
}

#[test]
fn a_gzip_bomb_is_cut_at_max_bytes_of_decoded_data() {
    // 1 GiB of zeros as 1024 gzip members of 1 MiB each: about 1 MB on the wire.
    let member = support::http::gzip(&vec![0u8; 1 << 20]);
    let bomb = member.repeat(1024);
    assert!(bomb.len() < 2 << 20, "{}", bomb.len());
    let server = TestServer::start(move |_| {
        Response::status(200)
            .header("Content-Type", "application/octet-stream")
            .body(bomb.clone())
            .header("Content-Encoding", "gzip")
    });
    let tool = format!(
        "request: {{ url: \"{}/bomb\" }}\nresponse: {{ max_bytes: 2000 }}",
        server.base_url()
    );
    let trace = one(&tool).run();
    let r = result(&trace);
    assert_eq!(r["truncated"], true, "{r}");
    assert_eq!(r["bytes"], 2000);
    assert!(
        r.get("total_bytes").is_none(),
        "the wire length is not the body's: {r}"
    );
}

#[test]
fn a_corrupt_compressed_body_is_a_clear_error() {
    let server = TestServer::start(|_| {
        Response::text(200, "not gzip at all").header("Content-Encoding", "gzip")
    });
    let tool = format!(
        "request: {{ url: \"{}/bad\" }}\nretries: 0",
        server.base_url()
    );
    let trace = one(&tool).run();
    let e = error(&trace);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("gzip body does not decode"),
        "{e}"
    );
}

#[test]
fn a_successful_call_shows_method_url_and_status_with_secrets_masked() {
    let server = TestServer::start(|req| match req.path.as_str() {
        "/old" => Response::redirect(302, "/v1/weather"),
        _ => Response::json(200, json!({"sky": "clear"})),
    });
    // A secret that every encoding spells differently: percent-encoded in the path, form-encoded
    // (`+` for the space) in the query.
    let secret = "p@ss w/rd+k3y&x=1";
    let tool = format!(
        "request:\n  url: \"{}/v1/weather/{{{{ secrets.API_KEY }}}}\"\n  query: {{ key: \"{{{{ secrets.API_KEY }}}}\", city: Oslo }}",
        server.base_url()
    );
    let (trace, out, events) = one(&tool).run_with_secret(secret);
    assert_eq!(result(&trace), &json!({"sky": "clear"}));
    let sent = &server.requests()[0];
    assert!(sent.raw_target.contains("p%40ss"), "{}", sent.raw_target);
    assert_eq!(
        trace["tool_results"][0]["http"],
        json!({
            "method": "GET",
            "url": format!("{}/v1/weather/***?key=***&city=Oslo", server.base_url()),
            "status": 200
        }),
        "{trace:#}"
    );
    for spelling in ["p@ss", "p%40ss", "w%2Frd", "k3y"] {
        assert!(!out.stdout.contains(spelling), "{spelling} leaked\n{out:?}");
    }
    // `--events` carries the same summary, masked alike.
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "tool_finished")
        .collect();
    assert_eq!(finished.len(), 1, "{events:#?}");
    assert_eq!(
        finished[0]["http"], trace["tool_results"][0]["http"],
        "{events:#?}"
    );
    for spelling in ["p@ss", "p%40ss", "w%2Frd", "k3y"] {
        assert!(
            !serde_json::to_string(&events).unwrap().contains(spelling),
            "{spelling} leaked\n{events:#?}"
        );
    }

    // Redirects followed and retries are counted; the URL is the one that answered.
    let tool = format!("request: {{ url: \"{}/old\" }}", server.base_url());
    let trace = one(&tool).run();
    assert_eq!(
        trace["tool_results"][0]["http"],
        json!({"method": "GET", "url": format!("{}/v1/weather", server.base_url()), "status": 200, "redirects": 1}),
        "{trace:#}"
    );
    let flaky = TestServer::start(|req| match req.nth {
        1 => Response::text(503, "busy"),
        _ => Response::json(200, json!(1)),
    });
    let tool = format!("request: {{ url: \"{}/f\" }}\nretries: 1", flaky.base_url());
    let trace = one(&tool).run();
    assert_eq!(trace["tool_results"][0]["http"]["attempts"], 2, "{trace:#}");
    assert_eq!(trace["tool_results"][0]["http"]["status"], 200);
}

#[test]
fn the_trace_shows_the_method_sent_after_a_redirect() {
    let server = TestServer::start(|req| match req.path.as_str() {
        "/see-other" => Response::redirect(303, "/done"),
        "/found" => Response::redirect(302, "/done"),
        "/temporary" => Response::redirect(307, "/done"),
        _ => Response::json(200, json!(req.method)),
    });
    // 303 always, and 302 after a POST, make the next request a GET; 307 repeats the POST.
    for (path, sent) in [
        ("see-other", "GET"),
        ("found", "GET"),
        ("temporary", "POST"),
    ] {
        let tool = format!(
            "request: {{ method: POST, url: \"{}/{path}\", body: {{ a: 1 }} }}",
            server.base_url()
        );
        let trace = one(&tool).run();
        assert_eq!(result(&trace), &json!(sent), "{path}");
        assert_eq!(
            trace["tool_results"][0]["http"],
            json!({"method": sent, "url": server.url("/done"), "status": 200, "redirects": 1}),
            "{path}: {trace:#}"
        );
    }
    // A failure after the redirect names the method that failed too.
    let failing = TestServer::start(|req| match req.path.as_str() {
        "/see-other" => Response::redirect(303, "/gone"),
        _ => Response::text(404, "no such thing"),
    });
    let tool = format!(
        "request: {{ method: POST, url: \"{}/see-other\", body: {{ a: 1 }} }}",
        failing.base_url()
    );
    let e = error(&one(&tool).run()).clone();
    assert_eq!(e["details"]["method"], "GET", "{e}");
    assert!(e["message"].as_str().unwrap().starts_with("GET "), "{e}");
}

/// A std-only upstream on 127.0.0.1 that keeps every request's bytes as they came and counts
/// connections: each request is answered `200` with `{"n": CONNECTION}`, and, with
/// `close_after_each`, its connection then closed without a `Connection: close` said (a server
/// whose keep-alive timeout is shorter than the client's).
struct RawUpstream {
    port: u16,
    requests: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    accepted: Arc<AtomicUsize>,
}

/// When `raw_upstream` closes a connection.
#[derive(Clone, Copy, PartialEq)]
enum Close {
    /// Never: it keeps every connection alive.
    Never,
    /// After each answer, without saying so (no `Connection: close`).
    AfterAnswer,
    /// On its first connection, once the second request has arrived, without answering it (it
    /// closed the idle connection as the request came).
    SecondUnanswered,
}

fn raw_upstream(close: Close) -> RawUpstream {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("addr").port();
    let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
    let accepted = Arc::new(AtomicUsize::new(0));
    let (log, count) = (Arc::clone(&requests), Arc::clone(&accepted));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let n = count.fetch_add(1, Ordering::SeqCst) + 1;
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                for i in 0.. {
                    let mut raw = Vec::new();
                    let mut length = 0;
                    loop {
                        let start = raw.len();
                        if reader.read_until(b'\n', &mut raw).unwrap_or(0) == 0 {
                            return;
                        }
                        let line = String::from_utf8_lossy(&raw[start..]).to_ascii_lowercase();
                        if let Some(v) = line.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    raw.extend_from_slice(&body);
                    log.lock().unwrap().push(raw);
                    if close == Close::SecondUnanswered && n == 1 && i == 1 {
                        return;
                    }
                    let body = format!("{{\"n\":{n}}}");
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).is_err() || close == Close::AfterAnswer {
                        return;
                    }
                }
            });
        }
    });
    RawUpstream {
        port,
        requests,
        accepted,
    }
}

/// The bytes of a plain-HTTP tool's request, exactly: the request's own headers in order, then
/// the ones toolrun adds (`accept-encoding`, `host` with the port, `content-length`), and the
/// path and query as the target. A host name (`localhost`) is resolved and connected to.
#[test]
fn the_request_goes_out_byte_for_byte() {
    let up = raw_upstream(Close::Never);
    let tool = format!(
        "request:\n  method: POST\n  url: \"http://localhost:{}/v1/items\"\n  query: {{ q: \"a b\", n: \"{{{{ args.n }}}}\" }}\n  headers: {{ X-Trace: abc, Authorization: \"Bearer {{{{ secrets.API_KEY }}}}\" }}\n  body: {{ n: \"{{{{ args.n }}}}\" }}",
        up.port
    );
    let spec = Spec {
        calls: "{ name: t, arguments: { n: 7 } }",
        ..one(&tool)
    };
    assert_eq!(result(&spec.run()), &json!({"n": 1}));
    let sent = up.requests.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    let expected = format!(
        "POST /v1/items?q=a+b&n=7 HTTP/1.1\r\n\
         x-trace: abc\r\n\
         authorization: Bearer {SECRET}\r\n\
         content-type: application/json\r\n\
         accept: application/json, text/*;q=0.9, */*;q=0.5\r\n\
         user-agent: toolrun/{}\r\n\
         accept-encoding: gzip, br, zstd, deflate\r\n\
         host: localhost:{}\r\n\
         content-length: 7\r\n\
         \r\n\
         {{\"n\":7}}",
        env!("CARGO_PKG_VERSION"),
        up.port
    );
    assert_eq!(String::from_utf8_lossy(&sent[0]), expected);
}

/// Runs `spec`, which makes two calls, and checks that both succeeded.
fn two_calls_both_ok(spec: Spec<'_>) {
    let trace = spec.run();
    let results = trace["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{trace:#}");
    assert!(results.iter().all(|r| r["status"] == "ok"), "{trace:#}");
}

/// Calls one after the other share one kept-alive connection.
#[test]
fn calls_one_after_another_reuse_one_connection() {
    let server = TestServer::start(|req| Response::json(200, json!(req.connection)));
    let tool = format!("request: {{ url: \"{}/x\" }}", server.base_url());
    two_calls_both_ok(Spec {
        then: "{ name: t, arguments: {} }",
        ..one(&tool)
    });
    assert_eq!(server.hits("/x"), 2);
    assert_eq!(server.connections(), 1);
}

/// A server that closes each connection after its answer, without saying so: the next call
/// does not fail on the closed connection, it goes out on a new one.
#[test]
fn a_connection_the_server_closed_while_idle_is_not_a_failed_call() {
    let up = raw_upstream(Close::AfterAnswer);
    let tool = format!("request: {{ url: \"http://127.0.0.1:{}/x\" }}", up.port);
    let trace = Spec {
        then: "{ name: t, arguments: {} }",
        ..one(&tool)
    }
    .run();
    let results = trace["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{trace:#}");
    assert_eq!(results[0]["result"], json!({"n": 1}), "{trace:#}");
    assert_eq!(results[1]["result"], json!({"n": 2}), "{trace:#}");
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2);
    assert_eq!(up.requests.lock().unwrap().len(), 2);
}

/// The same race lost later: the server closed the kept-alive connection after the request had
/// reached it. A GET goes out again on a new connection; a POST, which the server may have acted
/// on, fails rather than being sent twice.
#[test]
fn a_request_the_server_dropped_on_a_reused_connection_is_sent_again_only_if_idempotent() {
    let up = raw_upstream(Close::SecondUnanswered);
    let tool = format!("request: {{ url: \"http://127.0.0.1:{}/x\" }}", up.port);
    two_calls_both_ok(Spec {
        then: "{ name: t, arguments: {} }",
        ..one(&tool)
    });
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2);
    assert_eq!(up.requests.lock().unwrap().len(), 3);
    let up = raw_upstream(Close::SecondUnanswered);
    let tool = format!(
        "request: {{ url: \"http://127.0.0.1:{}/x\", method: POST }}",
        up.port
    );
    let trace = Spec {
        then: "{ name: t, arguments: {} }",
        ..one(&tool)
    }
    .run();
    let results = trace["tool_results"].as_array().unwrap();
    assert_eq!(results[0]["status"], "ok", "{trace:#}");
    assert_eq!(results[1]["status"], "error", "{trace:#}");
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(up.requests.lock().unwrap().len(), 2);
}

/// `spec` run with `--approve t` (a tool with side effects needs it): the trace.
fn run_approved(spec: &Spec<'_>) -> Value {
    let dir = support::temp_dir("http_tools");
    let path = support::write(&dir, "spec.yaml", &spec.yaml());
    let out = support::run(support::toolrun().arg("run").arg(&path).args([
        "--query",
        "go",
        "--json",
        "--approve",
        "t",
    ]));
    out.json()
}

/// The same race, where the dropped request was a PUT or DELETE the server may have carried
/// out (a payment deleted, its answer lost), or any request of a tool with side effects: it is
/// not sent again. The call fails, and the server saw the request once.
#[test]
fn a_request_the_server_may_have_acted_on_is_never_sent_again() {
    for (method, extra) in [
        ("PUT", ""),
        ("DELETE", ""),
        ("GET", "\nside_effects: true"),
        ("GET", "\nidempotent: false"),
    ] {
        let up = raw_upstream(Close::SecondUnanswered);
        let tool = format!(
            "request: {{ url: \"http://127.0.0.1:{}/payments/7\", method: {method} }}{extra}",
            up.port
        );
        let trace = run_approved(&Spec {
            then: "{ name: t, arguments: {} }",
            ..one(&tool)
        });
        let results = trace["tool_results"].as_array().unwrap();
        assert_eq!(results.len(), 2, "{method}{extra}: {trace:#}");
        assert_eq!(results[0]["status"], "ok", "{method}{extra}: {trace:#}");
        assert_eq!(results[1]["status"], "error", "{method}{extra}: {trace:#}");
        assert_eq!(results[1]["error"]["kind"], "network", "{trace:#}");
        let sent = up.requests.lock().unwrap().clone();
        assert_eq!(sent.len(), 2, "{method}{extra}: sent once each");
        assert_eq!(up.accepted.load(Ordering::SeqCst), 1, "{method}{extra}");
    }
}

/// Credentials in the URL go as `Authorization: Basic`, and a connection opened with one user's
/// is never lent to another's request: each user's calls get a connection of their own.
#[test]
fn connections_are_pooled_by_the_urls_credentials() {
    let server = TestServer::start(|req| {
        Response::json(
            200,
            json!({ "auth": req.header("authorization"), "connection": req.connection }),
        )
    });
    let tool = |name: &str, user: &str| {
        format!(
            "  {name}:\n    description: Reads x as {name}.\n    kind: http\n    input: {{ type: object, properties: {{}} }}\n    request: {{ url: \"http://{user}@{}/x\" }}\n",
            server.addr()
        )
    };
    let yaml = format!(
        "version: 1\nname: users\ntools:\n{}{}models:\n  m:\n    kind: scripted\n    scripts:\n      - turns:\n          - tool_calls: [{{ name: alice, arguments: {{}} }}]\n          - tool_calls: [{{ name: bob, arguments: {{}} }}]\n          - tool_calls: [{{ name: alice, arguments: {{}} }}]\n          - answer: done\n",
        tool("alice", "alice:pw%201"),
        tool("bob", "bob:pw2"),
    );
    let dir = support::temp_dir("http_tools");
    let path = support::write(&dir, "spec.yaml", &yaml);
    let out = support::run(
        support::toolrun()
            .arg("run")
            .arg(&path)
            .args(["--query", "go", "--json"]),
    );
    let trace = out.json();
    let results = trace["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{trace:#}");
    let seen = |i: usize, key: &str| results[i]["result"][key].clone();
    assert_eq!(seen(0, "auth"), "Basic YWxpY2U6cHcgMQ==", "{trace:#}");
    assert_eq!(seen(1, "auth"), "Basic Ym9iOnB3Mg==", "{trace:#}");
    assert_ne!(
        seen(0, "connection"),
        seen(1, "connection"),
        "bob's request went over alice's connection: {trace:#}"
    );
    assert_eq!(seen(0, "connection"), seen(2, "connection"), "{trace:#}");
    assert_eq!(server.connections(), 2);
}

/// Two calls at once get a connection each: the server answers neither until both are in, so
/// one waiting behind the other on a shared connection would time out.
#[test]
fn calls_at_once_get_a_connection_each() {
    let arrived = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&arrived);
    let server = TestServer::start(move |req| {
        seen.fetch_add(1, Ordering::SeqCst);
        let start = Instant::now();
        while seen.load(Ordering::SeqCst) < 2 && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(5));
        }
        Response::json(200, json!(req.connection))
    });
    let tool = format!(
        "request: {{ url: \"{}/x\" }}\ntimeout: 10s",
        server.base_url()
    );
    two_calls_both_ok(Spec {
        calls: "{ name: t, arguments: {} }, { name: t, arguments: {} }",
        ..one(&tool)
    });
    assert_eq!(server.connections(), 2);
}

/// Issue 36: a 307 or 308 repeats the request body. Headers holding a secret were dropped when
/// a redirect changed origin, but a body rendered from `{{ secrets.NAME }}` went on to the
/// other (allowed) origin; now such a redirect is refused, naming where it led.
#[test]
fn a_body_holding_a_secret_is_not_repeated_to_another_origin() {
    let other = TestServer::start(|req| Response::json(200, json!({"got": req.text()})));
    let away = other.url("/landing");
    let server = TestServer::start(move |req| match req.path.as_str() {
        "/307" => Response::redirect(307, &away),
        "/308" => Response::redirect(308, &away),
        "/same" => Response::redirect(307, "/landing"),
        _ => Response::json(200, json!({"here": req.text()})),
    });
    let allow = vec![server.addr().to_string(), other.addr().to_string()];
    let tool = |path: &str, body: &str| {
        format!(
            "request: {{ method: POST, url: \"{}{path}\", headers: {{ Authorization: \"Bearer {{{{ secrets.API_KEY }}}}\" }}, body_text: \"{body}\" }}",
            server.base_url()
        )
    };
    for status in ["307", "308"] {
        let tool = tool(&format!("/{status}"), "key={{ secrets.API_KEY }}");
        let trace = Spec {
            allow: allow.clone(),
            tool: &tool,
            calls: "{ name: t, arguments: {} }",
            then: "",
        }
        .run();
        let e = error(&trace);
        assert_eq!(e["kind"], "denied", "{e}");
        let message = e["message"].as_str().unwrap();
        assert!(message.contains(&other.url("/landing")), "{e}");
        assert!(message.contains("`API_KEY`"), "{e}");
        assert!(message.contains(status), "{e}");
        assert_eq!(
            e["details"]["redirected_from"],
            server.url(&format!("/{status}"))
        );
    }
    assert!(other.requests().is_empty(), "{:?}", other.requests());

    // The same origin gets the body again; another one gets a body without a secret (the
    // header that holds one is dropped).
    let tool_same = tool("/same", "key={{ secrets.API_KEY }}");
    let plain = tool("/307", "plain");
    for (tool, want) in [
        (&tool_same, json!({"here": "key=***"})),
        (&plain, json!({"got": "plain"})),
    ] {
        let trace = Spec {
            allow: allow.clone(),
            tool,
            calls: "{ name: t, arguments: {} }",
            then: "",
        }
        .run();
        assert_eq!(result(&trace), &want);
    }
    let reached = other.requests();
    assert_eq!(reached.len(), 1);
    assert_eq!(reached[0].header("authorization"), None);
    assert!(!reached[0].text().contains(SECRET));
}
