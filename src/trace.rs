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
    /// The host and port of a live model's `base_url` (absent for scripted models and older
    /// recordings): the GenAI conventions' `server.address` / `server.port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server_port: Option<u16>,
    pub(crate) started_at: String,
    pub(crate) duration_ms: f64,
    /// `stop`, `tool_calls`, `length` (cut off) or `malformed`; absent when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) finish_reason: Option<String>,
    /// The model the provider says answered (absent for scripted models and older recordings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) response_model: Option<String>,
    /// Why the provider says it stopped, in its own words (OpenAI `finish_reason` per choice,
    /// Anthropic `stop_reason`); absent for scripted models and older recordings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) finish_reasons: Option<Vec<String>>,
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
            server_address: None,
            server_port: None,
            started_at,
            duration_ms: 0.0,
            finish_reason: None,
            response_model: None,
            finish_reasons: None,
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
                if let Some(r) = &turn.response {
                    self.response_model.clone_from(&r.model);
                    self.finish_reasons = Some(r.finish_reasons.clone()).filter(|f| !f.is_empty());
                }
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
    /// Of `input_tokens`, those served from the provider's prompt cache (absent when none).
    #[serde(default, skip_serializing_if = "crate::models::is_zero")]
    pub(crate) cached_input_tokens: u64,
    /// Of `output_tokens`, those the model spent reasoning (absent when none).
    #[serde(default, skip_serializing_if = "crate::models::is_zero")]
    pub(crate) reasoning_tokens: u64,
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
    /// A conversation's user turns, in order (absent for a single query): the top-level fields
    /// are the whole conversation's (its calls, counts, usage and messages) and its last turn's
    /// outcome (status, stop reason, answer); `query` is the first turn's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) turns: Vec<TurnTrace>,
}

/// One user turn of a conversation: what it asked and what came of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct TurnTrace {
    pub(crate) query: String,
    pub(crate) status: Status,
    pub(crate) stop_reason: StopReason,
    pub(crate) final_output: Option<String>,
    pub(crate) tool_results: Vec<ToolResultEntry>,
    pub(crate) tool_errors: Vec<ToolErrorEntry>,
    pub(crate) tool_call_count: u32,
    pub(crate) steps: u32,
    /// Where the turn's messages start in the conversation's `messages` (its user message).
    pub(crate) first_message: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pending_tool_call: Option<PendingCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<UsageTotals>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) started_at: Option<String>,
    pub(crate) duration_ms: f64,
}

impl TurnTrace {
    /// The turn as a trace of its own, outside its conversation (spec and model unknown).
    pub(crate) fn as_trace_alone(&self) -> Trace {
        let spec = SpecRef {
            name: String::new(),
            sha256: String::new(),
        };
        self.as_trace("", &spec)
    }

    /// The turn as a trace of its own (no messages), for what judges a trace: a turn's
    /// `expect`, its answer shown.
    pub(crate) fn as_trace(&self, model: &str, spec: &SpecRef) -> Trace {
        Trace {
            format_version: FORMAT_VERSION,
            status: self.status,
            stop_reason: self.stop_reason,
            final_output: self.final_output.clone(),
            query: self.query.clone(),
            model: model.to_string(),
            spec: spec.clone(),
            tool_results: self.tool_results.clone(),
            tool_errors: self.tool_errors.clone(),
            tool_call_count: self.tool_call_count,
            steps: self.steps,
            messages: Vec::new(),
            pending_tool_call: self.pending_tool_call.clone(),
            error: self.error.clone(),
            usage: self.usage.clone(),
            model_calls: Vec::new(),
            started_at: self.started_at.clone(),
            duration_ms: self.duration_ms,
            turns: Vec::new(),
        }
    }
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
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    rfc3339_ms(ms)
}

/// `2026-01-15T10:00:00.123Z`. Written out by hand: a run stamps every model and tool call,
/// and the general formatters cost 2,500–3,400 instructions a stamp (0.7–0.9% of a cold run).
pub(crate) fn rfc3339_ms(unix_ms: i64) -> String {
    let (days, ms_of_day) = (
        unix_ms.div_euclid(86_400_000),
        unix_ms.rem_euclid(86_400_000),
    );
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let secs = ms_of_day / 1000;
    let mut out = *b"0000-00-00T00:00:00.000Z";
    // Every field but the year is within its width already; a year is cut to four digits.
    let put = |out: &mut [u8; 24], at: usize, width: usize, value: i64| {
        let mut v = value as u32;
        for i in (at..at + width).rev() {
            out[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(&mut out, 0, 4, year.rem_euclid(10_000));
    put(&mut out, 5, 2, month);
    put(&mut out, 8, 2, day);
    put(&mut out, 11, 2, secs / 3600);
    put(&mut out, 14, 2, secs / 60 % 60);
    put(&mut out, 17, 2, secs % 60);
    put(&mut out, 20, 3, ms_of_day % 1000);
    // Digits and ASCII punctuation only: the check is the cheap all-ASCII one.
    String::from_utf8(out.to_vec()).unwrap_or_default()
}

pub(crate) fn millis(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

#[cfg(test)]
mod stamp_tests {
    #[test]
    fn stamps_are_rfc3339_utc_with_milliseconds() {
        for (ms, text) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_123, "2000-02-29T00:00:00.123Z"),
            (1_768_471_200_000, "2026-01-15T10:00:00.000Z"),
            (4_107_542_399_999, "2100-02-28T23:59:59.999Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
            (253_402_300_800_000, "0000-01-01T00:00:00.000Z"),
            (-62_167_219_200_001, "9999-12-31T23:59:59.999Z"),
        ] {
            assert_eq!(super::rfc3339_ms(ms), text);
        }
    }
}
