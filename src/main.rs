// Parts of the API land in stages; unused items are expected until every command is wired.
#![allow(dead_code)]
// Diagnostics are rich values and errors are the rare path: boxing them buys nothing.
#![allow(clippy::result_large_err)]

mod builtins;
mod cli;
mod codes;
mod commands;
mod compile;
mod diag;
mod engine;
mod events;
mod exit;
mod fixture;
mod models;
mod net;
mod redact;
mod registry;
mod replay;
mod session;
mod spec;
mod templates;
mod tooldefs;
mod tools;
mod trace;

use clap::Parser;

fn main() {
    // A closed pipe (`toolrun schema | head`) is a normal way to stop reading, not a crash.
    reset_sigpipe();
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::SUCCESS
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let code = commands::dispatch(cli);
    std::process::exit(code);
}

#[cfg(unix)]
fn reset_sigpipe() {
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc_signal(13, 0);
    }
}

#[cfg(unix)]
extern "C" {
    #[link_name = "signal"]
    fn libc_signal(signum: i32, handler: usize) -> usize;
}

#[cfg(not(unix))]
fn reset_sigpipe() {}
