//! The governed loop: prepare → decide → normalize → validate → confirm → execute → observe, until
//! an answer, a stop for a person, or a limit. Every stop has a `stop_reason`; a tool error is an
//! observation the model can recover from, never a crash.

use crate::events::Events;
use crate::models::{CallMessage, DecideInput, Decision, Message, ModelClient, ProposedCall};
use crate::net::Transport;
use crate::redact::{Redactor, Secrets};
use crate::registry::{Fault, Registry, Tool};
use crate::templates::Shared;
use crate::tools::{self, ErrorKind, Output, ToolEnv, ToolError};
use crate::trace::{
    millis, now_rfc3339, CallStatus, ErrorInfo, ModelCall, PendingCall, SpecRef, Status,
    StopReason, ToolErrorEntry, ToolResultEntry, Trace, UsageTotals,
};
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When an executed call started (wall clock, for the trace) and how long it took.
struct Timing {
    started_at: String,
    elapsed: Duration,
}

/// Asks a person whether a tool may run (a terminal prompt in `run`; never in tests).
pub(crate) type Confirmer = dyn Fn(&str, &Value) -> bool + Send + Sync;

pub struct RunOptions<'a> {
    pub query: &'a str,
    pub model_name: &'a str,
    pub approvals: BTreeSet<String>,
    pub confirmer: Option<&'a Confirmer>,
    pub now_unix_ms: i64,
    /// Faults injected by a test case, by tool name (replacing the tool's own).
    pub faults: Vec<(String, Vec<Fault>)>,
    /// Set by Ctrl-C / SIGTERM: the run stops and its trace is still written.
    pub interrupted: Option<Arc<AtomicBool>>,
}

/// One tool call outside a model loop (`toolrun call`, an MCP client's `tools/call`): no query,
/// no model, no person to ask; what may run without one and the built-ins' clock.
#[derive(Clone, Debug, Default)]
pub(crate) struct CallOptions {
    pub(crate) approvals: BTreeSet<String>,
    pub(crate) now_unix_ms: i64,
}

impl CallOptions {
    /// The turn handling is the loop's; outside a loop it has no query or model to report.
    fn as_run(&self) -> RunOptions<'static> {
        RunOptions {
            query: "",
            model_name: "",
            approvals: self.approvals.clone(),
            confirmer: None,
            now_unix_ms: self.now_unix_ms,
            faults: Vec::new(),
            interrupted: None,
        }
    }
}

struct Stop {
    reason: StopReason,
    error: Option<String>,
}

impl Stop {
    fn new(reason: StopReason, error: impl Into<Option<String>>) -> Stop {
        Stop {
            reason,
            error: error.into(),
        }
    }
}

/// Everything observed so far; survives a timeout or an interruption of the loop.
#[derive(Default)]
struct State {
    messages: Vec<Message>,
    tool_results: Vec<ToolResultEntry>,
    tool_errors: Vec<ToolErrorEntry>,
    /// Template context `results`: every call so far, executed or rejected; kept only for a
    /// model whose templates read it (`templates_read_results`).
    results: Vec<Shared>,
    templates_read_results: bool,
    tool_call_count: u32,
    steps: u32,
    next_call: u32,
    final_output: Option<String>,
    pending: Option<PendingCall>,
    usage: UsageTotals,
    any_usage: bool,
    model_calls: Vec<ModelCall>,
    identical: HashMap<String, u32>,
    per_tool: HashMap<String, u32>,
    executed_signatures: Vec<String>,
    error_repeats: HashMap<String, u32>,
    malformed_in_a_row: u32,
    fault_counts: HashMap<String, u32>,
}

enum Plan<'t> {
    Run { tool: &'t Tool, args: Value },
    Rejected(Message),
}

/// A turn's calls after admission, in the model's order, with the first rule that ends the run.
struct Turn<'t> {
    plans: Vec<(usize, Plan<'t>)>,
    stop: Option<Stop>,
    any_malformed: bool,
}

enum Admission<'t> {
    Run {
        tool: &'t Tool,
        args: Value,
        signature: String,
    },
    Reject {
        args: Value,
        error: ToolError,
        ends_run: Option<Stop>,
    },
}

/// What a single direct tool call produced. `result` is set when the tool ran (its `status`
/// says ok or error); `error` when it failed or was rejected; `pending` when it needs a person.
#[derive(Debug)]
pub(crate) struct CallOutcome {
    pub(crate) result: Option<ToolResultEntry>,
    pub(crate) error: Option<ToolErrorEntry>,
    pub(crate) pending: Option<PendingCall>,
}

/// Why a call may not run, and whether that also ends the run.
struct Refusal {
    error: ToolError,
    ends_run: Option<Stop>,
}

impl Refusal {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Refusal {
        Refusal {
            error: ToolError::new(kind, message),
            ends_run: None,
        }
    }
    fn ending(mut self, reason: StopReason, why: String) -> Refusal {
        self.ends_run = Some(Stop::new(reason, why));
        self
    }
}

pub struct Engine<'a> {
    pub registry: &'a Registry,
    pub transport: &'a Transport,
    pub events: &'a Events,
    pub secrets: &'a Secrets,
    pub redactor: Redactor,
}

fn canonical(v: &Value) -> String {
    // serde_json with preserve_order keeps insertion order; sort keys so {a,b} == {b,a}.
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut entries: Vec<_> = m.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sort(v)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

/// `/ticker: 5 is not of type "string"`, with a did-you-mean for unexpected properties.
pub(crate) fn validation_errors(tool: &Tool, args: &Value) -> Vec<String> {
    let validator = match tool.validator() {
        Ok(v) => v,
        Err(e) => {
            return vec![format!(
                "the input schema of `{}` does not compile: {e}",
                tool.name
            )]
        }
    };
    validator
        .iter_errors(args)
        .map(|err| {
            let path = err.instance_path().as_str().to_string();
            let mut msg = if path.is_empty() {
                err.to_string()
            } else {
                format!("{path}: {err}")
            };
            if let jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } =
                err.kind()
            {
                let schema_path = err.schema_path().as_str().to_string();
                let parent = schema_path.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
                let known: Vec<String> = tool
                    .input_schema()
                    .pointer(&format!("{parent}/properties"))
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                for u in unexpected {
                    if let Some(hint) =
                        crate::diag::did_you_mean(u, known.iter().map(String::as_str))
                    {
                        msg.push_str(&format!(" (`{u}`: {hint})"));
                    }
                }
            }
            msg
        })
        .collect()
}

/// Cuts masked text: a secret that begins just before the limit is masked, not left half there.
fn truncate_observation(redactor: &Redactor, text: &str, max_chars: usize) -> (String, bool) {
    match redactor.cut_masked(text, max_chars) {
        (kept, 0) => (kept, false),
        (kept, more) => (format!("{kept}…[truncated: {more} more characters]"), true),
    }
}

/// The loop's bookkeeping for calls that arrive one at a time from outside a model loop (an MCP
/// session): limits, loop detection and fault counts run per session, exactly as per run.
#[derive(Default)]
pub(crate) struct CallSession {
    st: State,
}

impl<'a> Engine<'a> {
    pub async fn run(&self, model: &mut ModelClient, opts: RunOptions<'_>) -> Trace {
        let started = Instant::now();
        let started_at = now_rfc3339();
        // Every response is masked as it arrives, before a tool, the model or a limit sees it.
        self.transport.mask_with(&self.redactor);
        let mut st = State {
            templates_read_results: matches!(model, ModelClient::Scripted(_)),
            ..State::default()
        };
        self.events.emit_with(
            "run_started",
            || json!({ "spec": self.registry.name, "query": opts.query, "model": opts.model_name }),
        );
        let stop = if opts.query.trim().is_empty() {
            Stop::new(
                StopReason::EmptyQuery,
                "the query is empty; pass a question with --query".to_string(),
            )
        } else {
            let deadline = tokio::time::sleep(self.registry.limits.run_timeout);
            let interrupted = async {
                match &opts.interrupted {
                    Some(flag) => loop {
                        if flag.load(Ordering::Relaxed) {
                            break;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    },
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                stop = self.run_loop(&mut st, model, &opts) => stop,
                _ = deadline => Stop::new(StopReason::RunTimeout, format!("the run took longer than run_timeout ({:?})", self.registry.limits.run_timeout)),
                _ = interrupted => Stop::new(StopReason::Interrupted, "the run was interrupted".to_string()),
            }
        };
        tools::mcp::end_all(&self.tool_env(&opts, "")).await;
        let trace = Trace {
            format_version: crate::trace::FORMAT_VERSION,
            status: stop.reason.status(),
            stop_reason: stop.reason,
            // A cut-off answer is kept for the person who reviews it; any other stop that is
            // not a success has no answer to show.
            final_output: if stop.reason.status() == Status::Ok
                || stop.reason == StopReason::MaxTokens
            {
                st.final_output
            } else {
                None
            },
            query: opts.query.to_string(),
            model: opts.model_name.to_string(),
            spec: SpecRef {
                name: self.registry.name.clone(),
                sha256: self.registry.spec_sha256.clone(),
            },
            tool_results: st.tool_results,
            tool_errors: st.tool_errors,
            tool_call_count: st.tool_call_count,
            steps: st.steps,
            messages: st.messages,
            pending_tool_call: st.pending,
            error: stop.error.map(|e| self.redactor.str(&e)),
            usage: if st.any_usage { Some(st.usage) } else { None },
            model_calls: st.model_calls,
            started_at: Some(started_at),
            duration_ms: millis(started.elapsed()),
        };
        // Masked once here, so every reader of the trace (reports, JUnit, results, test
        // verdicts) gets the masked text, not just `to_json`.
        let trace = self.masked(trace);
        self.events.emit_with("run_finished", || json!({ "status": trace.status, "stop_reason": trace.stop_reason, "steps": trace.steps, "tool_call_count": trace.tool_call_count, "duration_ms": trace.duration_ms }));
        trace
    }

    /// One tool call outside a loop (`toolrun call`, an MCP client): the same admission,
    /// confirmation, faults, timeout, masking and truncation as a call the model makes, because
    /// it goes through the same turn handling.
    pub(crate) async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        opts: &CallOptions,
    ) -> CallOutcome {
        // Arguments are checked against the schema the server lists, so it is listed first; a
        // failure to connect is reported by the call itself.
        let run = opts.as_run();
        let _ = tools::mcp::connect_tool(&self.tool_env(&run, ""), name).await;
        let outcome = self
            .call_in_session(&mut CallSession::default(), name, arguments, opts)
            .await;
        tools::mcp::end_all(&self.tool_env(&run, "")).await;
        outcome
    }

    /// Like [`Engine::call_tool`], counting limits and loops across the calls of one session
    /// (an MCP client's), as a run counts them across its turns.
    pub(crate) async fn call_in_session(
        &self,
        session: &mut CallSession,
        name: &str,
        arguments: Value,
        opts: &CallOptions,
    ) -> CallOutcome {
        let opts = &opts.as_run();
        self.transport.mask_with(&self.redactor);
        let st = &mut session.st;
        let call = ProposedCall {
            id: String::new(),
            name: name.to_string(),
            arguments: Ok(arguments),
        };
        // A stop would end a run; a session has none to end: the outcome says what happened.
        let _ = self.handle_calls(st, None, vec![call], opts).await;
        let error = st.tool_errors.pop().map(|mut e| {
            e.message = self.redactor.str(&e.message);
            e
        });
        let outcome = CallOutcome {
            result: st.tool_results.pop(),
            error,
            pending: st.pending.take(),
        };
        // A session can be long: keep only the counters admission reads, not the conversation.
        st.messages.clear();
        st.results.clear();
        st.tool_results.clear();
        st.tool_errors.clear();
        outcome
    }

    /// Masks what the loop has not masked yet. Tool results and the observations of successful
    /// calls were masked as they were made (they can be megabytes: not twice).
    fn masked(&self, mut t: Trace) -> Trace {
        let r = &self.redactor;
        if r.is_empty() {
            return t;
        }
        let text = |s: &mut String| {
            if let std::borrow::Cow::Owned(m) = r.mask(s) {
                *s = m;
            }
        };
        text(&mut t.query);
        t.final_output.iter_mut().for_each(text);
        t.error.iter_mut().for_each(text);
        for e in &mut t.tool_results {
            r.value(&mut e.arguments);
            if let Some(err) = &mut e.error {
                text(&mut err.message);
            }
        }
        for e in &mut t.tool_errors {
            text(&mut e.message);
            e.details.iter_mut().for_each(|d| r.value(d));
        }
        if let Some(p) = &mut t.pending_tool_call {
            r.value(&mut p.arguments);
        }
        for m in &mut t.messages {
            match m {
                Message::System { content } | Message::User { content } => text(content),
                Message::Assistant {
                    content,
                    tool_calls,
                } => {
                    content.iter_mut().for_each(text);
                    tool_calls
                        .iter_mut()
                        .for_each(|c| r.value(&mut c.arguments));
                }
                Message::Tool {
                    content, is_error, ..
                } if *is_error => text(content),
                Message::Tool { .. } => {}
            }
        }
        t
    }

    fn allowed(&self, name: &str) -> bool {
        let p = &self.registry.policy;
        !p.deny.contains(name) && p.allow.as_ref().is_none_or(|a| a.contains(name))
    }

    async fn run_loop(
        &self,
        st: &mut State,
        model: &mut ModelClient,
        opts: &RunOptions<'_>,
    ) -> Stop {
        if let Err(why) = self.connect_servers(opts).await {
            return Stop::new(StopReason::McpError, why);
        }
        if let Some(system) = &self.registry.system {
            st.messages.push(Message::System {
                content: system.clone(),
            });
        }
        st.messages.push(Message::User {
            content: opts.query.to_string(),
        });
        loop {
            if let Some(stop) = self.budget_spent(st) {
                return stop;
            }
            st.steps += 1;
            self.events.emit_with("model_request", || json!({ "step": st.steps, "model": opts.model_name, "messages": st.messages.len() }));
            let input = DecideInput {
                registry: self.registry,
                messages: &st.messages,
                query: opts.query,
                results: &st.results,
                step: st.steps,
            };
            let (provider, model_id) = model.describe();
            let mut timing = ModelCall::new(st.steps, provider, model_id, now_rfc3339());
            let asked = Instant::now();
            let decided = model.decide(input, self.transport, self.events).await;
            timing.duration_ms = millis(asked.elapsed());
            timing.finish(&decided);
            st.model_calls.push(timing);
            let turn = match decided {
                Ok(t) => t,
                Err(e) => {
                    self.events.emit_with(
                        "model_error",
                        || json!({ "step": st.steps, "message": e.message }),
                    );
                    return Stop::new(StopReason::ModelError, e.message);
                }
            };
            if let Some(u) = turn.usage {
                st.any_usage = true;
                st.usage.input_tokens += u.input_tokens;
                st.usage.output_tokens += u.output_tokens;
                st.usage.total_tokens += u.input_tokens + u.output_tokens;
            }
            st.usage.per_step.push(turn.usage);
            match turn.decision {
                Decision::Answer(text) => {
                    self.events.emit_with(
                        "model_response",
                        || json!({ "step": st.steps, "answer": text }),
                    );
                    st.messages.push(Message::Assistant {
                        content: Some(text.clone()),
                        tool_calls: Vec::new(),
                    });
                    st.final_output = Some(text);
                    return Stop::new(StopReason::Answer, None);
                }
                Decision::CutOff { text, reason } => {
                    self.events.emit_with(
                        "model_response",
                        || json!({ "step": st.steps, "answer": text, "cut_off": reason }),
                    );
                    st.messages.push(Message::Assistant {
                        content: Some(text.clone()),
                        tool_calls: Vec::new(),
                    });
                    st.final_output = Some(text).filter(|t| !t.trim().is_empty());
                    return Stop::new(StopReason::MaxTokens, reason);
                }
                Decision::Malformed { raw, reason } => {
                    if let Some(stop) = self.malformed(st, raw, reason) {
                        return stop;
                    }
                }
                Decision::ToolCalls { text, calls } => {
                    let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
                    self.events.emit_with(
                        "model_response",
                        || json!({ "step": st.steps, "tool_calls": names }),
                    );
                    if let Some(stop) = self.handle_calls(st, text, calls, opts).await {
                        return stop;
                    }
                }
            }
        }
    }

    /// `max_steps` and `max_tokens_total`, checked before each model call.
    fn budget_spent(&self, st: &State) -> Option<Stop> {
        let limits = &self.registry.limits;
        if st.steps >= limits.max_steps {
            return Some(Stop::new(
                StopReason::MaxSteps,
                format!("the model made {} calls (max_steps) without a final answer; {} tool result(s) were gathered", st.steps, st.tool_results.len()),
            ));
        }
        let max = limits.max_tokens_total?;
        (st.usage.total_tokens >= max).then(|| {
            Stop::new(
                StopReason::MaxTokensTotal,
                format!(
                    "the run used {} tokens (max_tokens_total is {max})",
                    st.usage.total_tokens
                ),
            )
        })
    }

    /// A reply that is neither an answer nor usable tool calls: recorded as an error and the
    /// model asked again, unless it is the second in a row.
    fn malformed(&self, st: &mut State, raw: String, reason: String) -> Option<Stop> {
        self.events.emit_with(
            "model_response",
            || json!({ "step": st.steps, "malformed": reason, "raw": raw }),
        );
        st.messages.push(Message::Assistant {
            content: Some(raw),
            tool_calls: Vec::new(),
        });
        st.tool_errors.push(ToolErrorEntry {
            id: format!("step_{}", st.steps),
            name: String::new(),
            kind: ErrorKind::MalformedDecision,
            message: reason.clone(),
            details: None,
        });
        st.malformed_in_a_row += 1;
        if st.malformed_in_a_row >= 2 {
            return Some(Stop::new(
                StopReason::MalformedDecision,
                format!("two malformed decisions in a row; the last: {reason}"),
            ));
        }
        st.messages.push(Message::User {
            content: format!("Your last reply was not usable: {reason}. Reply with a tool call or with your final answer."),
        });
        None
    }

    fn reject(
        &self,
        st: &mut State,
        id: &str,
        name: &str,
        args: &Value,
        err: ToolError,
    ) -> Message {
        let info = ErrorInfo {
            kind: err.kind,
            message: err.message.clone(),
        };
        st.tool_errors.push(ToolErrorEntry {
            id: id.into(),
            name: name.into(),
            kind: info.kind,
            message: info.message.clone(),
            details: err.details,
        });
        if st.templates_read_results {
            st.results.push(Shared::new(
                &json!({ "id": id, "name": name, "arguments": args, "status": CallStatus::Error, "error": info }),
            ));
        }
        Message::Tool {
            tool_call_id: id.into(),
            name: name.into(),
            content: json!({ "error": { "kind": info.kind, "message": info.message } }).to_string(),
            is_error: true,
            images: Vec::new(),
        }
    }

    /// One turn of tool calls: admit them all, run the admitted ones, observe every outcome in
    /// the model's order. Returns a stop when the turn ends the run.
    async fn handle_calls(
        &self,
        st: &mut State,
        text: Option<String>,
        calls: Vec<ProposedCall>,
        opts: &RunOptions<'_>,
    ) -> Option<Stop> {
        let calls = self.record_turn(st, text, calls);
        // Rejections enter `results` while planning, executions after running: remember where
        // this turn starts so its entries can be put back in the model's order.
        let results_start = st.results.len();
        let mut turn = match self.plan_turn(st, &calls, opts) {
            Ok(turn) => turn,
            Err(confirmation) => return Some(confirmation),
        };
        let outcomes = self.execute_plans(st, &calls, &turn.plans, opts).await;
        let mut tool_messages = Vec::with_capacity(turn.plans.len());
        for ((i, plan), outcome) in turn.plans.into_iter().zip(outcomes) {
            match (plan, outcome) {
                (Plan::Rejected(msg), _) => tool_messages.push(msg),
                (Plan::Run { tool, args }, Some((result, timing))) => {
                    let call = &calls[i];
                    let (msg, stop) = self.observe(st, call, tool, args, result, timing);
                    tool_messages.push(msg);
                    if turn.stop.is_none() {
                        turn.stop = stop;
                    }
                }
                (Plan::Run { .. }, None) => {}
            }
        }
        st.messages.extend(tool_messages);
        let position = |entry: &Shared| {
            let id = entry.attr("id").unwrap_or_default();
            calls.iter().position(|c| c.id == id).unwrap_or(usize::MAX)
        };
        st.results[results_start..].sort_by_cached_key(position);
        let malformed = self.count_malformed(st, turn.any_malformed);
        // The model would go on calling tools as they no longer are.
        let changed = tools::mcp::changed_tools(&self.tool_env(opts, ""))
            .map(|why| Stop::new(StopReason::McpError, why));
        changed.or(turn.stop).or(malformed)
    }

    /// Gives every call an id and records the assistant's turn as the model made it.
    fn record_turn(
        &self,
        st: &mut State,
        text: Option<String>,
        calls: Vec<ProposedCall>,
    ) -> Vec<ProposedCall> {
        let calls: Vec<ProposedCall> = calls
            .into_iter()
            .map(|mut c| {
                st.next_call += 1;
                if c.id.is_empty() {
                    c.id = format!("call_{}", st.next_call);
                }
                c
            })
            .collect();
        st.messages.push(Message::Assistant {
            content: text,
            tool_calls: calls
                .iter()
                .map(|c| CallMessage {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: match &c.arguments {
                        Ok(v) => v.clone(),
                        Err(raw) => Value::String(raw.clone()),
                    },
                })
                .collect(),
        });
        calls
    }

    /// Validates every call first: a turn either runs its valid calls or stops for a person
    /// before any of them has side effects (the `Err` is that stop).
    fn plan_turn<'c>(
        &self,
        st: &mut State,
        calls: &'c [ProposedCall],
        opts: &RunOptions<'_>,
    ) -> Result<Turn<'a>, Stop> {
        let mut turn = Turn {
            plans: Vec::new(),
            stop: None,
            any_malformed: false,
        };
        let mut planned_runs = 0u32;
        for (i, call) in calls.iter().enumerate() {
            match self.admit(st, call, planned_runs) {
                Admission::Run {
                    tool,
                    args,
                    signature,
                } => {
                    let hint = tool.confirm_hint();
                    if (tool.confirm || hint.is_some()) && !opts.approvals.contains(&call.name) {
                        self.confirm(st, call, &args, opts, hint)?;
                    }
                    *st.identical.entry(signature.clone()).or_default() += 1;
                    *st.per_tool.entry(call.name.clone()).or_default() += 1;
                    st.executed_signatures.push(signature);
                    planned_runs += 1;
                    turn.plans.push((i, Plan::Run { tool, args }));
                }
                Admission::Reject {
                    args,
                    error,
                    ends_run,
                } => {
                    turn.any_malformed |= error.kind == ErrorKind::MalformedDecision;
                    if let Some(s) = ends_run {
                        turn.stop.get_or_insert(s);
                    }
                    let msg = self.reject(st, &call.id, &call.name, &args, error);
                    turn.plans.push((i, Plan::Rejected(msg)));
                }
            }
        }
        Ok(turn)
    }

    /// Asks the confirmer, if there is one; without a yes the run stops with the call pending.
    fn confirm(
        &self,
        st: &mut State,
        call: &ProposedCall,
        args: &Value,
        opts: &RunOptions<'_>,
        hint: Option<&str>,
    ) -> Result<(), Stop> {
        if opts.confirmer.is_some_and(|ask| ask(&call.name, args)) {
            return Ok(());
        }
        st.pending = Some(PendingCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: args.clone(),
        });
        let name = &call.name;
        let why = match hint {
            Some(h) => format!(
                " ({h}; declare `side_effects: false` for it in the spec if you trust that server)"
            ),
            None => String::new(),
        };
        Err(Stop::new(
            StopReason::NeedsConfirmation,
            format!(
                "`{name}` needs confirmation before it runs{why}; re-run with --approve {name}"
            ),
        ))
    }

    /// Runs the admitted calls concurrently, bounded, and returns their outcomes in the model's
    /// order (`None` for a rejected call).
    async fn execute_plans(
        &self,
        st: &mut State,
        calls: &[ProposedCall],
        plans: &[(usize, Plan<'a>)],
        opts: &RunOptions<'_>,
    ) -> Vec<Option<(Result<Output, ToolError>, Timing)>> {
        // Faults are drawn in order before anything runs, so `fail_first` counts calls as made.
        let fault_draws: Vec<Option<Fault>> = plans
            .iter()
            .map(|(_, plan)| match plan {
                Plan::Run { tool, .. } => self.draw_fault(st, tool, opts),
                Plan::Rejected(_) => None,
            })
            .collect();
        // A loop rather than `map(closure)`: a closure here makes the future's `Send` proof
        // higher-ranked, which rustc cannot show (rust-lang/rust#102211), and `serve` needs it.
        let mut futures = Vec::with_capacity(plans.len());
        for ((i, plan), fault) in plans.iter().zip(fault_draws) {
            futures.push(async move {
                match plan {
                    Plan::Rejected(_) => None,
                    Plan::Run { tool, args } => {
                        Some(self.execute_one(&calls[*i], tool, args, fault, opts).await)
                    }
                }
            });
        }
        let parallel = self.registry.limits.max_parallel_tools.max(1) as usize;
        futures_util::stream::iter(futures)
            .buffered(parallel)
            .collect()
            .await
    }

    /// Lists the tools of every MCP server the run may use, before the model is called: the
    /// model must be offered the tools the servers really have, as the spec describes them.
    async fn connect_servers(&self, opts: &RunOptions<'_>) -> Result<(), String> {
        tools::mcp::connect_all(&self.tool_env(opts, "")).await
    }

    /// What a tool may touch during this run.
    fn tool_env<'e>(&'e self, opts: &RunOptions<'e>, call_id: &'e str) -> ToolEnv<'e> {
        ToolEnv {
            registry: self.registry,
            secrets: self.secrets,
            transport: self.transport,
            events: self.events,
            query: opts.query,
            now_unix_ms: opts.now_unix_ms,
            call_id,
        }
    }

    /// One admitted call, with its fault applied and its timeout enforced.
    async fn execute_one(
        &self,
        call: &ProposedCall,
        tool: &Tool,
        args: &Value,
        fault: Option<Fault>,
        opts: &RunOptions<'_>,
    ) -> (Result<Output, ToolError>, Timing) {
        self.events.emit_with(
            "tool_started",
            || json!({ "id": call.id, "name": tool.name, "arguments": args }),
        );
        let started_at = now_rfc3339();
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

    /// Records an executed call's outcome; the message is what the model sees. An error repeated
    /// too often ends the run.
    fn observe(
        &self,
        st: &mut State,
        call: &ProposedCall,
        tool: &Tool,
        args: Value,
        result: Result<Output, ToolError>,
        timing: Timing,
    ) -> (Message, Option<Stop>) {
        st.tool_call_count += 1;
        let duration_ms = millis(timing.elapsed);
        let (message, stop) = match result {
            Ok(output) => (
                self.observe_success(st, call, tool, args, output, duration_ms),
                None,
            ),
            Err(err) => self.observe_failure(st, call, tool, args, err, duration_ms),
        };
        if let Some(entry) = st.tool_results.last_mut() {
            entry.started_at = Some(timing.started_at);
        }
        (message, stop)
    }

    fn observe_success(
        &self,
        st: &mut State,
        call: &ProposedCall,
        tool: &Tool,
        args: Value,
        output: Output,
        duration_ms: f64,
    ) -> Message {
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
            h.url = self.redactor.str(&h.url);
        }
        let text = match &value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let (observation, truncated) = truncate_observation(
            &self.redactor,
            &text,
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
            event
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
        Message::Tool {
            tool_call_id: call.id.clone(),
            name: tool.name.clone(),
            content: observation,
            is_error: false,
            images,
        }
    }

    fn observe_failure(
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
        self.events.emit_with("tool_finished", || json!({ "id": call.id, "name": tool.name, "status": CallStatus::Error, "kind": err.kind, "duration_ms": duration_ms }));
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
            http: None,
            mcp: None,
            started_at: None,
            duration_ms,
        });
        (self.reject(st, &call.id, &tool.name, &args, err), stop)
    }

    /// Two turns in a row with arguments that are not JSON end the run.
    fn count_malformed(&self, st: &mut State, any_malformed: bool) -> Option<Stop> {
        if !any_malformed {
            st.malformed_in_a_row = 0;
            return None;
        }
        st.malformed_in_a_row += 1;
        (st.malformed_in_a_row >= 2).then(|| {
            Stop::new(
                StopReason::MalformedDecision,
                "two malformed decisions in a row (tool-call arguments that are not JSON)"
                    .to_string(),
            )
        })
    }

    /// Is this call registered, allowed, well-formed and within budget? Rejections become
    /// observations for the model; some also end the run (limits, loops).
    fn admit(&self, st: &State, call: &ProposedCall, planned_runs: u32) -> Admission<'a> {
        let name = call.name.as_str();
        let args = match &call.arguments {
            Ok(v) => v.clone(),
            Err(raw) => {
                let (shown, _) = self.redactor.shorten(raw, 200);
                return Admission::Reject {
                    args: Value::String(raw.clone()),
                    error: ToolError::new(
                        ErrorKind::MalformedDecision,
                        format!("the arguments of `{name}` are not a JSON object: {shown}"),
                    ),
                    ends_run: None,
                };
            }
        };
        let checked = self.runnable_tool(name).and_then(|tool| {
            let problems = validation_errors(tool, &args);
            if !problems.is_empty() {
                return Err(Refusal::new(
                    ErrorKind::InvalidArguments,
                    problems.join("; "),
                ));
            }
            self.within_budget(st, tool, planned_runs)?;
            let signature = format!("{name} {}", canonical(&args));
            self.not_a_loop(st, name, &signature)?;
            Ok((tool, signature))
        });
        match checked {
            Ok((tool, signature)) => Admission::Run {
                tool,
                args,
                signature,
            },
            Err(refusal) => Admission::Reject {
                args,
                error: refusal.error,
                ends_run: refusal.ends_run,
            },
        }
    }

    /// The registered tool of this name, if the policy allows it.
    fn runnable_tool(&self, name: &str) -> Result<&'a Tool, Refusal> {
        let Some(tool) = self.registry.tool(name) else {
            // A name with control characters must not reach a terminal or a log as is.
            let shown: String = name.chars().filter(|c| !c.is_control()).take(100).collect();
            let hint = crate::diag::did_you_mean(
                &shown,
                self.registry.tool_names().filter(|t| self.allowed(t)),
            )
            .map(|h| format!("; {h}"))
            .unwrap_or_default();
            return Err(Refusal::new(
                ErrorKind::UnknownTool,
                format!("there is no tool named `{shown}`{hint}"),
            ));
        };
        if !self.allowed(name) {
            return Err(Refusal::new(
                ErrorKind::Denied,
                format!("the policy does not allow `{name}`"),
            ));
        }
        Ok(tool)
    }

    /// `max_tool_calls` for the run (which ends it) and `max_calls` for the tool.
    fn within_budget(&self, st: &State, tool: &Tool, planned_runs: u32) -> Result<(), Refusal> {
        let max = self.registry.limits.max_tool_calls;
        if st.tool_call_count + planned_runs >= max {
            return Err(Refusal::new(
                ErrorKind::LimitExceeded,
                format!("the run may make at most {max} tool calls (max_tool_calls)"),
            )
            .ending(
                StopReason::MaxToolCalls,
                format!("the model asked for more than {max} tool calls"),
            ));
        }
        if let Some(max) = tool.max_calls {
            if st.per_tool.get(&tool.name).copied().unwrap_or(0) >= max {
                return Err(Refusal::new(
                    ErrorKind::LimitExceeded,
                    format!("`{}` may be called at most {max} times per run", tool.name),
                ));
            }
        }
        Ok(())
    }

    /// The same call too often, or A, B, A, B: the model is stuck, and the run ends.
    fn not_a_loop(&self, st: &State, name: &str, signature: &str) -> Result<(), Refusal> {
        let policy = &self.registry.policy;
        let seen = st.identical.get(signature).copied().unwrap_or(0);
        if seen >= policy.max_identical_calls {
            return Err(Refusal::new(
                ErrorKind::LoopDetected,
                format!("`{name}` was already called {seen} times with these arguments"),
            )
            .ending(
                StopReason::LoopDetected,
                format!(
                    "the model repeated the same call to `{name}` {} times",
                    seen + 1
                ),
            ));
        }
        let h = &st.executed_signatures;
        let n = h.len();
        if policy.detect_alternation
            && n >= 3
            && h[n - 1] != signature
            && h[n - 2] == signature
            && h[n - 3] == h[n - 1]
        {
            return Err(Refusal::new(
                ErrorKind::LoopDetected,
                "the model is alternating between the same two calls",
            )
            .ending(
                StopReason::LoopDetected,
                "the model alternated between the same two calls (A, B, A, B)".to_string(),
            ));
        }
        Ok(())
    }

    /// Spec-declared faults, counted per tool so `fail_first: 2` fails exactly the first two calls.
    fn draw_fault(&self, st: &mut State, tool: &Tool, opts: &RunOptions<'_>) -> Option<Fault> {
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

async fn apply_fault(fault: &Fault, tool: &Tool) -> Result<Output, ToolError> {
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
