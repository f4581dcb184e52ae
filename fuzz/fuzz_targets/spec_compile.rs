//! Any UTF-8 text as a spec: compiling it and rendering its diagnostics must never panic, and
//! must finish in bounded time (libFuzzer's `-timeout` catches hangs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolrun::fuzzing::spec_compile(data));
