//! The loop itself: decide, admit the turn's calls, confirm, execute, observe, until an answer,
//! a stop for a person or a limit.

use super::{Admission, Engine, Plan, RunOptions, State, Stop, Timing, Turn};
use crate::models::{CallMessage, DecideInput, Decision, Message, ModelClient, ProposedCall};
use crate::registry::Fault;
use crate::templates::Shared;
use crate::tools::{self, ErrorKind, Output, ToolEnv, ToolError};
use crate::trace::{
    millis, now_rfc3339, CallStatus, ErrorInfo, ModelCall, PendingCall, StopReason, ToolErrorEntry,
};
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::time::Instant;

impl<'a> Engine<'a> {
    pub(super) async fn run_loop(
        &self,
        st: &mut State,
        model: &mut ModelClient,
        opts: &RunOptions<'_>,
    ) -> Stop {
        if let Err(why) = self.connect_servers(opts).await {
            return Stop::new(StopReason::McpError, why);
        }
        self.open_turn(st, opts);
        loop {
            if let Some(stop) = self.budget_spent(st, opts.model_name) {
                return stop;
            }
            // Seen here too, not only by the watcher the loop races: a run whose steps never
            // wait would not let that watcher run before it ended (issue 36 §19).
            if opts
                .interrupted
                .as_ref()
                .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
            {
                return Stop::new(
                    StopReason::Interrupted,
                    "the run was interrupted".to_string(),
                );
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
            if let Some((host, port)) = model.server() {
                timing.server_address = Some(host);
                timing.server_port = Some(port);
            }
            let asked = Instant::now();
            let decided = model.decide(input, self.transport, self.events).await;
            timing.duration_ms = millis(asked.elapsed());
            timing.finish(&decided);
            st.model_calls.push(timing);
            let mut turn = match decided {
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
                st.usage.cached_input_tokens += u.cached_input_tokens;
                st.usage.reasoning_tokens += u.reasoning_tokens;
            }
            st.usage.per_step.push(turn.usage);
            // Before the turn it led to, where the provider wants it back.
            if let Some(reasoning) = turn.reasoning_message() {
                st.messages.push(reasoning);
            }
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

    /// The user's message, after the system prompt in a new run; a conversation's later turns
    /// follow its messages so far.
    fn open_turn(&self, st: &mut State, opts: &RunOptions<'_>) {
        if st.messages.is_empty() {
            if let Some(system) = &self.registry.system {
                st.messages.push(Message::System {
                    content: system.clone(),
                });
            }
        }
        st.messages.push(Message::User {
            content: opts.query.to_string(),
        });
    }

    /// `max_steps`, `max_tokens_total` and `max_cost_usd`, checked before each model call.
    pub(super) fn budget_spent(&self, st: &State, model: &str) -> Option<Stop> {
        let limits = &self.registry.limits;
        if st.steps >= limits.max_steps {
            return Some(Stop::new(
                StopReason::MaxSteps,
                format!("the model made {} calls (max_steps) without a final answer; {} tool result(s) were gathered", st.steps, st.tool_results.len()),
            ));
        }
        if let Some(stop) = self.cost_spent(st, model) {
            return Some(stop);
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

    /// `max_cost_usd`: what the calls so far cost at the model's `price:`. A model without one
    /// (scripted) spends nothing; `check` refuses the limit on a live model without a price.
    fn cost_spent(&self, st: &State, model: &str) -> Option<Stop> {
        let max = self.registry.limits.max_cost_usd?;
        let price = self.registry.model(model)?.price?;
        let u = &st.usage;
        let spent = price.cost_usd(
            u.input_tokens,
            u.cached_input_tokens,
            u.output_tokens,
            u.reasoning_tokens,
        );
        (spent >= max).then(|| {
            Stop::new(
                StopReason::MaxCostUsd,
                format!("the run spent ${spent:.6} (max_cost_usd is {max})"),
            )
        })
    }

    /// A reply that is neither an answer nor usable tool calls: recorded as an error and the
    /// model asked again, unless it is the second in a row.
    pub(super) fn malformed(&self, st: &mut State, raw: String, reason: String) -> Option<Stop> {
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

    pub(super) fn reject(
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
    pub(super) async fn handle_calls(
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
                    let (observed, stop) = self.record(st, call, tool, args, result, timing);
                    tool_messages.push(Self::message(call, tool, observed));
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
    pub(super) fn record_turn(
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
                    c.id = super::call_id(st.next_call);
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
    pub(super) fn plan_turn<'c>(
        &self,
        st: &mut State,
        calls: &'c [ProposedCall],
        opts: &RunOptions<'_>,
    ) -> Result<Turn<'a>, Stop> {
        let mut turn = Turn::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            let planned_runs = turn.runs();
            let admission = self.admit(st, call, planned_runs);
            self.plan(st, &mut turn, (i, call), admission, opts)?;
        }
        Ok(turn)
    }

    /// Adds one admitted (or refused) call to the turn: counted for loop detection and budgets
    /// when it will run, recorded as an observation when it was refused.
    pub(super) fn plan(
        &self,
        st: &mut State,
        turn: &mut Turn<'a>,
        (i, call): (usize, &ProposedCall),
        admission: Admission<'a>,
        opts: &RunOptions<'_>,
    ) -> Result<(), Stop> {
        match admission {
            Admission::Run {
                tool,
                args,
                signature,
            } => {
                let hint = tool.confirm_hint();
                if (tool.confirm || hint.is_some()) && !opts.approvals.contains(&call.name) {
                    self.confirm(st, call, &args, opts, hint)?;
                }
                // A session's loop rule reads only `executed_signatures`; counted without
                // copying a key that is already there.
                if st.session.is_none() {
                    bump(&mut st.identical, &signature);
                }
                bump(&mut st.per_tool, &call.name);
                st.executed_signatures.push(signature);
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
        Ok(())
    }

    /// Asks the confirmer, if there is one; without a yes the run stops with the call pending.
    pub(super) fn confirm(
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
        // A prompt a signal ended is no answer: the run was interrupted (issue 36 §19).
        if opts
            .interrupted
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
        {
            return Err(Stop::new(
                StopReason::Interrupted,
                "the run was interrupted".to_string(),
            ));
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
    pub(super) async fn execute_plans(
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
    pub(super) async fn connect_servers(&self, opts: &RunOptions<'_>) -> Result<(), String> {
        tools::mcp::connect_all(&self.tool_env(opts, "")).await
    }

    /// What a tool may touch during this run.
    pub(super) fn tool_env<'e>(&'e self, opts: &RunOptions<'e>, call_id: &'e str) -> ToolEnv<'e> {
        ToolEnv {
            registry: self.registry,
            secrets: self.secrets,
            transport: self.transport,
            events: self.events,
            query: opts.query,
            now_unix_ms: opts.now_unix_ms,
            call_id,
            notify: opts.notify,
            session: opts.session,
        }
    }

    /// Two turns in a row with arguments that are not JSON end the run.
    pub(super) fn count_malformed(&self, st: &mut State, any_malformed: bool) -> Option<Stop> {
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
}

/// `*counts.entry(key.to_string()).or_default() += 1`, copying the key only when it is new.
fn bump(counts: &mut std::collections::HashMap<String, u32>, key: &str) {
    match counts.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            counts.insert(key.to_string(), 1);
        }
    }
}
