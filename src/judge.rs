//! `expect: { judge: ... }`: a grader model of the spec scores a run's final answer (and, with
//! `trajectory: true`, its tool calls) against a rubric. The grader sees one user message, the
//! grading prompt ([`prompt`]), and is offered one tool, `grade`; it answers with
//! `{"score": 0..1, "reasoning": "..."}` as the tool's arguments or as its whole answer text.
//! Anything else fails the assertion with the raw reply. The grader runs through the same setup
//! as any model (`crate::setup`): recorded on a tape when the test records, answered from the
//! fixture's `judge` exchanges when it replays, refused offline.

use crate::fixture::Exchange;
use crate::models::{DecideInput, Decision, Message};
use crate::registry::{Judge, ModelKind, Registry};
use crate::setup::{Clock, Inputs, ModelChoice, Network, SecretSource, Setup};
use crate::trace::Trace;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub(crate) use crate::registry::GRADE_TOOL;

const SYSTEM: &str = "You grade an AI assistant's work against a rubric. You are strict and fair, and you reply only with a grade.";

/// A grader's verdict on one attempt, as the results document keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Grade {
    /// The grader (its name in the spec).
    pub(crate) model: String,
    pub(crate) score: f64,
    /// The lowest passing score.
    pub(crate) pass: f64,
    pub(crate) reasoning: String,
}

/// How the grader's request travels: as the test's own model calls do.
pub(crate) enum Route {
    /// Scripted graders, and live ones when the network is allowed.
    Live,
    /// Recording: the exchanges are returned for the fixture.
    Record,
    /// From a fixture's `judge` exchanges.
    Replay(Vec<Exchange>),
    /// Refused before leaving the process.
    Offline,
}

/// The grading prompt: rubric, question, (trajectory,) answer, and how to reply.
pub(crate) fn prompt(judge: &Judge, query: &str, trace: &Trace) -> String {
    let mut out = format!(
        "Grade the assistant's answer against the rubric.\n\nRubric:\n{}\n\nThe user asked:\n{}\n",
        judge.rubric, query
    );
    if judge.trajectory {
        out.push_str("\nThe assistant's tool calls, in order:\n");
        if trace.tool_results.is_empty() {
            out.push_str("(none)\n");
        }
        for (i, r) in trace.tool_results.iter().enumerate() {
            let outcome = match (&r.result, &r.error) {
                (Some(v), _) => format!("-> {v}"),
                (None, Some(e)) => format!("-> error: {}", e.message),
                _ => String::new(),
            };
            out.push_str(&format!(
                "{}. {}({}) {outcome}\n",
                i + 1,
                r.name,
                r.arguments
            ));
        }
    }
    out.push_str(&format!(
        "\nThe assistant's final answer:\n{}\n\nScore how well the answer meets the rubric, from 0 (not at all) to 1 (fully). Reply by calling the `{GRADE_TOOL}` tool with {{\"score\": <number from 0 to 1>, \"reasoning\": \"<one or two sentences>\"}}, or reply with only that JSON object.\n",
        trace.final_output.as_deref().unwrap_or("(no answer)")
    ));
    out
}

/// A registry holding only the grader and the `grade` tool: the spec's own tools are not the
/// grader's to call. Built from the spec file's text, so the grader is exactly as declared.
fn grading_registry(registry: &Registry, judge: &Judge) -> Result<Registry, String> {
    let text = std::fs::read_to_string(&registry.spec_path)
        .map_err(|e| format!("cannot read the spec for the judge: {e}"))?;
    let (root, _) = crate::specfile::yaml::parse_keeping_duplicates(&text)
        .map_err(|_| "the spec no longer parses".to_string())?;
    let model = root.to_json()["models"][&judge.model].clone();
    let spec = json!({
        "version": 1,
        "name": format!("{}_judge", registry.name),
        "system": SYSTEM,
        "tools": { GRADE_TOOL: {
            "description": "Records your grade of the assistant's answer: a score from 0 to 1 and the reasoning behind it.",
            "kind": "mock",
            "input": {
                "type": "object",
                "properties": {
                    "score": { "type": "number", "minimum": 0, "maximum": 1 },
                    "reasoning": { "type": "string" }
                },
                "required": ["score", "reasoning"]
            },
            "responses": [{ "result": "recorded" }]
        }},
        "models": { &judge.model: model },
        "default_model": &judge.model,
    });
    // JSON is YAML: the grader's spec compiles like any other, next to the real one.
    let source = crate::specfile::Source::new(
        format!("{} (judge)", registry.spec_path.display()),
        spec.to_string(),
    );
    let compiled = crate::compile::compile(&source, &registry.spec_path);
    compiled.registry.ok_or_else(|| {
        let errors: Vec<String> = compiled
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.message.clone())
            .collect();
        format!(
            "the judge `{}` cannot run: {}",
            judge.model,
            errors.join("; ")
        )
    })
}

/// Whether the grader calls a provider (and so needs a recording offline).
pub(crate) fn is_live(registry: &Registry, judge: &Judge) -> bool {
    registry
        .model(&judge.model)
        .is_some_and(|m| !matches!(m.kind, ModelKind::Scripted(_)))
}

/// Asks the grader. `Ok` with the grade and what the tape recorded (for the fixture); `Err`
/// with a reason the assertion fails with.
pub(crate) async fn grade(
    registry: &Registry,
    judge: &Judge,
    query: &str,
    trace: &Trace,
    route: Route,
    now_unix_ms: i64,
) -> Result<(Grade, Vec<Exchange>), String> {
    let grading = grading_registry(registry, judge)?;
    let text = prompt(judge, query, trace);
    let mut inputs = Inputs::quiet(&[], Clock::At(now_unix_ms));
    (inputs.secrets, inputs.network) = match route {
        Route::Live => (SecretSource::Environment, Network::Live),
        Route::Record => (
            SecretSource::Environment,
            Network::Record { previous: None },
        ),
        Route::Replay(exchanges) => (SecretSource::Placeholders, Network::Replay(exchanges)),
        Route::Offline => (SecretSource::Masked, Network::Offline),
    };
    inputs.model = Some(ModelChoice {
        name: Some(&judge.model),
        query: &text,
    });
    let mut setup = Setup::open(&grading, inputs)?;
    let Some(mut model) = setup.model.take() else {
        return Err("the judge has no model".into());
    };
    let messages = [Message::User {
        content: text.clone(),
    }];
    let input = DecideInput {
        registry: &grading,
        messages: &messages,
        query: &text,
        results: &[],
        step: 1,
    };
    let turn = model
        .client
        .decide(input, &setup.transport, &setup.events)
        .await
        .map_err(|e| format!("the judge `{}` failed: {}", judge.model, e.message))?;
    let refused = setup.tape.as_ref().map(|t| t.refused()).unwrap_or_default();
    if let Some((_, _, request)) = refused.first() {
        return Err(format!(
            "offline: the judge `{}` would reach the network ({request}); record the test's fixture with --record to grade offline",
            judge.model
        ));
    }
    let (score, reasoning) = read_grade(&turn.decision)?;
    let exchanges = setup
        .tape
        .as_ref()
        .map(|t| t.exchanges())
        .unwrap_or_default();
    Ok((
        Grade {
            model: judge.model.clone(),
            score,
            pass: judge.pass,
            reasoning,
        },
        exchanges,
    ))
}

/// `{"score": 0..1, "reasoning": "..."}` from a `grade` call or the answer text.
fn read_grade(decision: &Decision) -> Result<(f64, String), String> {
    let (value, raw) = match decision {
        Decision::ToolCalls { calls, text } => match calls.iter().find(|c| c.name == GRADE_TOOL) {
            Some(call) => match &call.arguments {
                Ok(v) => (Some(v.clone()), v.to_string()),
                Err(raw) => (None, raw.clone()),
            },
            None => (
                None,
                format!(
                    "{}{}",
                    text.clone().unwrap_or_default(),
                    calls
                        .iter()
                        .map(|c| format!(" [call {}]", c.name))
                        .collect::<String>()
                ),
            ),
        },
        Decision::Answer(text) | Decision::CutOff { text, .. } => (
            serde_json::from_str::<Value>(text.trim()).ok(),
            text.clone(),
        ),
        Decision::Malformed { raw, .. } => (None, raw.clone()),
    };
    let grade = value.as_ref().and_then(|v| {
        let score = v
            .get("score")?
            .as_f64()
            .filter(|s| (0.0..=1.0).contains(s))?;
        let reasoning = v.get("reasoning")?.as_str()?.to_string();
        Some((score, reasoning))
    });
    grade.ok_or_else(|| {
        format!(
            "the judge's reply is not a grade {{\"score\": 0..1, \"reasoning\": \"...\"}}: {raw}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grade_is_read_from_text_or_a_grade_call_and_anything_else_is_refused() {
        let text = Decision::Answer(r#" {"score": 0.8, "reasoning": "polite"} "#.into());
        assert_eq!(read_grade(&text), Ok((0.8, "polite".into())));
        let call = Decision::ToolCalls {
            text: None,
            calls: vec![crate::models::ProposedCall {
                id: "c".into(),
                name: GRADE_TOOL.into(),
                arguments: Ok(json!({"score": 0, "reasoning": "rude"})),
            }],
        };
        assert_eq!(read_grade(&call), Ok((0.0, "rude".into())));
        for bad in [
            "great answer!",
            r#"{"score": 7, "reasoning": "x"}"#,
            r#"{"score": 0.5}"#,
        ] {
            let err = read_grade(&Decision::Answer(bad.into()))
                .err()
                .unwrap_or_default();
            assert!(err.ends_with(bad), "{err}");
        }
    }
}
