//! The loop through the real binary: `toolrun run` and `toolrun test` on the example specs.

mod support;

use serde_json::Value;
use std::path::PathBuf;
use support::{run, toolrun, write};

fn spec(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("specs")
        .join(name)
}

fn trace(spec_name: &str, query: &str, extra: &[&str]) -> (i32, Value) {
    let out = run(toolrun()
        .arg("run")
        .arg(spec(spec_name))
        .args(["--query", query, "--json"])
        .args(extra));
    (out.code, out.json())
}

fn assert_snapshot(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    support::assert_snapshot(&path, actual);
}

#[test]
fn run_prints_the_final_answer() {
    let out = run(toolrun()
        .arg("run")
        .arg(spec("stock_assistant.yaml"))
        .args([
            "--query",
            "What is the gain on 100 AAPL shares bought at 150?",
        ]));
    out.assert_success();
    assert_eq!(out.stdout, "AAPL is 178.15; the gain is 2815.\n");
}

#[test]
fn the_gain_trace_matches_its_snapshot_and_is_deterministic() {
    let (code, first) = trace(
        "stock_assistant.yaml",
        "What is the gain on 100 AAPL shares bought at 150?",
        &[],
    );
    assert_eq!(code, 0);
    let (_, second) = trace(
        "stock_assistant.yaml",
        "What is the gain on 100 AAPL shares bought at 150?",
        &[],
    );
    let mut a = first.clone();
    let mut b = second;
    support::redact_durations_json(&mut a);
    support::redact_durations_json(&mut b);
    assert_eq!(a, b, "two runs differ in more than durations");
    assert_snapshot(
        "stock_gain.trace.json",
        &(serde_json::to_string_pretty(&a).unwrap() + "\n"),
    );
    let results = first["tool_results"].as_array().unwrap();
    assert_eq!(results[0]["name"], "get_stock_price");
    assert_eq!(results[0]["arguments"]["ticker"], "AAPL");
    assert_eq!(results[0]["result"], 178.15);
    assert_eq!(results[1]["name"], "calculate_expression");
    assert_eq!(results[1]["result"], 2815);
    assert_eq!(first["tool_call_count"], 2);
    assert_eq!(first["steps"], 3);
}

#[test]
fn direct_answer_uses_no_tool() {
    let (code, t) = trace("stock_assistant.yaml", "Tell me a joke", &[]);
    assert_eq!(code, 0);
    assert_eq!(t["tool_results"], Value::Array(vec![]));
    assert_eq!(t["final_output"], "I can only answer stock questions.");
}

#[test]
fn unknown_ticker_is_an_honest_failure_not_a_price() {
    let (code, t) = trace("stock_assistant.yaml", "What is the price of ZZZZ?", &[]);
    assert_eq!(code, 0);
    assert_eq!(t["tool_errors"][0]["kind"], "not_found");
    assert_eq!(t["tool_errors"][0]["message"], "unknown ticker ZZZZ");
    assert_eq!(t["tool_results"][0]["status"], "error");
    let answer = t["final_output"].as_str().unwrap();
    assert!(
        answer.contains("could not find") && !answer.contains("178"),
        "{answer}"
    );
}

#[test]
fn unknown_tools_and_invalid_arguments_never_execute() {
    let (_, t) = trace("guardrails.yaml", "Use the unknown tool", &[]);
    assert_eq!(t["tool_results"], Value::Array(vec![]));
    assert_eq!(t["tool_errors"][0]["kind"], "unknown_tool");
    assert_eq!(t["tool_call_count"], 0);
    let (_, t) = trace("guardrails.yaml", "Send bad arguments", &[]);
    assert_eq!(t["tool_call_count"], 0);
    let messages: Vec<&str> = t["tool_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages,
        vec![
            "\"order_id\" is a required property",
            "/order_id: \"forty-two\" is not of type \"integer\""
        ]
    );
    // Each rejected call still gets its own observation, keyed by its id.
    let tool_messages: Vec<&Value> = t["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_messages.len(), 2);
    assert_eq!(tool_messages[0]["tool_call_id"], t["tool_errors"][0]["id"]);
}

#[test]
fn side_effects_stop_for_confirmation_then_run_with_approve() {
    let (code, t) = trace("guardrails.yaml", "Refund order 42", &[]);
    assert_eq!(code, 3);
    assert_eq!(t["status"], "needs_confirmation");
    assert_eq!(t["pending_tool_call"]["name"], "refund_order");
    assert_eq!(t["pending_tool_call"]["arguments"]["order_id"], 42);
    assert_eq!(t["tool_call_count"], 0);
    let (code, t) = trace(
        "guardrails.yaml",
        "Refund order 42",
        &["--approve", "refund_order"],
    );
    assert_eq!(code, 0);
    assert_eq!(t["final_output"], "Refunded order 42.");
    // Without a terminal no prompt is shown: stdin "y" must not approve anything.
    let out = support::run_with_stdin(
        toolrun()
            .arg("run")
            .arg(spec("guardrails.yaml"))
            .args(["--query", "Refund order 42"]),
        "y\n",
    );
    assert_eq!(out.code, 3);
    assert!(
        out.stderr.contains("--approve refund_order"),
        "{}",
        out.stderr
    );
}

#[test]
fn limits_and_loops_stop_the_run_for_review() {
    let (code, t) = trace("guardrails.yaml", "Look up many orders", &[]);
    assert_eq!(code, 3);
    assert_eq!(t["stop_reason"], "max_tool_calls");
    assert_eq!(t["tool_call_count"], 4);
    assert!(t["final_output"].is_null());
    let (_, t) = trace("guardrails.yaml", "Loop on the order", &[]);
    assert_eq!(t["stop_reason"], "loop_detected");
    let (_, t) = trace("guardrails.yaml", "Think hard about order 42", &[]);
    assert_eq!(t["stop_reason"], "max_steps");
    assert_eq!(t["status"], "needs_review");
    assert!(
        t["final_output"].is_null(),
        "max_steps must never invent an answer"
    );
}

#[test]
fn long_output_is_truncated_with_a_marker() {
    let (_, t) = trace("guardrails.yaml", "Show the log", &[]);
    let result = t["tool_results"][0]["result"].as_str().unwrap();
    assert!(result.contains("…[truncated:"), "{result}");
    assert_eq!(t["tool_results"][0]["truncated"], true);
}

#[test]
fn parallel_calls_are_recorded_in_the_models_order() {
    let (_, t) = trace("stock_assistant.yaml", "Compare AAPL and MSFT", &[]);
    let ids: Vec<&str> = t["tool_results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["call_1", "call_2"]);
    assert_eq!(t["tool_results"][1]["arguments"]["ticker"], "MSFT");
}

#[test]
fn trace_and_events_files_are_written() {
    let dir = support::temp_dir("trace-events");
    let trace_path = dir.join("t.json");
    let events_path = dir.join("e.jsonl");
    let out = run(toolrun()
        .arg("run")
        .arg(spec("stock_assistant.yaml"))
        .args([
            "--query",
            "What is the gain on 100 AAPL shares bought at 150?",
        ])
        .arg("--trace")
        .arg(&trace_path)
        .arg("--events")
        .arg(&events_path));
    out.assert_success();
    let t: Value = serde_json::from_str(&std::fs::read_to_string(&trace_path).unwrap()).unwrap();
    assert_eq!(t["status"], "ok");
    let events = support::events_in(&events_path);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"run_started"));
    assert_eq!(kinds.last(), Some(&"run_finished"));
    assert!(
        kinds.contains(&"tool_started")
            && kinds.contains(&"tool_finished")
            && kinds.contains(&"model_request")
    );
    // A run's tool events are its own: no served session to name (as `serve`'s do).
    let keys = |e: &Value| {
        let mut k: Vec<String> = e.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k.join(",")
    };
    let started = events
        .iter()
        .find(|e| e["event"] == "tool_started")
        .unwrap();
    assert_eq!(keys(started), "arguments,event,id,name");
    let finished = events
        .iter()
        .find(|e| e["event"] == "tool_finished")
        .unwrap();
    assert_eq!(keys(finished), "duration_ms,event,id,name,status,truncated");
}

#[test]
fn blank_query_fails_before_any_model_call() {
    let (code, t) = trace("stock_assistant.yaml", "   ", &[]);
    assert_eq!(code, 1);
    assert_eq!(t["status"], "failed");
    assert_eq!(t["steps"], 0);
}

#[test]
fn usage_errors_exit_2() {
    let out = run(toolrun()
        .arg("run")
        .arg(spec("stock_assistant.yaml"))
        .args(["--query", "hi", "--model", "scriptd"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("did you mean `scripted`"),
        "{}",
        out.stderr
    );
    let out = run(toolrun()
        .arg("run")
        .arg(spec("stock_assistant.yaml"))
        .args(["--query", "hi", "--approve", "nope"]));
    assert_eq!(out.code, 2);
    let out = run(toolrun()
        .arg("run")
        .arg("/nonexistent/spec.yaml")
        .args(["--query", "hi"]));
    assert_eq!(out.code, 2);
}

#[test]
fn missing_secrets_are_a_usage_error_before_the_run() {
    let dir = support::temp_dir("secrets");
    let path = write(
        &dir,
        "s.yaml",
        r#"version: 1
name: s
secrets: [API_TOKEN]
tools:
  echo:
    description: Echoes the token length for a test.
    kind: http
    request: { url: "https://api.example.com/x", headers: { Authorization: "Bearer {{ secrets.API_TOKEN }}" } }
models:
  m: { kind: scripted, scripts: [{ turns: [{ answer: hi }] }] }
"#,
    );
    let out = run(toolrun().arg("run").arg(&path).args(["--query", "hi"]));
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("API_TOKEN"), "{}", out.stderr);
}

#[test]
fn a_script_that_runs_out_of_turns_is_a_model_error() {
    let dir = support::temp_dir("out-of-turns");
    let path = write(
        &dir,
        "s.yaml",
        r#"version: 1
name: s
tools:
  price:
    description: Returns a price for any ticker.
    kind: mock
    input: { type: object, properties: { t: { type: string } } }
    responses: [{ result: 1 }]
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: price, arguments: { t: A } }]
"#,
    );
    let out = run(toolrun()
        .arg("run")
        .arg(&path)
        .args(["--query", "hi", "--json"]));
    assert_eq!(out.code, 1);
    let t = out.json();
    assert_eq!(t["stop_reason"], "model_error");
    assert!(
        t["error"].as_str().unwrap().contains("ran out of turns"),
        "{}",
        t["error"]
    );
}

#[test]
fn test_command_runs_every_declared_case() {
    // Every example spec's declared tests pass offline: no keys, no network.
    let mut specs: Vec<PathBuf> =
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("specs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
    specs.sort();
    let out = run(toolrun().arg("test").args(&specs));
    assert_eq!(out.code, 0, "{out:?}");
    let last = out.stdout.lines().last().unwrap();
    assert!(last.ends_with(" passed, 0 failed"), "{last}");
}

#[test]
fn test_command_reports_failures_with_expected_and_got() {
    let dir = support::temp_dir("failing-test");
    let path = write(
        &dir,
        "s.yaml",
        r#"version: 1
name: failing
tools: {}
models:
  m: { kind: scripted, scripts: [{ turns: [{ answer: "the answer is 41" }] }] }
tests:
  - name: wrong_answer
    query: what is the answer?
    expect: { status: ok, output_contains: "42" }
  - name: right_answer
    query: what is the answer?
    expect: { output_matches: "4[0-9]" }
"#,
    );
    let junit = dir.join("junit.xml");
    let out = run(toolrun().arg("test").arg(&path).arg("--junit").arg(&junit));
    assert_eq!(out.code, 1);
    assert!(
        out.stdout.contains("FAIL failing::wrong_answer"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("expected the output to contain \"42\", got \"the answer is 41\""),
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.lines().last(), Some("1 passed, 1 failed"));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testsuite name=\"failing\" tests=\"2\" failures=\"1\""),
        "{xml}"
    );
    let out = run(toolrun()
        .arg("test")
        .arg(&path)
        .args(["--format", "json", "--filter", "right"]));
    assert_eq!(out.code, 0);
    let doc = out.json();
    // `--format json` prints the results document.
    assert_eq!(doc["kind"], "toolrun.results");
    assert_eq!(doc["totals"]["passed"], 1);
    assert_eq!(doc["tests"][0]["name"], "right_answer");
}

#[test]
fn partitions_split_the_suite_without_overlap() {
    let mut seen = Vec::new();
    for k in 1..=3 {
        let out = run(toolrun().arg("test").arg(spec("guardrails.yaml")).args([
            "--format",
            "json",
            "--partition",
            &format!("{k}/3"),
        ]));
        assert_eq!(out.code, 0);
        for r in out.json()["tests"].as_array().unwrap() {
            seen.push(r["name"].as_str().unwrap().to_string());
        }
    }
    let all = run(toolrun()
        .arg("test")
        .arg(spec("guardrails.yaml"))
        .args(["--format", "json"]))
    .json();
    let mut expected: Vec<String> = all["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    seen.sort();
    expected.sort();
    assert_eq!(seen, expected);
    let out = run(toolrun()
        .arg("test")
        .arg(spec("guardrails.yaml"))
        .args(["--partition", "4/3"]));
    assert_eq!(out.code, 2);
}

#[test]
fn run_timeout_keeps_everything_observed_so_far() {
    let dir = support::temp_dir("run-timeout");
    let path = write(
        &dir,
        "s.yaml",
        r#"version: 1
name: slow
tools:
  quick:
    description: Answers at once with a fixed value.
    kind: mock
    responses: [{ result: 1 }]
  slow:
    description: A service that takes far too long to answer.
    kind: mock
    timeout: 30s
    faults: [{ delay: 20s }]
    responses: [{ result: 2 }]
limits: { run_timeout: 300ms, tool_timeout: 200ms }
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: quick }]
          - tool_calls: [{ name: slow }]
          - answer: never
"#,
    );
    let trace_path = dir.join("t.json");
    let out = run(toolrun()
        .arg("run")
        .arg(&path)
        .args(["--query", "go", "--trace"])
        .arg(&trace_path));
    assert_eq!(out.code, 1, "{out:?}");
    let t: Value = serde_json::from_str(&std::fs::read_to_string(&trace_path).unwrap()).unwrap();
    assert_eq!(t["status"], "failed");
    assert_eq!(t["stop_reason"], "run_timeout");
    assert_eq!(t["tool_results"][0]["name"], "quick");
    assert!(t["final_output"].is_null());
}

const CHECKED_SPEC: &str = r#"version: 1
name: checked
tools:
  lookup:
    description: Looks a code up in the catalogue.
    kind: mock
    input:
      type: object
      properties:
        code: { type: string, pattern: "^[A-Z]{3}$", default: 7 }
      required: [code]
      additionalProperties: false
    responses:
      - result: found
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: lookup, arguments: { code: "{{ query[5:8] | lower }}" } }]
          - tool_calls: [{ name: lookup, arguments: { code: ABC } }]
          - answer: "{{ last.result }}"
"#;

fn checked_files(cache: &std::path::Path) -> usize {
    std::fs::read_dir(cache.join("checked"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn a_spec_checked_once_runs_without_checking_its_schemas_again_and_behaves_the_same() {
    let dir = support::temp_dir("checked-cache");
    let cache = dir.join("cache");
    let spec = write(&dir, "checked.yaml", CHECKED_SPEC);
    let go = || {
        let out = run(toolrun()
            .env("TOOLRUN_CACHE_DIR", &cache)
            .args(["run", "--json", "--query", "find ABC"])
            .arg(&spec));
        out.assert_success();
        let mut v = out.json();
        support::redact_durations_json(&mut v);
        v
    };
    let first = go();
    assert_eq!(checked_files(&cache), 1, "a clean spec is remembered");
    let second = go();
    assert_eq!(first, second, "a remembered spec runs the same");
    // The validator built on first call still rejects what the schema forbids.
    assert_eq!(second["tool_errors"][0]["kind"], "invalid_arguments");
    assert_eq!(second["final_output"], "found");

    // `check` checks everything, remembered or not: the default that breaks its schema.
    let out = run(toolrun()
        .env("TOOLRUN_CACHE_DIR", &cache)
        .arg("check")
        .arg(&spec));
    assert!(out.stderr.contains("W102"), "{out:?}");

    // Any change to the text is a new spec.
    let changed = write(
        &dir,
        "checked.yaml",
        &CHECKED_SPEC.replace("catalogue", "index"),
    );
    run(toolrun()
        .env("TOOLRUN_CACHE_DIR", &cache)
        .args(["run", "--query", "find ABC"])
        .arg(&changed))
    .assert_success();
    assert_eq!(checked_files(&cache), 2);
}

#[test]
fn a_spec_with_a_broken_schema_is_never_remembered() {
    let dir = support::temp_dir("checked-cache-broken");
    let cache = dir.join("cache");
    let spec = write(
        &dir,
        "broken.yaml",
        &CHECKED_SPEC.replace("type: string, pattern", "type: strng, pattern"),
    );
    for _ in 0..2 {
        let out = run(toolrun()
            .env("TOOLRUN_CACHE_DIR", &cache)
            .args(["run", "--query", "find ABC"])
            .arg(&spec));
        assert_eq!(out.code, 1, "{out:?}");
        assert!(out.stderr.contains("E014"), "{out:?}");
    }
    assert_eq!(checked_files(&cache), 0);
}

/// The entry a run remembers its spec by, and its inode: a run that used the entry leaves the
/// file alone, one that did not writes a fresh file in its place.
fn the_entry(cache: &std::path::Path) -> (PathBuf, u64) {
    let entries: Vec<PathBuf> = std::fs::read_dir(cache.join("checked"))
        .expect("the cache folder")
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let path = entries[0].clone();
    (path.clone(), file_id(&path))
}

#[cfg(unix)]
fn file_id(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().ino()
}

#[cfg(not(unix))]
fn file_id(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// `run --trace` of the spec with this cache; the trace's text with durations zeroed.
fn traced_run(spec: &std::path::Path, cache: &std::path::Path, dir: &std::path::Path) -> String {
    let trace = dir.join("trace.json");
    let out = run(toolrun()
        .env("TOOLRUN_CACHE_DIR", cache)
        .args(["run", "--query", "find ABC", "--trace"])
        .arg(&trace)
        .arg(spec));
    out.assert_success();
    support::redact_durations(&std::fs::read_to_string(&trace).unwrap())
}

#[test]
fn a_run_from_the_remembered_spec_writes_the_same_trace_byte_for_byte() {
    let dir = support::temp_dir("checked-cache-trace");
    let cache = dir.join("cache");
    let spec = write(&dir, "checked.yaml", CHECKED_SPEC);
    let cold = traced_run(&spec, &cache, &dir);
    let (entry, id) = the_entry(&cache);
    let cached = traced_run(&spec, &cache, &dir);
    assert_eq!(
        the_entry(&cache),
        (entry, id),
        "the second run used the entry"
    );
    assert_eq!(cold, cached);
    assert!(cold.contains("\"sha256\""), "{cold}");
}

#[test]
fn a_damaged_truncated_or_foreign_entry_is_ignored_and_rebuilt() {
    let dir = support::temp_dir("checked-cache-damaged");
    let cache = dir.join("cache");
    let spec = write(&dir, "checked.yaml", CHECKED_SPEC);
    let cold = traced_run(&spec, &cache, &dir);
    let (entry, _) = the_entry(&cache);
    let good = std::fs::read(&entry).unwrap();
    let mut flipped = good.clone();
    // A letter of the parsed tree's text, near the end: `found` would become `fOund`.
    let at = good.len() - 40;
    flipped[at] ^= 0x20;
    let mut damaged: Vec<(&str, Vec<u8>)> = vec![
        ("flipped", flipped),
        ("truncated", good[..good.len() / 2].to_vec()),
        ("empty", Vec::new()),
        ("foreign", b"not an entry at all".to_vec()),
    ];
    if cfg!(unix) {
        // Intact, but others could have written it: not trusted.
        damaged.push(("writable by others", good.clone()));
    }
    for (what, bytes) in damaged {
        std::fs::write(&entry, &bytes).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = if what == "writable by others" {
                0o666
            } else {
                0o600
            };
            std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let (_, before) = the_entry(&cache);
        assert_eq!(traced_run(&spec, &cache, &dir), cold, "{what}");
        let (_, after) = the_entry(&cache);
        assert_ne!(before, after, "{what}: rebuilt");
        assert_eq!(
            std::fs::read(&entry).unwrap(),
            good,
            "{what}: rebuilt as it was"
        );
    }
}

const TABLED_SPEC: &str = r#"version: 1
name: tabled
tools:
  people:
    description: Looks people up.
    kind: table
    file: people.csv
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: people, arguments: { where: { name: Ann } } }]
          - answer: "{{ last.result }}"
"#;

#[test]
fn a_remembered_spec_whose_table_changed_is_checked_again() {
    let dir = support::temp_dir("checked-cache-table");
    let cache = dir.join("cache");
    let spec = write(&dir, "tabled.yaml", TABLED_SPEC);
    write(&dir, "people.csv", "name,city\nAnn,Oslo\n");
    let go = || {
        run(toolrun()
            .env("TOOLRUN_CACHE_DIR", &cache)
            .args(["run", "--query", "who is Ann"])
            .arg(&spec))
    };
    let out = go();
    out.assert_success();
    assert!(out.stdout.contains("Oslo"), "{out:?}");
    the_entry(&cache);
    // The scripted call names a column the table no longer has: an error `check` reports,
    // which a remembered spec must not hide.
    write(&dir, "people.csv", "person,city\nAnn,Bergen\n");
    let out = go();
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("E019"), "{out:?}");
}

#[test]
fn a_remembered_spec_copied_beside_another_table_is_checked_again() {
    let dir = support::temp_dir("checked-cache-copied");
    let cache = dir.join("cache");
    let first = write(&dir, "a/tabled.yaml", TABLED_SPEC);
    write(&dir, "a/people.csv", "name,city\nAnn,Oslo\n");
    let go = |spec: &std::path::Path| {
        run(toolrun()
            .env("TOOLRUN_CACHE_DIR", &cache)
            .args(["run", "--query", "who is Ann"])
            .arg(spec))
    };
    go(&first).assert_success();
    the_entry(&cache);
    // The same text elsewhere reads its own `people.csv`, which has no `name` column.
    let copy = write(&dir, "b/tabled.yaml", TABLED_SPEC);
    write(&dir, "b/people.csv", "person,city\nAnn,Bergen\n");
    let out = go(&copy);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("E019"), "{out:?}");
    // The first copy still runs from its entry.
    go(&first).assert_success();
}

/// A scripted model whose second turn is cut off, and a test that expects it.
const CUT_OFF_SPEC: &str = r#"version: 1
name: cut
tools:
  price:
    description: A price.
    kind: mock
    input: { type: object, properties: {} }
    responses: [{ result: 178.15 }]
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{ name: price, arguments: {} }]
          - cut_off: "AAPL trades at {{ last.result }}, up from"
tests:
  - name: cut_short
    query: AAPL?
    expect: { status: needs_review, stop_reason: max_tokens, output_contains: "up from" }
"#;

/// A scripted `cut_off` turn is a reply cut at `max_tokens`, as a live model's can be: the run
/// keeps the partial answer and ends for review, and a spec's test can expect exactly that.
#[test]
fn a_scripted_cut_off_answer_ends_the_run_for_review() {
    let dir = support::temp_dir("run-loop-cut-off");
    let spec_path = write(&dir, "cut.yaml", CUT_OFF_SPEC);
    let out = run(toolrun()
        .arg("run")
        .arg(&spec_path)
        .args(["--query", "AAPL?"]));
    out.assert_code(3);
    assert_eq!(out.stdout, "AAPL trades at 178.15, up from\n");
    assert!(
        out.stderr
            .contains("needs_review (max_tokens): the answer was cut off")
            && out.stderr.contains("a scripted `cut_off` turn"),
        "{out:?}"
    );
    let tested = run(toolrun().arg("test").arg(&spec_path));
    tested.assert_success();
    assert!(tested.stdout.contains("1 passed, 0 failed"), "{tested:?}");

    // One form per turn.
    let both = std::fs::read_to_string(&spec_path)
        .unwrap()
        .replace("- cut_off:", "- answer: x\n            cut_off:");
    let bad = write(&dir, "both.yaml", &both);
    let out = run(toolrun().arg("check").arg(&bad));
    out.assert_code(1);
    assert!(
        out.stderr.contains(
            "error[E029]: a turn needs exactly one of `answer`, `tool_calls`, `raw` or `cut_off`"
        ),
        "{out:?}"
    );
}
