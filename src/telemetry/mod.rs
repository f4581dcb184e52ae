//! OpenTelemetry traces (OTLP over HTTP) in the GenAI semantic conventions, for live, tested,
//! served and recorded runs. The core never calls in here: commands hand over what the core
//! already produces (a trace document, a results file, a served request) once it is done, and
//! this module turns it into spans and sends them from a background thread.
//!
//! Nothing is loaded or connected unless an endpoint is configured (`--otlp`,
//! `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).

mod config;
mod delivery;
mod export;
pub(crate) mod genai;
pub(crate) mod mcp;
mod otlp;
pub(crate) mod results;
pub(crate) mod span;
mod transport;

pub use config::Flags;
pub(crate) use span::{Parent, Span};

use crate::redact::Redactor;
use export::Exporter;
use std::sync::OnceLock;

/// The semantic conventions release the attribute names follow (GenAI and MCP are in
/// development there).
pub(crate) const SEMCONV_VERSION: &str = "1.39.0";

static EXPORTER: OnceLock<Option<Exporter>> = OnceLock::new();

/// Reads the settings once per process; the first command-line flags win. A bad setting is one
/// warning and no export.
pub fn init(flags: &Flags) {
    EXPORTER.get_or_init(
        || match config::from_env(flags, |k| std::env::var(k).ok()) {
            Ok(Some(c)) => {
                for warning in &c.warnings {
                    eprintln!("toolrun: warning: {}", crate::term::visible(warning));
                }
                Some(Exporter::start(c))
            }
            Ok(None) => None,
            Err(warning) => {
                eprintln!("toolrun: warning: {warning}");
                None
            }
        },
    );
}

pub(crate) fn active() -> Option<&'static Exporter> {
    EXPORTER.get().and_then(Option::as_ref)
}

/// Sends what is still queued, waiting at most `OTEL_BSP_EXPORT_TIMEOUT`; whether everything
/// queued reached the collector (true when nothing exports). A second call waits no more.
pub fn finish() -> bool {
    active().is_none_or(|e| {
        e.finish();
        e.delivered()
    })
}

/// Where a command's spans hang: the caller's trace (`TRACEPARENT`) or a new one.
pub(crate) fn command_parent() -> Parent {
    active()
        .and_then(|e| e.config.parent)
        .unwrap_or_else(Parent::root)
}

/// The exporter, unless the command runs in a caller's trace that is not sampled (the flags of
/// its `TRACEPARENT`): then, as the default parent-based sampler decides, the command's own
/// spans are not recorded. A served request decides by its own `traceparent`.
fn recording() -> Option<&'static Exporter> {
    active().filter(|e| e.config.parent.is_none_or(|p| p.sampled))
}

/// Export is on, but `TRACEPARENT` names a trace that is not sampled.
pub(crate) fn sampled_out() -> bool {
    active().is_some() && recording().is_none()
}

pub(crate) fn mapping(redactor: &Redactor) -> Option<(genai::Mapping, &'static Exporter)> {
    let e = recording()?;
    Some((
        genai::Mapping {
            content: e.config.content,
            latest_only: e.config.latest_only,
            redactor: redactor.clone(),
            mcp_calls: Default::default(),
            mcp_names: Vec::new(),
            tool_types: Vec::new(),
            model_servers: Vec::new(),
        },
        e,
    ))
}

/// Exports one run (a trace document as written) under `parent`, or the command's own parent;
/// a fixture's `exchanges` give its MCP calls their CLIENT spans (its spec, when at hand, says
/// which tools are MCP tools).
pub(crate) fn export_trace(
    trace: &serde_json::Value,
    (exchanges, registry): (
        &[crate::fixture::Exchange],
        Option<&crate::registry::Registry>,
    ),
    parent: Option<Parent>,
    redactor: &Redactor,
) {
    if let Some((mapping, exporter)) = mapping(redactor) {
        let parent = parent.unwrap_or_else(command_parent);
        let mapping = mapping.with_mcp(exchanges, registry);
        exporter.send(mapping.run_spans(trace, parent));
    }
}

/// Exports a finished run without MCP exchanges: what `cargo bench --bench loop_cost` measures.
pub fn export_run(trace: &crate::trace::Trace, redactor: &Redactor) {
    if let Some((mapping, exporter)) = mapping(redactor) {
        map_later(exporter, mapping, trace);
    }
}

/// The run's thread only copies the trace: the document and its spans are made on the export
/// thread.
fn map_later(exporter: &Exporter, mapping: genai::Mapping, trace: &crate::trace::Trace) {
    let trace = trace.clone();
    let parent = command_parent();
    exporter.send_with(Box::new(move || {
        mapping.run_spans(&trace.to_json(&mapping.redactor), parent)
    }));
}

/// Exports a live run of `registry`: its MCP tools' calls get MCP CLIENT spans from the
/// exchanges its tape kept.
pub(crate) fn export_live_run(
    trace: &crate::trace::Trace,
    registry: &crate::registry::Registry,
    tape: Option<&crate::fixture::Tape>,
    redactor: &Redactor,
) {
    if let Some((mapping, exporter)) = mapping(redactor) {
        let exchanges = tape.map(|t| t.exchanges()).unwrap_or_default();
        map_later(
            exporter,
            mapping.with_mcp(&exchanges, Some(registry)),
            trace,
        );
    }
}

/// Exports a replayed fixture: `replay {file}` (an error when the replay diverged) over the
/// replayed run, its MCP calls from the recorded exchanges.
pub(crate) fn export_replay(
    trace: Option<&crate::trace::Trace>,
    fixture: (&str, &crate::fixture::Fixture),
    registry: &crate::registry::Registry,
    failures: &[String],
) {
    let redactor = Redactor::default();
    let Some((mapping, exporter)) = mapping(&redactor) else {
        return;
    };
    let mapping = mapping.with_mcp(&fixture.1.exchanges, Some(registry));
    let mut replay = Span::new(
        command_parent(),
        format!("replay {}", fixture.0),
        span::Kind::Internal,
    );
    replay.set("toolrun.fixture", fixture.0.to_string());
    let mut spans = Vec::new();
    if let Some(t) = trace {
        spans = mapping.run_spans(&t.to_json(&redactor), replay.as_parent());
    }
    let run = spans.first();
    replay.start_ns = run.map_or_else(span::now_ns, |r| r.start_ns);
    replay.end_ns = run.map_or(replay.start_ns, |r| r.end_ns);
    if !failures.is_empty() {
        replay.fail("replay_diverged", failures.join("; "));
    }
    spans.insert(0, replay);
    exporter.send(spans);
}

/// Exports `toolrun call`'s result record: a root `execute_tool` span (over its MCP CLIENT
/// span when the tool is a remote MCP server's).
pub(crate) fn export_call(
    record: &serde_json::Value,
    (exchanges, registry): (&[crate::fixture::Exchange], &crate::registry::Registry),
    redactor: &Redactor,
) {
    if let Some((mapping, exporter)) = mapping(redactor) {
        let mapping = mapping.with_mcp(exchanges, Some(registry));
        let duration = record["duration_ms"].as_f64().unwrap_or(0.0);
        let start = genai::parse_time(record["started_at"].as_str())
            .unwrap_or_else(|| span::now_ns().saturating_sub((duration * 1e6) as u64));
        exporter.send(mapping.executed(record, command_parent(), start));
    }
}

/// Exports a results file (`export otel`): a span per test, per attempt, and its run.
pub(crate) fn export_results(results: &serde_json::Value, redactor: &Redactor) {
    if let Some((mapping, exporter)) = mapping(redactor) {
        exporter.send(results::test_spans(&mapping, results, command_parent()));
    }
}

/// The span ids of a `toolrun test` of `cases` tests, when export is on: its attempts are sent
/// as they finish ([`export_attempt`]), the rest at the end ([`export_test_tree`]).
pub(crate) fn test_tree(cases: usize) -> Option<results::Tree> {
    recording().map(|_| results::Tree::new(command_parent(), cases))
}

/// One finished attempt of a test (`test`: its name, spec and query; `attempt`: its record as
/// the results document has it), under the test's span, its MCP calls from `exchanges`.
pub(crate) fn export_attempt(
    parent: Parent,
    (test, attempt): (&serde_json::Value, &serde_json::Value),
    exchanges: &[crate::fixture::Exchange],
    registry: &crate::registry::Registry,
    redactor: &Redactor,
) {
    if let Some((mapping, exporter)) = mapping(redactor) {
        let mapping = mapping.with_mcp(exchanges, Some(registry));
        let (mut test, mut attempt) = (test.clone(), attempt.clone());
        // Made on the export thread, like a run's: the next attempt does not wait for them.
        exporter.send_with(Box::new(move || {
            mapping.redactor.value(&mut test);
            mapping.redactor.value(&mut attempt);
            results::attempt_spans(&mapping, &test, &attempt, parent, None)
        }));
    }
}

/// The command's and each test's span, once every attempt is in.
pub(crate) fn export_test_tree(
    tree: results::Tree,
    results: &serde_json::Value,
    redactor: &Redactor,
) {
    if let Some((mapping, exporter)) = mapping(redactor) {
        exporter.send(results::tree_spans(&mapping, results, tree, false));
    }
}

/// The clock for a span about to start, when export is on (nothing is read otherwise).
pub(crate) fn clock() -> Option<u64> {
    active().map(|_| span::now_ns())
}

pub(crate) fn otlp_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
