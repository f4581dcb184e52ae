//! `toolrun report RESULTS...`: results files side by side, as one HTML page or a markdown summary.

use crate::cli::{ReportArgs, ReportOutput};
use crate::exit;
use crate::report;

pub(crate) fn run(args: ReportArgs) -> i32 {
    let inputs = match report::load(&args.results) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("error: {}", crate::term::visible_line(&e));
            return exit::USAGE;
        }
    };
    let built = report::build(&inputs);
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
