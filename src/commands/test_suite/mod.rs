//! `toolrun test`: every `tests:` case of the given specs, offline by default, on `--jobs`
//! worker threads. `runner` decides and runs each attempt, `expect` judges a trace, `select`
//! picks the cases, `progress` shows them on a terminal; the human report and JUnit file are
//! shared with `replay` (`commands::cases`, `commands::junit`), the results document is
//! `crate::results`.

pub(crate) mod expect;
pub(crate) mod progress;
pub(crate) mod runner;
pub(crate) mod select;

use super::cases::{report, CaseResult, Outcome as CaseOutcome, Tally};
use crate::cli::{NoTests, ReportFormat, TestArgs};
use crate::exit;
use crate::registry::{Registry, TestCase};
use crate::results::{Failure, FailureKind, Outcome, Results, Settings, TestResult};
use crate::setup::{Clock, Signals};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) use select::parse_partition;

pub(crate) fn run(args: TestArgs) -> i32 {
    match run_steps(&args) {
        Ok(code) | Err(code) => code,
    }
}

fn run_steps(args: &TestArgs) -> Result<i32, i32> {
    // A report that cannot be written is found before any test runs.
    let outputs = [
        (&args.junit, "--junit"),
        (&args.results, "--results"),
        (&args.setup.events, "--events"),
    ];
    for (path, flag) in outputs {
        if let Some(path) = path {
            crate::files::check_destination(path, flag, false).map_err(usage)?;
        }
    }
    let partition = args
        .partition
        .as_deref()
        .map(parse_partition)
        .transpose()
        .map_err(usage)?;
    let (registries, load_failures) = load_all(args)?;
    if let Some(model) = &args.model {
        for r in &registries {
            crate::setup::model_name(r, Some(model))
                .map_err(|e| usage(format!("--model: {e} ({})", r.spec_path.display())))?;
        }
    }
    let cases = select::select(&registries, args.filter.as_deref(), partition).map_err(usage)?;
    let now = Clock::parse(args.setup.now.as_deref())
        .map_err(usage)?
        .now_unix_ms();
    let all: Vec<&Registry> = registries.iter().collect();
    crate::setup::approvals(&all, &args.setup.approve).map_err(usage)?;
    let redactor = crate::setup::masking_for(&all);
    let events = Arc::new(match &args.setup.events {
        Some(path) => crate::setup::open_events(path, &redactor).map_err(usage)?,
        None => crate::events::Events::none(),
    });
    let started_ms = crate::builtins::datetime::now_unix_ms(None).unwrap_or(0);
    let jobs = args.jobs.map(|j| j as usize).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let rt = crate::setup::runtime();
    let signals = Signals::watch(&rt);
    let bar = progress::Progress::start(cases.len() as u64);
    let settings = Settings {
        model: args.model.clone(),
        repeat: args.repeat,
        pass_rate: args.pass_rate,
        record: args.record.map(|r| r.as_str().to_string()),
        filter: args.filter.clone(),
        partition: args.partition.clone(),
    };
    let env = Env {
        args,
        now,
        stop: &signals.stop,
        events: &events,
    };
    let tests = run_cases(&cases, jobs, &env, &bar, &rt);
    bar.finish();
    let mut results = Results::new(settings, started_ms);
    for r in &registries {
        results.add_spec(r);
    }
    for ((registry, case), test) in cases.iter().zip(tests) {
        let model = runner::model_for(&env.ctx(registry), case).ok();
        if let Some(def) = model.as_deref().and_then(|m| registry.model(m)) {
            results.add_model(def);
        }
        results.tests.push(test);
    }
    results.finish();
    if let Some(path) = &args.results {
        if let Err(e) = results.write(path, &redactor) {
            eprintln!("error: {e}");
            return Err(exit::FAILED);
        }
    }
    let mut rows: Vec<CaseResult> = load_failures;
    rows.extend(results.tests.iter().map(|t| case_row(t, args.repeat)));
    let code = match args.format {
        ReportFormat::Json => {
            let text = redactor
                .to_pretty(results.to_json(&redactor))
                .map_err(|leak| {
                    eprintln!("error: refusing to print the results: {leak} even after masking");
                    exit::FAILED
                })?;
            print!("{text}");
            let code = super::junit::write_requested(args.junit.as_deref(), &rows);
            code.max(if rows.iter().any(|r| r.outcome == CaseOutcome::Failed) {
                exit::FAILED
            } else {
                exit::SUCCESS
            })
        }
        ReportFormat::Human => {
            if args.repeat > 1 {
                let t = &results.totals;
                println!(
                    "runs: {}/{} passed ({:.1}%)",
                    t.attempts_passed,
                    t.attempts,
                    t.pass_rate * 100.0
                );
            }
            report(&rows, args.format, "tests")
                .max(super::junit::write_requested(args.junit.as_deref(), &rows))
        }
    };
    if let Some(code) = signals.interrupted_exit() {
        return Ok(code);
    }
    Ok(code.max(nothing_ran(&Tally::of(&rows), args.no_tests)))
}

/// What every case's [`runner::RunContext`] is made from.
struct Env<'a> {
    args: &'a TestArgs,
    now: i64,
    stop: &'a crate::setup::Interrupt,
    events: &'a Arc<crate::events::Events>,
}

impl<'a> Env<'a> {
    fn ctx(&self, registry: &'a Registry) -> runner::RunContext<'a> {
        let args = self.args;
        runner::RunContext {
            registry,
            model: args.model.as_deref(),
            record: args.record,
            // Asking for a model or a recording is asking for live calls.
            allow_network: args.allow_network || args.model.is_some() || args.record.is_some(),
            allow_exec: &args.setup.allow_exec,
            now_unix_ms: self.now,
            stop: self.stop,
            approve: &args.setup.approve,
            events: self.events,
        }
    }
}

fn usage(e: String) -> i32 {
    eprintln!("error: {e}");
    exit::USAGE
}

type Loaded = (Vec<Registry>, Vec<CaseResult>);

fn load_all(args: &TestArgs) -> Result<Loaded, i32> {
    let mut registries = Vec::new();
    let mut load_failures = Vec::new();
    // `test DIR` runs the tests of every spec below DIR, found as `check DIR` finds them.
    let specs = super::check::expand(&args.specs).map_err(usage)?;
    for path in &specs {
        match super::load_registry(path) {
            Ok(r) => registries.push(r),
            Err(code) if code == exit::USAGE => return Err(exit::USAGE),
            Err(_) => load_failures.push(CaseResult {
                suite: path.display().to_string(),
                name: "(spec)".into(),
                outcome: CaseOutcome::Failed,
                failures: vec!["the spec does not compile".into()],
                duration_ms: 0.0,
                runs: None,
            }),
        }
    }
    Ok((registries, load_failures))
}

/// Cases run on `jobs` threads, each with its own single-threaded runtime, taking the next case
/// as they finish one. Every case writes only its own slot, so the results keep the spec's
/// order and no trace depends on which thread ran it or when.
fn run_cases<'a>(
    cases: &[(&'a Registry, &'a TestCase)],
    jobs: usize,
    env: &Env<'a>,
    bar: &progress::Progress,
    signals: &tokio::runtime::Runtime,
) -> Vec<TestResult> {
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<TestResult>>> = cases.iter().map(|_| Mutex::new(None)).collect();
    let workers = jobs.clamp(1, cases.len().max(1));
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let rt = crate::setup::runtime();
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some((registry, case)) = cases.get(i) else {
                            break;
                        };
                        let ctx = env.ctx(registry);
                        let test = rt.block_on(run_case(&ctx, case, env.args));
                        bar.case_done(&test);
                        if let Ok(mut slot) = slots[i].lock() {
                            *slot = Some(test);
                        }
                    }
                })
            })
            .collect();
        // The main thread keeps the signal watchers running while the workers work.
        signals.block_on(async {
            while !handles.iter().all(|h| h.is_finished()) {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        });
    });
    slots
        .into_iter()
        .zip(cases)
        .map(|(slot, (registry, case))| {
            slot.into_inner().ok().flatten().unwrap_or_else(|| {
                TestResult::new(&registry.name, &case.name, &case.query, env.args.pass_rate)
                    .skipped("not run")
            })
        })
        .collect()
}

async fn run_case(ctx: &runner::RunContext<'_>, case: &TestCase, args: &TestArgs) -> TestResult {
    let mut test = TestResult::new(&ctx.registry.name, &case.name, &case.query, args.pass_rate);
    if runner::interrupted(ctx) {
        return test.skipped("not run: interrupted (Ctrl-C or SIGTERM)");
    }
    let model = match runner::model_for(ctx, case) {
        Ok(m) => m,
        Err(e) => {
            test.push(crate::results::Attempt::without_trace(
                1,
                crate::results::Source::Scripted,
                Failure::error(e),
                0.0,
            ));
            return test;
        }
    };
    test.model = Some(model.clone());
    test.fixture =
        runner::fixture_path(ctx.registry, case, &model).map(|p| p.display().to_string());
    let plan = runner::plan(ctx, case, &model);
    let price = ctx
        .registry
        .model(&model)
        .and_then(|d| d.price)
        .map(crate::results::PriceInfo::from);
    for n in 1..=args.repeat {
        if n > 1 && runner::interrupted(ctx) {
            break;
        }
        let run = runner::run_attempt(ctx, case, &model, &plan, n, price.as_ref()).await;
        test.push(run.attempt);
    }
    test
}

/// The row the human report and JUnit show for a test: its reasons, attempt by attempt.
fn case_row(t: &TestResult, repeat: u32) -> CaseResult {
    let mut failures = Vec::new();
    if let Some(reason) = &t.reason {
        failures.push(reason.clone());
    }
    for a in &t.attempts {
        for f in &a.failures {
            let text = describe(f);
            failures.push(if repeat > 1 {
                format!("run {}: {text}", a.attempt)
            } else {
                text
            });
        }
    }
    CaseResult {
        suite: t.spec.clone(),
        name: t.name.clone(),
        outcome: match t.outcome {
            Outcome::Passed => CaseOutcome::Passed,
            Outcome::Failed => CaseOutcome::Failed,
            Outcome::Skipped => CaseOutcome::Skipped,
        },
        failures,
        duration_ms: t.duration_ms,
        runs: (repeat > 1 && !t.attempts.is_empty()).then_some((t.passes, t.attempts.len() as u32)),
    }
}

fn describe(f: &Failure) -> String {
    match f.kind {
        FailureKind::Assertion => format!("assertion failed: {}", f.message),
        FailureKind::Divergence | FailureKind::Error => f.message.clone(),
    }
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
