//! The stdio servers a gateway runs at once. `serve` starts one per client session (each has its
//! own MCP session with the server), and a client that goes away without ending its session
//! leaves it to `--session-idle`: under `--max-sessions` that was hundreds of idle processes.
//! `--max-processes` bounds them, across sessions and servers: past it, the process idle the
//! longest (no call in flight) is ended to make room, and its session starts a new one on its
//! next call, as after a crash. A run's own transport sets no bound: it starts one per server.
//!
//! The pool also knows every process started through it, so the end of `serve` can end each
//! one (see [`Pool::close`]), whoever else was ending it or about to start another.

use super::stdio::Process;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// The key of the pool among the state the transports of a gateway share.
pub(crate) const KEY: &str = "mcp-stdio-processes";

#[derive(Default)]
pub(crate) struct Pool {
    /// Most processes at once; 0 sets no bound.
    max: AtomicUsize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The processes that count against the bound: running, and not being ended.
    live: Vec<Live>,
    /// Every process started and not yet reaped, being ended or not.
    started: Vec<Weak<Process>>,
    /// Set at the end: nothing more is started.
    closed: bool,
}

struct Live {
    process: Weak<Process>,
    /// The server's name in the spec, for the event that says it was ended.
    server: String,
}

/// A process ended to make room: which server's, and what ends it.
pub(crate) struct Evicted {
    pub(crate) server: String,
    pub(crate) process: Arc<Process>,
}

/// Why [`Pool::admit`] started nothing.
pub(crate) enum Refused<E> {
    /// Every process has a call in flight, and nothing can make room.
    Full,
    /// The gateway (or run) is ending: a process started now would outlive it.
    Closed,
    /// The process could not be started.
    Failed(E),
}

impl Pool {
    pub(crate) fn limit(&self, max: usize) {
        self.max.store(max, Ordering::SeqCst);
    }

    pub(crate) fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts a process with `start`, making room for it: at the bound, the process idle the
    /// longest is retired (returned, for the caller to end and report).
    pub(crate) fn admit<E>(
        &self,
        server: &str,
        start: impl FnOnce() -> Result<Process, E>,
    ) -> Result<(Arc<Process>, Option<Evicted>), Refused<E>> {
        let mut state = self.state();
        if state.closed {
            return Err(Refused::Closed);
        }
        state
            .started
            .retain(|p| p.upgrade().is_some_and(|p| !p.is_reaped()));
        let live = &mut state.live;
        live.retain(|l| l.process.upgrade().is_some_and(|p| !p.is_over()));
        let max = self.max();
        let mut victim = None;
        if max > 0 && live.len() >= max {
            // Held by its session and here: whoever else holds it has a call in flight.
            let idle = live
                .iter()
                .enumerate()
                .filter_map(|(i, l)| Some((i, l.process.upgrade()?)))
                .filter(|(_, p)| Arc::strong_count(p) <= 2 && !p.busy())
                .min_by_key(|(_, p)| p.last_used())
                .map(|(i, _)| i);
            victim = Some(idle.ok_or(Refused::Full)?);
        }
        let process = Arc::new(start().map_err(Refused::Failed)?);
        let evicted = victim.and_then(|i| {
            let gone = live.remove(i);
            let process = gone.process.upgrade()?;
            process.retire();
            Some(Evicted {
                server: gone.server,
                process,
            })
        });
        live.push(Live {
            process: Arc::downgrade(&process),
            server: server.to_string(),
        });
        state.started.push(Arc::downgrade(&process));
        Ok((process, evicted))
    }

    /// Starts nothing more, and returns every process started that is not yet reaped, for the
    /// caller to end: those a session is still using, those another task is ending (which a
    /// shut-down runtime would give up on), and those a call started after its session ended.
    pub(crate) fn close(&self) -> Vec<Arc<Process>> {
        let mut state = self.state();
        state.closed = true;
        state.live.clear();
        std::mem::take(&mut state.started)
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|p| !p.is_reaped())
            .collect()
    }
}
