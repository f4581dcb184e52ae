//! The command line, as users meet it. Every subcommand's `--help` ends with an example.

use crate::setup::OtlpArgs;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "toolrun",
    version,
    about = "Declare, lint, run, record and replay LLM tool-use loops",
    long_about = "toolrun compiles a YAML spec of tools, policies, limits and models into a validated tool \
registry, then runs the tool-use loop: the model decides, arguments are validated, policy is checked, \
the tool runs, and its observation goes back to the model, until an answer, a stop for a person, or a limit.",
    after_help = "Examples:\n  toolrun check specs/*.yaml\n  toolrun run specs/stock_assistant.yaml --query \"What is the gain on 100 AAPL bought at 150?\"\n  toolrun test specs/*.yaml --junit report.xml\n  toolrun replay fixtures/*.json",
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// The project root: paths that specs and fixtures name must stay inside it (default: the
    /// nearest folder above the spec or fixture that holds `.git`, else its own folder)
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) root: Option<PathBuf>,
}

// Each subcommand's arguments are declared only when it is the one invoked (or help needs
// them): declaring all of them cost 0.14M instructions of every start.
#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub(crate) enum Command {
    /// Parse, compile and lint specs; report every problem, not just the first
    #[command(
        after_help = "Examples:\n  toolrun check specs/*.yaml\n  toolrun check specs/\n  toolrun check spec.yaml --format github --deny-warnings"
    )]
    Check(CheckArgs),
    /// Run the tool-use loop once and print the final answer
    #[command(
        after_help = "Examples:\n  toolrun run specs/stock_assistant.yaml --query \"What is the gain on 100 AAPL shares bought at 150?\"\n  toolrun run spec.yaml --query \"Email Bob\" --approve send_email --trace trace.json\n  toolrun run spec.yaml --query \"...\" --model gpt --record fixtures/run.json"
    )]
    Run(RunArgs),
    /// Talk to a spec's model: one user turn per line, tool calls and answers shown
    #[command(
        after_help = "Examples:\n  toolrun chat specs/stock_assistant.yaml\n  printf 'What is AAPL at?\\nAnd my gain on 100 bought at 150?\\n' | toolrun chat spec.yaml --trace chat.json"
    )]
    Chat(ChatArgs),
    /// Run the `tests:` declared in specs (offline: scripted models and fixtures)
    #[command(
        after_help = "Examples:\n  toolrun test specs/*.yaml\n  toolrun test specs/*.yaml --junit report.xml --partition 1/4\n  toolrun test spec.yaml --model gpt --record missing\n  toolrun test spec.yaml --model gpt --repeat 5 --pass-rate 0.8 --results results.json"
    )]
    Test(TestArgs),
    /// Re-run recorded fixtures with no network; fail on any divergence
    #[command(
        after_help = "Examples:\n  toolrun replay fixtures/*.json\n  toolrun replay fixtures/gain.json --spec specs/stock_assistant.yaml"
    )]
    Replay(ReplayArgs),
    /// Run one tool directly (validation, policy and masking included) and print its result
    #[command(
        after_help = "Examples:\n  toolrun call specs/stock_assistant.yaml get_stock_price --args '{\"ticker\": \"AAPL\"}'\n  toolrun call specs/weather_http.yaml weather --args '{\"city\": \"Paris\"}' --json"
    )]
    Call(CallArgs),
    /// Render results files (`toolrun test --results`) as an HTML report or a markdown summary
    #[command(
        after_help = "Examples:\n  toolrun report results.json -o report.html\n  toolrun report gpt.json claude.json -o compare.html\n  toolrun report results.json --format markdown >> \"$GITHUB_STEP_SUMMARY\""
    )]
    Report(ReportArgs),
    /// Compare two traces, fixtures or results files: the first diverging step, tool calls,
    /// status, stop reason and answer (exit 0 the same, 1 different, 2 unreadable)
    #[command(
        after_help = "Examples:\n  toolrun diff fixtures/gain.json new-gain.json\n  toolrun diff main-results.json results.json --format markdown >> \"$GITHUB_STEP_SUMMARY\""
    )]
    Diff(DiffArgs),
    /// Work with results files: merge the shards of a partitioned run into one
    #[command(subcommand)]
    Results(ResultsCommand),
    /// Serve the spec's tools as an MCP server (stdio by default; `--http` for streamable HTTP)
    #[command(
        after_help = "Examples:\n  toolrun serve specs/stock_assistant.yaml\n  toolrun serve spec.yaml --http 127.0.0.1:8765 --events calls.jsonl\n  MCP_TOKEN=... toolrun serve spec.yaml --http 0.0.0.0:8765 --token-env MCP_TOKEN --approve send_email"
    )]
    Serve(ServeArgs),
    /// Log in to the OAuth-protected MCP servers of a spec, and see or forget the tokens kept
    #[command(subcommand)]
    Auth(AuthCommand),
    /// Print a spec with tools imported from another description (an OpenAPI document)
    #[command(subcommand)]
    Import(ImportCommand),
    /// Send recorded runs to an OpenTelemetry collector (`export otel`)
    #[command(subcommand)]
    Export(ExportCommand),
    /// Print the compiled tool definitions as an API expects them
    #[command(
        after_help = "Examples:\n  toolrun tools specs/stock_assistant.yaml --format openai\n  toolrun tools spec.yaml --format mcp"
    )]
    Tools(ToolsArgs),
    /// Print the JSON Schema of the spec format (for editors' YAML language servers)
    #[command(
        after_help = "Examples:\n  toolrun schema > toolrun.schema.json\n  # then, first line of a spec:\n  # yaml-language-server: $schema=./toolrun.schema.json"
    )]
    Schema,
    /// Explain a diagnostic code: what it means, why, an example and the fix
    #[command(after_help = "Examples:\n  toolrun explain E012\n  toolrun explain --list")]
    Explain(ExplainArgs),
    /// Speak the Language Server Protocol on stdin and stdout: `check`'s diagnostics as you
    /// type, hover, completion, navigation and quick fixes for specs (see docs/editors.md)
    #[command(
        after_help = "Examples:\n  toolrun lsp\n  toolrun lsp --root .   # the project root, as for `check`"
    )]
    Lsp,
    /// Print a shell completion script
    #[command(
        after_help = "Examples:\n  toolrun completions bash > /etc/bash_completion.d/toolrun\n  toolrun completions zsh > \"${fpath[1]}/_toolrun\""
    )]
    Completions { shell: clap_complete::Shell },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CheckFormat {
    Human,
    Json,
    Sarif,
    Github,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReportFormat {
    Human,
    Json,
}

/// `test` adds `github`: an `::error` workflow annotation at each failing test's line in its
/// spec, then the human report.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TestFormat {
    Human,
    Json,
    Github,
}

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// Spec files, or folders: every spec below a folder is checked
    #[arg(required = true, value_name = "SPEC|DIR")]
    pub(crate) specs: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "human")]
    pub(crate) format: CheckFormat,
    /// Fail (exit 1) on warnings too
    #[arg(long)]
    pub(crate) deny_warnings: bool,
    /// Also list every environment variable the specs read (`secrets:`, `api_key_env`), where
    /// each is declared, what uses it and the hosts a run may send it to: a table on stdout, or
    /// with `--format json` an object `{"diagnostics": [...], "environment": [...]}`
    #[arg(long)]
    pub(crate) env_report: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordMode {
    /// Refuse to overwrite an existing fixture
    Once,
    /// Re-record everything
    All,
    /// Keep recorded exchanges, append new ones
    New,
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    #[arg(value_name = "SPEC")]
    pub(crate) spec: PathBuf,
    /// The user's question or instruction
    #[arg(long, short)]
    pub(crate) query: String,
    /// The model to use (default: the spec's `default_model`)
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Write the JSON trace to this file (atomically)
    #[arg(long, value_name = "PATH")]
    pub(crate) trace: Option<PathBuf>,
    /// Print the trace document on stdout instead of the answer
    #[arg(long)]
    pub(crate) json: bool,
    /// Record the run as a fixture at this path
    #[arg(long, value_name = "PATH")]
    pub(crate) record: Option<PathBuf>,
    /// What to do when the fixture exists
    #[arg(long, value_enum, default_value = "once")]
    pub(crate) record_mode: RecordMode,
    #[command(flatten)]
    pub(crate) setup: crate::setup::SetupArgs,
}

#[derive(Args, Debug)]
pub(crate) struct ChatArgs {
    #[arg(value_name = "SPEC")]
    pub(crate) spec: PathBuf,
    /// The model to talk to (default: the spec's `default_model`)
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Write the conversation's JSON trace to this file (atomically) when the session ends
    #[arg(long, value_name = "PATH")]
    pub(crate) trace: Option<PathBuf>,
    /// Record the conversation as a fixture at this new path (`toolrun replay` replays it)
    #[arg(long, value_name = "PATH")]
    pub(crate) record: Option<PathBuf>,
    /// Continue the conversation of this trace (`chat --trace` or `run --trace`); its model
    /// unless `--model` is given
    #[arg(long, value_name = "TRACE")]
    pub(crate) resume: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) setup: crate::setup::SetupArgs,
}

#[derive(Args, Debug)]
pub(crate) struct CallArgs {
    #[arg(value_name = "SPEC")]
    pub(crate) spec: PathBuf,
    /// The tool to run
    #[arg(value_name = "TOOL")]
    pub(crate) tool: String,
    /// The tool's arguments, a JSON object (default `{}`)
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub(crate) args: String,
    /// Print the full result record (status, result or error, details, duration) as JSON
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) setup: crate::setup::SetupArgs,
}

#[derive(Args, Debug)]
pub(crate) struct TestArgs {
    /// Spec files, or folders: the tests of every spec below a folder run
    #[arg(required = true, value_name = "SPEC|DIR")]
    pub(crate) specs: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "human")]
    pub(crate) format: TestFormat,
    /// Write a JUnit XML report here
    #[arg(long, value_name = "PATH")]
    pub(crate) junit: Option<PathBuf>,
    /// Run only tests whose name contains this text
    #[arg(long)]
    pub(crate) filter: Option<String>,
    /// Run shard K of N (1-based), e.g. 2/4
    #[arg(long, value_name = "K/N")]
    pub(crate) partition: Option<String>,
    /// Of each data test (`from:`), run N rows, drawn by --seed (the same N for the same seed)
    #[arg(long, value_name = "N")]
    pub(crate) sample: Option<u64>,
    /// The seed --sample draws with (default 0)
    #[arg(long, value_name = "S", requires = "sample")]
    pub(crate) seed: Option<u64>,
    /// Let tests reach the network: live models and HTTP tools (offline by default)
    #[arg(long)]
    pub(crate) allow_network: bool,
    /// What a run in which no test ran means (every test skipped, or none selected)
    #[arg(long, value_enum, value_name = "WHAT", default_value = "fail")]
    pub(crate) no_tests: NoTests,
    /// Run every test with this model instead of its own (live models are called); repeat it
    /// for a model matrix: every test with each model, one results column per model
    #[arg(long, value_name = "NAME")]
    pub(crate) model: Vec<String>,
    /// Run tests live and write their fixtures: those whose fixture is missing, or all
    #[arg(long, value_enum, value_name = "WHICH")]
    pub(crate) record: Option<RecordWhich>,
    /// Run each test N times
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) repeat: u32,
    /// A test passes when at least this share of its runs pass (0 to 1)
    #[arg(long, value_name = "R", default_value_t = 1.0, value_parser = parse_rate)]
    pub(crate) pass_rate: f64,
    /// Tests run at once (default: the number of cores)
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) jobs: Option<u32>,
    /// Write the results document (JSON) here
    #[arg(long, value_name = "PATH")]
    pub(crate) results: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub(crate) setup: crate::setup::SetupArgs,
    /// Compare with this results file (e.g. main's, from a CI artifact)
    #[arg(long, value_name = "PREV.json")]
    pub(crate) baseline: Option<PathBuf>,
    /// What exits 1: a test's pass rate fell beyond noise (`regression`, the default with
    /// --baseline), or any failing test (`failure`, the default without)
    #[arg(long, value_enum, value_name = "WHAT")]
    pub(crate) fail_on: Option<FailOn>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailOn {
    /// Only tests whose pass rate fell beyond noise since --baseline
    Regression,
    /// Any failing test
    Failure,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordWhich {
    /// Tests whose fixture does not exist yet; the rest replay
    Missing,
    /// Every test with a fixture path, overwriting
    All,
}

impl RecordWhich {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RecordWhich::Missing => "missing",
            RecordWhich::All => "all",
        }
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!(
            "expected a share between 0 and 1, e.g. 0.8 (got `{s}`)"
        )),
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoTests {
    /// Exit 1: nothing was tested
    Fail,
    /// Print a warning, exit 0
    Warn,
    /// Exit 0 quietly
    Pass,
}

#[derive(Args, Debug)]
pub(crate) struct ReplayArgs {
    #[arg(required = true, value_name = "FIXTURE")]
    pub(crate) fixtures: Vec<PathBuf>,
    /// The spec to replay against (default: the path recorded in the fixture)
    #[arg(long)]
    pub(crate) spec: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "human")]
    pub(crate) format: ReportFormat,
    /// Write a JUnit XML report here
    #[arg(long, value_name = "PATH")]
    pub(crate) junit: Option<PathBuf>,
    /// Accept new traces for fixtures whose only difference is the trace
    #[arg(long)]
    pub(crate) update: bool,
    #[command(flatten)]
    pub(crate) otlp: OtlpArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReportOutput {
    /// One self-contained page (inline styles and script, no network)
    Html,
    /// The summary table, for a CI job summary
    Markdown,
}

#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// Results files, in order: each is a column; neighbours are compared (regressions, fixes)
    #[arg(required = true, value_name = "RESULTS")]
    pub(crate) results: Vec<PathBuf>,
    /// Write the report here (default: stdout)
    #[arg(long, short, value_name = "PATH")]
    pub(crate) output: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "html")]
    pub(crate) format: ReportOutput,
    /// The files are shards of one partitioned run: join them into one column
    #[arg(long)]
    pub(crate) merge: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToolsFormat {
    Openai,
    OpenaiResponses,
    Anthropic,
    Mcp,
}

#[derive(Args, Debug)]
pub(crate) struct ToolsArgs {
    #[arg(value_name = "SPEC")]
    pub(crate) spec: PathBuf,
    #[arg(long, value_enum, default_value = "openai")]
    pub(crate) format: ToolsFormat,
}

#[derive(Args, Debug)]
pub(crate) struct ExplainArgs {
    /// A code such as E012
    #[arg(required_unless_present = "list")]
    pub(crate) code: Option<String>,
    /// List every code
    #[arg(long)]
    pub(crate) list: bool,
}

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    #[arg(value_name = "SPEC")]
    pub(crate) spec: PathBuf,
    /// Serve streamable HTTP on this address (endpoint `/mcp`) instead of stdio
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) http: Option<String>,
    /// Bearer token required on every HTTP request, read from this environment variable
    /// (required to bind anything but a loopback address)
    #[arg(long, value_name = "VAR")]
    pub(crate) token_env: Option<String>,
    /// Sign MCP 2026-07-28 confirmations' request state with the key in this environment
    /// variable (at least 32 bytes), shared by replicas so that one completes what another
    /// asked; a random key of this process when not given
    #[arg(long, value_name = "VAR")]
    pub(crate) state_key_env: Option<String>,
    #[command(flatten)]
    pub(crate) setup: crate::setup::SetupArgs,
    /// Write the served session's calls and HTTP exchanges as a fixture here on shutdown
    #[arg(long, value_name = "PATH")]
    pub(crate) record: Option<PathBuf>,
    /// HTTP: most MCP sessions at once; a new one ends the session idle the longest
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub(crate) max_sessions: usize,
    /// HTTP: a session without a request or a call running for this long ends (e.g. 30m, 2h)
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    pub(crate) session_idle: String,
    /// HTTP with `serve.auth`: most subjects whose MCP 2026-07-28 calls are counted against
    /// the `serve:` limits at once; a new one evicts the one used least recently
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub(crate) max_subjects: usize,
    /// HTTP with `serve.auth`: a subject's 2026-07-28 calls count against the `serve:` limits
    /// for this long from its first call, then start again (e.g. 1h, 24h)
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub(crate) subject_window: String,
    /// Most stdio MCP server processes at once, across sessions: past it, the one idle the
    /// longest ends, and its session starts it again on its next call
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub(crate) max_processes: usize,
    /// MCP 2026-07-28: most tasks kept at once (running, or ended with their result); a new one
    /// evicts the oldest ended one, and is refused while all of them run
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub(crate) max_tasks: usize,
    /// MCP 2026-07-28: how long a task's result is kept after it ended (its `ttlMs`), and how
    /// long a task waits for an answer it asked for (e.g. 10m, 1h)
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub(crate) task_ttl: String,
    /// MCP 2026-07-28: this replica's name (1 to 32 of a-z, 0-9, `-`), put first in its task
    /// ids, so that a balancer sends a task's requests to the replica that holds it
    #[arg(long, value_name = "NAME")]
    pub(crate) replica_id: Option<String>,
    /// stdio: most requests being answered at once; past it, stdin is not read until one is
    /// answered (the client's writes wait)
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub(crate) max_requests: usize,
    /// HTTP: most connections at once; more are answered 503 and closed
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub(crate) max_connections: usize,
    /// HTTP: a request's headers, and its body, must arrive within this long; an idle connection closes after it
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub(crate) read_timeout: String,
    /// Linux: `batch` (the default) lets a request wait for the task running on its CPU to
    /// block or use its slice instead of preempting it, which saves context switches and CPU
    /// each call; `normal` preempts at once, for the lowest latency on a busy machine
    #[arg(long, value_enum, value_name = "POLICY", default_value = "batch")]
    pub(crate) scheduling: Scheduling,
}

/// How the kernel schedules `serve` (Linux; elsewhere the system's default).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scheduling {
    Batch,
    Normal,
}

#[derive(Subcommand, Debug)]
pub(crate) enum ExportCommand {
    /// Send recorded traces, fixtures and results files as OpenTelemetry spans, at their
    /// recorded times
    #[command(
        after_help = "Examples:\n  toolrun export otel trace.json --otlp http://127.0.0.1:4318\n  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:6006 toolrun export otel fixtures/*.json results.json"
    )]
    Otel(ExportOtelArgs),
}

#[derive(Args, Debug)]
pub(crate) struct ExportOtelArgs {
    /// Traces (`run --trace`), fixtures (`--record`) or results files (`test --results`)
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
    #[command(flatten)]
    pub(crate) otlp: OtlpArgs,
}

#[derive(Args, Debug)]
pub(crate) struct DiffArgs {
    #[arg(value_name = "A")]
    pub(crate) a: PathBuf,
    #[arg(value_name = "B")]
    pub(crate) b: PathBuf,
    #[arg(long, value_enum, default_value = "human")]
    pub(crate) format: DiffFormat,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DiffFormat {
    Human,
    Json,
    Markdown,
}

#[derive(Subcommand, Debug)]
pub(crate) enum ResultsCommand {
    /// Join the results of `test --partition K/N` shards into one document; a missing or
    /// overlapping shard is reported (exit 1)
    #[command(
        after_help = "Examples:\n  toolrun results merge shard-*.json -o all.json\n  toolrun report all.json --format markdown >> \"$GITHUB_STEP_SUMMARY\""
    )]
    Merge(ResultsMergeArgs),
}

#[derive(Subcommand, Debug)]
pub(crate) enum AuthCommand {
    /// Log in to a spec's `kind: mcp` servers with `auth: { oauth: ... }` (all, or TOOL's): the
    /// authorization page opens in $BROWSER (else the desktop's browser; the URL is printed too)
    /// and the token is kept for `run`, `test`, `call` and `serve`
    #[command(
        after_help = "Examples:\n  toolrun auth login specs/notes.yaml\n  BROWSER=firefox toolrun auth login spec.yaml notes"
    )]
    Login {
        spec: PathBuf,
        /// The `kind: mcp` entry to log in to (default: every one with `auth: { oauth: ... }`)
        tool: Option<String>,
    },
    /// List the tokens kept (never the tokens themselves): server, issuer, client, scopes, expiry
    Status,
    /// Forget kept tokens: all of them, or those of a spec's servers (TOOL's only)
    Logout {
        spec: Option<PathBuf>,
        tool: Option<String>,
    },
}

#[derive(Args, Debug)]
pub(crate) struct ResultsMergeArgs {
    #[arg(required = true, value_name = "RESULTS")]
    pub(crate) shards: Vec<PathBuf>,
    /// Write the merged results here
    #[arg(long, short, value_name = "PATH")]
    pub(crate) output: PathBuf,
}

#[derive(Subcommand, Debug)]
pub(crate) enum ImportCommand {
    /// One `kind: http` tool per operation of an OpenAPI 3.0 or 3.1 document (YAML or JSON)
    #[command(
        after_help = "Examples:\n  toolrun import openapi petstore.yaml > specs/petstore.yaml\n  toolrun import openapi api.json --include tag:pets --exclude deletePet --tools-only\n  toolrun import openapi api.yaml --base-url http://127.0.0.1:8080/v1"
    )]
    Openapi(ImportOpenapiArgs),
}

#[derive(Args, Debug)]
pub(crate) struct ImportOpenapiArgs {
    #[arg(value_name = "FILE")]
    pub(crate) file: PathBuf,
    /// Only these operations: an operationId (globs with `*`), a path glob (`/pets/*`) or `tag:NAME` (repeatable)
    #[arg(long, value_name = "PATTERN")]
    pub(crate) include: Vec<String>,
    /// Leave these operations out (same patterns as --include; repeatable)
    #[arg(long, value_name = "PATTERN")]
    pub(crate) exclude: Vec<String>,
    /// Print only the `tools:` block, to paste into an existing spec
    #[arg(long)]
    pub(crate) tools_only: bool,
    /// The API's base URL (default: the document's first server)
    #[arg(long, value_name = "URL")]
    pub(crate) base_url: Option<String>,
}
