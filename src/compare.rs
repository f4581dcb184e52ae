//! Two sets of test results compared: which tests regressed or were fixed beyond noise, which are
//! new or gone, and whether the whole moved. One rule for `test --baseline`, `report` columns and
//! model matrices, so CI and the page never disagree.
//!
//! A test is matched by spec and name. Its change is decided on its pass counts: when every
//! attempt on both sides ran offline (scripted or replayed), runs are deterministic and any
//! change counts; otherwise Fisher's exact test must find it significant (p < 0.05). The whole is
//! judged by McNemar's exact test on the tests both ran (their pass/fail outcomes).

use crate::results::{Outcome, Results, Source, TestResult};
use crate::stats;
use serde::Serialize;
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Change {
    /// The pass rate fell beyond noise.
    Regression,
    /// The pass rate rose beyond noise.
    Fixed,
    /// It fell, within noise.
    Worse,
    /// It rose, within noise.
    Better,
}

/// One test whose pass rate changed.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct TestChange {
    /// `spec::name`.
    pub(crate) test: String,
    pub(crate) change: Change,
    /// Passes and runs before and after.
    pub(crate) before: (u32, u32),
    pub(crate) after: (u32, u32),
    /// Fisher's exact test; absent when both sides ran offline (deterministic).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) p_value: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Comparison {
    pub(crate) changes: Vec<TestChange>,
    /// In the second only, and in the first only: named, never counted as regressions.
    pub(crate) new: Vec<String>,
    pub(crate) gone: Vec<String>,
    /// Tests both ran (not skipped on either side).
    pub(crate) paired: u32,
    pub(crate) passed_only_before: u32,
    pub(crate) passed_only_after: u32,
    /// McNemar's exact test over the paired tests.
    pub(crate) p_value: f64,
    /// "significant (p=...)" or "within noise (p=...)".
    pub(crate) verdict: String,
}

impl Comparison {
    pub(crate) fn of(&self, change: Change) -> impl Iterator<Item = &TestChange> {
        self.changes.iter().filter(move |c| c.change == change)
    }

    pub(crate) fn change_of(&self, id: &str) -> Option<&TestChange> {
        self.changes.iter().find(|c| c.test == id)
    }
}

pub(crate) fn id(t: &TestResult) -> String {
    format!("{}::{}", t.spec, t.name)
}

fn ran(t: &TestResult) -> bool {
    t.outcome != Outcome::Skipped && !t.attempts.is_empty()
}

fn offline(t: &TestResult) -> bool {
    t.attempts
        .iter()
        .all(|a| matches!(a.source, Source::Scripted | Source::Replay))
}

/// Compares `after` with `before`, in `after`'s order (then what is gone, in `before`'s).
pub(crate) fn compare(before: &[&TestResult], after: &[&TestResult]) -> Comparison {
    let index: HashMap<(&str, &str), &TestResult> = before
        .iter()
        .map(|t| ((t.spec.as_str(), t.name.as_str()), *t))
        .collect();
    let mut c = Comparison::default();
    let mut seen = std::collections::HashSet::new();
    for t in after {
        let key = (t.spec.as_str(), t.name.as_str());
        seen.insert(key);
        let Some(b) = index.get(&key) else {
            c.new.push(id(t));
            continue;
        };
        if !ran(b) || !ran(t) {
            continue;
        }
        c.paired += 1;
        match (b.outcome == Outcome::Passed, t.outcome == Outcome::Passed) {
            (true, false) => c.passed_only_before += 1,
            (false, true) => c.passed_only_after += 1,
            _ => {}
        }
        if let Some(change) = change(b, t) {
            c.changes.push(change);
        }
    }
    c.gone = before
        .iter()
        .filter(|t| !seen.contains(&(t.spec.as_str(), t.name.as_str())))
        .map(|t| id(t))
        .collect();
    c.p_value = stats::mcnemar_exact(
        u64::from(c.passed_only_before),
        u64::from(c.passed_only_after),
    );
    c.verdict = stats::verdict(c.p_value);
    c
}

/// A run with a baseline. A model matrix is compared model by model (with the baseline's run of
/// that model when it is a matrix too, else with the whole baseline), each test named
/// `spec::name [model]`; the whole is judged over every model's paired tests.
pub(crate) fn with_baseline(before: &Results, after: &Results) -> Comparison {
    if after.settings.models.len() < 2 {
        return compare(&all(before), &all(after));
    }
    let mut whole = Comparison::default();
    for m in &after.settings.models {
        let then: Vec<&TestResult> = before
            .tests
            .iter()
            .filter(|t| before.settings.models.len() < 2 || t.model.as_deref() == Some(m.as_str()))
            .collect();
        let now: Vec<&TestResult> = after
            .tests
            .iter()
            .filter(|t| t.model.as_deref() == Some(m.as_str()))
            .collect();
        let c = compare(&then, &now);
        let tag = |s: String| format!("{s} [{m}]");
        whole.changes.extend(c.changes.into_iter().map(|mut x| {
            x.test = tag(x.test);
            x
        }));
        whole.new.extend(c.new.into_iter().map(tag));
        whole.gone.extend(c.gone.into_iter().map(tag));
        whole.paired += c.paired;
        whole.passed_only_before += c.passed_only_before;
        whole.passed_only_after += c.passed_only_after;
    }
    whole.p_value = stats::mcnemar_exact(
        u64::from(whole.passed_only_before),
        u64::from(whole.passed_only_after),
    );
    whole.verdict = stats::verdict(whole.p_value);
    whole
}

fn all(r: &Results) -> Vec<&TestResult> {
    r.tests.iter().collect()
}

fn change(before: &TestResult, after: &TestResult) -> Option<TestChange> {
    let (bp, bn) = (before.passes, before.attempts.len() as u32);
    let (ap, an) = (after.passes, after.attempts.len() as u32);
    // Compare rates without dividing: ap/an vs bp/bn.
    let (lhs, rhs) = (u64::from(ap) * u64::from(bn), u64::from(bp) * u64::from(an));
    if lhs == rhs {
        return None;
    }
    let fell = lhs < rhs;
    let p_value = (!(offline(before) && offline(after))).then(|| {
        stats::fisher_exact(
            u64::from(bp),
            // Loaded documents have `passes <= runs` (`results::validate`); never wrap.
            u64::from(bn.saturating_sub(bp)),
            u64::from(ap),
            u64::from(an.saturating_sub(ap)),
        )
    });
    let beyond_noise = p_value.is_none_or(|p| p < stats::ALPHA);
    let change = match (fell, beyond_noise) {
        (true, true) => Change::Regression,
        (true, false) => Change::Worse,
        (false, true) => Change::Fixed,
        (false, false) => Change::Better,
    };
    Some(TestChange {
        test: id(after),
        change,
        before: (bp, bn),
        after: (ap, an),
        p_value,
    })
}

/// The comparison as the results document keeps it (`baseline`), with the baseline's file.
pub(crate) fn summary(c: &Comparison, file: &str) -> serde_json::Value {
    let mut v = serde_json::to_value(c).unwrap_or_default();
    if let Some(map) = v.as_object_mut() {
        map.insert("file".into(), file.into());
    }
    v
}

/// `1/1 → 0/1 (deterministic)` or `10/10 → 2/10, significant (p=0.001)`.
pub(crate) fn describe(c: &TestChange) -> String {
    let why = match c.p_value {
        None => "offline runs, deterministic".to_string(),
        Some(p) => stats::verdict(p),
    };
    format!(
        "{}/{} → {}/{} runs passed, {why}",
        c.before.0, c.before.1, c.after.0, c.after.1
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Attempt, Failure};

    fn test(name: &str, source: Source, passes: u32, runs: u32) -> TestResult {
        let mut t = TestResult::new("s", name, "q", 0.5);
        for i in 0..runs {
            let mut a = Attempt::without_trace(i + 1, source, Failure::error("x"), 1.0);
            if i < passes {
                a.outcome = Outcome::Passed;
                a.failures.clear();
            }
            t.push(a);
        }
        t.finish();
        t
    }

    #[test]
    fn offline_changes_count_and_live_ones_must_beat_noise() {
        let before = [
            test("det", Source::Replay, 1, 1),
            test("flaky", Source::Live, 10, 10),
            test("broken", Source::Live, 20, 20),
            test("gone", Source::Replay, 1, 1),
        ];
        let after = [
            test("det", Source::Replay, 0, 1),
            test("flaky", Source::Live, 8, 10),
            test("broken", Source::Live, 5, 20),
            test("new", Source::Replay, 0, 1),
        ];
        let c = compare(
            &before.iter().collect::<Vec<_>>(),
            &after.iter().collect::<Vec<_>>(),
        );
        let kinds: Vec<(&str, Change)> = c
            .changes
            .iter()
            .map(|x| (x.test.as_str(), x.change))
            .collect();
        assert_eq!(
            kinds,
            [
                ("s::det", Change::Regression),
                ("s::flaky", Change::Worse),
                ("s::broken", Change::Regression)
            ]
        );
        assert_eq!(c.new, ["s::new"]);
        assert_eq!(c.gone, ["s::gone"]);
        assert_eq!(c.paired, 3);
        // Outcomes at pass rate 0.5: det and broken fell from passed to failed; flaky passes.
        assert_eq!((c.passed_only_before, c.passed_only_after), (2, 0));
        assert!(c.verdict.starts_with("within noise"), "{}", c.verdict);
    }
}
