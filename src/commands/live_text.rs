//! A streamed answer printed as it arrives when stdout is a terminal, instead of all at once
//! at the end. It listens to the `model_text_delta` events, which are already masked.

use crate::events::Events;
use crate::registry::{ModelKind, Registry};
use std::io::Write;
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Shown {
    /// The text of the model call in progress, as printed.
    turn: String,
}

pub(crate) struct LiveText {
    shown: Arc<Mutex<Shown>>,
}

impl LiveText {
    /// `Some` when the model streams and a person is watching stdout (not `--json`).
    pub(crate) fn attach(
        events: &mut Events,
        registry: &Registry,
        model: &str,
        on_terminal: bool,
    ) -> Option<LiveText> {
        let streams = registry.models.iter().any(|m| {
            m.name == model
                && matches!(&m.kind, ModelKind::OpenAi(l) | ModelKind::Anthropic(l) if l.stream)
        });
        if !(streams && on_terminal) {
            return None;
        }
        let shown = Arc::new(Mutex::new(Shown::default()));
        let sink = Arc::clone(&shown);
        events.tap(move |name, data| {
            let Ok(mut s) = sink.lock() else { return };
            let mut out = std::io::stdout().lock();
            match name {
                // A new model call: text beside the last call's tool calls stays on its line.
                "model_http_request" if !s.turn.is_empty() => {
                    let _ = writeln!(out);
                    s.turn.clear();
                }
                "model_text_delta" => {
                    let text = data["text"].as_str().unwrap_or("");
                    let _ = write!(out, "{}", crate::term::visible(text));
                    let _ = out.flush();
                    s.turn.push_str(text);
                }
                _ => {}
            }
        });
        Some(LiveText { shown })
    }

    /// Ends the streamed output. True when `answer` (masked) is what was just streamed, so it
    /// is not printed a second time.
    pub(crate) fn finish(&self, answer: &str) -> bool {
        let Ok(mut s) = self.shown.lock() else {
            return false;
        };
        if s.turn.is_empty() {
            return false;
        }
        println!();
        // A chat's next answer starts afresh.
        let streamed = std::mem::take(&mut s.turn);
        streamed.trim() == answer.trim()
    }
}
