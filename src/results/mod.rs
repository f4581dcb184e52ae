//! The results document: what `toolrun test --results PATH` writes and `toolrun report` reads.
//!
//! One JSON document per test command, shaped after Inspect AI's eval log (a header naming what
//! ran, then one sample per test with one record per attempt, then totals) and promptfoo's results
//! file (per-attempt token usage, cost, latency and the grading reason). It is a contract with the
//! tools people build on it: fields are only ever added within a `format_version`; a change that
//! would break a reader bumps the version, and readers refuse versions they do not know.

mod attempt;
pub(crate) use attempt::AttemptTurn;
mod validate;

pub(crate) use validate::partition;

use crate::models::Usage;
use crate::redact::Redactor;
use crate::registry::{ModelDef, ModelKind, Price, Registry};
use crate::tools::HttpCall;
use crate::vocab::{CallStatus, ErrorKind, Status, StopReason};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// Results of a large suite with repeats stay far below this; it bounds what a hostile file costs.
const MAX_RESULTS_BYTES: u64 = 256 << 20;

/// Names the document, so `report` can tell a results file from a trace or a fixture.
pub(crate) const KIND: &str = "toolrun.results";
pub(crate) const FORMAT_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Results {
    /// Always [`KIND`].
    pub(crate) kind: String,
    pub(crate) format_version: u32,
    pub(crate) toolrun_version: String,
    /// When the run started, RFC 3339 in UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) started_at: Option<String>,
    /// The options that shape the verdicts, so two files can be compared knowingly.
    #[serde(default)]
    pub(crate) settings: Settings,
    pub(crate) specs: Vec<SpecInfo>,
    /// Every model that ran at least one attempt, with its price when the spec declares one.
    pub(crate) models: Vec<ModelInfo>,
    /// In the order the specs declare them, whatever order they ran in.
    pub(crate) tests: Vec<TestResult>,
    pub(crate) totals: Totals,
    /// What changed since `test --baseline FILE` (`crate::compare`): each changed test with its
    /// pass counts before and after and Fisher's p (`changes`), `new` and `gone` tests, and
    /// McNemar's p over the tests both ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) baseline: Option<Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Settings {
    /// `--model`, when it replaced each test's own model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    /// A model matrix (`--model a --model b`): every test ran with each, in this order, and
    /// `tests` holds one entry per test and model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) models: Vec<String>,
    /// Runs per test (`--repeat`).
    pub(crate) repeat: u32,
    /// Share of a test's runs that must pass (`--pass-rate`).
    pub(crate) pass_rate: f64,
    /// `--record missing|all`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) record: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) filter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) partition: Option<String>,
    /// `--sample N` and its seed: which rows of the data tests ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sample: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) seed: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SpecInfo {
    pub(crate) name: String,
    pub(crate) path: String,
    pub(crate) sha256: String,
    /// Names only: `report` masks these variables' values if they are set where it runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) secrets: Vec<String>,
}

impl SpecInfo {
    pub(crate) fn from_registry(registry: &Registry) -> SpecInfo {
        SpecInfo {
            name: registry.name.clone(),
            path: registry.spec_path.display().to_string(),
            sha256: registry.spec_sha256.clone(),
            secrets: registry.secrets.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ModelInfo {
    /// The spec's name for the model (`models:` key).
    pub(crate) name: String,
    /// `scripted`, `openai` or `anthropic`.
    pub(crate) kind: String,
    /// The provider's model id, for live models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) price: Option<PriceInfo>,
}

impl ModelInfo {
    pub(crate) fn from_def(def: &ModelDef) -> ModelInfo {
        let model = match &def.kind {
            ModelKind::Scripted(_) => None,
            ModelKind::OpenAi(live) | ModelKind::Anthropic(live) => Some(live.model.clone()),
        };
        ModelInfo {
            name: def.name.clone(),
            kind: def.kind.name().to_string(),
            model,
            price: def.price.map(PriceInfo::from),
        }
    }
}

/// One budget of a test's `expect` (`max_tokens`, `max_cost_usd`, `max_latency_ms`) and how
/// close an attempt came to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Budget {
    pub(crate) budget: String,
    pub(crate) limit: f64,
    /// What the attempt used; absent when it cannot be known (a cost without a price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) used: Option<f64>,
    /// `used / limit`: 1 is the whole budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) share: Option<f64>,
    /// How the wall time of `max_latency_ms` was measured: a replay's or a scripted run's time
    /// is toolrun's own, not a model's, and says so. Absent on the other budgets, which count
    /// what the model reported either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) measured: Option<Source>,
}

impl Budget {
    /// A budget and what was used of it (`None`: a cost without a price).
    pub(crate) fn new(budget: &str, limit: f64, used: Option<f64>, source: Source) -> Budget {
        Budget {
            budget: budget.to_string(),
            limit,
            used,
            share: used.filter(|_| limit > 0.0).map(|u| u / limit),
            measured: (budget == "max_latency_ms").then_some(source),
        }
    }
}

/// USD per million tokens, as declared by `price:` on the model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct PriceInfo {
    pub(crate) input: f64,
    pub(crate) output: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cached_input: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reasoning: Option<f64>,
}

impl From<Price> for PriceInfo {
    fn from(p: Price) -> PriceInfo {
        PriceInfo {
            input: p.input,
            output: p.output,
            cached_input: p.cached_input,
            reasoning: p.reasoning,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    Passed,
    Failed,
    Skipped,
}

impl Outcome {}

/// Where an attempt's model answers came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Source {
    /// A `kind: scripted` model.
    Scripted,
    /// Replayed from a fixture, offline.
    Replay,
    /// A live model, not recorded.
    Live,
    /// A live model, recorded into the test's fixture.
    Record,
}

impl Source {
    /// How an attempt ran, as budget failures and reports say it: a replay's wall time is
    /// toolrun's own, not a model's.
    pub(crate) fn how(self) -> &'static str {
        match self {
            Source::Scripted => "scripted run",
            Source::Replay => "replayed from its fixture",
            Source::Live => "live run",
            Source::Record => "recorded run",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct TestResult {
    /// The spec's `name`; with `name`, the test's identity across results files.
    pub(crate) spec: String,
    pub(crate) name: String,
    pub(crate) query: String,
    /// The model the test ran with (`--model`, the test's `model:`, or the spec's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fixture: Option<String>,
    pub(crate) outcome: Outcome,
    /// Why the test was skipped, or failed without an attempt (a fixture that cannot be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// Attempts that passed, out of `attempts.len()`.
    pub(crate) passes: u32,
    /// The share of attempts that had to pass.
    pub(crate) required_pass_rate: f64,
    pub(crate) attempts: Vec<Attempt>,
    pub(crate) usage: TokenUsage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cost_usd: Option<f64>,
    pub(crate) duration_ms: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Attempt {
    /// 1-based, in the order the attempts were started.
    pub(crate) attempt: u32,
    pub(crate) outcome: Outcome,
    pub(crate) source: Source,
    /// The model that answered (its name in the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    /// The run's status (`ok`, `needs_confirmation`, `needs_review`, `failed`); absent when no
    /// run happened (a fixture that could not be loaded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) stop_reason: Option<StopReason>,
    /// Why the run failed or stopped, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// The final answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) answer: Option<String>,
    /// Every call the model proposed, in order, including those rejected before running.
    pub(crate) tool_calls: Vec<ToolCall>,
    /// The call waiting for a person, when the run stopped for confirmation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pending_tool_call: Option<ToolCall>,
    pub(crate) steps: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<TokenUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cost_usd: Option<f64>,
    /// Every model request of the run, with its start time (as in the trace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) model_calls: Vec<crate::trace::ModelCall>,
    /// When the run started (UTC, RFC 3339, milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) started_at: Option<String>,
    pub(crate) duration_ms: f64,
    /// The grader's verdict, for a test with `expect: { judge: ... }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) judge: Option<crate::judge::Grade>,
    /// Each budget of the test's `expect` and what this attempt used of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) budgets: Vec<Budget>,
    /// A conversation's user turns (`turns:`), in order: what each asked and came to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) turns: Vec<AttemptTurn>,
    /// Why the attempt failed: assertions, divergence from the recording, errors. Empty on a pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) failures: Vec<Failure>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ToolCall {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: Value,
    /// The model call (1-based) that proposed it.
    pub(crate) step: u32,
    pub(crate) status: CallState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<CallError>,
    /// When it started; absent for calls that did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) started_at: Option<String>,
    /// Absent for calls rejected before they ran (unknown tool, invalid arguments, denied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) duration_ms: Option<f64>,
    /// A successful HTTP tool call's method, URL (secrets masked) and status, as in the trace's
    /// `tool_results[].http`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) http: Option<HttpCall>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CallError {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
}

/// What became of one call the model proposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CallState {
    /// It ran and returned a result.
    Ok,
    /// It ran and failed, or was rejected before running.
    Error,
    /// It waits for a person's confirmation.
    Pending,
    /// The run stopped before it (a limit).
    NotRun,
}

impl From<CallStatus> for CallState {
    fn from(s: CallStatus) -> CallState {
        match s {
            CallStatus::Ok => CallState::Ok,
            CallStatus::Error => CallState::Error,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FailureKind {
    /// An `expect:` key did not hold.
    Assertion,
    /// A replay asked for something the recording does not have, or produced another trace.
    Divergence,
    /// The attempt could not run as asked (a missing fixture, network refused offline).
    Error,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Failure {
    pub(crate) kind: FailureKind,
    /// The `expect:` key that failed (`output_contains`, `tool_calls`, ...), for assertions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) assertion: Option<String>,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn assertion(key: &str, message: impl Into<String>) -> Failure {
        Failure {
            kind: FailureKind::Assertion,
            assertion: Some(key.to_string()),
            message: message.into(),
        }
    }
    pub(crate) fn divergence(message: impl Into<String>) -> Failure {
        Failure {
            kind: FailureKind::Divergence,
            assertion: None,
            message: message.into(),
        }
    }
    pub(crate) fn error(message: impl Into<String>) -> Failure {
        Failure {
            kind: FailureKind::Error,
            assertion: None,
            message: message.into(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TokenUsage {
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    pub(crate) total_tokens: u64,
    /// Of `input_tokens`, those served from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "crate::models::is_zero")]
    pub(crate) cached_input_tokens: u64,
    /// Of `output_tokens`, those the model spent reasoning.
    #[serde(default, skip_serializing_if = "crate::models::is_zero")]
    pub(crate) reasoning_tokens: u64,
}

impl TokenUsage {
    fn add(&mut self, other: &TokenUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

impl From<Usage> for TokenUsage {
    fn from(u: Usage) -> TokenUsage {
        TokenUsage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            total_tokens: u.input_tokens + u.output_tokens,
            cached_input_tokens: u.cached_input_tokens,
            reasoning_tokens: u.reasoning_tokens,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Totals {
    pub(crate) tests: u32,
    pub(crate) passed: u32,
    pub(crate) failed: u32,
    pub(crate) skipped: u32,
    pub(crate) attempts: u32,
    pub(crate) attempts_passed: u32,
    /// `attempts_passed / attempts`; 0 when nothing ran.
    pub(crate) pass_rate: f64,
    pub(crate) usage: TokenUsage,
    /// Present when at least one attempt ran on a priced model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cost_usd: Option<f64>,
    /// The sum of the tests' durations (wall time is shorter with `--jobs`).
    pub(crate) duration_ms: f64,
}

/// USD for this usage at this price (per million tokens). Cached input and reasoning tokens
/// are parts of the input and output counts, priced at their own rate when one is declared.
pub(crate) fn cost(usage: &TokenUsage, price: &PriceInfo) -> f64 {
    let price = Price {
        input: price.input,
        output: price.output,
        cached_input: price.cached_input,
        reasoning: price.reasoning,
    };
    price.cost_usd(
        usage.input_tokens,
        usage.cached_input_tokens,
        usage.output_tokens,
        usage.reasoning_tokens,
    )
}

impl TestResult {
    /// A test before its attempts; push them with [`TestResult::push`], then [`TestResult::finish`].
    pub(crate) fn new(spec: &str, name: &str, query: &str, required_pass_rate: f64) -> TestResult {
        TestResult {
            spec: spec.to_string(),
            name: name.to_string(),
            query: query.to_string(),
            model: None,
            fixture: None,
            outcome: Outcome::Skipped,
            reason: None,
            passes: 0,
            required_pass_rate,
            attempts: Vec::new(),
            usage: TokenUsage::default(),
            cost_usd: None,
            duration_ms: 0.0,
        }
    }

    /// A test that did not run, with the reason people see.
    pub(crate) fn skipped(mut self, reason: impl Into<String>) -> TestResult {
        self.outcome = Outcome::Skipped;
        self.reason = Some(reason.into());
        self
    }

    pub(crate) fn push(&mut self, attempt: Attempt) {
        self.attempts.push(attempt);
    }

    /// Sums the attempts and decides the test: it passes when at least `required_pass_rate` of
    /// its attempts passed. A test with no attempts keeps its outcome (skipped, or failed with a
    /// reason).
    pub(crate) fn finish(&mut self) {
        self.attempts.sort_by_key(|a| a.attempt);
        self.passes = self
            .attempts
            .iter()
            .filter(|a| a.outcome == Outcome::Passed)
            .count() as u32;
        self.usage = TokenUsage::default();
        for u in self.attempts.iter().filter_map(|a| a.usage.as_ref()) {
            self.usage.add(u);
        }
        self.cost_usd = sum_costs(self.attempts.iter().map(|a| a.cost_usd));
        self.duration_ms = self.attempts.iter().map(|a| a.duration_ms).sum();
        if self.attempts.is_empty() {
            return;
        }
        let rate = f64::from(self.passes) / self.attempts.len() as f64;
        // A tolerance so 2/3 meets `--pass-rate 0.6667` written by a person.
        self.outcome = if rate + 1e-9 >= self.required_pass_rate {
            Outcome::Passed
        } else {
            Outcome::Failed
        };
    }

    /// `passes / attempts`, or `None` when nothing ran.
    pub(crate) fn pass_rate(&self) -> Option<f64> {
        (!self.attempts.is_empty()).then(|| f64::from(self.passes) / self.attempts.len() as f64)
    }
}

/// The totals of these (finished) tests.
pub(crate) fn totals_of(tests: &[&TestResult]) -> Totals {
    let mut t = Totals::default();
    for test in tests {
        t.tests += 1;
        match test.outcome {
            Outcome::Passed => t.passed += 1,
            Outcome::Failed => t.failed += 1,
            Outcome::Skipped => t.skipped += 1,
        }
        t.attempts += test.attempts.len() as u32;
        t.attempts_passed += test.passes;
        t.usage.add(&test.usage);
        t.duration_ms += test.duration_ms;
    }
    t.cost_usd = sum_costs(tests.iter().map(|x| x.cost_usd));
    t.pass_rate = if t.attempts == 0 {
        0.0
    } else {
        f64::from(t.attempts_passed) / f64::from(t.attempts)
    };
    t
}

fn sum_costs(costs: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    costs
        .flatten()
        .fold(None, |acc, c| Some(acc.unwrap_or(0.0) + c))
}

impl Results {
    pub(crate) fn new(settings: Settings, started_unix_ms: i64) -> Results {
        Results {
            kind: KIND.to_string(),
            format_version: FORMAT_VERSION,
            toolrun_version: env!("CARGO_PKG_VERSION").to_string(),
            started_at: crate::builtins::datetime::rfc3339_utc(started_unix_ms),
            settings,
            specs: Vec::new(),
            models: Vec::new(),
            tests: Vec::new(),
            totals: Totals::default(),
            baseline: None,
        }
    }

    /// Adds the spec once, however many of its tests ran.
    pub(crate) fn add_spec(&mut self, registry: &Registry) {
        if !self.specs.iter().any(|s| s.name == registry.name) {
            self.specs.push(SpecInfo::from_registry(registry));
        }
    }

    /// Adds the model once; returns its price for [`Attempt::from_trace`].
    pub(crate) fn add_model(&mut self, def: &ModelDef) -> Option<PriceInfo> {
        let info = ModelInfo::from_def(def);
        let price = info.price;
        if !self.models.iter().any(|m| m.name == info.name) {
            self.models.push(info);
        }
        price
    }

    /// Finishes every test and computes the totals. Call once, after the last attempt.
    pub(crate) fn finish(&mut self) {
        for test in &mut self.tests {
            test.finish();
        }
        self.totals = totals_of(&self.tests.iter().collect::<Vec<_>>());
    }

    /// The document as written: secrets masked everywhere, keys in a stable order.
    pub(crate) fn to_json(&self, redactor: &Redactor) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        redactor.value(&mut v);
        v
    }

    /// Writes the document atomically; refuses (fail closed) if any spelling of a secret would
    /// survive masking, naming the secret and where.
    pub(crate) fn write(&self, path: &Path, redactor: &Redactor) -> Result<(), String> {
        let doc =
            serde_json::to_value(self).map_err(|e| format!("cannot encode the results: {e}"))?;
        let text = redactor.to_pretty(doc).map_err(|leak| {
            format!(
                "refusing to write results `{}`: {leak} even after masking; nothing was written",
                path.display()
            )
        })?;
        crate::files::write_atomically(path, text.as_bytes())
            .map_err(|e| format!("cannot write results `{}`: {e}", path.display()))
    }

    /// Reads a results document, with an error a person can act on: unreadable, not JSON, not a
    /// results document (a trace or a fixture given by mistake), or a version this toolrun
    /// does not know.
    pub(crate) fn load(path: &Path) -> Result<Results, String> {
        Results::load_with_digest(path).map(|(r, _)| r)
    }

    /// [`Results::load`], with the SHA-256 of the bytes it read: `report` reads each file
    /// twice and must know it read the same file both times.
    pub(crate) fn load_with_digest(path: &Path) -> Result<(Results, [u8; 32]), String> {
        // Like fixtures: a FIFO or `/dev/zero` given as a results file is refused, not read
        // until memory runs out.
        let bytes = crate::files::read_regular(path, MAX_RESULTS_BYTES).map_err(|e| match e {
            crate::files::ReadError::NotAFile(e) => {
                format!("cannot read results file `{}`: it {e}", path.display())
            }
            crate::files::ReadError::TooLarge { limit } => format!(
                "results file `{}` is larger than {limit} bytes",
                path.display()
            ),
        })?;
        let digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(&bytes).into();
        Results::from_json(path, &bytes).map(|r| (r, digest))
    }

    /// A results document from its bytes, checked as [`Results::load`] says. The bytes are
    /// parsed twice, the second time straight into the document: no JSON tree of the whole file
    /// is built (it cost several times the file).
    pub(crate) fn from_json(path: &Path, bytes: &[u8]) -> Result<Results, String> {
        let header = match serde_json::from_slice::<Header>(bytes) {
            Ok(h) => h,
            // Valid JSON of another shape (an array, a number): not a results document.
            Err(e) if e.classify() == serde_json::error::Category::Data => Header::default(),
            Err(e) => {
                return Err(format!(
                    "`{}` is not a results file: it is not valid JSON ({e})",
                    path.display()
                ))
            }
        };
        if header.kind.as_ref().and_then(Value::as_str) != Some(KIND) {
            let looks_like = if header.exchanges.is_some() || header.trace.is_some() {
                " (it looks like a fixture)"
            } else if header.stop_reason.is_some() && header.messages.is_some() {
                " (it looks like a run trace)"
            } else {
                ""
            };
            return Err(format!(
                "`{}` is not a toolrun results file{looks_like}: expected `\"kind\": \"{KIND}\"`; \
                 write one with `toolrun test SPEC --results {}`",
                path.display(),
                path.display()
            ));
        }
        let version = header.format_version.as_ref().and_then(Value::as_u64);
        if version != Some(u64::from(FORMAT_VERSION)) {
            let got = header
                .format_version
                .map_or_else(|| "none".to_string(), |v| v.to_string());
            return Err(format!(
                "`{}` has results format_version {got}; this toolrun ({}) reads version \
                 {FORMAT_VERSION}: regenerate it with this toolrun, or use the toolrun that wrote it",
                path.display(),
                env!("CARGO_PKG_VERSION")
            ));
        }
        let results: Results = serde_json::from_slice(bytes).map_err(|e| {
            format!(
                "`{}` is a damaged results file: {e}; regenerate it with `toolrun test --results`",
                path.display()
            )
        })?;
        validate::check(&results).map_err(|e| {
            format!(
                "`{}` is a damaged results file: {e}; regenerate it with `toolrun test --results`",
                path.display()
            )
        })?;
        Ok(results)
    }
}

/// The keys that tell a results file from a trace or a fixture; the rest is skipped unread.
#[derive(Default, Deserialize)]
struct Header {
    kind: Option<Value>,
    format_version: Option<Value>,
    exchanges: Option<serde::de::IgnoredAny>,
    trace: Option<serde::de::IgnoredAny>,
    stop_reason: Option<serde::de::IgnoredAny>,
    messages: Option<serde::de::IgnoredAny>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::{CallMessage, Message};
    use crate::trace::{PendingCall, SpecRef, ToolErrorEntry, ToolResultEntry, Trace};
    use serde_json::json;

    pub(crate) fn trace() -> Trace {
        Trace {
            format_version: 1,
            status: crate::trace::Status::Ok,
            stop_reason: crate::trace::StopReason::Answer,
            final_output: Some("AAPL is 178.15".into()),
            query: "price?".into(),
            model: "gpt".into(),
            spec: SpecRef {
                name: "s".into(),
                sha256: "x".into(),
            },
            tool_results: vec![ToolResultEntry {
                id: "c1".into(),
                name: "price".into(),
                arguments: json!({"ticker": "AAPL"}),
                result: Some(json!(178.15)),
                error: None,
                status: crate::trace::CallStatus::Ok,
                truncated: false,
                http: None,
                mcp: None,
                started_at: None,
                duration_ms: 0.5,
            }],
            tool_errors: vec![ToolErrorEntry {
                id: "c2".into(),
                name: "nope".into(),
                kind: crate::trace::ErrorKind::UnknownTool,
                message: "no tool `nope`".into(),
                details: None,
            }],
            tool_call_count: 1,
            steps: 2,
            messages: vec![
                Message::User {
                    content: "price?".into(),
                },
                Message::Assistant {
                    content: None,
                    tool_calls: vec![
                        CallMessage {
                            id: "c2".into(),
                            name: "nope".into(),
                            arguments: json!({}),
                        },
                        CallMessage {
                            id: "c1".into(),
                            name: "price".into(),
                            arguments: json!({"ticker": "AAPL"}),
                        },
                    ],
                },
                Message::Assistant {
                    content: Some("AAPL is 178.15".into()),
                    tool_calls: vec![],
                },
            ],
            pending_tool_call: None,
            error: None,
            usage: Some(crate::trace::UsageTotals {
                input_tokens: 1_000,
                output_tokens: 500,
                total_tokens: 1_500,
                per_step: vec![],
                ..Default::default()
            }),
            model_calls: Vec::new(),
            started_at: None,
            duration_ms: 3.0,
            turns: Vec::new(),
        }
    }

    #[test]
    fn an_attempt_keeps_the_models_order_and_what_became_of_each_call() {
        let a = Attempt::from_trace(1, Source::Live, &trace(), vec![], None);
        assert_eq!(a.outcome, Outcome::Passed);
        let names: Vec<(&str, CallState, u32)> = a
            .tool_calls
            .iter()
            .map(|c| (c.name.as_str(), c.status, c.step))
            .collect();
        assert_eq!(
            names,
            [("nope", CallState::Error, 1), ("price", CallState::Ok, 1)]
        );
        assert_eq!(
            a.tool_calls[0].error.as_ref().map(|e| e.kind),
            Some(ErrorKind::UnknownTool)
        );
        assert_eq!(a.tool_calls[1].result, Some(json!(178.15)));
        assert_eq!(a.status, Some(Status::Ok));
        assert_eq!(a.answer.as_deref(), Some("AAPL is 178.15"));
        assert_eq!(a.cost_usd, None);
    }

    #[test]
    fn cost_follows_the_declared_price_per_million_tokens() {
        let mut price = PriceInfo {
            input: 2.0,
            output: 10.0,
            cached_input: None,
            reasoning: None,
        };
        let a = Attempt::from_trace(1, Source::Live, &trace(), vec![], Some(&price));
        // 1000 * 2 / 1e6 + 500 * 10 / 1e6
        assert!((a.cost_usd.unwrap_or(0.0) - 0.007).abs() < 1e-12);
        // Cached input and reasoning are parts of the counts, at their own price when given.
        let mut t = trace();
        if let Some(u) = &mut t.usage {
            u.cached_input_tokens = 400;
            u.reasoning_tokens = 100;
        }
        let a = Attempt::from_trace(1, Source::Live, &t, vec![], Some(&price));
        assert!((a.cost_usd.unwrap_or(0.0) - 0.007).abs() < 1e-12);
        price.cached_input = Some(0.5);
        price.reasoning = Some(20.0);
        let a = Attempt::from_trace(1, Source::Live, &t, vec![], Some(&price));
        // 600 * 2 + 400 * 0.5 + 400 * 10 + 100 * 20, per million
        assert!((a.cost_usd.unwrap_or(0.0) - 0.0074).abs() < 1e-12);
    }

    #[test]
    fn a_pending_call_is_recorded_apart_from_the_calls_that_ran() {
        let mut t = trace();
        t.pending_tool_call = Some(PendingCall {
            id: "c3".into(),
            name: "send".into(),
            arguments: json!({"to": "bob"}),
        });
        t.messages.push(Message::Assistant {
            content: None,
            tool_calls: vec![CallMessage {
                id: "c3".into(),
                name: "send".into(),
                arguments: json!({"to": "bob"}),
            }],
        });
        let a = Attempt::from_trace(1, Source::Scripted, &t, vec![], None);
        assert_eq!(a.tool_calls.len(), 2);
        assert_eq!(
            a.pending_tool_call.as_ref().map(|p| p.status),
            Some(CallState::Pending)
        );
    }

    #[test]
    fn a_test_passes_at_its_pass_rate_and_totals_add_up() {
        let price = PriceInfo {
            input: 1.0,
            output: 1.0,
            cached_input: None,
            reasoning: None,
        };
        let mut r = Results::new(Settings::default(), 0);
        let mut t = TestResult::new("s", "flaky", "q", 0.6);
        for i in 1..=3 {
            let failures = if i == 2 {
                vec![Failure::assertion("output_contains", "missing 2815")]
            } else {
                vec![]
            };
            t.push(Attempt::from_trace(
                i,
                Source::Live,
                &trace(),
                failures,
                Some(&price),
            ));
        }
        r.tests.push(t);
        r.tests
            .push(TestResult::new("s", "later", "q", 1.0).skipped("model `gpt` is live"));
        let mut strict = TestResult::new("s", "strict", "q", 1.0);
        strict.push(Attempt::without_trace(
            1,
            Source::Replay,
            Failure::error("fixture `f.json` does not exist"),
            0.0,
        ));
        r.tests.push(strict);
        r.finish();
        assert_eq!(r.tests[0].outcome, Outcome::Passed);
        assert_eq!(r.tests[0].passes, 2);
        assert_eq!(r.tests[1].outcome, Outcome::Skipped);
        assert_eq!(r.tests[2].outcome, Outcome::Failed);
        assert_eq!(
            (r.totals.passed, r.totals.failed, r.totals.skipped),
            (1, 1, 1)
        );
        assert_eq!((r.totals.attempts, r.totals.attempts_passed), (4, 2));
        assert_eq!(r.totals.usage.total_tokens, 4_500);
        assert!((r.totals.cost_usd.unwrap_or(0.0) - 0.0045).abs() < 1e-12);
        assert_eq!(r.started_at.as_deref(), Some("1970-01-01T00:00:00Z"));
    }

    #[test]
    fn documents_round_trip_and_strangers_are_refused() {
        let dir = crate::test_support::temp_dir("results-round-trip");
        let mut r = Results::new(Settings::default(), 0);
        let mut t = TestResult::new("s", "t", "token sk-secret-1", 1.0);
        t.push(Attempt::from_trace(1, Source::Live, &trace(), vec![], None));
        r.tests.push(t);
        r.finish();
        let path = dir.join("r.json");
        let redactor = Redactor::new(["sk-secret-1".to_string()]);
        assert_eq!(r.write(&path, &redactor), Ok(()));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(!text.contains("sk-secret-1"), "{text}");
        let back = Results::load(&path);
        assert_eq!(back.map(|b| b.tests[0].attempts.len()), Ok(1));

        let trace_path = dir.join("trace.json");
        let _ = std::fs::write(&trace_path, r#"{"stop_reason":"answer","messages":[]}"#);
        let err = Results::load(&trace_path).err().unwrap_or_default();
        assert!(err.contains("looks like a run trace"), "{err}");

        let newer = dir.join("newer.json");
        let _ = std::fs::write(
            &newer,
            format!(r#"{{"kind":"{KIND}","format_version":99}}"#),
        );
        let err = Results::load(&newer).err().unwrap_or_default();
        assert!(err.contains("format_version 99"), "{err}");

        let err = Results::load(&dir.join("absent.json"))
            .err()
            .unwrap_or_default();
        assert!(err.contains("cannot read"), "{err}");
    }
}
