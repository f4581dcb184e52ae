//! Budgets as people read them, the same in the markdown summary, the terminal and JUnit: for
//! each budget of a test (its `expect`, and each turn's), the attempt that came closest to it,
//! as `1,234 / 4,000 tokens (31%)`.

use super::{duration, percent, tokens, usd};
use crate::results::{Attempt, Budget};

/// One budget of a test, as the attempt that came closest to it used it.
pub(crate) struct Closest<'a> {
    /// The turn whose `expect` holds the budget; `None` for the test's own.
    pub(crate) turn: Option<u32>,
    pub(crate) budget: &'a Budget,
    pub(crate) attempt: u32,
}

impl Closest<'_> {
    /// `max_tokens`, or `turn 2 max_tokens` for a turn's.
    pub(crate) fn label(&self) -> String {
        match self.turn {
            Some(n) => format!("turn {n} {}", self.budget.budget),
            None => self.budget.budget.clone(),
        }
    }

    /// Spent beyond the budget, or not known (a cost without a price): it failed.
    pub(crate) fn over(&self) -> bool {
        self.budget.used.is_none_or(|u| u > self.budget.limit)
    }

    /// Over the budget, or within [`CLOSE`] of it: worth a line in the terminal even when the
    /// test passed.
    pub(crate) fn close(&self) -> bool {
        self.budget
            .used
            .is_none_or(|u| u >= CLOSE * self.budget.limit)
    }
}

/// The share of a budget from which a passing test's terminal report shows it (90%): below it
/// the line would be noise on every run, and the results file and other reports have it anyway.
pub(crate) const CLOSE: f64 = 0.9;

/// Each budget of the test's attempts (the test's own first, then each turn's in order) at the
/// attempt that came closest to it: the most used, an unknown use counting as the most.
pub(crate) fn closest(attempts: &[Attempt]) -> Vec<Closest<'_>> {
    let mut out: Vec<Closest> = Vec::new();
    let all = attempts.iter().flat_map(|a| {
        let own = a.budgets.iter().map(move |b| (None, b, a.attempt));
        let turns = a
            .turns
            .iter()
            .flat_map(move |t| t.budgets.iter().map(move |b| (Some(t.turn), b, a.attempt)));
        own.chain(turns)
    });
    for (turn, budget, attempt) in all {
        let found = out
            .iter_mut()
            .find(|c| c.turn == turn && c.budget.budget == budget.budget);
        match found {
            None => out.push(Closest {
                turn,
                budget,
                attempt,
            }),
            Some(c) if more(budget, c.budget) => {
                c.budget = budget;
                c.attempt = attempt;
            }
            Some(_) => {}
        }
    }
    let rank = |c: &Closest| c.turn.unwrap_or(0);
    out.sort_by_key(rank);
    out
}

/// `a` used more of its budget than `b`.
fn more(a: &Budget, b: &Budget) -> bool {
    match (a.used, b.used) {
        (None, Some(_)) => true,
        (Some(x), Some(y)) => x > y,
        _ => false,
    }
}

/// `1,234 / 4,000 tokens (31%)`, `$0.0300 / $0.0600 (50%)`, `212 ms / 1.0 min (0%, replayed
/// from its fixture)`: a latency says how it was measured, a replay's time being toolrun's own.
pub(crate) fn text(b: &Budget) -> String {
    let (used, limit) = match b.budget.as_str() {
        "max_cost_usd" => (b.used.map(usd), usd(b.limit)),
        "max_latency_ms" => (b.used.map(duration), duration(b.limit)),
        _ => (
            b.used.map(|u| tokens(u as u64)),
            format!("{} tokens", tokens(b.limit as u64)),
        ),
    };
    let used = used.unwrap_or_else(|| "unknown (no price)".to_string());
    let notes: Vec<String> = b
        .share
        .map(percent)
        .into_iter()
        .chain(b.measured.map(|s| s.how().to_string()))
        .collect();
    if notes.is_empty() {
        format!("{used} / {limit}")
    } else {
        format!("{used} / {limit} ({})", notes.join(", "))
    }
}

/// Attempts (as the page's data block holds them) with each budget's `text` as [`text`] words
/// it: the page shows budgets in the words of every other report, not its own.
pub(crate) fn with_texts(attempts: &mut serde_json::Value) {
    let Some(attempts) = attempts.as_array_mut() else {
        return;
    };
    for attempt in attempts {
        add_texts(attempt.get_mut("budgets"));
        let turns = attempt.get_mut("turns").and_then(|t| t.as_array_mut());
        for turn in turns.into_iter().flatten() {
            add_texts(turn.get_mut("budgets"));
        }
    }
}

fn add_texts(budgets: Option<&mut serde_json::Value>) {
    let budgets = budgets.and_then(|b| b.as_array_mut());
    for b in budgets.into_iter().flatten() {
        let Ok(budget) = serde_json::from_value::<Budget>(b.clone()) else {
            continue;
        };
        if let Some(fields) = b.as_object_mut() {
            fields.insert("text".into(), text(&budget).into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Source;

    #[test]
    fn each_budget_reads_with_its_unit_and_share() {
        let b = Budget::new("max_tokens", 4000.0, Some(1234.0), Source::Live);
        assert_eq!(text(&b), "1,234 / 4,000 tokens (31%)");
        let b = Budget::new("max_cost_usd", 0.06, Some(0.03), Source::Live);
        assert_eq!(text(&b), "$0.0300 / $0.0600 (50%)");
        let b = Budget::new("max_cost_usd", 0.01, None, Source::Live);
        assert_eq!(text(&b), "unknown (no price) / $0.0100");
        let b = Budget::new("max_latency_ms", 60000.0, Some(212.4), Source::Replay);
        assert_eq!(text(&b), "212 ms / 1.0 min (0%, replayed from its fixture)");
    }

    #[test]
    fn the_page_gets_each_budget_worded_as_the_other_reports_word_it() {
        let mut v = serde_json::json!([{
            "budgets": [{ "budget": "max_tokens", "limit": 4000.0, "used": 30.0, "share": 0.0075 }],
            "turns": [{ "budgets": [{ "budget": "max_cost_usd", "limit": 0.06, "used": 0.03, "share": 0.5 }] }]
        }]);
        with_texts(&mut v);
        assert_eq!(v[0]["budgets"][0]["text"], "30 / 4,000 tokens (1%)");
        assert_eq!(
            v[0]["turns"][0]["budgets"][0]["text"],
            "$0.0300 / $0.0600 (50%)"
        );
    }

    #[test]
    fn the_closest_attempt_is_the_one_that_used_most() {
        let attempt = |n: u32, used: f64| {
            let mut a =
                Attempt::without_trace(n, Source::Live, crate::results::Failure::error("x"), 1.0);
            a.budgets = vec![Budget::new("max_tokens", 100.0, Some(used), Source::Live)];
            a
        };
        let attempts = [attempt(1, 30.0), attempt(2, 90.0), attempt(3, 60.0)];
        let found = closest(&attempts);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].attempt, found[0].budget.used), (2, Some(90.0)));
        assert_eq!(found[0].label(), "max_tokens");
        assert!(!found[0].over());
        assert!(found[0].close(), "90 of 100 is close");
        let far = [attempt(1, 89.0)];
        assert!(!closest(&far)[0].close(), "89 of 100 is not");
    }
}
