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
    pub(crate) duration_ms: f64,
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

/// Durations vary between runs; everything else in a trace must not. Used by replay and tests.
pub(crate) fn without_durations(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !(k.ends_with("duration_ms") || k.as_str() == "elapsed_ms"))
                .map(|(k, v)| (k.clone(), without_durations(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_durations).collect()),
        other => other.clone(),
    }
}

pub(crate) fn millis(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}
