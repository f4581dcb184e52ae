//! The outcome of each test case or replayed fixture, and the report both `test` and `replay`
//! print: human or JSON on stdout, JUnit on request, the exit code.

use crate::cli::ReportFormat;
use crate::exit;
use serde_json::json;

#[derive(Clone, Debug)]
pub(crate) struct CaseResult {
    pub(crate) suite: String,
    pub(crate) name: String,
    pub(crate) outcome: Outcome,
    pub(crate) failures: Vec<String>,
    pub(crate) duration_ms: f64,
    /// `k/N` runs passed, shown when a test ran more than once (`--repeat`).
    pub(crate) runs: Option<(u32, u32)>,
    /// How the test fell since `--baseline`, when that is a regression.
    pub(crate) regression: Option<String>,
    /// Name and value pairs JUnit shows as the test case's `<properties>` (its budgets).
    pub(crate) properties: Vec<(String, String)>,
    /// Lines the terminal shows under the case, after its failures (its budgets).
    pub(crate) notes: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Passed,
    Failed,
    Skipped,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) passed: usize,
    pub(crate) failed: usize,
    pub(crate) skipped: usize,
}

impl Tally {
    pub(crate) fn of(results: &[CaseResult]) -> Tally {
        let mut t = Tally::default();
        for r in results {
            match r.outcome {
                Outcome::Passed => t.passed += 1,
                Outcome::Failed => t.failed += 1,
                Outcome::Skipped => t.skipped += 1,
            }
        }
        t
    }

    /// Something was actually checked: a skipped case proves nothing.
    pub(crate) fn any_ran(&self) -> bool {
        self.passed + self.failed > 0
    }
}

pub(crate) fn progress_bar(len: u64) -> Option<indicatif::ProgressBar> {
    let bar = crate::term::screen::progress_bar(len)?;
    if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}") {
        bar.set_style(style);
    }
    Some(bar)
}

/// Shared by `test` and `replay`: human or JSON on stdout and the exit code (JUnit is
/// `junit::write_requested`).
pub(crate) fn report(results: &[CaseResult], format: ReportFormat, what: &str) -> i32 {
    let passed = results
        .iter()
        .filter(|r| r.outcome == Outcome::Passed)
        .count();
    let failed = results
        .iter()
        .filter(|r| r.outcome == Outcome::Failed)
        .count();
    let skipped = results
        .iter()
        .filter(|r| r.outcome == Outcome::Skipped)
        .count();
    let summary = if skipped > 0 {
        format!("{passed} passed, {failed} failed, {skipped} skipped")
    } else {
        format!("{passed} passed, {failed} failed")
    };
    match format {
        ReportFormat::Human => {
            for r in results {
                let tag = match r.outcome {
                    Outcome::Passed => "PASS",
                    Outcome::Failed => "FAIL",
                    Outcome::Skipped => "SKIP",
                };
                let runs = r
                    .runs
                    .map(|(k, n)| format!(" ({k}/{n} runs passed)"))
                    .unwrap_or_default();
                println!(
                    "{tag} {}{runs}",
                    crate::term::visible_line(&format!("{}::{}", r.suite, r.name))
                );
                for f in &r.failures {
                    // Multi-line reasons (diffs, the command that records a fixture) stay
                    // indented under their case.
                    for (i, line) in crate::term::visible(f).lines().enumerate() {
                        let indent = if i == 0 { "     " } else { "       " };
                        println!("{indent}{line}");
                    }
                }
                for note in &r.notes {
                    println!("     {}", crate::term::visible_line(note));
                }
            }
            if results.is_empty() {
                println!("no {what} to run");
            }
            println!("{summary}");
        }
        ReportFormat::Json => {
            let doc = json!({
                "passed": passed,
                "failed": failed,
                "skipped": skipped,
                "results": results.iter().map(|r| json!({
                    "suite": r.suite,
                    "name": r.name,
                    "outcome": match r.outcome { Outcome::Passed => "passed", Outcome::Failed => "failed", Outcome::Skipped => "skipped" },
                    "failures": r.failures,
                    "duration_ms": r.duration_ms,
                })).collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
    }
    if failed > 0 {
        exit::FAILED
    } else {
        exit::SUCCESS
    }
}
