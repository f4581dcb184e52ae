//! Replaying fixtures: the spec as it is now, every request answered from the recording, the
//! network never touched, and a readable diff for any divergence.

use crate::fixture::{json_diff, write_fixture, Fixture};
use crate::net::Recorder;
use crate::registry::Registry;
use crate::setup::{Clock, Inputs, Interrupt, ModelChoice, Network, Setup};
use crate::trace::without_durations;
use serde_json::Value;
use std::path::Path;

pub(crate) struct ReplayReport {
    pub(crate) failures: Vec<String>,
    /// `--update` rewrote the fixture's trace.
    pub(crate) updated: bool,
    /// The replayed run, when it could start: tests check their expectations against it.
    pub(crate) trace: Option<crate::trace::Trace>,
}

pub(crate) async fn replay_fixture(
    fixture: &Fixture,
    registry: &Registry,
    fixture_path: &Path,
    update: bool,
    interrupted: Option<Interrupt>,
) -> ReplayReport {
    let mut failures = Vec::new();
    let fail = |why: String| ReplayReport {
        failures: vec![why],
        updated: false,
        trace: None,
    };
    if registry.model(&fixture.model).is_none() {
        let hint =
            crate::diag::did_you_mean(&fixture.model, registry.model_names()).unwrap_or_default();
        return fail(format!(
            "the fixture was recorded with model `{}`, which the spec no longer has {hint}",
            fixture.model
        ));
    }
    let mut inputs = Inputs::quiet(&fixture.approvals, Clock::At(fixture.now_unix_ms));
    inputs.network = Network::Replay(fixture.exchanges.clone());
    inputs.model = Some(ModelChoice {
        name: Some(&fixture.model),
        query: Some(&fixture.query),
    });
    inputs.interrupt = interrupted;
    let mut setup = match Setup::open(registry, inputs) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let (Some(mut model), Some(tape)) = (setup.model.take(), setup.tape.clone()) else {
        return fail("the replay has no model or no recording".into());
    };
    // The stand-ins are all the mask: masking them turns each of its encodings back into it.
    let redactor = setup.redactor.clone();
    let mut opts = setup.run_options(&fixture.query, &fixture.model);
    let engine = setup.engine(registry);
    let queries = recorded_turns(&fixture.trace);
    let cut_off = interrupted_turns(&fixture.trace);
    let trace = match queries.is_empty() {
        true => {
            // A run the recording says was interrupted stops where its request was cut off.
            if was_interrupted(&fixture.trace) {
                let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                tape.cut_off_at_a_miss(Some(flag.clone()));
                opts.cut = Some(flag);
            }
            engine.run(&mut model.client, opts).await
        }
        false => match engine
            .converse(&mut model.client, &opts, (&queries, &cut_off), |_, _| true)
            .await
        {
            Some(trace) => trace,
            None => return fail("the recorded conversation has no turns".into()),
        },
    };
    let mismatches = tape.mismatches();
    failures.extend(mismatches.iter().cloned());
    for unused in tape.unused() {
        failures.push(format!("recorded exchange was never requested: {unused}"));
    }
    // The spec's hash changes with any edit (a new test, a comment); what must not change is
    // what the run did, so the hash is not compared.
    // `replay.ignore` names volatile fields: they are left out of the trace comparison too.
    let comparable = |v: &Value| {
        let mut v = crate::fixture::without_pointers(without_durations(v), &registry.replay_ignore);
        redactor.value(&mut v);
        if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("sha256");
        }
        v
    };
    let old_trace = comparable(&fixture.trace);
    let mut new_trace = comparable(&trace.to_json(&redactor));
    without_fields_added_later(&mut new_trace, &old_trace);
    let mut updated = false;
    if new_trace != old_trace {
        if update && failures.is_empty() {
            let mut fresh = fixture.clone();
            fresh.trace = trace.to_json(&redactor);
            fresh.spec.sha256 = registry.spec_sha256.clone();
            match write_fixture(fixture_path, &fresh, &redactor) {
                Ok(()) => updated = true,
                Err(e) => failures.push(e),
            }
        } else {
            failures.push(format!(
                "the trace differs from the recorded one:\n{}",
                json_diff(&old_trace, &new_trace)
            ));
        }
    }
    failures.extend(unset_secret_hint(registry, &failures));
    ReplayReport {
        failures,
        updated,
        trace: Some(trace),
    }
}

/// The user turns of a recorded conversation, in order (none for a single query's run).
fn recorded_turns(trace: &Value) -> Vec<&str> {
    let turns = trace.get("turns").and_then(Value::as_array);
    turns
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("query").and_then(Value::as_str))
        .collect()
}

fn was_interrupted(trace: &Value) -> bool {
    trace.get("stop_reason").and_then(Value::as_str) == Some("interrupted")
}

/// The turns (numbered from 0) of a recorded conversation that were interrupted.
fn interrupted_turns(trace: &Value) -> Vec<usize> {
    let turns = trace.get("turns").and_then(Value::as_array);
    let turns = turns.into_iter().flatten().enumerate();
    turns
        .filter(|(_, t)| was_interrupted(t))
        .map(|(i, _)| i)
        .collect()
}

/// A recorded `***` where the replay sends text is a secret's value that the spec's own text
/// holds (a system prompt it was pasted into), masked when it was recorded: the replay masks it
/// alike only when the secret is set, so a replay without it says which to set.
fn unset_secret_hint(registry: &Registry, failures: &[String]) -> Option<String> {
    let mask = crate::redact::MASK;
    let masked_there = failures.iter().flat_map(|f| f.lines()).any(|line| {
        line.split_once(": expected ")
            .and_then(|(_, rest)| rest.rsplit_once(", got "))
            .is_some_and(|(was, now)| was.contains(mask) && !now.contains(mask))
    });
    let unset: Vec<&str> = registry
        .secrets
        .iter()
        .filter(|name| std::env::var_os(name).is_none_or(|v| v.is_empty()))
        .map(String::as_str)
        .collect();
    (masked_there && !unset.is_empty()).then(|| {
        format!(
            "the recording has `{mask}` (a masked secret) where this replay sends text: if the spec's own text holds a secret's value, the replay masks it as the recording did only when the secret is set; set {} for the replay, or keep the value out of the spec's text",
            unset.join(", ")
        )
    })
}

/// Fields the trace gained after fixtures were already being recorded (`tool_results[].http`):
/// a recording without one is not a divergence, so old fixtures keep replaying; a recording that
/// has it is compared as usual.
fn without_fields_added_later(new: &mut Value, old: &Value) {
    let old_calls = old.get("tool_results").and_then(Value::as_array);
    let new_calls = new.get_mut("tool_results").and_then(Value::as_array_mut);
    let (Some(old_calls), Some(new_calls)) = (old_calls, new_calls) else {
        return;
    };
    for (n, o) in new_calls.iter_mut().zip(old_calls) {
        if o.get("http").is_none() {
            if let Some(entry) = n.as_object_mut() {
                entry.remove("http");
            }
        }
    }
}

/// Compiles a spec for replay; errors become one readable failure.
pub(crate) fn load_quiet(spec: &Path) -> Result<Registry, String> {
    match crate::compile::compile_file(spec) {
        Err(d) => Err(format!(
            "cannot read spec `{}`: {}",
            spec.display(),
            d.message
        )),
        Ok((source, compiled)) => compiled.registry.ok_or_else(|| {
            let first = compiled.diagnostics.iter().find(|d| d.is_error()).map(|d| {
                let at = d
                    .span
                    .map(|s| format!(":{}:{}", s.line, s.col))
                    .unwrap_or_default();
                format!("{}{at}: {}", source.display, d.message)
            });
            format!(
                "the spec does not compile ({}); run `toolrun check {}`",
                first.unwrap_or_default(),
                source.display
            )
        }),
    }
}
