//! `toolrun import openapi FILE`: the spec on stdout, problems on stderr (exit 2).

use crate::cli::ImportCommand;
use crate::exit;

/// Far above the largest public API descriptions (a few MB).
const MAX_DOCUMENT_BYTES: u64 = 64 << 20;

pub(crate) fn run(cmd: ImportCommand) -> i32 {
    let ImportCommand::Openapi(args) = cmd;
    // A regular file within a bound, like a spec: a FIFO would hang the import and `/dev/zero`
    // would be read until memory ran out.
    let text = match crate::files::read_regular(&args.file, MAX_DOCUMENT_BYTES) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => {
                eprintln!("error: `{}` is not UTF-8 text", args.file.display());
                return exit::USAGE;
            }
        },
        Err(crate::files::ReadError::NotAFile(e)) => {
            eprintln!("error: `{}` {e}", args.file.display());
            return exit::USAGE;
        }
        Err(crate::files::ReadError::TooLarge { limit }) => {
            eprintln!(
                "error: `{}` is larger than {limit} bytes, more than any API description needs",
                args.file.display()
            );
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
