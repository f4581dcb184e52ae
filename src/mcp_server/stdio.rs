//! The stdio transport `serve` runs its session on: rmcp's, except at the end of input.
//!
//! rmcp ends its session loop as soon as stdin ends, then waits a few seconds for the answers
//! of the requests still being worked on and drops the rest: a client that writes its requests
//! and closes stdin (a pipe, a batch job) lost every answer not ready by then. Here the end of
//! input is held back until every request read has been answered, so the loop sends those
//! answers as it does any other and ends with nothing left to drop.

use std::collections::HashSet;

use rmcp::model::{ClientNotification, JsonRpcMessage, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::{IntoTransport, Transport};

/// stdin and stdout, answering every request read before it reports the end of input.
pub(crate) fn transport() -> impl Transport<RoleServer, Error = std::io::Error> + 'static {
    Draining {
        inner: IntoTransport::<RoleServer, std::io::Error, _>::into_transport(
            rmcp::transport::stdio(),
        ),
        unanswered: HashSet::new(),
        ended: false,
    }
}

struct Draining<T> {
    inner: T,
    /// Requests read and not yet answered (nor cancelled by the client, which rmcp does not
    /// answer).
    unanswered: HashSet<RequestId>,
    ended: bool,
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Draining<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        match &item {
            JsonRpcMessage::Response(r) => {
                self.unanswered.remove(&r.id);
            }
            JsonRpcMessage::Error(e) => {
                if let Some(id) = &e.id {
                    self.unanswered.remove(id);
                }
            }
            _ => {}
        }
        self.inner.send(item)
    }

    // rmcp calls this again after each message it sends (its loop selects on it), so an input
    // that has ended reports so on the first call after the last answer went out.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        if !self.ended {
            match self.inner.receive().await {
                Some(message) => {
                    self.track(&message);
                    return Some(message);
                }
                None => self.ended = true,
            }
        }
        if self.unanswered.is_empty() {
            return None;
        }
        std::future::pending().await
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

impl<T> Draining<T> {
    fn track(&mut self, message: &RxJsonRpcMessage<RoleServer>) {
        match message {
            JsonRpcMessage::Request(r) => {
                self.unanswered.insert(r.id.clone());
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification {
                    if let Some(id) = &c.params.request_id {
                        self.unanswered.remove(id);
                    }
                }
            }
            _ => {}
        }
    }
}
