//! Failed calls as spans, through the real binary and an OTLP/JSON collector on 127.0.0.1:
//! without `--otlp-content` an error span carries its kind and a fixed description, never the
//! arguments or the service's reply the error's own words quote (issue 36, item 5); an HTTP
//! tool that got an error status has its CLIENT span as a success has (item 16). Live runs,
//! `export otel` of their traces, and served calls alike.

mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use support::providers::{self, Api, Fake};
use support::{Response, TestServer};

/// What the arguments and the services' replies hold: none of it may leave without opt-in.
const PRIVATE: [&str; 4] = ["Jane", "Roe", "HIV", "diagnosis"];

/// An OTLP/JSON collector that takes everything; the spans it got, in order.
struct Collector(TestServer);

impl Collector {
    fn start() -> Collector {
        Collector(TestServer::start(|_| Response::json(200, json!({}))))
    }

    fn url(&self) -> String {
        format!("http://{}", self.0.addr())
    }

    /// Every body it received, as text, and every span in them.
    fn received(&self) -> (String, Vec<Value>) {
        let mut raw = String::new();
        let mut spans = Vec::new();
        for request in self.0.requests() {
            raw.push_str(&String::from_utf8_lossy(&request.body));
            let body: Value = serde_json::from_slice(&request.body).expect("OTLP/JSON");
            for rs in body["resourceSpans"].as_array().into_iter().flatten() {
                for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                    spans.extend(ss["spans"].as_array().into_iter().flatten().cloned());
                }
            }
        }
        (raw, spans)
    }
}

fn toolrun(collector: &Collector) -> std::process::Command {
    let mut cmd = support::toolrun();
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .env("OTEL_EXPORTER_OTLP_COMPRESSION", "none")
        .env("OTEL_BSP_EXPORT_TIMEOUT", "10000")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url())
        .env("TEST_KEY", providers::KEY);
    cmd
}

#[track_caller]
fn one<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<&Value> = spans.iter().filter(|s| s["name"] == name).collect();
    assert_eq!(found.len(), 1, "one span `{name}` expected in:\n{spans:#?}");
    found[0]
}

fn attr(span: &Value, key: &str) -> Value {
    let value = span["attributes"]
        .as_array()
        .and_then(|a| a.iter().find(|kv| kv["key"] == key))
        .map(|kv| kv["value"].clone())
        .unwrap_or(Value::Null);
    match (value.get("stringValue"), value.get("intValue")) {
        (Some(s), _) => s.clone(),
        (_, Some(i)) => json!(i.as_str().and_then(|s| s.parse::<i64>().ok())),
        _ => Value::Null,
    }
}

#[track_caller]
fn assert_private(what: &str, text: &str) {
    for word in PRIVATE {
        assert!(!text.contains(word), "`{word}` leaks from {what}:\n{text}");
    }
}

/// The patients service: a lookup fails with a 500 that quotes the patient's record; an unknown
/// record is a 404.
fn patients_service() -> TestServer {
    TestServer::start(|req| match req.path.as_str() {
        "/patients" => Response::json(
            500,
            json!({ "error": "record of Jane Roe: diagnosis HIV, cannot render" }),
        ),
        _ => Response::json(404, json!({ "error": "no such diagnosis" })),
    })
}

/// Two HTTP tools of `service` and a live model at `model`; `find`, a mock whose error quotes
/// its arguments, for `serve`.
fn spec(dir: &Path, service: &TestServer, model: &Fake) -> PathBuf {
    support::write(
        dir,
        "patients.yaml",
        &format!(
            r#"version: 1
name: patients
tools:
  lookup:
    description: Looks a patient up by name.
    kind: http
    input: {{ type: object, properties: {{ name: {{ type: string }} }}, required: [name] }}
    request: {{ url: "{base}/patients?name={{{{ args.name | urlencode }}}}" }}
  record:
    description: Reads a record.
    kind: http
    input: {{ type: object, properties: {{ id: {{ type: string }} }}, required: [id] }}
    request: {{ method: DELETE, url: "{base}/records/{{{{ args.id }}}}" }}
  find:
    description: Finds a patient.
    kind: mock
    input: {{ type: object, properties: {{ name: {{ type: string }} }}, required: [name] }}
    responses:
      - error: "no patient {{{{ args.name }}}} with that diagnosis"
models:
  live:
    kind: openai
    model: test-model
    base_url: {model}
    api_key_env: TEST_KEY
    retries: 0
"#,
            base = service.base_url(),
            model = model.base_url(),
        ),
    )
}

/// The live model calls `lookup` for Jane Roe and `record` for an id, then fails with a 500 that
/// quotes the patient's record: the run fails (`model_error`).
fn model() -> Fake {
    Fake::openai(vec![
        providers::openai_tool_calls(&[
            ("call_1", "lookup", r#"{"name": "Jane Roe"}"#),
            ("call_2", "record", r#"{"id": "HIV-7"}"#),
        ]),
        providers::error(
            Api::OpenAi,
            500,
            "server_error",
            "context of Jane Roe (HIV) too long",
        ),
    ])
}

/// The run's spans, as the checks of items 5 and 16 expect them: `content` says whether the
/// command was asked for content.
#[track_caller]
fn check_run_spans(spans: &[Value], raw: &str, content: bool) {
    let run = one(spans, "invoke_agent patients");
    assert_eq!(attr(run, "error.type"), "model_error", "{run:#}");
    let chat = spans
        .iter()
        .find(|s| s["name"] == "chat test-model" && s["status"]["code"] == 2)
        .unwrap_or_else(|| panic!("a failed chat span in:\n{spans:#?}"));
    assert_eq!(attr(chat, "error.type"), "model_error");
    let lookup = one(spans, "execute_tool lookup");
    assert_eq!(attr(lookup, "error.type"), "http_status");
    assert_eq!(lookup["status"]["code"], 2, "ERROR");
    let record = one(spans, "execute_tool record");
    // Item 16: each failed request has its CLIENT span, under its tool's, with the status.
    for (tool, method, status) in [(lookup, "GET", 500), (record, "DELETE", 404)] {
        let client = one(spans, method);
        assert_eq!(client["kind"], 3, "CLIENT");
        assert_eq!(client["parentSpanId"], tool["spanId"], "{client:#}");
        assert_eq!(attr(client, "http.request.method"), method);
        assert_eq!(attr(client, "http.response.status_code"), status);
        assert_eq!(attr(client, "error.type"), status.to_string());
        assert_eq!(client["status"]["code"], 2, "ERROR");
    }
    if content {
        let said = lookup["status"]["message"].as_str().unwrap_or_default();
        assert!(
            said.contains("HIV"),
            "with content, the error's words: {said}"
        );
        return;
    }
    // Item 5: the kind, and words fixed by it.
    assert_eq!(
        lookup["status"]["message"],
        "the service answered with an error status"
    );
    assert_eq!(chat["status"]["message"], "the model call failed");
    assert_eq!(run["status"]["message"], "the model call failed");
    // `url.full` is the URL as sent, arguments and all, failed or not: not an error's words.
    assert!(raw.contains("url.full"), "{raw}");
    let mut spans = spans.to_vec();
    for s in &mut spans {
        if let Some(attributes) = s["attributes"].as_array_mut() {
            attributes.retain(|kv| kv["key"] != "url.full");
        }
    }
    assert_private("the exported spans", &Value::Array(spans).to_string());
}

#[test]
fn failed_calls_carry_their_kind_not_their_words_and_an_error_status_has_its_client_span() {
    let dir = support::temp_dir("otel-errors");
    let service = patients_service();
    let (fake, collector) = (model(), Collector::start());
    let spec = spec(&dir, &service, &fake);
    let trace = dir.join("trace.json");
    let out = support::run(
        toolrun(&collector)
            .arg("run")
            .arg(&spec)
            .args(["--query", "how is the patient?", "--trace"])
            .arg(&trace),
    );
    assert_eq!(out.code, 1, "the model failed: {out:?}");
    let (raw, spans) = collector.received();
    check_run_spans(&spans, &raw, false);
    // The trace keeps the failed exchange, as it keeps a success's.
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let http = &doc["tool_results"][0]["http"];
    assert_eq!(
        (&http["method"], &http["status"]),
        (&json!("GET"), &json!(500))
    );

    // The recorded trace, exported: the same spans, and the same words.
    let exported = Collector::start();
    let out = support::run(toolrun(&exported).args(["export", "otel"]).arg(&trace));
    assert_eq!(out.code, 0, "{out:?}");
    let (raw, spans) = exported.received();
    check_run_spans(&spans, &raw, false);

    // A trace recorded before failed calls kept their exchange still gets the CLIENT spans.
    let mut old = doc.clone();
    for r in old["tool_results"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("http");
    }
    let old_trace = support::write(&dir, "old.json", &old.to_string());
    let exported = Collector::start();
    let out = support::run(toolrun(&exported).args(["export", "otel"]).arg(&old_trace));
    assert_eq!(out.code, 0, "{out:?}");
    let (raw, spans) = exported.received();
    check_run_spans(&spans, &raw, false);

    // Asked for content, the error's own words go out.
    let (fake, collector) = (model(), Collector::start());
    let spec = self::spec(&dir, &service, &fake);
    let out = support::run(toolrun(&collector).arg("run").arg(&spec).args([
        "--query",
        "how is the patient?",
        "--otlp-content",
    ]));
    assert_eq!(out.code, 1, "{out:?}");
    let (raw, spans) = collector.received();
    check_run_spans(&spans, &raw, true);
}

#[test]
fn a_served_calls_error_span_carries_its_kind_not_the_arguments_it_quotes() {
    let dir = support::temp_dir("otel-errors-served");
    let (service, fake, collector) = (patients_service(), model(), Collector::start());
    let spec = spec(&dir, &service, &fake);
    let initialize = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } });
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let find = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "find", "arguments": { "name": "Jane Roe" } } });
    let unknown = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "HIV register", "arguments": {} } });
    let stdin: String = [initialize, initialized, find, unknown]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    let out = support::run_with_stdin(toolrun(&collector).arg("serve").arg(&spec), &stdin);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("Jane Roe"),
        "the client hears it: {out:?}"
    );
    let (raw, spans) = collector.received();
    let find = one(&spans, "tools/call find");
    assert_eq!(attr(find, "error.type"), "tool_error");
    assert_eq!(attr(find, "toolrun.error.kind"), "execution_error");
    assert_eq!(find["status"]["message"], "the tool reported an error");
    let refused = spans
        .iter()
        .find(|s| s["name"] == "tools/call" && s["status"]["code"] == 2)
        .unwrap_or_else(|| panic!("the refused call's span in:\n{spans:#?}"));
    let code = attr(refused, "error.type");
    assert_eq!(
        refused["status"]["message"],
        format!("JSON-RPC error {}", code.as_str().unwrap_or_default())
    );
    // The tool name a client sent is not a tool's; it stays off the span's name and status.
    for s in &spans {
        if s["spanId"] != refused["spanId"] {
            assert_private("a served span", &s.to_string());
        }
    }
    assert!(
        !refused["status"].to_string().contains("HIV"),
        "{refused:#}"
    );
    assert!(!raw.contains("Jane"), "{raw}");
}
