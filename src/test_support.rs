//! The integration tests' support library, a dev-dependency, under the name unit tests use.

pub(crate) use toolrun_test_support::{http, providers, temp_dir, TempDir};
