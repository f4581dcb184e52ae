//! Provider replies, as a hostile or broken server might send them (see
//! `toolrun::fuzzing::model_response` for how the bytes become a reply).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolrun::fuzzing::model_response(data));
