//! Calls their clients cancel. A call runs in the scope of its request's cancellation
//! ([`cancellable`]); `ServedSession::answer` stops the call when it is cancelled (the tool's
//! work is dropped, the call is recorded as cut off), and whoever answers the request sends
//! nothing for it. [`InFlight`] finds the cancellation of a request still running by its id,
//! for the client's `notifications/cancelled`.

use rmcp::model::RequestId;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

tokio::task_local! {
    /// The cancellation of the request whose call runs in this scope.
    static CANCEL: CancellationToken;
}

/// Runs `work` (a call's answer) so that `cancel` stops its call.
pub(crate) async fn cancellable<F: Future>(cancel: CancellationToken, work: F) -> F::Output {
    CANCEL.scope(cancel, work).await
}

/// The cancellation of the request being answered, if it can be cancelled.
pub(crate) fn current() -> Option<CancellationToken> {
    CANCEL.try_with(CancellationToken::clone).ok()
}

/// The requests still running, each with its cancellation and a number that tells it from a
/// later request reusing its id (the later one is the one a cancellation finds).
pub(crate) struct InFlight<K>(Arc<Mutex<Calls<K>>>);

struct Calls<K> {
    running: HashMap<K, (u64, CancellationToken)>,
    made: u64,
}

impl<K> Default for InFlight<K> {
    fn default() -> Self {
        InFlight(Arc::new(Mutex::new(Calls {
            running: HashMap::new(),
            made: 0,
        })))
    }
}

impl<K> Clone for InFlight<K> {
    fn clone(&self) -> Self {
        InFlight(self.0.clone())
    }
}

impl<K: Hash + Eq + Clone> InFlight<K> {
    /// Registers request `key` until the returned place is dropped (when its call has ended).
    pub(crate) fn start(&self, key: K) -> (CancellationToken, Place<K>) {
        let cancel = CancellationToken::new();
        let mut number = 0;
        if let Ok(mut calls) = self.0.lock() {
            calls.made += 1;
            number = calls.made;
            calls.running.insert(key.clone(), (number, cancel.clone()));
        }
        let place = Place {
            calls: self.0.clone(),
            key,
            number,
        };
        (cancel, place)
    }

    /// Cancels request `key` if it is still running; whether it was.
    pub(crate) fn cancel(&self, key: &K) -> bool {
        let found = self.0.lock().ok().and_then(|mut c| c.running.remove(key));
        found.map(|(_, cancel)| cancel.cancel()).is_some()
    }
}

/// The cancellation of a `tools/call` rmcp hands its handler, and its place in `in_flight` (a
/// session's calls). rmcp cancels its own token of a 2026-07-28 request whose client hung up,
/// and that is the one. A session's token is cancelled by the session's end too (a stop's grace
/// lets calls end first), so there only the client's `notifications/cancelled` cancels (through
/// `in_flight`), or rmcp's token if that came before the call got here. Either way rmcp drops
/// the answer.
pub(crate) fn of_request(
    in_flight: &InFlight<RequestId>,
    context: &RequestContext<RoleServer>,
    stateless: bool,
) -> (CancellationToken, Option<Place<RequestId>>) {
    if stateless {
        return (context.ct.clone(), None);
    }
    let (cancel, place) = in_flight.start(context.id.clone());
    if context.ct.is_cancelled() {
        cancel.cancel();
    }
    (cancel, Some(place))
}

/// A request's place in [`InFlight`], given up when its call ends.
pub(crate) struct Place<K: Hash + Eq> {
    calls: Arc<Mutex<Calls<K>>>,
    key: K,
    number: u64,
}

impl<K: Hash + Eq> Drop for Place<K> {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.calls.lock() {
            if calls.running.get(&self.key).map(|c| c.0) == Some(self.number) {
                calls.running.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancellation_finds_the_latest_request_of_its_id_while_it_runs() {
        let in_flight = InFlight::<u32>::default();
        let (first, first_place) = in_flight.start(1);
        let (second, _second_place) = in_flight.start(1);
        // The first ending does not take the second's place.
        drop(first_place);
        assert!(in_flight.cancel(&1));
        assert!(second.is_cancelled() && !first.is_cancelled());
        assert!(!in_flight.cancel(&1), "cancelled once");
        assert!(!in_flight.cancel(&2));
    }
}
