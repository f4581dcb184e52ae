//! Models decide: given the conversation so far, an answer or tool calls. Scripted models are
//! deterministic for tests; live providers speak OpenAI's and Anthropic's wire formats.

pub(crate) mod anthropic;
pub(crate) mod client;
pub(crate) mod gate;
pub(crate) mod live;
pub(crate) mod openai;
pub(crate) mod responses;
pub(crate) mod responses_stream;
pub(crate) mod scripted;
pub(crate) mod stream;

use crate::events::Events;
use crate::net::Transport;
use crate::redact::Secrets;
use crate::registry::{ModelDef, ModelKind, Registry};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The provider-neutral conversation. Each provider maps it to its own wire format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub(crate) enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<CallMessage>,
    },
    /// A reasoning model's reasoning before the assistant turn that follows it (Responses API
    /// `reasoning` items): sent back unchanged and in order with the next request, so the model
    /// keeps its reasoning across tool calls. Other providers leave it out.
    Reasoning {
        /// The reasoning summaries' text, for people reading the trace.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        summary: Vec<String>,
        /// The provider's items as it sent them (encrypted content included).
        items: Vec<Value>,
    },
    Tool {
        tool_call_id: String,
        name: String,
        content: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        /// Images the tool returned (an MCP server's image content), for providers that can show
        /// them; `content` names them too. Not in traces: the tool result keeps them.
        #[serde(skip)]
        images: Vec<Image>,
    },
}

/// An image for the model: its media type and base64 data.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Image {
    pub(crate) mime: String,
    pub(crate) data: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CallMessage {
    pub(crate) id: String,
    pub(crate) name: String,
    /// The arguments as the model sent them: JSON when they parsed, else the raw text.
    pub(crate) arguments: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Decision {
    Answer(String),
    ToolCalls {
        text: Option<String>,
        calls: Vec<ProposedCall>,
    },
    /// A text reply the provider cut off at the model's `max_tokens` (OpenAI `finish_reason:
    /// length`, Anthropic `stop_reason: max_tokens`). Not malformed: asking again sends the same
    /// request, which is cut at the same place; the partial text ends the run for review.
    CutOff {
        text: String,
        reason: String,
    },
    /// Not a usable decision: kept verbatim for the trace.
    Malformed {
        raw: String,
        reason: String,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ProposedCall {
    pub(crate) id: String,
    pub(crate) name: String,
    /// `Err(raw)` when the model's arguments were not a JSON object.
    pub(crate) arguments: Result<Value, String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Usage {
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    /// Of `input_tokens`, those the provider served from its prompt cache (when it says).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) cached_input_tokens: u64,
    /// Of `output_tokens`, those the model spent reasoning (when the provider says).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) reasoning_tokens: u64,
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ModelTurn {
    pub(crate) decision: Decision,
    pub(crate) usage: Option<Usage>,
    /// What the provider's reply says about itself (`None` for scripted models).
    pub(crate) response: Option<ResponseMeta>,
    /// The reply's reasoning items (Responses API), to keep in the conversation.
    pub(crate) reasoning: Vec<Value>,
}

impl ModelTurn {
    /// The conversation entry for this turn's reasoning, when it had any.
    pub(crate) fn reasoning_message(&mut self) -> Option<Message> {
        if self.reasoning.is_empty() {
            return None;
        }
        let items = std::mem::take(&mut self.reasoning);
        let summary = items
            .iter()
            .filter_map(|i| i.get("summary").and_then(Value::as_array))
            .flatten()
            .filter_map(|s| s.get("text").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        Some(Message::Reasoning { summary, items })
    }
}

/// The model a provider says answered and why it stopped, as it said it (OpenAI `model` and
/// `choices[].finish_reason`, Anthropic `model` and `stop_reason`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ResponseMeta {
    pub(crate) model: Option<String>,
    pub(crate) finish_reasons: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ModelError {
    pub(crate) message: String,
    /// The HTTP status of a live provider's failed reply.
    pub(crate) status: Option<u16>,
    /// The provider's reply body as received (secrets masked), for the trace.
    pub(crate) raw: Option<String>,
}

impl ModelError {
    pub(crate) fn new(message: impl Into<String>) -> ModelError {
        ModelError {
            message: message.into(),
            ..ModelError::default()
        }
    }
}

/// What a model sees at each step.
pub(crate) struct DecideInput<'a> {
    pub(crate) registry: &'a Registry,
    pub(crate) messages: &'a [Message],
    pub(crate) query: &'a str,
    /// Every tool call so far as the template context sees it (`results`).
    pub(crate) results: &'a [crate::templates::Shared],
    pub(crate) step: u32,
}

pub enum ModelClient {
    Scripted(scripted::ScriptedModel),
    /// OpenAI or Anthropic: one client, the provider's wire format inside.
    Live(Box<client::LiveClient>),
}

impl ModelClient {
    /// Fails before any request when a live model's API key variable is not set.
    pub fn new(def: &ModelDef, query: &str, secrets: &mut Secrets) -> Result<ModelClient, String> {
        Ok(match &def.kind {
            ModelKind::Scripted(scripts) => {
                ModelClient::Scripted(scripted::ScriptedModel::select(&def.name, scripts, query)?)
            }
            ModelKind::OpenAi(live) => ModelClient::Live(Box::new(client::LiveClient::new(
                match live.api {
                    crate::registry::OpenAiApi::Chat => &openai::OPENAI,
                    crate::registry::OpenAiApi::Responses => &responses::RESPONSES,
                },
                &def.name,
                live,
                secrets,
            )?)),
            ModelKind::Anthropic(live) => ModelClient::Live(Box::new(client::LiveClient::new(
                &anthropic::ANTHROPIC,
                &def.name,
                live,
                secrets,
            )?)),
        })
    }

    /// A client for a conversation whose first turn is not known yet: a scripted model chooses
    /// its script at each turn ([`ModelClient::begin_turn`]), so none is chosen here.
    pub fn for_conversation(def: &ModelDef, secrets: &mut Secrets) -> Result<ModelClient, String> {
        match &def.kind {
            ModelKind::Scripted(_) => Ok(ModelClient::Scripted(scripted::ScriptedModel::unchosen(
                &def.name,
            ))),
            _ => ModelClient::new(def, "", secrets),
        }
    }

    /// A conversation's next user turn: a scripted model chooses its script again (by the turn's
    /// query, its number and the conversation before it); a live model reads the conversation
    /// from the messages it is sent.
    pub(crate) fn begin_turn(
        &mut self,
        registry: &Registry,
        query: &str,
        turn: u32,
        history: &str,
    ) -> Result<(), String> {
        if let ModelClient::Scripted(m) = self {
            if let Some(ModelKind::Scripted(scripts)) = registry.model(m.name()).map(|d| &d.kind) {
                let name = m.name().to_string();
                *m = scripted::ScriptedModel::select_turn(&name, scripts, query, turn, history)?;
            }
        }
        Ok(())
    }

    /// The provider (as the GenAI conventions name it) and the model asked for.
    pub(crate) fn describe(&self) -> (&'static str, &str) {
        match self {
            ModelClient::Scripted(m) => ("scripted", m.name()),
            ModelClient::Live(m) => (m.provider(), &m.settings.model),
        }
    }

    /// Where a live model's requests go (its `base_url`'s host and port); none for scripted.
    pub(crate) fn server(&self) -> Option<(String, u16)> {
        let ModelClient::Live(m) = self else {
            return None;
        };
        let url = url::Url::parse(&m.settings.base_url).ok()?;
        Some((url.host_str()?.to_string(), url.port_or_known_default()?))
    }

    pub(crate) async fn decide(
        &mut self,
        input: DecideInput<'_>,
        transport: &Transport,
        events: &Events,
    ) -> Result<ModelTurn, ModelError> {
        match self {
            ModelClient::Scripted(m) => m.decide(input).await,
            ModelClient::Live(m) => m.decide(input, transport, events).await,
        }
    }
}

/// The key comes from the model's declared variable only, and is registered as a secret so it
/// is masked everywhere toolrun writes.
pub(crate) fn read_api_key(
    name: &str,
    settings: &crate::registry::LiveModel,
    secrets: &mut Secrets,
) -> Result<Option<String>, String> {
    let Some(var) = &settings.api_key_env else {
        return Ok(None);
    };
    // Replays fill every key with a placeholder first: recorded requests hold only that.
    if let Some(v) = secrets.get(var) {
        return Ok(Some(v.to_string()));
    }
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => {
            secrets.insert(var, v.clone());
            Ok(Some(v))
        }
        _ => Err(format!("model `{name}` reads its API key from `{var}`, which is not set; export {var}=... and run again")),
    }
}
