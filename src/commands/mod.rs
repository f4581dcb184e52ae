//! One module per subcommand: each maps its outcome to an exit code from the contract.

mod auth;
pub(crate) mod call;
pub(crate) mod cases;
mod chat;
mod chat_save;
pub(crate) mod check;
pub(crate) mod diff;
mod env_report;
pub(crate) mod explain;
pub(crate) mod export;
pub(crate) mod import;
pub(crate) mod junit;
pub(crate) mod live_text;
mod prompt;
pub(crate) mod replay;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod test_suite;
pub(crate) mod tools;

use crate::cli::{Cli, Command};
use crate::diag::{render_human, Diagnostic};
use crate::exit;
use crate::registry::Registry;
use std::path::Path;

pub fn dispatch(cli: Cli) -> i32 {
    if let Some(root) = cli.root {
        if !root.is_dir() {
            eprintln!(
                "error: --root `{}` is not a directory",
                crate::term::visible(&root.display().to_string())
            );
            return exit::USAGE;
        }
        crate::files::set_root_override(root);
    }
    if let Some(otlp) = otlp_args(&cli.command) {
        crate::telemetry::init(&crate::telemetry::Flags {
            otlp: otlp.otlp.clone(),
            content: otlp.otlp_content,
        });
    }
    let mut code = run_command(cli.command);
    // An `--events` stream that could not be written fails the command, as `--trace` does.
    if let Some(failure) = crate::events::write_failure() {
        eprintln!("error: {}", crate::term::visible(&failure));
        if code != exit::USAGE {
            code = exit::FAILED;
        }
    }
    // Spans still queued go out now, within OTEL_BSP_EXPORT_TIMEOUT; the exit code is the
    // command's whatever the collector does.
    let _ = crate::telemetry::finish();
    code
}

/// The export settings of the commands that run something; the others never export.
fn otlp_args(command: &Command) -> Option<&crate::setup::OtlpArgs> {
    match command {
        Command::Run(a) => Some(&a.setup.otlp),
        Command::Chat(a) => Some(&a.setup.otlp),
        Command::Test(a) => Some(&a.setup.otlp),
        Command::Replay(a) => Some(&a.otlp),
        Command::Call(a) => Some(&a.setup.otlp),
        Command::Serve(a) => Some(&a.setup.otlp),
        Command::Export(crate::cli::ExportCommand::Otel(a)) => Some(&a.otlp),
        _ => None,
    }
}

fn run_command(command: Command) -> i32 {
    match command {
        Command::Export(crate::cli::ExportCommand::Otel(args)) => export::run(args),
        Command::Check(args) => check::run(args),
        Command::Run(args) => run::run(args),
        Command::Chat(args) => chat::run(args),
        Command::Test(args) => test_suite::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Report(args) => report::run(args),
        Command::Call(args) => call::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Auth(cmd) => auth::run(cmd),
        Command::Import(cmd) => import::run(cmd),
        Command::Diff(args) => diff::run(args),
        Command::Results(crate::cli::ResultsCommand::Merge(args)) => report::merge(args),
        Command::Tools(args) => tools::run(args),
        Command::Schema => {
            println!(
                "{}",
                serde_json::to_string_pretty(&crate::specfile::schema::spec_schema())
                    .unwrap_or_default()
            );
            exit::SUCCESS
        }
        Command::Explain(args) => explain::run(args),
        Command::Lsp => crate::lsp::run(),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "toolrun", &mut std::io::stdout());
            exit::SUCCESS
        }
    }
}

/// Loads a spec for commands that need a working registry (run, test, tools): errors are
/// printed as diagnostics and mapped to an exit code; warnings stay quiet here (`check` shows them).
pub(crate) fn load_registry(path: &Path) -> Result<Registry, i32> {
    load_registry_picking(path, &crate::registry::RowPick::default())
}

/// [`load_registry`], keeping the rows of data tests `pick` selects as tests.
pub(crate) fn load_registry_picking(
    path: &Path,
    pick: &crate::registry::RowPick,
) -> Result<Registry, i32> {
    match crate::compile::compile_file_picking(path, pick) {
        Err(d) => {
            eprint!("{}", crate::term::visible(&render_human(&d, None)));
            Err(exit::USAGE)
        }
        Ok((source, compiled)) => match compiled.registry {
            Some(r) => Ok(r),
            None => {
                let errors: Vec<&Diagnostic> = compiled
                    .diagnostics
                    .iter()
                    .filter(|d| d.is_error())
                    .collect();
                for d in &errors {
                    eprint!(
                        "{}",
                        crate::term::visible(&render_human(d, Some(source.lines())))
                    );
                    eprintln!();
                }
                eprintln!(
                    "error: `{}` has {} error(s); run `toolrun check {}` for details",
                    source.display,
                    errors.len(),
                    source.display
                );
                Err(exit::FAILED)
            }
        },
    }
}
