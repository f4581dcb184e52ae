//! `models:` → scripted scripts and live provider settings; `default_model` resolved.

use super::Ctx;
use crate::codes::Code;
use crate::diag::{did_you_mean, Diagnostic};
use crate::registry::{
    LiveModel, ModelDef, ModelKind, OpenAiApi, Policy, Price, ReasoningSettings, ToolChoice,
};
use crate::specfile::keys;
use crate::specfile::read::{expected, Obj};
use crate::specfile::yaml::{Node, Value};
use std::time::Duration;

pub(super) fn compile_models(
    node: Option<&Node>,
    default: Option<&Node>,
    policy: &Policy,
    ctx: &mut Ctx,
) -> (Vec<ModelDef>, Option<usize>) {
    let mut models = Vec::new();
    let mut names = Vec::new();
    if let Some(node) = node {
        if let Some(obj) = Obj::open(node, "`models`", &mut ctx.d) {
            for (key, model) in obj.entries {
                names.push(key.name.clone());
                if let Some((kind, price)) = compile_model(&key.name, key.span, model, policy, ctx)
                {
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
                            Diagnostic::new(Code::E025, format!("`default_model` names `{name}`, which is not in `models`"))
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
                    Code::E028,
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
    policy: &Policy,
    ctx: &mut Ctx,
) -> Option<(ModelKind, Option<Price>)> {
    let what = format!("model `{name}`");
    let kind_name = model_kind(node, name_span, &what, ctx)?;
    if kind_name == "scripted" {
        // Scripted models use no tokens; their `price` is already an unknown key.
        let scripts = super::scripts::compile_scripted(node, name_span, &what, ctx)?;
        return Some((ModelKind::Scripted(scripts), None));
    }
    let obj = Obj::new(node, &what, keys::MODEL_LIVE, &mut ctx.d)?;
    let live = compile_live(&obj, kind_name, &what, policy, ctx)?;
    let kind = if kind_name == "openai" {
        ModelKind::OpenAi(live)
    } else {
        ModelKind::Anthropic(live)
    };
    Some((kind, compile_price(&obj, ctx)))
}

/// `kind:`, one of [`keys::MODEL_KINDS`].
fn model_kind(
    node: &Node,
    name_span: crate::diag::Span,
    what: &str,
    ctx: &mut Ctx,
) -> Option<&'static str> {
    // Not a mapping: reported as a missing `kind`, the first thing a model needs.
    let k = match &node.value {
        Value::Map(_) => Obj::declared(node, what, keys::MODEL, &mut ctx.d)?.get("kind"),
        _ => None,
    };
    let Some(k) = k else {
        ctx.d.push(
            crate::specfile::read::missing_at(name_span, "kind", what)
                .help("add `kind:` with scripted, openai or anthropic"),
        );
        return None;
    };
    if let Some(known) = k
        .as_str()
        .and_then(|k| keys::find_kind(keys::MODEL_KINDS, k))
    {
        return Some(known.name);
    }
    let shown = k.as_str().unwrap_or("?").to_string();
    ctx.d.push(
        Diagnostic::new(Code::E011, format!("unknown model kind `{shown}`"))
            .at(k.span)
            .help(crate::diag::choose(
                &shown,
                keys::kind_names(keys::MODEL_KINDS),
            )),
    );
    None
}

/// The settings of an `openai` or `anthropic` model.
fn compile_live(
    obj: &Obj<'_>,
    kind_name: &str,
    what: &str,
    policy: &Policy,
    ctx: &mut Ctx,
) -> Option<LiveModel> {
    let model = obj.require_string("model", what, &mut ctx.d)?;
    let base_url = base_url(obj, kind_name, ctx);
    let api_key_env = obj.string("api_key_env", &mut ctx.d).map(|s| s.value);
    let temperature = obj.number("temperature", &mut ctx.d).and_then(|t| {
        if (0.0..=2.0).contains(&t.value) {
            Some(t.value)
        } else {
            ctx.d.push(
                Diagnostic::new(
                    Code::E023,
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
    let api_key_header = obj.string("api_key_header", &mut ctx.d).map(|s| s.value);
    let headers = headers(obj, api_key_header.as_deref(), ctx);
    let api = api(obj, kind_name, ctx);
    Some(LiveModel {
        model: model.value,
        base_url,
        api_key_env,
        temperature,
        max_tokens,
        retries,
        timeout,
        headers,
        tool_choice: tool_choice(obj.get("tool_choice"), policy, ctx),
        parallel_tool_calls: obj.bool("parallel_tool_calls", &mut ctx.d).map(|b| b.value),
        extra_body: extra_body(obj.get("extra_body"), api, ctx),
        stream: obj.bool("stream", &mut ctx.d).is_some_and(|b| b.value),
        query: string_map(obj.get("query"), "`query`", "query parameter", ctx),
        api_key_header,
        max_concurrency: limit(obj, "max_concurrency", ctx),
        requests_per_minute: limit(obj, "requests_per_minute", ctx),
        reasoning: reasoning(obj, api, ctx),
        api,
    })
}

/// `api: chat | responses`, on `kind: openai` only.
fn api(obj: &Obj<'_>, kind_name: &str, ctx: &mut Ctx) -> OpenAiApi {
    let Some(v) = obj.string("api", &mut ctx.d) else {
        return OpenAiApi::Chat;
    };
    if kind_name != "openai" {
        ctx.d.push(
            Diagnostic::new(
                Code::E013,
                format!("`api` is for `kind: openai` models, not `kind: {kind_name}`"),
            )
            .at(v.span)
            .help("remove `api`: an Anthropic model speaks the Messages API"),
        );
        return OpenAiApi::Chat;
    }
    match v.value.as_str() {
        "chat" => OpenAiApi::Chat,
        "responses" => OpenAiApi::Responses,
        other => {
            ctx.d.push(
                Diagnostic::new(Code::E007, format!("unknown `api` `{other}`"))
                    .at(v.span)
                    .help(crate::diag::choose(
                        other,
                        keys::OPENAI_APIS.iter().copied(),
                    )),
            );
            OpenAiApi::Chat
        }
    }
}

/// `reasoning: { effort, summary }`, for `api: responses`.
fn reasoning(obj: &Obj<'_>, api: OpenAiApi, ctx: &mut Ctx) -> Option<ReasoningSettings> {
    let node = obj.get("reasoning")?;
    if api != OpenAiApi::Responses {
        ctx.d.push(
            Diagnostic::new(Code::E013, "`reasoning` needs `api: responses`")
                .at(node.span)
                .help("add `api: responses`; with Chat Completions, set `extra_body: { reasoning_effort: ... }`"),
        );
        return None;
    }
    let r = Obj::new(node, "`reasoning`", keys::REASONING, &mut ctx.d)?;
    let mut word = |key: &str, allowed: &[&str]| {
        let v = r.string(key, &mut ctx.d)?;
        if allowed.contains(&v.value.as_str()) {
            return Some(v.value);
        }
        ctx.d.push(
            Diagnostic::new(
                Code::E007,
                format!("unknown `reasoning.{key}` `{}`", v.value),
            )
            .at(v.span)
            .help(crate::diag::choose(&v.value, allowed.iter().copied())),
        );
        None
    };
    Some(ReasoningSettings {
        effort: word("effort", keys::REASONING_EFFORTS),
        summary: word("summary", keys::REASONING_SUMMARIES),
    })
}

/// `max_concurrency` and `requests_per_minute`: 1 or more (0 would never send anything).
fn limit(obj: &Obj<'_>, key: &str, ctx: &mut Ctx) -> Option<u32> {
    obj.count(key, 1, &mut ctx.d)
        .map(|v| v.value.min(u32::MAX as u64) as u32)
}

/// `price: { input, output }`, USD per million tokens: what `toolrun test --results` multiplies
/// the reported token usage by.
fn compile_price(model: &Obj, ctx: &mut Ctx) -> Option<Price> {
    let node = model.get("price")?;
    let obj = Obj::new(node, "`price`", keys::PRICE, &mut ctx.d)?;
    let mut part = |key: &str| {
        if !obj.has(key) {
            ctx.d
                .push(crate::specfile::read::missing(node, key, "`price`").help(
                    "write both, in USD per million tokens: `price: { input: 0.15, output: 0.6 }`",
                ));
            return None;
        }
        let n = obj.number(key, &mut ctx.d)?;
        if n.value < 0.0 {
            ctx.d.push(
                Diagnostic::new(
                    Code::E023,
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
    let mut optional = |key: &str| {
        let n = obj.number(key, &mut ctx.d)?;
        if n.value < 0.0 {
            ctx.d.push(
                Diagnostic::new(
                    Code::E023,
                    format!("`price.{key}` must be 0 or more, found {}", n.value),
                )
                .at(n.span),
            );
            return None;
        }
        Some(n.value)
    };
    let cached_input = optional("cached_input");
    let reasoning = optional("reasoning");
    Some(Price {
        input: input?,
        output: output?,
        cached_input,
        reasoning,
    })
}

fn base_url(obj: &Obj<'_>, kind_name: &str, ctx: &mut Ctx) -> String {
    let Some(b) = obj.string("base_url", &mut ctx.d) else {
        return if kind_name == "openai" {
            "https://api.openai.com/v1".into()
        } else {
            "https://api.anthropic.com".into()
        };
    };
    let lower = b.value.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        ctx.d.push(
            Diagnostic::new(
                Code::E021,
                format!(
                    "`base_url` `{}` must start with http:// or https://",
                    b.value
                ),
            )
            .at(b.span),
        );
    }
    let trimmed = b.value.trim_end_matches('/').to_string();
    // The client adds `/v1/messages`; a base URL copied from a curl example doubles the `/v1`.
    if kind_name == "anthropic" && trimmed.to_ascii_lowercase().ends_with("/v1") {
        let fixed = &trimmed[..trimmed.len() - 3];
        ctx.d.push(
            Diagnostic::new(
                Code::W111,
                format!(
                    "Anthropic `base_url` `{}` ends in `/v1`: requests would go to `{trimmed}/v1/messages`",
                    b.value
                ),
            )
            .at(b.span)
            .help(format!(
                "write `base_url: {fixed}`; toolrun adds `/v1/messages` itself"
            )),
        );
    }
    trimmed
}

/// The headers that carry a key: set through `api_key_env` (and `api_key_header`), never in
/// plain text in a spec that gets committed, shared and printed.
const CREDENTIAL_HEADERS: &[&str] = &["authorization", "x-api-key", "api-key"];

fn headers(obj: &Obj<'_>, api_key_header: Option<&str>, ctx: &mut Ctx) -> Vec<(String, String)> {
    let Some(node) = obj.get("headers") else {
        return Vec::new();
    };
    let headers = string_map(Some(node), "`headers`", "header", ctx);
    if let Node {
        value: Value::Map(entries),
        ..
    } = node
    {
        for (k, _) in entries {
            let lower = k.name.to_ascii_lowercase();
            let credential = CREDENTIAL_HEADERS.contains(&lower.as_str())
                || api_key_header.is_some_and(|h| h.eq_ignore_ascii_case(&k.name));
            if credential {
                ctx.d.push(
                    Diagnostic::new(
                        Code::E041,
                        format!("header `{}` carries a credential and may not be set in `headers`", k.name),
                    )
                    .at(k.span)
                    .help("put the key in an environment variable and name it in `api_key_env: VAR`; `api_key_header: NAME` chooses the header it is sent in (e.g. `api-key` for Azure)"),
                );
            }
        }
    }
    headers
}

/// A mapping of names to strings (`headers`, `query`).
fn string_map(node: Option<&Node>, what: &str, item: &str, ctx: &mut Ctx) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(obj) = node.and_then(|n| Obj::open(n, what, &mut ctx.d)) else {
        return out;
    };
    for (k, v) in obj.entries {
        match v.as_str() {
            Some(s) => out.push((k.name.clone(), s.to_string())),
            None => ctx
                .d
                .push(expected(v, "a string", &format!("{item} `{}`", k.name))),
        }
    }
    out
}

/// `auto` | `required` | `none` | `{ tool: NAME }`, NAME a tool the model is offered.
fn tool_choice(node: Option<&Node>, policy: &Policy, ctx: &mut Ctx) -> ToolChoice {
    let Some(node) = node else {
        return ToolChoice::Auto;
    };
    match node.as_str() {
        Some("auto") => return ToolChoice::Auto,
        Some("required") => return ToolChoice::Required,
        Some("none") => return ToolChoice::None,
        _ => {}
    }
    let forced = match &node.value {
        Value::Map(_) => Obj::new(node, "`tool_choice`", keys::TOOL_CHOICE, &mut ctx.d)
            .and_then(|o| o.require_string("tool", "`tool_choice`", &mut ctx.d)),
        _ => {
            let help = node
                .as_str()
                .and_then(|s| did_you_mean(s, ["auto", "required", "none"]))
                .unwrap_or_else(|| "write `auto`, `required`, `none` or `{ tool: NAME }`".into());
            ctx.d.push(
                expected(
                    node,
                    "`auto`, `required`, `none` or `{ tool: NAME }`",
                    "`tool_choice`",
                )
                .help(help),
            );
            None
        }
    };
    let Some(name) = forced else {
        return ToolChoice::Auto;
    };
    if !ctx.tool_exists(&name.value) {
        ctx.unknown_tool(&name, "`tool_choice`");
    } else if policy.deny.contains(&name.value)
        || policy
            .allow
            .as_ref()
            .is_some_and(|a| !a.contains(&name.value))
    {
        ctx.d.push(
            Diagnostic::new(
                Code::E043,
                format!(
                    "`tool_choice` forces `{}`, which the policy does not offer to the model",
                    name.value
                ),
            )
            .at(name.span)
            .help(format!(
                "allow `{}` in `policy`, or force a tool the model is offered",
                name.value
            )),
        );
    }
    ToolChoice::Tool(name.value)
}

fn extra_body(
    node: Option<&Node>,
    api: OpenAiApi,
    ctx: &mut Ctx,
) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    let Some(obj) = node.and_then(|n| Obj::open(n, "`extra_body`", &mut ctx.d)) else {
        return out;
    };
    let owned = match api {
        OpenAiApi::Chat => keys::OWNED_BODY_KEYS,
        OpenAiApi::Responses => keys::RESPONSES_OWNED_BODY_KEYS,
    };
    for (k, v) in obj.entries {
        if let Some((_, owner)) = owned.iter().find(|(o, _)| *o == k.name) {
            ctx.d.push(
                Diagnostic::new(
                    Code::E042,
                    format!("`extra_body` may not set `{}`: toolrun writes it", k.name),
                )
                .at(k.span)
                .help(format!(
                    "it comes from {owner}; remove it from `extra_body`"
                )),
            );
            continue;
        }
        out.insert(k.name.clone(), v.to_json());
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::registry::{ModelKind, ToolChoice};
    use crate::specfile::Source;
    use std::path::Path;

    const TOOLS: &str = "version: 1\ntools:\n  get_price:\n    description: Returns the price of a ticker.\n    kind: mock\n    input: { type: object }\n    responses: [ { result: 1 } ]\n  send_mail:\n    description: Sends an email to a customer.\n    kind: mock\n    input: { type: object }\n    responses: [ { result: 1 } ]\n";

    /// (codes with messages, the model's settings if it compiled)
    fn model(settings: &str, extra: &str) -> (Vec<String>, Option<crate::registry::LiveModel>) {
        let text =
            format!("{TOOLS}{extra}models:\n  m:\n    kind: openai\n    model: x\n{settings}");
        let source = Source::new("t.yaml", text);
        let out = crate::compile::compile(&source, Path::new("t.yaml"));
        let diags = out
            .diagnostics
            .iter()
            .map(|d| {
                format!(
                    "{} {} | {}",
                    d.code,
                    d.message,
                    d.help.clone().unwrap_or_default()
                )
            })
            .collect();
        let live = out.registry.and_then(|r| match &r.models.first()?.kind {
            ModelKind::OpenAi(l) => Some(l.clone()),
            _ => None,
        });
        (diags, live)
    }

    #[test]
    fn tool_choice_forms() {
        let choice = |s: &str| {
            model(&format!("    tool_choice: {s}\n"), "")
                .1
                .map(|l| l.tool_choice)
        };
        assert_eq!(
            model("", "").1.map(|l| l.tool_choice),
            Some(ToolChoice::Auto)
        );
        assert_eq!(choice("required"), Some(ToolChoice::Required));
        assert_eq!(choice("none"), Some(ToolChoice::None));
        assert_eq!(choice("auto"), Some(ToolChoice::Auto));
        assert_eq!(
            choice("{ tool: get_price }"),
            Some(ToolChoice::Tool("get_price".into()))
        );
    }

    #[test]
    fn tool_choice_mistakes_are_explained() {
        let (d, _) = model("    tool_choice: requird\n", "");
        assert!(
            d[0].starts_with("E007") && d[0].contains("did you mean `required`"),
            "{d:?}"
        );
        let (d, _) = model("    tool_choice: { tool: get_prise }\n", "");
        assert!(
            d[0].starts_with("E012") && d[0].contains("get_price"),
            "{d:?}"
        );
        let (d, _) = model("    tool_choice: { name: get_price }\n", "");
        assert!(d.iter().any(|m| m.starts_with("E006")), "{d:?}");
        let (d, _) = model(
            "    tool_choice: { tool: send_mail }\n",
            "policy: { allow: [get_price] }\n",
        );
        assert!(d.iter().any(|m| m.starts_with("E043")), "{d:?}");
    }

    #[test]
    fn credentials_headers_and_owned_body_keys() {
        for h in ["Authorization", "X-API-KEY", "api-key"] {
            let (d, _) = model(&format!("    headers: {{ {h}: k }}\n"), "");
            assert!(d.iter().any(|m| m.starts_with("E041")), "{h}: {d:?}");
        }
        let (d, _) = model(
            "    api_key_header: X-Secret\n    headers: { x-secret: k }\n",
            "",
        );
        assert!(d.iter().any(|m| m.starts_with("E041")), "{d:?}");
        let (d, live) = model(
            "    headers: { X-Team: a }\n    extra_body: { seed: 7, options: { num_ctx: 4096 } }\n",
            "",
        );
        assert!(d.is_empty(), "{d:?}");
        let live = live.expect("compiles");
        assert_eq!(live.extra_body["options"]["num_ctx"], 4096);
        for key in [
            "model",
            "messages",
            "stream",
            "tool_choice",
            "system",
            "max_tokens",
        ] {
            let (d, _) = model(&format!("    extra_body: {{ {key}: 1 }}\n"), "");
            assert!(d.iter().any(|m| m.starts_with("E042")), "{key}: {d:?}");
        }
    }

    #[test]
    fn azure_settings_and_anthropic_v1() {
        let (d, live) = model(
            "    api_key_header: api-key\n    query: { api-version: 2024-10-21 }\n",
            "",
        );
        assert!(d.is_empty(), "{d:?}");
        let live = live.expect("compiles");
        assert_eq!(
            live.query,
            [("api-version".to_string(), "2024-10-21".to_string())]
        );
        assert_eq!(live.api_key_header.as_deref(), Some("api-key"));
        let (d, _) = model("    query: { api-version: 2 }\n", "");
        assert!(d.iter().any(|m| m.starts_with("E007")), "{d:?}");
        // The warning is Anthropic's only: OpenAI base URLs end in /v1 by convention.
        let (d, _) = model("    base_url: http://127.0.0.1:1/v1/\n", "");
        assert!(d.is_empty(), "{d:?}");
    }
}
