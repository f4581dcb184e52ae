//! toolrun as a library: the binary in `main.rs` is a thin shell over it, and fuzz targets and
//! benchmarks reach the same code the command line runs.

// Parts of the API land in stages; unused items are expected until every command is wired.
#![allow(dead_code)]
// Diagnostics are rich values and errors are the rare path: boxing them buys nothing.
#![allow(clippy::result_large_err)]

pub mod arguments;
pub mod builtins;
pub mod cli;
pub mod codes;
pub mod commands;
pub mod compile;
pub mod diag;
pub mod engine;
pub mod events;
pub mod exit;
pub mod files;
pub mod fixture;
#[doc(hidden)]
pub mod fuzzing;
pub mod line_index;
pub mod mcp;
pub mod models;
pub mod net;
pub mod openapi;
pub mod redact;
pub mod registry;
pub mod replay;
pub mod report;
pub mod results;
pub mod session;
pub mod spec;
pub mod templates;
pub mod term;
pub mod tooldefs;
pub mod tools;
pub mod trace;
pub mod vocab;

/// The integration tests' servers, shared with unit tests so both read the wire formats alike.
#[cfg(test)]
pub(crate) mod test_support;
