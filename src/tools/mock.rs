//! Mock tools: the first response whose `when` is a subset of the arguments answers.

use super::{ToolEnv, ToolError};
use crate::registry::{MockOutcome, MockResponse};
use crate::templates::Ctx;
use serde_json::{json, Value};

/// `1` and `1.0` are the same number to a person writing `when:`.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

pub(crate) fn is_subset(expected: &serde_json::Map<String, Value>, actual: &Value) -> bool {
    expected
        .iter()
        .all(|(k, v)| actual.get(k).is_some_and(|a| json_eq(v, a)))
}

pub(crate) async fn execute(
    responses: &[MockResponse],
    args: &Value,
    env: &ToolEnv<'_>,
) -> Result<Value, ToolError> {
    let Some(response) = responses
        .iter()
        .find(|r| r.when.as_ref().is_none_or(|w| is_subset(w, args)))
    else {
        return Err(ToolError::new(
            super::ErrorKind::NotFound,
            "no mock response matches these arguments",
        ));
    };
    let templates = &env.registry.templates;
    let needs_context = response
        .notify
        .as_ref()
        .is_some_and(|n| templates.needs_context(n))
        || match &response.outcome {
            MockOutcome::Result(tv) => templates.needs_context(tv),
            MockOutcome::Error { message, .. } => !templates.is_plain(message),
        };
    let data = if needs_context {
        json!({ "args": args, "query": env.query })
    } else {
        Value::Null
    };
    let ctx = Ctx::new(&data);
    if let Some(notify) = &response.notify {
        let items = templates
            .render(notify, &ctx)
            .await
            .map_err(|e| super::render_error("mock notify template failed", e))?;
        for item in items.as_array().into_iter().flatten() {
            if let Some(notice) = super::notify::Notice::from_item(item) {
                super::notify::send(env, notice);
            }
        }
    }
    match &response.outcome {
        MockOutcome::Result(tv) => templates
            .render(tv, &ctx)
            .await
            .map_err(|e| super::render_error("mock result template failed", e)),
        MockOutcome::Error { kind, message } => match templates.render_text(message, &ctx).await {
            Ok(text) => Err(ToolError::new(*kind, text)),
            Err(e) if e.limit => Err(super::render_error("mock error template failed", e)),
            Err(e) => Err(ToolError::new(
                *kind,
                format!("mock error template failed: {e}"),
            )),
        },
    }
}
