//! One test case, start to verdict: replay its fixture or run its scripted model, then judge the
//! trace by its `expect:`. Offline means offline: without `--allow-network` nothing reaches the
//! network, and a test that would is a failure naming what and how to record it.

use super::expect::check_expectations;
use crate::engine::{Engine, RunOptions};
use crate::events::Events;
use crate::fixture::Tape;
use crate::net::Transport;
use crate::registry::{ModelKind, Registry, TestCase};
use crate::replay::Interrupt;
use crate::trace::Trace;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::commands::cases::Outcome;

/// What every case of one `toolrun test` invocation shares.
pub struct RunContext<'a> {
    pub registry: &'a Registry,
    pub allow_network: bool,
    pub now_unix_ms: i64,
    pub stop: &'a Interrupt,
}

pub struct CaseRun {
    pub outcome: Outcome,
    pub failures: Vec<String>,
    /// The run the verdict was made on (scripted or replayed), when one happened.
    pub trace: Option<Trace>,
}

impl CaseRun {
    fn failed(reason: impl Into<String>) -> CaseRun {
        CaseRun {
            outcome: Outcome::Failed,
            failures: vec![reason.into()],
            trace: None,
        }
    }

    fn judged(trace: Trace, mut failures: Vec<String>, case: &TestCase) -> CaseRun {
        failures.extend(
            check_expectations(&case.expect, &trace)
                .into_iter()
                .map(|f| format!("assertion failed: {f}")),
        );
        CaseRun {
            outcome: if failures.is_empty() {
                Outcome::Passed
            } else {
                Outcome::Failed
            },
            failures,
            trace: Some(trace),
        }
    }
}

pub async fn run_case(ctx: &RunContext<'_>, case: &TestCase) -> CaseRun {
    if ctx.stop.load(Ordering::SeqCst) {
        return CaseRun {
            outcome: Outcome::Skipped,
            failures: vec!["not run: interrupted (Ctrl-C or SIGTERM)".to_string()],
            trace: None,
        };
    }
    if let Some(fixture) = &case.fixture {
        return replay_case(ctx, case, fixture).await;
    }
    let model_name = match crate::session::model_name(ctx.registry, case.model.as_deref()) {
        Ok(m) => m,
        Err(e) => return CaseRun::failed(e),
    };
    if let Some(live) = live_endpoint(ctx.registry, &model_name) {
        if !ctx.allow_network {
            return CaseRun::failed(format!(
                "offline: the test would call live model `{model_name}` ({live}) and has no fixture\n{}",
                record_hint(ctx.registry, case, &model_name)
            ));
        }
    }
    scripted_or_live_case(ctx, case, &model_name).await
}

/// A fixture-backed test: the replay must match the recording, and the replayed run must meet
/// the test's `expect:` like any other run. Both kinds of failure are reported, each as itself.
async fn replay_case(ctx: &RunContext<'_>, case: &TestCase, fixture: &Path) -> CaseRun {
    if !fixture.is_file() {
        let model = crate::session::model_name(ctx.registry, case.model.as_deref())
            .unwrap_or_else(|_| "MODEL".into());
        return CaseRun::failed(format!(
            "fixture `{}` has not been recorded yet\n{}",
            fixture.display(),
            record_hint(ctx.registry, case, &model)
        ));
    }
    let recorded = match crate::replay::load_fixture(fixture) {
        Ok(f) => f,
        Err(e) => return CaseRun::failed(format!("cannot replay: {e}")),
    };
    let mut report = crate::replay::replay_fixture(
        &recorded,
        ctx.registry,
        fixture,
        false,
        Some(ctx.stop.clone()),
    )
    .await;
    // A test that states its query must be testing that query, not whatever was recorded.
    if !case.query.is_empty() && case.query != recorded.query {
        report.failures.insert(
            0,
            format!(
                "the test's query {:?} is not the recorded query {:?}; re-record the fixture",
                case.query, recorded.query
            ),
        );
    }
    let divergences: Vec<String> = report
        .failures
        .into_iter()
        .map(|f| {
            format!(
                "replay diverged from the recording `{}`: {f}",
                fixture.display()
            )
        })
        .collect();
    match report.trace {
        Some(trace) => CaseRun::judged(trace, divergences, case),
        None => CaseRun {
            outcome: Outcome::Failed,
            failures: divergences,
            trace: None,
        },
    }
}

async fn scripted_or_live_case(ctx: &RunContext<'_>, case: &TestCase, model_name: &str) -> CaseRun {
    // Offline, every secret is the mask: a real credential can neither be sent nor echoed into
    // the report, whatever the environment holds.
    let offline = !ctx.allow_network;
    let mut prepared =
        match crate::session::prepare_with(ctx.registry, Some(model_name), &case.query, offline) {
            Ok(p) => p,
            Err(e) => return CaseRun::failed(e),
        };
    // Offline, the transport is a tape with nothing on it: every request is refused before it
    // leaves the process, and remembered so the failure can name it.
    let tape = offline.then(|| Arc::new(Tape::offline()));
    let transport = match &tape {
        Some(t) => Transport::with_tape(t.clone()),
        None => Transport::live(),
    };
    let events = Events::none();
    let redactor = prepared.secrets.redactor();
    let engine = Engine {
        registry: ctx.registry,
        transport: &transport,
        events: &events,
        secrets: &prepared.secrets,
        redactor,
    };
    let opts = RunOptions {
        faults: case.faults.clone(),
        query: &case.query,
        model_name: &prepared.model_name,
        approvals: case.approve.iter().cloned().collect(),
        confirmer: None,
        now_unix_ms: ctx.now_unix_ms,
        interrupted: Some(ctx.stop.clone()),
    };
    let trace = engine.run(&mut prepared.model, opts).await;
    let refused = tape.map(|t| t.refused()).unwrap_or_default();
    if refused.is_empty() {
        return CaseRun::judged(trace, Vec::new(), case);
    }
    // The run was cut off from the network, so its expectations say nothing: report only why.
    let failures = refused
        .iter()
        .map(|(kind, source, request)| {
            let who = if kind == "model" { "model" } else { "tool" };
            format!(
                "offline: {who} `{source}` would reach the network ({request}); nothing was sent\n{}",
                record_hint(ctx.registry, case, model_name)
            )
        })
        .collect();
    CaseRun {
        outcome: Outcome::Failed,
        failures,
        trace: Some(trace),
    }
}

/// `kind at base_url` for live models; `None` for scripted ones.
fn live_endpoint(registry: &Registry, model: &str) -> Option<String> {
    match &registry.model(model)?.kind {
        ModelKind::Scripted(_) => None,
        ModelKind::OpenAi(live) | ModelKind::Anthropic(live) => Some(format!(
            "{} at {}",
            registry.model(model)?.kind.name(),
            live.base_url
        )),
    }
}

/// The exact command that records this test's fixture, and what to do with it. Shown, never run.
pub fn record_hint(registry: &Registry, case: &TestCase, model: &str) -> String {
    let fixture = case.fixture.clone().unwrap_or_else(|| {
        registry
            .spec_dir
            .join("fixtures")
            .join(format!("{}.json", file_stem(&case.name)))
    });
    if case.query.is_empty() {
        return format!(
            "the test has no `query:` to record with; add one, then record `{}` with `toolrun run {} --query ... --record {}`",
            fixture.display(),
            registry.spec_path.display(),
            fixture.display()
        );
    }
    let mut cmd = vec![
        "toolrun".to_string(),
        "run".into(),
        shell_word(&registry.spec_path.to_string_lossy()),
        "--query".into(),
        shell_word(&case.query),
        "--model".into(),
        shell_word(model),
    ];
    for tool in &case.approve {
        cmd.push("--approve".into());
        cmd.push(shell_word(tool));
    }
    cmd.push("--record".into());
    cmd.push(shell_word(&fixture.to_string_lossy()));
    let then = if case.fixture.is_some() {
        String::new()
    } else {
        // No fixture yet: the alternative to recording is running live on purpose.
        let rel = format!("fixtures/{}.json", file_stem(&case.name));
        format!(", then add `fixture: {rel}` to the test; or pass --allow-network to run it live")
    };
    format!("record it with: {}{then}", cmd.join(" "))
}

/// Test names become file names: anything outside a conservative set becomes `_`.
pub fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Quotes a word for display in a POSIX shell command line (single quotes when needed).
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("specs/a.yaml"), "specs/a.yaml");
        assert_eq!(shell_word("What is 2+2?"), "'What is 2+2?'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn test_names_become_safe_file_stems() {
        assert_eq!(file_stem("gain on aapl/x"), "gain_on_aapl_x");
    }
}
