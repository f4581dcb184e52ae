//! Replaying fixtures: the spec as it is now, every request answered from the recording, the
//! network never touched, and a readable diff for any divergence.

use crate::engine::{Engine, RunOptions};
use crate::events::Events;
use crate::fixture::{json_diff, Fixture, Tape, FORMAT_VERSION};
use crate::net::Transport;
use crate::redact::{Redactor, Secrets, MASK};
use crate::registry::{ModelKind, Registry};
use crate::trace::without_durations;
use serde_json::Value;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

pub(crate) type Interrupt = Arc<std::sync::atomic::AtomicBool>;

pub(crate) struct ReplayReport {
    pub(crate) failures: Vec<String>,
    /// `--update` rewrote the fixture's trace.
    pub(crate) updated: bool,
    /// The replayed run, when it could start: tests check their expectations against it.
    pub(crate) trace: Option<crate::trace::Trace>,
}

/// Fixtures hold every response of a run; this bounds what a hostile one can make us hold.
const MAX_FIXTURE_BYTES: u64 = 256 << 20;

pub(crate) fn load_fixture(path: &Path) -> Result<Fixture, String> {
    let bytes = crate::files::read_regular(path, MAX_FIXTURE_BYTES).map_err(|e| match e {
        crate::files::ReadError::NotAFile(e) => format!("fixture `{}` {e}", path.display()),
        crate::files::ReadError::TooLarge { limit } => {
            format!("fixture `{}` is larger than {limit} bytes", path.display())
        }
    })?;
    let raw: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("fixture `{}` is not valid JSON: {e}", path.display()))?;
    let version = raw.get("format_version");
    if version.and_then(Value::as_u64) != Some(u64::from(FORMAT_VERSION)) {
        // Say what the file holds (`1.5`, `"1"`, nothing), not what it was coerced to.
        let found = match version {
            None => "no format_version".to_string(),
            Some(v) => format!("format_version {v}"),
        };
        return Err(format!(
            "fixture `{}` has {found}; this toolrun reads version {FORMAT_VERSION}",
            path.display()
        ));
    }
    serde_json::from_value(raw)
        .map_err(|e| format!("fixture `{}` is malformed: {e}", path.display()))
}

/// The spec a fixture was recorded from, resolved against the fixture's own folder. It must stay
/// inside the fixture's project root: a fixture from a pull request cannot make `replay` read
/// `/etc/passwd` or a home directory.
pub(crate) fn spec_path_for(fixture_path: &Path, fixture: &Fixture) -> Result<PathBuf, String> {
    let dir = match fixture_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let root = crate::files::project_root(fixture_path);
    let written = &fixture.spec.path;
    crate::files::within_root(&root, dir, written).map_err(|e| {
        format!(
            "fixture `{}`: its spec path {}; pass `--spec PATH` or `--root DIR`",
            fixture_path.display(),
            e.describe(written)
        )
    })
}

/// The spec part of a fixture about to be written at `fixture_path`: the spec's path is stored
/// relative to the fixture's folder, so a repository can be cloned anywhere.
pub(crate) fn fixture_spec(
    registry: &crate::registry::Registry,
    spec_path: &Path,
    fixture_path: &Path,
) -> crate::fixture::FixtureSpec {
    let dir = fixture_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    crate::fixture::FixtureSpec {
        name: registry.name.clone(),
        sha256: registry.spec_sha256.clone(),
        path: relative_path(dir, spec_path)
            .to_string_lossy()
            .replace('\\', "/"),
    }
}

/// `to` relative to the directory `from`, for portable paths inside fixtures.
pub(crate) fn relative_path(from_dir: &Path, to: &Path) -> PathBuf {
    let (Ok(from), Ok(to_abs)) = (from_dir.canonicalize(), to.canonicalize()) else {
        return to.to_path_buf();
    };
    let a: Vec<Component> = from.components().collect();
    let b: Vec<Component> = to_abs.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c);
    }
    out
}

/// Placeholders for every secret and API key: recorded requests hold only the mask, so a
/// replay that sends the mask sends exactly what was recorded, and real keys are never needed.
pub(crate) fn placeholder_secrets(registry: &Registry, model: &str) -> Secrets {
    let mut secrets = Secrets::default();
    for name in &registry.secrets {
        secrets.insert(name, MASK.to_string());
    }
    if let Some(def) = registry.model(model) {
        if let ModelKind::OpenAi(live) | ModelKind::Anthropic(live) = &def.kind {
            if let Some(var) = &live.api_key_env {
                secrets.insert(var, MASK.to_string());
            }
        }
    }
    secrets
}

pub(crate) async fn replay_fixture(
    fixture: &Fixture,
    registry: &Registry,
    fixture_path: &Path,
    update: bool,
    interrupted: Option<Interrupt>,
) -> ReplayReport {
    let mut failures = Vec::new();
    let mut secrets = placeholder_secrets(registry, &fixture.model);
    let def = match registry.model(&fixture.model) {
        Some(d) => d,
        None => {
            let hint = crate::diag::did_you_mean(&fixture.model, registry.model_names())
                .unwrap_or_default();
            return ReplayReport {
                failures: vec![format!(
                    "the fixture was recorded with model `{}`, which the spec no longer has {hint}",
                    fixture.model
                )],
                updated: false,
                trace: None,
            };
        }
    };
    let mut model = match crate::models::ModelClient::new(def, &fixture.query, &mut secrets) {
        Ok(m) => m,
        Err(e) => {
            return ReplayReport {
                failures: vec![e],
                updated: false,
                trace: None,
            }
        }
    };
    // The stand-ins are all the mask: masking them turns each of its encodings back into it.
    let redactor = secrets.redactor();
    let tape = Arc::new(Tape::replaying(
        fixture.exchanges.clone(),
        registry.replay_ignore.clone(),
        redactor.clone(),
    ));
    let transport = Transport::with_tape(tape.clone());
    let events = Events::none();
    let engine = Engine {
        registry,
        transport: &transport,
        events: &events,
        secrets: &secrets,
        redactor: redactor.clone(),
    };
    let opts = RunOptions {
        faults: Vec::new(),
        query: &fixture.query,
        model_name: &fixture.model,
        approvals: fixture.approvals.iter().cloned().collect(),
        confirmer: None,
        now_unix_ms: fixture.now_unix_ms,
        interrupted,
    };
    let trace = engine.run(&mut model, opts).await;
    let mismatches = tape.mismatches();
    failures.extend(mismatches.iter().cloned());
    for unused in tape.unused() {
        failures.push(format!("recorded exchange was never requested: {unused}"));
    }
    // The spec's hash changes with any edit (a new test, a comment); what must not change is
    // what the run did, so the hash is not compared.
    // `replay.ignore` names volatile fields: they are left out of the trace comparison too.
    let comparable = |v: &Value| {
        let mut v = crate::fixture::without_pointers(without_durations(v), &registry.replay_ignore);
        redactor.value(&mut v);
        if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("sha256");
        }
        v
    };
    let old_trace = comparable(&fixture.trace);
    let mut new_trace = comparable(&trace.to_json(&redactor));
    without_fields_added_later(&mut new_trace, &old_trace);
    let mut updated = false;
    if new_trace != old_trace {
        if update && failures.is_empty() {
            let mut fresh = fixture.clone();
            fresh.trace = trace.to_json(&redactor);
            fresh.spec.sha256 = registry.spec_sha256.clone();
            match write_fixture(fixture_path, &fresh, &redactor) {
                Ok(()) => updated = true,
                Err(e) => failures.push(e),
            }
        } else {
            failures.push(format!(
                "the trace differs from the recorded one:\n{}",
                json_diff(&old_trace, &new_trace)
            ));
        }
    }
    ReplayReport {
        failures,
        updated,
        trace: Some(trace),
    }
}

/// Fields the trace gained after fixtures were already being recorded (`tool_results[].http`):
/// a recording without one is not a divergence, so old fixtures keep replaying; a recording that
/// has it is compared as usual.
fn without_fields_added_later(new: &mut Value, old: &Value) {
    let old_calls = old.get("tool_results").and_then(Value::as_array);
    let new_calls = new.get_mut("tool_results").and_then(Value::as_array_mut);
    let (Some(old_calls), Some(new_calls)) = (old_calls, new_calls) else {
        return;
    };
    for (n, o) in new_calls.iter_mut().zip(old_calls) {
        if o.get("http").is_none() {
            if let Some(entry) = n.as_object_mut() {
                entry.remove("http");
            }
        }
    }
}

/// Compiles a spec for replay; errors become one readable failure.
pub(crate) fn load_quiet(spec: &Path) -> Result<Registry, String> {
    match crate::compile::compile_file(spec) {
        Err(d) => Err(format!(
            "cannot read spec `{}`: {}",
            spec.display(),
            d.message
        )),
        Ok((source, compiled)) => compiled.registry.ok_or_else(|| {
            let first = compiled.diagnostics.iter().find(|d| d.is_error()).map(|d| {
                let at = d
                    .span
                    .map(|s| format!(":{}:{}", s.line, s.col))
                    .unwrap_or_default();
                format!("{}{at}: {}", source.display, d.message)
            });
            format!(
                "the spec does not compile ({}); run `toolrun check {}`",
                first.unwrap_or_default(),
                source.display
            )
        }),
    }
}

/// Masks, then refuses to write if any secret survives in any form (fail closed), then writes
/// atomically.
pub(crate) fn write_fixture(
    path: &Path,
    fixture: &Fixture,
    redactor: &Redactor,
) -> Result<(), String> {
    let doc = serde_json::to_value(fixture).map_err(|e| e.to_string())?;
    let text = redactor.to_pretty(doc).map_err(|leak| {
        format!(
            "refusing to write fixture `{}`: {leak} even after masking; nothing was written",
            path.display()
        )
    })?;
    // Per-test fixtures live in a folder of their own, which the first recording creates.
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create folder `{}`: {e}", dir.display()))?;
    }
    crate::files::write_atomically(path, text.as_bytes())
        .map_err(|e| format!("cannot write fixture `{}`: {e}", path.display()))
}
