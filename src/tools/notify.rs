//! Notifications a tool sends while it runs: log messages and progress. A mock sends the ones
//! its spec lists (`notify:`); an HTTP tool reports retries and bytes received. Whoever started
//! the call decides where they go: `toolrun serve` turns them into MCP notifications for the
//! calling client, and every run writes them as `tool_notify` lines of `--events`.

use super::ToolEnv;
use crate::vocab::MCP_LOG_LEVELS as LEVELS;
use serde_json::{json, Value};

/// Public only because [`crate::engine::RunOptions`] (public for the benches) carries a
/// [`Notifier`].
#[allow(unreachable_pub)]
#[derive(Clone, Debug, PartialEq)]
pub enum Notice {
    Log {
        /// One of [`crate::vocab::MCP_LOG_LEVELS`].
        level: String,
        logger: Option<String>,
        data: Value,
    },
    Progress {
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// The call asks its client to come back for the result (SEP-1699 polling): served over
    /// streamable HTTP, the call's event stream closes here and the rest of the call's events
    /// wait in the session's event store for the client's `GET` with `Last-Event-ID`.
    Reconnect,
}

/// Where a call's notices go besides `--events`: set by `toolrun serve` for each call.
pub(crate) type Notifier = dyn Fn(Notice) + Send + Sync;

impl Notice {
    /// A rendered `notify:` item (`{log: {...}}` or `{progress: {...}}`; the compiler checked
    /// its shape, so anything else is skipped).
    pub(crate) fn from_item(item: &Value) -> Option<Notice> {
        if item.get("reconnect").is_some() {
            return (item["reconnect"] == json!(true)).then_some(Notice::Reconnect);
        }
        if let Some(log) = item.get("log") {
            let level = log.get("level")?.as_str()?;
            return LEVELS.contains(&level).then(|| Notice::Log {
                level: level.to_string(),
                logger: log.get("logger").and_then(Value::as_str).map(String::from),
                data: log.get("data").cloned().unwrap_or(Value::Null),
            });
        }
        let p = item.get("progress")?;
        Some(Notice::Progress {
            progress: p.get("progress")?.as_f64()?,
            total: p.get("total").and_then(Value::as_f64),
            message: p.get("message").and_then(Value::as_str).map(String::from),
        })
    }

    /// The notice as `notify:` writes it.
    pub(crate) fn to_json(&self) -> Value {
        match self {
            Notice::Log {
                level,
                logger,
                data,
            } => {
                let mut log = json!({ "level": level, "data": data });
                if let Some(l) = logger {
                    log["logger"] = json!(l);
                }
                json!({ "log": log })
            }
            Notice::Progress {
                progress,
                total,
                message,
            } => {
                let mut p = json!({ "progress": progress });
                if let Some(t) = total {
                    p["total"] = json!(t);
                }
                if let Some(m) = message {
                    p["message"] = json!(m);
                }
                json!({ "progress": p })
            }
            Notice::Reconnect => json!({ "reconnect": true }),
        }
    }
}

/// The rank of a level (0 = debug); unknown levels rank lowest.
pub(crate) fn rank(level: &str) -> usize {
    LEVELS.iter().position(|l| *l == level).unwrap_or(0)
}

/// Sends one notice for the call running in `env`: to `--events`, and to whoever started it.
pub(crate) fn send(env: &ToolEnv<'_>, notice: Notice) {
    env.events.emit_with("tool_notify", || {
        let mut line = notice.to_json();
        line["id"] = json!(env.call_id);
        env.call_event(line)
    });
    if let Some(notify) = env.notify {
        notify(notice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_read_back_as_written() {
        for item in [
            json!({ "log": { "level": "info", "data": "started" } }),
            json!({ "log": { "level": "error", "logger": "db", "data": { "code": 7 } } }),
            json!({ "progress": { "progress": 50.0, "total": 100.0, "message": "half" } }),
            json!({ "progress": { "progress": 1.0 } }),
            json!({ "reconnect": true }),
        ] {
            let notice = Notice::from_item(&item).expect("a notice");
            assert_eq!(notice.to_json(), item);
        }
        assert_eq!(
            Notice::from_item(&json!({ "log": { "level": "loud", "data": 1 } })),
            None
        );
        assert!(rank("error") > rank("info"));
    }
}
