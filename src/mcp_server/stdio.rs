//! The stdio transport `serve` runs its session on: bounded, and answering every request at the
//! end of input. Its lines are read and written by [`super::lines`], which bounds a line as an
//! HTTP body is and answers a line that is not a message.
//!
//! rmcp reads the next message as soon as it has handed on the last, and starts a handler for
//! each request however many are running: a client that wrote requests faster than they were
//! answered (100,000 `tools/call`s in a pipe) made the process hold every one of them. Here a
//! message is read only once one of `--max-requests` slots is free, and a request or
//! notification keeps its slot while its handler runs and, for a request, until its answer is
//! written to stdout. With every slot taken stdin is not read: the client's writes wait in the
//! pipe, and nothing read is refused or lost.
//!
//! A handler waiting for its client's answer (a confirmation asked by elicitation) would then
//! hold a slot that only reading stdin frees: each question the server asks lends one more slot
//! until it is answered (up to `--max-requests` lent at once), so the answer is read.
//!
//! A client's `notifications/cancelled` frees a slot rather than needing one, and would wait
//! behind the very call it cancels: with every slot taken, one message is read ahead. A
//! cancellation (or an answer to a question) goes on at once; anything else is held, unread by
//! rmcp, until a slot is free, and nothing more is read meanwhile.
//!
//! rmcp also ends its session loop as soon as stdin ends, then waits a few seconds for the
//! answers of the requests still being worked on and drops the rest: a client that writes its
//! requests and closes stdin (a pipe, a batch job) lost every answer not ready by then. Here the
//! end of input is held back until every request read has been answered, so the loop sends
//! those answers as it does any other and ends with nothing left to drop.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::ServerNotification;
use rmcp::model::{ClientNotification, GetExtensions, JsonRpcMessage, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// stdin and stdout, handling at most `max_requests` messages at once and answering every
/// request read before it reports the end of input.
pub(crate) fn transport(
    max_requests: usize,
) -> impl Transport<RoleServer, Error = std::io::Error> + 'static {
    let max_requests = max_requests.max(1);
    Bounded {
        inner: super::lines::Lines::new(tokio::io::stdin(), tokio::io::stdout()),
        unanswered: HashMap::new(),
        slots: Arc::new(Semaphore::new(max_requests)),
        next: None,
        held: None,
        asked: HashMap::new(),
        lent: 0,
        max_lent: max_requests,
        owed: 0,
        ended: false,
    }
}

/// A message's place among those handled at once. The handler holds one clone (in the message's
/// extensions, which rmcp hands to it) and, for a request, the transport another until the
/// answer is written: the place is free when both have let go. So a request its client
/// cancelled (rmcp then drops its answer) keeps its place while its handler still runs, and an
/// answer that a client not reading stdout leaves unwritten keeps its place too.
#[derive(Clone)]
struct Slot {
    _permit: Arc<OwnedSemaphorePermit>,
}

struct Bounded<T> {
    inner: T,
    /// Requests read and not yet answered (nor cancelled by the client, which rmcp does not
    /// answer), with their slots. A client that reuses an id has one entry: rmcp answers it
    /// once.
    unanswered: HashMap<RequestId, Option<Slot>>,
    slots: Arc<Semaphore>,
    /// The slot taken before the next message is read: a message that starts no handler (the
    /// client's answer to a question) leaves it to the one after.
    next: Option<OwnedSemaphorePermit>,
    /// The message read ahead while every slot was taken, waiting for one.
    held: Option<RxJsonRpcMessage<RoleServer>>,
    /// The server's questions to its client not yet answered: `true` for those that lent a slot.
    asked: HashMap<RequestId, bool>,
    lent: usize,
    max_lent: usize,
    /// Lent slots whose question was answered while every slot was taken: taken back before the
    /// next message is read.
    owed: usize,
    ended: bool,
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Bounded<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let slot = match &item {
            JsonRpcMessage::Response(r) => self.unanswered.remove(&r.id).flatten(),
            JsonRpcMessage::Error(e) => {
                let id = e.id.as_ref();
                id.and_then(|id| self.unanswered.remove(id)).flatten()
            }
            JsonRpcMessage::Request(r) => {
                self.lend(r.id.clone());
                None
            }
            JsonRpcMessage::Notification(n) => {
                // rmcp withdraws a question whose wait timed out (or whose call ended) so.
                if let ServerNotification::CancelledNotification(c) = &n.notification {
                    if let Some(id) = &c.params.request_id {
                        self.repay(id);
                    }
                }
                None
            }
        };
        let sent = self.inner.send(item);
        async move {
            let result = sent.await;
            drop(slot);
            result
        }
    }

    // rmcp calls this again after each message it sends (its loop selects on it), so an input
    // that has ended reports so on the first call after the last answer went out, and a slot
    // freed by an answer is taken on the next call.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        while !self.ended {
            if self.held.is_some() {
                self.take_slot().await;
                if let Some(mut message) = self.held.take() {
                    self.track(&mut message);
                    return Some(message);
                }
                continue;
            }
            // Cancellable at each await: a slot taken is kept in `self.next`, and the read is
            // rmcp's own stdin reader's, which its loop also drops unfinished.
            let read_ahead = {
                let Bounded {
                    inner,
                    slots,
                    next,
                    owed,
                    ..
                } = &mut *self;
                tokio::select! {
                    biased;
                    () = take_slot(slots, next, owed) => None,
                    read = inner.receive() => Some(read),
                }
            };
            let read = match read_ahead {
                None => self.inner.receive().await,
                Some(read) => read,
            };
            match read {
                Some(mut message) if self.next.is_some() || needs_no_slot(&message) => {
                    self.track(&mut message);
                    return Some(message);
                }
                Some(message) => self.held = Some(message),
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

/// Waits for a free slot (and for the lent slots owed back), without reading stdin meanwhile.
/// Cancellable at each await: what was taken is kept in `next` and `owed`.
async fn take_slot(
    slots: &Arc<Semaphore>,
    next: &mut Option<OwnedSemaphorePermit>,
    owed: &mut usize,
) {
    while *owed > 0 {
        match next.take() {
            Some(permit) => permit.forget(),
            // The semaphore is never closed.
            None => match slots.acquire().await {
                Ok(permit) => permit.forget(),
                Err(_) => return,
            },
        }
        *owed -= 1;
    }
    if next.is_none() {
        *next = slots.clone().acquire_owned().await.ok();
    }
}

/// A message handled without a slot: a cancellation (it frees one) or an answer to a question
/// (its question lent one).
fn needs_no_slot(message: &RxJsonRpcMessage<RoleServer>) -> bool {
    match message {
        JsonRpcMessage::Notification(n) => {
            matches!(n.notification, ClientNotification::CancelledNotification(_))
        }
        JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => true,
        JsonRpcMessage::Request(_) => false,
    }
}

impl<T> Bounded<T> {
    async fn take_slot(&mut self) {
        take_slot(&self.slots, &mut self.next, &mut self.owed).await;
    }

    fn track(&mut self, message: &mut RxJsonRpcMessage<RoleServer>) {
        match message {
            JsonRpcMessage::Request(r) => {
                let slot = self.next.take().map(|p| Slot {
                    _permit: Arc::new(p),
                });
                if let Some(slot) = &slot {
                    r.request.extensions_mut().insert(slot.clone());
                }
                self.unanswered.insert(r.id.clone(), slot);
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification {
                    if let Some(id) = &c.params.request_id {
                        self.unanswered.remove(id);
                    }
                }
                if let Some(permit) = self.next.take() {
                    let slot = Slot {
                        _permit: Arc::new(permit),
                    };
                    n.notification.extensions_mut().insert(slot);
                }
            }
            JsonRpcMessage::Response(r) => self.repay(&r.id),
            JsonRpcMessage::Error(e) => {
                if let Some(id) = &e.id {
                    self.repay(id);
                }
            }
        }
    }

    /// The server asked its client something: until the answer comes, one more message may be
    /// read, so that the answer is.
    fn lend(&mut self, id: RequestId) {
        let lends = self.lent + self.owed < self.max_lent;
        if lends {
            self.slots.add_permits(1);
            self.lent += 1;
        }
        self.asked.insert(id, lends);
    }

    /// The client answered (or the server withdrew) a question: the slot it lent comes back,
    /// now if one is free, else before the next message is read.
    fn repay(&mut self, id: &RequestId) {
        if self.asked.remove(id) == Some(true) {
            self.lent -= 1;
            self.owed += 1 - self.slots.forget_permits(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;
    use serde_json::{json, Value};
    use std::collections::VecDeque;

    /// Gives the client's messages in turn (then nothing), and holds each write until `written`
    /// lets one through, as a stdout that the client does not read would.
    struct Pipe {
        incoming: VecDeque<RxJsonRpcMessage<RoleServer>>,
        written: Arc<Semaphore>,
    }

    impl Transport<RoleServer> for Pipe {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _item: TxJsonRpcMessage<RoleServer>,
        ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
            let written = self.written.clone();
            async move {
                let permit = written.acquire().await.map_err(std::io::Error::other)?;
                permit.forget();
                Ok(())
            }
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
            match self.incoming.pop_front() {
                Some(message) => Some(message),
                None => std::future::pending().await,
            }
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    fn message<M: serde::de::DeserializeOwned>(value: Value) -> M {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
    }

    fn ping(id: u32) -> Value {
        json!({ "jsonrpc": "2.0", "id": id, "method": "ping" })
    }

    fn bounded(max: usize, incoming: Vec<Value>) -> (Bounded<Pipe>, Arc<Semaphore>) {
        let written = Arc::new(Semaphore::new(0));
        let pipe = Pipe {
            incoming: incoming.into_iter().map(message).collect(),
            written: written.clone(),
        };
        let transport = Bounded {
            inner: pipe,
            unanswered: HashMap::new(),
            slots: Arc::new(Semaphore::new(max)),
            next: None,
            held: None,
            asked: HashMap::new(),
            lent: 0,
            max_lent: max,
            owed: 0,
            ended: false,
        };
        (transport, written)
    }

    fn answer(id: u32) -> TxJsonRpcMessage<RoleServer> {
        message(json!({ "jsonrpc": "2.0", "id": id, "result": {} }))
    }

    /// A handler that ended gives its place back only once its answer is written: a client
    /// that does not read stdout is not read either.
    #[tokio::test]
    async fn a_place_is_free_once_the_answer_is_written() {
        let (mut t, written) = bounded(1, vec![ping(1), ping(2)]);
        let first = t.receive().await;
        assert!(first.is_some());
        drop(first);
        assert!(t.receive().now_or_never().is_none(), "read past the cap");
        let mut sending = Box::pin(t.send(answer(1)));
        assert!((&mut sending).now_or_never().is_none());
        assert!(
            t.receive().now_or_never().is_none(),
            "the answer is not written yet"
        );
        written.add_permits(1);
        assert!(sending.await.is_ok());
        assert!(t.receive().now_or_never().flatten().is_some());
    }

    /// A question to the client lends a place until its answer comes: the answer is read while
    /// every place is taken, and the place comes back before anything more is handed on.
    #[tokio::test]
    async fn a_question_lends_a_place_until_it_is_answered() {
        let reply = json!({ "jsonrpc": "2.0", "id": 7, "result": {} });
        let (mut t, written) = bounded(1, vec![ping(1), reply, ping(2)]);
        written.add_permits(10);
        let call = t.receive().await;
        assert!(call.is_some());
        let ask = json!({ "jsonrpc": "2.0", "id": 7, "method": "ping" });
        assert!(t.send(message(ask)).await.is_ok());
        let answered = t.receive().now_or_never().flatten();
        assert!(matches!(answered, Some(JsonRpcMessage::Response(_))));
        assert!(
            t.receive().now_or_never().is_none(),
            "the lent place is back"
        );
        drop(call);
        assert!(t.send(answer(1)).await.is_ok());
        assert!(t.receive().now_or_never().flatten().is_some());
    }

    /// A cancellation is read and handed on while every place is taken (it frees the place of
    /// the request it cancels); the request read ahead after it waits for a place.
    #[tokio::test]
    async fn a_cancellation_is_read_while_every_place_is_taken() {
        let cancel = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": { "requestId": 1 } });
        let (mut t, _written) = bounded(1, vec![ping(1), cancel, ping(2)]);
        let call = t.receive().await;
        assert!(call.is_some());
        let cancelled = t.receive().now_or_never().flatten();
        assert!(matches!(cancelled, Some(JsonRpcMessage::Notification(_))));
        assert!(t.receive().now_or_never().is_none(), "read past the cap");
        drop(call);
        assert!(t.receive().now_or_never().flatten().is_some());
    }
}
