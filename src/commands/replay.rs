//! `toolrun replay`: many fixtures, concurrently, offline; exit 1 on any divergence, 2 when a
//! fixture cannot be read.

use super::cases::{progress_bar, report, CaseResult, Outcome};
use crate::cli::ReplayArgs;
use crate::exit;
use crate::registry::Registry;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

pub(crate) fn run(args: ReplayArgs) -> i32 {
    if let Some(path) = &args.junit {
        if let Err(e) = crate::files::check_destination(path, "--junit", false) {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    }
    // Each spec is compiled once, however many fixtures were recorded from it.
    let mut specs: HashMap<PathBuf, Result<Registry, String>> = HashMap::new();
    type Job = (PathBuf, Result<(crate::fixture::Fixture, PathBuf), String>);
    let mut jobs: Vec<Job> = Vec::new();
    // Fixtures that are not JSON, or not a fixture this toolrun reads: reported with the rest,
    // but unreadable input exits 2, as it does for every command.
    let mut unreadable = 0usize;
    for path in &args.fixtures {
        if let Err(e) = crate::files::regular_file(path) {
            eprintln!(
                "error: fixture `{}` {}",
                crate::term::visible(&path.display().to_string()),
                e.describe()
            );
            return exit::USAGE;
        }
        let loaded = crate::fixture::load_fixture(path);
        unreadable += usize::from(loaded.is_err());
        let job = loaded.and_then(|fx| {
            let spec = match &args.spec {
                Some(s) => s.clone(),
                None => crate::fixture::spec_path_for(path, &fx)?,
            };
            let key = spec.canonicalize().unwrap_or(spec.clone());
            specs
                .entry(key.clone())
                .or_insert_with(|| crate::replay::load_quiet(&spec));
            Ok((fx, key))
        });
        jobs.push((path.clone(), job));
    }
    let bar = progress_bar(jobs.len() as u64);
    let rt = crate::setup::runtime();
    let signals = crate::setup::Signals::watch(&rt);
    let stop = &signals.stop;
    let update = args.update;
    let mut updated = 0;
    let results: Vec<(usize, CaseResult, bool)> = rt.block_on(async {
        futures_util::stream::iter(jobs.iter().enumerate().map(|(i, (path, job))| {
            let specs = &specs;
            let bar = &bar;
            async move {
                let started = Instant::now();
                let (outcome, failures, was_updated) = match job {
                    _ if stop.load(std::sync::atomic::Ordering::SeqCst) => (
                        Outcome::Skipped,
                        vec!["not replayed: interrupted".to_string()],
                        false,
                    ),
                    Err(e) => (Outcome::Failed, vec![e.clone()], false),
                    Ok((fixture, key)) => match specs.get(key) {
                        // A served session needs a registry of its own: the server owns it.
                        Some(Ok(_)) if fixture.is_served_session() => {
                            match crate::replay::load_quiet(key) {
                                Ok(registry) => {
                                    let r = crate::mcp_server::replay::replay_session(
                                        fixture, registry, path, update,
                                    )
                                    .await;
                                    (outcome(&r), r.failures, r.updated)
                                }
                                Err(e) => (Outcome::Failed, vec![e], false),
                            }
                        }
                        Some(Ok(registry)) => {
                            replay_run(fixture, (registry, path), update, stop).await
                        }
                        Some(Err(e)) => (Outcome::Failed, vec![e.clone()], false),
                        None => (Outcome::Failed, vec!["spec not loaded".into()], false),
                    },
                };
                if let Some(b) = bar {
                    b.inc(1);
                }
                let result = CaseResult {
                    suite: "replay".into(),
                    name: path.display().to_string(),
                    outcome,
                    failures,
                    duration_ms: crate::trace::millis(started.elapsed()),
                    runs: None,
                    properties: Vec::new(),
                    notes: Vec::new(),
                    regression: None,
                };
                (i, result, was_updated)
            }
        }))
        .buffer_unordered(16)
        .collect()
        .await
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut ordered: Vec<Option<CaseResult>> = vec![None; jobs.len()];
    for (i, r, was_updated) in results {
        updated += usize::from(was_updated);
        ordered[i] = Some(r);
    }
    let ordered: Vec<CaseResult> = ordered.into_iter().flatten().collect();
    if updated > 0 {
        eprintln!("updated the recorded trace of {updated} fixture(s)");
    }
    let code = report(&ordered, args.format, "fixtures").max(super::junit::write_requested(
        args.junit.as_deref(),
        &ordered,
    ));
    signals
        .interrupted_exit()
        .unwrap_or_else(|| with_unreadable(code, unreadable))
}

/// Unreadable input exits 2 whatever became of the other fixtures.
fn with_unreadable(code: i32, unreadable: usize) -> i32 {
    if unreadable == 0 {
        return code;
    }
    eprintln!("error: {unreadable} fixture(s) could not be read");
    exit::USAGE
}

fn outcome(report: &crate::replay::ReplayReport) -> Outcome {
    if report.failures.is_empty() {
        Outcome::Passed
    } else {
        Outcome::Failed
    }
}

/// Replays one recorded run and exports it (when export is on).
async fn replay_run(
    fixture: &crate::fixture::Fixture,
    (registry, path): (&crate::registry::Registry, &std::path::Path),
    update: bool,
    stop: &crate::setup::Interrupt,
) -> (Outcome, Vec<String>, bool) {
    let r =
        crate::replay::replay_fixture(fixture, registry, path, update, Some(stop.clone())).await;
    let file = path.display().to_string();
    crate::telemetry::export_replay(r.trace.as_ref(), (&file, fixture), registry, &r.failures);
    (outcome(&r), r.failures, r.updated)
}
