//! `check --env-report`: every environment variable a spec reads (`secrets:`, a model's
//! `api_key_env`), where it is declared, what uses it and where a run may send it. A reviewer of
//! a spec from a pull request sees which variables a run with `--allow-network` or `--record`
//! would send to which hosts, without running anything.

use crate::registry::{HostRule, McpServer, ModelKind, Registry, ToolKind, UrlOrigin};
use crate::specfile::yaml::{Node, Value as Yaml};
use crate::specfile::Source;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// One environment variable of one spec.
pub(crate) struct EnvUse {
    variable: String,
    /// `secret` (a `secrets:` entry) or `api_key` (a model's `api_key_env`).
    kind: &'static str,
    /// `file:line:col` of the name where the spec declares it.
    declared_at: String,
    /// `(kind, name)` of what reads it: `tool`, `mcp_server`, `model`.
    used_by: Vec<(&'static str, String)>,
    /// Hosts (`host` or `host:port`) a run may send it to.
    hosts: BTreeSet<String>,
    /// Programs a run starts with it in their environment (stdio MCP servers' `env:`).
    processes: BTreeSet<String>,
    /// Where a host is not written in the spec: what decides it.
    notes: BTreeSet<String>,
}

/// The variables `registry` reads: its secrets (by name), then its models' API keys.
pub(crate) fn collect(registry: &Registry, source: &Source) -> Vec<EnvUse> {
    let tree = crate::specfile::yaml::parse_keeping_duplicates(&source.text)
        .ok()
        .map(|(tree, _)| tree);
    let at = |pointer: &str, value: &str| -> String {
        let node = tree.as_ref().map(|t| find(t, pointer, value));
        match node {
            Some(n) => format!("{}:{}:{}", source.display, n.span.line, n.span.col),
            None => source.display.clone(),
        }
    };
    let mut out: Vec<EnvUse> = registry
        .secrets
        .iter()
        .map(|name| EnvUse::new(name, "secret", at("/secrets", name)))
        .collect();
    for t in &registry.tools {
        match &t.kind {
            ToolKind::Http(h) => {
                let hosts = http_hosts(registry, &h.origin);
                // A redirect to another origin repeats no secret: headers holding one are
                // dropped, and a body rendered from one is not sent on (the call fails).
                for name in &h.secrets {
                    if let Some(u) = out.iter_mut().find(|u| &u.variable == name) {
                        u.used(("tool", t.name.clone()), &hosts);
                    }
                }
            }
            ToolKind::Mcp(m) => server_uses(registry, &m.server, &mut out),
            _ => {}
        }
    }
    for w in &registry.wildcards {
        server_uses(registry, &w.server, &mut out);
    }
    if let Some(auth) = &registry.serve_auth {
        // Introspection's client credentials go to the issuer's endpoint, on an allowed host.
        let ids = auth.client_id.iter().chain(&auth.client_secret);
        let allowed = crate::tools::http::allowed_hosts(registry);
        let hosts = Hosts::Listed(allowed.iter().map(rule).collect());
        for name in registry.templates.secrets_named(ids) {
            if let Some(u) = out.iter_mut().find(|u| u.variable == name) {
                u.used(("serve_auth", "introspection".into()), &hosts);
            }
        }
    }
    for m in &registry.models {
        let (ModelKind::OpenAi(live) | ModelKind::Anthropic(live)) = &m.kind else {
            continue;
        };
        let Some(var) = &live.api_key_env else {
            continue;
        };
        let pointer = format!("/models/{}/api_key_env", m.name.replace('~', "~0"));
        let mut u = EnvUse::new(var, "api_key", at(&pointer, var));
        let host = url::Url::parse(&live.base_url).ok().and_then(|u| {
            u.host_str()
                .map(|h| with_port(h, u.port_or_known_default()))
        });
        let hosts: Vec<String> = host.into_iter().collect();
        u.used(("model", m.name.clone()), &Hosts::Listed(hosts));
        out.push(u);
    }
    out
}

/// The node spelling `value` under `pointer` (an item of a list, or the value itself).
fn find<'n>(tree: &'n Node, pointer: &str, value: &str) -> &'n Node {
    let node = tree.locate(pointer);
    match &node.value {
        Yaml::Seq(items) => items
            .iter()
            .find(|i| i.as_str() == Some(value))
            .unwrap_or(node),
        _ => node,
    }
}

fn with_port(host: &str, port: Option<u16>) -> String {
    match port {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

fn rule(r: &HostRule) -> String {
    with_port(&r.host, r.port)
}

enum Hosts {
    Listed(Vec<String>),
    Process(String),
    /// Not written in the spec: the note says what decides it.
    Unknown(String),
}

/// Where an HTTP tool's request may go: its literal host, else any host the allow-list names.
fn http_hosts(registry: &Registry, origin: &UrlOrigin) -> Hosts {
    if let UrlOrigin::Literal(Some(r)) = origin {
        return Hosts::Listed(vec![rule(r)]);
    }
    if !registry.policy.allow_hosts.is_empty() {
        return Hosts::Listed(registry.policy.allow_hosts.iter().map(rule).collect());
    }
    Hosts::Unknown(match origin {
        UrlOrigin::Secrets(names) => format!(
            "a host written in secret(s) {} (policy.network.allow_hosts is not set)",
            names.join(", ")
        ),
        _ => "a host the URL's template decides".to_string(),
    })
}

/// A server's headers go to its host; a stdio server's `env:` to the program it starts.
fn server_uses(registry: &Registry, server: &McpServer, out: &mut [EnvUse]) {
    let templates = &registry.templates;
    let by = ("mcp_server", server.name.clone());
    let headers = templates.secrets_named(server.headers.iter().map(|(_, id)| id));
    let hosts = match &server.host {
        Some(r) => Hosts::Listed(vec![rule(r)]),
        None => Hosts::Unknown(format!("the server at {}", server.url)),
    };
    for name in headers {
        if let Some(u) = out.iter_mut().find(|u| u.variable == name) {
            u.used(by.clone(), &hosts);
        }
    }
    if let Some(oauth) = &server.oauth {
        oauth_uses(registry, server, oauth, out);
    }
    let Some(stdio) = &server.stdio else {
        return;
    };
    let program = stdio.argv.first().cloned().unwrap_or_default();
    for name in templates.secrets_named(stdio.env.iter().map(|(_, id)| id)) {
        if let Some(u) = out.iter_mut().find(|u| u.variable == name) {
            u.used(by.clone(), &Hosts::Process(program.clone()));
        }
    }
}

/// The OAuth client's credentials go to the authorization server, which the MCP server's
/// protected-resource metadata names at run time: the spec cannot say which host that is. A
/// server without that metadata (2025-03-26) is its own authorization server, hence its host.
fn oauth_uses(
    registry: &Registry,
    server: &McpServer,
    oauth: &crate::registry::oauth::OAuthConfig,
    out: &mut [EnvUse],
) {
    let by = ("mcp_server", server.name.clone());
    let discovered = format!(
        "the authorization server the MCP server `{}` names (discovered at run time)",
        server.name
    );
    let signed = format!(
        "assertions signed with it go to the authorization server the MCP server `{}` names (discovered at run time)",
        server.name
    );
    let credentials = [
        (&oauth.client_id, &discovered),
        (&oauth.client_secret, &discovered),
        (&oauth.private_key, &signed),
    ];
    for (id, note) in credentials {
        for name in registry.templates.secrets_named(id.iter()) {
            let Some(u) = out.iter_mut().find(|u| u.variable == name) else {
                continue;
            };
            // A run refuses an authorization server outside a spec's allow list.
            let discovered = match registry.policy.allow_hosts.is_empty() {
                true => Hosts::Unknown(note.clone()),
                false => Hosts::Listed(registry.policy.allow_hosts.iter().map(rule).collect()),
            };
            u.used(by.clone(), &discovered);
            match &server.host {
                Some(r) => u.used(by.clone(), &Hosts::Listed(vec![rule(r)])),
                None => u.used(
                    by.clone(),
                    &Hosts::Unknown(format!("the server at {}", server.url)),
                ),
            }
        }
    }
}

impl EnvUse {
    fn new(variable: &str, kind: &'static str, declared_at: String) -> EnvUse {
        EnvUse {
            variable: variable.to_string(),
            kind,
            declared_at,
            used_by: Vec::new(),
            hosts: BTreeSet::new(),
            processes: BTreeSet::new(),
            notes: BTreeSet::new(),
        }
    }

    fn used(&mut self, by: (&'static str, String), hosts: &Hosts) {
        if !self.used_by.contains(&by) {
            self.used_by.push(by);
        }
        match hosts {
            Hosts::Listed(h) => self.hosts.extend(h.iter().cloned()),
            Hosts::Process(p) => {
                self.processes.insert(p.clone());
            }
            Hosts::Unknown(why) => {
                self.notes.insert(why.clone());
            }
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "variable": self.variable,
            "kind": self.kind,
            "declared_at": self.declared_at,
            "used_by": self.used_by.iter().map(|(kind, name)| json!({ "kind": kind, "name": name })).collect::<Vec<_>>(),
            "hosts": self.hosts,
            "processes": self.processes,
            "unknown_hosts": self.notes,
        })
    }

    fn destinations(&self) -> String {
        let mut parts: Vec<String> = self.hosts.iter().cloned().collect();
        parts.extend(
            self.processes
                .iter()
                .map(|p| format!("local process `{p}`")),
        );
        parts.extend(self.notes.iter().cloned());
        if parts.is_empty() {
            "(read, sent nowhere)".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// The report as a table for people: one line per variable.
pub(crate) fn human(uses: &[EnvUse], not_reported: &[String]) -> String {
    let skipped: String = not_reported
        .iter()
        .map(|s| format!("{s}: not reported (the spec has errors, and cannot run)\n"))
        .collect();
    if uses.is_empty() {
        return format!("no environment variables read\n{skipped}");
    }
    let rows: Vec<[String; 4]> = uses
        .iter()
        .map(|u| {
            let by: Vec<String> = u
                .used_by
                .iter()
                .map(|(kind, name)| format!("{} {name}", kind.replace('_', " ")))
                .collect();
            [
                u.variable.clone(),
                u.declared_at.clone(),
                if by.is_empty() {
                    "-".to_string()
                } else {
                    by.join(", ")
                },
                u.destinations(),
            ]
        })
        .collect();
    let head = ["VARIABLE", "DECLARED AT", "USED BY", "MAY BE SENT TO"];
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([head[i].len()])
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2)];
    let line = |cells: [&str; 4]| {
        format!(
            "{:w0$}  {:w1$}  {:w2$}  {}\n",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        )
    };
    let mut out = line(head);
    for r in &rows {
        out.push_str(&line([&r[0], &r[1], &r[2], &r[3]]));
    }
    out.push_str(&skipped);
    out
}
