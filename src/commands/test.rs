//! `toolrun test`: every `tests:` case of the given specs, concurrently, offline by default.

use super::cases::{progress_bar, report, CaseResult, Outcome};
use crate::cli::TestArgs;
use crate::engine::{Engine, RunOptions};
use crate::events::Events;
use crate::exit;
use crate::net::Transport;
use crate::registry::{Expect, ModelKind, Registry, TestCase};
use crate::trace::Trace;
use futures_util::StreamExt;
use serde_json::Value;
use std::time::Instant;

/// `K/N`, 1-based: shard K of N.
pub fn parse_partition(text: &str) -> Result<(u64, u64), String> {
    let err = || format!("--partition takes K/N with 1 <= K <= N, e.g. 2/4 (got `{text}`)");
    let (k, n) = text.split_once('/').ok_or_else(err)?;
    let (k, n) = (
        k.trim().parse::<u64>().map_err(|_| err())?,
        n.trim().parse::<u64>().map_err(|_| err())?,
    );
    if k == 0 || n == 0 || k > n {
        return Err(err());
    }
    Ok((k, n))
}

/// Sharding by a hash of the test's identity, not its position, so adding a test does not
/// reshuffle every other test between CI machines. FNV-1a: stable across platforms and releases.
pub fn shard_of(identity: &str, n: u64) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in identity.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h % n + 1
}

pub fn check_expectations(expect: &Expect, trace: &Trace) -> Vec<String> {
    let mut failures = Vec::new();
    let output = trace.final_output.as_deref().unwrap_or("");
    let called: Vec<&str> = trace.tool_results.iter().map(|r| r.name.as_str()).collect();
    if let Some(status) = &expect.status {
        if *status != trace.status {
            let why = trace
                .error
                .as_deref()
                .map(|e| format!(" ({}: {e})", trace.stop_reason))
                .unwrap_or_default();
            failures.push(format!(
                "expected status `{status}`, got `{}`{why}",
                trace.status.as_str()
            ));
        }
    }
    if let Some(reason) = &expect.stop_reason {
        if reason != &trace.stop_reason {
            failures.push(format!(
                "expected stop_reason `{reason}`, got `{}`",
                trace.stop_reason
            ));
        }
    }
    if let Some(list) = &expect.tool_calls {
        if list.iter().map(String::as_str).ne(called.iter().copied()) {
            failures.push(format!("expected tool calls {list:?}, got {called:?}"));
        }
    }
    for name in &expect.tool_calls_include {
        if !called.contains(&name.as_str()) {
            failures.push(format!("expected a call to `{name}`, got {called:?}"));
        }
    }
    for name in &expect.tool_calls_exclude {
        if called.contains(&name.as_str()) {
            failures.push(format!("expected no call to `{name}`, got {called:?}"));
        }
    }
    for (i, wanted) in expect.arguments.iter().enumerate() {
        match trace.tool_results.get(i) {
            None => failures.push(format!(
                "expected arguments {} for call {}, but only {} call(s) ran",
                Value::Object(wanted.clone()),
                i + 1,
                called.len()
            )),
            Some(r) if !crate::tools::mock::is_subset(wanted, &r.arguments) => {
                failures.push(format!(
                    "call {} (`{}`): expected arguments to include {}, got {}",
                    i + 1,
                    r.name,
                    Value::Object(wanted.clone()),
                    r.arguments
                ))
            }
            Some(_) => {}
        }
    }
    if let Some(kinds) = &expect.error_kinds {
        let mut got: Vec<&str> = trace.tool_errors.iter().map(|e| e.kind.as_str()).collect();
        got.sort_unstable();
        got.dedup();
        let mut want: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        want.sort_unstable();
        want.dedup();
        if got != want {
            failures.push(format!("expected error kinds {want:?}, got {got:?}"));
        }
    }
    for s in &expect.output_contains {
        if !output.contains(s.as_str()) {
            failures.push(format!(
                "expected the output to contain {s:?}, got {output:?}"
            ));
        }
    }
    for s in &expect.output_not_contains {
        if output.contains(s.as_str()) {
            failures.push(format!(
                "expected the output not to contain {s:?}, got {output:?}"
            ));
        }
    }
    if let Some(re) = &expect.output_matches {
        if !re.is_match(output) {
            failures.push(format!(
                "expected the output to match /{}/, got {output:?}",
                re.as_str()
            ));
        }
    }
    if let Some(max) = expect.max_tool_calls {
        if trace.tool_call_count > max {
            failures.push(format!(
                "expected at most {max} tool calls, got {}",
                trace.tool_call_count
            ));
        }
    }
    failures
}

fn is_live(registry: &Registry, model: &str) -> bool {
    registry
        .model(model)
        .is_some_and(|m| !matches!(m.kind, ModelKind::Scripted(_)))
}

async fn run_case(
    registry: &Registry,
    case: &TestCase,
    transport: &Transport,
    now: i64,
    stop: &crate::replay::Interrupt,
) -> (Outcome, Vec<String>) {
    if stop.load(std::sync::atomic::Ordering::SeqCst) {
        return (Outcome::Skipped, vec!["not run: interrupted".to_string()]);
    }
    if let Some(fixture) = &case.fixture {
        return match crate::replay::replay_file(fixture, Some(registry), false, Some(stop.clone()))
            .await
        {
            Ok(report) if report.failures.is_empty() => (Outcome::Passed, Vec::new()),
            Ok(report) => (Outcome::Failed, report.failures),
            Err(e) => (Outcome::Failed, vec![e]),
        };
    }
    let model_name = match crate::session::model_name(registry, case.model.as_deref()) {
        Ok(m) => m,
        Err(e) => return (Outcome::Failed, vec![e]),
    };
    if is_live(registry, &model_name) {
        return (Outcome::Skipped, vec![format!("model `{model_name}` is live; record a fixture and name it with `fixture:` to test offline")]);
    }
    let mut prepared =
        match crate::session::prepare_with(registry, Some(&model_name), &case.query, true) {
            Ok(p) => p,
            Err(e) => return (Outcome::Failed, vec![e]),
        };
    let events = Events::none();
    let redactor = prepared.secrets.redactor();
    let engine = Engine {
        registry,
        transport,
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
        now_unix_ms: now,
        interrupted: Some(stop.clone()),
    };
    let trace = engine.run(&mut prepared.model, opts).await;
    let failures = check_expectations(&case.expect, &trace);
    if failures.is_empty() {
        (Outcome::Passed, failures)
    } else {
        (Outcome::Failed, failures)
    }
}

pub fn run(args: TestArgs) -> i32 {
    let partition = match args.partition.as_deref().map(parse_partition).transpose() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let mut registries = Vec::new();
    let mut load_failures = Vec::new();
    let mut worst_load = exit::SUCCESS;
    for path in &args.specs {
        match super::load_registry(path) {
            Ok(r) => registries.push(r),
            Err(code) => {
                worst_load = worst_load.max(code);
                load_failures.push(CaseResult {
                    suite: path.display().to_string(),
                    name: "(spec)".into(),
                    outcome: Outcome::Failed,
                    failures: vec!["the spec does not compile".into()],
                    duration_ms: 0.0,
                });
            }
        }
    }
    if worst_load == exit::USAGE {
        return exit::USAGE;
    }
    let mut cases: Vec<(&Registry, &TestCase)> = Vec::new();
    for r in &registries {
        for c in &r.tests {
            if args.filter.as_deref().is_some_and(|f| !c.name.contains(f)) {
                continue;
            }
            if let Some((k, n)) = partition {
                if shard_of(&format!("{}::{}", r.name, c.name), n) != k {
                    continue;
                }
            }
            cases.push((r, c));
        }
    }
    let now = match crate::session::now_unix_ms(None) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let transport = Transport::live();
    let bar = progress_bar(cases.len() as u64);
    let rt = crate::session::runtime();
    let (stop, sigint) = crate::session::watch_signals(&rt);
    let mut results: Vec<CaseResult> = rt.block_on(async {
        futures_util::stream::iter(cases.iter().enumerate().map(|(i, (registry, case))| {
            let transport = &transport;
            let bar = &bar;
            let stop = &stop;
            async move {
                let started = Instant::now();
                let (outcome, failures) = run_case(registry, case, transport, now, stop).await;
                if let Some(b) = bar {
                    b.inc(1);
                }
                (
                    i,
                    CaseResult {
                        suite: registry.name.clone(),
                        name: case.name.clone(),
                        outcome,
                        failures,
                        duration_ms: crate::trace::millis(started.elapsed()),
                    },
                )
            }
        }))
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .fold(vec![None; cases.len()], |mut acc, (i, r)| {
            acc[i] = Some(r);
            acc
        })
        .into_iter()
        .flatten()
        .collect()
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    results.splice(0..0, load_failures);
    let code = report(&results, args.format, args.junit.as_deref(), "tests");
    super::interrupted_exit(&stop, &sigint).unwrap_or(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_stable_and_cover_everything() {
        assert_eq!(parse_partition("2/4"), Ok((2, 4)));
        assert!(parse_partition("0/4").is_err());
        assert!(parse_partition("5/4").is_err());
        let names: Vec<String> = (0..100).map(|i| format!("s::t{i}")).collect();
        let total: usize = (1..=3)
            .map(|k| names.iter().filter(|n| shard_of(n, 3) == k).count())
            .sum();
        assert_eq!(total, 100);
        assert_eq!(shard_of("s::t1", 3), shard_of("s::t1", 3));
    }
}
