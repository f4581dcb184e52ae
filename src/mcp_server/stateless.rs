//! A request of MCP 2026-07-28, where there is no session: the request's own `_meta` carries
//! its protocol version, the client's capabilities and the log level it wants, and rmcp's
//! service makes a fresh handler ([`ServedSession`]) for each, so limits and loop detection
//! count per request. A call held for confirmation cannot ask the client on its stream (the
//! revision has no server requests): it answers with an input-required result, an elicitation
//! form and a signed `requestState` (`state`), and the client's retry with the answer and that
//! state runs it. (The handler, `server`, asks this module; this one knows no handler.)

use super::confirm::Confirmation;
use super::state::{Call, StateKey};
use super::tasks::TaskHandle;
use rmcp::model::{
    CacheScope, CallToolRequestParams, ClientCapabilities, InputRequiredResult, ListToolsResult,
    ProtocolVersion, RequestMetaObject, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{json, Value};
use std::future::Future;
use std::sync::{Arc, Mutex};

tokio::task_local! {
    /// The 2026-07-28 request a call is answering: over HTTP each such request has a handler of
    /// its own, but over stdio one handler answers all the client's requests, some at once.
    static REQUEST: Option<Arc<OneRequest>>;
}

/// Runs `work` (a call) as the answer to `one`, a 2026-07-28 request (`None`: a session's).
pub(crate) async fn scope<F: Future>(one: Option<Arc<OneRequest>>, work: F) -> F::Output {
    REQUEST.scope(one, work).await
}

/// The 2026-07-28 request being answered, if the call answers one.
pub(crate) fn current() -> Option<Arc<OneRequest>> {
    REQUEST.try_with(Clone::clone).ok().flatten()
}

/// The key of the confirmation among an input-required result's `inputRequests`.
pub(crate) const INPUT_KEY: &str = "confirm";

/// Whether the request speaks 2026-07-28 or later (no session, metadata in each request).
pub(crate) fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// What one 2026-07-28 call brought and asked.
#[derive(Default)]
pub(crate) struct OneRequest {
    /// The request's client declared form elicitation in its `_meta`: it can be asked.
    pub(crate) can_confirm: bool,
    /// The least severe log level the request asked for, as `notify` ranks them (none: no logs).
    pub(crate) log_rank: usize,
    /// The client's user's answer, from a retry whose `requestState` verified.
    answer: Option<Confirmation>,
    /// The confirmation form, once the call found it needs one and no answer came with it.
    asked: Mutex<Option<Value>>,
    /// The task the call runs as (the tasks extension): its confirmation is asked there.
    task: Option<TaskHandle>,
}

impl OneRequest {
    /// A request that brings no answer, with its own client capabilities and `_meta`: whether
    /// its client can be asked (form elicitation) and the log level it wants.
    pub(crate) fn asking(
        capabilities: Option<ClientCapabilities>,
        meta: &RequestMetaObject,
    ) -> OneRequest {
        OneRequest {
            can_confirm: capabilities
                .and_then(|c| c.elicitation)
                .is_some_and(|e| e.form.is_some() || e.url.is_none()),
            log_rank: log_rank(meta),
            ..OneRequest::default()
        }
    }

    /// The answer this request brought; without one, `form` is kept to be asked.
    pub(crate) fn confirmation(&self, form: Value) -> Option<Confirmation> {
        if self.answer.is_none() {
            if let Ok(mut asked) = self.asked.lock() {
                *asked = Some(form);
            }
        }
        self.answer.clone()
    }

    /// The call runs as `task`.
    pub(crate) fn in_task(mut self, task: TaskHandle) -> OneRequest {
        self.task = Some(task);
        self
    }

    pub(crate) fn task(&self) -> Option<&TaskHandle> {
        self.task.as_ref()
    }

    /// The answer to `form`: in a task, asked through the task (its `tasks/get` shows the form,
    /// `tasks/update` brings the answer) and waited for; else as [`OneRequest::confirmation`].
    pub(crate) async fn ask(&self, form: Value) -> Option<Confirmation> {
        let Some(task) = &self.task else {
            return self.confirmation(form);
        };
        let request = json!({ "method": "elicitation/create", "params": form });
        let given = task.ask(INPUT_KEY, request).await;
        Some(given.as_ref().and_then(answer).unwrap_or_else(|| Confirmation {
            action: "error".into(),
            content: Some(json!({ "message": match given {
                Some(_) => format!("inputResponses.{INPUT_KEY} is not an elicitation result"),
                None => "no answer came: the task was cancelled, or its client did not answer within the task's ttlMs".into(),
            } })),
        }))
    }

    pub(crate) fn was_asked(&self) -> bool {
        self.asked.lock().is_ok_and(|a| a.is_some())
    }

    fn take_asked(&self) -> Option<Value> {
        self.asked.lock().ok()?.take()
    }
}

/// Reads a 2026-07-28 call's retry: the answer, when its `requestState` verifies for this very
/// call; a JSON-RPC error (-32602) when the state is refused or the answer is not one.
/// Responses that come without a state are not trusted and the client is asked again, as it is
/// when the answer is missing from them.
pub(crate) fn retry(
    key: &StateKey,
    context: &RequestContext<RoleServer>,
    request: &CallToolRequestParams,
    (arguments, subject): (&Value, Option<&str>),
) -> Result<OneRequest, ErrorData> {
    let asking = OneRequest::asking(context.client_capabilities(), &context.meta);
    let Some(state) = &request.request_state else {
        return Ok(asking);
    };
    key.open(state, Call(&request.name, arguments, subject), wall_ms())
        .map_err(|refused| ErrorData::invalid_params(refused.message(&request.name), None))?;
    let answer = match request
        .input_responses
        .as_ref()
        .and_then(|r| r.get(INPUT_KEY))
    {
        None => None,
        Some(given) => Some(answer(given).ok_or_else(|| {
            ErrorData::invalid_params(
                format!("inputResponses.{INPUT_KEY} is not an elicitation result (`action`, and `content` when accepted)"),
                None,
            )
        })?),
    };
    Ok(OneRequest { answer, ..asking })
}

fn answer(given: &Value) -> Option<Confirmation> {
    let result: rmcp::model::ElicitResult = serde_json::from_value(given.clone()).ok()?;
    Some(super::confirm::from_result(result))
}

/// The input-required result of a call that asked for confirmation, when it did.
pub(crate) fn asked(
    key: &StateKey,
    one: &OneRequest,
    call: Call<'_>,
) -> Option<InputRequiredResult> {
    let form = one.take_asked()?;
    let state = key.seal(call, wall_ms());
    let result = json!({
        "resultType": "input_required",
        "inputRequests": { INPUT_KEY: { "method": "elicitation/create", "params": form } },
        "requestState": state,
    });
    serde_json::from_value(result).ok()
}

/// Expiry is kept in the machine's time, not the served clock: a `--now` given to serve (or to
/// replay a recording) does not make a state last for ever.
fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The log level a 2026-07-28 request asked for in its `_meta`, as the rank `notify` compares;
/// none asked, none sent.
fn log_rank(meta: &RequestMetaObject) -> usize {
    match meta.log_level() {
        Some(level) => {
            let name = serde_json::to_value(level).unwrap_or_default();
            crate::tools::notify::rank(name.as_str().unwrap_or("debug"))
        }
        None => usize::MAX,
    }
}

/// How long a 2026-07-28 client may keep `tools/list` (`ttlMs`).
const LIST_TTL_MS: u64 = 5 * 60 * 1000;

/// `tools/list`'s answer with `tools`, the tools its caller may see; on 2026-07-28 (`stateless`)
/// with caching hints, which a session's client never sees: the list is fixed while serve runs,
/// but a redeploy may change it; a listing behind a token is nobody else's.
pub(crate) fn listing(tools: Vec<Tool>, stateless: bool) -> ListToolsResult {
    let mut result = ListToolsResult::with_all_items(tools);
    if stateless {
        result.ttl_ms = Some(LIST_TTL_MS);
        result.cache_scope = Some(CacheScope::Private);
    }
    result
}
