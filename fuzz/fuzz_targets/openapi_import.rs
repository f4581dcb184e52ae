//! Any text as an OpenAPI document: `import openapi` never panics, and what it imports always
//! passes `check` (seed the corpus with tests/data/openapi/*.yaml).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolrun::fuzzing::openapi_import(data));
