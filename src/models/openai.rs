//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`): OpenAI itself and
//! the servers that copy its wire format (vLLM, Ollama, llama.cpp, LM Studio, proxies).
//!
//! What we send is the intersection of what those servers accept; what we read tolerates
//! their differences (missing or null fields, ids in other shapes, arguments as objects).

use super::client::{Headers, Wire};
use super::live;
use super::{
    CallMessage, Decision, Message, ModelError, ModelTurn, ProposedCall, ResponseMeta, Usage,
};
use crate::registry::{LiveModel, Registry, ToolChoice};
use serde_json::{json, Map, Value};

/// The Chat Completions wire format.
pub(crate) static OPENAI: Wire = Wire {
    provider: "openai",
    path: "/chat/completions",
    build_request,
    headers,
    stream: || Box::<super::stream::OpenAiStream>::default(),
    parse_response,
};

pub(crate) fn headers(settings: &LiveModel, api_key: Option<&str>) -> Headers {
    // No key (a local server): no Authorization header at all, rather than an empty one.
    live::key_header(settings, api_key, |key| {
        ("authorization".to_string(), format!("Bearer {key}"))
    })
    .into_iter()
    .collect()
}

/// The Chat Completions request for this conversation.
pub(crate) fn build_request(
    settings: &LiveModel,
    registry: &Registry,
    messages: &[Message],
) -> Value {
    let mut wire: Vec<Value> = Vec::with_capacity(messages.len() + 1);
    // The engine puts the spec's `system:` first; a conversation built elsewhere may not.
    if let (Some(system), false) = (
        &registry.system,
        messages.iter().any(|m| matches!(m, Message::System { .. })),
    ) {
        wire.push(json!({ "role": "system", "content": system }));
    }
    // Tool messages carry text only: images a tool returned follow all of the turn's tool
    // messages (the API wants those right after the assistant's calls), in one user message.
    let mut shown: Vec<Value> = Vec::new();
    for m in messages {
        if !matches!(m, Message::Tool { .. }) && !shown.is_empty() {
            wire.push(json!({ "role": "user", "content": std::mem::take(&mut shown) }));
        }
        if let Message::Tool {
            tool_call_id,
            name,
            images,
            ..
        } = m
        {
            if !images.is_empty() {
                shown.push(json!({ "type": "text", "text": format!("The image(s) returned by tool call `{tool_call_id}` ({name}):") }));
                shown.extend(images.iter().map(|i| json!({ "type": "image_url", "image_url": { "url": format!("data:{};base64,{}", i.mime, i.data) } })));
            }
        }
        wire.push(match m {
            // Chat Completions has no place for another API's reasoning items.
            Message::Reasoning { .. } => continue,
            Message::System { content } => json!({ "role": "system", "content": content }),
            Message::User { content } => json!({ "role": "user", "content": content }),
            Message::Assistant {
                content,
                tool_calls,
            } => assistant(content.as_deref(), tool_calls),
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => {
                // No `is_error` in this API: the content (`{kind, message}`) says it is an error.
                json!({ "role": "tool", "tool_call_id": tool_call_id, "content": content })
            }
        });
    }
    if !shown.is_empty() {
        wire.push(json!({ "role": "user", "content": shown }));
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    body.insert("messages".into(), Value::Array(wire));
    let tools = registry
        .callable_tools()
        .map(crate::registry::api_formats::openai)
        .collect();
    live::insert_tools(&mut body, tools, settings, messages, tool_choice);
    if let Some(t) = settings.temperature {
        body.insert("temperature".into(), json!(t));
    }
    // `max_tokens`, not `max_completion_tokens`: every compatible server knows the former.
    if let Some(n) = settings.max_tokens {
        body.insert("max_tokens".into(), json!(n));
    }
    if settings.stream {
        body.insert("stream".into(), json!(true));
        // Without it OpenAI sends no usage in a stream (servers that ignore it send none).
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    live::merge_extra_body(&mut body, settings);
    Value::Object(body)
}

/// Sent explicitly, `auto` included: llama.cpp's server and vLLM without auto tool choice
/// ignore `tools` unless `tool_choice` is there.
fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::Required => json!("required"),
        ToolChoice::None => json!("none"),
        ToolChoice::Tool(name) => json!({ "type": "function", "function": { "name": name } }),
    }
}

/// An assistant turn echoed back. With tool calls and no text, `content` is `""`: OpenAI,
/// vLLM, Ollama and llama.cpp all accept an empty string, while `null` is rejected by some
/// compatible servers and a missing `content` by others.
fn assistant(content: Option<&str>, calls: &[CallMessage]) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    m.insert("content".into(), json!(content.unwrap_or("")));
    if !calls.is_empty() {
        let calls: Vec<Value> = calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": { "name": c.name, "arguments": live::arguments_object(&c.arguments).to_string() },
                })
            })
            .collect();
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(m)
}

/// Reads a Chat Completions reply. Only the first choice counts (we never ask for `n` > 1).
pub(crate) fn parse_response(v: &Value, step: u32) -> Result<ModelTurn, ModelError> {
    let usage = usage(v);
    if v.get("choices").is_none() {
        // A 200 carrying an error object (some proxies do this) is an error, not a reply.
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let msg = live::provider_message(Some(v), &err.to_string());
            return Err(ModelError {
                message: format!("the server returned an error: {msg}"),
                raw: Some(v.to_string()),
                ..ModelError::default()
            });
        }
    }
    let response = Some(ResponseMeta {
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        finish_reasons: v
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("finish_reason").and_then(Value::as_str))
            .map(str::to_string)
            .collect(),
    });
    let turn = |decision| {
        Ok(ModelTurn {
            decision,
            usage,
            response: response.clone(),
            reasoning: Vec::new(),
        })
    };
    let Some(choice) = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        return turn(Decision::Malformed {
            raw: v.to_string(),
            reason: "the reply has no choices".into(),
        });
    };
    let message = choice.get("message").unwrap_or(&Value::Null);
    let finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .unwrap_or("");
    let text = content_text(message.get("content"));

    if let Some(refusal) = message
        .get("refusal")
        .and_then(Value::as_str)
        .filter(|r| !r.trim().is_empty())
    {
        return turn(Decision::Malformed {
            raw: refusal.to_string(),
            reason: format!("the model refused: {}", live::snippet(refusal)),
        });
    }

    let mut raw_calls: Vec<&Value> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    // The deprecated single `function_call`, still sent by some older servers.
    if raw_calls.is_empty() {
        if let Some(fc) = message.get("function_call").filter(|f| f.is_object()) {
            raw_calls.push(fc);
        }
    }

    match finish {
        // Cut off: an answer is incomplete, and tool-call arguments may be truncated JSON.
        "length" => {
            return turn(live::cut_off(
                text.unwrap_or_default(),
                &raw_calls,
                "finish_reason: length",
            ));
        }
        "content_filter" => {
            return turn(Decision::Malformed {
                raw: text.unwrap_or_default(),
                reason: "the reply was withheld by the content filter".into(),
            });
        }
        _ => {}
    }

    if !raw_calls.is_empty() {
        return turn(Decision::ToolCalls {
            text: text.filter(|t| !t.trim().is_empty()),
            calls: proposed_calls(&raw_calls, step),
        });
    }

    match text {
        Some(t) if !t.trim().is_empty() => turn(Decision::Answer(t)),
        _ => turn(Decision::Malformed {
            raw: text.unwrap_or_default(),
            reason: "the model returned an empty reply".into(),
        }),
    }
}

/// Token counts under OpenAI's names, or the `input_tokens`/`output_tokens` some servers use.
fn usage(v: &Value) -> Option<Usage> {
    let u = v.get("usage").filter(|u| u.is_object())?;
    let input =
        live::u64_field(u.get("prompt_tokens")).or_else(|| live::u64_field(u.get("input_tokens")));
    let output = live::u64_field(u.get("completion_tokens"))
        .or_else(|| live::u64_field(u.get("output_tokens")));
    (input.is_some() || output.is_some()).then(|| Usage {
        input_tokens: input.unwrap_or(0),
        output_tokens: output.unwrap_or(0),
        ..Usage::default()
    })
}

fn proposed_calls(raw_calls: &[&Value], step: u32) -> Vec<ProposedCall> {
    let mut seen = Vec::new();
    raw_calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            // `function` per the reference; a flat `{name, arguments}` from older servers.
            let f = call
                .get("function")
                .filter(|f| f.is_object())
                .unwrap_or(call);
            ProposedCall {
                id: live::call_id(call.get("id"), step, i, &mut seen),
                name: f
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                arguments: live::parse_arguments(f.get("arguments")),
            }
        })
        .collect()
}

/// `content` as a string, or the text parts of a content array (some servers send parts).
fn content_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
                .collect();
            Some(texts.concat())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Events;
    use crate::models::client::LiveClient;
    use crate::models::live::testing::{self, block_on, client, registry};
    use crate::models::live::{http::Response, providers};
    use crate::models::DecideInput;
    use crate::net::Transport;

    const SPEC: &str = r#"
version: 1
name: t
system: Be brief.
tools:
  price:
    description: Price of a ticker.
    kind: mock
    input: { type: object, properties: { ticker: { type: string } }, required: [ticker] }
    responses: [ { result: 1 } ]
  secret_tool:
    description: Denied.
    kind: mock
    input: { type: object }
    responses: [ { result: 1 } ]
policy: { deny: [secret_tool] }
models:
  gpt: { kind: openai, model: gpt-4o-mini, api_key_env: TOOLRUN_UNIT_OPENAI_KEY, temperature: 0, max_tokens: 50, retries: 2 }
"#;

    fn live(reg: &Registry) -> LiveModel {
        match &reg.models[0].kind {
            crate::registry::ModelKind::OpenAi(l) => l.clone(),
            _ => unreachable!("the spec declares an openai model"),
        }
    }

    fn conversation() -> Vec<Message> {
        vec![
            Message::System {
                content: "Be brief.".into(),
            },
            Message::User {
                content: "AAPL?".into(),
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![
                    CallMessage {
                        id: "a".into(),
                        name: "price".into(),
                        arguments: json!({"ticker": "AAPL"}),
                    },
                    CallMessage {
                        id: "b".into(),
                        name: "price".into(),
                        arguments: json!("{not json"),
                    },
                ],
            },
            Message::Tool {
                tool_call_id: "a".into(),
                name: "price".into(),
                content: "1".into(),
                is_error: false,
                images: Vec::new(),
            },
            Message::Tool {
                tool_call_id: "b".into(),
                name: "price".into(),
                content: "{\"kind\":\"invalid_arguments\"}".into(),
                is_error: true,
                images: Vec::new(),
            },
        ]
    }

    #[test]
    fn request_maps_the_conversation() {
        let reg = registry(SPEC);
        let body = build_request(&live(&reg), &reg, &conversation());
        assert_eq!(body["model"], "gpt-4o-mini");
        assert_eq!(body["temperature"], 0.0);
        assert_eq!(body["max_tokens"], 50);
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "Be brief."})
        );
        let asst = &body["messages"][2];
        assert_eq!(
            asst["content"], "",
            "content is an empty string, never null, beside tool calls"
        );
        assert_eq!(
            asst["tool_calls"][0],
            json!({"id": "a", "type": "function", "function": {"name": "price", "arguments": "{\"ticker\":\"AAPL\"}"}})
        );
        assert_eq!(
            asst["tool_calls"][1]["function"]["arguments"], "{}",
            "unparsable arguments are echoed as {{}}"
        );
        assert_eq!(
            body["messages"][4],
            json!({"role": "tool", "tool_call_id": "b", "content": "{\"kind\":\"invalid_arguments\"}"})
        );
        let tools = body["tools"].as_array().expect("tools");
        assert_eq!(tools.len(), 1, "denied tools are not offered");
        assert_eq!(tools[0]["function"]["name"], "price");
    }

    #[test]
    fn system_from_registry_when_the_conversation_has_none() {
        let reg = registry(SPEC);
        let body = build_request(
            &live(&reg),
            &reg,
            &[Message::User {
                content: "hi".into(),
            }],
        );
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "Be brief."})
        );
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn no_tools_key_without_tools_and_no_unset_settings() {
        let reg = registry("version: 1\nname: t\nmodels:\n  g: { kind: openai, model: m, base_url: 'http://127.0.0.1:1' }\n");
        let body = build_request(
            &live(&reg),
            &reg,
            &[Message::User {
                content: "hi".into(),
            }],
        );
        assert_eq!(
            body,
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        );
    }

    #[test]
    fn tool_choice_and_extra_body() {
        let reg = registry(SPEC);
        let mut settings = live(&reg);
        settings.tool_choice = ToolChoice::Tool("price".into());
        settings.parallel_tool_calls = Some(false);
        settings.extra_body.insert("seed".into(), json!(7));
        let first = [Message::User {
            content: "q".into(),
        }];
        let body = build_request(&settings, &reg, &first);
        assert_eq!(
            body["tool_choice"],
            json!({"type": "function", "function": {"name": "price"}})
        );
        assert_eq!(body["parallel_tool_calls"], false);
        assert_eq!(body["seed"], 7);
        assert_eq!(providers::check_openai(&body), Ok(()));
        // After the forced call, `auto`: a forced choice would call the tool forever.
        let body = build_request(&settings, &reg, &conversation());
        assert_eq!(body["tool_choice"], "auto");
        settings.tool_choice = ToolChoice::Required;
        assert_eq!(
            build_request(&settings, &reg, &first)["tool_choice"],
            "required"
        );
    }

    fn reply(message: Value, finish: &str) -> Value {
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{ "index": 0, "message": message, "logprobs": null, "finish_reason": finish }],
            "usage": { "prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18 },
        })
    }

    #[test]
    fn parses_an_answer_with_usage() {
        let t = parse_response(
            &reply(
                json!({"role": "assistant", "content": "Hi", "refusal": null}),
                "stop",
            ),
            1,
        )
        .unwrap();
        assert_eq!(t.decision, Decision::Answer("Hi".into()));
        assert_eq!(
            t.usage,
            Some(Usage {
                input_tokens: 11,
                output_tokens: 7,
                ..Usage::default()
            })
        );
    }

    #[test]
    fn parses_parallel_calls_with_every_argument_shape() {
        let msg = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "price", "arguments": "{\"ticker\":\"AAPL\"}"}},
            {"type": "function", "function": {"name": "price", "arguments": {"ticker": "MSFT"}}},
            {"id": "x", "function": {"name": "nope", "arguments": "{bad"}},
            {"id": 5, "function": {"name": "price", "arguments": ""}},
        ]});
        let t = parse_response(&reply(msg, "tool_calls"), 3).unwrap();
        let Decision::ToolCalls { text, calls } = t.decision else {
            panic!("not tool calls")
        };
        assert_eq!(text, None);
        let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["x", "call_3_1", "call_3_2", "5"]);
        assert_eq!(calls[0].arguments, Ok(json!({"ticker": "AAPL"})));
        assert_eq!(calls[1].arguments, Ok(json!({"ticker": "MSFT"})));
        assert_eq!(
            calls[2].name, "nope",
            "unknown tools pass through to the engine"
        );
        assert_eq!(calls[2].arguments, Err("{bad".into()));
        assert_eq!(calls[3].arguments, Ok(json!({})));
    }

    #[test]
    fn missing_optional_fields_and_explicit_nulls_are_fine() {
        // No `refusal`, `logprobs`, `usage`, `finish_reason`; `tool_calls: null`.
        let v = json!({"choices": [{"message": {"content": "ok", "tool_calls": null}}]});
        let t = parse_response(&v, 1).unwrap();
        assert_eq!(t.decision, Decision::Answer("ok".into()));
        assert_eq!(t.usage, None);
        let v = json!({"choices": [{"message": {"content": "ok"}, "finish_reason": null}], "usage": null});
        assert_eq!(
            parse_response(&v, 1).unwrap().decision,
            Decision::Answer("ok".into())
        );
    }

    #[test]
    fn content_parts_and_legacy_function_call() {
        let v = reply(
            json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
            "stop",
        );
        assert_eq!(
            parse_response(&v, 1).unwrap().decision,
            Decision::Answer("ab".into())
        );
        let v = reply(
            json!({"content": null, "function_call": {"name": "price", "arguments": "{\"ticker\":\"A\"}"}}),
            "function_call",
        );
        let Decision::ToolCalls { calls, .. } = parse_response(&v, 2).unwrap().decision else {
            panic!()
        };
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("call_2_0", "price")
        );
    }

    #[test]
    fn an_answer_cut_at_the_token_limit_is_kept_not_retried() {
        let d = parse_response(
            &reply(
                json!({"content": "The answer is 4", "refusal": null}),
                "length",
            ),
            1,
        )
        .unwrap()
        .decision;
        let Decision::CutOff { text, reason } = d else {
            panic!("{d:?}")
        };
        assert_eq!(text, "The answer is 4");
        assert!(reason.contains("finish_reason: length") && reason.contains("`max_tokens`"));
    }

    #[test]
    fn unusable_replies_are_malformed_with_their_raw_text() {
        let malformed = |v: Value| match parse_response(&v, 1).unwrap().decision {
            Decision::Malformed { raw, reason } => (raw, reason),
            d => panic!("expected malformed, got {d:?}"),
        };
        let (raw, reason) = malformed(reply(
            json!({"content": null, "tool_calls": [{"id": "a", "function": {"name": "p", "arguments": "{\"t\":"}}]}),
            "length",
        ));
        assert!(raw.contains("{\\\"t\\\":"), "{raw}");
        assert!(
            reason.contains("tool calls") && reason.contains("max_tokens"),
            "{reason}"
        );
        let (raw, reason) = malformed(reply(
            json!({"content": null, "refusal": "I can't help with that."}),
            "stop",
        ));
        assert_eq!(raw, "I can't help with that.");
        assert!(reason.contains("refused"));
        let (_, reason) = malformed(reply(json!({"content": "  "}), "stop"));
        assert!(reason.contains("empty"));
        let (_, reason) = malformed(json!({"choices": []}));
        assert!(reason.contains("no choices"));
        let (_, reason) = malformed(reply(json!({"content": ""}), "content_filter"));
        assert!(reason.contains("content filter"));
    }

    #[test]
    fn an_error_object_in_a_200_is_an_error() {
        let e = parse_response(&json!({"error": {"message": "overloaded"}}), 1).unwrap_err();
        assert!(e.message.contains("overloaded"), "{}", e.message);
    }

    // --- decide() against the fake server ---------------------------------------------

    fn model(base_url: String, retries: u32) -> LiveClient {
        let mut m = client(&OPENAI, SPEC, base_url);
        m.settings.retries = retries;
        m
    }

    #[test]
    fn decide_round_trip_through_a_validating_server() {
        let fake = providers::Fake::openai(vec![
            providers::openai_tool_calls(&[
                ("c1", "price", "{\"ticker\":\"AAPL\"}"),
                ("c2", "price", "{\"ticker\":\"MSFT\"}"),
            ]),
            providers::openai_answer("done"),
        ]);
        let mut m = model(fake.base_url(), 0);
        let mut msgs = vec![
            Message::System {
                content: "Be brief.".into(),
            },
            Message::User {
                content: "q".into(),
            },
        ];
        let t = testing::decide(&mut m, SPEC, &msgs, 1).unwrap();
        let Decision::ToolCalls { calls, .. } = t.decision else {
            panic!("{:?}", t.decision)
        };
        msgs.push(Message::Assistant {
            content: None,
            tool_calls: calls
                .iter()
                .map(|c| CallMessage {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone().unwrap(),
                })
                .collect(),
        });
        for c in &calls {
            msgs.push(Message::Tool {
                tool_call_id: c.id.clone(),
                name: c.name.clone(),
                content: "1".into(),
                is_error: false,
                images: Vec::new(),
            });
        }
        let t = testing::decide(&mut m, SPEC, &msgs, 2).unwrap();
        assert_eq!(t.decision, Decision::Answer("done".into()));
        assert_eq!(fake.violations(), Vec::<String>::new());
        let reqs = fake.requests();
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[1].header("authorization"), Some("Bearer sk-test-123"));
    }

    #[test]
    fn decide_retries_429_then_succeeds() {
        let fake = providers::Fake::openai(vec![
            Response::json(
                429,
                json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
            )
            .header("Retry-After", "0"),
            Response::json(503, json!({"error": {"message": "busy"}}))
                .header("retry-after-ms", "10"),
            providers::openai_answer("ok"),
        ]);
        let mut m = model(fake.base_url(), 2);
        let t = testing::decide(
            &mut m,
            SPEC,
            &[Message::User {
                content: "q".into(),
            }],
            1,
        )
        .unwrap();
        assert_eq!(t.decision, Decision::Answer("ok".into()));
        assert_eq!(fake.requests().len(), 3);
    }

    #[test]
    fn decide_gives_up_after_the_retries() {
        let fake = providers::Fake::openai(vec![
            Response::json(500, json!({"error": {"message": "boom"}})).header("Retry-After", "0"),
            Response::json(500, json!({"error": {"message": "boom again"}}))
                .header("Retry-After", "0"),
        ]);
        let mut m = model(fake.base_url(), 1);
        let e = testing::decide(
            &mut m,
            SPEC,
            &[Message::User {
                content: "q".into(),
            }],
            1,
        )
        .unwrap_err();
        assert_eq!(e.status, Some(500));
        assert!(
            e.message.contains("boom again") && e.message.contains("2 attempts"),
            "{}",
            e.message
        );
    }

    #[test]
    fn decide_does_not_retry_401_and_masks_an_echoed_key() {
        let fake = providers::Fake::openai(vec![]);
        let mut m = model(fake.base_url(), 3);
        m.api_key = Some("sk-wrong-key".into());
        let e = testing::decide(
            &mut m,
            SPEC,
            &[Message::User {
                content: "q".into(),
            }],
            1,
        )
        .unwrap_err();
        assert_eq!(e.status, Some(401));
        assert_eq!(fake.requests().len(), 1);
        assert!(
            e.message.contains("Incorrect API key provided"),
            "{}",
            e.message
        );
        assert!(
            !e.message.contains("sk-wrong-key")
                && !e.raw.unwrap_or_default().contains("sk-wrong-key")
        );
    }

    #[test]
    fn decide_retries_refused_connections_then_reports_them() {
        let port = crate::models::live::http::refused_port();
        let mut m = model(format!("http://127.0.0.1:{port}/v1"), 1);
        let e = testing::decide(
            &mut m,
            SPEC,
            &[Message::User {
                content: "q".into(),
            }],
            1,
        )
        .unwrap_err();
        assert!(
            e.message.contains("connection failed") && e.message.contains("2 attempts"),
            "{}",
            e.message
        );
    }

    #[test]
    fn events_carry_the_wire_body_but_never_the_key() {
        use std::sync::{Arc, Mutex};
        let fake = providers::Fake::openai(vec![providers::openai_answer("ok")]);
        let mut m = model(fake.base_url(), 0);
        let seen: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let mut events = Events::none();
        let sink = Arc::clone(&seen);
        events.tap(move |name, data| sink.lock().unwrap().push((name.to_string(), data.clone())));
        let reg = registry(SPEC);
        let msgs = [Message::User {
            content: "q".into(),
        }];
        let input = DecideInput {
            registry: &reg,
            messages: &msgs,
            query: "q",
            results: &[],
            step: 1,
        };
        block_on(m.decide(input, &Transport::live(), &events)).unwrap();
        let seen = seen.lock().unwrap();
        let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["model_http_request", "model_http_response"]);
        assert_eq!(seen[0].1["body"]["model"], "gpt-4o-mini");
        assert_eq!(seen[1].1["status"], 200);
        assert!(!format!("{seen:?}").contains(providers::KEY));
    }

    #[test]
    fn decide_times_out() {
        let fake = providers::Fake::openai(vec![
            providers::openai_answer("late").delay(std::time::Duration::from_secs(3))
        ]);
        let mut m = model(fake.base_url(), 2);
        m.settings.timeout = std::time::Duration::from_millis(200);
        let e = testing::decide(
            &mut m,
            SPEC,
            &[Message::User {
                content: "q".into(),
            }],
            1,
        )
        .unwrap_err();
        assert!(e.message.contains("no reply within 200ms"), "{}", e.message);
        // On a loaded machine the 200ms can run out before the request is even sent, or the
        // server may log it after the client gave up; either way there is no second attempt.
        let seen = fake
            .server
            .wait_for_requests(2, std::time::Duration::from_millis(500));
        assert!(seen.len() <= 1, "a timeout is not retried: {seen:?}");
    }
}
