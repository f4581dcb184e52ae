//! Multi-turn tests (issue 33 §1), through the real binary: a test with `turns:` runs one
//! conversation, each turn judged by its own `expect`, the model (scripted here) seeing every
//! turn before it; a failing turn stops the test there and is named; a recorded conversation
//! replays turn by turn.

mod support;

use support::{run, toolrun, write};

const STOCKS: &str = include_str!("data/conversations/stocks.yaml");

fn stocks_with(tests: &str) -> String {
    let head = STOCKS.split("tests:\n").next().unwrap_or_default();
    format!("{head}tests:\n{tests}")
}

#[test]
fn each_turn_is_judged_and_later_turns_see_the_earlier_ones() {
    let dir = support::temp_dir("turns-pass");
    write(&dir, "s.yaml", STOCKS);
    let out = run(toolrun().current_dir(&dir).args(["test", "s.yaml"]));
    out.assert_code(1);
    // Turn 2's script needs turn 1's answer in the history and its price in `results`.
    assert!(
        out.stdout.contains("PASS convo::price_then_gain"),
        "{out:?}"
    );
    // Without the first turn the same question gets the other script.
    assert!(out.stdout.contains("PASS convo::gain_alone"), "{out:?}");
    assert!(
        out.stdout.contains("FAIL convo::fails_at_turn_one"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(
            "turn 1 (line 50): expected the output to contain \"999\", got \"AAPL is 178.15.\""
        ),
        "{out:?}"
    );
    assert_eq!(out.stdout.lines().last(), Some("2 passed, 1 failed"));
}

#[test]
fn a_failing_turn_stops_the_conversation_and_names_the_turn() {
    let dir = support::temp_dir("turns-stop");
    let tests = r#"  - name: stops
    turns:
      - query: What is AAPL at?
      - query: And my gain on 100 bought at 150?
        expect: { output_contains: "nope" }
      - query: Thanks
        expect: { output_contains: "turn 3" }
"#;
    write(&dir, "s.yaml", &stocks_with(tests));
    let out = run(toolrun()
        .current_dir(&dir)
        .args(["test", "s.yaml", "--format", "json"]));
    out.assert_code(1);
    let doc = out.json();
    let attempt = &doc["tests"][0]["attempts"][0];
    let failures = attempt["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{attempt:#}");
    assert_eq!(failures[0]["assertion"], "turns[2].output_contains");
    assert!(
        failures[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("turn 2 (line "),
        "{attempt:#}"
    );
    // Turn 3 never ran: two turns' calls, and the answer is turn 2's.
    assert_eq!(attempt["answer"], "Your gain is 2815.");
    assert_eq!(attempt["tool_calls"].as_array().unwrap().len(), 2);
    // The results show each turn that ran, and JUnit has a property per turn.
    let turns = attempt["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{attempt:#}");
    assert_eq!(turns[1]["turn"], 2);
    assert_eq!(turns[1]["query"], "And my gain on 100 bought at 150?");
    assert_eq!(
        turns[1]["tool_calls"],
        serde_json::json!(["calculate_expression"])
    );
    run(toolrun()
        .current_dir(&dir)
        .args(["test", "s.yaml", "--junit", "junit.xml"]))
    .assert_code(1);
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(
        junit.contains("<property name=\"turn.1\" value=\"ok: AAPL is 178.15.\"/>"),
        "{junit}"
    );
    assert!(
        junit.contains("<property name=\"turn.2\" value=\"ok: Your gain is 2815.\"/>"),
        "{junit}"
    );
}

#[test]
fn a_spec_with_query_and_turns_or_empty_turns_is_an_error() {
    let dir = support::temp_dir("turns-check");
    let tests = r#"  - name: both
    query: hi
    turns: [{ query: hi }]
  - name: none
    turns: []
  - name: no_query
    turns: [{ expect: { status: ok } }]
  - name: judged_turn
    turns: [{ query: hi, expect: { judge: { model: scripted, rubric: polite } } }]
"#;
    write(&dir, "s.yaml", &stocks_with(tests));
    let out = run(toolrun().current_dir(&dir).args(["check", "s.yaml"]));
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("test `both` has both `query` and `turns`"),
        "{out:?}"
    );
    assert!(out.stderr.contains("test `none` has no turns"), "{out:?}");
    assert!(out.stderr.contains("turn 1 of test `no_query`"), "{out:?}");
    // A grader judges the whole conversation: a turn's is an error, not ignored.
    assert!(
        out.stderr
            .contains("turn 1 of test `judged_turn` has a `judge`"),
        "{out:?}"
    );
}

#[test]
fn a_recorded_conversation_replays_every_turn() {
    let dir = support::temp_dir("turns-replay");
    let tests = r#"  - name: price_then_gain
    fixture: fx.json
    turns:
      - query: What is AAPL at?
        expect: { output_contains: "178.15" }
      - query: And my gain on 100 bought at 150?
        expect: { output_contains: "2815" }
"#;
    write(&dir, "s.yaml", &stocks_with(tests));
    run(toolrun()
        .current_dir(&dir)
        .args(["test", "s.yaml", "--record", "missing"]))
    .assert_success();
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fx.json")).unwrap()).unwrap();
    let turns = fixture["trace"]["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1]["query"], "And my gain on 100 bought at 150?");
    assert_eq!(turns[1]["final_output"], "Your gain is 2815.");
    assert_eq!(fixture["query"], "What is AAPL at?");
    run(toolrun().current_dir(&dir).args(["replay", "fx.json"])).assert_success();
    run(toolrun().current_dir(&dir).args(["test", "s.yaml"])).assert_success();

    // The spec now answers turn 2 differently: the replay names the turn that diverged.
    let changed = std::fs::read_to_string(dir.join("s.yaml"))
        .unwrap()
        .replace("Your gain is", "You made");
    std::fs::write(dir.join("s.yaml"), changed).unwrap();
    let out = run(toolrun().current_dir(&dir).args(["replay", "fx.json"]));
    out.assert_code(1);
    assert!(out.stdout.contains("/turns/1/final_output"), "{out:?}");
}

/// A live model is sent the whole conversation in its API's own shape at each turn: the fakes
/// check every request's wire format, and turn 2's first request holds turn 1 in order.
fn second_turn_sees_the_first(fake: support::providers::Fake, expected_requests: usize) {
    let tests = r#"tests:
  - name: two_turns
    turns:
      - query: What is AAPL at?
        expect: { tool_calls: [get_stock_price], output_contains: "178.15" }
      - query: And my gain on 100 bought at 150?
        expect: { tool_calls: [], output_contains: "2815" }
"#;
    let spec = fake.spec_file("", tests);
    let out = run(toolrun()
        .arg("test")
        .arg(spec.path())
        .arg("--allow-network")
        .env("TEST_KEY", support::providers::KEY));
    out.assert_success();
    let bodies = fake.bodies();
    assert_eq!(bodies.len(), expected_requests, "{out:?}");
    let second_turn = bodies[2].to_string();
    let order = [
        "What is AAPL at?",
        "get_stock_price",
        "178.15",
        "AAPL is 178.15.",
        "And my gain on 100 bought at 150?",
    ];
    let mut from = 0;
    for text in order {
        let at = second_turn[from..]
            .find(text)
            .unwrap_or_else(|| panic!("{text:?} not after byte {from} of {second_turn}"));
        from += at + text.len();
    }
    // Turn 1's first request knew nothing of turn 2.
    assert!(!bodies[0].to_string().contains("my gain"));
}

#[test]
fn openai_chat_is_sent_the_conversation() {
    use support::providers::{openai_answer, openai_tool_calls, Fake};
    let fake = Fake::openai(vec![
        openai_tool_calls(&[("call_a", "get_stock_price", r#"{"ticker":"AAPL"}"#)]),
        openai_answer("AAPL is 178.15."),
        openai_answer("Your gain is 2815."),
    ]);
    second_turn_sees_the_first(fake, 3);
}

#[test]
fn openai_responses_is_sent_the_conversation() {
    use support::providers::Fake;
    use support::responses::{answer, tool_calls};
    let fake = Fake::responses(vec![
        tool_calls(&[("call_a", "get_stock_price", r#"{"ticker":"AAPL"}"#)]),
        answer("AAPL is 178.15."),
        answer("Your gain is 2815."),
    ]);
    second_turn_sees_the_first(fake, 3);
}

#[test]
fn anthropic_is_sent_the_conversation() {
    use support::providers::{anthropic_answer, anthropic_tool_use, Fake};
    let fake = Fake::anthropic(vec![
        anthropic_tool_use(
            None,
            &[(
                "toolu_a",
                "get_stock_price",
                serde_json::json!({"ticker": "AAPL"}),
            )],
        ),
        anthropic_answer("AAPL is 178.15."),
        anthropic_answer("Your gain is 2815."),
    ]);
    second_turn_sees_the_first(fake, 3);
}

/// `toolrun diff` names the turn where two conversations part: two fixtures (traces) and two
/// results files of the same test, the second turn's answer changed.
#[test]
fn diff_names_the_turn_where_two_conversations_differ() {
    let dir = support::temp_dir("turns-diff");
    let tests = r#"  - name: price_then_gain
    fixture: fx.json
    turns:
      - query: What is AAPL at?
      - query: And my gain on 100 bought at 150?
"#;
    for (sub, answer) in [("a", "Your gain is"), ("b", "You made")] {
        let spec = stocks_with(tests).replace("Your gain is", answer);
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        write(&dir.join(sub), "s.yaml", &spec);
        run(toolrun().current_dir(dir.join(sub)).args([
            "test",
            "s.yaml",
            "--record",
            "missing",
            "--results",
            "r.json",
        ]))
        .assert_success();
    }
    let out = run(toolrun()
        .current_dir(&dir)
        .args(["diff", "a/fx.json", "b/fx.json"]));
    out.assert_code(1);
    assert!(
        out.stdout
            .contains("turn 2: final_output: \"Your gain is 2815.\" → \"You made 2815.\""),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("first diverging step: 4 (turn 2)"),
        "{out:?}"
    );
    // Turn 1 is the same, and the turn's fields are not repeated as JSON paths.
    assert!(!out.stdout.contains("turn 1:"), "{out:?}");
    assert!(!out.stdout.contains("/turns/1/final_output"), "{out:?}");

    let out = run(toolrun()
        .current_dir(&dir)
        .args(["diff", "a/r.json", "b/r.json", "--format", "json"]));
    out.assert_code(1);
    let doc = out.json();
    let turns = &doc["tests"][0]["attempts"][0][1]["turns"];
    assert_eq!(turns[0]["turn"], 2, "{doc:#}");
    assert_eq!(turns[0]["changes"][0]["pointer"], "answer", "{doc:#}");
    let out = run(toolrun()
        .current_dir(&dir)
        .args(["diff", "a/r.json", "b/r.json"]));
    assert!(
        out.stdout
            .contains("turn 2: answer: \"Your gain is 2815.\" → \"You made 2815.\""),
        "{out:?}"
    );
}
