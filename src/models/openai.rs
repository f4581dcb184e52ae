//! OpenAI-compatible Chat Completions.

use super::{DecideInput, ModelError, ModelTurn};
use crate::events::Events;
use crate::net::Transport;
use crate::redact::Secrets;
use crate::registry::LiveModel;

pub struct OpenAiModel {
    pub name: String,
    pub settings: LiveModel,
    pub api_key: Option<String>,
}

impl OpenAiModel {
    pub fn new(
        name: &str,
        settings: &LiveModel,
        secrets: &mut Secrets,
    ) -> Result<OpenAiModel, String> {
        let api_key = super::read_api_key(name, settings, secrets)?;
        Ok(OpenAiModel {
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
            "the openai provider is not implemented yet",
        ))
    }
}
