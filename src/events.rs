//! The `--events` stream: JSON Lines written as things happen, so a watcher sees a long run move.
//!
//! What a server sends during a call is capped per call ([`MAX_NOTIFICATIONS_PER_CALL`]): a
//! server that floods logs or progress would otherwise fill a disk (40 MB in 13 s). A reader that
//! goes away (a FIFO closed) ends the stream with one warning; the run goes on. Any other write
//! error (a full disk) ends the stream too and fails the command at its end, as `--trace` does
//! ([`write_failure`]).

use crate::redact::Redactor;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;

type Tap = Box<dyn Fn(&str, &Value) + Send + Sync>;

/// Lines a call's server notifications and requests may make; the rest are counted, and the
/// count is the call's `tool_finished` line's `notifications_dropped`.
pub(crate) const MAX_NOTIFICATIONS_PER_CALL: u32 = 1000;

/// What a server sends on its own during a call (progress, logs, its requests).
const NOTIFICATIONS: &[&str] = &[
    "tool_progress",
    "mcp_log",
    "mcp_server_request",
    "tool_notify",
];

/// The first write error of an `--events` stream in this process (its target and the error).
static WRITE_FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// Why an `--events` stream could not be written, once the command is done: the command fails.
pub(crate) fn write_failure() -> Option<String> {
    WRITE_FAILURE.lock().ok().and_then(|f| f.clone())
}

struct Sink {
    /// `None` once a write failed: nothing more is written.
    writer: Option<Box<dyn Write + Send>>,
    /// The path, for messages.
    target: String,
}

#[derive(Default)]
pub struct Events {
    sink: Option<Mutex<Sink>>,
    redactor: Redactor,
    /// Listeners inside the process (the fixture recorder, progress bars).
    taps: Vec<Tap>,
    /// Notification lines so far, by call (session, call id).
    notified: Mutex<HashMap<(String, String), u32>>,
}

impl Events {
    pub fn none() -> Events {
        Events::default()
    }

    /// Events written to `writer`, `target` naming it in messages.
    pub(crate) fn to_writer(
        writer: Box<dyn Write + Send>,
        target: String,
        redactor: Redactor,
    ) -> Events {
        Events {
            sink: Some(Mutex::new(Sink {
                writer: Some(writer),
                target,
            })),
            redactor,
            ..Events::default()
        }
    }

    pub(crate) fn tap(&mut self, f: impl Fn(&str, &Value) + Send + Sync + 'static) {
        self.taps.push(Box::new(f));
    }

    pub(crate) fn is_active(&self) -> bool {
        self.sink.is_some() || !self.taps.is_empty()
    }

    /// Builds the event only when someone listens: the loop's hot path stays allocation-free.
    pub(crate) fn emit_with(&self, event: &str, data: impl FnOnce() -> Value) {
        if self.is_active() {
            self.emit(event, data());
        }
    }

    pub(crate) fn emit(&self, event: &str, mut data: Value) {
        if !self.is_active() || !self.within_cap(event, &mut data) {
            return;
        }
        self.redactor.value(&mut data);
        for tap in &self.taps {
            tap(event, &data);
        }
        if let Some(sink) = &self.sink {
            let mut line = json!({ "event": event });
            if let (Value::Object(target), Value::Object(fields)) = (&mut line, data) {
                target.extend(fields);
            }
            if let Ok(mut sink) = sink.lock() {
                sink.write_line(&line);
            }
        }
    }

    /// Counts a call's notifications: false past the cap (the event is dropped). A call's
    /// `tool_finished` takes the count of those dropped, and ends the call's count.
    fn within_cap(&self, event: &str, data: &mut Value) -> bool {
        let is_notification = NOTIFICATIONS.contains(&event);
        if !is_notification && event != "tool_finished" {
            return true;
        }
        let key = (
            data["session"].as_str().unwrap_or("").to_string(),
            data["id"].as_str().unwrap_or("").to_string(),
        );
        let Ok(mut notified) = self.notified.lock() else {
            return true;
        };
        if !is_notification {
            let seen = notified.remove(&key).unwrap_or(0);
            if seen > MAX_NOTIFICATIONS_PER_CALL {
                data["notifications_dropped"] = json!(seen - MAX_NOTIFICATIONS_PER_CALL);
            }
            return true;
        }
        let seen = notified.entry(key).or_insert(0);
        *seen = seen.saturating_add(1);
        *seen <= MAX_NOTIFICATIONS_PER_CALL
    }
}

impl Sink {
    fn write_line(&mut self, line: &Value) {
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        let mut text = line.to_string();
        text.push('\n');
        // One write per line, flushed: a watcher reads line by line as things happen.
        let Err(e) = without_sigpipe(|| {
            writer
                .write_all(text.as_bytes())
                .and_then(|()| writer.flush())
        }) else {
            return;
        };
        self.writer = None;
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            eprintln!(
                "toolrun: warning: the reader of --events `{}` went away; no more events are written",
                crate::term::visible(&self.target)
            );
            return;
        }
        if let Ok(mut failure) = WRITE_FAILURE.lock() {
            failure.get_or_insert_with(|| format!("cannot write events to `{}`: {e}", self.target));
        }
    }
}

/// Runs `write` with SIGPIPE held back from this thread: a FIFO whose reader left is an
/// `EPIPE` error to handle, not the end of the process (toolrun keeps SIGPIPE's default action
/// so that `toolrun schema | head` ends quietly). The signal the failed write raised is taken
/// before the mask is restored.
#[cfg(unix)]
fn without_sigpipe(write: impl FnOnce() -> std::io::Result<()>) -> std::io::Result<()> {
    // SAFETY: the signal set is initialised by sigemptyset before use; pthread_sigmask and
    // sigtimedwait only read and write the sets and the timespec passed, all on this stack.
    unsafe {
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        let mut before: libc::sigset_t = std::mem::zeroed();
        if libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, &mut before) != 0 {
            return write();
        }
        let result = write();
        if result
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
        {
            let now = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            libc::sigtimedwait(&pipe, std::ptr::null_mut(), &now);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        result
    }
}

#[cfg(not(unix))]
fn without_sigpipe(write: impl FnOnce() -> std::io::Result<()>) -> std::io::Result<()> {
    write()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_calls_notifications_are_capped_and_its_end_says_how_many_were_dropped() {
        let lines = Lines::default();
        let events = Events::to_writer(Box::new(lines.clone()), "t".into(), Redactor::default());
        let extra = 25;
        for n in 0..MAX_NOTIFICATIONS_PER_CALL + extra {
            events.emit("mcp_log", json!({ "id": "call_1", "data": n }));
            events.emit("tool_progress", json!({ "id": "call_2", "progress": n }));
        }
        events.emit("tool_finished", json!({ "id": "call_1" }));
        events.emit("mcp_log", json!({ "id": "call_1", "data": "a new call" }));
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let parsed: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let count = |id: &str| parsed.iter().filter(|l| l["id"] == id).count();
        let cap = MAX_NOTIFICATIONS_PER_CALL as usize;
        assert_eq!(count("call_2"), cap);
        assert_eq!(count("call_1"), cap + 2);
        let finished = parsed
            .iter()
            .find(|l| l["event"] == "tool_finished")
            .unwrap();
        assert_eq!(finished["notifications_dropped"], json!(extra));
        assert_eq!(parsed.last().unwrap()["data"], "a new call");
    }
}
