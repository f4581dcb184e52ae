//! Issue 12 §2 and §6: no argument changes a URL's structure, whatever the template's shape, and
//! refusals say why. Through the real binary, against the test server on 127.0.0.1 only.

mod support;

use serde_json::{json, Value};
use support::{Response, TestServer};

/// A spec with one HTTP tool `t` (the given `request:` flow mapping, input properties `props`),
/// called once by the scripted model with `args` (a YAML flow mapping).
fn spec(allow: &[String], request: &str, props: &[&str], args: &str) -> String {
    let hosts: Vec<String> = allow.iter().map(|h| format!("\"{h}\"")).collect();
    let props: Vec<String> = props
        .iter()
        .map(|p| format!("{p}: {{ type: string }}"))
        .collect();
    format!(
        "version: 1\nname: url_structure\nsecrets: [BASE]\n\
         policy: {{ network: {{ allow_hosts: [{}] }} }}\n\
         tools:\n  t:\n    description: The HTTP tool under test.\n    kind: http\n\
         \x20   input: {{ type: object, properties: {{ {} }} }}\n    request: {request}\n\
         models:\n  scripted:\n    kind: scripted\n    scripts:\n      - turns:\n\
         \x20         - tool_calls: [{{ name: t, arguments: {args} }}]\n\
         \x20         - answer: done\n",
        hosts.join(", "),
        props.join(", "),
    )
}

fn run(spec_text: &str, base: &str) -> support::Output {
    let dir = support::temp_dir("url_structure");
    let path = support::write(&dir, "spec.yaml", spec_text);
    support::run(
        support::toolrun()
            .env("BASE", base)
            .arg("run")
            .arg(&path)
            .args(["--query", "go", "--json"]),
    )
}

fn check(spec_text: &str) -> support::Output {
    let dir = support::temp_dir("url_structure");
    let path = support::write(&dir, "spec.yaml", spec_text);
    support::run(support::toolrun().arg("check").arg(&path))
}

fn first_error(trace: &Value) -> &Value {
    assert_eq!(trace["tool_results"][0]["status"], "error", "{trace:#}");
    &trace["tool_errors"][0]
}

fn echo() -> TestServer {
    TestServer::start(|req| {
        Response::json(
            200,
            json!({"path": req.path, "target": req.raw_target, "query": req.query}),
        )
    })
}

#[test]
fn an_argument_after_a_secret_base_stays_one_path_segment() {
    let server = echo();
    let allow = vec![server.addr().to_string()];
    let text = spec(
        &allow,
        "{ url: \"{{ secrets.BASE }}/items/{{ args.id }}\" }",
        &["id"],
        "{ id: \"../../admin/delete?all=1#frag\" }",
    );
    let out = run(&text, &server.base_url());
    let trace = out.json();
    assert_eq!(trace["tool_results"][0]["status"], "ok", "{trace:#}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].raw_target,
        "/items/..%2F..%2Fadmin%2Fdelete%3Fall%3D1%23frag"
    );
    assert!(requests[0].query.is_empty());

    // `..` as a whole segment is refused, here as with a literal base.
    let text = spec(
        &allow,
        "{ url: \"{{ secrets.BASE }}/items/{{ args.id }}\" }",
        &["id"],
        "{ id: \"..\" }",
    );
    let out = run(&text, &server.base_url());
    assert_eq!(first_error(&out.json())["kind"], "invalid_arguments");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_secret_may_carry_the_scheme_host_and_a_base_path() {
    let server = echo();
    let allow = vec![server.addr().to_string()];
    let text = spec(
        &allow,
        "{ url: \"{{ secrets.BASE }}/items?q={{ args.q }}\" }",
        &["q"],
        "{ q: \"a&b=c\" }",
    );
    let out = run(&text, &server.url("/v1"));
    assert_eq!(out.json()["tool_results"][0]["status"], "ok");
    assert_eq!(server.requests()[0].raw_target, "/v1/items?q=a%26b%3Dc");

    // The host a secret names is still held to the allow-list on every call.
    let other = echo();
    let out = run(&text, &other.url("/v1"));
    assert_eq!(first_error(&out.json())["kind"], "denied");
    assert!(other.requests().is_empty());
}

#[test]
fn arguments_in_the_scheme_host_or_port_are_check_errors() {
    let server = echo();
    let allow = vec![server.addr().to_string()];
    for url in [
        "http://{{ args.h }}/x",
        "http://127.0.0.1:{{ args.h }}/x",
        "{{ args.h }}/x",
        "{{ secrets.BASE }}{{ args.h }}",
        "http://127.0.0.1{{ args.h }}",
    ] {
        let text = spec(&allow, &format!("{{ url: \"{url}\" }}"), &["h"], "{ h: x }");
        let out = check(&text);
        out.assert_code(1);
        assert!(
            out.stderr.contains("E020") && out.stderr.contains("scheme, host or port"),
            "{url}\n{}",
            out.stderr
        );
        // `run` compiles the same way: nothing is sent.
        run(&text, &server.base_url()).assert_code(1);
    }
    assert!(server.requests().is_empty());
}

#[test]
fn a_whole_url_argument_is_checked_on_every_call_and_redirect() {
    let server = TestServer::start(|req| match req.path.as_str() {
        "/away" => Response::redirect(
            302,
            &format!(
                "http://127.0.0.1:{}/x",
                req.query_param("port").unwrap_or("9")
            ),
        ),
        "/ftp" => Response::redirect(302, "ftp://127.0.0.1/file"),
        _ => Response::json(200, json!("reached")),
    });
    let other = echo();
    let allow = vec![server.addr().to_string()];
    let request = "{ url: \"{{ args.url }}\" }";

    let text = spec(
        &allow,
        request,
        &["url"],
        &format!("{{ url: \"{}\" }}", server.url("/ok")),
    );
    let out = run(&text, "unused");
    assert_eq!(out.json()["tool_results"][0]["result"], "reached");

    for url in [
        other.url("/x"),
        format!("http://{}@{}/x", server.addr(), other.addr()),
    ] {
        let text = spec(&allow, request, &["url"], &format!("{{ url: \"{url}\" }}"));
        let trace = run(&text, "unused").json();
        assert_eq!(first_error(&trace)["kind"], "denied", "{url}");
    }
    let away = server.url(&format!("/away?port={}", other.addr().port()));
    let text = spec(&allow, request, &["url"], &format!("{{ url: \"{away}\" }}"));
    assert_eq!(first_error(&run(&text, "unused").json())["kind"], "denied");
    assert!(other.requests().is_empty());

    // Without an explicit allow-list, a whole-URL argument is a check error.
    let text = spec(&[], request, &["url"], "{ url: x }");
    let out = check(&text);
    out.assert_code(1);
    assert!(
        out.stderr.contains("lets a template choose the host"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_redirect_to_another_scheme_is_reported_as_a_refused_scheme() {
    let server = TestServer::start(|_| Response::redirect(302, "ftp://127.0.0.1/file"));
    let allow = vec![server.addr().to_string(), "127.0.0.1".to_string()];
    let text = spec(
        &allow,
        &format!("{{ url: \"{}\" }}", server.url("/x")),
        &[],
        "{}",
    );
    let trace = run(&text, "unused").json();
    let e = first_error(&trace);
    assert_eq!(e["kind"], "denied");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(message.contains("`ftp:`"), "{message}");
    assert!(message.contains("only http and https"), "{message}");
    assert!(!message.contains("allowed hosts"), "{message}");
}
