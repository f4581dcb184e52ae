//! The progress bar of a test run, on stderr and only when stderr is a terminal (the contract:
//! never in CI logs): tests done, passes so far, tokens so far.

use crate::results::{Outcome, TestResult};
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    passed: AtomicU64,
    tokens: AtomicU64,
}

impl Progress {
    pub(crate) fn start(len: u64) -> Progress {
        let bar = crate::commands::cases::progress_bar(len);
        if let Some(b) = &bar {
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} tests  {msg}  {elapsed}",
            ) {
                b.set_style(style);
            }
        }
        Progress {
            bar,
            passed: AtomicU64::new(0),
            tokens: AtomicU64::new(0),
        }
    }

    /// Workers call this from any thread as each test finishes.
    pub(crate) fn case_done(&self, test: &TestResult) {
        let Some(bar) = &self.bar else { return };
        let passed = self
            .passed
            .fetch_add(u64::from(test.outcome == Outcome::Passed), Ordering::SeqCst)
            + u64::from(test.outcome == Outcome::Passed);
        let used: u64 = test
            .attempts
            .iter()
            .filter_map(|a| a.usage.as_ref())
            .map(|u| u.total_tokens)
            .sum();
        let tokens = self.tokens.fetch_add(used, Ordering::SeqCst) + used;
        bar.set_message(format!("{passed} passed  {tokens} tokens"));
        bar.inc(1);
    }

    pub(crate) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
