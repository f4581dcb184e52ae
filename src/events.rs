//! The `--events` stream: JSON Lines written as things happen, so a watcher sees a long run move.

use crate::redact::Redactor;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::Mutex;

type Tap = Box<dyn Fn(&str, &Value) + Send + Sync>;

#[derive(Default)]
pub struct Events {
    sink: Option<Mutex<Box<dyn Write + Send>>>,
    redactor: Redactor,
    /// Listeners inside the process (the fixture recorder, progress bars).
    taps: Vec<Tap>,
}

impl Events {
    pub fn none() -> Events {
        Events::default()
    }

    pub(crate) fn to_writer(writer: Box<dyn Write + Send>, redactor: Redactor) -> Events {
        Events {
            sink: Some(Mutex::new(writer)),
            redactor,
            taps: Vec::new(),
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
        if !self.is_active() {
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
            if let Ok(mut w) = sink.lock() {
                // A watcher reads line by line: flush each event as it happens.
                let _ = writeln!(w, "{line}");
                let _ = w.flush();
            }
        }
    }
}
