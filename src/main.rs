use clap::Parser;
use toolrun::{cli, commands, exit, templates};

fn main() {
    // A closed pipe (`toolrun schema | head`) is a normal way to stop reading, not a crash.
    reset_sigpipe();
    // toolrun run again by itself to render one costly template under hard limits.
    let mut args = std::env::args();
    if args.nth(1).as_deref() == Some(templates::isolated::CHILD_ARG) {
        let rest: Vec<String> = args.collect();
        std::process::exit(templates::isolated::child_main(&rest));
    }
    templates::isolated::enable();
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
