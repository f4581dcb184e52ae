//! Budgets as assertions (issue 33 §4), through the real binary against a fake OpenAI server on
//! 127.0.0.1: `expect.max_tokens`, `expect.max_cost_usd` (from `price:`), `expect.max_latency_ms`
//! (the fake delays; the margins are wide: 1 ms against 200 ms, 60 s against 200 ms), the run limit
//! `limits.max_cost_usd`, and `check`'s E050 for a cost without a price.

mod support;

use std::time::Duration;
use support::providers::{self, Fake, KEY};
use support::run;

/// Each reply reports 10 input and 5 output tokens; a test of a tool call and an answer: 30.
fn two_calls() -> Vec<support::Response> {
    vec![
        providers::openai_tool_calls(&[("c1", "get_stock_price", r#"{"ticker":"AAPL"}"#)]),
        providers::openai_answer("AAPL is 178.15."),
    ]
}

/// USD 1,000 per million tokens: a call of 15 tokens costs $0.015, the test's 30 cost $0.03.
const PRICE: &str = "    price: { input: 1000, output: 1000 }\n";

fn test_results(spec: &std::path::Path) -> (support::Output, serde_json::Value) {
    let mut cmd = support::toolrun();
    cmd.env("TEST_KEY", KEY)
        .arg("test")
        .arg(spec)
        .args(["--allow-network", "--format", "json"]);
    let out = run(&mut cmd);
    let json = out.json();
    (out, json)
}

/// [`test_results`] of a spec on the fake model answering `replies`, with `model` under its
/// entry and `more` at the end (see [`Fake::spec_file`]).
fn tested(
    replies: Vec<support::Response>,
    model: &str,
    more: &str,
) -> (support::Output, serde_json::Value) {
    let fake = Fake::openai(replies);
    let spec = fake.spec_file(model, more);
    test_results(&spec)
}

/// `toolrun test SPEC --record all --format json` on the fake model.
fn record_all(spec: &std::path::Path) -> support::Output {
    let mut cmd = support::toolrun();
    cmd.env("TEST_KEY", KEY)
        .arg("test")
        .arg(spec)
        .args(["--record", "all", "--format", "json"]);
    run(&mut cmd)
}

fn failures(results: &serde_json::Value) -> Vec<String> {
    results["tests"][0]["attempts"][0]["failures"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["message"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn one_test(expect: &str) -> String {
    format!("tests:\n  - name: budget\n    query: price of AAPL\n    expect: {{ status: ok, {expect} }}\n")
}

#[test]
fn a_token_budget_counts_every_model_call_of_the_test() {
    let (out, results) = tested(two_calls(), "", &one_test("max_tokens: 29"));
    out.assert_code(1);
    assert_eq!(
        failures(&results),
        ["expected at most 29 tokens, the test used 30 (live run)"],
        "{out:?}"
    );
    let budget = &results["tests"][0]["attempts"][0]["budgets"][0];
    assert_eq!(budget["budget"], "max_tokens");
    assert_eq!(budget["used"], 30.0);

    let (out, results) = tested(two_calls(), "", &one_test("max_tokens: 30"));
    out.assert_success();
    assert_eq!(
        results["tests"][0]["attempts"][0]["budgets"][0]["share"],
        1.0
    );

    // JUnit carries each budget as a property of the test case.
    let fake = Fake::openai(two_calls());
    let spec = fake.spec_file("", &one_test("max_tokens: 40"));
    let junit = spec.parent().expect("folder").join("junit.xml");
    let mut cmd = support::toolrun();
    cmd.env("TEST_KEY", KEY)
        .arg("test")
        .arg(&*spec)
        .arg("--allow-network")
        .arg("--junit")
        .arg(&junit);
    run(&mut cmd).assert_success();
    let xml = std::fs::read_to_string(&junit).unwrap_or_default();
    assert!(
        xml.contains("<property name=\"budget.max_tokens\" value=\"30 / 40 tokens (75%)\"/>"),
        "{xml}"
    );
}

#[test]
fn a_cost_budget_uses_the_models_price() {
    let (out, results) = tested(two_calls(), PRICE, &one_test("max_cost_usd: 0.02"));
    out.assert_code(1);
    assert_eq!(
        failures(&results),
        ["expected a cost of at most $0.02, the test cost $0.030000 (live run)"],
        "{out:?}"
    );

    let (out, results) = tested(two_calls(), PRICE, &one_test("max_cost_usd: 0.06"));
    out.assert_success();
    let budget = &results["tests"][0]["attempts"][0]["budgets"][0];
    assert_eq!(budget["budget"], "max_cost_usd");
    let share = budget["share"].as_f64().unwrap_or(0.0);
    assert!((share - 0.5).abs() < 1e-9, "{budget}");
}

#[test]
fn a_latency_budget_measures_the_runs_wall_time() {
    let slow =
        || vec![providers::openai_answer("AAPL is 178.15.").delay(Duration::from_millis(200))];
    let (out, results) = tested(slow(), "", &one_test("max_latency_ms: 1"));
    out.assert_code(1);
    let failed = failures(&results);
    assert_eq!(failed.len(), 1, "{out:?}");
    assert!(
        failed[0].starts_with("expected a wall time of at most 1 ms, the run took ")
            && failed[0].ends_with(" ms (live run)"),
        "{failed:?}"
    );

    let (out, results) = tested(slow(), "", &one_test("max_latency_ms: 60000"));
    out.assert_success();
    let used = results["tests"][0]["attempts"][0]["budgets"][0]["used"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(used >= 200.0, "the fake waited 200 ms: {used}");
}

#[test]
fn a_cost_limit_stops_the_run_before_it_spends_more() {
    let fake = Fake::openai(two_calls());
    let spec = fake.spec_file(PRICE, "limits:\n  max_cost_usd: 0.01\n");
    let out = support::run_json(&spec, Some(KEY), "price of AAPL");
    out.assert_code(3);
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "max_cost_usd", "{out:?}");
    assert_eq!(trace["status"], "needs_review");
    assert_eq!(fake.requests().len(), 1, "the second call would spend more");

    // Under the limit the run goes on to its answer.
    let fake = Fake::openai(two_calls());
    let spec = fake.spec_file(PRICE, "limits:\n  max_cost_usd: 1\n");
    let out = support::run_json(&spec, Some(KEY), "price of AAPL");
    out.assert_success();
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn check_refuses_a_cost_budget_on_a_model_without_a_price() {
    let fake = Fake::openai(Vec::new());
    for extra in [
        one_test("max_cost_usd: 0.01"),
        "limits:\n  max_cost_usd: 0.01\n".to_string(),
        // In a turn's `expect` too, not first when the test runs.
        "tests:\n  - name: talk\n    turns:\n      - query: price of AAPL\n      - query: and MSFT?\n        expect: { max_cost_usd: 0.01 }\n".to_string(),
    ] {
        let spec = fake.spec_file("", &extra);
        let mut cmd = support::toolrun();
        cmd.args(["check", "--format", "json"]).arg(&*spec);
        let out = run(&mut cmd);
        out.assert_code(1);
        let e050: Vec<serde_json::Value> = out
            .json()
            .as_array()
            .expect("array")
            .iter()
            .filter(|d| d["code"] == "E050")
            .cloned()
            .collect();
        assert_eq!(e050.len(), 1, "{out:?}");
        assert!(e050[0]["line"].as_u64().is_some_and(|l| l > 20), "{out:?}");
        // With a price, the same spec is clean.
        let priced = fake.spec_file(PRICE, &extra);
        let mut cmd = support::toolrun();
        cmd.arg("check").arg(&*priced);
        run(&mut cmd).assert_success();
    }
}

/// A recorded attempt and its replay are measured too, each saying how it ran.
#[test]
fn recorded_and_replayed_attempts_say_how_they_ran() {
    let fake = Fake::openai(vec![
        providers::openai_answer("AAPL is 178.15.").delay(Duration::from_millis(200))
    ]);
    let tests = "tests:\n  - name: budget\n    query: price of AAPL\n    fixture: budget.json\n    expect: { max_latency_ms: 1, max_tokens: 100 }\n";
    let spec = fake.spec_file("", tests);
    let out = record_all(&spec);
    out.assert_code(1);
    let results = out.json();
    assert_eq!(results["tests"][0]["attempts"][0]["source"], "record");
    let failed = failures(&results);
    assert!(
        failed.iter().any(|f| f.ends_with(" ms (recorded run)")),
        "{failed:?}"
    );
    // The latency's record says how it was measured; the token count is the model's either way.
    let budgets = &results["tests"][0]["attempts"][0]["budgets"];
    assert_eq!(budgets[1]["budget"], "max_latency_ms", "{budgets}");
    assert_eq!(budgets[1]["measured"], "record", "{budgets}");
    assert!(budgets[0].get("measured").is_none(), "{budgets}");

    // Replayed offline: the budgets are checked against the replay, which says so in the
    // results, the terminal, JUnit and the markdown summary.
    let dir = spec.parent().expect("folder").to_path_buf();
    let out = support::toolrun_in(
        &dir,
        &[
            "test",
            "spec.yaml",
            "--format",
            "json",
            "--results",
            "replayed.json",
            "--junit",
            "junit.xml",
        ],
    );
    let results = out.json();
    let attempt = &results["tests"][0]["attempts"][0];
    assert_eq!(attempt["source"], "replay", "{out:?}");
    assert_eq!(attempt["budgets"][0]["budget"], "max_tokens");
    assert_eq!(attempt["budgets"][0]["used"], 15.0);
    assert_eq!(attempt["budgets"][1]["measured"], "replay", "{out:?}");
    let xml = std::fs::read_to_string(dir.join("junit.xml")).unwrap_or_default();
    assert!(
        xml.contains("<property name=\"budget.max_latency_ms\" value=\"")
            && xml.contains(", replayed from its fixture)\"/>"),
        "{xml}"
    );
    // A replay may take under 1 ms or over it: no time is asserted. Over it, the test fails and
    // the terminal shows each of its budgets; under it, the test passes and a budget 15% used is
    // not worth a line (the replay's latency is, from 90% of its budget).
    let out = support::toolrun_in(&dir, &["test", "spec.yaml"]);
    if out.stdout.contains("FAIL live_openai::budget") {
        support::assert_contains(
            &out.stdout,
            &[
                "     budget max_tokens: 15 / 100 tokens (15%)\n",
                "     budget max_latency_ms: ",
                ", replayed from its fixture) over budget\n",
            ],
        );
    } else {
        assert!(!out.stdout.contains("budget max_tokens"), "{out:?}");
    }
    let out = support::toolrun_in(&dir, &["report", "replayed.json", "--format", "markdown"]);
    out.assert_success();
    support::assert_contains(
        &out.stdout,
        &[
            "| live\\_openai::budget | max\\_tokens | 15 / 100 tokens (15%) |",
            "| live\\_openai::budget | max\\_latency\\_ms | ",
            " / 1 ms (",
            ", replayed from its fixture) |",
        ],
    );
}

/// The terminal is not a budget line per passing test: a test that passed shows only the budgets
/// it came within 90% of (or went over, an attempt within `--pass-rate`); a failing test shows
/// each of its budgets. The results file and JUnit keep every figure. Each reply: 15 tokens.
#[test]
fn the_terminal_shows_a_passing_tests_budgets_only_when_it_came_close() {
    let answers = (0..3)
        .map(|_| providers::openai_answer("AAPL is 178.15."))
        .collect();
    let fake = Fake::openai(answers);
    let tests = "tests:\n  - name: far\n    query: price of AAPL\n    expect: { status: ok, max_tokens: 100, max_latency_ms: 600000 }\n  - name: close\n    query: price of AAPL\n    expect: { status: ok, max_tokens: 16 }\n  - name: wrong\n    query: price of AAPL\n    expect: { output_contains: MSFT, max_tokens: 100 }\n";
    let spec = fake.spec_file("", tests);
    let dir = spec.parent().expect("folder").to_path_buf();
    let mut cmd = support::toolrun();
    cmd.env("TEST_KEY", KEY).current_dir(&dir).args([
        "test",
        "spec.yaml",
        "--allow-network",
        "--results",
        "results.json",
        "--junit",
        "junit.xml",
    ]);
    let out = run(&mut cmd);
    out.assert_code(1);
    let far = out
        .stdout
        .split("PASS live_openai::close")
        .next()
        .unwrap_or_default();
    assert!(far.contains("PASS live_openai::far\n"), "{out:?}");
    assert!(!far.contains("budget"), "a far budget got a line: {out:?}");
    support::assert_contains(
        &out.stdout,
        &[
            "PASS live_openai::close\n     budget max_tokens: 15 / 16 tokens (94%)\n",
            "FAIL live_openai::wrong\n",
            "     budget max_tokens: 15 / 100 tokens (15%)\n",
            "2 passed, 1 failed",
        ],
    );
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("results.json")).unwrap_or_default(),
    )
    .unwrap_or_default();
    let far = &results["tests"][0]["attempts"][0]["budgets"];
    assert_eq!(far.as_array().map(Vec::len), Some(2), "{far}");
    assert_eq!(far[0]["used"], 15.0, "{far}");
    let xml = std::fs::read_to_string(dir.join("junit.xml")).unwrap_or_default();
    assert!(
        xml.contains("<property name=\"budget.max_tokens\" value=\"15 / 100 tokens (15%)\"/>")
            && xml.contains("<property name=\"budget.max_latency_ms\" value=\""),
        "{xml}"
    );
}

/// The HTML report shows each budget of an attempt and how close it came, in a real browser.
#[test]
fn the_report_shows_each_budget_and_how_close_it_came() {
    let fake = Fake::openai(two_calls());
    let spec = fake.spec_file(
        PRICE,
        &one_test("max_cost_usd: 0.06, max_tokens: 4000, max_latency_ms: 60000"),
    );
    let dir = spec.parent().expect("folder").to_path_buf();
    let mut cmd = support::toolrun();
    cmd.env("TEST_KEY", KEY).current_dir(&dir).args([
        "test",
        "spec.yaml",
        "--allow-network",
        "--results",
        "results.json",
    ]);
    run(&mut cmd).assert_success();
    let mut cmd = support::toolrun();
    cmd.current_dir(&dir)
        .args(["report", "results.json", "-o", "report.html"]);
    run(&mut cmd).assert_success();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap_or_default();
    assert!(
        html.contains("\"budget\":\"max_cost_usd\""),
        "the page has no budgets"
    );
    // Worded by toolrun as in the markdown summary, JUnit and the terminal.
    assert!(
        html.contains("\"text\":\"30 / 4,000 tokens (1%)\""),
        "the page's budget has no text"
    );

    let Some(browser) = support::chromium() else {
        return;
    };
    let dom = support::browser::rendered_dom(
        &browser,
        &dir.join("report.html"),
        "#open=0/1/live_openai%3A%3Abudget",
    );
    support::assert_contains(
        &dom,
        &[
            "budget 50%",
            "budgets · measured on the live attempt",
            "max_tokens: 30 / 4,000 tokens (1%)",
            "max_cost_usd: $0.0300 / $0.0600 (50%)",
            "max_latency_ms: ",
            // How the wall time was measured.
            " / 1.0 min (0%, live run)",
        ],
    );
}

/// Per turn: a turn's budgets count that turn's own model calls (each reply here: 15 tokens).
/// Each is recorded on its turn with whether the turn's `expect` held, and every report shows
/// it with how close the turn came: the terminal, JUnit and the markdown summary.
#[test]
fn a_turn_budget_counts_that_turns_calls() {
    let answers = || {
        vec![
            providers::openai_answer("AAPL is 178.15."),
            providers::openai_answer("MSFT is 411.2."),
        ]
    };
    let tests = "tests:\n  - name: talk\n    turns:\n      - query: price of AAPL\n        expect: { max_tokens: 15 }\n      - query: and MSFT?\n        expect: { max_tokens: 14 }\n";
    let (out, results) = tested(answers(), "", tests);
    out.assert_code(1);
    let failed = failures(&results);
    assert_eq!(failed.len(), 1, "{out:?}");
    assert!(
        failed[0].starts_with("turn 2 (line ")
            && failed[0].ends_with("expected at most 14 tokens, the test used 15 (live run)"),
        "{failed:?}"
    );
    let turns = &results["tests"][0]["attempts"][0]["turns"];
    assert_eq!(turns[0]["outcome"], "passed", "{turns}");
    assert_eq!(turns[0]["budgets"][0]["used"], 15.0, "{turns}");
    assert_eq!(turns[0]["budgets"][0]["share"], 1.0, "{turns}");
    assert_eq!(turns[1]["outcome"], "failed", "{turns}");
    assert_eq!(turns[1]["budgets"][0]["limit"], 14.0, "{turns}");

    // The terminal, JUnit and a results file for the report, from one run.
    let fake = Fake::openai(answers());
    let spec = fake.spec_file("", tests);
    let dir = spec.parent().expect("folder").to_path_buf();
    let mut cmd = support::toolrun();
    cmd.env("TEST_KEY", KEY).current_dir(&dir).args([
        "test",
        "spec.yaml",
        "--allow-network",
        "--junit",
        "junit.xml",
        "--results",
        "results.json",
    ]);
    let out = run(&mut cmd);
    out.assert_code(1);
    support::assert_contains(
        &out.stdout,
        &[
            "FAIL live_openai::talk",
            "     budget turn 1 max_tokens: 15 / 15 tokens (100%)\n",
            "     budget turn 2 max_tokens: 15 / 14 tokens (107%) over budget\n",
        ],
    );
    let xml = std::fs::read_to_string(dir.join("junit.xml")).unwrap_or_default();
    assert!(
        xml.contains(
            "<property name=\"turn.2.budget.max_tokens\" value=\"15 / 14 tokens (107%)\"/>"
        ),
        "{xml}"
    );
    let out = support::toolrun_in(&dir, &["report", "results.json", "--format", "markdown"]);
    out.assert_success();
    support::assert_contains(
        &out.stdout,
        &[
            "| live\\_openai::talk | turn 1 max\\_tokens | 15 / 15 tokens (100%) |",
            "| live\\_openai::talk | turn 2 max\\_tokens | ❌ 15 / 14 tokens (107%) |",
            "**live\\_openai::talk** (",
            ", attempt 1): failed at turn 2",
            "| 1 | price of AAPL | ✅ passed | AAPL is 178.15. |",
            "| 2 | and MSFT? | ❌ failed: turns\\[2\\].max\\_tokens | MSFT is 411.2. |",
        ],
    );
}

/// A turn over its budget stops the conversation there, as any failed `expect` does: a live
/// run must not go on spending. The model server hears of no later turn.
#[test]
fn a_turn_over_its_token_budget_stops_the_conversation() {
    let fake = Fake::openai(vec![
        providers::openai_answer("AAPL is 178.15."),
        providers::openai_answer("MSFT is 411.2."),
        providers::openai_answer("Both are up."),
    ]);
    let tests = "tests:\n  - name: talk\n    turns:\n      - query: price of AAPL\n      - query: and MSFT?\n        expect: { max_tokens: 14 }\n      - query: which is up?\n";
    let spec = fake.spec_file("", tests);
    let (out, results) = test_results(&spec);
    out.assert_code(1);
    assert_eq!(
        fake.requests().len(),
        2,
        "turn 3 reached the model: {out:?}"
    );
    let failed = failures(&results);
    assert_eq!(failed.len(), 1, "{out:?}");
    assert!(
        failed[0].starts_with("turn 2 (line ")
            && failed[0].ends_with("expected at most 14 tokens, the test used 15 (live run)"),
        "{failed:?}"
    );
    let turns = &results["tests"][0]["attempts"][0]["turns"];
    assert_eq!(turns.as_array().map(Vec::len), Some(2), "{turns}");
    assert_eq!(turns[1]["outcome"], "failed", "{turns}");
}

/// A turn over its latency budget when recorded stops the recording there (the fixture holds
/// the turns that ran). Replayed, that turn takes toolrun's time and passes its budget, but the
/// turns after it were never recorded: the replay fails at the first of them, saying the
/// recording stopped at the turn whose latency budget failed when recorded. (Margins: the fake
/// waits 6 s against a budget of 3 s, so a replay of one answer
/// stays under the budget even on a loaded 2-core CI machine.)
#[test]
fn a_recording_stopped_by_a_latency_budget_replays_as_it_stopped() {
    let fake = Fake::openai(vec![
        providers::openai_answer("AAPL is 178.15.").delay(Duration::from_millis(6000)),
        providers::openai_answer("MSFT is 411.2."),
        providers::openai_answer("Both are up."),
    ]);
    let tests = "tests:\n  - name: talk\n    fixture: talk.json\n    turns:\n      - query: price of AAPL\n        expect: { max_latency_ms: 3000 }\n      - query: and MSFT?\n      - query: which is up?\n";
    let spec = fake.spec_file("", tests);
    let out = record_all(&spec);
    out.assert_code(1);
    assert_eq!(
        fake.requests().len(),
        1,
        "later turns reached the model: {out:?}"
    );
    let results = out.json();
    let failed = failures(&results);
    assert_eq!(failed.len(), 1, "{out:?}");
    assert!(
        failed[0].starts_with("turn 1 (line ")
            && failed[0].contains("expected a wall time of at most 3000 ms, the run took ")
            && failed[0].ends_with(" ms (recorded run)"),
        "{failed:?}"
    );
    let dir = spec.parent().expect("folder").to_path_buf();
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("talk.json")).unwrap_or_default())
            .unwrap_or_default();
    let recorded = fixture["trace"]["turns"].as_array().map(Vec::len);
    assert_eq!(recorded, Some(1), "the fixture holds the turns that ran");

    let out = support::toolrun_in(&dir, &["test", "spec.yaml", "--format", "json"]);
    out.assert_code(1);
    let results = out.json();
    let attempt = &results["tests"][0]["attempts"][0];
    assert_eq!(attempt["source"], "replay", "{out:?}");
    assert_eq!(attempt["turns"][0]["outcome"], "passed", "{attempt}");
    assert_eq!(
        attempt["turns"][0]["budgets"][0]["measured"], "replay",
        "{attempt}"
    );
    let failed = failures(&results);
    assert_eq!(failed.len(), 1, "{out:?}");
    assert!(
        failed[0].starts_with(
            "turn 2 (\"and MSFT?\") was not run: the recording stopped at turn 1, whose max_latency_ms budget failed when recorded: "
        ) && failed[0].contains(" / 3.0 s (")
            && failed[0].contains("recorded run). Replayed, turn 1 takes toolrun's time")
            && failed[0].ends_with("re-record the fixture (--record all) or raise the budget"),
        "{failed:?}"
    );
    assert!(!out.stdout.contains("exhausted"), "{out:?}");
}

/// The test's own budgets count the whole conversation, and a conversation over one stops at
/// the turn that went over it, as a turn over its own budget does: the model hears of no later
/// turn, and the failure names the turn and the turns not run. Each reply: 15 tokens, $0.015.
/// Replayed, the recording stops where it stopped and fails the same way.
#[test]
fn a_conversation_over_the_tests_budget_stops_at_the_turn_that_went_over() {
    let answers = || {
        ["AAPL is 178.15.", "MSFT is 411.2.", "Both are up.", "Yes."]
            .into_iter()
            .map(providers::openai_answer)
            .collect::<Vec<_>>()
    };
    let turns = "    turns:\n      - query: price of AAPL\n      - query: and MSFT?\n      - query: which is up?\n      - query: sure?\n";
    for (budget, stopped_at, not_run, failure) in [
        (
            "max_tokens: 29",
            2,
            "turns 3 to 4 were not run",
            "expected at most 29 tokens, the test used 30 (recorded run)",
        ),
        (
            "max_cost_usd: 0.04",
            3,
            "turn 4 was not run",
            "expected a cost of at most $0.04, the test cost $0.045000 (recorded run)",
        ),
    ] {
        let fake = Fake::openai(answers());
        let tests =
            format!("fixtures: fx\ntests:\n  - name: talk\n    expect: {{ {budget} }}\n{turns}");
        let spec = fake.spec_file(PRICE, &tests);
        let out = record_all(&spec);
        out.assert_code(1);
        assert_eq!(
            fake.requests().len(),
            stopped_at,
            "a turn after {budget} was spent reached the model: {out:?}"
        );
        let results = out.json();
        let failed = failures(&results);
        let line = std::fs::read_to_string(&*spec)
            .unwrap_or_default()
            .lines()
            .position(|l| {
                l.contains(["price of AAPL", "and MSFT?", "which is up?"][stopped_at - 1])
            })
            .map_or(0, |i| i + 1);
        let said = format!(
            "{failure}; the conversation went over it at turn {stopped_at} (line {line}) and stopped there: {not_run}"
        );
        assert_eq!(failed, std::slice::from_ref(&said), "{out:?}");
        let turns = &results["tests"][0]["attempts"][0]["turns"];
        assert_eq!(turns.as_array().map(Vec::len), Some(stopped_at), "{turns}");
        assert_eq!(turns[stopped_at - 1]["outcome"], "passed", "{turns}");

        // Replayed offline: the recording has the turns that ran, and fails where it stopped.
        let dir = spec.parent().expect("folder").to_path_buf();
        let out = support::toolrun_in(&dir, &["test", "spec.yaml", "--format", "json"]);
        out.assert_code(1);
        let results = out.json();
        assert_eq!(results["tests"][0]["attempts"][0]["source"], "replay");
        let replayed = said.replace("(recorded run)", "(replayed from its fixture)");
        assert_eq!(failures(&results), [replayed], "{out:?}");
        assert_eq!(fake.requests().len(), stopped_at, "the replay sent nothing");
    }
}

/// The test's latency budget counts the conversation's turns together: over it at turn 2, the
/// recording stops there. Replayed, the turns take toolrun's time and stay within it, but turn
/// 3 was never recorded: the replay fails there, saying the recording stopped at turn 2 over
/// the test's latency budget. (Margins: each recorded turn waits 3 s against 5 s for both, so
/// turn 1 alone is 2 s within it and a replay of two answers stays within it on a loaded
/// machine.)
#[test]
fn a_recording_over_the_tests_latency_budget_stops_and_replays_as_it_stopped() {
    let fake = Fake::openai(vec![
        providers::openai_answer("AAPL is 178.15.").delay(Duration::from_millis(3000)),
        providers::openai_answer("MSFT is 411.2.").delay(Duration::from_millis(3000)),
        providers::openai_answer("Both are up."),
    ]);
    let tests = "tests:\n  - name: talk\n    fixture: talk.json\n    expect: { max_latency_ms: 5000 }\n    turns:\n      - query: price of AAPL\n      - query: and MSFT?\n      - query: which is up?\n";
    let spec = fake.spec_file("", tests);
    let out = record_all(&spec);
    out.assert_code(1);
    assert_eq!(
        fake.requests().len(),
        2,
        "turn 3 reached the model: {out:?}"
    );
    let failed = failures(&out.json());
    assert_eq!(failed.len(), 1, "{out:?}");
    assert!(
        failed[0].starts_with("expected a wall time of at most 5000 ms, the run took ")
            && failed[0]
                .contains(" ms (recorded run); the conversation went over it at turn 2 (line ")
            && failed[0].ends_with(") and stopped there: turn 3 was not run"),
        "{failed:?}"
    );

    let dir = spec.parent().expect("folder").to_path_buf();
    let out = support::toolrun_in(&dir, &["test", "spec.yaml", "--format", "json"]);
    out.assert_code(1);
    let failed = failures(&out.json());
    assert_eq!(failed.len(), 1, "{out:?}");
    assert!(
        failed[0].starts_with(
            "turn 3 (\"which is up?\") was not run: the recording stopped at turn 2, where the conversation went over the test's max_latency_ms budget when recorded: "
        ) && failed[0].contains(" / 5.0 s (")
            && failed[0].contains("recorded run). Replayed, turns 1 to 2 take toolrun's time")
            && failed[0].ends_with("re-record the fixture (--record all) or raise the budget"),
        "{failed:?}"
    );
}
