//! `models:` → scripted scripts and live provider settings; `default_model` resolved.

use super::template_check::{check_tvalue, compile_text, Roots};
use super::Ctx;
use crate::diag::{did_you_mean, Diagnostic};
use crate::registry::{
    LazyRegex, LiveModel, ModelDef, ModelKind, Price, Script, ScriptedArguments, ScriptedCall, Turn,
};
use crate::spec::keys;
use crate::spec::read::{expected, seq, Obj};
use crate::spec::yaml::{Node, Value};
use std::time::Duration;

pub fn compile_regex(text: &str, node: &Node, ctx: &mut Ctx) -> Option<LazyRegex> {
    // Parsing finds every syntax error without building automata (that happens on first use).
    match regex_syntax::ParserBuilder::new().build().parse(text) {
        Ok(_) => Some(LazyRegex::new(text)),
        Err(e) => {
            let msg = e.to_string();
            let short = msg.lines().last().unwrap_or(&msg).trim().to_string();
            ctx.d.push(
                Diagnostic::new(
                    "E027",
                    format!("invalid regular expression `{text}`: {short}"),
                )
                .at(node.span)
                .help("regexes use Rust `regex` syntax; escape special characters with `\\`"),
            );
            None
        }
    }
}

pub fn compile_models(
    node: Option<&Node>,
    default: Option<&Node>,
    ctx: &mut Ctx,
) -> (Vec<ModelDef>, Option<usize>) {
    let mut models = Vec::new();
    let mut names = Vec::new();
    if let Some(node) = node {
        if let Some(obj) = Obj::open(node, "`models`", &mut ctx.d) {
            for (key, model) in obj.entries {
                names.push(key.name.clone());
                if let Some(kind) = compile_model(&key.name, key.span, model, ctx) {
                    // Scripted models use no tokens; their `price` is already an unknown key.
                    let price = match kind {
                        ModelKind::Scripted(_) => None,
                        _ => compile_price(model, ctx),
                    };
                    models.push(ModelDef {
                        name: key.name.clone(),
                        kind,
                        price,
                    });
                }
            }
        }
    }
    let default_index = match default {
        Some(n) => {
            match n.as_str() {
                Some(name) => {
                    match models.iter().position(|m| m.name == name) {
                        Some(i) => Some(i),
                        None => {
                            if !names.iter().any(|m| m == name) {
                                ctx.d.push(
                            Diagnostic::new("E025", format!("`default_model` names `{name}`, which is not in `models`"))
                                .at(n.span)
                                .help(did_you_mean(name, names.iter().map(String::as_str)).unwrap_or_else(|| format!("models: {}", names.join(", ")))),
                        );
                            }
                            None
                        }
                    }
                }
                None => {
                    ctx.d.push(expected(n, "a model name", "`default_model`"));
                    None
                }
            }
        }
        None if names.len() > 1 => {
            let at = node.map(|n| n.span).unwrap_or_default();
            ctx.d.push(
                Diagnostic::new(
                    "E028",
                    "several models are declared but `default_model` is not set",
                )
                .at(crate::diag::Span {
                    end_line: at.line,
                    end_col: at.col + 1,
                    ..at
                })
                .help(format!("add `default_model: {}`", names[0])),
            );
            None
        }
        None if models.len() == 1 => Some(0),
        None => None,
    };
    (models, default_index)
}

fn compile_model(
    name: &str,
    name_span: crate::diag::Span,
    node: &Node,
    ctx: &mut Ctx,
) -> Option<ModelKind> {
    let what = format!("model `{name}`");
    let kind = node.get("kind");
    let kind_name = match kind {
        None => {
            ctx.d.push(
                crate::spec::read::missing_at(name_span, "kind", &what)
                    .help("add `kind:` with scripted, openai or anthropic"),
            );
            return None;
        }
        Some(k) => match k.as_str() {
            Some(s) if keys::MODEL_KINDS.contains(&s) => s,
            _ => {
                let shown = k.as_str().unwrap_or("?").to_string();
                ctx.d.push(
                    Diagnostic::new("E011", format!("unknown model kind `{shown}`"))
                        .at(k.span)
                        .help(
                            did_you_mean(&shown, keys::MODEL_KINDS.iter().copied()).unwrap_or_else(
                                || "kinds are scripted, openai and anthropic".into(),
                            ),
                        ),
                );
                return None;
            }
        },
    };
    if kind_name == "scripted" {
        let obj = Obj::new(node, &what, keys::MODEL_SCRIPTED, &mut ctx.d)?;
        let Some(scripts_node) = obj.get("scripts") else {
            ctx.d
                .push(crate::spec::read::missing_at(name_span, "scripts", &what));
            return None;
        };
        let mut scripts = Vec::new();
        for s in seq(scripts_node, "`scripts`", &mut ctx.d)? {
            if let Some(script) = compile_script(s, ctx) {
                scripts.push(script);
            }
        }
        return Some(ModelKind::Scripted(scripts));
    }
    let obj = Obj::new(node, &what, keys::MODEL_LIVE, &mut ctx.d)?;
    let model = obj.require_string("model", &what, &mut ctx.d)?;
    let default_base = if kind_name == "openai" {
        "https://api.openai.com/v1"
    } else {
        "https://api.anthropic.com"
    };
    let base_url = match obj.string("base_url", &mut ctx.d) {
        Some(b) => {
            let lower = b.value.to_ascii_lowercase();
            if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                ctx.d.push(
                    Diagnostic::new(
                        "E021",
                        format!(
                            "`base_url` `{}` must start with http:// or https://",
                            b.value
                        ),
                    )
                    .at(b.span),
                );
            }
            b.value.trim_end_matches('/').to_string()
        }
        None => default_base.to_string(),
    };
    let api_key_env = obj.string("api_key_env", &mut ctx.d).map(|s| s.value);
    let temperature = obj.number("temperature", &mut ctx.d).and_then(|t| {
        if (0.0..=2.0).contains(&t.value) {
            Some(t.value)
        } else {
            ctx.d.push(
                Diagnostic::new(
                    "E023",
                    format!("`temperature` must be between 0 and 2, found {}", t.value),
                )
                .at(t.span),
            );
            None
        }
    });
    let max_tokens = obj
        .count("max_tokens", 1, &mut ctx.d)
        .map(|v| v.value.min(u32::MAX as u64) as u32);
    let retries = obj
        .count("retries", 0, &mut ctx.d)
        .map(|v| v.value.min(10) as u32)
        .unwrap_or(2);
    let timeout = obj
        .duration("timeout", &mut ctx.d)
        .map(|d| d.value)
        .unwrap_or(Duration::from_secs(120));
    let mut headers = Vec::new();
    if let Some(h) = obj.get("headers") {
        if let Some(hobj) = Obj::open(h, "`headers`", &mut ctx.d) {
            for (k, v) in hobj.entries {
                match v.as_str() {
                    Some(s) => headers.push((k.name.clone(), s.to_string())),
                    None => ctx
                        .d
                        .push(expected(v, "a string", &format!("header `{}`", k.name))),
                }
            }
        }
    }
    let live = LiveModel {
        model: model.value,
        base_url,
        api_key_env,
        temperature,
        max_tokens,
        retries,
        timeout,
        headers,
    };
    Some(if kind_name == "openai" {
        ModelKind::OpenAi(live)
    } else {
        ModelKind::Anthropic(live)
    })
}

/// `price: { input, output }`, USD per million tokens: what `toolrun test --results` multiplies
/// the reported token usage by.
fn compile_price(model: &Node, ctx: &mut Ctx) -> Option<Price> {
    let node = model.get("price")?;
    let obj = Obj::new(node, "`price`", keys::PRICE, &mut ctx.d)?;
    let mut part = |key: &str| {
        if !obj.has(key) {
            ctx.d
                .push(crate::spec::read::missing(node, key, "`price`").help(
                    "write both, in USD per million tokens: `price: { input: 0.15, output: 0.6 }`",
                ));
            return None;
        }
        let n = obj.number(key, &mut ctx.d)?;
        if n.value < 0.0 {
            ctx.d.push(
                Diagnostic::new(
                    "E023",
                    format!("`price.{key}` must be 0 or more, found {}", n.value),
                )
                .at(n.span)
                .help("prices are USD per million tokens, e.g. `input: 0.15`"),
            );
            return None;
        }
        Some(n.value)
    };
    let input = part("input");
    let output = part("output");
    Some(Price {
        input: input?,
        output: output?,
    })
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
    let Some(turns_node) = obj.get("turns") else {
        ctx.d
            .push(crate::spec::read::missing(node, "turns", "a script"));
        return None;
    };
    let items = seq(turns_node, "`turns`", &mut ctx.d)?;
    if items.is_empty() {
        ctx.d.push(
            Diagnostic::new("E008", "a script needs at least one turn")
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
        let forms = keys::TURN.iter().filter(|k| turn.has(k)).count();
        if forms != 1 {
            ctx.d.push(
                Diagnostic::new(
                    "E029",
                    "a turn needs exactly one of `answer`, `tool_calls` or `raw`",
                )
                .at(t.span)
                .help("split it into several turns: one model call each"),
            );
            continue;
        }
        if let Some(n) = turn.get("answer") {
            if let Some(s) = crate::spec::read::string(n, "answer", &mut ctx.d) {
                if let Some(id) = compile_text(&s.value, n, &roots, ctx) {
                    turns.push(Turn::Answer(id));
                }
            }
        } else if let Some(n) = turn.get("raw") {
            if let Some(s) = crate::spec::read::string(n, "raw", &mut ctx.d) {
                if let Some(id) = compile_text(&s.value, n, &roots, ctx) {
                    turns.push(Turn::Raw(id));
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
                    Diagnostic::new("E029", "`tool_calls` is empty")
                        .at(n.span)
                        .help("list at least one `{ name: ..., arguments: {...} }`"),
                );
            }
            turns.push(Turn::ToolCalls(calls));
        }
    }
    Some(Script { when, turns })
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
    let tool = ctx.tool_names.contains(&name.value);
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
                    "E029",
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
            let tv = check_tvalue(&json, args.unwrap_or(node), &Roots::script(), ctx)?;
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
