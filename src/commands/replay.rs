pub fn run(_args: crate::cli::ReplayArgs) -> i32 {
    crate::exit::FAILED
}
