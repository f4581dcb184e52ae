//! The compiled, immutable form of a spec. Everything downstream of the compiler (the engine,
//! models, tools, `tools --format`) reads only this; names have been resolved and checked.

pub mod table;

use crate::templates::{TValue, TemplateId, Templates};
use crate::vocab::{ErrorKind, Status, StopReason};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;
pub use table::Table;

pub struct Registry {
    pub name: String,
    pub description: Option<String>,
    pub system: Option<String>,
    pub spec_path: PathBuf,
    pub spec_dir: PathBuf,
    pub spec_sha256: String,
    pub tools: Vec<Tool>,
    pub secrets: Vec<String>,
    pub policy: Policy,
    pub limits: Limits,
    pub models: Vec<ModelDef>,
    pub default_model: Option<usize>,
    pub tests: Vec<TestCase>,
    pub templates: Templates,
    /// JSON Pointers into recorded request bodies that replay ignores (volatile fields).
    pub replay_ignore: Vec<String>,
    /// `fixtures: DIR`, resolved against the spec's folder: per-test fixtures live there.
    pub fixtures_dir: Option<PathBuf>,
}

impl Registry {
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.name.as_str())
    }
    /// The tools a model may call: what `tools --format` exports and `serve` lists. A tool the
    /// policy blocks is never offered (`check` already says it can never run).
    pub fn callable_tools(&self) -> impl Iterator<Item = &Tool> {
        self.tools.iter().filter(|t| self.policy.allows(&t.name))
    }
    pub fn model(&self, name: &str) -> Option<&ModelDef> {
        self.models.iter().find(|m| m.name == name)
    }
    pub fn model_names(&self) -> impl Iterator<Item = &str> {
        self.models.iter().map(|m| m.name.as_str())
    }
}

pub struct Tool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// Checked at compile time, built on first use (see `crate::arguments`).
    pub validator: crate::arguments::LazyValidator,
    pub side_effects: bool,
    pub idempotent: bool,
    /// Stop for a person before running (side effects, or listed in `policy.confirm`).
    pub confirm: bool,
    pub max_calls: Option<u32>,
    pub timeout: Duration,
    pub kind: ToolKind,
    pub faults: Vec<Fault>,
}

impl Tool {
    /// The validator of the input schema, built on the tool's first call.
    pub fn validator(&self) -> Result<&jsonschema::Validator, &str> {
        self.validator.get(self.input_schema())
    }

    /// The input schema models see and arguments are validated against: the spec's, or for an
    /// MCP tool without a pinned `input:`, the one its server listed when a run connected.
    pub fn input_schema(&self) -> &Value {
        match &self.kind {
            ToolKind::Mcp(m) if !m.pinned_input => m
                .listed
                .get()
                .map(|l| &l.input_schema)
                .unwrap_or(&self.input_schema),
            _ => &self.input_schema,
        }
    }

    /// The description models choose the tool by (an MCP tool's comes from its server unless
    /// the spec gives one).
    pub fn description(&self) -> &str {
        match &self.kind {
            ToolKind::Mcp(m) if !m.pinned_description => m
                .listed
                .get()
                .map(|l| l.description.as_str())
                .unwrap_or(&self.description),
            _ => &self.description,
        }
    }
}

pub enum ToolKind {
    Mock(Vec<MockResponse>),
    Table(Table),
    Builtin(&'static str),
    Http(Box<HttpTool>),
    Mcp(Box<McpTool>),
}

impl ToolKind {
    pub fn name(&self) -> &'static str {
        match self {
            ToolKind::Mock(_) => "mock",
            ToolKind::Table(_) => "table",
            ToolKind::Builtin(_) => "builtin",
            ToolKind::Http(_) => "http",
            ToolKind::Mcp(_) => "mcp",
        }
    }
}

pub struct MockResponse {
    /// Matches when every key/value here equals the argument's (a subset match).
    pub when: Option<Map<String, Value>>,
    pub outcome: MockOutcome,
}

pub enum MockOutcome {
    Result(TValue),
    Error {
        kind: ErrorKind,
        message: TemplateId,
    },
}

pub struct HttpTool {
    pub method: String,
    pub url: TemplateId,
    /// Where the URL's scheme and host come from, decided once when the spec is compiled.
    pub origin: UrlOrigin,
    pub query: Vec<(String, TValue)>,
    pub headers: Vec<(String, TemplateId)>,
    pub body: Option<TValue>,
    pub body_text: Option<TemplateId>,
    pub pointer: Option<String>,
    pub max_bytes: u64,
    pub retries: u32,
    pub max_redirects: u32,
}

/// A tool of a remote MCP server (streamable HTTP). Its description and input schema are the
/// server's, learned from `tools/list` when a run starts; what the spec pins is checked then.
pub struct McpTool {
    pub server: std::sync::Arc<McpServer>,
    /// The tool's name on the server (the registry tool may be renamed with `as:`).
    pub remote_name: String,
    /// `input:` in the spec: the server's schema must be exactly this one.
    pub pinned_input: bool,
    /// `description:` in the spec: it replaces the server's.
    pub pinned_description: bool,
    /// What the server listed, set by the first run of this process that connected. Runs of
    /// one process (the cases of `toolrun test`) share it; each still lists and checks.
    pub listed: std::sync::OnceLock<ListedTool>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ListedTool {
    pub description: String,
    pub input_schema: Value,
}

/// One `kind: mcp` entry: the server its tools share.
pub struct McpServer {
    /// The entry's key in `tools:`: names the server in messages and in fixtures.
    pub name: String,
    pub url: String,
    /// The URL's host and port, held to the allow-list like an HTTP tool's.
    pub host: HostRule,
    /// Templates over `secrets` only.
    pub headers: Vec<(String, TemplateId)>,
    /// `(remote name, registry name)` of every tool used from this server.
    pub tools: Vec<(String, String)>,
    /// Bounds connecting (initialize and tools/list); calls use their tool's timeout.
    pub timeout: Duration,
}

/// What decides an HTTP tool's scheme, host and port. Arguments never do, except as a whole URL.
#[derive(Clone, Debug, PartialEq)]
pub enum UrlOrigin {
    /// Written in the spec (`https://api.example.com/...`), with its port; `None` if unparsable.
    Literal(Option<HostRule>),
    /// Rendered from these secrets (`{{ secrets.BASE }}/items`), which are inserted unencoded.
    Secrets(Vec<String>),
    /// The whole URL is one argument (`{{ args.url }}`), held to the explicit allow-list.
    WholeArgument,
}

/// Faults injected by the spec (or a test case) to exercise the loop's failure paths.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// The tool's first `n` calls fail with this error.
    FailFirst {
        n: u32,
        kind: ErrorKind,
        message: String,
    },
    /// Every call takes longer than its timeout.
    Timeout,
    /// Every call returns this HTTP status (as an `http_status` error).
    HttpStatus(u16),
    /// Every call returns a string of this many characters.
    OversizedOutput(usize),
    /// Every call waits this long before running (the tool's timeout still applies).
    Delay(Duration),
}

pub struct Policy {
    /// `None`: every tool is allowed.
    pub allow: Option<BTreeSet<String>>,
    pub deny: BTreeSet<String>,
    pub max_identical_calls: u32,
    pub max_repeated_errors: u32,
    pub detect_alternation: bool,
    pub allow_hosts: Vec<HostRule>,
}

impl Policy {
    pub fn allows(&self, tool: &str) -> bool {
        !self.deny.contains(tool) && self.allow.as_ref().is_none_or(|a| a.contains(tool))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRule {
    pub host: String,
    pub port: Option<u16>,
}

impl HostRule {
    pub fn matches(&self, host: &str, port: u16) -> bool {
        self.host
            .eq_ignore_ascii_case(host.trim_start_matches('[').trim_end_matches(']'))
            && self.port.is_none_or(|p| p == port)
    }
}

pub struct Limits {
    pub max_steps: u32,
    pub max_tool_calls: u32,
    pub max_parallel_tools: u32,
    pub tool_timeout: Duration,
    pub run_timeout: Duration,
    pub max_tool_output_chars: usize,
    pub max_tokens_total: Option<u64>,
}

pub struct ModelDef {
    pub name: String,
    pub kind: ModelKind,
    /// `price:`, for the cost of test runs.
    pub price: Option<Price>,
}

/// USD per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

pub enum ModelKind {
    Scripted(Vec<Script>),
    OpenAi(LiveModel),
    Anthropic(LiveModel),
}

impl ModelKind {
    pub fn name(&self) -> &'static str {
        match self {
            ModelKind::Scripted(_) => "scripted",
            ModelKind::OpenAi(_) => "openai",
            ModelKind::Anthropic(_) => "anthropic",
        }
    }
}

pub struct Script {
    pub when: Option<LazyRegex>,
    pub turns: Vec<Turn>,
}

pub enum Turn {
    Answer(TemplateId),
    ToolCalls(Vec<ScriptedCall>),
    /// Prose that is not a valid decision (a model claiming a tool call in text).
    Raw(TemplateId),
}

pub struct ScriptedCall {
    pub name: String,
    pub arguments: ScriptedArguments,
}

pub enum ScriptedArguments {
    Json(TValue),
    /// Sent verbatim, typically invalid JSON, to exercise the malformed-arguments path.
    Raw(String),
}

#[derive(Clone, Debug)]
pub struct LiveModel {
    pub model: String,
    pub base_url: String,
    pub api_key_env: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub retries: u32,
    pub timeout: Duration,
    pub headers: Vec<(String, String)>,
    /// Sent whenever tools are sent: several compatible servers ignore tools without it.
    pub tool_choice: ToolChoice,
    /// `Some(false)` asks for at most one tool call per turn.
    pub parallel_tool_calls: Option<bool>,
    /// Provider knobs merged into every request body; never a key toolrun writes itself.
    pub extra_body: serde_json::Map<String, Value>,
    /// Read the reply as server-sent events, printing text as it arrives.
    pub stream: bool,
    /// Query parameters added to every request URL (Azure's `api-version`).
    pub query: Vec<(String, String)>,
    /// The header that carries the key verbatim (Azure's `api-key`), instead of the
    /// provider's own (`Authorization: Bearer` or `x-api-key`).
    pub api_key_header: Option<String>,
    /// Most requests in flight at once to this model, across every run of the process.
    pub max_concurrency: Option<u32>,
    /// Most requests started per minute, across every run of the process (evenly spaced).
    pub requests_per_minute: Option<u32>,
}

/// Whether the model may, must or must not call a tool, provider-neutral.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ToolChoice {
    #[default]
    Auto,
    Required,
    None,
    Tool(String),
}

pub struct TestCase {
    pub name: String,
    pub query: String,
    pub model: Option<String>,
    pub fixture: Option<PathBuf>,
    /// `now:`: this test's clock (Unix ms), instead of `TOOLRUN_NOW` or the system clock.
    pub now_unix_ms: Option<i64>,
    pub approve: Vec<String>,
    /// Faults for this test only, by tool; they replace the tool's own.
    pub faults: Vec<(String, Vec<Fault>)>,
    pub expect: Expect,
    pub line: u32,
}

#[derive(Default)]
pub struct Expect {
    pub status: Option<Status>,
    pub stop_reason: Option<StopReason>,
    pub tool_calls: Option<Vec<String>>,
    pub tool_calls_include: Vec<String>,
    pub tool_calls_exclude: Vec<String>,
    /// Per call, in order: each object must be a subset of that call's arguments.
    pub arguments: Vec<Map<String, Value>>,
    pub error_kinds: Option<Vec<ErrorKind>>,
    pub output_contains: Vec<String>,
    pub output_not_contains: Vec<String>,
    pub output_matches: Option<LazyRegex>,
    pub max_tool_calls: Option<u32>,
}

/// A regex checked at compile time but built on first use: building automata is most of a small
/// run's start-up, and a run tries only the scripts up to the first match.
pub struct LazyRegex {
    pattern: String,
    built: std::sync::OnceLock<Result<regex::Regex, String>>,
}

/// Linear-time engine, bounded size: a `when` can never backtrack or eat memory.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

impl LazyRegex {
    pub fn new(pattern: &str) -> LazyRegex {
        LazyRegex {
            pattern: pattern.to_string(),
            built: std::sync::OnceLock::new(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    pub fn regex(&self) -> Result<&regex::Regex, String> {
        self.built
            .get_or_init(|| {
                regex::RegexBuilder::new(&self.pattern)
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| format!("regular expression `{}`: {e}", self.pattern))
    }

    /// A pattern too large to build matches nothing (and `check` reported it already).
    pub fn is_match(&self, text: &str) -> bool {
        self.regex().is_ok_and(|r| r.is_match(text))
    }
}
