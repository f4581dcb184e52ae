//! The compiled, immutable form of a spec. Everything downstream of the compiler (the engine,
//! models, tools, `tools --format`) reads only this; names have been resolved and checked.

pub(crate) mod api_formats;
pub(crate) mod oauth;
pub(crate) mod table;
mod test_case;

use crate::templates::{TValue, TemplateId, Templates};
use crate::vocab::ErrorKind;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;
pub(crate) use table::Table;
pub(crate) use test_case::{
    fixture_stem, sample_key, shard_of, DataRow, Expect, Judge, RowPick, RowsMatched, TestCase,
    TestTurn, GRADE_TOOL,
};

pub struct Registry {
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) system: Option<String>,
    pub(crate) spec_path: PathBuf,
    pub(crate) spec_sha256: String,
    pub(crate) tools: Vec<Tool>,
    pub(crate) secrets: Vec<String>,
    pub(crate) policy: Policy,
    pub(crate) limits: Limits,
    /// `serve:`, the limits of a served MCP session.
    pub(crate) serve: ServeLimits,
    /// `serve.auth`: `serve --http` takes OAuth access tokens of this issuer.
    pub(crate) serve_auth: Option<ServeAuth>,
    pub models: Vec<ModelDef>,
    pub(crate) default_model: Option<usize>,
    /// The written tests, and the rows of data tests the compile was asked to keep
    /// ([`RowPick`]), in spec order.
    pub(crate) tests: Vec<TestCase>,
    /// What `--filter` matched among all rows of the data tests, kept or not.
    pub(crate) rows_matched: RowsMatched,
    pub(crate) templates: Templates,
    /// JSON Pointers into recorded request bodies that replay ignores (volatile fields).
    pub(crate) replay_ignore: Vec<String>,
    /// `fixtures: DIR`, resolved against the spec's folder: per-test fixtures live there.
    pub(crate) fixtures_dir: Option<PathBuf>,
    /// `kind: mcp` entries with `tools: "*"`: their tools are known once a run lists them.
    pub(crate) wildcards: Vec<Wildcard>,
    /// The hosts HTTP tools may reach, worked out on the first call (`tools::http::allowed_hosts`).
    pub(crate) allowed_hosts: std::sync::OnceLock<Vec<HostRule>>,
}

impl Registry {
    pub(crate) fn tool(&self, name: &str) -> Option<&Tool> {
        self.all_tools().find(|t| t.name == name)
    }
    pub(crate) fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.all_tools().map(|t| t.name.as_str())
    }
    /// The declared tools, then those of `tools: "*"` servers a run has listed.
    pub(crate) fn all_tools(&self) -> impl Iterator<Item = &Tool> {
        let found = self
            .wildcards
            .iter()
            .flat_map(|w| w.found.get().into_iter().flatten());
        self.tools.iter().chain(found)
    }
    /// The tools a model may call: what `tools --format` exports and `serve` lists. A tool the
    /// policy blocks is never offered (`check` already says it can never run).
    pub(crate) fn callable_tools(&self) -> impl Iterator<Item = &Tool> {
        self.all_tools().filter(|t| t.allowed)
    }
    /// Every MCP server of the spec, once each: those of declared tools, then `tools: "*"` ones.
    pub(crate) fn mcp_servers(&self) -> Vec<&std::sync::Arc<McpServer>> {
        let mut servers: Vec<&std::sync::Arc<McpServer>> = Vec::new();
        let declared = self.tools.iter().filter_map(|t| match &t.kind {
            ToolKind::Mcp(m) => Some(&m.server),
            _ => None,
        });
        for server in declared.chain(self.wildcards.iter().map(|w| &w.server)) {
            if !servers.iter().any(|s| s.name == server.name) {
                servers.push(server);
            }
        }
        servers
    }
    /// Whether `name` is a tool, or may be one once a run lists a `tools: "*"` server.
    pub(crate) fn may_have_tool(&self, name: &str) -> bool {
        self.tool(name).is_some() || !self.wildcards.is_empty()
    }
    pub(crate) fn wildcard(&self, server: &str) -> Option<&Wildcard> {
        self.wildcards.iter().find(|w| w.server.name == server)
    }
    pub(crate) fn model(&self, name: &str) -> Option<&ModelDef> {
        self.models.iter().find(|m| m.name == name)
    }
    pub(crate) fn model_names(&self) -> impl Iterator<Item = &str> {
        self.models.iter().map(|m| m.name.as_str())
    }
}

pub(crate) struct Tool {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) input_schema: Value,
    /// Checked at compile time, built on first use (see `crate::arguments`).
    pub(crate) validator: crate::arguments::LazyValidator,
    pub(crate) side_effects: bool,
    pub(crate) idempotent: bool,
    /// Stop for a person before running (side effects, or listed in `policy.confirm`).
    pub(crate) confirm: bool,
    pub(crate) max_calls: Option<u32>,
    pub(crate) timeout: Duration,
    pub(crate) kind: ToolKind,
    pub(crate) faults: Vec<Fault>,
    /// `policy.allow`/`policy.deny` resolved when the spec compiles (or when a `tools: "*"`
    /// server is listed): a run never looks names up in the policy.
    pub(crate) allowed: bool,
    /// `scopes:`: what a served client's token must carry to see and call the tool.
    pub(crate) scopes: Vec<String>,
    /// `task:`: served on MCP 2026-07-28, a call may (or must) run as a task of the tasks
    /// extension, polled by its client; `None`: always answered in the call's own response.
    pub(crate) task: Option<TaskSupport>,
}

/// How a served tool runs as a task (`task:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskSupport {
    /// A client that declared the tasks extension gets a task; others the result at once.
    Optional,
    /// Only as a task: a client that did not declare the extension is refused (-32021).
    Required,
}

impl TaskSupport {
    pub(crate) const NAMES: &'static [&'static str] = &["optional", "required"];

    pub(crate) fn parse(name: &str) -> Option<TaskSupport> {
        match name {
            "optional" => Some(TaskSupport::Optional),
            "required" => Some(TaskSupport::Required),
            _ => None,
        }
    }
}

impl Tool {
    /// The validator of the input schema, built on the tool's first call.
    /// An MCP tool without a pinned `input:` is validated against the schema its server listed
    /// (by a validator of its own: the one `check` may have built knows only `{type: object}`).
    pub(crate) fn validator(&self) -> Result<&jsonschema::Validator, &str> {
        if let ToolKind::Mcp(m) = &self.kind {
            if let (false, Some(listed)) = (m.pinned_input, m.listed.get()) {
                return m.listed_validator.get(&listed.input_schema);
            }
        }
        self.validator.get(self.input_schema())
    }

    /// The input schema models see and arguments are validated against: the spec's, or for an
    /// MCP tool without a pinned `input:`, the one its server listed when a run connected.
    pub(crate) fn input_schema(&self) -> &Value {
        match &self.kind {
            ToolKind::Mcp(m) if !m.pinned_input => m
                .listed
                .get()
                .map(|l| &l.input_schema)
                .unwrap_or(&self.input_schema),
            _ => &self.input_schema,
        }
    }

    /// The server's annotations that make this remote tool need confirmation, if they do.
    /// Hints only ever add confirmation: one that claims a tool is harmless removes none.
    pub(crate) fn confirm_hint(&self) -> Option<&str> {
        match &self.kind {
            ToolKind::Mcp(m) => m.listed.get().and_then(|l| l.confirm_hint.as_deref()),
            _ => None,
        }
    }

    /// The description models choose the tool by (an MCP tool's comes from its server unless
    /// the spec gives one).
    pub(crate) fn description(&self) -> &str {
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

/// Limits of one session of `toolrun serve`: a client that stays connected all day makes many
/// calls, and looks the same thing up again later; only a call repeated back to back is a loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ServeLimits {
    pub(crate) max_tool_calls: u32,
    pub(crate) max_repeated_calls: u32,
}

/// `serve.auth`: who issues the access tokens `serve --http` takes, and for whom.
#[derive(Clone, Debug)]
pub(crate) struct ServeAuth {
    /// Exactly as written: the metadata's `issuer` and every token's `iss` must equal it.
    pub(crate) issuer: String,
    /// The issuer's host, allowed as a literal URL's is when `allow_hosts` is not set.
    pub(crate) issuer_host: Option<HostRule>,
    pub(crate) audience: String,
    pub(crate) scopes: Vec<String>,
    /// Credentials for RFC 7662 introspection of opaque tokens, templates over `secrets`.
    pub(crate) client_id: Option<TemplateId>,
    pub(crate) client_secret: Option<TemplateId>,
}

impl Default for ServeLimits {
    fn default() -> ServeLimits {
        ServeLimits {
            max_tool_calls: 1000,
            max_repeated_calls: 5,
        }
    }
}

pub(crate) enum ToolKind {
    Mock(Vec<MockResponse>),
    Table(Table),
    Builtin(&'static str),
    Http(Box<HttpTool>),
    Mcp(Box<McpTool>),
}

pub(crate) struct MockResponse {
    /// Matches when every key/value here equals the argument's (a subset match).
    pub(crate) when: Option<Map<String, Value>>,
    pub(crate) outcome: MockOutcome,
    /// `notify:`, the notifications sent before the outcome (templates inside).
    pub(crate) notify: Option<TValue>,
    /// `content:`, MCP content items (templates inside); the result, if any, is then the
    /// `structuredContent`.
    pub(crate) content: Option<TValue>,
}

pub(crate) enum MockOutcome {
    Result(TValue),
    Error {
        kind: ErrorKind,
        message: TemplateId,
    },
}

pub(crate) struct HttpTool {
    pub(crate) method: String,
    pub(crate) url: TemplateId,
    /// Where the URL's scheme and host come from, decided once when the spec is compiled.
    pub(crate) origin: UrlOrigin,
    pub(crate) query: Vec<(String, TValue)>,
    pub(crate) headers: Vec<(String, TemplateId)>,
    pub(crate) body: Option<TValue>,
    pub(crate) body_text: Option<TemplateId>,
    pub(crate) pointer: Option<String>,
    pub(crate) max_bytes: u64,
    pub(crate) retries: u32,
    pub(crate) max_redirects: u32,
    /// The secrets the tool's templates name (`secrets.NAME`): the only ones its calls' template
    /// context holds, so no template of this tool can send another tool's secret to its host.
    pub(crate) secrets: Vec<String>,
    /// The URL parsed, when it is written without templates: the same on every call.
    pub(crate) literal_url: std::sync::OnceLock<url::Url>,
}

/// A tool of a remote MCP server (streamable HTTP). Its description and input schema are the
/// server's, learned from `tools/list` when a run starts; what the spec pins is checked then.
pub(crate) struct McpTool {
    pub(crate) server: std::sync::Arc<McpServer>,
    /// The tool's name on the server (the registry tool may be renamed with `as:`).
    pub(crate) remote_name: String,
    /// `input:` in the spec: the server's schema must be exactly this one.
    pub(crate) pinned_input: bool,
    /// `description:` in the spec: it replaces the server's.
    pub(crate) pinned_description: bool,
    /// What the server listed, set by the first run of this process that connected. Runs of
    /// one process (the cases of `toolrun test`) share it; each still lists and checks.
    pub(crate) listed: std::sync::OnceLock<ListedTool>,
    /// The validator of the listed schema, built on the first call after listing.
    pub(crate) listed_validator: crate::arguments::LazyValidator,
    /// `side_effects:` written in the spec (the entry's, else the server's): the spec's word
    /// outranks the server's annotations.
    pub(crate) declared_side_effects: Option<bool>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ListedTool {
    pub(crate) description: String,
    pub(crate) input_schema: Value,
    /// Why the server's annotations make a call wait for a person (they say it changes its
    /// environment), unless the spec declared `side_effects` itself.
    pub(crate) confirm_hint: Option<String>,
    /// `title`, `annotations` and `outputSchema` as the server lists them: `toolrun serve`
    /// passes them on (the spec's `side_effects:` outranks the annotations).
    pub(crate) served: Map<String, Value>,
}

impl ListedTool {
    /// The keys of a listed tool that a gateway passes on as they are.
    pub(crate) fn served_keys(item: &Value) -> Map<String, Value> {
        ["title", "annotations", "outputSchema"]
            .iter()
            .filter_map(|k| {
                Some((
                    k.to_string(),
                    item.get(*k).filter(|v| !v.is_null())?.clone(),
                ))
            })
            .collect()
    }
}

/// A `kind: mcp` entry with `tools: "*"`: every tool its server lists, found when a run
/// connects. What the entry says of its tools (timeout, side effects, faults...) applies to each.
pub(crate) struct Wildcard {
    pub(crate) server: std::sync::Arc<McpServer>,
    pub(crate) side_effects: bool,
    /// `side_effects:` written on the entry: it outranks the server's annotations.
    pub(crate) declared_side_effects: Option<bool>,
    pub(crate) explicit_idempotent: Option<bool>,
    pub(crate) max_calls: Option<u32>,
    pub(crate) timeout: Duration,
    pub(crate) faults: Vec<Fault>,
    /// `policy.confirm`: names a found tool may have.
    pub(crate) confirm: Vec<String>,
    pub(crate) scopes: Vec<String>,
    pub(crate) task: Option<TaskSupport>,
    /// The tools, from the first listing of this process (runs of `toolrun test` share it, as
    /// they share what each declared tool's server listed).
    pub(crate) found: std::sync::OnceLock<Vec<Tool>>,
}

impl Wildcard {
    /// The registry tool for one listed tool, named as the server names it.
    pub(crate) fn tool(&self, name: &str, listed: ListedTool, allowed: bool) -> Tool {
        let side_effects = self.side_effects;
        let kept = std::sync::OnceLock::new();
        let _ = kept.set(listed.clone());
        Tool {
            name: name.to_string(),
            description: listed.description,
            input_schema: listed.input_schema,
            validator: crate::arguments::LazyValidator::default(),
            side_effects,
            idempotent: self.explicit_idempotent.unwrap_or(false),
            confirm: side_effects || self.confirm.iter().any(|c| c == name),
            max_calls: self.max_calls,
            timeout: self.timeout,
            kind: ToolKind::Mcp(Box::new(McpTool {
                server: self.server.clone(),
                remote_name: name.to_string(),
                pinned_input: false,
                pinned_description: false,
                listed: kept,
                listed_validator: Default::default(),
                declared_side_effects: self.declared_side_effects,
            })),
            faults: self.faults.clone(),
            allowed,
            scopes: self.scopes.clone(),
            task: self.task,
        }
    }
}

/// One `kind: mcp` entry: the server its tools share.
pub(crate) struct McpServer {
    /// The entry's key in `tools:`: names the server in messages and in fixtures.
    pub(crate) name: String,
    /// The streamable-HTTP endpoint, or for a stdio server `stdio: ` and its command line:
    /// what messages and fixtures name it by.
    pub(crate) url: String,
    /// The URL's host and port, held to the allow-list like an HTTP tool's (none for stdio).
    pub(crate) host: Option<HostRule>,
    /// `command:`: a program toolrun starts and speaks to over its stdin and stdout.
    pub(crate) stdio: Option<StdioCommand>,
    /// Templates over `secrets` only.
    pub(crate) headers: Vec<(String, TemplateId)>,
    /// `(remote name, registry name)` of every tool used from this server.
    pub(crate) tools: Vec<(String, String)>,
    /// Bounds connecting (initialize and tools/list): `startup_timeout:`, else `timeout:`;
    /// calls use their tool's timeout.
    pub(crate) timeout: Duration,
    /// `elicitation:`: how a server's request for input during a call is answered.
    pub(crate) elicitation: Elicitation,
    /// `protocol:`: the MCP revision pinned; `None` negotiates (see `tools::mcp`).
    pub(crate) protocol: Option<String>,
    /// `auth: { oauth: ... }`: on a 401 the client gets a token (HTTP servers only).
    pub(crate) oauth: Option<oauth::OAuthConfig>,
}

/// The answer to a server's `elicitation/create`: nobody is asked during a run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) enum Elicitation {
    #[default]
    Decline,
    /// Accept with the requested schema's defaults when every required field has one.
    Defaults,
}

/// A stdio MCP server's program, as the spec declares it.
#[derive(Debug)]
pub(crate) struct StdioCommand {
    /// Never given to a shell: the program and its arguments as written.
    pub(crate) argv: Vec<String>,
    /// `env:`, templates over `secrets`; the rest of the environment is not passed on.
    pub(crate) env: Vec<(String, TemplateId)>,
    /// The project root: where the program runs and its relative paths resolve.
    pub(crate) dir: PathBuf,
    /// Where `command:` is written (`file:line:col`), for the error that refuses to start it.
    pub(crate) at: String,
}

/// What decides an HTTP tool's scheme, host and port. Arguments never do, except as a whole URL.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum UrlOrigin {
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

pub(crate) struct Policy {
    /// `None`: every tool is allowed.
    pub(crate) allow: Option<BTreeSet<String>>,
    pub(crate) deny: BTreeSet<String>,
    pub(crate) max_identical_calls: u32,
    pub(crate) max_repeated_errors: u32,
    pub(crate) detect_alternation: bool,
    pub(crate) allow_hosts: Vec<HostRule>,
}

impl Policy {
    pub(crate) fn allows(&self, tool: &str) -> bool {
        !self.deny.contains(tool) && self.allow.as_ref().is_none_or(|a| a.contains(tool))
    }

    /// `url`'s host when `allow_hosts` is set and does not list it (at the URL's port): what
    /// `check` refuses for every place the spec sends a request.
    pub(crate) fn unlisted_host<'u>(&self, url: &'u url::Url) -> Option<&'u str> {
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(0);
        let listed =
            self.allow_hosts.is_empty() || self.allow_hosts.iter().any(|r| r.matches(host, port));
        (!listed).then_some(host)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostRule {
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
}

impl HostRule {
    pub(crate) fn matches(&self, host: &str, port: u16) -> bool {
        self.host
            .eq_ignore_ascii_case(host.trim_start_matches('[').trim_end_matches(']'))
            && self.port.is_none_or(|p| p == port)
    }
}

#[derive(Debug)]
pub(crate) struct Limits {
    pub(crate) max_steps: u32,
    pub(crate) max_tool_calls: u32,
    pub(crate) max_parallel_tools: u32,
    pub(crate) tool_timeout: Duration,
    pub(crate) run_timeout: Duration,
    pub(crate) max_tool_output_chars: usize,
    pub(crate) max_tokens_total: Option<u64>,
    /// USD, from the running model's `price:`.
    pub(crate) max_cost_usd: Option<f64>,
}

pub struct ModelDef {
    pub(crate) name: String,
    pub(crate) kind: ModelKind,
    /// `price:`, for the cost of test runs.
    pub(crate) price: Option<Price>,
}

/// USD per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Price {
    pub(crate) input: f64,
    pub(crate) output: f64,
    /// Input tokens the provider served from its prompt cache (default: `input`).
    pub(crate) cached_input: Option<f64>,
    /// Reasoning tokens, which providers count as output (default: `output`).
    pub(crate) reasoning: Option<f64>,
}

impl Price {
    /// USD for these counts; cached input and reasoning are parts of the input and output.
    pub(crate) fn cost_usd(&self, input: u64, cached: u64, output: u64, reasoning: u64) -> f64 {
        let (cached, reasoning) = (cached.min(input), reasoning.min(output));
        let input = (input - cached) as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input);
        let output = (output - reasoning) as f64 * self.output
            + reasoning as f64 * self.reasoning.unwrap_or(self.output);
        (input + output) / 1_000_000.0
    }
}

pub(crate) enum ModelKind {
    Scripted(Vec<Script>),
    OpenAi(LiveModel),
    Anthropic(LiveModel),
}

impl ModelKind {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            ModelKind::Scripted(_) => "scripted",
            ModelKind::OpenAi(_) => "openai",
            ModelKind::Anthropic(_) => "anthropic",
        }
    }
}

pub(crate) struct Script {
    pub(crate) when: Option<LazyRegex>,
    /// `turn:`: the user turn of a conversation (1-based) this script answers.
    pub(crate) turn: Option<u32>,
    /// `history:`: matched against the conversation before the current user turn.
    pub(crate) history: Option<LazyRegex>,
    pub(crate) turns: Vec<Turn>,
}

pub(crate) enum Turn {
    Answer(TemplateId),
    ToolCalls(Vec<ScriptedCall>),
    /// Prose that is not a valid decision (a model claiming a tool call in text).
    Raw(TemplateId),
    /// An answer the provider cut off at `max_tokens`, as live models' can be.
    CutOff(TemplateId),
}

pub(crate) struct ScriptedCall {
    pub(crate) name: String,
    pub(crate) arguments: ScriptedArguments,
}

pub(crate) enum ScriptedArguments {
    Json(TValue),
    /// Sent verbatim, typically invalid JSON, to exercise the malformed-arguments path.
    Raw(String),
}

#[derive(Clone, Debug)]
pub(crate) struct LiveModel {
    pub(crate) model: String,
    pub(crate) base_url: String,
    pub(crate) api_key_env: Option<String>,
    pub(crate) temperature: Option<f64>,
    pub(crate) max_tokens: Option<u32>,
    pub(crate) retries: u32,
    pub(crate) timeout: Duration,
    pub(crate) headers: Vec<(String, String)>,
    /// Sent whenever tools are sent: several compatible servers ignore tools without it.
    pub(crate) tool_choice: ToolChoice,
    /// `Some(false)` asks for at most one tool call per turn.
    pub(crate) parallel_tool_calls: Option<bool>,
    /// Provider knobs merged into every request body; never a key toolrun writes itself.
    pub(crate) extra_body: serde_json::Map<String, Value>,
    /// Read the reply as server-sent events, printing text as it arrives.
    pub(crate) stream: bool,
    /// Query parameters added to every request URL (Azure's `api-version`).
    pub(crate) query: Vec<(String, String)>,
    /// The header that carries the key verbatim (Azure's `api-key`), instead of the
    /// provider's own (`Authorization: Bearer` or `x-api-key`).
    pub(crate) api_key_header: Option<String>,
    /// Most requests in flight at once to this model, across every run of the process.
    pub(crate) max_concurrency: Option<u32>,
    /// Most requests started per minute, across every run of the process (evenly spaced).
    pub(crate) requests_per_minute: Option<u32>,
    /// Which OpenAI API a `kind: openai` model speaks (always `Chat` for Anthropic).
    pub(crate) api: OpenAiApi,
    /// `reasoning: { effort, summary }`, sent as the Responses API's `reasoning`.
    pub(crate) reasoning: Option<ReasoningSettings>,
}

/// `api:` of a `kind: openai` model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum OpenAiApi {
    /// `POST /chat/completions`, which every compatible server speaks.
    #[default]
    Chat,
    /// `POST /responses`, which carries a reasoning model's reasoning between tool calls.
    Responses,
}

/// The Responses API's `reasoning` knobs, as written in the spec (checked against the values
/// the API documents).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReasoningSettings {
    pub(crate) effort: Option<String>,
    pub(crate) summary: Option<String>,
}

/// Whether the model may, must or must not call a tool, provider-neutral.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum ToolChoice {
    #[default]
    Auto,
    Required,
    None,
    Tool(String),
}

/// A regex checked at compile time but built on first use: building automata is most of a small
/// run's start-up, and a run tries only the scripts up to the first match. It only answers
/// whether a text matches, so it is built without captures and without the literal prefilter
/// (a `(?i)gain` prefilter alone cost more than the rest of the regex: 0.3M instructions).
pub(crate) struct LazyRegex {
    pattern: String,
    built: std::sync::OnceLock<Result<regex_automata::meta::Regex, String>>,
}

/// Linear-time engine, bounded size: a `when` can never backtrack or eat memory.
pub(crate) const REGEX_SIZE_LIMIT: usize = 1 << 20;

impl LazyRegex {
    pub(crate) fn new(pattern: &str) -> LazyRegex {
        LazyRegex {
            pattern: pattern.to_string(),
            built: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.pattern
    }

    fn regex(&self) -> Result<&regex_automata::meta::Regex, String> {
        use regex_automata::{meta, nfa::thompson::WhichCaptures};
        self.built
            .get_or_init(|| {
                let config = meta::Config::new()
                    .auto_prefilter(false)
                    .which_captures(WhichCaptures::None)
                    .nfa_size_limit(Some(REGEX_SIZE_LIMIT));
                meta::Builder::new()
                    .configure(config)
                    .build(&self.pattern)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| format!("regular expression `{}`: {e}", self.pattern))
    }

    /// A pattern too large to build matches nothing (and `check` reported it already).
    pub(crate) fn is_match(&self, text: &str) -> bool {
        if let Some(found) = self.literal_match(text) {
            return found;
        }
        self.regex().is_ok_and(|r| r.is_match(text))
    }

    /// A plain word or phrase, maybe case-insensitive (`(?i)gain`, the usual `when`), answered
    /// by a substring search: building even the leanest regex for it cost 0.15M instructions,
    /// a tenth of a cold run. `None` when the regex must answer: any metacharacter, a non-ASCII
    /// literal, or a case-insensitive search in non-ASCII text (Unicode folds `K` (Kelvin) to `k`
    /// and `ſ` to `s`; in ASCII text ASCII folding is the same as Unicode's).
    fn literal_match(&self, text: &str) -> Option<bool> {
        let (fold, literal) = match self.pattern.strip_prefix("(?i)") {
            Some(rest) => (true, rest),
            None => (false, self.pattern.as_str()),
        };
        let plain = |b: u8| b.is_ascii() && !regex_syntax::is_meta_character(char::from(b));
        if literal.is_empty() || !literal.bytes().all(plain) {
            return None;
        }
        if !fold {
            return Some(text.contains(literal));
        }
        if !text.is_ascii() {
            return None;
        }
        let needle = literal.as_bytes();
        Some(
            text.as_bytes()
                .windows(needle.len())
                .any(|w| w.eq_ignore_ascii_case(needle)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::LazyRegex;

    #[test]
    fn lazy_regexes_match_like_the_regex_crate() {
        let gain = LazyRegex::new("(?i)gain");
        assert!(gain.is_match("What is the GAIN on 100 AAPL?"));
        assert!(!gain.is_match("What is the price?"));
        // Named groups are allowed; nothing is captured.
        let price = LazyRegex::new("(?i)price of (?P<t>[A-Z]+)");
        assert!(price.is_match("the price of MSFT"));
        assert!(LazyRegex::new(r"^\p{Greek}+$").is_match("αβγ"));
        assert!(LazyRegex::new("who|what does").is_match("what does it do"));
    }

    #[test]
    fn plain_literals_answer_like_the_regex_they_are() {
        let texts = [
            "What is the GAIN on 100 AAPL?",
            "gai",
            "",
            "again and again",
            "Gain in straße",
            "ſ and \u{212a}: s k",
            "Ask K",
            "price of  MSFT",
        ];
        for pattern in [
            "(?i)gain",
            "gain",
            "(?i)s",
            "(?i)k",
            "(?i)price of",
            "K",
            "(?i)a b",
        ] {
            let lazy = LazyRegex::new(pattern);
            let regex = regex::Regex::new(pattern).unwrap();
            for text in texts {
                assert_eq!(
                    lazy.is_match(text),
                    regex.is_match(text),
                    "{pattern} in {text}"
                );
            }
        }
        assert!(LazyRegex::new("(?i)gain").literal_match("GAIN").is_some());
        assert!(
            LazyRegex::new("(?i)s").literal_match("ſ").is_none(),
            "Unicode folding"
        );
        assert!(LazyRegex::new("gain|loss").literal_match("gain").is_none());
        assert!(LazyRegex::new("(?x)gain").literal_match("gain").is_none());
    }

    #[test]
    fn a_pattern_over_the_size_limit_matches_nothing() {
        let huge = LazyRegex::new(r"\w{1000}\w{1000}\w{1000}");
        assert!(!huge.is_match(&"a".repeat(3000)));
        let err = huge.regex().err().unwrap_or_default();
        assert!(err.contains(r"regular expression `\w{1000}"), "{err}");
    }
}
