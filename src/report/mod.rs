//! `toolrun report`: results files side by side. One view model, built here, feeds both the HTML
//! page and the markdown summary, so their order, rates and regression marks always agree.

pub(crate) mod budgets;
pub(crate) mod charts;
pub(crate) mod html;
pub(crate) mod markdown;
pub(crate) mod stream;

pub(crate) use crate::compare::Change;
use crate::redact::Redactor;
use crate::results::{Attempt, Outcome, Results, SpecInfo, TestResult, Totals};
use crate::stats::Interval;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Everything the page shows; embedded as JSON in the HTML.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Report {
    pub(crate) toolrun_version: String,
    pub(crate) columns: Vec<Column>,
    /// Failing rows first (regressions first among them), then passing, then skipped-only; the
    /// spec's order within each group.
    pub(crate) rows: Vec<Row>,
    /// One per pair of neighbouring columns that share a spec.
    pub(crate) comparisons: Vec<Comparison>,
    /// Things a reader should know (specs changed between runs, nothing to compare).
    pub(crate) notes: Vec<String>,
}

/// One results file.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Column {
    pub(crate) label: String,
    pub(crate) file: String,
    pub(crate) models: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) started_at: Option<String>,
    pub(crate) specs: Vec<SpecInfo>,
    pub(crate) repeat: u32,
    pub(crate) totals: Totals,
    /// 95% Wilson interval of the attempts' pass rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) interval: Option<Interval>,
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Row {
    pub(crate) spec: String,
    pub(crate) name: String,
    pub(crate) query: String,
    /// One per column; `None` where that file has no such test.
    pub(crate) cells: Vec<Option<Cell>>,
    pub(crate) failing: bool,
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Cell {
    pub(crate) outcome: Outcome,
    pub(crate) passes: u32,
    pub(crate) runs: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pass_rate: Option<f64>,
    /// 95% Wilson interval of `pass_rate`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) interval: Option<Interval>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    pub(crate) tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cost_usd: Option<f64>,
    pub(crate) duration_ms: f64,
    /// Against the column to the left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) change: Option<Change>,
    /// Fisher's exact test against the column to the left (absent for offline runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) p_value: Option<f64>,
    pub(crate) attempts: Vec<Attempt>,
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Comparison {
    pub(crate) from: usize,
    pub(crate) to: usize,
    /// Pass rates that fell (rose) beyond noise.
    pub(crate) regressions: Vec<String>,
    pub(crate) fixes: Vec<String>,
    /// Pass rates that fell (rose) within noise.
    pub(crate) worse: Vec<String>,
    pub(crate) better: Vec<String>,
    /// Tests both columns ran, and how many passed in only one of them.
    pub(crate) paired: u32,
    pub(crate) passed_only_before: u32,
    pub(crate) passed_only_after: u32,
    /// McNemar's exact test over the paired tests.
    pub(crate) p_value: f64,
    pub(crate) verdict: String,
}

impl Cell {
    fn from_test(t: &crate::results::TestResult) -> Cell {
        Cell {
            outcome: t.outcome,
            passes: t.passes,
            runs: t.attempts.len() as u32,
            pass_rate: t.pass_rate(),
            interval: crate::stats::wilson(t.passes, t.attempts.len() as u32),
            model: t.model.clone(),
            reason: t.reason.clone(),
            tokens: t.usage.total_tokens,
            cost_usd: t.cost_usd,
            duration_ms: t.duration_ms,
            change: None,
            p_value: None,
            // Moved in by `give_attempts`.
            attempts: Vec::new(),
        }
    }
}

/// A results file as read, with the name people know it by.
pub(crate) struct Input {
    pub(crate) path: String,
    pub(crate) results: Results,
}

pub(crate) fn load(paths: &[std::path::PathBuf]) -> Result<Vec<Input>, String> {
    paths
        .iter()
        .map(|p| {
            Results::load(p).map(|results| Input {
                path: p.display().to_string(),
                results,
            })
        })
        .collect()
}

/// One column's worth of a results file: the whole file, or one model of a model matrix.
struct Part<'a> {
    path: &'a str,
    results: &'a Results,
    /// The model this column is, in a matrix.
    model: Option<&'a str>,
    tests: Vec<&'a TestResult>,
}

/// Every results file is a column; a model matrix (`test --model a --model b`) is one per model.
fn parts(inputs: &[Input]) -> Vec<Part<'_>> {
    let mut out = Vec::new();
    for i in inputs {
        let r = &i.results;
        if r.settings.models.len() > 1 {
            for m in &r.settings.models {
                out.push(Part {
                    path: &i.path,
                    results: r,
                    model: Some(m),
                    tests: r
                        .tests
                        .iter()
                        .filter(|t| t.model.as_deref() == Some(m.as_str()))
                        .collect(),
                });
            }
        } else {
            out.push(Part {
                path: &i.path,
                results: r,
                model: None,
                tests: r.tests.iter().collect(),
            });
        }
    }
    out
}

fn models_of(p: &Part) -> Vec<String> {
    if let Some(m) = p.model {
        return vec![m.to_string()];
    }
    let r = p.results;
    let mut names: Vec<String> = match &r.settings.model {
        Some(m) => vec![m.clone()],
        None => r.models.iter().map(|m| m.name.clone()).collect(),
    };
    if names.is_empty() {
        for t in &r.tests {
            if let Some(m) = &t.model {
                if !names.contains(m) {
                    names.push(m.clone());
                }
            }
        }
    }
    names
}

fn file_stem(path: &str) -> String {
    Path::new(path)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string())
}

fn distinct(labels: &[String]) -> bool {
    labels.iter().all(|l| !l.is_empty())
        && labels
            .iter()
            .enumerate()
            .all(|(i, l)| !labels[..i].contains(l))
}

/// Columns are named by their models when that tells them apart (comparing models), else by
/// file (comparing runs of one model), else by both.
fn labels(parts: &[Part]) -> Vec<String> {
    let by_model: Vec<String> = parts.iter().map(|p| models_of(p).join(", ")).collect();
    if distinct(&by_model) {
        return by_model;
    }
    let stems: Vec<String> = parts.iter().map(|p| file_stem(p.path)).collect();
    if distinct(&stems) {
        return stems;
    }
    let both: Vec<String> = parts
        .iter()
        .zip(&by_model)
        .map(|(p, m)| format!("{} ({m})", p.path))
        .collect();
    if distinct(&both) {
        both
    } else {
        parts.iter().map(|p| p.path.to_string()).collect()
    }
}

/// The report of these files. Each cell's attempts are moved out of its file, not copied:
/// they are most of a results file, and a report of many large files held them twice.
pub(crate) fn build(mut inputs: Vec<Input>) -> Report {
    let mut report = view(&inputs);
    give_attempts(&mut report.rows, &mut inputs);
    report
}

/// Each cell's attempts, taken from the test the cell shows (the first of its id in its
/// column, as [`rows`] chose it).
fn give_attempts(rows: &mut [Row], inputs: &mut [Input]) {
    let mut columns: Vec<HashMap<(String, String), Vec<Attempt>>> = Vec::new();
    for input in inputs.iter_mut() {
        let r = &mut input.results;
        let models: Vec<Option<String>> = if r.settings.models.len() > 1 {
            r.settings.models.iter().cloned().map(Some).collect()
        } else {
            vec![None]
        };
        for m in models {
            let mut by_id = HashMap::new();
            for t in r.tests.iter_mut().filter(|t| m.is_none() || t.model == m) {
                by_id
                    .entry((t.spec.clone(), t.name.clone()))
                    .or_insert_with(|| std::mem::take(&mut t.attempts));
            }
            columns.push(by_id);
        }
    }
    for row in rows {
        let id = (row.spec.clone(), row.name.clone());
        for (cell, by_id) in row.cells.iter_mut().zip(columns.iter_mut()) {
            if let (Some(cell), Some(attempts)) = (cell.as_mut(), by_id.remove(&id)) {
                cell.attempts = attempts;
            }
        }
    }
}

/// Everything but the attempts.
fn view(inputs: &[Input]) -> Report {
    let parts = parts(inputs);
    let columns = columns(&parts);
    let mut rows = rows(&parts);
    let mut notes = Vec::new();
    let mut comparisons = Vec::new();
    for to in 1..parts.len() {
        if let Some(cmp) = compare(&parts, &columns, to - 1, to, &mut rows, &mut notes) {
            comparisons.push(cmp);
        }
    }
    rows.sort_by_key(rank);
    Report {
        toolrun_version: env!("CARGO_PKG_VERSION").to_string(),
        columns,
        rows,
        comparisons,
        notes,
    }
}

fn columns(parts: &[Part]) -> Vec<Column> {
    parts
        .iter()
        .zip(labels(parts))
        .map(|(p, label)| {
            let totals = match p.model {
                Some(_) => crate::results::totals_of(&p.tests),
                None => p.results.totals.clone(),
            };
            Column {
                label,
                file: p.path.to_string(),
                models: models_of(p),
                started_at: p.results.started_at.clone(),
                specs: p.results.specs.clone(),
                repeat: p.results.settings.repeat,
                interval: crate::stats::wilson(totals.attempts_passed, totals.attempts),
                totals,
            }
        })
        .collect()
}

/// Rows in first-seen order across files: a test added in the newer run still shows.
/// Indexed, so ten thousand tests stay quick.
fn rows(parts: &[Part]) -> Vec<Row> {
    let mut order: Vec<(&str, &str, &str)> = Vec::new();
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    let mut found: Vec<HashMap<(&str, &str), &TestResult>> = Vec::new();
    for p in parts {
        let mut by_id = HashMap::new();
        for t in &p.tests {
            let id = (t.spec.as_str(), t.name.as_str());
            by_id.entry(id).or_insert(*t);
            if seen.insert(id) {
                order.push((id.0, id.1, t.query.as_str()));
            }
        }
        found.push(by_id);
    }
    order
        .into_iter()
        .map(|(spec, name, query)| {
            let cells: Vec<Option<Cell>> = found
                .iter()
                .map(|by_id| by_id.get(&(spec, name)).map(|t| Cell::from_test(t)))
                .collect();
            let failing = cells.iter().flatten().any(|c| c.outcome == Outcome::Failed);
            Row {
                spec: spec.to_string(),
                name: name.to_string(),
                query: query.to_string(),
                cells,
                failing,
            }
        })
        .collect()
}

/// Marks changes in column `to` against column `from` (`crate::compare`: beyond noise or
/// within it), for the specs both test (with a note where a spec changed between them); `None`
/// when they share no spec.
fn compare(
    parts: &[Part],
    columns: &[Column],
    from: usize,
    to: usize,
    rows: &mut [Row],
    notes: &mut Vec<String>,
) -> Option<Comparison> {
    let (a, b) = (parts[from].results, parts[to].results);
    let shared: Vec<&SpecInfo> = b
        .specs
        .iter()
        .filter(|s| a.specs.iter().any(|o| o.name == s.name))
        .collect();
    if shared.is_empty() {
        notes.push(format!(
            "`{}` and `{}` test different specs: no regressions or fixes are marked between them",
            columns[from].label, columns[to].label
        ));
        return None;
    }
    for s in &shared {
        if a.specs
            .iter()
            .any(|o| o.name == s.name && o.sha256 != s.sha256)
        {
            notes.push(format!(
                "spec `{}` changed between `{}` and `{}`",
                s.name, columns[from].label, columns[to].label
            ));
        }
    }
    let in_shared = |t: &&&TestResult| shared.iter().any(|s| s.name == t.spec);
    let before: Vec<&TestResult> = parts[from]
        .tests
        .iter()
        .filter(in_shared)
        .copied()
        .collect();
    let after: Vec<&TestResult> = parts[to].tests.iter().filter(in_shared).copied().collect();
    let c = crate::compare::compare(&before, &after);
    let ids = |change: Change| -> Vec<String> { c.of(change).map(|x| x.test.clone()).collect() };
    let cmp = Comparison {
        from,
        to,
        regressions: ids(Change::Regression),
        fixes: ids(Change::Fixed),
        worse: ids(Change::Worse),
        better: ids(Change::Better),
        paired: c.paired,
        passed_only_before: c.passed_only_before,
        passed_only_after: c.passed_only_after,
        p_value: c.p_value,
        verdict: c.verdict.clone(),
    };
    for row in rows.iter_mut() {
        let id = format!("{}::{}", row.spec, row.name);
        if let (Some(cell), Some(change)) = (row.cells[to].as_mut(), c.change_of(&id)) {
            cell.change = Some(change.change);
            cell.p_value = change.p_value;
        }
    }
    Some(cmp)
}

/// Regressions first, then other failing rows, then passing, then rows that only skipped.
fn rank(r: &Row) -> u8 {
    let regressed = r
        .cells
        .iter()
        .flatten()
        .any(|c| c.change == Some(Change::Regression));
    let ran = r
        .cells
        .iter()
        .flatten()
        .any(|c| c.outcome != Outcome::Skipped);
    match (regressed, r.failing, ran) {
        (true, _, _) => 0,
        (false, true, _) => 1,
        (false, false, true) => 2,
        (false, false, false) => 3,
    }
}

/// Masks the values of every secret the specs declare, where they are set: results files are
/// masked when written, but a report may be made from a file written by an older or other tool,
/// and a leaked key must not travel further inside a page that gets shared.
pub(crate) fn redactor(inputs: &[Input]) -> Redactor {
    let mut names: Vec<&str> = inputs
        .iter()
        .flat_map(|i| i.results.specs.iter())
        .flat_map(|s| s.secrets.iter().map(String::as_str))
        .collect();
    names.sort_unstable();
    names.dedup();
    Redactor::named(names.iter().filter_map(|n| {
        std::env::var(n)
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| (n.to_string(), v))
    }))
}

/// The report as JSON, secrets masked (the page writes it a part at a time).
#[cfg(test)]
pub(crate) fn to_json(report: &Report, redactor: &Redactor) -> serde_json::Value {
    let mut v = serde_json::to_value(report).unwrap_or(serde_json::Value::Null);
    redactor.value(&mut v);
    v
}

pub(crate) fn percent(rate: f64) -> String {
    format!("{:.0}%", rate * 100.0)
}

pub(crate) fn tokens(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(crate) fn usd(cost: f64) -> String {
    if cost >= 1.0 {
        format!("${cost:.2}")
    } else {
        format!("${cost:.4}")
    }
}

pub(crate) fn duration(ms: f64) -> String {
    if ms >= 60_000.0 {
        format!("{:.1} min", ms / 60_000.0)
    } else if ms >= 1_000.0 {
        format!("{:.1} s", ms / 1_000.0)
    } else {
        format!("{ms:.0} ms")
    }
}

/// Text for HTML and SVG, shared by the page and its charts.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::results::{Failure, Settings, Source, TestResult};

    pub(crate) fn results(model: &str, outcomes: &[(&str, bool)]) -> Results {
        let mut r = Results::new(
            Settings {
                model: Some(model.into()),
                repeat: 1,
                pass_rate: 1.0,
                ..Settings::default()
            },
            0,
        );
        r.specs.push(SpecInfo {
            name: "s".into(),
            path: "s.yaml".into(),
            sha256: "abc".into(),
            secrets: vec![],
        });
        for (name, pass) in outcomes {
            let mut t = TestResult::new("s", name, "what is <b>up</b>?", 1.0);
            let failures = if *pass {
                vec![]
            } else {
                vec![Failure::assertion("output_contains", "missing 2815")]
            };
            t.push(Attempt::without_trace(
                1,
                Source::Scripted,
                Failure::error("x"),
                1.0,
            ));
            t.attempts[0].outcome = if *pass {
                Outcome::Passed
            } else {
                Outcome::Failed
            };
            t.attempts[0].failures = failures;
            r.tests.push(t);
        }
        r.finish();
        r
    }

    fn input(path: &str, r: Results) -> Input {
        Input {
            path: path.into(),
            results: r,
        }
    }

    #[test]
    fn regressions_and_fixes_are_marked_against_the_column_to_the_left() {
        let a = results("gpt", &[("one", true), ("two", false), ("three", true)]);
        let b = results("claude", &[("one", false), ("two", true), ("three", true)]);
        let report = build(vec![input("a.json", a), input("b.json", b)]);
        assert_eq!(
            report
                .columns
                .iter()
                .map(|c| c.label.as_str())
                .collect::<Vec<_>>(),
            ["gpt", "claude"]
        );
        let order: Vec<&str> = report.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(order, ["one", "two", "three"]);
        assert_eq!(report.comparisons[0].regressions, ["s::one"]);
        assert_eq!(report.comparisons[0].fixes, ["s::two"]);
        let change = report.rows[0].cells[1].as_ref().and_then(|c| c.change);
        assert_eq!(change, Some(Change::Regression));
    }

    #[test]
    fn failing_rows_come_first_and_same_model_runs_are_named_by_file() {
        let a = results("gpt", &[("ok", true), ("bad", false)]);
        let b = results("gpt", &[("ok", true), ("bad", false)]);
        let report = build(vec![
            input("runs/monday.json", a),
            input("runs/tuesday.json", b),
        ]);
        assert_eq!(report.rows[0].name, "bad");
        assert_eq!(report.columns[0].label, "monday");
        assert!(report.comparisons[0].regressions.is_empty());
    }

    #[test]
    fn different_specs_are_not_compared() {
        let a = results("gpt", &[("ok", true)]);
        let mut b = results("claude", &[("ok", false)]);
        b.specs[0].name = "other".into();
        for t in &mut b.tests {
            t.spec = "other".into();
        }
        let report = build(vec![input("a.json", a), input("b.json", b)]);
        assert!(report.comparisons.is_empty());
        assert!(
            report.notes[0].contains("different specs"),
            "{:?}",
            report.notes
        );
        assert_eq!(report.rows.len(), 2);
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(tokens(1234567), "1,234,567");
        assert_eq!(tokens(12), "12");
        assert_eq!(usd(0.00123), "$0.0012");
        assert_eq!(duration(1500.0), "1.5 s");
        assert_eq!(percent(2.0 / 3.0), "67%");
    }
}
