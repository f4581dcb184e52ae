//! Diagnostics as you type: each open or changed document is compiled as `toolrun check`
//! compiles the file (fixtures, tables and `--root` resolved from the document's path), on a
//! thread of its own so requests are answered meanwhile. A change is compiled at once; the
//! changes that arrive during a compile are merged, so the next compile is of the newest text
//! only, and the diagnostics of a text already replaced are not published. Each document's tool
//! entries are kept between compiles ([`crate::compile::Memo`]): an edit recompiles the entry it
//! touches, not the 1,000 others.

use super::document::Document;
use crate::compile::Memo;
use crate::diag::{Diagnostic, Severity};
use lsp_server::{Message, Notification};
use lsp_types::{
    CodeDescription, DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString,
    PublishDiagnosticsParams, Uri,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr as _;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};

pub(super) enum Job {
    Check {
        uri: Uri,
        version: i32,
        text: String,
        path: PathBuf,
    },
    /// The document closed: its diagnostics are withdrawn.
    Clear(Uri),
}

impl Job {
    fn uri(&self) -> &Uri {
        match self {
            Job::Check { uri, .. } | Job::Clear(uri) => uri,
        }
    }
}

/// The jobs waiting, at most one per document (its newest).
#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    /// The job senders are gone: finish what is queued, then end.
    closed: bool,
}

impl Queue {
    fn add(&mut self, job: Job) {
        self.jobs.retain(|p| p.uri() != job.uri());
        self.jobs.push(job);
    }

    /// Takes in every job already sent, without waiting.
    fn take_sent(&mut self, jobs: &Receiver<Job>) {
        loop {
            match jobs.try_recv() {
                Ok(job) => self.add(job),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.closed = true;
                    return;
                }
            }
        }
    }

    fn has(&self, uri: &Uri) -> bool {
        self.jobs.iter().any(|j| j.uri() == uri)
    }
}

/// Runs until every job sender is gone.
pub(super) fn worker(jobs: Receiver<Job>, out: Sender<Message>) {
    let mut queue = Queue::default();
    // By the URI's text: `Uri` caches its parts inside, which a key must not.
    let mut memos: HashMap<String, Memo> = HashMap::new();
    loop {
        queue.take_sent(&jobs);
        if queue.jobs.is_empty() {
            if queue.closed {
                return;
            }
            match jobs.recv() {
                Ok(job) => queue.add(job),
                Err(_) => return,
            }
            continue;
        }
        let job = queue.jobs.remove(0);
        let params = match job {
            Job::Clear(uri) => {
                memos.remove(uri.as_str());
                PublishDiagnosticsParams::new(uri, Vec::new(), None)
            }
            Job::Check {
                uri,
                version,
                text,
                path,
            } => {
                let memo = memos.entry(uri.as_str().to_string()).or_default();
                let diagnostics = check(&uri, text, &path, memo);
                queue.take_sent(&jobs);
                if queue.has(&uri) {
                    // Changed again meanwhile: these ranges are of a text the editor no longer
                    // shows, and the newer text's are next.
                    continue;
                }
                PublishDiagnosticsParams::new(uri, diagnostics, Some(version))
            }
        };
        let note = Notification::new("textDocument/publishDiagnostics".into(), params);
        if out.send(note.into()).is_err() {
            return;
        }
    }
}

/// What `toolrun check` reports for this text at this path, as LSP diagnostics; `memo` holds
/// what the document's last compile can lend this one.
pub(super) fn check(
    uri: &Uri,
    text: String,
    path: &std::path::Path,
    memo: &mut Memo,
) -> Vec<lsp_types::Diagnostic> {
    let display = path.display().to_string();
    let limit = crate::specfile::MAX_SPEC_BYTES;
    let doc = Document::new(text, 0);
    let found = if doc.text.len() as u64 > limit {
        // What `check` says of a file this large, without parsing it.
        vec![Diagnostic::new(
            crate::codes::Code::E004,
            format!("`{display}` is larger than {limit} bytes, the limit for a spec"),
        )
        .help("split the spec, or move large tables into a `file:` next to it")]
    } else {
        let source = crate::specfile::Source::new(display, doc.text.clone());
        crate::compile::diagnose(&source, path, memo)
    };
    found.iter().map(|d| convert(uri, &doc, d)).collect()
}

fn convert(uri: &Uri, doc: &Document, d: &Diagnostic) -> lsp_types::Diagnostic {
    let range = d.span.map(|s| doc.range(s)).unwrap_or_default();
    let mut message = d.message.clone();
    if let Some(label) = &d.label {
        message.push_str(&format!(" ({label})"));
    }
    if let Some(help) = &d.help {
        message.push_str(&format!("\nhelp: {help}"));
    }
    let related: Vec<DiagnosticRelatedInformation> = d
        .related
        .iter()
        .map(|(span, label)| DiagnosticRelatedInformation {
            location: Location::new(uri.clone(), doc.range(*span)),
            message: label.clone(),
        })
        .collect();
    let href = Uri::from_str(&crate::diag::help_uri(d.code.as_str())).ok();
    lsp_types::Diagnostic {
        range,
        severity: Some(match d.severity {
            Severity::Error => DiagnosticSeverity::ERROR,
            Severity::Warning => DiagnosticSeverity::WARNING,
        }),
        code: Some(NumberOrString::String(d.code.as_str().to_string())),
        code_description: href.map(|href| CodeDescription { href }),
        source: Some("toolrun".into()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        tags: None,
        data: d
            .help
            .as_deref()
            .and_then(suggestion)
            .map(|fix| serde_json::json!({ "fix": fix })),
    }
}

/// The name a "did you mean `x`?" help offers.
pub(super) fn suggestion(help: &str) -> Option<String> {
    let rest = help.split("did you mean `").nth(1)?;
    let (name, after) = rest.split_once('`')?;
    (after.starts_with('?') && !name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::suggestion;

    #[test]
    fn suggestions_are_read_from_the_help() {
        assert_eq!(
            suggestion("did you mean `get_weather`?").as_deref(),
            Some("get_weather")
        );
        assert_eq!(
            suggestion("did you mean `GET`? (one of: GET, POST)").as_deref(),
            Some("GET")
        );
        assert_eq!(suggestion("declared tools: a, b"), None);
    }
}
