//! The integration tests' support library, a dev-dependency, under the name unit tests use.

pub use toolrun_test_support::{http, providers, temp_dir, TempDir};
