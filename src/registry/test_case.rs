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

/// Which rows of the data tests (`from:`) a compile keeps as tests. Every row is read and
/// checked either way; only `toolrun test` keeps any, and only those it will run, so a
/// 100,000-row file never stands in memory as 100,000 tests.
#[derive(Debug, Default)]
pub(crate) struct RowPick {
    pub(crate) keep: bool,
    /// `--filter`: rows whose name contains it.
    pub(crate) filter: Option<String>,
    /// `--sample N --seed S`: of each data test's matching rows, the N of lowest [`sample_key`].
    pub(crate) sample: Option<(u64, u64)>,
    /// `--partition K/N`, drawn after the sample (see [`shard_of`]).
    pub(crate) partition: Option<(u64, u64)>,
}

impl RowPick {
    /// Check every row, keep none: what every command but `test` needs.
    pub(crate) const NONE: RowPick = RowPick {
        keep: false,
        filter: None,
        sample: None,
        partition: None,
    };
}

/// What `--filter` found among the rows of the data tests: a row it matched may still be left
/// out by the sample or the shard, and a filter that matched nothing at all gets a hint.
#[derive(Debug, Default)]
pub(crate) struct RowsMatched {
    pub(crate) rows: u64,
    pub(crate) matched: u64,
    /// While no row matched: the row name most like the filter, for the hint.
    pub(crate) closest: Option<String>,
}

/// The order `--sample` draws a data test's rows in: a hash of the seed and the test's identity,
/// so the sample is the same whatever the order of the file, and a shard of a sample is a shard
/// of the same sample.
pub(crate) fn sample_key(spec: &str, test: &str, seed: u64) -> u64 {
    let h = fnv(&seed.to_le_bytes(), FNV_OFFSET);
    let h = fnv(spec.as_bytes(), h);
    let h = fnv(b"::", h);
    fnv(test.as_bytes(), h)
}

/// Sharding by a hash of the test's identity (`spec::test`), not its position, so adding a test
/// does not reshuffle every other test between CI machines. FNV-1a: stable across platforms and
/// releases.
pub(crate) fn shard_of(identity: &str, n: u64) -> u64 {
    fnv(identity.as_bytes(), FNV_OFFSET) % n + 1
}

const FNV_OFFSET: u64 = 0xcbf29ce484222325;

fn fnv(bytes: &[u8], mut h: u64) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}
