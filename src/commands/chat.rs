//! `toolrun chat`: a conversation with a spec's model, one user turn per line (issue 33 §2).
//! On a terminal: a prompt, the answer streamed as it comes, each tool call and its result,
//! confirmations asked inline as `run` asks them, and Ctrl-C ending the answer, not the
//! session. Without a terminal the turns are read from stdin and each answer printed on its
//! own line, so a session can be scripted. Ctrl-D (end of input) ends the session.

use crate::cli::ChatArgs;
use crate::engine::Conversation;
use crate::exit;
use crate::redact::Redactor;
use crate::setup::{Inputs, Interrupt, ModelChoice, Network, Output, Setup, Signals};
use crate::trace::{Status, StopReason, TurnTrace};
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

pub(crate) fn run(args: ChatArgs) -> i32 {
    match chat(&args) {
        Ok(code) | Err(code) => code,
    }
}

fn chat(args: &ChatArgs) -> Result<i32, i32> {
    let rt = crate::setup::runtime();
    let signals = Signals::watch(&rt);
    let Opened {
        registry,
        resumed,
        live,
        mut setup,
    } = open(args, &signals)?;
    let Some(mut model) = setup.model.take() else {
        return Err(exit::USAGE);
    };
    let redactor = setup.redactor.clone();
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let live_text = Arc::get_mut(&mut setup.events).and_then(|events| {
        let on_terminal = std::io::stdout().is_terminal();
        super::live_text::LiveText::attach(events, &registry, &model.name, on_terminal)
    });
    let approved = Arc::new(Mutex::new(Vec::<String>::new()));
    let confirm =
        super::prompt::terminal_prompt(redactor.clone(), approved.clone(), signals.stop.clone());
    // The session's turns share one clock reading, as the replay of its recording will.
    let now = setup.clock.now_unix_ms();
    if terminal {
        eprintln!(
            "toolrun chat with `{}` ({}): one message per line; Ctrl-C stops an answer, Ctrl-D ends",
            crate::term::visible_line(&model.name),
            crate::term::visible_line(&registry.name)
        );
    }
    let engine = setup.engine(&registry);
    let mut conversation = match resumed {
        Some(trace) => Conversation::resume(trace, &model.client),
        None => Conversation::new(&model.client),
    };
    // Turns a `/save` (or the trace resumed) already holds: no question at the end for them.
    let mut turns_saved = conversation.turns().len();
    let resumed_turns = turns_saved;
    let session = || super::chat_save::Session {
        registry: &registry,
        spec: &args.spec,
        model: &model.name,
        // What reached a live model or server: a scripted session of mocks replays itself.
        tape: (setup.tape.as_deref()).filter(|t| live || t.recorded_any()),
        redactor: &redactor,
        now,
        approvals: approvals(args, &approved),
        resumed: resumed_turns,
    };
    let save = |name: &str, conversation: &Conversation| {
        let trace = engine.conversation_trace(conversation, &model.name);
        super::chat_save::save_and_say(&session(), name, conversation.turns(), trace.as_ref());
    };
    // The session's exit code at its end: its worst turn's (see `worse`).
    let mut worst = exit::SUCCESS;
    let code = loop {
        let line = match next_line(terminal, &signals) {
            Ok(line) => line,
            Err(end) => break end,
        };
        let query = line.trim();
        if query.is_empty() {
            continue;
        }
        if let Some(name) = query.strip_prefix("/save") {
            save(name.trim(), &conversation);
            turns_saved = conversation.turns().len();
            continue;
        }
        let mut opts = setup.run_options(query, &model.name);
        opts.now_unix_ms = now;
        if terminal {
            opts.confirmer = Some(&confirm);
        }
        let done = rt.block_on(engine.turn(&mut conversation, &mut model.client, &opts));
        show_turn(done, &redactor, live_text.as_ref(), terminal);
        worst = worse(worst, done);
        if done.stop_reason == StopReason::Interrupted {
            if signals.take_ctrl_c() {
                continue;
            }
            break signals.exit_code();
        }
    };
    if terminal {
        eprintln!();
        if code == exit::SUCCESS && conversation.turns().len() > turns_saved {
            if let Some(name) = ask_for_a_name(args, &signals) {
                save(&name, &conversation);
            }
        }
    }
    rt.block_on(engine.end_conversation(&setup.run_options("", &model.name)));
    let trace = engine.conversation_trace(&conversation, &model.name);
    if let Some(path) = &args.trace {
        write_trace(path, trace.as_ref(), &redactor)?;
    }
    if let (Some(path), Some(tape), Some(trace)) = (&args.record, &setup.tape, &trace) {
        let fixture = super::chat_save::recording(&session(), path, tape, trace);
        crate::fixture::write_fixture(path, &fixture, &redactor).map_err(|e| {
            eprintln!("error: {e}");
            exit::FAILED
        })?;
    }
    // A signal's code says how the session ended; an end of input, how its turns went.
    Ok(if code == exit::SUCCESS { worst } else { code })
}

/// What a session starts from: its spec, the trace it resumes, whether its model is live.
struct Opened {
    registry: crate::registry::Registry,
    resumed: Option<crate::trace::Trace>,
    live: bool,
    setup: Setup,
}

fn open(args: &ChatArgs, signals: &Signals) -> Result<Opened, i32> {
    let registry = super::load_registry(&args.spec)?;
    let resumed = match &args.resume {
        Some(path) => Some(read_trace(path)?),
        None => None,
    };
    let chosen = args
        .model
        .as_deref()
        .or(resumed.as_ref().map(|t| t.model.as_str()));
    // A live model's test replays its session; a scripted model's runs the model again.
    let live = crate::setup::model_name(&registry, chosen)
        .is_ok_and(|m| super::test_suite::runner::live_endpoint(&registry, &m).is_some());
    let mut inputs = inputs(args)?;
    // The first turn is not known yet: each turn chooses a scripted model's script.
    inputs.model = Some(ModelChoice {
        name: chosen,
        query: None,
    });
    inputs.interrupt = Some(signals.stop.clone());
    let setup = Setup::open(&registry, inputs).map_err(|e| {
        eprintln!("error: {e}");
        exit::USAGE
    })?;
    Ok(Opened {
        registry,
        resumed,
        live,
        setup,
    })
}

/// The exit code of a session so far (`code`) after `turn`, as `run` would exit for that turn
/// alone: a failed turn (1) outranks one that stopped for a person (3). A turn Ctrl-C stopped
/// is the person's own doing, like Ctrl-C at the prompt, and counts as none; tool errors the
/// model answered after are an answer.
fn worse(code: i32, turn: &TurnTrace) -> i32 {
    if turn.stop_reason == StopReason::Interrupted || code == exit::FAILED {
        return code;
    }
    match turn.status.exit_code() {
        exit::SUCCESS => code,
        other => other,
    }
}

/// The flags' setup, and the files the session writes: `--trace`, and `--record` (new only).
fn inputs(args: &ChatArgs) -> Result<Inputs<'_>, i32> {
    let mut inputs = Inputs::from_flags(&args.setup);
    if let Some(path) = &args.trace {
        inputs.outputs.push(Output::file(path, "--trace"));
    }
    if let Some(path) = &args.record {
        if path.exists() {
            eprintln!(
                "error: fixture `{}` already exists; record the chat to a new path",
                crate::term::visible_line(&path.display().to_string())
            );
            return Err(exit::USAGE);
        }
        inputs
            .outputs
            .push(Output::in_new_folders(path, "--record"));
    }
    // Every session is recorded as it goes, so that `/save` can make a test of it that
    // replays offline what a live model, HTTP tool or MCP server answered.
    inputs.network = Network::Record { previous: None };
    Ok(inputs)
}

/// The tools approved for the session: those of `--approve` and those given at the prompts.
fn approvals(args: &ChatArgs, approved: &Mutex<Vec<String>>) -> Vec<String> {
    let mut approvals = args.setup.approve.clone();
    if let Ok(log) = approved.lock() {
        approvals.extend(log.iter().cloned());
    }
    approvals
}

/// The turn's tool calls and their results (on a terminal), its answer on stdout unless it was
/// streamed there already, and why it did not succeed on stderr.
fn show_turn(
    turn: &TurnTrace,
    redactor: &Redactor,
    live_text: Option<&super::live_text::LiveText>,
    terminal: bool,
) {
    if terminal {
        for r in &turn.tool_results {
            let outcome = match (&r.result, &r.error) {
                (Some(v), _) => v.to_string(),
                (None, Some(e)) => format!("error: {}", e.message),
                (None, None) => r.status.as_str().to_string(),
            };
            eprintln!(
                "  · {}({}) → {}",
                crate::term::visible_line(&r.name),
                crate::term::visible_line(&redactor.str(&r.arguments.to_string())),
                crate::term::visible_line(&redactor.str(&outcome))
            );
        }
    }
    match &turn.final_output {
        Some(answer) => {
            let answer = redactor.str(answer);
            if !live_text.is_some_and(|l| l.finish(&answer)) {
                println!("{}", crate::term::visible(&answer));
            }
        }
        None => {
            if let Some(l) = live_text {
                l.finish("");
            }
        }
    }
    let _ = std::io::stdout().flush();
    if turn.status != Status::Ok {
        let why = turn.error.as_deref().unwrap_or("");
        eprintln!(
            "toolrun: turn {} ({}): {}",
            turn.status.as_str(),
            turn.stop_reason,
            crate::term::visible(&redactor.str(why))
        );
    }
}

fn write_trace(
    path: &std::path::Path,
    trace: Option<&crate::trace::Trace>,
    redactor: &Redactor,
) -> Result<(), i32> {
    let Some(trace) = trace else {
        eprintln!(
            "toolrun: no turn was taken; no trace written to `{}`",
            crate::term::visible_line(&path.display().to_string())
        );
        return Ok(());
    };
    // Fail closed, as `run` does: a secret masking missed stops the trace.
    let pretty = redactor.to_pretty_from(trace).map_err(|leak| {
        eprintln!(
            "error: refusing to write the trace: {leak} even after masking; nothing was written"
        );
        exit::FAILED
    })?;
    crate::files::write_atomically(path, pretty.as_bytes()).map_err(|e| {
        eprintln!(
            "error: cannot write the trace to `{}`: {e}",
            crate::term::visible_line(&path.display().to_string())
        );
        exit::FAILED
    })
}

/// The next line of stdin without its newline; `Ok(None)` at the end of input, `Err` when a
/// signal came first. Read a byte at a time from the descriptor, not through std's buffer: a
/// buffered line would be invisible to the wait, and a confirmation reads the next line itself.
#[cfg(unix)]
fn read_line_unless(stop: &Interrupt) -> Result<Option<String>, ()> {
    let mut line = Vec::new();
    loop {
        if !super::prompt::stdin_ready_unless(stop) {
            return Err(());
        }
        let mut byte = 0u8;
        // SAFETY: one byte into a valid, writable byte.
        let n = unsafe { libc::read(0, (&mut byte as *mut u8).cast(), 1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if n == 0 {
            break;
        }
        if byte == b'\n' {
            return Ok(Some(String::from_utf8_lossy(&line).into_owned()));
        }
        line.push(byte);
    }
    Ok((!line.is_empty()).then(|| String::from_utf8_lossy(&line).into_owned()))
}

#[cfg(not(unix))]
fn read_line_unless(_: &Interrupt) -> Result<Option<String>, ()> {
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(0) | Err(_) => Ok(None),
        Ok(_) => Ok(Some(line.trim_end_matches(['\r', '\n']).to_string())),
    }
}

/// The trace `--resume` continues: a conversation's (`chat --trace`) or a single run's.
fn read_trace(path: &std::path::Path) -> Result<crate::trace::Trace, i32> {
    let shown = crate::term::visible_line(&path.display().to_string()).to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        eprintln!("error: cannot read the trace `{shown}`: {e}");
        exit::USAGE
    })?;
    serde_json::from_str(&text).map_err(|e| {
        eprintln!("error: `{shown}` is not a toolrun trace: {e}");
        exit::USAGE
    })
}

/// The next line the person typed, after a prompt on a terminal; `Err(exit code)` when the
/// session ends (end of input: 0; SIGTERM: 143). Ctrl-C at the prompt only clears the line.
fn next_line(terminal: bool, signals: &Signals) -> Result<String, i32> {
    loop {
        if terminal {
            eprint!("> ");
            let _ = std::io::stderr().flush();
        }
        match read_line_unless(&signals.stop) {
            Ok(Some(line)) => return Ok(line),
            Ok(None) => return Err(exit::SUCCESS),
            Err(()) if signals.take_ctrl_c() => eprintln!(),
            Err(()) => return Err(signals.exit_code()),
        }
    }
}

/// At the end of a session on a terminal with turns not yet saved: asks for a test name to
/// save the conversation under (Enter, Ctrl-D or Ctrl-C: not saved).
fn ask_for_a_name(args: &ChatArgs, signals: &Signals) -> Option<String> {
    eprint!(
        "Save this conversation as a test in `{}`? Its name (Enter: don't save): ",
        crate::term::visible_line(&args.spec.display().to_string())
    );
    let _ = std::io::stderr().flush();
    match read_line_unless(&signals.stop) {
        Ok(Some(name)) if !name.trim().is_empty() => Some(name.trim().to_string()),
        _ => {
            eprintln!();
            None
        }
    }
}
