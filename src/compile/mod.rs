//! Spec → `Registry`. Several passes, like a compiler: read every section, resolve names, lint.
//! Every problem is collected; a registry comes out only when there is no error.

mod budgets;
mod checked;
mod limits;
mod memo;
mod models;
mod row_template;
mod schema_check;
mod scripts;
mod serve_auth;
mod template_check;
mod test_cases;
mod test_data;
mod test_names;
mod test_pick;
mod tools;
mod url_template;

pub(crate) use memo::{diagnose, Memo};
pub(crate) use tools::refused_header;

use crate::codes::Code;
use crate::diag::{did_you_mean, Diagnostic, Diagnostics, Span};
use crate::registry::{HostRule, Limits, Policy, Registry, RowPick, RowsMatched};
use crate::specfile::keys;
use crate::specfile::read::{string_list, Obj, Spanned};
use crate::specfile::yaml::{self, Node, Value};
use crate::specfile::Source;
use crate::templates::Templates;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub(crate) struct Ctx<'a> {
    pub(crate) d: Diagnostics,
    pub(crate) source: &'a Source,
    pub(crate) spec_dir: PathBuf,
    /// Paths the spec names (`file:`, `fixture:`) must stay inside this folder.
    pub(crate) root: PathBuf,
    pub(crate) templates: Templates,
    pub(crate) secrets: BTreeMap<String, Span>,
    pub(crate) used_secrets: BTreeSet<String>,
    pub(crate) tool_names: Vec<String>,
    /// Scripted calls with literal arguments, validated once every tool is compiled.
    pub(crate) pending_call_checks: Vec<(String, serde_json::Value, Node)>,
    /// This exact text passed every check before (`checked`): tool schemas are not checked
    /// against the meta-schema again, and validators are built on each tool's first call.
    pub(crate) trusted: bool,
    pub(crate) spec_sha256: String,
    /// Files the compile read (tables), stamped before reading: a remembered spec is current
    /// only while they are unchanged.
    pub(crate) inputs: Vec<(PathBuf, Option<checked::Stamp>)>,
    /// `kind: mcp` entries with `tools: "*"`, by name: a tool name no entry declares may be
    /// one of theirs, which only a run can tell (W113, not E012).
    pub(crate) open_servers: Vec<String>,
    pub(crate) wildcards: Vec<crate::registry::Wildcard>,
    /// Some test has `expect.judge`: a scripted grader may call the `grade` tool the judge
    /// offers, which is no tool of the spec.
    pub(crate) judged: bool,
    /// Tool entries reused from the document's last compile (`toolrun lsp`), see `memo`.
    pub(crate) memo: Option<memo::Round>,
    /// Which rows of the data tests become tests of the registry (`toolrun test`'s selection).
    pub(crate) pick: &'a RowPick,
    pub(crate) rows_matched: RowsMatched,
}

/// Every command but `test`: the rows of data tests are checked, none is kept.
static NO_ROWS: RowPick = RowPick::NONE;

impl Ctx<'_> {
    pub(crate) fn tool_exists(&self, name: &str) -> bool {
        self.tool_names.iter().any(|t| t == name)
    }

    pub(crate) fn unknown_tool(&mut self, name: &Spanned<String>, place: &str) {
        if !self.open_servers.is_empty() {
            let servers: Vec<String> = self.open_servers.iter().map(|s| format!("`{s}`")).collect();
            self.d.push(
                Diagnostic::new(
                    Code::W113,
                    format!(
                        "tool `{}` in {place} is not declared; it may be one of the tools of MCP server {} (`tools: \"*\"`), which only a run can list",
                        name.value,
                        servers.join(", ")
                    ),
                )
                .at(name.span)
                .label("unknown offline")
                .help("a run fails if no server lists it; name the tool in the server's `tools:` to have it checked offline"),
            );
            return;
        }
        let help = did_you_mean(&name.value, self.tool_names.iter().map(String::as_str))
            .unwrap_or_else(|| format!("declared tools: {}", self.tool_names.join(", ")));
        self.d.push(
            Diagnostic::new(
                Code::E012,
                format!("unknown tool `{}` in {place}", name.value),
            )
            .at(name.span)
            .label("not a tool of this spec")
            .help(help),
        );
    }
}

pub struct Compiled {
    pub registry: Option<Registry>,
    pub(crate) diagnostics: Vec<Diagnostic>,
}

pub(crate) fn compile_file(path: &Path) -> Result<(Source, Compiled), Diagnostic> {
    compile_file_picking(path, &NO_ROWS)
}

/// [`compile_file`], keeping the rows of the data tests that `pick` selects as tests.
pub(crate) fn compile_file_picking(
    path: &Path,
    pick: &RowPick,
) -> Result<(Source, Compiled), Diagnostic> {
    let source = crate::specfile::read_source(path)?;
    let cache = checked::Cache::for_text(&source.text);
    if let Some(hit) = cache.as_ref().and_then(|c| c.load(&source.text)) {
        if let Some(compiled) = compile_hit(&source, path, hit, pick) {
            return Ok((source, compiled));
        }
    }
    let compiled = compile_and_remember(&source, path, cache.as_ref(), pick);
    Ok((source, compiled))
}

/// Every check, whatever was checked before (`toolrun check`).
pub(crate) fn check_file(path: &Path) -> Result<(Source, Compiled), Diagnostic> {
    let source = crate::specfile::read_source(path)?;
    let cache = checked::Cache::for_text(&source.text);
    let compiled = compile_and_remember(&source, path, cache.as_ref(), &NO_ROWS);
    Ok((source, compiled))
}

/// Compiles with every check.
pub fn compile(source: &Source, path: &Path) -> Compiled {
    compile_and_remember(source, path, None, &NO_ROWS)
}

/// Every check; a spec that passes them all is remembered in `cache`.
fn compile_and_remember(
    source: &Source,
    path: &Path,
    cache: Option<&checked::Cache>,
    pick: &RowPick,
) -> Compiled {
    let (root, duplicates) = match yaml::parse_keeping_duplicates(&source.text) {
        Ok(parsed) => parsed,
        Err(errors) => {
            return Compiled {
                registry: None,
                diagnostics: finish(source, Diagnostics { items: errors }),
            }
        }
    };
    let sha = sha256_hex(&source.text);
    let mut ctx = Ctx::new(source, path, sha, false);
    ctx.pick = pick;
    // A duplicate key is an error, but the rest of the spec is still worth checking.
    for d in duplicates {
        ctx.d.push(d);
    }
    let (compiled, inputs) = compile_tree(&root, path, ctx);
    if let (Some(cache), Some(r)) = (cache, &compiled.registry) {
        cache.store(&source.text, &r.spec_sha256, &root, &inputs);
    }
    compiled
}

/// A spec whose exact text passed every check before: its remembered tree and SHA-256 stand in
/// for parsing and hashing it, and the checks that depend on its text alone are skipped. `None`
/// when this compile read other files than the one that passed (the same text in another
/// folder names other tables): then the spec is checked in full.
fn compile_hit(
    source: &Source,
    path: &Path,
    hit: checked::Hit,
    pick: &RowPick,
) -> Option<Compiled> {
    let mut ctx = Ctx::new(source, path, hit.sha256, true);
    ctx.pick = pick;
    let (compiled, read) = compile_tree(&hit.tree, path, ctx);
    read.iter()
        .map(|(p, _)| p)
        .eq(hit.inputs.iter())
        .then_some(compiled)
}

/// The compiled spec, and the files the compile read (with their stamps, taken before reading).
fn compile_tree(
    root: &Node,
    path: &Path,
    mut ctx: Ctx,
) -> (Compiled, Vec<(PathBuf, Option<checked::Stamp>)>) {
    let registry = compile_root(root, path, &mut ctx);
    let has_errors = ctx.d.has_errors();
    let compiled = Compiled {
        registry: if has_errors { None } else { registry },
        diagnostics: finish(ctx.source, ctx.d),
    };
    (compiled, ctx.inputs)
}

fn finish(source: &Source, mut d: Diagnostics) -> Vec<Diagnostic> {
    d.sort();
    for item in &mut d.items {
        item.file = Some(source.display.clone());
    }
    d.items
}

impl<'a> Ctx<'a> {
    fn new(source: &'a Source, path: &Path, spec_sha256: String, trusted: bool) -> Ctx<'a> {
        let spec_dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        Ctx {
            d: Diagnostics::default(),
            source,
            spec_dir: spec_dir.to_path_buf(),
            root: crate::files::project_root(path),
            templates: Templates::new(),
            secrets: BTreeMap::new(),
            used_secrets: BTreeSet::new(),
            tool_names: Vec::new(),
            pending_call_checks: Vec::new(),
            trusted,
            spec_sha256,
            inputs: Vec::new(),
            open_servers: Vec::new(),
            wildcards: Vec::new(),
            judged: false,
            memo: None,
            pick: &NO_ROWS,
            rows_matched: RowsMatched::default(),
        }
    }
}

fn compile_root(root: &Node, path: &Path, ctx: &mut Ctx) -> Option<Registry> {
    if !matches!(root.value, Value::Map(_)) {
        ctx.d.push(
            Diagnostic::new(
                Code::E003,
                format!(
                    "a spec must be a mapping of keys, found {}",
                    root.type_name()
                ),
            )
            .at(root.span)
            .help("start the file with `version: 1`, then `name:`, `tools:` and the other keys"),
        );
        return None;
    }
    let top = Obj::new(root, "the spec", keys::TOP, &mut ctx.d)?;

    check_version(&top, root, ctx);
    let name = top
        .string("name", &mut ctx.d)
        .map(|s| s.value)
        .unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "spec".into())
        });
    let description = top.string("description", &mut ctx.d).map(|s| s.value);
    let system = top.string("system", &mut ctx.d).map(|s| s.value);

    // Secrets first: templates everywhere are checked against them.
    compile_secrets(&top, ctx);

    let mut limits = limits::compile_limits(top.get("limits"), ctx);

    // Tool names are collected before any tool is compiled, so references can be resolved in
    // any order.
    let tools_node = top.get("tools");
    if let Some(n) = tools_node {
        // `compile_tools` reports a `tools:` that is not a mapping; this pass only reads names.
        if let Some(obj) = Obj::open(n, "`tools`", &mut Diagnostics::default()) {
            ctx.tool_names = obj
                .entries
                .iter()
                .flat_map(|(k, v)| match tools::peek_kind(v) {
                    Some("mcp") => tools::local_mcp_names(v),
                    _ => vec![k.name.clone()],
                })
                .collect();
            ctx.open_servers = obj
                .entries
                .iter()
                .filter(|(_, v)| tools::peek_kind(v) == Some("mcp") && tools::takes_every_tool(v))
                .map(|(k, _)| k.name.clone())
                .collect();
        }
    }
    let policy_node = top.get("policy");
    let confirm_list = policy_node
        .and_then(|p| Obj::peek(p, keys::POLICY)?.get("confirm"))
        .and_then(|n| string_list(n, "confirm", &mut Diagnostics::default()))
        .unwrap_or_default();
    let mut tools = match tools_node {
        Some(n) => tools::compile_tools(n, &limits, &confirm_list, ctx),
        None => Vec::new(),
    };
    let policy = compile_policy(policy_node, &tools, ctx);
    resolve_policy(&mut tools, &policy);
    tools::check_hosts(tools_node, &policy, ctx);
    let (serve, serve_auth) = compile_serve(top.get("serve"), &policy, ctx);
    ctx.judged = test_cases::any_judge(top.get("tests"));
    let (models, default_model) =
        models::compile_models(top.get("models"), top.get("default_model"), &policy, ctx);
    check_scripted_calls(&tools, ctx);
    let tests = tests_and_cost_limit(&top, &name, &mut limits, (&models, default_model), ctx);
    let replay_ignore = compile_replay_ignore(&top, ctx);
    // Per-test fixtures are written by `test --record`: the folder must stay inside the project.
    let fixtures_dir = top.string("fixtures", &mut ctx.d).and_then(|d| {
        match crate::files::within_root(&ctx.root, &ctx.spec_dir, &d.value) {
            Ok(p) => Some(p),
            Err(e) => {
                ctx.d.push(
                    Diagnostic::new(
                        Code::E036,
                        format!("fixtures folder {}", e.describe(&d.value)),
                    )
                    .at(d.span)
                    .help(crate::files::Escape::HELP),
                );
                None
            }
        }
    });
    warn_unused_secrets(ctx);
    let sha = std::mem::take(&mut ctx.spec_sha256);
    let templates = std::mem::take(&mut ctx.templates);
    Some(Registry {
        name,
        description,
        system,
        spec_path: path.to_path_buf(),
        spec_sha256: sha,
        tools,
        secrets: ctx.secrets.keys().cloned().collect(),
        policy,
        limits,
        serve,
        serve_auth,
        models,
        default_model,
        tests,
        rows_matched: std::mem::take(&mut ctx.rows_matched),
        templates,
        replay_ignore,
        fixtures_dir,
        wildcards: std::mem::take(&mut ctx.wildcards),
        allowed_hosts: Default::default(),
    })
}

/// `tests:`, and `limits.max_cost_usd`, which needs the models' prices as the tests' cost
/// budgets do.
fn tests_and_cost_limit(
    top: &Obj,
    spec: &str,
    limits: &mut Limits,
    models: (&[crate::registry::ModelDef], Option<usize>),
    ctx: &mut Ctx,
) -> Vec<crate::registry::TestCase> {
    limits.max_cost_usd = budgets::cost_limit(top.get("limits"), models.0, ctx);
    top.get("tests").map_or_else(Vec::new, |n| {
        let fixtures = top.get("fixtures").is_some();
        test_cases::compile_tests(n, spec, models, fixtures, ctx)
    })
}

fn check_version(top: &Obj, root: &Node, ctx: &mut Ctx) {
    match top.get("version") {
        None => ctx.d.push(yaml_missing(
            root,
            "version",
            "add `version: 1` at the top of the spec",
        )),
        Some(n) if n.value == Value::Int(1) => {}
        Some(n) => ctx.d.push(
            Diagnostic::new(
                Code::E009,
                format!("unsupported spec version {}", scalar_text(n)),
            )
            .at(n.span)
            .help("this toolrun reads `version: 1`"),
        ),
    }
}

/// `secrets:`: environment variable names, each declared once.
fn compile_secrets(top: &Obj, ctx: &mut Ctx) {
    if let Some(list) = top.string_list("secrets", &mut ctx.d) {
        for s in list {
            let valid = !s.value.is_empty()
                && s.value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !s.value.starts_with(|c: char| c.is_ascii_digit());
            if !valid {
                ctx.d.push(
                    Diagnostic::new(
                        Code::E018,
                        format!("`{}` is not an environment variable name", s.value),
                    )
                    .at(s.span)
                    .help("use letters, digits and `_`, e.g. `WEATHER_KEY`"),
                );
            } else if let Some(first) = ctx.secrets.insert(s.value.clone(), s.span) {
                ctx.d.push(
                    Diagnostic::new(
                        Code::E005,
                        format!("secret `{}` is declared twice", s.value),
                    )
                    .at(s.span)
                    .label("second declaration")
                    .also(first, "first declared here")
                    .help("remove one of them"),
                );
            }
        }
    }
}

/// `replay.ignore`: JSON Pointers of volatile request fields.
fn compile_replay_ignore(top: &Obj, ctx: &mut Ctx) -> Vec<String> {
    let mut replay_ignore = Vec::new();
    if let Some(n) = top.get("replay") {
        if let Some(obj) = Obj::new(n, "`replay`", keys::REPLAY, &mut ctx.d) {
            for p in obj.string_list("ignore", &mut ctx.d).unwrap_or_default() {
                if !p.value.is_empty() && !p.value.starts_with('/') {
                    ctx.d.push(
                        Diagnostic::new(Code::E030, format!("`{}` is not a JSON Pointer", p.value))
                            .at(p.span)
                            .help(format!(
                                "JSON Pointers start with `/`, e.g. `/{}`",
                                p.value.trim_start_matches('#')
                            )),
                    );
                }
                replay_ignore.push(p.value);
            }
        }
    }
    replay_ignore
}

fn warn_unused_secrets(ctx: &mut Ctx) {
    if ctx.trusted {
        // Which secrets templates read was not collected (`check_variables`); a run shows no
        // warnings, and `check` always checks everything.
        return;
    }
    for (secret, span) in &ctx.secrets {
        if !ctx.used_secrets.contains(secret) {
            ctx.d.push(
                Diagnostic::new(
                    Code::W105,
                    format!("secret `{secret}` is declared but no template reads it"),
                )
                .at(*span)
                .help(format!(
                    "use it as `{{{{ secrets.{secret} }}}}`, or remove it from `secrets`"
                )),
            );
        }
    }
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn scalar_text(n: &Node) -> String {
    match &n.value {
        Value::Str(s) => format!("`{s}`"),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        other => format!("{other:?}"),
    }
}

fn yaml_missing(root: &Node, key: &str, help: &str) -> Diagnostic {
    Diagnostic::new(
        Code::E008,
        format!("the spec is missing required key `{key}`"),
    )
    .at(Span {
        end_line: root.span.line,
        end_col: root.span.col + 1,
        ..root.span
    })
    .help(help.to_string())
}

fn compile_serve(
    node: Option<&Node>,
    policy: &Policy,
    ctx: &mut Ctx,
) -> (
    crate::registry::ServeLimits,
    Option<crate::registry::ServeAuth>,
) {
    let mut serve = crate::registry::ServeLimits::default();
    let Some(obj) = node.and_then(|n| Obj::new(n, "`serve`", keys::SERVE, &mut ctx.d)) else {
        return (serve, None);
    };
    let auth = obj
        .get("auth")
        .and_then(|n| serve_auth::compile(n, policy, ctx));
    let small = |v: Spanned<u64>| v.value.min(u32::MAX as u64) as u32;
    if let Some(v) = obj.count("max_tool_calls", 1, &mut ctx.d) {
        serve.max_tool_calls = small(v);
    }
    if let Some(v) = obj.count("max_repeated_calls", 1, &mut ctx.d) {
        serve.max_repeated_calls = small(v);
    }
    (serve, auth)
}

/// `policy.allow`/`deny` become each tool's `allowed`, so a run never looks names up.
fn resolve_policy(tools: &mut [crate::registry::Tool], policy: &Policy) {
    for tool in tools {
        tool.allowed = policy.allows(&tool.name);
    }
}

fn compile_policy(node: Option<&Node>, tools: &[crate::registry::Tool], ctx: &mut Ctx) -> Policy {
    let mut policy = Policy {
        allow: None,
        deny: BTreeSet::new(),
        max_identical_calls: 3,
        max_repeated_errors: 3,
        detect_alternation: true,
        allow_hosts: Vec::new(),
    };
    let Some(node) = node else { return policy };
    let Some(obj) = Obj::new(node, "`policy`", keys::POLICY, &mut ctx.d) else {
        return policy;
    };
    let names = |key: &str, ctx: &mut Ctx| -> Option<Vec<Spanned<String>>> {
        let list = obj.string_list(key, &mut ctx.d)?;
        for name in &list {
            if !ctx.tool_exists(&name.value) {
                ctx.unknown_tool(name, &format!("`policy.{key}`"));
            }
        }
        Some(list)
    };
    let allow = names("allow", ctx);
    let deny = names("deny", ctx).unwrap_or_default();
    let allow_span = obj.get("allow").map(|n| n.span);
    names("confirm", ctx);
    if let Some(allow) = &allow {
        policy.allow = Some(allow.iter().map(|s| s.value.clone()).collect());
    }
    policy.deny = deny.iter().map(|s| s.value.clone()).collect();
    if let Some(v) = obj.count("max_identical_calls", 1, &mut ctx.d) {
        policy.max_identical_calls = v.value.min(u32::MAX as u64) as u32;
    }
    if let Some(v) = obj.count("max_repeated_errors", 1, &mut ctx.d) {
        policy.max_repeated_errors = v.value.min(u32::MAX as u64) as u32;
    }
    if let Some(v) = obj.bool("detect_alternation", &mut ctx.d) {
        policy.detect_alternation = v.value;
    }
    if let Some(n) = obj.get("network") {
        if let Some(net) = Obj::new(n, "`policy.network`", keys::NETWORK, &mut ctx.d) {
            if let Some(hosts) = net.string_list("allow_hosts", &mut ctx.d) {
                for h in hosts {
                    match parse_host_rule(&h.value) {
                        Some(rule) => policy.allow_hosts.push(rule),
                        None => ctx.d.push(
                            Diagnostic::new(Code::E020, format!("`{}` is not a host name", h.value))
                                .at(h.span)
                                .help("write a host such as `api.example.com`, or host and port such as `127.0.0.1:8080` (no scheme, no path)"),
                        ),
                    }
                }
            }
        }
    }
    // Tools that can never run are almost always a policy mistake.
    for tool in tools {
        // Point at the entry that denies the tool, or at the allow list that leaves it out.
        let blocked = if let Some(entry) = deny.iter().find(|d| d.value == tool.name) {
            Some(("`policy.deny` lists it", entry.span))
        } else if policy
            .allow
            .as_ref()
            .is_some_and(|a| !a.contains(&tool.name))
        {
            Some((
                "`policy.allow` does not list it",
                allow_span.unwrap_or(obj.node.span),
            ))
        } else {
            None
        };
        if let Some((why, span)) = blocked {
            let (code, what) = if tool.side_effects {
                (
                    Code::W103,
                    format!(
                        "side-effecting tool `{}` can never be confirmed or run: {why}",
                        tool.name
                    ),
                )
            } else {
                (
                    Code::W104,
                    format!("tool `{}` can never run: {why}", tool.name),
                )
            };
            let span = if span.end_line == span.line {
                span
            } else {
                Span {
                    end_line: span.line,
                    end_col: span.col + 1,
                    ..span
                }
            };
            ctx.d.push(Diagnostic::new(code, what).at(span).help(
                if policy.deny.contains(&tool.name) {
                    format!(
                        "remove `{}` from `policy.deny`, or delete the tool",
                        tool.name
                    )
                } else {
                    format!("add `{}` to `policy.allow`, or delete the tool", tool.name)
                },
            ));
        }
    }
    policy
}

pub(crate) fn parse_host_rule(text: &str) -> Option<HostRule> {
    let t = text.trim();
    if t.is_empty() || t.contains("://") || t.contains('/') || t.contains(char::is_whitespace) {
        return None;
    }
    // `[::1]:8080`, `127.0.0.1:8080`, `example.com`
    let (host, port) = if let Some(rest) = t.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse::<u16>().ok()?),
            None if after.is_empty() => None,
            None => return None,
        };
        (h.to_string(), port)
    } else if let Some((h, p)) = t.rsplit_once(':') {
        (h.to_string(), Some(p.parse::<u16>().ok()?))
    } else {
        (t.to_string(), None)
    };
    if host.is_empty() {
        return None;
    }
    Some(HostRule {
        host: host.to_ascii_lowercase(),
        port,
    })
}

/// Scripted arguments that the tool would reject are a spec bug, caught here rather than in a run.
fn check_scripted_calls(tools: &[crate::registry::Tool], ctx: &mut Ctx) {
    if ctx.trusted {
        // Checked before; validating them would build the validators a run may never need.
        ctx.pending_call_checks.clear();
        return;
    }
    // The first tool of each name, as a search from the start would find it.
    let mut by_name = std::collections::HashMap::with_capacity(tools.len());
    for tool in tools {
        by_name.entry(tool.name.as_str()).or_insert(tool);
    }
    for (name, args, node) in std::mem::take(&mut ctx.pending_call_checks) {
        let Some(tool) = by_name.get(name.as_str()) else {
            continue;
        };
        let Ok(validator) = tool.validator() else {
            continue;
        };
        for err in validator.iter_errors(&args) {
            let path = err.instance_path().as_str().to_string();
            let at = node.locate(&path);
            let shown = if path.is_empty() {
                "arguments".to_string()
            } else {
                format!("`{}`", path.trim_start_matches('/'))
            };
            ctx.d.push(
                Diagnostic::new(Code::E019, format!("scripted call to `{name}` has invalid {shown}: {}", crate::arguments::error_text(&err, true)))
                    .at(at.span)
                    .help("fix the arguments to match the tool's `input` schema, or add `malformed: true` to the call if this is on purpose"),
            );
        }
    }
}
