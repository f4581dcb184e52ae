//! `toolrun report RESULTS...`: results files side by side, as one HTML page or a markdown summary.

use crate::cli::{ReportArgs, ReportOutput, ResultsMergeArgs};
use crate::exit;
use crate::report;
use std::io::Write;

pub(crate) fn run(args: ReportArgs) -> i32 {
    let (inputs, loaded, problems) = match inputs(&args) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {}", crate::term::visible_line(&e));
            return exit::USAGE;
        }
    };
    let redactor = report::redactor(&inputs);
    let mut built = report::build(inputs);
    for p in &problems {
        eprintln!("warning: {}", crate::term::visible_line(p));
    }
    built.notes.extend(problems);
    // The page is written as it is made; the summary is small.
    let written = match args.format {
        ReportOutput::Html => {
            // Each file read again, its attempts spooled, before a byte of the page is written.
            let spooled = match &loaded {
                Some(l) => match report::stream::spool(l, &built, &redactor, &spool_dir(&args)) {
                    Ok(s) => Ok(Some(s)),
                    Err(report::stream::SpoolError::Input(e)) => {
                        eprintln!("error: {}", crate::term::visible_line(&e));
                        return exit::USAGE;
                    }
                    Err(report::stream::SpoolError::Io(e)) => Err(e),
                },
                None => Ok(None),
            };
            spooled.and_then(|mut spool| {
                write(args.output.as_deref(), &mut |w| {
                    let mut copy = spool
                        .as_mut()
                        .map(|s| move |r, c, w: &mut dyn Write| s.copy(r, c, w));
                    let attempts = copy.as_mut().map(|c| c as report::html::Attempts);
                    report::html::render_to(&built, &redactor, attempts, w)
                })
            })
        }
        ReportOutput::Markdown => {
            let text = report::markdown::render(&built, &redactor);
            write(args.output.as_deref(), &mut |w| {
                if let Some(secret) = redactor.leaks(&text) {
                    return Err(std::io::Error::other(report::html::Leak(
                        secret.to_string(),
                    )));
                }
                w.write_all(text.as_bytes())
            })
        }
    };
    if let Err(e) = written {
        // Fail closed, as every writer does: a secret that survived masking stops the report.
        // (A closed stdout is a reader that stopped reading: nothing to say.)
        if let Some(leak) = e
            .get_ref()
            .and_then(|e| e.downcast_ref::<report::html::Leak>())
        {
            eprintln!("error: refusing to write the report: {leak}");
        } else if let Some(path) = &args.output {
            eprintln!(
                "error: cannot write the report to `{}`: {e}",
                crate::term::visible_line(&path.display().to_string())
            );
        }
        return exit::FAILED;
    }
    if let Some(path) = &args.output {
        eprintln!(
            "wrote {} ({} test(s) × {} results file(s))",
            crate::term::visible_line(&path.display().to_string()),
            built.rows.len(),
            built.columns.len()
        );
    }
    exit::SUCCESS
}

/// The files to report on: read whole and merged into one with `--merge` (the merged column's
/// attempts come from every shard), else in the first of two passes (`report::stream`).
#[allow(clippy::type_complexity)]
fn inputs(
    args: &ReportArgs,
) -> Result<
    (
        Vec<report::Input>,
        Option<report::stream::Loaded>,
        Vec<String>,
    ),
    String,
> {
    if !args.merge {
        let mut loaded = report::stream::load(&args.results)?;
        let inputs = std::mem::take(&mut loaded.inputs);
        return Ok((inputs, Some(loaded), Vec::new()));
    }
    let inputs = report::load(&args.results)?;
    let label = format!("merged ({} shards)", inputs.len());
    let merged = crate::merge::merge(inputs.into_iter().map(|i| (i.path, i.results)).collect());
    let inputs = vec![report::Input {
        path: label,
        results: merged.results,
    }];
    Ok((inputs, None, merged.problems))
}

/// Next to the page, or the system's temporary folder when it goes to stdout.
fn spool_dir(args: &ReportArgs) -> std::path::PathBuf {
    match args.output.as_deref().and_then(std::path::Path::parent) {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        Some(_) => std::path::PathBuf::from("."),
        None => std::env::temp_dir(),
    }
}

/// To `path` atomically (nothing is left when `fill` fails), or to stdout.
fn write(
    path: Option<&std::path::Path>,
    fill: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    match path {
        Some(path) => crate::files::write_atomically_with(path, fill),
        None => {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            fill(&mut out)?;
            out.flush()
        }
    }
}

/// `toolrun results merge SHARDS... -o OUT`: the merged document is written even when shards are
/// missing or overlap (so it can be looked at), but that exits 1: CI must not take a part for
/// the whole.
pub(crate) fn merge(args: ResultsMergeArgs) -> i32 {
    if let Err(e) = crate::files::check_destination(&args.output, "--output", false) {
        eprintln!("error: {e}");
        return exit::USAGE;
    }
    let inputs = match report::load(&args.shards) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {}", crate::term::visible_line(&e));
            return exit::USAGE;
        }
    };
    let redactor = report::redactor(&inputs);
    let merged = crate::merge::merge(inputs.into_iter().map(|i| (i.path, i.results)).collect());
    if let Err(e) = merged.results.write(&args.output, &redactor) {
        eprintln!("error: {}", crate::term::visible_line(&e));
        return exit::FAILED;
    }
    for p in &merged.problems {
        eprintln!("error: {}", crate::term::visible_line(p));
    }
    let t = &merged.results.totals;
    eprintln!(
        "wrote {}: {} test(s) from {} shard(s), {} passed, {} failed, {} skipped",
        crate::term::visible_line(&args.output.display().to_string()),
        t.tests,
        args.shards.len(),
        t.passed,
        t.failed,
        t.skipped
    );
    if merged.problems.is_empty() {
        exit::SUCCESS
    } else {
        exit::FAILED
    }
}

#[cfg(test)]
mod tests {
    use crate::redact::Redactor;

    /// Issue 36: the report embeds its data as JSON, where a string that spells a secret with
    /// backslash escapes (as Go's and PHP's encoders write it) has its backslashes doubled; the
    /// check before the page is written must still see it, as the trace writer's does.
    #[test]
    fn the_last_check_sees_a_secret_spelled_with_escapes_in_the_embedded_json() {
        let key = "sk-tr/Qw7+9x&y<z>k=long-enough";
        let r = Redactor::named([("KEY".to_string(), key.to_string())]);
        let escaped = r#"sk-tr\/Qw7+9x\u0026y\u003cz\u003ek=long-enough"#;
        let data = serde_json::json!({ "answer": format!("HTTP 401: {escaped}") });
        let page = format!(
            "<script type=\"application/json\">{}</script>",
            crate::report::html::script_safe_json(&data)
        );
        assert!(!page.contains(escaped), "{page}");
        assert_eq!(r.leaks(&page), Some("KEY"), "{page}");
        assert_eq!(r.leaks("HTTP 401: *** and sk-tr"), None);
    }
}
