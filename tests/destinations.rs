//! Output destinations (`--trace`, `--events`, `--record`, `--junit`) are checked before any
//! work starts: a missing folder is a usage error (exit 2) and nothing runs.

mod support;

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const STOCK: &str = "specs/stock_assistant.yaml";
const QUERY: &str = "What is the gain on 100 AAPL shares bought at 150?";

#[test]
fn run_refuses_a_trace_or_events_path_in_a_missing_folder_before_the_loop() {
    let dir = support::temp_dir("dest_run");
    for flag in ["--trace", "--events"] {
        let target = dir.join("no/such/folder/out.json");
        let mut cmd = support::toolrun();
        cmd.current_dir(root())
            .args(["run", STOCK, "--query", QUERY, flag])
            .arg(&target);
        let out = support::run(&mut cmd);
        out.assert_code(2);
        // The answer would be on stdout had the loop run.
        assert!(out.stdout.is_empty(), "{out:?}");
        assert!(
            out.stderr.contains(flag) && out.stderr.contains("does not exist"),
            "{out:?}"
        );
    }
    // A folder where a file is expected.
    let mut cmd = support::toolrun();
    cmd.current_dir(root())
        .args(["run", STOCK, "--query", QUERY, "--trace"])
        .arg(&dir);
    let out = support::run(&mut cmd);
    out.assert_code(2);
    assert!(out.stderr.contains("is a folder"), "{out:?}");
}

#[test]
fn record_creates_missing_folders_but_not_under_a_file() {
    let dir = support::temp_dir("dest_record");
    let fixture = dir.join("new/nested/gain.json");
    let mut cmd = support::toolrun();
    cmd.current_dir(root())
        .args(["run", STOCK, "--query", QUERY, "--record"])
        .arg(&fixture);
    support::run(&mut cmd).assert_success();
    assert!(fixture.is_file());

    let file = support::write(&dir, "plain.txt", "x");
    let mut cmd = support::toolrun();
    cmd.current_dir(root())
        .args(["run", STOCK, "--query", QUERY, "--record"])
        .arg(file.join("gain.json"));
    let out = support::run(&mut cmd);
    out.assert_code(2);
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(out.stderr.contains("is not a folder"), "{out:?}");
}

#[test]
fn test_and_replay_refuse_a_junit_path_in_a_missing_folder() {
    let dir = support::temp_dir("dest_junit");
    let junit = dir.join("missing/report.xml");
    let mut cmd = support::toolrun();
    cmd.current_dir(root())
        .args(["test", STOCK, "--junit"])
        .arg(&junit);
    let out = support::run(&mut cmd);
    out.assert_code(2);
    assert!(out.stderr.contains("--junit"), "{out:?}");
    assert!(!out.stderr.contains("passed"), "no test ran: {out:?}");

    let fixture = std::fs::read_dir(root().join("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let mut cmd = support::toolrun();
    cmd.current_dir(root())
        .arg("replay")
        .arg(&fixture)
        .arg("--junit")
        .arg(&junit);
    let out = support::run(&mut cmd);
    out.assert_code(2);
    assert!(out.stderr.contains("does not exist"), "{out:?}");
}
