//! The one redirect an HTTP tool refuses for what it would send, not where: a body rendered
//! from a secret is not repeated to another origin (issue 36).

use super::{display_host, short, Call};
use crate::tools::{ErrorKind, ToolError};
use serde_json::{json, Value};

pub(super) struct SecretBody {
    pub(super) url: url::Url,
    pub(super) from: url::Url,
    pub(super) status: u16,
    /// The secrets the body's templates name.
    pub(super) secrets: Vec<String>,
}

impl Call<'_, '_> {
    /// The secrets the request body's templates name.
    pub(super) fn body_secrets(&self) -> Vec<String> {
        let templates = &self.env.registry.templates;
        let mut ids = Vec::new();
        if let Some(tv) = &self.http.body {
            templates.ids_of(tv, &mut ids);
        }
        ids.extend(&self.http.body_text);
        templates.secrets_named(ids)
    }

    pub(super) fn secret_body(&self, refused: &SecretBody, attempts: u32) -> ToolError {
        let SecretBody {
            url,
            from,
            status,
            secrets,
        } = refused;
        let mut d = self.details(&self.http.method, url, attempts);
        d.insert("redirected_from".into(), json!(from.as_str()));
        d.insert("status".into(), json!(status));
        let names = secrets
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let message = format!(
            "refused to follow the redirect ({status}) from {} to {}: it would send the request body, which holds secret(s) {names}, to another origin. This tool cannot follow it; do not retry.",
            display_host(from),
            short(url.as_str(), self.redactor)
        );
        ToolError::new(ErrorKind::Denied, message).with_details(Value::Object(d))
    }
}
