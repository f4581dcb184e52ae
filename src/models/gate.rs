//! One gate per live model endpoint, shared by every run in the process: `toolrun test --jobs N`
//! runs cases on N threads, each with its own runtime and HTTP client, and the model's
//! `max_concurrency` and `requests_per_minute` hold for all of them together. A 429 closes the
//! gate for every worker until the server's `Retry-After` has passed, not only for the worker
//! that got it: the others would otherwise spend their requests (and retries) on more 429s.
//!
//! Runs whose requests are answered from a fixture never pass through a gate (see
//! `live::post_json`): a replay has no server to protect.

use crate::registry::LiveModel;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Which requests share one gate: the same server, model and key are the same quota,
/// whatever the spec calls the model (or however many specs declare it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    base_url: String,
    model: String,
    api_key_env: Option<String>,
}

pub(crate) struct Gate {
    state: Mutex<State>,
    /// Woken when a request leaves, for workers waiting on `max_concurrency`.
    left: Notify,
}

#[derive(Default)]
struct State {
    max_concurrency: Option<u32>,
    /// `requests_per_minute` as the least time between two request starts.
    interval: Option<Duration>,
    in_flight: u32,
    /// The earliest start of the next request under `requests_per_minute`.
    next_start: Option<Instant>,
    /// No request starts before this: the newest 429's `Retry-After`.
    closed_until: Option<Instant>,
}

enum Admit {
    Now,
    /// `max_concurrency` requests are in flight: wait for one to leave.
    Full,
    /// Closed after a 429, or too soon for `requests_per_minute`: wait until then.
    At(Instant),
}

impl State {
    /// Lets a request start at `now` (counting it in flight and taking its minute slot), or
    /// says what it waits for.
    fn admit(&mut self, now: Instant) -> Admit {
        if self.max_concurrency.is_some_and(|m| self.in_flight >= m) {
            return Admit::Full;
        }
        if let Some(t) = self.closed_until.max(self.next_start).filter(|t| *t > now) {
            return Admit::At(t);
        }
        self.in_flight += 1;
        self.next_start = self.interval.map(|i| now + i);
        Admit::Now
    }

    fn close_until(&mut self, until: Instant) {
        self.closed_until = Some(self.closed_until.map_or(until, |c| c.max(until)));
    }
}

/// Held while a request is in flight; dropping it lets the next one in.
pub(crate) struct Pass {
    gate: Arc<Gate>,
}

impl Drop for Pass {
    fn drop(&mut self) {
        self.gate.lock().in_flight -= 1;
        self.gate.left.notify_waiters();
    }
}

/// The gate of this model's endpoint. Several definitions of one endpoint share the strictest
/// of their limits, since they share the server's.
pub(crate) fn for_model(settings: &LiveModel) -> Arc<Gate> {
    static GATES: OnceLock<Mutex<HashMap<Key, Arc<Gate>>>> = OnceLock::new();
    let key = Key {
        base_url: settings.base_url.clone(),
        model: settings.model.clone(),
        api_key_env: settings.api_key_env.clone(),
    };
    let gates = GATES.get_or_init(Default::default);
    let gate = {
        let mut gates = gates.lock().unwrap_or_else(|e| e.into_inner());
        gates
            .entry(key)
            .or_insert_with(|| {
                Arc::new(Gate {
                    state: Mutex::new(State::default()),
                    left: Notify::new(),
                })
            })
            .clone()
    };
    gate.tighten(settings.max_concurrency, settings.requests_per_minute);
    gate
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a few counters, consistent after every statement: a panic elsewhere
        // cannot leave it half-updated.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn tighten(&self, max_concurrency: Option<u32>, requests_per_minute: Option<u32>) {
        let mut s = self.lock();
        if let Some(n) = max_concurrency {
            s.max_concurrency = Some(s.max_concurrency.map_or(n, |m| m.min(n)));
        }
        if let Some(rpm) = requests_per_minute {
            let interval = Duration::from_secs(60) / rpm.max(1);
            s.interval = Some(s.interval.map_or(interval, |i| i.max(interval)));
        }
    }

    /// Waits until a request may start: a place under `max_concurrency`, the gate open after
    /// a 429, and the next `requests_per_minute` slot. The request is in flight until the
    /// returned pass is dropped.
    pub(crate) async fn enter(self: &Arc<Self>) -> Pass {
        loop {
            let left = self.left.notified();
            tokio::pin!(left);
            // Registered before the check, so a request leaving in between still wakes us.
            left.as_mut().enable();
            let wait = match self.lock().admit(Instant::now()) {
                Admit::Now => return Pass { gate: self.clone() },
                Admit::Full => None,
                Admit::At(t) => Some(t),
            };
            match wait {
                None => left.await,
                Some(t) => tokio::time::sleep_until(t).await,
            }
        }
    }

    /// A 429: no worker starts a request for `wait` from now. Called before the pass of the
    /// request that got it is dropped, so no worker can slip in between.
    pub(crate) fn close_for(&self, wait: Duration) {
        self.lock().close_until(Instant::now() + wait);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(max_concurrency: Option<u32>, rpm: Option<u32>) -> Arc<Gate> {
        let g = Arc::new(Gate {
            state: Mutex::new(State::default()),
            left: Notify::new(),
        });
        g.tighten(max_concurrency, rpm);
        g
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a test runtime")
    }

    #[test]
    fn max_concurrency_waits_for_a_pass_to_be_dropped() {
        rt().block_on(async {
            let g = gate(Some(1), None);
            let first = g.enter().await;
            let second = tokio::spawn({
                let g = g.clone();
                async move { g.enter().await }
            });
            tokio::task::yield_now().await;
            assert!(
                !second.is_finished(),
                "a second request waits for the first"
            );
            drop(first);
            let _second = second.await.expect("the second request enters");
            assert_eq!(g.lock().in_flight, 1);
        });
    }

    #[test]
    fn requests_per_minute_spaces_the_starts() {
        let g = gate(None, Some(120));
        let t0 = Instant::now();
        let mut s = g.lock();
        assert!(matches!(s.admit(t0), Admit::Now));
        let half = Duration::from_millis(500);
        assert!(matches!(s.admit(t0), Admit::At(t) if t == t0 + half));
        assert!(matches!(s.admit(t0 + half), Admit::Now));
        assert_eq!(
            s.in_flight, 2,
            "the minute limit does not hold requests in flight"
        );
    }

    #[test]
    fn a_429_closes_the_gate_and_the_longest_wait_holds() {
        let g = gate(None, None);
        let t0 = Instant::now();
        let mut s = g.lock();
        s.close_until(t0 + Duration::from_secs(2));
        s.close_until(t0 + Duration::from_millis(500));
        assert!(
            matches!(s.admit(t0 + Duration::from_secs(1)), Admit::At(t) if t == t0 + Duration::from_secs(2))
        );
        assert!(matches!(s.admit(t0 + Duration::from_secs(2)), Admit::Now));
    }

    #[test]
    fn a_full_gate_waits_before_it_looks_at_the_clock() {
        let g = gate(Some(1), Some(60));
        let t0 = Instant::now();
        let mut s = g.lock();
        assert!(matches!(s.admit(t0), Admit::Now));
        assert!(matches!(s.admit(t0), Admit::Full));
    }

    #[test]
    fn definitions_of_one_endpoint_share_the_strictest_limits() {
        let g = gate(Some(4), Some(60));
        g.tighten(Some(2), Some(120));
        g.tighten(None, None);
        let s = g.lock();
        assert_eq!(s.max_concurrency, Some(2));
        assert_eq!(s.interval, Some(Duration::from_secs(1)));
    }
}
