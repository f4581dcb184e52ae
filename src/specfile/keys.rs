//! The spec's shape, declared once. Each place in a spec (the root, a tool of each kind, a model,
//! a test, ...) is a [`Place`] listing its keys; each [`Key`] has its JSON Schema type, its
//! documentation and whether it is required. Everything else is derived from these tables:
//! - the reader ([`super::read::Obj`]) rejects keys a place does not declare, with a did-you-mean;
//! - `toolrun schema` (and the committed `toolrun.schema.json`) is generated from them;
//! - reading a key its place does not declare is a bug caught in debug builds, and a test checks
//!   that the compiler reads every declared key, so a key cannot be added in one place only.
//!
//! To add a key: add one `Key::new(name, type, doc)` line to its place (`.required()` if the
//! spec is invalid without it), read it in `compile/`, then regenerate the schema file with
//! `UPDATE_SNAPSHOTS=1 cargo test --lib committed_schema_file_is_current`. A new nested mapping
//! is a new `Place` (read with `Obj::new(node, what, keys::NEW, d)`), listed in [`PLACES`] and
//! referenced with `Ty::Ref("new")`. A new tool or model kind is a line in [`TOOL_KINDS`] or
//! [`MODEL_KINDS`].

use serde_json::{json, Value};
use Ty::*;

/// One mapping of the format. `def` names it in the schema's `$defs` (the root is `spec`).
pub(crate) struct Place {
    pub(crate) def: &'static str,
    pub(crate) doc: &'static str,
    /// Keys shared with sibling places, listed first (every tool kind takes the common tool keys).
    pub(crate) base: Option<&'static Place>,
    pub(crate) keys: &'static [Key],
    /// Exactly one of the keys must be present (a turn).
    pub(crate) exactly_one: bool,
}

/// One key of a place.
pub(crate) struct Key {
    pub(crate) name: &'static str,
    pub(crate) ty: Ty,
    pub(crate) doc: &'static str,
    pub(crate) required: bool,
}

/// A key's JSON Schema type, as the schema generator writes it.
#[derive(Clone, Copy)]
pub(crate) enum Ty {
    Str,
    Bool,
    /// Any JSON object.
    Object,
    /// Any JSON value.
    Any,
    Strings,
    /// A list of tool names, each at most once.
    ToolNames,
    /// A whole number of at least this much.
    Count(i64),
    /// A string matching this regular expression.
    Pattern(&'static str),
    Enum(&'static [&'static str]),
    /// Another place, or a shared definition (`duration`, `texts`), by its `$defs` name.
    Ref(&'static str),
    /// A list of another place.
    ListOf(&'static str),
    /// `kind`: the kind's name, derived from [`TOOL_KINDS`] / [`MODEL_KINDS`].
    KindName,
    /// One of these words, or an object of this place (`tool_choice: auto` or `{ tool: NAME }`).
    EnumOr(&'static [&'static str], &'static Place),
    /// Anything else, written as JSON Schema.
    Json(fn() -> Value),
}

impl Key {
    pub(crate) const fn new(name: &'static str, ty: Ty, doc: &'static str) -> Key {
        Key {
            name,
            ty,
            doc,
            required: false,
        }
    }

    pub(crate) const fn required(self) -> Key {
        Key {
            required: true,
            ..self
        }
    }
}

impl Place {
    pub(crate) const fn new(def: &'static str, doc: &'static str, keys: &'static [Key]) -> Place {
        Place {
            def,
            doc,
            base: None,
            keys,
            exactly_one: false,
        }
    }

    const fn with_base(self, base: &'static Place) -> Place {
        Place {
            base: Some(base),
            ..self
        }
    }

    const fn exactly_one(self) -> Place {
        Place {
            exactly_one: true,
            ..self
        }
    }

    /// Every key the place accepts: its base's first, then its own.
    pub(crate) fn all_keys(&self) -> impl Iterator<Item = &'static Key> + '_ {
        self.base
            .into_iter()
            .flat_map(|b| b.keys.iter())
            .chain(self.keys.iter())
    }

    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.all_keys().map(|k| k.name).collect()
    }

    pub(crate) fn key(&self, name: &str) -> Option<&'static Key> {
        self.all_keys().find(|k| k.name == name)
    }

    pub(crate) fn declares(&self, name: &str) -> bool {
        self.key(name).is_some()
    }

    /// The key is the place's own, not its base's.
    pub(crate) fn owns(&self, name: &str) -> bool {
        self.keys.iter().any(|k| k.name == name)
    }
}

/// A value of `kind:` and the place that describes a mapping of that kind.
pub(crate) struct Kind {
    pub(crate) name: &'static str,
    pub(crate) place: &'static Place,
}

pub(crate) const TOOL_KINDS: &[Kind] = &[
    Kind { name: "mock", place: TOOL_MOCK },
    Kind { name: "table", place: TOOL_TABLE },
    Kind { name: "builtin", place: TOOL_BUILTIN },
    Kind { name: "http", place: TOOL_HTTP },
    Kind { name: "mcp", place: TOOL_MCP },
];

pub(crate) const MODEL_KINDS: &[Kind] = &[
    Kind { name: "scripted", place: MODEL_SCRIPTED },
    Kind { name: "openai", place: MODEL_LIVE },
    Kind { name: "anthropic", place: MODEL_LIVE },
];

pub(crate) fn kind_names(kinds: &'static [Kind]) -> impl Iterator<Item = &'static str> + Clone {
    kinds.iter().map(|k| k.name)
}

pub(crate) fn find_kind(kinds: &'static [Kind], name: &str) -> Option<&'static Kind> {
    kinds.iter().find(|k| k.name == name)
}

/// Every place with its own `$defs` entry in the schema, the root first. The tool and model
/// dispatchers, `duration` and `texts` are written by the schema generator itself.
pub(crate) const PLACES: &[&Place] = &[
    TOP,
    TOOL_MOCK,
    TOOL_TABLE,
    TOOL_BUILTIN,
    TOOL_HTTP,
    TOOL_MCP,
    MCP_AUTH,
    MCP_OAUTH,
    MCP_TOOL,
    MOCK_RESPONSE,
    NOTIFY,
    NOTIFY_LOG,
    NOTIFY_PROGRESS,
    ERROR_OBJECT,
    REQUEST,
    HTTP_RESPONSE,
    FAULT,
    POLICY,
    NETWORK,
    LIMITS,
    SERVE,
    SERVE_AUTH,
    MODEL_SCRIPTED,
    MODEL_LIVE,
    REASONING,
    PRICE,
    SCRIPT,
    TURN,
    SCRIPTED_CALL,
    TEST,
    TEST_TURN,
    EXPECT,
    JUDGE,
    REPLAY,
];

const DURATION: Ty = Ref("duration");

pub(crate) const TOP: &Place = &Place::new("spec", "A toolrun spec: tools, policy, limits, models and tests.", &[
    Key::new("version", Json(|| json!({ "const": 1 })), "Version of the spec format; always 1.").required(),
    Key::new("name", Str, "Name of the spec (default: the file name)."),
    Key::new("description", Str, "What this spec's assistant does."),
    Key::new("system", Str, "System prompt sent to live models."),
    Key::new("default_model", Str, "The model `toolrun run` uses; needed when several are declared."),
    Key::new("tools", Json(|| json!({ "type": "object", "propertyNames": { "pattern": "^[A-Za-z_][A-Za-z0-9_-]{0,63}$" }, "additionalProperties": { "$ref": "#/$defs/tool" } })), "Tools by name. Names must match ^[A-Za-z_][A-Za-z0-9_-]{0,63}$, the rule every provider accepts."),
    Key::new("secrets", Json(|| json!({ "type": "array", "items": { "type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$" }, "uniqueItems": true })), "The only environment variables templates may read, as `{{ secrets.NAME }}`."),
    Key::new("policy", Ref("policy"), "Which tools may run, which need confirmation, loop detection, network rules."),
    Key::new("limits", Ref("limits"), "Budgets that stop a run."),
    Key::new("serve", Ref("serve"), "Limits of a session served by `toolrun serve` (a client's session is not a run)."),
    Key::new("models", Json(|| json!({ "type": "object", "additionalProperties": { "$ref": "#/$defs/model" } })), "Models by name."),
    Key::new("tests", ListOf("test"), "Tests run by `toolrun test`."),
    Key::new("replay", Ref("replay"), "Settings for `toolrun replay`."),
    Key::new("fixtures", Str, "Folder of per-test fixtures, relative to the spec: a test's fixture is `DIR/<test name>.json` unless it sets `fixture:`; `{model}` in DIR is the model the test runs with (one set of fixtures per model). `toolrun test --record missing|all` writes them."),
]);

/// Keys every tool kind takes; each kind's place lists its own after these.
pub(crate) const TOOL: &Place = &Place::new("tool", "A tool; `kind` decides which other keys it takes.", &[
    Key::new("description", Json(|| json!({ "type": "string", "minLength": 1 })), "What the tool does and returns; models choose tools by it."),
    Key::new("kind", KindName, "How the tool runs: mock, table, builtin, http or mcp.").required(),
    Key::new("side_effects", Bool, "The tool changes the world; it needs confirmation before it runs."),
    Key::new("idempotent", Bool, "Calling twice is the same as once, so retries are safe (default: from the method or kind)."),
    Key::new("max_calls", Count(1), "Most calls of this tool per run."),
    Key::new("timeout", DURATION, "Timeout of one call (default: `limits.tool_timeout`)."),
    Key::new("faults", ListOf("fault"), "Injected faults, for testing how the loop copes."),
    Key::new("scopes", SCOPES, "OAuth scopes a client's token must carry to see and call this tool through `toolrun serve --http` with `serve.auth` (besides `serve.auth.scopes`)."),
    Key::new("task", Enum(&["optional", "required"]), "Served on MCP 2026-07-28 to a client that declared the tasks extension (`io.modelcontextprotocol/tasks`), a call runs as a task the client polls: `optional` (a client without the extension gets the result at once) or `required` (such a client is refused with -32021)."),
]);

/// A list of OAuth scope tokens (RFC 6749 section 3.3: printable ASCII but space, `"` and `\`).
const SCOPES: Ty = Json(|| json!({ "type": "array", "items": { "type": "string", "pattern": "^[!#-\\[\\]-~]+$" }, "uniqueItems": true }));

const INPUT: Key = Key::new("input", Json(|| json!({ "type": "object", "properties": { "type": { "const": "object" } } })), "JSON Schema of the arguments: an object schema.");

pub(crate) const TOOL_MOCK: &Place = &Place::new("tool_mock", "A `mock` tool: canned responses chosen by its arguments.", &[
    INPUT,
    Key::new("responses", Json(|| json!({ "type": "array", "items": { "$ref": "#/$defs/mock_response" }, "minItems": 1 })), "Responses; the first whose `when` matches the arguments wins.").required(),
])
.with_base(TOOL);

pub(crate) const TOOL_TABLE: &Place = &Place::new("tool_table", "A `table` tool: looks up rows of a small table (inline `rows` or a `file`).", &[
    Key::new("rows", Json(|| json!({ "type": "array", "items": { "type": "object" } })), "The rows, each a mapping of column to value."),
    Key::new("file", Pattern("\\.([cC][sS][vV]|[jJ][sS][oO][nN])$"), "A CSV or JSON file of rows, relative to the spec's folder (and inside it)."),
    Key::new("empty_as", Json(|| json!({ "type": ["string", "null"] })), "What an empty CSV cell becomes: `null` (the default) or a string, e.g. `\"\"` to keep empty strings."),
])
.with_base(TOOL);

pub(crate) const TOOL_BUILTIN: &Place = &Place::new("tool_builtin", "A `builtin` tool: a safe function shipped with toolrun.", &[
    Key::new("builtin", Json(|| json!({ "enum": crate::builtins::all().iter().map(|b| b.name).collect::<Vec<_>>() })), "Which builtin; its input schema comes with it.").required(),
])
.with_base(TOOL);

pub(crate) const TOOL_HTTP: &Place = &Place::new("tool_http", "An `http` tool: one templated HTTP request.", &[
    INPUT,
    Key::new("request", Ref("request"), "The HTTP request to send.").required(),
    Key::new("response", Ref("http_response"), "How the response becomes the result."),
    Key::new("retries", Count(0), "Retries on network errors and 5xx, for idempotent calls only."),
])
.with_base(TOOL);

/// A `kind: mcp` entry names a remote MCP server and the tools used from it: it becomes one
/// registry tool per entry of its `tools:` list, and the common keys apply to each.
pub(crate) const TOOL_MCP: &Place = &Place::new("tool_mcp", "An `mcp` tool: tools of an MCP server (streamable HTTP at `url`, or a program spoken to over stdio, `command`), one tool per entry of `tools`.", &[
    Key::new("url", Pattern("^[hH][tT][tT][pP][sS]?://"), "The MCP server's streamable-HTTP endpoint (`https://mcp.example.com/mcp`), written as it is; its host must be allowed like an `http` tool's. Either this or `command`."),
    Key::new("command", Json(|| json!({ "type": "array", "minItems": 1, "items": { "type": "string" } })), "A stdio MCP server: the program and its arguments (`[npx, -y, \"@modelcontextprotocol/server-filesystem\", ./data]`), never a shell line; started in the project root only when `--allow-exec PROGRAM` allows it. Either this or `url`."),
    Key::new("env", Json(|| json!({ "type": "object", "additionalProperties": { "type": ["string", "integer"] } })), "Environment of a stdio server: values are templates over `secrets`. Of toolrun's own environment only HOME, LOGNAME, PATH, SHELL, TERM and USER are passed on."),
    Key::new("headers", Json(|| json!({ "type": "object", "additionalProperties": { "type": ["string", "integer"] } })), "Headers sent with every MCP request; values are templates over `secrets`."),
    Key::new("auth", Ref("mcp_auth"), "How toolrun gets credentials for an HTTP server that asks for them: `oauth:` (OAuth 2.1, as the MCP authorization spec says)."),
    Key::new("elicitation", Enum(&["decline", "defaults"]), "What toolrun answers when the server asks for input during a call (`elicitation/create`, or at 2026-07-28 an `input_required` result): `decline` (default), or `defaults`: accept with the requested schema's default values when every required field has one, else decline."),
    Key::new("startup_timeout", DURATION, "Bounds connecting to the server: starting a stdio server's program, `initialize` (or `server/discover`) and `tools/list` (default: the entry's `timeout`, which bounds each call)."),
    Key::new("protocol", Enum(&["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]), "Pins the MCP revision spoken to the server. By default an HTTP server is asked `server/discover` (2026-07-28) and one that speaks an older revision gets `initialize`; a stdio server gets `initialize`. `2026-07-28`: discovery only, no fallback; an older revision: `initialize` at that revision, no discovery."),
    Key::new("tools", Json(|| json!({ "anyOf": [{ "const": "*" }, { "type": "array", "minItems": 1, "items": { "anyOf": [{ "type": "string" }, { "$ref": "#/$defs/mcp_tool" }] } }] })), "The server's tools to use: a remote name, or `{name, as, description, input}`; or `\"*\"`, every tool the server lists (found when a run starts, kept in its recording).").required(),
])
.with_base(TOOL);

pub(crate) const MCP_AUTH: &Place = &Place::new("mcp_auth", "Credentials toolrun gets for an MCP server over HTTP.", &[
    Key::new("oauth", Ref("mcp_oauth"), "OAuth 2.1: on a 401 the server's protected-resource and authorization-server metadata are discovered and a token is obtained (`toolrun auth login`, or `grant: client_credentials`); `{}` takes every default."),
]);

pub(crate) const MCP_OAUTH: &Place = &Place::new("mcp_oauth", "An OAuth 2.1 client for one MCP server; every key is optional.", &[
    Key::new("client_id", Str, "A pre-registered client id (a template over `secrets`). Without it toolrun uses `client_metadata_url` when the authorization server accepts it, else registers itself dynamically (RFC 7591)."),
    Key::new("client_secret", Str, "The pre-registered client's secret (a template over `secrets`), sent as the authorization server prefers (`client_secret_basic` or `client_secret_post`)."),
    Key::new("private_key", Str, "A PEM private key (PKCS#8; EC P-256 or RSA), a template over `secrets`: the client authenticates with an RFC 7523 assertion it signs (`private_key_jwt`)."),
    Key::new("client_metadata_url", Pattern("^[hH][tT][tT][pP][sS]://"), "An HTTPS URL of a client ID metadata document describing toolrun as your client: its client id where the authorization server supports such documents."),
    Key::new("scopes", Strings, "Scopes to ask for (default: those of the server's challenge, else all it lists in `scopes_supported`)."),
    Key::new("grant", Enum(&["authorization_code", "client_credentials"]), "`authorization_code` (default): a person logs in in the browser (`toolrun auth login`); `client_credentials`: the client's own credentials, for CI (needs `client_id` and `client_secret` or `private_key`)."),
]);

pub(crate) const MCP_TOOL: &Place = &Place::new("mcp_tool", "A remote MCP tool to use: its name on the server, optionally renamed, described and with its input schema pinned.", &[
    Key::new("name", Str, "The tool's name on the MCP server.").required(),
    Key::new("as", Pattern("^[A-Za-z_][A-Za-z0-9_-]{0,63}$"), "The name models, policy and tests use (default: `name`)."),
    Key::new("description", Json(|| json!({ "type": "string", "minLength": 1 })), "Replaces the server's description of the tool."),
    Key::new("input", Json(|| json!({ "type": "object", "properties": { "type": { "const": "object" } } })), "Pinned input schema: a run stops before the model is called if the server's schema differs."),
    Key::new("side_effects", Bool, "The spec's word on this tool: true needs confirmation; false overrides the server's annotations (which otherwise can only add confirmation)."),
]);

pub(crate) const MOCK_RESPONSE: &Place = &Place::new("mock_response", "One mock response: `result`, `content` or `error`, chosen when `when` matches (no `when`: the fallback).", &[
    Key::new("when", Object, "Arguments that must match (a subset); no `when` makes this the fallback."),
    Key::new("result", Any, "The result, any JSON value; strings are templates over `args` and `query`."),
    Key::new("error", Json(|| json!({ "anyOf": [{ "type": "string" }, { "$ref": "#/$defs/error_object" }] })), "An error message (kind `execution_error`), or `{kind, message}`."),
    Key::new("content", Json(|| json!({ "type": "array", "minItems": 1, "items": { "type": "object", "required": ["type"], "properties": { "type": { "enum": crate::vocab::MCP_CONTENT_TYPES } } } })), "MCP content items, in MCP's field names (`type`: text, image, audio, resource, resource_link; `text`, `data`, `mimeType`, `resource: {uri, mimeType, text|blob}`, `uri`, `name`), served as they are; the model reads their text and a placeholder for the rest. With `result`, the result is the `structuredContent`. Strings are templates over `args` and `query`."),
    Key::new("notify", ListOf("notify"), "Notifications sent in order before the result: `{log: {level, data}}`, `{progress: {progress, total, message}}` or `{reconnect: true}`. Served over MCP they are `notifications/message` (at or above the client's `logging/setLevel`) and `notifications/progress` (when the client sent a `progressToken`); in runs they are `tool_notify` lines of `--events`. Strings are templates over `args` and `query`."),
]);

pub(crate) const NOTIFY: &Place = &Place::new("notify", "One notification a mock sends before its result: exactly one of `log`, `progress` or `reconnect`.", &[
    Key::new("log", Ref("notify_log"), "A log message (MCP `notifications/message`)."),
    Key::new("progress", Ref("notify_progress"), "Progress (MCP `notifications/progress`)."),
    Key::new("reconnect", Bool, "`true`: served over streamable HTTP, the call's event stream closes here and the client comes back with `GET` and `Last-Event-ID` for the rest (SEP-1699 polling); the result waits in the session's event store."),
]).exactly_one();

pub(crate) const NOTIFY_LOG: &Place = &Place::new("notify_log", "A log message with its severity.", &[
    Key::new("level", Enum(crate::vocab::MCP_LOG_LEVELS), "Severity, as syslog (RFC 5424) and MCP name them.").required(),
    Key::new("data", Any, "The message: text or any JSON.").required(),
    Key::new("logger", Str, "The logger's name (optional)."),
]);

pub(crate) const NOTIFY_PROGRESS: &Place = &Place::new("notify_progress", "How far the call has come.", &[
    Key::new("progress", Json(|| json!({ "type": "number" })), "Progress so far; increases with each notification.").required(),
    Key::new("total", Json(|| json!({ "type": "number" })), "The total, when known."),
    Key::new("message", Str, "What is happening."),
]);

pub(crate) const ERROR_OBJECT: &Place = &Place::new("error_object", "A tool error with its kind.", &[
    Key::new("kind", Enum(crate::vocab::ErrorKind::NAMES), "The error kind the model sees."),
    Key::new("message", Str, "The message, a template over `args` and `query`.").required(),
]);

pub(crate) const REQUEST: &Place = &Place::new("request", "The HTTP request; strings are minijinja templates over `args`, `secrets` and `query`.", &[
    Key::new("method", Enum(&["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "get", "post", "put", "patch", "delete", "head", "options"]), "HTTP method (default: GET)."),
    Key::new("url", Str, "The URL, http:// or https://, a template.").required(),
    Key::new("query", Object, "Query parameters, added URL-encoded; values are templates."),
    Key::new("headers", Json(|| json!({ "type": "object", "additionalProperties": { "type": ["string", "integer"] } })), "Headers; values are templates."),
    Key::new("body", Any, "A JSON body; strings inside are templates."),
    Key::new("body_text", Str, "A text body, a template (instead of `body`)."),
]);

pub(crate) const HTTP_RESPONSE: &Place = &Place::new("http_response", "How the HTTP response becomes the tool's result.", &[
    Key::new("pointer", Pattern("^(/.*)?$"), "JSON Pointer into the response body; the result is what it points at."),
    Key::new("max_bytes", Count(1), "Largest response body read, in bytes."),
    Key::new("max_redirects", Count(0), "Redirects followed (each to an allowed host)."),
]);

pub(crate) const FAULT: &Place = &Place::new("fault", "An injected fault, for testing how the loop copes: exactly one of `fail_first`, `timeout`, `http_status`, `oversized_output`, `delay`.", &[
    Key::new("fail_first", Count(1), "Fail the first N calls."),
    Key::new("kind", Enum(crate::vocab::ErrorKind::NAMES), "Error kind of `fail_first` failures."),
    Key::new("message", Str, "Error message of `fail_first` failures."),
    Key::new("timeout", Bool, "Every call times out."),
    Key::new("http_status", Json(|| json!({ "type": "integer", "minimum": 100, "maximum": 599 })), "Every call gets this HTTP status."),
    Key::new("oversized_output", Count(1), "Every call returns this many characters."),
    Key::new("delay", DURATION, "Every call waits this long first (a slow tool; the tool's timeout still applies)."),
]);

pub(crate) const POLICY: &Place = &Place::new("policy", "Which tools may run, which need confirmation, loop detection and network rules.", &[
    Key::new("allow", ToolNames, "Tools that may run; others are denied (default: all)."),
    Key::new("deny", ToolNames, "Tools that never run."),
    Key::new("confirm", ToolNames, "Tools that need confirmation (`--approve TOOL`); `side_effects: true` tools always do."),
    Key::new("max_identical_calls", Count(1), "Loop detection: most calls with the same tool and arguments."),
    Key::new("max_repeated_errors", Count(1), "Stop after this many errors in a row from one tool."),
    Key::new("detect_alternation", Bool, "Loop detection: stop on A, B, A, B call patterns."),
    Key::new("network", Ref("network"), "Network rules for `http` tools."),
]);

pub(crate) const NETWORK: &Place = &Place::new("network", "Network rules for `http` and `mcp` tools.", &[
    Key::new("allow_hosts", Strings, "Hosts `http` and `mcp` tools may reach (`api.example.com`, `127.0.0.1:8080`); default: the hosts written in URLs."),
]);

pub(crate) const LIMITS: &Place = &Place::new("limits", "Budgets that stop a run.", &[
    Key::new("max_steps", Count(1), "Most model calls per run."),
    Key::new("max_tool_calls", Count(1), "Most tool executions per run."),
    Key::new("max_parallel_tools", Count(1), "Most tool calls running at once."),
    Key::new("tool_timeout", DURATION, "Default timeout of one tool call."),
    Key::new("run_timeout", DURATION, "Timeout of the whole run."),
    Key::new("max_tool_output_chars", Count(16), "Longer observations are truncated, with a marker."),
    Key::new("max_tokens_total", Count(1), "Most tokens used by live models per run."),
    Key::new("max_cost_usd", Json(|| json!({ "type": "number", "exclusiveMinimum": 0 })), "Most USD a run may spend, from its model's `price:`; checked before each model call."),
]);

pub(crate) const SERVE: &Place = &Place::new("serve", "Limits of one MCP session of `toolrun serve`; a long-lived client's session is not a run, so `limits.max_tool_calls` and `policy.max_identical_calls` do not apply to it.", &[
    Key::new("max_tool_calls", Count(1), "Most tool executions per session (default 1000); a new session starts again."),
    Key::new("max_repeated_calls", Count(1), "Most identical calls (same tool, same arguments) in a row in a session before the next is refused as a loop (default 5); different calls of one tool are never stopped."),
    Key::new("auth", Ref("serve_auth"), "`serve --http` as an OAuth 2.1 resource server: every request carries an access token of this issuer for this audience."),
]);

pub(crate) const SERVE_AUTH: &Place = &Place::new("serve_auth", "OAuth for `toolrun serve --http`: access tokens (JWTs checked against the issuer's keys, or opaque ones through its introspection endpoint) issued by `issuer` for `audience`; protected-resource metadata (RFC 9728) is published for clients to find the issuer.", &[
    Key::new("issuer", Pattern("^[hH][tT][tT][pP][sS]?://"), "The authorization server, exactly as its metadata and its tokens' `iss` spell it; its metadata gives `jwks_uri` (and `introspection_endpoint`). https, or http on a loopback address; its host must be allowed like an `http` tool's.").required(),
    Key::new("audience", Pattern("^[hH][tT][tT][pP][sS]?://"), "This server's resource URL (`https://tools.example.com/mcp`): a token's `aud` must name it.").required(),
    Key::new("scopes", SCOPES, "Scopes every request's token must carry."),
    Key::new("client_id", Str, "For opaque tokens: the client ID toolrun introspects them with (RFC 7662), a template over `secrets`."),
    Key::new("client_secret", Str, "For opaque tokens: that client's secret, a template over `secrets`."),
]);

/// Keys every model kind takes; each kind's place lists its own after these.
pub(crate) const MODEL: &Place = &Place::new("model", "A model; `kind` decides which other keys it takes.", &[
    Key::new("kind", KindName, "The kind of model: `scripted` (replies follow scripts), or the API of a live one: `openai` (any compatible server) or `anthropic`.").required(),
]);

pub(crate) const MODEL_SCRIPTED: &Place = &Place::new("model_scripted", "A scripted model: replies follow scripts, for offline tests.", &[Key::new("scripts", ListOf("script"), "Scripts; the first whose `when` matches the query plays.").required(),
])
.with_base(MODEL);

pub(crate) const MODEL_LIVE: &Place = &Place::new("model_live", "A live model behind an OpenAI-compatible or Anthropic API.", &[
    Key::new("model", Str, "The provider's model name.").required(),
    Key::new("base_url", Pattern("^[hH][tT][tT][pP][sS]?://"), "API base URL."),
    Key::new("api_key_env", Str, "Environment variable holding the API key."),
    Key::new("temperature", Json(|| json!({ "type": "number", "minimum": 0, "maximum": 2 })), "Sampling temperature."),
    Key::new("max_tokens", Count(1), "Most tokens per reply."),
    Key::new("retries", Count(0), "Retries on rate limits and server errors."),
    Key::new("timeout", DURATION, "Timeout of one model call."),
    Key::new("headers", Json(|| json!({ "type": "object", "additionalProperties": { "type": "string" } })), "Extra HTTP headers; not Authorization, x-api-key or api-key (use `api_key_env`)."),
    Key::new("price", Ref("price"), "USD per million tokens (`input`, `output`), for the cost in `toolrun test --results`."),
    Key::new("tool_choice", EnumOr(&["auto", "required", "none"], TOOL_CHOICE), "auto (default, sent whenever tools are), required, none, or { tool: NAME } to force one; a forced choice holds until the first tool call."),
    Key::new("parallel_tool_calls", Bool, "false: at most one tool call per turn."),
    Key::new("extra_body", Json(|| json!({ "type": "object", "propertyNames": { "not": { "enum": OWNED_BODY_KEYS.iter().map(|(k, _)| *k).collect::<Vec<_>>() } } })), "Provider knobs merged into every request body (seed, top_p, response_format, ...); not keys toolrun writes."),
    Key::new("stream", Bool, "Read the reply as server-sent events and print text as it arrives."),
    Key::new("query", Json(|| json!({ "type": "object", "additionalProperties": { "type": "string" } })), "Query parameters added to every request (Azure: api-version)."),
    Key::new("api_key_header", Str, "Send the key verbatim in this header (Azure: api-key) instead of the provider's own."),
    Key::new("max_concurrency", Count(1), "Most requests in flight to this model at once, across every `--jobs` worker (models with the same base_url, model and api_key_env share one limit)."),
    Key::new("requests_per_minute", Count(1), "Most requests started per minute, spaced evenly, across every `--jobs` worker; a 429 pauses every worker of the model for its Retry-After."),
    Key::new("api", Enum(OPENAI_APIS), "`kind: openai` only: `chat` (default, POST /chat/completions) or `responses` (POST /responses, which carries reasoning between tool calls)."),
    Key::new("reasoning", Ref("reasoning"), "`api: responses` only: the Responses API's `reasoning` knobs (`effort`, `summary`)."),
])
.with_base(MODEL);

/// The values of `api:` on a `kind: openai` model.
pub(crate) const OPENAI_APIS: &[&str] = &["chat", "responses"];
/// `reasoning.effort`, as the Responses API documents it.
pub(crate) const REASONING_EFFORTS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh"];
/// `reasoning.summary`, as the Responses API documents it.
pub(crate) const REASONING_SUMMARIES: &[&str] = &["auto", "concise", "detailed"];

/// `reasoning:` on an `api: responses` model.
pub(crate) const REASONING: &Place = &Place::new("reasoning", "How much a reasoning model reasons, and whether its reasoning is summarised (Responses API).", &[
    Key::new("effort", Enum(REASONING_EFFORTS), "How much the model reasons before it answers."),
    Key::new("summary", Enum(REASONING_SUMMARIES), "Ask for reasoning summaries; they appear in the trace."),
]);

/// `tool_choice: { tool: NAME }`, written inline in the schema.
pub(crate) const TOOL_CHOICE: &Place = &Place::new("tool_choice", "Force the model to call one tool.", &[Key::new("tool", Str, "The tool the model must call.").required(),
]);

/// The Responses API request keys toolrun writes itself (`api: responses`); `extra_body` may
/// not replace them. `store` is not among them: toolrun sends `store: false` unless told.
pub(crate) const RESPONSES_OWNED_BODY_KEYS: &[(&str, &str)] = &[("model", "the model's `model:`"), ("input", "the conversation toolrun builds"), ("instructions", "the spec's `system:`"), ("tools", "the spec's `tools:` and `policy:`"), ("tool_choice", "the model's `tool_choice:`"), ("parallel_tool_calls", "the model's `parallel_tool_calls:`"), ("stream", "the model's `stream:`"), ("max_output_tokens", "the model's `max_tokens:`"), ("temperature", "the model's `temperature:`"), ("reasoning", "the model's `reasoning:`"), ("previous_response_id", "toolrun, which sends the whole conversation every time")];

/// The request keys toolrun writes itself; `extra_body` may not replace them.
pub(crate) const OWNED_BODY_KEYS: &[(&str, &str)] = &[("model", "the model's `model:`"), ("messages", "the conversation toolrun builds"), ("system", "the spec's `system:`"), ("tools", "the spec's `tools:` and `policy:`"), ("functions", "the spec's `tools:` and `policy:`"), ("tool_choice", "the model's `tool_choice:`"), ("function_call", "the model's `tool_choice:`"), ("parallel_tool_calls", "the model's `parallel_tool_calls:`"), ("stream", "the model's `stream:`"), ("stream_options", "the model's `stream:`"), ("max_tokens", "the model's `max_tokens:`"), ("temperature", "the model's `temperature:`"),];

/// `price:` on a live model: USD per million tokens.
pub(crate) const PRICE: &Place = &Place::new("price", "What the model costs, in USD per million tokens; test results then carry cost.", &[
    Key::new("input", Json(|| json!({ "type": "number", "minimum": 0 })), "USD per million input (prompt) tokens.")
    .required(),
    Key::new("output", Json(|| json!({ "type": "number", "minimum": 0 })), "USD per million output (completion) tokens.").required(),
    Key::new("cached_input", Json(|| json!({ "type": "number", "minimum": 0 })), "USD per million input tokens served from the provider's prompt cache (default: `input`)."),
    Key::new("reasoning", Json(|| json!({ "type": "number", "minimum": 0 })), "USD per million reasoning tokens (default: `output`, as providers bill them)."),
]);

pub(crate) const SCRIPT: &Place = &Place::new("script", "A script: the first whose `when` matches the query is played.", &[
    Key::new("when", Str, "Regular expression (Rust syntax) matched against the query (in a conversation: the current user turn); none matches everything."),
    Key::new("turn", Count(1), "Play only for this user turn of a conversation (1 is the first)."),
    Key::new("history", Str, "Regular expression matched against the conversation before this user turn (`user: ...` and `assistant: ...` lines); play only when it matches."),
    Key::new("turns", Json(|| json!({ "type": "array", "items": { "$ref": "#/$defs/turn" }, "minItems": 1 })), "One turn per model call, in order.").required(),
]);

pub(crate) const TURN: &Place = &Place::new("turn", "One model reply: exactly one of `answer`, `tool_calls`, `raw` or `cut_off`.", &[
    Key::new("answer", Str, "The final answer, a template over `query`, `results`, `last`, `step`."),
    Key::new("tool_calls", Json(|| json!({ "type": "array", "items": { "$ref": "#/$defs/scripted_call" }, "minItems": 1 })), "Tool calls made in this turn."),
    Key::new("raw", Str, "A malformed reply: prose instead of a tool call."),
    Key::new("cut_off", Str, "An answer cut off at the model's `max_tokens` (a template): the run ends `needs_review`, stop reason `max_tokens`, with this partial text."),
])
.exactly_one();

pub(crate) const SCRIPTED_CALL: &Place = &Place::new("scripted_call", "A tool call made by a scripted model.", &[
    Key::new("name", Str, "The tool to call.").required(),
    Key::new("arguments", Object, "Arguments; strings are templates."),
    Key::new("arguments_raw", Str, "Arguments as raw text, e.g. invalid JSON on purpose."),
    Key::new("malformed", Bool, "The call is wrong on purpose; skip the check-time validation."),
]);

pub(crate) const TEST: &Place = &Place::new("test", "A test run by `toolrun test`.", &[
    Key::new("name", Str, "Unique name of the test.").required(),
    Key::new("query", Str, "The query to run."),
    Key::new("from", Str, "A CSV or JSONL file, relative to the spec: one test per row, `name`, `query`, `turns` and `expect` templates over `row` (`{{ row.id }}`)."),
    Key::new("turns", ListOf("test_turn"), "A conversation instead of one `query`: each turn a user message with its own `expect`, the model seeing every turn before it."),
    Key::new("model", Str, "Model to use (default: `default_model`)."),
    Key::new("fixture", Str, "A recorded fixture to replay instead, relative to the spec."),
    Key::new("now", Str, "The clock for this test (RFC 3339), for `datetime` and templates; overrides `TOOLRUN_NOW`."),
    Key::new("approve", ToolNames, "Tools approved for this run."),
    Key::new("faults", Json(|| json!({ "type": "object", "additionalProperties": { "type": "array", "items": { "$ref": "#/$defs/fault" } } })), "Faults injected for this test only, by tool name; they replace the tool's own `faults`."),
    Key::new("expect", Ref("expect"), "What the run must show (with `turns`: the whole conversation)."),
]);

pub(crate) const TEST_TURN: &Place = &Place::new("test_turn", "One user turn of a multi-turn test.", &[
    Key::new("query", Str, "What the user says in this turn.").required(),
    Key::new("expect", Ref("expect"), "What this turn must show: its answer, its tool calls, its status."),
]);

pub(crate) const EXPECT: &Place = &Place::new("expect", "What a test's run must show.", &[
    Key::new("status", Enum(crate::vocab::Status::NAMES), "The run's status."),
    Key::new("stop_reason", Enum(crate::vocab::StopReason::NAMES), "The rule that ended the run."),
    Key::new("tool_calls", Strings, "Exactly these tool calls, in order."),
    Key::new("tool_calls_include", Strings, "These tools were called."),
    Key::new("tool_calls_exclude", Strings, "These tools were not called."),
    Key::new("arguments", Json(|| json!({ "type": "array", "items": { "type": "object" } })), "Each call's arguments include these, in order."),
    Key::new("error_kinds", Json(|| json!({ "type": "array", "items": { "enum": crate::vocab::ErrorKind::NAMES } })), "Exactly these tool error kinds, in order."),
    Key::new("output_contains", Ref("texts"), "The answer contains this text (or each of these)."),
    Key::new("output_not_contains", Ref("texts"), "The answer contains none of these."),
    Key::new("output_matches", Str, "The answer matches this regular expression."),
    Key::new("max_tool_calls", Count(0), "At most this many tool calls."),
    Key::new("max_tokens", Count(0), "At most this many tokens (input + output) over every model call of the test."),
    Key::new("max_cost_usd", Json(|| json!({ "type": "number", "minimum": 0 })), "At most this cost in USD, from the model's `price:`."),
    Key::new("max_latency_ms", Json(|| json!({ "type": "number", "minimum": 0 })), "At most this wall time of the run, in milliseconds."),
    Key::new("judge", Ref("judge"), "A grader model scores the answer against a rubric."),
]);

pub(crate) const JUDGE: &Place = &Place::new("judge", "A grader model of the spec scores the final answer (and optionally the trajectory) against a rubric, from 0 to 1.", &[
    Key::new("model", Str, "The grader: a model of this spec (scripted for tests, or live).").required(),
    Key::new("rubric", Str, "What a good answer does; the grader scores against it.").required(),
    Key::new("pass", Json(|| json!({ "type": "number", "minimum": 0, "maximum": 1 })), "The lowest score that passes (default 0.7)."),
    Key::new("trajectory", Bool, "Show the grader every tool call and result too, not only the answer (default false)."),
]);

pub(crate) const REPLAY: &Place = &Place::new("replay", "How `toolrun replay` compares traces.", &[Key::new("ignore", Json(|| json!({ "type": "array", "items": { "type": "string", "pattern": "^(/.*)?$" } })), "JSON Pointers of volatile fields, ignored when replay compares request bodies and traces."),
]);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specfile::read::reads;
    use std::path::Path;

    /// Reaches every place (and every branch that reads a key) at least once.
    const EVERY_PLACE: &[&str] = &[r#"
version: 1
name: every_place
description: d
system: s
default_model: live
secrets: [KEY]
fixtures: fx
replay: { ignore: [/id] }
policy:
  allow: [m, h, t, b]
  deny: []
  confirm: []
  max_identical_calls: 2
  max_repeated_errors: 2
  detect_alternation: true
  network: { allow_hosts: [127.0.0.1] }
limits: { max_steps: 3, max_tool_calls: 3, max_parallel_tools: 1, tool_timeout: 1s, run_timeout: 2s, max_tool_output_chars: 100, max_tokens_total: 10 }
serve:
  max_tool_calls: 5
  max_repeated_calls: 2
  auth: { issuer: "http://127.0.0.1:1", audience: "http://127.0.0.1:2/mcp", scopes: [a.read], client_id: "{{ secrets.KEY }}", client_secret: "{{ secrets.KEY }}" }
tools:
  m:
    description: A mock tool for the test.
    kind: mock
    side_effects: false
    idempotent: true
    max_calls: 2
    timeout: 1s
    scopes: [a.write]
    faults: [{ fail_first: 1, kind: timeout, message: x }, { timeout: true }, { http_status: 500 }, { oversized_output: 10 }, { delay: 1ms }]
    input: { type: object, properties: { a: { type: string } } }
    responses: [{ when: { a: x }, result: 1 }, { error: { kind: not_found, message: no } }, { error: plain }]
  h:
    description: An http tool for the test.
    kind: http
    retries: 1
    request: { method: POST, url: "http://127.0.0.1:1/x", query: { q: "1" }, headers: { h: "1" }, body: { a: 1 } }
    response: { pointer: /a, max_bytes: 10, max_redirects: 0 }
  h2:
    description: An http tool with a text body.
    kind: http
    request: { url: "http://127.0.0.1:1/y", body_text: "t" }
  t:
    description: A table tool for the test.
    kind: table
    rows: [{ a: 1 }]
  f:
    description: A table tool read from a file.
    kind: table
    file: data/candidates.csv
  b:
    description: A builtin tool for the test.
    kind: builtin
    builtin: calculator
models:
  live:
    kind: openai
    model: x
    base_url: "http://127.0.0.1:1/v1"
    api_key_env: KEY
    temperature: 0
    max_tokens: 10
    retries: 0
    timeout: 1s
    headers: { x: y }
    price: { input: 1, output: 2 }
    tool_choice: { tool: m }
    parallel_tool_calls: false
    extra_body: { seed: 1 }
    stream: false
    query: { v: "1" }
    api_key_header: api-key
    api: responses
    reasoning: { effort: low, summary: auto }
  s:
    kind: scripted
    scripts:
      - when: x
        turn: 1
        history: y
        turns:
          - tool_calls: [{ name: m, arguments: { a: x } }, { name: m, arguments_raw: "{", malformed: true }]
          - raw: prose
          - answer: done
tests:
  - name: one
    query: q
    model: s
    fixture: fx/one.json
    now: "2030-01-01T00:00:00Z"
    approve: [m]
    faults: { m: [{ timeout: true }] }
    expect:
      status: ok
      stop_reason: final_answer
      tool_calls: [m]
      tool_calls_include: [m]
      tool_calls_exclude: [h]
      arguments: [{ a: x }]
      error_kinds: []
      output_contains: done
      output_not_contains: [nope]
      output_matches: d.ne
      max_tool_calls: 3
      judge: { model: s, rubric: "is polite", pass: 0.5, trajectory: true }
  - name: two
    turns:
      - query: q
        expect: { status: ok }
"#, r#"
version: 1
secrets: [ID, SECRET, KEY]
tools:
  notes:
    kind: mcp
    url: https://notes.example.com/mcp
    tools: [search]
    auth:
      oauth:
        client_id: "{{ secrets.ID }}"
        client_secret: "{{ secrets.SECRET }}"
        private_key: "{{ secrets.KEY }}"
        client_metadata_url: https://example.com/client.json
        scopes: [notes.read]
        grant: client_credentials
"#];

    fn compile_all() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs");
        let mut texts: Vec<String> = EVERY_PLACE.iter().map(|t| t.to_string()).collect();
        for entry in std::fs::read_dir(&dir).expect("specs/") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "yaml") {
                texts.push(std::fs::read_to_string(&path).expect("read"));
            }
        }
        for text in texts {
            let source = crate::specfile::Source::new("every_place.yaml", text);
            crate::compile::compile(&source, &dir.join("every_place.yaml"));
        }
    }

    /// A key declared here but read nowhere is a key the schema offers and the compiler
    /// ignores; the reverse (read, not declared) panics in `Obj::get` while compiling.
    #[test]
    fn the_compiler_reads_every_declared_key() {
        compile_all();
        let places = PLACES.iter().chain([&TOOL, &MODEL, &TOOL_CHOICE]);
        let mut unread = Vec::new();
        for place in places {
            for key in place.keys {
                if !reads::seen(place.def, key.name) {
                    unread.push(format!("{}.{}", place.def, key.name));
                }
            }
        }
        assert!(unread.is_empty(), "declared but never read: {unread:?}");
    }

    #[test]
    #[should_panic(expected = "`nope` is read from `limits` but not declared there")]
    fn reading_an_undeclared_key_is_caught() {
        let node = crate::specfile::yaml::parse("max_steps: 1\n").expect("yaml");
        let mut d = crate::diag::Diagnostics::default();
        let obj = crate::specfile::read::Obj::new(&node, "`limits`", LIMITS, &mut d).expect("map");
        obj.get("nope");
    }
}
