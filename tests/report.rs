//! `toolrun report`: results files written by `toolrun test --results` (a scripted run, and a
//! live run against a fake OpenAI server on 127.0.0.1), rendered as HTML and markdown through the
//! binary, and the page checked in a real browser (headless Chromium).

mod support;

use std::path::Path;
use std::process::Command;

const SPEC: &str = r#"version: 1
default_model: scripted
name: stocks
tools:
  price:
    description: Price of a ticker.
    kind: mock
    input:
      type: object
      properties: { ticker: { type: string } }
      required: [ticker]
    responses:
      - when: { ticker: AAPL }
        result: 178.15
      - error: { kind: not_found, message: "unknown ticker {{ args.ticker }}" }
  calc:
    description: Arithmetic.
    kind: builtin
    builtin: calculator
models:
  gpt:
    kind: openai
    model: fake-model
    base_url: BASE_URL
    price: { input: 3, output: 15 }
  scripted:
    kind: scripted
    scripts:
      - when: "(?i)gain"
        turns:
          - tool_calls: [{ name: price, arguments: { ticker: AAPL } }]
          - tool_calls: [{ name: calc, arguments: { expression: "({{ last.result }} - 150) * 100" } }]
          - answer: "AAPL is {{ results[0].result }}; the gain is {{ last.result }}."
      - turns:
          - tool_calls: [{ name: price, arguments: { ticker: ZZZZ } }]
          - answer: "No price: {{ last.error.message }}"
tests:
  - name: gain_on_aapl
    query: "What is the gain on 100 AAPL shares bought at 150?"
    expect:
      tool_calls: [price, calc]
      output_contains: "2815"
  - name: unknown_ticker
    query: "Price of ZZZZ? </script><img src=x onerror=alert(1)>"
    expect:
      output_contains: "not found"
"#;

const GAIN: &str = "What is the gain on 100 AAPL shares bought at 150?";

/// A fake OpenAI server that answers by what it is asked, whatever order the runner asks in:
/// the gain question right on odd answers and wrong (2816) on even ones, the unknown ticker
/// always with "not found". Each reply reports 10 input and 5 output tokens.
fn fake_gpt() -> support::TestServer {
    use support::providers::{openai_answer, openai_tool_calls};
    let answers = std::sync::atomic::AtomicUsize::new(0);
    support::TestServer::start(move |req| {
        let body = req.json().unwrap_or_default();
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let query = messages
            .iter()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_string();
        let tool_results = messages.iter().filter(|m| m["role"] == "tool").count();
        match (query.contains("gain"), tool_results) {
            (true, 0) => openai_tool_calls(&[("call_1", "price", r#"{"ticker":"AAPL"}"#)]),
            (true, 1) => {
                openai_tool_calls(&[("call_2", "calc", r#"{"expression":"(178.15 - 150) * 100"}"#)])
            }
            (true, _) => {
                let n = answers.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                openai_answer(if n % 2 == 0 {
                    "AAPL is 178.15; the gain is 2815."
                } else {
                    "The gain is 2816."
                })
            }
            (false, 0) => openai_tool_calls(&[("call_1", "price", r#"{"ticker":"ZZZZ"}"#)]),
            (false, _) => openai_answer("ZZZZ was not found."),
        }
    })
}

/// `before.json` from the scripted model (gain passes, unknown_ticker fails) and `after.json`
/// from the live model on the fake server, twice per test (gain 1/2, worse but within noise;
/// unknown_ticker 2/2, better within noise): both written by `toolrun test --results`.
fn two_runs() -> support::TempDir {
    let dir = support::temp_dir("report");
    let fake = fake_gpt();
    std::fs::write(
        dir.join("spec.yaml"),
        SPEC.replace("BASE_URL", &fake.url("/v1")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    support::toolrun_in(&dir, &["test", "spec.yaml", "--results", "before.json"]).assert_code(1);
    support::toolrun_in(
        &dir,
        &[
            "test",
            "spec.yaml",
            "--model",
            "gpt",
            "--repeat",
            "2",
            "--results",
            "after.json",
        ],
    )
    .assert_code(1);
    dir
}

#[test]
fn markdown_summary_names_rates_regressions_and_failures() {
    let dir = two_runs();
    let out = support::toolrun_in(
        &dir,
        &[
            "report",
            "before.json",
            "after.json",
            "--format",
            "markdown",
        ],
    );
    out.assert_success();
    let md = &out.stdout;
    assert!(md.contains("| | scripted | gpt |"), "{md}");
    assert!(
        md.contains("| **tests passed** | 1/2 (50%) | 1/2 (50%) |"),
        "{md}"
    );
    // With its 95% Wilson interval.
    assert!(
        md.contains(
            "| **attempts passed** | 1/2 (50%, 95% CI 9%–91%) | 3/4 (75%, 95% CI 30%–95%) |"
        ),
        "{md}"
    );
    // Live: (3 + 2 calls) × 2 attempts × (10 + 5) tokens; scripted models report none.
    assert!(md.contains("| **tokens** | 0 | 150 |"), "{md}");
    assert!(md.contains("| **cost** | — | $0.00"), "{md}");
    // One failed attempt of two live ones is not a regression of a test that passed once: it
    // is marked, as within noise (Fisher's exact test, p=1).
    assert!(
        md.contains("| stocks::gain\\_on\\_aapl | ✅ 1/1 | ❌ 1/2 [9%–91%] worse, within noise |"),
        "{md}"
    );
    assert!(
        md.contains(
            "| stocks::unknown\\_ticker | ❌ 0/1 | ✅ 2/2 [34%–100%] better, within noise |"
        ),
        "{md}"
    );
    assert!(
        md.contains("**scripted → gpt**: 0 regression(s), 0 fix(es); 2 test(s) in both, 1 passed only in scripted, 1 only in gpt: within noise (p=1.000)"),
        "{md}"
    );
    assert!(
        md.contains("- worse, within noise: stocks::gain\\_on\\_aapl"),
        "{md}"
    );
    assert!(
        md.contains("- better, within noise: stocks::unknown\\_ticker"),
        "{md}"
    );
    let failed = failed_gain_attempt(&dir);
    assert!(
        md.contains(&format!(
            "(gpt, attempt {failed}): `output\\_contains`: expected the output to contain \"2815\""
        )),
        "{md}"
    );
    // The failing rows in the spec's order.
    let gain = md.find("| stocks::gain").unwrap_or(usize::MAX);
    let unknown = md.find("| stocks::unknown").unwrap_or(0);
    assert!(gain < unknown, "{md}");
}

/// Which of the live gain attempts got the wrong answer (the runner may start them in any order).
fn failed_gain_attempt(dir: &Path) -> u64 {
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("after.json")).unwrap_or_default())
            .unwrap_or_default();
    let test = &doc["tests"][0];
    assert_eq!(test["name"], "gain_on_aapl", "{doc:#}");
    let failed: Vec<u64> = test["attempts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["outcome"] == "failed")
        .filter_map(|a| a["attempt"].as_u64())
        .collect();
    assert_eq!(failed.len(), 1, "{doc:#}");
    failed[0]
}

#[test]
fn bad_input_is_a_clear_error_with_exit_2() {
    let dir = two_runs();
    std::fs::write(dir.join("notjson.json"), "{ nope").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.join("newer.json"),
        r#"{"kind":"toolrun.results","format_version":7}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let trace = support::toolrun_in(&dir, &["run", "spec.yaml", "--query", GAIN, "--json"]);
    std::fs::write(dir.join("trace.json"), &trace.stdout).unwrap_or_else(|e| panic!("{e}"));
    for (file, says) in [
        ("missing.json", "cannot read results file `missing.json`"),
        (
            "notjson.json",
            "is not a results file: it is not valid JSON",
        ),
        ("newer.json", "has results format_version 7"),
        ("trace.json", "it looks like a run trace"),
        ("spec.yaml", "not valid JSON"),
    ] {
        let out = support::toolrun_in(&dir, &["report", "before.json", file, "-o", "r.html"]);
        out.assert_code(2);
        assert!(out.stderr.contains(says), "{file}: {out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
    }
    assert!(!dir.join("r.html").exists(), "no report from bad input");
}

#[test]
fn the_html_report_renders_in_a_real_browser() {
    let dir = two_runs();
    let out = support::toolrun_in(
        &dir,
        &["report", "before.json", "after.json", "-o", "report.html"],
    );
    out.assert_success();
    assert!(
        out.stderr
            .contains("wrote report.html (2 test(s) × 2 results file(s))"),
        "{out:?}"
    );
    let page = dir.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap_or_default();
    assert!(!html.contains("<img"), "the hostile query became markup");

    let Some(browser) = support::chromium() else {
        return;
    };
    // Open the regressed attempt (after.json is column 1) by its link.
    let failed = failed_gain_attempt(&dir);
    let dom = support::browser::rendered_dom(
        &browser,
        &page,
        &format!("#open=1/{failed}/stocks%3A%3Again_on_aapl"),
    );
    assert!(
        dom.contains("data-rendered=\"true\""),
        "the script did not run:\n{dom}"
    );

    // The matrix: names, rates, marks; the regression first.
    let matrix = section(&dom, "id=\"matrix\"", "</table>");
    let gain = matrix.find("gain_on_aapl").unwrap_or(usize::MAX);
    let unknown = matrix.find("unknown_ticker").unwrap_or(0);
    assert!(gain < unknown, "row order:\n{matrix}");
    support::assert_contains(
        matrix,
        &[
            "1/1 (100%)",
            "1/2 (50%)",
            "0/1 (0%)",
            "2/2 (100%)",
            "1/2 (50%) [9%–91%]",
            "class=\"change worse\">worse, within noise (p=1.000)<",
            "class=\"change better\">better, within noise (p=0.333)<",
            "90 tok · $0.0006",
        ],
    );
    // The hostile query is shown as text, not run as markup.
    assert!(
        matrix.contains("Price of ZZZZ? &lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"),
        "{matrix}"
    );
    assert!(
        !dom.contains("<img"),
        "markup from the data reached the DOM"
    );

    let summary = section(&dom, "id=\"summary\"", "</table>");
    support::assert_contains(summary, &[">150<", "3/4 (75%, 95% CI 30%–95%)"]);
    let changes = section(&dom, "id=\"changes\"", "</ul>");
    support::assert_contains(
        changes,
        &[
            "scripted → gpt: 2 test(s) in both, 1 passed only in scripted, 1 only in gpt: within noise (p=1.000)",
            "worse, within noise</span> scripted → gpt: stocks::gain_on_aapl",
            "better, within noise</span> scripted → gpt: stocks::unknown_ticker",
        ],
    );

    // The expanded trajectory: query, each tool call with arguments and result, the answer, and
    // the failed assertion, in that order.
    let traj = section(
        &dom,
        &format!("id=\"trajectory-0-1-{failed}\""),
        "</div></div></td>",
    );
    let mut at = 0;
    for s in [
        GAIN,
        "step 1 · tool call · ok",
        ">price<",
        "\"ticker\": \"AAPL\"",
        "178.15",
        "step 2 · tool call · ok",
        ">calc<",
        "(178.15 - 150) * 100",
        "2815",
        "The gain is 2816.",
        "failed assertion · output_contains",
        "expected the output to contain \"2815\"",
    ] {
        match traj[at..].find(s) {
            Some(i) => at += i + 1,
            None => panic!("`{s}` missing (or out of order) in the trajectory:\n{traj}"),
        }
    }
    assert!(
        dom.contains(&format!(
            "id=\"attempt-0-1-{failed}\" aria-expanded=\"true\""
        )),
        "the attempt is not marked expanded"
    );

    // The scripted run of the other test: its tool error, opened the same way.
    let dom =
        support::browser::rendered_dom(&browser, &page, "#open=0/1/stocks%3A%3Aunknown_ticker");
    let traj = section(&dom, "id=\"trajectory-1-0-1\"", "</div></div></td>");
    support::assert_contains(
        traj,
        &[
            "error · not_found",
            "unknown ticker ZZZZ",
            "failed assertion · output_contains",
        ],
    );
}

/// The text from `start` to the first `end` after it; panics with the whole DOM if absent.
fn section<'a>(dom: &'a str, start: &str, end: &str) -> &'a str {
    let Some(i) = dom.find(start) else {
        panic!("`{start}` not in the page:\n{dom}");
    };
    let rest = &dom[i..];
    &rest[..rest.find(end).map_or(rest.len(), |j| j + end.len())]
}

#[test]
fn secrets_declared_by_the_spec_are_masked_even_in_a_file_that_kept_them() {
    let dir = two_runs();
    // As an older or foreign writer might leave it: the secret in the query and a failure.
    let path = dir.join("after.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_default())
            .unwrap_or_default();
    doc["specs"][0]["secrets"] = serde_json::json!(["REPORT_TOKEN"]);
    doc["tests"][0]["query"] = serde_json::json!("use tok-abcdef-123456 please");
    for test in doc["tests"].as_array_mut().into_iter().flatten() {
        for attempt in test["attempts"].as_array_mut().into_iter().flatten() {
            let failures = attempt.get_mut("failures").and_then(|f| f.as_array_mut());
            for f in failures.into_iter().flatten() {
                f["message"] = serde_json::json!("expected tok-abcdef-123456 in the output");
            }
        }
    }
    std::fs::write(&path, doc.to_string()).unwrap_or_else(|e| panic!("{e}"));
    for args in [
        &[
            "report",
            "before.json",
            "after.json",
            "--format",
            "markdown",
        ][..],
        &["report", "before.json", "after.json"][..],
    ] {
        let mut cmd = support::toolrun();
        cmd.current_dir(&dir)
            .args(args)
            .env("REPORT_TOKEN", "tok-abcdef-123456");
        let out = support::run(&mut cmd);
        out.assert_success();
        assert!(!out.stdout.contains("tok-abcdef"), "{out:?}");
        // Markdown escapes the mask's asterisks.
        assert!(
            out.stdout.contains("expected *** in") || out.stdout.contains("expected \\*\\*\\* in"),
            "{out:?}"
        );
    }
}

#[test]
fn price_is_checked_where_it_is_written() {
    let dir = support::temp_dir("price");
    let spec = |price: &str| {
        format!(
            "version: 1\nname: p\nmodels:\n  gpt:\n    kind: openai\n    model: m\n    base_url: http://127.0.0.1:9/v1\n    price: {price}\n"
        )
    };
    std::fs::write(dir.join("ok.yaml"), spec("{ input: 0.15, output: 0.6 }"))
        .unwrap_or_else(|e| panic!("{e}"));
    support::toolrun_in(&dir, &["check", "--deny-warnings", "ok.yaml"]).assert_success();
    for (price, says) in [
        ("{ input: -1, output: 0.6 }", "ok.yaml:8:21"),
        (
            "{ input: -1, output: 0.6 }",
            "`price.input` must be 0 or more, found -1",
        ),
        ("{ input: 0.15 }", "`output`"),
        ("{ input: 0.15, output: 1, cached: 2 }", "cached"),
        ("{ input: cheap, output: 1 }", "a number"),
        ("3", "a mapping"),
    ] {
        std::fs::write(dir.join("ok.yaml"), spec(price)).unwrap_or_else(|e| panic!("{e}"));
        let out = support::toolrun_in(&dir, &["check", "ok.yaml"]);
        out.assert_code(1);
        assert!(
            out.stdout.contains(says) || out.stderr.contains(says),
            "{price}: {out:?}"
        );
    }
    let scripted = "version: 1\nname: p\nmodels:\n  s:\n    kind: scripted\n    price: { input: 1, output: 1 }\n    scripts: [{ turns: [{ answer: hi }] }]\n";
    std::fs::write(dir.join("s.yaml"), scripted).unwrap_or_else(|e| panic!("{e}"));
    let out = support::toolrun_in(&dir, &["check", "s.yaml"]);
    out.assert_code(1);
    assert!(
        out.stdout.contains("price") || out.stderr.contains("price"),
        "{out:?}"
    );

    let schema = support::toolrun_in(&dir, &["schema"]).json();
    assert_eq!(
        schema["$defs"]["model_live"]["properties"]["price"]["$ref"],
        "#/$defs/price"
    );
    assert_eq!(
        schema["$defs"]["price"]["required"],
        serde_json::json!(["input", "output"])
    );
}

#[test]
fn an_http_call_shows_its_method_url_and_status_in_results_and_the_report() {
    let server =
        support::TestServer::start(|_| support::Response::json(200, serde_json::json!(42)));
    let dir = support::temp_dir("report-http");
    let spec = format!(
        r#"version: 1
name: quotes
secrets: [QUOTE_KEY]
tools:
  quote:
    description: A quote.
    kind: http
    input: {{ type: object }}
    request: {{ url: "{}/quote/{{{{ secrets.QUOTE_KEY }}}}" }}
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: quote, arguments: {{}} }}]
          - answer: "The quote is {{{{ last.result }}}}."
tests:
  - name: quote
    query: "Quote?"
    expect: {{ output_contains: "42" }}
"#,
        server.base_url()
    );
    std::fs::write(dir.join("spec.yaml"), spec).unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = support::toolrun();
    cmd.current_dir(&dir)
        .args([
            "test",
            "spec.yaml",
            "--record",
            "missing",
            "--results",
            "r.json",
        ])
        .env("QUOTE_KEY", "qk-secret-998877");
    support::run(&mut cmd).assert_success();
    let text = std::fs::read_to_string(dir.join("r.json")).unwrap_or_default();
    assert!(!text.contains("qk-secret"), "{text}");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let masked_url = format!("{}/quote/***", server.base_url());
    assert_eq!(
        doc["tests"][0]["attempts"][0]["tool_calls"][0]["http"],
        serde_json::json!({"method": "GET", "url": masked_url, "status": 200}),
        "{text}"
    );

    support::toolrun_in(&dir, &["report", "r.json", "-o", "r.html"]).assert_success();
    let Some(browser) = support::chromium() else {
        return;
    };
    let dom = support::browser::rendered_dom(
        &browser,
        &dir.join("r.html"),
        "#open=0/1/quotes%3A%3Aquote",
    );
    let traj = section(&dom, "id=\"trajectory-0-0-1\"", "</div></div></td>");
    support::assert_contains(traj, &[&format!("GET {masked_url} → 200")]);
}

/// Issue 23 §7: the charts are inline SVG drawn by toolrun (no script draws them, nothing is
/// fetched, the CSP is the same), and Chromium lays them out at 1280 px.
#[test]
fn the_report_draws_its_charts_inline_and_chromium_shows_them() {
    let dir = two_runs();
    support::toolrun_in(
        &dir,
        &["report", "before.json", "after.json", "-o", "report.html"],
    )
    .assert_success();
    let page = dir.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap_or_default();
    assert!(
        html.contains(
            "content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-"
        ),
        "the CSP changed"
    );
    assert!(html.contains("; img-src data:; base-uri 'none'; form-action 'none'\">"));
    for fetch in [
        "@font-face",
        "url(",
        "<link",
        "@import",
        "xlink:href",
        "<image",
    ] {
        assert!(!html.contains(fetch), "the page may fetch `{fetch}`");
    }
    assert_eq!(
        html.matches("<script").count(),
        2,
        "only the page's own scripts"
    );
    // In the file itself, before any script ran.
    for id in ["chart-pass-rate", "chart-cost", "chart-latency"] {
        assert!(html.contains(&format!("<svg id=\"{id}\"")), "{id} missing");
    }

    let Some(browser) = support::chromium() else {
        return;
    };
    let dom = support::browser::rendered_dom(&browser, &page, "");
    let rates = section(&dom, "id=\"chart-pass-rate\"", "</svg>");
    // 620 units of plot: scripted 1/2 attempts (50%), gpt 3/4 (75%), each with its interval.
    support::assert_contains(
        rates,
        &[
            "data-column=\"0\" x=\"220\" y=\"30\" width=\"310.0\"",
            "data-column=\"1\" x=\"220\" y=\"64\" width=\"465.0\"",
            "50% [9%–91%]",
            "75% [30%–95%]",
            "class=\"interval\"",
        ],
    );
    let cost = section(&dom, "id=\"chart-cost\"", "</svg>");
    // Only gpt has a price; the scripted column has no cost to plot.
    assert_eq!(cost.matches("class=\"point\"").count(), 1, "{cost}");
    assert!(cost.contains("gpt · 75% · $0.00"), "{cost}");
    let latency = section(&dom, "id=\"chart-latency\"", "</svg>");
    assert_eq!(latency.matches("class=\"latency\"").count(), 4, "{latency}");
    support::assert_contains(latency, &[">gain_on_aapl<", ">unknown_ticker<"]);
    // The hostile query never became markup inside the charts either.
    assert!(
        !dom.contains("<img"),
        "markup from the data reached the DOM"
    );

    // A screenshot at 1280 px: Chromium paints the page at that width.
    let shot = dir.join("shot.png");
    let profile = support::temp_dir("chromium-shot");
    let out = support::run(
        Command::new(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-dev-shm-usage",
                "--window-size=1280,2000",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("--screenshot={}", shot.display()))
            .arg(format!("file://{}", page.display())),
    );
    assert_eq!(out.code, 0, "chromium failed: {out:?}");
    let png = std::fs::read(&shot).unwrap_or_default();
    assert_eq!(&png.get(1..4), &Some(&b"PNG"[..]), "not a PNG");
    // IHDR: width and height, big-endian, at bytes 16..24.
    let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    assert_eq!(width, 1280);
    // A blank page compresses to almost nothing; tables, text and charts do not.
    assert!(
        png.len() > 40_000,
        "the screenshot looks empty ({} bytes)",
        png.len()
    );
}

/// `from` in `dir`, changed by `edit`, written as `to`.
fn edited(dir: &Path, from: &str, to: &str, edit: &dyn Fn(&mut serde_json::Value)) {
    let text = std::fs::read_to_string(dir.join(from)).unwrap_or_else(|e| panic!("{e}"));
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    edit(&mut doc);
    std::fs::write(dir.join(to), doc.to_string()).unwrap_or_else(|e| panic!("{e}"));
}

/// Issue 36 §8: `passes` past the attempts wrapped a counter and sized a table by it (34 GB,
/// exit 134) in `report` and `test --baseline`; a shard of 2^64-1 made `results merge` grow
/// without bound. Counts are checked where the file is read (exit 2, naming file and field), and
/// a merge's work is bounded by the files given.
#[test]
fn hostile_counts_and_partitions_are_refused_or_bounded() {
    let dir = two_runs();
    let timeout = std::time::Duration::from_secs(120);
    let within = |args: &[&str]| {
        let mut cmd = support::toolrun();
        cmd.current_dir(&dir).args(args);
        support::run_with_timeout(&mut cmd, None, timeout)
    };
    edited(&dir, "before.json", "wrapped.json", &|doc| {
        doc["tests"][0]["passes"] = 4_000_000_000u32.into();
    });
    for args in [
        &[
            "report",
            "after.json",
            "wrapped.json",
            "--format",
            "markdown",
        ][..],
        &["report", "wrapped.json", "after.json", "-o", "r.html"],
        &["test", "spec.yaml", "--baseline", "wrapped.json"],
    ] {
        let out = within(args);
        out.assert_code(2);
        assert!(
            out.stderr.contains("`wrapped.json` is a damaged results file")
                && out.stderr.contains("`tests[0].passes` (stocks::gain_on_aapl) is 4000000000 but the test has 1 attempt(s)"),
            "{args:?}: {out:?}"
        );
    }
    edited(&dir, "before.json", "totals.json", &|doc| {
        doc["totals"]["attempts_passed"] = 7.into();
    });
    let out = within(&["report", "totals.json", "--format", "markdown"]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("`totals.attempts_passed` is 7"),
        "{out:?}"
    );

    for (file, partition) in [("zero.json", "0/3"), ("words.json", "one of three")] {
        edited(&dir, "before.json", file, &|doc| {
            doc["settings"]["partition"] = partition.into();
        });
        let out = within(&["results", "merge", file, "before.json", "-o", "m.json"]);
        out.assert_code(2);
        assert!(
            out.stderr
                .contains(&format!("`{file}` is a damaged results file"))
                && out.stderr.contains("`settings.partition`"),
            "{out:?}"
        );
    }

    edited(&dir, "before.json", "huge.json", &|doc| {
        doc["settings"]["partition"] = "1/18446744073709551615".into();
    });
    let out = within(&["results", "merge", "huge.json", "-o", "m.json"]);
    out.assert_code(1);
    assert!(
        out.stderr.contains("error: shard 2/18446744073709551615 is missing")
            && out.stderr.contains(
                "error: 18446744073709551594 more shard(s) of 18446744073709551615 are missing (1 file(s) were given)"
            ),
        "{out:?}"
    );
    assert!(out.stderr.lines().count() < 30, "{out:?}");
    let out = within(&["report", "huge.json", "--merge", "--format", "markdown"]);
    out.assert_code(0);
    assert!(out.stdout.contains("more shard(s) of"), "{out:?}");
}

/// Issue 36 §19: the page is written as it is made (to the file or to stdout), its data block a
/// part at a time; it is the same page either way, and its data block is one JSON document
/// holding every attempt.
#[test]
fn the_page_written_as_it_is_made_is_whole_on_stdout_and_in_a_file() {
    let dir = two_runs();
    support::toolrun_in(
        &dir,
        &["report", "before.json", "after.json", "-o", "r.html"],
    )
    .assert_success();
    let page = std::fs::read_to_string(dir.join("r.html")).unwrap_or_default();
    let out = support::toolrun_in(&dir, &["report", "before.json", "after.json"]);
    out.assert_success();
    assert_eq!(out.stdout, page);
    let start = page.find("id=\"toolrun-data\">").unwrap_or(0) + 18;
    let end = page[start..].find("</script>").unwrap_or(0) + start;
    let data: serde_json::Value =
        serde_json::from_str(&page[start..end]).unwrap_or_else(|e| panic!("{e}"));
    let attempts: usize = data["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["cells"].as_array().into_iter().flatten())
        .map(|c| c["attempts"].as_array().map_or(0, Vec::len))
        .sum();
    // before.json: 2 tests once; after.json: 2 tests twice.
    assert_eq!(attempts, 6, "{data:#}");
}

/// Issue 36 §19: `report` held every results file at once (100 files of 500 MB in all peaked
/// at 4.9 GB). It reads them in two passes, one file at a time, so its peak memory follows the
/// largest file, not the sum: eight files of 15 MB stay well below their 120 MB together (all
/// at once peaked near 2.4 times the sum).
#[cfg(target_os = "linux")]
#[test]
fn report_memory_follows_the_largest_file_not_the_sum() {
    let dir = two_runs();
    // 2 attempts × 7.5 MB of answer a file.
    let big = "0123456789abcdef".repeat(7_500_000 / 16);
    let mut names = Vec::new();
    let mut sum = 0;
    for n in 0..8 {
        let name = format!("big{n}.json");
        edited(&dir, "after.json", &name, &|doc| {
            for test in doc["tests"].as_array_mut().into_iter().flatten() {
                for a in test["attempts"]
                    .as_array_mut()
                    .into_iter()
                    .flatten()
                    .take(1)
                {
                    a["answer"] = serde_json::Value::String(format!("{n}{big}"));
                }
            }
        });
        sum += std::fs::metadata(dir.join(&name)).map_or(0, |m| m.len());
        names.push(name);
    }
    assert!(sum > 100_000_000, "the inputs are {sum} bytes");
    for format in ["html", "markdown"] {
        let mut cmd = support::toolrun();
        cmd.current_dir(&dir)
            .args(["report", "--format", format, "-o", format])
            .args(&names)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // Reaped by `wait4` below, which also gives its peak memory.
        #[allow(clippy::zombie_processes)]
        let child = cmd.spawn().unwrap_or_else(|e| panic!("{e}"));
        // This child's own peak (`ru_maxrss`, KiB), however short its life.
        let mut status = 0;
        // SAFETY: an all-zero `rusage` is valid; `wait4` writes it and `status` for our child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
        assert_eq!(pid, child.id() as i32, "wait4 failed");
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{format}: status {status}"
        );
        let peak = usage.ru_maxrss as u64 * 1024;
        eprintln!("{format}: peak {peak} bytes for {sum} bytes of results");
        assert!(
            peak < sum,
            "{format}: peak RSS {peak} bytes, inputs {sum} bytes in all"
        );
    }
    // The attempts were spooled next to the page, in a file that left no name behind.
    let left: Vec<String> = std::fs::read_dir(&*dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".spool") || n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let page = std::fs::read_to_string(dir.join("html")).unwrap_or_default();
    for n in 0..8 {
        assert!(
            page.contains(&format!("{n}0123456789abcdef")),
            "big{n}.json's answer"
        );
    }
}

/// The stocks conversations (`data/conversations/stocks.yaml`, declaring the `CONVO_TOKEN`
/// secret, with each `(from, to)` of `changes` made) tested in `dir` into `r.json`, which fails;
/// then `price_then_gain`'s results in `r.json` changed by `edit`.
fn conversation_results(
    dir: &Path,
    changes: &[(&str, &str)],
    edit: &dyn Fn(&mut serde_json::Value),
) {
    let mut spec = include_str!("data/conversations/stocks.yaml")
        .replace("name: convo\n", "name: convo\nsecrets: [CONVO_TOKEN]\n");
    for (from, to) in changes {
        spec = spec.replace(from, to);
    }
    std::fs::write(dir.join("s.yaml"), spec).unwrap_or_else(|e| panic!("{e}"));
    support::toolrun_in(dir, &["test", "s.yaml", "--results", "r.json"]).assert_code(1);
    edited(dir, "r.json", "r.json", &|doc| {
        let test = doc["tests"]
            .as_array_mut()
            .and_then(|t| t.iter_mut().find(|t| t["name"] == "price_then_gain"))
            .unwrap_or_else(|| panic!("no price_then_gain in r.json"));
        edit(test);
    });
}

/// A conversation's attempt shows each turn (query, status, tools run, answer or error) in the
/// page, escaped and masked like the rest of it, and Chromium renders the turns in order.
#[test]
fn a_conversation_shows_each_turn_escaped_and_masked() {
    let dir = support::temp_dir("report-turns");
    let expect = [(
        "expect: { output_contains: \"turn 3\" }",
        "expect: { output_contains: \"turn 3\", max_tokens: 100 }",
    )];
    // As a foreign writer might leave it: a secret and markup in a turn's answer.
    conversation_results(&dir, &expect, &|test| {
        assert_eq!(
            test["attempts"][0]["turns"].as_array().map(Vec::len),
            Some(3)
        );
        test["attempts"][0]["turns"][2]["answer"] =
            serde_json::json!("That was turn 3. tok-convo-987654 <img src=x onerror=alert(1)>");
    });
    let out = support::run(
        support::toolrun()
            .current_dir(&dir)
            .args(["report", "r.json", "-o", "r.html"])
            .env("CONVO_TOKEN", "tok-convo-987654"),
    );
    out.assert_success();
    let page = dir.join("r.html");
    let html = std::fs::read_to_string(&page).unwrap_or_default();
    assert!(!html.contains("tok-convo"), "the secret reached the page");
    assert!(!html.contains("<img"), "the answer became markup");
    // A budget reads as in every other report, worded by toolrun, not by the page's script.
    assert!(
        html.contains("\"text\":\"0 / 100 tokens (0%)\""),
        "the turn's budget has no text"
    );

    let Some(browser) = support::chromium() else {
        return;
    };
    let dom =
        support::browser::rendered_dom(&browser, &page, "#open=0/1/convo%3A%3Aprice_then_gain");
    assert!(dom.contains("data-rendered=\"true\""), "{dom}");
    assert!(
        !dom.contains("<img"),
        "markup from the data reached the DOM"
    );
    let row = dom.find("price_then_gain").unwrap_or(0);
    let traj = section(&dom[row..], "class=\"trajectory\"", "</div></div></td>");
    let mut at = 0;
    for s in [
        "turn 1 · ok (answer) · 2 model calls",
        "What is AAPL at?",
        "tools run: get_stock_price",
        "AAPL is 178.15.",
        "turn 2 · ok (answer) · 2 model calls",
        "And my gain on 100 bought at 150?",
        "tools run: calculate_expression",
        "Your gain is 2815.",
        "turn 3 · ok (answer) · 1 model call · expect passed",
        "no tools run",
        "That was turn 3. *** &lt;img src=x onerror=alert(1)&gt;",
        // The turn's own budget and how close it came.
        "max_tokens: 0 / 100 tokens (0%)",
    ] {
        match traj[at..].find(s) {
            Some(i) => at += i + 1,
            None => panic!("`{s}` missing (or out of order) in the turns:\n{traj}"),
        }
    }
}

/// The markdown summary shows each conversation's turns (query, whether its `expect` held, the
/// failing turn named with what failed, the answer) and each budget with how close the test
/// came, masked and escaped like the rest of it: a secret in a turn's query is `***`, and a
/// terminal escape or markup in an answer is visible text. Snapshot:
/// `tests/snapshots/report_conversation.md` (the sections after the tables, which hold no times).
#[test]
fn the_markdown_summary_shows_turns_and_budgets_masked_and_escaped() {
    let dir = support::temp_dir("report-turns-md");
    let expect = [
        (
            "  - name: price_then_gain\n",
            "  - name: price_then_gain\n    expect: { max_tokens: 1000 }\n",
        ),
        (
            "expect: { output_contains: \"turn 3\" }",
            "expect: { output_contains: \"turn 3\", max_tokens: 4000 }",
        ),
    ];
    // As a foreign writer might leave it: a secret in a turn's query, an escape and markup in an
    // answer.
    conversation_results(&dir, &expect, &|test| {
        let turns = &mut test["attempts"][0]["turns"];
        turns[1]["query"] = serde_json::json!("My token is tok-convo-987654; and my gain?");
        turns[2]["answer"] =
            serde_json::json!("That was turn 3.\u{1b}[31m red | <img src=x onerror=alert(1)>");
    });
    let out = support::run(
        support::toolrun()
            .current_dir(&dir)
            .args(["report", "r.json", "--format", "markdown"])
            .env("CONVO_TOKEN", "tok-convo-987654"),
    );
    out.assert_success();
    let md = &out.stdout;
    assert!(!md.contains("tok-convo"), "the secret reached the summary");
    assert!(
        !md.contains('\u{1b}'),
        "a terminal escape reached the summary"
    );
    assert!(!md.contains("<img"), "the answer became markup");
    let from = md
        .find("#### Budgets")
        .unwrap_or_else(|| panic!("no budgets:\n{md}"));
    support::assert_snapshot(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/report_conversation.md"),
        &md[from..],
    );
}
