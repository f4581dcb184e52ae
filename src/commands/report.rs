//! `toolrun report RESULTS...`: results files side by side, as one HTML page or a markdown summary.

use crate::cli::{ReportArgs, ReportOutput, ResultsMergeArgs};
use crate::exit;
use crate::report;
use std::io::Write;

pub(crate) fn run(args: ReportArgs) -> i32 {
    let mut inputs = match report::load(&args.results) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {}", crate::term::visible_line(&e));
            return exit::USAGE;
        }
    };
    let mut problems = Vec::new();
    if args.merge {
        let label = format!("merged ({} shards)", inputs.len());
        let merged = crate::merge::merge(inputs.into_iter().map(|i| (i.path, i.results)).collect());
        problems = merged.problems;
        inputs = vec![report::Input {
            path: label,
            results: merged.results,
        }];
    }
    let redactor = report::redactor(&inputs);
    let mut built = report::build(inputs);
    for p in &problems {
        eprintln!("warning: {}", crate::term::visible_line(p));
    }
    built.notes.extend(problems);
    // The page is written as it is made; the summary is small.
    let written = match args.format {
        ReportOutput::Html => write(args.output.as_deref(), &mut |w| {
            report::html::render_to(&built, &redactor, w)
        }),
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
