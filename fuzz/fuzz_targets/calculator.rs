//! The calculator on any expression a model might send: an answer or an error, never a panic
//! (overflow included: debug assertions are on) and never unbounded work.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolrun::fuzzing::calculator(data));
