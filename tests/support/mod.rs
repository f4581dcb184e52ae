//! Include with `mod support;`: the shared support library (`tests/support/src`, compiled once)
//! plus `toolrun()`, which must be compiled into each test binary to know the binary's path.

#![allow(dead_code, unused_imports)]

pub use toolrun_test_support::*;

/// `toolrun` with a clean environment (see [`clean_command`]).
pub fn toolrun() -> std::process::Command {
    clean_command(std::path::Path::new(env!("CARGO_BIN_EXE_toolrun")))
}
