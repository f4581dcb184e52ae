//! What leaves the engine is masked: the trace at the end, observations cut without leaving half
//! a secret.

use super::Engine;
use crate::models::Message;
use crate::redact::Redactor;
use crate::trace::Trace;

/// Cuts masked text: a secret that begins just before the limit is masked, not left half there.
/// Text within the limit comes back as it is, not copied.
pub(super) fn truncate_observation(
    redactor: &Redactor,
    text: String,
    max_chars: usize,
) -> (String, bool) {
    // No more bytes than the limit is no more characters either.
    if text.len() <= max_chars || text.char_indices().nth(max_chars).is_none() {
        return (text, false);
    }
    match redactor.cut_masked(&text, max_chars) {
        (kept, 0) => (kept, false),
        (kept, more) => (format!("{kept}…[truncated: {more} more characters]"), true),
    }
}

impl<'a> Engine<'a> {
    /// Masks what the loop has not masked yet. Tool results and the observations of successful
    /// calls were masked as they were made (they can be megabytes: not twice).
    pub(super) fn masked(&self, mut t: Trace) -> Trace {
        let r = &self.redactor;
        if r.is_empty() {
            return t;
        }
        let text = |s: &mut String| {
            if let std::borrow::Cow::Owned(m) = r.mask(s) {
                *s = m;
            }
        };
        text(&mut t.query);
        t.final_output.iter_mut().for_each(text);
        t.error.iter_mut().for_each(text);
        for e in &mut t.tool_results {
            r.value(&mut e.arguments);
            if let Some(err) = &mut e.error {
                text(&mut err.message);
            }
        }
        for e in &mut t.tool_errors {
            text(&mut e.message);
            e.details.iter_mut().for_each(|d| r.value(d));
        }
        // What a provider said about a call (its error quotes the reply) is text from outside.
        for c in &mut t.model_calls {
            c.error.iter_mut().for_each(text);
            c.response_model.iter_mut().for_each(text);
            c.finish_reasons.iter_mut().flatten().for_each(text);
        }
        if let Some(p) = &mut t.pending_tool_call {
            r.value(&mut p.arguments);
        }
        for m in &mut t.messages {
            match m {
                Message::System { content } | Message::User { content } => text(content),
                Message::Assistant {
                    content,
                    tool_calls,
                } => {
                    content.iter_mut().for_each(text);
                    tool_calls
                        .iter_mut()
                        .for_each(|c| r.value(&mut c.arguments));
                }
                Message::Tool {
                    content, is_error, ..
                } if *is_error => text(content),
                Message::Tool { .. } => {}
                Message::Reasoning { summary, items } => {
                    summary.iter_mut().for_each(text);
                    items.iter_mut().for_each(|i| r.value(i));
                }
            }
        }
        t
    }
}
