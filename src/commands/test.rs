pub fn run(_args: crate::cli::TestArgs) -> i32 {
    1
}
pub fn replay(_args: crate::cli::ReplayArgs) -> i32 {
    1
}
