//! Every command and output format of the compiler side, as users and their CI see them.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn toolrun(args: &[&str]) -> support::Output {
    let mut cmd = support::toolrun();
    cmd.current_dir(root()).args(args);
    support::run(&mut cmd)
}

fn example_specs() -> Vec<PathBuf> {
    let mut specs: Vec<PathBuf> = std::fs::read_dir(root().join("specs"))
        .expect("specs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    specs.sort();
    specs
}

const CORPUS_WARNING: &str = "tests/diagnostics/W105_unused_secret.yaml";
const CORPUS_ERRORS: &str = "tests/diagnostics/multiple_errors.yaml";

#[test]
fn every_example_spec_is_clean_with_deny_warnings() {
    let specs = example_specs();
    assert!(specs.len() >= 2, "{specs:?}");
    for spec in specs {
        let mut cmd = support::toolrun();
        cmd.current_dir(root())
            .args(["check", "--deny-warnings"])
            .arg(&spec);
        let out = support::run(&mut cmd);
        out.assert_success();
        assert_eq!(
            out.stderr,
            "checked 1 spec: no problems\n",
            "{}",
            spec.display()
        );
    }
}

#[test]
fn check_human_output_ends_with_a_summary() {
    let out = toolrun(&["check", CORPUS_ERRORS]);
    out.assert_code(1);
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        out.stderr
            .contains("error[E006]: unknown key `desciption` in tool `get_price`"),
        "{out:?}"
    );
    assert!(
        out.stderr
            .contains(" --> tests/diagnostics/multiple_errors.yaml:4:5"),
        "{out:?}"
    );
    assert!(
        out.stderr.contains("= help: did you mean `description`?"),
        "{out:?}"
    );
    assert!(
        out.stderr
            .ends_with("checked 1 spec: 5 error(s), 0 warning(s)\n"),
        "{out:?}"
    );
}

#[test]
fn check_json_is_a_stable_array() {
    let out = toolrun(&["check", "--format", "json", CORPUS_ERRORS]);
    out.assert_code(1);
    assert!(out.stderr.is_empty(), "{out:?}");
    let list = out.json();
    let list = list.as_array().expect("array");
    assert_eq!(list.len(), 5);
    let keys = [
        "code",
        "severity",
        "message",
        "file",
        "line",
        "column",
        "end_line",
        "end_column",
        "help",
    ];
    for d in list {
        let got: Vec<&str> = d
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(got, keys, "{d}");
        assert_eq!(d["file"], CORPUS_ERRORS);
        assert_eq!(d["severity"], "error");
    }
    assert_eq!(list[0]["code"], "E006");
    assert_eq!(
        (list[0]["line"].as_u64(), list[0]["column"].as_u64()),
        (Some(4), Some(5))
    );
    assert_eq!(
        (list[0]["end_line"].as_u64(), list[0]["end_column"].as_u64()),
        (Some(4), Some(15))
    );

    let clean = toolrun(&["check", "--format", "json", "specs/stock_assistant.yaml"]);
    clean.assert_success();
    assert_eq!(clean.json(), serde_json::json!([]));
}

#[test]
fn check_sarif_has_the_2_1_0_shape() {
    let out = toolrun(&["check", "--format", "sarif", CORPUS_ERRORS, CORPUS_WARNING]);
    out.assert_code(1);
    let doc = out.json();
    assert_eq!(doc["version"], "2.1.0");
    assert!(
        doc["$schema"].as_str().is_some_and(|s| s.contains("sarif")),
        "{doc}"
    );
    let run = &doc["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "toolrun");
    let rules: Vec<&str> = run["tool"]["driver"]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let results = run["results"].as_array().expect("results");
    assert_eq!(results.len(), 6);
    for r in results {
        let id = r["ruleId"].as_str().expect("ruleId");
        assert!(rules.contains(&id), "rule {id} is described in the driver");
        assert!(
            matches!(r["level"].as_str(), Some("error" | "warning")),
            "{r}"
        );
        assert!(r["message"]["text"].is_string(), "{r}");
        let loc = &r["locations"][0]["physicalLocation"];
        assert!(loc["artifactLocation"]["uri"].is_string(), "{r}");
        assert!(
            loc["region"]["startLine"].as_u64().is_some_and(|l| l >= 1),
            "{r}"
        );
        assert!(
            loc["region"]["startColumn"]
                .as_u64()
                .is_some_and(|c| c >= 1),
            "{r}"
        );
    }
    assert!(results
        .iter()
        .any(|r| r["ruleId"] == "W105" && r["level"] == "warning"));
}

#[test]
fn check_github_prints_workflow_annotations() {
    let out = toolrun(&["check", "--format", "github", CORPUS_ERRORS, CORPUS_WARNING]);
    out.assert_code(1);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{out:?}");
    assert!(
        lines[0].starts_with("::error file=tests/diagnostics/multiple_errors.yaml,line=4,col=5,"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("::unknown key `desciption` in tool `get_price`"),
        "{}",
        lines[0]
    );
    assert!(lines.iter().any(|l| l
        .starts_with("::warning file=tests/diagnostics/W105_unused_secret.yaml,line=13,col=11,")));
}

#[test]
fn deny_warnings_turns_warnings_into_failure() {
    let out = toolrun(&["check", CORPUS_WARNING]);
    out.assert_success();
    assert!(out.stderr.contains("warning[W105]"), "{out:?}");
    toolrun(&["check", "--deny-warnings", CORPUS_WARNING]).assert_code(1);
    toolrun(&[
        "check",
        "--deny-warnings",
        "--format",
        "json",
        CORPUS_WARNING,
    ])
    .assert_code(1);
}

#[test]
fn explain_prints_what_why_example_and_fix() {
    let out = toolrun(&["explain", "E012"]);
    out.assert_success();
    for part in [
        "E012 — unknown tool",
        "What it catches",
        "Why it matters",
        "Example",
        "Fix",
        "get_stock_price",
    ] {
        assert!(out.stdout.contains(part), "missing {part:?}\n{out:?}");
    }
    assert_eq!(
        toolrun(&["explain", "e012"]).stdout,
        out.stdout,
        "codes are case-insensitive"
    );
}

#[test]
fn explain_unknown_code_is_a_usage_error_with_a_suggestion() {
    let out = toolrun(&["explain", "E0012"]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("unknown diagnostic code `E0012`"),
        "{out:?}"
    );
    assert!(out.stderr.contains("did you mean `E012`?"), "{out:?}");
    let out = toolrun(&["explain", "nonsense"]);
    out.assert_code(2);
    assert!(out.stderr.contains("toolrun explain --list"), "{out:?}");
    toolrun(&["explain"]).assert_code(2);
}

#[test]
fn explain_list_names_every_code_once() {
    let out = toolrun(&["explain", "--list"]);
    out.assert_success();
    let codes: Vec<&str> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert!(
        codes.contains(&"E001") && codes.contains(&"W107"),
        "{out:?}"
    );
    let mut unique = codes.clone();
    unique.dedup();
    assert_eq!(unique, codes);
    for code in codes {
        toolrun(&["explain", code]).assert_success();
    }
}

#[test]
fn schema_is_json_schema_2020_12() {
    let out = toolrun(&["schema"]);
    out.assert_success();
    let schema = out.json();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert!(schema["$id"].is_string() && schema["title"].is_string());
    assert_eq!(schema["additionalProperties"], Value::Bool(false));
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("toolrun.schema.json")).expect("committed schema"),
    )
    .expect("json");
    assert_eq!(
        schema, committed,
        "toolrun.schema.json is what `toolrun schema` prints"
    );
}

fn tools(format: &str) -> Vec<Value> {
    let out = toolrun(&["tools", "specs/stock_assistant.yaml", "--format", format]);
    out.assert_success();
    let doc = out.json();
    match format {
        "mcp" => doc["tools"].as_array().expect("tools").clone(),
        _ => doc.as_array().expect("array").clone(),
    }
}

#[test]
fn tools_openai() {
    let list = tools("openai");
    assert_eq!(list.len(), 3);
    for t in &list {
        assert_eq!(t["type"], "function");
        assert!(
            t["function"]["name"].is_string() && t["function"]["description"].is_string(),
            "{t}"
        );
        assert_eq!(t["function"]["parameters"]["type"], "object", "{t}");
    }
    assert_eq!(list[0]["function"]["name"], "get_stock_price");
    assert_eq!(
        list[0]["function"]["parameters"]["required"],
        serde_json::json!(["ticker"])
    );
}

#[test]
fn tools_anthropic() {
    let list = tools("anthropic");
    assert_eq!(list.len(), 3);
    for t in &list {
        assert!(t["name"].is_string() && t["description"].is_string(), "{t}");
        assert_eq!(t["input_schema"]["type"], "object", "{t}");
    }
}

/// Offline, a remote tool's description and schema are what the spec pins, else placeholders:
/// `tools` says which ones a run takes from the server instead.
#[test]
fn tools_notes_what_a_remote_mcp_server_supplies() {
    let out = toolrun(&["tools", "specs/mcp_notes.yaml"]);
    out.assert_success();
    let names: Vec<Value> = out
        .json()
        .as_array()
        .expect("array")
        .iter()
        .map(|t| t["function"]["name"].clone())
        .collect();
    assert_eq!(names, ["search_notes", "remember", "delete_note"]);
    let notes: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(
        notes,
        [
            "note: `search_notes` is a tool of MCP server `notes`: a run gives the model the description and schema the server lists, not what is shown here (pin them with `description:` and `input:`)",
            "note: `remember` is a tool of MCP server `notes`: a run gives the model the schema the server lists, not what is shown here (pin it with `input:`)",
            "note: `delete_note` is a tool of MCP server `notes`: a run gives the model the description the server lists, not what is shown here (pin it with `description:`)",
        ],
        "{out:?}"
    );
    // Nothing of the kind for a spec without remote tools.
    assert_eq!(toolrun(&["tools", "specs/stock_assistant.yaml"]).stderr, "");
}

#[test]
fn tools_mcp_with_annotations() {
    let list = tools("mcp");
    assert_eq!(list.len(), 3);
    for t in &list {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        let a = &t["annotations"];
        for hint in ["readOnlyHint", "destructiveHint", "idempotentHint"] {
            assert!(a[hint].is_boolean(), "{hint} in {t}");
        }
        assert_eq!(
            a["readOnlyHint"], true,
            "mock, builtin and table tools only read"
        );
        assert_eq!(a["destructiveHint"], false);
    }
}

#[test]
fn tools_mcp_marks_side_effects_as_destructive() {
    let dir = support::temp_dir("mcp-hints");
    let spec = support::write(
        &dir,
        "s.yaml",
        "version: 1\ntools:\n  send_email:\n    description: Sends an email to a recipient.\n    kind: http\n    side_effects: true\n    request: { method: POST, url: \"https://mail.example.com/send\" }\n",
    );
    let mut cmd = support::toolrun();
    cmd.args(["tools", "--format", "mcp"]).arg(&spec);
    let out = support::run(&mut cmd);
    out.assert_success();
    let a = &out.json()["tools"][0]["annotations"];
    assert_eq!(
        (
            a["readOnlyHint"].as_bool(),
            a["destructiveHint"].as_bool(),
            a["idempotentHint"].as_bool()
        ),
        (Some(false), Some(true), Some(false))
    );
}

#[test]
fn tools_leaves_out_what_the_policy_blocks() {
    let dir = support::temp_dir("tools-deny");
    let spec = support::write(
        &dir,
        "s.yaml",
        "version: 1\ntools:\n  a: { description: Tool a., kind: builtin, builtin: calculator }\n  b: { description: Tool b., kind: builtin, builtin: calculator }\n  c: { description: Tool c., kind: builtin, builtin: calculator }\npolicy: { allow: [a, b], deny: [b] }\n",
    );
    for (format, pointer) in [
        ("openai", "/function/name"),
        ("anthropic", "/name"),
        ("mcp", "/name"),
    ] {
        let mut cmd = support::toolrun();
        cmd.args(["tools", "--format", format]).arg(&spec);
        let out = support::run(&mut cmd);
        out.assert_success();
        let doc = out.json();
        let list = if format == "mcp" { &doc["tools"] } else { &doc };
        let names: Vec<&str> = list
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|t| t.pointer(pointer).and_then(Value::as_str))
            .collect();
        assert_eq!(names, ["a"], "{format}: {out:?}");
    }
}

#[test]
fn completions_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = toolrun(&["completions", shell]);
        out.assert_success();
        assert!(
            out.stdout.contains("toolrun") && out.stdout.contains("check"),
            "{shell}\n{out:?}"
        );
    }
    toolrun(&["completions", "tcsh"]).assert_code(2);
}

#[test]
fn version() {
    let out = toolrun(&["--version"]);
    out.assert_success();
    assert_eq!(
        out.stdout.trim(),
        format!("toolrun {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn help_on_every_command_has_examples() {
    let top = toolrun(&["--help"]);
    top.assert_success();
    assert!(top.stdout.contains("Examples:"), "{top:?}");
    for command in [
        "check",
        "run",
        "test",
        "replay",
        "tools",
        "schema",
        "explain",
        "completions",
    ] {
        assert!(
            top.stdout.contains(command),
            "`{command}` is listed in --help"
        );
        let out = toolrun(&[command, "--help"]);
        out.assert_success();
        assert!(out.stdout.contains("Usage: toolrun"), "{command}\n{out:?}");
        assert!(
            out.stdout.contains("Examples:\n  toolrun "),
            "{command} has an Examples section\n{out:?}"
        );
    }
}

#[test]
fn usage_errors_exit_2() {
    toolrun(&[]).assert_code(2);
    toolrun(&["check"]).assert_code(2);
    toolrun(&["check", "--format", "xml", "specs/stock_assistant.yaml"]).assert_code(2);
    toolrun(&["frobnicate"]).assert_code(2);
}

#[test]
fn nothing_prints_ansi_escapes() {
    let runs: Vec<Vec<&str>> = vec![
        vec!["check", CORPUS_ERRORS],
        vec!["check", "--format", "github", CORPUS_ERRORS],
        vec!["explain", "E012"],
        vec!["explain", "E999"],
        vec!["--help"],
        vec!["check", "--help"],
        vec!["check", "--format", "xml", "x"],
        vec!["frobnicate"],
    ];
    for args in runs {
        for no_color in [true, false] {
            let mut cmd = support::toolrun();
            cmd.current_dir(root()).args(&args);
            if no_color {
                cmd.env("NO_COLOR", "1");
            } else {
                // Even when asked for colour, toolrun prints plain text.
                cmd.env_remove("NO_COLOR")
                    .env("CLICOLOR_FORCE", "1")
                    .env("TERM", "xterm-256color");
            }
            let out = support::run(&mut cmd);
            assert!(
                !out.stdout.contains('\u{1b}') && !out.stderr.contains('\u{1b}'),
                "{args:?} printed an escape\n{out:?}"
            );
        }
    }
}

#[test]
fn template_syntax_errors_point_inside_the_string() {
    let dir = support::temp_dir("e016-columns");
    let path = support::write(
        &dir,
        "t.yaml",
        r#"version: 1
name: t
tools:
  a:
    description: A mock tool for template errors.
    kind: mock
    input: { type: object, properties: { x: { type: string } } }
    responses:
      - when: { x: "1" }
        result: "value {{ args.x | }} end"
      - when: { x: "2" }
        result: plain {{ args.x + }} here
      - when: { x: "3" }
        result: |
          first line
            second {% if %} line
      - result: "{{ args.x ) }}"
models:
  m: { kind: scripted, scripts: [{ turns: [{ answer: "hi" }] }] }
"#,
    );
    let out = support::run(
        support::toolrun()
            .arg("check")
            .arg(&path)
            .args(["--format", "json"]),
    );
    assert_eq!(out.code, 1);
    let positions: Vec<(u64, u64)> = out
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "E016")
        .map(|d| (d["line"].as_u64().unwrap(), d["column"].as_u64().unwrap()))
        .collect();
    // Quoted, plain, block (second line) and expression-only strings.
    // Line 17 points at the stray `)` itself (column 28).
    assert_eq!(positions, vec![(10, 36), (12, 35), (16, 26), (17, 28)]);
}

/// The `Commands:` section of a help text: each command with its one-line description.
fn listed_commands(help: &str) -> Vec<(String, String)> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| {
            let (name, about) = l.trim().split_once(' ')?;
            Some((name.to_string(), about.trim().to_string()))
        })
        .collect()
}

/// Issue 36 §19: `run --help` (and `test`, `call`, `serve`, `replay`) opened with the doc of the
/// flags they share ("The flags every command that runs tools takes") instead of their own.
/// Every command's help, long and short, opens with the line `--help` lists it with.
#[test]
fn every_commands_help_opens_with_its_own_description() {
    let mut queue: Vec<Vec<String>> = vec![vec![]];
    let mut checked = 0;
    while let Some(path) = queue.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = toolrun(&args);
        out.assert_success();
        for (name, about) in listed_commands(&out.stdout) {
            let mut sub = path.clone();
            sub.push(name);
            for flag in ["--help", "-h"] {
                let mut args: Vec<&str> = sub.iter().map(String::as_str).collect();
                args.push(flag);
                let help = toolrun(&args);
                help.assert_success();
                assert_eq!(
                    help.stdout.lines().next().unwrap_or(""),
                    about,
                    "`toolrun {}` opens with another description",
                    args.join(" ")
                );
            }
            checked += 1;
            queue.push(sub);
        }
    }
    assert!(checked > 15, "only {checked} commands were listed");
}
