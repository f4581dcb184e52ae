//! The spec as written: YAML with positions, read into checked shapes. The YAML crate stays
//! behind this module so it can be swapped.

pub mod keys;
pub mod read;
pub mod schema;
pub mod yaml;

use crate::diag::{Diagnostic, Span};
use std::path::Path;

/// Specs larger than this are refused before parsing: no real spec comes close.
pub const MAX_SPEC_BYTES: u64 = 8 << 20;

pub struct Source {
    /// As the user wrote it on the command line, for messages.
    pub display: String,
    pub text: String,
}

/// Reading problems are exit code 2 (unreadable input), unlike problems inside the spec.
#[allow(clippy::result_large_err)]
pub fn read_source(path: &Path) -> Result<Source, Diagnostic> {
    let display = path.display().to_string();
    let fail = |msg: String, help: &str| {
        Err(Diagnostic::new("E001", msg)
            .in_file(&display)
            .help(help.to_string()))
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return fail(format!("`{display}` does not exist"), "check the path")
        }
        Err(e) => {
            return fail(
                format!("cannot read `{display}`: {e}"),
                "check the file's permissions",
            )
        }
    };
    if meta.is_dir() {
        return fail(
            format!("`{display}` is a directory, not a spec file"),
            "name a .yaml file inside it",
        );
    }
    if meta.len() > MAX_SPEC_BYTES {
        return Err(Diagnostic::new(
            "E004",
            format!(
                "`{display}` is {} bytes; specs are limited to {} bytes",
                meta.len(),
                MAX_SPEC_BYTES
            ),
        )
        .in_file(&display)
        .help("split the spec, or move large tables into a `file:` next to it"));
    }
    // The size check above sees 0 for `/dev/zero`, a FIFO or `/dev/stdin`; reading at most one
    // byte past the limit keeps those bounded too.
    let mut bytes = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| {
        use std::io::Read;
        f.take(MAX_SPEC_BYTES + 1).read_to_end(&mut bytes)
    });
    if let Err(e) = read {
        return fail(
            format!("cannot read `{display}`: {e}"),
            "check the file's permissions",
        );
    }
    if bytes.len() as u64 > MAX_SPEC_BYTES {
        return Err(Diagnostic::new(
            "E004",
            format!("`{display}` is larger than {MAX_SPEC_BYTES} bytes, the limit for a spec"),
        )
        .in_file(&display)
        .help("split the spec, or move large tables into a `file:` next to it"));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Source { display, text }),
        Err(e) => {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let text = String::from_utf8_lossy(valid);
            let line = text.matches('\n').count() as u32 + 1;
            let col = text
                .rsplit('\n')
                .next()
                .map(|l| l.chars().count())
                .unwrap_or(0) as u32
                + 1;
            Err(
                Diagnostic::new("E001", format!("`{display}` is not valid UTF-8"))
                    .in_file(&display)
                    .at(Span::point(line, col))
                    .help("save the file as UTF-8"),
            )
        }
    }
}
