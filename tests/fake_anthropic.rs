//! `toolrun run` against a fake Anthropic Messages server (tests/support) that validates every
//! request. Real servers: `scripts/live-examples.sh`.

mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::providers::{self, Fake, KEY};
use support::{run, run_json, toolrun, write};

#[test]
fn two_step_plan_with_parallel_calls() {
    let fake = Fake::anthropic(vec![
        providers::anthropic_tool_use(
            Some("Let me look both up."),
            &[
                ("toolu_a", "get_stock_price", json!({"ticker": "AAPL"})),
                ("toolu_m", "get_stock_price", json!({"ticker": "MSFT"})),
            ],
        ),
        providers::anthropic_tool_use(
            None,
            &[(
                "toolu_c",
                "calculate_expression",
                json!({"expression": "411.2 - 178.15"}),
            )],
        ),
        providers::anthropic_answer("MSFT is 233.05 above AAPL."),
    ]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "How far apart are MSFT and AAPL?");
    out.assert_success();
    let trace = out.json();
    assert_eq!(trace["final_output"], "MSFT is 233.05 above AAPL.");
    assert_eq!(trace["tool_results"].as_array().map(Vec::len), Some(3));
    assert_eq!(fake.violations(), Vec::<String>::new());

    let bodies = fake.bodies();
    assert_eq!(
        bodies[0]["system"],
        "You answer stock questions. Use the tools; never guess a price."
    );
    assert_eq!(
        bodies[0]["max_tokens"], 1024,
        "the API requires max_tokens; toolrun defaults it"
    );
    assert_eq!(bodies[0]["tools"][0]["input_schema"]["type"], "object");
    // Both results in ONE user message right after the assistant's two tool_use blocks.
    let msgs = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(
        msgs[1]["content"][0],
        json!({"type": "text", "text": "Let me look both up."})
    );
    assert_eq!(msgs[1]["content"][1]["id"], "toolu_a");
    assert_eq!(
        msgs[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "178.15"},
            {"type": "tool_result", "tool_use_id": "toolu_m", "content": "411.2"},
        ]})
    );
    assert_eq!(trace["usage"]["input_tokens"], 30);
    assert_eq!(trace["usage"]["output_tokens"], 15);
    assert_eq!(trace["usage"]["total_tokens"], 45);
}

#[test]
fn answer_without_tools() {
    let fake = Fake::anthropic(vec![providers::anthropic_answer("Hello!")]);
    let spec = fake.spec_file("    max_tokens: 200\n    temperature: 0.2", "");
    let out = run(toolrun()
        .arg("run")
        .arg(&spec)
        .args(["--query", "hi"])
        .env("TEST_KEY", KEY));
    out.assert_success();
    assert_eq!(out.stdout.trim(), "Hello!");
    let req = &fake.requests()[0];
    assert_eq!(req.header("x-api-key"), Some(KEY));
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(fake.bodies()[0]["max_tokens"], 200);
    assert_eq!(fake.bodies()[0]["temperature"], 0.2);
}

#[test]
fn tool_errors_go_back_with_is_error() {
    let fake = Fake::anthropic(vec![
        providers::anthropic_tool_use(
            None,
            &[("toolu_z", "get_stock_price", json!({"ticker": "ZZZZ"}))],
        ),
        providers::anthropic_answer("I could not find ZZZZ."),
    ]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "ZZZZ?");
    out.assert_success();
    assert_eq!(providers::error_kinds(&out.json()).len(), 1);
    let result = &fake.bodies()[1]["messages"][2]["content"][0];
    assert_eq!(result["tool_use_id"], "toolu_z");
    assert_eq!(result["is_error"], true);
    assert!(result["content"]
        .as_str()
        .unwrap()
        .contains("unknown ticker ZZZZ"));
    assert_eq!(fake.violations(), Vec::<String>::new());
}

#[test]
fn malformed_input_then_recovery() {
    // Anthropic sends `input` as an object; a compatible server that sends broken text anyway.
    let fake = Fake::anthropic(vec![
        providers::anthropic_tool_use(
            None,
            &[("toolu_1", "get_stock_price", json!("{\"ticker\": "))],
        ),
        providers::anthropic_tool_use(
            None,
            &[("toolu_2", "get_stock_price", json!({"ticker": "AAPL"}))],
        ),
        providers::anthropic_answer("AAPL is 178.15."),
    ]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "AAPL?");
    out.assert_success();
    let k = providers::error_kinds(&out.json());
    assert!(
        k == ["malformed_decision"] || k == ["invalid_arguments"],
        "{k:?}"
    );
    assert_eq!(
        fake.violations(),
        Vec::<String>::new(),
        "the echoed call has an object input"
    );
}

#[test]
fn unknown_tool_is_reported_back_to_the_model() {
    let fake = Fake::anthropic(vec![
        providers::anthropic_tool_use(
            None,
            &[("toolu_w", "get_weather", json!({"city": "Paris"}))],
        ),
        providers::anthropic_answer("I can only answer stock questions."),
    ]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "Weather?");
    out.assert_success();
    assert_eq!(providers::error_kinds(&out.json()), ["unknown_tool"]);
    assert_eq!(fake.violations(), Vec::<String>::new());
}

#[test]
fn overloaded_then_success() {
    let fake = Fake::anthropic(vec![
        providers::error(
            providers::Api::Anthropic,
            429,
            "rate_limit_error",
            "Number of requests has exceeded your rate limit",
        )
        .header("retry-after", "0"),
        providers::error(
            providers::Api::Anthropic,
            529,
            "overloaded_error",
            "Overloaded",
        )
        .header("retry-after", "0"),
        providers::anthropic_answer("ok"),
    ]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "hi");
    out.assert_success();
    assert_eq!(fake.requests().len(), 3);
}

#[test]
fn unauthorized_fails_with_the_provider_message_and_no_key() {
    let fake = Fake::anthropic(vec![]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some("sk-ant-wrong-4242"), "hi");
    out.assert_code(1);
    let trace = out.json();
    assert_eq!(trace["status"], "failed");
    assert_eq!(trace["stop_reason"], "model_error");
    assert!(out.stderr.contains("invalid x-api-key"), "{out:?}");
    assert!(!out.stdout.contains("sk-ant-wrong-4242") && !out.stderr.contains("sk-ant-wrong-4242"));
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn a_slow_server_times_out() {
    let fake = Fake::anthropic(vec![
        providers::anthropic_answer("late").delay(Duration::from_secs(5))
    ]);
    let spec = fake.spec_file("    timeout: 1s", "");
    let out = run_json(&spec, Some(KEY), "hi");
    out.assert_code(1);
    assert_eq!(out.json()["stop_reason"], "model_error");
    assert!(out.stderr.contains("no reply within 1s"), "{out:?}");
}

#[test]
fn missing_key_variable_exits_2_before_any_request() {
    let fake = Fake::anthropic(vec![providers::anthropic_answer("never")]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, None, "hi");
    out.assert_code(2);
    assert!(out.stderr.contains("TEST_KEY"), "{out:?}");
    assert_eq!(fake.requests().len(), 0);
}

/// `stop_reason: max_tokens` on a text reply (the live `claude_none_stream` example): the
/// partial answer is kept and the run needs review; asking again would be cut the same way.
#[test]
fn an_answer_cut_at_max_tokens_is_kept_and_needs_review() {
    for (stream, reply) in [
        (
            "",
            providers::anthropic_reply(
                json!([{"type": "text", "text": "The price of AAPL is"}]),
                "max_tokens",
            ),
        ),
        (
            "    stream: true",
            providers::anthropic_stream_answer_ending("The price of AAPL is", "max_tokens"),
        ),
    ] {
        let fake = Fake::anthropic(vec![reply]);
        let out = run_json(&fake.spec_file(stream, ""), Some(KEY), "AAPL?");
        providers::assert_cut_off_answer(
            &out,
            &fake,
            "The price of AAPL is",
            "stop_reason: max_tokens",
        );
    }
}

/// A `tool_use` cut off mid-input is malformed: fed back, and the model may recover.
#[test]
fn cut_off_tool_use_is_malformed_then_recovers() {
    let fake = Fake::anthropic(vec![
        providers::anthropic_reply(
            json!([{"type": "text", "text": "Looking it up."},
                   {"type": "tool_use", "id": "toolu_1", "name": "get_stock_price", "input": {}}]),
            "max_tokens",
        ),
        providers::anthropic_answer("AAPL is 178.15."),
    ]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "AAPL?");
    out.assert_success();
    assert_eq!(providers::error_kinds(&out.json()), ["malformed_decision"]);
    // The cut-off reply and the correction alternate properly.
    assert_eq!(fake.violations(), Vec::<String>::new());
    let msgs = fake.bodies()[1]["messages"].as_array().unwrap().clone();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
}

/// The fake is only as good as its validation: it must refuse what the real API refuses.
#[test]
fn the_fake_rejects_what_the_api_rejects() {
    let user = json!({"role": "user", "content": "q"});
    let asst = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]});
    let result = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1"}]});
    let body = |messages: Vec<Value>| json!({"model": "m", "max_tokens": 10, "messages": messages});
    assert_eq!(
        providers::check_anthropic_body(&body(vec![user.clone(), asst.clone(), result.clone()])),
        Ok(())
    );

    let bad = |b: Value, needle: &str| {
        let err = providers::check_anthropic_body(&b).expect_err(needle);
        assert!(err.contains(needle), "{err}");
    };
    bad(json!({"model": "m", "messages": [user]}), "max_tokens");
    let tools = json!([{"name": "f", "input_schema": {"type": "object"}}]);
    let choice = |c: Value| json!({"model": "m", "max_tokens": 10, "messages": [user], "tools": tools, "tool_choice": c});
    for ok in [
        json!({"type": "auto", "disable_parallel_tool_use": true}),
        json!({"type": "any"}),
        json!({"type": "tool", "name": "f"}),
        json!({"type": "none"}),
    ] {
        assert_eq!(providers::check_anthropic_body(&choice(ok)), Ok(()));
    }
    bad(choice(json!("auto")), "object");
    bad(choice(json!({"type": "required"})), "expected tags");
    bad(choice(json!({"type": "tool", "name": "g"})), "not found");
    bad(
        choice(json!({"type": "none", "disable_parallel_tool_use": true})),
        "disable_parallel_tool_use",
    );
    bad(
        json!({"model": "m", "max_tokens": 10, "messages": [user], "tool_choice": {"type": "auto"}}),
        "while providing tools",
    );
    bad(body(vec![user.clone(), user.clone()]), "alternate");
    bad(body(vec![asst.clone(), result.clone()]), "first message");
    bad(
        body(vec![user.clone(), asst.clone(), user.clone()]),
        "without `tool_result` blocks immediately after: t1",
    );
    bad(
        body(vec![user.clone(), asst.clone()]),
        "without `tool_result`",
    );
    bad(
        body(vec![
            user.clone(),
            json!({"role": "assistant", "content": "thinking"}),
            result.clone(),
        ]),
        "unexpected `tool_use_id`",
    );
    let text_first = json!({"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "tool_result", "tool_use_id": "t1", "content": "1"}]});
    bad(
        body(vec![user.clone(), asst.clone(), text_first]),
        "must come first",
    );
    bad(
        body(vec![
            json!({"role": "system", "content": "s"}),
            user.clone(),
        ]),
        "system",
    );
    bad(
        body(vec![
            json!({"role": "user", "content": [{"type": "text", "text": ""}]}),
        ]),
        "non-empty",
    );
    bad(
        json!({"model": "m", "max_tokens": 10, "messages": [user], "temperature": 1.5}),
        "temperature",
    );
}

#[test]
fn tool_choice_parallel_tool_calls_and_extra_body_reach_the_wire() {
    let fake = Fake::anthropic(vec![
        providers::anthropic_tool_use(
            None,
            &[("toolu_1", "get_stock_price", json!({"ticker": "AAPL"}))],
        ),
        providers::anthropic_answer("AAPL is 178.15."),
    ]);
    let spec = fake.spec_file("    tool_choice: required\n    parallel_tool_calls: false\n    extra_body: { top_k: 5, metadata: { user_id: u1 } }",
        "",
    );
    let out = run_json(&spec, Some(KEY), "AAPL?");
    out.assert_success();
    assert_eq!(fake.violations(), Vec::<String>::new());
    let bodies = fake.bodies();
    assert_eq!(
        bodies[0]["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    assert_eq!(
        bodies[1]["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true}),
        "a forced choice holds until the first tool call"
    );
    for b in &bodies {
        assert_eq!(b["top_k"], 5);
        assert_eq!(b["metadata"], json!({"user_id": "u1"}));
    }
}

#[test]
fn a_base_url_ending_in_v1_is_a_warning_with_the_fix() {
    let fake = Fake::anthropic(vec![]);
    let dir = support::temp_dir("fake_anthropic_v1");
    let text = providers::live_spec("anthropic", &format!("{}/v1", fake.base_url()), "", "");
    let spec = write(&dir, "spec.yaml", &text);
    let out = run(toolrun().arg("check").arg(&spec));
    out.assert_success();
    assert!(
        out.stderr.contains("W111")
            && out
                .stderr
                .contains(&format!("base_url: {}", fake.base_url())),
        "{}",
        out.stderr
    );
    let strict = run(toolrun().arg("check").arg("--deny-warnings").arg(&spec));
    strict.assert_code(1);
}

#[test]
fn a_streamed_loop_gives_the_same_answer_and_usage() {
    let fake = Fake::anthropic(vec![
        providers::anthropic_stream_tool_use(&[(
            "toolu_1",
            "get_stock_price",
            json!({"ticker": "AAPL"}),
        )]),
        providers::anthropic_stream_answer("AAPL is 178.15 — streamed."),
    ]);
    let spec = fake.spec_file("    stream: true", "");
    let out = run_json(&spec, Some(KEY), "AAPL?");
    out.assert_success();
    assert_eq!(fake.violations(), Vec::<String>::new());
    let trace = out.json();
    assert_eq!(trace["final_output"], "AAPL is 178.15 — streamed.");
    assert_eq!(trace["tool_results"][0]["result"], json!(178.15));
    assert_eq!(
        trace["usage"]["input_tokens"],
        json!(2 * providers::INPUT_TOKENS)
    );
    assert_eq!(
        trace["usage"]["output_tokens"],
        json!(2 * providers::OUTPUT_TOKENS)
    );
    assert_eq!(fake.bodies()[0]["stream"], true);
}
