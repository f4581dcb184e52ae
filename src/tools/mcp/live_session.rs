//! The session a request carries when it goes live over streamable HTTP. A `--record-mode new`
//! run makes its session from the recording (the handshake is answered from it), so a call the
//! recording lacks would reach the live server with a recorded `Mcp-Session-Id` it never issued
//! (and refuses: 400 or 404). Such a request goes with a session of the run's own instead,
//! opened by its own `initialize`; it is not recorded, as the recording has the session's
//! handshake, and the request is recorded as it was made, so a replay matches it.

use super::exchange::Rpc;
use super::{initialize_params, sse, ClientSession, Connected, MAX_BYTES};
use crate::net::{HttpRequest, HttpResponse, NetError, Purpose, SendOptions};
use serde_json::{json, Value};
use std::time::Duration;

const SESSION_HEADER: &str = "Mcp-Session-Id";

impl Rpc<'_, '_> {
    /// Sends `req` through the transport (recorded, replayed, masked, capped); what goes live
    /// carries a session the live server knows.
    pub(super) async fn send_http(
        &self,
        req: &HttpRequest,
        opts: SendOptions<'_>,
    ) -> Result<HttpResponse, NetError> {
        let purpose = Purpose::Mcp(&self.server.name);
        let transport = self.env.transport;
        transport
            .send_via(purpose, req, opts, |opts| async move {
                let live = self.live_request(req, true).await?.unwrap_or(req.clone());
                let sent = Box::pin(self.send_live_authorized(&live, opts)).await;
                if let Ok(resp) = &sent {
                    if req.body.as_deref().is_some_and(is_initialize) {
                        self.note_live(resp);
                    }
                }
                sent
            })
            .await
    }

    /// Sends `req` live as it is, read whole and never recorded: a request that changes nothing
    /// a run observes (see `Transport::send_unrecorded`); `None` in a replay.
    pub(super) async fn send_unrecorded(
        &self,
        req: &HttpRequest,
        timeout: Duration,
        max_bytes: u64,
    ) -> Option<Result<HttpResponse, NetError>> {
        let opts = SendOptions {
            timeout,
            max_bytes,
            progress: None,
            on_chunk: None,
            reshape: None,
        };
        if !self.env.transport.may_go_live() {
            return None;
        }
        let req = Box::pin(self.authorized_quietly(req)).await;
        self.env
            .transport
            .send_unrecorded(Purpose::Mcp(&self.server.name), &req, opts)
            .await
    }

    /// `req` as it may go live: a session id no live server gave this run is swapped for the
    /// run's own session, opened now when `open` (else `None` while there is none: nothing live
    /// to tell, as for ending a session only the recording knows).
    pub(super) async fn live_request(
        &self,
        req: &HttpRequest,
        open: bool,
    ) -> Result<Option<HttpRequest>, NetError> {
        let recorded = req
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(SESSION_HEADER))
            .map(|(_, v)| v.as_str());
        let Some(recorded) = recorded else {
            return Ok(Some(req.clone()));
        };
        let session = self.session();
        let known = session
            .live_ids
            .lock()
            .map(|ids| ids.iter().any(|i| i == recorded))
            .unwrap_or(true);
        if known || !self.env.transport.may_go_live() {
            return Ok(Some(req.clone()));
        }
        let mut own = session.own.lock().await;
        let id = match own.as_ref() {
            Some((r, id)) if r == recorded => id.clone(),
            _ if !open => return Ok(None),
            _ => {
                let id = self.introduce().await?;
                *own = Some((recorded.to_string(), id.clone()));
                id
            }
        };
        let mut live = req.clone();
        live.headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case(SESSION_HEADER));
        live.headers
            .extend(id.map(|id| (SESSION_HEADER.into(), id)));
        Ok(Some(live))
    }

    fn session(&self) -> std::sync::Arc<ClientSession> {
        self.env
            .transport
            .session::<ClientSession>(&self.server.name)
    }

    /// The session id of a live `initialize` reply is one live requests may carry.
    fn note_live(&self, resp: &HttpResponse) {
        let Some(made) = resp.header(SESSION_HEADER) else {
            return;
        };
        if let Ok(mut ids) = self.session().live_ids.lock() {
            ids.push(made.to_string());
        }
    }

    /// The run's own session: `initialize` and `notifications/initialized`, unrecorded, at the
    /// revision the recorded session speaks. Returns the id the server gave (none: stateless).
    async fn introduce(&self) -> Result<Option<String>, NetError> {
        let protocol = self.conn.map_or(super::PROTOCOL, |c| c.protocol.as_str());
        let id = json!("toolrun-initialize");
        let init = json!({ "jsonrpc": "2.0", "id": id, "method": "initialize", "params": initialize_params(protocol) });
        let bare = Rpc {
            conn: None,
            ..*self
        };
        let resp = sse::to_json(bare.send_bare(&init).await?);
        let answer: Value = serde_json::from_slice(&resp.body).unwrap_or_default();
        let answer = match answer {
            Value::Array(items) => items.into_iter().find(|m| m.get("id") == Some(&id)),
            one => Some(one),
        }
        .unwrap_or_default();
        if !(200..300).contains(&resp.status) || answer.get("result").is_none() {
            return Err(NetError::Io(format!(
                "it refused `initialize` (needed before the first request this run makes to it live: the recorded session is not one it knows): HTTP {} {}",
                resp.status,
                answer.get("error").map_or_else(|| super::excerpt(&resp.body), Value::to_string)
            )));
        }
        let made = Connected {
            session_id: resp.header(SESSION_HEADER).map(str::to_string),
            protocol: protocol.to_string(),
        };
        let done = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        Rpc {
            conn: Some(&made),
            ..*self
        }
        .send_bare(&done)
        .await?;
        Ok(made.session_id)
    }

    /// A POST sent live as built, never recorded (see [`Rpc::introduce`]).
    async fn send_bare(&self, body: &Value) -> Result<HttpResponse, NetError> {
        let req = self
            .build("POST", Some(body))
            .await
            .map_err(|e| NetError::Io(e.message))?;
        self.send_unrecorded(&req, self.timeout, MAX_BYTES)
            .await
            .unwrap_or_else(|| Err(NetError::Io("a replay sends nothing".into())))
    }
}

fn is_initialize(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .is_ok_and(|m| m.get("method") == Some(&json!("initialize")))
}
