//! Confirmation of a served call by the person at the client, through MCP elicitation: a tool
//! that needs confirmation (side effects, `policy.confirm`) and was not approved with `--approve`
//! runs once when the client's user ticks "approve" in the form the client shows. Only clients
//! that declared the `elicitation` capability (form mode) are asked; the answer is recorded with
//! the call, so a replay gives the same answer without a client.

use crate::trace::PendingCall;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use rmcp::service::{ElicitationMode, Peer};
use rmcp::RoleServer;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::time::Duration;

/// A person takes their time; a client that never answers must not hold the call forever.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

/// The client's answer, as a fixture records it: `accept` (with the form's `content`),
/// `decline`, `cancel`, or `error` (the request failed: `content.message` says why).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Confirmation {
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
}

impl Confirmation {
    /// Consent is explicit: the form was submitted with `approve` ticked.
    pub(crate) fn granted(&self) -> bool {
        self.action == "accept"
            && self
                .content
                .as_ref()
                .and_then(|c| c.get("approve"))
                .and_then(Value::as_bool)
                == Some(true)
    }

    /// Why the call did not run, as the `isError` result's kind and message.
    pub(crate) fn refusal(&self, tool: &str) -> (&'static str, String) {
        let how = format!("start `toolrun serve` with --approve {tool} to allow it without asking");
        match self.action.as_str() {
            "accept" | "decline" => (
                "denied",
                format!("`{tool}` was not run: the user did not approve it in the client"),
            ),
            "cancel" => (
                "needs_confirmation",
                format!("`{tool}` was not run: the confirmation was dismissed; call it again to be asked again, or {how}"),
            ),
            _ => {
                let why = self
                    .content
                    .as_ref()
                    .and_then(|c| c.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("no answer");
                (
                    "needs_confirmation",
                    format!("`{tool}` needs confirmation before it runs and the client could not confirm it ({why}); {how}"),
                )
            }
        }
    }
}

/// Whether this client can be asked: it declared form elicitation when it initialized.
pub(crate) fn client_can_confirm(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// The form the client shows: what would run, with its arguments, and one box to tick.
pub(crate) fn request(pending: &PendingCall, description: &str) -> Value {
    let tool = &pending.name;
    json!({
        "mode": "form",
        "message": format!(
            "toolrun: `{tool}` needs your confirmation before it runs.\n{description}\nArguments: {}",
            pending.arguments
        ),
        "requestedSchema": {
            "type": "object",
            "properties": {
                "approve": {
                    "type": "boolean",
                    "title": format!("Run {tool}"),
                    "description": "Tick to let toolrun run this call, once.",
                    "default": false
                }
            },
            "required": ["approve"]
        }
    })
}

/// Asks the client's user; every failure becomes a recorded `error` answer, never a crash.
pub(crate) async fn ask(peer: &Peer<RoleServer>, form: Value) -> Confirmation {
    let params: ElicitRequestParams = match serde_json::from_value(form) {
        Ok(p) => p,
        Err(e) => return failed(format!("the confirmation form is invalid: {e}")),
    };
    match peer
        .create_elicitation_with_timeout(params, Some(ANSWER_TIMEOUT))
        .await
    {
        Ok(answer) => from_result(answer),
        Err(e) => failed(e.to_string()),
    }
}

pub(crate) fn from_result(answer: ElicitResult) -> Confirmation {
    let action = match answer.action {
        ElicitationAction::Accept => "accept",
        ElicitationAction::Decline => "decline",
        ElicitationAction::Cancel => "cancel",
        // A later revision's action this build does not know: not consent.
        _ => "unknown",
    };
    Confirmation {
        action: action.into(),
        content: answer.content,
    }
}

fn failed(message: String) -> Confirmation {
    Confirmation {
        action: "error".into(),
        content: Some(json!({ "message": message })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(action: &str, content: Option<Value>) -> Confirmation {
        Confirmation {
            action: action.into(),
            content,
        }
    }

    #[test]
    fn only_an_accepted_form_with_approve_ticked_is_consent() {
        assert!(answer("accept", Some(json!({ "approve": true }))).granted());
        assert!(!answer("accept", Some(json!({ "approve": false }))).granted());
        assert!(!answer("accept", Some(json!({ "approve": "yes" }))).granted());
        assert!(!answer("accept", None).granted());
        assert!(!answer("decline", Some(json!({ "approve": true }))).granted());
        assert!(!answer("cancel", None).granted());
    }

    #[test]
    fn refusals_say_what_happened_and_how_to_approve() {
        let (kind, msg) = answer("decline", None).refusal("refund");
        assert_eq!(kind, "denied");
        assert!(msg.contains("did not approve"), "{msg}");
        let (kind, msg) =
            answer("error", Some(json!({ "message": "timed out" }))).refusal("refund");
        assert_eq!(kind, "needs_confirmation");
        assert!(
            msg.contains("timed out") && msg.contains("--approve refund"),
            "{msg}"
        );
    }

    #[test]
    fn the_form_is_a_valid_elicitation_request() {
        let pending = PendingCall {
            id: "call_1".into(),
            name: "refund".into(),
            arguments: json!({ "order_id": 42 }),
        };
        let params: ElicitRequestParams =
            serde_json::from_value(request(&pending, "Refunds an order.")).expect("valid form");
        let ElicitRequestParams::FormElicitationParams { message, .. } = params else {
            panic!("a form request");
        };
        assert!(message.contains("{\"order_id\":42}"), "{message}");
    }
}
