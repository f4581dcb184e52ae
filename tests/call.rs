//! `toolrun call SPEC TOOL --args JSON` through the real binary: the engine's tool-call path
//! (validation, policy, confirmation, masking), the result on stdout, the contract's exit codes.

mod support;

use serde_json::json;
use std::path::Path;
use support::{Response, TestServer};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn toolrun(args: &[&str]) -> support::Output {
    let mut cmd = support::toolrun();
    cmd.current_dir(root()).args(args);
    support::run(&mut cmd)
}

const STOCK: &str = "specs/stock_assistant.yaml";
const GUARDRAILS: &str = "specs/guardrails.yaml";

#[test]
fn a_mock_tool_prints_its_result() {
    let out = toolrun(&[
        "call",
        STOCK,
        "get_stock_price",
        "--args",
        r#"{"ticker":"AAPL"}"#,
    ]);
    out.assert_success();
    assert_eq!(out.stdout, "178.15\n", "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
}

#[test]
fn json_prints_the_full_result_record() {
    let out = toolrun(&[
        "call",
        STOCK,
        "calculate_expression",
        "--args",
        r#"{"expression":"(178.15 - 150) * 100"}"#,
        "--json",
    ]);
    out.assert_success();
    let record = out.json();
    assert_eq!(record["status"], "ok", "{out:?}");
    assert_eq!(record["name"], "calculate_expression");
    assert_eq!(record["arguments"]["expression"], "(178.15 - 150) * 100");
    assert_eq!(record["result"], json!(2815));
    assert!(record["duration_ms"].is_number(), "{out:?}");
}

#[test]
fn a_tool_error_exits_1_with_its_kind() {
    let out = toolrun(&[
        "call",
        STOCK,
        "get_stock_price",
        "--args",
        r#"{"ticker":"ZZZZ"}"#,
        "--json",
    ]);
    out.assert_code(1);
    let record = out.json();
    assert_eq!(record["status"], "error");
    assert_eq!(record["error"]["kind"], "not_found");
    assert_eq!(record["error"]["message"], "unknown ticker ZZZZ");
    assert!(
        out.stderr
            .contains("`get_stock_price` failed (not_found): unknown ticker ZZZZ"),
        "{out:?}"
    );
}

#[test]
fn arguments_are_validated_against_the_schema_with_a_did_you_mean() {
    let out = toolrun(&[
        "call",
        STOCK,
        "get_stock_price",
        "--args",
        r#"{"tickr":"AAPL"}"#,
    ]);
    out.assert_code(1);
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(out.stderr.contains("(invalid_arguments)"), "{out:?}");
    assert!(out.stderr.contains("did you mean `ticker`?"), "{out:?}");
}

#[test]
fn usage_errors_exit_2() {
    let out = toolrun(&["call", STOCK, "get_stok_price", "--args", "{}"]);
    out.assert_code(2);
    assert!(
        out.stderr
            .contains("no tool `get_stok_price`; did you mean `get_stock_price`?"),
        "{out:?}"
    );

    let out = toolrun(&["call", STOCK, "get_stock_price", "--args", "{ticker: AAPL}"]);
    out.assert_code(2);
    assert!(out.stderr.contains("--args is not valid JSON"), "{out:?}");

    let out = toolrun(&["call", STOCK, "get_stock_price", "--args", "[1]"]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("must be a JSON object") && out.stderr.contains("an array"),
        "{out:?}"
    );
}

#[test]
fn side_effects_need_approval_exit_3_until_approved() {
    let args = r#"{"order_id":42}"#;
    let out = toolrun(&["call", GUARDRAILS, "refund_order", "--args", args]);
    out.assert_code(3);
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(out.stderr.contains("--approve refund_order"), "{out:?}");

    let out = toolrun(&[
        "call",
        GUARDRAILS,
        "refund_order",
        "--args",
        args,
        "--approve",
        "refund_order",
    ]);
    out.assert_success();
}

#[test]
fn policy_deny_rejects_the_call() {
    let dir = support::temp_dir("call_deny");
    let spec = support::write(
        &dir,
        "deny.yaml",
        "version: 1\nname: deny\ntools:\n  echo:\n    description: Echoes.\n    kind: mock\n    input: { type: object }\n    responses: [{ result: hi }]\n  other:\n    description: Other.\n    kind: mock\n    input: { type: object }\n    responses: [{ result: hi }]\npolicy:\n  deny: [echo]\n  allow: [other]\nmodels:\n  s: { kind: scripted, scripts: [{ turns: [{ answer: ok }] }] }\n",
    );
    let mut cmd = support::toolrun();
    cmd.args(["call"]).arg(&spec).args(["echo", "--json"]);
    let out = support::run(&mut cmd);
    out.assert_code(1);
    assert_eq!(out.json()["error"]["kind"], "denied", "{out:?}");
}

#[test]
fn an_http_tool_runs_against_a_local_server_and_its_secret_stays_masked() {
    const SECRET: &str = "sk-call-0a1b2c3d4e5f";
    let server = TestServer::start(|req| {
        // Echo the authorization header back: the output must still not show the secret.
        let auth = req.header("authorization").unwrap_or("").to_string();
        Response::json(200, json!({ "current": { "temp_c": 21, "auth": auth } }))
    });
    let dir = support::temp_dir("call_http");
    let spec = support::write(
        &dir,
        "http.yaml",
        &format!(
            "version: 1\nname: call_http\nsecrets: [API_KEY]\npolicy:\n  network:\n    allow_hosts: [\"{}\"]\ntools:\n  weather:\n    description: Weather.\n    kind: http\n    input: {{ type: object, properties: {{ city: {{ type: string }} }}, required: [city] }}\n    request:\n      url: \"{}/v1/{{{{ args.city }}}}\"\n      headers: {{ Authorization: \"Bearer {{{{ secrets.API_KEY }}}}\" }}\n    response: {{ pointer: /current }}\nmodels:\n  s: {{ kind: scripted, scripts: [{{ turns: [{{ answer: ok }}] }}] }}\n",
            server.addr(),
            server.base_url()
        ),
    );
    let mut cmd = support::toolrun();
    cmd.env("API_KEY", SECRET).arg("call").arg(&spec).args([
        "weather",
        "--args",
        r#"{"city":"Paris"}"#,
    ]);
    let out = support::run(&mut cmd);
    out.assert_success();
    let result: serde_json::Value = out.json();
    assert_eq!(result["temp_c"], 21, "{out:?}");
    assert!(!out.stdout.contains(SECRET), "{out:?}");
    assert!(
        result["auth"].as_str().unwrap_or("").contains("***"),
        "{out:?}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/Paris");
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );
}

#[test]
fn a_missing_secret_is_a_usage_error() {
    let out = toolrun(&[
        "call",
        "specs/weather_http.yaml",
        "current_weather",
        "--args",
        r#"{"city":"Paris"}"#,
    ]);
    out.assert_code(2);
    assert!(out.stderr.contains("not set"), "{out:?}");
}

#[test]
fn unit_convert_handles_speeds_binary_sizes_and_volumes() {
    let dir = support::temp_dir("call_units");
    let spec = support::write(
        &dir,
        "units.yaml",
        "version: 1\nname: units\ntools:\n  convert:\n    description: Converts a value between units and returns the number.\n    kind: builtin\n    builtin: unit_convert\nmodels:\n  s: { kind: scripted, scripts: [{ turns: [{ answer: ok }] }] }\n",
    );
    for (args, expected) in [
        (r#"{"value": 10, "from": "knots", "to": "km/h"}"#, "18.52"),
        (r#"{"value": 60, "from": "mph", "to": "km/h"}"#, "96.56064"),
        (r#"{"value": 2, "from": "GiB", "to": "MiB"}"#, "2048"),
        (r#"{"value": 1, "from": "gal", "to": "L"}"#, "3.785411784"),
    ] {
        let mut cmd = support::toolrun();
        cmd.arg("call").arg(&spec).args(["convert", "--args", args]);
        let out = support::run(&mut cmd);
        out.assert_success();
        assert_eq!(out.stdout.trim(), expected, "{args}\n{out:?}");
    }
}

/// A CSV table in a folder of its own (removed when the guard drops), with `extra` lines added
/// to the tool.
fn csv_table_spec(name: &str, extra: &str) -> (support::TempDir, std::path::PathBuf) {
    let dir = support::temp_dir(name);
    support::write(
        &dir,
        "people.csv",
        "id,name,manager\n1,Ann,\n2,Bob,Ann\n3,Cid,  \n",
    );
    let spec = format!(
        "version: 1\nname: people\ndescription: Looks people up.\ntools:\n  people:\n    description: Looks people up by any column.\n    kind: table\n    file: people.csv\n{extra}"
    );
    let path = support::write(&dir, "spec.yaml", &spec);
    (dir, path)
}

fn call_table(spec: &Path, args: &str) -> support::Output {
    let mut cmd = support::toolrun();
    cmd.arg("call").arg(spec).args(["people", "--args", args]);
    support::run(&mut cmd)
}

#[test]
fn empty_csv_cells_are_null_unless_the_table_keeps_them() {
    let (_dir, spec) = csv_table_spec("call-table-null", "");
    let out = call_table(&spec, r#"{"where": {"manager": null}}"#);
    out.assert_success();
    assert_eq!(
        out.json(),
        json!([
            {"id": 1, "name": "Ann", "manager": null},
            {"id": 3, "name": "Cid", "manager": null}
        ]),
        "{out:?}"
    );
    // A missing value holds no text, not the text `null`.
    let out = call_table(&spec, r#"{"where": {"manager": {"contains": "nu"}}}"#);
    out.assert_code(1);
    assert!(out.stderr.contains("not_found"), "{out:?}");

    let (_dir, spec) = csv_table_spec("call-table-keep", "    empty_as: \"\"\n");
    let out = call_table(
        &spec,
        r#"{"where": {"manager": ""}, "columns": ["name", "manager"]}"#,
    );
    out.assert_success();
    assert_eq!(
        out.json(),
        json!([{"name": "Ann", "manager": ""}, {"name": "Cid", "manager": ""}]),
        "{out:?}"
    );
    let (_dir, spec) = csv_table_spec("call-table-dash", "    empty_as: \"-\"\n");
    let out = call_table(&spec, r#"{"where": {"id": 1}}"#);
    assert_eq!(
        out.json(),
        json!([{"id": 1, "name": "Ann", "manager": "-"}]),
        "{out:?}"
    );
}

#[test]
fn empty_as_is_checked() {
    let (_dir, spec) = csv_table_spec("call-table-bad", "    empty_as: [x]\n");
    let out = support::run(support::toolrun().arg("check").arg(&spec));
    out.assert_code(1);
    assert!(out.stderr.contains("`empty_as`"), "{out:?}");
    assert!(out.stderr.contains("a string or `null`"), "{out:?}");

    let dir = support::temp_dir("call-table-rows");
    let spec = support::write(
        &dir,
        "spec.yaml",
        "version: 1\nname: people\ndescription: Looks people up.\ntools:\n  people:\n    description: Looks people up by any column.\n    kind: table\n    rows: [{id: 1, name: Ann}]\n    empty_as: \"\"\n",
    );
    let out = support::run(support::toolrun().arg("check").arg(&spec));
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("error[E013]: `empty_as` applies to CSV files only"),
        "{out:?}"
    );
}

/// A spec with one `datetime` tool, `clock`, and tests whose clock is fixed by `now:` (in a
/// scratch folder removed when the guard drops).
fn clock_spec() -> (support::TempDir, std::path::PathBuf) {
    let dir = support::temp_dir("call-clock");
    let spec = support::specs::clock_spec(
        r#"{ operation: now, timezone: Europe/Paris, format: "%H:%M %Z" }"#,
        "It is {{ last.result.formatted }} in Paris.",
        r#"  - name: before_the_spring_change
    query: time?
    now: "2024-03-31T00:59:00Z"
    expect: { output_contains: "It is 01:59 CET in Paris." }
  - name: after_the_spring_change
    query: time?
    now: "2024-03-31T01:00:00Z"
    expect: { output_contains: "It is 03:00 CEST in Paris." }
"#,
    );
    let path = support::write(&dir, "clock.yaml", &spec);
    (dir, path)
}

fn clock(spec: &Path, args: serde_json::Value, now: &str) -> support::Output {
    let mut cmd = support::toolrun();
    cmd.arg("call")
        .arg(spec)
        .args(["clock", "--json", "--now", now, "--args"])
        .arg(args.to_string());
    support::run(&mut cmd)
}

#[test]
fn datetime_follows_daylight_saving_time_in_iana_zones() {
    let (_dir, spec) = clock_spec();
    let now = "2024-02-29T12:00:00Z";
    let result = |args: serde_json::Value| {
        let out = clock(&spec, args, now);
        out.assert_success();
        out.json()["result"].clone()
    };
    // Paris springs forward on the last Sunday of March: a day is 23 hours there.
    let r = result(
        json!({"operation": "add", "value": "2024-03-30T12:00", "amount": "1d", "timezone": "Europe/Paris"}),
    );
    assert_eq!(r["iso"], "2024-03-31T12:00:00+02:00");
    assert_eq!(r["dst"], true);
    assert_eq!(r["abbreviation"], "CEST");
    let r = result(
        json!({"operation": "diff", "value": "2024-03-30T12:00", "other": "2024-03-31T12:00", "timezone": "Europe/Paris"}),
    );
    assert_eq!(
        (r["hours"].clone(), r["human"].clone()),
        (json!(23), json!("1d"))
    );
    // ... and falls back on the last Sunday of October: 25 hours, 02:30 happens twice.
    let r = result(
        json!({"operation": "diff", "value": "2024-10-26T12:00", "other": "2024-10-27T12:00", "timezone": "Europe/Paris"}),
    );
    assert_eq!(r["hours"], 25);
    let r = result(
        json!({"operation": "parse", "value": "2024-10-27T02:30", "timezone": "Europe/Paris"}),
    );
    assert_eq!(r["iso"], "2024-10-27T02:30:00+02:00");
    let r = result(
        json!({"operation": "add", "value": "2024-10-27T02:30+02:00", "amount": "1h", "timezone": "Europe/Paris"}),
    );
    assert_eq!(r["iso"], "2024-10-27T02:30:00+01:00");
    assert_eq!(r["dst"], false);
    // New York changes on other Sundays (second of March, first of November).
    let r = result(
        json!({"operation": "parse", "value": "2024-03-10T02:30", "timezone": "America/New_York"}),
    );
    assert_eq!(
        r["iso"], "2024-03-10T03:30:00-04:00",
        "02:30 does not exist there"
    );
    let r = result(
        json!({"operation": "format", "value": "2024-11-03T12:00Z", "format": "%F %H:%M %Z", "timezone": "America/New_York"}),
    );
    assert_eq!(r["formatted"], "2024-11-03 07:00 EST");
    let r = result(
        json!({"operation": "format", "value": "2024-11-02T12:00Z", "format": "%F %H:%M %Z", "timezone": "America/New_York"}),
    );
    assert_eq!(r["formatted"], "2024-11-02 08:00 EDT");
    // `--now` is the clock `now` reads, in the zone asked for.
    let r = clock(
        &spec,
        json!({"operation": "now", "timezone": "Europe/Paris"}),
        "2024-03-31T01:00:00Z",
    )
    .json();
    assert_eq!(r["result"]["iso"], "2024-03-31T03:00:00+02:00");
    // A fixed offset still works as before, and without a zone nothing changed.
    let r = result(json!({"operation": "now", "timezone_offset": "+05:30"}));
    assert_eq!(r["iso"], "2024-02-29T17:30:00+05:30");
    assert!(r.get("timezone").is_none(), "{r}");
}

#[test]
fn an_unknown_time_zone_is_an_invalid_argument_with_a_did_you_mean() {
    let (_dir, spec) = clock_spec();
    let out = clock(
        &spec,
        json!({"operation": "now", "timezone": "Europe/Pariss"}),
        "2024-02-29T12:00:00Z",
    );
    out.assert_code(1);
    let record = out.json();
    assert_eq!(record["error"]["kind"], "invalid_arguments", "{out:?}");
    let message = record["error"]["message"].as_str().unwrap();
    support::assert_contains(
        message,
        &[
            "`timezone` `Europe/Pariss` is not a time zone",
            "did you mean `Europe/Paris`?",
        ],
    );
    let out = clock(
        &spec,
        json!({"operation": "now", "timezone": "Tokyo"}),
        "2024-02-29T12:00:00Z",
    );
    assert!(out.stderr.contains("did you mean `Asia/Tokyo`?"), "{out:?}");
}

#[test]
fn a_test_clock_set_by_now_is_read_in_the_zone() {
    let (_dir, spec) = clock_spec();
    let out = support::run(support::toolrun().arg("test").arg(&spec));
    out.assert_success();
    assert!(out.stdout.ends_with("2 passed, 0 failed\n"), "{out:?}");
}

#[test]
fn csv_names_and_cells_are_trimmed_of_any_whitespace() {
    let dir = support::temp_dir("call-table-trim");
    // Padding around names and cells, inside quotes, and Unicode spaces (an ideographic space, a
    // no-break space) all go; spaces inside a cell stay.
    support::write(
        &dir,
        "people.csv",
        " id ,\u{3000}name , city\n1,\" Ann Lee \",\u{a0}Paris\u{a0}\n2,\tBob\t,  \n",
    );
    let spec = support::write(
        &dir,
        "spec.yaml",
        "version: 1\nname: people\ndescription: Looks people up.\ntools:\n  people:\n    description: Looks people up by any column.\n    kind: table\n    file: people.csv\n",
    );
    let out = call_table(&spec, r#"{"where": {"city": "Paris"}}"#);
    out.assert_success();
    assert_eq!(
        out.json(),
        json!([{"id": 1, "name": "Ann Lee", "city": "Paris"}]),
        "{out:?}"
    );
    let out = call_table(&spec, r#"{"where": {"name": "Bob"}}"#);
    out.assert_success();
    assert_eq!(
        out.json(),
        json!([{"id": 2, "name": "Bob", "city": null}]),
        "{out:?}"
    );
}

/// An enum's error lists every allowed value (the validator's own names two and counts the
/// rest), so a model or a person can fix the call from the message alone; a very long enum is
/// cut, saying how many more there are.
#[test]
fn an_enum_error_lists_every_allowed_value_up_to_a_cap() {
    let dir = support::temp_dir("call_enum");
    let months = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let codes: Vec<String> = (0..40).map(|i| format!("c{i:02}")).collect();
    let spec = support::write(
        &dir,
        "spec.yaml",
        &format!(
            r#"version: 1
name: enums
tools:
  pick:
    description: Picks a month and a code.
    kind: mock
    input:
      type: object
      properties:
        month: {{ type: string, enum: {months:?} }}
        code: {{ type: string, enum: {codes:?} }}
    responses: [ {{ result: ok }} ]
models:
  m: {{ kind: scripted, scripts: [ {{ turns: [ {{ answer: x }} ] }} ] }}
"#
        ),
    );
    let spec = spec.to_str().unwrap();
    let out = toolrun(&["call", spec, "pick", "--args", r#"{"month": "smarch"}"#]);
    out.assert_code(1);
    let all = months
        .iter()
        .map(|m| format!("\"{m}\""))
        .collect::<Vec<_>>();
    let expected = format!(
        "\"smarch\" is not one of {} or {}",
        all[..11].join(", "),
        all[11]
    );
    assert!(out.stderr.contains(&expected), "{out:?}");
    assert!(!out.stderr.contains("other candidates"), "{out:?}");

    let out = toolrun(&["call", spec, "pick", "--args", r#"{"code": "zz"}"#]);
    out.assert_code(1);
    assert!(out.stderr.contains("\"c00\", \"c01\""), "{out:?}");
    assert!(out.stderr.contains("\"c29\" or 10 more"), "{out:?}");
    assert!(!out.stderr.contains("\"c30\""), "{out:?}");
}

/// A schema's `$ref` to another document is never fetched (SEP-2106: an MCP server's schema
/// may name one, and a client must not dereference it): it accepts any value, and the rest of
/// the schema, its own references included, still checks the arguments.
#[test]
fn a_ref_to_another_document_is_not_fetched_and_the_rest_still_checks() {
    let canary = TestServer::start(|_| Response::json(200, json!({ "type": "string" })));
    let dir = support::temp_dir("call_ref");
    let spec = support::write(
        &dir,
        "ref.yaml",
        &format!(
            r##"version: 1
name: ref
tools:
  lookup:
    kind: mock
    description: Looks a user up.
    input:
      type: object
      $defs: {{ userId: {{ type: string, pattern: "^[a-z0-9-]+$" }} }}
      properties:
        id: {{ $ref: "#/$defs/userId" }}
        profile: {{ $ref: "{}/profile-schema.json" }}
      required: [id]
    responses:
      - result: found
"##,
            canary.base_url()
        ),
    );
    let call = |args: &str| {
        let mut cmd = support::toolrun();
        cmd.arg("call").arg(&spec).args(["lookup", "--args", args]);
        support::run(&mut cmd)
    };
    let out = call(r#"{"id": "user-1", "profile": {"any": 1}}"#);
    out.assert_success();
    assert_eq!(out.stdout, "found\n", "{out:?}");
    let out = call(r#"{"id": "USER"}"#);
    out.assert_code(1);
    assert!(out.stderr.contains("(invalid_arguments)"), "{out:?}");
    assert!(out.stderr.contains("^[a-z0-9-]+$"), "{out:?}");
    assert!(canary.requests().is_empty(), "the $ref was fetched");
}
