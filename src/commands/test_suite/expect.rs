//! A test's `expect:` against the trace of its run: one readable line per unmet expectation.
//! Scripted runs and replayed fixtures are judged by this same code.

use crate::registry::Expect;
use crate::trace::Trace;
use serde_json::Value;

type Failures = Vec<(&'static str, String)>;

/// Each unmet expectation as the `expect:` key it belongs to and a readable line.
pub(crate) fn check_expectations(expect: &Expect, trace: &Trace) -> Failures {
    let mut failures = Vec::new();
    outcome(expect, trace, &mut failures);
    calls(expect, trace, &mut failures);
    arguments(expect, trace, &mut failures);
    error_kinds(expect, trace, &mut failures);
    output(expect, trace, &mut failures);
    max_tool_calls(expect, trace, &mut failures);
    failures
}

/// The run's `status` and `stop_reason`.
fn outcome(expect: &Expect, trace: &Trace, failures: &mut Failures) {
    if let Some(status) = &expect.status {
        if *status != trace.status {
            let why = trace
                .error
                .as_deref()
                .map(|e| format!(" ({}: {e})", trace.stop_reason))
                .unwrap_or_default();
            failures.push((
                "status",
                format!(
                    "expected status `{status}`, got `{}`{why}",
                    trace.status.as_str()
                ),
            ));
        }
    }
    if let Some(reason) = &expect.stop_reason {
        if reason != &trace.stop_reason {
            failures.push((
                "stop_reason",
                format!(
                    "expected stop_reason `{reason}`, got `{}`",
                    trace.stop_reason
                ),
            ));
        }
    }
}

/// Which tools were called: `tool_calls`, `tool_calls_include`, `tool_calls_exclude`.
fn calls(expect: &Expect, trace: &Trace, failures: &mut Failures) {
    let called: Vec<&str> = trace.tool_results.iter().map(|r| r.name.as_str()).collect();
    if let Some(list) = &expect.tool_calls {
        if list.iter().map(String::as_str).ne(called.iter().copied()) {
            failures.push((
                "tool_calls",
                format!("expected tool calls {list:?}, got {called:?}"),
            ));
        }
    }
    for name in &expect.tool_calls_include {
        if !called.contains(&name.as_str()) {
            failures.push((
                "tool_calls_include",
                format!("expected a call to `{name}`, got {called:?}"),
            ));
        }
    }
    for name in &expect.tool_calls_exclude {
        if called.contains(&name.as_str()) {
            failures.push((
                "tool_calls_exclude",
                format!("expected no call to `{name}`, got {called:?}"),
            ));
        }
    }
}

/// `arguments`: each call's arguments include the expected ones, in order.
fn arguments(expect: &Expect, trace: &Trace, failures: &mut Failures) {
    let called: Vec<&str> = trace.tool_results.iter().map(|r| r.name.as_str()).collect();
    for (i, wanted) in expect.arguments.iter().enumerate() {
        match trace.tool_results.get(i) {
            None => failures.push((
                "arguments",
                format!(
                    "expected arguments {} for call {}, but only {} call(s) ran",
                    Value::Object(wanted.clone()),
                    i + 1,
                    called.len()
                ),
            )),
            Some(r) if !crate::arguments::is_subset(wanted, &r.arguments) => failures.push((
                "arguments",
                format!(
                    "call {} (`{}`): expected arguments to include {}, got {}",
                    i + 1,
                    r.name,
                    Value::Object(wanted.clone()),
                    r.arguments
                ),
            )),
            Some(_) => {}
        }
    }
}

/// `error_kinds`: the set of error kinds, order and repeats aside.
fn error_kinds(expect: &Expect, trace: &Trace, failures: &mut Failures) {
    if let Some(kinds) = &expect.error_kinds {
        let mut got: Vec<&str> = trace.tool_errors.iter().map(|e| e.kind.as_str()).collect();
        got.sort_unstable();
        got.dedup();
        let mut want: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        want.sort_unstable();
        want.dedup();
        if got != want {
            failures.push((
                "error_kinds",
                format!("expected error kinds {want:?}, got {got:?}"),
            ));
        }
    }
}

/// The final answer: `output_contains`, `output_not_contains`, `output_matches`.
fn output(expect: &Expect, trace: &Trace, failures: &mut Failures) {
    let output = trace.final_output.as_deref().unwrap_or("");
    for s in &expect.output_contains {
        if !output.contains(s.as_str()) {
            failures.push((
                "output_contains",
                format!("expected the output to contain {s:?}, got {output:?}"),
            ));
        }
    }
    for s in &expect.output_not_contains {
        if output.contains(s.as_str()) {
            failures.push((
                "output_not_contains",
                format!("expected the output not to contain {s:?}, got {output:?}"),
            ));
        }
    }
    if let Some(re) = &expect.output_matches {
        if !re.is_match(output) {
            failures.push((
                "output_matches",
                format!(
                    "expected the output to match /{}/, got {output:?}",
                    re.as_str()
                ),
            ));
        }
    }
}

/// `max_tool_calls`.
fn max_tool_calls(expect: &Expect, trace: &Trace, failures: &mut Failures) {
    if let Some(max) = expect.max_tool_calls {
        if trace.tool_call_count > max {
            failures.push((
                "max_tool_calls",
                format!(
                    "expected at most {max} tool calls, got {}",
                    trace.tool_call_count
                ),
            ));
        }
    }
}

/// The budgets of `expect` (key, limit) with what was used of each: tokens (input + output),
/// USD (`None` when usage was reported but no price is known), wall time in ms.
fn budgets(
    expect: &Expect,
    tokens: u64,
    cost: Option<f64>,
    ms: f64,
) -> Vec<(&'static str, f64, Option<f64>)> {
    [
        (
            "max_tokens",
            expect.max_tokens.map(|m| m as f64),
            Some(tokens as f64),
        ),
        ("max_cost_usd", expect.max_cost_usd, cost),
        ("max_latency_ms", expect.max_latency_ms, Some(ms)),
    ]
    .into_iter()
    .filter_map(|(key, limit, used)| Some((key, limit?, used)))
    .collect()
}

/// Why a budget does not hold, or `None` when it does.
fn overspent(key: &str, limit: f64, used: Option<f64>, model: &str, how: &str) -> Option<String> {
    Some(match used {
        None => {
            format!("{key} is {limit}, but model `{model}` has no `price:` to work out the cost by")
        }
        Some(u) if u > limit => match key {
            "max_tokens" => format!("expected at most {limit} tokens, the test used {u} ({how})"),
            "max_cost_usd" => {
                format!("expected a cost of at most ${limit}, the test cost ${u:.6} ({how})")
            }
            _ => format!(
                "expected a wall time of at most {limit} ms, the run took {u:.0} ms ({how})"
            ),
        },
        Some(_) => return None,
    })
}

/// The budgets of `expect` against what the attempt used: each is recorded on the attempt (the
/// report shows how close it came), and one overspent is a failed assertion. Latency is the
/// run's wall time however it ran; the message and the record say how. `stopped` is what a
/// conversation stopped by these budgets adds to each overspent one's message (see
/// [`stopped_note`]).
pub(crate) fn check_budgets(
    expect: &Expect,
    attempt: &mut crate::results::Attempt,
    stopped: Option<&str>,
) {
    use crate::results::{Budget, Failure, Outcome};
    let tokens = attempt
        .usage
        .as_ref()
        .map_or(0, |u| u.input_tokens + u.output_tokens);
    // A model that reported no usage (scripted) spent nothing.
    let cost = attempt.cost_usd.or(attempt.usage.is_none().then_some(0.0));
    let model = attempt.model.clone().unwrap_or_default();
    for (key, limit, used) in budgets(expect, tokens, cost, attempt.duration_ms) {
        attempt
            .budgets
            .push(Budget::new(key, limit, used, attempt.source));
        if let Some(message) = overspent(key, limit, used, &model, attempt.source.how()) {
            let message = format!("{message}{}", stopped.unwrap_or_default());
            attempt.failures.push(Failure::assertion(key, message));
            attempt.outcome = Outcome::Failed;
        }
    }
}

/// What a conversation has spent over its turns so far, for the test's own budgets: a
/// conversation over one stops there, as a turn over its own budget does, rather than spend on
/// turns whose test has already failed.
#[derive(Default)]
pub(crate) struct Spent {
    usage: crate::results::TokenUsage,
    any_usage: bool,
    ms: f64,
}

impl Spent {
    /// Spent over all of `turns`.
    pub(crate) fn over_turns(turns: &[crate::trace::TurnTrace]) -> Spent {
        let mut spent = Spent::default();
        turns.iter().for_each(|t| spent.add(t));
        spent
    }

    pub(crate) fn add(&mut self, turn: &crate::trace::TurnTrace) {
        if let Some(u) = &turn.usage {
            self.any_usage = true;
            self.usage.input_tokens += u.input_tokens;
            self.usage.output_tokens += u.output_tokens;
            self.usage.cached_input_tokens += u.cached_input_tokens;
            self.usage.reasoning_tokens += u.reasoning_tokens;
        }
        self.ms += turn.duration_ms;
    }

    /// Whether it is over one of the budgets of `expect` (the test's own), counted as
    /// [`check_budgets`] counts them. A cost not known (no price) stops nothing here: `check`
    /// refuses a cost budget without a price.
    pub(crate) fn over(&self, expect: &Expect, price: Option<&crate::results::PriceInfo>) -> bool {
        let u = &self.usage;
        let cost = match (self.any_usage, price) {
            (false, _) => Some(0.0),
            (true, p) => p.map(|p| crate::results::cost(u, p)),
        };
        let tokens = u.input_tokens + u.output_tokens;
        budgets(expect, tokens, cost, self.ms)
            .into_iter()
            .any(|(_, limit, used)| used.is_some_and(|u| u > limit))
    }
}

/// The turn a conversation stopped at because it went over one of the test's own budgets (the
/// last it has, which ended in an answer, before the test's last): `None` when it ran every
/// turn, or stopped for another reason.
pub(crate) fn budget_stop(
    case: &crate::registry::TestCase,
    turns: &[crate::trace::TurnTrace],
    price: Option<&crate::results::PriceInfo>,
) -> Option<usize> {
    let last = turns.last()?;
    let stopped = turns.len() < case.turns.len() && last.status == crate::vocab::Status::Ok;
    (stopped && Spent::over_turns(turns).over(&case.expect, price)).then_some(turns.len())
}

/// What an overspent budget's failure adds when the conversation stopped at turn `n` over it:
/// the turn, its line, and the turns that did not run.
pub(crate) fn stopped_note(case: &crate::registry::TestCase, n: usize) -> String {
    let line = case.turns.get(n - 1).map_or(0, |t| t.span.line);
    let total = case.turns.len();
    let not_run = if n + 1 == total {
        format!("turn {total} was not run")
    } else {
        format!("turns {} to {total} were not run", n + 1)
    };
    format!(
        "; the conversation went over it at turn {n} (line {line}) and stopped there: {not_run}"
    )
}

/// A turn's budgets (its `expect` in `turns:`) against what that turn used: its own model
/// calls' tokens, their cost at the model's price, and its wall time. Each is recorded (the
/// report shows how close the turn came), with the failures of those overspent.
pub(crate) fn turn_budgets(
    expect: &Expect,
    turn: &crate::trace::TurnTrace,
    price: Option<&crate::results::PriceInfo>,
    (model, source): (&str, crate::results::Source),
) -> (Vec<crate::results::Budget>, Failures) {
    let usage = turn.usage.as_ref();
    let tokens = usage.map_or(0, |u| u.input_tokens + u.output_tokens);
    let cost = match (usage, price) {
        (None, _) => Some(0.0),
        (Some(_), None) => None,
        (Some(u), Some(p)) => Some(
            crate::registry::Price {
                input: p.input,
                output: p.output,
                cached_input: p.cached_input,
                reasoning: p.reasoning,
            }
            .cost_usd(
                u.input_tokens,
                u.cached_input_tokens,
                u.output_tokens,
                u.reasoning_tokens,
            ),
        ),
    };
    let mut recorded = Vec::new();
    let mut failures = Vec::new();
    for (key, limit, used) in budgets(expect, tokens, cost, turn.duration_ms) {
        recorded.push(crate::results::Budget::new(key, limit, used, source));
        if let Some(message) = overspent(key, limit, used, model, source.how()) {
            failures.push((key, message));
        }
    }
    (recorded, failures)
}
