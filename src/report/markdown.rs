//! The summary as GitHub-flavoured markdown, for a CI job summary (`>> $GITHUB_STEP_SUMMARY`).
//! Job summaries render inline HTML, so every text from a results file is escaped here: a test
//! name must not become markup, a table cell, or a terminal escape.

use super::{duration, percent, tokens, usd, Change, Report};
use crate::redact::Redactor;
use crate::results::{Attempt, FailureKind, Outcome};
use std::fmt::Write;

/// At most this many failure lines, so a bad day does not bury the table.
const MAX_FAILURE_LINES: usize = 50;
/// Characters of one failure message.
const MAX_MESSAGE_CHARS: usize = 300;

/// Text safe inside a markdown table cell.
pub(crate) fn cell_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in crate::term::visible_line(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '#' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    format!("{cut}…")
}

/// Masked, then made safe for a table cell.
type Text<'a> = &'a dyn Fn(&str) -> String;

pub(crate) fn render(report: &Report, redactor: &Redactor) -> String {
    let t = |s: &str| cell_text(&redactor.str(s));
    let mut out = String::from("### toolrun report\n\n");
    let header: Vec<String> = report.columns.iter().map(|c| t(&c.label)).collect();

    let _ = writeln!(out, "| | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(header.len()));
    totals(&mut out, report);
    out.push('\n');

    let _ = writeln!(out, "| test | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(header.len()));
    test_rows(&mut out, report, &t);
    changes(&mut out, report, &t);
    budgets(&mut out, report, &t);
    turns(&mut out, report, &t);
    let lines = failure_lines(report, &t);
    if !lines.is_empty() {
        out.push_str("\n<details><summary>Failures</summary>\n\n");
        let total = lines.len();
        for l in lines.iter().take(MAX_FAILURE_LINES) {
            out.push_str(l);
            out.push('\n');
        }
        if total > MAX_FAILURE_LINES {
            let _ = writeln!(out, "- … and {} more", total - MAX_FAILURE_LINES);
        }
        out.push_str("\n</details>\n");
    }
    for n in &report.notes {
        let _ = writeln!(out, "\n> {}", t(n));
    }
    out
}

/// One row a total: tests and attempts passed, tokens, cost, time.
fn totals(out: &mut String, report: &Report) {
    let row = |out: &mut String, name: &str, f: &dyn Fn(&super::Column) -> String| {
        let cells: Vec<String> = report.columns.iter().map(f).collect();
        let _ = writeln!(out, "| **{name}** | {} |", cells.join(" | "));
    };
    row(out, "tests passed", &|c| {
        let ran = c.totals.passed + c.totals.failed;
        let rate = if ran == 0 {
            "—".to_string()
        } else {
            percent(f64::from(c.totals.passed) / f64::from(ran))
        };
        let skipped = if c.totals.skipped > 0 {
            format!(", {} skipped", c.totals.skipped)
        } else {
            String::new()
        };
        format!("{}/{ran} ({rate}){skipped}", c.totals.passed)
    });
    row(out, "attempts passed", &|c| {
        let interval = c
            .interval
            .map(|i| format!(", 95% CI {}–{}", percent(i.low), percent(i.high)))
            .unwrap_or_default();
        format!(
            "{}/{} ({}{interval})",
            c.totals.attempts_passed,
            c.totals.attempts,
            percent(c.totals.pass_rate)
        )
    });
    row(out, "tokens", &|c| tokens(c.totals.usage.total_tokens));
    row(out, "cost", &|c| {
        c.totals.cost_usd.map(usd).unwrap_or_else(|| "—".into())
    });
    row(out, "time", &|c| duration(c.totals.duration_ms));
}

/// One row a test: its outcome in each column, with regressions and fixes marked.
fn test_rows(out: &mut String, report: &Report, t: Text) {
    for r in &report.rows {
        let cells: Vec<String> = r
            .cells
            .iter()
            .map(|c| match c {
                None => "—".to_string(),
                Some(c) => {
                    let mark = match c.outcome {
                        Outcome::Passed => "✅",
                        Outcome::Failed => "❌",
                        Outcome::Skipped => "⏭️",
                    };
                    let count = match (c.runs, c.interval) {
                        (0, _) => " skipped".to_string(),
                        // Over repeats, the rate's 95% interval says how much it can be trusted.
                        (runs, Some(i)) if runs > 1 => format!(
                            " {}/{runs} [{}–{}]",
                            c.passes,
                            percent(i.low),
                            percent(i.high)
                        ),
                        (runs, _) => format!(" {}/{runs}", c.passes),
                    };
                    let change = match c.change {
                        Some(Change::Regression) => " **regression**",
                        Some(Change::Fixed) => " **fixed**",
                        Some(Change::Worse) => " worse, within noise",
                        Some(Change::Better) => " better, within noise",
                        None => "",
                    };
                    format!("{mark}{count}{change}")
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "| {}::{} | {} |",
            t(&r.spec),
            t(&r.name),
            cells.join(" | ")
        );
    }
}

/// Regressions and fixes between neighbouring columns.
fn changes(out: &mut String, report: &Report, t: Text) {
    for cmp in &report.comparisons {
        if cmp.paired == 0 {
            continue;
        }
        let (from, to) = (
            t(&report.columns[cmp.from].label),
            t(&report.columns[cmp.to].label),
        );
        let _ = writeln!(
            out,
            "\n**{from} → {to}**: {} regression(s), {} fix(es); {} test(s) in both, {} passed only in {from}, {} only in {to}: {}",
            cmp.regressions.len(),
            cmp.fixes.len(),
            cmp.paired,
            cmp.passed_only_before,
            cmp.passed_only_after,
            cmp.verdict
        );
        for id in &cmp.regressions {
            let _ = writeln!(out, "- regression: {}", t(id));
        }
        for id in &cmp.fixes {
            let _ = writeln!(out, "- fixed: {}", t(id));
        }
        for id in &cmp.worse {
            let _ = writeln!(out, "- worse, within noise: {}", t(id));
        }
        for id in &cmp.better {
            let _ = writeln!(out, "- better, within noise: {}", t(id));
        }
    }
}

/// At most this many conversations in the turns section (failing ones come first).
const MAX_CONVERSATIONS: usize = 50;
/// Characters of a turn's query or answer.
const MAX_TURN_CHARS: usize = 200;

/// Each budget of each test, one row a budget, the closest an attempt came to it in each column;
/// one over its budget is marked.
fn budgets(out: &mut String, report: &Report, t: Text) {
    let mut rows = Vec::new();
    for r in &report.rows {
        let per_column: Vec<Vec<super::budgets::Closest>> = r
            .cells
            .iter()
            .map(|c| c.as_ref().map(|c| super::budgets::closest(&c.attempts)))
            .map(Option::unwrap_or_default)
            .collect();
        // Budgets in the order the first column that has each shows them.
        let mut labels: Vec<String> = Vec::new();
        for c in per_column.iter().flatten() {
            if !labels.contains(&c.label()) {
                labels.push(c.label());
            }
        }
        for label in labels {
            let cells: Vec<String> = per_column
                .iter()
                .map(|col| match col.iter().find(|c| c.label() == label) {
                    None => "—".to_string(),
                    Some(c) if c.over() => {
                        format!("❌ {}", t(&super::budgets::text(c.budget)))
                    }
                    Some(c) => t(&super::budgets::text(c.budget)),
                })
                .collect();
            rows.push(format!(
                "| {}::{} | {} | {} |",
                t(&r.spec),
                t(&r.name),
                t(&label),
                cells.join(" | ")
            ));
        }
    }
    if rows.is_empty() {
        return;
    }
    let header: Vec<String> = report.columns.iter().map(|c| t(&c.label)).collect();
    out.push_str("\n#### Budgets\n\nThe closest any attempt came to each budget of `expect`.\n\n");
    let _ = writeln!(out, "| test | budget | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|---|{}", "---|".repeat(header.len()));
    for row in rows {
        let _ = writeln!(out, "{row}");
    }
}

/// Each conversation (`turns:`) in each column: the first failing attempt's turns, else the
/// last attempt's, each with its query, whether its `expect` held (the failing turn named with
/// what failed) and its answer or error.
fn turns(out: &mut String, report: &Report, t: Text) {
    let mut shown = 0;
    let mut left_out = 0;
    for r in &report.rows {
        for (col, cell) in r.cells.iter().enumerate() {
            let Some(cell) = cell else { continue };
            let failed = cell.attempts.iter().find(|a| a.outcome == Outcome::Failed);
            let Some(a) = failed.or(cell.attempts.last()) else {
                continue;
            };
            if a.turns.is_empty() {
                continue;
            }
            if shown == MAX_CONVERSATIONS {
                left_out += 1;
                continue;
            }
            if shown == 0 {
                out.push_str("\n#### Turns\n");
            }
            shown += 1;
            conversation(out, (&r.spec, &r.name, &report.columns[col].label), a, t);
        }
    }
    if left_out > 0 {
        let _ = writeln!(out, "\n… and {left_out} more conversation(s)");
    }
}

/// One attempt's turns as a table.
fn conversation(out: &mut String, (spec, name, column): (&str, &str, &str), a: &Attempt, t: Text) {
    let failing = a
        .turns
        .iter()
        .find(|turn| turn.outcome == Some(Outcome::Failed))
        .map(|turn| format!(": failed at turn {}", turn.turn))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "\n**{}::{}** ({}, attempt {}){failing}\n",
        t(spec),
        t(name),
        t(column),
        a.attempt
    );
    out.push_str("| turn | query | expect | answer |\n|---|---|---|---|\n");
    for turn in &a.turns {
        let verdict = match turn.outcome {
            Some(Outcome::Passed) => "✅ passed".to_string(),
            Some(Outcome::Failed) => format!("❌ failed: {}", t(&turn_failure(a, turn.turn))),
            _ => "— not checked".to_string(),
        };
        let answer = match (&turn.answer, &turn.error) {
            (Some(answer), _) => t(&truncate(answer, MAX_TURN_CHARS)),
            (None, Some(error)) => format!("error: {}", t(&truncate(error, MAX_TURN_CHARS))),
            (None, None) => format!("{} ({})", turn.status.as_str(), turn.stop_reason),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {verdict} | {answer} |",
            turn.turn,
            t(&truncate(&turn.query, MAX_TURN_CHARS)),
        );
    }
}

/// What failed in turn `n`: its assertions' keys (`turns[2].output_contains`), or the
/// divergence from its recording.
fn turn_failure(a: &Attempt, n: u32) -> String {
    let prefix = format!("turns[{n}]");
    let keys: Vec<&str> = a
        .failures
        .iter()
        .filter_map(|f| f.assertion.as_deref())
        .filter(|k| {
            k.strip_prefix(&prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        })
        .collect();
    if keys.is_empty() {
        "divergence from its recording".to_string()
    } else {
        keys.join(", ")
    }
}

/// One line a failure of a failed test, in every column.
fn failure_lines(report: &Report, t: Text) -> Vec<String> {
    let mut lines = Vec::new();
    for r in &report.rows {
        for (col, cell) in r.cells.iter().enumerate() {
            let Some(cell) = cell else { continue };
            if cell.outcome != Outcome::Failed {
                continue;
            }
            if cell.attempts.is_empty() {
                if let Some(reason) = &cell.reason {
                    lines.push(format!(
                        "- {}::{} ({}): {}",
                        t(&r.spec),
                        t(&r.name),
                        t(&report.columns[col].label),
                        t(&truncate(reason, MAX_MESSAGE_CHARS))
                    ));
                }
            }
            for a in cell
                .attempts
                .iter()
                .filter(|a| a.outcome == Outcome::Failed)
            {
                for f in &a.failures {
                    let what = match (f.kind, &f.assertion) {
                        (FailureKind::Assertion, Some(key)) => format!("`{}`", t(key)),
                        (FailureKind::Assertion, None) => "assertion".into(),
                        (FailureKind::Divergence, _) => "divergence".into(),
                        (FailureKind::Error, _) => "error".into(),
                    };
                    lines.push(format!(
                        "- {}::{} ({}, attempt {}): {what}: {}",
                        t(&r.spec),
                        t(&r.name),
                        t(&report.columns[col].label),
                        a.attempt,
                        t(&truncate(&f.message, MAX_MESSAGE_CHARS))
                    ));
                }
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::results;
    use crate::report::{build, Input};

    #[test]
    fn control_characters_and_markup_become_visible_text() {
        assert_eq!(cell_text("a\nb\u{1b}[31m"), "a\\\\nb\\\\u{1b}\\[31m");
        assert_eq!(cell_text("x\u{202e}y"), "x\\\\u{202e}y");
        assert_eq!(cell_text("a|b <script>"), "a\\|b &lt;script&gt;");
    }

    #[test]
    fn the_summary_has_rates_marks_and_failures() {
        let mut a = results("gpt", &[("one", true), ("two", true)]);
        a.tests[1].name = "two|<i>x</i>\n".into();
        let mut b = results("claude", &[("one", false), ("two", true)]);
        b.tests[1].name = "two|<i>x</i>\n".into();
        let report = build(vec![
            Input {
                path: "a.json".into(),
                results: a,
            },
            Input {
                path: "b.json".into(),
                results: b,
            },
        ]);
        let md = render(&report, &Redactor::new(["missing".to_string()]));
        assert!(md.contains("| gpt | claude |"), "{md}");
        assert!(
            md.contains("| **tests passed** | 2/2 (100%) | 1/2 (50%) |"),
            "{md}"
        );
        assert!(
            md.contains("| s::one | ✅ 1/1 | ❌ 0/1 **regression** |"),
            "{md}"
        );
        // A backslash of its own, so GitHub shows `\n` rather than breaking the row.
        assert!(md.contains("s::two\\|&lt;i&gt;x&lt;/i&gt;\\\\n |"), "{md}");
        assert!(md.contains("- regression: s::one"), "{md}");
        assert!(
            md.contains("(claude, attempt 1): `output\\_contains`: \\*\\*\\* 2815"),
            "{md}"
        );
        assert!(!md.contains("<i>"), "{md}");
    }
}
