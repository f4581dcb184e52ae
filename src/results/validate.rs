//! What a results document must hold before anything counts with it (issue 36 §8): `passes`
//! within the attempts, totals that add up, and a `K/N` partition. A file that breaks these was
//! not written by toolrun (or was edited); trusting it wrapped a counter and sized a table by it.

use super::Results;

/// `K/N` as `test --partition` writes it, with `1 <= K <= N`.
pub(crate) fn partition(text: &str) -> Option<(u64, u64)> {
    let (k, n) = text.split_once('/')?;
    let (k, n): (u64, u64) = (k.trim().parse().ok()?, n.trim().parse().ok()?);
    (1 <= k && k <= n).then_some((k, n))
}

/// The first field that does not hold, as `field: why`.
pub(super) fn check(r: &Results) -> Result<(), String> {
    for (i, t) in r.tests.iter().enumerate() {
        let runs = t.attempts.len();
        if t.passes as usize > runs {
            return Err(format!(
                "`tests[{i}].passes` ({}::{}) is {} but the test has {runs} attempt(s)",
                t.spec, t.name, t.passes
            ));
        }
        if u32::try_from(runs).is_err() {
            return Err(format!(
                "`tests[{i}].attempts` ({}::{}) holds more than {} attempts",
                t.spec,
                t.name,
                u32::MAX
            ));
        }
    }
    let totals = &r.totals;
    if totals.attempts_passed > totals.attempts {
        return Err(format!(
            "`totals.attempts_passed` is {} but `totals.attempts` is {}",
            totals.attempts_passed, totals.attempts
        ));
    }
    let outcomes = u64::from(totals.passed) + u64::from(totals.failed) + u64::from(totals.skipped);
    if outcomes != u64::from(totals.tests) {
        return Err(format!(
            "`totals.tests` is {} but `totals.passed`, `failed` and `skipped` add up to {outcomes}",
            totals.tests
        ));
    }
    if let Some(text) = &r.settings.partition {
        if partition(text).is_none() {
            return Err(format!(
                "`settings.partition` is `{}`; it must be K/N with 1 <= K <= N, as `test --partition` writes it",
                crate::term::visible_line(text)
            ));
        }
    }
    Ok(())
}
