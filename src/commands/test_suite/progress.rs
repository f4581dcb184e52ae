//! The progress bar of a test run, on stderr and only when stderr is a terminal (the contract:
//! never in CI logs): tests done, passes so far, tokens so far, and what a tool in flight last
//! reported (a remote MCP server's `notifications/progress` or log line, an HTTP download).

use crate::events::Events;
use crate::results::{Outcome, TestResult};
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// Longest activity shown after the counts: the bar stays one line.
const ACTIVITY_CHARS: usize = 60;

pub(crate) struct Progress {
    bar: Option<indicatif::ProgressBar>,
    shown: Arc<Mutex<Shown>>,
}

/// What the bar's message says.
#[derive(Default)]
struct Shown {
    passed: u64,
    tokens: u64,
    /// The last progress a tool in flight reported, as shown (escaped, cut).
    activity: String,
}

impl Shown {
    fn message(&self) -> String {
        let counts = format!("{} passed  {} tokens", self.passed, self.tokens);
        if self.activity.is_empty() {
            counts
        } else {
            format!("{counts}  {}", self.activity)
        }
    }
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
            shown: Arc::default(),
        }
    }

    /// Shows on the bar what tools report while they run (`tool_progress`, `mcp_log` events,
    /// already masked): a long remote call is seen to move. Nothing listens without a bar, so
    /// a run without a terminal builds no more events than before.
    pub(crate) fn follow(&self, events: &mut Events) {
        let Some(bar) = self.bar.clone() else { return };
        let shown = self.shown.clone();
        events.tap(move |name, data| {
            let Some(activity) = activity(name, data) else {
                return;
            };
            if let Ok(mut s) = shown.lock() {
                s.activity = activity;
                bar.set_message(s.message());
            }
        });
    }

    /// Workers call this from any thread as each test finishes.
    pub(crate) fn case_done(&self, test: &TestResult) {
        let Some(bar) = &self.bar else { return };
        let used: u64 = test
            .attempts
            .iter()
            .filter_map(|a| a.usage.as_ref())
            .map(|u| u.total_tokens)
            .sum();
        // A test's outcome is settled when the results are finished, after every case ran:
        // settled here on a copy, so the bar counts passes as they happen.
        let mut settled = test.clone();
        settled.finish();
        if let Ok(mut s) = self.shown.lock() {
            s.passed += u64::from(settled.outcome == Outcome::Passed);
            s.tokens += used;
            bar.set_message(s.message());
        }
        bar.inc(1);
    }

    pub(crate) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// One line for the bar from a tool's progress or a server's log line: `TOOL 2/5 message`,
/// `TOOL 40960 bytes`, `SERVER: info: text`. Whatever a server sent is shown escaped, so it
/// cannot drive the terminal.
fn activity(event: &str, data: &Value) -> Option<String> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let line = match event {
        "tool_progress" => {
            let tool = text(&data["tool"]);
            if let Some(bytes) = data.get("bytes") {
                format!("{tool} {bytes} bytes")
            } else {
                let mut line = format!("{tool} {}", text(&data["progress"]));
                if !data["total"].is_null() {
                    line.push_str(&format!("/{}", text(&data["total"])));
                }
                let message = text(&data["message"]);
                if !message.is_empty() {
                    line.push(' ');
                    line.push_str(&message);
                }
                line
            }
        }
        "mcp_log" => format!(
            "{}: {}: {}",
            text(&data["server"]),
            text(&data["level"]),
            text(&data["data"])
        ),
        _ => return None,
    };
    let line = crate::term::visible_line(&line).into_owned();
    Some(match line.char_indices().nth(ACTIVITY_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn activity_names_the_tool_and_its_progress_escaped_and_cut() {
        let progress = json!({ "tool": "slow", "progress": 2, "total": 5, "message": "step\u{1b}]52;c;x\u{7}" });
        let line = activity("tool_progress", &progress).unwrap();
        assert!(line.starts_with("slow 2/5 step"), "{line}");
        assert!(!line.chars().any(char::is_control), "{line:?}");
        let bytes = json!({ "tool": "get", "bytes": 40960 });
        assert_eq!(
            activity("tool_progress", &bytes).unwrap(),
            "get 40960 bytes"
        );
        let log = json!({ "server": "s", "level": "info", "data": "x".repeat(100) });
        let line = activity("mcp_log", &log).unwrap();
        assert_eq!(line.chars().count(), ACTIVITY_CHARS + 1, "{line}");
        assert!(line.ends_with('…'));
        assert_eq!(activity("model_text_delta", &json!({})), None);
    }
}
