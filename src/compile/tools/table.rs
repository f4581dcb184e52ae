//! `kind: table`: rows from the spec or a CSV/JSON file inside the project, read as a stream,
//! and the query schema derived from the columns.

use crate::codes::Code;
use crate::compile::Ctx;
use crate::diag::{Diagnostic, Span};
use crate::registry::table::CsvTableBuilder;
use crate::registry::Table;
use crate::specfile::read::{expected, seq, Obj, Spanned};
use crate::specfile::yaml::Value;
use serde_json::{json, Map};
use std::io::Read as _;

pub(super) fn compile_table(
    obj: &Obj,
    what: &str,
    name_span: Span,
    ctx: &mut Ctx,
) -> Option<Table> {
    let file = obj.string("file", &mut ctx.d);
    let empty = empty_cell(obj, file.as_ref(), ctx);
    match (obj.get("rows"), file) {
        (Some(_), Some(f)) => {
            ctx.d.push(
                Diagnostic::new(Code::E013, "a table has either `rows` or `file`, not both")
                    .at(f.span)
                    .help("remove one of them"),
            );
            None
        }
        (Some(rows), None) => {
            let items = seq(rows, "`rows`", &mut ctx.d)?;
            let mut objects = Vec::with_capacity(items.len());
            for item in items {
                match item.to_json() {
                    serde_json::Value::Object(map) => objects.push(map),
                    _ => ctx
                        .d
                        .push(expected(item, "a mapping of column to value", "each row")),
                }
            }
            table_or_error(Table::from_objects(objects), rows.span, "`rows`", ctx)
        }
        (None, Some(f)) => load_table_file(&f, empty, ctx),
        (None, None) => {
            ctx.d
                .push(crate::specfile::read::missing_at(name_span, "rows", what).help(
                "add `rows:` (a list of mappings) or `file:` (a CSV or JSON file next to the spec)",
            ));
            None
        }
    }
}

/// Table files may be larger than specs: a data export, not something written by hand.
const MAX_TABLE_BYTES: u64 = crate::specfile::MAX_SPEC_BYTES * 4;

/// `empty_as`: what an empty CSV cell becomes. `null` unless the spec says otherwise, so "no
/// value" stays distinct from text and a `where: {column: null}` finds the gaps. Only CSV cells
/// are untyped: in YAML rows and JSON files an empty string was written on purpose.
fn empty_cell(obj: &Obj, file: Option<&Spanned<String>>, ctx: &mut Ctx) -> serde_json::Value {
    let Some(node) = obj.get("empty_as") else {
        return serde_json::Value::Null;
    };
    let value = match &node.value {
        Value::Null => serde_json::Value::Null,
        Value::Str(s) => json!(s),
        _ => {
            ctx.d.push(
                expected(node, "a string or `null`", "`empty_as`")
                    .help("write `empty_as: \"\"` to keep empty cells as empty strings"),
            );
            return serde_json::Value::Null;
        }
    };
    let csv = file.is_some_and(|f| !f.value.to_ascii_lowercase().ends_with(".json"));
    if !csv {
        ctx.d.push(
            Diagnostic::new(Code::E013, "`empty_as` applies to CSV files only")
                .at(node.span)
                .help(
                    "YAML rows and JSON files keep the values written in them; remove `empty_as`",
                ),
        );
    }
    value
}

fn load_table_file(
    file: &Spanned<String>,
    empty: serde_json::Value,
    ctx: &mut Ctx,
) -> Option<Table> {
    let path = table_path(file, ctx)?;
    let is_json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if is_json {
        let rows = json_table(file, &path, ctx)?;
        let what = format!("table file `{}`", file.value);
        table_or_error(Table::from_objects(rows), file.span, &what, ctx)
    } else {
        csv_table(file, &path, empty, ctx)
    }
}

fn table_error(file: &Spanned<String>, ctx: &mut Ctx, msg: String, help: &str) {
    ctx.d.push(
        Diagnostic::new(Code::E022, msg)
            .at(file.span)
            .help(help.to_string()),
    );
}

/// The table's path, if it stays inside the project root (symlinks leading out included).
fn table_path(file: &Spanned<String>, ctx: &mut Ctx) -> Option<std::path::PathBuf> {
    match crate::files::within_root(&ctx.root, &ctx.spec_dir, &file.value) {
        Ok(p) => {
            ctx.inputs
                .push((p.clone(), crate::compile::checked::stamp(&p)));
            Some(p)
        }
        Err(e) => {
            let msg = format!("table file {}", e.describe(&file.value));
            table_error(file, ctx, msg, crate::files::Escape::HELP);
            None
        }
    }
}

/// The file's text: a regular file (a FIFO or `/dev/zero` has no end), within the size limit.
fn table_read_error<T>(
    file: &Spanned<String>,
    e: crate::files::ReadError,
    ctx: &mut Ctx,
) -> Option<T> {
    match e {
        crate::files::ReadError::NotAFile(e) => {
            let help = match e {
                crate::files::NotAFile::Missing => "the path is relative to the spec's folder",
                _ => "point `file:` at a CSV or JSON file",
            };
            table_error(file, ctx, format!("table file `{}` {e}", file.value), help);
        }
        crate::files::ReadError::TooLarge { limit } => {
            let msg = format!("table file `{}` is larger than {limit} bytes", file.value);
            table_error(file, ctx, msg, "use a smaller table");
        }
    }
    None
}

fn table_not_utf8<T>(file: &Spanned<String>, ctx: &mut Ctx) -> Option<T> {
    let msg = format!("table file `{}` is not valid UTF-8", file.value);
    table_error(file, ctx, msg, "save it as UTF-8 CSV or JSON");
    None
}

/// A table's rows, or why they are too many (past 4 GiB of column names: never within the size
/// limit of a file).
fn table_or_error(
    table: Result<Table, &str>,
    span: Span,
    what: &str,
    ctx: &mut Ctx,
) -> Option<Table> {
    match table {
        Ok(t) => Some(t),
        Err(why) => {
            ctx.d.push(
                Diagnostic::new(Code::E022, format!("{what}: {why}"))
                    .at(span)
                    .help("use a smaller table"),
            );
            None
        }
    }
}

/// Parses the JSON file as a stream: its text is never held whole next to its rows. Its size and
/// encoding are checked on the way, with the errors reading it whole would give, in that order.
fn json_table(
    file: &Spanned<String>,
    path: &std::path::Path,
    ctx: &mut Ctx,
) -> Option<Vec<Map<String, serde_json::Value>>> {
    let input = match crate::files::open_regular(path, MAX_TABLE_BYTES) {
        Ok((f, _)) => f.take(MAX_TABLE_BYTES + 1),
        Err(e) => return table_read_error(file, e, ctx),
    };
    let mut input = std::io::BufReader::with_capacity(1 << 16, crate::files::Checked::new(input));
    let parsed = serde_json::from_reader::<_, serde_json::Value>(&mut input);
    let mut input = input.into_inner();
    if parsed.is_err() {
        input.finish();
    }
    if input.count() > MAX_TABLE_BYTES {
        let too_large = crate::files::ReadError::TooLarge {
            limit: MAX_TABLE_BYTES,
        };
        return table_read_error(file, too_large, ctx);
    }
    if input.invalid() {
        return table_not_utf8(file, ctx);
    }
    let fail = |ctx: &mut Ctx, msg: String, help: &str| {
        table_error(file, ctx, msg, help);
        None
    };
    match parsed {
        Ok(serde_json::Value::Array(rows)) if rows.iter().all(|r| r.is_object()) => Some(
            rows.into_iter()
                .filter_map(|r| match r {
                    serde_json::Value::Object(map) => Some(map),
                    _ => None,
                })
                .collect(),
        ),
        Ok(_) => fail(
            ctx,
            format!(
                "table file `{}` must hold a JSON array of objects",
                file.value
            ),
            "write `[{\"column\": \"value\"}, ...]`",
        ),
        Err(e) => fail(
            ctx,
            format!("table file `{}` is not valid JSON: {e}", file.value),
            "fix the JSON",
        ),
    }
}

/// Reads the CSV file as a stream into the table's compact form: the whole text is never held.
fn csv_table(
    file: &Spanned<String>,
    path: &std::path::Path,
    empty: serde_json::Value,
    ctx: &mut Ctx,
) -> Option<Table> {
    let (input, size) = match crate::files::open_regular(path, MAX_TABLE_BYTES) {
        Ok((f, size)) => (f.take(MAX_TABLE_BYTES + 1), size),
        Err(e) => return table_read_error(file, e, ctx),
    };
    // Cells are trimmed as they are stored: the reader's own trimming copies every record once
    // more, a record of a wide table being megabytes.
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::Headers)
        .buffer_capacity(1 << 16)
        .from_reader(input);
    let invalid = |ctx: &mut Ctx, e: csv::Error, help: &str| {
        if matches!(e.kind(), csv::ErrorKind::Utf8 { .. }) {
            return table_not_utf8(file, ctx);
        }
        let msg = format!("table file `{}` is not valid CSV: {e}", file.value);
        table_error(file, ctx, msg, help);
        None
    };
    let too_large = |ctx: &mut Ctx, why: &str| {
        let msg = format!("table file `{}`: {why}", file.value);
        table_error(file, ctx, msg, "use a smaller table");
        None
    };
    let mut table = match reader.headers().map(|h| CsvTableBuilder::new(h, empty)) {
        Ok(Ok(builder)) => builder,
        Ok(Err(why)) => return too_large(ctx, why),
        Err(e) => return invalid(ctx, e, "the first line names the columns"),
    };
    let mut record = match reader.headers() {
        Ok(h) => csv::StringRecord::with_capacity(h.as_slice().len(), h.len()),
        Err(_) => csv::StringRecord::new(),
    };
    let mut first = true;
    loop {
        match reader.read_record(&mut record) {
            Ok(true) => {
                if std::mem::take(&mut first) {
                    let start = record.position().map_or(0, |p| p.byte());
                    let end = reader.position().byte();
                    table.reserve(&record, end.saturating_sub(start), size.saturating_sub(end));
                }
                if let Err(why) = table.push(&record) {
                    return too_large(ctx, why);
                }
            }
            Ok(false) => break,
            Err(e) => return invalid(ctx, e, "every row needs as many fields as the header"),
        }
    }
    // The file grew past the limit after it was measured: refuse it, as a larger file is.
    if reader.position().byte() > MAX_TABLE_BYTES {
        return table_read_error(
            file,
            crate::files::ReadError::TooLarge {
                limit: MAX_TABLE_BYTES,
            },
            ctx,
        );
    }
    Some(table.finish())
}

/// Up to this many columns, each column is a property of `where` and a value of the `columns`
/// enum, the shape models read best. A wider table's schema names no columns (it would grow with
/// every column, and so would its validator and every request sending it); the tool checks the
/// names itself, with a did-you-mean.
pub(super) const COLUMNS_IN_SCHEMA: usize = 64;

pub(super) fn table_schema(table: &Table) -> serde_json::Value {
    // Built by moving values into place: `json!` with a value inside it serialises that value
    // again, which made this schema cost 0.16M instructions of a cold run.
    let filter = json!([
        { "type": ["string", "number", "boolean", "null"] },
        { "type": "object", "properties": { "contains": { "type": "string" } }, "required": ["contains"], "additionalProperties": false }
    ]);
    let columns = table.columns();
    let (filters, column) = if columns.len() <= COLUMNS_IN_SCHEMA {
        let column_props: Map<String, serde_json::Value> = columns
            .iter()
            .map(|c| {
                let description = format!("Value of `{c}`: an exact value, or {{\"contains\": \"text\"}} for a case-insensitive substring");
                (c.to_string(), object([("description", description.into()), ("anyOf", filter.clone())]))
            })
            .collect();
        let names = columns.iter().map(Into::into).collect();
        (
            object([
                ("type", "object".into()),
                (
                    "description",
                    "Filters: column → value. Rows must match every filter.".into(),
                ),
                ("properties", column_props.into()),
                ("additionalProperties", false.into()),
            ]),
            object([
                ("type", "string".into()),
                ("enum", serde_json::Value::Array(names)),
            ]),
        )
    } else {
        let description = format!("Filters: column → value, an exact value or {{\"contains\": \"text\"}} for a case-insensitive substring. Rows must match every filter. Columns: {}.", table.column_list());
        (
            object([
                ("type", "object".into()),
                ("description", description.into()),
                ("additionalProperties", object([("anyOf", filter)])),
            ]),
            json!({ "type": "string" }),
        )
    };
    let mut schema = json!({
        "type": "object",
        "properties": {
            "columns": {
                "type": "array",
                "description": "Columns to return (default: all).",
            },
            "limit": { "type": "integer", "minimum": 1, "maximum": 100, "default": 10, "description": "Maximum rows to return." }
        },
        "additionalProperties": false
    });
    schema["properties"]["columns"]["items"] = column;
    // `where` first, as models read it.
    if let Some(props) = schema["properties"].as_object_mut() {
        props.shift_insert(0, "where".into(), filters);
    }
    schema
}

fn object<const N: usize>(entries: [(&str, serde_json::Value); N]) -> serde_json::Value {
    serde_json::Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}
