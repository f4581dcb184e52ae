//! `toolrun test` tells the truth (issue 11), through the real binary: replayed tests check their
//! expectations, a missing fixture is one test's failure with the command that records it,
//! nothing-ran is not green, and offline tests never reach the network.

mod support;

use support::providers::{openai_answer, Fake, KEY};
use support::{run, toolrun, write, Response, TestServer};

fn note_spec(answer: &str, tests: &str) -> String {
    support::specs::scripted_note_spec("notes", answer, tests)
}

/// Splits a command line printed by toolrun (plain words and single-quoted ones) into words.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            '\\' if !quoted => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ' ' if !quoted => {
                if any || !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            c => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// The command after `record it with: ` up to the `, ` or `; ` that ends it (or the line's end).
fn record_command(stdout: &str) -> Vec<String> {
    let line = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("record it with: "))
        .unwrap_or_else(|| panic!("no record command in:\n{stdout}"));
    let end = [line.find(", "), line.find("; ")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(line.len());
    shell_words(&line[..end])
}

#[test]
fn a_replayed_test_checks_its_expectations() {
    let dir = support::temp_dir("replay-expect");
    let spec = write(&dir, "s.yaml", &note_spec("hello there", ""));
    let fx = dir.join("fx.json");
    run(toolrun()
        .current_dir(&dir)
        .args(["run", "s.yaml", "--query", "hi", "--record", "fx.json"]))
    .assert_success();
    assert!(fx.is_file());
    // The issue's repro: an assertion the recording cannot meet. Each test has its own copy of
    // the recording: two tests naming one fixture is an error (E044).
    std::fs::copy(&fx, dir.join("fx_wrong.json")).unwrap();
    let tests = r#"  - name: wrong
    query: hi
    fixture: fx_wrong.json
    expect: { output_contains: "THIS IS NOT IN THE ANSWER", tool_calls: [note] }
  - name: right
    fixture: fx.json
    expect: { output_contains: "hello there", tool_calls: [] }
"#;
    std::fs::write(&spec, note_spec("hello there", tests)).unwrap();
    let out = run(toolrun().current_dir(&dir).args(["test", "s.yaml"]));
    out.assert_code(1);
    assert!(out.stdout.contains("FAIL notes::wrong"), "{out:?}");
    assert!(out.stdout.contains("PASS notes::right"), "{out:?}");
    assert!(
        out.stdout.contains(
            "assertion failed: expected the output to contain \"THIS IS NOT IN THE ANSWER\", got \"hello there\""
        ),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("assertion failed: expected tool calls [\"note\"], got []"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("diverged"), "{out:?}");
    assert_eq!(out.stdout.lines().last(), Some("1 passed, 1 failed"));

    // A spec that now behaves differently: the replay diverges from the recording, reported as
    // a divergence, and the assertion that the new run breaks is reported as an assertion.
    let tests = r#"  - name: right
    fixture: fx.json
    expect: { output_contains: "hello there" }
"#;
    std::fs::write(&spec, note_spec("goodbye", tests)).unwrap();
    let out = run(toolrun().current_dir(&dir).args(["test", "s.yaml"]));
    out.assert_code(1);
    assert!(
        out.stdout
            .contains("replay diverged from the recording `./fx.json`: the trace differs"),
        "{out:?}"
    );
    assert!(out.stdout.contains("/final_output"), "{out:?}");
    assert!(
        out.stdout.contains(
            "assertion failed: expected the output to contain \"hello there\", got \"goodbye\""
        ),
        "{out:?}"
    );
}

#[test]
fn a_fixture_test_whose_query_is_not_the_recorded_one_fails() {
    let dir = support::temp_dir("replay-query");
    write(&dir, "s.yaml", &note_spec("hello there", ""));
    run(toolrun()
        .current_dir(&dir)
        .args(["run", "s.yaml", "--query", "hi", "--record", "fx.json"]))
    .assert_success();
    let tests = "  - name: other\n    query: bye\n    fixture: fx.json\n";
    write(&dir, "s.yaml", &note_spec("hello there", tests));
    let out = run(toolrun().current_dir(&dir).args(["test", "s.yaml"]));
    out.assert_code(1);
    assert!(
        out.stdout
            .contains("the test's query \"bye\" is not the recorded query \"hi\""),
        "{out:?}"
    );
}

#[test]
fn a_missing_fixture_fails_only_its_test_and_says_how_to_record_it() {
    let dir = support::temp_dir("missing-fixture");
    let tests = r#"  - name: scripted
    query: hi
    expect: { output_contains: hello }
  - name: recorded
    query: "what's new?"
    fixture: fixtures/recorded.json
    expect: { output_contains: hello }
"#;
    write(&dir, "s.yaml", &note_spec("hello there", tests));
    // `check` warns; the spec has no error.
    let out = run(toolrun().current_dir(&dir).args(["check", "s.yaml"]));
    out.assert_code(0);
    assert!(out.stderr.contains("warning[W108]"), "{out:?}");
    assert!(
        out.stderr
            .contains("fixture `fixtures/recorded.json` has not been recorded yet"),
        "{out:?}"
    );
    let out = run(toolrun()
        .current_dir(&dir)
        .args(["check", "s.yaml", "--deny-warnings"]));
    out.assert_code(1);

    // `test` runs every other test and fails this one with the reason and the command.
    let out = run(toolrun().current_dir(&dir).args(["test", "s.yaml"]));
    out.assert_code(1);
    assert!(out.stdout.contains("PASS notes::scripted"), "{out:?}");
    assert!(out.stdout.contains("FAIL notes::recorded"), "{out:?}");
    assert!(
        out.stdout
            .contains("fixture `./fixtures/recorded.json` has not been recorded yet"),
        "{out:?}"
    );
    let cmd = record_command(&out.stdout);
    assert_eq!(
        cmd,
        ["toolrun", "test", "s.yaml", "--filter", "recorded", "--record", "missing"]
    );
    // The command works on this very spec (E036 used to refuse it), creates the folder, and
    // records only the missing fixture; then a plain `test` replays it and passes.
    let rec = run(toolrun().current_dir(&dir).args(&cmd[1..]));
    rec.assert_success();
    assert!(rec.stdout.contains("PASS notes::recorded"), "{rec:?}");
    assert!(dir.join("fixtures/recorded.json").is_file());
    let out = run(toolrun().current_dir(&dir).args(["test", "s.yaml"]));
    out.assert_code(0);
    assert_eq!(out.stdout.lines().last(), Some("2 passed, 0 failed"));
}

#[test]
fn when_no_test_runs_the_suite_is_not_green() {
    let dir = support::temp_dir("no-tests");
    write(&dir, "s.yaml", &note_spec("hello", "  []\n"));
    let out = run(toolrun().current_dir(&dir).args(["test", "s.yaml"]));
    out.assert_code(1);
    assert_eq!(out.stdout.lines().last(), Some("0 passed, 0 failed"));
    assert!(out.stderr.contains("error: no test ran"), "{out:?}");
    assert!(out.stderr.contains("--no-tests=warn"), "{out:?}");

    let out = run(toolrun()
        .current_dir(&dir)
        .args(["test", "s.yaml", "--no-tests=warn"]));
    out.assert_code(0);
    assert!(out.stderr.contains("warning: no test ran"), "{out:?}");

    let out = run(toolrun()
        .current_dir(&dir)
        .args(["test", "s.yaml", "--no-tests", "pass"]));
    out.assert_code(0);
    assert!(!out.stderr.contains("no test ran"), "{out:?}");
}

#[test]
fn a_filter_that_matches_no_test_is_a_usage_error() {
    let dir = support::temp_dir("filter-none");
    let tests = "  - name: greeting\n    query: hi\n";
    write(&dir, "s.yaml", &note_spec("hello", tests));
    let out = run(toolrun()
        .current_dir(&dir)
        .args(["test", "s.yaml", "--filter", "greetnig"]));
    out.assert_code(2);
    assert!(
        out.stderr
            .contains("error: --filter `greetnig` matches no test"),
        "{out:?}"
    );
    assert!(out.stderr.contains("greeting"), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn a_live_model_test_fails_offline_and_runs_with_allow_network() {
    let fake = Fake::openai(vec![openai_answer("AAPL is 178.15.")]);
    let dir = support::temp_dir("live-offline");
    let spec = support::providers::live_spec(
        "openai",
        &fake.base_url(),
        "",
        "tests:\n  - name: live_case\n    query: Price of AAPL?\n    expect: { output_contains: \"178.15\" }\n",
    );
    write(&dir, "s.yaml", &spec);
    let out = run(toolrun()
        .current_dir(&dir)
        .env("TEST_KEY", KEY)
        .args(["test", "s.yaml"]));
    out.assert_code(1);
    assert!(
        out.stdout.contains("FAIL live_openai::live_case"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(&format!(
            "offline: the test would call live model `live` (openai at {})",
            fake.base_url()
        )),
        "{out:?}"
    );
    let cmd = record_command(&out.stdout);
    assert_eq!(
        cmd,
        [
            "toolrun",
            "test",
            "s.yaml",
            "--filter",
            "live_case",
            "--record",
            "missing"
        ]
    );
    assert!(
        out.stdout.contains(
            ", after adding `fixtures: fixtures` to the spec (or `fixture: PATH` to the test); or pass --allow-network to run it live"
        ),
        "{out:?}"
    );
    assert!(fake.requests().is_empty(), "nothing reached the server");

    let out = run(toolrun().current_dir(&dir).env("TEST_KEY", KEY).args([
        "test",
        "s.yaml",
        "--allow-network",
    ]));
    out.assert_code(0);
    assert_eq!(fake.requests().len(), 1);
}

fn http_spec(url: &str) -> String {
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
      method: GET
      url: "{url}/weather?city={{{{ args.city | urlencode }}}}"
      headers: {{ Authorization: "Bearer {{{{ secrets.WEATHER_KEY }}}}" }}
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: weather, arguments: {{ city: Paris }} }}]
          - answer: "It is {{{{ last.result }}}} ({{{{ last.status }}}})"
tests:
  - name: paris
    query: Weather in Paris?
    expect: {{ status: ok }}
"#
    )
}

#[test]
fn an_offline_test_never_reaches_the_network_or_reads_real_secrets() {
    const SECRET: &str = "s3cr3t-weather-value";
    let server = TestServer::start(|req| {
        // Echoes the credential back, as careless services do.
        Response::text(200, req.header("authorization").unwrap_or("").to_string())
    });
    let dir = support::temp_dir("http-offline");
    write(&dir, "s.yaml", &http_spec(&server.base_url()));
    let out = run(toolrun()
        .current_dir(&dir)
        .env("WEATHER_KEY", SECRET)
        .args(["test", "s.yaml", "--format", "json"]));
    out.assert_code(1);
    assert_eq!(server.requests().len(), 0, "nothing was sent");
    let doc = out.json();
    let failure = doc["tests"][0]["attempts"][0]["failures"][0]["message"]
        .as_str()
        .unwrap();
    assert!(
        failure.starts_with("offline: tool `weather` would reach the network (GET "),
        "{failure}"
    );
    assert!(
        failure.contains("record it with: toolrun test s.yaml --filter paris --record missing"),
        "{failure}"
    );
    assert!(!out.stdout.contains(SECRET) && !out.stderr.contains(SECRET));

    // --allow-network runs it for real; the echoed secret still never reaches the report.
    let out = run(toolrun()
        .current_dir(&dir)
        .env("WEATHER_KEY", SECRET)
        .args(["test", "s.yaml", "--allow-network"]));
    out.assert_code(0);
    assert_eq!(server.requests().len(), 1);
    assert!(!out.stdout.contains(SECRET) && !out.stderr.contains(SECRET));
}

#[test]
fn the_repository_fixture_tests_check_assertions() {
    // The fixture-backed tests of the example specs are not vacuous: each one's expectations
    // are evaluated, so breaking one fails the test while the replay still matches.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = support::temp_dir("repo-fixtures");
    for (spec, fixture, good, bad) in [
        (
            "stock_assistant.yaml",
            "stock_gain.json",
            "output_contains: \"2815\"",
            "output_contains: \"2816\"",
        ),
        (
            "local_stack.yaml",
            "local_stack_inventory.json",
            "output_contains: \"114\"",
            "output_contains: \"115\"",
        ),
        (
            "guardrails.yaml",
            "guardrails_refund.json",
            "output_contains: Refunded order 42 }",
            "output_contains: Refunded order 43 }",
        ),
    ] {
        let text = std::fs::read_to_string(root.join("specs").join(spec)).unwrap();
        assert!(text.contains(good), "{spec} still asserts {good}");
        std::fs::create_dir_all(dir.join("specs")).unwrap();
        std::fs::create_dir_all(dir.join("fixtures")).unwrap();
        // A project root, as the repository has: `../fixtures` stays inside it.
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        if spec == "stock_assistant.yaml" {
            std::fs::create_dir_all(dir.join("specs/data")).unwrap();
            for e in std::fs::read_dir(root.join("specs/data")).unwrap() {
                let e = e.unwrap();
                std::fs::copy(e.path(), dir.join("specs/data").join(e.file_name())).unwrap();
            }
        }
        std::fs::copy(
            root.join("fixtures").join(fixture),
            dir.join("fixtures").join(fixture),
        )
        .unwrap();
        // The replayed test is the last one to assert this.
        let at = text.rfind(good).unwrap();
        let broken = format!("{}{bad}{}", &text[..at], &text[at + good.len()..]);
        let copy = write(&dir.join("specs"), spec, &broken);
        let out = run(toolrun()
            .arg("test")
            .arg(&copy)
            .args(["--filter", "replays"]));
        out.assert_code(1);
        assert!(out.stdout.contains("assertion failed"), "{spec}: {out:?}");
        assert!(!out.stdout.contains("diverged"), "{spec}: {out:?}");
    }
}
