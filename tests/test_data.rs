//! Tests from data (issue 33 §3), through the real binary: a test with `from:` becomes one test
//! per CSV or JSONL row, `check` finds a missing file, an unknown column and repeated names at
//! their line and column, bad rows fail alone with file, line and column, and `--filter`,
//! `--partition` and `--sample` see the generated names.

mod support;

use support::{run, toolrun, write};

const HEAD: &str = r#"version: 1
name: prices
default_model: scripted
tools:
  get_stock_price:
    description: Returns the simulated current price for a ticker symbol.
    kind: mock
    input: { type: object, properties: { ticker: { type: string } }, required: [ticker] }
    responses:
      - when: { ticker: AAPL }
        result: 178.15
      - when: { ticker: MSFT }
        result: 411.2
      - result: 1
models:
  scripted:
    kind: scripted
    scripts:
      - when: "(?i)price of (?P<t>[A-Z0-9]+)"
        turns:
          - tool_calls: [{ name: get_stock_price, arguments: { ticker: "{{ query | replace('What is the price of ', '') | replace('?', '') }}" } }]
          - answer: "The price is {{ last.result }}."
tests:
  - name: written_test
    query: What is the price of AAPL?
    expect: { output_contains: "178.15" }
"#;

fn data_test(from: &str, name: &str) -> String {
    format!(
        r#"{HEAD}  - name: "{name}"
    from: {from}
    query: "What is the price of {{{{ row.ticker }}}}?"
    expect:
      status: ok
      output_contains: "{{{{ row.price }}}}"
"#
    )
}

/// A project folder (it holds `.git`) with the spec and its data files.
fn project(spec: &str, files: &[(&str, &[u8])]) -> support::TempDir {
    let dir = support::temp_dir("test-data");
    std::fs::create_dir_all(dir.path().join(".git")).expect(".git");
    std::fs::create_dir_all(dir.path().join("data")).expect("data");
    write(dir.path(), "spec.yaml", spec);
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).expect("write data");
    }
    dir
}

fn test_json(dir: &std::path::Path, extra: &[&str]) -> (support::Output, Vec<String>) {
    let mut cmd = toolrun();
    cmd.current_dir(dir)
        .args(["test", "spec.yaml", "--format", "json"])
        .args(extra);
    let out = run(&mut cmd);
    let names = out.json()["tests"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    (out, names)
}

const PRICES: &[u8] = b"id,ticker,price\n1,AAPL,178.15\n2,MSFT,411.2\n";

#[test]
fn each_row_is_a_test_that_filter_and_partition_see() {
    let dir = project(
        &data_test("data/prices.csv", "price_{{ row.ticker }}"),
        &[("data/prices.csv", PRICES)],
    );
    let (out, names) = test_json(dir.path(), &[]);
    out.assert_success();
    assert_eq!(
        names,
        ["written_test", "price_AAPL", "price_MSFT"],
        "{out:?}"
    );

    let (out, names) = test_json(dir.path(), &["--filter", "MSFT"]);
    out.assert_success();
    assert_eq!(names, ["price_MSFT"]);

    let mut shards: Vec<String> = Vec::new();
    for k in ["1/2", "2/2"] {
        let (_, names) = test_json(dir.path(), &["--partition", k]);
        shards.extend(names);
    }
    shards.sort();
    assert_eq!(shards, ["price_AAPL", "price_MSFT", "written_test"]);

    // A row whose answer does not hold its expectation fails as that row's test.
    std::fs::write(
        dir.path().join("data/prices.csv"),
        b"id,ticker,price\n1,AAPL,178.15\n2,MSFT,999\n",
    )
    .expect("write");
    let mut cmd = toolrun();
    cmd.current_dir(dir.path()).args(["test", "spec.yaml"]);
    let out = run(&mut cmd);
    out.assert_code(1);
    support::assert_contains(
        &out.stdout,
        &[
            "PASS prices::price_AAPL",
            "FAIL prices::price_MSFT",
            "\"999\"",
        ],
    );
}

#[test]
fn jsonl_values_keep_their_type() {
    let dir = project(
        &data_test("data/prices.jsonl", "j_{{ row.ticker }}"),
        &[(
            "data/prices.jsonl",
            b"{\"ticker\": \"AAPL\", \"price\": 178.15}\n\n{\"ticker\": \"MSFT\", \"price\": \"411.2\"}\n",
        )],
    );
    let (out, names) = test_json(dir.path(), &[]);
    out.assert_success();
    assert_eq!(names, ["written_test", "j_AAPL", "j_MSFT"]);
}

#[test]
fn bad_rows_fail_alone_with_file_line_and_column() {
    let csv: &[u8] = b"id,ticker,price\n1,AAPL,178.15\n2,MSFT\n3,NV\xffDA,1\n4,MSFT,411.2\n";
    let jsonl: &[u8] =
        b"{\"ticker\": \"AAPL\", \"price\": \"178.15\"}\n[1, 2]\n{\"ticker\": \"MSFT\"}\n{oops\n";
    let spec = format!(
        "{}{}",
        data_test("data/bad.csv", "c_{{ row.id }}"),
        data_test("data/bad.jsonl", "j_{{ row.ticker }}")
            .split_once("tests:\n")
            .map(|(_, t)| t.replace("  - name: written_test\n    query: What is the price of AAPL?\n    expect: { output_contains: \"178.15\" }\n", ""))
            .unwrap_or_default()
    );
    let dir = project(&spec, &[("data/bad.csv", csv), ("data/bad.jsonl", jsonl)]);
    let mut cmd = toolrun();
    cmd.current_dir(dir.path()).args(["test", "spec.yaml"]);
    let out = run(&mut cmd);
    out.assert_code(1);
    support::assert_contains(
        &out.stdout,
        &[
            "PASS prices::written_test",
            "PASS prices::c_1",
            "PASS prices::c_4",
            "data/bad.csv:3:7: the row has 2 field(s), the header 3",
            "data/bad.csv:4:5: field 2 is not UTF-8",
            "PASS prices::j_AAPL",
            "data/bad.jsonl:2:1: the line is an array, not a JSON object",
            "FAIL prices::j_MSFT",
            "data/bad.jsonl:3:1: the row has no `price`",
            "data/bad.jsonl:4:2: not JSON",
            "4 passed, 5 failed",
        ],
    );
    // `check` names each bad row too, as a warning: the spec itself is sound.
    let mut cmd = toolrun();
    cmd.current_dir(dir.path())
        .args(["check", "--format", "json", "spec.yaml"]);
    let out = run(&mut cmd);
    out.assert_success();
    let rows: Vec<String> = out
        .json()
        .as_array()
        .expect("array")
        .iter()
        .filter(|d| d["code"] == "W116")
        .map(|d| d["message"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(rows.len(), 5, "{rows:?}");
}

/// `check --format json` of the project's spec: each diagnostic's code, line and column.
fn check_codes(dir: &std::path::Path) -> Vec<(String, u64, u64)> {
    let mut cmd = toolrun();
    cmd.current_dir(dir)
        .args(["check", "--format", "json", "spec.yaml"]);
    let out = run(&mut cmd);
    out.assert_code(1);
    out.json()
        .as_array()
        .expect("array")
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap_or("").to_string(),
                d["line"].as_u64().unwrap_or(0),
                d["column"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn check_finds_missing_files_unknown_columns_and_repeated_names() {
    // The data test starts at line 27 of the spec: name, from, query, expect.
    let missing = project(&data_test("data/nope.csv", "p_{{ row.id }}"), &[]);
    assert_eq!(check_codes(missing.path()), [("E047".into(), 28, 11)]);

    let outside = project(&data_test("../outside.csv", "p_{{ row.id }}"), &[]);
    assert_eq!(check_codes(outside.path()), [("E047".into(), 28, 11)]);

    let unknown = project(
        &data_test("data/prices.csv", "p_{{ row.id }}").replace("row.price", "row.prize"),
        &[("data/prices.csv", PRICES)],
    );
    assert_eq!(check_codes(unknown.path()), [("E048".into(), 32, 25)]);

    let repeated = project(
        &data_test("data/prices.csv", "same"),
        &[("data/prices.csv", PRICES)],
    );
    assert_eq!(check_codes(repeated.path()), [("E049".into(), 27, 11)]);

    // JSON Lines have no header: a member no line has is E048 once, at the template.
    let jsonl = project(
        &data_test("data/prices.jsonl", "p_{{ row.ticker }}"),
        &[(
            "data/prices.jsonl",
            b"{\"ticker\": \"AAPL\", \"prize\": 1}\n",
        )],
    );
    assert_eq!(check_codes(jsonl.path()), [("E048".into(), 32, 25)]);

    // A row named like a written test is a repeated name too.
    let clash = project(
        &data_test("data/prices.csv", "written_{{ row.x }}"),
        &[("data/prices.csv", b"x,ticker,price\ntest,AAPL,1\n")],
    );
    assert_eq!(check_codes(clash.path()), [("E049".into(), 27, 11)]);

    // Under `fixtures:`, two rows whose names make one fixture file name are E044, the first
    // named by its row (rows' names are kept as hashes only).
    let stems = project(
        &data_test("data/prices.csv", "{{ row.x }}").replace("tests:\n", "fixtures: fx\ntests:\n"),
        &[(
            "data/prices.csv",
            b"x,ticker,price\na b,AAPL,1\na_b,MSFT,2\n",
        )],
    );
    let mut cmd = toolrun();
    cmd.current_dir(stems.path())
        .args(["check", "--format", "json", "spec.yaml"]);
    let out = run(&mut cmd);
    out.assert_code(1);
    let messages: Vec<String> = out
        .json()
        .as_array()
        .expect("array")
        .iter()
        .filter(|d| d["code"] == "E044")
        .map(|d| d["message"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        messages,
        ["the row at data/prices.csv:2 and test `a_b` both record into `a_b.json` under `fixtures:`"]
    );
}

#[test]
fn a_sample_is_the_same_for_the_same_seed() {
    let mut csv = String::from("id,ticker,price\n");
    for i in 0..200 {
        csv.push_str(&format!("{i},T{i},1\n"));
    }
    let dir = project(
        &data_test("data/many.csv", "row_{{ row.id }}"),
        &[("data/many.csv", csv.as_bytes())],
    );
    let sample = |seed: &str| {
        let (out, names) = test_json(dir.path(), &["--sample", "7", "--seed", seed]);
        out.assert_success();
        names
    };
    let first = sample("1");
    assert_eq!(first.len(), 8, "7 rows and the written test: {first:?}");
    assert_eq!(first[0], "written_test");
    assert_eq!(sample("1"), first);
    let (out, _) = test_json(dir.path(), &["--sample", "7", "--seed", "1"]);
    let settings = &out.json()["settings"];
    assert_eq!(
        (&settings["sample"], &settings["seed"]),
        (&7.into(), &1.into())
    );
    assert_ne!(sample("2"), first);
    // The file's order does not matter: the same rows, shuffled, give the same sample.
    let mut lines: Vec<&str> = csv.lines().skip(1).collect();
    lines.reverse();
    let reversed = format!("id,ticker,price\n{}\n", lines.join("\n"));
    std::fs::write(dir.path().join("data/many.csv"), reversed).expect("write");
    let mut again = sample("1");
    let mut first_sorted = first.clone();
    again.sort();
    first_sorted.sort();
    assert_eq!(again, first_sorted);
}

#[test]
fn the_example_spec_runs_a_test_per_row() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = toolrun();
    cmd.current_dir(root)
        .args(["test", "specs/stock_prices_from_data.yaml"]);
    let out = run(&mut cmd);
    out.assert_success();
    support::assert_contains(
        &out.stdout,
        &[
            "PASS stock_prices_from_data::price_NVDA",
            "3 passed, 0 failed",
        ],
    );
}

/// `turns:` of a data test are templates over the row too.
#[test]
fn turns_are_templates_over_the_row() {
    let spec = format!(
        r#"{HEAD}  - name: "talk_{{{{ row.ticker }}}}"
    from: data/prices.csv
    turns:
      - query: "What is the price of {{{{ row.ticker }}}}?"
        expect: {{ output_contains: "{{{{ row.price }}}}" }}
"#
    );
    let dir = project(
        &spec,
        &[(
            "data/prices.csv",
            b"id,ticker,price\n1,AAPL,178.15\n2,MSFT,999\n",
        )],
    );
    let mut cmd = toolrun();
    cmd.current_dir(dir.path()).args(["test", "spec.yaml"]);
    let out = run(&mut cmd);
    out.assert_code(1);
    support::assert_contains(
        &out.stdout,
        &[
            "PASS prices::talk_AAPL",
            "FAIL prices::talk_MSFT",
            "turn 1",
            "\"999\"",
        ],
    );
}

/// One run of toolrun in `dir` with stdout to `out.txt` there: its exit code, its stdout and
/// its own peak RSS in bytes (`ru_maxrss` from `wait4`, however short its life).
#[cfg(unix)]
fn peak_rss(dir: &std::path::Path, args: &[&str]) -> (i32, String, u64) {
    let out = dir.join("out.txt");
    let mut cmd = toolrun();
    cmd.current_dir(dir)
        .args(args)
        .stdout(std::fs::File::create(&out).expect("out.txt"))
        .stderr(std::process::Stdio::null());
    // Reaped by `wait4` below.
    #[allow(clippy::zombie_processes)]
    let mut child = cmd.spawn().expect("spawn toolrun");
    let pid = child.id() as i32;
    let started = std::time::Instant::now();
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is valid; `wait4` writes it and `status` for our child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(reaped >= 0, "wait4 failed");
        if reaped == pid {
            break;
        }
        // Only a hang takes this long, even on a loaded debug build.
        if started.elapsed() > std::time::Duration::from_secs(600) {
            let _ = child.kill();
            panic!("toolrun {args:?} still runs after 600 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(libc::WIFEXITED(status), "{args:?}: status {status}");
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    (
        libc::WEXITSTATUS(status),
        stdout,
        usage.ru_maxrss as u64 * 1024,
    )
}

/// A 100,000-row data file is read as a stream by `check` and by `test --sample`/`--filter`:
/// memory grows with the tests that run, not with the file. Before, every row became a test
/// before the sample was drawn: 140 MB at peak (debug build) against 30 MB for a 10-row file.
/// A ragged row among them still fails alone, at its file, line and column.
#[cfg(unix)]
#[test]
fn a_100000_row_file_is_checked_and_sampled_in_bounded_memory() {
    const ROWS: usize = 100_000;
    // Far below the 105 MB that 100,000 rows used to add; far above the names' hashes.
    const GROWTH: u64 = 24 << 20;
    for ext in ["csv", "jsonl"] {
        let from = format!("data/cases.{ext}");
        let spec = data_test(&from, "case_{{ row.id }}");
        let file = |rows: usize| {
            let mut text = String::from(if ext == "csv" {
                "id,ticker,price\n"
            } else {
                ""
            });
            for i in 0..rows {
                let (t, p) = [("AAPL", "178.15"), ("MSFT", "411.2")][i % 2];
                text.push_str(&match (ext, i) {
                    ("csv", 4242) => format!("{i},{t}\n"),
                    ("csv", _) => format!("{i},{t},{p}\n"),
                    (_, 4242) => format!("[{i}]\n"),
                    _ => format!("{{\"id\": {i}, \"ticker\": \"{t}\", \"price\": \"{p}\"}}\n"),
                });
            }
            text
        };
        let small = project(&spec, &[(&from, file(10).as_bytes())]);
        let floor = [
            peak_rss(small.path(), &["check", "spec.yaml"]),
            peak_rss(
                small.path(),
                &["test", "spec.yaml", "--sample", "10", "--seed", "1"],
            ),
        ]
        .iter()
        .map(|(code, out, peak)| {
            assert_eq!(*code, 0, "{out}");
            *peak
        })
        .max()
        .unwrap_or(0);

        let big = project(&spec, &[(&from, file(ROWS).as_bytes())]);
        let (code, out, check) = peak_rss(big.path(), &["check", "--format", "json", "spec.yaml"]);
        assert_eq!(code, 0, "{out}");
        let bad_line = if ext == "csv" { 4244 } else { 4243 };
        assert!(
            out.contains(&format!("{from}:{bad_line}:")),
            "check names the bad row: {out}"
        );

        let sample = [
            "test",
            "spec.yaml",
            "--format",
            "json",
            "--sample",
            "10",
            "--seed",
            "1",
        ];
        let (code, out, sampled) = peak_rss(big.path(), &sample);
        let doc: serde_json::Value = serde_json::from_str(&out).expect("results");
        let ran = doc["tests"].as_array().map_or(0, Vec::len);
        assert_eq!((code, ran), (0, 11), "10 rows and the written test: {out}");

        // The bad row is named by its place (its name cannot be read from it): `424` picks it
        // and 298 sound rows, which still run.
        let (code, out, filtered) = peak_rss(big.path(), &["test", "spec.yaml", "--filter", "424"]);
        assert_eq!(code, 1, "{out}");
        support::assert_contains(
            &out,
            &[
                "PASS prices::case_42429",
                &format!("FAIL prices::{from}:{bad_line}"),
                &format!("{from}:{bad_line}:"),
                "298 passed, 1 failed",
            ],
        );

        eprintln!(
            "{ext}: peak RSS {floor} bytes for 10 rows; {ROWS} rows: check {check}, --sample {sampled}, --filter {filtered}"
        );
        for (what, peak) in [
            ("check", check),
            ("--sample", sampled),
            ("--filter", filtered),
        ] {
            assert!(
                peak < floor + GROWTH,
                "{ext}, {what}: peak RSS {peak} bytes for {ROWS} rows, {floor} for 10"
            );
        }
    }
}
