//! Deterministic models for tests: a script is chosen by a regex on the query, and each model
//! call consumes the next turn. Turns are templates over `query`, `results`, `last`, `step` and
//! `turn`. In a conversation the script is chosen again for each user turn.

use super::{DecideInput, Decision, ModelError, ModelTurn, ProposedCall};
use crate::registry::{Script, ScriptedArguments, Turn};
use crate::templates::{Ctx, Shared};
use serde_json::{json, Value};

pub struct ScriptedModel {
    name: String,
    /// Raw pointer-free handle: the script index inside the registry's model.
    script: usize,
    script_label: String,
    next_turn: usize,
    /// The user turn of the conversation this script answers (1 for a single query).
    user_turn: u32,
}

impl ScriptedModel {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn select(
        name: &str,
        scripts: &[Script],
        query: &str,
    ) -> Result<ScriptedModel, String> {
        Self::select_turn(name, scripts, query, 1, "")
    }

    /// A model whose script is chosen at its conversation's first turn.
    pub(crate) fn unchosen(name: &str) -> ScriptedModel {
        ScriptedModel {
            name: name.to_string(),
            script: 0,
            script_label: String::new(),
            next_turn: 0,
            user_turn: 0,
        }
    }

    /// The script for user turn `turn` of a conversation: the first whose `when` matches the
    /// turn's query, whose `turn` (if any) is this one and whose `history` (if any) matches the
    /// conversation before it. A single query is turn 1 with no history.
    pub(crate) fn select_turn(
        name: &str,
        scripts: &[Script],
        query: &str,
        turn: u32,
        history: &str,
    ) -> Result<ScriptedModel, String> {
        let index = scripts
            .iter()
            .position(|s| {
                s.when.as_ref().is_none_or(|re| re.is_match(query))
                    && s.turn.is_none_or(|t| t == turn)
                    && s.history.as_ref().is_none_or(|re| re.is_match(history))
            })
            .ok_or_else(|| {
                let which = if turn == 1 {
                    "the query".to_string()
                } else {
                    format!("turn {turn} of the conversation")
                };
                format!("no script of model `{name}` matches {which}; add a script without `when` as a fallback")
            })?;
        let label = match &scripts[index].when {
            Some(re) => format!("script {} (when: {})", index + 1, re.as_str()),
            None => format!("script {} (fallback)", index + 1),
        };
        Ok(ScriptedModel {
            name: name.to_string(),
            script: index,
            script_label: label,
            next_turn: 0,
            user_turn: turn,
        })
    }

    pub(crate) async fn decide(&mut self, input: DecideInput<'_>) -> Result<ModelTurn, ModelError> {
        let registry = input.registry;
        let Some(crate::registry::ModelKind::Scripted(scripts)) =
            registry.model(&self.name).map(|m| &m.kind)
        else {
            return Err(ModelError::new(format!(
                "model `{}` is not scripted",
                self.name
            )));
        };
        let script = &scripts[self.script];
        let Some(turn) = script.turns.get(self.next_turn) else {
            return Err(ModelError::new(format!(
                "{} of model `{}` ran out of turns after {} model call(s); add a turn (e.g. `- answer: ...`) for call {}",
                self.script_label,
                self.name,
                script.turns.len(),
                self.next_turn + 1
            )));
        };
        self.next_turn += 1;
        let t = &registry.templates;
        let needs_context = match turn {
            Turn::Answer(id) | Turn::Raw(id) | Turn::CutOff(id) => !t.is_plain(id),
            Turn::ToolCalls(calls) => calls.iter().any(
                |c| matches!(&c.arguments, ScriptedArguments::Json(tv) if t.needs_context(tv)),
            ),
        };
        // Every result so far was converted for templates once, when it was made: the context
        // shares them (`last` is the same value as the end of `results`).
        let ctx = if needs_context {
            let last = match input.results.last() {
                Some(last) => last.clone(),
                None => Shared::new(&Value::Null),
            };
            Ctx::shared(vec![
                ("query", Shared::new(&json!(input.query))),
                ("results", Shared::array(input.results)),
                ("last", last),
                ("step", Shared::new(&json!(input.step))),
                ("turn", Shared::new(&json!(self.user_turn))),
            ])
        } else {
            Ctx::new(&Value::Null)
        };
        // A template outside a tool call fails the run (`model_error`, exit 1); a bound it hit
        // says so.
        let render_err = |e: crate::templates::RenderError| {
            let what = if e.limit {
                "template exceeded a limit"
            } else {
                "template failed"
            };
            ModelError::new(format!(
                "{}, turn {}: {what}: {e}",
                self.script_label, self.next_turn
            ))
        };
        let decision = match turn {
            Turn::Answer(id) => {
                Decision::Answer(t.render_text(id, &ctx).await.map_err(render_err)?)
            }
            Turn::CutOff(id) => super::live::cut_off(
                t.render_text(id, &ctx).await.map_err(render_err)?,
                &[],
                "a scripted `cut_off` turn",
            ),
            Turn::Raw(id) => {
                let raw = t.render_text(id, &ctx).await.map_err(render_err)?;
                Decision::Malformed {
                    raw,
                    reason: "the reply describes a tool call in prose instead of making one".into(),
                }
            }
            Turn::ToolCalls(calls) => {
                let mut proposed = Vec::with_capacity(calls.len());
                for call in calls {
                    let arguments = match &call.arguments {
                        ScriptedArguments::Json(tv) => {
                            match t.render(tv, &ctx).await.map_err(render_err)? {
                                Value::Object(m) => Ok(Value::Object(m)),
                                other => Err(other.to_string()),
                            }
                        }
                        ScriptedArguments::Raw(raw) => match serde_json::from_str::<Value>(raw) {
                            Ok(Value::Object(m)) => Ok(Value::Object(m)),
                            _ => Err(raw.clone()),
                        },
                    };
                    // Ids are assigned by the engine, as for providers that omit them.
                    proposed.push(ProposedCall {
                        id: String::new(),
                        name: call.name.clone(),
                        arguments,
                    });
                }
                Decision::ToolCalls {
                    text: None,
                    calls: proposed,
                }
            }
        };
        Ok(ModelTurn {
            decision,
            usage: None,
            response: None,
            reasoning: Vec::new(),
        })
    }
}
