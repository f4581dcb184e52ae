//! `toolrun export otel FILE...`: recorded traces, fixtures and results files as OpenTelemetry
//! spans at their recorded times, so a replayed regression shows up beside production runs.

use crate::cli::ExportOtelArgs;
use crate::exit;
use crate::redact::Redactor;
use crate::telemetry;
use serde_json::Value;
use std::path::Path;

/// Recorded files are JSON documents of at most this size (a fixture with large results).
const MAX_FILE: u64 = 512 * 1024 * 1024;

pub(crate) fn run(args: ExportOtelArgs) -> i32 {
    if telemetry::active().is_none() {
        eprintln!("error: no OpenTelemetry collector to send to: pass --otlp URL (e.g. http://127.0.0.1:4318) or set OTEL_EXPORTER_OTLP_ENDPOINT");
        return exit::USAGE;
    }
    if telemetry::sampled_out() {
        eprintln!("toolrun: nothing exported: TRACEPARENT names a trace that is not sampled (its flags are 00), so its children are not recorded; unset it or use flags 01");
        return exit::SUCCESS;
    }
    // What was written is already masked; nothing here knows the secrets of the run.
    let redactor = Redactor::default();
    let mut code = exit::SUCCESS;
    let (mut runs, mut files) = (0, 0);
    for path in &args.files {
        match read(path) {
            Ok(doc) => match export_document(&doc, path, &redactor) {
                Ok(n) => {
                    runs += n;
                    files += 1;
                }
                Err(what) => {
                    eprintln!("error: `{}` {what}", shown(path));
                    code = exit::USAGE;
                }
            },
            Err(e) => {
                eprintln!("error: {e}");
                code = exit::USAGE;
            }
        }
    }
    // Sending is this command's whole job: it waits for the collector (at most
    // OTEL_BSP_EXPORT_TIMEOUT) and fails when the spans did not all get there.
    if !telemetry::finish() {
        eprintln!("error: {runs} run(s) from {files} file(s) did not all reach the collector (see the warning above); check that it runs and accepts OTLP/HTTP at that URL, then export again");
        // An unreadable file (2) says more than the failed sending.
        return if code == exit::SUCCESS {
            exit::FAILED
        } else {
            code
        };
    }
    eprintln!("exported {runs} run(s) from {files} file(s)");
    code
}

fn shown(path: &Path) -> String {
    crate::term::visible(&path.display().to_string()).into_owned()
}

fn read(path: &Path) -> Result<Value, String> {
    let bytes = crate::files::read_regular(path, MAX_FILE).map_err(|e| match e {
        crate::files::ReadError::TooLarge { limit } => {
            format!("`{}` is larger than {limit} bytes", shown(path))
        }
        crate::files::ReadError::NotAFile(e) => format!("`{}` {e}", shown(path)),
    })?;
    // A `serve --record` recording reads as the fixture it is.
    if crate::fixture::session_log::is_session_log(&bytes) {
        return crate::fixture::session_log::document(&bytes, path);
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("`{}` is not valid JSON: {e}", shown(path)))
}

/// Sends one document; returns how many runs it held.
fn export_document(doc: &Value, path: &Path, redactor: &Redactor) -> Result<usize, String> {
    if doc["kind"] == crate::results::KIND {
        telemetry::export_results(doc, redactor);
        let attempts = doc["tests"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t["attempts"].as_array().map_or(0, Vec::len))
            .sum();
        return Ok(attempts);
    }
    let (trace, exchanges) = if doc.get("exchanges").is_some() {
        // A fixture's exchanges give its MCP calls their CLIENT spans; unreadable ones, none.
        let exchanges: Vec<crate::fixture::Exchange> =
            serde_json::from_value(doc["exchanges"].clone()).unwrap_or_default();
        (&doc["trace"], exchanges)
    } else {
        (doc, Vec::new())
    };
    let registry = exchanges
        .iter()
        .any(|e| e.kind == "mcp")
        .then(|| fixture_spec(doc, path))
        .flatten();
    if trace.get("stop_reason").is_some() && trace.get("tool_results").is_some() {
        telemetry::export_trace(trace, (&exchanges, registry.as_ref()), None, redactor);
        return Ok(1);
    }
    Err("is neither a trace (`run --trace`), a fixture (`--record`) nor a results file (`test --results`)".into())
}

/// The spec a fixture was recorded from, when it is still where the fixture says: it names the
/// fixture's `kind: mcp` tools (renamed with `as:` or not). A fixture exported without its
/// spec (a CI artifact) matches MCP calls by tool name alone.
fn fixture_spec(doc: &Value, path: &Path) -> Option<crate::registry::Registry> {
    let fixture: crate::fixture::Fixture = serde_json::from_value(doc.clone()).ok()?;
    let spec = crate::fixture::spec_path_for(path, &fixture).ok()?;
    crate::replay::load_quiet(&spec).ok()
}
