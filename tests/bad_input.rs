//! Hostile and broken input: every case ends in a diagnostic and the contract's exit code
//! (2 when the file cannot be read as text, 1 when it is a spec with errors), never a panic.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

fn check(path: &Path) -> support::Output {
    let mut cmd = support::toolrun();
    cmd.arg("check").arg(path);
    support::run(&mut cmd)
}

#[track_caller]
fn assert_reported(out: &support::Output, exit: i32, code: &str) {
    out.assert_code(exit);
    assert!(
        out.stderr.contains(&format!("[{code}]")),
        "expected {code}\n{out:?}"
    );
    assert!(!out.stderr.contains("panicked"), "{out:?}");
    assert!(out.stdout.is_empty(), "diagnostics go to stderr\n{out:?}");
}

#[test]
fn empty_file() {
    let dir = support::temp_dir("empty");
    assert_reported(&check(&support::write(&dir, "empty.yaml", "")), 1, "E003");
    assert_reported(
        &check(&support::write(&dir, "comments.yaml", "# nothing here\n")),
        1,
        "E003",
    );
}

#[test]
fn not_yaml() {
    let dir = support::temp_dir("not-yaml");
    let out = check(&support::write(
        &dir,
        "x.yaml",
        "version: 1\ntools: {{{ ::: [\n",
    ));
    assert_reported(&out, 1, "E002");
    assert!(
        out.stderr.contains("x.yaml:"),
        "position of the syntax error\n{out:?}"
    );
}

#[test]
fn yaml_that_is_not_a_mapping() {
    let dir = support::temp_dir("not-mapping");
    assert_reported(
        &check(&support::write(&dir, "list.yaml", "- version: 1\n")),
        1,
        "E003",
    );
    assert_reported(
        &check(&support::write(&dir, "scalar.yaml", "hello\n")),
        1,
        "E003",
    );
    assert_reported(
        &check(&support::write(
            &dir,
            "two.yaml",
            "version: 1\n---\nversion: 1\n",
        )),
        1,
        "E003",
    );
}

#[test]
fn a_directory_without_specs() {
    // `check DIR` checks the specs below a folder; a folder with none is unusable input.
    let dir = support::temp_dir("directory");
    let out = check(&dir);
    out.assert_code(2);
    assert!(out.stderr.contains("no toolrun specs under"), "{out:?}");
}

#[test]
fn a_missing_file() {
    let dir = support::temp_dir("missing");
    let out = check(&dir.join("nope.yaml"));
    assert_reported(&out, 2, "E001");
    assert!(out.stderr.contains("does not exist"), "{out:?}");
}

#[test]
fn invalid_utf8() {
    let dir = support::temp_dir("utf8");
    let path = dir.join("latin1.yaml");
    std::fs::write(&path, b"version: 1\nname: caf\xe9\n").expect("write");
    let out = check(&path);
    assert_reported(&out, 2, "E001");
    assert!(
        out.stderr.contains("latin1.yaml:2:10"),
        "points at the first bad byte\n{out:?}"
    );
}

#[test]
fn a_ten_megabyte_file_is_refused_before_parsing() {
    let dir = support::temp_dir("large");
    let line =
        "# padding padding padding padding padding padding padding padding padding padding\n";
    let text = format!(
        "version: 1\n{}",
        line.repeat(10 * 1024 * 1024 / line.len() + 1)
    );
    let path = support::write(&dir, "large.yaml", &text);
    let started = Instant::now();
    let out = check(&path);
    assert_reported(&out, 2, "E004");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn a_billion_laughs_alias_bomb_is_refused_quickly() {
    let dir = support::temp_dir("bomb");
    let mut doc = String::from(
        "a: &a [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n",
    );
    let names: Vec<char> = ('a'..='i').collect();
    for pair in names.windows(2) {
        let (prev, name) = (pair[0], pair[1]);
        let refs = vec![format!("*{prev}"); 9].join(", ");
        doc.push_str(&format!("{name}: &{name} [{refs}]\n"));
    }
    let started = Instant::now();
    let out = check(&support::write(&dir, "bomb.yaml", &doc));
    assert_reported(&out, 1, "E004");
    assert!(out.stderr.contains("alias"), "{out:?}");
    // Expanding it would take minutes and gigabytes; refusing it takes a moment.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn nesting_ten_thousand_deep() {
    let dir = support::temp_dir("deep");
    let flow = format!(
        "version: 1\nx: {}{}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let out = check(&support::write(&dir, "flow.yaml", &flow));
    assert_reported(&out, 1, "E004");
    assert!(
        out.stderr.lines().all(|l| l.len() < 300),
        "long lines are cut\n{out:?}"
    );

    // Block nesting needs indentation, so 10,000 levels would be a 50 MB file (refused for
    // its size); 2,000 levels still exceed the depth limit many times over.
    let mut block = String::from("version: 1\n");
    for depth in 0..2_000 {
        block.push_str(&format!("{}k:\n", " ".repeat(depth)));
    }
    assert_reported(
        &check(&support::write(&dir, "block.yaml", &block)),
        1,
        "E004",
    );

    let maps = format!(
        "version: 1\nx: {}{}\n",
        "{a: ".repeat(10_000),
        "}".repeat(10_000)
    );
    assert_reported(&check(&support::write(&dir, "maps.yaml", &maps)), 1, "E004");
}

#[test]
fn wrong_version() {
    let dir = support::temp_dir("version");
    let out = check(&support::write(&dir, "v2.yaml", "version: 2\n"));
    assert_reported(&out, 1, "E009");
    assert!(out.stderr.contains("v2.yaml:1:10"), "{out:?}");
    assert_reported(
        &check(&support::write(&dir, "text.yaml", "version: one\n")),
        1,
        "E009",
    );
    assert_reported(
        &check(&support::write(&dir, "none.yaml", "name: x\n")),
        1,
        "E008",
    );
}

#[test]
fn several_files_report_each_and_unreadable_wins() {
    let dir = support::temp_dir("several");
    let bad = support::write(&dir, "bad.yaml", "version: 2\n");
    let mut cmd = support::toolrun();
    cmd.arg("check").arg(&bad).arg(dir.join("missing.yaml"));
    let out = support::run(&mut cmd);
    out.assert_code(2);
    assert!(
        out.stderr.contains("[E009]") && out.stderr.contains("[E001]"),
        "{out:?}"
    );
}

#[test]
fn other_commands_refuse_bad_specs_with_the_same_codes() {
    let dir = support::temp_dir("tools-bad");
    let mut cmd = support::toolrun();
    cmd.args(["tools", "--format", "openai"])
        .arg(dir.join("missing.yaml"));
    support::run(&mut cmd).assert_code(2);
    let broken = support::write(
        &dir,
        "broken.yaml",
        "version: 1\ntools:\n  x: {kind: mok}\n",
    );
    let mut cmd = support::toolrun();
    cmd.args(["tools"]).arg(&broken);
    let out = support::run(&mut cmd);
    out.assert_code(1);
    assert!(
        out.stderr.contains("[E011]") && out.stdout.is_empty(),
        "{out:?}"
    );
}
