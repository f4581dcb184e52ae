//! Exit codes from the contract. Every user-facing error knows its own.

pub const SUCCESS: i32 = 0;
/// The work failed: a failed run, a failing test or replay, a spec with errors.
pub(crate) const FAILED: i32 = 1;
/// Usage error or unreadable input file.
pub const USAGE: i32 = 2;
/// A run stopped for a person (`needs_confirmation` / `needs_review`).
pub(crate) const NEEDS_PERSON: i32 = 3;
/// SIGINT, by shell convention.
pub(crate) const INTERRUPTED: i32 = 130;
/// SIGTERM, by shell convention.
pub(crate) const TERMINATED: i32 = 143;
