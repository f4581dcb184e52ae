//! The diagnostics corpus: `tests/diagnostics/` holds one broken spec per diagnostic code, named
//! by what it shows, each with the exact human output of `toolrun check` next to it (`.stderr`).
//! `UPDATE_SNAPSHOTS=1 cargo test --test diagnostics` rewrites the snapshots; review the diff.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/diagnostics")
}

fn corpus() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(corpus_dir())
        .expect("tests/diagnostics exists")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    names
}

/// Runs from inside the corpus folder so paths in the output are just the file names.
fn check(name: &str, format: &str) -> support::Output {
    let mut cmd = support::toolrun();
    cmd.current_dir(corpus_dir())
        .args(["check", "--format", format, name]);
    support::run(&mut cmd)
}

/// The code a corpus file is named after: `E012_unknown_tool.yaml` → `E012`.
fn code_of(name: &str) -> Option<&str> {
    let code = name.split('_').next()?;
    let valid = code.len() == 4
        && code.starts_with(['E', 'W'])
        && code[1..].chars().all(|c| c.is_ascii_digit());
    valid.then_some(code)
}

#[test]
fn every_corpus_file_matches_its_snapshot() {
    let mut failures = Vec::new();
    for name in corpus() {
        let out = check(&name, "human");
        assert!(
            !out.stderr.contains("panicked"),
            "{name} panicked:\n{out:?}"
        );
        let snapshot = corpus_dir().join(name.replace(".yaml", ".stderr"));
        if let Err(e) = support::check_snapshot(&snapshot, &out.stderr) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} snapshot(s) differ; rerun with UPDATE_SNAPSHOTS=1 if the change is intended\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_code_has_a_corpus_file_that_reports_it() {
    let mut cmd = support::toolrun();
    cmd.args(["explain", "--list"]);
    let list = support::run(&mut cmd);
    list.assert_success();
    let codes: BTreeSet<String> = list
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    assert!(
        codes.len() > 30,
        "explain --list looks short:\n{}",
        list.stdout
    );
    let files = corpus();
    let covered: BTreeSet<String> = files
        .iter()
        .filter_map(|f| code_of(f))
        .map(str::to_string)
        .collect();
    let missing: Vec<&String> = codes.difference(&covered).collect();
    assert!(
        missing.is_empty(),
        "codes with no file in tests/diagnostics: {missing:?}"
    );
    let unknown: Vec<&String> = covered.difference(&codes).collect();
    assert!(
        unknown.is_empty(),
        "corpus files named after codes that do not exist: {unknown:?}"
    );

    for name in &files {
        let Some(code) = code_of(name) else { continue };
        let out = check(name, "json");
        if code == "E001" {
            // Unreadable input never gets to the compiler, and the contract says exit 2.
            out.assert_code(2);
        } else {
            out.assert_code(if code.starts_with('E') { 1 } else { 0 });
        }
        let reported: Vec<serde_json::Value> = out.json().as_array().cloned().unwrap_or_default();
        let hit = reported.iter().find(|d| d["code"] == code);
        let Some(hit) = hit else {
            panic!("{name} does not report {code}:\n{out:?}")
        };
        // Every corpus diagnostic says exactly where: a line and column inside the file.
        assert!(
            hit["line"].as_u64().is_some_and(|l| l >= 1),
            "{name}: {code} has no line:\n{out:?}"
        );
        assert!(
            hit["column"].as_u64().is_some_and(|c| c >= 1),
            "{name}: {code} has no column:\n{out:?}"
        );
        assert!(
            hit["help"].is_string(),
            "{name}: {code} has no help:\n{out:?}"
        );
    }
}

#[test]
fn all_problems_are_reported_in_one_pass() {
    let out = check("multiple_errors.yaml", "json");
    out.assert_code(1);
    let codes: Vec<String> = out
        .json()
        .as_array()
        .expect("array")
        .iter()
        .map(|d| d["code"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(codes, ["E006", "E011", "E012", "E024", "E033"], "{out:?}");
}

/// The first diagnostic with `code` in `check --format json` of corpus file `name`.
fn json_diagnostic(name: &str, code: &str) -> serde_json::Value {
    let out = check(name, "json");
    out.json()
        .as_array()
        .and_then(|a| a.iter().find(|d| d["code"] == code).cloned())
        .unwrap_or_else(|| panic!("{name} does not report {code}:\n{out:?}"))
}

/// `file:line:col` counts characters (`株` is one column, so is a tab): the snapshots show the
/// carets placed by display width, the JSON keeps the character columns editors expect.
#[test]
fn columns_count_characters_not_cells() {
    let unknown = json_diagnostic("layout_cjk.yaml", "E012");
    assert_eq!(
        (&unknown["line"], &unknown["column"], &unknown["end_column"]),
        (&10.into(), &38.into(), &43.into()),
    );
    let schema = json_diagnostic("layout_tab.yaml", "E014");
    assert_eq!(
        (&schema["line"], &schema["column"]),
        (&7.into(), &58.into())
    );
}

#[test]
fn a_duplicate_key_names_both_places_in_json_and_sarif() {
    let dup = json_diagnostic("layout_duplicate_key_one_line.yaml", "E005");
    assert_eq!((&dup["line"], &dup["column"]), (&4.into(), &18.into()));
    assert_eq!(
        dup["related"],
        serde_json::json!([{ "line": 4, "column": 6, "end_line": 4, "end_column": 7, "label": "first defined here" }])
    );
    let out = check("layout_duplicate_key_one_line.yaml", "sarif");
    let results = &out.json()["runs"][0]["results"];
    let dup = results
        .as_array()
        .and_then(|a| a.iter().find(|r| r["ruleId"] == "E005"))
        .unwrap_or_else(|| panic!("no E005:\n{out:?}"));
    let related = &dup["relatedLocations"][0];
    assert_eq!(related["physicalLocation"]["region"]["startColumn"], 6);
    assert_eq!(related["message"]["text"], "first defined here");
}
