//! The statistics that tell a regression from noise: a 95% Wilson interval for a pass rate, the
//! exact McNemar (sign) test for two runs of the same tests, and Fisher's exact test for one
//! test's pass counts in two runs. Exact tests, because suites are small and repeats are few:
//! the normal approximations are wrong exactly where CI needs them. Checked against SciPy's
//! values in `tests/data/stats_reference.json` (made by `scripts/stats_reference.py`).

use serde::Serialize;

/// Below this p-value a difference is called significant.
pub(crate) const ALPHA: f64 = 0.05;
/// The normal quantile for a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// A pass rate with its 95% Wilson score interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub(crate) struct Interval {
    pub(crate) low: f64,
    pub(crate) high: f64,
}

/// Wilson's score interval for `passes` of `runs` (no continuity correction):
/// `(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)`. `None` for no runs.
pub(crate) fn wilson(passes: u32, runs: u32) -> Option<Interval> {
    if runs == 0 || passes > runs {
        return None;
    }
    let n = f64::from(runs);
    let p = f64::from(passes) / n;
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    Some(Interval {
        // At 0 and n the bound is exact; rounding must not move it off the edge.
        low: if passes == 0 {
            0.0
        } else {
            (center - half).max(0.0)
        },
        high: if passes == runs {
            1.0
        } else {
            (center + half).min(1.0)
        },
    })
}

/// McNemar's exact test: of the tests both runs ran, `only_first` passed only in the first and
/// `only_second` only in the second. Two-sided sign test on those discordant tests:
/// `p = min(1, 2 · Σ_{i ≤ min(b,c)} C(b+c, i) / 2^(b+c))`; 1 when there are none.
///
/// Each term comes from the one before (`C(n, i+1) = C(n, i) · (n-i) / (i+1)`), in log space so
/// no term overflows: constant memory, whatever the counts (issue 36 §8: a table of `ln k!` up
/// to `n` let a results file ask for 34 GB).
pub(crate) fn mcnemar_exact(only_first: u64, only_second: u64) -> f64 {
    let n = only_first.saturating_add(only_second);
    if n == 0 {
        return 1.0;
    }
    let k = only_first.min(only_second);
    let nf = n as f64;
    // ln(C(n, 0) / 2^n)
    let mut ln_term = nf * 0.5f64.ln();
    let mut tail = ln_term.exp();
    for i in 0..k {
        let i = i as f64;
        ln_term += (nf - i).ln() - (i + 1.0).ln();
        tail += ln_term.exp();
    }
    (2.0 * tail).min(1.0)
}

/// Fisher's exact test, two-sided, on `[[a, b], [c, d]]` (passes and failures of one test in
/// two runs): the probability, with the margins fixed, of every table no more likely than the
/// one observed (hypergeometric; ties within a relative 1e-7, as R and SciPy do).
///
/// The probabilities are walked by their ratio from one table to the next,
/// `P(x+1) / P(x) = (row1-x)(col1-x) / ((x+1)(row2-col1+x+1))`, in log space and relative to the
/// first table, then normalised by their sum: two passes, constant memory.
pub(crate) fn fisher_exact(a: u64, b: u64, c: u64, d: u64) -> f64 {
    let (row1, row2, col1) = (
        a.saturating_add(b),
        c.saturating_add(d),
        a.saturating_add(c),
    );
    let n = row1.saturating_add(row2);
    if row1 == 0 || row2 == 0 || col1 == 0 || col1 >= n {
        return 1.0;
    }
    let low = col1.saturating_sub(row2);
    let high = row1.min(col1);
    // ln P(x) - ln P(low), for x = low..=high, in order.
    let weights = || {
        let (r1, r2, c1) = (row1 as f64, row2 as f64, col1 as f64);
        let mut w = 0.0;
        (low..=high).map(move |x| {
            let here = (x, w);
            let xf = x as f64;
            w += (r1 - xf).ln() + (c1 - xf).ln() - (xf + 1.0).ln() - (r2 - c1 + xf + 1.0).ln();
            here
        })
    };
    let (mut top, mut observed) = (f64::NEG_INFINITY, 0.0);
    for (x, w) in weights() {
        top = top.max(w);
        if x == a {
            observed = w;
        }
    }
    let observed = (observed - top).exp();
    let (mut all, mut extreme) = (0.0, 0.0);
    for (_, w) in weights() {
        let q = (w - top).exp();
        all += q;
        if q <= observed * (1.0 + 1e-7) {
            extreme += q;
        }
    }
    (extreme / all).min(1.0)
}

/// A p-value as people read it: "significant (p=0.012)" or "within noise (p=0.50)".
pub(crate) fn verdict(p: f64) -> String {
    if p < ALPHA {
        format!("significant (p={})", p_text(p))
    } else {
        format!("within noise (p={})", p_text(p))
    }
}

pub(crate) fn p_text(p: f64) -> String {
    if p < 0.001 {
        "<0.001".to_string()
    } else {
        format!("{p:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn reference() -> Value {
        serde_json::from_str(include_str!("../tests/data/stats_reference.json"))
            .unwrap_or(Value::Null)
    }

    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-9 * want.abs().max(1e-300) || (got - want).abs() < 1e-12
    }

    fn cases<'a>(r: &'a Value, key: &str) -> &'a [Value] {
        r[key].as_array().map(Vec::as_slice).unwrap_or(&[])
    }

    #[test]
    fn wilson_matches_scipy() {
        let r = reference();
        let cases = cases(&r, "wilson_95");
        assert!(cases.len() > 10);
        for c in cases {
            let (k, n) = (
                c["passes"].as_u64().unwrap_or(0),
                c["runs"].as_u64().unwrap_or(0),
            );
            let got = wilson(k as u32, n as u32).unwrap_or(Interval {
                low: f64::NAN,
                high: f64::NAN,
            });
            let (lo, hi) = (
                c["low"].as_f64().unwrap_or(0.0),
                c["high"].as_f64().unwrap_or(0.0),
            );
            assert!(
                close(got.low, lo) && close(got.high, hi),
                "{k}/{n}: {got:?} vs {c}"
            );
        }
        assert_eq!(wilson(0, 0), None);
    }

    #[test]
    fn mcnemar_matches_scipy() {
        let r = reference();
        let cases = cases(&r, "mcnemar_exact");
        assert!(cases.len() > 10);
        for c in cases {
            let (b, n) = (
                c["only_first"].as_u64().unwrap_or(0),
                c["only_second"].as_u64().unwrap_or(0),
            );
            let want = c["p"].as_f64().unwrap_or(-1.0);
            let got = mcnemar_exact(b, n);
            assert!(close(got, want), "{b},{n}: {got} vs {want}");
        }
    }

    #[test]
    fn fisher_matches_scipy() {
        let r = reference();
        let cases = cases(&r, "fisher_exact_two_sided");
        assert!(cases.len() > 10);
        for c in cases {
            let t: Vec<u64> = c["table"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|row| row.as_array().into_iter().flatten())
                .filter_map(Value::as_u64)
                .collect();
            let want = c["p"].as_f64().unwrap_or(-1.0);
            let got = fisher_exact(t[0], t[1], t[2], t[3]);
            assert!(close(got, want), "{t:?}: {got} vs {want}");
        }
    }

    #[test]
    fn counts_far_past_any_table_cost_no_memory() {
        // Issue 36 §8: these once sized a table of ln k! by the counts.
        let p = mcnemar_exact(u64::from(u32::MAX), 2);
        assert!(p < 1e-300, "{p}");
        assert_eq!(mcnemar_exact(u64::MAX, 0), 0.0);
        let p = fisher_exact(2_000_000, 0, 1_000_000, 1_000_000);
        assert!((0.0..1e-300).contains(&p), "{p}");
        assert_eq!(fisher_exact(u64::MAX, 1, 0, 1), 1.0);
        let even = fisher_exact(500_000, 500_000, 500_000, 500_000);
        assert!((even - 1.0).abs() < 1e-9, "{even}");
    }

    #[test]
    fn verdicts_read_well() {
        assert_eq!(verdict(0.0123), "significant (p=0.012)");
        assert_eq!(verdict(0.5), "within noise (p=0.500)");
        assert_eq!(verdict(0.00001), "significant (p=<0.001)");
    }
}
