//! A call of a `task:` tool on MCP 2026-07-28 (the tasks extension), and the `tasks/*`
//! requests about it: what `server`'s handler does for them, beside its plain calls, given
//! the call to run. The task itself (its status, question, result, bounds) is `tasks`'s.

use super::served::Served;
use super::spans::served_request;
use super::stateless::OneRequest;
use super::tasks::{Ended, Tasks};
use crate::registry::TaskSupport;
use crate::telemetry::mcp as telemetry;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ErrorCode};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

/// A 2026-07-28 call of a `task:` tool: run as a task when its client declared the tasks
/// extension (the answer is the task, made before it is sent; `run` runs the call as the
/// request `one` with these arguments), refused (-32021) when the tool runs only as a task;
/// `None`: answered as any call.
pub(super) fn as_task<F, Fut>(
    served: &Served,
    (request, arguments): (&CallToolRequestParams, &Value),
    found: &mut Option<OneRequest>,
    (context, start): (&RequestContext<RoleServer>, Option<u64>),
    run: F,
) -> Option<Result<CallToolResponse, ErrorData>>
where
    F: FnOnce(Arc<OneRequest>, Value) -> Fut,
    Fut: Future<Output = Value> + Send + 'static,
{
    let support = served.registry.tool(&request.name)?.task?;
    let declared = (context.client_capabilities()).is_some_and(|c| c.supports_tasks());
    let answer = match (declared, support) {
        (true, _) => {
            let one = found.take()?;
            let task = start_task(&served.tasks, arguments, one, context, run);
            task.map(|t| CallToolResponse::Task(rmcp::model::CreateTaskResult::new(t)))
        }
        (false, TaskSupport::Required) => Err(ErrorData::missing_required_client_capability(
            rmcp::model::ClientCapabilities::builder()
                .enable_tasks()
                .build(),
        )),
        (false, TaskSupport::Optional) => return None,
    };
    if let Some(start) = start {
        let req = served_request(context, "tools/call", Some(&request.name), start, None);
        let value = match &answer {
            Ok(CallToolResponse::Task(t)) => serde_json::to_value(t).ok(),
            _ => None,
        };
        let traced = match &answer {
            Ok(_) => telemetry::Answer::Result(value.as_ref()),
            Err(e) => telemetry::Answer::Error(e.code.0, &e.message),
        };
        telemetry::served(&req, Some(arguments), traced, &served.setup.redactor);
    }
    Some(answer)
}

/// Makes the task of a call and runs the call as it: answered, masked, counted, recorded and
/// traced as any call (`run` is the handler's own call); cancelled, it is cut off and
/// recorded so.
fn start_task<F, Fut>(
    tasks: &Tasks,
    arguments: &Value,
    one: OneRequest,
    context: &RequestContext<RoleServer>,
    run: F,
) -> Result<rmcp::model::Task, ErrorData>
where
    F: FnOnce(Arc<OneRequest>, Value) -> Fut,
    Fut: Future<Output = Value> + Send + 'static,
{
    let subject = request_subject(context);
    let arguments = arguments.clone();
    tasks.create(subject, move |task| {
        let work = run(Arc::new(one.in_task(task.clone())), arguments);
        async move {
            let mut result = work.await;
            if task.is_cancelled() {
                return Ended::Cancelled;
            }
            if let Some(result) = result.as_object_mut() {
                result.insert("resultType".into(), "complete".into());
            }
            Ended::Completed(result)
        }
    })
}

/// A `tasks/*` request: answered from this process's tasks for the client it names (a
/// 2025-11-25 session has none: -32601), with its span.
pub(super) fn task_request<T>(
    served: &Served,
    method: &str,
    context: &RequestContext<RoleServer>,
    answer: impl FnOnce(&Tasks, Option<&str>) -> Result<T, ErrorData>,
) -> Result<T, ErrorData> {
    let start = crate::telemetry::clock();
    let result = match super::stateless::is_stateless(context) {
        true => answer(&served.tasks, request_subject(context)),
        false => Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            method.to_string(),
            None,
        )),
    };
    if let Some(start) = start {
        let req = served_request(context, method, None, start, None);
        let answer = match &result {
            Ok(_) => telemetry::Answer::Result(None),
            Err(e) => telemetry::Answer::Error(e.code.0, &e.message),
        };
        telemetry::served(&req, None, answer, &served.setup.redactor);
    }
    result
}

/// Whom `serve.auth` authenticated the request's client as.
fn request_subject(context: &RequestContext<RoleServer>) -> Option<&str> {
    let parts = context.extensions.get::<hyper::http::request::Parts>()?;
    let principal = parts.extensions.get::<Arc<super::auth::Principal>>()?;
    Some(principal.subject.as_str())
}

/// The error for a request rmcp read as a custom one: a `tasks/*` request whose params do not
/// fit is -32602 (the method is served); any other method, -32601.
pub(super) fn misread(method: &str) -> ErrorData {
    let takes = match method {
        "tasks/get" | "tasks/cancel" => "`taskId`, a string",
        "tasks/update" => "`taskId`, a string, and `inputResponses`, an object of answers",
        _ => return ErrorData::new(ErrorCode::METHOD_NOT_FOUND, method.to_string(), None),
    };
    ErrorData::invalid_params(
        format!("the params of `{method}` do not fit: it takes {takes}"),
        None,
    )
}
