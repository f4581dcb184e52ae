//! `toolrun diff A B`: two traces, fixtures or results files compared where people look first —
//! the first step where the runs went different ways, the tool calls and their arguments, the
//! status, stop reason and answer — then every other difference by JSON Pointer.
//!
//! Durations, timestamps and provider-made call ids differ between any two runs and are not
//! differences: keys named `duration_ms`, `*_at`, `now_unix_ms`, `id` and `tool_call_id` are left
//! out, and so are a fixture's raw `exchanges` (their bodies carry the same ids; the trace
//! holds what they decided).

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// At most this many "other" differences are listed, so a large change stays readable.
const MAX_OTHER: usize = 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    Trace,
    Fixture,
    Results,
}

/// One value that differs, by JSON Pointer; `None` where one side lacks it.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Delta {
    pub(crate) pointer: String,
    pub(crate) a: Option<Value>,
    pub(crate) b: Option<Value>,
}

/// Where two runs first went different ways.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Divergence {
    /// 1-based model call.
    pub(crate) step: usize,
    /// The conversation turn that model call belongs to (traces of a `turns:` test).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) turn: Option<usize>,
    pub(crate) a: String,
    pub(crate) b: String,
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct CallDiff {
    /// 1-based, in the order the model proposed them.
    pub(crate) call: usize,
    /// `changed`, `only_a` or `only_b`.
    pub(crate) change: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) a: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) b: Option<Value>,
    /// Argument differences, by pointer under `arguments`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) arguments: Vec<Delta>,
}

/// One user turn of a conversation (`turns:`) that differs: its query, status, stop reason,
/// answer, error or the tools it ran, by field name.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct TurnDiff {
    /// 1-based.
    pub(crate) turn: usize,
    pub(crate) changes: Vec<Delta>,
}

/// Two runs (traces, or one attempt of a test in two results files).
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct RunDiff {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) first_divergence: Option<Divergence>,
    /// A conversation's turns that differ, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) turns: Vec<TurnDiff>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tool_calls: Vec<CallDiff>,
    /// `status`, `stop_reason`, the answer and other fields that changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) changes: Vec<Delta>,
}

impl RunDiff {
    fn is_empty(&self) -> bool {
        self.first_divergence.is_none()
            && self.turns.is_empty()
            && self.tool_calls.is_empty()
            && self.changes.is_empty()
    }
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct TestDiff {
    pub(crate) test: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) changes: Vec<Delta>,
    /// Attempt number and how it differs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) attempts: Vec<(u64, RunDiff)>,
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Diff {
    pub(crate) a: String,
    pub(crate) b: String,
    pub(crate) kind: Kind,
    pub(crate) same: bool,
    /// Traces and fixtures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) run: Option<RunDiff>,
    /// Results files: tests that differ, and those in one file only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tests: Vec<TestDiff>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) only_a: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) only_b: Vec<String>,
    /// Everything else that differs (a fixture's query or model, results totals, ...).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) other: Vec<Delta>,
    /// How many other differences were left out of `other`.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) other_left_out: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn volatile(key: &str) -> bool {
    key == "duration_ms"
        || key.ends_with("_at")
        || key == "now_unix_ms"
        || key == "id"
        || key == "tool_call_id"
}

/// What a JSON document is, or why it is none of the three.
pub(crate) fn kind_of(v: &Value) -> Result<Kind, String> {
    if v.get("kind").and_then(Value::as_str) == Some(crate::results::KIND) {
        Ok(Kind::Results)
    } else if v.get("exchanges").is_some() && v.get("trace").is_some() {
        Ok(Kind::Fixture)
    } else if v.get("stop_reason").is_some() && v.get("messages").is_some() {
        Ok(Kind::Trace)
    } else {
        Err("it is not a toolrun trace, fixture or results file".into())
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Every difference between `a` and `b` below `pointer`, volatile keys aside.
pub(crate) fn deltas(a: Option<&Value>, b: Option<&Value>, pointer: &str, out: &mut Vec<Delta>) {
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys.into_iter().filter(|k| !volatile(k)) {
                deltas(x.get(k), y.get(k), &format!("{pointer}/{}", escape(k)), out);
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            for i in 0..x.len().max(y.len()) {
                deltas(x.get(i), y.get(i), &format!("{pointer}/{i}"), out);
            }
        }
        (x, y) if x != y => out.push(Delta {
            pointer: pointer.to_string(),
            a: x.cloned(),
            b: y.cloned(),
        }),
        _ => {}
    }
}

/// One model call: the calls it proposed, or its text.
#[derive(Clone, Debug, PartialEq)]
struct Step {
    calls: Vec<(String, Value)>,
    text: Option<String>,
}

impl Step {
    fn describe(&self) -> String {
        if self.calls.is_empty() {
            match &self.text {
                Some(t) => format!("answer {t:?}"),
                None => "no answer".into(),
            }
        } else {
            let calls: Vec<String> = self
                .calls
                .iter()
                .map(|(n, a)| format!("{n}({a})"))
                .collect();
            format!("call {}", calls.join(", "))
        }
    }
}

/// A trace's model calls, from its assistant messages.
fn trace_steps(trace: &Value) -> Vec<Step> {
    let messages = trace["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| Step {
            calls: m["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or("").to_string(),
                        c["arguments"].clone(),
                    )
                })
                .collect(),
            text: m["content"].as_str().map(str::to_string),
        })
        .collect()
}

/// A results attempt's model calls: its tool calls grouped by step, then the answer.
fn attempt_steps(attempt: &Value) -> Vec<Step> {
    let mut by_step: BTreeMap<u64, Vec<(String, Value)>> = BTreeMap::new();
    for c in attempt["tool_calls"].as_array().into_iter().flatten() {
        by_step
            .entry(c["step"].as_u64().unwrap_or(0))
            .or_default()
            .push((
                c["name"].as_str().unwrap_or("").to_string(),
                c["arguments"].clone(),
            ));
    }
    let mut steps: Vec<Step> = by_step
        .into_values()
        .map(|calls| Step { calls, text: None })
        .collect();
    if let Some(answer) = attempt["answer"].as_str() {
        steps.push(Step {
            calls: Vec::new(),
            text: Some(answer.to_string()),
        });
    }
    steps
}

fn all_calls(steps: &[Step]) -> Vec<&(String, Value)> {
    steps.iter().flat_map(|s| s.calls.iter()).collect()
}

/// Two runs' steps and the named fields, compared.
fn run_diff(a: &Value, b: &Value, steps: (Vec<Step>, Vec<Step>), fields: &[&str]) -> RunDiff {
    let (sa, sb) = steps;
    let mut d = RunDiff::default();
    if let Some(i) = (0..sa.len().max(sb.len())).find(|&i| sa.get(i) != sb.get(i)) {
        let say = |s: Option<&Step>| s.map_or_else(|| "(no step)".to_string(), Step::describe);
        d.first_divergence = Some(Divergence {
            step: i + 1,
            turn: None,
            a: say(sa.get(i)),
            b: say(sb.get(i)),
        });
    }
    let (ca, cb) = (all_calls(&sa), all_calls(&sb));
    for i in 0..ca.len().max(cb.len()) {
        let (x, y) = (ca.get(i), cb.get(i));
        let call = |c: Option<&&(String, Value)>| {
            c.map(|(n, args)| serde_json::json!({"name": n, "arguments": args}))
        };
        let change = match (x, y) {
            (Some(x), Some(y)) if x == y => continue,
            (Some(_), Some(_)) => "changed",
            (Some(_), None) => "only_a",
            _ => "only_b",
        };
        let mut arguments = Vec::new();
        if let (Some(x), Some(y)) = (x, y) {
            if x.0 == y.0 {
                deltas(Some(&x.1), Some(&y.1), "", &mut arguments);
            }
        }
        d.tool_calls.push(CallDiff {
            call: i + 1,
            change,
            a: call(x),
            b: call(y),
            arguments,
        });
    }
    for f in fields {
        deltas(a.get(*f), b.get(*f), &format!("/{f}"), &mut d.changes);
    }
    d.turns = turn_diffs(a, b);
    d
}

/// The turn of a trace's model call `step` (1-based): each turn counts its model calls.
fn turn_of_step(trace: &Value, step: usize) -> Option<usize> {
    let mut last = 0;
    for (i, t) in trace["turns"].as_array()?.iter().enumerate() {
        last += t["steps"].as_u64()? as usize;
        if step <= last {
            return Some(i + 1);
        }
    }
    None
}

/// The fields of a turn the diff names it by: a trace's `final_output` is a results attempt's
/// `answer`; `tools` is the names of the tools the turn ran, in order.
const TURN_FIELDS: &[&str] = &[
    "query",
    "status",
    "stop_reason",
    "final_output",
    "answer",
    "error",
];

/// The turns (of a trace, or of a results attempt) that differ, each with what differs.
fn turn_diffs(a: &Value, b: &Value) -> Vec<TurnDiff> {
    let turns = |v: &Value| v["turns"].as_array().cloned().unwrap_or_default();
    let (ta, tb) = (turns(a), turns(b));
    let tools = |t: Option<&Value>| -> Option<Value> {
        let t = t?;
        let names: Vec<Value> = match t["tool_calls"].as_array() {
            Some(names) => names.clone(),
            None => t["tool_results"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| r["name"].clone())
                .collect(),
        };
        Some(Value::Array(names))
    };
    let mut out = Vec::new();
    for i in 0..ta.len().max(tb.len()) {
        let (x, y) = (ta.get(i), tb.get(i));
        let mut changes = Vec::new();
        if x.is_none() || y.is_none() {
            // A turn one run never reached: named by its query.
            let query = |t: Option<&Value>| t.map(|t| t["query"].clone());
            changes.push(Delta {
                pointer: String::new(),
                a: query(x),
                b: query(y),
            });
        } else {
            for f in TURN_FIELDS {
                let (p, q) = (x.and_then(|t| t.get(*f)), y.and_then(|t| t.get(*f)));
                deltas(p, q, f, &mut changes);
            }
            let (p, q) = (tools(x), tools(y));
            if p != q {
                changes.push(Delta {
                    pointer: "tools".into(),
                    a: p,
                    b: q,
                });
            }
        }
        if !changes.is_empty() {
            out.push(TurnDiff {
                turn: i + 1,
                changes,
            });
        }
    }
    out
}

const TRACE_FIELDS: &[&str] = &["status", "stop_reason", "final_output", "error"];
const ATTEMPT_FIELDS: &[&str] = &["outcome", "status", "stop_reason", "answer", "error"];

/// Compares two documents of the same kind (a fixture and a trace compare as traces).
pub(crate) fn diff(a_name: &str, a: &Value, b_name: &str, b: &Value) -> Result<Diff, String> {
    let (ka, kb) = (kind_of(a)?, kind_of(b)?);
    let mut d = Diff {
        a: a_name.to_string(),
        b: b_name.to_string(),
        kind: ka,
        same: true,
        run: None,
        tests: Vec::new(),
        only_a: Vec::new(),
        only_b: Vec::new(),
        other: Vec::new(),
        other_left_out: 0,
    };
    let mut other = Vec::new();
    match (ka, kb) {
        (Kind::Results, Kind::Results) => results_diff(a, b, &mut d, &mut other),
        (Kind::Results, _) | (_, Kind::Results) => {
            return Err("a results file can only be compared with another results file".into())
        }
        _ => {
            let trace = |v: &Value, k: Kind| {
                if k == Kind::Fixture {
                    v["trace"].clone()
                } else {
                    v.clone()
                }
            };
            let (ta, tb) = (trace(a, ka), trace(b, kb));
            let mut run = run_diff(&ta, &tb, (trace_steps(&ta), trace_steps(&tb)), TRACE_FIELDS);
            if let Some(div) = &mut run.first_divergence {
                div.turn = turn_of_step(&ta, div.step);
            }
            let mut all = Vec::new();
            deltas(Some(&ta), Some(&tb), "", &mut all);
            other.extend(all.into_iter().filter(|x| !summarised(&x.pointer)));
            if ka == Kind::Fixture && kb == Kind::Fixture {
                for key in ["query", "model", "spec", "approvals", "format_version"] {
                    deltas(a.get(key), b.get(key), &format!("/{key}"), &mut other);
                }
            }
            d.same &= run.is_empty();
            d.run = Some(run);
        }
    }
    d.same &= other.is_empty() && d.tests.is_empty() && d.only_a.is_empty() && d.only_b.is_empty();
    d.other_left_out = other.len().saturating_sub(MAX_OTHER);
    other.truncate(MAX_OTHER);
    d.other = other;
    Ok(d)
}

/// Parts of a trace the run diff already shows: the assistant's steps (from `messages`), each
/// call's name and arguments, status, stop reason, answer and error.
fn summarised(pointer: &str) -> bool {
    if pointer.starts_with("/messages") || TRACE_FIELDS.iter().any(|f| pointer == format!("/{f}")) {
        return true;
    }
    let mut parts = pointer.split('/').skip(1);
    let (first, second, third) = (parts.next(), parts.next(), parts.next());
    if first == Some("turns") && second.is_some() {
        // The turn diff shows these, named by turn.
        return third.is_none_or(|f| TURN_FIELDS.contains(&f))
            || (third == Some("tool_results") && parts.nth(1) == Some("name"));
    }
    first == Some("tool_results") && second.is_some() && matches!(third, Some("name" | "arguments"))
}

fn test_key(t: &Value) -> String {
    let mut key = format!(
        "{}::{}",
        t["spec"].as_str().unwrap_or(""),
        t["name"].as_str().unwrap_or("")
    );
    if let Some(m) = t["model"].as_str() {
        key.push_str(&format!(" [{m}]"));
    }
    key
}

fn results_diff(a: &Value, b: &Value, d: &mut Diff, other: &mut Vec<Delta>) {
    let tests = |v: &Value| -> Vec<(String, Value)> {
        v["tests"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| (test_key(t), t.clone()))
            .collect()
    };
    let (ta, tb) = (tests(a), tests(b));
    let index_b: BTreeMap<&str, &Value> = tb.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let index_a: BTreeMap<&str, &Value> = ta.iter().map(|(k, v)| (k.as_str(), v)).collect();
    d.only_a = ta
        .iter()
        .filter(|(k, _)| !index_b.contains_key(k.as_str()))
        .map(|(k, _)| k.clone())
        .collect();
    d.only_b = tb
        .iter()
        .filter(|(k, _)| !index_a.contains_key(k.as_str()))
        .map(|(k, _)| k.clone())
        .collect();
    for (key, x) in &ta {
        let Some(y) = index_b.get(key.as_str()) else {
            continue;
        };
        let mut changes = Vec::new();
        for f in ["outcome", "passes", "reason", "fixture", "query"] {
            deltas(x.get(f), y.get(f), &format!("/{f}"), &mut changes);
        }
        let attempts = |v: &Value| v["attempts"].as_array().cloned().unwrap_or_default();
        let (aa, ab) = (attempts(x), attempts(y));
        let mut runs = Vec::new();
        for i in 0..aa.len().max(ab.len()) {
            let null = Value::Null;
            let (p, q) = (aa.get(i).unwrap_or(&null), ab.get(i).unwrap_or(&null));
            let run = run_diff(p, q, (attempt_steps(p), attempt_steps(q)), ATTEMPT_FIELDS);
            if !run.is_empty() {
                runs.push((i as u64 + 1, run));
            }
        }
        if !changes.is_empty() || !runs.is_empty() {
            d.tests.push(TestDiff {
                test: key.clone(),
                changes,
                attempts: runs,
            });
        }
    }
    for key in ["settings", "specs", "models"] {
        deltas(a.get(key), b.get(key), &format!("/{key}"), other);
    }
}
