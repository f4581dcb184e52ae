//! A run as GenAI semantic-convention spans, made from its trace document (the masked JSON every
//! command writes): `invoke_agent {spec}` with a `chat {model}` CLIENT span per model call and
//! an `execute_tool {tool}` span per call, an HTTP tool's request as a CLIENT child. The same
//! mapping serves live runs and recorded ones (`toolrun export otel`), so both look alike.

use super::mcp::ClientCall;
use super::span::Kind;
use super::span::{now_ns, Parent, Span, Value};
use crate::redact::Redactor;
use serde_json::{json, Value as Json};
use std::collections::HashMap;

/// How a run's spans are made.
pub(crate) struct Mapping {
    /// Messages, arguments and results as attributes (opt-in).
    pub(crate) content: bool,
    /// Only the current attribute names (`OTEL_SEMCONV_STABILITY_OPT_IN`).
    pub(crate) latest_only: bool,
    /// Applied to every exported string on top of the trace's own masking.
    pub(crate) redactor: Redactor,
    /// The run's `tools/call` requests (from its live, recorded or replayed exchanges), each
    /// taken by the executed call it belongs to for an MCP CLIENT span.
    pub(crate) mcp_calls: std::sync::Mutex<Vec<ClientCall>>,
    /// The spec's `kind: mcp` tools as (toolrun's name, its server, the server's name for it),
    /// when the spec is at hand; without it a call is matched by its name and arguments alone.
    pub(crate) mcp_names: Vec<(String, String, String)>,
    /// The spec's tools as (name, `gen_ai.tool.type`), when the spec is at hand.
    pub(crate) tool_types: Vec<(String, &'static str)>,
    /// Where each model's recorded requests went, as (model, host, port): the server of a
    /// recording made before model calls noted theirs.
    pub(crate) model_servers: Vec<(String, String, u16)>,
}

/// Nanoseconds since the epoch of an RFC 3339 time.
pub(crate) fn parse_time(text: Option<&str>) -> Option<u64> {
    let t: jiff::Timestamp = text?.parse().ok()?;
    u64::try_from(t.as_nanosecond()).ok()
}

fn ms(v: Option<&Json>) -> f64 {
    v.and_then(Json::as_f64).unwrap_or(0.0).max(0.0)
}

fn ns_of(duration_ms: f64) -> u64 {
    (duration_ms * 1_000_000.0) as u64
}

impl Mapping {
    /// The MCP requests of a run among its `exchanges`; `registry` names its `kind: mcp` tools.
    pub(crate) fn with_mcp(
        mut self,
        exchanges: &[crate::fixture::Exchange],
        registry: Option<&crate::registry::Registry>,
    ) -> Mapping {
        self.mcp_calls = std::sync::Mutex::new(super::mcp::client_calls(exchanges));
        for e in exchanges.iter().filter(|e| e.kind == "model") {
            let Ok(url) = url::Url::parse(&e.request.url) else {
                continue;
            };
            if let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) {
                if !self.model_servers.iter().any(|(m, _, _)| *m == e.source) {
                    let server = (e.source.clone(), host.to_string(), port);
                    self.model_servers.push(server);
                }
            }
        }
        for t in registry.into_iter().flat_map(|r| &r.tools) {
            self.tool_types.push((t.name.clone(), tool_type(&t.kind)));
            if let crate::registry::ToolKind::Mcp(m) = &t.kind {
                let entry = (t.name.clone(), m.server.name.clone(), m.remote_name.clone());
                self.mcp_names.push(entry);
            }
        }
        self
    }

    /// The `tools/call` an executed call sent, if it went to an MCP server.
    fn mcp_call_of(&self, r: &Json) -> Option<ClientCall> {
        let mut calls = self.mcp_calls.lock().ok()?;
        if calls.is_empty() || r.get("http").is_some_and(Json::is_object) {
            return None;
        }
        let name = r["name"].as_str()?;
        let (server, remote) = match self.mcp_names.iter().find(|(n, _, _)| n == name) {
            Some((_, server, remote)) => (Some(server.as_str()), remote.as_str()),
            // The spec says it is not an MCP tool.
            None if !self.mcp_names.is_empty() => return None,
            None => (None, name),
        };
        // Two servers may each have a tool of that name: the spec says whose it is.
        let same = |c: &ClientCall| c.remote == remote && server.is_none_or(|s| c.server == s);
        let args = r.get("arguments").unwrap_or(&Json::Null);
        let at = calls
            .iter()
            .position(|c| same(c) && c.arguments == *args)
            .or_else(|| calls.iter().position(same))?;
        Some(calls.remove(at))
    }

    fn text(&self, s: &str) -> String {
        self.redactor.str(s)
    }

    fn json_text(&self, v: &Json) -> String {
        let mut v = v.clone();
        self.redactor.value(&mut v);
        match v {
            Json::String(s) => s,
            other => other.to_string(),
        }
    }

    /// The spans of one run, under `parent`; the first is the run's `invoke_agent` span.
    pub(crate) fn run_spans(&self, trace: &Json, parent: Parent) -> Vec<Span> {
        let spec = trace["spec"]["name"].as_str().unwrap_or("");
        let duration = ms(trace.get("duration_ms"));
        let start = parse_time(trace["started_at"].as_str())
            .unwrap_or_else(|| now_ns().saturating_sub(ns_of(duration)));
        let mut run = Span::new(parent, format!("invoke_agent {spec}"), Kind::Internal);
        run.timed(start, duration);
        self.run_attributes(&mut run, trace);
        let mut spans = Vec::new();
        let step_ends = self.chat_spans(trace, &run, &mut spans);
        self.tool_spans(trace, &run, start, &step_ends, &mut spans);
        spans.insert(0, run);
        spans
    }

    fn run_attributes(&self, run: &mut Span, trace: &Json) {
        let spec = trace["spec"]["name"].as_str().unwrap_or("");
        let conversation = super::otlp_hex(&run.span_id);
        run.set("gen_ai.operation.name", "invoke_agent")
            .set("gen_ai.agent.name", self.text(spec))
            .set("gen_ai.conversation.id", conversation);
        if let Some(model) = trace["model"].as_str() {
            run.set("gen_ai.request.model", self.text(model));
        }
        if let Some(provider) = trace["model_calls"][0]["provider"].as_str() {
            self.provider(run, provider);
        }
        for key in ["status", "stop_reason"] {
            if let Some(v) = trace[key].as_str() {
                run.set(&format!("toolrun.{key}"), v);
            }
        }
        for key in ["steps", "tool_call_count"] {
            if let Some(v) = trace[key].as_i64() {
                run.set(&format!("toolrun.{key}"), v);
            }
        }
        if let Some(sha) = trace["spec"]["sha256"].as_str() {
            run.set("toolrun.spec.sha256", sha);
        }
        usage(run, &trace["usage"]);
        if trace["status"] == "failed" {
            let why = trace["error"].as_str().unwrap_or("the run failed");
            let kind = trace["stop_reason"].as_str().unwrap_or("failed");
            run.fail(kind, self.text(why));
        }
        if self.content {
            if let Some(q) = trace["query"].as_str() {
                let input =
                    json!([{ "role": "user", "parts": [{ "type": "text", "content": q }] }]);
                run.set(
                    "gen_ai.input.messages",
                    self.json_text(&Json::String(input.to_string())),
                );
            }
            if let Some(answer) = trace["final_output"].as_str() {
                let output = json!([{ "role": "assistant", "parts": [{ "type": "text", "content": answer }], "finish_reason": "stop" }]);
                run.set(
                    "gen_ai.output.messages",
                    self.json_text(&Json::String(output.to_string())),
                );
            }
        }
    }

    fn provider(&self, span: &mut Span, provider: &str) {
        span.set("gen_ai.provider.name", provider);
        if !self.latest_only {
            // The name before semantic conventions 1.37, still read by some backends.
            span.set("gen_ai.system", provider);
        }
    }

    /// One `chat` span per recorded model call; returns when each step's call ended, by step.
    fn chat_spans(&self, trace: &Json, run: &Span, out: &mut Vec<Span>) -> HashMap<u64, u64> {
        let mut ends = HashMap::new();
        let calls = trace["model_calls"].as_array().cloned().unwrap_or_default();
        let assistants = assistant_positions(trace);
        for call in &calls {
            let model = call["model"].as_str().unwrap_or("");
            let mut span = Span::new(run.as_parent(), format!("chat {model}"), Kind::Client);
            let start = parse_time(call["started_at"].as_str()).unwrap_or(run.start_ns);
            span.timed(start, ms(call.get("duration_ms")));
            // What the provider answered with; a scripted model (or an older recording) has
            // only the model asked for and toolrun's reading of the reply.
            let answered = call["response_model"].as_str().unwrap_or(model);
            span.set("gen_ai.operation.name", "chat")
                .set("gen_ai.request.model", self.text(model))
                .set("gen_ai.response.model", self.text(answered));
            self.provider(&mut span, call["provider"].as_str().unwrap_or("scripted"));
            self.model_server(&mut span, trace, call);
            let reasons: Vec<String> = match call["finish_reasons"].as_array() {
                Some(given) => given
                    .iter()
                    .filter_map(Json::as_str)
                    .map(|r| self.text(r))
                    .collect(),
                None => call["finish_reason"]
                    .as_str()
                    .map(str::to_string)
                    .into_iter()
                    .collect(),
            };
            if !reasons.is_empty() {
                span.set("gen_ai.response.finish_reasons", Value::StrArray(reasons));
            }
            usage(&mut span, &call["usage"]);
            if let Some(e) = call["error"].as_str() {
                span.fail("model_error", self.text(e));
            }
            let step = call["step"].as_u64().unwrap_or(0);
            if self.content {
                let separate = call["provider"] == "anthropic";
                self.chat_content(&mut span, trace, (&assistants, step), separate);
            }
            ends.insert(step, span.end_ns);
            out.push(span);
        }
        ends
    }

    /// `server.address` / `server.port` of a live model's call: as the call noted them, or from
    /// the recording's requests to that model; none for a scripted model.
    fn model_server(&self, span: &mut Span, trace: &Json, call: &Json) {
        let noted = call["server_address"].as_str().map(|h| {
            let port = call["server_port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok());
            (h, port)
        });
        let recorded = || {
            let model = trace["model"].as_str()?;
            let (_, host, port) = self.model_servers.iter().find(|(m, _, _)| m == model)?;
            Some((host.as_str(), Some(*port)))
        };
        if call["provider"] == "scripted" {
            return;
        }
        if let Some((host, port)) = noted.or_else(recorded) {
            // A host holds no secret, but every exported string passes the masker.
            span.set("server.address", self.text(host));
            if let Some(port) = port {
                span.set("server.port", i64::from(port));
            }
        }
    }

    /// The messages the model was sent at `step` and the one it answered.
    /// `separate_system`: the provider's API takes the system prompt apart from the messages
    /// (Anthropic's `system`), so it is `gen_ai.system_instructions`, as the conventions ask;
    /// where it is a message (OpenAI's `role: system`), it stays in `gen_ai.input.messages`.
    fn chat_content(
        &self,
        span: &mut Span,
        trace: &Json,
        (assistants, step): (&[usize], u64),
        separate_system: bool,
    ) {
        let messages = trace["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        // Failed calls leave no assistant message: the n-th answer belongs to the n-th success.
        let answered = trace["model_calls"]
            .as_array()
            .map(|c| {
                c.iter()
                    .take_while(|m| m["step"].as_u64() != Some(step))
                    .filter(|m| m["error"].is_null())
                    .count()
            })
            .unwrap_or(0);
        let upto = assistants.get(answered).copied().unwrap_or(messages.len());
        let is_system = |m: &&Json| separate_system && m["role"] == "system";
        let system: Vec<&str> = messages[..upto]
            .iter()
            .filter(is_system)
            .filter_map(|m| m["content"].as_str())
            .collect();
        if !system.is_empty() {
            // As the API was sent it: one text, the system messages joined.
            let parts = json!([{ "type": "text", "content": system.join("\n\n") }]);
            span.set(
                "gen_ai.system_instructions",
                self.json_text(&Json::String(parts.to_string())),
            );
        }
        // The reasoning right before the answer is part of this call's output, not its input.
        let reasoned = upto > 0
            && upto < messages.len()
            && messages
                .get(upto - 1)
                .is_some_and(|m| m["role"] == "reasoning");
        let input_end = if reasoned { upto - 1 } else { upto };
        let input: Vec<Json> = messages[..input_end]
            .iter()
            .filter(|m| !is_system(m))
            .map(semconv_message)
            .collect();
        span.set(
            "gen_ai.input.messages",
            self.json_text(&Json::String(Json::Array(input).to_string())),
        );
        if let Some(answer) = assistants.get(answered).and_then(|i| messages.get(*i)) {
            let mut message = semconv_message(answer);
            if reasoned {
                let mut parts = reasoning_parts(&messages[upto - 1]);
                if let Some(rest) = message["parts"].as_array() {
                    parts.extend(rest.iter().cloned());
                }
                message["parts"] = Json::Array(parts);
            }
            let output = Json::Array(vec![message]);
            span.set(
                "gen_ai.output.messages",
                self.json_text(&Json::String(output.to_string())),
            );
        }
    }

    fn tool_spans(
        &self,
        trace: &Json,
        run: &Span,
        run_start: u64,
        step_ends: &HashMap<u64, u64>,
        out: &mut Vec<Span>,
    ) {
        let steps = call_steps(trace);
        let mut cursor = run_start;
        for r in trace["tool_results"].as_array().into_iter().flatten() {
            let start = parse_time(r["started_at"].as_str()).unwrap_or(cursor);
            let r = &with_failed_exchange(r, trace);
            let mut spans = self.executed(r, run.as_parent(), start);
            cursor = spans.last().map_or(cursor, |s| s.end_ns);
            out.append(&mut spans);
        }
        // Calls refused before they ran (unknown tool, invalid arguments, denied): a span
        // without duration where the model proposed them, so the refusal is visible.
        let executed: Vec<&str> = trace["tool_results"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["id"].as_str())
            .collect();
        for e in trace["tool_errors"].as_array().into_iter().flatten() {
            let id = e["id"].as_str().unwrap_or("");
            if executed.contains(&id) || e["name"].as_str().unwrap_or("").is_empty() {
                continue;
            }
            let at = steps
                .get(id)
                .and_then(|s| step_ends.get(s))
                .copied()
                .unwrap_or(run_start);
            let mut span = self.tool_span(run.as_parent(), e);
            span.timed(at, 0.0);
            span.fail(
                e["kind"].as_str().unwrap_or("execution_error"),
                self.text(e["message"].as_str().unwrap_or("")),
            );
            out.push(span);
        }
    }

    /// An executed call (a trace's `tool_results` entry, or `toolrun call`'s record): its
    /// `execute_tool` span last, an HTTP tool's request before it.
    pub(crate) fn executed(&self, r: &Json, parent: Parent, start: u64) -> Vec<Span> {
        let mut span = self.tool_span(parent, r);
        span.timed(start, ms(r.get("duration_ms")));
        if let Some(e) = r.get("error").filter(|e| e.is_object()) {
            span.fail(
                e["kind"].as_str().unwrap_or("execution_error"),
                self.text(e["message"].as_str().unwrap_or("")),
            );
        }
        if self.content {
            if let Some(result) = r.get("result") {
                span.set("gen_ai.tool.call.result", self.json_text(result));
            }
        }
        let mut out = Vec::new();
        if let Some(http) = r.get("http").filter(|h| h.is_object()) {
            out.push(self.http_span(&span, http));
        }
        if let Some(call) = self.mcp_call_of(r) {
            span.set("gen_ai.tool.type", "extension");
            out.push(super::mcp::client_span(&span, &call, &self.redactor));
        }
        out.push(span);
        out
    }

    fn tool_span(&self, parent: Parent, call: &Json) -> Span {
        let name = call["name"].as_str().unwrap_or("");
        let mut span = Span::new(parent, format!("execute_tool {name}"), Kind::Internal);
        span.set("gen_ai.operation.name", "execute_tool")
            .set("gen_ai.tool.name", self.text(name))
            .set("gen_ai.tool.type", self.tool_type_of(name, call));
        if let Some(id) = call["id"].as_str().filter(|id| !id.is_empty()) {
            span.set("gen_ai.tool.call.id", self.text(id));
        }
        if self.content {
            if let Some(args) = call.get("arguments") {
                span.set(
                    "gen_ai.tool.call.arguments",
                    self.json_text(&Json::String(args.to_string())),
                );
            }
        }
        span
    }

    /// The spec's word when at hand; a recording without it shows an HTTP tool by its request
    /// (an MCP tool by its `tools/call`, in `executed`).
    fn tool_type_of(&self, name: &str, call: &Json) -> &'static str {
        match self.tool_types.iter().find(|(n, _)| n == name) {
            Some((_, t)) => t,
            None if call.get("http").is_some_and(Json::is_object) => "extension",
            None => "function",
        }
    }

    fn http_span(&self, tool: &Span, http: &Json) -> Span {
        let method = http["method"].as_str().unwrap_or("GET");
        let mut span = Span::new(tool.as_parent(), method.to_string(), Kind::Client);
        span.start_ns = tool.start_ns;
        span.end_ns = tool.end_ns;
        span.set("http.request.method", method);
        if let Some(url) = http["url"].as_str() {
            span.set("url.full", self.text(url));
            if let Ok(u) = url::Url::parse(url) {
                if let Some(host) = u.host_str() {
                    span.set("server.address", host.to_string());
                }
                if let Some(port) = u.port_or_known_default() {
                    span.set("server.port", i64::from(port));
                }
            }
        }
        if let Some(status) = http["status"].as_i64() {
            span.set("http.response.status_code", status);
            if status >= 400 {
                span.fail(status.to_string(), format!("HTTP {status}"));
            }
        }
        if let Some(n) = http["attempts"].as_i64() {
            span.set("http.request.resend_count", n - 1);
        }
        span
    }
}

/// A call recorded before failed HTTP calls kept their exchange in `http`: the exchange from its
/// error's details (method, URL, status), so its CLIENT span is there as a success's is.
fn with_failed_exchange<'t>(r: &'t Json, trace: &Json) -> std::borrow::Cow<'t, Json> {
    if r.get("http").is_some() || r["status"] != "error" {
        return std::borrow::Cow::Borrowed(r);
    }
    let exchange = trace["tool_errors"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["id"] == r["id"])
        .and_then(|e| crate::tools::HttpCall::answered_with_error(&e["details"]));
    match exchange {
        Some(http) => {
            let mut r = r.clone();
            r["http"] = json!(http);
            std::borrow::Cow::Owned(r)
        }
        None => std::borrow::Cow::Borrowed(r),
    }
}

/// The conventions' `gen_ai.tool.type` for a kind of tool: an HTTP or MCP tool is run by the
/// agent (toolrun) "to directly call external APIs" (`extension`); a built-in, mock or table
/// tool is a predefined function toolrun runs in-process on the model's arguments
/// (`function`). None is `datastore`: toolrun cannot tell which calls retrieve data.
fn tool_type(kind: &crate::registry::ToolKind) -> &'static str {
    use crate::registry::ToolKind;
    match kind {
        ToolKind::Http(_) | ToolKind::Mcp(_) => "extension",
        ToolKind::Mock(_) | ToolKind::Table(_) | ToolKind::Builtin(_) => "function",
    }
}

fn usage(span: &mut Span, usage: &Json) {
    for (from, to) in [
        ("input_tokens", "gen_ai.usage.input_tokens"),
        ("output_tokens", "gen_ai.usage.output_tokens"),
        // Parts of the two counts above, when the provider reported them.
        (
            "cached_input_tokens",
            "gen_ai.usage.cache_read.input_tokens",
        ),
        ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
    ] {
        if let Some(n) = usage[from].as_i64() {
            span.set(to, n);
        }
    }
}

/// Where each assistant message sits in `messages`.
fn assistant_positions(trace: &Json) -> Vec<usize> {
    trace["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, m)| m["role"] == "assistant")
        .map(|(i, _)| i)
        .collect()
}

/// The model call (step) that proposed each call id.
fn call_steps(trace: &Json) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    let mut step = 0;
    for m in trace["messages"].as_array().into_iter().flatten() {
        if m["role"] != "assistant" {
            continue;
        }
        step += 1;
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            if let Some(id) = c["id"].as_str() {
                out.insert(id.to_string(), step);
            }
        }
    }
    out
}

/// A reasoning entry's summaries as the conventions' `reasoning` parts.
fn reasoning_parts(m: &Json) -> Vec<Json> {
    m["summary"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .map(|s| json!({ "type": "reasoning", "content": s }))
        .collect()
}

/// A trace message in the conventions' message format (`role` and typed `parts`). A reasoning
/// entry (Responses API) is the assistant's, its summaries `reasoning` parts.
fn semconv_message(m: &Json) -> Json {
    if m["role"] == "reasoning" {
        return json!({ "role": "assistant", "parts": reasoning_parts(m) });
    }
    let role = m["role"].as_str().unwrap_or("user");
    let mut parts = Vec::new();
    if let Some(text) = m["content"].as_str() {
        if role == "tool" {
            parts.push(
                json!({ "type": "tool_call_response", "id": m["tool_call_id"], "response": text }),
            );
        } else {
            parts.push(json!({ "type": "text", "content": text }));
        }
    }
    for c in m["tool_calls"].as_array().into_iter().flatten() {
        parts.push(json!({ "type": "tool_call", "id": c["id"], "name": c["name"], "arguments": c["arguments"] }));
    }
    json!({ "role": role, "parts": parts })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(server: &str, remote: &str, args: Json) -> ClientCall {
        ClientCall {
            server: server.into(),
            remote: remote.into(),
            arguments: args,
            request_id: Some(format!("{server}-1")),
            session: None,
            protocol: None,
            transport: "tcp",
            address: None,
            port: None,
            rpc_error: None,
            is_error: false,
        }
    }

    #[test]
    fn a_call_takes_the_request_of_its_own_server_and_arguments() {
        let mapping = Mapping {
            content: false,
            latest_only: false,
            redactor: Redactor::default(),
            mcp_calls: std::sync::Mutex::new(vec![
                call("a", "search", json!({ "q": 1 })),
                call("b", "search", json!({ "q": 1 })),
                call("b", "search", json!({ "q": 2 })),
            ]),
            mcp_names: vec![
                ("a_search".into(), "a".into(), "search".into()),
                ("b_search".into(), "b".into(), "search".into()),
            ],
            tool_types: Vec::new(),
            model_servers: Vec::new(),
        };
        let result = |name: &str, q: i64| json!({ "name": name, "arguments": { "q": q } });
        let took = |name: &str, q: i64| mapping.mcp_call_of(&result(name, q));
        let b2 = took("b_search", 2).unwrap();
        assert_eq!(
            (b2.server.as_str(), &b2.arguments),
            ("b", &json!({ "q": 2 }))
        );
        assert_eq!(took("b_search", 1).unwrap().server, "b");
        assert_eq!(took("a_search", 1).unwrap().server, "a");
        assert!(took("a_search", 1).is_none(), "each request is taken once");
        assert!(
            took("calculator", 1).is_none(),
            "not an MCP tool of the spec"
        );
    }
}
