//! Hostile input, through the binary: specs written to hurt (alias bombs, deep nesting, huge or
//! broken files, paths out of the spec's folder, runaway templates and regexes, absurd
//! durations) and model output written to hurt (huge or deeply nested arguments, control
//! characters, thousands of calls, secrets in the answer). Each must end with a clear error or a
//! bounded, reported outcome, in bounded time: every command runs under a timeout far below
//! what unbounded work would take.

mod support;

use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use support::providers::{self, Fake, KEY};
use support::{run_with_timeout, temp_dir, toolrun, write, Output, Response};

/// Generous for a debug build on a busy 2-core machine, far below what a hang or a billion
/// laughs would take.
const QUICK: Duration = Duration::from_secs(30);

fn check(spec: &Path) -> Output {
    run_with_timeout(toolrun().arg("check").arg(spec), None, QUICK)
}

fn both(out: &Output) -> String {
    format!("{}{}", out.stdout, out.stderr)
}

/// A spec that must be refused with `code`, quickly and without a crash.
#[track_caller]
fn assert_refused(out: &Output, code: &str) {
    let text = both(out);
    assert!(
        out.code == 1 || out.code == 2,
        "expected a refusal, got {out:?}"
    );
    assert!(text.contains(code), "expected {code}\n{out:?}");
    assert!(!text.contains("panicked"), "{out:?}");
}

// ---------------------------------------------------------------------------------------------
// Specs

#[test]
fn yaml_alias_bomb_is_refused() {
    let mut text = String::from(
        "version: 1\nname: bomb\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for i in 1..12 {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let dir = temp_dir("alias_bomb");
    let out = check(&write(&dir, "spec.yaml", &text));
    assert_refused(&out, "E004");
    assert!(both(&out).contains("aliases expand"), "{out:?}");
}

#[test]
fn ten_thousand_deep_nesting_is_refused() {
    let dir = temp_dir("deep");
    let flow = format!(
        "version: 1\nname: deep\ntools: {}{}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    assert_refused(&check(&write(&dir, "flow.yaml", &flow)), "E004");

    let mut block = String::from("version: 1\nname: deep\ntools:\n");
    for depth in 1..10_000 {
        block.push_str(&" ".repeat(depth));
        block.push_str("k:\n");
    }
    assert_refused(&check(&write(&dir, "block.yaml", &block)), "E004");
}

#[test]
fn fifty_megabyte_spec_is_refused_before_parsing() {
    let dir = temp_dir("huge_spec");
    let mut text = String::with_capacity(50 << 20);
    text.push_str("version: 1\nname: huge\n");
    let line = format!("# {}\n", "x".repeat(1021));
    while text.len() < 50 << 20 {
        text.push_str(&line);
    }
    let out = check(&write(&dir, "spec.yaml", &text));
    assert_refused(&out, "E004");
    assert!(both(&out).contains("bytes"), "{out:?}");
}

#[test]
fn invalid_utf8_spec_is_refused_with_its_position() {
    let dir = temp_dir("utf8");
    let path = dir.join("spec.yaml");
    std::fs::write(&path, b"version: 1\nname: bad\ndescription: caf\xe9\n").unwrap();
    let out = check(&path);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(both(&out).contains("not valid UTF-8"), "{out:?}");
    assert!(both(&out).contains(":3:"), "the line is shown\n{out:?}");
}

/// A `file:` table, with everything else a spec needs to compile.
fn table_spec(file: &str) -> String {
    format!(
        "version: 1\nname: tables\ndescription: Reads a table.\ntools:\n  orders:\n    description: Looks orders up.\n    kind: table\n    file: {file}\n"
    )
}

#[test]
fn table_file_outside_the_spec_folder_is_refused() {
    let root = temp_dir("escape");
    write(&root, "secret.csv", "id,value\n1,top secret\n");
    let dir = root.join("specs");
    std::fs::create_dir_all(&dir).unwrap();
    write(&dir, "inside.csv", "id,value\n1,fine\n");

    let ok = check(&write(&dir, "ok.yaml", &table_spec("inside.csv")));
    assert_eq!(ok.code, 0, "{ok:?}");

    let out = check(&write(&dir, "dotdot.yaml", &table_spec("../secret.csv")));
    assert_refused(&out, "E022");
    assert!(both(&out).contains("outside the project root"), "{out:?}");
    assert!(!both(&out).contains("top secret"), "{out:?}");

    let out = check(&write(
        &dir,
        "abs.yaml",
        &table_spec(&root.join("secret.csv").display().to_string()),
    ));
    assert_refused(&out, "E022");

    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(root.join("secret.csv"), dir.join("link.csv")).unwrap();
        let out = check(&write(&dir, "link.yaml", &table_spec("link.csv")));
        assert_refused(&out, "E022");
        assert!(!both(&out).contains("top secret"), "{out:?}");
    }
}

/// A named pipe has no end: reading it as a table would wait forever.
#[cfg(unix)]
#[test]
fn table_file_that_is_not_a_regular_file_is_refused_without_hanging() {
    let dir = temp_dir("fifo");
    let fifo = dir.join("pipe.csv");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !matches!(made, Ok(s) if s.success()) {
        eprintln!("mkfifo unavailable; skipping");
        return;
    }
    let out = check(&write(&dir, "spec.yaml", &table_spec("pipe.csv")));
    assert_refused(&out, "E022");
    assert!(both(&out).contains("not a regular file"), "{out:?}");
}

/// A spec whose scripted model calls `echo` once, whose mock result is `result`.
fn template_spec(result: &str) -> String {
    format!(
        r#"version: 1
name: templates
description: A mock tool with a hostile result template.
tools:
  echo:
    description: Echoes.
    kind: mock
    input:
      type: object
      properties:
        text: {{ type: string, description: "Anything" }}
    responses:
      - result: "{result}"
models:
  s:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: echo, arguments: {{ text: abc }} }}]
          - answer: done
"#
    )
}

fn run_trace(spec: &Path, query: &str) -> (Output, Value) {
    let out = run_with_timeout(
        toolrun()
            .arg("run")
            .arg(spec)
            .args(["--json", "--query", query]),
        None,
        QUICK,
    );
    assert!(!both(&out).contains("panicked"), "{out:?}");
    let trace = out.json();
    (out, trace)
}

/// The error the one `echo` call ended with.
fn echo_error(spec_text: &str) -> String {
    let dir = temp_dir("template");
    let spec = write(&dir, "spec.yaml", spec_text);
    let checked = check(&spec);
    assert_eq!(checked.code, 0, "{checked:?}");
    let (_, trace) = run_trace(&spec, "go");
    let errors = trace["tool_errors"].as_array().cloned().unwrap_or_default();
    assert_eq!(errors.len(), 1, "{trace:#}");
    errors[0].to_string()
}

#[test]
fn runaway_template_loops_are_stopped() {
    let err = echo_error(&template_spec(
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
    ));
    assert!(err.contains("too much work"), "{err}");
}

#[test]
fn huge_ranges_are_refused() {
    let err = echo_error(&template_spec(
        "{% for i in range(1000000000) %}x{% endfor %}",
    ));
    assert!(err.contains("too many elements"), "{err}");
}

#[test]
fn string_repetition_is_bounded() {
    // A constant repetition is refused by `check`: minijinja would build it while compiling.
    for template in ["{{ 'x' * 1000000000 }}", "{{ 'x' * 100000000 }}"] {
        let dir = temp_dir("repeat");
        let out = check(&write(&dir, "spec.yaml", &template_spec(template)));
        assert_refused(&out, "E016");
        assert!(both(&out).contains("megabyte"), "{out:?}");
    }
    // A repetition by an argument renders in a limited child process.
    let err = echo_error(&template_spec(
        "{% set s = 'xy' * (args.text | length * 10000000) %}{{ (s ~ s ~ s) | length }}",
    ));
    assert!(err.contains("limit_exceeded"), "{err}");
    assert!(err.contains("MiB of memory"), "{err}");
}

/// A run whose `echo` result is `result` and whose answer reports how the call ended, so the
/// run's own outcome shows that it went on after the template failed.
fn run_after_template(result: &str) -> (Output, Value) {
    let dir = temp_dir("template_limit");
    let spec = template_spec(result).replace(
        "- answer: done",
        "- answer: \"went on after {{ last.error.kind }}\"",
    );
    let spec = write(&dir, "spec.yaml", &spec);
    let checked = check(&spec);
    assert_eq!(checked.code, 0, "{checked:?}");
    run_trace(&spec, "go")
}

#[test]
fn doubling_strings_is_stopped_at_the_memory_limit() {
    // 40 doublings of the argument: a terabyte. Before issue 12 this ran out of memory.
    let mut doubling = String::from("{% set a0 = args.text %}");
    for i in 1..=40 {
        doubling.push_str(&format!("{{% set a{i} = a{p} ~ a{p} %}}", p = i - 1));
    }
    doubling.push_str("{{ a40 | length }}");
    let namespace = "{% set ns = namespace(s=args.text) %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}";
    for template in [doubling.as_str(), namespace] {
        let (out, trace) = run_after_template(template);
        assert_eq!(out.code, 0, "{template}\n{out:?}");
        let error = &trace["tool_errors"][0];
        assert_eq!(error["kind"], "limit_exceeded", "{template}\n{trace:#}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("MiB of memory") || message.contains("more than"),
            "{message}"
        );
        assert_eq!(trace["final_output"], "went on after limit_exceeded");
    }
}

#[test]
fn recursive_macros_are_not_available() {
    let template = "{% macro d(s, n) %}{% if n > 0 %}{{ d(s ~ s, n - 1) }}{% else %}{{ s }}{% endif %}{% endmacro %}{{ d(args.text, 60) }}";
    let dir = temp_dir("macro");
    let out = check(&write(&dir, "spec.yaml", &template_spec(template)));
    assert_refused(&out, "E016");
}

#[test]
fn huge_loops_run_out_of_fuel_as_a_limit() {
    let (out, trace) = run_after_template(
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ args.text }}{% endfor %}{% endfor %}",
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        trace["tool_errors"][0]["kind"], "limit_exceeded",
        "{trace:#}"
    );
}

/// Each iteration copies about 36 MB for a dozen units of fuel: within fuel and memory, but
/// over a minute of work on any machine, so the timeouts, not the fuel, end it.
const SLOW: &str = "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{% if (s ~ s ~ s ~ s ~ s ~ s ~ s ~ QUERY) == '' %}{% endif %}{% endfor %}";

#[test]
fn a_slow_template_is_stopped_by_the_tool_timeout() {
    let spec = template_spec(&SLOW.replace("QUERY", "args.text"))
        .replace("kind: mock\n", "kind: mock\n    timeout: 1s\n")
        .replace(
            "- answer: done",
            "- answer: \"went on after {{ last.error.kind }}\"",
        );
    let dir = temp_dir("slow_tool");
    let (out, trace) = run_trace(&write(&dir, "spec.yaml", &spec), "go");
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(trace["tool_errors"][0]["kind"], "timeout", "{trace:#}");
    assert_eq!(trace["final_output"], "went on after timeout");
}

#[test]
fn a_slow_answer_template_is_stopped_by_the_run_timeout() {
    let spec = template_spec("ok")
        .replace(
            "tools:\n",
            "limits: { run_timeout: 2s, tool_timeout: 1s }\ntools:\n",
        )
        .replace(
            "- answer: done",
            &format!("- answer: \"{}\"", SLOW.replace("QUERY", "query")),
        );
    let dir = temp_dir("slow_answer");
    let (out, trace) = run_trace(&write(&dir, "spec.yaml", &spec), "go");
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(trace["stop_reason"], "run_timeout", "{trace:#}");
}

#[test]
fn template_output_is_bounded_while_it_renders() {
    // 100 iterations of 1 MB: little fuel, 100 MB of text. Refused once past the limit, not
    // after the whole string is built.
    let err = echo_error(&template_spec(
        "{% set mb = 'x' * 1000000 %}{% for i in range(100) %}{{ mb }}{% endfor %}",
    ));
    assert!(err.contains("more than"), "{err}");
}

#[test]
fn template_recursion_is_bounded() {
    let err = echo_error(&template_spec(
        "{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}",
    ));
    assert!(err.contains("recursion"), "{err}");
}

#[test]
fn backtracking_regex_in_a_script_when_is_linear() {
    let dir = temp_dir("regex");
    let spec = write(
        &dir,
        "spec.yaml",
        r#"version: 1
name: regex
description: A script chosen by a regex that would backtrack in a backtracking engine.
tools:
  echo:
    description: Echoes.
    kind: mock
    responses:
      - result: ok
models:
  s:
    kind: scripted
    scripts:
      - when: "^(a+)+$"
        turns:
          - answer: matched
      - when: "^(a|aa)*c$"
        turns:
          - answer: second
      - turns:
          - answer: no match
"#,
    );
    // 100,000 `a`s and a `b`: exponential for a backtracking engine, linear for `regex`.
    let query = format!("{}b", "a".repeat(100_000));
    let (out, trace) = run_trace(&spec, &query);
    assert_eq!(trace["final_output"], "no match", "{out:?}");
}

#[test]
fn durations_that_overflow_are_errors() {
    let dir = temp_dir("durations");
    for value in [
        "99999999999999999999999999h",
        "1e400s",
        "18446744073709551615ms",
        "9999999999999999h9999999999999999h",
        "NaNs",
        "infs",
        "-5s",
        "1.5.5s",
    ] {
        let spec = write(
            &dir,
            "spec.yaml",
            &format!(
                "version: 1\nname: durations\ndescription: Absurd limits.\ntools:\n  echo:\n    description: Echoes.\n    kind: mock\n    timeout: \"{value}\"\n    responses:\n      - result: ok\nlimits:\n  run_timeout: \"{value}\"\n"
            ),
        );
        let out = check(&spec);
        assert_eq!(out.code, 1, "`{value}`: {out:?}");
        assert!(!both(&out).contains("panicked"), "`{value}`: {out:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Model output (a fake OpenAI server)

fn run_live(spec: &Path, extra_args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = toolrun();
    cmd.arg("run")
        .arg(spec)
        .args(["--query", "go"])
        .args(extra_args)
        .env("TEST_KEY", KEY);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = run_with_timeout(&mut cmd, None, Duration::from_secs(60));
    assert!(!both(&out).contains("panicked"), "{out:?}");
    out
}

#[test]
fn ten_megabytes_of_arguments_are_handled() {
    let big = json!({ "ticker": "x".repeat(10 << 20) }).to_string();
    let fake = Fake::openai(vec![
        providers::openai_tool_calls(&[("call_1", "get_stock_price", &big)]),
        providers::openai_answer("done"),
    ]);
    let out = run_live(&fake.spec_file("", ""), &["--json"], &[]);
    out.assert_success();
    let trace = out.json();
    assert_eq!(trace["final_output"], "done");
    // The mock has no answer for that ticker: an observation, not a crash.
    assert_eq!(
        providers::error_kinds(&trace).len(),
        1,
        "{:#}",
        trace["tool_errors"]
    );
}

#[test]
fn deeply_nested_arguments_are_an_error_observation() {
    let deep = format!(
        "{{\"ticker\": {}1{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let fake = Fake::openai(vec![
        providers::openai_tool_calls(&[("call_1", "get_stock_price", &deep)]),
        providers::openai_answer("done"),
    ]);
    let out = run_live(&fake.spec_file("", ""), &["--json"], &[]);
    out.assert_success();
    let trace = out.json();
    let kinds = providers::error_kinds(&trace);
    assert_eq!(kinds.len(), 1, "{:.2000}", trace.to_string());
    assert!(
        matches!(
            kinds[0].as_str(),
            "malformed_decision" | "invalid_arguments"
        ),
        "{kinds:?}"
    );
    assert_eq!(fake.violations(), Vec::<String>::new());
}

#[test]
fn tool_names_with_control_characters_do_not_reach_the_terminal() {
    let name = "get\u{1b}[2J\u{1b}[31mstock\r\nFAKE LINE\u{7}";
    let fake = Fake::openai(vec![
        providers::openai_tool_calls(&[("call_1", name, r#"{"ticker":"AAPL"}"#)]),
        providers::openai_answer("done"),
    ]);
    let spec = fake.spec_file("", "");
    let dir = spec.parent().unwrap().to_path_buf();
    let trace_path = dir.join("trace.json");
    let events_path = dir.join("events.jsonl");
    let out = run_live(
        &spec,
        &[
            "--trace",
            trace_path.to_str().unwrap(),
            "--events",
            events_path.to_str().unwrap(),
        ],
        &[],
    );
    out.assert_success();
    for (what, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(
            !text
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "control characters in {what}: {:?}",
            text
        );
        assert!(!text.contains("\nFAKE LINE"), "{what}: {text:?}");
    }
    // JSON escapes them: the trace and the events stay one valid document / one line each.
    let trace: Value =
        serde_json::from_str(&std::fs::read_to_string(&trace_path).unwrap()).unwrap();
    assert_eq!(
        providers::error_kinds(&trace),
        ["unknown_tool"],
        "{trace:#}"
    );
    for line in std::fs::read_to_string(&events_path).unwrap().lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    }
}

#[test]
fn thousands_of_calls_in_one_turn_are_bounded_by_max_tool_calls() {
    // Distinct arguments, so loop detection does not end the run before the limit does.
    let calls: Vec<(String, String)> = (0..5_000)
        .map(|i| (format!("call_{i}"), format!(r#"{{"ticker":"T{i}"}}"#)))
        .collect();
    let refs: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "get_stock_price", args.as_str()))
        .collect();
    let fake = Fake::openai(vec![
        providers::openai_tool_calls(&refs),
        providers::openai_answer("done"),
        providers::openai_answer("done"),
    ]);
    let spec = fake.spec_file("", "limits:\n  max_tool_calls: 6\n");
    let out = run_live(&spec, &["--json"], &[]);
    let trace = out.json();
    let ran = trace["tool_call_count"].as_u64().unwrap_or(u64::MAX);
    assert!(ran <= 6, "{ran} calls ran");
    let text = trace.to_string();
    assert!(
        text.contains("max_tool_calls"),
        "the limit is reported\n{text:.3000}"
    );
}

#[test]
fn a_secret_in_the_answer_is_masked_everywhere() {
    const SECRET: &str = "hunter2-very-secret-value";
    let answer = format!("The key is {SECRET}, as you asked.");
    let fake = Fake::openai(vec![
        providers::openai_tool_calls(&[(
            "call_1",
            "get_stock_price",
            &json!({ "ticker": SECRET }).to_string(),
        )]),
        providers::openai_answer(&answer),
    ]);
    let spec = fake.spec_file(
        "",
        "secrets: [MY_SECRET]\npolicy:\n  network:\n    allow_hosts: [\"127.0.0.1\"]\n",
    );
    let dir = spec.parent().unwrap().to_path_buf();
    let trace_path = dir.join("trace.json");
    let events_path = dir.join("events.jsonl");
    let fixture_path = dir.join("fixture.json");
    let out = run_live(
        &spec,
        &[
            "--trace",
            trace_path.to_str().unwrap(),
            "--events",
            events_path.to_str().unwrap(),
            "--record",
            fixture_path.to_str().unwrap(),
        ],
        &[("MY_SECRET", SECRET)],
    );
    assert!(!both(&out).contains(SECRET), "{out:?}");
    assert!(out.stdout.contains("The key is ***"), "{out:?}");
    for path in [&trace_path, &events_path, &fixture_path] {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{}: {e}\n{out:?}", path.display()));
        assert!(
            !text.contains(SECRET),
            "{} leaks the secret",
            path.display()
        );
    }
}

/// Not a model or spec problem, but the same promise: a response with an absurd number of
/// bytes is cut off by the reply limit rather than read into memory.
#[test]
fn an_endless_model_reply_is_cut_off() {
    let fake = Fake::openai(vec![Response::json(200, json!({}))
        .huge(64 << 20)
        .header("content-type", "application/json")]);
    let out = run_live(&fake.spec_file("", "\n"), &["--json"], &[]);
    assert_ne!(out.code, 0, "{out:?}");
}
