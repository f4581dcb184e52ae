//! `tools:` → `Tool`s. The raw tool is flat; which fields a kind allows is checked here, so the
//! message can say "`rows` is not a field of an `http` tool" instead of pointing at the tool.

use super::schema_check::{compile_input_schema, empty_object_schema};
use super::template_check::{check_tvalue, compile_text, Roots};
use super::url_template;
use super::Ctx;
use crate::arguments::LazyValidator;
use crate::diag::{did_you_mean, Diagnostic, Span};
use crate::registry::table::CsvTableBuilder;
use crate::registry::{
    Fault, HttpTool, Limits, MockOutcome, MockResponse, Policy, Table, Tool, ToolKind, UrlOrigin,
};
use crate::specfile::keys::{self, Kind};
use crate::specfile::read::{expected, seq, Obj, Spanned};
use crate::specfile::yaml::{Node, Value};
use crate::templates::{TValue, TemplateId};
use crate::vocab::ErrorKind;
use serde_json::{json, Map};
use std::io::Read as _;

const DEFAULT_MAX_BYTES: u64 = 4 << 20;

pub(crate) fn compile_tools(
    node: &Node,
    limits: &Limits,
    confirm: &[Spanned<String>],
    ctx: &mut Ctx,
) -> Vec<Tool> {
    let Some(obj) = Obj::open(node, "`tools`", &mut ctx.d) else {
        return Vec::new();
    };
    let mut tools: Vec<Tool> = Vec::new();
    for (key, tool_node) in obj.entries {
        for tool in compile_tool(&key.name, key.span, tool_node, limits, confirm, ctx) {
            // Map keys are unique already; an `mcp` entry's `as:` names can still collide.
            if tools.iter().any(|t| t.name == tool.name) {
                ctx.d.push(
                    Diagnostic::new("E005", format!("tool `{}` is declared twice", tool.name))
                        .at(key.span)
                        .help(
                            "give one of them another name (an `mcp` tool is renamed with `as:`)",
                        ),
                );
                continue;
            }
            tools.push(tool);
        }
    }
    tools
}

pub(crate) fn valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn suggest_tool_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        s.insert(0, '_');
    }
    s.truncate(64);
    s
}

fn compile_tool(
    name: &str,
    name_span: Span,
    node: &Node,
    limits: &Limits,
    confirm: &[Spanned<String>],
    ctx: &mut Ctx,
) -> Vec<Tool> {
    check_tool_name(name, name_span, ctx);
    let what = format!("tool `{name}`");
    let Some(obj) = Obj::declared(node, &what, keys::TOOL, &mut ctx.d) else {
        return Vec::new();
    };
    let kind = tool_kind(&obj, &what, name_span, ctx);
    check_tool_keys(&obj, kind, &what, ctx);
    if let Some(mcp) = kind.filter(|k| k.name == "mcp") {
        // The entry's own description is for readers of the spec: models see the server's.
        let _ = obj.string("description", &mut ctx.d);
        let common = Common::read(&obj, limits, ctx);
        let obj = obj.as_place(mcp.place);
        return super::mcp_tools::compile_group(name, name_span, &obj, &common, confirm, ctx);
    }
    let description = tool_description(&obj, name, name_span, ctx);
    let common = Common::read(&obj, limits, ctx);
    let Some(kind) = kind else {
        return Vec::new();
    };
    let Some(KindParts {
        schema,
        kind,
        idempotent,
        prebuilt,
    }) = compile_kind(kind.name, &obj.as_place(kind.place), name, name_span, ctx)
    else {
        return Vec::new();
    };
    let validator = prebuilt.map(LazyValidator::built).unwrap_or_default();
    vec![common.tool(
        name,
        description,
        schema,
        validator,
        idempotent,
        kind,
        confirm,
    )]
}

/// The keys every kind shares, read once per spec entry (an `mcp` entry's apply to each of its
/// tools).
pub(super) struct Common {
    side_effects: bool,
    max_calls: Option<u32>,
    timeout: std::time::Duration,
    faults: Vec<Fault>,
    explicit_idempotent: Option<bool>,
}

impl Common {
    fn read(obj: &Obj, limits: &Limits, ctx: &mut Ctx) -> Common {
        Common {
            side_effects: obj
                .bool("side_effects", &mut ctx.d)
                .map(|b| b.value)
                .unwrap_or(false),
            max_calls: obj
                .count("max_calls", 1, &mut ctx.d)
                .map(|v| v.value.min(u32::MAX as u64) as u32),
            timeout: obj
                .duration("timeout", &mut ctx.d)
                .map(|v| v.value)
                .unwrap_or(limits.tool_timeout),
            faults: obj
                .get("faults")
                .map(|n| compile_faults(n, ctx))
                .unwrap_or_default(),
            explicit_idempotent: obj.bool("idempotent", &mut ctx.d).map(|b| b.value),
        }
    }

    pub(super) fn timeout(&self) -> std::time::Duration {
        self.timeout
    }

    /// `idempotent`: whether the kind is idempotent by nature (`idempotent:` overrides it).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tool(
        &self,
        name: &str,
        description: String,
        input_schema: serde_json::Value,
        validator: LazyValidator,
        idempotent: bool,
        kind: ToolKind,
        confirm: &[Spanned<String>],
    ) -> Tool {
        Tool {
            name: name.to_string(),
            description,
            input_schema,
            validator,
            side_effects: self.side_effects,
            idempotent: self
                .explicit_idempotent
                .unwrap_or(idempotent && !self.side_effects),
            confirm: self.side_effects || confirm.iter().any(|c| c.value == name),
            max_calls: self.max_calls,
            timeout: self.timeout,
            kind,
            faults: self.faults.clone(),
        }
    }
}

/// What one kind contributes to a tool: its input schema (and the validator built while
/// checking it, if any), its behaviour, and whether it is idempotent by nature.
struct KindParts {
    schema: serde_json::Value,
    kind: ToolKind,
    idempotent: bool,
    prebuilt: Option<jsonschema::Validator>,
}

pub(super) fn check_tool_name(name: &str, name_span: Span, ctx: &mut Ctx) {
    if valid_tool_name(name) {
        return;
    }
    ctx.d.push(
        Diagnostic::new(
            "E010",
            format!("tool name `{name}` is not accepted by model providers"),
        )
        .at(name_span)
        .label("invalid tool name")
        .help(format!(
            "names must match ^[A-Za-z_][A-Za-z0-9_-]{{0,63}}$; try `{}`",
            suggest_tool_name(name)
        )),
    );
}

/// The tool's `kind:`, reported when missing or unknown.
fn tool_kind(obj: &Obj, what: &str, name_span: Span, ctx: &mut Ctx) -> Option<&'static Kind> {
    let Some(n) = obj.get("kind") else {
        ctx.d.push(
            crate::specfile::read::missing_at(name_span, "kind", what)
                .help("add `kind:` with one of mock, table, builtin, http, mcp"),
        );
        return None;
    };
    if let Some(k) = n
        .as_str()
        .and_then(|k| keys::find_kind(keys::TOOL_KINDS, k))
    {
        return Some(k);
    }
    let shown = n
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| n.type_name().to_string());
    ctx.d.push(
        Diagnostic::new("E011", format!("unknown tool kind `{shown}`"))
            .at(n.span)
            .help(crate::diag::choose(
                &shown,
                keys::kind_names(keys::TOOL_KINDS),
            )),
    );
    None
}

/// Which keys this kind allows, and which belong to another kind; without a kind, only keys
/// that belong to no kind at all are reported.
fn check_tool_keys(obj: &Obj, kind: Option<&Kind>, what: &str, ctx: &mut Ctx) {
    let Some(kind) = kind else {
        let all = all_tool_keys();
        for (key, _) in obj.entries {
            if !all.contains(&key.name.as_str()) {
                ctx.d
                    .push(crate::specfile::read::unknown_key(key, what, &all));
            }
        }
        return;
    };
    for (key, _) in obj.entries {
        let k = key.name.as_str();
        if kind.place.declares(k) {
            continue;
        }
        let owners: Vec<&str> = keys::TOOL_KINDS
            .iter()
            .filter(|other| other.place.owns(k))
            .map(|other| other.name)
            .collect();
        if owners.is_empty() {
            ctx.d.push(crate::specfile::read::unknown_key(
                key,
                what,
                &kind.place.names(),
            ));
            continue;
        }
        let kind = kind.name;
        let help = if k == "input" && kind == "builtin" {
            "a builtin's input schema comes from the builtin; remove `input`".to_string()
        } else if k == "input" && kind == "mcp" {
            "an `mcp` tool's schema comes from its server; pin one per tool: `tools: [{ name: NAME, input: {...} }]`".to_string()
        } else if k == "input" && kind == "table" {
            "a table's input schema is generated from its columns; remove `input`".to_string()
        } else {
            format!(
                "`{k}` belongs to {} tools; remove it or change `kind`",
                owners.join(" and ")
            )
        };
        ctx.d.push(
            Diagnostic::new("E013", format!("`{k}` is not a field of a `{kind}` tool"))
                .at(key.span)
                .label(format!("not allowed on `{kind}` tools"))
                .help(help),
        );
    }
}

/// The keys of every tool kind, common ones first.
fn all_tool_keys() -> Vec<&'static str> {
    let mut all = keys::TOOL.names();
    for kind in keys::TOOL_KINDS {
        for k in kind.place.keys {
            if !all.contains(&k.name) {
                all.push(k.name);
            }
        }
    }
    all
}

/// The description models choose tools by; a missing or very short one is a warning.
fn tool_description(obj: &Obj, name: &str, name_span: Span, ctx: &mut Ctx) -> String {
    // A misspelt `description` is already an unknown key; "no description" on top would be noise.
    let description_misspelt = obj.entries.iter().any(|(k, _)| {
        k.name != "description" && crate::diag::closest(&k.name, ["description"]).is_some()
    });
    match obj.string("description", &mut ctx.d) {
        Some(desc) => {
            if desc.value.trim().chars().count() < 10 {
                ctx.d.push(
                    Diagnostic::new("W101", format!("tool `{name}` has a very short description"))
                        .at(desc.span)
                        .help("models choose tools by their description: say what it does and returns in a sentence"),
                );
            }
            desc.value
        }
        None => {
            if !obj.has("description") && !description_misspelt {
                ctx.d.push(
                    Diagnostic::new("W101", format!("tool `{name}` has no description"))
                        .at(name_span)
                        .help("add `description:`; models choose tools by their description"),
                );
            }
            String::new()
        }
    }
}

fn compile_kind(
    kind: &str,
    obj: &Obj,
    name: &str,
    name_span: Span,
    ctx: &mut Ctx,
) -> Option<KindParts> {
    let what = format!("tool `{name}`");
    let declared_input = |ctx: &mut Ctx| match obj.get("input") {
        Some(n) => compile_input_schema(n, name, ctx),
        None => Some((empty_object_schema(), None)),
    };
    match kind {
        "mock" => {
            let (schema, prebuilt) = declared_input(ctx)?;
            let responses = compile_mock(obj, &what, name_span, &schema, ctx)?;
            Some(KindParts {
                schema,
                kind: ToolKind::Mock(responses),
                idempotent: true,
                prebuilt,
            })
        }
        "table" => {
            let table = compile_table(obj, &what, name_span, ctx)?;
            Some(KindParts {
                schema: table_schema(&table),
                kind: ToolKind::Table(table),
                idempotent: true,
                prebuilt: None,
            })
        }
        "builtin" => compile_builtin(obj, &what, name_span, ctx),
        _ => {
            let (schema, prebuilt) = declared_input(ctx)?;
            let (http, idempotent) = compile_http(obj, &what, name_span, &schema, ctx)?;
            Some(KindParts {
                schema,
                kind: ToolKind::Http(Box::new(http)),
                idempotent,
                prebuilt,
            })
        }
    }
}

fn compile_builtin(obj: &Obj, what: &str, name_span: Span, ctx: &mut Ctx) -> Option<KindParts> {
    let names: Vec<&str> = crate::builtins::all().iter().map(|i| i.name).collect();
    if !obj.has("builtin") {
        ctx.d.push(
            crate::specfile::read::missing_at(name_span, "builtin", what)
                .help(format!("add `builtin:` with one of {}", names.join(", "))),
        );
        return None;
    }
    let b = obj.string("builtin", &mut ctx.d)?;
    let Some(info) = crate::builtins::find(&b.value) else {
        ctx.d.push(
            Diagnostic::new("E026", format!("unknown builtin `{}`", b.value))
                .at(b.span)
                .help(crate::diag::choose(&b.value, names.iter().copied())),
        );
        return None;
    };
    Some(KindParts {
        schema: (info.input_schema)(),
        kind: ToolKind::Builtin(info.name),
        idempotent: true,
        prebuilt: None,
    })
}

fn schema_properties(schema: &serde_json::Value) -> Vec<String> {
    schema
        .get("properties")
        .and_then(|p| p.as_object())
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

fn compile_mock(
    obj: &Obj,
    what: &str,
    name_span: Span,
    schema: &serde_json::Value,
    ctx: &mut Ctx,
) -> Option<Vec<MockResponse>> {
    let Some(list_node) = obj.get("responses") else {
        ctx.d.push(
            crate::specfile::read::missing_at(name_span, "responses", what)
                .help("add `responses:` with at least one `result:` or `error:`"),
        );
        return None;
    };
    let items = seq(list_node, "`responses`", &mut ctx.d)?;
    if items.is_empty() {
        ctx.d.push(
            Diagnostic::new("E029", format!("{what} has no responses"))
                .at(list_node.span)
                .help("add a response such as `- result: ok`"),
        );
    }
    let props = schema_properties(schema);
    let roots = Roots::tool(Some(&props));
    let mut out = Vec::new();
    let mut fallback_seen: Option<Span> = None;
    let mut earlier_whens: Vec<(serde_json::Map<String, serde_json::Value>, Span)> = Vec::new();
    for item in items {
        let Some(r) = Obj::new(item, "a mock response", keys::MOCK_RESPONSE, &mut ctx.d) else {
            continue;
        };
        warn_shadowed_response(&r, item, fallback_seen, &mut earlier_whens, ctx);
        let when = mock_when(&r, item, &props, &mut fallback_seen, ctx);
        let outcome = mock_outcome(&r, item, &roots, ctx);
        if let Some(outcome) = outcome {
            out.push(MockResponse { when, outcome });
        }
    }
    Some(out)
}

/// The optional `kind:` of an error (default `execution_error`); an unknown one is reported.
fn error_kind(obj: &Obj, code: &'static str, ctx: &mut Ctx) -> Option<ErrorKind> {
    let Some(k) = obj.string("kind", &mut ctx.d) else {
        return Some(ErrorKind::ExecutionError);
    };
    let kind = ErrorKind::parse(&k.value);
    if kind.is_none() {
        let all = ErrorKind::NAMES;
        ctx.d.push(
            Diagnostic::new(code, format!("unknown error kind `{}`", k.value))
                .at(k.span)
                .help(crate::diag::choose(&k.value, all.iter().copied())),
        );
    }
    kind
}

/// A response after a fallback (no `when`), or whose `when` an earlier one's covers, can
/// never match: a warning pointing at what matches first.
fn warn_shadowed_response(
    r: &Obj,
    item: &Node,
    fallback_seen: Option<Span>,
    earlier_whens: &mut Vec<(serde_json::Map<String, serde_json::Value>, Span)>,
    ctx: &mut Ctx,
) {
    let covering = match r.get("when").map(Node::to_json) {
        Some(serde_json::Value::Object(later)) if fallback_seen.is_none() => earlier_whens
            .iter()
            .find(|(w, _)| {
                crate::tools::mock::is_subset(w, &serde_json::Value::Object(later.clone()))
            })
            .map(|(_, span)| *span),
        _ => None,
    };
    if let Some(covering) = covering {
        let line = covering.line;
        ctx.d.push(
            Diagnostic::new(
                "W107",
                "this response can never match: an earlier `when` matches every call it does",
            )
            .at(r.get("when").map_or(item.span, |n| n.span))
            .label("shadowed by an earlier response")
            .also(covering, "this `when` matches first")
            .help(format!(
                "the response at line {line} tests a subset of these arguments and comes first; put the more specific response first"
            )),
        );
    }
    if let Some(serde_json::Value::Object(w)) = r.get("when").map(Node::to_json) {
        earlier_whens.push((w, r.get("when").map_or(item.span, |n| n.span)));
    }
    if let Some(first) = fallback_seen {
        ctx.d.push(
            Diagnostic::new(
                "W107",
                "this response can never match: an earlier response has no `when`",
            )
            .at(item.span)
            .also(first, "this response has no `when` and matches every call")
            .help(format!(
                "move the fallback at line {} to the end of `responses`",
                first.line
            )),
        );
    }
}

/// A response's `when`: a mapping of argument values, each an argument of the tool. No
/// `when` makes it the fallback.
fn mock_when(
    r: &Obj,
    item: &Node,
    props: &[String],
    fallback_seen: &mut Option<Span>,
    ctx: &mut Ctx,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    match r.get("when") {
        None => {
            fallback_seen.get_or_insert(item.span);
            None
        }
        Some(n) => match &n.value {
            Value::Map(entries) => {
                for (k, _) in entries {
                    if !props.is_empty() && !props.contains(&k.name) {
                        ctx.d.push(
                            Diagnostic::new(
                                "E029",
                                format!(
                                    "`when` tests `{}`, which is not an argument of this tool",
                                    k.name
                                ),
                            )
                            .at(k.span)
                            .help(
                                did_you_mean(&k.name, props.iter().map(String::as_str))
                                    .unwrap_or_else(|| format!("arguments: {}", props.join(", "))),
                            ),
                        );
                    }
                }
                match n.to_json() {
                    serde_json::Value::Object(m) => Some(m),
                    _ => None,
                }
            }
            _ => {
                ctx.d
                    .push(expected(n, "a mapping of argument values", "`when`"));
                None
            }
        },
    }
}

/// A response's `result` or `error` (exactly one of them).
fn mock_outcome(r: &Obj, item: &Node, roots: &Roots, ctx: &mut Ctx) -> Option<MockOutcome> {
    match (r.get("result"), r.get("error")) {
        (Some(res), None) => check_tvalue(res.to_json(), res, roots, ctx).map(MockOutcome::Result),
        (None, Some(err)) => compile_mock_error(err, roots, ctx),
        (Some(_), Some(_)) => {
            let at = r.key("error").map(|k| k.span).unwrap_or(item.span);
            ctx.d.push(
                Diagnostic::new("E029", "a mock response has both `result` and `error`")
                    .at(at)
                    .label("`result` is set too")
                    .help("keep one of them; add another response for the other case"),
            );
            None
        }
        (None, None) => {
            ctx.d.push(
                Diagnostic::new("E029", "a mock response needs `result` or `error`")
                    .at(item.span)
                    .help("add `result: ...` or `error: \"...\"`"),
            );
            None
        }
    }
}

fn compile_mock_error(node: &Node, roots: &Roots, ctx: &mut Ctx) -> Option<MockOutcome> {
    match &node.value {
        Value::Str(s) => {
            let id = compile_text(s, node, roots, ctx)?;
            Some(MockOutcome::Error {
                kind: ErrorKind::ExecutionError,
                message: id,
            })
        }
        Value::Map(_) => {
            let obj = Obj::new(node, "`error`", keys::ERROR_OBJECT, &mut ctx.d)?;
            let kind = error_kind(&obj, "E029", ctx)?;
            let message_node = obj.get("message");
            let message = obj.require_string("message", "`error`", &mut ctx.d)?;
            let id = compile_text(&message.value, message_node.unwrap_or(node), roots, ctx)?;
            Some(MockOutcome::Error { kind, message: id })
        }
        _ => {
            ctx.d
                .push(expected(node, "a message or `{kind, message}`", "`error`"));
            None
        }
    }
}

fn compile_table(obj: &Obj, what: &str, name_span: Span, ctx: &mut Ctx) -> Option<Table> {
    let file = obj.string("file", &mut ctx.d);
    let empty = empty_cell(obj, file.as_ref(), ctx);
    match (obj.get("rows"), file) {
        (Some(_), Some(f)) => {
            ctx.d.push(
                Diagnostic::new("E013", "a table has either `rows` or `file`, not both")
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
            Diagnostic::new("E013", "`empty_as` applies to CSV files only")
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
        Diagnostic::new("E022", msg)
            .at(file.span)
            .help(help.to_string()),
    );
}

/// The table's path, if it stays inside the project root (symlinks leading out included).
fn table_path(file: &Spanned<String>, ctx: &mut Ctx) -> Option<std::path::PathBuf> {
    match crate::files::within_root(&ctx.root, &ctx.spec_dir, &file.value) {
        Ok(p) => {
            ctx.inputs.push((p.clone(), super::checked::stamp(&p)));
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
                Diagnostic::new("E022", format!("{what}: {why}"))
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
pub(crate) const COLUMNS_IN_SCHEMA: usize = 64;

pub(crate) fn table_schema(table: &Table) -> serde_json::Value {
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

const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

fn compile_http(
    obj: &Obj,
    what: &str,
    name_span: Span,
    schema: &serde_json::Value,
    ctx: &mut Ctx,
) -> Option<(HttpTool, bool)> {
    let Some(req_node) = obj.get("request") else {
        ctx.d.push(
            crate::specfile::read::missing_at(name_span, "request", what)
                .help("add `request:` with at least `url:`"),
        );
        return None;
    };
    let req = Obj::new(req_node, "`request`", keys::REQUEST, &mut ctx.d)?;
    let props = schema_properties(schema);
    let roots = Roots::http(Some(&props));
    let method = http_method(&req, ctx);
    let url = compile_url(&req, &roots, ctx);
    let query = http_query(&req, &roots, ctx);
    let headers = http_headers(&req, &roots, ctx);
    let (body, body_text) = http_body(&req, &roots, ctx);
    let (pointer, max_bytes, max_redirects) = http_response(obj, ctx);
    let retries = obj
        .count("retries", 0, &mut ctx.d)
        .map(|v| v.value.min(10) as u32)
        .unwrap_or(0);
    let idempotent = matches!(
        method.as_str(),
        "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS"
    );
    let (url, origin) = url?;
    Some((
        HttpTool {
            method,
            url,
            origin,
            query,
            headers,
            body,
            body_text,
            pointer,
            max_bytes,
            retries,
            max_redirects,
        },
        idempotent,
    ))
}

fn http_method(req: &Obj, ctx: &mut Ctx) -> String {
    match req.string("method", &mut ctx.d) {
        None => "GET".to_string(),
        Some(m) => {
            let upper = m.value.to_ascii_uppercase();
            if !METHODS.contains(&upper.as_str()) {
                ctx.d.push(
                    Diagnostic::new("E031", format!("unsupported HTTP method `{}`", m.value))
                        .at(m.span)
                        .help(crate::diag::choose(&upper, METHODS.iter().copied())),
                );
            }
            upper
        }
    }
}

/// The URL template and what decides its origin. An argument may fill path segments, the query
/// and the fragment (encoded for where it lands, at run time), never the scheme, host or port.
fn compile_url(req: &Obj, roots: &Roots, ctx: &mut Ctx) -> Option<(TemplateId, UrlOrigin)> {
    let url = req.require_string("url", "`request`", &mut ctx.d)?;
    let url_node = req.get("url")?;
    let lower = url.value.trim_start().to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("{{")) {
        ctx.d.push(
            Diagnostic::new(
                "E021",
                format!("URL `{}` must start with http:// or https://", url.value),
            )
            .at(url.span)
            .help("write the full URL, e.g. `https://api.example.com/v1/...`"),
        );
    }
    let shape = url_template::shape(&url.value);
    if let url_template::Shape::FromInput(tag) = &shape {
        ctx.d.push(
            Diagnostic::new(
                "E020",
                format!("`{tag}` puts caller input into the URL's scheme, host or port"),
            )
            .at(url.span)
            .label("arguments may fill the path, query and fragment only")
            .help("write the host (or `{{ secrets.BASE }}`) followed by a literal `/` before any argument; to take a whole URL from one argument, write exactly `url: \"{{ args.url }}\"` and list its hosts in `policy.network.allow_hosts`"),
        );
    }
    let id = compile_text(&url.value, url_node, roots, ctx)?;
    Some((id, shape.origin()?))
}

fn http_query(req: &Obj, roots: &Roots, ctx: &mut Ctx) -> Vec<(String, TValue)> {
    let mut query = Vec::new();
    if let Some(q) = req.get("query") {
        if let Some(qobj) = Obj::open(q, "`query`", &mut ctx.d) {
            for (k, v) in qobj.entries {
                if let Some(tv) = check_tvalue(v.to_json(), v, roots, ctx) {
                    query.push((k.name.clone(), tv));
                }
            }
        }
    }
    query
}

pub(super) fn http_headers(req: &Obj, roots: &Roots, ctx: &mut Ctx) -> Vec<(String, TemplateId)> {
    let mut headers = Vec::new();
    if let Some(h) = req.get("headers") {
        if let Some(hobj) = Obj::open(h, "`headers`", &mut ctx.d) {
            for (k, v) in hobj.entries {
                let text = match &v.value {
                    Value::Str(s) => s.clone(),
                    Value::Int(i) => i.to_string(),
                    _ => {
                        ctx.d
                            .push(expected(v, "a string", &format!("header `{}`", k.name)));
                        continue;
                    }
                };
                if let Some(id) = compile_text(&text, v, roots, ctx) {
                    headers.push((k.name.clone(), id));
                }
            }
        }
    }
    headers
}

fn http_body(req: &Obj, roots: &Roots, ctx: &mut Ctx) -> (Option<TValue>, Option<TemplateId>) {
    let body = req
        .get("body")
        .and_then(|b| check_tvalue(b.to_json(), b, roots, ctx));
    let body_text = req.get("body_text").and_then(|n| {
        if req.has("body") {
            ctx.d.push(
                Diagnostic::new(
                    "E013",
                    "a request has either `body` or `body_text`, not both",
                )
                .at(n.span)
                .help("remove one of them"),
            );
        }
        let s = crate::specfile::read::string(n, "body_text", &mut ctx.d)?;
        compile_text(&s.value, n, roots, ctx)
    });
    (body, body_text)
}

/// `response:`: the pointer, `max_bytes` and `max_redirects`.
fn http_response(obj: &Obj, ctx: &mut Ctx) -> (Option<String>, u64, u32) {
    let mut pointer = None;
    let mut max_bytes = DEFAULT_MAX_BYTES;
    let mut max_redirects = 5;
    let Some(r) = obj.get("response") else {
        return (pointer, max_bytes, max_redirects);
    };
    let Some(robj) = Obj::new(r, "`response`", keys::HTTP_RESPONSE, &mut ctx.d) else {
        return (pointer, max_bytes, max_redirects);
    };
    if let Some(p) = robj.string("pointer", &mut ctx.d) {
        if !p.value.is_empty() && !p.value.starts_with('/') {
            ctx.d.push(
                Diagnostic::new("E030", format!("`{}` is not a JSON Pointer", p.value))
                    .at(p.span)
                    .help(format!(
                        "JSON Pointers start with `/`: `/{}`",
                        p.value.trim_start_matches(['#', '.']).replace('.', "/")
                    )),
            );
        }
        pointer = Some(p.value);
    }
    if let Some(m) = robj.count("max_bytes", 1, &mut ctx.d) {
        max_bytes = m.value;
    }
    if let Some(m) = robj.count("max_redirects", 0, &mut ctx.d) {
        max_redirects = m.value.min(20) as u32;
    }
    (pointer, max_bytes, max_redirects)
}

pub(super) fn compile_faults(node: &Node, ctx: &mut Ctx) -> Vec<Fault> {
    let mut out = Vec::new();
    let Some(items) = seq(node, "`faults`", &mut ctx.d) else {
        return out;
    };
    for item in items {
        let Some(f) = Obj::new(item, "a fault", keys::FAULT, &mut ctx.d) else {
            continue;
        };
        let forms: Vec<&str> = [
            "fail_first",
            "timeout",
            "http_status",
            "oversized_output",
            "delay",
        ]
        .into_iter()
        .filter(|k| f.has(k))
        .collect();
        if forms.len() != 1 {
            // With two forms, the second is the one to move; with none, the fault itself.
            let at = forms
                .get(1)
                .and_then(|k| f.key(k))
                .map(|k| k.span)
                .unwrap_or(item.span);
            ctx.d.push(
                Diagnostic::new("E035", "a fault needs exactly one of `fail_first`, `timeout`, `http_status`, `oversized_output`, `delay`")
                    .at(at)
                    .help("e.g. `- { fail_first: 2, kind: timeout }` or `- { http_status: 503 }`"),
            );
            continue;
        }
        if let Some(n) = f.count("fail_first", 1, &mut ctx.d) {
            let Some(kind) = error_kind(&f, "E035", ctx) else {
                continue;
            };
            let message = f
                .string("message", &mut ctx.d)
                .map(|m| m.value)
                .unwrap_or_else(|| "injected fault".into());
            out.push(Fault::FailFirst {
                n: n.value.min(u32::MAX as u64) as u32,
                kind,
                message,
            });
        } else if let Some(d) = f.duration("delay", &mut ctx.d) {
            out.push(Fault::Delay(d.value));
        } else if let Some(t) = f.bool("timeout", &mut ctx.d) {
            if t.value {
                out.push(Fault::Timeout);
            }
        } else if let Some(s) = f.int("http_status", &mut ctx.d) {
            if !(100..=599).contains(&s.value) {
                ctx.d.push(
                    Diagnostic::new("E035", format!("{} is not an HTTP status", s.value))
                        .at(s.span)
                        .help("use a status from 100 to 599"),
                );
            } else {
                out.push(Fault::HttpStatus(s.value as u16));
            }
        } else if let Some(n) = f.count("oversized_output", 1, &mut ctx.d) {
            out.push(Fault::OversizedOutput(n.value.min(64 << 20) as usize));
        }
    }
    out
}

/// With `policy.network.allow_hosts` the list is complete: a literal host outside it is an error.
/// Without it, literal hosts are the allowed ones, and a host chosen by a template (a secret, or
/// a whole-URL argument) is refused: the hosts a spec reaches must be visible in the spec.
pub(crate) fn check_hosts(tools_node: Option<&Node>, policy: &Policy, ctx: &mut Ctx) {
    let Some(Value::Map(tools)) = tools_node.map(|n| &n.value) else {
        return;
    };
    for (name, tool) in tools {
        match peek_kind(tool) {
            Some("mcp") => check_mcp_host(&name.name, tool, policy, ctx),
            Some("http") => check_http_host(&name.name, tool, policy, ctx),
            _ => {}
        }
    }
}

/// A tool's `kind:`, read ahead of compiling the tool (which reports a missing or wrong one).
pub(super) fn peek_kind(tool: &Node) -> Option<&str> {
    Obj::peek(tool, keys::TOOL)?.get("kind")?.as_str()
}

/// An `http` tool's literal host must be allowed; a host chosen by a template must be listed.
fn check_http_host(name: &str, tool: &Node, policy: &Policy, ctx: &mut Ctx) {
    let request = Obj::peek(tool, keys::TOOL_HTTP).and_then(|t| t.get("request"));
    let url_node = request.and_then(|r| Obj::peek(r, keys::REQUEST)?.get("url"));
    let Some((url_node, url)) = url_node.and_then(|n| Some((n, n.as_str()?))) else {
        return;
    };
    match url_template::shape(url) {
        url_template::Shape::Literal(Some(rule))
            if !policy.allow_hosts.is_empty()
                && !policy
                    .allow_hosts
                    .iter()
                    .any(|r| r.matches(&rule.host, rule.port.unwrap_or(0))) =>
        {
            let host = rule.host;
            ctx.d.push(
                Diagnostic::new("E020", format!("tool `{name}` calls host `{host}`, which `policy.network.allow_hosts` does not list"))
                    .at(url_node.span)
                    .help(format!("add `{host}` to `policy.network.allow_hosts`, or change the URL")),
            );
        }
        url_template::Shape::Secrets(_) | url_template::Shape::WholeArgument
            if policy.allow_hosts.is_empty() =>
        {
            ctx.d.push(
                Diagnostic::new("E020", format!("tool `{name}` lets a template choose the host"))
                    .at(url_node.span)
                    .help("write the host literally, or list the hosts it may reach in `policy.network.allow_hosts`"),
            );
        }
        _ => {}
    }
}

/// An `mcp` server's host obeys the same allow-list as an `http` tool's.
fn check_mcp_host(name: &str, tool: &Node, policy: &Policy, ctx: &mut Ctx) {
    let Some(url_node) = Obj::peek(tool, keys::TOOL_MCP).and_then(|t| t.get("url")) else {
        return;
    };
    let Some(url) = url_node
        .as_str()
        .and_then(|u| url::Url::parse(u.trim()).ok())
    else {
        return;
    };
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(0);
    if policy.allow_hosts.is_empty() || policy.allow_hosts.iter().any(|r| r.matches(host, port)) {
        return;
    }
    ctx.d.push(
        Diagnostic::new(
            "E020",
            format!("tool `{name}` calls host `{host}`, which `policy.network.allow_hosts` does not list"),
        )
        .at(url_node.span)
        .help(format!("add `{host}` to `policy.network.allow_hosts`, or change the URL")),
    );
}
