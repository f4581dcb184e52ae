//! What introspection said of opaque tokens that were active, for a short while: a client
//! sends the same token with every request, and asking the issuer each time would put its
//! round trip on every call and its load on the issuer (RFC 7662 §4 allows caching, trading a
//! revocation seen a little later). Kept by the token's SHA-256, never the token; each entry
//! lasts [`TTL`] at most and never past the token's `exp`; at most [`MAX_ENTRIES`] are kept.

use super::jwt::Principal;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an active answer is believed: a revoked token is refused this late at most.
pub(super) const TTL: Duration = Duration::from_secs(30);
/// Tokens remembered at once; a flood of distinct tokens costs no more memory than this.
pub(super) const MAX_ENTRIES: usize = 1024;

type Digest = [u8; 32];

#[derive(Default)]
pub(super) struct Cache {
    entries: Mutex<HashMap<Digest, (Principal, Instant)>>,
}

fn digest(token: &str) -> Digest {
    use sha2::Digest as _;
    sha2::Sha256::digest(token.as_bytes()).into()
}

impl Cache {
    /// The principal an earlier introspection found `token` active for, while that holds.
    pub(super) fn get(&self, token: &str) -> Option<Principal> {
        let mut entries = self.entries.lock().ok()?;
        let key = digest(token);
        match entries.get(&key) {
            Some((principal, until)) if Instant::now() < *until => Some(principal.clone()),
            Some(_) => {
                entries.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Remembers that `token` is active for `principal`, until `exp_secs` (the token's `exp`,
    /// Unix seconds, `now_secs` now) or [`TTL`] from now, whichever is sooner.
    pub(super) fn put(
        &self,
        token: &str,
        principal: &Principal,
        exp_secs: Option<i64>,
        now_secs: i64,
    ) {
        let left = match exp_secs {
            Some(exp) if exp <= now_secs => return,
            Some(exp) => TTL.min(Duration::from_secs((exp - now_secs) as u64)),
            None => TTL,
        };
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        let now = Instant::now();
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (_, until)| now < *until);
        }
        if entries.len() >= MAX_ENTRIES {
            // All still good: the one ending soonest makes room.
            let soonest = entries.iter().min_by_key(|(_, (_, until))| *until);
            if let Some(key) = soonest.map(|(k, _)| *k) {
                entries.remove(&key);
            }
        }
        entries.insert(digest(token), (principal.clone(), now + left));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(subject: &str) -> Principal {
        Principal {
            subject: subject.into(),
            scopes: vec!["tools.read".into()],
        }
    }

    #[test]
    fn an_active_answer_is_kept_until_the_tokens_expiry_at_most() {
        let cache = Cache::default();
        cache.put("a", &principal("u"), Some(1_000), 1_000);
        assert_eq!(cache.get("a"), None, "expired now: not kept");
        cache.put("b", &principal("u"), Some(900), 1_000);
        assert_eq!(cache.get("b"), None, "expired (within leeway): not kept");
        cache.put("c", &principal("u"), Some(1_060), 1_000);
        assert_eq!(cache.get("c"), Some(principal("u")));
        assert_eq!(cache.get("d"), None);
    }

    #[test]
    fn the_entries_are_bounded() {
        let cache = Cache::default();
        for i in 0..MAX_ENTRIES + 10 {
            cache.put(&format!("t{i}"), &principal("u"), None, 0);
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        assert!(cache.get(&format!("t{}", MAX_ENTRIES + 9)).is_some());
    }
}
