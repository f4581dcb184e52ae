//! `toolrun test` as spans, made from its results document (live, or a results file given to
//! `toolrun export otel`): `toolrun test` → `test {name}` → `test_attempt {name}` (with a
//! `gen_ai.evaluation.result` event: the verdict) → the attempt's `invoke_agent` run.

use super::genai::{parse_time, Mapping};
use super::span::Kind;
use super::span::{now_ns, Event, Parent, Span, Value};
use serde_json::{json, Value as Json};

/// The spans of a `toolrun test` made before its attempts run, so that each attempt can be
/// sent as it finishes, under its test's span; those spans follow when the command ends.
pub(crate) struct Tree {
    pub(crate) root: Span,
    pub(crate) tests: Vec<Span>,
}

impl Tree {
    pub(crate) fn new(parent: Parent, tests: usize) -> Tree {
        let root = Span::new(parent, "toolrun test", Kind::Internal);
        let tests = (0..tests)
            .map(|_| Span::new(root.as_parent(), "test", Kind::Internal))
            .collect();
        Tree { root, tests }
    }

    /// Where the attempts of the `case`-th test hang.
    pub(crate) fn test_parent(&self, case: usize) -> Option<Parent> {
        self.tests.get(case).map(Span::as_parent)
    }
}

/// A whole results document (a results file given to `export otel`): every span.
pub(crate) fn test_spans(mapping: &Mapping, results: &Json, parent: Parent) -> Vec<Span> {
    let tests = results["tests"].as_array().map_or(0, Vec::len);
    tree_spans(mapping, results, Tree::new(parent, tests), true)
}

/// The command's and the tests' spans of `results`, in `tree`; the attempts' too unless they
/// were sent as they finished.
pub(crate) fn tree_spans(
    mapping: &Mapping,
    results: &Json,
    tree: Tree,
    with_attempts: bool,
) -> Vec<Span> {
    let Tree { mut root, tests } = tree;
    let mut tests = tests.into_iter();
    let mut spans = Vec::new();
    let mut counts = [0i64; 3];
    for test in results["tests"].as_array().into_iter().flatten() {
        let outcome = test["outcome"].as_str().unwrap_or("");
        if let Some(i) = ["passed", "failed", "skipped"]
            .iter()
            .position(|o| *o == outcome)
        {
            counts[i] += 1;
        }
        let span = tests
            .next()
            .unwrap_or_else(|| Span::new(root.as_parent(), "test", Kind::Internal));
        spans.extend(one_test(mapping, test, span, with_attempts));
    }
    let first = spans.iter().map(|s| s.start_ns).min();
    let last = spans.iter().map(|s| s.end_ns).max();
    root.start_ns = parse_time(results["started_at"].as_str())
        .or(first)
        .unwrap_or_else(now_ns);
    root.end_ns = last.unwrap_or(root.start_ns).max(root.start_ns);
    for (key, n) in ["passed", "failed", "skipped"].iter().zip(counts) {
        root.set(&format!("toolrun.tests.{key}"), n);
    }
    if counts[1] > 0 {
        root.fail("test_failed", format!("{} test(s) failed", counts[1]));
    }
    spans.insert(0, root);
    spans
}

fn one_test(mapping: &Mapping, test: &Json, mut span: Span, with_attempts: bool) -> Vec<Span> {
    let name = mapping.redactor.str(test["name"].as_str().unwrap_or(""));
    span.name = format!("test {name}");
    span.set("toolrun.test.name", name.clone())
        .set(
            "toolrun.test.spec",
            mapping.redactor.str(test["spec"].as_str().unwrap_or("")),
        )
        .set(
            "toolrun.test.outcome",
            test["outcome"].as_str().unwrap_or("").to_string(),
        );
    if let Some(p) = test["passes"].as_i64() {
        span.set("toolrun.test.passes", p);
    }
    if test["outcome"] == "failed" {
        let reason = test["reason"].as_str().unwrap_or("the test failed");
        span.fail("test_failed", mapping.redactor.str(reason));
    }
    let mut spans = Vec::new();
    let mut cursor = None::<u64>;
    let mut times = Vec::new();
    for attempt in test["attempts"].as_array().into_iter().flatten() {
        if with_attempts {
            let mut run = attempt_spans(mapping, test, attempt, span.as_parent(), cursor);
            cursor = run.first().map(|s| s.end_ns);
            times.extend(run.first().map(|s| (s.start_ns, s.end_ns)));
            spans.append(&mut run);
        } else if let Some(start) = parse_time(attempt["started_at"].as_str()) {
            let duration = attempt["duration_ms"].as_f64().unwrap_or(0.0).max(0.0);
            times.push((start, start + (duration * 1e6) as u64));
        }
    }
    // Attempts run in parallel or one after another: the test spans all of them.
    span.start_ns = times.iter().map(|t| t.0).min().unwrap_or_else(now_ns);
    span.end_ns = times.iter().map(|t| t.1).max().unwrap_or(span.start_ns);
    spans.insert(0, span);
    spans
}

/// One attempt's span (its verdict as an event) over its run.
pub(crate) fn attempt_spans(
    mapping: &Mapping,
    test: &Json,
    attempt: &Json,
    parent: Parent,
    after: Option<u64>,
) -> Vec<Span> {
    let name = mapping.redactor.str(test["name"].as_str().unwrap_or(""));
    let mut span = Span::new(parent, format!("test_attempt {name}"), Kind::Internal);
    let duration = attempt["duration_ms"].as_f64().unwrap_or(0.0);
    let start = parse_time(attempt["started_at"].as_str())
        .or(after)
        .unwrap_or_else(|| now_ns().saturating_sub((duration * 1e6) as u64));
    span.timed(start, duration);
    let passed = attempt["outcome"] == "passed";
    span.set(
        "toolrun.test.attempt",
        attempt["attempt"].as_i64().unwrap_or(1),
    )
    .set(
        "toolrun.test.source",
        attempt["source"].as_str().unwrap_or("").to_string(),
    );
    let explanation: Vec<String> = attempt["failures"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let message = f["message"].as_str().unwrap_or("");
            let key = f["assertion"].as_str();
            match (key, mapping.content) {
                (Some(key), true) => format!("{key}: {message}"),
                (None, true) => message.to_string(),
                // A failure's words quote the answer, a request's URL or body: content, so
                // without capture only which check failed (its `expect:` key, or its kind).
                (Some(key), false) => key.to_string(),
                (None, false) => f["kind"].as_str().unwrap_or("failed").to_string(),
            }
        })
        .collect();
    let mut attributes: Vec<(String, Value)> = vec![
        ("gen_ai.evaluation.name".into(), name.into()),
        (
            "gen_ai.evaluation.score.value".into(),
            Value::Double(if passed { 1.0 } else { 0.0 }),
        ),
        (
            "gen_ai.evaluation.score.label".into(),
            (if passed { "passed" } else { "failed" }).into(),
        ),
    ];
    if !explanation.is_empty() {
        let text = mapping.redactor.str(&explanation.join("; "));
        attributes.push(("gen_ai.evaluation.explanation".into(), text.clone().into()));
        span.fail("test_failed", text);
    }
    span.events.push(Event {
        name: "gen_ai.evaluation.result".into(),
        time_ns: span.end_ns,
        attributes,
    });
    let mut spans = vec![span];
    if attempt.get("status").is_some_and(|s| !s.is_null()) {
        let trace = as_trace(test, attempt);
        spans.extend(mapping.run_spans(&trace, spans[0].as_parent()));
    }
    spans
}

/// An attempt's record in the trace's shape, for the run mapping.
fn as_trace(test: &Json, attempt: &Json) -> Json {
    let calls = attempt["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ran = |c: &&Json| !c["duration_ms"].is_null();
    let tool_results: Vec<Json> = calls.iter().filter(ran).cloned().collect();
    let tool_errors: Vec<Json> = calls
        .iter()
        .filter(|c| !ran(c) && c["status"] == "error")
        .map(|c| json!({ "id": c["id"], "name": c["name"], "kind": c["error"]["kind"], "message": c["error"]["message"], "arguments": c["arguments"] }))
        .collect();
    let steps = attempt["steps"].as_u64().unwrap_or(0);
    let messages: Vec<Json> = (1..=steps)
        .map(|step| {
            let ids: Vec<Json> = calls
                .iter()
                .filter(|c| c["step"].as_u64() == Some(step))
                .map(|c| json!({ "id": c["id"], "name": c["name"], "arguments": c["arguments"] }))
                .collect();
            json!({ "role": "assistant", "tool_calls": ids })
        })
        .collect();
    json!({
        "spec": { "name": test["spec"] },
        "query": test["query"],
        "model": attempt["model"],
        "status": attempt["status"],
        "stop_reason": attempt["stop_reason"],
        "error": attempt["error"],
        "final_output": attempt["answer"],
        "steps": steps,
        "tool_call_count": tool_results.len(),
        "tool_results": tool_results,
        "tool_errors": tool_errors,
        "messages": messages,
        "usage": attempt["usage"],
        "model_calls": attempt["model_calls"],
        "started_at": attempt["started_at"],
        "duration_ms": attempt["duration_ms"],
    })
}
