//! The one file of OAuth credentials: `$XDG_STATE_HOME/toolrun/oauth.json` (else
//! `~/.local/state/toolrun/oauth.json`), mode 0600, replaced atomically on every change. It
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

/// Changes the store with `change`, read afresh (another toolrun may have written meanwhile).
pub(crate) fn update(change: impl FnOnce(&mut Store)) -> Result<(), String> {
    let path =
        path().ok_or("neither XDG_STATE_HOME nor HOME is set: nowhere to keep OAuth tokens")?;
    let mut store = load();
    change(&mut store);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_vec_pretty(&store).map_err(|e| e.to_string())?;
    crate::files::write_private_atomically(&path, &text)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

impl Store {
    /// The token for `resource` (from `client_id`, when the spec names the client).
    pub(crate) fn token(&self, resource: &str, client_id: Option<&str>) -> Option<&Token> {
        self.tokens.iter().rev().find(|t| {
            (t.resource == resource || t.server_url == resource)
                && client_id.is_none_or(|c| c == t.client_id)
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
