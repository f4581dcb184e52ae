//! What a served call's tool reports while it runs (logs, progress, a reconnect), sent on to the
//! client that called it.

use crate::tools::notify::{self, Notice};
use rmcp::model::ProgressToken;
use rmcp::service::Peer;
use rmcp::RoleServer;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A call's own event stream, as JSON-RPC notifications to write on it.
pub(crate) type Stream = tokio::sync::mpsc::UnboundedSender<Value>;

/// Sends a call's notices to its client (on the call's own stream, else through `peer`): logs at
/// or above the session's level, progress when the client asked for it with a progress token. A
/// client gone away is no error here.
#[allow(deprecated)] // MCP logging: deprecated by a later revision, still the 2025-11-25 one's
pub(crate) async fn forward(
    peer: Option<Peer<RoleServer>>,
    token: Option<ProgressToken>,
    (hangup, stream): (Option<super::resume::Hangup>, Option<Stream>),
    level: Arc<AtomicUsize>,
    mut notices: tokio::sync::mpsc::UnboundedReceiver<Notice>,
) {
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam};
    while let Some(notice) = notices.recv().await {
        match notice {
            Notice::Log {
                level: l,
                logger,
                data,
            } => {
                if notify::rank(&l) < level.load(Ordering::Relaxed) {
                    continue;
                }
                let Ok(severity) = serde_json::from_value::<LoggingLevel>(json!(l)) else {
                    continue;
                };
                let mut param = LoggingMessageNotificationParam::new(severity, data);
                param.logger = logger;
                match &stream {
                    Some(s) => notice_on(s, "notifications/message", &param),
                    None => {
                        if let Some(peer) = &peer {
                            let _ = peer.notify_logging_message(param).await;
                        }
                    }
                }
            }
            Notice::Progress {
                progress,
                total,
                message,
            } => {
                let Some(token) = &token else { continue };
                let mut param = ProgressNotificationParam::new(token.clone(), progress);
                param.total = total;
                param.message = message;
                match &stream {
                    Some(s) => notice_on(s, "notifications/progress", &param),
                    None => {
                        if let Some(peer) = &peer {
                            let _ = peer.notify_progress(param).await;
                        }
                    }
                }
            }
            // Over stdio there is no stream to close: the result simply follows.
            Notice::Reconnect => {
                if let Some(h) = &hangup {
                    h.hang_up();
                }
            }
        }
    }
}

/// A notification written on the call's own stream; one that cannot be written (the stream's
/// reader has gone) is dropped, as one a client never reads would be.
fn notice_on(stream: &Stream, method: &str, params: &impl serde::Serialize) {
    if let Ok(params) = serde_json::to_value(params) {
        let _ = stream.send(json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }
}
