//! The Responses API's event stream (`stream: true` with `api: responses`) folded into the
//! response the non-streaming API would have sent: the final `response.completed` (or
//! `response.incomplete` / `response.failed`) object, with the output items the stream built
//! when the server left them out of it. A stream that ends before its response did is an
//! error, never a silent partial answer.

use super::stream::{Assembler, SseEvent};
use serde_json::{json, Value};

/// The `error.type` of the reply a stream folds into when it ended before the response did.
pub(crate) const STREAM_ENDED: &str = "toolrun_stream_ended";

/// One output item as it streams: the item (replaced by `response.output_item.done`'s), and
/// the text and arguments its deltas carried.
#[derive(Default)]
struct Item {
    index: u64,
    item: Value,
    text: String,
    arguments: String,
    done: bool,
}

#[derive(Default)]
pub(crate) struct ResponsesStream {
    items: Vec<Item>,
    /// The response of `response.completed`, `.incomplete` or `.failed`.
    finished: Option<Value>,
    error: Option<Value>,
    events: usize,
}

impl ResponsesStream {
    fn item(&mut self, index: u64) -> &mut Item {
        let at = match self.items.iter().position(|i| i.index == index) {
            Some(at) => at,
            None => {
                self.items.push(Item {
                    index,
                    ..Item::default()
                });
                self.items.len() - 1
            }
        };
        &mut self.items[at]
    }

    /// The output items in order, each completed from its deltas when no `done` came.
    fn output(&self) -> Vec<Value> {
        let mut items: Vec<&Item> = self.items.iter().collect();
        items.sort_by_key(|i| i.index);
        items
            .into_iter()
            .map(|i| {
                let mut item = i.item.clone();
                if i.done || !item.is_object() {
                    return item;
                }
                match item.get("type").and_then(Value::as_str) {
                    Some("message") => {
                        item["content"] = json!([{ "type": "output_text", "text": i.text }]);
                    }
                    Some("function_call") => item["arguments"] = json!(i.arguments),
                    _ => {}
                }
                item
            })
            .collect()
    }
}

impl Assembler for ResponsesStream {
    fn event(&mut self, ev: &SseEvent, text: &mut dyn FnMut(&str)) {
        // `data: [DONE]` (LiteLLM) and keep-alives are not JSON.
        let Ok(data) = serde_json::from_str::<Value>(&ev.data) else {
            return;
        };
        self.events += 1;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str());
        let index = data
            .get("output_index")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let delta = || data.get("delta").and_then(Value::as_str).unwrap_or("");
        match kind {
            "response.output_item.added" => {
                let it = self.item(index);
                if !it.done {
                    it.item = data.get("item").cloned().unwrap_or(Value::Null);
                }
            }
            "response.output_item.done" => {
                let it = self.item(index);
                it.item = data.get("item").cloned().unwrap_or(Value::Null);
                it.done = true;
            }
            "response.output_text.delta" => {
                let t = delta();
                if !t.is_empty() {
                    text(t);
                }
                self.item(index).text.push_str(t);
            }
            "response.function_call_arguments.delta" => {
                self.item(index).arguments.push_str(delta());
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                self.finished = data.get("response").cloned();
            }
            // `{type: error, code, message}`, or the message inside an `error` object.
            "error" => {
                let e = data.get("error").filter(|e| e.is_object()).unwrap_or(&data);
                self.error = Some(json!({ "error": {
                    "code": e.get("code").cloned().unwrap_or(Value::Null),
                    "message": e.get("message").and_then(Value::as_str).unwrap_or("an error event without a message"),
                } }));
            }
            _ => {}
        }
    }

    fn reply(&self) -> Value {
        if let Some(e) = &self.error {
            return e.clone();
        }
        let Some(mut response) = self.finished.clone().filter(Value::is_object) else {
            return json!({ "error": {
                "type": STREAM_ENDED,
                "message": format!(
                    "the stream ended without `response.completed` ({} event(s) read): the answer is incomplete",
                    self.events
                ),
            } });
        };
        let empty = response
            .get("output")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if empty && !self.items.is_empty() {
            response["output"] = Value::Array(self.output());
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(events: &[Value]) -> (Value, String) {
        let mut s = ResponsesStream::default();
        let mut shown = String::new();
        for e in events {
            let ev = SseEvent {
                event: String::new(),
                data: e.to_string(),
            };
            s.event(&ev, &mut |t| shown.push_str(t));
        }
        (s.reply(), shown)
    }

    #[test]
    fn deltas_fill_items_the_final_response_left_out() {
        let (reply, shown) = fold(&[
            json!({"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "role": "assistant", "content": []}}),
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Hel"}),
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "lo"}),
            json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "call_id": "c", "name": "f", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{\"a\":"}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "1}"}),
            json!({"type": "response.completed", "response": {"id": "r", "status": "completed", "output": []}}),
        ]);
        assert_eq!(shown, "Hello");
        assert_eq!(reply["output"][0]["content"][0]["text"], "Hello");
        assert_eq!(reply["output"][1]["arguments"], "{\"a\":1}");
        assert_eq!(reply["status"], "completed");
    }

    #[test]
    fn a_stream_without_its_end_or_with_an_error_is_an_error() {
        let (reply, _) = fold(&[
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Hel"}),
        ]);
        assert_eq!(reply["error"]["type"], STREAM_ENDED);
        let (reply, _) = fold(&[
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Hel"}),
            json!({"type": "error", "code": "server_error", "message": "boom"}),
        ]);
        assert_eq!(reply["error"]["message"], "boom");
    }
}
