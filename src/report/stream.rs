//! A report in two passes, so its memory is bounded by the largest results file rather than
//! the sum of them (issue 36 §19: 100 files of 500 MB in all peaked at 4.9 GB). The first pass
//! keeps of each file what the statistics, charts and summary need (its attempts without their
//! answers, calls and requests); the second reads each file again, in turn, and spools every
//! cell's attempts, masked and checked for secrets, to a file with no name, from which the page
//! copies them in its order: the same bytes as a page made from the whole files at once.

use super::{Input, Report};
use crate::redact::Redactor;
use crate::results::Results;
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

/// The files as the first pass read them.
pub(crate) struct Loaded {
    pub(crate) inputs: Vec<Input>,
    paths: Vec<PathBuf>,
    digests: Vec<[u8; 32]>,
}

/// Reads every file, keeping of each attempt only what the view model and summary read.
pub(crate) fn load(paths: &[PathBuf]) -> Result<Loaded, String> {
    let mut loaded = Loaded {
        inputs: Vec::with_capacity(paths.len()),
        paths: paths.to_vec(),
        digests: Vec::with_capacity(paths.len()),
    };
    for p in paths {
        let (mut results, digest) = Results::load_with_digest(p)?;
        slim(&mut results);
        loaded.inputs.push(Input {
            path: p.display().to_string(),
            results,
        });
        loaded.digests.push(digest);
    }
    Ok(loaded)
}

/// Drops what only the page's data block shows (it is spooled from the file again).
fn slim(r: &mut Results) {
    for t in &mut r.tests {
        for a in &mut t.attempts {
            a.answer = None;
            a.error = None;
            a.tool_calls = Vec::new();
            a.pending_tool_call = None;
            a.model_calls = Vec::new();
            a.judge = None;
        }
    }
}

/// Every cell's attempts as the page writes them, by (row, column).
pub(crate) struct Spool {
    file: File,
    at: HashMap<(usize, usize), (u64, u64)>,
}

/// Why the second pass stopped.
pub(crate) enum SpoolError {
    /// A file could not be read again, or is not the file the first pass read (exit 2).
    Input(String),
    /// The spool could not be written, or a secret survived masking.
    Io(std::io::Error),
}

impl From<std::io::Error> for SpoolError {
    fn from(e: std::io::Error) -> Self {
        SpoolError::Io(e)
    }
}

/// The second pass: each file read again, in turn, and checked to be the one the first pass
/// read (a file rewritten between the passes would give a page whose tables and attempts
/// disagree), its cells' attempts spooled, then dropped. The spool goes in `dir`: the page's
/// folder, whose disk is meant for a file that size (a `/tmp` in memory would hold it in RAM).
pub(crate) fn spool(
    loaded: &Loaded,
    report: &Report,
    redactor: &Redactor,
    dir: &std::path::Path,
) -> Result<Spool, SpoolError> {
    let mut spool = Spool {
        file: unnamed_file(dir)?,
        at: HashMap::new(),
    };
    let rows: HashMap<(&str, &str), usize> = report
        .rows
        .iter()
        .enumerate()
        .map(|(i, r)| ((r.spec.as_str(), r.name.as_str()), i))
        .collect();
    let mut column = 0;
    for (path, digest) in loaded.paths.iter().zip(&loaded.digests) {
        let (r, again) = Results::load_with_digest(path).map_err(SpoolError::Input)?;
        if &again != digest {
            return Err(SpoolError::Input(format!(
                "results file `{}` changed while the report was being made; make it again",
                path.display()
            )));
        }
        let models: Vec<Option<&String>> = if r.settings.models.len() > 1 {
            r.settings.models.iter().map(Some).collect()
        } else {
            vec![None]
        };
        for m in models {
            let mut done = std::collections::HashSet::new();
            for t in r
                .tests
                .iter()
                .filter(|t| m.is_none() || t.model.as_ref() == m)
            {
                let Some(&row) = rows.get(&(t.spec.as_str(), t.name.as_str())) else {
                    continue;
                };
                // The cell shows the first test of its id in its column.
                if !done.insert(row) {
                    continue;
                }
                let mut v = serde_json::to_value(&t.attempts).unwrap_or_default();
                super::budgets::with_texts(&mut v);
                redactor.value(&mut v);
                let text = super::html::script_safe_json(&v);
                if let Some(secret) = redactor.leaks(&text) {
                    return Err(SpoolError::Io(std::io::Error::other(super::html::Leak(
                        secret.to_string(),
                    ))));
                }
                let start = spool.file.stream_position()?;
                spool.file.write_all(text.as_bytes())?;
                spool.at.insert((row, column), (start, text.len() as u64));
            }
            column += 1;
        }
    }
    Ok(spool)
}

impl Spool {
    /// The attempts of the cell at (`row`, `column`), as JSON.
    pub(crate) fn copy(
        &mut self,
        row: usize,
        column: usize,
        w: &mut dyn Write,
    ) -> std::io::Result<()> {
        let Some(&(start, len)) = self.at.get(&(row, column)) else {
            return w.write_all(b"[]");
        };
        self.file.seek(SeekFrom::Start(start))?;
        let copied = std::io::copy(&mut (&mut self.file).take(len), w)?;
        if copied != len {
            return Err(std::io::Error::other(
                "the report's spool file was cut short",
            ));
        }
        Ok(())
    }
}

/// A file that is gone once closed (no name left behind, even when the report is killed).
fn unnamed_file(dir: &std::path::Path) -> std::io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let unnamed = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE)
            .open(dir);
        if let Ok(f) = unnamed {
            return Ok(f);
        }
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let path = dir.join(format!(
        "toolrun-report-{}-{nanos}.spool",
        std::process::id()
    ));
    let file = options.open(&path)?;
    // Removed at once: what is open stays readable, and nothing is left behind.
    #[cfg(unix)]
    std::fs::remove_file(&path)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::results;

    fn written(dir: &std::path::Path, name: &str, r: &Results) -> PathBuf {
        let path = dir.join(name);
        r.write(&path, &Redactor::default())
            .unwrap_or_else(|e| panic!("{e}"));
        path
    }

    /// The page made in two passes is the page made from the whole files; a file rewritten
    /// between the passes stops the report (its tables and attempts would disagree).
    #[test]
    fn two_passes_make_the_same_page_and_a_changed_file_stops_them() {
        let dir = std::env::temp_dir().join(format!("toolrun-stream-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let mut a = results("gpt", &[("one", true), ("two", false)]);
        a.tests[0].attempts[0].answer = Some("it is </script> <b>up</b>".into());
        let b = results("claude", &[("one", false), ("three", true)]);
        let paths = vec![written(&dir, "a.json", &a), written(&dir, "b.json", &b)];
        let redactor = Redactor::new(["<b>up</b>".to_string()]);
        let whole = crate::report::html::render(
            &crate::report::build(crate::report::load(&paths).unwrap_or_default()),
            &redactor,
        );
        let mut loaded = load(&paths).unwrap_or_else(|e| panic!("{e}"));
        let report = crate::report::build(std::mem::take(&mut loaded.inputs));
        let Ok(mut s) = spool(&loaded, &report, &redactor, &dir) else {
            panic!("spool")
        };
        let mut page = Vec::new();
        let mut copy = |r, c, w: &mut dyn Write| s.copy(r, c, w);
        crate::report::html::render_to(&report, &redactor, Some(&mut copy), &mut page)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(String::from_utf8_lossy(&page), whole);
        assert!(whole.contains("it is \\u003c/script\\u003e ***"), "{whole}");

        let mut b2 = b.clone();
        b2.tests[0].attempts[0].answer = Some("changed".into());
        written(&dir, "b.json", &b2);
        match spool(&loaded, &report, &redactor, &dir) {
            Err(SpoolError::Input(e)) => assert!(e.contains("`") && e.contains("changed"), "{e}"),
            _ => panic!("a changed file was spooled"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
