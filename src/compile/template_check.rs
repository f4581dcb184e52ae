//! Templates are compiled at check time, and the variables they read are resolved: `args.x`
//! against the tool's input schema, `secrets.X` against `secrets:`.

use super::Ctx;
use crate::codes::Code;
use crate::diag::{did_you_mean, Diagnostic, Span};
use crate::specfile::yaml::Node;
use crate::templates::{TValue, TemplateId, TemplatePos};

pub(crate) struct Roots<'a> {
    pub(crate) names: &'static [&'static str],
    /// The tool's argument names, when `args` is a root.
    pub(crate) args: Option<&'a [String]>,
}

impl<'a> Roots<'a> {
    pub(crate) fn tool(args: Option<&'a [String]>) -> Roots<'a> {
        Roots {
            names: &["args", "query"],
            args,
        }
    }
    pub(crate) fn http(args: Option<&'a [String]>) -> Roots<'a> {
        Roots {
            names: &["args", "secrets", "query"],
            args,
        }
    }
    /// Headers of an `mcp` tool: sent when connecting, before any call has arguments.
    pub(crate) fn secrets() -> Roots<'static> {
        Roots {
            names: &["secrets"],
            args: None,
        }
    }
    pub(crate) fn script() -> Roots<'static> {
        Roots {
            names: &["query", "results", "last", "step", "turn"],
            args: None,
        }
    }
}

/// Lines inside a block scalar (`|` or `>`) start one line below the node's own start.
/// The spec position of a syntax error inside a template. The template is the string's value;
/// where it stands in the file depends on the scalar's style, so the mapping is checked against
/// the source text and falls back to the whole string when the two do not line up (escapes).
fn template_error_span(node: &Node, template: &str, pos: Option<TemplatePos>, ctx: &Ctx) -> Span {
    let Some(pos) = pos else { return node.span };
    let Some(first) = ctx.source.line(node.span.line) else {
        return node.span;
    };
    let at_node: String = first.chars().skip(node.span.col as usize - 1).collect();
    let point = |line: u32, col: u32| Span {
        line,
        col,
        end_line: line,
        end_col: col + 1,
    };
    let template_line = template.lines().nth(pos.line - 1).unwrap_or("");
    let multi_line = node.span.end_line > node.span.line;
    if multi_line || at_node.starts_with('|') || at_node.starts_with('>') {
        // Block scalar: its span starts at the indicator or at the first content line; template
        // line L is found where the source line ends with exactly that text.
        let candidates = [
            node.span.line + pos.line as u32 - 1,
            node.span.line + pos.line as u32,
        ];
        for line in candidates {
            let Some(text) = ctx.source.line(line) else {
                continue;
            };
            if !template_line.trim().is_empty() && text.ends_with(template_line) {
                let start = text.chars().count() - template_line.chars().count();
                return point(line, (start + pos.column) as u32);
            }
        }
        return node.span;
    }
    if pos.line != 1 {
        return node.span;
    }
    let quote = u32::from(at_node.starts_with('"') || at_node.starts_with('\''));
    let before: String = template_line.chars().take(pos.column - 1).collect();
    let in_source: String = at_node.chars().skip(quote as usize).collect();
    if in_source.starts_with(&before) {
        point(
            node.span.line,
            node.span.col + quote + pos.column as u32 - 1,
        )
    } else {
        node.span
    }
}

pub(crate) fn compile_text(
    text: &str,
    node: &Node,
    roots: &Roots,
    ctx: &mut Ctx,
) -> Option<TemplateId> {
    match ctx.templates.add(text) {
        Ok(id) => {
            check_variables(&id, node, roots, ctx);
            Some(id)
        }
        Err((msg, line)) => {
            let span = template_error_span(node, text, line, ctx);
            ctx.d.push(
                Diagnostic::new(Code::E016, format!("template syntax error: {msg}"))
                    .at(span)
                    .help("templates use minijinja (Jinja2) syntax: `{{ args.name }}`, `{% if ... %}...{% endif %}`"),
            );
            None
        }
    }
}

pub(crate) fn check_tvalue(
    json: serde_json::Value,
    node: &Node,
    roots: &Roots,
    ctx: &mut Ctx,
) -> Option<TValue> {
    match ctx.templates.compile_value(json) {
        Ok(tv) => {
            let mut ids = Vec::new();
            ctx.templates.ids_of(&tv, &mut ids);
            let ids: Vec<TemplateId> = ids.into_iter().cloned().collect();
            for id in &ids {
                check_variables(id, node, roots, ctx);
            }
            Some(tv)
        }
        Err(errors) => {
            for (pointer, msg, line) in errors {
                let at = node.locate(&pointer);
                let span = template_error_span(at, at.as_str().unwrap_or(""), line, ctx);
                ctx.d.push(
                    Diagnostic::new(Code::E016, format!("template syntax error: {msg}"))
                        .at(span)
                        .help("templates use minijinja (Jinja2) syntax: `{{ args.name }}`, `{% if ... %}...{% endif %}`"),
                );
            }
            None
        }
    }
}

/// The part of a one-line node that spells `needle`, so the caret sits under the variable
/// rather than the whole string; the whole node when the text is not found exactly once.
fn narrow(node: &Node, needle: &str, ctx: &Ctx) -> Span {
    let s = node.span;
    if s.line != s.end_line || needle.is_empty() {
        return s;
    }
    let Some(line) = ctx.source.line(s.line) else {
        return s;
    };
    let chars: Vec<char> = line.chars().collect();
    let from = (s.col as usize).saturating_sub(1).min(chars.len());
    let to = (s.end_col as usize)
        .saturating_sub(1)
        .clamp(from, chars.len());
    let region: String = chars[from..to].iter().collect();
    let mut found = region.match_indices(needle);
    match (found.next(), found.next()) {
        (Some((byte, _)), None) => {
            let col = s.col + region[..byte].chars().count() as u32;
            Span {
                line: s.line,
                col,
                end_line: s.line,
                end_col: col + needle.chars().count() as u32,
            }
        }
        _ => s,
    }
}

fn check_variables(id: &TemplateId, node: &Node, roots: &Roots, ctx: &mut Ctx) {
    if ctx.trusted {
        // Resolved against the spec's own text and the tables it reads (stamped in the entry
        // that made it trusted): the same spec resolves the same way, and listing a template's
        // variables parses it once more.
        return;
    }
    if roots.names.contains(&"secrets") {
        check_secrets(id, node, ctx);
    }
    for var in ctx.templates.variables(id) {
        let mut parts = var.splitn(3, '.');
        let root = parts.next().unwrap_or("");
        let field = parts.next();
        if !roots.names.contains(&root) {
            let hint = did_you_mean(root, roots.names.iter().copied())
                .unwrap_or_else(|| format!("variables here: {}", roots.names.join(", ")));
            let at = narrow(node, root, ctx);
            ctx.d.push(
                Diagnostic::new(
                    Code::E017,
                    format!("template reads `{root}`, which is not available here"),
                )
                .at(at)
                .help(hint),
            );
            continue;
        }
        match (root, field) {
            ("args", Some(f)) => {
                if let Some(props) = roots.args {
                    if !props.iter().any(|p| p == f) {
                        let hint = did_you_mean(f, props.iter().map(String::as_str))
                            .unwrap_or_else(|| {
                                format!(
                                    "the tool's arguments: {}",
                                    if props.is_empty() {
                                        "none".to_string()
                                    } else {
                                        props.join(", ")
                                    }
                                )
                            });
                        let at = narrow(node, &format!("args.{f}"), ctx);
                        ctx.d.push(
                            Diagnostic::new(Code::E017, format!("template reads `args.{f}`, but `{f}` is not a property of the tool's input schema"))
                                .at(at)
                                .help(hint),
                        );
                    }
                }
            }
            // Read below as the template spells them (`secrets["NAME"]` is a name too).
            ("secrets", _) => {}
            ("last", Some(f)) => {
                let sub = parts
                    .next()
                    .map(|rest| rest.split('.').next().unwrap_or(rest));
                let (path, known): (String, &[&str]) = match (f, sub) {
                    (f, _) if !RESULT_FIELDS.contains(&f) => (format!("last.{f}"), RESULT_FIELDS),
                    ("error", Some(e)) if !ERROR_FIELDS.contains(&e) => {
                        (format!("last.error.{e}"), ERROR_FIELDS)
                    }
                    _ => continue,
                };
                let wrong = path.rsplit('.').next().unwrap_or(&path);
                let hint = did_you_mean(wrong, known.iter().copied())
                    .unwrap_or_else(|| format!("its fields: {}", known.join(", ")));
                let at = narrow(node, &path, ctx);
                ctx.d.push(
                    Diagnostic::new(
                        Code::E017,
                        format!("template reads `{path}`, which a tool result never has"),
                    )
                    .at(at)
                    .help(hint),
                );
            }
            _ => {}
        }
    }
}

/// The secrets a template reads must be declared, and named one by one: the whole map
/// (`{{ secrets }}`, `secrets | items`, a loop, `secrets[name]`) would send every declared
/// secret, another tool's included, where this template goes (E046); a run gives a template
/// only the secrets it names.
fn check_secrets(id: &TemplateId, node: &Node, ctx: &mut Ctx) {
    let (names, whole) = ctx.templates.secret_reads(id);
    if whole {
        let at = narrow(node, "secrets", ctx);
        let declared: Vec<String> = ctx.secrets.keys().cloned().collect();
        ctx.d.push(
            Diagnostic::new(
                Code::E046,
                "template reads the whole `secrets` map, not one secret by name",
            )
            .at(at)
            .label("every declared secret")
            .help(format!(
                "name each secret the template needs, as `{{{{ secrets.NAME }}}}` (declared: {})",
                if declared.is_empty() {
                    "none".to_string()
                } else {
                    declared.join(", ")
                }
            )),
        );
    }
    for s in names {
        if ctx.secrets.contains_key(&s) {
            ctx.used_secrets.insert(s);
            continue;
        }
        let declared: Vec<String> = ctx.secrets.keys().cloned().collect();
        let hint = did_you_mean(&s, declared.iter().map(String::as_str))
            .unwrap_or_else(|| format!("declare it: `secrets: [{s}]`"));
        let at = narrow(node, &format!("secrets.{s}"), ctx);
        ctx.d.push(
            Diagnostic::new(
                Code::E018,
                format!("template reads `secrets.{s}`, which is not declared in `secrets`"),
            )
            .at(at)
            .help(hint),
        );
    }
}

/// What every entry of `results` (and so `last`) holds; `error` holds `kind` and `message`.
const RESULT_FIELDS: &[&str] = &["id", "name", "arguments", "status", "result", "error"];
const ERROR_FIELDS: &[&str] = &["kind", "message"];
