//! Budgets: `expect.max_tokens`, `expect.max_cost_usd`, `expect.max_latency_ms` and
//! `limits.max_cost_usd`. A cost is known only from the model's `price:`, so a cost budget on a
//! model without one is E050: it could never be checked.

use super::Ctx;
use crate::codes::Code;
use crate::diag::{Diagnostic, Span};
use crate::registry::{Expect, ModelDef, ModelKind};
use crate::specfile::keys;
use crate::specfile::read::{Obj, Spanned};
use crate::specfile::yaml::{Node, Value};

/// The budgets of one `expect:`.
pub(super) fn expect_budgets(obj: &Obj, e: &mut Expect, ctx: &mut Ctx) {
    e.max_tokens = obj.count("max_tokens", 0, &mut ctx.d).map(|v| v.value);
    e.max_cost_usd = amount(obj, "max_cost_usd", 0.0, ctx);
    e.max_latency_ms = amount(obj, "max_latency_ms", 0.0, ctx);
}

/// A number of at least `min` (a budget of exactly 0 USD is a test that nothing is spent).
fn amount(obj: &Obj, key: &str, min: f64, ctx: &mut Ctx) -> Option<f64> {
    let v: Spanned<f64> = obj.number(key, &mut ctx.d)?;
    if v.value < min || !v.value.is_finite() {
        ctx.d.push(
            Diagnostic::new(
                Code::E007,
                format!("`{key}` is {}, not a budget of {min} or more", v.value),
            )
            .at(v.span)
            .help(format!(
                "write a number of {min} or more, e.g. `{key}: 0.01`"
            )),
        );
        return None;
    }
    Some(v.value)
}

/// `limits.max_cost_usd`: more than 0, and every live model has a `price:` to measure it by.
pub(super) fn cost_limit(limits: Option<&Node>, models: &[ModelDef], ctx: &mut Ctx) -> Option<f64> {
    let node = Obj::peek(limits?, keys::LIMITS)?.get("max_cost_usd")?;
    let max = match node.value {
        crate::specfile::yaml::Value::Int(i) => i as f64,
        crate::specfile::yaml::Value::Float(f) => f,
        _ => {
            ctx.d.push(crate::specfile::read::expected(
                node,
                "a number of USD",
                "`max_cost_usd`",
            ));
            return None;
        }
    };
    if max <= 0.0 || !max.is_finite() {
        ctx.d.push(
            Diagnostic::new(
                Code::E007,
                format!("`max_cost_usd` is {max}, not a budget above 0"),
            )
            .at(node.span)
            .help("write the most USD a run may spend, e.g. `max_cost_usd: 0.05`"),
        );
        return None;
    }
    for m in models {
        if m.price.is_none() && !matches!(m.kind, ModelKind::Scripted(_)) {
            no_price(node.span, &m.name, "`limits.max_cost_usd`", ctx);
        }
    }
    Some(max)
}

/// `expect.max_cost_usd` of a test, and of each of its `turns:`: its model (its own `model:`,
/// else `default_model`) has a `price:`. A turn's budget is checked here too, not first at run
/// time, where a replay in CI would be the first to say so.
pub(super) fn check_cost_expectation(
    test: &Obj,
    model: Option<&str>,
    models: &[ModelDef],
    default: Option<usize>,
    ctx: &mut Ctx,
) {
    let def = match model {
        Some(name) => models.iter().find(|m| m.name == name),
        None => default.and_then(|i| models.get(i)),
    };
    let Some(def) = def.filter(|d| d.price.is_none()) else {
        return;
    };
    let cost = |expect: Option<&'_ Node>| {
        expect
            .and_then(|e| Obj::peek(e, keys::EXPECT))
            .and_then(|e| e.get("max_cost_usd"))
            .map(|n| n.span)
    };
    if let Some(span) = cost(test.get("expect")) {
        no_price(span, &def.name, "`expect.max_cost_usd`", ctx);
    }
    let turns = match test.get("turns").map(|n| &n.value) {
        Some(Value::Seq(items)) => items.as_slice(),
        _ => &[],
    };
    for (i, turn) in turns.iter().enumerate() {
        let expect = Obj::peek(turn, keys::TEST_TURN).and_then(|t| t.get("expect"));
        if let Some(span) = cost(expect) {
            let what = format!("`expect.max_cost_usd` of turn {}", i + 1);
            no_price(span, &def.name, &what, ctx);
        }
    }
}

fn no_price(span: Span, model: &str, what: &str, ctx: &mut Ctx) {
    ctx.d.push(
        Diagnostic::new(
            Code::E050,
            format!("{what} needs a cost, and model `{model}` has no `price:`"),
        )
        .at(span)
        .help(format!("declare what `{model}` costs, in USD per million tokens: `price: {{ input: 0.15, output: 0.6 }}` (a scripted model spends nothing: budget its tokens with `max_tokens`)")),
    );
}
