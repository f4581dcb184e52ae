//! The trace: one JSON document per run, the record CI compares byte for byte (durations aside).

use crate::models::{Message, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(crate) use crate::vocab::{CallStatus, ErrorKind, Status, StopReason};

pub(crate) const FORMAT_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SpecRef {
    pub(crate) name: String,
    pub(crate) sha256: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ErrorInfo {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ToolResultEntry {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<ErrorInfo>,
    pub(crate) status: CallStatus,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) truncated: bool,
    /// An HTTP tool's request and answer: method, URL (secrets masked) and status. Absent in
    /// fixtures recorded before it existed; replay then does not compare it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) http: Option<crate::tools::HttpCall>,
    /// An MCP tool's content items and `structuredContent` as the server sent them (binary
    /// data masked and capped), when the result was more than text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mcp: Option<Value>,
    /// When the call started (UTC, RFC 3339, milliseconds); absent in older recordings and for
    /// calls rejected before they ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) started_at: Option<String>,
    pub(crate) duration_ms: f64,
}

/// One request to the model: when, how long, and how it ended. Timing, like durations: replay
/// does not compare it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ModelCall {
    pub(crate) step: u32,
    /// `openai`, `anthropic` or `scripted`.
    pub(crate) provider: String,
    /// The model the request asked for (a scripted model's name).
    pub(crate) model: String,
    pub(crate) started_at: String,
    pub(crate) duration_ms: f64,
    /// `stop`, `tool_calls`, `length` (cut off) or `malformed`; absent when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<Usage>,
    /// The model error, when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

impl ModelCall {
    pub(crate) fn new(step: u32, provider: &str, model: &str, started_at: String) -> ModelCall {
        ModelCall {
            step,
            provider: provider.to_string(),
            model: model.to_string(),
            started_at,
            duration_ms: 0.0,
            finish_reason: None,
            usage: None,
            error: None,
        }
    }

    pub(crate) fn finish(
        &mut self,
        outcome: &Result<crate::models::ModelTurn, crate::models::ModelError>,
    ) {
        use crate::models::Decision;
        match outcome {
            Ok(turn) => {
                self.usage = turn.usage;
                self.finish_reason = Some(
                    match turn.decision {
                        Decision::Answer(_) => "stop",
                        Decision::ToolCalls { .. } => "tool_calls",
                        Decision::CutOff { .. } => "length",
                        Decision::Malformed { .. } => "malformed",
                    }
                    .to_string(),
                );
            }
            Err(e) => self.error = Some(e.message.clone()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolErrorEntry {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) details: Option<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct PendingCall {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: Value,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct UsageTotals {
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) total_tokens: u64,
    /// One entry per model call, in order (`null` where the provider reported none).
    pub(crate) per_step: Vec<Option<Usage>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub(crate) format_version: u32,
    pub(crate) status: Status,
    pub(crate) stop_reason: StopReason,
    pub(crate) final_output: Option<String>,
    pub(crate) query: String,
    pub(crate) model: String,
    pub(crate) spec: SpecRef,
    pub(crate) tool_results: Vec<ToolResultEntry>,
    pub tool_errors: Vec<ToolErrorEntry>,
    pub tool_call_count: u32,
    pub(crate) steps: u32,
    pub(crate) messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pending_tool_call: Option<PendingCall>,
    /// Why a run failed or stopped, for people (the model error, the limit that was hit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<UsageTotals>,
    /// Every request to the model, with its start time (absent in older recordings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) model_calls: Vec<ModelCall>,
    /// When the run started (UTC, RFC 3339, milliseconds); absent in older recordings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) started_at: Option<String>,
    pub(crate) duration_ms: f64,
}

impl Trace {
    /// The JSON a user sees: secrets masked, keys in a stable order.
    pub(crate) fn to_json(&self, redactor: &crate::redact::Redactor) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        redactor.value(&mut v);
        v
    }
}

/// Durations and start times vary between runs; everything else in a trace must not. Used by
/// replay and tests. `model_calls` is timing only (what each call decided is in `messages`).
pub(crate) fn without_durations(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| {
                    !(k.ends_with("duration_ms")
                        || matches!(k.as_str(), "elapsed_ms" | "started_at" | "model_calls"))
                })
                .map(|(k, v)| (k.clone(), without_durations(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_durations).collect()),
        other => other.clone(),
    }
}

/// Now, as traces record start times: UTC, RFC 3339 with milliseconds.
pub(crate) fn now_rfc3339() -> String {
    rfc3339_ms(jiff::Timestamp::now())
}

pub(crate) fn rfc3339_ms(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

pub(crate) fn millis(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}
