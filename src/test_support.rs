//! Paths are relative to `src/`: the files live with the integration tests.

#[path = "../tests/support/http.rs"]
pub mod http;
#[path = "../tests/support/providers.rs"]
pub mod providers;
