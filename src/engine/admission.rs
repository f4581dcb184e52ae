//! Admission: is a proposed call registered, allowed by the policy, well-formed, within budget
//! and not a loop? A refusal is an observation for the model; some also end the run.

use super::{Admission, Engine, Refusal, State};
use crate::models::ProposedCall;
use crate::registry::{ServeLimits, Tool};
use crate::tools::{ErrorKind, ToolError};
use crate::trace::StopReason;
use serde_json::Value;

/// `name canonical-arguments`: what loop detection compares. Written into one buffer: no
/// `format!` of a second string.
pub(super) fn signature(name: &str, v: &Value) -> String {
    let mut out = Vec::with_capacity(name.len() + 64);
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    write_canonical(&mut out, v);
    String::from_utf8(out).unwrap_or_default()
}

fn write_canonical(out: &mut Vec<u8>, v: &Value) {
    // serde_json with preserve_order keeps insertion order; keys are written sorted so
    // {a,b} == {b,a}. Serialised as it is read: no sorted copy of the value is made.
    struct Sorted<'a>(&'a Value);
    impl serde::Serialize for Sorted<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match self.0 {
                // One key (the common lookup) is in order already: no list to sort.
                Value::Object(m) if m.len() < 2 => {
                    s.collect_map(m.iter().map(|(k, v)| (k, Sorted(v))))
                }
                Value::Object(m) => {
                    let mut entries: Vec<_> = m.iter().collect();
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                    s.collect_map(entries.into_iter().map(|(k, v)| (k, Sorted(v))))
                }
                Value::Array(items) => s.collect_seq(items.iter().map(Sorted)),
                other => other.serialize(s),
            }
        }
    }
    // Writing JSON values into memory cannot fail (keys are strings).
    let _ = serde_json::to_writer(out, &Sorted(v));
}

/// `/ticker: 5 is not of type "string"`, with a did-you-mean for unexpected properties.
pub(crate) fn validation_errors(tool: &Tool, args: &Value) -> Vec<String> {
    let validator = match tool.validator() {
        Ok(v) => v,
        Err(e) => {
            return vec![format!(
                "the input schema of `{}` does not compile: {e}",
                tool.name
            )]
        }
    };
    // The common case, without building the errors' iterator.
    if validator.is_valid(args) {
        return Vec::new();
    }
    validator
        .iter_errors(args)
        .map(|err| {
            let path = err.instance_path().as_str().to_string();
            let text = crate::arguments::error_text(&err, false);
            let mut msg = if path.is_empty() {
                text
            } else {
                format!("{path}: {text}")
            };
            if let jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } =
                err.kind()
            {
                let schema_path = err.schema_path().as_str().to_string();
                let parent = schema_path.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
                let known: Vec<String> = tool
                    .input_schema()
                    .pointer(&format!("{parent}/properties"))
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                for u in unexpected {
                    if let Some(hint) =
                        crate::diag::did_you_mean(u, known.iter().map(String::as_str))
                    {
                        msg.push_str(&format!(" (`{u}`: {hint})"));
                    }
                }
            }
            msg
        })
        .collect()
}

impl<'a> Engine<'a> {
    /// Is this call registered, allowed, well-formed and within budget? Rejections become
    /// observations for the model; some also end the run (limits, loops).
    pub(super) fn admit(
        &self,
        st: &State,
        call: &ProposedCall,
        planned_runs: u32,
    ) -> Admission<'a> {
        let name = call.name.as_str();
        match &call.arguments {
            Ok(v) => self.admit_args(st, name, v.clone(), planned_runs),
            Err(raw) => {
                let (shown, _) = self.redactor.shorten(raw, 200);
                Admission::Reject {
                    args: Value::String(raw.clone()),
                    error: ToolError::new(
                        ErrorKind::MalformedDecision,
                        format!("the arguments of `{name}` are not a JSON object: {shown}"),
                    ),
                    ends_run: None,
                }
            }
        }
    }

    /// [`Engine::admit`] for arguments that are JSON, taken by value: a caller that owns them
    /// (a served session) hands them over rather than having them copied.
    pub(super) fn admit_args(
        &self,
        st: &State,
        name: &str,
        args: Value,
        planned_runs: u32,
    ) -> Admission<'a> {
        let checked = self.runnable_tool(name).and_then(|tool| {
            let problems = validation_errors(tool, &args);
            if !problems.is_empty() {
                return Err(Refusal::new(
                    ErrorKind::InvalidArguments,
                    problems.join("; "),
                ));
            }
            self.within_budget(st, tool, planned_runs)?;
            let signature = signature(name, &args);
            self.not_a_loop(st, name, &signature)?;
            Ok((tool, signature))
        });
        match checked {
            Ok((tool, signature)) => Admission::Run {
                tool,
                args,
                signature,
            },
            Err(refusal) => Admission::Reject {
                args,
                error: refusal.error,
                ends_run: refusal.ends_run,
            },
        }
    }

    /// The registered tool of this name, if the policy allows it.
    pub(super) fn runnable_tool(&self, name: &str) -> Result<&'a Tool, Refusal> {
        let Some(tool) = self.registry.tool(name) else {
            // A name with control characters must not reach a terminal or a log as is.
            let shown: String = name.chars().filter(|c| !c.is_control()).take(100).collect();
            let hint = crate::diag::did_you_mean(
                &shown,
                self.registry
                    .all_tools()
                    .filter(|t| t.allowed)
                    .map(|t| t.name.as_str()),
            )
            .map(|h| format!("; {h}"))
            .unwrap_or_default();
            // A name a spec's scripts use for a tool of a `tools: "*"` server (W113 in check).
            let servers: Vec<String> = self
                .registry
                .wildcards
                .iter()
                .map(|w| format!("`{}`", w.server.name))
                .collect();
            let listed = match servers.is_empty() {
                true => String::new(),
                false => format!(
                    " (nor does MCP server {} list one, whose tools the spec takes with `tools: \"*\"`)",
                    servers.join(", ")
                ),
            };
            return Err(Refusal::new(
                ErrorKind::UnknownTool,
                format!("there is no tool named `{shown}`{listed}{hint}"),
            ));
        };
        if !tool.allowed {
            return Err(Refusal::new(
                ErrorKind::Denied,
                format!("the policy does not allow `{name}`"),
            ));
        }
        Ok(tool)
    }

    /// `max_tool_calls` for the run (which ends it) and `max_calls` for the tool.
    pub(super) fn within_budget(
        &self,
        st: &State,
        tool: &Tool,
        planned_runs: u32,
    ) -> Result<(), Refusal> {
        if let Some(session) = &st.session {
            return session_budget(st, session, tool, counted_for(st));
        }
        let max = self.registry.limits.max_tool_calls;
        if st.tool_call_count + planned_runs >= max {
            return Err(Refusal::new(
                ErrorKind::LimitExceeded,
                format!("the run may make at most {max} tool calls (max_tool_calls)"),
            )
            .ending(
                StopReason::MaxToolCalls,
                format!("the model asked for more than {max} tool calls"),
            ));
        }
        if let Some(max) = tool.max_calls {
            if st.per_tool.get(&tool.name).copied().unwrap_or(0) >= max {
                return Err(Refusal::new(
                    ErrorKind::LimitExceeded,
                    format!("`{}` may be called at most {max} times per run", tool.name),
                ));
            }
        }
        Ok(())
    }

    /// The same call too often, or A, B, A, B: the model is stuck, and the run ends.
    pub(super) fn not_a_loop(
        &self,
        st: &State,
        name: &str,
        signature: &str,
    ) -> Result<(), Refusal> {
        if let Some(session) = &st.session {
            return session_loop(st, session, (name, signature), counted_for(st));
        }
        let policy = &self.registry.policy;
        let seen = st.identical.get(signature).copied().unwrap_or(0);
        if seen >= policy.max_identical_calls {
            return Err(Refusal::new(
                ErrorKind::LoopDetected,
                format!("`{name}` was already called {seen} times with these arguments"),
            )
            .ending(
                StopReason::LoopDetected,
                format!(
                    "the model repeated the same call to `{name}` {} times",
                    seen + 1
                ),
            ));
        }
        let h = &st.executed_signatures;
        let n = h.len();
        if policy.detect_alternation
            && n >= 3
            && h[n - 1] != signature
            && h[n - 2] == signature
            && h[n - 3] == h[n - 1]
        {
            return Err(Refusal::new(
                ErrorKind::LoopDetected,
                "the model is alternating between the same two calls",
            )
            .ending(
                StopReason::LoopDetected,
                "the model alternated between the same two calls (A, B, A, B)".to_string(),
            ));
        }
        Ok(())
    }
}

/// Whom a served call's counts are kept for, as its refusals say.
enum Counted<'s> {
    Session,
    /// An authenticated subject's 2026-07-28 requests, over this window.
    Subject(&'s str),
}

fn counted_for(st: &State) -> Counted<'_> {
    match &st.subject_window {
        Some(window) => Counted::Subject(window),
        None => Counted::Session,
    }
}

/// A served session's budget: `serve.max_tool_calls`, and a tool's `max_calls` per session (or
/// per subject and window).
fn session_budget(
    st: &State,
    limits: &ServeLimits,
    tool: &Tool,
    counted: Counted<'_>,
) -> Result<(), Refusal> {
    let max = limits.max_tool_calls;
    if st.tool_call_count + st.in_flight >= max {
        let message = match counted {
            Counted::Session => format!("the session may make at most {max} tool calls (serve.max_tool_calls); start a new session to go on"),
            Counted::Subject(window) => format!("this subject may make at most {max} tool calls in {window} (serve.max_tool_calls); its count starts again {window} after its first call"),
        };
        return Err(Refusal::new(ErrorKind::LimitExceeded, message));
    }
    if let Some(max) = tool.max_calls {
        if st.per_tool.get(&tool.name).copied().unwrap_or(0) >= max {
            let per = match counted {
                Counted::Session => "per session".to_string(),
                Counted::Subject(window) => format!("per subject in {window}"),
            };
            return Err(Refusal::new(
                ErrorKind::LimitExceeded,
                format!("`{}` may be called at most {max} times {per}", tool.name),
            ));
        }
    }
    Ok(())
}

/// A served session's loop rule: only the same call repeated back to back is a loop; the same
/// lookup later in the day, or alternating lookups, are what a long-lived client does.
fn session_loop(
    st: &State,
    limits: &ServeLimits,
    (name, signature): (&str, &str),
    counted: Counted<'_>,
) -> Result<(), Refusal> {
    let in_a_row = st
        .executed_signatures
        .iter()
        .rev()
        .take_while(|s| *s == signature)
        .count();
    if in_a_row >= limits.max_repeated_calls as usize {
        let by = match counted {
            Counted::Session => "in this session",
            Counted::Subject(_) => "by this subject",
        };
        return Err(Refusal::new(
            ErrorKind::LoopDetected,
            format!("`{name}` was just called {in_a_row} times in a row with these arguments {by} (serve.max_repeated_calls); call something else first"),
        ));
    }
    Ok(())
}
