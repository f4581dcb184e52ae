//! An attempt as the trace of its run records it: the calls in the model's order, each joined
//! with what became of it.

use super::*;
use crate::models::Message;
use crate::trace::Trace;
use serde_json::Value;

/// One user turn of a conversation's attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct AttemptTurn {
    /// 1-based.
    pub(crate) turn: u32,
    pub(crate) query: String,
    pub(crate) status: Status,
    pub(crate) stop_reason: StopReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) answer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// The tools the turn ran, in order.
    pub(crate) tool_calls: Vec<String>,
    pub(crate) steps: u32,
    /// Whether the turn's `expect` held; absent for a turn not checked (one after the turn
    /// that failed, or in an attempt that could not run to the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) outcome: Option<Outcome>,
    /// Each budget of the turn's own `expect` and what the turn used of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) budgets: Vec<Budget>,
}

impl AttemptTurn {
    fn of((i, t): (usize, &crate::trace::TurnTrace)) -> AttemptTurn {
        AttemptTurn {
            turn: i as u32 + 1,
            query: t.query.clone(),
            status: t.status,
            stop_reason: t.stop_reason,
            answer: t.final_output.clone(),
            error: t.error.clone(),
            tool_calls: t.tool_results.iter().map(|r| r.name.clone()).collect(),
            steps: t.steps,
            outcome: None,
            budgets: Vec::new(),
        }
    }
}

impl Attempt {
    /// The record of one attempt, from the run's trace and the verdict on it. The runner passes
    /// the price of the model that ran (from [`ModelInfo`]) so cost is computed in one place.
    pub(crate) fn from_trace(
        attempt: u32,
        source: Source,
        trace: &Trace,
        failures: Vec<Failure>,
        price: Option<&PriceInfo>,
    ) -> Attempt {
        let usage = trace.usage.as_ref().map(|u| TokenUsage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            total_tokens: u.total_tokens,
            cached_input_tokens: u.cached_input_tokens,
            reasoning_tokens: u.reasoning_tokens,
        });
        let cost_usd = match (&usage, price) {
            (Some(u), Some(p)) => Some(cost(u, p)),
            _ => None,
        };
        Attempt {
            attempt,
            outcome: if failures.is_empty() {
                Outcome::Passed
            } else {
                Outcome::Failed
            },
            source,
            model: Some(trace.model.clone()),
            status: Some(trace.status),
            stop_reason: Some(trace.stop_reason),
            error: trace.error.clone(),
            answer: trace.final_output.clone(),
            tool_calls: tool_calls(trace),
            pending_tool_call: trace.pending_tool_call.as_ref().map(|p| ToolCall {
                id: p.id.clone(),
                name: p.name.clone(),
                arguments: p.arguments.clone(),
                step: trace.steps,
                status: CallState::Pending,
                result: None,
                error: None,
                started_at: None,
                duration_ms: None,
                http: None,
            }),
            steps: trace.steps,
            usage,
            cost_usd,
            model_calls: trace.model_calls.clone(),
            started_at: trace.started_at.clone(),
            duration_ms: trace.duration_ms,
            judge: None,
            budgets: Vec::new(),
            turns: trace
                .turns
                .iter()
                .enumerate()
                .map(AttemptTurn::of)
                .collect(),
            failures,
        }
    }

    /// An attempt that could not run at all (its fixture is missing or unreadable, ...).
    pub(crate) fn without_trace(
        attempt: u32,
        source: Source,
        failure: Failure,
        duration_ms: f64,
    ) -> Attempt {
        Attempt {
            attempt,
            outcome: Outcome::Failed,
            source,
            model: None,
            status: None,
            stop_reason: None,
            error: None,
            answer: None,
            tool_calls: Vec::new(),
            pending_tool_call: None,
            steps: 0,
            usage: None,
            cost_usd: None,
            model_calls: Vec::new(),
            started_at: None,
            duration_ms,
            judge: None,
            budgets: Vec::new(),
            turns: Vec::new(),
            failures: vec![failure],
        }
    }
}

/// The calls in the order the model proposed them, joined with what became of each: executed
/// calls from `tool_results`, rejected ones from `tool_errors`.
fn tool_calls(trace: &Trace) -> Vec<ToolCall> {
    let mut out: Vec<ToolCall> = Vec::new();
    let mut step = 0;
    for m in &trace.messages {
        let Message::Assistant { tool_calls, .. } = m else {
            continue;
        };
        step += 1;
        for call in tool_calls {
            if let Some(call) = joined(trace, &call.id, &call.name, &call.arguments, step) {
                out.push(call);
            }
        }
    }
    // Anything the messages did not mention (a trace cut short) still belongs in the record.
    for r in &trace.tool_results {
        if !out.iter().any(|c| c.id == r.id) {
            if let Some(call) = joined(trace, &r.id, &r.name, &r.arguments, step.max(1)) {
                out.push(call);
            }
        }
    }
    out
}

fn joined(trace: &Trace, id: &str, name: &str, arguments: &Value, step: u32) -> Option<ToolCall> {
    if let Some(r) = trace.tool_results.iter().find(|r| r.id == id) {
        return Some(ToolCall {
            id: id.to_string(),
            name: r.name.clone(),
            arguments: r.arguments.clone(),
            step,
            status: r.status.into(),
            result: r.result.clone(),
            error: r.error.as_ref().map(|e| CallError {
                kind: e.kind,
                message: e.message.clone(),
            }),
            started_at: r.started_at.clone(),
            duration_ms: Some(r.duration_ms),
            http: r.http.clone(),
        });
    }
    if let Some(e) = trace.tool_errors.iter().find(|e| e.id == id) {
        return Some(ToolCall {
            id: id.to_string(),
            name: name.to_string(),
            arguments: arguments.clone(),
            step,
            status: CallState::Error,
            result: None,
            error: Some(CallError {
                kind: e.kind,
                message: e.message.clone(),
            }),
            started_at: None,
            duration_ms: None,
            http: None,
        });
    }
    // Proposed but never run: the run stopped first (confirmation, a limit). The pending call
    // is recorded on its own.
    if trace.pending_tool_call.as_ref().is_some_and(|p| p.id == id) {
        return None;
    }
    Some(ToolCall {
        id: id.to_string(),
        name: name.to_string(),
        arguments: arguments.clone(),
        step,
        status: CallState::NotRun,
        result: None,
        error: None,
        started_at: None,
        duration_ms: None,
        http: None,
    })
}
