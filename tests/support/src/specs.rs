//! Spec texts more than one test file needs.

use std::path::Path;

use crate::{temp_file, Response, TempFile, TestServer};

/// A spec named `clock` whose one tool, `clock`, is the `datetime` builtin, and whose scripted
/// model calls it once with `arguments` (a YAML flow mapping) and then answers `answer` (a
/// template over `last`). `tests` is the YAML list of `tests:`, items indented two spaces.
pub fn clock_spec(arguments: &str, answer: &str, tests: &str) -> String {
    format!(
        r#"version: 1
name: clock
tools:
  clock:
    description: Dates and times in any time zone.
    kind: builtin
    builtin: datetime
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: clock, arguments: {arguments} }}]
          - answer: "{answer}"
tests:
{tests}"#
    )
}

/// A spec named `notes` whose one `kind: mcp` tool entry, `notes`, is the notes server at `url`
/// (tests/mcp/notes_server.py), sent the `NOTES_KEY` secret as `X-Api-Key`; `tools` is the YAML
/// of its `tools:` list (items indented six spaces), `turns` the scripted model's turns
/// (indented ten).
pub fn notes_spec(url: &str, tools: &str, turns: &str) -> String {
    notes_spec_at(url, "2025-11-25", tools, turns)
}

/// [`notes_spec`] with the entry's `protocol:` pinned to `protocol`, or negotiated when empty.
pub fn notes_spec_at(url: &str, protocol: &str, tools: &str, turns: &str) -> String {
    let protocol = match protocol {
        "" => String::new(),
        p => format!("\n    protocol: \"{p}\""),
    };
    format!(
        r#"version: 1
name: notes
secrets: [NOTES_KEY]
tools:
  notes:
    kind: mcp
    description: The team's notes server.
    url: {url}
    headers: {{ X-Api-Key: "{{{{ secrets.NOTES_KEY }}}}" }}
    timeout: 60s{protocol}
    tools:
{tools}
{models}"#,
        models = scripted_model(turns),
    )
}

/// A spec named `probe` whose one `kind: mcp` tool entry, `probe`, starts the stdio probe
/// server (`python script logs`, tests/mcp/stdio_server.py) with the `PROBE_TOKEN` secret and
/// `GREETING=hello` in its environment; `tools` is its flow list of tools (`echo, fail`),
/// `turns` the scripted model's turns (indented ten).
pub fn stdio_probe_spec(
    (python, script, logs): (&Path, &Path, &Path),
    tools: &str,
    turns: &str,
) -> String {
    format!(
        r#"version: 1
name: probe
secrets: [PROBE_TOKEN]
tools:
  probe:
    kind: mcp
    description: A probe server.
    command: ["{python}", "{script}", "{logs}"]
    env: {{ PROBE_TOKEN: "{{{{ secrets.PROBE_TOKEN }}}}", GREETING: hello }}
    timeout: 30s
    tools: [{tools}]
{models}"#,
        models = scripted_model(turns),
        python = python.display(),
        script = script.display(),
        logs = logs.display(),
    )
}

/// A spec named `name` whose one tool, `note`, is a mock that answers `noted`, and whose
/// scripted model answers `answer` at once; `tests` is the YAML list of `tests:`, items indented
/// two spaces.
pub fn scripted_note_spec(name: &str, answer: &str, tests: &str) -> String {
    format!(
        r#"version: 1
name: {name}
tools:
  note:
    description: Writes a note down for later.
    kind: mock
    input: {{ type: object, properties: {{ text: {{ type: string }} }}, required: [text] }}
    responses:
      - result: noted
{models}tests:
{tests}"#,
        models = scripted_model(&format!("          - answer: \"{answer}\""))
    )
}

/// A `models:` section of one scripted model, `scripted`, with one script of `turns` (indented
/// ten).
fn scripted_model(turns: &str) -> String {
    format!("models:\n  scripted:\n    kind: scripted\n    scripts:\n      - turns:\n{turns}\n")
}

/// The `direct` spec of the tests that hold toolrun's own answers to `serve --http` requests
/// against rmcp's: a tool of each kind and each sort of result (structured, text, a list, text
/// to truncate, text to escape, a tool error, content items, side effects, HTTP, a builtin).
/// Its HTTP tool `echo` calls the returned server, which answers `{"q": Q}` to `?q=Q`. `more`
/// ends the spec (a `serve:` section, say). The spec is in a fresh temp dir `dir_name`.
pub fn direct_spec(dir_name: &str, more: &str) -> (TestServer, TempFile) {
    let upstream = TestServer::start(|req| {
        Response::json(
            200,
            serde_json::json!({ "q": req.query_param("q").unwrap_or_default() }),
        )
    });
    let port = upstream.addr().port();
    let spec = temp_file(
        dir_name,
        "direct.yaml",
        &format!(
            r#"version: 1
name: direct
tools:
  lookup:
    description: Looks an order up.
    kind: mock
    input: {{ type: object, properties: {{ id: {{ type: integer }} }}, required: [id] }}
    responses:
      - when: {{ id: 1 }}
        result: {{ id: 1, status: shipped }}
      - when: {{ id: 2 }}
        result: plain text
      - when: {{ id: 3 }}
        result: [1, 2, 3]
      - when: {{ id: 4 }}
        result: "{{% for i in range(50) %}}line {{{{ i }}}}; {{% endfor %}}"
      - when: {{ id: 6 }}
        result: "x\"y\u00e9\n"
      - error: {{ kind: not_found, message: "no order {{{{ args.id }}}}" }}
  picture:
    description: A picture and a caption.
    kind: mock
    input: {{ type: object, properties: {{}} }}
    responses:
      - content:
          - {{ type: text, text: "a dot" }}
          - {{ type: image, data: "iVBORw0KGgo=", mimeType: image/png }}
  refund:
    description: Moves money.
    kind: mock
    side_effects: true
    input: {{ type: object, properties: {{ id: {{ type: integer }} }} }}
    responses:
      - result: {{ refunded: true }}
  echo:
    description: Echoes its query.
    kind: http
    input: {{ type: object, properties: {{ q: {{ type: string }} }}, required: [q] }}
    request:
      url: "{base}/echo"
      query: {{ q: "{{{{ args.q }}}}" }}
  calc:
    description: Arithmetic.
    kind: builtin
    builtin: calculator
policy: {{ network: {{ allow_hosts: ["127.0.0.1:{port}"] }} }}
limits: {{ max_tool_output_chars: 120 }}
{more}"#,
            base = upstream.base_url()
        ),
    );
    (upstream, spec)
}
