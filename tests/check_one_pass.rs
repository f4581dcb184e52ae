//! `toolrun check` reports every problem in one pass, lists allowed values, warns about
//! unreachable scripts and responses, and checks whole folders.

mod support;

fn check(args: &[&std::ffi::OsStr]) -> support::Output {
    let mut cmd = support::toolrun();
    cmd.arg("check").args(args);
    support::run(&mut cmd)
}

const MODELS: &str = "models:\n  s: { kind: scripted, scripts: [{ turns: [{ answer: hi }] }] }\n";

#[test]
fn a_duplicate_key_does_not_hide_the_other_errors() {
    let dir = support::temp_dir("one_pass_dup");
    let spec = support::write(
        &dir,
        "dup.yaml",
        &format!("version: 1\nname: dup\ntools:\n  a:\n    description: A mock tool with a duplicate key and other errors.\n    kind: mock\n    kind: mock\n    input: {{ type: object }}\n    responses: [{{ result: 1 }}]\n  b:\n    description: A builtin tool with a misspelt builtin name.\n    kind: builtin\n    builtin: calculater\npolicy:\n  allow: [a, c]\n{MODELS}"),
    );
    let out = check(&[spec.as_os_str()]);
    out.assert_code(1);
    for expected in [
        "error[E005]: duplicate key `kind`",
        "error[E026]: unknown builtin `calculater`",
        "error[E012]: unknown tool `c` in `policy.allow`",
    ] {
        assert!(out.stderr.contains(expected), "{expected}\n{out:?}");
    }
    assert!(
        out.stderr
            .ends_with("checked 1 spec: 3 error(s), 0 warning(s)\n"),
        "{out:?}"
    );
}

#[test]
fn enum_errors_list_every_allowed_value() {
    let dir = support::temp_dir("one_pass_enum");
    let spec = support::write(
        &dir,
        "enum.yaml",
        &format!("version: 1\nname: enum\ntools:\n  a:\n    description: A tool whose kind is misspelt to show the allowed kinds.\n    kind: mok\n{MODELS}"),
    );
    let out = check(&[spec.as_os_str()]);
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("help: did you mean `mock`? (one of: mock, table, builtin, http, mcp)"),
        "{out:?}"
    );
}

#[test]
fn null_tools_is_one_diagnostic() {
    let dir = support::temp_dir("one_pass_null");
    let spec = support::write(
        &dir,
        "null.yaml",
        &format!("version: 1\nname: n\ntools:\n{MODELS}"),
    );
    let out = check(&[spec.as_os_str()]);
    out.assert_code(1);
    assert_eq!(out.stderr.matches("error[E007]").count(), 1, "{out:?}");
    assert!(
        out.stderr
            .ends_with("checked 1 spec: 1 error(s), 0 warning(s)\n"),
        "{out:?}"
    );
}

#[test]
fn shadowed_scripts_and_responses_are_warnings() {
    let out = check(&["tests/diagnostics/W112_unreachable_script.yaml".as_ref()]);
    out.assert_success();
    assert_eq!(out.stderr.matches("warning[W112]").count(), 2, "{out:?}");
    assert_eq!(out.stderr.matches("warning[W107]").count(), 1, "{out:?}");
    // With warnings denied, the example spec that had two identical `when`s is clean now.
    let out = check(&["--deny-warnings".as_ref(), "specs/guardrails.yaml".as_ref()]);
    out.assert_success();
}

#[test]
fn check_dir_checks_every_spec_below_it_and_nothing_else() {
    let dir = support::temp_dir("one_pass_dir");
    let good = format!("version: 1\nname: good\ntools: {{}}\n{MODELS}");
    support::write(&dir, "a.yaml", &good);
    std::fs::create_dir_all(dir.join("nested/deeper")).unwrap();
    support::write(
        &dir.join("nested/deeper"),
        "b.yml",
        &good.replace("name: good", "name: bad\nnaem: x"),
    );
    // Not toolrun specs: a compose file and a CI workflow (in a hidden folder).
    support::write(&dir, "compose.yaml", "version: \"3\"\nservices: {}\n");
    std::fs::create_dir_all(dir.join(".github")).unwrap();
    support::write(
        &dir.join(".github"),
        "ci.yaml",
        &good.replace("name: good", "name: hidden\nnaem: x"),
    );
    let out = check(&[dir.as_os_str()]);
    out.assert_code(1);
    assert!(out.stderr.contains("unknown key `naem`"), "{out:?}");
    assert!(out.stderr.contains("b.yml"), "{out:?}");
    assert!(!out.stderr.contains("hidden"), "{out:?}");
    assert!(
        out.stderr
            .ends_with("checked 2 specs: 1 error(s), 0 warning(s)\n"),
        "{out:?}"
    );

    let empty = support::temp_dir("one_pass_empty");
    let out = check(&[empty.as_os_str()]);
    out.assert_code(2);
    assert!(out.stderr.contains("no toolrun specs under"), "{out:?}");
}
