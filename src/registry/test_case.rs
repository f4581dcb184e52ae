//! The tests a spec declares, as `toolrun test` runs them: each case, its turns and what they
//! must show.

use super::{Fault, LazyRegex};
use crate::vocab::{ErrorKind, Status, StopReason};
use serde_json::{Map, Value};
use std::path::PathBuf;

pub(crate) struct TestCase {
    pub(crate) name: String,
    /// Where the test's `name` is in its spec: failing tests are annotated there.
    pub(crate) span: crate::diag::Span,
    pub(crate) query: String,
    pub(crate) model: Option<String>,
    pub(crate) fixture: Option<PathBuf>,
    /// `now:`: this test's clock (Unix ms), instead of `TOOLRUN_NOW` or the system clock.
    pub(crate) now_unix_ms: Option<i64>,
    pub(crate) approve: Vec<String>,
    /// Faults for this test only, by tool; they replace the tool's own.
    pub(crate) faults: Vec<(String, Vec<Fault>)>,
    /// With `turns:`, the whole conversation's; else the one query's.
    pub(crate) expect: Expect,
    /// `turns:`: a conversation, one user turn each (empty for a test with a `query:`).
    pub(crate) turns: Vec<TestTurn>,
    /// A test made from one row of a `from:` data file.
    pub(crate) data: Option<DataRow>,
}

/// One user turn of a multi-turn test.
pub(crate) struct TestTurn {
    pub(crate) query: String,
    /// Where the turn is in its spec, for the failure that names it.
    pub(crate) span: crate::diag::Span,
    pub(crate) expect: Expect,
}

/// Where a test made from a data file's row comes from.
#[derive(Clone, Debug)]
pub(crate) struct DataRow {
    /// Which `from:` test of the spec made it: `--sample` draws from each one on its own.
    pub(crate) group: u32,
    /// Why the row could not become a test (a ragged row, bytes that are not UTF-8, a column
    /// missing); the test fails with this and the spec's other tests still run.
    pub(crate) broken: Option<String>,
}

#[derive(Default)]
pub(crate) struct Expect {
    pub(crate) status: Option<Status>,
    pub(crate) stop_reason: Option<StopReason>,
    pub(crate) tool_calls: Option<Vec<String>>,
    pub(crate) tool_calls_include: Vec<String>,
    pub(crate) tool_calls_exclude: Vec<String>,
    /// Per call, in order: each object must be a subset of that call's arguments.
    pub(crate) arguments: Vec<Map<String, Value>>,
    pub(crate) error_kinds: Option<Vec<ErrorKind>>,
    pub(crate) output_contains: Vec<String>,
    pub(crate) output_not_contains: Vec<String>,
    pub(crate) output_matches: Option<LazyRegex>,
    pub(crate) max_tool_calls: Option<u32>,
    pub(crate) judge: Option<Judge>,
    /// Budgets: input + output tokens, USD, and the run's wall time in milliseconds.
    pub(crate) max_tokens: Option<u64>,
    pub(crate) max_cost_usd: Option<f64>,
    pub(crate) max_latency_ms: Option<f64>,
}

/// A test's name as the file name of its fixture under `fixtures: DIR`: anything outside a
/// conservative set becomes `_`.
pub(crate) fn fixture_stem(name: &str) -> String {
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

/// The one tool a judge's grader is offered (`crate::judge`).
pub(crate) const GRADE_TOOL: &str = "grade";

/// `expect.judge`: a grader model scores the answer against the rubric.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Judge {
    pub(crate) model: String,
    pub(crate) rubric: String,
    /// The lowest passing score, 0 to 1.
    pub(crate) pass: f64,
    /// Show the grader the tool calls and results, not only the answer.
    pub(crate) trajectory: bool,
}
