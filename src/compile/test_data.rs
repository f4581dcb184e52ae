//! `from: FILE` on a test: one test per row of a CSV or JSONL file, its `name`, `query`, `turns`
//! and `expect` rendered from `{{ row.COLUMN }}` templates, each row then compiled like a written
//! test. The file is read as a stream, a row at a time. A row that cannot become a test (ragged,
//! not UTF-8, not an object, a column missing) becomes a test that fails with the file, line and
//! column, so the other rows still run. Each row's test is dropped once checked unless the
//! command keeps it (`test_pick`): names are remembered as hashes (`test_names`).

use super::row_template::{column_of, pieces, render, Cell, Piece};
use super::test_names::{First, Seen};
use super::test_pick::Picker;
use super::Ctx;
use crate::codes::Code;
use crate::diag::{did_you_mean, Diagnostic, Span};
use crate::registry::{DataRow, TestCase};
use crate::specfile::read::{string, Spanned};
use crate::specfile::yaml::{Key, Node, Value};
use std::collections::{HashMap, HashSet};

/// The keys of a data test whose values are templates over `row`.
const TEMPLATED: &[&str] = &["name", "query", "turns", "expect"];
/// Rows that cannot become tests are each reported by `check` up to this many per file; the rest
/// are counted in one line.
const ROW_REPORTS: usize = 20;

/// Every column the templates of a data test read, with where, and the templated nodes checked:
/// an expression other than a column of `row` is E048.
fn columns_read(item: &Node, ctx: &mut Ctx) -> Option<Vec<(String, Span)>> {
    fn walk(node: &Node, out: &mut Vec<(String, Span)>, bad: &mut Vec<(String, Span)>) {
        match &node.value {
            Value::Str(s) if s.contains("{{") => match pieces(s) {
                Ok(ps) => out.extend(ps.into_iter().filter_map(|p| match p {
                    Piece::Column(c) => Some((c.to_string(), node.span)),
                    Piece::Text(_) => None,
                })),
                Err(expr) => bad.push((expr.to_string(), node.span)),
            },
            Value::Seq(items) => items.iter().for_each(|i| walk(i, out, bad)),
            Value::Map(entries) => entries.iter().for_each(|(_, v)| walk(v, out, bad)),
            _ => {}
        }
    }
    let (mut out, mut bad) = (Vec::new(), Vec::new());
    if let Value::Map(entries) = &item.value {
        for (key, value) in entries {
            if TEMPLATED.contains(&key.name.as_str()) {
                walk(value, &mut out, &mut bad);
            }
        }
    }
    for (column, span) in &mut out {
        *span = exact(&ctx.source.text, *span, column);
    }
    for (expr, span) in &bad {
        ctx.d.push(
            Diagnostic::new(
                Code::E048,
                format!("`{expr}` in a data test is not a column of the row"),
            )
            .at(*span)
            .help("a test with `from:` fills in `{{ row.COLUMN }}` (or `{{ row[\"a column\"] }}`) from each row; nothing else is a template there"),
        );
    }
    bad.is_empty().then_some(out)
}

/// The span of the `{{ ... }}` that reads `column` inside a one-line string, so `check` points at
/// the expression itself; the string's own span where the text does not show it as written (a
/// string over several lines, escapes).
fn exact(text: &str, span: Span, column: &str) -> Span {
    let Some(line) = (span.line == span.end_line)
        .then(|| text.lines().nth((span.line as usize).saturating_sub(1)))
        .flatten()
    else {
        return span;
    };
    let seg: String = line
        .chars()
        .skip((span.col as usize).saturating_sub(1))
        .take(span.end_col.saturating_sub(span.col) as usize)
        .collect();
    let mut at = 0;
    while let Some(i) = seg[at..].find("{{") {
        let start = at + i;
        let Some(len) = seg[start..].find("}}") else {
            break;
        };
        if column_of(&seg[start + 2..start + len]) == Some(column) {
            let col = span.col + seg[..start].chars().count() as u32;
            let width = seg[start..start + len + 2].chars().count() as u32;
            return Span {
                line: span.line,
                col,
                end_line: span.line,
                end_col: col + width,
            };
        }
        at = start + len + 2;
    }
    span
}

/// What compiles each rendered row (the compiler of written tests), and the names given so far.
pub(super) trait Compiler {
    /// One test from its mapping, made by the row at `row`; `None` when it is too broken to run.
    fn compile(&mut self, item: &Node, row: First, ctx: &mut Ctx) -> Option<TestCase>;
    /// Where each test name was first given: `line N` of the spec, or a data file's row.
    fn seen(&mut self) -> &mut Seen;
    /// The spec's name.
    fn spec(&self) -> &str;
}

/// Expands one `from:` test into its rows' tests, appended to `out`.
pub(super) fn expand(
    item: &Node,
    from: &Node,
    group: u32,
    names: &mut dyn Compiler,
    out: &mut Vec<TestCase>,
    ctx: &mut Ctx,
) {
    let Some(from) = string(from, "from", &mut ctx.d) else {
        return;
    };
    let Some(columns) = columns_read(item, ctx) else {
        return;
    };
    let Some((path, jsonl)) = data_path(&from, ctx) else {
        return;
    };
    let file = match crate::files::open_regular(&path, u64::MAX) {
        Ok((f, _)) => f,
        Err(e) => {
            let (why, help) = match e {
                crate::files::ReadError::NotAFile(crate::files::NotAFile::Missing) => (
                    "does not exist".to_string(),
                    "the path is relative to the spec's folder",
                ),
                crate::files::ReadError::NotAFile(e) => {
                    (e.to_string(), "point `from:` at a CSV or JSONL file")
                }
                crate::files::ReadError::TooLarge { limit } => {
                    (format!("is larger than {limit} bytes"), "split the file")
                }
            };
            ctx.d.push(
                Diagnostic::new(Code::E047, format!("data file `{}` {why}", from.value))
                    .at(from.span)
                    .help(help),
            );
            return;
        }
    };
    let name_span = crate::specfile::read::Obj::peek_free(item)
        .and_then(|o| o.get("name"))
        .map_or(from.span, |n| n.span);
    names.seen().data_file(group, &from.value);
    let pick = ctx.pick;
    let mut rows = Rows {
        item,
        from: &from,
        group,
        name_span,
        columns,
        picker: Picker::new(pick, names.spec()),
        names,
        reported: 0,
        unreported: 0,
        seen_diagnostics: HashSet::new(),
        present: HashSet::new(),
        missing: Vec::new(),
        missing_more: HashMap::new(),
    };
    let reader = std::io::BufReader::with_capacity(1 << 16, file);
    if jsonl {
        jsonl_rows(reader, &mut rows, ctx);
    } else {
        csv_rows(reader, &mut rows, ctx);
    }
    rows.finish(out, ctx);
}

/// The data file's path inside the project, and whether it is JSONL (else CSV).
fn data_path(from: &Spanned<String>, ctx: &mut Ctx) -> Option<(std::path::PathBuf, bool)> {
    let path = match crate::files::within_root(&ctx.root, &ctx.spec_dir, &from.value) {
        Ok(p) => p,
        Err(e) => {
            ctx.d.push(
                Diagnostic::new(Code::E047, format!("data file {}", e.describe(&from.value)))
                    .at(from.span)
                    .help(crate::files::Escape::HELP),
            );
            return None;
        }
    };
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let jsonl = match ext.as_deref() {
        Some("csv") => false,
        Some("jsonl" | "ndjson") => true,
        _ => {
            ctx.d.push(
                Diagnostic::new(
                    Code::E047,
                    format!("data file `{}` is neither `.csv` nor `.jsonl`", from.value),
                )
                .at(from.span)
                .help("a CSV file with a header line, or JSON Lines (one object per line)"),
            );
            return None;
        }
    };
    // A remembered spec is current only while its data file is unchanged.
    ctx.inputs
        .push((path.clone(), super::checked::stamp(&path)));
    Some((path, jsonl))
}

/// The state of one data test's expansion.
struct Rows<'a> {
    item: &'a Node,
    from: &'a Spanned<String>,
    group: u32,
    name_span: Span,
    /// The columns the templates read, with where.
    columns: Vec<(String, Span)>,
    names: &'a mut dyn Compiler,
    /// Which rows' tests are kept.
    picker: Picker<'a>,
    /// Rows reported by `check`, and those beyond [`ROW_REPORTS`].
    reported: usize,
    unreported: usize,
    /// Every row is compiled from the same template: a problem of the template is reported once.
    seen_diagnostics: HashSet<(Code, Option<Span>)>,
    /// Columns some row has: one no row has is E048, not a fault of each row.
    present: HashSet<String>,
    /// JSONL rows that lack a column: reported once the whole file shows whether any row has it;
    /// up to [`ROW_REPORTS`] a column, the rest counted in `missing_more`.
    missing: Vec<(String, u64, String)>,
    missing_more: HashMap<String, usize>,
}

impl Rows<'_> {
    /// One row: rendered and compiled, or a failing test saying why it cannot be one.
    fn row<'r>(&mut self, line: u64, cell: &dyn Fn(&str) -> Option<Cell<'r>>, ctx: &mut Ctx) {
        for (column, _) in &self.columns {
            if !self.present.contains(column) && cell(column).is_some() {
                self.present.insert(column.clone());
            }
        }
        let mut rendered = Vec::new();
        let Value::Map(entries) = &self.item.value else {
            return;
        };
        for (key, value) in entries {
            if !TEMPLATED.contains(&key.name.as_str()) {
                rendered.push((key.clone(), value.clone()));
                continue;
            }
            match render(value, cell, false) {
                Ok(v) => rendered.push((key.clone(), v)),
                Err(column) => {
                    let column = column.to_string();
                    let why = format!(
                        "{}:{line}:1: the row has no `{column}` (the template reads `{{{{ row.{column} }}}}`)",
                        self.from.value
                    );
                    let known = self.missing.iter().filter(|m| m.0 == column).count();
                    if known < ROW_REPORTS {
                        self.missing.push((column, line, why.clone()));
                    } else {
                        *self.missing_more.entry(column).or_default() += 1;
                    }
                    return self.broken(line, entries, cell, why);
                }
            }
        }
        let node = Node {
            span: self.item.span,
            value: Value::Map(rendered),
        };
        let saved = std::mem::take(&mut ctx.d.items);
        let row = First::Row {
            group: self.group,
            line,
        };
        let case = self.names.compile(&node, row, ctx);
        let fresh = std::mem::replace(&mut ctx.d.items, saved);
        for d in fresh {
            if self.seen_diagnostics.insert((d.code, d.span)) {
                ctx.d.push(d);
            }
        }
        if let Some(mut case) = case {
            self.claim(&case.name, line, ctx);
            case.data = Some(DataRow { broken: None });
            self.picker.offer(case);
        }
    }

    /// The test's name at its row: a name another test has is E049.
    fn claim(&mut self, name: &str, line: u64, ctx: &mut Ctx) {
        let row = First::Row {
            group: self.group,
            line,
        };
        let Some(first) = self.names.seen().claim(name, row) else {
            return;
        };
        if self.reported >= ROW_REPORTS {
            self.unreported += 1;
            return;
        }
        self.reported += 1;
        let here = format!("{}:{line}", self.from.value);
        ctx.d.push(
            Diagnostic::new(
                Code::E049,
                format!("the row at {here} makes test `{name}`, a name already given at {first}"),
            )
            .at(self.name_span)
            .help("test names must be unique so results can be told apart: put a column that tells the rows apart into `name:`, e.g. `name: case_{{ row.id }}`"),
        );
    }

    /// A row that cannot become a test: a failing test named from the row when the name
    /// renders, from its place otherwise.
    fn broken<'r>(
        &mut self,
        line: u64,
        entries: &[(Key, Node)],
        cell: &dyn Fn(&str) -> Option<Cell<'r>>,
        why: String,
    ) {
        let name = entries
            .iter()
            .find(|(k, _)| k.name == "name")
            .and_then(|(_, n)| render(n, cell, false).ok())
            .and_then(|n| match n.value {
                Value::Str(s) => Some(s),
                _ => None,
            })
            .unwrap_or_else(|| format!("{}:{line}", self.from.value));
        self.push_broken(name, why);
    }

    fn push_broken(&mut self, name: String, why: String) {
        self.picker.offer(TestCase {
            span: self.name_span,
            name,
            query: String::new(),
            model: None,
            fixture: None,
            now_unix_ms: None,
            approve: Vec::new(),
            faults: Vec::new(),
            expect: Default::default(),
            turns: Vec::new(),
            data: Some(DataRow { broken: Some(why) }),
        });
    }

    /// A row that is not data at all (W116 in `check`; the row's test fails).
    fn bad_row(&mut self, line: u64, col: u64, what: &str, ctx: &mut Ctx) {
        let why = format!("{}:{line}:{col}: {what}", self.from.value);
        self.report_row(&why, ctx);
        let name = format!("{}:{line}", self.from.value);
        self.push_broken(name, why);
    }

    fn report_row(&mut self, why: &str, ctx: &mut Ctx) {
        if self.reported >= ROW_REPORTS {
            self.unreported += 1;
            return;
        }
        self.reported += 1;
        ctx.d.push(
            Diagnostic::new(Code::W116, format!("{why}; that row's test fails"))
                .at(self.from.span)
                .help("fix the row in the data file; the other rows still run"),
        );
    }

    /// Columns no row has are E048; rows that lack a column some rows have are W116.
    fn finish(mut self, out: &mut Vec<TestCase>, ctx: &mut Ctx) {
        self.picker.finish(out, &mut ctx.rows_matched);
        if self.missing.is_empty() && self.unreported == 0 {
            return;
        }
        let absent: HashSet<String> = self
            .missing
            .iter()
            .map(|(c, _, _)| c.clone())
            .filter(|c| !self.present.contains(c))
            .collect();
        for (column, span) in self.columns.clone() {
            if absent.contains(&column) {
                ctx.d.push(
                    Diagnostic::new(
                        Code::E048,
                        format!(
                            "no row of `{}` has `{column}`, which the template reads",
                            self.from.value
                        ),
                    )
                    .at(span)
                    .help("name a member the rows of the data file have"),
                );
            }
        }
        for (column, _, why) in std::mem::take(&mut self.missing) {
            if !absent.contains(&column) {
                self.report_row(&why, ctx);
            }
        }
        for (column, more) in std::mem::take(&mut self.missing_more) {
            if !absent.contains(&column) {
                self.unreported += more;
            }
        }
        if self.unreported > 0 {
            ctx.d.push(
                Diagnostic::new(
                    Code::W116,
                    format!(
                        "{} more row(s) of `{}` cannot become tests",
                        self.unreported, self.from.value
                    ),
                )
                .at(self.from.span)
                .help("`toolrun test` names each with its line and column"),
            );
        }
    }
}

/// CSV: the header names the columns; a template reading another is E048 before any row.
fn csv_rows(reader: impl std::io::Read, rows: &mut Rows, ctx: &mut Ctx) {
    let mut csv = csv::ReaderBuilder::new()
        .flexible(true)
        .buffer_capacity(1 << 16)
        .from_reader(reader);
    let header: Vec<String> = match csv.byte_headers() {
        Ok(h) => match h
            .iter()
            .map(std::str::from_utf8)
            .collect::<Result<Vec<&str>, _>>()
        {
            Ok(names) => names.into_iter().map(|s| s.trim().to_string()).collect(),
            Err(_) => return file_error(rows.from, "line 1 (the header) is not UTF-8", ctx),
        },
        Err(e) => return file_error(rows.from, &format!("is not CSV: {e}"), ctx),
    };
    let index: HashMap<&str, usize> = header
        .iter()
        .enumerate()
        .map(|(i, h)| (h.as_str(), i))
        .collect();
    let mut unknown = false;
    for (column, span) in &rows.columns {
        if !index.contains_key(column.as_str()) {
            unknown = true;
            ctx.d.push(
                Diagnostic::new(
                    Code::E048,
                    format!("`{}` has no column `{column}`", rows.from.value),
                )
                .at(*span)
                .help(
                    did_you_mean(column, header.iter().map(String::as_str))
                        .unwrap_or_else(|| format!("its columns: {}", header.join(", "))),
                ),
            );
        }
    }
    if unknown {
        return;
    }
    let mut record = csv::ByteRecord::new();
    loop {
        let line = csv.position().line();
        match csv.read_byte_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                let line = e.position().map_or(line, |p| p.line());
                rows.bad_row(line, 1, &format!("not CSV: {e}"), ctx);
                break;
            }
        }
        let line = record.position().map_or(line, |p| p.line());
        if let Some((col, what)) = csv_problem(&record, header.len()) {
            rows.bad_row(line, col, &what, ctx);
            continue;
        }
        // Every field was checked to be UTF-8 just above.
        let cell = |c: &str| {
            let field = record.get(*index.get(c)?)?;
            std::str::from_utf8(field)
                .ok()
                .map(|t| Cell::Text(t.trim()))
        };
        rows.row(line, &cell, ctx);
    }
}

/// A ragged row or a field that is not UTF-8, with the column (1-based, in bytes from the start
/// of the row's line) where it shows.
fn csv_problem(record: &csv::ByteRecord, width: usize) -> Option<(u64, String)> {
    // Where field `i` starts, for an unquoted row: the fields before it and their commas.
    let start = |i: usize| -> u64 {
        (0..i.min(record.len()))
            .map(|j| record[j].len() as u64 + 1)
            .sum::<u64>()
            + 1
    };
    for (i, field) in record.iter().enumerate() {
        if let Err(e) = std::str::from_utf8(field) {
            let what = format!("field {} is not UTF-8", i + 1);
            return Some((start(i) + e.valid_up_to() as u64, what));
        }
    }
    if record.len() != width {
        let what = format!("the row has {} field(s), the header {width}", record.len());
        let col = if record.len() > width {
            start(width)
        } else {
            start(record.len()).saturating_sub(1).max(1)
        };
        return Some((col, what));
    }
    None
}

/// JSON Lines: one object per line; blank lines are skipped.
fn jsonl_rows(mut reader: impl std::io::BufRead, rows: &mut Rows, ctx: &mut Ctx) {
    let mut bytes = Vec::new();
    let mut line = 0u64;
    loop {
        bytes.clear();
        match reader.read_until(b'\n', &mut bytes) {
            Ok(0) => break,
            Ok(_) => line += 1,
            Err(e) => return rows.bad_row(line + 1, 1, &format!("cannot be read: {e}"), ctx),
        }
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) => t,
            Err(e) => {
                let col = String::from_utf8_lossy(&bytes[..e.valid_up_to()])
                    .chars()
                    .count() as u64
                    + 1;
                rows.bad_row(line, col, "not UTF-8", ctx);
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(map)) => {
                let map = &map;
                let cell = |c: &str| map.get(c).map(Cell::Json);
                rows.row(line, &cell, ctx);
            }
            Ok(other) => {
                let col = text.chars().take_while(|c| c.is_whitespace()).count() as u64 + 1;
                let what = format!("the line is {}, not a JSON object", json_kind(&other));
                rows.bad_row(line, col, &what, ctx);
            }
            Err(e) => rows.bad_row(line, e.column() as u64, &format!("not JSON: {e}"), ctx),
        }
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn file_error(from: &Spanned<String>, what: &str, ctx: &mut Ctx) {
    ctx.d.push(
        Diagnostic::new(Code::E047, format!("data file `{}` {what}", from.value))
            .at(from.span)
            .help("a CSV file starts with a header line naming its columns, in UTF-8"),
    );
}
