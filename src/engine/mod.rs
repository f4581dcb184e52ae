//! The governed loop: prepare → decide → normalize → validate → confirm → execute → observe, until
//! an answer, a stop for a person, or a limit. Every stop has a `stop_reason`; a tool error is an
//! observation the model can recover from, never a crash.

use crate::events::Events;
use crate::models::{Message, ModelClient};
use crate::net::Transport;
use crate::redact::{Redactor, Secrets};
use crate::registry::{Fault, Registry, Tool};
use crate::templates::Shared;
use crate::tools::{self, ErrorKind, ToolError};
use crate::trace::{
    millis, now_rfc3339, ModelCall, PendingCall, SpecRef, Status, StopReason, ToolErrorEntry,
    ToolResultEntry, Trace, UsageTotals,
};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod admission;
mod conversation;
mod execute;
mod masking;
mod run_loop;
mod session;

/// When an executed call started (wall clock, for the trace; `None` when no trace will show
/// it) and how long it took.
struct Timing {
    started_at: Option<String>,
    elapsed: Duration,
}

/// Asks a person whether a tool may run (a terminal prompt in `run`; never in tests).
pub(crate) type Confirmer = dyn Fn(&str, &Value) -> bool + Send + Sync;

pub use conversation::Conversation;

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
    /// Set by a replay where its recording was interrupted: the run stops there as it did.
    pub cut: Option<Arc<AtomicBool>>,
    /// Where tools' notifications go besides `--events` (a served call's client).
    pub notify: Option<&'a crate::tools::notify::Notifier>,
    /// The served session a call belongs to (`serve`): its tool events name it, since each
    /// session counts its own call ids.
    pub session: Option<&'a str>,
}

/// One tool call outside a model loop (`toolrun call`, an MCP client's `tools/call`): no query,
/// no model, no person to ask; what may run without one and the built-ins' clock.
#[derive(Clone, Default)]
pub(crate) struct CallOptions {
    pub(crate) approvals: BTreeSet<String>,
    pub(crate) now_unix_ms: i64,
    /// Where the call's notifications go besides `--events` (a served call's client).
    pub(crate) notify: Option<Arc<crate::tools::notify::Notifier>>,
    /// The served session the call belongs to (`session_1`, ...), named in its tool events.
    pub(crate) session: Option<Arc<str>>,
}

impl CallOptions {
    /// The turn handling is the loop's; outside a loop it has no query or model to report.
    fn as_run(&self) -> RunOptions<'_> {
        RunOptions {
            query: "",
            model_name: "",
            approvals: self.approvals.clone(),
            confirmer: None,
            now_unix_ms: self.now_unix_ms,
            faults: Vec::new(),
            interrupted: None,
            cut: None,
            notify: self.notify.as_deref(),
            session: self.session.as_deref(),
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
    /// The number of the last call given an id (`call_N`).
    next_call: u32,
    /// A session's tries at admission, held ones included: the order it admitted its calls.
    tries: u32,
    final_output: Option<String>,
    pending: Option<PendingCall>,
    usage: UsageTotals,
    any_usage: bool,
    model_calls: Vec<ModelCall>,
    identical: HashMap<String, u32>,
    /// A served session's calls admitted and still running: they count against its budget.
    in_flight: u32,
    /// A served session's limits, which replace the run's budget and loop rules.
    session: Option<crate::registry::ServeLimits>,
    /// Counted for an authenticated subject over this window (MCP 2026-07-28 has no session),
    /// as refusals say: `1h`.
    subject_window: Option<Arc<str>>,
    per_tool: HashMap<String, u32>,
    executed_signatures: Vec<String>,
    error_repeats: HashMap<String, u32>,
    malformed_in_a_row: u32,
    fault_counts: HashMap<String, u32>,
    /// The served session these calls belong to, for their `tool_finished` events.
    served_as: Option<Arc<str>>,
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

impl Turn<'_> {
    fn with_capacity(calls: usize) -> Self {
        Turn {
            plans: Vec::with_capacity(calls),
            stop: None,
            any_malformed: false,
        }
    }

    /// The calls planned to run so far: they count against the budget of the ones after them.
    fn runs(&self) -> u32 {
        let runs = self
            .plans
            .iter()
            .filter(|(_, p)| matches!(p, Plan::Run { .. }));
        runs.count() as u32
    }
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
    /// Which try at admission of its session this was (0 outside a session): a session's calls
    /// may end in another order than they were admitted.
    pub(crate) seq: u32,
    /// The text a model reads of a successful call (masked and cut to the limit), which is an
    /// MCP result's text too: made once, not again from the result.
    pub(crate) observation: Option<String>,
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

/// The loop's bookkeeping for calls that arrive from outside a model loop (an MCP session):
/// limits, loop detection and fault counts run per session, exactly as per run. Calls of one
/// session may run at once: the bookkeeping is locked only to admit a call and to observe it.
#[derive(Default)]
pub(crate) struct CallSession {
    st: std::sync::Mutex<State>,
}

impl CallSession {
    /// A session of `toolrun serve`, under the spec's `serve:` limits rather than a run's.
    pub(crate) fn served(limits: crate::registry::ServeLimits) -> CallSession {
        let session = CallSession::default();
        session.lock().session = Some(limits);
        session
    }

    /// The counts of one authenticated subject's 2026-07-28 requests over `window` (`1h`), under
    /// the same `serve:` limits as a session.
    pub(crate) fn per_subject(limits: crate::registry::ServeLimits, window: &str) -> CallSession {
        let counts = CallSession::served(limits);
        counts.lock().subject_window = Some(window.into());
        counts
    }

    /// The session's tries at admission so far: the next call admitted is the one after.
    pub(crate) fn tries(&self) -> u32 {
        self.lock().tries
    }

    /// A replay's subject counts at a recorded call: the tries the subject had made before it
    /// (held calls that only asked for confirmation are not recorded, yet took a number).
    pub(crate) fn set_tries(&self, tries: u32) {
        self.lock().tries = tries;
    }

    /// The window of an authenticated subject's counts (`per_subject`); `None` for a session's.
    pub(crate) fn subject_window(&self) -> Option<Arc<str>> {
        self.lock().subject_window.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic ends the process (panic = "abort"): a poisoned lock cannot be seen.
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<'a> Engine<'a> {
    pub async fn run(&self, model: &mut ModelClient, opts: RunOptions<'_>) -> Trace {
        let mut st = State {
            templates_read_results: matches!(model, ModelClient::Scripted(_)),
            ..State::default()
        };
        let (stop, started_at, elapsed) = self.play(&mut st, model, &opts).await;
        tools::mcp::end_all(&self.tool_env(&opts, "")).await;
        let trace = self.trace_of(st, stop, &opts, started_at, elapsed);
        self.events.emit_with("run_finished", || json!({ "status": trace.status, "stop_reason": trace.stop_reason, "steps": trace.steps, "tool_call_count": trace.tool_call_count, "duration_ms": trace.duration_ms }));
        trace
    }

    /// One run of the loop on `st` (a fresh state, or a conversation's so far): until an
    /// answer, a stop for a person, a limit, the run's timeout or an interruption. Its MCP
    /// sessions stay open: a run ends them, a conversation after its last turn.
    async fn play(
        &self,
        st: &mut State,
        model: &mut ModelClient,
        opts: &RunOptions<'_>,
    ) -> (Stop, String, Duration) {
        let started = Instant::now();
        let started_at = now_rfc3339();
        // Every response is masked as it arrives, before a tool, the model or a limit sees it.
        self.transport.mask_with(&self.redactor);
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
            let flags: Vec<&Arc<AtomicBool>> =
                opts.interrupted.iter().chain(opts.cut.iter()).collect();
            let interrupted = async {
                if flags.is_empty() {
                    std::future::pending::<()>().await;
                }
                while !flags.iter().any(|f| f.load(Ordering::Relaxed)) {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            };
            tokio::select! {
                stop = self.run_loop(st, model, opts) => stop,
                _ = deadline => Stop::new(StopReason::RunTimeout, format!("the run took longer than run_timeout ({:?})", self.registry.limits.run_timeout)),
                _ = interrupted => Stop::new(StopReason::Interrupted, "the run was interrupted".to_string()),
            }
        };
        (stop, started_at, started.elapsed())
    }

    /// The trace of what `st` observed, masked.
    fn trace_of(
        &self,
        st: State,
        stop: Stop,
        opts: &RunOptions<'_>,
        started_at: String,
        elapsed: Duration,
    ) -> Trace {
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
            duration_ms: millis(elapsed),
            turns: Vec::new(),
        };
        // Masked once here, so every reader of the trace (reports, JUnit, results, test
        // verdicts) gets the masked text, not just `to_json`.
        self.masked(trace)
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
        // failure to connect is reported by the call itself, unless the tool is one of a
        // `tools: "*"` server known only from that listing: then why it could not be listed
        // (a program `--allow-exec` did not allow, a server down) is the call's error, not
        // "there is no tool named ...".
        let run = opts.as_run();
        let connected = tools::mcp::connect_tool(&self.tool_env(&run, ""), name).await;
        if let Err(e) = connected {
            if self.registry.tool(name).is_none() {
                tools::mcp::end_all(&self.tool_env(&run, "")).await;
                return CallOutcome {
                    result: None,
                    error: Some(ToolErrorEntry {
                        id: "call_1".into(),
                        name: name.to_string(),
                        kind: e.kind,
                        message: self.redactor.str(&e.message),
                        details: e.details,
                    }),
                    pending: None,
                    seq: 0,
                    observation: None,
                };
            }
        }
        let outcome = self
            .call_in_session(&CallSession::default(), name, arguments, opts)
            .await;
        tools::mcp::end_all(&self.tool_env(&run, "")).await;
        outcome
    }
}

/// `call_N`, the id a call without one gets: written out, not formatted (a server numbers
/// every call).
fn call_id(n: u32) -> String {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    let mut v = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut id = String::with_capacity(5 + digits.len() - at);
    id.push_str("call_");
    id.extend(digits[at..].iter().map(|&d| char::from(d)));
    id
}

#[cfg(test)]
mod call_id_tests {
    #[test]
    fn call_ids_are_the_formatted_numbers() {
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            12_345,
            999_999_999,
            1_000_000_000,
            u32::MAX,
        ] {
            assert_eq!(super::call_id(n), format!("call_{n}"));
        }
    }
}
