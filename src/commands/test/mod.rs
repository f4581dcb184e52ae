//! `toolrun test`: every `tests:` case of the given specs, concurrently, offline by default.
//! `runner` decides each case, `expect` judges a trace, `select` picks the cases; the report,
//! JUnit file and progress bar are shared with `replay` (`commands::cases`, `commands::junit`).

pub mod expect;
pub mod runner;
pub mod select;

use super::cases::{progress_bar, report, CaseResult, Outcome, Tally};
use crate::cli::{NoTests, TestArgs};
use crate::exit;
use crate::registry::{Registry, TestCase};
use futures_util::StreamExt;
use std::time::Instant;

pub use expect::check_expectations;
pub use select::{parse_partition, shard_of};

pub fn run(args: TestArgs) -> i32 {
    if let Some(path) = &args.junit {
        if let Err(e) = crate::files::check_destination(path, "--junit", false) {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    }
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
    let cases = match select::select(&registries, args.filter.as_deref(), partition) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let now = match crate::session::now_unix_ms(None) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let bar = progress_bar(cases.len() as u64);
    let rt = crate::session::runtime();
    let (stop, sigint) = crate::session::watch_signals(&rt);
    let allow_network = args.allow_network;
    let mut results: Vec<CaseResult> = rt.block_on(async {
        futures_util::stream::iter(cases.iter().enumerate().map(
            |(i, (registry, case)): (usize, &(&Registry, &TestCase))| {
                let bar = &bar;
                let stop = &stop;
                async move {
                    let started = Instant::now();
                    let ctx = runner::RunContext {
                        registry,
                        allow_network,
                        now_unix_ms: now,
                        stop,
                    };
                    let run = runner::run_case(&ctx, case).await;
                    if let Some(b) = bar {
                        b.inc(1);
                    }
                    (
                        i,
                        CaseResult {
                            suite: registry.name.clone(),
                            name: case.name.clone(),
                            outcome: run.outcome,
                            failures: run.failures,
                            duration_ms: crate::trace::millis(started.elapsed()),
                        },
                    )
                }
            },
        ))
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
    if let Some(code) = super::interrupted_exit(&stop, &sigint) {
        return code;
    }
    code.max(nothing_ran(&Tally::of(&results), args.no_tests))
}

/// A suite in which nothing ran proved nothing: by default that is a failure (as nextest does),
/// unless the user said an empty run is expected.
fn nothing_ran(tally: &Tally, policy: NoTests) -> i32 {
    if tally.any_ran() {
        return exit::SUCCESS;
    }
    let what = if tally.skipped > 0 {
        format!(
            "no test ran ({} skipped; the reasons are listed above)",
            tally.skipped
        )
    } else {
        "no test ran: the selection is empty".to_string()
    };
    match policy {
        NoTests::Pass => exit::SUCCESS,
        NoTests::Warn => {
            eprintln!("warning: {what}");
            exit::SUCCESS
        }
        NoTests::Fail => {
            eprintln!("error: {what}; pass --no-tests=warn or --no-tests=pass if that is expected");
            exit::FAILED
        }
    }
}
