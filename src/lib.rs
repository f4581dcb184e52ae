//! toolrun as a library: the binary in `main.rs` is a thin shell over it, and fuzz targets and
//! benchmarks reach the same code the command line runs.

// The library is public for the binary, benches, fuzz targets and tests only: everything else
// is `pub(crate)`, so unused items are reported as dead code.
#![warn(unreachable_pub)]
// Diagnostics are rich values and errors are the rare path: boxing them buys nothing.
#![allow(clippy::result_large_err)]

pub(crate) mod arguments;
pub mod builtins;
pub mod cli;
pub(crate) mod codes;
pub mod commands;
pub(crate) mod compare;
pub mod compile;
pub(crate) mod diag;
pub(crate) mod diff;
pub mod engine;
pub mod events;
pub mod exit;
pub(crate) mod files;
pub(crate) mod fixture;
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod judge;
pub(crate) mod line_index;
pub(crate) mod mcp_server;
pub(crate) mod merge;
pub mod models;
pub mod net;
pub(crate) mod openapi;
pub mod redact;
pub(crate) mod registry;
pub(crate) mod replay;
pub(crate) mod report;
pub(crate) mod results;
pub(crate) mod setup;
pub mod specfile;
pub(crate) mod stats;
pub mod telemetry;
pub mod templates;
pub(crate) mod term;
pub(crate) mod tools;
pub mod trace;
pub(crate) mod vocab;

/// The integration tests' servers, shared with unit tests so both read the wire formats alike.
#[cfg(test)]
pub(crate) mod test_support;
