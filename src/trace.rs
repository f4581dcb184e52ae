//! The trace: one JSON document per run, the record CI compares byte for byte (durations aside).

use crate::models::{Message, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::vocab::{CallStatus, ErrorKind, Status, StopReason};

pub const FORMAT_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpecRef {
    pub name: String,
    pub sha256: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResultEntry {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    pub status: CallStatus,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    pub duration_ms: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolErrorEntry {
    pub id: String,
    pub name: String,
    pub kind: ErrorKind,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// One entry per model call, in order (`null` where the provider reported none).
    pub per_step: Vec<Option<Usage>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub format_version: u32,
    pub status: Status,
    pub stop_reason: StopReason,
    pub final_output: Option<String>,
    pub query: String,
    pub model: String,
    pub spec: SpecRef,
    pub tool_results: Vec<ToolResultEntry>,
    pub tool_errors: Vec<ToolErrorEntry>,
    pub tool_call_count: u32,
    pub steps: u32,
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_tool_call: Option<PendingCall>,
    /// Why a run failed or stopped, for people (the model error, the limit that was hit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageTotals>,
    pub duration_ms: f64,
}

impl Trace {
    /// The JSON a user sees: secrets masked, keys in a stable order.
    pub fn to_json(&self, redactor: &crate::redact::Redactor) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        redactor.value(&mut v);
        v
    }
}

/// Durations vary between runs; everything else in a trace must not. Used by replay and tests.
pub fn without_durations(v: &Value) -> Value {
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

pub fn millis(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}
