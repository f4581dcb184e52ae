//! The stdio servers a gateway runs at once. `serve` starts one per client session (each has its
//! own MCP session with the server), and a client that goes away without ending its session
//! leaves it to `--session-idle`: under `--max-sessions` that was hundreds of idle processes.
//! `--max-processes` bounds them, across sessions and servers: past it, the process idle the
//! longest (no call in flight) is ended to make room, and its session starts a new one on its
//! next call, as after a crash. A run's own transport sets no bound: it starts one per server.

use super::stdio::Process;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// The key of the pool among the state the transports of a gateway share.
pub(crate) const KEY: &str = "mcp-stdio-processes";

#[derive(Default)]
pub(crate) struct Pool {
    /// Most processes at once; 0 sets no bound.
    max: AtomicUsize,
    live: Mutex<Vec<Live>>,
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

impl Pool {
    pub(crate) fn limit(&self, max: usize) {
        self.max.store(max, Ordering::SeqCst);
    }

    pub(crate) fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }

    /// Starts a process with `start`, making room for it: at the bound, the process idle the
    /// longest is retired (returned, for the caller to end and report). `Err(None)`: every
    /// process has a call in flight, and nothing can make room.
    pub(crate) fn admit<E>(
        &self,
        server: &str,
        start: impl FnOnce() -> Result<Process, E>,
    ) -> Result<(Arc<Process>, Option<Evicted>), Option<E>> {
        let mut live = match self.live.lock() {
            Ok(l) => l,
            Err(poisoned) => poisoned.into_inner(),
        };
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
            victim = Some(idle.ok_or(None)?);
        }
        let process = Arc::new(start().map_err(Some)?);
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
        Ok((process, evicted))
    }
}
