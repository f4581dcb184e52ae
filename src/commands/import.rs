//! `toolrun import openapi FILE`: the spec on stdout, problems on stderr (exit 2).

use crate::cli::ImportCommand;
use crate::exit;

pub(crate) fn run(cmd: ImportCommand) -> i32 {
    let ImportCommand::Openapi(args) = cmd;
    let text = match std::fs::read_to_string(&args.file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", args.file.display());
            return exit::USAGE;
        }
    };
    let opts = crate::openapi::Options {
        include: args.include,
        exclude: args.exclude,
        base_url: args.base_url,
        tools_only: args.tools_only,
    };
    match crate::openapi::import(&text, &opts) {
        Ok(spec) => {
            print!("{spec}");
            exit::SUCCESS
        }
        Err(e) => {
            eprintln!("error: `{}`: {e}", args.file.display());
            exit::USAGE
        }
    }
}
