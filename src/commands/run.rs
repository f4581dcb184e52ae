//! `toolrun run`: one run of the loop; the answer on stdout, the trace where asked.

use crate::cli::{RecordMode, RunArgs};
use crate::engine::{Engine, RunOptions};
use crate::events::Events;
use crate::exit;
use crate::fixture::{Fixture, FixtureSpec, Tape};
use crate::net::Transport;
use crate::trace::{Status, StopReason};
use std::io::{IsTerminal, Write};

pub fn run(args: RunArgs) -> i32 {
    let registry = match super::load_registry(&args.spec) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let now = match crate::session::now_unix_ms(args.now.as_deref()) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let mut prepared = match crate::session::prepare(&registry, args.model.as_deref(), &args.query)
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    for tool in &args.approve {
        if registry.tool(tool).is_none() {
            let hint = crate::diag::did_you_mean(tool, registry.tool_names()).unwrap_or_default();
            eprintln!("error: --approve names `{tool}`, which is not a tool of this spec {hint}");
            return exit::USAGE;
        }
    }
    let redactor = prepared.secrets.redactor();
    let events = match &args.events {
        None => Events::none(),
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Events::to_writer(Box::new(std::io::BufWriter::new(f)), redactor.clone()),
            Err(e) => {
                eprintln!("error: cannot write events to `{}`: {e}", path.display());
                return exit::USAGE;
            }
        },
    };
    let mut recorder: Option<std::sync::Arc<Tape>> = None;
    if let Some(path) = &args.record {
        let tape_redactor = redactor.clone();
        let tape = match (args.record_mode, path.exists()) {
            (RecordMode::Once, true) => {
                eprintln!("error: fixture `{}` already exists; pass --record-mode all to re-record it or --record-mode new to add to it", path.display());
                return exit::USAGE;
            }
            (RecordMode::New, true) => match crate::replay::load_fixture(path) {
                Ok(previous) => Tape::recording_new(
                    previous.exchanges,
                    registry.replay_ignore.clone(),
                    tape_redactor,
                ),
                Err(e) => {
                    eprintln!("error: {e}");
                    return exit::USAGE;
                }
            },
            _ => Tape::recording(tape_redactor),
        };
        recorder = Some(std::sync::Arc::new(tape));
    }
    let transport = match &recorder {
        Some(tape) => Transport::with_tape(tape.clone()),
        None => Transport::live(),
    };
    let engine = Engine {
        registry: &registry,
        transport: &transport,
        events: &events,
        secrets: &prepared.secrets,
        redactor: redactor.clone(),
    };
    let prompt_redactor = redactor.clone();
    let approved_interactively = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let approved_log = approved_interactively.clone();
    let confirm_prompt = move |name: &str, arguments: &serde_json::Value| -> bool {
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "toolrun: `{}` has side effects. Run it with {}? [y/N] ",
            crate::term::visible_line(name),
            crate::term::visible_line(&prompt_redactor.str(&arguments.to_string()))
        );
        let _ = err.flush();
        let mut answer = String::new();
        let yes = std::io::stdin().read_line(&mut answer).is_ok()
            && matches!(answer.trim(), "y" | "Y" | "yes" | "Yes");
        if yes {
            if let Ok(mut log) = approved_log.lock() {
                log.push(name.to_string());
            }
        }
        yes
    };
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let rt = crate::session::runtime();
    let (interrupted, sigint) = crate::session::watch_signals(&rt);
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
    let doc = trace.to_json(&redactor);
    // Fail closed: a secret that masking missed stops the trace, the fixture and `--json` alike.
    let pretty = match redactor.to_pretty(&doc) {
        Ok(text) => text,
        Err(leak) => {
            eprintln!("error: refusing to write the trace: {leak} even after masking; nothing was written");
            return exit::FAILED;
        }
    };
    if let Some(path) = &args.trace {
        if let Err(e) = crate::files::write_atomically(path, pretty.as_bytes()) {
            eprintln!("error: cannot write the trace to `{}`: {e}", path.display());
            return exit::FAILED;
        }
    }
    if let (Some(path), Some(tape)) = (&args.record, &recorder) {
        let mut approvals: Vec<String> = args.approve.clone();
        if let Ok(log) = approved_interactively.lock() {
            approvals.extend(log.iter().cloned());
        }
        approvals.sort();
        approvals.dedup();
        let fixture_dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        let fixture = Fixture {
            format_version: crate::fixture::FORMAT_VERSION,
            toolrun_version: env!("CARGO_PKG_VERSION").to_string(),
            spec: FixtureSpec {
                name: registry.name.clone(),
                sha256: registry.spec_sha256.clone(),
                path: crate::replay::relative_path(fixture_dir, &args.spec)
                    .to_string_lossy()
                    .replace('\\', "/"),
            },
            query: args.query.clone(),
            model: prepared.model_name.clone(),
            now_unix_ms: now,
            approvals,
            exchanges: tape.exchanges(),
            trace: doc.clone(),
        };
        if let Err(e) = crate::replay::write_fixture(path, &fixture, &redactor) {
            eprintln!("error: {e}");
            return exit::FAILED;
        }
    }
    if args.json {
        print!("{pretty}");
    } else if let Some(answer) = &trace.final_output {
        println!("{}", crate::term::visible(&redactor.str(answer)));
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
