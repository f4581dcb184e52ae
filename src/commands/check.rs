//! `toolrun check`: every problem in every spec, in the format the reader wants.

use crate::cli::{CheckArgs, CheckFormat};
use crate::diag::{render_github, render_human, to_json, to_sarif, Diagnostic, Severity};
use crate::exit;

pub fn run(args: CheckArgs) -> i32 {
    let mut all: Vec<Diagnostic> = Vec::new();
    let mut sources: Vec<(String, String)> = Vec::new();
    let mut unreadable = false;
    for path in &args.specs {
        match crate::compile::compile_file(path) {
            Err(d) => {
                // Whatever stopped the file from being read (missing, a directory, not UTF-8,
                // too large) is unreadable input: exit 2, not a spec with errors.
                unreadable = true;
                all.push(d);
            }
            Ok((source, compiled)) => {
                // `check` exits right after: freeing a large registry (a compiled validator per
                // tool) piece by piece would cost more than compiling it did.
                std::mem::forget(compiled.registry);
                all.extend(compiled.diagnostics);
                sources.push((source.display, source.text));
            }
        }
    }
    let errors = all.iter().filter(|d| d.severity == Severity::Error).count();
    let warnings = all.len() - errors;
    match args.format {
        CheckFormat::Human => {
            for d in &all {
                let src = d
                    .file
                    .as_ref()
                    .and_then(|f| sources.iter().find(|(n, _)| n == f))
                    .map(|(_, t)| t.as_str());
                eprint!("{}", crate::term::visible(&render_human(d, src)));
                eprintln!();
            }
            let checked = args.specs.len();
            let noun = if checked == 1 { "spec" } else { "specs" };
            if all.is_empty() {
                eprintln!("checked {checked} {noun}: no problems");
            } else {
                eprintln!("checked {checked} {noun}: {errors} error(s), {warnings} warning(s)");
            }
        }
        CheckFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&to_json(&all)).unwrap_or_default()
        ),
        CheckFormat::Sarif => {
            println!(
                "{}",
                serde_json::to_string_pretty(&to_sarif(&all, &crate::codes::rules()))
                    .unwrap_or_default()
            )
        }
        CheckFormat::Github => {
            for d in &all {
                println!("{}", crate::term::visible(&render_github(d)));
            }
        }
    }
    if unreadable {
        exit::USAGE
    } else if errors > 0 || (args.deny_warnings && warnings > 0) {
        exit::FAILED
    } else {
        exit::SUCCESS
    }
}
