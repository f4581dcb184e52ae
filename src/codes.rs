//! Every diagnostic code with its severity and explanation, for diagnostics, `toolrun explain
//! CODE` and SARIF rules. A code is a [`Code`]; its rendered name (`E001`, `W101`) and its
//! severity are stated here, once, not read off the name.

/// How bad a diagnostic is: errors fail `check`, warnings do not (unless `--deny-warnings`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// What `toolrun explain` says about a code.
pub(crate) struct CodeInfo {
    pub(crate) code: &'static str,
    pub(crate) severity: Severity,
    pub(crate) title: &'static str,
    pub(crate) what: &'static str,
    pub(crate) why: &'static str,
    pub(crate) bad: &'static str,
    pub(crate) good: &'static str,
}

macro_rules! codes {
    ($( $code:ident $severity:ident, $title:literal, $what:literal, $why:literal, $bad:literal, $good:literal; )*) => {
        /// A diagnostic code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub(crate) enum Code { $( $code, )* }

        pub(crate) const CODES: &[CodeInfo] = &[ $( CodeInfo { code: stringify!($code), severity: Severity::$severity, title: $title, what: $what, why: $why, bad: $bad, good: $good }, )* ];
    };
}

impl Code {
    pub(crate) fn info(self) -> &'static CodeInfo {
        &CODES[self as usize]
    }
    /// As rendered: `E001`, `W101`.
    pub(crate) fn as_str(self) -> &'static str {
        self.info().code
    }
    pub(crate) fn severity(self) -> Severity {
        self.info().severity
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Ordered by rendered name (`W107` before `W111`), whatever the order they are listed in.
impl Ord for Code {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Code {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

codes! {
    E001 Error, "unreadable spec file",
        "The spec file does not exist, is a directory, cannot be read, or is not UTF-8.",
        "toolrun cannot check what it cannot read; this is exit code 2 (unreadable input), not 1.",
        "toolrun check specs/", "toolrun check specs/stock_assistant.yaml";
    E002 Error, "YAML syntax error",
        "The file is not well-formed YAML.",
        "Nothing can be checked until the YAML parses.",
        "tools:\n  get_price:\n   kind: mock\n  description: bad indent", "tools:\n  get_price:\n    kind: mock\n    description: Returns a price.";
    E003 Error, "wrong document shape",
        "The spec is empty, holds several documents, is not a mapping, or uses a list or mapping as a key.",
        "A spec is one YAML mapping with `version`, `tools`, `models` and the other keys.",
        "- version: 1", "version: 1\nname: my_spec";
    E004 Error, "resource limit exceeded",
        "The spec is too large, nested too deeply, or its aliases expand too much (a \"billion laughs\").",
        "toolrun refuses hostile input in bounded time and memory instead of exhausting the machine.",
        "a: &a [x, x]\nb: &b [*a, *a]\n# ... nine more levels", "Write values out, or keep aliases shallow.";
    E005 Error, "duplicate key",
        "The same key appears twice in one mapping (or a secret is declared twice).",
        "YAML parsers disagree on which value wins; toolrun refuses to guess.",
        "tools:\n  a: {kind: mock}\n  a: {kind: table}", "tools:\n  a: {kind: mock}\n  b: {kind: table}";
    E006 Error, "unknown key",
        "A key that this place in the spec does not accept, usually a typo.",
        "Unknown keys are silently ignored by many tools; a typo like `desciption` would then lose your text.",
        "tools:\n  x:\n    desciption: Returns prices.", "tools:\n  x:\n    description: Returns prices.";
    E007 Error, "wrong type",
        "A value has the wrong type: a string where a list is expected, and so on.",
        "toolrun does not coerce types, so a spec means exactly what it says.",
        "policy:\n  allow: get_price", "policy:\n  allow: [get_price]";
    E008 Error, "missing required key",
        "A required key is absent (`version`, a tool's `kind`, a script's `turns`, ...).",
        "Without it toolrun cannot know what the spec means.",
        "tools:\n  x:\n    description: Returns prices.", "tools:\n  x:\n    kind: mock\n    description: Returns prices.\n    responses: [{result: 1}]";
    E009 Error, "unsupported version",
        "`version` is not a version this toolrun understands.",
        "The format is versioned so old specs keep their meaning when it changes.",
        "version: 2", "version: 1";
    E010 Error, "invalid tool name",
        "Tool names must match ^[A-Za-z_][A-Za-z0-9_-]{0,63}$, the rule every model provider accepts.",
        "A name like `math.factorial` passes locally and is rejected by OpenAI or Anthropic at run time.",
        "tools:\n  math.factorial: ...", "tools:\n  math_factorial: ...";
    E011 Error, "unknown kind",
        "A tool's `kind` is not mock, table, builtin or http, or a model's is not scripted, openai or anthropic.",
        "The kind decides which fields a tool has and how it runs.",
        "kind: mok", "kind: mock";
    E012 Error, "unknown tool",
        "`policy`, `tests`, `approve` or a scripted turn names a tool the spec does not declare.",
        "A misspelled name in `policy.allow` silently blocks a tool; in a script it tests nothing.",
        "policy:\n  allow: [get_stok_price]", "policy:\n  allow: [get_stock_price]";
    E013 Error, "field not allowed for this kind",
        "A field that belongs to another tool kind (`rows` on an `http` tool), or two fields that exclude each other.",
        "The field would be ignored, which hides a mistake in the kind or the field.",
        "kind: http\nrows: [...]", "kind: table\nrows: [...]";
    E014 Error, "invalid input schema",
        "A tool's `input` is not a valid JSON Schema (checked against the meta-schema) or does not compile.",
        "Arguments are validated against it on every call; an invalid schema would reject or accept everything.",
        "input:\n  type: object\n  properties:\n    n: {type: integr}", "input:\n  type: object\n  properties:\n    n: {type: integer}";
    E015 Error, "input schema is not an object",
        "A tool's `input` must describe a JSON object (`type: object`).",
        "Every provider sends tool arguments as a JSON object.",
        "input: {type: string}", "input:\n  type: object\n  properties:\n    text: {type: string}";
    E016 Error, "template syntax error",
        "A minijinja template does not compile.",
        "It would fail on every run; toolrun finds it at check time instead.",
        "url: \"https://x.test/{{ args.city \"", "url: \"https://x.test/{{ args.city }}\"";
    E017 Error, "unknown template variable",
        "A template reads a variable that does not exist there, e.g. `args.x` where `x` is not in the input schema, or `last.reslt` (a result has `id`, `name`, `arguments`, `status`, `result`, `error`).",
        "At run time reading an undefined value is an error (a tool error, or a model error in a script), so the run would fail where the spec could have said so up front.",
        "url: \"https://x.test/?q={{ args.cty }}\"", "url: \"https://x.test/?q={{ args.city }}\"";
    E018 Error, "undeclared secret",
        "A template reads `secrets.NAME` but `NAME` is not listed in `secrets:` (or the name is not a valid variable name).",
        "Specs may read only the environment variables they declare, so a reviewer sees every secret a spec can touch.",
        "headers: {Authorization: \"Bearer {{ secrets.KEY }}\"}", "secrets: [KEY]\n...\nheaders: {Authorization: \"Bearer {{ secrets.KEY }}\"}";
    E019 Error, "invalid scripted arguments",
        "A scripted tool call's arguments do not satisfy the tool's input schema.",
        "The run would stop on `invalid_arguments` instead of testing what you meant. Mark deliberate mistakes with `malformed: true`.",
        "tool_calls: [{name: get_price, arguments: {ticker: 5}}]", "tool_calls: [{name: get_price, arguments: {ticker: AAPL}}]";
    E020 Error, "host not allowed",
        "An HTTP tool's URL names a host outside `policy.network.allow_hosts`, lets a template choose the host with no allow-list, or puts an argument into the scheme, host or port (arguments may fill the path, query and fragment only; a whole-URL `{{ args.url }}` needs `allow_hosts`).",
        "HTTP tools reach only hosts a reviewer can see in the spec.",
        "url: \"https://{{ args.host }}/v1\"", "url: \"https://api.example.com/v1\"\n# or list hosts in policy.network.allow_hosts";
    E021 Error, "invalid URL",
        "A URL does not start with http:// or https://.",
        "toolrun speaks HTTP only; anything else is a typo or a danger (file://).",
        "url: api.example.com/v1", "url: https://api.example.com/v1";
    E022 Error, "table file problem",
        "A table's `file` does not exist, is not a regular file, lies outside the project root (the nearest folder holding `.git`, else the spec's folder, or `--root DIR`), or is not valid CSV or JSON.",
        "A spec may only read files inside its project, so running someone's spec cannot read your files.",
        "file: ../../etc/passwd", "file: data/candidates.csv";
    E023 Error, "invalid limit",
        "A limit is zero, negative or inconsistent (`max_parallel_tools` above `max_tool_calls`).",
        "Such a limit would stop every run at once or never apply.",
        "limits: {max_tool_calls: 2, max_parallel_tools: 4}", "limits: {max_tool_calls: 8, max_parallel_tools: 4}";
    E024 Error, "invalid duration",
        "A duration is not a number with a unit (`500ms`, `5s`, `2m`, `1h`), is zero, or is longer than a year.",
        "A bare number is ambiguous: seconds or milliseconds?",
        "tool_timeout: 5", "tool_timeout: 5s";
    E025 Error, "unknown model",
        "`default_model` or a test's `model` names a model not declared under `models:`.",
        "The run would fail at once.",
        "default_model: gtp", "default_model: gpt";
    E026 Error, "unknown builtin",
        "A builtin tool names a builtin that does not exist. `toolrun tools` lists the compiled tools; the README lists builtins.",
        "The tool could never run.",
        "builtin: calculater", "builtin: calculator";
    E027 Error, "invalid regular expression",
        "A script's `when` or a test's `output_matches` is not a valid regex (Rust `regex` syntax, linear time).",
        "It would never match, or fail the run.",
        "when: \"(?i)gain(\"", "when: \"(?i)gain\"";
    E028 Error, "default model needed",
        "Several models are declared and `default_model` is not set.",
        "`toolrun run` would not know which model to use.",
        "models: {a: ..., b: ...}", "default_model: a\nmodels: {a: ..., b: ...}";
    E029 Error, "invalid mock or script entry",
        "A mock response or scripted turn has the wrong form: both `result` and `error`, neither, an unknown error kind, a `when` on a missing argument.",
        "The entry would never behave as intended.",
        "responses:\n  - result: 1\n    error: boom", "responses:\n  - when: {ticker: AAPL}\n    result: 1\n  - error: unknown ticker";
    E030 Error, "invalid JSON Pointer",
        "A pointer (`response.pointer`, `replay.ignore`) does not start with `/`.",
        "RFC 6901 pointers start with `/`; `current.temp` would match nothing.",
        "response: {pointer: current.temp}", "response: {pointer: /current/temp}";
    E031 Error, "unsupported HTTP method",
        "The request method is not GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS.",
        "Other methods are typos or not meant for tools.",
        "method: GTE", "method: GET";
    E033 Error, "invalid test expectation",
        "A test's `expect` names an unknown status, stop reason or error kind.",
        "The expectation could never be met, so the test would always fail.",
        "expect: {status: success}", "expect: {status: ok}";
    E034 Error, "duplicate test name",
        "Two tests have the same name.",
        "Results, JUnit reports and `--filter` identify tests by name.",
        "tests: [{name: a, ...}, {name: a, ...}]", "tests: [{name: a, ...}, {name: b, ...}]";
    E035 Error, "invalid fault",
        "A `faults:` entry has the wrong form.",
        "Each fault is one of `fail_first`, `timeout`, `http_status`, `oversized_output`.",
        "faults: [{fail_first: 2, http_status: 500}]", "faults: [{fail_first: 2, kind: timeout}]";
    E036 Error, "fixture path refused",
        "A test's `fixture:` is not a regular file (a FIFO, a device, a directory), or lies outside the project root: an absolute path, or `..` or a symlink leading out of the nearest folder holding `.git` (the spec's folder without one; `--root DIR` sets it).",
        "A spec from someone else must not make toolrun read files outside the project, or hang on a pipe.",
        "fixture: /home/me/.ssh/id_rsa", "fixture: ../fixtures/gain.json  # recorded with --record";
    E041 Error, "credential in `headers`",
        "A model's `headers:` sets `Authorization`, `x-api-key`, `api-key` or its `api_key_header`.",
        "A key written into a spec gets committed, shared and printed; keys come from environment variables named in `api_key_env`.",
        "headers:\n  Authorization: Bearer sk-...", "api_key_env: OPENAI_API_KEY";
    E042 Error, "`extra_body` sets a key toolrun writes",
        "A model's `extra_body:` sets `model`, `messages`, `tools`, `tool_choice`, `stream`, ... .",
        "toolrun builds these from the spec; a second source would silently win or lose.",
        "extra_body: {tool_choice: required}", "tool_choice: required\nextra_body: {seed: 7}";
    E043 Error, "`tool_choice` forces a tool the model is not offered",
        "`tool_choice: { tool: NAME }` names a tool that `policy` denies or leaves out of `allow`.",
        "The tool is never sent to the model, so the provider rejects a forced call of it.",
        "policy: {deny: [send_email]}\n...\ntool_choice: {tool: send_email}", "tool_choice: {tool: get_price}";
    E044 Error, "two tests share a fixture",
        "Two tests name the same `fixture:` file, or, under `fixtures: DIR`, two test names become the same file name (`a b` and `a_b` are both `a_b.json`).",
        "Recording writes one file per test: both would pass while recording and the last writer would decide what both replay.",
        "tests:\n  - {name: a, query: hi, fixture: fx/hi.json}\n  - {name: b, query: hi, fixture: fx/hi.json}", "tests:\n  - {name: a, query: hi, fixture: fx/a.json}\n  - {name: b, query: hi, fixture: fx/b.json}";
    E045 Error, "header a spec may not set",
        "An `http` tool's or MCP server's `headers:` sets `Host`, `Content-Length`, `Transfer-Encoding`, `Connection` or another hop-by-hop header (`Keep-Alive`, `Proxy-*`, `TE`, `Trailer`, `Upgrade`), or a name that is not an HTTP token (a space, `:`, CR or LF).",
        "These decide where and how a request travels, not what it says: a `Host` the model fills in picks the virtual host behind an allowed name, and a broken name fails only when the call is made.",
        "headers:\n  Host: \"{{ args.h }}\"", "url: https://internal-admin.corp:8080/  # and list the host in policy.network.allow_hosts";
    E046 Error, "template reads every secret",
        "A template reads the `secrets` map as a whole: prints it (`{{ secrets }}`), loops over it (`{% for k, v in secrets | items %}`), passes it to a filter, or picks a secret by a computed name (`secrets[args.which]`).",
        "The map holds every secret the spec declares, other tools' keys included: a request built from it sends them all to this tool's host. A template reaches only the secrets it names (`secrets.NAME`); at run time the others are not there, so such a template renders without them.",
        "headers:\n  X-Keys: \"{{ secrets }}\"", "headers:\n  Authorization: \"Bearer {{ secrets.WEATHER_KEY }}\"";
    E047 Error, "test data file refused",
        "A test's `from:` names a data file that does not exist, is not a regular file, lies outside the project (the folder holding `.git`, or `--root`), is neither `.csv` nor `.jsonl`, or whose header line cannot be read.",
        "A test per row needs the rows: without the file there are no tests, and a path leaving the project would read files a spec from elsewhere should not see.",
        "tests:\n  - {name: \"refund_{{ row.id }}\", query: \"{{ row.query }}\", from: data/missing.csv}", "tests:\n  - {name: \"refund_{{ row.id }}\", query: \"{{ row.query }}\", from: data/refunds.csv}";
    E048 Error, "data test template names no column",
        "A template of a test with `from:` names a column the data file does not have (a CSV header without it, no JSONL line with it), or is not a column of `row` at all (`{{ args.x }}`, a filter).",
        "Every row would fail the same way: the mistake is in the spec, so `check` reports it once, at the template.",
        "from: data/refunds.csv   # columns: id, query, amount\nexpect: {output_contains: \"{{ row.total }}\"}", "from: data/refunds.csv\nexpect: {output_contains: \"{{ row.amount }}\"}";
    E049 Error, "data rows make the same test name",
        "Two rows of a test's `from:` data file render the same `name:`, or a row's name is the name of another test of the spec.",
        "Results, `--filter`, fixtures under `fixtures:` and baselines tell tests apart by name: two tests with one name would overwrite each other.",
        "from: data/refunds.csv\nname: refund   # the same for every row", "from: data/refunds.csv\nname: \"refund_{{ row.id }}\"";
    E050 Error, "cost budget on a model without a price",
        "`expect.max_cost_usd` on a test (or in one of its `turns:`) whose model has no `price:`, or `limits.max_cost_usd` in a spec with a live model that has none.",
        "A cost is worked out from the tokens a model reports and its declared price: without the price the budget could never be checked, and a run could spend without limit while the spec says otherwise.",
        "models:\n  gpt: {kind: openai, model: gpt-4o-mini}\ntests:\n  - {name: cheap, query: hi, expect: {max_cost_usd: 0.01}}", "models:\n  gpt: {kind: openai, model: gpt-4o-mini, price: {input: 0.15, output: 0.6}}";
    W101 Warning, "missing or short description",
        "A tool has no description, or one under 10 characters.",
        "Models pick tools by their descriptions; a vague one leads to wrong calls.",
        "description: Price", "description: Returns the current price for a ticker symbol.";
    W102 Warning, "default breaks its schema",
        "A property's `default` does not satisfy the property's own schema (often `default: null` on a string).",
        "A model that copies the default sends an invalid call. Common in real schemas, so a warning.",
        "unit: {type: string, default: null}", "unit: {type: string, default: celsius}";
    W103 Warning, "side-effecting tool can never run",
        "A `side_effects: true` tool is denied by policy, so it can never be confirmed or run.",
        "Usually a policy mistake: either the tool is dead weight or the policy blocks something intended.",
        "policy: {deny: [send_email]}", "policy: {confirm: [send_email]}";
    W104 Warning, "tool can never run",
        "A tool is denied by `policy.deny` or missing from `policy.allow`.",
        "It is offered to nobody; usually a policy mistake.",
        "policy: {allow: [a]}  # b is declared too", "policy: {allow: [a, b]}";
    W105 Warning, "unused secret",
        "A declared secret is read by no template.",
        "Every declared secret is an environment variable the spec may read; keep the list minimal.",
        "secrets: [OLD_KEY]", "secrets: []";
    W111 Warning, "Anthropic `base_url` ends in `/v1`",
        "An `anthropic` model's `base_url` ends in `/v1`; toolrun adds `/v1/messages` itself.",
        "The request would go to `/v1/v1/messages` and get a 404.",
        "base_url: https://api.anthropic.com/v1", "base_url: https://api.anthropic.com";
    W107 Warning, "unreachable mock response",
        "A mock response comes after a fallback (a response with no `when`), or after a response whose `when` tests a subset of its own, so it never matches.",
        "The first matching response wins.",
        "responses:\n  - error: unknown\n  - when: {t: A}\n    result: 1", "responses:\n  - when: {t: A}\n    result: 1\n  - error: unknown";
    W108 Warning, "fixture not recorded yet",
        "A test names a `fixture:` file that does not exist (yet).",
        "The spec is fine and every other test runs; `toolrun test` reports this one as failed, with the command that records it.",
        "fixture: fixtures/missing.json", "fixture: fixtures/gain.json  # recorded with `toolrun run SPEC --query ... --record fixtures/gain.json`";
    W112 Warning, "unreachable script",
        "A scripted model's script comes after a fallback script (no `when`) or repeats an earlier script's `when`, so it is never chosen.",
        "The first script whose `when` matches the query is used; the later one is dead code and its turns are never tested.",
        "scripts:\n  - when: \"(?i)order\"\n    turns: [{answer: A}]\n  - when: \"(?i)order\"\n    turns: [{answer: B}]", "scripts:\n  - when: \"(?i)order\"\n    turns: [{answer: A}]\n  - when: \"(?i)refund\"\n    turns: [{answer: B}]";
    W113 Warning, "tool only a run can know",
        "A tool name (in a scripted call, a test, `policy` or `tool_choice`) is not declared, and the spec has a `kind: mcp` entry with `tools: \"*\"`, whose tools are known only when a run lists them.",
        "`check` never contacts a server, so it cannot tell a tool of that server from a typo; a run that names a tool no server lists fails then.",
        "tools:\n  files:\n    kind: mcp\n    command: [npx, -y, \"@modelcontextprotocol/server-filesystem\", ./data]\n    tools: \"*\"\n# a script calls read_text_file", "tools:\n  files:\n    kind: mcp\n    command: [npx, -y, \"@modelcontextprotocol/server-filesystem\", ./data]\n    tools: [read_text_file, list_directory]";
    W114 Warning, "tools known only at run time",
        "A `kind: mcp` entry imports every tool of its server (`tools: \"*\"`).",
        "`check` never contacts a server, so it cannot know which tools the entry brings in, nor their input schemas: a tool name in `policy`, a test or a script that refers to one of them is not checked (a typo passes `check` and fails the run), and a new tool the server adds is offered to the model without review.",
        "tools:\n  notes:\n    kind: mcp\n    url: https://mcp.example.com/mcp\n    tools: \"*\"", "tools:\n  notes:\n    kind: mcp\n    url: https://mcp.example.com/mcp\n    tools: [search_notes, read_note]";
    W115 Warning, "`env:` needs `--allow-env`",
        "A stdio MCP server's `env:` sets a variable that chooses what code the program runs or where it finds it (a loader's, an interpreter's or a package manager's: `LD_PRELOAD`, `NODE_OPTIONS`, `PYTHONPATH`, `PATH`, ...).",
        "A run refuses to start the server unless the person running toolrun names the variable with `--allow-env NAME`: a spec from elsewhere must not choose the code an allowed program runs.",
        "command: [node, server.js]\nenv: {NODE_OPTIONS: \"--require ./hook.js\"}", "command: [node, server.js]\nenv: {API_KEY: \"{{ secrets.API_KEY }}\"}  # or run with --allow-env NODE_OPTIONS";
    W116 Warning, "data row that cannot become a test",
        "A row of a test's `from:` data file is not data: a CSV row with more or fewer fields than the header, bytes that are not UTF-8, a JSONL line that is not a JSON object, or a row without a column the templates read that other rows have.",
        "The row's test fails with the file, line and column; the other rows and tests still run, so one bad row in 10,000 does not hide the rest.",
        "id,query,amount\n1,Refund order 1,20\n2,Refund order 2   # one field short", "id,query,amount\n1,Refund order 1,20\n2,Refund order 2,35";
}

pub(crate) fn find(code: &str) -> Option<&'static CodeInfo> {
    CODES.iter().find(|c| c.code.eq_ignore_ascii_case(code))
}

pub(crate) fn rules() -> Vec<(&'static str, &'static str)> {
    CODES.iter().map(|c| (c.code, c.title)).collect()
}

pub(crate) fn explain(c: &CodeInfo) -> String {
    let indent = |s: &str| s.lines().map(|l| format!("    {l}\n")).collect::<String>();
    format!(
        "{} — {}\n\nWhat it catches\n  {}\n\nWhy it matters\n  {}\n\nExample\n{}\nFix\n{}",
        c.code,
        c.title,
        c.what,
        c.why,
        indent(c.bad),
        indent(c.good)
    )
}

#[cfg(test)]
/// `docs/codes.md`, the page SARIF rules link to: every code with its explanation.
pub(crate) fn reference_markdown() -> String {
    let mut out = String::from(
        "# Diagnostic codes\n\nGenerated from `src/codes.rs` (the same text as `toolrun explain CODE`); a test keeps it current.\n",
    );
    for c in CODES {
        out.push_str(&format!(
            "\n## {}\n\n**{}**\n\n{}\n\n*Why it matters:* {}\n\nExample:\n\n```yaml\n{}\n```\n\nFix:\n\n```yaml\n{}\n```\n",
            c.code, c.title, c.what, c.why, c.bad, c.good
        ));
    }
    out
}

#[cfg(test)]
mod reference_tests {
    #[test]
    fn docs_codes_md_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/codes.md");
        let fresh = super::reference_markdown();
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(path, &fresh).expect("write docs/codes.md");
            return;
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == fresh,
            "docs/codes.md is stale: run `UPDATE_SNAPSHOTS=1 cargo test docs_codes_md_is_current`"
        );
    }
}

#[cfg(test)]
mod code_tests {
    use super::{Code, CODES};
    use crate::diag::Severity;

    #[test]
    fn every_code_renders_its_name_and_states_its_severity() {
        assert_eq!(Code::E001.to_string(), "E001");
        assert_eq!(Code::W112.as_str(), "W112");
        assert_eq!(Code::E044.severity(), Severity::Error);
        assert_eq!(Code::W101.severity(), Severity::Warning);
        // The letter and the stated severity agree for every code.
        for c in CODES {
            let warning = c.code.starts_with('W');
            assert_eq!(c.severity == Severity::Warning, warning, "{}", c.code);
        }
        // Sorted by name, not by where they are listed.
        assert!(Code::W107 < Code::W111);
        assert_eq!(
            serde_json::to_value(Code::E019).unwrap(),
            serde_json::json!("E019")
        );
    }
}
