//! Record once, replay offline: fixtures through the real binary.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::{run, toolrun, write};

const SPEC: &str = r#"version: 1
name: orders
tools:
  lookup:
    description: Looks up an order by id and returns its status.
    kind: mock
    input: { type: object, properties: { id: { type: integer, description: "Order id" } }, required: [id] }
    responses:
      - when: { id: 7 }
        result: { status: shipped }
      - error: { kind: not_found, message: "no order {{ args.id }}" }
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: lookup, arguments: { id: 7 } }]
          - answer: "Order 7 is {{ last.result.status }}."
"#;

fn record(dir: &Path, spec: &Path, fixture: &str, extra: &[&str]) -> support::Output {
    run(toolrun()
        .arg("run")
        .arg(spec)
        .args(["--query", "where is order 7?", "--record"])
        .arg(dir.join(fixture))
        .args(extra))
}

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(p)
}

#[test]
fn a_recorded_run_replays_and_detects_spec_regressions() {
    let dir = support::temp_dir("replay-basic");
    let spec = write(&dir, "orders.yaml", SPEC);
    record(&dir, &spec, "f.json", &[]).assert_success();
    let fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("f.json")).unwrap()).unwrap();
    assert_eq!(fixture["format_version"], 1);
    assert_eq!(fixture["spec"]["path"], "orders.yaml");
    assert_eq!(fixture["trace"]["final_output"], "Order 7 is shipped.");

    let out = run(toolrun().arg("replay").arg(dir.join("f.json")));
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout.lines().last(), Some("1 passed, 0 failed"));

    // The spec as it is now is what replays: a changed mock result is a regression.
    std::fs::write(&spec, SPEC.replace("status: shipped", "status: lost")).unwrap();
    let out = run(toolrun().arg("replay").arg(dir.join("f.json")));
    assert_eq!(out.code, 1);
    assert!(
        out.stdout
            .contains("/final_output: expected \"Order 7 is shipped.\", got \"Order 7 is lost.\""),
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.lines().last(), Some("0 passed, 1 failed"));

    // --update accepts the new trace when nothing else diverged.
    let out = run(toolrun()
        .arg("replay")
        .arg(dir.join("f.json"))
        .arg("--update"));
    assert_eq!(out.code, 0, "{out:?}");
    let out = run(toolrun().arg("replay").arg(dir.join("f.json")));
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn an_extra_model_turn_fails_the_replay() {
    let dir = support::temp_dir("replay-extra-turn");
    let spec = write(&dir, "orders.yaml", SPEC);
    record(&dir, &spec, "f.json", &[]).assert_success();
    let edited = SPEC.replace(
        "          - answer: \"Order 7 is {{ last.result.status }}.\"",
        "          - tool_calls: [{ name: lookup, arguments: { id: 8 } }]\n          - answer: \"Order 7 is {{ results[0].result.status }}.\"",
    );
    std::fs::write(&spec, edited).unwrap();
    let out = run(toolrun()
        .arg("replay")
        .arg(dir.join("f.json"))
        .args(["--format", "json"]));
    assert_eq!(out.code, 1);
    let doc = out.json();
    let failures = doc["results"][0]["failures"].as_array().unwrap();
    assert!(
        failures
            .iter()
            .any(|f| f.as_str().unwrap().contains("/steps: expected 2, got 3")),
        "{failures:?}"
    );
}

#[test]
fn record_mode_once_refuses_to_overwrite() {
    let dir = support::temp_dir("replay-once");
    let spec = write(&dir, "orders.yaml", SPEC);
    record(&dir, &spec, "f.json", &[]).assert_success();
    let before = std::fs::read_to_string(dir.join("f.json")).unwrap();
    let out = record(&dir, &spec, "f.json", &[]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--record-mode all"), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(dir.join("f.json")).unwrap(), before);
    record(&dir, &spec, "f.json", &["--record-mode", "all"]).assert_success();
}

#[test]
fn fixtures_in_the_repository_replay() {
    let fixtures: Vec<PathBuf> = std::fs::read_dir(repo("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert!(!fixtures.is_empty());
    let scratch = support::temp_dir("replay-junit");
    let junit = scratch.join("r.xml");
    let out = run(toolrun()
        .arg("replay")
        .args(&fixtures)
        .arg("--junit")
        .arg(&junit));
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .ends_with(&format!("{} passed, 0 failed\n", fixtures.len())),
        "{}",
        out.stdout
    );
    assert!(std::fs::read_to_string(&junit)
        .unwrap()
        .contains("<testsuite name=\"replay\""));
}

#[test]
fn malformed_fixtures_are_clear_failures() {
    let dir = support::temp_dir("replay-bad");
    write(&dir, "broken.json", "{ not json");
    write(&dir, "future.json", r#"{"format_version": 99}"#);
    let out = run(toolrun()
        .arg("replay")
        .arg(dir.join("broken.json"))
        .arg(dir.join("future.json")));
    // Issue 36 §19: unreadable input exits 2, as for every other command (it was 1); each
    // fixture is still reported.
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("error: 2 fixture(s) could not be read"),
        "{out:?}"
    );
    assert!(out.stdout.contains("is not valid JSON"), "{}", out.stdout);
    assert!(out.stdout.contains("format_version 99"), "{}", out.stdout);
    let out = run(toolrun().arg("replay").arg(dir.join("missing.json")));
    assert_eq!(out.code, 2);
}

fn http_spec(base: &str, host: &str, path: &str) -> String {
    format!(
        r#"version: 1
name: weather
secrets: [WEATHER_KEY]
tools:
  weather:
    description: Current weather for a city from the weather service.
    kind: http
    input: {{ type: object, properties: {{ city: {{ type: string }} }}, required: [city] }}
    request:
      url: "{base}{path}?city={{{{ args.city }}}}&key={{{{ secrets.WEATHER_KEY }}}}"
      headers: {{ Authorization: "Bearer {{{{ secrets.WEATHER_KEY }}}}" }}
policy:
  network: {{ allow_hosts: ["{host}"] }}
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: weather, arguments: {{ city: Oslo }} }}]
          - answer: "{{{{ last.result.summary }}}}"
"#
    )
}

const SECRET: &str = "wk-live-5ecret-value";

fn weather_server() -> support::TestServer {
    // A careless server that echoes the key back in its body.
    support::TestServer::start(|req| {
        let key = req.query_param("key").unwrap_or("").to_string();
        support::Response::json(
            200,
            serde_json::json!({ "summary": "Sunny, 21 C", "debug": format!("key={key}") }),
        )
    })
}

/// Records the weather question against `server` into `dir/f.json`.
fn record_weather(dir: &Path, server: &support::TestServer) -> support::Output {
    let spec = write(
        dir,
        "weather.yaml",
        &http_spec(
            &server.base_url(),
            &server.addr().to_string(),
            "/v1/weather",
        ),
    );
    run(toolrun()
        .env("WEATHER_KEY", SECRET)
        .arg("run")
        .arg(&spec)
        .args(["--query", "weather in Oslo?", "--record"])
        .arg(dir.join("f.json")))
}

#[test]
fn http_exchanges_replay_offline_and_secrets_never_reach_the_fixture() {
    let server = weather_server();
    let dir = support::temp_dir("replay-http");
    let out = record_weather(&dir, &server);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "Sunny, 21 C\n");
    let text = std::fs::read_to_string(dir.join("f.json")).unwrap();
    assert!(!text.contains(SECRET), "the secret leaked into the fixture");
    assert!(
        !text.contains("5ecret"),
        "a fragment of the secret leaked into the fixture"
    );
    let fixture: Value = serde_json::from_str(&text).unwrap();
    let exchange = &fixture["exchanges"][0];
    assert_eq!(exchange["kind"], "http");
    assert_eq!(exchange["request"]["headers"]["authorization"], "***");
    assert!(
        exchange["request"]["url"]
            .as_str()
            .unwrap()
            .ends_with("key=***"),
        "{}",
        exchange["request"]["url"]
    );
    assert_eq!(exchange["response"]["body"]["debug"], "key=***");

    // The server is gone: replay must not need it, nor the key.
    let hits = server.requests().len();
    drop(server);
    let out = run(toolrun().arg("replay").arg(dir.join("f.json")));
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(hits, 1);
}

#[test]
fn an_edited_url_template_fails_replay_with_a_readable_diff() {
    let server = weather_server();
    let dir = support::temp_dir("replay-http-diff");
    let host = server.addr().to_string();
    let spec = write(
        &dir,
        "weather.yaml",
        &http_spec(&server.base_url(), &host, "/v1/weather"),
    );
    let out = run(toolrun()
        .env("WEATHER_KEY", SECRET)
        .arg("run")
        .arg(&spec)
        .args(["--query", "q", "--record"])
        .arg(dir.join("f.json")));
    assert_eq!(out.code, 0, "{out:?}");
    drop(server);
    std::fs::write(
        &spec,
        http_spec(&format!("http://{host}"), &host, "/v2/weather"),
    )
    .unwrap();
    let out = run(toolrun().arg("replay").arg(dir.join("f.json")));
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout
            .contains("http request from `weather` has no recorded answer"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("/url: expected \"http://"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("/v1/weather?city=Oslo&key=***\", got \"http://"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("recorded exchange was never requested"),
        "{}",
        out.stdout
    );
}

#[test]
fn exchanges_left_unused_fail_the_replay() {
    let server = weather_server();
    let dir = support::temp_dir("replay-unused");
    let host = server.addr().to_string();
    let spec = write(
        &dir,
        "weather.yaml",
        &http_spec(&server.base_url(), &host, "/v1/weather"),
    );
    let out = run(toolrun()
        .env("WEATHER_KEY", SECRET)
        .arg("run")
        .arg(&spec)
        .args(["--query", "q", "--record"])
        .arg(dir.join("f.json")));
    assert_eq!(out.code, 0, "{out:?}");
    drop(server);
    // The model now answers without calling the tool: the recorded call is left over.
    let edited = http_spec(&format!("http://{host}"), &host, "/v1/weather")
        .replace(
            "          - tool_calls: [{ name: weather, arguments: { city: Oslo } }]\n",
            "",
        )
        .replace("{{ last.result.summary }}", "no idea");
    std::fs::write(&spec, edited).unwrap();
    let out = run(toolrun().arg("replay").arg(dir.join("f.json")));
    assert_eq!(out.code, 1);
    assert!(
        out.stdout
            .contains("recorded exchange was never requested: http request from `weather`"),
        "{}",
        out.stdout
    );
}

#[test]
fn replay_ignore_skips_volatile_fields_in_requests_and_traces() {
    use support::providers::{live_spec, openai_answer, Fake};
    let fake = Fake::openai(vec![openai_answer("Hello.")]);
    let dir = support::temp_dir("replay-ignore");
    let spec_text = live_spec("openai", &fake.base_url(), "", "");
    let spec = write(&dir, "live.yaml", &spec_text);
    let out = run(toolrun()
        .env("TEST_KEY", "sk-test-123")
        .arg("run")
        .arg(&spec)
        .args(["--query", "hi", "--record"])
        .arg(dir.join("f.json")));
    assert_eq!(out.code, 0, "{out:?}");
    drop(fake);
    let fixture = std::fs::read_to_string(dir.join("f.json")).unwrap();
    assert!(
        !fixture.contains("sk-test-123"),
        "the API key leaked into the fixture"
    );

    // The system prompt goes into every model request and the trace: changing it diverges...
    let edited = spec_text.replace("never guess a price.", "never guess a price. Be brief.");
    std::fs::write(&spec, &edited).unwrap();
    let out = run(toolrun().arg("replay").arg(dir.join("f.json")));
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("/messages/0/content"), "{}", out.stdout);

    // ...unless the spec declares it volatile.
    std::fs::write(
        &spec,
        format!("{edited}replay:\n  ignore: [/messages/0/content]\n"),
    )
    .unwrap();
    let out = run(toolrun().arg("replay").arg(dir.join("f.json")));
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn an_anthropic_conversation_with_parallel_tool_use_replays_offline() {
    use support::providers::{anthropic_answer, anthropic_tool_use, live_spec, Fake};
    let fake = Fake::anthropic(vec![
        anthropic_tool_use(
            Some("Looking up both."),
            &[
                (
                    "toolu_01",
                    "get_stock_price",
                    serde_json::json!({"ticker": "AAPL"}),
                ),
                (
                    "toolu_02",
                    "get_stock_price",
                    serde_json::json!({"ticker": "MSFT"}),
                ),
            ],
        ),
        anthropic_answer("AAPL is 178.15 and MSFT is 411.2."),
    ]);
    let dir = support::temp_dir("replay-anthropic");
    let spec = write(
        &dir,
        "live.yaml",
        &live_spec("anthropic", &fake.base_url(), "", ""),
    );
    let out = run(toolrun()
        .env("TEST_KEY", support::providers::KEY)
        .arg("run")
        .arg(&spec)
        .args(["--query", "compare", "--record"])
        .arg(dir.join("f.json")));
    assert_eq!(out.code, 0, "{out:?}");
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    drop(fake);
    let text = std::fs::read_to_string(dir.join("f.json")).unwrap();
    assert!(!text.contains(support::providers::KEY));
    let fixture: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(fixture["exchanges"].as_array().unwrap().len(), 2);
    assert_eq!(
        fixture["exchanges"][0]["request"]["headers"]["x-api-key"],
        "***"
    );
    // No key, no server: the replay answers both model calls from the fixture.
    let out = run(toolrun().arg("replay").arg(dir.join("f.json")));
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn spec_flag_replays_against_another_copy_of_the_spec() {
    let dir = support::temp_dir("replay-spec-flag");
    let spec = write(&dir, "orders.yaml", SPEC);
    record(&dir, &spec, "f.json", &[]).assert_success();
    let elsewhere = support::temp_dir("replay-spec-flag-copy");
    let moved = write(
        &elsewhere,
        "orders-v2.yaml",
        &SPEC.replace("status: shipped", "status: delayed"),
    );
    std::fs::remove_file(&spec).unwrap();
    let out = run(toolrun().arg("replay").arg(dir.join("f.json")));
    assert_eq!(out.code, 1, "the recorded spec path is gone: {out:?}");
    assert!(out.stdout.contains("orders.yaml"), "{}", out.stdout);
    let out = run(toolrun()
        .arg("replay")
        .arg(dir.join("f.json"))
        .arg("--spec")
        .arg(&moved));
    assert_eq!(out.code, 1);
    assert!(
        out.stdout.contains("got \"Order 7 is delayed.\""),
        "{}",
        out.stdout
    );
}

#[test]
fn retried_http_calls_replay_in_order() {
    // 503 first, then 200: both exchanges are recorded and answered in the same order.
    let server = support::TestServer::start(|req| {
        if req.nth == 1 {
            support::Response::json(503, serde_json::json!({ "error": "busy" }))
                .header("Retry-After", "1")
        } else {
            support::Response::json(200, serde_json::json!({ "summary": "Rain" }))
        }
    });
    let dir = support::temp_dir("replay-retries");
    let host = server.addr().to_string();
    let spec_text = http_spec(&server.base_url(), &host, "/v1/weather")
        .replace("    request:\n", "    retries: 2\n    request:\n");
    let spec = write(&dir, "weather.yaml", &spec_text);
    let out = run(toolrun()
        .env("WEATHER_KEY", SECRET)
        .arg("run")
        .arg(&spec)
        .args(["--query", "q", "--record"])
        .arg(dir.join("f.json")));
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "Rain\n");
    let fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("f.json")).unwrap()).unwrap();
    let statuses: Vec<u64> = fixture["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["response"]["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, vec![503, 200]);
    drop(server);
    let out = run(toolrun().arg("replay").arg(dir.join("f.json")));
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn the_http_summary_is_recorded_and_compared_but_old_fixtures_without_it_replay() {
    let server = weather_server();
    let dir = support::temp_dir("replay-http-summary");
    let out = record_weather(&dir, &server);
    assert_eq!(out.code, 0, "{out:?}");
    drop(server);
    let text = std::fs::read_to_string(dir.join("f.json")).unwrap();
    let fixture: Value = serde_json::from_str(&text).unwrap();
    let http = &fixture["trace"]["tool_results"][0]["http"];
    assert_eq!(http["method"], "GET", "{fixture:#}");
    assert_eq!(http["status"], 200);
    assert!(
        http["url"]
            .as_str()
            .unwrap()
            .ends_with("/v1/weather?city=Oslo&key=***"),
        "{http}"
    );

    let replay = |name: &str, edit: &dyn Fn(&mut Value)| {
        let mut doc = fixture.clone();
        edit(&mut doc["trace"]["tool_results"][0]);
        let path = write(&dir, name, &doc.to_string());
        run(toolrun().arg("replay").arg(path))
    };
    // A recording that says something else about the exchange is a divergence...
    let out = replay("status.json", &|call| call["http"]["status"] = 201.into());
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("http"), "{out:?}");
    // ...but one made before the trace had `http` replays as it always did.
    let out = replay("old.json", &|call| {
        call.as_object_mut().unwrap().remove("http");
    });
    assert_eq!(out.code, 0, "{out:?}");
}

/// A spec whose system prompt holds a secret's value (here pasted in, as people do) records with
/// it masked, as every fixture is; the replay masks the request it sends the same way before it
/// compares, so the run replays, with the secret set or not.
#[test]
fn a_system_prompt_holding_a_secrets_value_replays() {
    const CODE: &str = "swordfish-4421-desk";
    let fake =
        support::providers::Fake::openai_keyless(vec![support::providers::openai_answer("done")]);
    let dir = support::temp_dir("replay-secret-system");
    let spec =
        support::providers::live_spec("openai", &fake.base_url(), "", "secrets: [DESK_CODE]")
            .replace(
                "system: You answer stock questions.",
                &format!("system: You answer stock questions. The desk code is {CODE}."),
            );
    let spec = write(&dir, "desk.yaml", &spec);
    let out = run(toolrun()
        .env("TEST_KEY", "k")
        .env("DESK_CODE", CODE)
        .arg("run")
        .arg(&spec)
        .args(["--query", "q", "--record"])
        .arg(dir.join("f.json")));
    out.assert_success();
    let sent = fake.bodies()[0]["messages"][0]["content"].to_string();
    assert!(
        sent.contains(CODE),
        "the model got the prompt as written: {sent}"
    );
    let fixture = std::fs::read_to_string(dir.join("f.json")).unwrap();
    assert!(!fixture.contains(CODE), "{fixture}");
    assert!(fixture.contains("The desk code is ***."), "{fixture}");

    let replay = |with: Option<&str>| {
        let mut cmd = toolrun();
        cmd.arg("replay").arg(dir.join("f.json"));
        if let Some(s) = with {
            cmd.env("DESK_CODE", s);
        }
        run(&mut cmd)
    };
    let out = replay(Some(CODE));
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        !out.stdout.contains(CODE) && !out.stderr.contains(CODE),
        "{out:?}"
    );
    // `--update` masks it alike in what it writes (here, a renamed spec's new trace).
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&spec, text.replace("name: live_openai", "name: desk")).unwrap();
    replay(Some(CODE)).assert_code(1);
    let mut cmd = toolrun();
    cmd.env("DESK_CODE", CODE)
        .arg("replay")
        .arg(dir.join("f.json"))
        .arg("--update");
    run(&mut cmd).assert_success();
    let fixture = std::fs::read_to_string(dir.join("f.json")).unwrap();
    assert!(fixture.contains("\"desk\""), "{fixture}");
    assert!(!fixture.contains(CODE), "{fixture}");
    assert!(fixture.contains("The desk code is ***."), "{fixture}");

    // Without the secret the replay cannot tell it from the rest of the prompt: it fails, and
    // says which secret to set.
    let out = replay(None);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout.contains("masked secret") && out.stdout.contains("set DESK_CODE for the replay"),
        "{out:?}"
    );
}

#[test]
fn a_recording_into_a_folder_not_yet_made_names_its_spec_from_that_folder() {
    // The spec path is stored relative to the fixture's folder; a folder that `--record`
    // creates did not exist when the path was worked out, and the path was left as typed.
    let dir = support::temp_dir("replay-new-folder");
    write(&dir, "orders.yaml", SPEC);
    let out = run(toolrun().current_dir(&dir).args([
        "run",
        "orders.yaml",
        "--query",
        "where is order 7?",
        "--record",
        "new/deeper/f.json",
    ]));
    assert_eq!(out.code, 0, "{out:?}");
    let fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("new/deeper/f.json")).unwrap())
            .unwrap();
    assert_eq!(fixture["spec"]["path"], "../../orders.yaml");
    // Replayed from elsewhere, it finds its spec.
    let out = run(toolrun()
        .current_dir(std::env::temp_dir())
        .arg("replay")
        .arg(dir.join("new/deeper/f.json"))
        .arg("--root")
        .arg(&dir));
    assert_eq!(out.code, 0, "{out:?}");
}
