//! `kind: mock`: scripted responses chosen by the arguments, checked for ones that can never
//! match.

use super::{error_kind, schema_properties};
use crate::codes::Code;
use crate::compile::template_check::{check_tvalue, compile_text, Roots};
use crate::compile::Ctx;
use crate::diag::{did_you_mean, Diagnostic, Span};
use crate::registry::{MockOutcome, MockResponse};
use crate::specfile::keys::{self};
use crate::specfile::read::{expected, missing, seq, Obj};
use crate::specfile::yaml::{Node, Value};
use crate::templates::TValue;
use crate::vocab::ErrorKind;

pub(super) fn compile_mock(
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
            Diagnostic::new(Code::E029, format!("{what} has no responses"))
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
        let notify = mock_notify(&r, &roots, ctx);
        let content = mock_content(&r, &roots, ctx);
        if let Some(outcome) = outcome {
            out.push(MockResponse {
                when,
                outcome,
                notify,
                content,
            });
        }
    }
    Some(out)
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
                crate::arguments::is_subset(w, &serde_json::Value::Object(later.clone()))
            })
            .map(|(_, span)| *span),
        _ => None,
    };
    if let Some(covering) = covering {
        let line = covering.line;
        ctx.d.push(
            Diagnostic::new(
                Code::W107,
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
                Code::W107,
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
                                Code::E029,
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
        (None, Some(_)) if r.has("content") => {
            let at = r.key("content").map(|k| k.span).unwrap_or(item.span);
            ctx.d.push(
                Diagnostic::new(Code::E029, "a mock response has both `content` and `error`")
                    .at(at)
                    .help("an error is its message; put the content in another response"),
            );
            None
        }
        (None, Some(err)) => compile_mock_error(err, roots, ctx),
        (Some(_), Some(_)) => {
            let at = r.key("error").map(|k| k.span).unwrap_or(item.span);
            ctx.d.push(
                Diagnostic::new(Code::E029, "a mock response has both `result` and `error`")
                    .at(at)
                    .label("`result` is set too")
                    .help("keep one of them; add another response for the other case"),
            );
            None
        }
        (None, None) if r.has("content") => {
            check_tvalue(serde_json::Value::Null, item, roots, ctx).map(MockOutcome::Result)
        }
        (None, None) => {
            ctx.d.push(
                Diagnostic::new(
                    Code::E029,
                    "a mock response needs `result`, `content` or `error`",
                )
                .at(item.span)
                .help("add `result: ...` or `error: \"...\"`"),
            );
            None
        }
    }
}

/// `content:`: MCP content items, each with the fields its `type` needs, so that what is
/// served is valid MCP.
fn mock_content(r: &Obj, roots: &Roots, ctx: &mut Ctx) -> Option<TValue> {
    let node = r.get("content")?;
    let items = seq(node, "`content`", &mut ctx.d)?;
    let mut ok = !items.is_empty();
    if items.is_empty() {
        ctx.d.push(
            Diagnostic::new(Code::E029, "`content` is empty")
                .at(node.span)
                .help("add an item such as `- { type: text, text: hello }`"),
        );
    }
    for item in items {
        // MCP's own fields, free-form beyond what each type needs.
        let Some(fields) = Obj::open(item, "a content item", &mut ctx.d) else {
            ok = false;
            continue;
        };
        let kind = fields
            .get("type")
            .and_then(Node::as_str)
            .unwrap_or_default();
        let needs: &[&str] = match kind {
            "text" => &["text"],
            "image" | "audio" => &["data", "mimeType"],
            "resource" => &["resource"],
            "resource_link" => &["uri", "name"],
            _ => {
                let types = crate::vocab::MCP_CONTENT_TYPES;
                let hint = did_you_mean(kind, types.iter().copied())
                    .map(|h| format!("{h}; "))
                    .unwrap_or_default();
                ctx.d.push(
                    Diagnostic::new(Code::E029, format!("unknown content type `{kind}`"))
                        .at(fields.get("type").map_or(item.span, |t| t.span))
                        .help(format!(
                            "{hint}MCP's content types are {}",
                            types.join(", ")
                        )),
                );
                ok = false;
                continue;
            }
        };
        for key in needs {
            if fields.get(key).is_none() {
                ctx.d
                    .push(missing(item, key, &format!("a `{kind}` content item")));
                ok = false;
            }
        }
        let resource = fields.get("resource").filter(|_| kind == "resource");
        if let Some(resource) = resource.and_then(Obj::peek_free) {
            if resource.get("uri").is_none()
                || (resource.get("text").is_none() && resource.get("blob").is_none())
            {
                ctx.d.push(
                    Diagnostic::new(
                        Code::E029,
                        "an embedded resource needs `uri` and `text` or `blob`",
                    )
                    .at(resource.node.span)
                    .help("write `resource: { uri: test://x, mimeType: text/plain, text: ... }`"),
                );
                ok = false;
            }
        }
    }
    if !ok {
        return None;
    }
    check_tvalue(node.to_json(), node, roots, ctx)
}

/// `notify:`: a list of `{log: {level, data, logger}}` and `{progress: {progress, total,
/// message}}`, checked here so that a served call never sends a malformed notification.
fn mock_notify(r: &Obj, roots: &Roots, ctx: &mut Ctx) -> Option<TValue> {
    let node = r.get("notify")?;
    let items = seq(node, "`notify`", &mut ctx.d)?;
    let mut ok = true;
    for item in items {
        let Some(n) = Obj::new(item, "a notification", keys::NOTIFY, &mut ctx.d) else {
            ok = false;
            continue;
        };
        let kinds = ["log", "progress", "reconnect"];
        if kinds.iter().filter(|k| n.has(k)).count() != 1 {
            ctx.d.push(
                Diagnostic::new(Code::E029, "a notification is exactly one of `log`, `progress` or `reconnect`")
                    .at(item.span)
                    .help("write `- log: { level: info, data: \"...\" }`, `- progress: { progress: 1, total: 2 }` or `- reconnect: true`"),
            );
            ok = false;
        } else if n.has("reconnect") {
            ok &= n.bool("reconnect", &mut ctx.d).is_some_and(|r| {
                if !r.value {
                    ctx.d.push(
                        Diagnostic::new(Code::E029, "`reconnect: false` asks for nothing")
                            .at(item.span)
                            .help("write `- reconnect: true`, or remove the item"),
                    );
                }
                r.value
            });
        } else if let Some(log) = n.get("log") {
            ok &= Obj::new(log, "`log`", keys::NOTIFY_LOG, &mut ctx.d).is_some_and(|l| {
                let _ = (l.get("data"), l.string("logger", &mut ctx.d));
                l.require_string("level", "`log`", &mut ctx.d)
                    .is_some_and(|level| {
                        let known = crate::vocab::MCP_LOG_LEVELS.contains(&level.value.as_str());
                        if !known {
                            ctx.d.push(
                                Diagnostic::new(
                                    Code::E029,
                                    format!("unknown log level `{}`", level.value),
                                )
                                .at(level.span)
                                .help(format!(
                                    "use one of {}",
                                    crate::vocab::MCP_LOG_LEVELS.join(", ")
                                )),
                            );
                        }
                        known
                    })
            });
        } else if let Some(node) = n.get("progress") {
            ok &=
                Obj::new(node, "`progress`", keys::NOTIFY_PROGRESS, &mut ctx.d).is_some_and(|p| {
                    let _ = (
                        p.number("total", &mut ctx.d),
                        p.string("message", &mut ctx.d),
                    );
                    if !p.has("progress") {
                        ctx.d.push(missing(node, "progress", "`progress`"));
                        return false;
                    }
                    p.number("progress", &mut ctx.d).is_some()
                });
        }
    }
    if !ok {
        return None;
    }
    check_tvalue(node.to_json(), node, roots, ctx)
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
            let kind = error_kind(&obj, Code::E029, ctx)?;
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
