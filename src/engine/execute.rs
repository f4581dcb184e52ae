//! Running one admitted call: its declared fault, its timeout, and the observation the model
//! sees.

use super::masking::truncate_observation;
use super::{Engine, RunOptions, State, Stop, Timing};
use crate::models::{Image, Message, ProposedCall};

/// What the model is told of an executed call: a success's text and images, or the message
/// that reports its failure.
pub(super) type Observed = Result<(String, Vec<Image>), Message>;
use crate::registry::{Fault, Tool};
use crate::templates::Shared;
use crate::tools::{self, ErrorKind, Output, ToolError};
use crate::trace::{millis, now_rfc3339, CallStatus, ErrorInfo, StopReason, ToolResultEntry};
use serde_json::{json, Value};
use std::time::Instant;

impl<'a> Engine<'a> {
    /// One admitted call, with its fault applied and its timeout enforced.
    pub(super) async fn execute_one(
        &self,
        call: &ProposedCall,
        tool: &Tool,
        args: &Value,
        fault: Option<Fault>,
        opts: &RunOptions<'_>,
    ) -> (Result<Output, ToolError>, Timing) {
        self.events.emit_with("tool_started", || {
            served(
                json!({ "id": call.id, "name": tool.name, "arguments": args }),
                opts.session,
            )
        });
        // A live served call's record is dropped once its client is answered: only a recorded
        // (or replayed) session's is kept, so only such a call is stamped.
        let kept = opts.session.is_none()
            || self.transport.recorder().is_some()
            || !self.transport.may_go_live();
        let started_at = kept.then(now_rfc3339);
        let started = Instant::now();
        let env = self.tool_env(opts, &call.id);
        let delay = match &fault {
            Some(Fault::Delay(d)) => Some(*d),
            _ => None,
        };
        let result = match fault {
            Some(f) if delay.is_none() => apply_fault(&f, tool).await,
            _ => {
                let run = async {
                    if let Some(d) = delay {
                        tokio::time::sleep(d).await;
                    }
                    tools::execute(tool, args, &env).await
                };
                match tokio::time::timeout(tool.timeout, run).await {
                    Ok(r) => r,
                    Err(_) => Err(ToolError::new(
                        ErrorKind::Timeout,
                        format!("`{}` did not finish within {:?}", tool.name, tool.timeout),
                    )),
                }
            }
        };
        let timing = Timing {
            started_at,
            elapsed: started.elapsed(),
        };
        (result, timing)
    }

    /// The message the model sees of a call [`Engine::record`] recorded.
    pub(super) fn message(call: &ProposedCall, tool: &Tool, observed: Observed) -> Message {
        match observed {
            Ok((content, images)) => Message::Tool {
                tool_call_id: call.id.clone(),
                name: tool.name.clone(),
                content,
                is_error: false,
                images,
            },
            Err(message) => message,
        }
    }

    /// Records an executed call's outcome: a success's text and images (a served call's client
    /// reads only the text; a run's model reads [`Engine::message`]), or a failure's message.
    /// An error repeated too often ends the run.
    pub(super) fn record(
        &self,
        st: &mut State,
        call: &ProposedCall,
        tool: &Tool,
        args: Value,
        result: Result<Output, ToolError>,
        timing: Timing,
    ) -> (Observed, Option<Stop>) {
        st.tool_call_count += 1;
        let duration_ms = millis(timing.elapsed);
        let (observed, stop) = match result {
            Ok(output) => (
                Ok(self.observe_success(st, call, tool, args, output, duration_ms)),
                None,
            ),
            Err(err) => {
                let (message, stop) = self.observe_failure(st, call, tool, args, err, duration_ms);
                (Err(message), stop)
            }
        };
        if let Some(entry) = st.tool_results.last_mut() {
            entry.started_at = timing.started_at;
        }
        (observed, stop)
    }

    pub(super) fn observe_success(
        &self,
        st: &mut State,
        call: &ProposedCall,
        tool: &Tool,
        args: Value,
        output: Output,
        duration_ms: f64,
    ) -> (String, Vec<Image>) {
        // Masked once, as a value; the model's text is made from the masked value, so it is
        // cut only after masking.
        let Output {
            mut value,
            mut http,
            mut mcp,
            images,
        } = output;
        self.redactor.value(&mut value);
        if let Some(m) = &mut mcp {
            self.redactor.value(m);
        }
        if let Some(h) = &mut http {
            self.redactor.mask_in_place(&mut h.url);
        }
        // Compact JSON as `to_string` writes it, straight into bytes (not through `fmt`).
        let text = match &value {
            Value::String(s) => s.clone(),
            other => serde_json::to_string(other).unwrap_or_default(),
        };
        let (observation, truncated) = truncate_observation(
            &self.redactor,
            text,
            self.registry.limits.max_tool_output_chars,
        );
        let recorded = if truncated {
            Value::String(observation.clone())
        } else {
            value
        };
        self.events.emit_with("tool_finished", || {
            let mut event = json!({ "id": call.id, "name": tool.name, "status": CallStatus::Ok, "duration_ms": duration_ms, "truncated": truncated });
            if let Some(h) = &http {
                event["http"] = json!(h);
            }
            served(event, st.served_as.as_deref())
        });
        if st.templates_read_results {
            // Converted for templates once, with the result borrowed: no JSON copy of it.
            let mut head = json!({ "id": call.id, "name": tool.name, "arguments": args, "status": CallStatus::Ok });
            if let Some(m) = &mcp {
                head["mcp"] = m.clone();
            }
            if let Value::Object(head) = head {
                st.results
                    .push(Shared::extended(&head, "result", &recorded));
            }
        }
        st.tool_results.push(ToolResultEntry {
            id: call.id.clone(),
            name: tool.name.clone(),
            arguments: args,
            result: Some(recorded),
            error: None,
            status: CallStatus::Ok,
            truncated,
            http,
            mcp,
            started_at: None,
            duration_ms,
        });
        (observation, images)
    }

    pub(super) fn observe_failure(
        &self,
        st: &mut State,
        call: &ProposedCall,
        tool: &Tool,
        args: Value,
        mut err: ToolError,
        duration_ms: f64,
    ) -> (Message, Option<Stop>) {
        err.message = self.redactor.str(&err.message);
        if let Some(d) = &mut err.details {
            self.redactor.value(d);
        }
        // An HTTP tool that got an error status still made its exchange: the trace (and the
        // CLIENT span made from it) shows it as it shows a success's.
        let http = err
            .details
            .as_ref()
            .filter(|_| matches!(tool.kind, crate::registry::ToolKind::Http(_)))
            .and_then(crate::tools::HttpCall::answered_with_error);
        self.events.emit_with("tool_finished", || {
            let mut event = json!({ "id": call.id, "name": tool.name, "status": CallStatus::Error, "kind": err.kind, "duration_ms": duration_ms });
            if let Some(h) = &http {
                event["http"] = json!(h);
            }
            served(event, st.served_as.as_deref())
        });
        let key = format!("{} {} {}", tool.name, err.kind.as_str(), err.message);
        let repeats = st.error_repeats.entry(key).or_default();
        *repeats += 1;
        let stop = (*repeats >= self.registry.policy.max_repeated_errors).then(|| {
            Stop::new(
                StopReason::RepeatedErrors,
                format!(
                    "`{}` failed {} times with the same error: {}",
                    tool.name, repeats, err.message
                ),
            )
        });
        st.tool_results.push(ToolResultEntry {
            id: call.id.clone(),
            name: tool.name.clone(),
            arguments: args.clone(),
            result: None,
            error: Some(ErrorInfo {
                kind: err.kind,
                message: err.message.clone(),
            }),
            status: CallStatus::Error,
            truncated: false,
            http,
            mcp: None,
            started_at: None,
            duration_ms,
        });
        (self.reject(st, &call.id, &tool.name, &args, err), stop)
    }

    /// Spec-declared faults, counted per tool so `fail_first: 2` fails exactly the first two calls.
    pub(super) fn draw_fault(
        &self,
        st: &mut State,
        tool: &Tool,
        opts: &RunOptions<'_>,
    ) -> Option<Fault> {
        // A test's own faults replace the tool's, so one spec can exercise many failure paths.
        let faults = opts
            .faults
            .iter()
            .find(|(name, _)| *name == tool.name)
            .map(|(_, f)| f.as_slice())
            .unwrap_or(&tool.faults);
        if faults.is_empty() {
            return None;
        }
        let n = st.fault_counts.entry(tool.name.clone()).or_default();
        *n += 1;
        let call_number = *n;
        faults.iter().find_map(|f| match f {
            Fault::FailFirst { n, .. } if call_number <= *n => Some(f.clone()),
            Fault::FailFirst { .. } => None,
            other => Some(other.clone()),
        })
    }
}

/// A tool event of a served call names its session: each session counts its own call ids, so
/// `call_1` alone is ambiguous once two clients are served. A run's events stay as they are.
fn served(mut event: Value, session: Option<&str>) -> Value {
    if let Some(session) = session {
        event["session"] = json!(session);
    }
    event
}

pub(super) async fn apply_fault(fault: &Fault, tool: &Tool) -> Result<Output, ToolError> {
    match fault {
        Fault::FailFirst { kind, message, .. } => Err(ToolError::new(*kind, message.clone())),
        Fault::Timeout => Err(ToolError::new(
            ErrorKind::Timeout,
            format!(
                "`{}` did not finish within {:?} (injected fault)",
                tool.name, tool.timeout
            ),
        )),
        Fault::HttpStatus(status) => Err(ToolError::new(
            ErrorKind::HttpStatus,
            format!("the server answered HTTP {status} (injected fault)"),
        )
        .with_details(json!({ "status": status, "injected": true }))),
        Fault::OversizedOutput(n) => Ok(Value::String("x".repeat(*n)).into()),
        // Handled where the call runs, so the tool's own timeout applies to the wait.
        Fault::Delay(_) => Err(ToolError::new(
            ErrorKind::ExecutionError,
            "delay fault applied out of place",
        )),
    }
}
