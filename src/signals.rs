//! SIGINT and SIGTERM as flags, set by the signal handler itself (issue 36 §19). The handlers
//! were tokio tasks, polled only once a command awaited something: a run that had not yet (or
//! never) waited was killed by SIGTERM with no trace, or did not see the signal until it ended.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

type Interrupt = Arc<AtomicBool>;

/// The process's two flags: stop (any signal) and Ctrl-C (which of them).
pub(crate) fn flags() -> (Interrupt, Interrupt) {
    FLAGS
        .get_or_init(|| {
            (
                Arc::new(AtomicBool::new(false)),
                Arc::new(AtomicBool::new(false)),
            )
        })
        .clone()
}

/// The handler a signal replaced (a tokio or signal-hook handler installed earlier), called
/// after ours so it still sees its signal: `sa_sigaction` and `sa_flags`, by signal.
#[cfg(unix)]
static PREVIOUS: [(std::sync::atomic::AtomicUsize, std::sync::atomic::AtomicI32); 2] = [
    (
        std::sync::atomic::AtomicUsize::new(0),
        std::sync::atomic::AtomicI32::new(0),
    ),
    (
        std::sync::atomic::AtomicUsize::new(0),
        std::sync::atomic::AtomicI32::new(0),
    ),
];

#[cfg(unix)]
extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // Only atomic stores and loads here: nothing that allocates or locks.
    let (stop, sigint) = signal_flags_ref();
    if sig == libc::SIGINT {
        sigint.store(true, Ordering::SeqCst);
    }
    stop.store(true, Ordering::SeqCst);
    let slot = &PREVIOUS[usize::from(sig != libc::SIGINT)];
    let handler = slot.0.load(Ordering::SeqCst);
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        return;
    }
    // SAFETY: `handler` is the function the previous sigaction installed, called with the
    // signature its flags declare, as the kernel would have called it.
    unsafe {
        if slot.1.load(Ordering::SeqCst) & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(handler);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
            f(sig);
        }
    }
}

static FLAGS: std::sync::OnceLock<(Interrupt, Interrupt)> = std::sync::OnceLock::new();

/// The flags without cloning an `Arc`: a handler touches no reference count.
#[cfg(unix)]
fn signal_flags_ref() -> (&'static AtomicBool, &'static AtomicBool) {
    static FALLBACK: AtomicBool = AtomicBool::new(false);
    match FLAGS.get() {
        Some((stop, sigint)) => (stop, sigint),
        None => (&FALLBACK, &FALLBACK),
    }
}

/// SIGINT and SIGTERM go to [`on_signal`], once per process.
#[cfg(unix)]
pub(crate) fn install() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let _ = flags();
        for (i, sig) in [libc::SIGINT, libc::SIGTERM].into_iter().enumerate() {
            // SAFETY: a zeroed sigaction is a valid starting point; the handler only does
            // atomic operations (async-signal-safe); `old` receives the handler it replaces.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &action, &mut old) == 0 {
                    PREVIOUS[i].1.store(old.sa_flags, Ordering::SeqCst);
                    PREVIOUS[i].0.store(old.sa_sigaction, Ordering::SeqCst);
                }
            }
        }
    });
}
