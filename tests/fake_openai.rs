//! `toolrun run` against a fake OpenAI Chat Completions server (tests/support) that validates
//! every request. Real servers: `scripts/live-examples.sh`.

mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::providers::{self, Fake, KEY};
use support::{run, run_json, toolrun, write, Response};

#[test]
fn two_step_plan_with_parallel_calls() {
    let fake = Fake::openai(vec![
        providers::openai_tool_calls(&[
            ("call_a", "get_stock_price", r#"{"ticker":"AAPL"}"#),
            ("call_m", "get_stock_price", r#"{"ticker":"MSFT"}"#),
        ]),
        providers::openai_tool_calls(&[(
            "call_c",
            "calculate_expression",
            r#"{"expression":"411.2 - 178.15"}"#,
        )]),
        providers::openai_answer("MSFT is 233.05 above AAPL."),
    ]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "How far apart are MSFT and AAPL?");
    out.assert_success();
    let trace = out.json();
    assert_eq!(trace["status"], "ok");
    assert_eq!(trace["final_output"], "MSFT is 233.05 above AAPL.");
    let names: Vec<&str> = trace["tool_results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["get_stock_price", "get_stock_price", "calculate_expression"]
    );
    assert_eq!(trace["tool_results"][2]["result"], json!(233.05));
    assert_eq!(fake.violations(), Vec::<String>::new());

    // What went over the wire: the system prompt first, tools offered, ids kept.
    let bodies = fake.bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0]["model"], "test-model");
    assert_eq!(bodies[0]["messages"][0]["role"], "system");
    assert_eq!(bodies[0]["tools"].as_array().map(Vec::len), Some(2));
    let second = bodies[1]["messages"].as_array().unwrap();
    let tool_msgs: Vec<&Value> = second.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_msgs.len(), 2);
    assert_eq!(tool_msgs[0]["tool_call_id"], "call_a");
    assert_eq!(tool_msgs[0]["content"], "178.15");
    assert_eq!(tool_msgs[1]["tool_call_id"], "call_m");

    // Usage: every canned reply reports 10 in / 5 out.
    assert_eq!(trace["usage"]["input_tokens"], 30);
    assert_eq!(trace["usage"]["output_tokens"], 15);
    assert_eq!(trace["usage"]["total_tokens"], 45);
    assert_eq!(trace["usage"]["per_step"].as_array().map(Vec::len), Some(3));
}

#[test]
fn answer_without_tools() {
    let fake = Fake::openai(vec![providers::openai_answer("Hello!")]);
    let spec = fake.spec_file("", "");
    let mut cmd = toolrun();
    cmd.arg("run")
        .arg(&spec)
        .args(["--query", "hi"])
        .env("TEST_KEY", KEY);
    let out = run(&mut cmd);
    out.assert_success();
    assert_eq!(out.stdout.trim(), "Hello!");
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(
        fake.requests()[0].header("authorization"),
        Some("Bearer sk-test-123")
    );
}

#[test]
fn malformed_arguments_then_recovery() {
    let fake = Fake::openai(vec![
        providers::openai_tool_calls(&[("call_1", "get_stock_price", r#"{"ticker": "AAPL""#)]),
        providers::openai_tool_calls(&[("call_2", "get_stock_price", r#"{"ticker":"AAPL"}"#)]),
        providers::openai_answer("AAPL is 178.15."),
    ]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "AAPL?");
    out.assert_success();
    let trace = out.json();
    assert_eq!(trace["status"], "ok");
    // The engine names unparsable arguments `malformed_decision` (or `invalid_arguments`).
    let k = providers::error_kinds(&trace);
    assert!(
        k == ["malformed_decision"] || k == ["invalid_arguments"],
        "{k:?}"
    );
    // The server accepted the echo of the broken call and its error result.
    assert_eq!(fake.violations(), Vec::<String>::new());
    let msgs = fake.bodies()[1]["messages"].as_array().unwrap().clone();
    let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], "call_1");
    assert!(tool["content"].as_str().unwrap().contains(&k[0]));
}

#[test]
fn unknown_tool_is_reported_back_to_the_model() {
    let fake = Fake::openai(vec![
        providers::openai_tool_calls(&[("call_w", "get_weather", r#"{"city":"Paris"}"#)]),
        providers::openai_answer("I can only answer stock questions."),
    ]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "Weather in Paris?");
    out.assert_success();
    let trace = out.json();
    assert_eq!(providers::error_kinds(&trace), ["unknown_tool"]);
    assert_eq!(fake.violations(), Vec::<String>::new());
    let msgs = fake.bodies()[1]["messages"].as_array().unwrap().clone();
    assert!(msgs
        .iter()
        .any(|m| m["role"] == "tool" && m["tool_call_id"] == "call_w"));
}

#[test]
fn rate_limited_then_success() {
    let fake = Fake::openai(vec![
        providers::error(
            providers::Api::OpenAi,
            429,
            "rate_limit_exceeded",
            "Rate limit reached",
        )
        .header("Retry-After", "0"),
        providers::openai_answer("ok"),
    ]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "hi");
    out.assert_success();
    assert_eq!(out.json()["final_output"], "ok");
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn unauthorized_fails_with_the_provider_message_and_no_key() {
    let fake = Fake::openai(vec![]);
    let dir = support::temp_dir("fake_openai_401");
    let spec = write(
        &dir,
        "spec.yaml",
        &providers::live_spec("openai", &fake.base_url(), "", ""),
    );
    let events = dir.join("events.jsonl");
    let mut cmd = toolrun();
    cmd.arg("run")
        .arg(&spec)
        .args(["--json", "--query", "hi", "--events"])
        .arg(&events)
        .env("TEST_KEY", "sk-wrong-987654");
    let out = run(&mut cmd);
    out.assert_code(1);
    let trace = out.json();
    assert_eq!(trace["status"], "failed");
    assert_eq!(trace["stop_reason"], "model_error");
    assert!(
        trace["error"]
            .as_str()
            .unwrap()
            .contains("Incorrect API key provided"),
        "{out:?}"
    );
    assert!(out.stderr.contains("Incorrect API key provided"), "{out:?}");
    assert_eq!(fake.requests().len(), 1, "401 is not retried");
    let events = std::fs::read_to_string(&events).unwrap();
    assert!(events.contains("model_http_request"), "{events}");
    for text in [&out.stdout, &out.stderr, &events] {
        assert!(!text.contains("sk-wrong-987654"), "the key leaked:\n{text}");
    }
}

#[test]
fn a_slow_server_times_out() {
    let fake = Fake::openai(vec![
        providers::openai_answer("late").delay(Duration::from_secs(5))
    ]);
    let spec = fake.spec_file("    timeout: 1s", "");
    let out = run_json(&spec, Some(KEY), "hi");
    out.assert_code(1);
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "model_error");
    assert!(
        trace["error"]
            .as_str()
            .unwrap()
            .contains("no reply within 1s"),
        "{out:?}"
    );
    assert_eq!(fake.requests().len(), 1);
}

#[test]
fn missing_key_variable_exits_2_before_any_request() {
    let fake = Fake::openai(vec![providers::openai_answer("never")]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, None, "hi");
    out.assert_code(2);
    assert!(out.stderr.contains("TEST_KEY"), "{out:?}");
    assert_eq!(fake.requests().len(), 0);
}

#[test]
fn token_budget_stops_the_run() {
    let fake = Fake::openai(vec![
        providers::openai_tool_calls(&[("c1", "get_stock_price", r#"{"ticker":"AAPL"}"#)]),
        providers::openai_tool_calls(&[("c2", "get_stock_price", r#"{"ticker":"MSFT"}"#)]),
        providers::openai_answer("never reached"),
    ]);
    let spec = fake.spec_file("", "limits:\n  max_tokens_total: 20\n");
    let out = run_json(&spec, Some(KEY), "hi");
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "max_tokens_total", "{out:?}");
    assert_eq!(trace["usage"]["total_tokens"], 30);
    assert_eq!(fake.requests().len(), 2);
}

/// `finish_reason: length` on a text reply: the same request would be cut at the same place, so
/// the partial answer ends the run for a person (exit 3, stop reason `max_tokens`), streamed or not.
#[test]
fn an_answer_cut_at_max_tokens_is_kept_and_needs_review() {
    for (stream, reply) in [
        (
            "",
            providers::openai_reply(
                json!({"role": "assistant", "content": "The price of AAPL is", "refusal": null}),
                "length",
            ),
        ),
        (
            "    stream: true",
            providers::openai_stream_answer_ending("The price of AAPL is", "length"),
        ),
    ] {
        let fake = Fake::openai(vec![reply]);
        let out = run_json(&fake.spec_file(stream, ""), Some(KEY), "AAPL?");
        providers::assert_cut_off_answer(
            &out,
            &fake,
            "The price of AAPL is",
            "finish_reason: length",
        );
    }
    {
        // Without --json: the partial answer on stdout, why it needs review on stderr.
        let fake = Fake::openai(vec![providers::openai_reply(
            json!({"role": "assistant", "content": "The price of AAPL is", "refusal": null}),
            "length",
        )]);
        let spec = fake.spec_file("", "");
        let out = run(toolrun()
            .env("TEST_KEY", KEY)
            .args(["run"])
            .arg(spec.path())
            .args(["--query", "AAPL?"]));
        out.assert_code(3);
        assert_eq!(out.stdout, "The price of AAPL is\n");
        assert!(
            out.stderr
                .contains("run needs_review (max_tokens): the answer was cut off"),
            "{out:?}"
        );
    }
}

/// Cut-off tool calls may hold truncated JSON: malformed, fed back, and twice in a row fails.
#[test]
fn cut_off_tool_calls_are_malformed_twice_then_fail() {
    let cut = || {
        providers::openai_reply(
            json!({"role": "assistant", "content": null, "refusal": null,
                   "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_stock_price", "arguments": "{\"tick"}}]}),
            "length",
        )
    };
    let fake = Fake::openai(vec![cut(), cut()]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "hi");
    out.assert_code(1);
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "malformed_decision");
    let error = trace["error"].as_str().unwrap();
    assert!(
        error.contains("tool calls were cut off") && error.contains("max_tokens"),
        "{out:?}"
    );
    // The correction went back to a server that accepted it.
    assert_eq!(fake.violations(), Vec::<String>::new());
}

#[test]
fn extra_headers_and_no_key_for_local_servers() {
    // A minimal reply, as some local servers send: no id, usage, finish_reason or role.
    let fake = Fake::openai_keyless(vec![Response::json(
        200,
        json!({"choices": [{"message": {"content": "hi"}}]}),
    )]);
    let dir = support::temp_dir("fake_openai_local");
    // A local server (Ollama, vLLM) needs no key: no `api_key_env`, no Authorization header.
    let text = providers::live_spec(
        "openai",
        &fake.base_url(),
        "    headers: { X-Team: research }",
        "",
    )
    .replace("    api_key_env: TEST_KEY\n", "");
    let spec = write(&dir, "spec.yaml", &text);
    let out = run(toolrun().arg("run").arg(&spec).args(["--query", "hi"]));
    out.assert_success();
    assert_eq!(out.stdout.trim(), "hi");
    let req = &fake.requests()[0];
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.header("x-team"), Some("research"));
}

/// The fake is only as good as its validation: it must refuse what the real API refuses.
#[test]
fn the_fake_rejects_what_the_api_rejects() {
    let user = json!({"role": "user", "content": "q"});
    let call =
        json!({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}});
    let asst = json!({"role": "assistant", "content": "", "tool_calls": [call]});
    let tool = json!({"role": "tool", "tool_call_id": "c1", "content": "1"});
    let body = |messages: Vec<Value>| json!({"model": "m", "messages": messages});
    assert_eq!(
        providers::check_openai(&body(vec![user.clone(), asst.clone(), tool.clone()])),
        Ok(())
    );

    let bad = |b: Value, needle: &str| {
        let err = providers::check_openai(&b).expect_err(needle);
        assert!(err.contains(needle), "{err}");
    };
    bad(
        body(vec![
            user.clone(),
            asst.clone(),
            json!({"role": "tool", "content": "1"}),
        ]),
        "tool_call_id",
    );
    bad(
        body(vec![user.clone(), asst.clone()]),
        "did not have response messages: c1",
    );
    bad(
        body(vec![user.clone(), asst.clone(), user.clone()]),
        "must be followed by tool messages",
    );
    bad(
        body(vec![user.clone(), tool.clone()]),
        "must be a response to a preceding message",
    );
    let mut no_type = asst.clone();
    no_type["tool_calls"][0]
        .as_object_mut()
        .unwrap()
        .remove("type");
    bad(
        body(vec![user.clone(), no_type, tool.clone()]),
        "'function'",
    );
    let mut null_content = asst.clone();
    null_content["content"] = Value::Null;
    bad(
        body(vec![user.clone(), null_content, tool.clone()]),
        "content",
    );
    let mut object_args = asst.clone();
    object_args["tool_calls"][0]["function"]["arguments"] = json!({});
    bad(
        body(vec![user.clone(), object_args, tool.clone()]),
        "arguments must be a string",
    );
    bad(
        json!({"model": "m", "messages": [user], "tools": []}),
        "too short",
    );
    bad(
        json!({"messages": [{"role": "user", "content": "q"}]}),
        "model",
    );
    bad(
        json!({"model": "m", "messages": [{"role": "user", "content": "q"}], "temperature": 3}),
        "temperature",
    );
    let with_tools = |extra: Value| {
        let mut b = json!({"model": "m", "messages": [{"role": "user", "content": "q"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    assert_eq!(
        providers::check_openai(&with_tools(
            json!({"tool_choice": {"type": "function", "function": {"name": "f"}}, "parallel_tool_calls": false})
        )),
        Ok(())
    );
    bad(with_tools(json!({"tool_choice": "any"})), "tool_choice");
    bad(
        with_tools(json!({"tool_choice": {"type": "function", "function": {"name": "g"}}})),
        "not one of the tools",
    );
    bad(with_tools(json!({"parallel_tool_calls": "no"})), "boolean");
    bad(
        json!({"model": "m", "messages": [{"role": "user", "content": "q"}], "tool_choice": "auto"}),
        "only allowed when 'tools' are specified",
    );
    bad(
        json!({"model": "m", "messages": [{"role": "user", "content": "q"}], "parallel_tool_calls": false}),
        "only allowed when 'tools' are specified",
    );
}

#[test]
fn tool_choice_parallel_tool_calls_and_extra_body_reach_the_wire() {
    let fake = Fake::openai(vec![
        providers::openai_tool_calls(&[("c1", "get_stock_price", r#"{"ticker":"AAPL"}"#)]),
        providers::openai_answer("AAPL is 178.15."),
    ]);
    let spec = fake.spec_file("    tool_choice: { tool: get_stock_price }\n    parallel_tool_calls: false\n    extra_body: { seed: 7, response_format: { type: text } }",
        "",
    );
    let out = run_json(&spec, Some(KEY), "AAPL?");
    out.assert_success();
    assert_eq!(fake.violations(), Vec::<String>::new());
    let bodies = fake.bodies();
    assert_eq!(
        bodies[0]["tool_choice"],
        json!({"type": "function", "function": {"name": "get_stock_price"}})
    );
    assert_eq!(
        bodies[1]["tool_choice"], "auto",
        "a forced choice holds until the first tool call"
    );
    for b in &bodies {
        assert_eq!(b["parallel_tool_calls"], false);
        assert_eq!(b["seed"], 7);
        assert_eq!(b["response_format"], json!({"type": "text"}));
    }
}

#[test]
fn tool_choice_is_sent_as_auto_by_default_and_left_out_without_tools() {
    let fake = Fake::openai(vec![
        providers::openai_answer("hi"),
        providers::openai_answer("hi"),
    ]);
    let plain = fake.spec_file("", "");
    run_json(&plain, Some(KEY), "hi").assert_success();
    let body = &fake.bodies()[0];
    assert_eq!(body["tool_choice"], "auto");
    assert!(body.get("parallel_tool_calls").is_none());
    // `policy.allow: []` offers no tool: no `tools`, so no `tool_choice` either.
    let spec2 = fake.spec_file("    tool_choice: required", "policy: { allow: [] }\n");
    run_json(&spec2, Some(KEY), "hi").assert_success();
    let body = &fake.bodies()[1];
    assert!(
        body.get("tools").is_none() && body.get("tool_choice").is_none(),
        "{body}"
    );
    assert_eq!(fake.violations(), Vec::<String>::new());
}

#[test]
fn azure_openai_through_settings() {
    let fake = Fake::azure(vec![providers::openai_answer("hello from azure")]);
    let spec = fake.spec_file(
        "    api_key_header: api-key\n    query: { api-version: 2024-10-21 }",
        "",
    );
    let out = run_json(&spec, Some(KEY), "hi");
    out.assert_success();
    assert_eq!(out.json()["final_output"], "hello from azure");
    let req = &fake.requests()[0];
    assert_eq!(req.header("api-key"), Some(KEY));
    assert_eq!(req.header("authorization"), None, "the key is sent once");
    assert_eq!(req.query_param("api-version"), Some("2024-10-21"));
    assert!(!out.stdout.contains(KEY) && !out.stderr.contains(KEY));
}

#[test]
fn check_refuses_credentials_in_headers_and_owned_keys_in_extra_body() {
    let fake = Fake::openai(vec![]);
    let spec = fake.spec_file("    api_key_header: api-key\n    headers: { API-Key: sk-live-1, X-Team: a }\n    extra_body: { messages: [] }",
        "",
    );
    let out = run(toolrun().arg("check").arg(&spec));
    out.assert_code(1);
    assert!(
        out.stderr.contains("E041") && out.stderr.contains("api_key_env"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("E042"), "{}", out.stderr);
    assert!(fake.requests().is_empty());
}

#[test]
fn a_rejected_request_is_a_400_with_the_message_and_a_recorded_violation() {
    let fake = Fake::openai(vec![providers::openai_answer("never")]);
    let body = json!({"model": "m", "messages": [{"role": "tool", "content": "1"}]});
    let status = raw_post(&fake, "/v1/chat/completions", &body);
    assert!(status.starts_with("HTTP/1.1 400"), "{status}");
    assert_eq!(fake.violations().len(), 1);
    assert!(fake.violations()[0].contains("tool_call_id"));
    assert_eq!(
        fake.remaining(),
        1,
        "a rejected request consumes no canned reply"
    );
}

/// Posts JSON with the test key over a plain socket; returns the status line and body.
fn raw_post(fake: &Fake, path: &str, body: &Value) -> String {
    use std::io::{Read, Write};
    let text = body.to_string();
    let mut s =
        std::net::TcpStream::connect(fake.server.base_url().trim_start_matches("http://")).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn compressed_replies_are_decoded() {
    let fake = Fake::openai(vec![
        providers::openai_tool_calls(&[("c1", "get_stock_price", r#"{"ticker":"AAPL"}"#)])
            .encoded("zstd"),
        providers::openai_answer("AAPL is 178.15.").encoded("br"),
    ]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "AAPL?");
    out.assert_success();
    assert_eq!(out.json()["final_output"], "AAPL is 178.15.");
    assert!(fake.requests()[0]
        .header("accept-encoding")
        .is_some_and(|a| a.contains("gzip") && a.contains("br") && a.contains("zstd")));
}

#[test]
fn a_retry_after_date_is_honoured() {
    // A date decades away: more than toolrun waits, so it fails now with the server's words
    // (before, a date was not understood and the run retried after a short backoff).
    let fake = Fake::openai(vec![
        Response::json(429, json!({"error": {"message": "Slow down"}}))
            .header("Retry-After", "Fri, 01 Jan 2100 00:00:00 GMT"),
        providers::openai_answer("too early"),
    ]);
    let spec = fake.spec_file("", "");
    let out = run_json(&spec, Some(KEY), "hi");
    let trace = out.json();
    assert_eq!(trace["status"], "failed", "{out:?}");
    let err = trace["error"].as_str().unwrap();
    assert!(
        err.contains("Slow down") && err.contains("more than 60s"),
        "{err}"
    );
    assert_eq!(fake.requests().len(), 1);
}

/// The trace without timings, the spec hash (the specs differ by `stream: true`) and the
/// fake server's port (each its own): what must not depend on how the reply came over the wire.
fn outcome_of(trace: &Value) -> Value {
    match trace {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| {
                    !k.ends_with("_ms")
                        && !matches!(k.as_str(), "sha256" | "started_at" | "server_port")
                })
                .map(|(k, v)| (k.clone(), outcome_of(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(outcome_of).collect()),
        v => v.clone(),
    }
}

#[test]
fn a_streamed_loop_gives_the_same_trace_emits_deltas_and_replays_offline() {
    let calls = [
        ("call_a", "get_stock_price", r#"{"ticker":"AAPL"}"#),
        ("call_m", "get_stock_price", r#"{"ticker":"MSFT"}"#),
    ];
    let answer = "MSFT is 233.05 above AAPL; é and 漢 survive splits.";
    let plain = Fake::openai(vec![
        providers::openai_tool_calls(&calls),
        providers::openai_answer(answer),
    ]);
    let plain_out = run_json(&plain.spec_file("", ""), Some(KEY), "gap?");
    plain_out.assert_success();

    let streamed = Fake::openai(vec![
        providers::openai_stream_tool_calls(&calls),
        providers::openai_stream_answer(answer),
    ]);
    let spec = streamed.spec_file("    stream: true", "");
    let dir = spec.parent().unwrap().to_path_buf();
    let events = dir.join("events.jsonl");
    let fixture = dir.join("streamed.json");
    let out = run(toolrun()
        .arg("run")
        .arg(&spec)
        .args(["--json", "--query", "gap?", "--events"])
        .arg(&events)
        .arg("--record")
        .arg(&fixture)
        .env("TEST_KEY", KEY));
    out.assert_success();
    assert_eq!(streamed.violations(), Vec::<String>::new());
    assert_eq!(outcome_of(&out.json()), outcome_of(&plain_out.json()));
    let body = &streamed.bodies()[0];
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        streamed.requests()[0].header("accept"),
        Some("text/event-stream")
    );

    let deltas: String = support::events_named(&events, "model_text_delta")
        .iter()
        .map(|e| e["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(deltas, answer);

    // Offline: the recorded stream replays with no server.
    drop(streamed);
    let replay = run(toolrun().arg("replay").arg(&fixture));
    assert_eq!(replay.code, 0, "{replay:?}");
    assert_eq!(replay.stdout.lines().last(), Some("1 passed, 0 failed"));
}

#[test]
fn a_stream_the_server_answered_with_json_is_read_as_json() {
    // Servers that do not stream (or ignore `stream`) answer with one JSON document.
    let fake = Fake::openai(vec![providers::openai_answer("plain reply")]);
    let out = run_json(&fake.spec_file("    stream: true", ""), Some(KEY), "hi");
    out.assert_success();
    assert_eq!(out.json()["final_output"], "plain reply");
}

#[test]
fn on_a_terminal_a_streamed_answer_is_printed_once() {
    let fake = Fake::openai(vec![
        providers::openai_stream_tool_calls(&[("c1", "get_stock_price", r#"{"ticker":"AAPL"}"#)]),
        providers::openai_stream_answer("AAPL trades at 178.15 today."),
    ]);
    let spec = fake.spec_file("    stream: true", "");
    // `script` (util-linux) gives the binary a real terminal as stdout.
    let command = format!(
        "{} run {} --query AAPL?",
        env!("CARGO_BIN_EXE_toolrun"),
        spec.display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("TEST_KEY", KEY)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("`script` runs (util-linux)");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(
        text.matches("AAPL trades at 178.15 today.").count(),
        1,
        "{text:?}"
    );
    assert!(text.ends_with("today.\n"), "{text:?}");
}
