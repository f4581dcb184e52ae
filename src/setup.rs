//! One setup for every command that runs tools. `run`, `call`, `serve`, `test`, `replay` and a
//! replayed MCP session do not build their engine by hand: each says what it wants in an
//! [`Inputs`], and [`Setup::open`] decides it, in one order, with one wording for each problem:
//! output destinations (checked before any work), the clock (`--now`), `--approve` (with a
//! did-you-mean), secrets (from the environment, masked offline, or the replay placeholders),
//! the model, the `--events` stream (through the symlink-safe writer), and tape or live. The
//! engine and its options are then built from the [`Setup`] only, and Ctrl-C is watched here.
//!
//! A new command-wide option (an exporter, a list of allowed programs, a grader model) is a
//! field of [`SetupArgs`] (flattened into every command that runs tools), carried by
//! [`Inputs::from_flags`] and applied in [`Setup::open`]: written once, it reaches them all.
//! Problems here are the user's set-up (exit 2), found before any request is made.

use crate::engine::{CallOptions, Engine, RunOptions};
use crate::events::Events;
use crate::fixture::{Exchange, Tape};
use crate::models::ModelClient;
use crate::net::Transport;
use crate::redact::{Redactor, Secrets, MASK};
use crate::registry::{ModelKind, Registry};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Set by Ctrl-C or SIGTERM; the engine watches it, so the trace of the run in progress is
/// still written.
pub(crate) type Interrupt = Arc<AtomicBool>;

// The flags every command that runs tools takes (`run`, `call`, `serve`, `test`). Not a doc
// comment: clap would take it for the help's opening line of every command that flattens it.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct SetupArgs {
    /// Approve a tool that needs confirmation (repeatable)
    #[arg(long, value_name = "TOOL")]
    pub(crate) approve: Vec<String>,
    /// Write a JSON Lines event stream here as things happen
    #[arg(long, value_name = "PATH")]
    pub(crate) events: Option<PathBuf>,
    /// Fix the clock for built-ins (RFC 3339), for reproducible runs; a test's own `now:` wins
    #[arg(long, value_name = "TIME")]
    pub(crate) now: Option<String>,
    #[command(flatten)]
    pub(crate) exec: ExecArgs,
    #[command(flatten)]
    pub(crate) otlp: OtlpArgs,
}

// What stdio MCP servers may start: nothing unless the command line says so (not a doc
// comment: clap would open the help of every command that flattens it with it).
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct ExecArgs {
    /// Let a stdio MCP server's program start, with any arguments (repeatable): a name looked
    /// up on PATH or a path, matching the file the spec's `command:` runs. A launcher (npx,
    /// uvx, node, python) allowed this way runs any code its arguments name
    #[arg(long = "allow-exec", value_name = "PROGRAM")]
    pub(crate) allow_exec: Vec<String>,
    /// Let exactly this command line start (repeatable): the program as for --allow-exec, and
    /// every argument as the spec's `command:` writes it, e.g. 'npx -y pkg@1.2.3 ./data'
    #[arg(long = "allow-command", value_name = "LINE")]
    pub(crate) allow_command: Vec<String>,
    /// Let a stdio MCP server's `env:` set this variable although it chooses what code runs
    /// (LD_PRELOAD, NODE_OPTIONS, PATH, PYTHONPATH, ...; repeatable)
    #[arg(long = "allow-env", value_name = "NAME")]
    pub(crate) allow_env: Vec<String>,
}

/// Nothing allowed: a replay's or an offline test's.
static NO_EXEC: ExecArgs = ExecArgs {
    allow_exec: Vec::new(),
    allow_command: Vec::new(),
    allow_env: Vec::new(),
};

impl ExecArgs {
    /// The rules the transport applies; a command line that cannot be read is a usage error.
    fn rules(&self) -> Result<crate::net::ExecRules, String> {
        let commands = self
            .allow_command
            .iter()
            .map(|line| {
                crate::tools::mcp::allow::split_command_line(line)
                    .map_err(|e| format!("--allow-command `{line}`: {e}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(crate::net::ExecRules {
            programs: self.allow_exec.clone(),
            commands,
            env: self.allow_env.clone(),
        })
    }
}

// OpenTelemetry export, on every command that runs something (not a doc comment, as above).
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct OtlpArgs {
    /// Send OpenTelemetry traces (OTLP over HTTP) to this collector, e.g.
    /// http://127.0.0.1:4318 (default: OTEL_EXPORTER_OTLP_ENDPOINT, if set)
    #[arg(long, value_name = "URL")]
    pub(crate) otlp: Option<String>,
    /// Include messages, tool arguments and results in the spans (masked), as
    /// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true does
    #[arg(long)]
    pub(crate) otlp_content: bool,
}

/// Where a run's secrets come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SecretSource {
    /// The environment: a declared secret that is not set is a usage error.
    Environment,
    /// Every declared secret is the mask, whatever the environment holds. Offline tests use
    /// scripted models and fixtures: they need no credentials, and a real one could only leak.
    Masked,
    /// Every secret and the model's API key is the mask: recorded requests hold only the mask,
    /// so a replay that sends it sends exactly what was recorded, and no real key is needed.
    Placeholders,
}

/// Where a run's requests go: tape or live, chosen here and nowhere else.
pub(crate) enum Network {
    Live,
    /// Live, every exchange recorded on the tape (after `previous`: `--record-mode new`).
    Record {
        previous: Option<Vec<Exchange>>,
    },
    /// Every request answered from the recording; the network is never touched.
    Replay(Vec<Exchange>),
    /// Every request refused before it leaves the process, and remembered so the failure can
    /// name it (offline tests).
    Offline,
}

/// Where the `--events` stream goes.
pub(crate) enum EventsTo<'a> {
    Nowhere,
    /// A file, opened (after its destination is checked) with this run's masking.
    File(&'a Path),
    /// A stream already open, shared by many runs (`test`'s cases).
    Shared(Arc<Events>),
}

/// The built-ins' clock.
#[derive(Clone, Debug)]
pub(crate) enum Clock {
    /// `--now` as given, else `TOOLRUN_NOW` (looked up once, in [`Clock::given`]), else `None`:
    /// the system clock. Checked once and read at each use: a server's calls each see their
    /// own time.
    Given(Option<String>),
    /// A recorded or declared instant (a fixture's, a test's `now:`).
    At(i64),
}

impl Clock {
    /// `--now` (or `TOOLRUN_NOW`), not checked yet: [`Setup::open`] checks it.
    pub(crate) fn given(now: Option<&str>) -> Clock {
        Clock::Given(crate::builtins::datetime::fixed_clock(now))
    }

    pub(crate) fn parse(now: Option<&str>) -> Result<Clock, String> {
        let clock = Clock::given(now);
        clock.check()?;
        Ok(clock)
    }

    fn check(&self) -> Result<(), String> {
        match self {
            Clock::At(_) => Ok(()),
            Clock::Given(text) => {
                crate::builtins::datetime::now_unix_ms_given(text.as_deref()).map(|_| ())
            }
        }
    }

    pub(crate) fn now_unix_ms(&self) -> i64 {
        match self {
            Clock::At(ms) => *ms,
            // Checked when parsed: only the system clock can change.
            Clock::Given(text) => {
                crate::builtins::datetime::now_unix_ms_given(text.as_deref()).unwrap_or_default()
            }
        }
    }
}

/// A file the command will write, checked before any work is done.
pub(crate) struct Output<'a> {
    pub(crate) path: &'a Path,
    pub(crate) flag: &'static str,
    /// `--record` creates the folders it needs; the other outputs need theirs to exist.
    pub(crate) creates_folders: bool,
}

impl<'a> Output<'a> {
    pub(crate) fn file(path: &'a Path, flag: &'static str) -> Output<'a> {
        Output {
            path,
            flag,
            creates_folders: false,
        }
    }
    pub(crate) fn in_new_folders(path: &'a Path, flag: &'static str) -> Output<'a> {
        Output {
            path,
            flag,
            creates_folders: true,
        }
    }
}

/// The model a run asks for: by name (`None`: the spec's default) and the query it answers
/// (`None`: a conversation's, whose turns come later and each choose a script then).
pub(crate) struct ModelChoice<'a> {
    pub(crate) name: Option<&'a str>,
    pub(crate) query: Option<&'a str>,
}

/// What a command asks of the setup.
pub(crate) struct Inputs<'a> {
    pub(crate) approve: &'a [String],
    /// `approve` was typed (`--approve`) and is checked against the spec; a fixture's or a test
    /// case's approvals are what was recorded or declared.
    pub(crate) approve_typed: bool,
    pub(crate) clock: Clock,
    pub(crate) events: EventsTo<'a>,
    /// Files the command writes besides `--events` (`--trace`, `--record`, `--results`, ...).
    pub(crate) outputs: Vec<Output<'a>>,
    pub(crate) secrets: SecretSource,
    pub(crate) network: Network,
    /// `None` for commands that call tools directly (`call`, `serve`).
    pub(crate) model: Option<ModelChoice<'a>>,
    pub(crate) interrupt: Option<Interrupt>,
    /// `--allow-exec`, `--allow-command`, `--allow-env`: what stdio MCP servers may start.
    pub(crate) exec: &'a ExecArgs,
}

impl<'a> Inputs<'a> {
    /// The command-wide flags as given; the rest as for a live run without a model.
    pub(crate) fn from_flags(flags: &'a SetupArgs) -> Inputs<'a> {
        Inputs {
            approve: &flags.approve,
            approve_typed: true,
            clock: Clock::given(flags.now.as_deref()),
            events: match &flags.events {
                Some(path) => EventsTo::File(path),
                None => EventsTo::Nowhere,
            },
            outputs: Vec::new(),
            secrets: SecretSource::Environment,
            network: Network::Live,
            model: None,
            interrupt: None,
            exec: &flags.exec,
        }
    }

    /// Nothing from the command line: a replay's or a test's own settings fill it in.
    pub(crate) fn quiet(approve: &'a [String], clock: Clock) -> Inputs<'a> {
        Inputs {
            approve,
            approve_typed: false,
            clock,
            events: EventsTo::Nowhere,
            outputs: Vec::new(),
            secrets: SecretSource::Placeholders,
            network: Network::Offline,
            model: None,
            interrupt: None,
            exec: &NO_EXEC,
        }
    }
}

/// The model a run was set up with.
pub(crate) struct Model {
    pub(crate) client: ModelClient,
    pub(crate) name: String,
}

/// Everything an engine is built from, decided once.
pub(crate) struct Setup {
    pub(crate) secrets: Secrets,
    pub(crate) redactor: Redactor,
    pub(crate) approvals: BTreeSet<String>,
    pub(crate) clock: Clock,
    pub(crate) events: Arc<Events>,
    /// The tape behind the transport, when the run records, replays or is offline.
    pub(crate) tape: Option<Arc<Tape>>,
    pub(crate) transport: Transport,
    pub(crate) interrupt: Option<Interrupt>,
    /// Taken by the caller to run the loop (the engine borrows the rest meanwhile).
    pub(crate) model: Option<Model>,
}

impl Setup {
    pub(crate) fn open(registry: &Registry, inputs: Inputs<'_>) -> Result<Setup, String> {
        if let EventsTo::File(path) = inputs.events {
            crate::files::check_destination(path, "--events", false)?;
        }
        for o in &inputs.outputs {
            crate::files::check_destination(o.path, o.flag, o.creates_folders)?;
        }
        inputs.clock.check()?;
        let exec = inputs.exec.rules()?;
        let approvals = if inputs.approve_typed {
            approvals(&[registry], inputs.approve)?
        } else {
            inputs.approve.iter().cloned().collect()
        };
        let model_name = match &inputs.model {
            Some(choice) => Some(model_name(registry, choice.name)?),
            None => None,
        };
        let mut secrets = secrets(registry, inputs.secrets, model_name.as_deref())?;
        let set = (inputs.secrets == SecretSource::Placeholders)
            .then(|| set_secrets(registry, model_name.as_deref()));
        let model = match (&inputs.model, model_name) {
            (Some(choice), Some(name)) => {
                let def = registry
                    .model(&name)
                    .ok_or_else(|| format!("no model `{name}`"))?;
                let client = match choice.query {
                    Some(query) => ModelClient::new(def, query, &mut secrets)?,
                    None => ModelClient::for_conversation(def, &mut secrets)?,
                };
                Some(Model { client, name })
            }
            _ => None,
        };
        warn_short_secrets(&secrets);
        let mut redactor = secrets.redactor();
        if let Some(set) = &set {
            redactor.merge(set);
        }
        let events = match inputs.events {
            EventsTo::Nowhere => Arc::new(Events::none()),
            EventsTo::File(path) => Arc::new(open_events(path, &redactor)?),
            EventsTo::Shared(events) => events,
        };
        // An exported run keeps its exchanges (masked, as a recording would) for the MCP CLIENT
        // spans of its `kind: mcp` calls; nothing is kept otherwise.
        let keep_mcp = inputs.model.is_some() && crate::telemetry::mcp::wants_exchanges(registry);
        let tape = match inputs.network {
            Network::Live if keep_mcp => Some(Tape::recording(redactor.clone())),
            Network::Live => None,
            Network::Record { previous: None } => Some(Tape::recording(redactor.clone())),
            Network::Record {
                previous: Some(previous),
            } => Some(Tape::recording_new(
                previous,
                registry.replay_ignore.clone(),
                redactor.clone(),
            )),
            Network::Replay(exchanges) => Some(Tape::replaying(
                exchanges,
                registry.replay_ignore.clone(),
                redactor.clone(),
            )),
            Network::Offline => Some(Tape::offline()),
        }
        .map(Arc::new);
        let transport = match &tape {
            Some(t) => Transport::with_tape(t.clone()),
            None => Transport::live(),
        }
        .allow_exec(exec);
        Ok(Setup {
            secrets,
            redactor,
            approvals,
            clock: inputs.clock,
            events,
            tape,
            transport,
            interrupt: inputs.interrupt,
            model,
        })
    }

    /// The engine over `registry`, with this setup's network, events and secrets.
    pub(crate) fn engine<'a>(&'a self, registry: &'a Registry) -> Engine<'a> {
        Engine {
            registry,
            transport: &self.transport,
            events: &self.events,
            secrets: &self.secrets,
            redactor: self.redactor.clone(),
        }
    }

    /// A run's options: this setup's approvals, clock and interrupt; no confirmer, no faults
    /// (the caller adds them).
    pub(crate) fn run_options<'a>(&self, query: &'a str, model_name: &'a str) -> RunOptions<'a> {
        RunOptions {
            query,
            model_name,
            approvals: self.approvals.clone(),
            confirmer: None,
            now_unix_ms: self.clock.now_unix_ms(),
            faults: Vec::new(),
            interrupted: self.interrupt.clone(),
            cut: None,
            notify: None,
            session: None,
        }
    }

    /// One direct tool call's options, at the clock's current time.
    pub(crate) fn call_options(&self) -> CallOptions {
        CallOptions {
            approvals: self.approvals.clone(),
            now_unix_ms: self.clock.now_unix_ms(),
            notify: None,
            session: None,
        }
    }
}

/// `--approve` names tools of the spec (of any of the specs, for `test`); a typo is a usage
/// error with a did-you-mean, worded the same for every command.
pub(crate) fn approvals(
    registries: &[&Registry],
    approve: &[String],
) -> Result<BTreeSet<String>, String> {
    for tool in approve {
        if registries.iter().any(|r| r.may_have_tool(tool)) {
            continue;
        }
        let names = registries.iter().flat_map(|r| r.tool_names());
        let hint = crate::diag::did_you_mean(tool, names)
            .map(|h| format!("; {h}"))
            .unwrap_or_default();
        let which = if registries.len() > 1 {
            "any of these specs"
        } else {
            "this spec"
        };
        return Err(format!(
            "--approve names `{}`, which is not a tool of {which}{hint}",
            shown(tool)
        ));
    }
    Ok(approve.iter().cloned().collect())
}

/// Names typed on the command line reach the terminal: keep control characters out.
pub(crate) fn shown(name: &str) -> String {
    name.chars().filter(|c| !c.is_control()).take(100).collect()
}

/// The declared secrets (and, for a replay, the model's API key) from `source`.
pub(crate) fn secrets(
    registry: &Registry,
    source: SecretSource,
    model: Option<&str>,
) -> Result<Secrets, String> {
    let masked = || {
        let mut masked = Secrets::default();
        for name in &registry.secrets {
            masked.insert(name, MASK.to_string());
        }
        masked
    };
    match source {
        SecretSource::Environment => {
            let (secrets, missing) = Secrets::from_env(&registry.secrets);
            if missing.is_empty() {
                Ok(secrets)
            } else {
                Err(missing_secrets(&missing))
            }
        }
        SecretSource::Masked => Ok(masked()),
        SecretSource::Placeholders => {
            let mut secrets = masked();
            if let Some(def) = model.and_then(|m| registry.model(m)) {
                if let ModelKind::OpenAi(live) | ModelKind::Anthropic(live) = &def.kind {
                    if let Some(var) = &live.api_key_env {
                        secrets.insert(var, MASK.to_string());
                    }
                }
            }
            Ok(secrets)
        }
    }
}

/// A replay sends stand-ins for secrets, but a spec's own text may hold a secret's value (a
/// system prompt it was pasted into): the recording masked it there, so a replay masks it alike,
/// in what it compares and writes, when the secret is set. Only for masking: nothing sends it.
fn set_secrets(registry: &Registry, model: Option<&str>) -> Redactor {
    let mut names = registry.secrets.clone();
    if let Some(def) = model.and_then(|m| registry.model(m)) {
        if let ModelKind::OpenAi(live) | ModelKind::Anthropic(live) = &def.kind {
            names.extend(live.api_key_env.clone());
        }
    }
    Secrets::from_env(&names).0.redactor()
}

/// The one wording of a missing secret, whichever command found it.
pub(crate) fn missing_secrets(missing: &[String]) -> String {
    format!(
        "the spec reads secret(s) {} from the environment, but they are not set; export them and run again",
        missing
            .iter()
            .map(|m| format!("`{m}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Every declared secret and API key that is set, for masking what spans several specs (a
/// `test` run's results and events).
pub(crate) fn masking_for(registries: &[&Registry]) -> Redactor {
    let mut all = Redactor::default();
    for r in registries {
        let mut names = r.secrets.clone();
        for m in &r.models {
            if let ModelKind::OpenAi(live) | ModelKind::Anthropic(live) = &m.kind {
                names.extend(live.api_key_env.iter().cloned());
            }
        }
        all.merge(&Secrets::from_env(&names).0.redactor());
    }
    all
}

/// `--events`: streamed through the symlink-safe writer, every line masked.
pub(crate) fn open_events(path: &Path, redactor: &Redactor) -> Result<Events, String> {
    match crate::files::create_stream(path) {
        // No buffer: each line is written whole and at once, and nothing is left to write
        // when the stream is dropped (a write then would meet a reader that left unguarded).
        Ok(f) => Ok(Events::to_writer(
            Box::new(f),
            path.display().to_string(),
            redactor.clone(),
        )),
        Err(e) => Err(format!("cannot write events to `{}`: {e}", path.display())),
    }
}

pub(crate) fn model_name(registry: &Registry, requested: Option<&str>) -> Result<String, String> {
    match requested {
        Some(name) => match registry.model(name) {
            Some(m) => Ok(m.name.clone()),
            None => {
                let hint =
                    crate::diag::did_you_mean(name, registry.model_names()).unwrap_or_else(|| {
                        format!(
                            "models in this spec: {}",
                            registry.model_names().collect::<Vec<_>>().join(", ")
                        )
                    });
                Err(format!("the spec has no model `{name}`; {hint}"))
            }
        },
        None => match registry.default_model {
            Some(i) => Ok(registry.models[i].name.clone()),
            None if registry.models.is_empty() => {
                Err("the spec declares no models; add one under `models:`".into())
            }
            None => {
                Err("the spec has several models and no `default_model`; pass --model NAME".into())
            }
        },
    }
}

/// Once per secret and process: `test` sets up every case, and one warning is enough.
pub(crate) fn warn_short_secrets(secrets: &Secrets) {
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let Ok(mut warned) = WARNED.lock() else {
        return;
    };
    for line in secrets.short_warnings() {
        if !warned.contains(&line) {
            eprintln!("{}", crate::term::visible(&line));
            warned.push(line);
        }
    }
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(crate::exit::FAILED);
        }
    }
}

/// Ctrl-C and SIGTERM, watched on a runtime: `stop` is set by either, `sigint` by Ctrl-C only.
pub(crate) struct Signals {
    pub(crate) stop: Interrupt,
    sigint: Interrupt,
}

impl Signals {
    /// Ctrl-C and SIGTERM set the flags from the signal handler itself, installed before this
    /// returns (issue 36 §19): the handlers were tokio tasks that a run which never reached an
    /// await point never polled, so SIGTERM killed it with no trace, and a signal during a
    /// stretch without awaits went unseen until it ended.
    pub(crate) fn watch(rt: &tokio::runtime::Runtime) -> Signals {
        let (stop, sigint) = crate::signals::flags();
        #[cfg(unix)]
        {
            let _ = rt;
            crate::signals::install();
        }
        #[cfg(not(unix))]
        {
            let (s1, i1) = (stop.clone(), sigint.clone());
            rt.spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    i1.store(true, Ordering::SeqCst);
                    s1.store(true, Ordering::SeqCst);
                }
            });
        }
        Signals { stop, sigint }
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// After a signal: 130 for Ctrl-C (the shell convention), 143 for SIGTERM.
    pub(crate) fn exit_code(&self) -> i32 {
        if self.sigint.load(Ordering::SeqCst) {
            crate::exit::INTERRUPTED
        } else {
            crate::exit::TERMINATED
        }
    }

    /// After Ctrl-C (not SIGTERM): forgets it and says true, so a chat goes on after the
    /// answer it interrupted.
    pub(crate) fn take_ctrl_c(&self) -> bool {
        if !self.sigint.swap(false, Ordering::SeqCst) {
            return false;
        }
        self.stop.store(false, Ordering::SeqCst);
        true
    }

    /// `Some(exit code)` when a signal arrived, saying so on stderr.
    pub(crate) fn interrupted_exit(&self) -> Option<i32> {
        if !self.stopped() {
            return None;
        }
        eprintln!("toolrun: interrupted");
        Some(self.exit_code())
    }
}

/// Ctrl-C or SIGTERM, awaited: the normal way to stop a server, which then ends cleanly. The
/// handlers are registered when this is called, not when the future is first polled: a server
/// announces itself before it polls, and a SIGTERM in between took the default action (the
/// process killed, its stdio servers and recording left behind). Call it in a runtime context.
pub(crate) fn shutdown() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let listeners = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::interrupt()).ok(),
            signal(SignalKind::terminate()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let (mut interrupt, mut terminate) = listeners;
            let interrupt = async {
                match interrupt.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let terminate = async {
                match terminate.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = interrupt => {}
                _ = terminate => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
