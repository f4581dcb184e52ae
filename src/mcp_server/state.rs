//! The `requestState` of a confirmation asked on MCP 2026-07-28, where the server keeps nothing
//! between a call held for confirmation and the client's retry with the answer. The state is
//! the client's to carry back, so it is signed (HMAC-SHA256 under the server's key), bound to
//! the tool and its arguments, and expires: a state changed, sent back with other arguments or
//! for another tool, or too old is refused. Replicas that share the key (`--state-key-env`)
//! accept each other's states, so a confirmation asked by one completes on another.
//!
//! What the client sees of it is `v1.<payload>.<tag>`, base64url: the payload names the tool
//! and when the state expires, never the arguments (they may carry what the client's user
//! should not find in a token); they are bound through a digest that only the tag covers.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::hmac;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// How long a client's user has to answer: a person takes their time (as the elicitation a
/// 2025-11-25 session is asked waits for them).
pub(crate) const TTL_MS: i64 = 10 * 60 * 1000;

/// Keys shorter than this are refused: the tag is only as strong as the key.
pub(crate) const MIN_KEY_BYTES: usize = 32;

/// Separates these tags from any other use of the same key.
const DOMAIN: &[u8] = b"toolrun/mcp/confirmation/v1\0";

/// The key states are signed with.
pub(crate) struct StateKey(hmac::Key);

impl StateKey {
    /// A key of this process alone: its states are accepted by no other replica.
    pub(crate) fn random() -> Result<StateKey, String> {
        let rng = ring::rand::SystemRandom::new();
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &rng)
            .map_err(|_| "cannot draw a random key for confirmations' request state".to_string())?;
        Ok(StateKey(key))
    }

    /// The key in the environment variable `var` (`--state-key-env`), shared by the replicas.
    pub(crate) fn from_env(var: &str) -> Result<StateKey, String> {
        let value = std::env::var(var).unwrap_or_default();
        if value.is_empty() {
            return Err(format!(
                "--state-key-env names `{var}`, which is not set (or empty); export the key every replica shares there (at least {MIN_KEY_BYTES} random bytes, e.g. `openssl rand -hex 32`)"
            ));
        }
        if value.len() < MIN_KEY_BYTES {
            return Err(format!(
                "the key in `{var}` (--state-key-env) is {} bytes long; use at least {MIN_KEY_BYTES} random bytes (e.g. `openssl rand -hex 32`)",
                value.len()
            ));
        }
        Ok(StateKey(hmac::Key::new(
            hmac::HMAC_SHA256,
            value.as_bytes(),
        )))
    }

    /// The state of a call of `tool` with `arguments` held for confirmation at `now_ms`, made
    /// by `subject` when `serve.auth` authenticated one (another subject's retry is refused).
    pub(crate) fn seal(&self, call: Call<'_>, now_ms: i64) -> String {
        let Call(tool, ..) = call;
        let payload = Payload {
            tool: tool.to_string(),
            expires_ms: now_ms.saturating_add(TTL_MS),
        };
        // Writing a struct of a string and a number cannot fail.
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).unwrap_or_default());
        let tag = hmac::sign(&self.0, &signed(&payload, call));
        format!("v1.{payload}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    /// Checks a state sent back with a call of `tool` with `arguments` at `now_ms`; the error
    /// says why it is refused (to the client: it carries nothing of the key).
    pub(crate) fn open(&self, state: &str, call: Call<'_>, now_ms: i64) -> Result<(), Refused> {
        let Call(tool, ..) = call;
        let mut parts = state.split('.');
        let (Some("v1"), Some(payload), Some(tag), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Refused::Malformed);
        };
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| Refused::Malformed)?;
        // Constant time; a state made for other arguments or another tool fails here too.
        hmac::verify(&self.0, &signed(payload, call), &tag).map_err(|_| Refused::Forged)?;
        let payload: Payload = URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|p| serde_json::from_slice(&p).ok())
            .ok_or(Refused::Malformed)?;
        if payload.tool != tool {
            return Err(Refused::Forged);
        }
        if now_ms > payload.expires_ms {
            return Err(Refused::Expired);
        }
        Ok(())
    }
}

/// Why a state was refused.
#[derive(Debug, PartialEq)]
pub(crate) enum Refused {
    Malformed,
    /// Changed, made with another key, or for another call.
    Forged,
    Expired,
}

impl Refused {
    pub(crate) fn message(&self, tool: &str) -> String {
        let why = match self {
            Refused::Malformed => "is not one this server made",
            Refused::Forged => "does not verify: it was changed, made by a server with another key (replicas share theirs with --state-key-env), or made for another call (a confirmation holds for the tool and arguments it was asked for)",
            Refused::Expired => "has expired (a confirmation is good for 10 minutes)",
        };
        format!("the requestState of this `{tool}` call {why}; call it again without requestState to be asked again")
    }
}

#[derive(Serialize, Deserialize)]
struct Payload {
    tool: String,
    #[serde(rename = "exp")]
    expires_ms: i64,
}

/// A call a state is bound to: its tool, its arguments, and the authenticated subject that made
/// it, if any.
#[derive(Clone, Copy)]
pub(crate) struct Call<'a>(pub &'a str, pub &'a Value, pub Option<&'a str>);

/// What the tag covers: the payload as sent, and a digest of the call it was made for.
fn signed(payload: &str, Call(tool, arguments, subject): Call<'_>) -> Vec<u8> {
    let mut call = Sha256::new();
    call.update(tool.as_bytes());
    call.update([0]);
    canonical(arguments, &mut call);
    if let Some(subject) = subject {
        call.update([0]);
        call.update(subject.as_bytes());
    }
    let mut out = Vec::with_capacity(DOMAIN.len() + payload.len() + 33);
    out.extend_from_slice(DOMAIN);
    out.extend_from_slice(payload.as_bytes());
    out.push(0);
    out.extend_from_slice(&call.finalize());
    out
}

/// JSON with object members sorted by name: a client may send its retry's arguments in
/// another order than the first time (objects keep their order as read here).
fn canonical(value: &Value, out: &mut Sha256) {
    match value {
        Value::Object(map) => {
            let mut members: Vec<_> = map.iter().collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            out.update(b"{");
            for (i, (name, member)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.update(b",");
                }
                out.update(Value::String(name.clone()).to_string().as_bytes());
                out.update(b":");
                canonical(member, out);
            }
            out.update(b"}");
        }
        Value::Array(items) => {
            out.update(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.update(b",");
                }
                canonical(item, out);
            }
            out.update(b"]");
        }
        other => out.update(other.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> StateKey {
        StateKey(hmac::Key::new(hmac::HMAC_SHA256, &[7u8; 32]))
    }

    #[test]
    fn a_state_opens_for_its_call_only() {
        let k = key();
        let args = json!({ "order": 42, "note": "x" });
        let state = k.seal(Call("refund", &args, None), 1_000);
        assert_eq!(k.open(&state, Call("refund", &args, None), 2_000), Ok(()));
        // The same arguments in another order.
        let reordered: Value = serde_json::from_str(r#"{"note":"x","order":42}"#).unwrap();
        assert_eq!(
            k.open(&state, Call("refund", &reordered, None), 2_000),
            Ok(())
        );
        let other = json!({ "order": 43, "note": "x" });
        assert_eq!(
            k.open(&state, Call("refund", &other, None), 2_000),
            Err(Refused::Forged)
        );
        assert_eq!(
            k.open(&state, Call("delete", &args, None), 2_000),
            Err(Refused::Forged)
        );
        let late = 1_000 + TTL_MS + 1;
        assert_eq!(
            k.open(&state, Call("refund", &args, None), late),
            Err(Refused::Expired)
        );
        let tampered = format!("{state}-TAMPERED");
        assert!(k
            .open(&tampered, Call("refund", &args, None), 2_000)
            .is_err());
        let alice = k.seal(Call("refund", &args, Some("alice")), 1_000);
        let as_bob = k.open(&alice, Call("refund", &args, Some("bob")), 2_000);
        assert_eq!(as_bob, Err(Refused::Forged));
        let as_alice = k.open(&alice, Call("refund", &args, Some("alice")), 2_000);
        assert_eq!(as_alice, Ok(()));
        let other_key = StateKey(hmac::Key::new(hmac::HMAC_SHA256, &[8u8; 32]));
        assert_eq!(
            other_key.open(&state, Call("refund", &args, None), 2_000),
            Err(Refused::Forged)
        );
        assert_eq!(
            k.open("v1.e30", Call("refund", &args, None), 2_000),
            Err(Refused::Malformed)
        );
    }

    #[test]
    fn the_arguments_are_not_in_the_state() {
        let state = key().seal(
            Call("refund", &json!({ "card": "4111111111111111" }), None),
            0,
        );
        let payload = state.split('.').nth(1).unwrap();
        let text = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        assert!(!text.contains("4111"), "{text}");
        assert!(text.contains("refund"), "{text}");
    }

    #[test]
    fn a_changed_expiry_does_not_verify() {
        let k = key();
        let args = json!({});
        let state = k.seal(Call("t", &args, None), 0);
        let forged = URL_SAFE_NO_PAD.encode(br#"{"tool":"t","exp":99999999999999}"#);
        let mut parts: Vec<&str> = state.split('.').collect();
        parts[1] = &forged;
        let forged_state = parts.join(".");
        assert_eq!(
            k.open(&forged_state, Call("t", &args, None), TTL_MS + 1),
            Err(Refused::Forged)
        );
    }
}
