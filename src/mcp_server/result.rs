//! A served call's MCP `CallToolResult`, made from the engine's outcome.
//!
//! Most results are a tool's text observation, and when the tool returned a JSON object, that
//! object as `structuredContent` too — and the observation is that very object written out
//! compactly (the engine writes it from the masked result and keeps it whole unless it cut it).
//! A JSON answer therefore need not build the result as a JSON tree and write the object out a
//! second time: [`CallResult::Text`] keeps the text, and [`CallResult::write`] writes it once
//! as a string and once as it is. Everything else is [`CallResult::Json`].

use crate::engine::CallOutcome;
use crate::redact::Redactor;
use serde_json::{json, Value};

/// A `CallToolResult`.
pub(crate) enum CallResult {
    /// A successful call's text; `structured` when the text is also its `structuredContent`
    /// (a JSON object, written compactly).
    Text {
        text: String,
        structured: bool,
    },
    Json(Value),
}

impl CallResult {
    pub(crate) fn is_error(&self) -> bool {
        match self {
            CallResult::Text { .. } => false,
            CallResult::Json(v) => v["isError"] == true,
        }
    }

    /// The result as JSON, in the same members and order [`CallResult::write`] writes.
    pub(crate) fn into_value(self) -> Value {
        match self {
            CallResult::Json(v) => v,
            CallResult::Text { text, structured } => {
                let object = structured
                    .then(|| serde_json::from_str::<Value>(&text).ok())
                    .flatten();
                let mut result =
                    json!({ "content": [{ "type": "text", "text": text }], "isError": false });
                if let Some(object) = object {
                    result["structuredContent"] = object;
                }
                result
            }
        }
    }

    pub(crate) fn to_value(&self) -> Value {
        match self {
            CallResult::Json(v) => v.clone(),
            CallResult::Text { text, structured } => CallResult::Text {
                text: text.clone(),
                structured: *structured,
            }
            .into_value(),
        }
    }

    /// Masks what `redactor` masks. The text was made from a masked result: finding nothing in
    /// it (the common case) leaves it as it is; else the result is masked as JSON, as others are.
    pub(crate) fn mask(&mut self, redactor: &Redactor) {
        if let CallResult::Text { text, .. } = self {
            if matches!(redactor.mask(text), std::borrow::Cow::Borrowed(_)) {
                return;
            }
            let taken = std::mem::replace(self, CallResult::Json(Value::Null));
            *self = CallResult::Json(taken.into_value());
        }
        if let CallResult::Json(v) = self {
            redactor.value(v);
        }
    }

    /// About how many bytes [`CallResult::write`] writes, to allocate them at once.
    pub(crate) fn size_hint(&self) -> usize {
        match self {
            // Escaping may lengthen the text; the rest is under 100 bytes.
            CallResult::Text { text, structured } => {
                text.len() + text.len() / 8 + 100 + if *structured { text.len() } else { 0 }
            }
            CallResult::Json(_) => 256,
        }
    }

    /// Appends the result's JSON to `out`, as `into_value` would have it written.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        // Writing JSON into a Vec cannot fail.
        match self {
            CallResult::Json(v) => {
                let _ = serde_json::to_writer(&mut *out, v);
            }
            CallResult::Text { text, structured } => {
                out.extend_from_slice(br#"{"content":[{"type":"text","text":"#);
                let _ = serde_json::to_writer(&mut *out, text);
                out.extend_from_slice(br#"}],"isError":false"#);
                if *structured {
                    out.extend_from_slice(br#","structuredContent":"#);
                    out.extend_from_slice(text.as_bytes());
                }
                out.push(b'}');
            }
        }
    }
}

pub(crate) fn error_result(kind: &str, message: &str) -> Value {
    json!({
        "content": [{ "type": "text", "text": format!("{kind}: {message}") }],
        "structuredContent": { "error": { "kind": kind, "message": message } },
        "isError": true,
    })
}

/// The engine's outcome as an MCP `CallToolResult`: the tool's own content items when it gave
/// more than text, else text content (what a model reads) and `structuredContent` when the
/// result is JSON; `isError` with the error kind and message.
/// The result's text is the call's observation, which the engine made; the result itself is
/// moved into it unless the outcome is `kept` whole (for a recording). `as_text`: a successful
/// text result may be [`CallResult::Text`].
pub(crate) fn to_mcp_result(outcome: &mut CallOutcome, kept: bool, as_text: bool) -> CallResult {
    if let Some(p) = &outcome.pending {
        return CallResult::Json(error_result(
            "needs_confirmation",
            &format!(
                "`{0}` needs confirmation before it runs; start `toolrun serve` with --approve {0} to allow it (a client that supports MCP elicitation is asked instead)",
                p.name
            ),
        ));
    }
    if let Some(e) = &outcome.error {
        return CallResult::Json(error_result(e.kind.as_str(), &e.message));
    }
    let mut text = outcome.observation.take();
    let Some(entry) = &mut outcome.result else {
        return CallResult::Json(error_result(
            "execution_error",
            "the tool produced no result",
        ));
    };
    // Content items beyond text (a mock's `content:`, a remote MCP tool's images, audio and
    // resources) are served as the tool gave them, with its `structuredContent`.
    if let Some(items) = entry.mcp.as_ref().filter(|k| k["content"].is_array()) {
        let mut result = json!({ "content": items["content"], "isError": false });
        if let Some(s) = items.get("structuredContent").filter(|s| s.is_object()) {
            result["structuredContent"] = s.clone();
        }
        return CallResult::Json(result);
    }
    // The observation is the object written out unless the engine cut it (see the module).
    if as_text && !kept && !entry.truncated {
        let structured = match &entry.result {
            Some(Value::Object(_)) => Some(true),
            Some(Value::String(_) | Value::Null) | None => Some(false),
            Some(_) => None,
        };
        if let (Some(structured), Some(text)) = (structured, &mut text) {
            return CallResult::Text {
                text: std::mem::take(text),
                structured,
            };
        }
    }
    let value = match kept {
        true => entry.result.clone(),
        false => entry.result.take(),
    }
    .unwrap_or(Value::Null);
    let text = text.unwrap_or_else(|| match &value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    let mut result = json!({ "content": [{ "type": "text", "text": text }], "isError": false });
    // `structuredContent` is an object; other JSON is wrapped so clients still get it typed.
    // A truncated result is text with a marker, not JSON any more.
    let structured = match value {
        Value::Object(_) => Some(value),
        Value::String(_) | Value::Null => None,
        other if !entry.truncated => Some(json!({ "result": other })),
        _ => None,
    };
    if let Some(s) = structured {
        result["structuredContent"] = s;
    }
    CallResult::Json(result)
}
