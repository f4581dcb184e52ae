//! Mock tools: the first response whose `when` is a subset of the arguments answers.

use super::{Output, ToolEnv, ToolError};
use crate::arguments::is_subset;
use crate::registry::{MockOutcome, MockResponse};
use crate::templates::Ctx;
use serde_json::{json, Value};

pub(crate) async fn execute(
    responses: &[MockResponse],
    args: &Value,
    env: &ToolEnv<'_>,
) -> Result<Output, ToolError> {
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
        || response
            .content
            .as_ref()
            .is_some_and(|c| templates.needs_context(c))
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
        MockOutcome::Result(tv) => {
            let value = templates
                .render(tv, &ctx)
                .await
                .map_err(|e| super::render_error("mock result template failed", e))?;
            let Some(content) = &response.content else {
                return Ok(Output::from(value));
            };
            let items = templates
                .render(content, &ctx)
                .await
                .map_err(|e| super::render_error("mock content template failed", e))?;
            with_content(env, items, value)
        }
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

/// A result of MCP content items, taken apart as an MCP server's would be: the model reads the
/// text and a placeholder for the rest, and the items are kept to be served as they are. The
/// result, when there is one, is the `structuredContent`.
fn with_content(env: &ToolEnv<'_>, items: Value, result: Value) -> Result<Output, ToolError> {
    let mut reply = json!({ "content": items });
    match result {
        Value::Null => {}
        Value::Object(_) => reply["structuredContent"] = result,
        other => reply["structuredContent"] = json!({ "result": other }),
    }
    let content = super::mcp::content::take("mock", env.call_id, &reply, &env.secrets.redactor())?;
    Ok(Output {
        value: content.observation,
        mcp: content.kept,
        images: content.images,
        ..Output::default()
    })
}
