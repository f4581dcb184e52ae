//! One attempt of one test case, start to verdict: decide how it runs (replay its fixture, record
//! it, run its scripted model, or run a live model on purpose), run it, and judge the trace by
//! its `expect:`. Offline means offline: without `--allow-network`, `--model` or `--record`,
//! nothing reaches the network, and a test that would is a failure naming what and how to record.

use super::expect::check_expectations;
use crate::cli::RecordWhich;
use crate::events::Events;
use crate::fixture::{Fixture, Tape};
use crate::registry::{ModelKind, Registry, TestCase};
use crate::results::{Attempt, Failure, PriceInfo, Source};
use crate::setup::{Clock, EventsTo, Inputs, Interrupt, ModelChoice, Network, SecretSource, Setup};
use crate::trace::Trace;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// What every case of one `toolrun test` invocation shares.
pub(crate) struct RunContext<'a> {
    pub(crate) registry: &'a Registry,
    /// `--model`: replaces each test's own model.
    pub(crate) model: Option<&'a str>,
    pub(crate) record: Option<RecordWhich>,
    /// `--allow-network` (also implied by `--model` and `--record`).
    pub(crate) allow_network: bool,
    /// `--allow-exec`, `--allow-command`, `--allow-env`: what a live case may start.
    pub(crate) exec: &'a crate::setup::ExecArgs,
    pub(crate) now_unix_ms: i64,
    pub(crate) stop: &'a Interrupt,
    /// `--approve`, checked against the specs: each case gets those of its own spec.
    pub(crate) approve: &'a [String],
    /// `--events`, shared by every case.
    pub(crate) events: &'a Arc<Events>,
    /// With export on: the span this case's attempts are sent under as each finishes.
    pub(crate) span: Option<crate::telemetry::Parent>,
}

impl RunContext<'_> {
    /// The case's own approvals and those of `--approve` that name a tool of its spec.
    pub(crate) fn approvals_for(&self, case: &TestCase) -> Vec<String> {
        let mut approve = case.approve.clone();
        approve.extend(
            self.approve
                .iter()
                .filter(|t| self.registry.tool(t).is_some() && !case.approve.contains(t))
                .cloned(),
        );
        approve
    }
}

/// How a case runs; decided once, before its attempts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Plan {
    Replay(PathBuf),
    /// Run live (or scripted) and write the fixture from the first attempt.
    Record(PathBuf),
    /// Run the model as it is: scripted offline, live only when the network is allowed.
    Run,
    /// Cannot run as asked; every attempt fails with this reason.
    Fail(String),
}

/// Written in `fixtures: DIR`, it stands for the model a test runs with: one recording per model.
pub(crate) const MODEL_PLACEHOLDER: &str = "{model}";

/// The test's fixture: its own `fixture:`, or `DIR/<name>.json` under the spec's `fixtures: DIR`
/// (with `{model}` in DIR replaced by `model`, the model this run of the test uses).
pub(crate) fn fixture_path(registry: &Registry, case: &TestCase, model: &str) -> Option<PathBuf> {
    case.fixture
        .clone()
        .or_else(|| fixture_under_dir(registry, &case.name, model))
}

/// `DIR/<name>.json` under the spec's `fixtures: DIR` for a test without a `fixture:` of its
/// own; `None` when the spec has no such folder.
pub(crate) fn fixture_under_dir(registry: &Registry, name: &str, model: &str) -> Option<PathBuf> {
    registry.fixtures_dir.as_ref().map(|d| {
        let dir = match d.to_str() {
            Some(text) if text.contains(MODEL_PLACEHOLDER) => {
                PathBuf::from(text.replace(MODEL_PLACEHOLDER, &model_folder(model)))
            }
            _ => d.clone(),
        };
        dir.join(format!("{}.json", file_stem(name)))
    })
}

/// A model name as one folder name: never `.` or `..`, which would leave the fixtures folder.
fn model_folder(model: &str) -> String {
    let stem = file_stem(model);
    if stem.chars().all(|c| c == '.') {
        stem.replace('.', "_")
    } else {
        stem
    }
}

pub(crate) fn model_for(ctx: &RunContext<'_>, case: &TestCase) -> Result<String, String> {
    crate::setup::model_name(ctx.registry, ctx.model.or(case.model.as_deref()))
}

pub(crate) fn plan(ctx: &RunContext<'_>, case: &TestCase, model: &str) -> Plan {
    let fixture = fixture_path(ctx.registry, case, model);
    let live = live_endpoint(ctx.registry, model);
    match (&fixture, ctx.record) {
        (Some(f), Some(RecordWhich::All)) => return Plan::Record(f.clone()),
        (Some(f), Some(RecordWhich::Missing)) if !f.is_file() => return Plan::Record(f.clone()),
        (Some(f), Some(RecordWhich::Missing)) => return Plan::Replay(f.clone()),
        (None, Some(_)) if live.is_some() => {
            return Plan::Fail(format!(
                "--record needs a place for this test's fixture: set `fixtures: DIR` in the spec or `fixture: PATH` on the test ({})",
                ctx.registry.spec_path.display()
            ))
        }
        _ => {}
    }
    // `--model` without `--record` asks how that model does now: fixtures are not consulted.
    let fresh = ctx.model.is_some() && ctx.record.is_none();
    match &fixture {
        Some(f) if f.is_file() && !fresh => return Plan::Replay(f.clone()),
        Some(f) if case.fixture.is_some() && !fresh => {
            return Plan::Fail(format!(
                "fixture `{}` has not been recorded yet\n{}",
                f.display(),
                record_hint(ctx, case, model)
            ))
        }
        _ => {}
    }
    match live {
        Some(endpoint) if !ctx.allow_network => Plan::Fail(format!(
            "offline: the test would call live model `{model}` ({endpoint}) and has no fixture\n{}",
            record_hint(ctx, case, model)
        )),
        _ => Plan::Run,
    }
}

/// One attempt of a case, run as planned and judged by its `expect:`; with export on, sent as
/// soon as it is judged.
pub(crate) async fn run_attempt(
    ctx: &RunContext<'_>,
    case: &TestCase,
    model: &str,
    plan: &Plan,
    number: u32,
    price: Option<&PriceInfo>,
) -> Attempt {
    let mut exchanges = Vec::new();
    let attempt = judged_attempt(ctx, (case, model, plan), number, price, &mut exchanges).await;
    if let Some(parent) = ctx.span {
        let test = serde_json::json!({ "name": case.name, "spec": ctx.registry.name, "query": case.query });
        let record = serde_json::to_value(&attempt).unwrap_or_default();
        let redactor = crate::setup::masking_for(&[ctx.registry]);
        crate::telemetry::export_attempt(
            parent,
            (&test, &record),
            &exchanges,
            ctx.registry,
            &redactor,
        );
    }
    attempt
}

/// The exchanges of a run, when its spans will need them (its MCP calls).
type Exchanges = Vec<crate::fixture::Exchange>;

async fn judged_attempt(
    ctx: &RunContext<'_>,
    (case, model, plan): (&TestCase, &str, &Plan),
    number: u32,
    price: Option<&PriceInfo>,
    exchanges: &mut Exchanges,
) -> Attempt {
    let started = Instant::now();
    // A scripted model's answers are scripted even while its fixture is written: `compare`
    // treats them as deterministic.
    let live = live_endpoint(ctx.registry, model).is_some();
    let source = match plan {
        Plan::Replay(_) => Source::Replay,
        Plan::Record(_) if number == 1 && live => Source::Record,
        _ if live => Source::Live,
        _ => Source::Scripted,
    };
    let failed = |f: Failure| {
        Attempt::without_trace(number, source, f, crate::trace::millis(started.elapsed()))
    };
    let judging = (price, source);
    let mut recorded_stop = None;
    let (trace, mut failures) = match plan {
        Plan::Fail(reason) => return failed(Failure::error(reason.clone())),
        Plan::Replay(path) => match replay(ctx, case, model, path, exchanges).await {
            Ok((trace, failures, stop)) => {
                recorded_stop = stop;
                (trace, failures)
            }
            Err(f) => return failed(f),
        },
        Plan::Record(path) if number == 1 => {
            match execute(ctx, (case, model), Some(path), judging, exchanges).await {
                Ok(r) => r,
                Err(f) => return failed(f),
            }
        }
        Plan::Record(_) | Plan::Run => {
            match execute(ctx, (case, model), None, judging, exchanges).await {
                Ok(r) => r,
                Err(f) => return failed(f),
            }
        }
    };
    let mut grade = None;
    let mut turns = Vec::new();
    let budget_stop = super::expect::budget_stop(case, &trace.turns, price);
    if failures
        .iter()
        .all(|f| f.kind != crate::results::FailureKind::Error)
    {
        // Stopped over the test's own budget, the turns not run are that budget's failure.
        let stop = match budget_stop {
            Some(_) => Stop::Budget,
            None => Stop::Recorded(recorded_stop.as_deref()),
        };
        let (failed, verdicts) = check_turns(case, &trace, judging, stop);
        failures.extend(failed);
        turns = verdicts;
        failures.extend(
            check_expectations(&case.expect, &trace)
                .into_iter()
                .map(|(key, message)| Failure::assertion(key, message)),
        );
        if let Some(judge) = &case.expect.judge {
            match judge_attempt(ctx, case, plan, number, judge, &trace).await {
                Ok(g) => {
                    // The same tolerance as `--pass-rate`: 0.7 written by a person passes 0.7.
                    if g.score + 1e-9 < g.pass {
                        failures.push(Failure::assertion(
                            "judge",
                            format!(
                                "judge `{}` scored {} (needs {}): {}",
                                g.model, g.score, g.pass, g.reasoning
                            ),
                        ));
                    }
                    grade = Some(g);
                }
                Err(reason) => failures.push(Failure::assertion("judge", reason)),
            }
        }
    }
    let ran = failures
        .iter()
        .all(|f| f.kind != crate::results::FailureKind::Error);
    let mut attempt = Attempt::from_trace(number, source, &trace, failures, price);
    attempt.judge = grade;
    for (turn, (outcome, budgets)) in attempt.turns.iter_mut().zip(turns) {
        turn.outcome = Some(outcome);
        turn.budgets = budgets;
    }
    if attempt.duration_ms == 0.0 {
        attempt.duration_ms = crate::trace::millis(started.elapsed());
    }
    // A run cut off before it could run says nothing about what it would have spent.
    if ran {
        let note = budget_stop.map(|n| super::expect::stopped_note(case, n));
        super::expect::check_budgets(&case.expect, &mut attempt, note.as_deref());
    }
    attempt
}

/// Grades the attempt's answer with the test's judge, its request travelling as the test's own
/// do: replayed from the fixture, recorded into it, refused offline, or live.
async fn judge_attempt(
    ctx: &RunContext<'_>,
    case: &TestCase,
    plan: &Plan,
    number: u32,
    judge: &crate::registry::Judge,
    trace: &Trace,
) -> Result<crate::judge::Grade, String> {
    use crate::judge::Route;
    let live = crate::judge::is_live(ctx.registry, judge);
    let route = match plan {
        _ if !live => Route::Live,
        Plan::Replay(path) => Route::Replay(
            crate::fixture::load_fixture(path)
                .map(|f| f.judge)
                .unwrap_or_default(),
        ),
        Plan::Record(_) if number == 1 => Route::Record,
        _ if ctx.allow_network => Route::Live,
        _ => Route::Offline,
    };
    let (grade, exchanges) = crate::judge::grade(
        ctx.registry,
        judge,
        &case.query,
        trace,
        route,
        ctx.now_unix_ms,
    )
    .await?;
    // The grader's exchanges join the fixture the run just wrote (none if it was interrupted).
    if let (Plan::Record(path), false) = (plan, exchanges.is_empty()) {
        if let Ok(mut fixture) = crate::fixture::load_fixture(path) {
            fixture.judge = exchanges;
            let redactor = crate::setup::masking_for(&[ctx.registry]);
            crate::fixture::write_fixture(path, &fixture, &redactor)?;
        }
    }
    Ok(grade)
}

/// A fixture-backed attempt: the replay must match the recording (divergences), and the
/// replayed run is then judged like any other (assertions).
async fn replay(
    ctx: &RunContext<'_>,
    case: &TestCase,
    model: &str,
    fixture: &Path,
    exchanges: &mut Exchanges,
) -> Result<(Trace, Vec<Failure>, Option<String>), Failure> {
    let recorded = crate::fixture::load_fixture(fixture)
        .map_err(|e| Failure::error(format!("cannot replay: {e}")))?;
    if ctx.span.is_some() {
        exchanges.clone_from(&recorded.exchanges);
    }
    if recorded.is_served_session() {
        return Err(Failure::error(format!(
            "fixture `{0}` is a session recorded by `toolrun serve --record`, not a run: replay it with `toolrun replay {0}`",
            fixture.display()
        )));
    }
    let report = crate::replay::replay_fixture(
        &recorded,
        ctx.registry,
        fixture,
        false,
        Some(ctx.stop.clone()),
    )
    .await;
    let mut failures = Vec::new();
    // A test that states its query must be testing that query, not whatever was recorded.
    if !case.query.is_empty() && case.query != recorded.query {
        failures.push(Failure::divergence(format!(
            "the test's query {:?} is not the recorded query {:?}; re-record the fixture",
            case.query, recorded.query
        )));
    }
    // Likewise a test run with a model it names (`--model`, or its own `model:`): another
    // model's recording says nothing about this one.
    if (ctx.model.is_some() || case.model.is_some()) && model != recorded.model {
        failures.push(Failure::divergence(format!(
            "the fixture was recorded with model `{}`, not `{model}`; give each model its own fixtures with `fixtures: DIR/{MODEL_PLACEHOLDER}` in the spec, or re-record with --record all",
            recorded.model
        )));
    }
    failures.extend(report.failures.into_iter().map(|f| {
        Failure::divergence(format!(
            "replay diverged from the recording `{}`: {f}",
            fixture.display()
        ))
    }));
    match report.trace {
        Some(trace) => Ok((trace, failures, recorded_stop(case, &recorded.trace))),
        None => Err(failures
            .into_iter()
            .next()
            .unwrap_or_else(|| Failure::error("the replay did not run"))),
    }
}

/// Why a recorded conversation ends before the test's last turn, after a turn that ended in an
/// answer: the recording stopped where the recorded run failed. A turn over its latency budget
/// when recorded may well be within it replayed (a replay's time is toolrun's, not the model's),
/// so the replay alone cannot say why; the fixture's own turn can. `None` when the recording has
/// every turn, or its last did not end in an answer (the replay says so itself).
fn recorded_stop(case: &TestCase, trace: &serde_json::Value) -> Option<String> {
    let turns = trace.get("turns")?.as_array()?;
    let n = turns.len();
    let last = turns.last().filter(|_| n < case.turns.len())?;
    if last.get("status").and_then(serde_json::Value::as_str) != Some("ok") {
        return None;
    }
    let took = |t: &serde_json::Value| t.get("duration_ms").and_then(serde_json::Value::as_f64);
    let over = |limit: Option<f64>, took: f64| limit.filter(|l| took > *l).map(|l| (l, took));
    let own = case.turns.get(n - 1).and_then(|t| t.expect.max_latency_ms);
    // The test's own latency budget counts the whole conversation: the turns' times together.
    let all: f64 = turns.iter().filter_map(took).sum();
    let (what, (limit, took), replayed) = if let Some(spent) = took(last).and_then(|t| over(own, t))
    {
        (
            "whose max_latency_ms budget failed",
            spent,
            format!("turn {n} takes"),
        )
    } else if let Some(spent) = over(case.expect.max_latency_ms, all) {
        let what = "where the conversation went over the test's max_latency_ms budget";
        (what, spent, format!("turns 1 to {n} take"))
    } else {
        return Some(format!(
            "the recording stopped at turn {n} (it has {n} of the test's {} turns); re-record the fixture (--record all)",
            case.turns.len()
        ));
    };
    let spent = crate::results::Budget::new("max_latency_ms", limit, Some(took), Source::Record);
    Some(format!(
        "the recording stopped at turn {n}, {what} when recorded: {}. Replayed, {replayed} toolrun's time, not the model's, so only a new recording can check the turns after it: re-record the fixture (--record all) or raise the budget",
        crate::report::budgets::text(&spent)
    ))
}

/// Runs the loop: offline behind a tape that refuses every request, or live (recording into
/// `record` when given). A conversation stops at a turn that fails, its budgets (checked as
/// `judging` will) included.
async fn execute(
    ctx: &RunContext<'_>,
    (case, model): (&TestCase, &str),
    record: Option<&Path>,
    judging: (Option<&PriceInfo>, Source),
    exchanges: &mut Exchanges,
) -> Result<(Trace, Vec<Failure>), Failure> {
    // Offline, every secret is the mask: a real credential can neither be sent nor echoed into
    // the report, whatever the environment holds; and the transport is a tape with nothing on
    // it: every request is refused before it leaves the process, and remembered so the
    // failure can name it.
    let offline = !ctx.allow_network;
    let approve = ctx.approvals_for(case);
    let clock = Clock::At(case.now_unix_ms.unwrap_or(ctx.now_unix_ms));
    let mut inputs = Inputs::quiet(&approve, clock);
    inputs.events = EventsTo::Shared(ctx.events.clone());
    (inputs.secrets, inputs.network) = match (offline, record) {
        (true, _) => (SecretSource::Masked, Network::Offline),
        (false, Some(_)) => (
            SecretSource::Environment,
            Network::Record { previous: None },
        ),
        (false, None) => (SecretSource::Environment, Network::Live),
    };
    inputs.model = Some(ModelChoice {
        name: Some(model),
        query: Some(&case.query),
    });
    inputs.interrupt = Some(ctx.stop.clone());
    inputs.exec = ctx.exec;
    let mut setup = Setup::open(ctx.registry, inputs).map_err(Failure::error)?;
    let Some(mut prepared) = setup.model.take() else {
        return Err(Failure::error("the test has no model"));
    };
    let mut opts = setup.run_options(&case.query, &prepared.name);
    opts.faults = case.faults.clone();
    let now = opts.now_unix_ms;
    let engine = setup.engine(ctx.registry);
    let trace = if case.turns.is_empty() {
        engine.run(&mut prepared.client, opts).await
    } else {
        converse(&engine, (case, model), &mut prepared.client, opts, judging).await
    };
    let (tape, redactor) = (&setup.tape, &setup.redactor);
    if let (Some(_), Some(tape)) = (ctx.span, tape) {
        *exchanges = tape.exchanges();
    }
    let mut failures = Vec::new();
    if let (Some(path), Some(tape)) = (record, tape) {
        // Only a run that finished becomes a fixture: an interrupted one would later replay as
        // recorded (and `--record missing` would skip it), and a previous recording is kept.
        if trace.stop_reason == crate::vocab::StopReason::Interrupted {
            failures.push(Failure::error(format!(
                "the run was interrupted: fixture `{}` was not written",
                path.display()
            )));
            return Ok((trace, failures));
        }
        let recorded = Recorded {
            model,
            now,
            approvals: approve,
            path,
        };
        let fixture = build_fixture(ctx.registry, case, &recorded, tape, &trace);
        crate::fixture::write_fixture(path, &fixture, redactor).map_err(Failure::error)?;
    }
    let refused = tape.as_ref().map(|t| t.refused()).unwrap_or_default();
    // A run cut off from the network says nothing about its expectations: report only why.
    failures.extend(refused.iter().map(|(kind, source, request)| {
        let who = if kind == "model" { "model" } else { "tool" };
        // A stdio MCP server is a program, not a host: say what would have happened.
        let what = match request.strip_prefix("STDIN stdio: ") {
            Some(command) => {
                format!("MCP server `{source}` would be started (`{command}`); nothing was started")
            }
            None => {
                format!("{who} `{source}` would reach the network ({request}); nothing was sent")
            }
        };
        Failure::error(format!(
            "offline: {what}\n{}",
            record_hint(ctx, case, model)
        ))
    }));
    Ok((trace, failures))
}

/// A multi-turn case: its turns one after another in one conversation, until the last, a turn
/// whose `expect` fails (a budget as much as any other key: a live run over budget must not go
/// on spending), or one that does not end in an answer (the next would have nothing to follow).
async fn converse(
    engine: &crate::engine::Engine<'_>,
    (case, model): (&TestCase, &str),
    client: &mut crate::models::ModelClient,
    opts: crate::engine::RunOptions<'_>,
    (price, source): (Option<&PriceInfo>, Source),
) -> Trace {
    let queries: Vec<&str> = case.turns.iter().map(|t| t.query.as_str()).collect();
    // The test's own budgets too: a conversation over one has failed, whatever turns remain.
    let mut spent = super::expect::Spent::default();
    let go_on = |i: usize, done: &crate::trace::TurnTrace| {
        spent.add(done);
        let passed = case.turns.get(i).is_some_and(|turn| {
            check_expectations(&turn.expect, &done.as_trace_alone()).is_empty()
                && super::expect::turn_budgets(&turn.expect, done, price, (model, source))
                    .1
                    .is_empty()
        });
        passed && done.status == crate::vocab::Status::Ok && !spent.over(&case.expect, price)
    };
    match engine.converse(client, &opts, (&queries, &[]), go_on).await {
        Some(trace) => trace,
        // A case with `turns:` has at least one (`check` requires it), so one has run.
        None => engine.run(client, opts).await,
    }
}

/// What checking one turn found: whether its `expect` held, and its budgets with what it used
/// of each (recorded on the attempt's turn, for the report).
pub(crate) type TurnVerdict = (crate::results::Outcome, Vec<crate::results::Budget>);

/// Why a conversation may end before the test's last turn, as [`check_turns`] is told.
#[derive(Clone, Copy)]
pub(crate) enum Stop<'a> {
    /// Over one of the test's own budgets: that budget's failure says so, naming the turn.
    Budget,
    /// Where and why its recording stopped, for a replay (see [`recorded_stop`]).
    Recorded(Option<&'a str>),
}

/// Each turn's `expect` against what that turn did, in order, up to the first turn that fails
/// (whose failures name it); a turn the conversation never reached fails as not run, unless
/// the conversation stopped over the test's own budget. Returns the failures and a verdict for
/// each turn checked, in order.
pub(crate) fn check_turns(
    case: &TestCase,
    trace: &Trace,
    (price, source): (Option<&PriceInfo>, Source),
    stop: Stop<'_>,
) -> (Vec<Failure>, Vec<TurnVerdict>) {
    use crate::results::Outcome;
    let mut failures = Vec::new();
    let mut verdicts = Vec::new();
    for (i, turn) in case.turns.iter().enumerate() {
        let n = i + 1;
        let Some(done) = trace.turns.get(i) else {
            let recorded_stop = match stop {
                Stop::Budget => break,
                Stop::Recorded(why) => why,
            };
            let why = match (recorded_stop, trace.turns.last()) {
                (Some(stop), _) => stop.to_string(),
                (None, Some(last)) if last.status != crate::vocab::Status::Ok => format!(
                    "turn {} ended with status `{}` ({})",
                    trace.turns.len(),
                    last.status.as_str(),
                    last.stop_reason
                ),
                _ => format!("the conversation has {} turn(s)", trace.turns.len()),
            };
            failures.push(Failure::assertion(
                &format!("turns[{n}]"),
                format!("turn {n} ({:?}) was not run: {why}", turn.query),
            ));
            break;
        };
        if done.query != turn.query {
            failures.push(Failure::divergence(format!(
                "turn {n}: the test's query {:?} is not the recorded query {:?}; re-record the fixture",
                turn.query, done.query
            )));
            verdicts.push((Outcome::Failed, Vec::new()));
            break;
        }
        let mut found = check_expectations(&turn.expect, &done.as_trace(&trace.model, &trace.spec));
        let (budgets, overspent) =
            super::expect::turn_budgets(&turn.expect, done, price, (&trace.model, source));
        found.extend(overspent);
        if found.is_empty() {
            verdicts.push((Outcome::Passed, budgets));
            continue;
        }
        verdicts.push((Outcome::Failed, budgets));
        failures.extend(found.into_iter().map(|(key, message)| {
            Failure::assertion(
                &format!("turns[{n}].{key}"),
                format!("turn {n} (line {}): {message}", turn.span.line),
            )
        }));
        break;
    }
    (failures, verdicts)
}

/// What a recorded case ran with, as its fixture keeps it.
struct Recorded<'a> {
    model: &'a str,
    now: i64,
    approvals: Vec<String>,
    path: &'a Path,
}

fn build_fixture(
    registry: &Registry,
    case: &TestCase,
    recorded: &Recorded<'_>,
    tape: &Tape,
    trace: &Trace,
) -> Fixture {
    Fixture::recorded(
        crate::fixture::fixture_spec(registry, &registry.spec_path, recorded.path),
        case.query.clone(),
        recorded.model.to_string(),
        recorded.now,
        recorded.approvals.clone(),
        tape.exchanges(),
        serde_json::to_value(trace).unwrap_or_default(),
    )
}

/// `kind at base_url` for live models; `None` for scripted ones.
pub(crate) fn live_endpoint(registry: &Registry, model: &str) -> Option<String> {
    let def = registry.model(model)?;
    match &def.kind {
        ModelKind::Scripted(_) => None,
        ModelKind::OpenAi(live) | ModelKind::Anthropic(live) => {
            Some(format!("{} at {}", def.kind.name(), live.base_url))
        }
    }
}

/// The exact command that records this test's fixture, and what to do with it. Shown, never run.
pub(crate) fn record_hint(ctx: &RunContext<'_>, case: &TestCase, model: &str) -> String {
    let registry = ctx.registry;
    if case.query.is_empty() {
        return "the test has no `query:` to record with; add one, then record it".into();
    }
    let mut cmd = vec![
        "toolrun".to_string(),
        "test".into(),
        shell_word(&registry.spec_path.to_string_lossy()),
        "--filter".into(),
        shell_word(&case.name),
    ];
    if ctx.model.is_some() || case.model.is_some() {
        cmd.push("--model".into());
        cmd.push(shell_word(model));
    }
    cmd.push("--record".into());
    cmd.push("missing".into());
    // Recording starts the spec's stdio MCP servers, which the command line must allow.
    let mut programs: Vec<&str> = Vec::new();
    for server in registry.mcp_servers() {
        if let Some(stdio) = &server.stdio {
            if !programs.contains(&stdio.argv[0].as_str()) {
                programs.push(&stdio.argv[0]);
                cmd.push("--allow-exec".into());
                cmd.push(shell_word(&stdio.argv[0]));
            }
        }
    }
    let place = if fixture_path(registry, case, model).is_some() {
        String::new()
    } else {
        ", after adding `fixtures: fixtures` to the spec (or `fixture: PATH` to the test)"
            .to_string()
    };
    let live = if case.fixture.is_none() {
        "; or pass --allow-network to run it live"
    } else {
        ""
    };
    format!("record it with: {}{place}{live}", cmd.join(" "))
}

/// Test names become file names: anything outside a conservative set becomes `_`.
pub(crate) fn file_stem(name: &str) -> String {
    crate::registry::fixture_stem(name)
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

/// Whether the run was stopped by a signal before this case started.
pub(crate) fn interrupted(ctx: &RunContext<'_>) -> bool {
    ctx.stop.load(Ordering::SeqCst)
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

    #[test]
    fn model_names_become_one_folder() {
        assert_eq!(model_folder("claude_local"), "claude_local");
        assert_eq!(model_folder(".."), "__");
        assert_eq!(model_folder("a/../b"), "a_.._b");
    }
}
