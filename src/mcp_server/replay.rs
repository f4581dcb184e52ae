//! Replaying a served session (`serve --record`) offline: every recorded `tools/call` goes
//! through the spec as it is now, in the recorded order, each in its own session (so limits and
//! loop detection count as they did; an authenticated subject's 2026-07-28 calls in their
//! subject's counts, restored from the recording), with its recorded clock and the client's recorded answer
//! to a confirmation; the tools' HTTP requests are answered from the recording. The replay fails
//! with a readable diff when a result sent to the client, a request or the trace differs.

use super::record::{recorded_calls, session_trace, write_session, SERVED};
use super::record::{CallLog, LoggedCall};
use super::server::{Origin, Served, ServedSession};
use crate::engine::CallSession;
use crate::fixture::{json_diff, Exchange, Fixture};
use crate::redact::Redactor;
use crate::registry::Registry;
use crate::replay::ReplayReport;
use crate::setup::{Clock, Inputs, Network, Setup};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

fn failed(failures: Vec<String>) -> ReplayReport {
    ReplayReport {
        failures,
        updated: false,
        trace: None,
    }
}

pub(crate) async fn replay_session(
    fixture: &Fixture,
    registry: Registry,
    fixture_path: &Path,
    update: bool,
) -> ReplayReport {
    let calls = match recorded_calls(fixture) {
        Ok(c) => c,
        Err(e) => return failed(vec![e]),
    };
    let http: Vec<Exchange> = fixture
        .exchanges
        .iter()
        .filter(|e| e.kind != SERVED)
        .cloned()
        .collect();
    // Each recorded call brings its own clock; the fixture's is the fallback.
    let mut inputs = Inputs::quiet(&fixture.approvals, Clock::At(fixture.now_unix_ms));
    inputs.network = Network::Replay(http);
    let setup = match Setup::open(&registry, inputs) {
        Ok(s) => s,
        Err(e) => return failed(vec![e]),
    };
    let (redactor, tape) = (setup.redactor.clone(), setup.tape.clone());
    let Some(tape) = tape else {
        return failed(vec!["the replay has no recording to answer from".into()]);
    };
    if let Err(why) = super::connect_remote(&registry, &setup).await {
        return failed(vec![why]);
    }
    let log = Some(CallLog::Memory(Default::default()));
    let served = match Served::new(registry, setup, log) {
        Ok(s) => Arc::new(s),
        Err(e) => return failed(vec![e]),
    };
    let mut failures = Vec::new();
    let mut sessions: HashMap<&str, ServedSession> = HashMap::new();
    let mut subjects = HashMap::new();
    for (i, call) in calls.iter().enumerate() {
        let session = sessions.entry(&call.session).or_insert_with(|| {
            let session = ServedSession::named(&served, &call.session);
            match subject_counts(&mut subjects, &served, call) {
                Some((subject, counts)) => session.counted_in(subject, counts),
                None => session,
            }
        });
        let origin = Origin::Recording {
            now_unix_ms: call.now_unix_ms,
            confirmation: call.confirmation.clone(),
        };
        let before = tape.mismatch_count();
        let sent = session
            .call(&call.name, call.arguments.clone(), origin)
            .await;
        // A call cut off at shutdown runs again, to be admitted as it was (the calls after it
        // count it), but what it answers now and what it asked that was never answered are no
        // divergence: it never ended.
        if let Some(why) = &call.cut_off {
            tape.forget_mismatches_after(before);
            served.mark_cut_off(call.response.clone(), why);
            continue;
        }
        let (old, new) = (masked(&call.response, &redactor), masked(&sent, &redactor));
        if old != new {
            failures.push(format!(
                "served call {} (`{}` in {}) now answers differently:\n{}",
                i + 1,
                crate::term::visible(&call.name),
                crate::term::visible(&call.session),
                json_diff(&old, &new)
            ));
        }
    }
    let http_failures = tape.mismatches().len() + tape.unused().len();
    failures.extend(tape.mismatches());
    for unused in tape.unused() {
        failures.push(format!("recorded exchange was never requested: {unused}"));
    }
    let registry = &served.registry;
    let logged = served.logged_calls();
    let comparable = |v: &Value| {
        let mut v = crate::fixture::without_pointers(
            crate::trace::without_durations(v),
            &registry.replay_ignore,
        );
        redactor.value(&mut v);
        if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("sha256");
        }
        v
    };
    let new_trace = session_trace(registry, &logged);
    let (old, new) = (comparable(&fixture.trace), comparable(&new_trace));
    if old != new {
        failures.push(format!(
            "the trace differs from the recorded one:\n{}",
            json_diff(&old, &new)
        ));
    }
    if !update || failures.is_empty() || http_failures > 0 {
        return failed(failures);
    }
    // `--update` accepts what the session answers now, as long as every HTTP request still
    // matched the recording.
    let mut spec = fixture.spec.clone();
    spec.sha256 = registry.spec_sha256.clone();
    let header = crate::fixture::session_log::Header {
        spec,
        now_unix_ms: fixture.now_unix_ms,
        approvals: fixture.approvals.clone(),
    };
    match write_session(fixture_path, &header, &logged, tape.exchanges(), &redactor) {
        Ok(()) => ReplayReport {
            failures: Vec::new(),
            updated: true,
            trace: None,
        },
        Err(e) => failed(vec![e]),
    }
}

/// The counts a call recorded as counted for its subject (`subject_counts`) is replayed in: the
/// subject's, shared by its calls as they were when recorded, holding the tries it had made
/// before the call. Fewer tries than the replay's counts hold mean the subject's count started
/// again (its window ended, or it was evicted): new counts then. `None`: a session's call (every
/// call of a recording made before `subject_counts`), counted in its session.
fn subject_counts<'c>(
    subjects: &mut HashMap<&'c str, Arc<CallSession>>,
    served: &Served,
    call: &'c LoggedCall,
) -> Option<(&'c str, Arc<CallSession>)> {
    let (Some(subject), Some(window)) = (&call.subject, &call.subject_window) else {
        return None;
    };
    let tries_before = call.seq.saturating_sub(1);
    let fresh = || Arc::new(CallSession::per_subject(served.registry.serve, window));
    let counts = subjects.entry(subject).or_insert_with(fresh);
    if tries_before < counts.tries() {
        *counts = fresh();
    }
    counts.set_tries(tries_before);
    Some((subject, counts.clone()))
}

fn masked(v: &Value, redactor: &Redactor) -> Value {
    let mut v = v.clone();
    redactor.value(&mut v);
    v
}
