//! Scripted models' `scripts:`: each script's conditions (`when`, `turn`, `history`) and its
//! turns, checked against the spec's tools and the template roots scripts may read.

use super::template_check::{check_tvalue, compile_text, Roots};
use super::Ctx;
use crate::codes::Code;
use crate::diag::{Diagnostic, Span};
use crate::registry::{Script, ScriptedArguments, ScriptedCall, Turn};
use crate::specfile::keys;
use crate::specfile::read::{expected, seq, Obj};
use crate::specfile::yaml::{Node, Value};

pub(super) fn compile_scripted(
    node: &Node,
    name_span: crate::diag::Span,
    what: &str,
    ctx: &mut Ctx,
) -> Option<Vec<Script>> {
    let obj = Obj::new(node, what, keys::MODEL_SCRIPTED, &mut ctx.d)?;
    let Some(scripts_node) = obj.get("scripts") else {
        ctx.d.push(crate::specfile::read::missing_at(
            name_span, "scripts", what,
        ));
        return None;
    };
    let mut scripts = Vec::new();
    let items = seq(scripts_node, "`scripts`", &mut ctx.d)?;
    warn_shadowed_scripts(items, ctx);
    for s in items {
        if let Some(script) = compile_script(s, ctx) {
            scripts.push(script);
        }
    }
    Some(scripts)
}

/// The first script whose `when` matches is used: a script after a fallback (no `when`), or
/// with the very same `when` as an earlier one, can never be chosen.
fn warn_shadowed_scripts(items: &[Node], ctx: &mut Ctx) {
    // `when`, `turn` and `history` as written: a script narrowed by `turn` or `history` is
    // shadowed only by one as narrow or unconditional.
    type Conditions = (Option<String>, Option<String>, Option<String>);
    let mut earlier: Vec<(Conditions, Span)> = Vec::new();
    for item in items {
        let script = Obj::peek(item, keys::SCRIPT);
        let text = |key: &str| {
            script.as_ref().and_then(|s| s.get(key)).map(|n| {
                n.as_str()
                    .map_or_else(|| format!("{:?}", n.to_json()), str::to_string)
            })
        };
        let when_node = script.as_ref().and_then(|s| s.get("when"));
        let this: Conditions = (text("when"), text("turn"), text("history"));
        let covering = earlier.iter().find(|(w, _)| {
            let unconditional = w.1.is_none() && w.2.is_none();
            (unconditional && (w.0.is_none() || w.0 == this.0)) || *w == this
        });
        if let Some((covering_when, covering_span)) = covering {
            let line = covering_span.line;
            let why = match &covering_when.0 {
                None => format!("the script at line {line} has no `when` and matches every query"),
                Some(w) => format!("the script at line {line} has the same `when: {w}`"),
            };
            ctx.d.push(
                Diagnostic::new(Code::W112, "this script can never be chosen")
                    .at(when_node.map_or(item.span, |n| n.span))
                    .label("shadowed by an earlier script")
                    .also(*covering_span, "this script matches first")
                    .help(format!(
                        "{why}; the first matching script wins, so remove this one or change its `when`"
                    )),
            );
        }
        earlier.push((this, when_node.map_or(item.span, |n| n.span)));
    }
}

fn compile_script(node: &Node, ctx: &mut Ctx) -> Option<Script> {
    let obj = Obj::new(node, "a script", keys::SCRIPT, &mut ctx.d)?;
    let when = match obj.get("when") {
        Some(n) => match n.as_str() {
            Some(text) => compile_regex(text, n, ctx),
            None => {
                ctx.d.push(expected(n, "a regular expression", "`when`"));
                None
            }
        },
        None => None,
    };
    let turn = obj
        .count("turn", 1, &mut ctx.d)
        .map(|v| v.value.min(u32::MAX as u64) as u32);
    let history = obj.get("history").and_then(|n| match n.as_str() {
        Some(text) => compile_regex(text, n, ctx),
        None => {
            ctx.d.push(expected(n, "a regular expression", "`history`"));
            None
        }
    });
    let Some(turns_node) = obj.get("turns") else {
        ctx.d
            .push(crate::specfile::read::missing(node, "turns", "a script"));
        return None;
    };
    let items = seq(turns_node, "`turns`", &mut ctx.d)?;
    if items.is_empty() {
        ctx.d.push(
            Diagnostic::new(Code::E008, "a script needs at least one turn")
                .at(turns_node.span)
                .help("add `- answer: ...`"),
        );
    }
    let roots = Roots::script();
    let mut turns = Vec::new();
    for t in items {
        let Some(turn) = Obj::new(t, "a turn", keys::TURN, &mut ctx.d) else {
            continue;
        };
        let forms = keys::TURN.keys.iter().filter(|k| turn.has(k.name)).count();
        if forms != 1 {
            ctx.d.push(
                Diagnostic::new(
                    Code::E029,
                    "a turn needs exactly one of `answer`, `tool_calls`, `raw` or `cut_off`",
                )
                .at(t.span)
                .help("split it into several turns: one model call each"),
            );
            continue;
        }
        if let Some(n) = turn.get("answer") {
            if let Some(s) = crate::specfile::read::string(n, "answer", &mut ctx.d) {
                if let Some(id) = compile_text(&s.value, n, &roots, ctx) {
                    turns.push(Turn::Answer(id));
                }
            }
        } else if let Some((key, n)) = ["raw", "cut_off"]
            .into_iter()
            .find_map(|k| turn.get(k).map(|n| (k, n)))
        {
            if let Some(s) = crate::specfile::read::string(n, key, &mut ctx.d) {
                if let Some(id) = compile_text(&s.value, n, &roots, ctx) {
                    turns.push(if key == "raw" {
                        Turn::Raw(id)
                    } else {
                        Turn::CutOff(id)
                    });
                }
            }
        } else if let Some(n) = turn.get("tool_calls") {
            let mut calls = Vec::new();
            for c in seq(n, "`tool_calls`", &mut ctx.d).unwrap_or(&[]) {
                if let Some(call) = compile_call(c, ctx) {
                    calls.push(call);
                }
            }
            if calls.is_empty() && !ctx.d.has_errors() {
                ctx.d.push(
                    Diagnostic::new(Code::E029, "`tool_calls` is empty")
                        .at(n.span)
                        .help("list at least one `{ name: ..., arguments: {...} }`"),
                );
            }
            turns.push(Turn::ToolCalls(calls));
        }
    }
    Some(Script {
        when,
        turn,
        history,
        turns,
    })
}

fn compile_call(node: &Node, ctx: &mut Ctx) -> Option<ScriptedCall> {
    let obj = Obj::new(
        node,
        "a scripted tool call",
        keys::SCRIPTED_CALL,
        &mut ctx.d,
    )?;
    let name = obj.require_string("name", "a scripted tool call", &mut ctx.d)?;
    // `malformed: true` marks a call that is wrong on purpose (to test the loop's rejections).
    let deliberate = obj.bool("malformed", &mut ctx.d).is_some_and(|b| b.value);
    let tool = ctx.tool_names.contains(&name.value)
        || (ctx.judged && name.value == crate::registry::GRADE_TOOL);
    if !tool && !deliberate {
        let mut place = "a scripted tool call".to_string();
        place.push_str(" (add `malformed: true` if it is unknown on purpose)");
        ctx.unknown_tool(&name, &place);
    }
    let arguments = match (
        obj.get("arguments"),
        obj.string("arguments_raw", &mut ctx.d),
    ) {
        (Some(_), Some(raw)) => {
            ctx.d.push(
                Diagnostic::new(
                    Code::E029,
                    "a scripted call has either `arguments` or `arguments_raw`, not both",
                )
                .at(raw.span),
            );
            return None;
        }
        (None, Some(raw)) => ScriptedArguments::Raw(raw.value),
        (args, None) => {
            let json = args
                .map(Node::to_json)
                .unwrap_or_else(|| serde_json::json!({}));
            if let Some(a) = args {
                if !matches!(a.value, Value::Map(_)) {
                    ctx.d.push(expected(
                        a,
                        "a mapping of argument names to values",
                        "`arguments`",
                    ));
                    return None;
                }
            }
            let tv = check_tvalue(json, args.unwrap_or(node), &Roots::script(), ctx)?;
            if let (crate::templates::TValue::Literal(value), Some(args_node), false) =
                (&tv, args, deliberate)
            {
                ctx.pending_call_checks.push((
                    name.value.clone(),
                    value.clone(),
                    args_node.clone(),
                ));
            }
            ScriptedArguments::Json(tv)
        }
    };
    Some(ScriptedCall {
        name: name.value,
        arguments,
    })
}

/// A regex of the spec (`when`, `history`, `output_matches`): checked now, built on first use.
pub(crate) fn compile_regex(
    text: &str,
    node: &crate::specfile::yaml::Node,
    ctx: &mut Ctx,
) -> Option<crate::registry::LazyRegex> {
    if ctx.trusted {
        // Parsed without error before; a run builds only the regexes it tries.
        return Some(crate::registry::LazyRegex::new(text));
    }
    // Parsing finds every syntax error without building automata (that happens on first use).
    match regex_syntax::ParserBuilder::new().build().parse(text) {
        Ok(_) => Some(crate::registry::LazyRegex::new(text)),
        Err(e) => {
            let msg = e.to_string();
            let short = msg.lines().last().unwrap_or(&msg).trim().to_string();
            ctx.d.push(
                crate::diag::Diagnostic::new(
                    crate::codes::Code::E027,
                    format!("invalid regular expression `{text}`: {short}"),
                )
                .at(node.span)
                .help("regexes use Rust `regex` syntax; escape special characters with `\\`"),
            );
            None
        }
    }
}
