use crate::cli::ExplainArgs;
use crate::codes::{explain, find, CODES};
use crate::exit;

pub fn run(args: ExplainArgs) -> i32 {
    if args.list {
        for c in CODES {
            println!("{}  {}", c.code, c.title);
        }
        return exit::SUCCESS;
    }
    let code = args.code.unwrap_or_default();
    match find(&code) {
        Some(c) => {
            print!("{}", explain(c));
            exit::SUCCESS
        }
        None => {
            let hint =
                crate::diag::did_you_mean(&code.to_uppercase(), CODES.iter().map(|c| c.code))
                    .unwrap_or_else(|| "`toolrun explain --list` shows every code".to_string());
            eprintln!("error: unknown diagnostic code `{code}`\n  = help: {hint}");
            exit::USAGE
        }
    }
}
