//! One live client for every provider: the key read once, the request built, sent with the
//! shared retries and streaming, and the reply parsed, each error naming the model and its
//! provider. What differs between OpenAI and Anthropic (the path, the headers, the request and
//! reply shapes, the stream) is a [`Wire`].

use super::live::{self, Endpoint};
use super::stream::Assembler;
use super::{DecideInput, Message, ModelError, ModelTurn};
use crate::events::Events;
use crate::net::Transport;
use crate::redact::Secrets;
use crate::registry::{LiveModel, Registry};
use serde_json::Value;

/// Request headers, by name.
pub(crate) type Headers = Vec<(String, String)>;

/// A provider's wire format: all that differs between the live providers.
pub(crate) struct Wire {
    /// As events and error messages name the provider.
    pub(crate) provider: &'static str,
    /// Appended to the model's `base_url`.
    pub(crate) path: &'static str,
    pub(crate) build_request: fn(&LiveModel, &Registry, &[Message]) -> Value,
    /// The provider's own headers with the key's (none without a key: a local server); the
    /// model's `headers:` override them by name.
    pub(crate) headers: fn(&LiveModel, Option<&str>) -> Headers,
    /// What folds this provider's stream into the reply the non-streaming API would send.
    pub(crate) stream: fn() -> Box<dyn Assembler>,
    pub(crate) parse_response: fn(&Value, u32) -> Result<ModelTurn, ModelError>,
}

pub struct LiveClient {
    pub(crate) name: String,
    pub(crate) settings: LiveModel,
    pub(crate) api_key: Option<String>,
    wire: &'static Wire,
}

impl LiveClient {
    pub(crate) fn new(
        wire: &'static Wire,
        name: &str,
        settings: &LiveModel,
        secrets: &mut Secrets,
    ) -> Result<LiveClient, String> {
        let api_key = super::read_api_key(name, settings, secrets)?;
        Ok(LiveClient::with_key(wire, name, settings.clone(), api_key))
    }

    pub(crate) fn with_key(
        wire: &'static Wire,
        name: &str,
        settings: LiveModel,
        api_key: Option<String>,
    ) -> LiveClient {
        LiveClient {
            name: name.to_string(),
            settings,
            api_key,
            wire,
        }
    }

    /// As the GenAI conventions name it (`openai`, `anthropic`).
    pub(crate) fn provider(&self) -> &'static str {
        self.wire.provider
    }

    pub(crate) async fn decide(
        &mut self,
        input: DecideInput<'_>,
        transport: &Transport,
        events: &Events,
    ) -> Result<ModelTurn, ModelError> {
        let wire = self.wire;
        let body = (wire.build_request)(&self.settings, input.registry, input.messages);
        let ep = Endpoint {
            model_name: &self.name,
            provider: wire.provider,
            settings: &self.settings,
            api_key: self.api_key.as_deref(),
            url: live::url(&self.settings, wire.path),
            headers: (wire.headers)(&self.settings, self.api_key.as_deref()),
        };
        let form = if self.settings.stream {
            live::ReplyForm::Stream(wire.stream)
        } else {
            live::ReplyForm::Json
        };
        let reply = live::post_json(&ep, &body, form, transport, events).await?;
        (wire.parse_response)(&reply, input.step).map_err(|mut e| {
            e.message = format!("model `{}` ({}): {}", self.name, wire.provider, e.message);
            e
        })
    }
}
