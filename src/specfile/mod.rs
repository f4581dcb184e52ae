//! The spec as written: YAML with positions, read into checked shapes. The YAML crate stays
//! behind this module so it can be swapped.

// The declaration tables read best one key per line, which rustfmt would rewrap.
#[rustfmt::skip]
pub(crate) mod keys;
pub(crate) mod packed;
pub(crate) mod read;
pub(crate) mod schema;
pub(crate) mod yaml;

use crate::codes::Code;
use crate::diag::{Diagnostic, Span};
use crate::line_index::{LineIndex, Lines};
use std::path::Path;

/// Specs larger than this are refused before parsing: no real spec comes close.
pub(crate) const MAX_SPEC_BYTES: u64 = 8 << 20;

pub struct Source {
    /// As the user wrote it on the command line, for messages.
    pub display: String,
    pub text: String,
    lines: LineIndex,
}

impl Source {
    pub fn new(display: impl Into<String>, text: impl Into<String>) -> Source {
        let text = text.into();
        Source {
            display: display.into(),
            lines: LineIndex::new(&text),
            text,
        }
    }

    /// Line `n` (1-based), without its line ending.
    pub fn line(&self, n: u32) -> Option<&str> {
        self.lines.line(&self.text, n as usize)
    }

    /// The text's lines by number, for the snippets under diagnostics.
    pub fn lines(&self) -> Lines<'_> {
        Lines::new(&self.text, &self.lines)
    }
}

/// Reading problems are exit code 2 (unreadable input), unlike problems inside the spec.
pub(crate) fn read_source(path: &Path) -> Result<Source, Diagnostic> {
    let display = path.display().to_string();
    let fail = |msg: String, help: &str| {
        Err(Diagnostic::new(Code::E001, msg)
            .in_file(&display)
            .help(help.to_string()))
    };
    // A FIFO, a device or a directory is refused before it is opened: opening a FIFO blocks
    // until a writer comes, and `/dev/zero` never ends.
    let bytes = match crate::files::read_regular(path, MAX_SPEC_BYTES) {
        Ok(b) => b,
        Err(crate::files::ReadError::NotAFile(e)) => {
            let help = match e {
                crate::files::NotAFile::Missing => "check the path",
                crate::files::NotAFile::Directory => "name a .yaml file inside it",
                crate::files::NotAFile::Special(_) => "save the spec to a file and name that file",
                crate::files::NotAFile::Io(_) => "check the file's permissions",
            };
            return fail(format!("`{display}` {e}"), help);
        }
        Err(crate::files::ReadError::TooLarge { limit }) => {
            return Err(Diagnostic::new(
                Code::E004,
                format!("`{display}` is larger than {limit} bytes, the limit for a spec"),
            )
            .in_file(&display)
            .help("split the spec, or move large tables into a `file:` next to it"))
        }
    };
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Source::new(display, text)),
        Err(e) => {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let text = String::from_utf8_lossy(valid);
            let (line, col) = LineIndex::new(&text).position(&text, text.len());
            Err(
                Diagnostic::new(Code::E001, format!("`{display}` is not valid UTF-8"))
                    .in_file(&display)
                    .at(Span::point(line, col))
                    .help("save the file as UTF-8"),
            )
        }
    }
}
