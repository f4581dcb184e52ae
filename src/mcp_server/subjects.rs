//! The `serve:` limits and loop detection of MCP 2026-07-28 requests, with `serve.auth`: there
//! is no session to count in, so each authenticated subject (its token's `sub`, else
//! `client_id`) has counts of its own, as a session has. Subjects come from verified tokens,
//! but an issuer can mint many, so the map is bounded: at most `cap` subjects
//! (`--max-subjects`; a new one evicts the one used least recently, whose count starts again)
//! and each subject's counts last `window` (`--subject-window`) from its first call. The
//! counts are this process's: behind a load balancer each replica keeps its own.

use crate::engine::CallSession;
use crate::registry::ServeLimits;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Each subject's counts, bounded in number and age.
pub(crate) struct Subjects {
    limits: ServeLimits,
    cap: usize,
    window: Duration,
    /// The window as refusals name it (`1h`).
    window_text: String,
    map: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    counts: Arc<CallSession>,
    since: Instant,
    used: Instant,
}

impl Subjects {
    /// `window_text`: the window as `--subject-window` gave it.
    pub(crate) fn new(limits: ServeLimits, cap: usize, window: (Duration, &str)) -> Subjects {
        Subjects {
            limits,
            cap: cap.max(1),
            window: window.0,
            window_text: window.1.to_string(),
            map: Mutex::default(),
        }
    }

    /// The window as refusals name it, and as a recording keeps it for its replay.
    pub(crate) fn window_text(&self) -> &str {
        &self.window_text
    }

    /// `subject`'s counts: its own while its window lasts, new ones after it (or once the
    /// subject was evicted). A call already admitted keeps the counts it was admitted in.
    pub(crate) fn counts(&self, subject: &str) -> Arc<CallSession> {
        let now = Instant::now();
        // A panic ends the process (panic = "abort"): a poisoned lock cannot be seen.
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = map.get_mut(subject) {
            if now.duration_since(entry.since) < self.window {
                entry.used = now;
                return entry.counts.clone();
            }
        }
        if map.len() >= self.cap && !map.contains_key(subject) {
            let window = self.window;
            map.retain(|_, e| now.duration_since(e.since) < window);
            // Only when full and a new subject comes: one pass over at most `cap` entries.
            let oldest = map
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone());
            if let (true, Some(oldest)) = (map.len() >= self.cap, oldest) {
                map.remove(&oldest);
            }
        }
        let counts = Arc::new(CallSession::per_subject(self.limits, &self.window_text));
        let entry = Entry {
            counts: counts.clone(),
            since: now,
            used: now,
        };
        map.insert(subject.to_string(), entry);
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subjects(cap: usize, window: Duration) -> Subjects {
        let limits = ServeLimits {
            max_tool_calls: 10,
            max_repeated_calls: 5,
        };
        Subjects::new(limits, cap, (window, "1h"))
    }

    #[test]
    fn a_subject_keeps_its_counts_and_the_least_recently_used_is_evicted() {
        let s = subjects(2, Duration::from_secs(3600));
        let a = s.counts("a");
        let b = s.counts("b");
        assert!(Arc::ptr_eq(&a, &s.counts("a")));
        let _c = s.counts("c");
        assert!(
            Arc::ptr_eq(&a, &s.counts("a")),
            "a was used more recently than b"
        );
        assert!(!Arc::ptr_eq(&b, &s.counts("b")), "b was evicted");
        assert!(s.map.lock().map(|m| m.len()).unwrap_or(0) <= 2);
    }

    #[test]
    fn counts_expire_after_their_window() {
        let s = subjects(2, Duration::from_millis(1));
        let a = s.counts("a");
        std::thread::sleep(Duration::from_millis(5));
        assert!(!Arc::ptr_eq(&a, &s.counts("a")));
    }
}
