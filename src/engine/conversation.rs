//! A conversation: user turns one after another, each a run of the loop on what came before.
//! The model sees every earlier turn (the user's messages, its answers, its tool calls and their
//! results), and the limits count across the whole conversation, as they count across a run's
//! steps; only `run_timeout` is per turn (a person may take their time between turns).

use super::{Engine, RunOptions, State, Stop};
use crate::models::{Message, ModelClient};
use crate::templates::Shared;
use crate::trace::{millis, now_rfc3339, SpecRef, StopReason, Trace, TurnTrace, UsageTotals};
use serde_json::json;
use std::time::Duration;

/// The state a conversation carries from one user turn to the next.
pub struct Conversation {
    st: State,
    turns: Vec<TurnTrace>,
}

/// Where a turn starts in the conversation's records.
struct Mark {
    messages: usize,
    results: usize,
    errors: usize,
    calls: u32,
    steps: u32,
    per_step: usize,
    model_calls: usize,
    usage: UsageTotals,
}

impl Conversation {
    /// A new conversation for `model` (a scripted model's templates read `results`).
    pub fn new(model: &ModelClient) -> Conversation {
        Conversation {
            st: State {
                templates_read_results: matches!(model, ModelClient::Scripted(_)),
                ..State::default()
            },
            turns: Vec::new(),
        }
    }

    /// Continues the conversation `trace` recorded (a conversation's or a single run's): its
    /// messages, calls and counts, so the limits go on counting where it stopped.
    pub(crate) fn resume(trace: Trace, model: &ModelClient) -> Conversation {
        let mut c = Conversation::new(model);
        let st = &mut c.st;
        // Every entry of `tool_results` is a call that ran (rejected calls are not in it).
        for r in &trace.tool_results {
            if st.templates_read_results {
                let mut entry = json!({ "id": r.id, "name": r.name, "arguments": r.arguments, "status": r.status });
                match (&r.result, &r.error) {
                    (Some(v), _) => entry["result"] = v.clone(),
                    (None, Some(e)) => entry["error"] = json!(e),
                    _ => {}
                }
                st.results.push(Shared::new(&entry));
            }
            let signature = super::admission::signature(&r.name, &r.arguments);
            *st.identical.entry(signature.clone()).or_default() += 1;
            *st.per_tool.entry(r.name.clone()).or_default() += 1;
            st.executed_signatures.push(signature);
        }
        st.next_call = highest_call_number(&trace);
        st.any_usage = trace.usage.is_some();
        st.usage = trace.usage.clone().unwrap_or_default();
        st.tool_call_count = trace.tool_call_count;
        st.steps = trace.steps;
        st.model_calls = trace.model_calls.clone();
        c.turns = if trace.turns.is_empty() {
            vec![TurnTrace {
                query: trace.query.clone(),
                status: trace.status,
                stop_reason: trace.stop_reason,
                final_output: trace.final_output.clone(),
                tool_results: trace.tool_results.clone(),
                tool_errors: trace.tool_errors.clone(),
                tool_call_count: trace.tool_call_count,
                steps: trace.steps,
                first_message: first_user_message(&trace.messages, 0),
                pending_tool_call: trace.pending_tool_call.clone(),
                error: trace.error.clone(),
                usage: trace.usage.clone(),
                started_at: trace.started_at.clone(),
                duration_ms: trace.duration_ms,
            }]
        } else {
            trace.turns
        };
        c.st.messages = trace.messages;
        close_open_calls(&mut c.st.messages, 0, trace.stop_reason);
        c.st.tool_results = trace.tool_results;
        c.st.tool_errors = trace.tool_errors;
        c
    }

    /// The user turns so far, in order.
    pub(crate) fn turns(&self) -> &[TurnTrace] {
        &self.turns
    }

    /// The conversation before the next turn, as a scripted model's `history:` reads it.
    fn history(&self) -> String {
        let mut out = String::new();
        for t in &self.turns {
            out.push_str("user: ");
            out.push_str(&t.query);
            out.push('\n');
            if let Some(answer) = &t.final_output {
                out.push_str("assistant: ");
                out.push_str(answer);
                out.push('\n');
            }
        }
        out
    }

    fn mark(&self) -> Mark {
        let st = &self.st;
        Mark {
            messages: st.messages.len(),
            results: st.tool_results.len(),
            errors: st.tool_errors.len(),
            calls: st.tool_call_count,
            steps: st.steps,
            per_step: st.usage.per_step.len(),
            model_calls: st.model_calls.len(),
            usage: st.usage.clone(),
        }
    }

    /// What the turn that began at `m` added: its own records and counts.
    fn since(&self, m: &Mark) -> State {
        let st = &self.st;
        let per_step = st.usage.per_step[m.per_step.min(st.usage.per_step.len())..].to_vec();
        let usage = UsageTotals {
            input_tokens: st.usage.input_tokens - m.usage.input_tokens,
            output_tokens: st.usage.output_tokens - m.usage.output_tokens,
            total_tokens: st.usage.total_tokens - m.usage.total_tokens,
            cached_input_tokens: st.usage.cached_input_tokens - m.usage.cached_input_tokens,
            reasoning_tokens: st.usage.reasoning_tokens - m.usage.reasoning_tokens,
            per_step,
        };
        State {
            tool_results: st.tool_results[m.results..].to_vec(),
            tool_errors: st.tool_errors[m.errors..].to_vec(),
            tool_call_count: st.tool_call_count - m.calls,
            steps: st.steps - m.steps,
            final_output: st.final_output.clone(),
            pending: st.pending.clone(),
            any_usage: usage.per_step.iter().any(Option::is_some),
            usage,
            model_calls: st.model_calls[m.model_calls.min(st.model_calls.len())..].to_vec(),
            ..State::default()
        }
    }
}

/// The highest `call_N` a trace gave out: a resumed conversation numbers on from there.
fn highest_call_number(trace: &Trace) -> u32 {
    let ids = trace
        .tool_results
        .iter()
        .map(|r| r.id.as_str())
        .chain(trace.tool_errors.iter().map(|e| e.id.as_str()));
    ids.filter_map(|id| id.strip_prefix("call_")?.parse::<u32>().ok())
        .max()
        .unwrap_or(0)
}

/// Answers, in the history, the calls of a turn's last step that got no result: the turn
/// stopped (Ctrl-C, its timeout, a call held for a person) before they ran or finished. The
/// next turn sends the history, and providers refuse a tool call left without its result; the
/// trace and a recording keep none either. Only the messages say it: the call never ran to an
/// outcome, so it is neither in `tool_results` nor in `tool_errors`.
fn close_open_calls(messages: &mut Vec<Message>, from: usize, reason: StopReason) {
    let from = from.min(messages.len());
    let last_calls = messages[from..].iter().rposition(
        |m| matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()),
    );
    let Some(at) = last_calls.map(|i| from + i) else {
        return;
    };
    let Message::Assistant { tool_calls, .. } = &messages[at] else {
        return;
    };
    let answered: std::collections::HashSet<&str> = messages[at + 1..]
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    let open: Vec<Message> = tool_calls
        .iter()
        .filter(|c| !answered.contains(c.id.as_str()))
        .map(|c| Message::Tool {
            tool_call_id: c.id.clone(),
            name: c.name.clone(),
            content: json!({ "error": { "kind": "execution_error", "message": format!("no result: the turn stopped ({reason}) before this call finished; it may not have run") } }).to_string(),
            is_error: true,
            images: Vec::new(),
        })
        .collect();
    messages.extend(open);
}

/// The index of the first user message at or after `from` (a turn's own message).
fn first_user_message(messages: &[Message], from: usize) -> usize {
    messages
        .iter()
        .skip(from)
        .position(|m| matches!(m, Message::User { .. }))
        .map_or(from, |i| from + i)
}

impl<'a> Engine<'a> {
    /// The conversation's next user turn (`opts.query`): run on everything before it. The
    /// turn's own record is returned; [`Engine::conversation_trace`] gives the whole.
    pub(crate) async fn turn<'c>(
        &self,
        conversation: &'c mut Conversation,
        model: &mut ModelClient,
        opts: &RunOptions<'_>,
    ) -> &'c TurnTrace {
        let mark = conversation.mark();
        let number = conversation.turns.len() as u32 + 1;
        let history = conversation.history();
        let st = &mut conversation.st;
        st.final_output = None;
        st.pending = None;
        st.malformed_in_a_row = 0;
        let (stop, started_at, elapsed) =
            match model.begin_turn(self.registry, opts.query, number, &history) {
                Ok(()) => self.play(st, model, opts).await,
                Err(why) => (
                    Stop::new(StopReason::ModelError, why),
                    now_rfc3339(),
                    Duration::ZERO,
                ),
            };
        close_open_calls(&mut conversation.st.messages, mark.messages, stop.reason);
        // The MCP sessions serve the next turn too, unless this one was cut off mid-call: a
        // server may still be working on what it was asked, so the next turn starts afresh.
        if matches!(
            stop.reason,
            StopReason::Interrupted | StopReason::RunTimeout
        ) {
            self.end_conversation(opts).await;
        }
        let part = conversation.since(&mark);
        let trace = self.trace_of(part, stop, opts, started_at, elapsed);
        self.events.emit_with("run_finished", || json!({ "status": trace.status, "stop_reason": trace.stop_reason, "steps": trace.steps, "tool_call_count": trace.tool_call_count, "duration_ms": trace.duration_ms, "turn": number }));
        conversation.turns.push(TurnTrace {
            query: trace.query,
            status: trace.status,
            stop_reason: trace.stop_reason,
            final_output: trace.final_output,
            tool_results: trace.tool_results,
            tool_errors: trace.tool_errors,
            tool_call_count: trace.tool_call_count,
            steps: trace.steps,
            first_message: first_user_message(&conversation.st.messages, mark.messages),
            pending_tool_call: trace.pending_tool_call,
            error: trace.error,
            usage: trace.usage,
            started_at: trace.started_at,
            duration_ms: trace.duration_ms,
        });
        let last = conversation.turns.len() - 1;
        &conversation.turns[last]
    }

    /// A conversation of `queries`, one user turn each, while `go_on` says so after each turn
    /// (a test stops at a turn that fails). `opts` is every turn's but for the query. In a
    /// replay, the turns numbered (from 0) in `cut_off` are those its recording says were
    /// interrupted: each stops at the request that was cut off, as it did.
    pub(crate) async fn converse(
        &self,
        model: &mut ModelClient,
        opts: &RunOptions<'_>,
        (queries, cut_off): (&[&str], &[usize]),
        mut go_on: impl FnMut(usize, &TurnTrace) -> bool,
    ) -> Option<Trace> {
        let mut conversation = Conversation::new(model);
        for (i, query) in queries.iter().enumerate() {
            let turn_opts = RunOptions {
                query,
                model_name: opts.model_name,
                approvals: opts.approvals.clone(),
                confirmer: opts.confirmer,
                now_unix_ms: opts.now_unix_ms,
                faults: opts.faults.clone(),
                interrupted: opts.interrupted.clone(),
                cut: cut_off.contains(&i).then(Default::default),
                notify: opts.notify,
                session: opts.session,
            };
            let tape = self.transport.tape();
            if let (Some(tape), Some(flag)) = (tape, &turn_opts.cut) {
                tape.cut_off_at_a_miss(Some(flag.clone()));
            }
            let done = self.turn(&mut conversation, model, &turn_opts).await;
            if let (Some(tape), Some(_)) = (tape, &turn_opts.cut) {
                tape.cut_off_at_a_miss(None);
            }
            if !go_on(i, done) {
                break;
            }
        }
        self.end_conversation(opts).await;
        self.conversation_trace(&conversation, opts.model_name)
    }

    /// Ends the conversation's MCP sessions (kept from turn to turn: one `initialize`, one
    /// stdio process, for the whole conversation).
    pub(crate) async fn end_conversation(&self, opts: &RunOptions<'_>) {
        crate::tools::mcp::end_all(&self.tool_env(opts, "")).await;
    }

    /// The whole conversation as one trace: its calls, counts, usage and messages, the last
    /// turn's outcome, and each turn; `None` before its first turn.
    pub(crate) fn conversation_trace(
        &self,
        conversation: &Conversation,
        model_name: &str,
    ) -> Option<Trace> {
        let (first, last) = (conversation.turns.first()?, conversation.turns.last()?);
        let st = &conversation.st;
        let trace = Trace {
            format_version: crate::trace::FORMAT_VERSION,
            status: last.status,
            stop_reason: last.stop_reason,
            final_output: last.final_output.clone(),
            query: first.query.clone(),
            model: model_name.to_string(),
            spec: SpecRef {
                name: self.registry.name.clone(),
                sha256: self.registry.spec_sha256.clone(),
            },
            tool_results: st.tool_results.clone(),
            tool_errors: st.tool_errors.clone(),
            tool_call_count: st.tool_call_count,
            steps: st.steps,
            messages: st.messages.clone(),
            pending_tool_call: last.pending_tool_call.clone(),
            error: last.error.clone(),
            usage: st.any_usage.then(|| st.usage.clone()),
            model_calls: st.model_calls.clone(),
            started_at: first.started_at.clone(),
            duration_ms: millis(Duration::from_secs_f64(
                conversation
                    .turns
                    .iter()
                    .map(|t| t.duration_ms.max(0.0) / 1000.0)
                    .sum(),
            )),
            turns: conversation.turns.clone(),
        };
        Some(self.masked(trace))
    }
}
