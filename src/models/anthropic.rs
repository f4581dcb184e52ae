//! Anthropic Messages (`POST {base_url}/v1/messages`).
//!
//! The API is strict about shape: roles alternate starting with `user`, the system prompt is a
//! top-level field, and every `tool_use` is answered by a `tool_result` in the very next user
//! message. The conversation is mapped to honour all of that whatever the engine sends.

use super::client::{Headers, Wire};
use super::live;
use super::{Decision, Message, ModelError, ModelTurn, ProposedCall, ResponseMeta, Usage};
use crate::registry::{LiveModel, Registry, ToolChoice};
use serde_json::{json, Map, Value};

pub(crate) const API_VERSION: &str = "2023-06-01";
/// The API requires `max_tokens`; this is used when the spec does not set it.
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 1024;

/// The Messages wire format.
pub(crate) static ANTHROPIC: Wire = Wire {
    provider: "anthropic",
    path: "/v1/messages",
    build_request,
    headers,
    stream: || Box::<super::stream::AnthropicStream>::default(),
    parse_response,
};

fn headers(settings: &LiveModel, api_key: Option<&str>) -> Headers {
    let mut headers = vec![("anthropic-version".to_string(), API_VERSION.to_string())];
    headers.extend(live::key_header(settings, api_key, |key| {
        ("x-api-key".to_string(), key.to_string())
    }));
    headers
}

/// The Messages request for this conversation.
pub(crate) fn build_request(
    settings: &LiveModel,
    registry: &Registry,
    messages: &[Message],
) -> Value {
    let mut system: Vec<&str> = Vec::new();
    let mut wire: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages {
        let (role, blocks) = match m {
            Message::System { content } => {
                system.push(content);
                continue;
            }
            Message::User { content } => ("user", text_block(content)),
            // OpenAI's reasoning items mean nothing to the Messages API.
            Message::Reasoning { .. } => continue,
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = text_block(content.as_deref().unwrap_or(""));
                blocks.extend(tool_calls.iter().map(|c| {
                    json!({ "type": "tool_use", "id": safe_id(&c.id), "name": c.name, "input": live::arguments_object(&c.arguments) })
                }));
                ("assistant", blocks)
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                images,
                ..
            } => {
                let mut block = json!({ "type": "tool_result", "tool_use_id": safe_id(tool_call_id), "content": content });
                if !images.is_empty() {
                    // A tool result may hold image blocks: the model sees what the tool returned.
                    let mut parts = vec![json!({ "type": "text", "text": content })];
                    parts.extend(images.iter().map(|i| json!({ "type": "image", "source": { "type": "base64", "media_type": i.mime, "data": i.data } })));
                    block["content"] = Value::Array(parts);
                }
                if *is_error {
                    block["is_error"] = json!(true);
                }
                ("user", vec![block])
            }
        };
        // An empty message is rejected; dropping it keeps the rest valid.
        if blocks.is_empty() {
            continue;
        }
        // Consecutive messages of one role become one: the API wants strict alternation, and
        // all results of a parallel call must sit in the one user message after the calls.
        match wire.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => wire.push((role, blocks)),
        }
    }
    let wire: Vec<Value> = wire
        .into_iter()
        .map(|(role, mut blocks)| {
            // `tool_result` blocks must come before any text in their user message.
            blocks.sort_by_key(|b| b.get("type").and_then(Value::as_str) != Some("tool_result"));
            json!({ "role": role, "content": blocks })
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    body.insert(
        "max_tokens".into(),
        json!(settings.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    let system = if system.is_empty() {
        registry.system.clone()
    } else {
        Some(system.join("\n\n"))
    };
    if let Some(s) = system.filter(|s| !s.is_empty()) {
        body.insert("system".into(), json!(s));
    }
    body.insert("messages".into(), Value::Array(wire));
    let tools: Vec<Value> = registry
        .callable_tools()
        .map(crate::registry::api_formats::anthropic)
        .collect();
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
        body.insert(
            "tool_choice".into(),
            tool_choice(
                live::effective_tool_choice(settings, messages),
                settings.parallel_tool_calls,
            ),
        );
    }
    // The spec allows 0..2 (OpenAI's range); Anthropic's is 0..1 and rejects more.
    if let Some(t) = settings.temperature {
        body.insert("temperature".into(), json!(t.min(1.0)));
    }
    if settings.stream {
        body.insert("stream".into(), json!(true));
    }
    live::merge_extra_body(&mut body, settings);
    Value::Object(body)
}

/// Anthropic's default is `auto` too, but compatible proxies forward it to servers that need
/// it said. One call at a time is a flag inside the choice, which `none` does not take.
fn tool_choice(choice: &ToolChoice, parallel: Option<bool>) -> Value {
    let mut v = match choice {
        ToolChoice::Auto => json!({ "type": "auto" }),
        ToolChoice::Required => json!({ "type": "any" }),
        ToolChoice::None => return json!({ "type": "none" }),
        ToolChoice::Tool(name) => json!({ "type": "tool", "name": name }),
    };
    if parallel == Some(false) {
        v["disable_parallel_tool_use"] = json!(true);
    }
    v
}

/// Empty text blocks are rejected by the API, so empty text is no block at all.
fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({ "type": "text", "text": text })]
    }
}

/// `tool_use` ids must match `^[a-zA-Z0-9_-]+$`. Ids from elsewhere (another provider, a
/// recording) are mapped the same way in `tool_use` and `tool_result`, so pairs still match.
fn safe_id(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "call".into()
    } else {
        s
    }
}

/// The model that answered and its `stop_reason`, as sent.
fn response_meta(v: &Value) -> ResponseMeta {
    ResponseMeta {
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        finish_reasons: v
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_string)
            .into_iter()
            .collect(),
    }
}

/// Reads a Messages reply.
pub(crate) fn parse_response(v: &Value, step: u32) -> Result<ModelTurn, ModelError> {
    if v.get("type").and_then(Value::as_str) == Some("error")
        || (v.get("content").is_none() && v.get("error").is_some_and(|e| !e.is_null()))
    {
        let msg = live::provider_message(Some(v), &v.to_string());
        return Err(ModelError {
            message: format!("the server returned an error: {msg}"),
            raw: Some(v.to_string()),
            ..ModelError::default()
        });
    }
    let usage = v.get("usage").filter(|u| u.is_object()).and_then(|u| {
        // Cached prompt tokens are still prompt tokens: they count towards the run's budget.
        let parts = [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ]
        .map(|k| live::u64_field(u.get(k)));
        let output = live::u64_field(u.get("output_tokens"));
        let input = parts
            .iter()
            .flatten()
            .copied()
            .reduce(|a, b| a.saturating_add(b));
        (input.is_some() || output.is_some()).then(|| Usage {
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
            ..Usage::default()
        })
    });
    let response = Some(response_meta(v));
    let turn = |decision| {
        Ok(ModelTurn {
            decision,
            usage,
            response: response.clone(),
            reasoning: Vec::new(),
        })
    };
    let blocks: &[Value] = v
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let stop = v.get("stop_reason").and_then(Value::as_str).unwrap_or("");
    let text: String = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    let uses: Vec<&Value> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
        .collect();

    match stop {
        "max_tokens" | "model_context_window_exceeded" => {
            let with_calls: Vec<&Value> = if uses.is_empty() {
                Vec::new()
            } else {
                blocks.iter().collect()
            };
            return turn(live::cut_off(
                text,
                &with_calls,
                &format!("stop_reason: {stop}"),
            ));
        }
        "refusal" => {
            return turn(Decision::Malformed {
                raw: text,
                reason: "the model refused to answer (stop_reason: refusal)".into(),
            });
        }
        _ => {}
    }

    if !uses.is_empty() {
        let mut seen = Vec::new();
        let calls = uses
            .iter()
            .enumerate()
            .map(|(i, b)| ProposedCall {
                id: live::call_id(b.get("id"), step, i, &mut seen),
                name: b
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                // Anthropic sends an object; compatible servers sometimes send a JSON string.
                arguments: live::parse_arguments(b.get("input")),
            })
            .collect();
        return turn(Decision::ToolCalls {
            text: Some(text).filter(|t| !t.trim().is_empty()),
            calls,
        });
    }
    if text.trim().is_empty() {
        let reason = if blocks.is_empty() {
            "the model returned no content"
        } else {
            "the model returned an empty reply"
        };
        return turn(Decision::Malformed {
            raw: if blocks.is_empty() {
                v.to_string()
            } else {
                text
            },
            reason: reason.into(),
        });
    }
    turn(Decision::Answer(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::client::LiveClient;
    use crate::models::live::providers;
    use crate::models::live::testing::{self, client, registry};
    use crate::models::CallMessage;

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
models:
  claude: { kind: anthropic, model: claude-sonnet-4-5, api_key_env: TOOLRUN_UNIT_ANTHROPIC_KEY, temperature: 1.5 }
"#;

    fn live(reg: &Registry) -> LiveModel {
        match &reg.models[0].kind {
            crate::registry::ModelKind::Anthropic(l) => l.clone(),
            _ => unreachable!("the spec declares an anthropic model"),
        }
    }

    fn call(id: &str, args: Value) -> CallMessage {
        CallMessage {
            id: id.into(),
            name: "price".into(),
            arguments: args,
        }
    }

    fn tool(id: &str, content: &str, is_error: bool) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "price".into(),
            content: content.into(),
            is_error,
            images: Vec::new(),
        }
    }

    #[test]
    fn request_maps_the_conversation() {
        let reg = registry(SPEC);
        let msgs = vec![
            Message::System {
                content: "Be brief.".into(),
            },
            Message::User {
                content: "AAPL?".into(),
            },
            Message::Assistant {
                content: Some("Looking.".into()),
                tool_calls: vec![
                    call("toolu_1", json!({"ticker": "AAPL"})),
                    call("call.2", json!("{bad")),
                ],
            },
            tool("toolu_1", "1", false),
            tool("call.2", "{\"kind\":\"invalid_arguments\"}", true),
        ];
        let body = build_request(&live(&reg), &reg, &msgs);
        assert_eq!(body["system"], "Be brief.");
        assert_eq!(body["max_tokens"], 1024, "the API requires max_tokens");
        assert_eq!(body["temperature"], 1.0, "clamped to Anthropic's range");
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[0],
            json!({"role": "user", "content": [{"type": "text", "text": "AAPL?"}]})
        );
        assert_eq!(
            m[1]["content"],
            json!([
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_1", "name": "price", "input": {"ticker": "AAPL"}},
                {"type": "tool_use", "id": "call_2", "name": "price", "input": {}},
            ])
        );
        assert_eq!(
            m[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "{\"kind\":\"invalid_arguments\"}", "is_error": true},
            ]})
        );
        assert_eq!(
            body["tools"][0],
            json!({"name": "price", "description": "Price of a ticker.", "input_schema": reg.tools[0].input_schema})
        );
    }

    #[test]
    fn a_correction_after_tool_results_joins_their_user_message_after_them() {
        let reg = registry(SPEC);
        let msgs = vec![
            Message::User {
                content: "q".into(),
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![call("a", json!({}))],
            },
            Message::User {
                content: "Please answer in JSON.".into(),
            },
            tool("a", "1", false),
        ];
        let body = build_request(&live(&reg), &reg, &msgs);
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[2]["content"][0]["type"], "tool_result");
        assert_eq!(m[2]["content"][1]["type"], "text");
        let req_ok = providers::check_anthropic_body(&body);
        assert_eq!(req_ok, Ok(()));
    }

    #[test]
    fn malformed_correction_turns_keep_alternation() {
        let reg = registry(SPEC);
        let msgs = vec![
            Message::User {
                content: "q".into(),
            },
            Message::Assistant {
                content: Some("I'll call price(AAPL)".into()),
                tool_calls: vec![],
            },
            Message::User {
                content: "That was not a tool call.".into(),
            },
            Message::Assistant {
                content: Some(String::new()),
                tool_calls: vec![],
            },
            Message::User {
                content: "Again.".into(),
            },
        ];
        let body = build_request(&live(&reg), &reg, &msgs);
        assert_eq!(
            body["messages"].as_array().map(Vec::len),
            Some(3),
            "the empty assistant turn is dropped and users merged"
        );
        assert_eq!(providers::check_anthropic_body(&body), Ok(()));
    }

    fn reply(content: Value, stop: &str) -> Value {
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": content, "stop_reason": stop, "stop_sequence": null,
               "usage": {"input_tokens": 20, "output_tokens": 4, "cache_read_input_tokens": 100, "cache_creation_input_tokens": null}})
    }

    #[test]
    fn parses_answers_and_tool_uses() {
        let t = parse_response(
            &reply(json!([{"type": "text", "text": "Hi"}]), "end_turn"),
            1,
        )
        .unwrap();
        assert_eq!(t.decision, Decision::Answer("Hi".into()));
        assert_eq!(
            t.usage,
            Some(Usage {
                input_tokens: 120,
                output_tokens: 4,
                ..Usage::default()
            })
        );
        let content = json!([
            {"type": "thinking", "thinking": "hmm", "signature": "x"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_a", "name": "price", "input": {"ticker": "A"}},
            {"type": "tool_use", "name": "other", "input": "{\"x\":1}"},
            {"type": "tool_use", "id": "toolu_c", "name": "price", "input": "{oops"},
        ]);
        let Decision::ToolCalls { text, calls } = parse_response(&reply(content, "tool_use"), 4)
            .unwrap()
            .decision
        else {
            panic!()
        };
        assert_eq!(text.as_deref(), Some("Checking."));
        assert_eq!(
            calls[0],
            ProposedCall {
                id: "toolu_a".into(),
                name: "price".into(),
                arguments: Ok(json!({"ticker": "A"}))
            }
        );
        assert_eq!(
            calls[1],
            ProposedCall {
                id: "call_4_1".into(),
                name: "other".into(),
                arguments: Ok(json!({"x": 1}))
            }
        );
        assert_eq!(calls[2].arguments, Err("{oops".into()));
    }

    #[test]
    fn an_answer_cut_at_the_token_limit_is_kept_not_retried() {
        for stop in ["max_tokens", "model_context_window_exceeded"] {
            let v = reply(json!([{"type": "text", "text": "The answer is"}]), stop);
            let d = parse_response(&v, 1).unwrap().decision;
            let Decision::CutOff { text, reason } = d else {
                panic!("{d:?}")
            };
            assert_eq!(text, "The answer is");
            assert!(reason.contains(&format!("stop_reason: {stop}")), "{reason}");
        }
    }

    #[test]
    fn unusable_replies_are_malformed() {
        let reason = |v: Value| match parse_response(&v, 1).unwrap().decision {
            Decision::Malformed { raw, reason } => (raw, reason),
            d => panic!("{d:?}"),
        };
        let (raw, r) = reason(reply(
            json!([{"type": "text", "text": "Let me look"}, {"type": "tool_use", "id": "t", "name": "p", "input": {}}]),
            "max_tokens",
        ));
        assert!(
            raw.contains("Let me look") && raw.contains("tool_use"),
            "{raw}"
        );
        assert!(r.contains("tool calls") && r.contains("max_tokens"), "{r}");
        assert!(reason(reply(json!([]), "refusal")).1.contains("refused"));
        assert!(reason(reply(json!([]), "end_turn"))
            .1
            .contains("no content"));
        assert!(reason(json!({"content": null})).1.contains("no content"));
    }

    #[test]
    fn error_bodies_in_a_200_are_errors() {
        let e = parse_response(&json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}), 1).unwrap_err();
        assert!(e.message.contains("Overloaded"));
    }

    // --- decide() against the fake server ---------------------------------------------

    fn model(base_url: String) -> LiveClient {
        client(&ANTHROPIC, SPEC, base_url)
    }

    #[test]
    fn decide_round_trip_through_a_validating_server() {
        let fake = providers::Fake::anthropic(vec![
            providers::anthropic_tool_use(
                None,
                &[
                    ("toolu_1", "price", json!({"ticker": "AAPL"})),
                    ("toolu_2", "price", json!({"ticker": "MSFT"})),
                ],
            ),
            providers::anthropic_answer("done"),
        ]);
        let mut m = model(fake.base_url());
        let mut msgs = vec![
            Message::System {
                content: "Be brief.".into(),
            },
            Message::User {
                content: "q".into(),
            },
        ];
        let Decision::ToolCalls { calls, .. } =
            testing::decide(&mut m, SPEC, &msgs, 1).unwrap().decision
        else {
            panic!()
        };
        msgs.push(Message::Assistant {
            content: None,
            tool_calls: calls
                .iter()
                .map(|c| call(&c.id, c.arguments.clone().unwrap()))
                .collect(),
        });
        msgs.push(tool("toolu_1", "1", false));
        msgs.push(tool("toolu_2", "{\"kind\":\"not_found\"}", true));
        assert_eq!(
            testing::decide(&mut m, SPEC, &msgs, 2).unwrap().decision,
            Decision::Answer("done".into())
        );
        assert_eq!(fake.violations(), Vec::<String>::new());
        let req = &fake.requests()[1];
        assert_eq!(req.header("x-api-key"), Some(providers::KEY));
        assert_eq!(req.header("anthropic-version"), Some(API_VERSION));
    }

    #[test]
    fn decide_reports_the_provider_message_on_401_without_retrying() {
        let fake = providers::Fake::anthropic(vec![]);
        let mut m = model(fake.base_url());
        m.api_key = Some("sk-ant-wrong".into());
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
        assert!(e.message.contains("invalid x-api-key"), "{}", e.message);
        assert_eq!(fake.requests().len(), 1);
    }

    #[test]
    fn decide_retries_overloaded_529() {
        let fake = providers::Fake::anthropic(vec![
            providers::error(
                providers::Api::Anthropic,
                529,
                "overloaded_error",
                "Overloaded",
            )
            .header("retry-after", "0"),
            providers::anthropic_answer("ok"),
        ]);
        let mut m = model(fake.base_url());
        assert_eq!(
            testing::decide(
                &mut m,
                SPEC,
                &[Message::User {
                    content: "q".into()
                }],
                1
            )
            .unwrap()
            .decision,
            Decision::Answer("ok".into())
        );
        assert_eq!(fake.requests().len(), 2);
    }

    #[test]
    fn tool_choice_maps_to_the_messages_shape() {
        let none = tool_choice(&ToolChoice::None, Some(false));
        assert_eq!(
            none,
            json!({"type": "none"}),
            "`none` takes no parallel flag"
        );
        assert_eq!(
            tool_choice(&ToolChoice::Tool("price".into()), Some(false)),
            json!({"type": "tool", "name": "price", "disable_parallel_tool_use": true})
        );
        assert_eq!(
            tool_choice(&ToolChoice::Required, Some(true)),
            json!({"type": "any"})
        );
    }

    #[test]
    fn extra_headers_override_and_add() {
        let fake = providers::Fake::anthropic(vec![providers::anthropic_answer("ok")]);
        let mut m = model(fake.base_url());
        m.settings.headers = vec![
            ("anthropic-beta".into(), "tools-2024".into()),
            ("Anthropic-Version".into(), "2023-06-01".into()),
        ];
        testing::decide(
            &mut m,
            SPEC,
            &[Message::User {
                content: "q".into(),
            }],
            1,
        )
        .unwrap();
        let req = &fake.requests()[0];
        assert_eq!(req.header("anthropic-beta"), Some("tools-2024"));
        assert_eq!(req.header_all("anthropic-version").len(), 1);
    }
}
