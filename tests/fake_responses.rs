//! `toolrun run` with `kind: openai, api: responses` against a fake Responses API server
//! (tests/support/src/responses.rs) that validates every request as the real one would,
//! stateless conversations included. Real server: `scripts/live-examples.sh`.

mod support;

use serde_json::{json, Value};
use support::providers::{self, Fake, KEY};
use support::responses as r;
use support::{run, run_json, toolrun, Response};

const CALLS: [(&str, &str, &str); 2] = [
    ("call_a", "get_stock_price", r#"{"ticker":"AAPL"}"#),
    ("call_m", "get_stock_price", r#"{"ticker":"MSFT"}"#),
];
const ANSWER: &str = "MSFT is 233.05 above AAPL; é and 漢 survive splits.";

/// Reasoning, two parallel calls; then reasoning and the answer. Usage: 4 cached input tokens
/// and 3 reasoning tokens per reply.
fn reasoning_loop() -> [Value; 2] {
    let mut first = vec![r::reasoning("rs_1", "I need both prices.")];
    first.extend(CALLS.iter().map(|(i, n, a)| r::call(i, n, a)));
    [
        r::object(first, 4, 3),
        r::object(
            vec![r::reasoning("rs_2", "Subtract."), r::message(ANSWER)],
            4,
            3,
        ),
    ]
}

#[test]
fn a_tool_loop_carries_reasoning_back_unchanged_and_in_order() {
    let [first, second] = reasoning_loop();
    let fake = Fake::responses(vec![
        Response::json(200, first.clone()),
        Response::json(200, second),
    ]);
    let spec = fake.spec_file("    reasoning: { summary: auto }", "");
    let out = run_json(&spec, Some(KEY), "How far apart are MSFT and AAPL?");
    out.assert_success();
    assert_eq!(fake.violations(), Vec::<String>::new());
    let trace = out.json();
    assert_eq!(trace["status"], "ok");
    assert_eq!(trace["final_output"], ANSWER);
    assert_eq!(trace["tool_results"].as_array().map(Vec::len), Some(2));

    let bodies = fake.bodies();
    assert_eq!(bodies.len(), 2);
    let b = &bodies[0];
    assert!(b.get("messages").is_none(), "{b}");
    assert_eq!(
        b["instructions"],
        "You answer stock questions. Use the tools; never guess a price."
    );
    assert_eq!(
        b["input"],
        json!([{"role": "user", "content": "How far apart are MSFT and AAPL?"}])
    );
    assert_eq!(b["store"], false);
    assert_eq!(b["include"], json!(["reasoning.encrypted_content"]));
    assert!(b.get("previous_response_id").is_none());
    assert_eq!(b["tool_choice"], "auto");
    assert_eq!(b["tools"][0]["type"], "function");
    assert_eq!(b["tools"][0]["name"], "get_stock_price");
    assert_eq!(b["tools"][0]["strict"], false);

    // The second request: the whole conversation, the reasoning item exactly as received and
    // before the calls it led to, each call answered by its output.
    let input = bodies[1]["input"].as_array().unwrap().clone();
    let kinds: Vec<&str> = input
        .iter()
        .map(|i| i["type"].as_str().unwrap_or("message"))
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output"
        ]
    );
    assert_eq!(input[1], first["output"][0]);
    assert_eq!(input[2]["call_id"], "call_a");
    assert_eq!(
        input[4],
        json!({"type": "function_call_output", "call_id": "call_a", "output": "178.15"})
    );

    // The trace shows the summaries, and usage the cached and reasoning tokens.
    let reasoning: Vec<&Value> = trace["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "reasoning")
        .collect();
    assert_eq!(reasoning.len(), 2);
    assert_eq!(reasoning[0]["summary"], json!(["I need both prices."]));
    assert_eq!(trace["usage"]["input_tokens"], 20);
    assert_eq!(trace["usage"]["cached_input_tokens"], 8);
    assert_eq!(trace["usage"]["reasoning_tokens"], 6);
    assert_eq!(trace["usage"]["per_step"][0]["reasoning_tokens"], 3);
    assert_eq!(
        trace["model_calls"][0]["finish_reasons"],
        json!(["completed"])
    );
}

#[test]
fn settings_reach_the_wire_and_a_forced_call_is_forced_once() {
    let fake = Fake::responses(vec![
        r::tool_calls(&[CALLS[0]]),
        r::answer("AAPL is 178.15."),
    ]);
    let spec = fake.spec_file(
        "    tool_choice: { tool: get_stock_price }\n    parallel_tool_calls: false\n    max_tokens: 64\n    temperature: 0\n    reasoning: { effort: low, summary: auto }\n    extra_body: { top_p: 0.5 }",
        "",
    );
    let out = run_json(&spec, Some(KEY), "AAPL?");
    out.assert_success();
    assert_eq!(fake.violations(), Vec::<String>::new());
    let b = fake.bodies();
    assert_eq!(
        b[0]["tool_choice"],
        json!({"type": "function", "name": "get_stock_price"})
    );
    assert_eq!(b[0]["parallel_tool_calls"], false);
    assert_eq!(b[0]["max_output_tokens"], 64);
    assert!(b[0].get("max_tokens").is_none());
    assert_eq!(b[0]["temperature"], 0.0);
    assert_eq!(b[0]["top_p"], 0.5);
    assert_eq!(
        b[0]["reasoning"],
        json!({"effort": "low", "summary": "auto"})
    );
    assert_eq!(b[1]["tool_choice"], "auto");
}

#[test]
fn incomplete_and_failed_responses_end_with_the_typed_stop_reasons() {
    let mut cut = r::object(vec![r::message("AAPL is 17")], 0, 0);
    cut["status"] = json!("incomplete");
    cut["incomplete_details"] = json!({"reason": "max_output_tokens"});
    let fake = Fake::responses(vec![Response::json(200, cut)]);
    let out = run_json(&fake.spec_file("", ""), Some(KEY), "AAPL?");
    assert_eq!(out.code, 3, "{out:?}");
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "max_tokens");
    assert_eq!(trace["final_output"], "AAPL is 17");

    let mut failed = r::object(vec![], 0, 0);
    failed["status"] = json!("failed");
    failed["error"] = json!({"code": "server_error", "message": "The model crashed."});
    let fake = Fake::responses(vec![Response::json(200, failed)]);
    let out = run_json(&fake.spec_file("", ""), Some(KEY), "AAPL?");
    assert_eq!(out.code, 1, "{out:?}");
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "model_error");
    let err = trace["error"].as_str().unwrap();
    assert!(
        err.contains("failed (server_error): The model crashed."),
        "{err}"
    );

    let mut filtered = r::object(vec![], 0, 0);
    filtered["status"] = json!("incomplete");
    filtered["incomplete_details"] = json!({"reason": "content_filter"});
    let fake = Fake::responses(vec![
        Response::json(200, filtered.clone()),
        Response::json(200, filtered),
    ]);
    let out = run_json(&fake.spec_file("", ""), Some(KEY), "AAPL?");
    let trace = out.json();
    assert_eq!(trace["stop_reason"], "malformed_decision");
    assert!(
        trace["error"].as_str().unwrap().contains("content filter"),
        "{trace}"
    );
}

#[test]
fn bad_output_items_are_model_errors_naming_the_item() {
    let cases = [
        (
            json!({"id": "ws_1", "type": "web_search_call", "status": "completed"}),
            "output item 0 (`ws_1`) has the type `web_search_call`",
        ),
        (
            r::call("call_x", "get_stock_price", "{\"ticker\": "),
            "output item 0 (`fc_call_x`) (`function_call` `get_stock_price`) has arguments that are not a JSON object",
        ),
    ];
    for (item, expected) in cases {
        let fake = Fake::responses(vec![r::reply(vec![item])]);
        let out = run_json(&fake.spec_file("", ""), Some(KEY), "AAPL?");
        assert_eq!(out.code, 1, "{out:?}");
        let trace = out.json();
        assert_eq!(trace["stop_reason"], "model_error");
        let err = trace["error"].as_str().unwrap();
        assert!(err.contains(expected), "{err}");
        assert!(err.contains("model `live` (openai)"), "{err}");
    }
}

#[test]
fn rate_limits_are_retried_and_a_rejected_key_is_masked() {
    let fake = Fake::responses(vec![
        providers::error(
            providers::Api::Responses,
            429,
            "rate_limit_exceeded",
            "Slow down",
        )
        .header("Retry-After", "0"),
        r::answer("ok"),
    ]);
    let out = run_json(&fake.spec_file("", ""), Some(KEY), "hi");
    out.assert_success();
    assert_eq!(fake.requests().len(), 2);
    // A model that does not reason is not asked for encrypted reasoning (gpt-4o refuses it).
    assert!(fake.bodies()[0].get("include").is_none());

    let fake = Fake::responses(vec![]);
    let out = run_json(&fake.spec_file("", ""), Some("sk-wrong-secret-key"), "hi");
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("Incorrect API key"), "{}", out.stdout);
    assert!(!out.stdout.contains("sk-wrong-secret-key"));
    assert!(!out.stderr.contains("sk-wrong-secret-key"));
}

/// The trace without timings, the spec hash and the server's port.
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
    let [first, second] = reasoning_loop();
    let plain = Fake::responses(vec![
        Response::json(200, first.clone()),
        Response::json(200, second.clone()),
    ]);
    let plain_out = run_json(&plain.spec_file("", ""), Some(KEY), "gap?");
    plain_out.assert_success();

    let streamed = Fake::responses(vec![
        r::stream(&first, Some("response.completed")),
        r::stream(&second, Some("response.completed")),
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
    assert_eq!(streamed.bodies()[0]["stream"], true);
    assert_eq!(
        streamed.requests()[0].header("accept"),
        Some("text/event-stream")
    );
    let deltas: String = support::events_named(&events, "model_text_delta")
        .iter()
        .map(|e| e["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(deltas, ANSWER);

    // The fixture holds the reasoning items; the run replays with no server.
    let recorded = std::fs::read_to_string(&fixture).unwrap();
    assert!(recorded.contains("gAAAAB-rs_1-opaque=="));
    drop(streamed);
    let replay = run(toolrun().arg("replay").arg(&fixture));
    assert_eq!(replay.code, 0, "{replay:?}");
    assert_eq!(replay.stdout.lines().last(), Some("1 passed, 0 failed"));
}

#[test]
fn a_stream_cut_short_or_carrying_an_error_is_a_model_error() {
    let [_, second] = reasoning_loop();
    let mut failed = second.clone();
    failed["status"] = json!("failed");
    failed["output"] = json!([]);
    failed["error"] = json!({"code": "server_error", "message": "Upstream died."});
    let error_event = support::providers::sse(
        &[
            (
                None,
                json!({"type": "response.output_text.delta", "output_index": 0, "delta": "MSFT is"}),
            ),
            (
                None,
                json!({"type": "error", "code": "server_error", "message": "The stream broke."}),
            ),
        ],
        false,
    );
    let cases = [
        (
            r::stream(&second, None),
            "the stream ended without `response.completed`",
        ),
        (
            r::stream(&failed, Some("response.failed")),
            "Upstream died.",
        ),
        (error_event, "The stream broke."),
    ];
    for (reply, expected) in cases {
        let fake = Fake::responses(vec![reply]);
        let out = run_json(&fake.spec_file("    stream: true", ""), Some(KEY), "gap?");
        assert_eq!(out.code, 1, "{out:?}");
        let trace = out.json();
        assert_eq!(trace["stop_reason"], "model_error");
        assert!(trace["final_output"].is_null(), "{trace}");
        let err = trace["error"].as_str().unwrap();
        assert!(err.contains(expected), "{err}");
    }
}

#[test]
fn tools_prints_the_responses_shape() {
    let fake = Fake::responses(vec![]);
    let spec = fake.spec_file("", "");
    let out = run(toolrun()
        .arg("tools")
        .arg(&spec)
        .args(["--format", "openai-responses"]));
    out.assert_success();
    let tools: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(tools[0]["type"], "function");
    assert_eq!(tools[0]["name"], "get_stock_price");
    assert_eq!(tools[0]["strict"], false);
    assert!(tools[0]["parameters"]["properties"]["ticker"].is_object());
    assert!(tools[0].get("function").is_none());
}

#[test]
fn check_knows_api_and_its_knobs() {
    let fake = Fake::responses(vec![]);
    let check = |model_extra: &str| {
        let spec = fake.spec_file(model_extra, "");
        let text = std::fs::read_to_string(&spec).unwrap();
        // `spec_file` says `api: responses`; these cases say their own.
        std::fs::write(&spec, text.replacen("    api: responses\n", "", 1)).unwrap();
        let out = run(toolrun().arg("check").arg(&spec));
        (out.code, out.stderr + &out.stdout)
    };
    let (code, text) = check("    api: respones");
    assert_eq!(code, 1);
    assert!(text.contains("did you mean `responses`"), "{text}");
    let (code, text) = check("    reasoning: { effort: low }");
    assert_eq!(code, 1);
    assert!(
        text.contains("`reasoning` needs `api: responses`"),
        "{text}"
    );
    let (code, text) = check("    api: responses\n    reasoning: { effort: hihg }");
    assert_eq!(code, 1);
    assert!(text.contains("did you mean `high`"), "{text}");
    let (code, text) = check("    api: responses\n    extra_body: { instructions: x }");
    assert_eq!(code, 1);
    assert!(text.contains("E042"), "{text}");
    let (code, text) = check("    api: responses\n    reasoning: { effort: high, summary: detailed }\n    extra_body: { store: true }");
    assert_eq!(code, 0, "{text}");
}

#[test]
fn exported_chat_spans_carry_cached_and_reasoning_tokens() {
    let [first, second] = reasoning_loop();
    let fake = Fake::responses(vec![
        Response::json(200, first),
        Response::json(200, second),
    ]);
    let spec = fake.spec_file("", "");
    let fixture = spec.parent().unwrap().join("loop.json");
    let out = run(toolrun()
        .arg("run")
        .arg(&spec)
        .args(["--query", "gap?", "--record"])
        .arg(&fixture)
        .env("TEST_KEY", KEY));
    out.assert_success();
    let collector = support::TestServer::start(|_| Response::json(200, json!({})));
    let out = run(toolrun()
        .args(["export", "otel"])
        .arg(&fixture)
        .args(["--otlp", &collector.base_url()])
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"));
    out.assert_success();
    let sent: String = collector.requests().iter().map(|r| r.text()).collect();
    let chat_attr = |key: &str| {
        let doc: Value = serde_json::from_str(&sent).unwrap();
        let mut values = Vec::new();
        for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
            .as_array()
            .unwrap()
        {
            for a in span["attributes"].as_array().unwrap() {
                if a["key"] == key {
                    values.push(a["value"]["intValue"].clone());
                }
            }
        }
        values
    };
    // Per chat span (3 each) and summed on the agent span.
    assert_eq!(
        chat_attr("gen_ai.usage.reasoning.output_tokens").len(),
        3,
        "{sent}"
    );
    assert!(chat_attr("gen_ai.usage.reasoning.output_tokens").contains(&json!("3")));
    assert!(chat_attr("gen_ai.usage.cache_read.input_tokens").contains(&json!("8")));
    // With content: a call's reasoning summary is part of its output, then of later inputs.
    let doc: Value = serde_json::from_str(&sent).unwrap();
    let spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap()
        .clone();
    let text_attr = |span: &Value, key: &str| -> Value {
        let a = span["attributes"].as_array().unwrap();
        let v = a
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| &a["value"]["stringValue"]);
        serde_json::from_str(v.and_then(Value::as_str).unwrap_or("null")).unwrap()
    };
    let chats: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap_or("").starts_with("chat "))
        .collect();
    assert_eq!(chats.len(), 2, "{sent}");
    let output = text_attr(chats[0], "gen_ai.output.messages");
    assert_eq!(
        output[0]["parts"][0],
        json!({"type": "reasoning", "content": "I need both prices."}),
        "{output}"
    );
    let input = text_attr(chats[0], "gen_ai.input.messages");
    assert!(
        !input.to_string().contains("I need both prices."),
        "{input}"
    );
    let later = text_attr(chats[1], "gen_ai.input.messages");
    assert!(later.to_string().contains("I need both prices."), "{later}");
}

#[test]
fn test_results_count_cached_and_reasoning_tokens_at_their_own_price() {
    let [first, second] = reasoning_loop();
    let fake = Fake::responses(vec![
        Response::json(200, first),
        Response::json(200, second),
    ]);
    let spec = fake.spec_file(
        "    price: { input: 1, cached_input: 0.5, output: 2, reasoning: 4 }",
        "tests:\n  - name: gap\n    query: gap?\n    expect: { status: ok }\n",
    );
    let results = spec.parent().unwrap().join("r.json");
    let out = run(toolrun()
        .arg("test")
        .arg(&spec)
        .args(["--model", "live", "--results"])
        .arg(&results)
        .env("TEST_KEY", KEY));
    out.assert_success();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let usage = &doc["totals"]["usage"];
    assert_eq!(usage["input_tokens"], 20, "{doc}");
    assert_eq!(usage["cached_input_tokens"], 8);
    assert_eq!(usage["reasoning_tokens"], 6);
    // 12 input at 1, 8 cached at 0.5, 4 output at 2, 6 reasoning at 4, per million tokens.
    let cost = doc["totals"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 48e-6).abs() < 1e-12, "{cost}");
}
