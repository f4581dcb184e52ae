//! Streamed replies (`stream: true`): server-sent events read as they arrive, each provider's
//! chunks folded back into the reply the non-streaming API would have sent. The engine, the
//! trace and replays then see exactly what they see without streaming; only the text deltas
//! (for `--events` and a terminal) are extra.

use serde_json::{json, Map, Value};

/// One server-sent event: its `event:` name (empty when none) and its `data:` lines joined.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SseEvent {
    pub(crate) event: String,
    pub(crate) data: String,
}

/// The `text/event-stream` framing (WHATWG HTML §9.2): lines end in LF, CR or CRLF; a blank
/// line dispatches; `:` lines are comments (keep-alives); several `data:` lines join with LF.
/// Bytes arrive in arbitrary pieces, so a line (or a UTF-8 character) may be split anywhere.
#[derive(Default)]
pub(crate) struct SseParser {
    line: Vec<u8>,
    /// The previous byte was a CR: a following LF belongs to the same line end.
    after_cr: bool,
    event: String,
    data: Option<String>,
}

impl SseParser {
    pub(crate) fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        for &b in bytes {
            if self.after_cr && b == b'\n' {
                self.after_cr = false;
                continue;
            }
            self.after_cr = b == b'\r';
            if b == b'\n' || b == b'\r' {
                let line = std::mem::take(&mut self.line);
                self.line_done(&String::from_utf8_lossy(&line), out);
            } else {
                self.line.push(b);
            }
        }
    }

    /// The end of the body: a last event without its blank line still counts (servers that
    /// close right after `data: [DONE]`).
    pub(crate) fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&String::from_utf8_lossy(&line), out);
        }
        self.line_done("", out);
    }

    fn line_done(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                out.push(SseEvent {
                    event: std::mem::take(&mut self.event),
                    data,
                });
            }
            self.event.clear();
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "event" => self.event = value.to_string(),
            _ => {}
        }
    }
}

/// Folds a provider's stream into its non-streamed reply, reporting text as it comes.
pub(crate) trait Assembler: Send {
    /// One event; `text` receives each piece of answer text.
    fn event(&mut self, ev: &SseEvent, text: &mut dyn FnMut(&str));
    /// The reply the non-streaming API would have sent, or the error object the stream
    /// carried.
    fn reply(&self) -> Value;
}

// ---------------------------------------------------------------------------------------
// OpenAI Chat Completions chunks
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct CallParts {
    index: Option<u64>,
    id: String,
    name: String,
    arguments: String,
}

#[derive(Default)]
pub(crate) struct OpenAiStream {
    done: bool,
    text: Option<String>,
    refusal: String,
    calls: Vec<CallParts>,
    /// The legacy `function_call` delta, used only when no `tool_calls` came.
    function_call: Option<CallParts>,
    finish_reason: Option<Value>,
    usage: Option<Value>,
    error: Option<Value>,
    id: Option<Value>,
    model: Option<Value>,
}

impl OpenAiStream {
    /// A tool-call fragment. OpenAI sends `id` and `name` in a call's first chunk only, keyed
    /// by `index`; llama.cpp's server repeats `id`, `type` and `name` in every chunk — a
    /// repeated name is the same call, not more name.
    fn call_delta(&mut self, d: &Value) {
        let index = d.get("index").and_then(Value::as_u64);
        let id = d.get("id").and_then(Value::as_str).unwrap_or("");
        let at = match index {
            Some(i) => self.calls.iter().position(|c| c.index == Some(i)),
            None if !id.is_empty() => self.calls.iter().position(|c| c.id == id),
            None => self.calls.len().checked_sub(1),
        };
        let at = at.unwrap_or_else(|| {
            self.calls.push(CallParts {
                index,
                ..CallParts::default()
            });
            self.calls.len() - 1
        });
        merge_call(
            &mut self.calls[at],
            d.get("function").unwrap_or(&Value::Null),
            id,
        );
    }
}

fn merge_call(call: &mut CallParts, f: &Value, id: &str) {
    if call.id.is_empty() && !id.is_empty() {
        call.id = id.to_string();
    }
    if let Some(name) = f.get("name").and_then(Value::as_str) {
        if call.name.is_empty() {
            call.name = name.to_string();
        }
    }
    match f.get("arguments") {
        Some(Value::String(s)) => call.arguments.push_str(s),
        Some(v @ Value::Object(_)) => call.arguments.push_str(&v.to_string()),
        _ => {}
    }
}

impl Assembler for OpenAiStream {
    fn event(&mut self, ev: &SseEvent, text: &mut dyn FnMut(&str)) {
        if self.done || ev.data.trim() == "[DONE]" {
            self.done = true;
            return;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(&ev.data) else {
            return;
        };
        if let Some(e) = chunk.get("error").filter(|e| !e.is_null()) {
            self.error = Some(json!({ "error": e }));
            return;
        }
        for (key, slot) in [("id", &mut self.id), ("model", &mut self.model)] {
            if slot.is_none() {
                *slot = chunk.get(key).cloned();
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(u.clone());
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return;
        };
        if let Some(f) = choice.get("finish_reason").filter(|f| !f.is_null()) {
            self.finish_reason = Some(f.clone());
        }
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(t) = delta.get("content").and_then(Value::as_str) {
            if !t.is_empty() {
                text(t);
            }
            self.text.get_or_insert_with(String::new).push_str(t);
        }
        if let Some(r) = delta.get("refusal").and_then(Value::as_str) {
            self.refusal.push_str(r);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for d in calls {
                self.call_delta(d);
            }
        }
        if let Some(fc) = delta.get("function_call").filter(|f| f.is_object()) {
            merge_call(
                self.function_call.get_or_insert_with(Default::default),
                fc,
                "",
            );
        }
    }

    fn reply(&self) -> Value {
        if let Some(e) = &self.error {
            return e.clone();
        }
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        message.insert("content".into(), json!(self.text));
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(|c| {
                json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } })
            })
            .collect();
        if !calls.is_empty() {
            message.insert("tool_calls".into(), Value::Array(calls));
        } else if let Some(fc) = &self.function_call {
            message.insert(
                "function_call".into(),
                json!({ "name": fc.name, "arguments": fc.arguments }),
            );
        }
        if !self.refusal.is_empty() {
            message.insert("refusal".into(), json!(self.refusal));
        }
        let mut reply = json!({
            "object": "chat.completion",
            "choices": [{ "index": 0, "message": message, "finish_reason": self.finish_reason }],
        });
        for (key, v) in [
            ("id", &self.id),
            ("model", &self.model),
            ("usage", &self.usage),
        ] {
            if let Some(v) = v {
                reply[key] = v.clone();
            }
        }
        reply
    }
}

// ---------------------------------------------------------------------------------------
// Anthropic Messages events
// ---------------------------------------------------------------------------------------

#[derive(Default)]
pub(crate) struct AnthropicStream {
    message: Map<String, Value>,
    /// Content blocks in order; tool inputs as the JSON text received so far.
    blocks: Vec<(Value, String)>,
    /// Stream index → position in `blocks` (merged blocks share a position).
    positions: Vec<(u64, usize)>,
    usage: Map<String, Value>,
    stop_reason: Option<Value>,
    error: Option<Value>,
}

impl AnthropicStream {
    fn block_start(&mut self, index: u64, block: &Value) {
        let is_tool = block.get("type").and_then(Value::as_str) == Some("tool_use");
        let id = block.get("id").and_then(Value::as_str);
        // LiteLLM turns each fragment of a streamed tool call into its own block with the same
        // id; they are one call.
        if let (true, Some(id)) = (is_tool, id) {
            if let Some(pos) = self.blocks.iter().position(|(b, _)| {
                b.get("type").and_then(Value::as_str) == Some("tool_use")
                    && b.get("id").and_then(Value::as_str) == Some(id)
            }) {
                self.positions.push((index, pos));
                return;
            }
        }
        let mut b = block.clone();
        let mut partial = String::new();
        if is_tool {
            // `input` starts as `{}` and arrives as `input_json_delta`s; a server that sends it
            // whole at the start sends no deltas.
            if let Some(input) = b
                .get("input")
                .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
            {
                partial = input.to_string();
            }
        }
        if let Some(o) = b.as_object_mut() {
            o.remove("input");
        }
        self.blocks.push((b, partial));
        self.positions.push((index, self.blocks.len() - 1));
    }

    fn position(&self, index: u64) -> Option<usize> {
        self.positions
            .iter()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, p)| *p)
    }
}

impl Assembler for AnthropicStream {
    fn event(&mut self, ev: &SseEvent, text: &mut dyn FnMut(&str)) {
        let Ok(data) = serde_json::from_str::<Value>(&ev.data) else {
            return;
        };
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str());
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                if let Some(m) = data.get("message").and_then(Value::as_object) {
                    self.message = m.clone();
                    if let Some(u) = m.get("usage").and_then(Value::as_object) {
                        self.usage.extend(u.clone());
                    }
                }
            }
            "content_block_start" => {
                self.block_start(index, data.get("content_block").unwrap_or(&Value::Null));
            }
            "content_block_delta" => {
                let Some(pos) = self.position(index) else {
                    return;
                };
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let (block, partial) = &mut self.blocks[pos];
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let t = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        if !t.is_empty() {
                            text(t);
                        }
                        let so_far = block.get("text").and_then(Value::as_str).unwrap_or("");
                        block["text"] = json!(format!("{so_far}{t}"));
                    }
                    Some("input_json_delta") => {
                        partial.push_str(
                            delta
                                .get("partial_json")
                                .and_then(Value::as_str)
                                .unwrap_or(""),
                        );
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) = data.get("delta").and_then(|d| d.get("stop_reason")) {
                    self.stop_reason = Some(r.clone());
                }
                // Counts here are cumulative; a zero does not undo `message_start`'s count.
                if let Some(u) = data.get("usage").and_then(Value::as_object) {
                    for (k, v) in u {
                        if v.as_u64().is_some_and(|n| n > 0) || !self.usage.contains_key(k) {
                            self.usage.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            "error" => self.error = Some(data.clone()),
            _ => {}
        }
    }

    fn reply(&self) -> Value {
        if let Some(e) = &self.error {
            return e.clone();
        }
        let mut reply = self.message.clone();
        reply.insert("type".into(), json!("message"));
        let content: Vec<Value> = self
            .blocks
            .iter()
            .map(|(b, partial)| {
                let mut b = b.clone();
                if b.get("type").and_then(Value::as_str) == Some("tool_use") {
                    // Unparsable input is kept as text: the engine reports it as invalid arguments.
                    b["input"] = if partial.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(partial).unwrap_or_else(|_| json!(partial))
                    };
                }
                b
            })
            .collect();
        reply.insert("content".into(), Value::Array(content));
        if let Some(r) = &self.stop_reason {
            reply.insert("stop_reason".into(), r.clone());
        }
        if !self.usage.is_empty() {
            reply.insert("usage".into(), Value::Object(self.usage.clone()));
        }
        Value::Object(reply)
    }
}

/// Feeds bytes through the framing into an assembler.
pub(crate) struct Reader {
    parser: SseParser,
    assembler: Box<dyn Assembler>,
    /// Bytes fed so far: none means the body arrived whole (a replay, a compressed stream).
    pub(crate) fed: u64,
}

impl Reader {
    pub(crate) fn new(assembler: Box<dyn Assembler>) -> Reader {
        Reader {
            parser: SseParser::default(),
            assembler,
            fed: 0,
        }
    }

    pub(crate) fn feed(&mut self, bytes: &[u8], text: &mut dyn FnMut(&str)) {
        self.fed += bytes.len() as u64;
        let mut events = Vec::new();
        self.parser.feed(bytes, &mut events);
        for ev in &events {
            self.assembler.event(ev, text);
        }
    }

    pub(crate) fn finish(&mut self, text: &mut dyn FnMut(&str)) -> Value {
        let mut events = Vec::new();
        self.parser.finish(&mut events);
        for ev in &events {
            self.assembler.event(ev, text);
        }
        self.assembler.reply()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(pieces: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for piece in pieces {
            p.feed(piece, &mut out);
        }
        p.finish(&mut out);
        out
    }

    #[test]
    fn framing_survives_any_split() {
        let body = ": keep-alive\r\n\r\nevent: x\r\ndata: {\"a\":\r\ndata:1}\r\n\r\ndata: hé\n\ndata: [DONE]";
        let whole = events(&[body.as_bytes()]);
        assert_eq!(
            whole,
            [
                SseEvent {
                    event: "x".into(),
                    data: "{\"a\":\n1}".into()
                },
                SseEvent {
                    event: "".into(),
                    data: "hé".into()
                },
                SseEvent {
                    event: "".into(),
                    data: "[DONE]".into()
                },
            ]
        );
        let bytes = body.as_bytes();
        for cut in 1..bytes.len() {
            assert_eq!(
                events(&[&bytes[..cut], &bytes[cut..]]),
                whole,
                "cut at {cut}"
            );
        }
        let one_by_one: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(events(&one_by_one), whole);
    }

    fn assemble(a: Box<dyn Assembler>, body: &str) -> (Value, String) {
        let mut r = Reader::new(a);
        let mut text = String::new();
        r.feed(body.as_bytes(), &mut |t| text.push_str(t));
        let reply = r.finish(&mut |t| text.push_str(t));
        (reply, text)
    }

    #[test]
    fn openai_chunks_fold_into_a_reply() {
        let body = r#"data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}

data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}

data: {"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}

data: [DONE]

"#;
        let (reply, text) = assemble(Box::<OpenAiStream>::default(), body);
        assert_eq!(text, "Hello");
        assert_eq!(reply["choices"][0]["message"]["content"], "Hello");
        assert_eq!(reply["choices"][0]["finish_reason"], "stop");
        assert_eq!(reply["usage"]["prompt_tokens"], 5);
    }

    #[test]
    fn openai_tool_call_fragments_and_llama_cpp_repeats() {
        let openai = r#"data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"price","arguments":""}}]}}]}

data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"t\":"}}]}}]}

data: {"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"price","arguments":"{}"}}]}}]}

data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"A\"}"}}]}}]}

data: {"choices":[{"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]
"#;
        let (reply, text) = assemble(Box::<OpenAiStream>::default(), openai);
        assert_eq!(text, "");
        let calls = &reply["choices"][0]["message"]["tool_calls"];
        assert_eq!(calls[0]["function"]["arguments"], "{\"t\":\"A\"}");
        assert_eq!(calls[0]["id"], "a");
        assert_eq!(calls[1]["id"], "b");
        // llama.cpp: id, type and name in every chunk, plus a legacy function_call delta.
        let llama = r#"data: {"choices":[{"delta":{"role":null,"content":null,"tool_calls":[{"index":0,"id":"call__0","type":"function","function":{"name":"price","arguments":"{\"t\""}}],"function_call":{"name":"price:","arguments":"{\"t\""}},"finish_reason":null}]}

data: {"choices":[{"delta":{"role":null,"content":null,"tool_calls":[{"index":0,"id":"call__0","type":"function","function":{"name":"price","arguments":": \"A\"}"}}],"function_call":{"name":"price:","arguments":": \"A\"}"}},"finish_reason":"tool_calls"}]}

data: [DONE]
"#;
        let (reply, _) = assemble(Box::<OpenAiStream>::default(), llama);
        let m = &reply["choices"][0]["message"];
        assert_eq!(m["tool_calls"].as_array().map(Vec::len), Some(1));
        assert_eq!(m["tool_calls"][0]["function"]["name"], "price");
        assert_eq!(
            m["tool_calls"][0]["function"]["arguments"],
            "{\"t\": \"A\"}"
        );
        assert!(m.get("function_call").is_none());
        assert_eq!(m["content"], Value::Null);
        // An error in the stream is the reply's error.
        let (reply, _) = assemble(
            Box::<OpenAiStream>::default(),
            "data: {\"error\":{\"message\":\"overloaded\"}}\n\n",
        );
        assert_eq!(reply["error"]["message"], "overloaded");
    }

    #[test]
    fn anthropic_events_fold_into_a_message() {
        let body = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[],"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type":"ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"check."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"price","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"t\": "}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"A\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":30}}

event: message_stop
data: {"type":"message_stop"}

"#;
        let (reply, text) = assemble(Box::<AnthropicStream>::default(), body);
        assert_eq!(text, "Let me check.");
        assert_eq!(
            reply["content"][0],
            json!({"type": "text", "text": "Let me check."})
        );
        assert_eq!(
            reply["content"][1],
            json!({"type": "tool_use", "id": "toolu_1", "name": "price", "input": {"t": "A"}})
        );
        assert_eq!(reply["stop_reason"], "tool_use");
        assert_eq!(
            reply["usage"],
            json!({"input_tokens": 12, "output_tokens": 30})
        );
    }

    #[test]
    fn anthropic_split_tool_blocks_with_one_id_are_one_call() {
        // LiteLLM in front of llama.cpp: one block per fragment, all with the same id.
        let block = |i: u32, frag: &str| {
            format!(
                "data: {{\"type\":\"content_block_start\",\"index\":{i},\"content_block\":{{\"type\":\"tool_use\",\"id\":\"call_0\",\"name\":\"price\",\"input\":{{}}}}}}\n\ndata: {{\"type\":\"content_block_delta\",\"index\":{i},\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":{}}}}}\n\n",
                serde_json::to_string(frag).unwrap()
            )
        };
        let body = format!(
            "{}{}data: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"tool_use\"}},\"usage\":{{\"input_tokens\":0,\"output_tokens\":9}}}}\n\n",
            block(0, "{\"t\": "),
            block(1, "\"A\"}")
        );
        let (reply, _) = assemble(Box::<AnthropicStream>::default(), &body);
        assert_eq!(reply["content"].as_array().map(Vec::len), Some(1));
        assert_eq!(reply["content"][0]["input"], json!({"t": "A"}));
        assert_eq!(reply["usage"]["output_tokens"], 9);
    }
}
