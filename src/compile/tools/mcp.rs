//! `kind: mcp` entries. One entry names a remote MCP server and the tools used from it, so it
//! compiles to one `Tool` per `tools:` entry, all sharing one `McpServer`. Everything here is
//! checked offline; what the server really offers is checked when a run connects.

use super::http::http_headers;
use super::{check_tool_name, Common};
use crate::arguments::LazyValidator;
use crate::codes::Code;
use crate::compile::schema_check::compile_input_schema;
use crate::compile::template_check::{compile_text, Roots};
use crate::compile::Ctx;
use crate::diag::{Diagnostic, Span};
use crate::registry::{
    Elicitation, HostRule, McpServer, McpTool, Policy, StdioCommand, Tool, ToolKind,
};
use crate::specfile::keys;
use crate::specfile::read::{missing_at, seq, string, Obj, Spanned};
use crate::specfile::yaml::{Node, Value};
use serde_json::json;
use std::sync::Arc;

/// One entry of `tools:` as written.
struct Entry {
    remote: Spanned<String>,
    local: Spanned<String>,
    description: Option<String>,
    /// The pinned schema and the validator built while checking it.
    input: Option<(serde_json::Value, Option<jsonschema::Validator>)>,
    side_effects: Option<bool>,
}

pub(super) fn compile_group(
    group: &str,
    name_span: Span,
    obj: &Obj,
    common: &Common,
    confirm: &[Spanned<String>],
    ctx: &mut Ctx,
) -> Vec<Tool> {
    let what = format!("tool `{group}`");
    let endpoint = endpoint(obj, &what, ctx);
    let headers = http_headers(obj, &Roots::secrets(), ctx);
    let Some(list) = obj.get("tools") else {
        ctx.d.push(
            missing_at(name_span, "tools", &what)
                .help("list the server's tools to use, e.g. `tools: [search_notes]`"),
        );
        return Vec::new();
    };
    let every = list.as_str() == Some("*");
    if every {
        // `check` never contacts a server: what the entry brings in is unknown until a run.
        ctx.d.push(
            Diagnostic::new(
                Code::W114,
                format!("the tools of MCP server `{group}` (`tools: \"*\"`) are known only when a run lists them: tool names in `policy`, tests and scripts that refer to them are not checked offline, nor are their input schemas"),
            )
            .at(list.span)
            .label("unknown offline")
            .help("list the tools the spec uses, e.g. `tools: [search_notes, read_note]`, to have them checked offline"),
        );
    }
    let entries = match every {
        true => Vec::new(),
        false => entries(list, &what, ctx),
    };
    // Read (and type-checked) with the common keys; here only whether the spec said it.
    let group_side_effects = match obj.get("side_effects").map(|n| &n.value) {
        Some(Value::Bool(b)) => Some(*b),
        _ => None,
    };
    let Some((url, host, stdio)) = endpoint else {
        return Vec::new();
    };
    let oauth = super::mcp_auth::compile_auth(obj, &what, stdio.is_some(), ctx);
    let server = Arc::new(McpServer {
        name: group.to_string(),
        url,
        host,
        stdio,
        headers,
        tools: entries
            .iter()
            .map(|e| (e.remote.value.clone(), e.local.value.clone()))
            .collect(),
        // A program that takes long to start (a Python SDK server, `npx` fetching a package)
        // need not raise the bound of every call: `startup_timeout:` bounds connecting alone.
        timeout: obj
            .duration("startup_timeout", &mut ctx.d)
            .map_or_else(|| common.timeout(), |t| t.value),
        elicitation: match obj.string("elicitation", &mut ctx.d) {
            Some(e) if e.value == "defaults" => Elicitation::Defaults,
            _ => Elicitation::Decline,
        },
        protocol: obj.string("protocol", &mut ctx.d).map(|p| p.value.clone()),
        oauth,
    });
    if every {
        ctx.wildcards
            .push(common.wildcard(server, group_side_effects, confirm));
        return Vec::new();
    }
    entries
        .into_iter()
        .map(|e| {
            let pinned_input = e.input.is_some();
            let declared = e.side_effects.or(group_side_effects);
            let (schema, validator) = match e.input {
                Some((schema, prebuilt)) => (
                    schema,
                    prebuilt.map(LazyValidator::built).unwrap_or_default(),
                ),
                // Until a run lists the server's tools; `Tool::input_schema` then answers.
                None => (json!({ "type": "object" }), LazyValidator::default()),
            };
            let kind = ToolKind::Mcp(Box::new(McpTool {
                server: server.clone(),
                remote_name: e.remote.value,
                pinned_input,
                pinned_description: e.description.is_some(),
                listed: Default::default(),
                listed_validator: Default::default(),
                declared_side_effects: declared,
            }));
            let mut tool = common.tool(
                &e.local.value,
                e.description.unwrap_or_default(),
                schema,
                validator,
                false,
                kind,
                confirm,
            );
            if let Some(d) = e.side_effects {
                tool.side_effects = d;
                tool.confirm = d || confirm.iter().any(|c| c.value == tool.name);
                tool.idempotent &= !d;
            }
            tool
        })
        .collect()
}

/// Where the server is: `url:` (streamable HTTP) or `command:` (a program spoken to over stdio),
/// exactly one of them.
fn endpoint(
    obj: &Obj,
    what: &str,
    ctx: &mut Ctx,
) -> Option<(String, Option<HostRule>, Option<StdioCommand>)> {
    let Some(command) = obj.get("command") else {
        if let Some(env) = obj.get("env") {
            ctx.d.push(
                Diagnostic::new(Code::E013, "`env` is for a stdio server (`command:`)")
                    .at(env.span)
                    .help("remove `env`; an HTTP server gets credentials through `headers:`"),
            );
        }
        if !obj.has("url") {
            ctx.d.push(
                missing_at(obj.node.span, "url", what)
                    .help("give the server's streamable-HTTP endpoint (`url:`), or the program of a stdio server (`command: [npx, -y, \"@modelcontextprotocol/server-filesystem\", ./data]`)"),
            );
            return None;
        }
        let url = obj.require_string("url", what, &mut ctx.d)?;
        let (url, host) = server_url(&url, ctx)?;
        return Some((url, Some(host), None));
    };
    if let Some(url) = obj.get("url") {
        ctx.d.push(
            Diagnostic::new(Code::E013, format!("{what} has both `url` and `command`"))
                .at(url.span)
                .help("keep `url:` for a streamable-HTTP server, or `command:` for a stdio one"),
        );
    }
    if let Some(headers) = obj.get("headers") {
        ctx.d.push(
            Diagnostic::new(Code::E013, "`headers` is for a streamable-HTTP server (`url:`)")
                .at(headers.span)
                .help("pass a stdio server its credentials in `env:`, e.g. `env: {API_KEY: \"{{ secrets.API_KEY }}\"}`"),
        );
    }
    let argv = command_line(command, what, ctx)?;
    let env = stdio_env(obj, ctx);
    let at = format!(
        "{}:{}:{}",
        ctx.source.display, command.span.line, command.span.col
    );
    let url = format!("stdio: {}", argv.join(" "));
    let dir = ctx.root.clone();
    Some((url, None, Some(StdioCommand { argv, env, dir, at })))
}

/// `command:` is an argument list, never a shell line, and not a template: what runs is what the
/// spec says, so `--allow-exec` can judge it.
fn command_line(node: &Node, what: &str, ctx: &mut Ctx) -> Option<Vec<String>> {
    let items = seq(node, &format!("`command` of {what}"), &mut ctx.d)?;
    let mut argv = Vec::new();
    for item in items {
        let arg = string(item, "an argument of `command`", &mut ctx.d)?;
        if arg.value.contains("{{") || arg.value.contains("{%") {
            ctx.d.push(
                Diagnostic::new(Code::E007, "`command` of an `mcp` tool is not a template")
                    .at(arg.span)
                    .help("write the program and its arguments as they are; pass secrets in `env:` with `{{ secrets.NAME }}`"),
            );
            return None;
        }
        if arg.value.contains('\0') {
            ctx.d.push(
                Diagnostic::new(
                    Code::E007,
                    "an argument of `command` contains a NUL character",
                )
                .at(arg.span),
            );
            return None;
        }
        argv.push(arg.value);
    }
    if argv.first().is_none_or(|p| p.trim().is_empty()) {
        ctx.d.push(
            Diagnostic::new(Code::E007, format!("`command` of {what} names no program"))
                .at(node.span)
                .help("write the program and its arguments as a list, e.g. `command: [npx, -y, \"@modelcontextprotocol/server-filesystem\", ./data]`"),
        );
        return None;
    }
    Some(argv)
}

/// `env:` of a stdio server: its values are templates over `secrets`, its names plain.
fn stdio_env(obj: &Obj, ctx: &mut Ctx) -> Vec<(String, crate::templates::TemplateId)> {
    let Some(node) = obj.get("env") else {
        return Vec::new();
    };
    let Some(map) = Obj::open(node, "`env`", &mut ctx.d) else {
        return Vec::new();
    };
    let mut env = Vec::new();
    for (k, v) in map.entries {
        if k.name.is_empty() || k.name.contains(['=', '\0']) {
            ctx.d.push(
                Diagnostic::new(
                    Code::E007,
                    format!("`{}` cannot name an environment variable", k.name),
                )
                .at(v.span)
                .help("an environment variable's name has no `=` and is not empty"),
            );
            continue;
        }
        // The run refuses it unless the person running toolrun names it; `check` cannot know
        // the command line, so it says so before a run does.
        if crate::net::exec_env::chooses_code(&k.name) {
            ctx.d.push(
                Diagnostic::new(
                    Code::W115,
                    format!("`env:` sets `{}`, which chooses what code the server runs: a run refuses to start the server unless `--allow-env {}` is given", k.name, k.name),
                )
                .at(k.span)
                .label("refused without --allow-env")
                .help(format!("remove `{}` from `env:`, or run with `--allow-env {}` if you trust what it points to", k.name, k.name)),
            );
        }
        let text = match &v.value {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            _ => {
                ctx.d.push(crate::specfile::read::expected(
                    v,
                    "a string",
                    &format!("environment variable `{}`", k.name),
                ));
                continue;
            }
        };
        if let Some(id) = compile_text(&text, v, &Roots::secrets(), ctx) {
            env.push((k.name.clone(), id));
        }
    }
    env
}

/// The endpoint, written literally: its host is part of what `check` holds to the allow-list.
fn server_url(url: &Spanned<String>, ctx: &mut Ctx) -> Option<(String, HostRule)> {
    let text = url.value.trim();
    let refuse = |ctx: &mut Ctx, msg: String, help: &str| {
        ctx.d.push(
            Diagnostic::new(Code::E021, msg)
                .at(url.span)
                .help(help.to_string()),
        );
        None
    };
    if text.contains("{{") || text.contains("{%") {
        return refuse(
            ctx,
            format!("the URL of an `mcp` tool is not a template: `{text}`"),
            "write the server's endpoint as it is; put credentials in `headers:` with `{{ secrets.NAME }}`",
        );
    }
    let parsed =
        match url::Url::parse(text) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => u,
            _ => return refuse(
                ctx,
                format!("URL `{text}` must start with http:// or https://"),
                "write the server's streamable-HTTP endpoint, e.g. `https://mcp.example.com/mcp`",
            ),
        };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return refuse(
            ctx,
            "the URL of an `mcp` tool carries credentials".to_string(),
            "declare a secret and send it in `headers:` instead, where it is masked",
        );
    }
    let host = parsed
        .host_str()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let rule = HostRule {
        host,
        port: parsed.port(),
    };
    Some((parsed.to_string(), rule))
}

fn entries(list: &Node, what: &str, ctx: &mut Ctx) -> Vec<Entry> {
    let Some(items) = seq(list, &format!("`tools` of {what}"), &mut ctx.d) else {
        return Vec::new();
    };
    if items.is_empty() {
        ctx.d.push(
            Diagnostic::new(Code::E007, format!("`tools` of {what} lists no tools"))
                .at(list.span)
                .help("name the server's tools to use, e.g. `tools: [search_notes]`"),
        );
    }
    let mut out: Vec<Entry> = Vec::new();
    for item in items {
        let Some(entry) = entry(item, what, ctx) else {
            continue;
        };
        if out.iter().any(|e| e.remote.value == entry.remote.value) {
            ctx.d.push(
                Diagnostic::new(
                    Code::E005,
                    format!("remote tool `{}` is listed twice", entry.remote.value),
                )
                .at(entry.remote.span)
                .help("list each of the server's tools once"),
            );
            continue;
        }
        out.push(entry);
    }
    out
}

fn entry(item: &Node, what: &str, ctx: &mut Ctx) -> Option<Entry> {
    if let Value::Str(_) = &item.value {
        let remote = string(item, "a remote tool name", &mut ctx.d)?;
        check_tool_name(&remote.value, remote.span, ctx);
        return Some(Entry {
            local: remote.clone(),
            remote,
            description: None,
            input: None,
            side_effects: None,
        });
    }
    let place = format!("an entry of `tools` of {what}");
    let obj = Obj::new(item, &place, keys::MCP_TOOL, &mut ctx.d)?;
    let remote = obj.require_string("name", &place, &mut ctx.d)?;
    let local = obj
        .string("as", &mut ctx.d)
        .unwrap_or_else(|| remote.clone());
    check_tool_name(&local.value, local.span, ctx);
    let description = obj.string("description", &mut ctx.d).map(|d| d.value);
    let input = match obj.get("input") {
        Some(n) => Some(compile_input_schema(n, &local.value, ctx)?),
        None => None,
    };
    let side_effects = obj.bool("side_effects", &mut ctx.d).map(|b| b.value);
    Some(Entry {
        remote,
        local,
        description,
        input,
        side_effects,
    })
}

/// `tools: "*"`: every tool the server lists, known only once a run lists them.
pub(crate) fn takes_every_tool(entry: &Node) -> bool {
    let tools = Obj::peek(entry, keys::TOOL_MCP).and_then(|e| e.get("tools"));
    tools.and_then(Node::as_str) == Some("*")
}

/// The registry names an entry gives, read before any tool is compiled (so `policy` and tests
/// can name them): `as:` or the remote name.
pub(crate) fn local_names(entry: &Node) -> Vec<String> {
    let tools = Obj::peek(entry, keys::TOOL_MCP).and_then(|e| e.get("tools"));
    let Some(Value::Seq(items)) = tools.map(|n| &n.value) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| match &item.value {
            Value::Str(s) => Some(s.clone()),
            _ => {
                let item = Obj::peek(item, keys::MCP_TOOL)?;
                let name = item.get("as").or_else(|| item.get("name"));
                name.and_then(Node::as_str).map(str::to_string)
            }
        })
        .collect()
}

/// An `mcp` server's host obeys the same allow-list as an `http` tool's.
pub(super) fn check_mcp_host(name: &str, tool: &Node, policy: &Policy, ctx: &mut Ctx) {
    let Some(url_node) = Obj::peek(tool, keys::TOOL_MCP).and_then(|t| t.get("url")) else {
        return;
    };
    let Some(url) = url_node
        .as_str()
        .and_then(|u| url::Url::parse(u.trim()).ok())
    else {
        return;
    };
    let Some(host) = policy.unlisted_host(&url) else {
        return;
    };
    ctx.d.push(
        Diagnostic::new(
            Code::E020,
            format!("tool `{name}` calls host `{host}`, which `policy.network.allow_hosts` does not list"),
        )
        .at(url_node.span)
        .help(format!("add `{host}` to `policy.network.allow_hosts`, or change the URL")),
    );
}
