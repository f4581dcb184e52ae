//! toolrun as a library: the binary in `main.rs` is a thin shell over it, and fuzz targets and
//! benchmarks reach the same code the command line runs.
//!
//! # Layers
//!
//! A module uses its own layer and the ones below, never one above (`tests/structure.rs` checks
//! it, and that no two modules or two files of one folder import each other):
//!
//! 1. **Foundations**: `exit`, `vocab`, `codes`, `diag`, `line_index`, `term`, `files`,
//!    `arguments`, `stats`, `redact` (secrets and the masker), `events`, `net` (the one transport).
//! 2. **The spec format**: `specfile` (YAML with positions, the keys, the JSON Schema),
//!    `templates`, `builtins`.
//! 3. **The compiled spec**: `compile` (spec → `registry`, with diagnostics) and `registry`.
//! 4. **Running**: `tools` (http, mcp client, table, mock, builtin), `oauth` (the MCP client's
//!    OAuth 2.1), `models` (scripted, OpenAI, Anthropic), `engine` (the governed loop), `trace`, `fixture` (recorded runs on disk, the tape).
//! 5. **Capabilities on the core**: `setup` (one run's set-up, shared by every command),
//!    `replay`, `mcp_server` (`toolrun serve`), `openapi` (`toolrun import`), `results`, `report`,
//!    `telemetry`, `compare`, `merge`, `diff`, `judge`, `lsp` (`toolrun lsp`, the spec compiler in
//!    the editor).
//! 6. **The command line**: `cli` (flags) and `commands` (one module per command, exit codes).

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
pub(crate) mod lsp;
pub(crate) mod mcp_server;
pub(crate) mod merge;
pub mod models;
pub mod net;
pub(crate) mod oauth;
pub(crate) mod openapi;
pub mod redact;
pub(crate) mod registry;
pub(crate) mod replay;
pub(crate) mod report;
pub(crate) mod results;
pub(crate) mod setup;
pub(crate) mod signals;
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
