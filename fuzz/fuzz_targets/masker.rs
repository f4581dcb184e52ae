//! The secret masker: whatever spelling of a secret a text holds (percent-encoded in part,
//! JSON- or HTML-escaped, base64 of `user:secret`), after masking no decoding yields it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| toolrun::fuzzing::masker(data));
