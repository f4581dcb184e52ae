//! Issue 12 §4: large inputs give exact results. A duplicate key at the end of a huge mapping, a
//! diagnostic deep in a large file and thousands of diagnostics in one, a very wide CSV table and
//! a long one, through the real binary. (How fast: `benches/scale_bench.py`; no timings here.)

mod support;

use serde_json::json;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use support::{temp_dir, toolrun, write};

const KEYS: usize = 100_000;

fn run(cmd: &mut std::process::Command) -> support::Output {
    support::run(cmd)
}

/// A spec whose mock tool returns a mapping of `keys` keys (`k0: 0` ...), one per line, and the
/// line the first key is on.
fn big_mapping_spec(keys: usize, tail: &str) -> (String, usize) {
    let mut text = String::from(
        "version: 1\nname: big\ntools:\n  big:\n    description: Returns one very large mapping.\n    kind: mock\n    responses:\n      - result:\n",
    );
    let first_line = text.lines().count() + 1;
    for i in 0..keys {
        let _ = writeln!(text, "          k{i}: {i}");
    }
    text.push_str(tail);
    (text, first_line)
}

/// The start of a human diagnostic's location and snippet lines, whose gutter is as wide as the
/// line number.
fn gutter(line: usize) -> String {
    " ".repeat(line.to_string().len())
}

fn check(spec: &Path, format: &[&str]) -> support::Output {
    run(toolrun().arg("check").args(format).arg(spec))
}

#[test]
fn a_duplicate_at_the_end_of_a_huge_mapping_names_both_places() {
    let dir = temp_dir("large_dup");
    let (text, first) = big_mapping_spec(KEYS, "          k7: again\n");
    let duplicate_line = first + KEYS;
    let spec = write(&dir, "spec.yaml", &text);

    let out = check(&spec, &[]);
    out.assert_code(1);
    let first_k7 = first + 7;
    // The snippet shows the first definition too, however far above it is.
    assert!(
        out.stderr.contains(&format!(
            "{first_k7:>w$} |           k7: 7\n{g} |           -- first defined here\n...\n{duplicate_line} |           k7: again\n{g} |           ^^ second definition\n",
            w = duplicate_line.to_string().len(),
            g = gutter(duplicate_line)
        )),
        "{out:?}"
    );
    assert!(
        out.stderr.contains(&format!(
            "`k7` is already defined at line {first_k7}; remove one of them"
        )),
        "{out:?}"
    );

    let out = check(&spec, &["--format", "json"]);
    out.assert_code(1);
    let diags = out.json();
    let e005: Vec<_> = diags
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "E005")
        .collect();
    assert_eq!(e005.len(), 1, "{out:?}");
    assert_eq!(e005[0]["line"], json!(duplicate_line));
    assert_eq!(e005[0]["column"], json!(11));
    assert_eq!(e005[0]["related"][0]["line"], json!(first_k7));
    assert_eq!(e005[0]["related"][0]["column"], json!(11));
    assert_eq!(e005[0]["related"][0]["label"], "first defined here");
}

#[test]
fn a_huge_mapping_comes_back_whole_from_a_run() {
    let dir = temp_dir("large_run");
    let (text, _) = big_mapping_spec(
        KEYS,
        "limits:\n  max_tool_output_chars: 10000000\n\
         models:\n  s:\n    kind: scripted\n    scripts:\n      - turns:\n          - tool_calls: [{ name: big, arguments: {} }]\n          - answer: \"{{ last.result.k99999 }} {{ last.result.k0 }} {{ last.result | length }}\"\n",
    );
    let spec = write(&dir, "spec.yaml", &text);
    let out = run(toolrun().args(["run"]).arg(&spec).args(["--query", "q"]));
    out.assert_success();
    assert_eq!(out.stdout, format!("99999 0 {KEYS}\n"), "{out:?}");
}

#[test]
fn a_diagnostic_deep_in_a_large_file_points_at_its_line_and_column() {
    let dir = temp_dir("large_deep");
    let tail = "policy:\n  allow: [big, bgi]\n";
    let (text, first) = big_mapping_spec(KEYS, tail);
    let spec = write(&dir, "spec.yaml", &text);
    let out = check(&spec, &[]);
    out.assert_code(1);
    let line = first + KEYS + 1;
    let expected = format!(
        "error[E012]: unknown tool `bgi` in `policy.allow`\n{g}--> {}:{line}:16\n{g} |\n{line} |   allow: [big, bgi]\n{g} |                ^^^",
        spec.display(),
        g = gutter(line)
    );
    assert!(out.stderr.contains(&expected), "{expected}\n{out:?}");
}

#[test]
fn thousands_of_diagnostics_each_point_at_their_own_line() {
    let dir = temp_dir("large_many");
    // Every key of the tool is unknown: one E006 per line, 20,000 of them, all rendered.
    let mut text = String::from(
        "version: 1\nname: many\ntools:\n  t:\n    description: A tool with very many unknown keys.\n    kind: mock\n    responses: [{ result: 1 }]\n",
    );
    let first = text.lines().count() + 1;
    let n = 20_000;
    for i in 0..n {
        let _ = writeln!(text, "    bogus{i}: {i}");
    }
    let spec = write(&dir, "spec.yaml", &text);
    let out = check(&spec, &[]);
    out.assert_code(1);
    assert_eq!(
        out.stderr.matches("error[E006]").count(),
        n,
        "{}",
        &out.stderr[..2000]
    );
    for i in [0, 1, n / 2, n - 1] {
        let line = first + i;
        let expected = format!(
            "unknown key `bogus{i}` in tool `t`\n{g}--> {}:{line}:5\n{g} |\n{line} |     bogus{i}: {i}\n",
            spec.display(),
            g = gutter(line)
        );
        assert!(out.stderr.contains(&expected), "{expected}");
    }
}

fn table_spec(dir: &Path, file: &str) -> PathBuf {
    write(
        dir,
        "table.yaml",
        &format!(
            "version: 1\nname: tables\ntools:\n  t:\n    description: Looks rows up in a large generated table.\n    kind: table\n    file: {file}\nlimits:\n  max_tool_output_chars: 5000000\n"
        ),
    )
}

fn parsed(out: &support::Output) -> serde_json::Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

fn call(spec: &Path, args: serde_json::Value) -> support::Output {
    run(toolrun()
        .arg("call")
        .arg(spec)
        .arg("t")
        .arg("--args")
        .arg(args.to_string()))
}

#[test]
fn a_very_wide_csv_table_is_queried_by_any_column() {
    let dir = temp_dir("large_wide");
    let columns = 50_000;
    let mut csv = (0..columns)
        .map(|c| format!("c{c}"))
        .collect::<Vec<_>>()
        .join(",");
    csv.push('\n');
    for row in 0..3 {
        let cells: Vec<String> = (0..columns).map(|c| format!("r{row}v{c}")).collect();
        csv.push_str(&cells.join(","));
        csv.push('\n');
    }
    write(&dir, "wide.csv", &csv);
    let spec = table_spec(&dir, "wide.csv");
    check(&spec, &["--deny-warnings"]).assert_success();

    let last = columns - 1;
    let out = call(
        &spec,
        json!({"where": {format!("c{last}"): format!("R2V{last}")}, "columns": ["c0", format!("c{last}"), "c777"]}),
    );
    out.assert_success();
    let result = parsed(&out);
    assert_eq!(
        result,
        json!([{"c0": "r2v0", format!("c{last}"): format!("r2v{last}"), "c777": "r2v777"}])
    );

    // A whole row comes back with every column, in the file's order.
    let out = call(&spec, json!({"where": {"c1": "r1v1"}}));
    out.assert_success();
    let result = parsed(&out);
    let row = result[0].as_object().expect("a row");
    assert_eq!(row.len(), columns);
    assert_eq!(row.keys().nth(12_345).map(String::as_str), Some("c12345"));
    assert_eq!(row["c12345"], "r1v12345");

    // An unknown column gets a did-you-mean, or the first columns, never all 50,000.
    let out = call(&spec, json!({"where": {"zzzz": 1}}));
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("(invalid_arguments): unknown column `zzzz`; columns: c0, c1, c2,"),
        "{out:?}"
    );
    assert!(out.stderr.contains(", c29, ... (50000 in all)"), "{out:?}");
    let out = call(&spec, json!({"where": {"C777": 1}}));
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("unknown column `C777`; did you mean `c777`?"),
        "{out:?}"
    );
}

#[test]
fn a_long_csv_table_finds_its_last_row_and_types_its_cells() {
    let dir = temp_dir("large_long");
    let rows = 200_000;
    let mut csv = String::from("id,email,salary,active,note\n");
    for i in 0..rows {
        let _ = writeln!(
            csv,
            "{i}, person{i}@example.com ,{}.5,{},\"note, {i}\"",
            50_000 + i,
            i % 2 == 0
        );
    }
    write(&dir, "long.csv", &csv);
    let spec = table_spec(&dir, "long.csv");
    check(&spec, &["--deny-warnings"]).assert_success();

    let last = rows - 1;
    let out = call(
        &spec,
        json!({"where": {"email": format!("PERSON{last}@example.com")}}),
    );
    out.assert_success();
    let result = parsed(&out);
    assert_eq!(
        result,
        json!([{"id": last, "email": format!("person{last}@example.com"), "salary": 50_000.5 + last as f64, "active": false, "note": format!("note, {last}")}])
    );

    // Numbers compare as numbers, `contains` is a substring; the limit holds.
    let out = call(
        &spec,
        json!({"where": {"salary": 50_010.5, "note": {"contains": "NOTE, 1"}}, "columns": ["id"]}),
    );
    out.assert_success();
    assert_eq!(parsed(&out), json!([{"id": 10}]), "{out:?}");
    let out = call(
        &spec,
        json!({"where": {"active": true}, "columns": ["id"], "limit": 3}),
    );
    out.assert_success();
    assert_eq!(
        parsed(&out),
        json!([{"id": 0}, {"id": 2}, {"id": 4}]),
        "{out:?}"
    );
}

#[test]
fn a_csv_row_with_too_few_fields_is_reported() {
    let dir = temp_dir("large_ragged");
    let mut csv = String::from("a,b\n");
    for i in 0..50_000 {
        let _ = writeln!(csv, "{i},{i}");
    }
    csv.push_str("oops\n");
    write(&dir, "ragged.csv", &csv);
    let spec = table_spec(&dir, "ragged.csv");
    let out = check(&spec, &[]);
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("table file `ragged.csv` is not valid CSV"),
        "{out:?}"
    );
    assert!(
        out.stderr
            .contains("every row needs as many fields as the header"),
        "{out:?}"
    );
}

#[test]
fn a_large_json_table_file_is_read_as_a_stream_and_queried() {
    let dir = temp_dir("large_json");
    let rows = 50_000;
    let items: Vec<String> = (0..rows)
        .map(|i| {
            format!(
                "{{\"id\": {i}, \"name\": \"Person {i}\", \"tags\": [\"t{}\"], \"é\": \"ü{i}\"}}",
                i % 7
            )
        })
        .collect();
    write(
        &dir,
        "people.json",
        &format!("[\n{}\n]\n", items.join(",\n")),
    );
    let spec = table_spec(&dir, "people.json");
    check(&spec, &["--deny-warnings"]).assert_success();

    let last = rows - 1;
    let out = call(&spec, json!({"where": {"name": format!("person {last}")}}));
    out.assert_success();
    assert_eq!(
        parsed(&out),
        json!([{"id": last, "name": format!("Person {last}"), "tags": [format!("t{}", last % 7)], "é": format!("ü{last}")}])
    );
    let out = call(
        &spec,
        json!({"where": {"é": format!("ü{last}")}, "columns": ["id"]}),
    );
    out.assert_success();
    assert_eq!(parsed(&out), json!([{"id": last}]));
}

/// Parsing a JSON table as a stream gives the errors reading it whole gave: the same message
/// (with its line and column) for bad JSON, and bad UTF-8 anywhere in the file before that.
#[test]
fn a_json_table_file_read_as_a_stream_keeps_its_errors() {
    let dir = temp_dir("large_json_errors");
    let mut good = String::from("[\n");
    for i in 0..20_000 {
        let _ = writeln!(good, "  {{\"id\": {i}, \"name\": \"café {i}\"}},");
    }
    let cases: [(&str, Vec<u8>); 4] = [
        ("trailing_comma", format!("{good}]\n").into_bytes()),
        ("cut_short", good.clone().into_bytes()),
        (
            "bad_escape",
            format!("{good}  {{\"id\": \"\\q\"}}\n]\n").into_bytes(),
        ),
        ("garbage_after", format!("{good}  {{}}\n] x\n").into_bytes()),
    ];
    for (name, bytes) in &cases {
        let file = format!("{name}.json");
        std::fs::write(dir.join(&file), bytes).unwrap();
        let spec = table_spec(&dir, &file);
        let out = check(&spec, &[]);
        out.assert_code(1);
        let whole = serde_json::from_slice::<serde_json::Value>(bytes).unwrap_err();
        let expected = format!("table file `{file}` is not valid JSON: {whole}");
        assert!(out.stderr.contains(&expected), "{expected}\n{out:?}");
    }

    // Bad UTF-8 after a syntax error, inside a string, and cut at the very end.
    let cases: [(&str, Vec<u8>); 3] = [
        (
            "after_error",
            [format!("{good}]").as_bytes(), b"\xff\n"].concat(),
        ),
        (
            "in_string",
            [
                format!("{good}  {{\"a\": \"caf").as_bytes(),
                b"\xe9\"}\n]\n",
            ]
            .concat(),
        ),
        (
            "cut_char",
            [format!("{good}  {{}}\n]\n").as_bytes(), b"\xe2\x82"].concat(),
        ),
    ];
    for (name, bytes) in &cases {
        let file = format!("{name}.json");
        std::fs::write(dir.join(&file), bytes).unwrap();
        let out = check(&table_spec(&dir, &file), &[]);
        out.assert_code(1);
        assert!(
            out.stderr
                .contains(&format!("table file `{file}` is not valid UTF-8")),
            "{out:?}"
        );
    }

    std::fs::write(
        dir.join("object.json"),
        format!("{{\"rows\": [{}]}}", "{}, ".repeat(10_000) + "{}"),
    )
    .unwrap();
    let out = check(&table_spec(&dir, "object.json"), &[]);
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("table file `object.json` must hold a JSON array of objects"),
        "{out:?}"
    );
}

/// Every scripted call is checked against its own tool's schema, among many tools.
#[test]
fn each_of_many_scripted_calls_is_checked_against_its_own_tool() {
    let dir = temp_dir("large_calls");
    let tools = 400;
    let mut text = String::from("version: 1\nname: many_calls\ntools:\n");
    for i in 0..tools {
        let _ = writeln!(
            text,
            "  t{i}:\n    description: Mock tool number {i}.\n    kind: mock\n    input: {{ type: object, properties: {{ n{i}: {{ type: integer }} }}, required: [n{i}] }}\n    responses: [{{ result: {i} }}]"
        );
    }
    text.push_str("models:\n  s:\n    kind: scripted\n    scripts:\n      - turns:\n");
    let mut lines = Vec::new();
    for i in 0..tools {
        // Every other call passes a string where its tool wants an integer.
        let value = if i % 2 == 0 {
            format!("{i}")
        } else {
            format!("\"{i}\"")
        };
        let _ = writeln!(
            text,
            "          - tool_calls: [{{ name: t{i}, arguments: {{ n{i}: {value} }} }}]"
        );
        lines.push(text.lines().count());
    }
    text.push_str("          - answer: done\n");
    let spec = write(&dir, "spec.yaml", &text);
    let out = check(&spec, &[]);
    out.assert_code(1);
    assert_eq!(
        out.stderr.matches("error[E019]").count(),
        tools / 2,
        "{out:?}"
    );
    for i in [1, 201, tools - 1] {
        let expected = format!(
            "scripted call to `t{i}` has invalid `n{i}`: value is not of type \"integer\"\n{g}--> {}:{}:",
            spec.display(),
            lines[i],
            g = gutter(lines[i])
        );
        assert!(out.stderr.contains(&expected), "{expected}\n{out:?}");
    }
}
