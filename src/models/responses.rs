//! OpenAI's Responses API (`POST {base_url}/responses`), for `kind: openai` models with
//! `api: responses`: the API OpenAI recommends for new work, and the one that carries a
//! reasoning model's reasoning from one tool call to the next.
//!
//! Stateless: every request carries the whole conversation (`store: false`, never a
//! `previous_response_id`), so a recorded run replays without the provider. Reasoning items come
//! back with their encrypted content (`include`) and go back unchanged, in order, before the
//! turn they led to. Retries, errors, masking, streaming and recording are the shared ones of
//! [`live`]; this file is only the wire format.

use super::client::Wire;
use super::live;
use super::responses_stream::{ResponsesStream, STREAM_ENDED};
use super::{Decision, Message, ModelError, ModelTurn, ProposedCall, ResponseMeta, Usage};
use crate::registry::{LiveModel, Registry, ToolChoice};
use serde_json::{json, Map, Value};

/// The Responses wire format.
pub(crate) static RESPONSES: Wire = Wire {
    provider: "openai",
    path: "/responses",
    build_request,
    headers: super::openai::headers,
    stream: || Box::<ResponsesStream>::default(),
    parse_response,
};

/// The Responses request for this conversation.
pub(crate) fn build_request(
    settings: &LiveModel,
    registry: &Registry,
    messages: &[Message],
) -> Value {
    let mut instructions: Vec<&str> = Vec::new();
    let mut input: Vec<Value> = Vec::with_capacity(messages.len() + 2);
    // Reasoning goes back only with the item it led to: the API refuses a reasoning item
    // without its following item (an empty malformed reply has none).
    let mut reasoning: Vec<Value> = Vec::new();
    // Images a tool returned follow all of the turn's outputs, in one user message.
    let mut shown: Vec<Value> = Vec::new();
    for m in messages {
        if !matches!(m, Message::Tool { .. }) && !shown.is_empty() {
            input.push(json!({ "role": "user", "content": std::mem::take(&mut shown) }));
        }
        match m {
            Message::System { content } => instructions.push(content),
            Message::User { content } => {
                input.push(json!({ "role": "user", "content": content }));
            }
            Message::Reasoning { items, .. } => reasoning.extend(items.iter().cloned()),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut turn = Vec::with_capacity(tool_calls.len() + 1);
                if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                    turn.push(json!({ "role": "assistant", "content": text }));
                }
                turn.extend(tool_calls.iter().map(|c| {
                    json!({
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": live::arguments_object(&c.arguments).to_string(),
                    })
                }));
                if !turn.is_empty() {
                    input.append(&mut reasoning);
                }
                reasoning.clear();
                input.extend(turn);
            }
            Message::Tool {
                tool_call_id,
                name,
                content,
                images,
                ..
            } => {
                // No `is_error` in this API: the content (`{error: {kind, message}}`) says it.
                input.push(json!({ "type": "function_call_output", "call_id": tool_call_id, "output": content }));
                if !images.is_empty() {
                    shown.push(json!({ "type": "input_text", "text": format!("The image(s) returned by tool call `{tool_call_id}` ({name}):") }));
                    shown.extend(images.iter().map(|i| json!({ "type": "input_image", "image_url": format!("data:{};base64,{}", i.mime, i.data) })));
                }
            }
        }
    }
    if !shown.is_empty() {
        input.push(json!({ "role": "user", "content": shown }));
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(settings.model));
    // The engine puts the spec's `system:` first; a conversation built elsewhere may not.
    let instructions = if instructions.is_empty() {
        registry.system.clone()
    } else {
        Some(instructions.join("\n\n"))
    };
    if let Some(s) = instructions.filter(|s| !s.is_empty()) {
        body.insert("instructions".into(), json!(s));
    }
    body.insert("input".into(), Value::Array(input));
    let tools = registry
        .callable_tools()
        .map(crate::registry::api_formats::openai_responses)
        .collect();
    live::insert_tools(&mut body, tools, settings, messages, tool_choice);
    knobs(&mut body, settings);
    live::merge_extra_body(&mut body, settings);
    Value::Object(body)
}

/// The model's settings over the request: sampling, limits, reasoning and statelessness.
fn knobs(body: &mut Map<String, Value>, settings: &LiveModel) {
    if let Some(t) = settings.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(n) = settings.max_tokens {
        body.insert("max_output_tokens".into(), json!(n));
    }
    if let Some(r) = &settings.reasoning {
        let mut knobs = Map::new();
        if let Some(e) = &r.effort {
            knobs.insert("effort".into(), json!(e));
        }
        if let Some(s) = &r.summary {
            knobs.insert("summary".into(), json!(s));
        }
        body.insert("reasoning".into(), Value::Object(knobs));
    }
    // Only for a model that reasons: gpt-4o and gpt-4.1 refuse it ("Encrypted content is not
    // supported with this model"). `extra_body: { include: [...] }` decides otherwise.
    if reasons(settings) && !settings.extra_body.contains_key("include") {
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    // Stateless unless the spec says otherwise: nothing is kept at the provider, and the
    // encrypted reasoning travels with the conversation instead.
    if !settings.extra_body.contains_key("store") {
        body.insert("store".into(), json!(false));
    }
    if settings.stream {
        body.insert("stream".into(), json!(true));
    }
}

/// Whether to ask for encrypted reasoning: the spec set `reasoning:`, or the model is one of
/// OpenAI's reasoning families (o-series, gpt-5), possibly behind a `provider/` prefix.
fn reasons(settings: &LiveModel) -> bool {
    let name = settings.model.rsplit('/').next().unwrap_or("");
    let family = |p: &str| {
        name.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.']))
    };
    settings.reasoning.is_some() || ["o1", "o3", "o4", "gpt-5"].iter().any(|p| family(p))
}

/// Sent explicitly, `auto` included, as for Chat Completions: bridges to servers that ignore
/// tools without it forward it.
fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::Required => json!("required"),
        ToolChoice::None => json!("none"),
        ToolChoice::Tool(name) => json!({ "type": "function", "name": name }),
    }
}

/// What a reply's output items hold, in order.
#[derive(Default)]
struct Output<'a> {
    text: String,
    refusal: String,
    calls: Vec<(usize, &'a Value)>,
    reasoning: Vec<Value>,
}

/// Sorts the output items; an item toolrun cannot use is an error naming it (the model would
/// otherwise be answered as if it had not sent it).
fn read_output(items: &[Value]) -> Result<Output<'_>, ModelError> {
    let mut out = Output::default();
    for (i, item) in items.iter().enumerate() {
        match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => out.reasoning.push(item.clone()),
            Some("function_call") => out.calls.push((i, item)),
            Some("message") => {
                let parts = item.get("content").and_then(Value::as_array);
                for part in parts.into_iter().flatten() {
                    let text = |k: &str| part.get(k).and_then(Value::as_str).unwrap_or("");
                    match part.get("type").and_then(Value::as_str) {
                        Some("refusal") => out.refusal.push_str(text("refusal")),
                        _ => out.text.push_str(text("text")),
                    }
                }
                // Some compatible servers send the text as a plain string.
                if let Some(s) = item.get("content").and_then(Value::as_str) {
                    out.text.push_str(s);
                }
            }
            Some(other) => {
                return Err(bad_item(
                    i,
                    item,
                    &format!("has the type `{other}`, which toolrun does not handle (it sends function tools only)"),
                ))
            }
            None => return Err(bad_item(i, item, "has no `type`")),
        }
    }
    Ok(out)
}

fn bad_item(i: usize, item: &Value, what: &str) -> ModelError {
    let id = item
        .get("id")
        .and_then(Value::as_str)
        .map(|id| format!(" (`{id}`)"))
        .unwrap_or_default();
    ModelError {
        message: format!("output item {i}{id} {what}"),
        raw: Some(item.to_string()),
        ..ModelError::default()
    }
}

/// The error a reply carries instead of output: an error object in a 200 (proxies), a stream's
/// `error` event, a `failed` response, or a stream that ended early.
fn reply_error(v: &Value, status: &str) -> Option<ModelError> {
    let err = v.get("error").filter(|e| !e.is_null());
    let message = match (status, err) {
        (_, Some(e)) if e.get("type").and_then(Value::as_str) == Some(STREAM_ENDED) => {
            live::provider_message(Some(v), "")
        }
        ("failed", e) => {
            let code = e
                .and_then(|e| e.get("code"))
                .and_then(Value::as_str)
                .map(|c| format!(" ({c})"))
                .unwrap_or_default();
            let why = e.map_or_else(
                || "no reason given".to_string(),
                |_| live::provider_message(Some(v), ""),
            );
            format!("the response failed{code}: {why}")
        }
        (_, Some(_)) if v.get("output").is_none() => format!(
            "the server returned an error: {}",
            live::provider_message(Some(v), &v.to_string())
        ),
        ("completed" | "incomplete", _) => return None,
        (other, _) => format!("the response is `{other}`, not completed"),
    };
    Some(ModelError {
        message,
        raw: Some(v.to_string()),
        ..ModelError::default()
    })
}

/// Reads a Responses reply (a stream folded into one).
pub(crate) fn parse_response(v: &Value, step: u32) -> Result<ModelTurn, ModelError> {
    // Compatible servers may leave `status` out of a finished response.
    let status = v
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("completed");
    if let Some(e) = reply_error(v, status) {
        return Err(e);
    }
    let reason = v
        .pointer("/incomplete_details/reason")
        .and_then(Value::as_str)
        .unwrap_or("");
    let response = Some(ResponseMeta {
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        finish_reasons: vec![if status == "incomplete" && !reason.is_empty() {
            reason.to_string()
        } else {
            status.to_string()
        }],
    });
    let items: &[Value] = v
        .get("output")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let out = read_output(items)?;
    let turn = |decision| ModelTurn {
        decision,
        usage: usage(v),
        response: response.clone(),
        reasoning: out.reasoning.clone(),
    };
    if status == "incomplete" {
        let raw: Vec<&Value> = out.calls.iter().map(|(_, c)| *c).collect();
        return Ok(turn(match reason {
            "max_output_tokens" => live::cut_off(
                out.text.clone(),
                &raw,
                "status: incomplete, reason: max_output_tokens",
            ),
            "content_filter" => Decision::Malformed {
                raw: out.text.clone(),
                reason: "the reply was withheld by the content filter (status: incomplete, reason: content_filter)".into(),
            },
            other => Decision::Malformed {
                raw: out.text.clone(),
                reason: format!("the response is incomplete (reason: {other:?})"),
            },
        }));
    }
    if !out.refusal.trim().is_empty() {
        return Ok(turn(Decision::Malformed {
            raw: out.refusal.clone(),
            reason: format!("the model refused: {}", live::snippet(&out.refusal)),
        }));
    }
    if !out.calls.is_empty() {
        let calls = proposed_calls(&out.calls, step)?;
        return Ok(turn(Decision::ToolCalls {
            text: Some(out.text.clone()).filter(|t| !t.trim().is_empty()),
            calls,
        }));
    }
    if out.text.trim().is_empty() {
        let reason = if items.is_empty() {
            "the response has no output"
        } else {
            "the model returned an empty reply"
        };
        return Ok(turn(Decision::Malformed {
            raw: out.text.clone(),
            reason: reason.into(),
        }));
    }
    Ok(turn(Decision::Answer(out.text.clone())))
}

/// `function_call` items as calls. Arguments that are not a JSON object are the server's
/// fault here (the API produces JSON): an error naming the item, not a guess.
fn proposed_calls(raw: &[(usize, &Value)], step: u32) -> Result<Vec<ProposedCall>, ModelError> {
    let mut seen = Vec::new();
    let mut calls = Vec::with_capacity(raw.len());
    for (n, (i, item)) in raw.iter().enumerate() {
        let name = item
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let id_field = item.get("call_id").or_else(|| item.get("id"));
        let id = live::call_id(id_field, step, n, &mut seen);
        let arguments = live::parse_arguments(item.get("arguments")).map_err(|raw| {
            bad_item(
                *i,
                item,
                &format!(
                    "(`function_call` `{name}`) has arguments that are not a JSON object: {}",
                    live::snippet(&raw)
                ),
            )
        })?;
        calls.push(ProposedCall {
            id,
            name,
            arguments: Ok(arguments),
        });
    }
    Ok(calls)
}

/// Token counts, with the cached and reasoning parts the API reports inside them.
fn usage(v: &Value) -> Option<Usage> {
    let u = v.get("usage").filter(|u| u.is_object())?;
    let field = |a: &str, b: &str| live::u64_field(u.get(a)).or_else(|| live::u64_field(u.get(b)));
    let input = field("input_tokens", "prompt_tokens");
    let output = field("output_tokens", "completion_tokens");
    (input.is_some() || output.is_some()).then(|| Usage {
        input_tokens: input.unwrap_or(0),
        output_tokens: output.unwrap_or(0),
        cached_input_tokens: live::u64_field(u.pointer("/input_tokens_details/cached_tokens"))
            .unwrap_or(0),
        reasoning_tokens: live::u64_field(u.pointer("/output_tokens_details/reasoning_tokens"))
            .unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::live::testing::{registry, settings_at};
    use crate::models::{CallMessage, Image};

    const SPEC: &str = "version: 1\nname: t\nsystem: Be brief.\ntools:\n  price:\n    description: Price of a ticker.\n    kind: mock\n    input: { type: object }\n    responses: [ { result: 1 } ]\nmodels:\n  m: { kind: openai, api: responses, model: o4-mini, extra_body: { store: true } }\n";

    fn reasoning(id: &str) -> Message {
        Message::Reasoning {
            summary: Vec::new(),
            items: vec![
                json!({"type": "reasoning", "id": id, "summary": [], "encrypted_content": "e"}),
            ],
        }
    }

    #[test]
    fn reasoning_goes_back_only_before_the_turn_it_led_to() {
        let reg = registry(SPEC);
        let settings = settings_at(SPEC, "http://127.0.0.1:1/v1".into());
        let messages = [
            Message::User {
                content: "q".into(),
            },
            // An empty malformed reply: its reasoning has no following item, so it is dropped.
            reasoning("rs_dropped"),
            Message::Assistant {
                content: Some(String::new()),
                tool_calls: Vec::new(),
            },
            reasoning("rs_kept"),
            Message::Assistant {
                content: None,
                tool_calls: vec![CallMessage {
                    id: "c1".into(),
                    name: "price".into(),
                    arguments: json!("{not json"),
                }],
            },
            Message::Tool {
                tool_call_id: "c1".into(),
                name: "price".into(),
                content: "1".into(),
                is_error: false,
                images: vec![Image {
                    mime: "image/png".into(),
                    data: "AAAA".into(),
                }],
            },
        ];
        let body = build_request(&settings, &reg, &messages);
        let input = body["input"].as_array().cloned().unwrap_or_default();
        let ids: Vec<&str> = input.iter().filter_map(|i| i["id"].as_str()).collect();
        assert_eq!(ids, ["rs_kept"]);
        assert_eq!(input[1]["id"], "rs_kept");
        assert_eq!(
            input[2]["arguments"], "{}",
            "unparsable arguments echo as {{}}"
        );
        assert_eq!(input[3]["type"], "function_call_output");
        assert_eq!(input[4]["role"], "user");
        assert_eq!(
            input[4]["content"][1]["image_url"],
            "data:image/png;base64,AAAA"
        );
        assert_eq!(body["instructions"], "Be brief.");
        // `store` from `extra_body` replaces toolrun's `false`.
        assert_eq!(body["store"], true);
    }

    #[test]
    fn encrypted_reasoning_is_asked_of_reasoning_models_only() {
        let mut settings = settings_at(SPEC, "http://127.0.0.1:1/v1".into());
        for (model, asked) in [
            ("o4-mini", true),
            ("openai/o3", true),
            ("gpt-5", true),
            ("gpt-5.1-codex", true),
            ("gpt-4o", false),
            ("gpt-4.1-mini", false),
            ("o1x", false),
            ("smollm2", false),
        ] {
            settings.model = model.into();
            assert_eq!(reasons(&settings), asked, "{model}");
        }
        settings.model = "gpt-4o".into();
        settings.reasoning = Some(Default::default());
        assert!(reasons(&settings));
    }

    #[test]
    fn a_reply_without_status_or_with_an_odd_one() {
        let v = json!({"output": [{"type": "message", "content": "plain"}]});
        let t = parse_response(&v, 1).map(|t| t.decision);
        assert_eq!(t, Ok(Decision::Answer("plain".into())));
        let v = json!({"status": "in_progress", "output": []});
        let e = parse_response(&v, 1).err().map(|e| e.message);
        assert_eq!(
            e.as_deref(),
            Some("the response is `in_progress`, not completed")
        );
        let v = json!({"status": "completed", "output": [{"id": "x"}]});
        let e = parse_response(&v, 1).err().map(|e| e.message);
        assert_eq!(e.as_deref(), Some("output item 0 (`x`) has no `type`"));
    }
}
