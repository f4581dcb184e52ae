//! `toolrun run`: one run of the loop; the answer on stdout, the trace where asked.

use crate::cli::{RecordMode, RunArgs};
use crate::exit;
use crate::fixture::{Fixture, Tape};
use crate::redact::Redactor;
use crate::registry::Registry;
use crate::setup::{Inputs, ModelChoice, Network, Output, Setup, Signals};
use crate::trace::{Status, StopReason, Trace};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

pub(crate) fn run(args: RunArgs) -> i32 {
    match run_steps(&args) {
        Ok(code) | Err(code) => code,
    }
}

/// Each step either hands its result on or ends the command with an exit code.
fn run_steps(args: &RunArgs) -> Result<i32, i32> {
    // Before anything else: a signal while the spec loads still ends the run as a signal
    // should, with its trace and exit code (issue 36 §19).
    let rt = crate::setup::runtime();
    let signals = Signals::watch(&rt);
    let registry = super::load_registry(&args.spec)?;
    let mut inputs = Inputs::from_flags(&args.setup);
    if let Some(path) = &args.trace {
        inputs.outputs.push(Output::file(path, "--trace"));
    }
    if let Some(path) = &args.record {
        inputs
            .outputs
            .push(Output::in_new_folders(path, "--record"));
        inputs.network = Network::Record {
            previous: previous_exchanges(args, path)?,
        };
    }
    inputs.model = Some(ModelChoice {
        name: args.model.as_deref(),
        query: Some(&args.query),
    });
    inputs.interrupt = Some(signals.stop.clone());
    let mut setup = Setup::open(&registry, inputs).map_err(usage)?;
    let Some(mut model) = setup.model.take() else {
        return Err(exit::USAGE);
    };
    let redactor = setup.redactor.clone();
    // The live text watches the events: it is attached before the engine borrows them.
    let on_terminal = !args.json && std::io::stdout().is_terminal();
    let live_text = Arc::get_mut(&mut setup.events).and_then(|events| {
        super::live_text::LiveText::attach(events, &registry, &model.name, on_terminal)
    });
    let approved_interactively = Arc::new(Mutex::new(Vec::<String>::new()));
    let confirm_prompt = super::prompt::terminal_prompt(
        redactor.clone(),
        approved_interactively.clone(),
        signals.stop.clone(),
    );
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let mut opts = setup.run_options(&args.query, &model.name);
    if interactive {
        opts.confirmer = Some(&confirm_prompt);
    }
    let now = opts.now_unix_ms;
    let engine = setup.engine(&registry);
    let trace = rt.block_on(engine.run(&mut model.client, opts));
    crate::telemetry::export_live_run(&trace, &registry, setup.tape.as_deref(), &setup.redactor);
    // The engine masked the trace as it built it; the writer's scan below is the guard.
    // Only a fixture needs the trace as a document: no copy of the trace otherwise.
    let fixture_doc = args
        .record
        .is_some()
        .then(|| serde_json::to_value(&trace).unwrap_or_default());
    // Fail closed: a secret that masking missed stops the trace, the fixture and `--json` alike.
    // Without secrets there is nothing to find, and without a reader no text to build.
    let pretty = if args.trace.is_none() && !args.json && redactor.is_empty() {
        String::new()
    } else {
        redactor.to_pretty_from(&trace).map_err(|leak| {
            eprintln!(
                "error: refusing to write the trace: {leak} even after masking; nothing was written"
            );
            exit::FAILED
        })?
    };
    if let Some(path) = &args.trace {
        if let Err(e) = crate::files::write_atomically(path, pretty.as_bytes()) {
            eprintln!("error: cannot write the trace to `{}`: {e}", path.display());
            return Err(exit::FAILED);
        }
    }
    if let (Some(path), Some(tape), Some(doc)) = (&args.record, &setup.tape, fixture_doc) {
        let mut approvals: Vec<String> = args.setup.approve.clone();
        if let Ok(log) = approved_interactively.lock() {
            approvals.extend(log.iter().cloned());
        }
        let fixture = build_fixture(args, &registry, &model.name, now, approvals, tape, doc);
        if let Err(e) = crate::fixture::write_fixture(path, &fixture, &redactor) {
            eprintln!("error: {e}");
            return Err(exit::FAILED);
        }
    }
    let code = show_outcome(
        args,
        &trace,
        &pretty,
        &redactor,
        &signals,
        live_text.as_ref(),
    );
    // The process exits next: freeing the registry's many small allocations one by one was 3%
    // of a cold run.
    std::mem::forget(registry);
    Ok(code)
}

fn usage(e: String) -> i32 {
    eprintln!("error: {e}");
    exit::USAGE
}

/// `--record-mode`: a new fixture, or (`new`) the existing fixture's exchanges first.
fn previous_exchanges(
    args: &RunArgs,
    path: &std::path::Path,
) -> Result<Option<Vec<crate::fixture::Exchange>>, i32> {
    match (args.record_mode, path.exists()) {
        (RecordMode::Once, true) => {
            eprintln!("error: fixture `{}` already exists; pass --record-mode all to re-record it or --record-mode new to add to it", path.display());
            Err(exit::USAGE)
        }
        (RecordMode::New, true) => {
            let previous = crate::fixture::load_fixture(path).map_err(usage)?;
            Ok(Some(previous.exchanges))
        }
        _ => Ok(None),
    }
}

fn build_fixture(
    args: &RunArgs,
    registry: &Registry,
    model_name: &str,
    now: i64,
    approvals: Vec<String>,
    tape: &Tape,
    trace: serde_json::Value,
) -> Fixture {
    // `--record` is set whenever a fixture is built.
    let fixture_path = args
        .record
        .as_deref()
        .unwrap_or(std::path::Path::new("fixture.json"));
    Fixture::recorded(
        crate::fixture::fixture_spec(registry, &args.spec, fixture_path),
        args.query.clone(),
        model_name.to_string(),
        now,
        approvals,
        tape.exchanges(),
        trace,
    )
}

/// The answer (or the trace with `--json`) on stdout, why a run did not succeed on stderr, and
/// the exit code.
fn show_outcome(
    args: &RunArgs,
    trace: &Trace,
    pretty: &str,
    redactor: &Redactor,
    signals: &Signals,
    live_text: Option<&super::live_text::LiveText>,
) -> i32 {
    if args.json {
        print!("{pretty}");
    } else if let Some(answer) = &trace.final_output {
        let answer = redactor.str(answer);
        if !live_text.is_some_and(|l| l.finish(&answer)) {
            println!("{}", crate::term::visible(&answer));
        }
    } else if let Some(l) = live_text {
        l.finish("");
    }
    if trace.status != Status::Ok {
        let why = trace.error.as_deref().unwrap_or("");
        eprintln!(
            "toolrun: run {} ({}): {}",
            trace.status.as_str(),
            trace.stop_reason,
            crate::term::visible(&redactor.str(why))
        );
    }
    if trace.stop_reason == StopReason::Interrupted {
        return signals.exit_code();
    }
    trace.status.exit_code()
}
