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
use crate::cli::{FailOn, NoTests, ReportFormat, TestArgs, TestFormat};
use crate::exit;
use crate::registry::{Registry, TestCase};
use crate::results::{Failure, FailureKind, Outcome, Results, Settings, TestResult};
use crate::setup::{Clock, Signals};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) use select::parse_partition;

pub(crate) fn run(args: TestArgs) -> i32 {
    // Before anything is printed: every line but toolrun's own annotations is defused.
    if args.format == TestFormat::Github {
        crate::term::github_mode();
    }
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
    let fail_on = fail_on(args).map_err(usage)?;
    // An unreadable baseline is found before any test runs, like an unwritable report.
    let baseline = match &args.baseline {
        Some(path) => Some(Results::load(path).map_err(usage)?),
        None => None,
    };
    let partition = args
        .partition
        .as_deref()
        .map(parse_partition)
        .transpose()
        .map_err(usage)?;
    let sample = args.sample.map(|n| (n, args.seed.unwrap_or(0)));
    // Only the rows of data tests that will run are kept as tests.
    let pick = crate::registry::RowPick {
        keep: true,
        filter: args.filter.clone(),
        sample,
        partition,
    };
    let (registries, load_failures) = load_all(args, &pick)?;
    for model in &args.model {
        for r in &registries {
            crate::setup::model_name(r, Some(model))
                .map_err(|e| usage(format!("--model: {e} ({})", r.spec_path.display())))?;
        }
    }
    let selected = select::select(&registries, args.filter.as_deref(), partition).map_err(usage)?;
    // A model matrix runs the selection once per model, model by model.
    let models: Vec<Option<&str>> = if args.model.is_empty() {
        vec![None]
    } else {
        args.model.iter().map(|m| Some(m.as_str())).collect()
    };
    let cases: Vec<Case> = models
        .iter()
        .flat_map(|m| selected.iter().map(move |(r, c)| (*r, *c, *m)))
        .collect();
    let now = Clock::parse(args.setup.now.as_deref())
        .map_err(usage)?
        .now_unix_ms();
    let all: Vec<&Registry> = registries.iter().collect();
    crate::setup::approvals(&all, &args.setup.approve).map_err(usage)?;
    let redactor = crate::setup::masking_for(&all);
    let mut events = match &args.setup.events {
        Some(path) => crate::setup::open_events(path, &redactor).map_err(usage)?,
        None => crate::events::Events::none(),
    };
    // Made after the last usage error: a bar dropped unfinished stays drawn.
    let bar = progress::Progress::start(cases.len() as u64);
    bar.follow(&mut events);
    let events = Arc::new(events);
    let started_ms = crate::builtins::datetime::now_unix_ms(None).unwrap_or(0);
    let jobs = args.jobs.map(|j| j as usize).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let rt = crate::setup::runtime();
    let signals = Signals::watch(&rt);
    let tree = crate::telemetry::test_tree(cases.len());
    let env = Env {
        args,
        now,
        stop: &signals.stop,
        events: &events,
        spans: tree.as_ref(),
    };
    let tests = run_cases(&cases, jobs, &env, &bar, &rt);
    bar.finish();
    let mut results = Results::new(settings(args), started_ms);
    for r in &registries {
        results.add_spec(r);
    }
    for ((registry, case, model), test) in cases.iter().zip(tests) {
        let model = runner::model_for(&env.ctx(registry, *model), case).ok();
        if let Some(def) = model.as_deref().and_then(|m| registry.model(m)) {
            results.add_model(def);
        }
        results.tests.push(test);
    }
    results.finish();
    let comparison = baseline
        .as_ref()
        .map(|b| crate::compare::with_baseline(b, &results));
    // The document says what changed too, for tools that gate on it (a CI action, a bot).
    if let (Some(c), Some(path)) = (&comparison, &args.baseline) {
        results.baseline = Some(crate::compare::summary(c, &path.display().to_string()));
    }
    if let Some(tree) = tree {
        crate::telemetry::export_test_tree(tree, &results.to_json(&redactor), &redactor);
    }
    let code = finish(
        args,
        (&results, &cases),
        load_failures,
        &redactor,
        comparison,
        fail_on,
    )?;
    if let Some(code) = signals.interrupted_exit() {
        return Ok(code);
    }
    Ok(code)
}

/// One run of one test: its spec, the test, and the matrix model it runs with (if any).
type Case<'a> = (&'a Registry, &'a TestCase, Option<&'a str>);

fn settings(args: &TestArgs) -> Settings {
    Settings {
        model: (args.model.len() == 1).then(|| args.model[0].clone()),
        models: if args.model.len() > 1 {
            args.model.clone()
        } else {
            Vec::new()
        },
        repeat: args.repeat,
        pass_rate: args.pass_rate,
        record: args.record.map(|r| r.as_str().to_string()),
        filter: args.filter.clone(),
        partition: args.partition.clone(),
        sample: args.sample,
        seed: args.sample.map(|_| args.seed.unwrap_or(0)),
    }
}

/// Writes the results, prints the report (after the baseline's changes) and decides the exit
/// code by `--fail-on`. `results.tests` are the `cases`, in order.
fn finish(
    args: &TestArgs,
    (results, cases): (&Results, &[Case]),
    load_failures: Vec<CaseResult>,
    redactor: &crate::redact::Redactor,
    comparison: Option<crate::compare::Comparison>,
    fail_on: FailOn,
) -> Result<i32, i32> {
    if let Some(path) = &args.results {
        if let Err(e) = results.write(path, redactor) {
            eprintln!("error: {}", crate::term::visible(&e));
            return Err(exit::FAILED);
        }
    }
    let spec_failed = !load_failures.is_empty();
    let matrix = args.model.len() > 1;
    let mut rows: Vec<CaseResult> = load_failures;
    rows.extend(
        results
            .tests
            .iter()
            .map(|t| case_row(t, (args.repeat, matrix), comparison.as_ref(), redactor)),
    );
    // With a baseline, failures it already had do not block: only regressions (and a spec
    // that does not compile, which no baseline can excuse).
    let failed = match fail_on {
        FailOn::Failure => rows.iter().any(|r| r.outcome == CaseOutcome::Failed),
        FailOn::Regression => spec_failed || rows.iter().any(|r| r.regression.is_some()),
    };
    let verdict = if failed { exit::FAILED } else { exit::SUCCESS };
    let block = comparison
        .as_ref()
        .zip(args.baseline.as_deref())
        .map(|(c, path)| baseline_block(c, path));
    let code = match args.format {
        TestFormat::Json => {
            let text = redactor
                .to_pretty(results.to_json(redactor))
                .map_err(|leak| {
                    eprintln!("error: refusing to print the results: {leak} even after masking");
                    exit::FAILED
                })?;
            print!("{text}");
            // stdout holds the document: the changes go to stderr.
            eprint!("{}", block.unwrap_or_default());
            super::junit::write_requested(args.junit.as_deref(), &rows).max(verdict)
        }
        TestFormat::Human | TestFormat::Github => {
            if args.format == TestFormat::Github {
                annotate(cases, &rows, fail_on);
            }
            print!("{}", block.unwrap_or_default());
            if args.repeat > 1 {
                let t = &results.totals;
                println!(
                    "runs: {}/{} passed ({:.1}%)",
                    t.attempts_passed,
                    t.attempts,
                    t.pass_rate * 100.0
                );
            }
            report(&rows, ReportFormat::Human, "tests");
            super::junit::write_requested(args.junit.as_deref(), &rows).max(verdict)
        }
    };
    Ok(code.max(nothing_ran(&Tally::of(&rows), args.no_tests)))
}

/// `--format github`: one workflow command per failing test, at the test's `name:` in its spec
/// (a spec that does not compile: on its file), its reasons the message. An error, or with
/// `--fail-on regression` a warning for a failure the baseline already had (it does not fail
/// the run). `rows` are the load failures first, then one per case in the order of `cases`.
fn annotate(cases: &[Case], rows: &[CaseResult], fail_on: FailOn) {
    let load_failures = rows.len().saturating_sub(cases.len());
    let places = (0..load_failures)
        .map(|_| None)
        .chain(cases.iter().map(|(r, c, _)| Some((*r, *c))));
    for (row, place) in rows.iter().zip(places) {
        if row.outcome != CaseOutcome::Failed {
            continue;
        }
        let reasons = row.failures.join("\n");
        let (file, span, title, blocks) = match place {
            Some((registry, case)) => (
                registry.spec_path.display().to_string(),
                Some(case.span),
                format!("test {}::{} failed", row.suite, row.name),
                fail_on == FailOn::Failure || row.regression.is_some(),
            ),
            None => (
                row.suite.clone(),
                None,
                "spec does not compile".into(),
                true,
            ),
        };
        let kind = if blocks { "error" } else { "warning" };
        println!(
            "{}",
            crate::diag::github_command(kind, Some(&file), span, &title, &reasons)
        );
    }
}

/// What every case's [`runner::RunContext`] is made from.
struct Env<'a> {
    args: &'a TestArgs,
    now: i64,
    stop: &'a crate::setup::Interrupt,
    events: &'a Arc<crate::events::Events>,
    /// With export on, the spans each case's attempts are sent under.
    spans: Option<&'a crate::telemetry::results::Tree>,
}

impl<'a> Env<'a> {
    fn ctx(&self, registry: &'a Registry, model: Option<&'a str>) -> runner::RunContext<'a> {
        let args = self.args;
        runner::RunContext {
            registry,
            model,
            record: args.record,
            // Asking for a model or a recording is asking for live calls.
            allow_network: args.allow_network || model.is_some() || args.record.is_some(),
            exec: &args.setup.exec,
            now_unix_ms: self.now,
            stop: self.stop,
            approve: &args.setup.approve,
            events: self.events,
            span: None,
        }
    }
}

fn usage(e: String) -> i32 {
    eprintln!("error: {}", crate::term::visible(&e));
    exit::USAGE
}

type Loaded = (Vec<Registry>, Vec<CaseResult>);

fn load_all(args: &TestArgs, pick: &crate::registry::RowPick) -> Result<Loaded, i32> {
    let mut registries = Vec::new();
    let mut load_failures = Vec::new();
    // `test DIR` runs the tests of every spec below DIR, found as `check DIR` finds them.
    let specs = super::check::expand(&args.specs).map_err(usage)?;
    for path in &specs {
        match super::load_registry_picking(path, pick) {
            Ok(r) => registries.push(r),
            Err(code) if code == exit::USAGE => return Err(exit::USAGE),
            Err(_) => load_failures.push(CaseResult {
                suite: path.display().to_string(),
                name: "(spec)".into(),
                outcome: CaseOutcome::Failed,
                failures: vec!["the spec does not compile".into()],
                duration_ms: 0.0,
                runs: None,
                regression: None,
                properties: Vec::new(),
                notes: Vec::new(),
            }),
        }
    }
    Ok((registries, load_failures))
}

/// Cases run on `jobs` threads, each with its own single-threaded runtime, taking the next case
/// as they finish one. Every case writes only its own slot, so the results keep the spec's
/// order and no trace depends on which thread ran it or when.
fn run_cases<'a>(
    cases: &[Case<'a>],
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
                        let Some((registry, case, model)) = cases.get(i) else {
                            break;
                        };
                        let mut ctx = env.ctx(registry, *model);
                        ctx.span = env.spans.and_then(|t| t.test_parent(i));
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
        .map(|(slot, (registry, case, _))| {
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
    // A data row that is not data fails alone; the spec's other tests run.
    if let Some(why) = case.data.as_ref().and_then(|d| d.broken.as_ref()) {
        test.push(crate::results::Attempt::without_trace(
            1,
            crate::results::Source::Scripted,
            Failure::error(why.clone()),
            0.0,
        ));
        return test;
    }
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
        let attempt = runner::run_attempt(ctx, case, &model, &plan, n, price.as_ref()).await;
        test.push(attempt);
    }
    test
}

/// `--fail-on`, defaulting by whether there is a baseline to compare with.
fn fail_on(args: &TestArgs) -> Result<FailOn, String> {
    match (args.fail_on, &args.baseline) {
        (Some(FailOn::Regression), None) => Err(
            "--fail-on regression needs --baseline PREV.json: a regression is a fall since the baseline"
                .into(),
        ),
        (Some(f), _) => Ok(f),
        (None, Some(_)) => Ok(FailOn::Regression),
        (None, None) => Ok(FailOn::Failure),
    }
}

/// What changed since the baseline, regressions first; printed before the tests.
fn baseline_block(c: &crate::compare::Comparison, path: &std::path::Path) -> String {
    use crate::compare::{describe, Change};
    use std::fmt::Write;
    let regressions = c.of(Change::Regression).count();
    let mut out = format!(
        "baseline {}: {regressions} regression(s), {} fix(es); {} test(s) in both: {} passed only in the baseline, {} only now: {}\n",
        path.display(),
        c.of(Change::Fixed).count(),
        c.paired,
        c.passed_only_before,
        c.passed_only_after,
        c.verdict
    );
    for (change, tag) in [
        (Change::Regression, "REGRESSION"),
        (Change::Worse, "worse"),
        (Change::Fixed, "fixed"),
        (Change::Better, "better"),
    ] {
        for t in c.of(change) {
            let _ = writeln!(out, "  {tag} {}: {}", t.test, describe(t));
        }
    }
    for t in &c.new {
        let _ = writeln!(out, "  new {t}: not in the baseline");
    }
    for t in &c.gone {
        let _ = writeln!(out, "  gone {t}: in the baseline, not run now");
    }
    crate::term::visible(&out).into_owned()
}

/// The row the human report and JUnit show for a test: its reasons, attempt by attempt.
fn case_row(
    t: &TestResult,
    (repeat, matrix): (u32, bool),
    baseline: Option<&crate::compare::Comparison>,
    redactor: &crate::redact::Redactor,
) -> CaseResult {
    // In a matrix the comparison names each test with its model, as the rows do.
    let id = match (&t.model, matrix) {
        (Some(m), true) => format!("{} [{m}]", crate::compare::id(t)),
        _ => crate::compare::id(t),
    };
    let regression = baseline
        .and_then(|c| c.change_of(&id))
        .filter(|c| c.change == crate::compare::Change::Regression)
        .map(|c| {
            format!(
                "regression since the baseline: {}",
                crate::compare::describe(c)
            )
        });
    let mut failures: Vec<String> = regression.iter().cloned().collect();
    if let Some(reason) = &t.reason {
        failures.push(reason.clone());
    }
    for a in &t.attempts {
        let stopped = stop_line(a, redactor);
        for text in a.failures.iter().map(describe).chain(stopped) {
            failures.push(if repeat > 1 {
                format!("run {}: {text}", a.attempt)
            } else {
                text
            });
        }
    }
    CaseResult {
        suite: t.spec.clone(),
        // In a model matrix each test appears once per model.
        name: match (&t.model, matrix) {
            (Some(m), true) => format!("{} [{m}]", t.name),
            _ => t.name.clone(),
        },
        outcome: match t.outcome {
            Outcome::Passed => CaseOutcome::Passed,
            Outcome::Failed => CaseOutcome::Failed,
            Outcome::Skipped => CaseOutcome::Skipped,
        },
        failures,
        duration_ms: t.duration_ms,
        runs: (repeat > 1 && !t.attempts.is_empty()).then_some((t.passes, t.attempts.len() as u32)),
        regression,
        properties: budget_properties(t)
            .into_iter()
            .chain(turn_properties(t))
            .collect(),
        notes: budget_lines(t),
    }
}

/// Each turn of a conversation's last attempt as a JUnit property: `turn.2` = `ok: the answer`.
fn turn_properties(t: &TestResult) -> Vec<(String, String)> {
    let Some(last) = t.attempts.last() else {
        return Vec::new();
    };
    last.turns
        .iter()
        .map(|turn| {
            let outcome = turn.answer.as_deref().or(turn.error.as_deref());
            (
                format!("turn.{}", turn.turn),
                format!("{}: {}", turn.status.as_str(), outcome.unwrap_or("")),
            )
        })
        .collect()
}

/// Each budget of the test (its `expect`'s and each turn's), the closest an attempt came to it,
/// as a JUnit property: `budget.max_tokens` = `30 / 4,000 tokens (1%)`, `turn.2.budget.max_tokens`.
fn budget_properties(t: &TestResult) -> Vec<(String, String)> {
    crate::report::budgets::closest(&t.attempts)
        .iter()
        .map(|c| {
            let turn = c.turn.map(|n| format!("turn.{n}.")).unwrap_or_default();
            (
                format!("{turn}budget.{}", c.budget.budget),
                crate::report::budgets::text(c.budget),
            )
        })
        .collect()
}

/// The lines under a test in the terminal: each budget and how close the test came to it; of a
/// test that passed, only the budgets it went over (an attempt, within `--pass-rate`) or came
/// close to, so a passing suite's report is not a budget line per test. The results file, JUnit
/// and the reports keep every figure.
fn budget_lines(t: &TestResult) -> Vec<String> {
    let failed = t.outcome == Outcome::Failed;
    crate::report::budgets::closest(&t.attempts)
        .iter()
        .filter(|c| failed || c.close())
        .map(|c| {
            let over = if c.over() { " over budget" } else { "" };
            format!(
                "budget {}: {}{over}",
                c.label(),
                crate::report::budgets::text(c.budget)
            )
        })
        .collect()
}

/// Why a failed attempt's run stopped, when it ended in an error (`mcp_error`, `model_error`, a
/// limit) that its failures do not already quote: an `expect` on the answer says only that the
/// answer was wrong, while what to do about it (log in, raise a limit) is in the error.
/// `the run stopped (mcp_error): ...`, or `turn 2 stopped (...)` in a conversation; masked as
/// the results file is. Not when the attempt failed to run as planned (offline, a replay that
/// diverged): that failure is the reason, and the run's error only its echo.
fn stop_line(a: &crate::results::Attempt, redactor: &crate::redact::Redactor) -> Option<String> {
    let error = a.error.as_deref().filter(|e| !e.trim().is_empty())?;
    let judged = a
        .failures
        .iter()
        .all(|f| f.kind == FailureKind::Assertion && !f.message.contains(error));
    if a.outcome != Outcome::Failed || !judged {
        return None;
    }
    let what = match a.turns.last() {
        Some(turn) => format!("turn {}", turn.turn),
        None => "the run".to_string(),
    };
    let reason = a.stop_reason.map(|r| format!(" ({r})")).unwrap_or_default();
    Some(format!("{what} stopped{reason}: {}", redactor.mask(error)))
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
