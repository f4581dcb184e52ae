//! `toolrun report RESULTS...`: results files side by side, as one HTML page or a markdown summary.

use crate::cli::{ReportArgs, ReportOutput, ResultsMergeArgs};
use crate::exit;
use crate::report;

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
    let mut built = report::build(&inputs);
    for p in &problems {
        eprintln!("warning: {}", crate::term::visible_line(p));
    }
    built.notes.extend(problems);
    let redactor = report::redactor(&inputs);
    let text = match args.format {
        ReportOutput::Html => report::html::render(&built, &redactor),
        ReportOutput::Markdown => report::markdown::render(&built, &redactor),
    };
    // Fail closed, as every writer does: a secret that survived masking stops the report.
    if let Some(secret) = redactor.leaks(&text) {
        eprintln!("error: refusing to write the report: secret `{secret}` would appear in it");
        return exit::FAILED;
    }
    match &args.output {
        Some(path) => {
            if let Err(e) = crate::files::write_atomically(path, text.as_bytes()) {
                eprintln!(
                    "error: cannot write the report to `{}`: {e}",
                    crate::term::visible_line(&path.display().to_string())
                );
                return exit::FAILED;
            }
            eprintln!(
                "wrote {} ({} test(s) × {} results file(s))",
                crate::term::visible_line(&path.display().to_string()),
                built.rows.len(),
                built.columns.len()
            );
        }
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            if out
                .write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                return exit::FAILED;
            }
        }
    }
    exit::SUCCESS
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
