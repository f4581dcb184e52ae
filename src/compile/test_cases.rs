//! `tests:` → test cases with resolved names and compiled expectations.

use super::scripts::compile_regex;
use super::test_names::{First, Seen};
use super::Ctx;
use crate::codes::Code;
use crate::diag::{did_you_mean, Diagnostic};
use crate::registry::{Expect, ModelDef, TestCase};
use crate::specfile::keys;
use crate::specfile::read::{expected, seq, Obj, Spanned};
use crate::specfile::yaml::{Node, Value};
use crate::vocab::{ErrorKind, Status, StopReason};

pub(super) fn compile_tests(
    node: &Node,
    spec: &str,
    (models, default_model): (&[ModelDef], Option<usize>),
    has_fixtures_dir: bool,
    ctx: &mut Ctx,
) -> Vec<TestCase> {
    let mut out = Vec::new();
    let mut names = Names {
        spec,
        models,
        default_model,
        has_fixtures_dir,
        seen: Seen::default(),
        fixtures: FixtureOwners::new(),
    };
    for (group, item) in seq(node, "`tests`", &mut ctx.d)
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        let from = Obj::peek(item, keys::TEST).and_then(|o| o.get("from"));
        match from {
            Some(from) => {
                super::test_data::expand(item, from, group as u32, &mut names, &mut out, ctx)
            }
            None => out.extend(compile_test(item, &mut names, None, ctx)),
        }
    }
    out
}

/// What the tests compiled so far claim: names, fixture paths, fixture file names.
struct Names<'m> {
    /// The spec's name: `--sample` and `--partition` draw by `spec::test`.
    spec: &'m str,
    models: &'m [ModelDef],
    default_model: Option<usize>,
    has_fixtures_dir: bool,
    /// Where each name was first given (by hash: a spec with 10,000 tests must not compare
    /// every name with every other, nor a 100,000-row data file keep every name).
    seen: Seen,
    /// Resolved `fixture:` paths: two tests recording into one file would each pass while
    /// recording, and the last writer would decide what both replay.
    fixtures: FixtureOwners,
}

impl super::test_data::Compiler for Names<'_> {
    fn compile(&mut self, item: &Node, row: First, ctx: &mut Ctx) -> Option<TestCase> {
        compile_test(item, self, Some(row), ctx)
    }
    fn seen(&mut self) -> &mut Seen {
        &mut self.seen
    }
    fn spec(&self) -> &str {
        self.spec
    }
}

/// One test from its mapping (for a data test: one row's, rendered, with the row's place);
/// `None` when it is too broken to run.
fn compile_test(
    item: &Node,
    names: &mut Names,
    row: Option<First>,
    ctx: &mut Ctx,
) -> Option<TestCase> {
    let obj = Obj::new(item, "a test", keys::TEST, &mut ctx.d)?;
    let name = obj.require_string("name", "a test", &mut ctx.d)?;
    // A data test's rows are checked for repeated names where the row is known.
    if row.is_none() {
        if let Some(first) = names.seen.claim(&name.value, First::Line(name.span.line)) {
            ctx.d.push(
                Diagnostic::new(Code::E034, format!("test name `{}` is used twice", name.value))
                    .at(name.span)
                    .help(format!("the first is at {first}; test names must be unique so results can be told apart")),
            );
        }
    }
    let fixture = obj.string("fixture", &mut ctx.d);
    if names.has_fixtures_dir && fixture.is_none() {
        let here = row.unwrap_or(First::Line(name.span.line));
        shared_stem(&name, here, &mut names.seen, ctx);
    }
    let models = names.models;
    let turns = obj
        .get("turns")
        .map(|n| compile_turns(n, &name.value, models, ctx));
    let query = test_query(&obj, item, &name.value, fixture.is_some(), &turns, ctx)?;
    let model = obj
        .string("model", &mut ctx.d)
        .and_then(|m| test_model(m, &name.value, models, ctx));
    // A fixture not recorded yet is that test's state, not an error in the spec: every other
    // test still runs, and `toolrun run SPEC --record PATH` works on this very spec.
    let fixture_path =
        fixture.and_then(|f| unique_fixture_path(&f, &name.value, &mut names.fixtures, ctx));
    let now_unix_ms = obj
        .string("now", &mut ctx.d)
        .and_then(|n| test_now(&n, &name.value, ctx));
    let approve = obj.string_list("approve", &mut ctx.d).unwrap_or_default();
    for a in &approve {
        if !ctx.tool_exists(&a.value) {
            ctx.unknown_tool(a, "`approve`");
        }
    }
    let faults = test_faults(&obj, ctx);
    let expect = match obj.get("expect") {
        Some(e) => compile_expect(e, models, ctx),
        None => Expect::default(),
    };
    let default = names.default_model;
    super::budgets::check_cost_expectation(&obj, model.as_deref(), models, default, ctx);
    Some(TestCase {
        span: name.span,
        name: name.value,
        query,
        model,
        fixture: fixture_path,
        now_unix_ms,
        approve: approve.into_iter().map(|a| a.value).collect(),
        faults,
        expect,
        turns: turns.unwrap_or_default(),
        data: None,
    })
}

/// `model:` of a test: one of the spec's models.
fn test_model(
    m: Spanned<String>,
    test: &str,
    models: &[ModelDef],
    ctx: &mut Ctx,
) -> Option<String> {
    if models.iter().any(|d| d.name == m.value) {
        return Some(m.value);
    }
    ctx.d.push(
        Diagnostic::new(
            Code::E025,
            format!(
                "test `{test}` names model `{}`, which is not in `models`",
                m.value
            ),
        )
        .at(m.span)
        .help(
            did_you_mean(&m.value, models.iter().map(|d| d.name.as_str()))
                .unwrap_or_else(|| "declare it under `models:`".into()),
        ),
    );
    None
}

/// `now:` of a test, as Unix milliseconds.
fn test_now(n: &Spanned<String>, test: &str, ctx: &mut Ctx) -> Option<i64> {
    match crate::builtins::datetime::now_unix_ms(Some(&n.value)) {
        Ok(ms) => Some(ms),
        Err(e) => {
            ctx.d.push(
                Diagnostic::new(Code::E007, format!("test `{test}`: {e}"))
                    .at(n.span)
                    .help("`now` is an RFC 3339 time, e.g. `2030-01-02T09:30:00Z`"),
            );
            None
        }
    }
}

/// The test's query: its `query`, its first turn's, or none for a fixture's test (the
/// recording has it). Both `query` and `turns`, or neither without a fixture, is an error.
fn test_query(
    obj: &Obj,
    item: &Node,
    test: &str,
    has_fixture: bool,
    turns: &Option<Vec<crate::registry::TestTurn>>,
    ctx: &mut Ctx,
) -> Option<String> {
    match (obj.string("query", &mut ctx.d), turns) {
        (Some(q), Some(_)) => {
            ctx.d.push(
                Diagnostic::new(Code::E029, format!("test `{test}` has both `query` and `turns`"))
                    .at(q.span)
                    .help("a test is one query or a conversation: move the query into the first of `turns`"),
            );
            None
        }
        (Some(q), None) => Some(q.value),
        (None, Some(turns)) => turns.first().map(|t| t.query.clone()),
        (None, None) if has_fixture => Some(String::new()),
        (None, None) => {
            ctx.d.push(crate::specfile::read::missing(
                item,
                "query",
                &format!("test `{test}`"),
            ));
            None
        }
    }
}

/// `turns:` of a multi-turn test: each a `query` and its own `expect`. An empty list is an
/// error (and returns no turns): a conversation needs a first message.
fn compile_turns(
    node: &Node,
    test: &str,
    models: &[ModelDef],
    ctx: &mut Ctx,
) -> Vec<crate::registry::TestTurn> {
    let items = seq(node, "`turns`", &mut ctx.d).unwrap_or(&[]);
    if items.is_empty() {
        ctx.d.push(
            Diagnostic::new(Code::E008, format!("test `{test}` has no turns"))
                .at(node.span)
                .help("list the user's messages in order: `turns: [{ query: ..., expect: {...} }, ...]`"),
        );
    }
    let mut turns = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let what = format!("turn {} of test `{test}`", i + 1);
        let Some(obj) = Obj::new(item, &what, keys::TEST_TURN, &mut ctx.d) else {
            continue;
        };
        let Some(query) = obj.require_string("query", &what, &mut ctx.d) else {
            continue;
        };
        let expect = match obj.get("expect") {
            Some(e) => compile_expect(e, models, ctx),
            None => Expect::default(),
        };
        if let (Some(judge), Some(e)) = (&expect.judge, obj.get("expect")) {
            let at = Obj::peek_free(e)
                .and_then(|o| o.get("judge"))
                .map_or(e.span, |n| n.span);
            ctx.d.push(
                Diagnostic::new(Code::E029, format!("{what} has a `judge`"))
                    .at(at)
                    .help(format!("a grader (`{}`) judges the whole conversation: move `judge` to the test's own `expect`", judge.model)),
            );
        }
        turns.push(crate::registry::TestTurn {
            query: query.value,
            span: item.span,
            expect,
        });
    }
    turns
}

/// Each resolved `fixture:` path with the test that named it first and where.
type FixtureOwners = std::collections::HashMap<std::path::PathBuf, (String, crate::diag::Span)>;

/// The test's fixture path; a path another test already names is E044, pointing at both.
fn unique_fixture_path(
    f: &Spanned<String>,
    test: &str,
    owners: &mut FixtureOwners,
    ctx: &mut Ctx,
) -> Option<std::path::PathBuf> {
    let path = fixture_path(f, test, ctx)?;
    let key = lexical(&path);
    if let Some((first, span)) = owners.get(&key) {
        ctx.d.push(
            Diagnostic::new(
                Code::E044,
                format!("tests `{first}` and `{test}` name the same fixture `{}`", f.value),
            )
            .at(f.span)
            .also(*span, format!("test `{first}` names it here"))
            .help("give each test its own `fixture:` (copy the file to check another expectation against the same recording), or drop `fixture:` and let `fixtures: DIR` name one per test"),
        );
    } else {
        owners.insert(key, (test.to_string(), f.span));
    }
    Some(path)
}

/// `faults:` of one test, by tool name.
fn test_faults(obj: &Obj, ctx: &mut Ctx) -> Vec<(String, Vec<crate::registry::Fault>)> {
    let mut faults = Vec::new();
    if let Some(n) = obj.get("faults") {
        if let Some(map) = Obj::open(n, "`faults`", &mut ctx.d) {
            for (key, list) in map.entries {
                let name = Spanned {
                    value: key.name.clone(),
                    span: key.span,
                };
                if !ctx.tool_exists(&name.value) {
                    ctx.unknown_tool(&name, "`faults`");
                    continue;
                }
                faults.push((key.name.clone(), super::tools::compile_faults(list, ctx)));
            }
        }
    }
    faults
}

/// Under `fixtures: DIR` a test's name is its fixture's file name: two names that become one
/// file name would share a recording just as two equal `fixture:` paths do (E044).
fn shared_stem(name: &Spanned<String>, here: First, seen: &mut Seen, ctx: &mut Ctx) {
    let stem = crate::registry::fixture_stem(&name.value);
    let Some((first, place, span)) = seen.claim_stem(&stem, &name.value, (here, name.span)) else {
        return;
    };
    let (both, note) = match first {
        Some(first) => (
            format!("tests `{first}` and `{}`", name.value),
            format!("test `{first}` is here"),
        ),
        None => (
            format!("the row at {place} and test `{}`", name.value),
            format!("the row at {place} is made here"),
        ),
    };
    ctx.d.push(
        Diagnostic::new(
            Code::E044,
            format!("{both} both record into `{stem}.json` under `fixtures:`"),
        )
        .at(name.span)
        .also(span, note)
        .help("test names become fixture file names (characters other than letters, digits, `-`, `_` and `.` become `_`): rename one, or give it its own `fixture:`"),
    );
}

/// `a/./b/../c` as `a/c`: one file however its path is spelled (the file may not exist yet, so
/// it cannot be canonicalised; `fixture:` paths stay inside the project, see `fixture_path`).
fn lexical(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            c => out.push(c.as_os_str()),
        }
    }
    out
}

fn one_of(v: &Spanned<String>, allowed: &[&str], what: &str, ctx: &mut Ctx) -> bool {
    if allowed.contains(&v.value.as_str()) {
        return true;
    }
    ctx.d.push(
        Diagnostic::new(Code::E033, format!("unknown {what} `{}`", v.value))
            .at(v.span)
            .help(crate::diag::choose(&v.value, allowed.iter().copied())),
    );
    false
}

fn names(obj: &Obj, key: &str, ctx: &mut Ctx) -> Option<Vec<String>> {
    let list = obj.string_list(key, &mut ctx.d)?;
    for n in &list {
        if !ctx.tool_exists(&n.value) {
            ctx.unknown_tool(n, &format!("`expect.{key}`"));
        }
    }
    Some(list.into_iter().map(|s| s.value).collect())
}

/// `output_contains` takes one string or a list of them.
fn strings(obj: &Obj, key: &str, ctx: &mut Ctx) -> Vec<String> {
    match obj.get(key) {
        None => Vec::new(),
        Some(n) => match &n.value {
            Value::Str(s) => vec![s.clone()],
            Value::Int(i) => vec![i.to_string()],
            Value::Float(f) => vec![f.to_string()],
            _ => obj
                .string_list(key, &mut ctx.d)
                .unwrap_or_default()
                .into_iter()
                .map(|s| s.value)
                .collect(),
        },
    }
}

fn compile_expect(node: &Node, models: &[ModelDef], ctx: &mut Ctx) -> Expect {
    let mut e = Expect::default();
    let Some(obj) = Obj::new(node, "`expect`", keys::EXPECT, &mut ctx.d) else {
        return e;
    };
    if let Some(s) = obj.string("status", &mut ctx.d) {
        if one_of(&s, Status::NAMES, "status", ctx) {
            e.status = Status::parse(&s.value);
        }
    }
    if let Some(s) = obj.string("stop_reason", &mut ctx.d) {
        if one_of(&s, StopReason::NAMES, "stop reason", ctx) {
            e.stop_reason = StopReason::parse(&s.value);
        }
    }
    e.tool_calls = names(&obj, "tool_calls", ctx);
    e.tool_calls_include = names(&obj, "tool_calls_include", ctx).unwrap_or_default();
    e.tool_calls_exclude = names(&obj, "tool_calls_exclude", ctx).unwrap_or_default();
    if let Some(list) = obj.string_list("error_kinds", &mut ctx.d) {
        let mut ok = Vec::new();
        for k in list {
            if one_of(&k, ErrorKind::NAMES, "error kind", ctx) {
                ok.extend(ErrorKind::parse(&k.value));
            }
        }
        e.error_kinds = Some(ok);
    }
    if let Some(n) = obj.get("arguments") {
        for item in seq(n, "`expect.arguments`", &mut ctx.d).unwrap_or(&[]) {
            match item.to_json() {
                serde_json::Value::Object(m) => e.arguments.push(m),
                _ => ctx.d.push(expected(
                    item,
                    "a mapping of argument values",
                    "each entry of `expect.arguments`",
                )),
            }
        }
    }
    e.output_contains = strings(&obj, "output_contains", ctx);
    e.output_not_contains = strings(&obj, "output_not_contains", ctx);
    if let Some(n) = obj.get("output_matches") {
        if let Some(s) = crate::specfile::read::string(n, "output_matches", &mut ctx.d) {
            e.output_matches = compile_regex(&s.value, n, ctx);
        }
    }
    e.max_tool_calls = obj
        .count("max_tool_calls", 0, &mut ctx.d)
        .map(|v| v.value.min(u32::MAX as u64) as u32);
    e.judge = obj.get("judge").and_then(|n| compile_judge(n, models, ctx));
    super::budgets::expect_budgets(&obj, &mut e, ctx);
    e
}

/// `judge: { model, rubric, pass, trajectory }`.
fn compile_judge(
    node: &Node,
    models: &[ModelDef],
    ctx: &mut Ctx,
) -> Option<crate::registry::Judge> {
    let obj = Obj::new(node, "`expect.judge`", keys::JUDGE, &mut ctx.d)?;
    let model = obj.require_string("model", "`expect.judge`", &mut ctx.d)?;
    if !models.iter().any(|m| m.name == model.value) {
        ctx.d.push(
            Diagnostic::new(
                Code::E025,
                format!(
                    "the judge names model `{}`, which is not in `models`",
                    model.value
                ),
            )
            .at(model.span)
            .help(
                did_you_mean(&model.value, models.iter().map(|d| d.name.as_str()))
                    .unwrap_or_else(|| "declare the grader under `models:`".into()),
            ),
        );
        return None;
    }
    let rubric = obj.require_string("rubric", "`expect.judge`", &mut ctx.d)?;
    let pass = match obj.number("pass", &mut ctx.d) {
        Some(p) if !(0.0..=1.0).contains(&p.value) => {
            ctx.d.push(
                Diagnostic::new(
                    Code::E007,
                    format!("`pass` is {}, not a score from 0 to 1", p.value),
                )
                .at(p.span)
                .help(
                    "the grader scores from 0 (fails the rubric) to 1 (meets it); e.g. `pass: 0.7`",
                ),
            );
            return None;
        }
        Some(p) => p.value,
        None => 0.7,
    };
    Some(crate::registry::Judge {
        model: model.value,
        rubric: rubric.value,
        pass,
        trajectory: obj.bool("trajectory", &mut ctx.d).is_some_and(|b| b.value),
    })
}

/// `fixture:` must name a regular file inside the project root (issue 12 §3); one not recorded
/// yet is a warning.
fn fixture_path(f: &Spanned<String>, test: &str, ctx: &mut Ctx) -> Option<std::path::PathBuf> {
    let p = match crate::files::within_root(&ctx.root, &ctx.spec_dir, &f.value) {
        Ok(p) => p,
        Err(e) => {
            ctx.d.push(
                Diagnostic::new(Code::E036, format!("fixture {}", e.describe(&f.value)))
                    .at(f.span)
                    .help(crate::files::Escape::HELP),
            );
            return None;
        }
    };
    match crate::files::regular_file(&p) {
        Ok(_) => {}
        Err(crate::files::NotAFile::Missing) => ctx.d.push(
            Diagnostic::new(
                Code::W108,
                format!("fixture `{}` has not been recorded yet", f.value),
            )
            .at(f.span)
            .help(format!(
                "`toolrun test` reports test `{test}` as failed until it exists; paths are relative to the spec's folder; record it with `toolrun test SPEC --filter {test} --record missing` (or `toolrun run SPEC --query ... --record {}`)",
                f.value
            )),
        ),
        Err(e) => {
            ctx.d.push(
                Diagnostic::new(Code::E036, format!("fixture `{}` {e}", f.value))
                    .at(f.span)
                    .help("name a fixture file (JSON) written by `toolrun run ... --record PATH`"),
            );
            return None;
        }
    }
    Some(p)
}

/// Whether any test of `tests:` has `expect.judge` (read without reporting: the tests are
/// checked in their turn).
pub(super) fn any_judge(tests: Option<&Node>) -> bool {
    let Some(Value::Seq(items)) = tests.map(|t| &t.value) else {
        return false;
    };
    items.iter().any(|t| {
        Obj::peek_free(t)
            .and_then(|o| o.get("expect"))
            .and_then(Obj::peek_free)
            .is_some_and(|e| e.get("judge").is_some())
    })
}
