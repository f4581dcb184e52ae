//! Calls from outside a model loop (`toolrun call`, an MCP client's session), one at a time or
//! several at once in one session: admission and observation are the loop's own, under the
//! session's lock; the tool runs without it, so a session's slow call does not hold up the next.

use super::{CallOptions, CallOutcome, CallSession, Engine, Plan, State, Turn};
use crate::models::ProposedCall;
use serde_json::Value;

impl<'a> Engine<'a> {
    /// Like [`Engine::call_tool`], counting limits and loops across the calls of one session
    /// (an MCP client's), as a run counts them across its turns.
    pub(crate) async fn call_in_session(
        &self,
        session: &CallSession,
        name: &str,
        arguments: Value,
        opts: &CallOptions,
    ) -> CallOutcome {
        let served_as = opts.session.as_ref();
        let opts = &opts.as_run();
        self.transport.mask_with(&self.redactor);
        // The arguments travel beside the call (`args`), handed over rather than copied:
        // nothing after admission reads them from the call.
        let mut call = ProposedCall {
            id: String::new(),
            name: name.to_string(),
            arguments: Ok(Value::Null),
        };
        let (tool, args, fault, seq) = {
            let mut st = session.lock();
            // Calls of one session share its name; observation reads it from here.
            if st.served_as.is_none() {
                st.served_as = served_as.cloned();
            }
            st.tries += 1;
            let seq = st.tries;
            call.id = super::call_id(st.next_call + 1);
            let admission = self.admit_args(&st, name, arguments, 0);
            let mut turn = Turn::with_capacity(1);
            let plans = match self.plan(&mut st, &mut turn, (0, &call), admission, opts) {
                Ok(()) => {
                    st.next_call += 1;
                    turn.plans
                }
                // Needs confirmation: the outcome says so (`pending`). Held for a person, it
                // changed nothing and takes its number only when it is tried again approved:
                // calls admitted meanwhile (while the person thinks) are numbered before it, as
                // a replay, which runs the calls one by one, numbers them.
                Err(_) => Vec::new(),
            };
            match plans.into_iter().next() {
                Some((_, Plan::Run { tool, args })) => {
                    // Counted before it runs, so calls at once cannot overrun the budget.
                    st.in_flight += 1;
                    let fault = self.draw_fault(&mut st, tool, opts);
                    (tool, args, fault, seq)
                }
                // Refused: its error was recorded by admission.
                _ => return self.outcome(&mut st, seq),
            }
        };
        let (result, timing) = self.execute_one(&call, tool, &args, fault, opts).await;
        let mut st = session.lock();
        st.in_flight = st.in_flight.saturating_sub(1);
        let (observed, _) = self.record(&mut st, &call, tool, args, result, timing);
        let mut outcome = self.outcome(&mut st, seq);
        if let Ok((content, _)) = observed {
            outcome.observation = Some(content);
        }
        outcome
    }

    /// The call just admitted or observed, taken out of the session's state, which keeps only
    /// the counters admission reads: a session can be long.
    fn outcome(&self, st: &mut State, seq: u32) -> CallOutcome {
        let error = st.tool_errors.pop().map(|mut e| {
            e.message = self.redactor.str(&e.message);
            e
        });
        let outcome = CallOutcome {
            result: st.tool_results.pop(),
            error,
            pending: st.pending.take(),
            seq,
            observation: None,
        };
        st.messages.clear();
        st.results.clear();
        st.tool_results.clear();
        st.tool_errors.clear();
        if let Some(limits) = st.session {
            // Its loop rule reads only the latest calls; a day of lookups keeps nothing else.
            st.identical.clear();
            let keep = limits.max_repeated_calls as usize + 1;
            let h = &mut st.executed_signatures;
            h.drain(..h.len().saturating_sub(keep));
        }
        outcome
    }
}
