//! `toolrun check`: every problem in every spec, in the format the reader wants.

use crate::cli::{CheckArgs, CheckFormat};
use crate::diag::{render_github, render_human, to_json, to_sarif, Diagnostic, Severity};
use crate::exit;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub(crate) fn run(args: CheckArgs) -> i32 {
    if args.format == CheckFormat::Github {
        crate::term::github_mode();
    }
    if args.env_report && !matches!(args.format, CheckFormat::Human | CheckFormat::Json) {
        eprintln!("error: --env-report works with --format human or json");
        return exit::USAGE;
    }
    let mut environment = Vec::new();
    // Specs with errors never run: they read nothing, and their report would be a guess.
    let mut not_reported: Vec<String> = Vec::new();
    let mut all: Vec<Diagnostic> = Vec::new();
    let mut sources: HashMap<String, crate::specfile::Source> = HashMap::new();
    let mut unreadable = false;
    let specs = match expand(&args.specs) {
        Ok(specs) => specs,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    for path in &specs {
        match crate::compile::check_file(path) {
            Err(d) => {
                // Whatever stopped the file from being read (missing, a directory, not UTF-8,
                // too large) is unreadable input: exit 2, not a spec with errors.
                unreadable = true;
                all.push(d);
            }
            Ok((source, compiled)) => {
                // `check` exits right after: freeing a large registry (a compiled validator per
                // tool) piece by piece would cost more than compiling it did.
                match (args.env_report, &compiled.registry) {
                    (true, Some(registry)) => {
                        environment.extend(super::env_report::collect(registry, &source));
                    }
                    (true, None) => not_reported.push(source.display.clone()),
                    _ => {}
                }
                std::mem::forget(compiled.registry);
                all.extend(compiled.diagnostics);
                sources.insert(source.display.clone(), source);
            }
        }
    }
    let errors = all.iter().filter(|d| d.severity == Severity::Error).count();
    let warnings = all.len() - errors;
    match args.format {
        CheckFormat::Human => {
            for d in &all {
                let lines = d
                    .file
                    .as_ref()
                    .and_then(|f| sources.get(f))
                    .map(crate::specfile::Source::lines);
                eprint!("{}", crate::term::visible(&render_human(d, lines)));
                eprintln!();
            }
            let checked = specs.len();
            let noun = if checked == 1 { "spec" } else { "specs" };
            if all.is_empty() {
                eprintln!("checked {checked} {noun}: no problems");
            } else {
                eprintln!("checked {checked} {noun}: {errors} error(s), {warnings} warning(s)");
            }
            if args.env_report {
                print!(
                    "{}",
                    crate::term::visible(&super::env_report::human(&environment, &not_reported))
                );
            }
        }
        // Without `--env-report` the document stays the array of diagnostics it always was.
        CheckFormat::Json if args.env_report => println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "diagnostics": to_json(&all),
                "environment": environment.iter().map(super::env_report::EnvUse::to_json).collect::<Vec<_>>(),
                "not_reported": not_reported,
            }))
            .unwrap_or_default()
        ),
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
                println!("{}", render_github(d));
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

/// `check DIR` checks every spec below DIR: YAML files with a top-level `version:` and `tools:`
/// or `models:` (other YAML, such as CI workflows or compose files, is not a toolrun spec).
/// Hidden folders and `target/` are skipped; files are checked in path order.
pub(crate) fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for path in paths {
        if !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let mut found = Vec::new();
        walk(path, &mut found, 0)
            .map_err(|e| format!("cannot read folder `{}`: {e}", path.display()))?;
        if found.is_empty() {
            return Err(format!(
                "no toolrun specs under `{}` (YAML files with top-level `version:` and `tools:` or `models:`)",
                path.display()
            ));
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>, depth: usize) -> std::io::Result<()> {
    // Deep enough for any project layout; a symlink loop stops here instead of running forever.
    if depth > 32 {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "node_modules" {
                walk(&path, found, depth + 1)?;
            }
        } else if kind.is_file()
            && (name.ends_with(".yaml") || name.ends_with(".yml"))
            && looks_like_spec(&path)
        {
            found.push(path);
        }
    }
    Ok(())
}

fn looks_like_spec(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let top = |key: &str| {
        text.lines().any(|l| {
            l.strip_prefix(key)
                .is_some_and(|rest| rest.starts_with(':'))
        })
    };
    top("version") && (top("tools") || top("models"))
}
