//! `tools:` → `Tool`s. The raw tool is flat; which fields a kind allows is checked here, so the
//! message can say "`rows` is not a field of an `http` tool" instead of pointing at the tool.

use super::schema_check::{compile_input_schema, empty_object_schema};
use super::Ctx;
use crate::arguments::LazyValidator;
use crate::codes::Code;
use crate::diag::{Diagnostic, Span};
use crate::registry::{Fault, Limits, Policy, TaskSupport, Tool, ToolKind};
use crate::specfile::keys::{self, Kind};
use crate::specfile::read::{Obj, Spanned};
use crate::specfile::yaml::{Node, Value};
use crate::vocab::ErrorKind;

mod builtin;
mod http;
mod mcp;
mod mcp_auth;
mod mock;
mod table;

use builtin::compile_builtin;
use http::compile_http;
use mock::compile_mock;
use table::{compile_table, table_schema};

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
    super::memo::enter(limits, confirm, ctx);
    for (key, tool_node) in obj.entries {
        let is_mcp = peek_kind(tool_node) == Some("mcp");
        let compiled = super::memo::reuse_or(key, tool_node, is_mcp, ctx, |ctx| {
            compile_tool(&key.name, key.span, tool_node, limits, confirm, ctx)
        });
        for tool in compiled {
            // Map keys are unique already; an `mcp` entry's `as:` names can still collide.
            if tools.iter().any(|t| t.name == tool.name) {
                ctx.d.push(
                    Diagnostic::new(
                        Code::E005,
                        format!("tool `{}` is declared twice", tool.name),
                    )
                    .at(key.span)
                    .help("give one of them another name (an `mcp` tool is renamed with `as:`)"),
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
        return mcp::compile_group(name, name_span, &obj, &common, confirm, ctx);
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
    scopes: Vec<String>,
    task: Option<TaskSupport>,
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
            scopes: crate::compile::serve_auth::scopes(obj, ctx),
            task: task_support(obj, ctx),
        }
    }

    pub(super) fn timeout(&self) -> std::time::Duration {
        self.timeout
    }

    /// What every tool of a `tools: "*"` server gets from its entry.
    pub(super) fn wildcard(
        &self,
        server: std::sync::Arc<crate::registry::McpServer>,
        declared_side_effects: Option<bool>,
        confirm: &[Spanned<String>],
    ) -> crate::registry::Wildcard {
        crate::registry::Wildcard {
            server,
            side_effects: self.side_effects,
            declared_side_effects,
            explicit_idempotent: self.explicit_idempotent,
            max_calls: self.max_calls,
            timeout: self.timeout,
            faults: self.faults.clone(),
            confirm: confirm.iter().map(|c| c.value.clone()).collect(),
            scopes: self.scopes.clone(),
            task: self.task,
            found: Default::default(),
        }
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
            // Resolved against `policy` once it is compiled (see `compile::compile`).
            allowed: true,
            scopes: self.scopes.clone(),
            task: self.task,
        }
    }
}

/// `task: optional | required`; a word it does not know is an error with the nearest one.
fn task_support(obj: &Obj, ctx: &mut Ctx) -> Option<TaskSupport> {
    let word = obj.string("task", &mut ctx.d)?;
    let found = TaskSupport::parse(&word.value);
    if found.is_none() {
        ctx.d.push(
            Diagnostic::new(
                Code::E007,
                format!("`task` is `optional` or `required`, not `{}`", word.value),
            )
            .at(word.span)
            .help(crate::diag::choose(
                &word.value,
                TaskSupport::NAMES.iter().copied(),
            )),
        );
    }
    found
}

/// What one kind contributes to a tool: its input schema (and the validator built while
/// checking it, if any), its behaviour, and whether it is idempotent by nature.
pub(super) struct KindParts {
    pub(super) schema: serde_json::Value,
    pub(super) kind: ToolKind,
    pub(super) idempotent: bool,
    pub(super) prebuilt: Option<jsonschema::Validator>,
}

pub(super) fn check_tool_name(name: &str, name_span: Span, ctx: &mut Ctx) {
    if valid_tool_name(name) {
        return;
    }
    ctx.d.push(
        Diagnostic::new(
            Code::E010,
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
        Diagnostic::new(Code::E011, format!("unknown tool kind `{shown}`"))
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
            Diagnostic::new(
                Code::E013,
                format!("`{k}` is not a field of a `{kind}` tool"),
            )
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
                    Diagnostic::new(Code::W101, format!("tool `{name}` has a very short description"))
                        .at(desc.span)
                        .help("models choose tools by their description: say what it does and returns in a sentence"),
                );
            }
            desc.value
        }
        None => {
            if !obj.has("description") && !description_misspelt {
                ctx.d.push(
                    Diagnostic::new(Code::W101, format!("tool `{name}` has no description"))
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

pub(super) fn schema_properties(schema: &serde_json::Value) -> Vec<String> {
    schema
        .get("properties")
        .and_then(|p| p.as_object())
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// The optional `kind:` of an error (default `execution_error`); an unknown one is reported.
pub(super) fn error_kind(obj: &Obj, code: Code, ctx: &mut Ctx) -> Option<ErrorKind> {
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

/// With `policy.network.allow_hosts` the list is complete: a literal host outside it is an error.
/// Without it, literal hosts are the allowed ones, and a host chosen by a template (a secret, or
/// a whole-URL argument) is refused: the hosts a spec reaches must be visible in the spec.
pub(super) fn check_hosts(tools_node: Option<&Node>, policy: &Policy, ctx: &mut Ctx) {
    let Some(Value::Map(tools)) = tools_node.map(|n| &n.value) else {
        return;
    };
    for (name, tool) in tools {
        match peek_kind(tool) {
            Some("mcp") => mcp::check_mcp_host(&name.name, tool, policy, ctx),
            Some("http") => http::check_http_host(&name.name, tool, policy, ctx),
            _ => {}
        }
    }
}

/// A tool's `kind:`, read ahead of compiling the tool (which reports a missing or wrong one).
pub(super) fn peek_kind(tool: &Node) -> Option<&str> {
    Obj::peek(tool, keys::TOOL)?.get("kind")?.as_str()
}
pub(super) use http::compile_faults;
pub(crate) use http::refused_header;
pub(super) use mcp::local_names as local_mcp_names;
pub(super) use mcp::takes_every_tool;
