//! toolrun in CI in one line (issue 26): `toolrun test --format github` annotates each failing
//! test at its line in its spec, and the GitHub Action's script (`scripts/action.sh`, what
//! `action.yml` runs) is driven here outside GitHub, with its inputs as `INPUT_*` variables and a
//! fake `GITHUB_STEP_SUMMARY` and `GITHUB_OUTPUT`. actionlint and the action schema validate
//! every workflow file and `action.yml`, shellcheck the script (pinned PyPI packages,
//! `tests/dist/requirements.txt`).
//! The Action installing the wheel with pip is in `tests/dist.rs`, beside the wheel it builds.

#[path = "mcp/python.rs"]
mod python;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::{run, toolrun, write, Output};

const PASSING: &str = "  - name: says_hello
    query: hi
    expect: { status: ok, output_contains: hello }
";
const FAILING: &str = "  - name: wants_goodbye
    query: hi
    expect:
      status: ok
      output_contains: goodbye
";

/// A spec whose scripted model answers `hello there`, with the given tests.
fn greeter(tests: &str) -> String {
    format!(
        "version: 1
name: greeter
tools:
  note:
    description: Writes a note down.
    kind: mock
    input: {{ type: object, properties: {{ text: {{ type: string }} }} }}
    responses:
      - result: noted
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - answer: hello there
tests:
{tests}"
    )
}

/// A project folder (it holds `.git`, so it is the project root) with `specs/greeter.yaml`.
fn project(tests: &str) -> support::TempDir {
    let dir = support::temp_dir("action");
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::create_dir_all(dir.path().join("specs")).unwrap();
    write(&dir.path().join("specs"), "greeter.yaml", &greeter(tests));
    dir
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("`{needle}` not in\n{text}"))
}

#[test]
fn format_github_annotates_each_failing_test_at_its_line() {
    let dir = project(&format!("{PASSING}{FAILING}"));
    let spec_text = greeter(&format!("{PASSING}{FAILING}"));
    let line = line_of(&spec_text, "name: wants_goodbye");
    let col = spec_text
        .lines()
        .nth(line - 1)
        .unwrap()
        .find("wants_goodbye")
        .unwrap()
        + 1;
    let end = col + "wants_goodbye".len();
    let out = run(toolrun()
        .current_dir(dir.path())
        .env("TOOLRUN_CACHE_DIR", "off")
        .args(["test", "specs/greeter.yaml", "--format", "github"]));
    out.assert_code(1);
    let annotations: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("::")).collect();
    assert_eq!(
        annotations,
        [format!(
            "::error file=specs/greeter.yaml,line={line},col={col},endLine={line},endColumn={end},\
             title=test greeter%3A%3Awants_goodbye failed::assertion failed: expected the output \
             to contain \"goodbye\", got \"hello there\""
        )],
        "{}",
        out.stdout
    );
    // The human report follows, and its last line is the tally CI reads.
    assert!(
        out.stdout.contains("PASS greeter::says_hello"),
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.lines().last(), Some("1 passed, 1 failed"));
}

#[test]
fn format_github_keeps_multi_line_reasons_in_one_annotation_and_passes_quietly() {
    // A fixture that was never recorded: a reason of several lines (the command that records it).
    let tests = "  - name: recorded
    query: hi
    fixture: ../fixtures/missing.json
";
    let dir = project(tests);
    let out = run(toolrun()
        .current_dir(dir.path())
        .env("TOOLRUN_CACHE_DIR", "off")
        .args(["test", "specs/greeter.yaml", "--format", "github"]));
    out.assert_code(1);
    let annotation = out
        .stdout
        .lines()
        .find(|l| l.starts_with("::error "))
        .unwrap_or_else(|| panic!("no annotation:\n{}", out.stdout));
    assert!(
        annotation.contains("has not been recorded yet%0A") && annotation.contains("--record"),
        "{annotation}"
    );
    assert_eq!(out.stdout.lines().last(), Some("0 passed, 1 failed"));

    let green = project(PASSING);
    let out = run(toolrun()
        .current_dir(green.path())
        .env("TOOLRUN_CACHE_DIR", "off")
        .args(["test", "specs/greeter.yaml", "--format", "github"]));
    out.assert_code(0);
    assert!(
        !out.stdout.lines().any(|l| l.starts_with("::")),
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.lines().last(), Some("1 passed, 0 failed"));
}

#[test]
fn format_github_annotates_a_spec_that_does_not_compile_on_its_file() {
    let dir = project(PASSING);
    write(
        &dir.path().join("specs"),
        "broken.yaml",
        "version: 1\nname: broken\ntools: {}\npolicy: { allow: [nope] }\n",
    );
    let out = run(toolrun()
        .current_dir(dir.path())
        .env("TOOLRUN_CACHE_DIR", "off")
        .args([
            "test",
            "specs/broken.yaml",
            "specs/greeter.yaml",
            "--format",
            "github",
        ]));
    out.assert_code(1);
    assert!(
        out.stdout.starts_with(
            "::error file=specs/broken.yaml,title=spec does not compile::the spec does not compile\n"
        ),
        "{}",
        out.stdout
    );
    assert_eq!(out.stdout.lines().last(), Some("1 passed, 1 failed"));
}

/// Text a model or grader could answer to take over a GitHub runner: a mask that hides the log,
/// a forged annotation, a stop that silences toolrun's own, and the legacy `##[` form, which
/// the runner reads anywhere in a line (YAML double-quoted, `\n` a newline).
const HOSTILE: &str =
    r"fine\n::add-mask::x\n::error::forged\n  ::stop-commands::tok\nfoo ##[error]bar";

/// Lines GitHub's runner would take as a workflow command that toolrun did not write: `::` at
/// the start after blanks (it trims Unicode whitespace, as `trim_start` does) or `##[`
/// anywhere. toolrun's own start its line with `::error file=` or `::warning file=`, the
/// Action's with `::error title=toolrun action::`.
fn forged_commands(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| {
            let own = [
                "::error file=",
                "::warning file=",
                "::error title=toolrun action::",
            ]
            .iter()
            .any(|p| l.starts_with(p));
            l.contains("##[") || (l.trim_start().starts_with("::") && !own)
        })
        .collect()
}

#[test]
fn format_github_prints_no_workflow_command_but_its_own_annotations() {
    // Answers and grades reach the report raw and in several lines: the answer (quoted in a
    // failure), a grader's reasoning, a grader's reply that is not a grade.
    let spec = format!(
        r#"version: 1
name: hostile
tools:
  note:
    description: Writes a note down.
    kind: mock
    responses:
      - result: noted
models:
  assistant:
    kind: scripted
    scripts:
      - turns:
          - answer: "{HOSTILE}"
  grader:
    kind: scripted
    scripts:
      - when: "strict"
        turns:
          - tool_calls: [{{ name: grade, arguments: {{ score: 0.1, reasoning: "{HOSTILE}" }} }}]
      - turns:
          - answer: "{HOSTILE}"
default_model: assistant
tests:
  - name: graded
    query: q
    expect: {{ judge: {{ model: grader, rubric: strict, pass: 0.5 }} }}
  - name: unparsed
    query: q
    expect: {{ judge: {{ model: grader, rubric: lenient }} }}
  - name: answer
    query: q
    expect: {{ status: failed, output_contains: goodbye }}
"#
    );
    let dir = support::temp_dir("action-hostile");
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    write(dir.path(), "hostile.yaml", &spec);
    let out = run(toolrun()
        .current_dir(dir.path())
        .env("TOOLRUN_CACHE_DIR", "off")
        .args(["test", "hostile.yaml", "--format", "github"]));
    out.assert_code(1);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(forged_commands(&all), Vec::<&str>::new(), "{all}");
    let own: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("::")).collect();
    assert_eq!(own.len(), 3, "one annotation per failing test:\n{all}");
    // The text is all there, defused, not dropped: the grader's reasoning in the annotation and
    // in the report, one line of the report each.
    assert!(
        own[0].contains("scored 0.1 (needs 0.5): fine%0A") && own[0].contains("add-mask"),
        "{}",
        own[0]
    );
    for word in [
        "add-mask::x",
        "error::forged",
        "stop-commands::tok",
        "foo #",
    ] {
        assert!(
            out.stdout.lines().filter(|l| l.contains(word)).count() >= 2,
            "`{word}` not in the report:\n{}",
            out.stdout
        );
    }
    assert_eq!(out.stdout.lines().last(), Some("0 passed, 3 failed"));

    // Without github, the human report keeps the text exactly (only for a terminal).
    let out = run(toolrun()
        .current_dir(dir.path())
        .env("TOOLRUN_CACHE_DIR", "off")
        .args(["test", "hostile.yaml"]));
    assert!(
        out.stdout.contains("\n       ::add-mask::x\n"),
        "{}",
        out.stdout
    );

    // `check --format github`: a diagnostic quoting the spec's text is toolrun's annotation and
    // nothing more.
    write(
        dir.path(),
        "bad.yaml",
        "version: 1\nname: bad\ntools: {}\npolicy: { allow: [\"foo ##[error]bar\", \"x\\n::add-mask::y\"] }\n",
    );
    let out = run(toolrun()
        .current_dir(dir.path())
        .args(["check", "bad.yaml", "--format", "github"]));
    out.assert_code(1);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(forged_commands(&all), Vec::<&str>::new(), "{all}");
    assert!(
        all.contains("foo #") && all.contains("%0A::add-mask::y"),
        "{all}"
    );
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `scripts/action.sh` as the composite action runs it: in `dir`, with `inputs` as `INPUT_*`,
/// `RUNNER_TEMP` and fake `GITHUB_STEP_SUMMARY` / `GITHUB_OUTPUT` files in `dir/runner`, and
/// `path` as `PATH`. Returns the output and the summary and output files' contents.
fn action(dir: &Path, path: &str, inputs: &[(&str, &str)]) -> (Output, String, String) {
    action_with(dir, path, inputs, &[])
}

/// [`action`] with more environment variables (`PIP_*`).
fn action_with(
    dir: &Path,
    path: &str,
    inputs: &[(&str, &str)],
    env: &[(&str, &str)],
) -> (Output, String, String) {
    let runner = dir.join("runner");
    std::fs::create_dir_all(&runner).unwrap();
    let summary = runner.join("summary.md");
    let outputs = runner.join("outputs.txt");
    std::fs::write(&summary, "").unwrap();
    std::fs::write(&outputs, "").unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("scripts/action.sh"))
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir)
        .env("TOOLRUN_CACHE_DIR", "off")
        .env("RUNNER_TEMP", &runner)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_OUTPUT", &outputs);
    for (name, value) in inputs {
        cmd.env(format!("INPUT_{name}"), value);
    }
    cmd.envs(env.iter().copied());
    let out = run(&mut cmd);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    (out, read(&summary), step_outputs(&read(&outputs)))
}

/// The step outputs in `GITHUB_OUTPUT` as `name=value` lines, in order. Each must be written in
/// the `name<<DELIMITER` form with a delimiter of its own that its value does not hold: a
/// `name=value` line would let a newline in the value set other outputs.
fn step_outputs(file: &str) -> String {
    let mut out = String::new();
    let mut delimiters = Vec::new();
    let mut lines = file.split_inclusive('\n');
    while let Some(line) = lines.next() {
        let (name, delimiter) = line
            .trim_end_matches('\n')
            .split_once("<<")
            .unwrap_or_else(|| panic!("not the `name<<DELIMITER` form: {line:?} in {file:?}"));
        assert!(delimiter.len() >= 24, "a guessable delimiter: {file:?}");
        assert!(
            !delimiters.contains(&delimiter),
            "a delimiter used twice: {file:?}"
        );
        delimiters.push(delimiter);
        let mut value = String::new();
        loop {
            let line = lines
                .next()
                .unwrap_or_else(|| panic!("unterminated: {file:?}"));
            if line == format!("{delimiter}\n") {
                break;
            }
            value.push_str(line);
        }
        let value = value.strip_suffix('\n').unwrap_or(&value);
        out.push_str(&format!("{name}={value}\n"));
    }
    out
}

/// `PATH` with the toolrun under test first, then the system's.
fn path_with_toolrun() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_toolrun")).parent().unwrap();
    format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display())
}

#[test]
fn the_action_runs_the_tests_annotates_and_fills_the_summary_and_outputs() {
    let dir = project(&format!("{PASSING}{FAILING}"));
    let (out, summary, outputs) = action(
        dir.path(),
        &path_with_toolrun(),
        &[
            ("VERSION", env!("CARGO_PKG_VERSION")),
            ("SPECS", "specs/*.yaml"),
        ],
    );
    out.assert_code(1);
    let version = format!("Using toolrun {} from ", env!("CARGO_PKG_VERSION"));
    assert!(out.stdout.contains(&version), "{}", out.stdout);
    assert!(
        out.stdout.contains("::error file=specs/greeter.yaml,line="),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("\n1 passed, 1 failed\n"),
        "{}",
        out.stdout
    );
    let results = dir.path().join("runner/toolrun-results.json");
    assert_eq!(
        outputs,
        format!("results={}\nexit-code=1\n", results.display())
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    assert_eq!(doc["tests"].as_array().map(Vec::len), Some(2), "{doc}");
    // The job summary is `toolrun report --format markdown` of those results.
    let report = run(toolrun()
        .arg("report")
        .arg(&results)
        .args(["--format", "markdown"]));
    report.assert_success();
    assert_eq!(summary, report.stdout);
    assert!(
        summary.contains("| greeter::wants\\_goodbye | ❌ 0/1 |"),
        "{summary}"
    );
}

#[test]
fn the_action_prints_no_workflow_command_and_writes_outputs_newline_safe() {
    // Paths come from the repository (a glob's matches) and the inputs: on Linux a file name can
    // hold a newline, `::` and `##[`.
    let dir = project(PASSING);
    let hostile = "x\n::add-mask::y\n##[error]z";
    std::fs::write(
        dir.path().join(format!("specs/{hostile}.yaml")),
        greeter(PASSING),
    )
    .unwrap();
    let results = format!("r\nexit-code=0\n{hostile}.json");
    let (out, summary, outputs) = action(
        dir.path(),
        &path_with_toolrun(),
        &[("SPECS", "specs/*.yaml"), ("RESULTS", &results)],
    );
    out.assert_code(0);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(forged_commands(&all), Vec::<&str>::new(), "{all}");
    assert!(all.contains("specs/x\\n::add-mask::y\\n#"), "{all}");
    assert!(out.stdout.contains("\n2 passed, 0 failed\n"), "{all}");
    // Exactly two outputs, the path whole.
    assert_eq!(outputs, format!("results={results}\nexit-code=0\n"));
    assert!(dir.path().join(&results).is_file());
    assert!(summary.starts_with("### toolrun report"), "{summary}");

    // The Action's own errors quote inputs as data of one command.
    let (out, _, outputs) = action_with(
        dir.path(),
        &path_with_toolrun(),
        &[
            ("VERSION", "0.0.1\n::add-mask::x ##[error]y"),
            ("SPECS", "specs"),
        ],
        &[("PIP_NO_INDEX", "1")],
    );
    out.assert_code(2);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(forged_commands(&all), Vec::<&str>::new(), "{all}");
    assert!(
        out.stdout
            .contains("::error title=toolrun action::pip install toolrun==0.0.1%0A::add-mask::x #"),
        "{all}"
    );
    assert_eq!(outputs, "");
}

#[test]
fn the_action_passes_args_and_writes_results_where_asked() {
    let dir = project(&format!("{PASSING}{FAILING}"));
    let inputs = [
        ("SPECS", "specs"),
        ("ARGS", "--filter says_hello --jobs 1"),
        ("RESULTS", "out/results.json"),
    ];
    // No version asked: the toolrun on PATH is used. `--results` into a missing folder is a
    // usage error before any test runs: no results, no summary, exit code 2.
    let (out, summary, outputs) = action(dir.path(), &path_with_toolrun(), &inputs);
    out.assert_code(2);
    assert!(out.stderr.contains("--results"), "{}", out.stderr);
    assert_eq!((summary.as_str(), outputs.as_str()), ("", "exit-code=2\n"));

    std::fs::create_dir_all(dir.path().join("out")).unwrap();
    let (out, summary, outputs) = action(dir.path(), &path_with_toolrun(), &inputs);
    out.assert_code(0);
    assert!(
        out.stdout.contains("\n1 passed, 0 failed\n"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("::error"), "{}", out.stdout);
    assert_eq!(outputs, "results=out/results.json\nexit-code=0\n");
    assert!(
        summary.contains("| greeter::says\\_hello | ✅ 1/1 |"),
        "{summary}"
    );
}

#[test]
fn the_action_compares_with_a_baseline() {
    let dir = project(&format!("{PASSING}{FAILING}"));
    let (out, _, _) = action(
        dir.path(),
        &path_with_toolrun(),
        &[("SPECS", "specs"), ("RESULTS", "base.json")],
    );
    out.assert_code(1);
    // The same failure as in the baseline is no regression: with `--fail-on regression` the
    // run passes, and the failure is a warning, not an error.
    let (out, summary, outputs) = action(
        dir.path(),
        &path_with_toolrun(),
        &[
            ("SPECS", "specs"),
            ("BASELINE", "base.json"),
            ("ARGS", "--fail-on regression"),
            ("RESULTS", "now.json"),
        ],
    );
    out.assert_code(0);
    assert!(
        out.stdout
            .contains("--baseline base.json --fail-on regression"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("::warning file=specs/greeter.yaml,line="),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("::error"), "{}", out.stdout);
    assert_eq!(outputs, "results=now.json\nexit-code=0\n");
    assert!(summary.starts_with("### toolrun report"), "{summary}");
}

#[test]
fn the_action_refuses_a_baseline_for_a_toolrun_without_one() {
    // An older toolrun on PATH, with no `test --baseline`: a clear error, nothing run.
    let dir = project(PASSING);
    let bin = dir.path().join("old-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = write(
        &bin,
        "toolrun",
        "#!/bin/sh\ncase \"$1 $2\" in\n  --version*) echo 'toolrun 0.0.9' ;;\n  'test --help') echo 'Usage: toolrun test [OPTIONS] <SPEC|DIR>...' ;;\n  *) echo ran >> ran.txt ;;\nesac\n",
    );
    run(Command::new("chmod").arg("+x").arg(&fake)).assert_success();
    let (out, _, outputs) = action(
        dir.path(),
        &format!("{}:/usr/bin:/bin", bin.display()),
        &[("SPECS", "specs"), ("BASELINE", "base.json")],
    );
    out.assert_code(2);
    assert!(
        out.stdout.contains(
            "::error title=toolrun action::the baseline input needs a toolrun with \
             `toolrun test --baseline`; toolrun 0.0.9 has none"
        ),
        "{}",
        out.stdout
    );
    assert!(!dir.path().join("ran.txt").exists());
    assert_eq!(outputs, "");
}

#[test]
fn the_action_installs_another_version_with_pip_and_says_when_it_cannot() {
    // The toolrun on PATH is not the version asked for, so the script installs
    // `toolrun==0.0.1` with pip; with no index to install from (PIP_NO_INDEX: nothing is
    // fetched), it fails with a clear error (exit 2) and runs nothing. Installing the real
    // wheel this way is in tests/dist.rs.
    let dir = project(PASSING);
    let (out, summary, outputs) = action_with(
        dir.path(),
        &path_with_toolrun(),
        &[("VERSION", "v0.0.1"), ("SPECS", "specs")],
        &[("PIP_NO_INDEX", "1")],
    );
    out.assert_code(2);
    assert!(
        out.stdout.contains(&format!(
            "toolrun on PATH is `toolrun {}`, not 0.0.1: installing toolrun==0.0.1",
            env!("CARGO_PKG_VERSION")
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("::error title=toolrun action::pip install toolrun==0.0.1 failed"),
        "{}{}",
        out.stdout,
        out.stderr
    );
    assert_eq!((summary.as_str(), outputs.as_str()), ("", ""));
}

/// The pinned actionlint and check-jsonschema (`tests/dist/requirements.txt`).
fn tools_venv() -> PathBuf {
    python::venv("dist-venv", "tests/dist/requirements.txt")
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn every_workflow_file_passes_actionlint() {
    let bin = tools_venv();
    let workflows: Vec<PathBuf> = std::fs::read_dir(repo().join(".github/workflows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    assert!(
        workflows.iter().any(|p| p.ends_with("release.yml")),
        "{workflows:?}"
    );
    // shellcheck on PATH: actionlint checks every `run:` script with it too.
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let out = run(Command::new(bin.join("actionlint"))
        .current_dir(repo())
        .env("PATH", &path)
        .args(["-no-color"])
        .args(&workflows));
    assert_eq!(out.code, 0, "actionlint:\n{}{}", out.stdout, out.stderr);
    // It does check: a broken expression is caught.
    let dir = support::temp_dir("actionlint");
    let bad = write(
        dir.path(),
        "bad.yml",
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.nope }}\n",
    );
    let out = run(Command::new(bin.join("actionlint"))
        .args(["-no-color"])
        .arg(&bad));
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
}

#[test]
fn the_action_script_passes_shellcheck() {
    let out =
        run(Command::new(tools_venv().join("shellcheck")).arg(repo().join("scripts/action.sh")));
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
}

#[test]
fn action_yml_matches_the_github_actions_schema_and_runs_the_script() {
    let bin = tools_venv();
    let out = run(Command::new(bin.join("check-jsonschema"))
        .current_dir(repo())
        .args(["--builtin-schema", "vendor.github-actions", "action.yml"]));
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let dir = support::temp_dir("action-schema");
    let bad = write(
        dir.path(),
        "action.yml",
        "name: x\nruns:\n  using: composite\n  steps:\n    - run: echo\n",
    );
    let out = run(Command::new(bin.join("check-jsonschema"))
        .args(["--builtin-schema", "vendor.github-actions"])
        .arg(&bad));
    assert_ne!(out.code, 0, "a step without `shell` must be refused");
    // Every input reaches the script as the INPUT_* variable it reads.
    let action = std::fs::read_to_string(repo().join("action.yml")).unwrap();
    let script = std::fs::read_to_string(repo().join("scripts/action.sh")).unwrap();
    assert!(action.contains("run: bash \"$GITHUB_ACTION_PATH/scripts/action.sh\""));
    for input in ["version", "specs", "args", "baseline", "results"] {
        let var = format!("INPUT_{}", input.to_uppercase());
        assert!(
            action.contains(&format!("{var}: ${{{{ inputs.{input} }}}}")),
            "action.yml does not pass `{input}` as {var}"
        );
        assert!(script.contains(&var), "scripts/action.sh ignores {var}");
    }
}
