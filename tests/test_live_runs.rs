//! `toolrun test` against models (issue 14), through the real binary and local fake servers:
//! `--model` + `--record missing` writes per-test fixtures under `fixtures: DIR` that a plain
//! `test` then replays offline; `--results` / `--format json`; `--repeat` with `--pass-rate`;
//! per-test `now:`; `--jobs` keeps the spec's order.

mod support;

use support::providers::{live_spec, openai_answer, Fake, KEY};
use support::{run, toolrun, write};

const TESTS: &str = r#"fixtures: fx
tests:
  - name: aapl
    query: Price of AAPL?
    expect: { output_contains: "178.15" }
  - name: msft
    query: Price of MSFT?
    expect: { output_contains: "411.2" }
"#;

#[test]
fn record_missing_writes_per_test_fixtures_that_replay_offline() {
    let fake = Fake::openai(vec![
        openai_answer("AAPL is 178.15."),
        openai_answer("MSFT is 411.2."),
    ]);
    let dir = support::temp_dir("record-missing");
    write(
        &dir,
        "s.yaml",
        &live_spec("openai", &fake.base_url(), "", TESTS),
    );
    let out = run(toolrun().current_dir(&dir).env("TEST_KEY", KEY).args([
        "test",
        "s.yaml",
        "--model",
        "live",
        "--record",
        "missing",
        "--jobs",
        "1",
        "--results",
        "r.json",
    ]));
    out.assert_code(0);
    assert_eq!(fake.requests().len(), 2);
    for name in ["aapl", "msft"] {
        let text = std::fs::read_to_string(dir.join(format!("fx/{name}.json"))).unwrap();
        assert!(!text.contains(KEY), "the API key is masked in {name}.json");
        let fx: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(fx["model"], "live");
        assert_eq!(fx["spec"]["path"], "../s.yaml");
    }
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).unwrap()).unwrap();
    assert_eq!(doc["kind"], "toolrun.results");
    assert_eq!(doc["settings"]["model"], "live");
    assert_eq!(doc["settings"]["record"], "missing");
    assert_eq!(doc["tests"][0]["name"], "aapl");
    assert_eq!(doc["tests"][0]["attempts"][0]["source"], "record");
    assert_eq!(doc["tests"][0]["attempts"][0]["answer"], "AAPL is 178.15.");
    assert_eq!(doc["tests"][1]["outcome"], "passed");
    assert_eq!(doc["totals"]["passed"], 2);
    assert!(doc["toolrun_version"].is_string());
    drop(fake);

    // The server is gone and no key is set: a plain `test` replays both, offline.
    let out = run(toolrun()
        .current_dir(&dir)
        .args(["test", "s.yaml", "--format", "json"]));
    out.assert_code(0);
    let doc = out.json();
    assert_eq!(doc["totals"]["passed"], 2, "{out:?}");
    assert_eq!(doc["tests"][1]["attempts"][0]["source"], "replay");
    // `--record missing` again records nothing: both fixtures exist and replay.
    let out = run(toolrun()
        .current_dir(&dir)
        .args(["test", "s.yaml", "--record", "missing"]));
    out.assert_code(0);
}

#[test]
fn a_replayed_fixture_still_fails_a_broken_assertion() {
    let fake = Fake::openai(vec![openai_answer("AAPL is 178.15.")]);
    let dir = support::temp_dir("record-then-assert");
    let one = "fixtures: fx\ntests:\n  - name: aapl\n    query: Price of AAPL?\n";
    write(
        &dir,
        "s.yaml",
        &live_spec("openai", &fake.base_url(), "", one),
    );
    run(toolrun()
        .current_dir(&dir)
        .env("TEST_KEY", KEY)
        .args(["test", "s.yaml", "--model", "live", "--record", "missing"]))
    .assert_code(0);
    let broken = format!("{one}    expect: {{ output_contains: \"999\" }}\n");
    write(
        &dir,
        "s.yaml",
        &live_spec("openai", &fake.base_url(), "", &broken),
    );
    let out = run(toolrun().current_dir(&dir).args(["test", "s.yaml"]));
    out.assert_code(1);
    assert!(
        out.stdout
            .contains("assertion failed: expected the output to contain \"999\""),
        "{out:?}"
    );
    assert_eq!(fake.requests().len(), 1, "the replay sent nothing");
}

#[test]
fn repeat_reports_k_of_n_and_the_pass_rate_decides() {
    let one = "tests:\n  - name: aapl\n    query: Price of AAPL?\n    expect: { output_contains: \"178.15\" }\n";
    let answers = || {
        vec![
            openai_answer("AAPL is 178.15."),
            openai_answer("I do not know."),
            openai_answer("AAPL is 178.15."),
        ]
    };
    let fake = Fake::openai(answers());
    let dir = support::temp_dir("repeat");
    write(
        &dir,
        "s.yaml",
        &live_spec("openai", &fake.base_url(), "", one),
    );
    let args = ["test", "s.yaml", "--model", "live", "--repeat", "3"];
    let out = run(toolrun()
        .current_dir(&dir)
        .env("TEST_KEY", KEY)
        .args(args)
        .args(["--pass-rate", "0.6", "--format", "json"]));
    out.assert_code(0);
    let doc = out.json();
    assert_eq!(doc["tests"][0]["passes"], 2);
    assert_eq!(doc["tests"][0]["attempts"].as_array().unwrap().len(), 3);
    assert_eq!(doc["tests"][0]["attempts"][1]["outcome"], "failed");
    assert_eq!(doc["tests"][0]["attempts"][1]["source"], "live");

    let fake = Fake::openai(answers());
    write(
        &dir,
        "s.yaml",
        &live_spec("openai", &fake.base_url(), "", one),
    );
    let out = run(toolrun().current_dir(&dir).env("TEST_KEY", KEY).args(args));
    out.assert_code(1);
    assert!(
        out.stdout
            .contains("FAIL live_openai::aapl (2/3 runs passed)"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("     run 2: assertion failed"),
        "{out:?}"
    );
    assert!(out.stdout.contains("runs: 2/3 passed (66.7%)"), "{out:?}");
    assert_eq!(out.stdout.lines().last(), Some("0 passed, 1 failed"));
    let out = run(toolrun()
        .current_dir(&dir)
        .args(["test", "s.yaml", "--pass-rate", "1.5"]));
    out.assert_code(2);
}

#[test]
fn model_must_exist_and_per_test_now_sets_the_clock() {
    let dir = support::temp_dir("test-now");
    let spec = support::specs::clock_spec(
        "{ operation: now }",
        "It is {{ last.result }}",
        r#"  - name: new_year
    query: what time is it
    now: "2030-01-01T00:00:00Z"
    expect: { output_contains: "2030-01-01" }
  - name: default_clock
    query: what time is it
    expect: { output_contains: "2031-05-05" }
"#,
    );
    write(&dir, "now.yaml", &spec);
    let out = run(toolrun().current_dir(&dir).args([
        "test",
        "now.yaml",
        "--now",
        "2031-05-05T10:00:00Z",
    ]));
    out.assert_code(0);
    let out = run(toolrun()
        .current_dir(&dir)
        .args(["test", "now.yaml", "--model", "gtp"]));
    out.assert_code(2);
    assert!(out.stderr.contains("no model `gtp`"), "{out:?}");
}

#[test]
fn jobs_keep_the_spec_order_and_the_verdicts() {
    let mut tests = String::from("tests:\n");
    for i in 0..60 {
        let q = if i % 7 == 3 { "stop" } else { "hi" };
        tests.push_str(&format!(
            "  - name: case_{i:03}\n    query: {q}\n    expect: {{ output_contains: hello }}\n"
        ));
    }
    let spec = format!(
        "version: 1\nname: many\nmodels:\n  s:\n    kind: scripted\n    scripts:\n      - when: hi\n        turns: [{{ answer: hello }}]\n      - turns: [{{ answer: bye }}]\n{tests}"
    );
    let dir = support::temp_dir("jobs");
    write(&dir, "many.yaml", &spec);
    let one = run(toolrun()
        .current_dir(&dir)
        .args(["test", "many.yaml", "--jobs", "1"]));
    let four = run(toolrun().current_dir(&dir).args([
        "test",
        "many.yaml",
        "--jobs",
        "4",
        "--junit",
        "j.xml",
    ]));
    one.assert_code(1);
    assert_eq!(one.stdout, four.stdout);
    assert!(one.stdout.contains("FAIL many::case_003"));
    let names: Vec<&str> = four
        .stdout
        .lines()
        .filter_map(|l| l.split("many::").nth(1))
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert_eq!(names.len(), 60);
    let xml = std::fs::read_to_string(dir.join("j.xml")).unwrap();
    assert!(xml.find("case_001") < xml.find("case_059"));
}

#[test]
fn fixtures_per_model_keep_two_models_apart() {
    let fake = Fake::openai(vec![
        openai_answer("AAPL is 178.15."),
        openai_answer("MSFT is 411.2."),
        openai_answer("AAPL is 178.15 (other)."),
        openai_answer("MSFT is 411.2 (other)."),
    ]);
    let dir = support::temp_dir("fixtures-per-model");
    let other = format!(
        "  other:\n    kind: openai\n    model: test-model\n    base_url: {}\n    api_key_env: TEST_KEY\ndefault_model: live\n",
        fake.base_url()
    );
    let base_url = fake.base_url();
    let spec = |fixtures: &str| {
        let tests = TESTS.replace("fixtures: fx", &format!("fixtures: {fixtures}"));
        live_spec("openai", &base_url, "", &format!("{other}{tests}"))
    };
    write(&dir, "s.yaml", &spec("fx/{model}"));
    for model in ["live", "other"] {
        run(toolrun().current_dir(&dir).env("TEST_KEY", KEY).args([
            "test", "s.yaml", "--model", model, "--record", "missing", "--jobs", "1",
        ]))
        .assert_code(0);
    }
    assert_eq!(fake.requests().len(), 4);
    let fixture = |model: &str, test: &str| -> serde_json::Value {
        let path = dir.join(format!("fx/{model}/{test}.json"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    assert_eq!(fixture("live", "aapl")["model"], "live");
    assert_eq!(fixture("other", "msft")["model"], "other");
    assert_eq!(
        fixture("other", "aapl")["trace"]["final_output"],
        "AAPL is 178.15 (other)."
    );
    drop(fake);

    // Offline, each model replays its own recordings: the default model by a plain `test`,
    // the other through `--record missing` (every fixture is there, so nothing goes live).
    run(toolrun().current_dir(&dir).args(["test", "s.yaml"])).assert_code(0);
    let out = run(toolrun().current_dir(&dir).args([
        "test", "s.yaml", "--model", "other", "--record", "missing", "--format", "json",
    ]));
    out.assert_code(0);
    let doc = out.json();
    assert_eq!(doc["tests"][0]["attempts"][0]["source"], "replay");
    assert_eq!(
        doc["tests"][0]["attempts"][0]["answer"],
        "AAPL is 178.15 (other)."
    );
    assert_eq!(
        doc["tests"][0]["fixture"]
            .as_str()
            .map(|f| f.contains("other")),
        Some(true)
    );

    // Without `{model}`, one model's recording is not passed off as another's.
    write(&dir, "one.yaml", &spec("fx/live"));
    let out = run(toolrun().current_dir(&dir).args([
        "test", "one.yaml", "--model", "other", "--record", "missing",
    ]));
    out.assert_code(1);
    assert!(
        out.stdout
            .contains("the fixture was recorded with model `live`, not `other`"),
        "{out:?}"
    );
}

/// A test whose run stopped with an error, not a wrong answer, says why under the failed test:
/// the error, naming the turn in a conversation, masked (the key the provider quoted back) and
/// with its terminal escapes neutralised, as every line of the report is.
#[test]
fn a_run_that_stopped_with_an_error_says_why_under_the_failed_test() {
    use support::providers::{error, Api};
    let refusal = format!("key {KEY} is not allowed here\u{1b}[2J");
    let fake = Fake::openai(vec![
        openai_answer("AAPL is 178.15."),
        error(Api::OpenAi, 400, "invalid_request_error", &refusal),
    ]);
    let dir = support::temp_dir("stopped-with-an-error");
    let tests = "tests:\n  - name: talk\n    turns:\n      - query: Price of AAPL?\n      - query: And MSFT?\n        expect: { output_contains: \"411.2\" }\n";
    write(
        &dir,
        "s.yaml",
        &live_spec("openai", &fake.base_url(), "", tests),
    );
    let out = run(toolrun().current_dir(&dir).env("TEST_KEY", KEY).args([
        "test",
        "s.yaml",
        "--allow-network",
        "--junit",
        "junit.xml",
    ]));
    out.assert_code(1);
    let stop = out
        .stdout
        .lines()
        .find(|l| l.starts_with("     turn 2 stopped (model_error): "))
        .unwrap_or_else(|| panic!("no stop line: {out:?}"));
    assert!(stop.contains("is not allowed here"), "{out:?}");
    assert!(!out.stdout.contains(KEY), "the key is masked: {out:?}");
    assert!(
        !out.stdout.contains('\u{1b}'),
        "escapes neutralised: {out:?}"
    );
    // JUnit's failure message carries it too.
    let xml = std::fs::read_to_string(dir.join("junit.xml")).unwrap_or_default();
    assert!(
        xml.contains("turn 2 stopped (model_error): ") && !xml.contains(KEY),
        "{xml}"
    );
}
