//! Secrets never leave toolrun, in any spelling: the leaks of issue 12 §1, each reproduced
//! through the real binary against a real HTTP server on 127.0.0.1.
//!
//! Every output is checked with the masker's own contract (`toolrun::fuzzing::decodings`): as
//! is, percent-decoded (`+` as a space or not), JSON- and HTML-unescaped, and base64-decoded
//! at every offset, no output may yield the secret.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::{run, toolrun, Response, TestServer};

/// Every character a URL, a form or JSON treats specially, mixed with unreserved ones.
const SECRET: &str = "Zq+8/a=b c&d?e-f.g_h~i";
/// The first characters of the secret in the spellings the server below uses: a prefix that
/// survives a cut is still a leak.
const PREFIXES: &[&str] = &["Zq+8", "Zq%2B8", "Zq%2b8", "WnErOC9h", "Zq\\u002b8"];

fn base64(bytes: &[u8], url_safe: bool, pad: bool) -> String {
    let mut s = toolrun::redact::base64(bytes, url_safe);
    while pad && s.len() % 4 != 0 {
        s.push('=');
    }
    s
}

/// The secret as a careless server echoes it: partly percent-encoded with lower-case hex and
/// `+` for the space, JSON-escaped, and base64 of `user:secret` in both alphabets.
fn echoes(secret: &str) -> Vec<String> {
    let partly = secret
        .replace('+', "%2b")
        .replace('=', "%3d")
        .replace(' ', "+")
        .replace('?', "%3F");
    let json = secret.replace('&', "\\u0026").replace('/', "\\/");
    let basic = format!("user:{secret}");
    vec![
        partly,
        json,
        base64(basic.as_bytes(), false, true),
        base64(basic.as_bytes(), true, false),
        base64(secret.as_bytes(), false, false),
    ]
}

#[track_caller]
fn assert_clean(what: &str, text: &str, secret: &str) {
    for d in toolrun::fuzzing::decodings(text) {
        assert!(
            !d.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "the secret leaks from {what} (decoded: {})\n{text}",
            String::from_utf8_lossy(&d)
        );
    }
    if secret == SECRET {
        for p in PREFIXES {
            assert!(
                !text.contains(p),
                "a prefix of the secret ({p}) leaks from {what}\n{text}"
            );
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn spec(dir: &Path, server: &TestServer, tool: &str, extra: &str, answer: &str) -> PathBuf {
    support::write(
        dir,
        "leaky.yaml",
        &format!(
            r#"version: 1
name: leaky
secrets: [TOKEN]
tools:
  echo:
    description: Calls the echo service, which repeats what it received.
    kind: http
    input: {{ type: object, properties: {{}}, additionalProperties: false }}
{tool}
policy:
  network: {{ allow_hosts: ["{host}"] }}
{extra}
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: echo, arguments: {{}} }}]
          - answer: "{answer}"
"#,
            host = server.addr(),
        ),
    )
}

/// `run` with a trace, a fixture and events, and again with `--json`; every output is clean.
fn run_everywhere(dir: &Path, spec: &Path, secret: &str) -> support::Output {
    let (trace, fixture, events) = (
        dir.join("trace.json"),
        dir.join("fixture.json"),
        dir.join("events.jsonl"),
    );
    let out = run(toolrun()
        .env("TOKEN", secret)
        .arg("run")
        .arg(spec)
        .args(["--query", "echo please", "--trace"])
        .arg(&trace)
        .arg("--record")
        .arg(&fixture)
        .arg("--events")
        .arg(&events));
    assert_clean("stdout", &out.stdout, secret);
    assert_clean("stderr", &out.stderr, secret);
    for f in [&trace, &fixture, &events] {
        assert_clean(&f.display().to_string(), &read(f), secret);
    }
    let json = run(toolrun().env("TOKEN", secret).arg("run").arg(spec).args([
        "--query",
        "echo please",
        "--json",
    ]));
    assert_clean("--json", &json.stdout, secret);
    assert_clean("--json stderr", &json.stderr, secret);
    out
}

fn echo_server() -> TestServer {
    TestServer::start(|req| {
        let mut lines = vec![req.raw_target.clone(), req.text()];
        lines.extend(echoes(SECRET));
        Response::text(200, lines.join("\n"))
    })
}

#[test]
fn a_secret_echoed_partly_encoded_json_escaped_or_in_base64_is_masked_everywhere() {
    let server = echo_server();
    let dir = support::temp_dir("secrets-echo");
    let tool = format!(
        r#"    request:
      method: POST
      url: "{}/echo"
      query: {{ t: "{{{{ secrets.TOKEN }}}}" }}
      headers: {{ Content-Type: application/x-www-form-urlencoded }}
      body_text: "t={{{{ secrets.TOKEN | urlencode }}}}""#,
        server.base_url()
    );
    let spec = spec(&dir, &server, &tool, "", "{{ last.result }}");
    let out = run_everywhere(&dir, &spec, SECRET);
    assert_eq!(out.code, 0, "{out:?}");
    // The server did get the secret, and the answer is there, masked.
    assert_eq!(
        server.requests()[0].query_param("t"),
        Some(SECRET),
        "{:?}",
        server.requests()
    );
    assert!(out.stdout.contains("/echo?t=***"), "{out:?}");
    assert!(
        out.stdout.contains("Basic") || out.stdout.contains("***\n***"),
        "{out:?}"
    );

    // The fixture holds the request URL and the form body masked in their encoded forms.
    let fixture: Value = serde_json::from_str(&read(&dir.join("fixture.json"))).unwrap();
    let request = &fixture["exchanges"][0]["request"];
    assert!(
        request["url"].as_str().unwrap().ends_with("/echo?t=***"),
        "{request}"
    );
    assert_eq!(request["body"], "t=***");

    // And it replays, with no server and no secret: the replay sends `%2A%2A%2A` where the
    // recording masked the encoded secret, and both sides are masked alike before comparing.
    drop(server);
    let out = run(toolrun().arg("replay").arg(dir.join("fixture.json")));
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn a_secret_cut_by_response_max_bytes_leaves_no_prefix() {
    let partly = echoes(SECRET).remove(0);
    let body = format!("{}{partly}{}", "x".repeat(100), "y".repeat(100));
    let server = TestServer::start(move |_| Response::text(200, body.clone()));
    let dir = support::temp_dir("secrets-max-bytes");
    let tool = format!(
        "    request: {{ url: \"{}/big\" }}\n    response: {{ max_bytes: 110 }}",
        server.base_url()
    );
    let spec = spec(&dir, &server, &tool, "", "{{ last.result.body }}");
    let out = run_everywhere(&dir, &spec, SECRET);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.starts_with(&"x".repeat(100)), "{out:?}");
}

#[test]
fn a_secret_cut_by_max_tool_output_chars_leaves_no_prefix() {
    let partly = echoes(SECRET).remove(0);
    let body = format!("{}{partly}{}", "x".repeat(100), "y".repeat(100));
    let server = TestServer::start(move |_| Response::text(200, body.clone()));
    let dir = support::temp_dir("secrets-output-chars");
    let tool = format!("    request: {{ url: \"{}/big\" }}", server.base_url());
    let spec = spec(
        &dir,
        &server,
        &tool,
        "limits: { max_tool_output_chars: 106 }",
        "done",
    );
    let out = run_everywhere(&dir, &spec, SECRET);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(read(&dir.join("trace.json")).contains("[truncated:"));
}

#[test]
fn a_secret_cut_by_the_error_excerpt_leaves_no_prefix() {
    let partly = echoes(SECRET).remove(0);
    let body = format!("{}{partly} and more", "e".repeat(290));
    let server = TestServer::start(move |_| Response::text(500, body.clone()));
    let dir = support::temp_dir("secrets-excerpt");
    let tool = format!("    request: {{ url: \"{}/fail\" }}", server.base_url());
    let spec = spec(&dir, &server, &tool, "", "done");
    let out = run_everywhere(&dir, &spec, SECRET);
    assert_eq!(out.code, 0, "{out:?}");
    let trace = read(&dir.join("trace.json"));
    assert!(trace.contains("returned HTTP 500"), "{trace}");
}

#[test]
fn a_secret_cut_by_the_200_character_url_in_a_message_leaves_no_prefix() {
    let server = TestServer::start(|_| Response::status(404));
    let dir = support::temp_dir("secrets-url");
    // The secret starts at character 190 of the URL: a 200-character cut lands inside it.
    let base = server.base_url();
    let path = "p".repeat(190 - base.len() - 4);
    let tool = format!("    request: {{ url: \"{base}/{path}?t={{{{ secrets.TOKEN }}}}\" }}");
    let spec = spec(&dir, &server, &tool, "", "done");
    let out = run_everywhere(&dir, &spec, SECRET);
    assert_eq!(out.code, 0, "{out:?}");
    let trace = read(&dir.join("trace.json"));
    assert!(trace.contains("returned HTTP 404"), "{trace}");
    assert!(trace.contains("?t=***"), "{trace}");
}

#[test]
fn the_model_api_key_is_masked_in_every_spelling_and_before_cuts() {
    let key = format!("sk-live-{SECRET}");
    let mut answer = echoes(&key).join(" | ");
    answer.push_str(&format!(" | raw {key}"));
    let fake =
        support::providers::Fake::openai_keyless(vec![support::providers::openai_answer(&answer)]);
    let dir = support::temp_dir("secrets-api-key");
    let spec = support::write(
        &dir,
        "live.yaml",
        &support::providers::live_spec("openai", &fake.base_url(), "", ""),
    );
    let events = dir.join("events.jsonl");
    let out = run(toolrun()
        .env("TEST_KEY", &key)
        .arg("run")
        .arg(&spec)
        .args(["--query", "q", "--json", "--events"])
        .arg(&events));
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        fake.requests()[0].header("authorization"),
        Some(format!("Bearer {key}").as_str())
    );
    for (what, text) in [
        ("stdout", &out.stdout),
        ("stderr", &out.stderr),
        ("events", &read(&events)),
    ] {
        assert_clean(what, text, &key);
        assert_clean(what, text, SECRET);
    }
    let trace = out.json();
    assert!(
        trace["final_output"].as_str().unwrap().contains("raw ***"),
        "{trace}"
    );

    // A reply that is not JSON is quoted in the error, cut at 300 characters: inside the key.
    let partly = echoes(&key).remove(0);
    let fake = support::providers::Fake::openai_keyless(vec![Response::text(
        200,
        format!("{}{partly} tail", "n".repeat(290)),
    )]);
    let spec = support::write(
        &dir,
        "live2.yaml",
        &support::providers::live_spec("openai", &fake.base_url(), "", ""),
    );
    let out = run(toolrun()
        .env("TEST_KEY", &key)
        .arg("run")
        .arg(&spec)
        .args(["--query", "q"]));
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("not JSON"), "{out:?}");
    assert_clean("stderr", &out.stderr, &key);
    assert_clean("stderr", &out.stderr, SECRET);
}

#[test]
fn a_secret_masking_cannot_remove_stops_every_write_naming_it_and_where() {
    let dir = support::temp_dir("secrets-fail-closed");
    let spec = support::write(
        &dir,
        "pair.yaml",
        r#"version: 1
name: pair
secrets: [TOKEN]
tools:
  pair:
    description: Returns a pair of codes.
    kind: mock
    responses:
      - result: { "abcd1234": "efgh5678" }
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: pair, arguments: {} }]
          - answer: done
"#,
    );
    // Neither the key nor the value holds it; the pretty-printed trace does.
    let secret = r#"abcd1234": "efgh5678"#;
    let (trace, fixture) = (dir.join("t.json"), dir.join("f.json"));
    let out = run(toolrun()
        .env("TOKEN", secret)
        .arg("run")
        .arg(&spec)
        .args(["--query", "q", "--trace"])
        .arg(&trace)
        .arg("--record")
        .arg(&fixture));
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("secret `TOKEN` would appear at `/tool_results/0/result`"),
        "{out:?}"
    );
    assert!(!out.stderr.contains("efgh5678"), "{out:?}");
    assert!(!trace.exists() && !fixture.exists(), "a file was written");
    let out = run(toolrun()
        .env("TOKEN", secret)
        .arg("run")
        .arg(&spec)
        .args(["--query", "q", "--json"]));
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.stdout, "");
}

#[test]
fn a_short_secret_is_reported_on_stderr_by_name_only() {
    let server = TestServer::start(|req| {
        Response::text(200, format!("pin {}", req.header("x-pin").unwrap_or("")))
    });
    let dir = support::temp_dir("secrets-short");
    let tool = format!(
        "    request: {{ url: \"{}/pin\", headers: {{ X-Pin: \"{{{{ secrets.TOKEN }}}}\" }} }}",
        server.base_url()
    );
    let spec = spec(&dir, &server, &tool, "", "{{ last.result }}");
    let out = run(toolrun()
        .env("TOKEN", "4711x")
        .arg("run")
        .arg(&spec)
        .args(["--query", "q"]));
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr
            .contains("warning: secret `TOKEN` is only 5 characters long"),
        "{out:?}"
    );
    assert!(
        !out.stderr.contains("4711x") && !out.stdout.contains("4711x"),
        "{out:?}"
    );
    assert_eq!(out.stdout, "pin ***\n");
}

/// Issue 36 §1: a provider's error that echoes the key JSON-escaped the way Go's and PHP's
/// encoders write it (`\/`, `\u0026`, `\u003c`) was masked in the trace's `error` but not in
/// `model_calls[].error`, so the key reached the trace, the fixture and `--json`.
#[test]
fn a_key_echoed_json_escaped_in_a_provider_error_is_masked_in_every_field() {
    let key = "sk-tr/Qw7+9x&y<z>k=long-enough";
    let escaped = key
        .replace('/', "\\/")
        .replace('&', "\\u0026")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e");
    // The shape toolrun reads the message from, and two it quotes as they are (the escapes
    // stay in the quote).
    let bodies = [
        format!(r#"{{"error":{{"message":"Incorrect API key provided: {escaped}."}}}}"#),
        format!(r#"{{"errors":[{{"code":401,"msg":"Incorrect API key provided: {escaped}"}}]}}"#),
        format!(r#"Incorrect API key provided: {escaped}"#),
    ];
    let dir = support::temp_dir("secrets-escaped-provider-error");
    for (i, body) in bodies.iter().enumerate() {
        let answer = Response::text(401, body.clone()).header("content-type", "application/json");
        let fake = support::providers::Fake::openai_keyless(vec![answer; 3]);
        let spec = support::write(
            &dir,
            &format!("live{i}.yaml"),
            &support::providers::live_spec("openai", &fake.base_url(), "", ""),
        );
        let (trace, fixture) = (
            dir.join(format!("trace{i}.json")),
            dir.join(format!("fixture{i}.json")),
        );
        let out = run(toolrun()
            .env("TEST_KEY", key)
            .arg("run")
            .arg(&spec)
            .args(["--query", "q", "--json", "--trace"])
            .arg(&trace)
            .arg("--record")
            .arg(&fixture));
        assert_eq!(out.code, 1, "{out:?}");
        let written = read(&trace);
        assert!(written.contains("model_calls"), "{written}");
        assert!(written.contains("Incorrect API key provided"), "{written}");
        for (what, text) in [
            ("stdout", out.stdout.clone()),
            ("stderr", out.stderr.clone()),
            ("trace", written),
            ("fixture", read(&fixture)),
        ] {
            assert_clean(what, &text, key);
            for piece in ["sk-tr", "Qw7+9x"] {
                assert!(!text.contains(piece), "{piece} leaks from {what}\n{text}");
            }
        }
    }
}

/// Issue 36 §2: `{{ secrets }}` in one HTTP tool sent every declared secret, another tool's
/// payments key included, to that tool's host, and `check` was silent. `check` now refuses a
/// template that reads the whole map (E046, at its line and column), and a run gives a tool's
/// templates only the secrets they name.
#[test]
fn a_template_reaches_only_the_secrets_it_names() {
    let dir = support::temp_dir("secrets-whole-map");
    let server =
        TestServer::start(|req| Response::json(200, serde_json::json!({ "ok": req.raw_target })));
    let spec = |weather_key: &str| {
        format!(
            r#"version: 1
name: two_hosts
secrets: [WEATHER_KEY, PAYMENTS_KEY]
tools:
  weather:
    description: Current weather for a city from the weather service.
    kind: http
    input: {{ type: object, properties: {{ city: {{ type: string }} }}, required: [city] }}
    request:
      url: "{base}/weather"
      query:
        city: "{{{{ args.city }}}}"
        key: "{weather_key}"
  pay:
    description: Pays an invoice by its id.
    kind: http
    side_effects: true
    input: {{ type: object, properties: {{ id: {{ type: string }} }}, required: [id] }}
    request:
      method: POST
      url: "{base}/pay"
      headers: {{ Authorization: "Bearer {{{{ secrets.PAYMENTS_KEY }}}}" }}
policy:
  network: {{ allow_hosts: ["{host}"] }}
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: weather, arguments: {{ city: Oslo }} }}]
          - answer: done
"#,
            base = server.base_url(),
            host = server.addr(),
        )
    };
    let whole = support::write(&dir, "whole.yaml", &spec("{{ secrets }}"));
    let out = run(toolrun().args(["check", "--format", "json"]).arg(&whole));
    assert_eq!(out.code, 1, "{out:?}");
    let found: Vec<Value> = out.json().as_array().unwrap().clone();
    let e046: Vec<&Value> = found.iter().filter(|d| d["code"] == "E046").collect();
    assert_eq!(e046.len(), 1, "{found:?}");
    assert_eq!(
        (&e046[0]["severity"], &e046[0]["line"], &e046[0]["column"]),
        (&Value::from("error"), &Value::from(13), &Value::from(18)),
        "{found:?}"
    );
    let human = run(toolrun().arg("check").arg(&whole));
    assert!(human.stderr.contains("error[E046]"), "{human:?}");
    assert!(human.stderr.contains("whole.yaml:13:18"), "{human:?}");
    for looped in [
        "{{ secrets | items }}",
        "{% for k in secrets %}{{ secrets[k] }}{% endfor %}",
        "{{ secrets[args.city] }}",
    ] {
        let path = support::write(&dir, "looped.yaml", &spec(looped));
        let out = run(toolrun().arg("check").arg(&path));
        assert!(out.stderr.contains("error[E046]"), "{looped}: {out:?}");
    }

    // A constant subscript names its secret too.
    let subscript = support::write(
        &dir,
        "subscript.yaml",
        &spec("{{ secrets['WEATHER_KEY'] }}"),
    );
    run(toolrun().arg("check").arg(&subscript)).assert_success();

    // A spec that names its secret runs, and the other tool's key never reaches this host.
    let named = support::write(&dir, "named.yaml", &spec("{{ secrets.WEATHER_KEY }}"));
    let out = run(toolrun()
        .env("WEATHER_KEY", "wk-weather-0123456789")
        .env("PAYMENTS_KEY", "pk-payments-9876543210")
        .arg("run")
        .arg(&named)
        .args(["--query", "weather in Oslo"]));
    assert_eq!(out.code, 0, "{out:?}");
    let sent = server.requests();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let everything = format!("{:?}", sent[0]);
    assert!(everything.contains("wk-weather-0123456789"), "{everything}");
    assert!(!everything.contains("pk-payments"), "{everything}");
}
