//! Anthropic Messages.

use super::{DecideInput, ModelError, ModelTurn};
use crate::events::Events;
use crate::net::Transport;
use crate::redact::Secrets;
use crate::registry::LiveModel;

pub struct AnthropicModel {
    pub name: String,
    pub settings: LiveModel,
    pub api_key: Option<String>,
}

impl AnthropicModel {
    pub fn new(
        name: &str,
        settings: &LiveModel,
        secrets: &mut Secrets,
    ) -> Result<AnthropicModel, String> {
        let api_key = super::read_api_key(name, settings, secrets)?;
        Ok(AnthropicModel {
            name: name.to_string(),
            settings: settings.clone(),
            api_key,
        })
    }

    pub async fn decide(
        &mut self,
        _input: DecideInput<'_>,
        _transport: &Transport,
        _events: &Events,
    ) -> Result<ModelTurn, ModelError> {
        Err(ModelError::new(
            "the anthropic provider is not implemented yet",
        ))
    }
}
