//! Any UTF-8 text as a spec: compiling it and rendering its diagnostics must never panic, and
//! must finish in bounded time (libFuzzer's `-timeout` catches hangs).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let source = toolrun::spec::Source {
        display: "fuzz.yaml".into(),
        text: text.into(),
    };
    // A folder that does not exist: a `file:` table is looked up, but never found.
    let compiled =
        toolrun::compile::compile(&source, Path::new("/nonexistent-toolrun-fuzz/spec.yaml"));
    // Spans come from the parser; rendering a snippet under them must cope with any of them.
    for d in &compiled.diagnostics {
        let _ = toolrun::diag::render_human(d, Some(text));
        let _ = toolrun::diag::render_github(d);
    }
    let _ = toolrun::diag::to_json(&compiled.diagnostics);
});
