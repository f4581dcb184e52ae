pub fn run(_args: crate::cli::RunArgs) -> i32 { 1 }
