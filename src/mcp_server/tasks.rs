//! Long-running tools as tasks: the MCP tasks extension (`io.modelcontextprotocol/tasks`) on
//! 2026-07-28. A call of a tool marked `task:` by a client that declared the extension is
//! answered at once with a task (`resultType: "task"`) and runs on; the client polls
//! `tasks/get` for its status and, once it has ended, its result, answers a confirmation the
//! call waits for with `tasks/update`, and may `tasks/cancel` it.
//!
//! The tasks live in this process's memory, so a client polls the replica that made its task
//! (docs/deploy.md). What a client can make this process hold is bounded: at most
//! [`TaskBounds::max`] tasks at once (a new one evicts the oldest ended one; when every one is
//! still running, the call is refused), and an ended task's result is kept for
//! [`TaskBounds::ttl`] after it ended, then forgotten. This module knows no handler: `server`
//! hands it the call to run.

use rmcp::model::{
    DetailedTask, ErrorCode, GetTaskResult, InputRequest, InputRequests, JsonObject, Task,
    TaskPayload, TaskStatus,
};
use rmcp::ErrorData;
use serde_json::Value;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// How many tasks one process keeps, for how long an ended one's result, and the replica name
/// its task ids start with.
#[derive(Clone, Debug)]
pub(crate) struct TaskBounds {
    pub(crate) max: usize,
    pub(crate) ttl: Duration,
    /// `--replica-id`: a balancer sends a task's requests to the replica its id names
    /// (deploy/haproxy.cfg), since the task lives in that replica's memory.
    pub(crate) replica: Option<String>,
}

impl Default for TaskBounds {
    fn default() -> Self {
        TaskBounds {
            max: 1000,
            ttl: Duration::from_secs(60 * 60),
            replica: None,
        }
    }
}

/// How often a client is told to poll (`pollIntervalMs`).
const POLL_INTERVAL_MS: u64 = 1000;

/// How a task's call ended.
pub(crate) enum Ended {
    /// The call's `CallToolResult` (a tool error is one too, with `isError`).
    Completed(Value),
    /// Stopped by `tasks/cancel` before it ended.
    Cancelled,
    /// A protocol-level failure: the error is the task's, as a JSON-RPC error.
    Failed(ErrorData),
}

/// The tasks of this process.
pub(crate) struct Tasks {
    bounds: TaskBounds,
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    tasks: super::SessionMap<Entry>,
    /// Ids in the order their tasks were made: the oldest ended one is evicted first.
    order: VecDeque<String>,
}

struct Entry {
    task: Task,
    /// Whom `serve.auth` authenticated as the task's maker: nobody else sees it.
    subject: Option<String>,
    ended: Option<(Instant, TaskPayload)>,
    /// The question the call waits on, under its key, and where its answer goes.
    waiting: Option<(String, InputRequest, oneshot::Sender<Value>)>,
    cancel: watch::Sender<bool>,
}

impl Entry {
    fn touch(&mut self) {
        self.task.last_updated_at = rmcp::task_manager::current_timestamp();
    }

    fn detailed(&self) -> DetailedTask {
        let payload = match (&self.ended, &self.waiting) {
            (Some((_, payload)), _) => payload.clone(),
            (None, Some((key, request, _))) => TaskPayload::InputRequired {
                input_requests: InputRequests::from([(key.clone(), request.clone())]),
            },
            (None, None) => TaskPayload::Working,
        };
        DetailedTask::new(self.task.clone(), payload)
    }
}

/// What a task's call is handed: where it asks its client, and whether it was cancelled.
#[derive(Clone)]
pub(crate) struct TaskHandle {
    id: Arc<str>,
    inner: Arc<Mutex<Inner>>,
    cancelled: watch::Receiver<bool>,
    /// How long an ended task is kept, and so how long a question waits for its answer.
    ttl: Duration,
}

impl TaskHandle {
    /// Puts `request` to the client under `key` (`tasks/get` shows it, `input_required`) and
    /// waits for its answer through `tasks/update`; `None` when the task was cancelled, or no
    /// answer came in the time an ended task is kept.
    pub(crate) async fn ask(&self, key: &str, request: Value) -> Option<Value> {
        let request: InputRequest = serde_json::from_value(request).ok()?;
        let (tx, rx) = oneshot::channel();
        {
            let mut inner = self.inner.lock().ok()?;
            let entry = inner.tasks.get_mut(&*self.id)?;
            entry.waiting = Some((key.to_string(), request, tx));
            entry.touch();
        }
        let answer = tokio::time::timeout(self.ttl, rx).await.ok()?.ok();
        if answer.is_none() {
            if let Some(e) = self
                .inner
                .lock()
                .ok()
                .as_mut()
                .and_then(|i| i.tasks.get_mut(&*self.id))
            {
                e.waiting = None;
            }
        }
        answer
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        *self.cancelled.borrow()
    }

    /// Resolves once `tasks/cancel` came for this task.
    pub(crate) async fn cancelled(&self) {
        let mut rx = self.cancelled.clone();
        if rx.wait_for(|c| *c).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Tasks {
    pub(crate) fn new(bounds: TaskBounds) -> Tasks {
        Tasks {
            bounds,
            inner: Arc::default(),
        }
    }

    /// Makes a task for `subject` and runs `run(handle)` as it; the task can be read before
    /// this returns (a `tasks/get` right after the answer finds it). Refused when the process
    /// keeps as many tasks as it may and none of them has ended.
    pub(crate) fn create<F, Fut>(&self, subject: Option<&str>, run: F) -> Result<Task, ErrorData>
    where
        F: FnOnce(TaskHandle) -> Fut,
        Fut: Future<Output = Ended> + Send + 'static,
    {
        let id: Arc<str> = match &self.bounds.replica {
            Some(replica) => format!("{replica}.{}", new_id()?).into(),
            None => new_id()?.into(),
        };
        let now = rmcp::task_manager::current_timestamp();
        let mut task = Task::new(id.to_string(), TaskStatus::Working, now.clone(), now);
        task.ttl_ms = Some(u64::try_from(self.bounds.ttl.as_millis()).unwrap_or(u64::MAX));
        task.poll_interval_ms = Some(POLL_INTERVAL_MS);
        let (cancel, cancelled) = watch::channel(false);
        {
            let mut inner = self.lock()?;
            self.sweep(&mut inner);
            if inner.tasks.len() >= self.bounds.max && !evict_oldest_ended(&mut inner) {
                return Err(ErrorData::internal_error(
                    format!(
                        "this server runs {} tasks already (--max-tasks), none of them ended; poll or cancel one, then call again",
                        self.bounds.max
                    ),
                    None,
                ));
            }
            inner.order.push_back(id.to_string());
            inner.tasks.insert(
                id.to_string(),
                Entry {
                    task: task.clone(),
                    subject: subject.map(str::to_string),
                    ended: None,
                    waiting: None,
                    cancel,
                },
            );
        }
        let handle = TaskHandle {
            id: id.clone(),
            inner: self.inner.clone(),
            cancelled,
            ttl: self.bounds.ttl,
        };
        let work = tokio::spawn(run(handle));
        let inner = self.inner.clone();
        tokio::spawn(async move {
            // A call that panicked fails its task rather than leave it working for ever.
            let ended = work.await.unwrap_or_else(|_| {
                Ended::Failed(ErrorData::internal_error(
                    "the task's call stopped unexpectedly",
                    None,
                ))
            });
            if let Some(entry) = inner
                .lock()
                .ok()
                .as_mut()
                .and_then(|i| i.tasks.get_mut(&*id))
            {
                let payload = match ended {
                    Ended::Completed(Value::Object(result)) => TaskPayload::Completed { result },
                    Ended::Completed(_) => TaskPayload::Failed {
                        error: error_object(&ErrorData::internal_error(
                            "the call's result is not an object",
                            None,
                        )),
                    },
                    Ended::Cancelled => TaskPayload::Cancelled,
                    Ended::Failed(error) => TaskPayload::Failed {
                        error: error_object(&error),
                    },
                };
                entry.task.status = payload.status();
                entry.ended = Some((Instant::now(), payload));
                entry.waiting = None;
                entry.touch();
            }
        });
        Ok(task)
    }

    /// `tasks/get`: the task's status, its question while it waits for one, its result or
    /// error once it has ended.
    pub(crate) fn get(&self, id: &str, subject: Option<&str>) -> Result<GetTaskResult, ErrorData> {
        let mut inner = self.lock()?;
        self.sweep(&mut inner);
        let entry = find(&mut inner, id, subject)?;
        Ok(GetTaskResult::new(entry.detailed()))
    }

    /// `tasks/update`: the answers the client sends; one to a question the task is not waiting
    /// on is ignored (the extension's rule).
    pub(crate) fn update(
        &self,
        id: &str,
        subject: Option<&str>,
        mut answers: std::collections::BTreeMap<String, Value>,
    ) -> Result<(), ErrorData> {
        let mut inner = self.lock()?;
        self.sweep(&mut inner);
        let entry = find(&mut inner, id, subject)?;
        let asked = entry.waiting.as_ref().map(|(key, ..)| key.clone());
        if let Some(answer) = asked.and_then(|key| answers.remove(&key)) {
            if let Some((_, _, tx)) = entry.waiting.take() {
                let _ = tx.send(answer);
            }
            entry.touch();
        }
        Ok(())
    }

    /// `tasks/cancel`: the call is stopped (it ends `cancelled`, as `tasks/get` shows next); a
    /// task that has ended stays as it ended.
    pub(crate) fn cancel(&self, id: &str, subject: Option<&str>) -> Result<(), ErrorData> {
        let mut inner = self.lock()?;
        self.sweep(&mut inner);
        let entry = find(&mut inner, id, subject)?;
        if entry.ended.is_none() {
            entry.cancel.send_replace(true);
            entry.waiting = None;
            entry.touch();
        }
        Ok(())
    }

    /// How many tasks this process keeps now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().map(|i| i.tasks.len()).unwrap_or(0)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Inner>, ErrorData> {
        self.inner
            .lock()
            .map_err(|_| ErrorData::internal_error("the task store is unusable", None))
    }

    /// Forgets the tasks that ended longer ago than they are kept.
    fn sweep(&self, inner: &mut Inner) {
        let ttl = self.bounds.ttl;
        let Inner { tasks, order } = inner;
        tasks.retain(|_, e| e.ended.as_ref().is_none_or(|(at, _)| at.elapsed() < ttl));
        order.retain(|id| tasks.contains_key(id));
    }
}

/// Drops the task that was made first among those that have ended; `false` when none has.
fn evict_oldest_ended(inner: &mut Inner) -> bool {
    let Inner { tasks, order } = inner;
    let Some(at) = order
        .iter()
        .position(|id| tasks.get(id).is_some_and(|e| e.ended.is_some()))
    else {
        return false;
    };
    if let Some(id) = order.remove(at) {
        tasks.remove(&id);
    }
    true
}

/// The task `id`, if it is one `subject` made; -32602 otherwise, whether it never was, has
/// been forgotten, or is someone else's (which is not told apart).
fn find<'a>(
    inner: &'a mut Inner,
    id: &str,
    subject: Option<&str>,
) -> Result<&'a mut Entry, ErrorData> {
    match inner.tasks.get_mut(id) {
        Some(entry) if entry.subject.as_deref() == subject => Ok(entry),
        _ => Err(ErrorData::new(
            ErrorCode::INVALID_PARAMS,
            format!("no task `{id}` here: it never was, or it ended and was forgotten (a task's result is kept for its ttlMs after it ends), or another replica made it (a client polls the replica it made its task on)"),
            None,
        )),
    }
}

/// A task id: 128 random bits, so that one client cannot guess another's.
fn new_id() -> Result<String, ErrorData> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| ErrorData::internal_error("cannot draw a random task id", None))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A JSON-RPC error as a failed task carries it (`code`, `message`, `data`).
fn error_object(error: &ErrorData) -> JsonObject {
    match serde_json::to_value(error) {
        Ok(Value::Object(map)) => map,
        _ => JsonObject::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn done(value: Value) -> impl FnOnce(TaskHandle) -> std::future::Ready<Ended> {
        move |_| std::future::ready(Ended::Completed(value))
    }

    async fn settle() {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_full_store_evicts_the_oldest_ended_task_and_refuses_when_all_run() {
        let tasks = Tasks::new(TaskBounds {
            max: 2,
            ttl: Duration::from_secs(60),
            replica: Some("replica-2".into()),
        });
        let first = tasks.create(None, done(json!({ "content": [] }))).unwrap();
        assert!(first.task_id.starts_with("replica-2."), "{}", first.task_id);
        settle().await;
        let running = tasks
            .create(None, |h| async move {
                h.cancelled().await;
                Ended::Cancelled
            })
            .unwrap();
        let third = tasks.create(None, |h| async move {
            h.cancelled().await;
            Ended::Cancelled
        });
        assert!(third.is_ok());
        assert_eq!(tasks.len(), 2);
        let gone = tasks.get(&first.task_id, None).unwrap_err();
        assert_eq!(gone.code, ErrorCode::INVALID_PARAMS);
        let refused = tasks.create(None, done(json!({}))).unwrap_err();
        assert!(
            refused.message.contains("--max-tasks"),
            "{}",
            refused.message
        );
        tasks.cancel(&running.task_id, None).unwrap();
        settle().await;
        let status = tasks.get(&running.task_id, None).unwrap().task.status();
        assert_eq!(status, TaskStatus::Cancelled);
    }

    #[tokio::test]
    async fn an_ended_task_is_forgotten_after_its_ttl_and_is_its_subjects_alone() {
        let tasks = Tasks::new(TaskBounds {
            max: 10,
            ttl: Duration::from_millis(1),
            replica: None,
        });
        let task = tasks
            .create(Some("alice"), done(json!({ "content": [] })))
            .unwrap();
        let as_bob = tasks.get(&task.task_id, Some("bob")).unwrap_err();
        assert_eq!(as_bob.code, ErrorCode::INVALID_PARAMS);
        settle().await;
        std::thread::sleep(Duration::from_millis(5));
        let late = tasks.get(&task.task_id, Some("alice")).unwrap_err();
        assert_eq!(late.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(tasks.len(), 0);
    }
}
