//! Diagnostics as you type: each open or changed document is compiled as `toolrun check`
//! compiles the file (fixtures, tables and `--root` resolved from the document's path), on a
//! thread of its own so requests are answered meanwhile, and only once its changes pause for
//! [`DEBOUNCE`].

use super::document::Document;
use crate::diag::{Diagnostic, Severity};
use lsp_server::{Message, Notification};
use lsp_types::{
    CodeDescription, DiagnosticRelatedInformation, DiagnosticSeverity, Location, NumberOrString,
    PublishDiagnosticsParams, Uri,
};
use std::path::PathBuf;
use std::str::FromStr as _;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

/// Long enough to skip the states between two keystrokes of a fast typist's burst, short
/// enough that diagnostics follow the pause at once.
pub(super) const DEBOUNCE: Duration = Duration::from_millis(10);

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

/// Runs until every job sender is gone.
pub(super) fn worker(jobs: Receiver<Job>, out: Sender<Message>) {
    let mut pending: Vec<Job> = Vec::new();
    let add = |pending: &mut Vec<Job>, job: Job| {
        pending.retain(|p| p.uri() != job.uri());
        pending.push(job);
    };
    while let Ok(job) = jobs.recv() {
        add(&mut pending, job);
        let mut open = true;
        while open {
            match jobs.recv_timeout(DEBOUNCE) {
                Ok(job) => add(&mut pending, job),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => open = false,
            }
        }
        for job in pending.drain(..) {
            let params = match job {
                Job::Clear(uri) => PublishDiagnosticsParams::new(uri, Vec::new(), None),
                Job::Check {
                    uri,
                    version,
                    text,
                    path,
                } => {
                    let diagnostics = check(&uri, text, &path);
                    PublishDiagnosticsParams::new(uri, diagnostics, Some(version))
                }
            };
            let note = Notification::new("textDocument/publishDiagnostics".into(), params);
            if out.send(note.into()).is_err() {
                return;
            }
        }
        if !open {
            return;
        }
    }
}

/// What `toolrun check` reports for this text at this path, as LSP diagnostics.
pub(super) fn check(uri: &Uri, text: String, path: &std::path::Path) -> Vec<lsp_types::Diagnostic> {
    let display = path.display().to_string();
    let limit = crate::specfile::MAX_SPEC_BYTES;
    let found = if text.len() as u64 > limit {
        // What `check` says of a file this large, without parsing it.
        vec![Diagnostic::new(
            crate::codes::Code::E004,
            format!("`{display}` is larger than {limit} bytes, the limit for a spec"),
        )
        .help("split the spec, or move large tables into a `file:` next to it")]
    } else {
        let source = crate::specfile::Source::new(display, text.clone());
        crate::compile::compile(&source, path).diagnostics
    };
    let doc = Document::new(text, 0);
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
