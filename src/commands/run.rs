//! `toolrun run`: one run of the loop; the answer on stdout, the trace where asked.

use crate::cli::{RecordMode, RunArgs};
use crate::engine::{Engine, RunOptions};
use crate::events::Events;
use crate::exit;
use crate::fixture::{Fixture, Tape};
use crate::net::Transport;
use crate::redact::Redactor;
use crate::registry::Registry;
use crate::trace::{Status, StopReason, Trace};
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

pub(crate) fn run(args: RunArgs) -> i32 {
    match run_steps(&args) {
        Ok(code) | Err(code) => code,
    }
}

/// Each step either hands its result on or ends the command with an exit code.
fn run_steps(args: &RunArgs) -> Result<i32, i32> {
    let registry = super::load_registry(&args.spec)?;
    check_destinations(args)?;
    let now = crate::builtins::datetime::now_unix_ms(args.now.as_deref()).map_err(usage)?;
    let mut prepared =
        crate::session::prepare(&registry, args.model.as_deref(), &args.query).map_err(usage)?;
    check_approvals(&registry, args)?;
    let redactor = prepared.secrets.redactor();
    let mut events = open_events(args, &redactor)?;
    let live_text = super::live_text::LiveText::attach(
        &mut events,
        &registry,
        &prepared.model_name,
        !args.json && std::io::stdout().is_terminal(),
    );
    let recorder = open_recorder(args, &registry, &redactor)?;
    let transport = match &recorder {
        Some(tape) => Transport::with_tape(tape.clone()),
        None => Transport::live(),
    }
    .allow_exec(&args.allow_exec);
    let engine = Engine {
        registry: &registry,
        transport: &transport,
        events: &events,
        secrets: &prepared.secrets,
        redactor: redactor.clone(),
    };
    let approved_interactively = Arc::new(Mutex::new(Vec::<String>::new()));
    let confirm_prompt = terminal_prompt(redactor.clone(), approved_interactively.clone());
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let rt = crate::session::runtime();
    let (interrupted, sigint) = crate::setup::watch_signals(&rt);
    let opts = RunOptions {
        faults: Vec::new(),
        query: &args.query,
        model_name: &prepared.model_name,
        approvals: args.approve.iter().cloned().collect(),
        confirmer: if interactive {
            Some(&confirm_prompt)
        } else {
            None
        },
        now_unix_ms: now,
        interrupted: Some(interrupted),
    };
    let trace = rt.block_on(engine.run(&mut prepared.model, opts));
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
    if let (Some(path), Some(tape), Some(doc)) = (&args.record, &recorder, fixture_doc) {
        let mut approvals: Vec<String> = args.approve.clone();
        if let Ok(log) = approved_interactively.lock() {
            approvals.extend(log.iter().cloned());
        }
        let fixture = build_fixture(
            args,
            &registry,
            &prepared.model_name,
            now,
            approvals,
            tape,
            doc,
        );
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
        &sigint,
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

fn check_approvals(registry: &Registry, args: &RunArgs) -> Result<(), i32> {
    for tool in &args.approve {
        if registry.tool(tool).is_none() {
            let hint = crate::diag::did_you_mean(tool, registry.tool_names()).unwrap_or_default();
            eprintln!("error: --approve names `{tool}`, which is not a tool of this spec {hint}");
            return Err(exit::USAGE);
        }
    }
    Ok(())
}

/// Every file the run will write is checked before the loop starts (exit 2).
fn check_destinations(args: &RunArgs) -> Result<(), i32> {
    let outputs = [
        (&args.trace, "--trace", false),
        (&args.events, "--events", false),
        (&args.record, "--record", true),
    ];
    for (path, flag, creates_folders) in outputs {
        if let Some(path) = path {
            crate::files::check_destination(path, flag, creates_folders).map_err(usage)?;
        }
    }
    Ok(())
}

fn open_events(args: &RunArgs, redactor: &Redactor) -> Result<Events, i32> {
    let Some(path) = &args.events else {
        return Ok(Events::none());
    };
    match crate::files::create_stream(path) {
        Ok(f) => Ok(Events::to_writer(
            Box::new(std::io::BufWriter::new(f)),
            redactor.clone(),
        )),
        Err(e) => {
            eprintln!("error: cannot write events to `{}`: {e}", path.display());
            Err(exit::USAGE)
        }
    }
}

/// The tape `--record` fills: new, or (`--record-mode new`) the existing fixture's exchanges
/// first.
fn open_recorder(
    args: &RunArgs,
    registry: &Registry,
    redactor: &Redactor,
) -> Result<Option<Arc<Tape>>, i32> {
    let Some(path) = &args.record else {
        return Ok(None);
    };
    let tape = match (args.record_mode, path.exists()) {
        (RecordMode::Once, true) => {
            eprintln!("error: fixture `{}` already exists; pass --record-mode all to re-record it or --record-mode new to add to it", path.display());
            return Err(exit::USAGE);
        }
        (RecordMode::New, true) => {
            let previous = crate::fixture::load_fixture(path).map_err(usage)?;
            Tape::recording_new(
                previous.exchanges,
                registry.replay_ignore.clone(),
                redactor.clone(),
            )
        }
        _ => Tape::recording(redactor.clone()),
    };
    Ok(Some(Arc::new(tape)))
}

/// Asks on the terminal before a tool with side effects runs; every yes is logged so a
/// recording can replay the approval.
fn terminal_prompt(
    redactor: Redactor,
    approved: Arc<Mutex<Vec<String>>>,
) -> impl Fn(&str, &serde_json::Value) -> bool + Send + Sync {
    move |name: &str, arguments: &serde_json::Value| -> bool {
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "toolrun: `{}` has side effects. Run it with {}? [y/N] ",
            crate::term::visible_line(name),
            crate::term::visible_line(&redactor.str(&arguments.to_string()))
        );
        let _ = err.flush();
        let mut answer = String::new();
        let yes = std::io::stdin().read_line(&mut answer).is_ok()
            && matches!(answer.trim(), "y" | "Y" | "yes" | "Yes");
        if yes {
            if let Ok(mut log) = approved.lock() {
                log.push(name.to_string());
            }
        }
        yes
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
    sigint: &crate::setup::Interrupt,
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
        return if sigint.load(std::sync::atomic::Ordering::SeqCst) {
            exit::INTERRUPTED
        } else {
            exit::TERMINATED
        };
    }
    trace.status.exit_code()
}
