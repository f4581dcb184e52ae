//! Evaluation that decides (issue 23), through the real binary: `test DIR`, trustworthy
//! recording, baselines with `--fail-on`, statistics, model matrices, merged shards, `diff`,
//! judged answers.

mod support;

use support::{run, toolrun, write};

/// A spec with a scripted model answering `answer` and the given `tests:` block.
fn spec(name: &str, answer: &str, tests: &str) -> String {
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
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - answer: "{answer}"
tests:
{tests}"#
    )
}

#[test]
fn test_dir_runs_the_tests_of_every_spec_below_it() {
    let dir = support::temp_dir("test-dir");
    let one = "  - name: hello\n    query: hi\n    expect: { output_contains: hello }\n";
    write(&dir, "specs/a.yaml", &spec("alpha", "hello", one));
    write(&dir, "specs/nested/b.yaml", &spec("beta", "hello", one));
    // Other YAML in the folder is not a spec and is left alone, as `check DIR` does.
    write(&dir, "specs/ci.yaml", "on: push\njobs: {}\n");
    let out = run(toolrun().current_dir(&dir).args(["test", "specs"]));
    out.assert_code(0);
    assert!(out.stdout.contains("PASS alpha::hello"), "{out:?}");
    assert!(out.stdout.contains("PASS beta::hello"), "{out:?}");
    assert_eq!(out.stdout.lines().last(), Some("2 passed, 0 failed"));

    let out = run(toolrun().current_dir(&dir).args(["test", "specs/nested"]));
    out.assert_code(0);
    assert!(!out.stdout.contains("alpha"), "{out:?}");

    std::fs::create_dir_all(dir.join("empty")).unwrap();
    let out = run(toolrun().current_dir(&dir).args(["test", "empty"]));
    out.assert_code(2);
    assert!(
        out.stderr.contains("no toolrun specs under `empty`"),
        "{out:?}"
    );
}

#[test]
fn two_tests_naming_one_fixture_is_an_error_pointing_at_both() {
    let dir = support::temp_dir("shared-fixture");
    let tests = "  - name: first\n    query: hi\n    fixture: fx/hi.json\n  - name: second\n    query: hi\n    fixture: ./fx/../fx/hi.json\n";
    write(&dir, "s.yaml", &spec("s", "hello", tests));
    let out = run(toolrun().current_dir(&dir).args(["check", "s.yaml"]));
    out.assert_code(1);
    assert!(out.stderr.contains("E044"), "{out:?}");
    assert!(
        out.stderr
            .contains("tests `first` and `second` name the same fixture"),
        "{out:?}"
    );
    // Both places are shown: the second test's `fixture:` (line 22) and the first's (line 19).
    assert!(out.stderr.contains("s.yaml:22:"), "{out:?}");
    assert!(out.stderr.contains("test `first` names it here"), "{out:?}");
    let json = run(toolrun()
        .current_dir(&dir)
        .args(["check", "s.yaml", "--format", "json"]));
    let doc = json.json();
    let d = doc
        .as_array()
        .and_then(|a| a.iter().find(|d| d["code"] == "E044"))
        .cloned()
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(d["related"][0]["line"], 19, "{d}");
    // And `test` refuses the spec rather than letting the last recording win.
    let out = run(toolrun()
        .current_dir(&dir)
        .args(["test", "s.yaml", "--record", "missing"]));
    out.assert_code(1);
    assert!(!dir.join("fx/hi.json").exists());
}
