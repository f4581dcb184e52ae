//! `toolrun explain CODE`: what a diagnostic means, why it matters, an example and the fix.

use crate::cli::ExplainArgs;
use crate::codes::{explain, find, CodeInfo, CODES};
use crate::exit;

pub(crate) fn run(args: ExplainArgs) -> i32 {
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
            let hint = same_number(&code)
                .map(|c| format!("did you mean `{}`?", c.code))
                .or_else(|| {
                    crate::diag::did_you_mean(&code.to_uppercase(), CODES.iter().map(|c| c.code))
                })
                .unwrap_or_else(|| "`toolrun explain --list` shows every code".to_string());
            eprintln!("error: unknown diagnostic code `{code}`\n  = help: {hint}");
            exit::USAGE
        }
    }
}

/// People type codes from memory: `12`, `e12`, `E0012` all mean E012, and `101` means W101.
fn same_number(text: &str) -> Option<&'static CodeInfo> {
    let digits = text.trim().trim_start_matches(['E', 'e', 'W', 'w']);
    let n: u32 = digits.parse().ok()?;
    CODES
        .iter()
        .find(|c| c.code[1..].parse::<u32>().ok() == Some(n))
}

#[cfg(test)]
mod tests {
    use super::same_number;

    #[test]
    fn codes_are_found_by_number() {
        assert_eq!(same_number("12").map(|c| c.code), Some("E012"));
        assert_eq!(same_number("E0012").map(|c| c.code), Some("E012"));
        assert_eq!(same_number("101").map(|c| c.code), Some("W101"));
        assert_eq!(same_number("E999").map(|c| c.code), None);
        assert_eq!(same_number("x").map(|c| c.code), None);
    }
}
