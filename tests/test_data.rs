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
