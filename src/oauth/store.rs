//! The one file of OAuth credentials: `$XDG_STATE_HOME/toolrun/oauth.json` (else
//! `~/.local/state/toolrun/oauth.json`), mode 0600, replaced atomically on every change, which
//! is made under a lock (`oauth.json.lock`) so toolruns running at once lose none. It
//! holds tokens keyed by issuer, resource and client, and the clients toolrun registered with
//! each issuer (an authorization server that moves means registering again).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Larger than any real store; a bigger file is not read (and is replaced when written).
const MAX_FILE: u64 = 4 << 20;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Store {
    #[serde(default)]
    pub(crate) clients: Vec<Client>,
    #[serde(default)]
    pub(crate) tokens: Vec<Token>,
}

/// A client toolrun registered itself (dynamic registration), or named by URL (CIMD).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Client {
    pub(crate) issuer: String,
    pub(crate) client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) client_secret: Option<String>,
    /// `token_endpoint_auth_method` as registered.
    pub(crate) auth_method: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Token {
    pub(crate) issuer: String,
    pub(crate) resource: String,
    pub(crate) client_id: String,
    pub(crate) access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) refresh_token: Option<String>,
    /// Unix seconds; none: the server did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expires_at: Option<u64>,
    #[serde(default)]
    pub(crate) scope: String,
    pub(crate) token_endpoint: String,
    /// How the client authenticated at the token endpoint (for refreshing).
    pub(crate) auth_method: String,
    /// The MCP endpoint it was obtained for (what `toolrun auth status` shows).
    pub(crate) server_url: String,
}

impl Token {
    /// Expired, or about to (a request takes a while to arrive).
    pub(crate) fn expired(&self) -> bool {
        self.expires_at.is_some_and(|at| at <= now() + 30)
    }
}

pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Where the store is.
pub(crate) fn path() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".local/state")
        }
    };
    Some(base.join("toolrun").join("oauth.json"))
}

/// The store as it is on disk; empty when there is none (or it cannot be read: it is then
/// replaced by the next write, which is all a broken store is good for).
pub(crate) fn load() -> Store {
    let Some(path) = path() else {
        return Store::default();
    };
    crate::files::read_regular(&path, MAX_FILE)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Changes the store with `change`, read afresh under the store's lock: toolruns logging in or
/// refreshing at once each read, change and write it in turn, so none loses another's change.
pub(crate) fn update(change: impl FnOnce(&mut Store)) -> Result<(), String> {
    let path =
        path().ok_or("neither XDG_STATE_HOME nor HOME is set: nowhere to keep OAuth tokens")?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let _held = Lock::take(&path)?;
    let mut store = load();
    change(&mut store);
    let text = serde_json::to_vec_pretty(&store).map_err(|e| e.to_string())?;
    crate::files::write_private_atomically(&path, &text)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Longest wait for another toolrun's change: one stopped while holding the lock (Ctrl-Z) must
/// not hang every other.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// The store's advisory lock (`flock` on `oauth.json.lock` beside it), held until dropped. A
/// file of its own, as the store itself is replaced by a rename on every write; the system
/// releases it when its holder dies, so a killed toolrun leaves no stale lock.
struct Lock {
    _file: Option<std::fs::File>,
}

impl Lock {
    #[cfg(unix)]
    fn take(store: &std::path::Path) -> Result<Lock, String> {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::AsRawFd;
        let path = store.with_extension("json.lock");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| format!("cannot open the lock {}: {e}", path.display()))?;
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        loop {
            // SAFETY: a descriptor `file` owns for the whole call.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(Lock { _file: Some(file) });
            }
            let e = std::io::Error::last_os_error();
            let busy = matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            );
            if !busy {
                return Err(format!("cannot lock {}: {e}", path.display()));
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!(
                    "another toolrun has held the lock {} for {} s (a stopped one?): the change is not kept",
                    path.display(),
                    LOCK_WAIT.as_secs()
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Elsewhere changes are not locked: two toolruns writing at once may lose one change.
    #[cfg(not(unix))]
    fn take(_: &std::path::Path) -> Result<Lock, String> {
        Ok(Lock { _file: None })
    }
}

impl Store {
    /// The token for `resource` (from `client_id`, when the spec names the client).
    pub(crate) fn token(&self, resource: &str, client_id: Option<&str>) -> Option<&Token> {
        self.tokens.iter().rev().find(|t| {
            (t.resource == resource || t.server_url == resource)
                && client_id.is_none_or(|c| c == t.client_id)
        })
    }

    /// A token for the same issuer, resource and client as `old` that is not `old` and has not
    /// expired: another toolrun refreshed `old` meanwhile (a refresh token used twice may be
    /// refused, where the server rotates them).
    pub(crate) fn newer_than(&self, old: &Token) -> Option<&Token> {
        self.tokens.iter().find(|t| {
            t.issuer == old.issuer
                && t.resource == old.resource
                && t.client_id == old.client_id
                && t.access_token != old.access_token
                && !t.expired()
        })
    }

    pub(crate) fn put_token(&mut self, token: Token) {
        self.tokens.retain(|t| {
            !(t.issuer == token.issuer
                && t.resource == token.resource
                && t.client_id == token.client_id)
        });
        self.tokens.push(token);
    }

    pub(crate) fn client(&self, issuer: &str) -> Option<&Client> {
        self.clients
            .iter()
            .find(|c| super::discover::same_issuer(&c.issuer, issuer))
    }

    pub(crate) fn put_client(&mut self, client: Client) {
        self.clients
            .retain(|c| !super::discover::same_issuer(&c.issuer, &client.issuer));
        self.clients.push(client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(access: &str, expires_at: Option<u64>) -> Token {
        Token {
            issuer: "https://as.example".into(),
            resource: "https://mcp.example/mcp".into(),
            client_id: "c".into(),
            access_token: access.into(),
            refresh_token: Some("r".into()),
            expires_at,
            scope: String::new(),
            token_endpoint: "https://as.example/token".into(),
            auth_method: "none".into(),
            server_url: "https://mcp.example/mcp".into(),
        }
    }

    #[test]
    fn a_token_refreshed_by_another_toolrun_is_taken_instead_of_refreshing_again() {
        let old = token("a1", Some(1));
        let mut store = Store::default();
        store.put_token(old.clone());
        assert!(store.newer_than(&old).is_none(), "only the old one is kept");
        store.put_token(token("a2", Some(now() + 3600)));
        assert_eq!(
            store.newer_than(&old).map(|t| t.access_token.as_str()),
            Some("a2")
        );
        store.put_token(token("a3", Some(1)));
        assert!(store.newer_than(&old).is_none(), "an expired one is no use");
    }
}
