// Stub entry point for the `builtins` worktree: the real CLI lives on main, and the
// integrator merges `src/builtins/` into it. Until then nothing calls these functions.
#[allow(dead_code)]
mod builtins;

fn main() {}
