//! Setting up a run: what `run`, `call`, `serve`, `test`, `replay` and the MCP server share
//! before the loop starts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Set by Ctrl-C or SIGTERM; the engine and the runners poll it between steps.
pub(crate) type Interrupt = Arc<AtomicBool>;

/// Ctrl-C and SIGTERM set a flag the engine watches, so the trace of the run in progress is
/// still written. Returns the flag and whether the signal was SIGINT (exit 130).
pub(crate) fn watch_signals(rt: &tokio::runtime::Runtime) -> (Interrupt, Interrupt) {
    let stop = Arc::new(AtomicBool::new(false));
    let sigint = Arc::new(AtomicBool::new(false));
    let (s1, i1) = (stop.clone(), sigint.clone());
    rt.spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            i1.store(true, Ordering::SeqCst);
            s1.store(true, Ordering::SeqCst);
        }
    });
    #[cfg(unix)]
    {
        let s2 = stop.clone();
        rt.spawn(async move {
            if let Ok(mut term) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                term.recv().await;
                s2.store(true, Ordering::SeqCst);
            }
        });
    }
    (stop, sigint)
}
