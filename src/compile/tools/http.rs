//! `kind: http`: the request (method, URL template and origin, query, headers, body), the
//! response limits, declared faults, and the allowed hosts.

use super::{error_kind, schema_properties};
use crate::codes::Code;
use crate::compile::template_check::{check_tvalue, compile_text, Roots};
use crate::compile::url_template;
use crate::compile::Ctx;
use crate::diag::{Diagnostic, Span};
use crate::registry::{Fault, HttpTool, Policy, UrlOrigin};
use crate::specfile::keys::{self};
use crate::specfile::read::{expected, seq, Obj};
use crate::specfile::yaml::{Node, Value};
use crate::templates::{TValue, TemplateId};

const DEFAULT_MAX_BYTES: u64 = 4 << 20;

const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

pub(super) fn compile_http(
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
    let secrets = {
        let mut ids = vec![&url];
        ids.extend(headers.iter().map(|(_, id)| id));
        ids.extend(&body_text);
        for tv in query.iter().map(|(_, tv)| tv).chain(&body) {
            ctx.templates.ids_of(tv, &mut ids);
        }
        ctx.templates.secrets_named(ids)
    };
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
            secrets,
            literal_url: Default::default(),
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
                    Diagnostic::new(Code::E031, format!("unsupported HTTP method `{}`", m.value))
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
                Code::E021,
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
                Code::E020,
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
                if let Some((why, help)) = refused_header(&k.name) {
                    ctx.d.push(
                        Diagnostic::new(
                            Code::E045,
                            format!("header `{}` {why}", k.name.escape_debug()),
                        )
                        .at(k.span)
                        .help(help),
                    );
                    continue;
                }
                if let Some(id) = compile_text(&text, v, roots, ctx) {
                    headers.push((k.name.clone(), id));
                }
            }
        }
    }
    headers
}

/// Headers that route or frame the request (RFC 9110 §7.2, §7.6.1, RFC 9112 §6) belong to the
/// client: a spec that sets one could send an allowed host's request to another virtual host.
const PROTECTED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
];

/// Why a spec may not set this header, if it may not, and what to do instead.
pub(crate) fn refused_header(name: &str) -> Option<(&'static str, &'static str)> {
    let lower = name.to_ascii_lowercase();
    if PROTECTED_HEADERS.contains(&lower.as_str()) || lower.starts_with("proxy-") {
        return Some((
            "is set by toolrun (it routes or frames the request), never by a spec",
            "remove it: toolrun sets the host from the URL and frames the body itself; to reach another host, write it in the URL",
        ));
    }
    // RFC 9110 §5.1: a field name is a token.
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Some((
            "is not a valid header name",
            "a header name is an HTTP token: letters, digits and `-` (or one of !#$%&'*+.^_|~), with no space, colon or line break",
        ));
    }
    None
}

fn http_body(req: &Obj, roots: &Roots, ctx: &mut Ctx) -> (Option<TValue>, Option<TemplateId>) {
    let body = req
        .get("body")
        .and_then(|b| check_tvalue(b.to_json(), b, roots, ctx));
    let body_text = req.get("body_text").and_then(|n| {
        if req.has("body") {
            ctx.d.push(
                Diagnostic::new(
                    Code::E013,
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
                Diagnostic::new(Code::E030, format!("`{}` is not a JSON Pointer", p.value))
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

pub(crate) fn compile_faults(node: &Node, ctx: &mut Ctx) -> Vec<Fault> {
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
                Diagnostic::new(Code::E035, "a fault needs exactly one of `fail_first`, `timeout`, `http_status`, `oversized_output`, `delay`")
                    .at(at)
                    .help("e.g. `- { fail_first: 2, kind: timeout }` or `- { http_status: 503 }`"),
            );
            continue;
        }
        if let Some(n) = f.count("fail_first", 1, &mut ctx.d) {
            let Some(kind) = error_kind(&f, Code::E035, ctx) else {
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
                    Diagnostic::new(Code::E035, format!("{} is not an HTTP status", s.value))
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

/// An `http` tool's literal host must be allowed; a host chosen by a template must be listed.
pub(super) fn check_http_host(name: &str, tool: &Node, policy: &Policy, ctx: &mut Ctx) {
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
                Diagnostic::new(Code::E020, format!("tool `{name}` calls host `{host}`, which `policy.network.allow_hosts` does not list"))
                    .at(url_node.span)
                    .help(format!("add `{host}` to `policy.network.allow_hosts`, or change the URL")),
            );
        }
        url_template::Shape::Secrets(_) | url_template::Shape::WholeArgument
            if policy.allow_hosts.is_empty() =>
        {
            ctx.d.push(
                Diagnostic::new(Code::E020, format!("tool `{name}` lets a template choose the host"))
                    .at(url_node.span)
                    .help("write the host literally, or list the hosts it may reach in `policy.network.allow_hosts`"),
            );
        }
        _ => {}
    }
}
