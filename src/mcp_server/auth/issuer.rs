//! The authorization server behind `serve.auth`: its metadata (RFC 8414, or OpenID discovery),
//! its key set, and its introspection endpoint (RFC 7662). Fetched when a request first needs
//! them, never before (`check` and offline commands never reach it); every fetch is bounded in
//! time and size, one at a time, and the key set is fetched again for an unknown key at most
//! once a minute. What introspection says of an active token is believed for a short while
//! (`cache`).

use super::jwt::{self, Jwk, Principal};
use crate::net::{HttpRequest, Purpose, SendOptions, Transport};
use crate::registry::HostRule;
use serde_json::Value;
use std::time::{Duration, Instant};

const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_DOCUMENT_BYTES: u64 = 256 * 1024;
/// An unknown `kid` fetches the key set again no sooner than this after the last fetch.
const REFETCH_AFTER: Duration = Duration::from_secs(60);
/// After a fetch failed, the next request tries again no sooner than this.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(2);
/// Keys older than this are fetched again by the next request: a key the issuer has withdrawn
/// is not trusted for ever. Until that fetch works, they stay. (The metadata, once read, is kept
/// for the life of the process.)
const KEYS_MAX_AGE: Duration = Duration::from_secs(3600);

pub(super) struct Issuer {
    pub(super) issuer: String,
    /// The hosts the spec lets toolrun reach: the metadata's endpoints must be among them.
    allowed: Vec<HostRule>,
    transport: Transport,
    /// One fetch at a time: a burst of requests with a new key waits for one fetch.
    state: tokio::sync::Mutex<State>,
    /// Opaque tokens introspection found active lately.
    introspected: super::cache::Cache,
}

#[derive(Default)]
struct State {
    metadata: Option<Metadata>,
    keys: Option<Vec<Jwk>>,
    fetched: Option<Instant>,
    failed: Option<(Instant, String)>,
}

#[derive(Clone)]
struct Metadata {
    jwks_uri: Option<String>,
    introspection_endpoint: Option<String>,
}

impl Issuer {
    pub(super) fn new(issuer: &str, allowed: Vec<HostRule>) -> Issuer {
        Issuer {
            issuer: issuer.to_string(),
            allowed,
            transport: Transport::live(),
            state: Default::default(),
            introspected: Default::default(),
        }
    }

    /// The key a token signed with `alg` by key `kid` is checked with.
    pub(super) async fn key(&self, kid: Option<&str>, alg: &str) -> Result<Jwk, String> {
        let mut state = self.state.lock().await;
        let find = |keys: &[Jwk]| {
            let mut fitting = keys.iter().filter(|k| k.fits(alg));
            match kid {
                Some(kid) => fitting.find(|k| k.kid.as_deref() == Some(kid)).cloned(),
                // Without a `kid`, only a set with one key for the algorithm says which.
                None => fitting
                    .next()
                    .filter(|_| keys.iter().filter(|k| k.fits(alg)).count() == 1)
                    .cloned(),
            }
        };
        if state.fetched.is_some_and(|at| at.elapsed() >= KEYS_MAX_AGE)
            && self.refresh(&mut state).await.is_err()
        {
            // The keys there were stay; the next try is a minute on, not every request's.
            state.fetched = Instant::now().checked_sub(KEYS_MAX_AGE - REFETCH_AFTER);
        }
        if let Some(found) = state.keys.as_deref().and_then(find) {
            return Ok(found);
        }
        let may_fetch = match (&state.keys, state.fetched) {
            (Some(_), Some(at)) => at.elapsed() >= REFETCH_AFTER,
            _ => true,
        };
        if may_fetch {
            self.refresh(&mut state).await?;
            if let Some(found) = state.keys.as_deref().and_then(find) {
                return Ok(found);
            }
        }
        Err(match kid {
            Some(kid) => format!(
                "the token's key `{}` is not among the issuer's keys (fetched again at most once a minute)",
                kid.escape_debug()
            ),
            None => format!("the token names no key (`kid`) and the issuer has no single {alg} key"),
        })
    }

    /// Fetches the metadata (once) and the key set, unless a fetch failed a moment ago.
    async fn refresh(&self, state: &mut State) -> Result<(), String> {
        if let Some((at, why)) = &state.failed {
            if at.elapsed() < RETRY_AFTER_FAILURE {
                return Err(why.clone());
            }
        }
        let result = self.fetch_keys(state).await;
        match &result {
            Ok(keys) => {
                state.keys = Some(keys.clone());
                state.fetched = Some(Instant::now());
                state.failed = None;
            }
            Err(why) => state.failed = Some((Instant::now(), why.clone())),
        }
        result.map(|_| ())
    }

    async fn fetch_keys(&self, state: &mut State) -> Result<Vec<Jwk>, String> {
        let metadata = self.metadata(state).await?;
        let uri = metadata.jwks_uri.ok_or_else(|| {
            format!(
                "the metadata of issuer `{}` gives no `jwks_uri`",
                self.issuer
            )
        })?;
        let doc = self
            .get(&uri)
            .await
            .map_err(|e| format!("cannot fetch the issuer's keys from {uri}: {e}"))?;
        jwt::key_set(&doc).map_err(|e| format!("the issuer's keys at {uri}: {e}"))
    }

    async fn metadata(&self, state: &mut State) -> Result<Metadata, String> {
        if let Some(m) = &state.metadata {
            return Ok(m.clone());
        }
        let mut tried = Vec::new();
        for url in discovery_urls(&self.issuer) {
            match self.get(&url).await {
                Ok(doc) => {
                    if doc["issuer"].as_str() != Some(self.issuer.as_str()) {
                        return Err(format!(
                            "the metadata at {url} is of issuer {}, not `{}` (RFC 8414 section 3.3)",
                            doc["issuer"], self.issuer
                        ));
                    }
                    let endpoint = |name: &str| doc[name].as_str().map(str::to_string);
                    let m = Metadata {
                        jwks_uri: endpoint("jwks_uri"),
                        introspection_endpoint: endpoint("introspection_endpoint"),
                    };
                    state.metadata = Some(m.clone());
                    return Ok(m);
                }
                Err(e) => tried.push(format!("{url}: {e}")),
            }
        }
        Err(format!(
            "cannot fetch the metadata of issuer `{}` ({})",
            self.issuer,
            tried.join("; ")
        ))
    }

    /// A JSON document, within the time and size bounds, from an allowed host.
    async fn get(&self, url: &str) -> Result<Value, String> {
        self.send(url, "GET", Vec::new(), None).await
    }

    async fn send(
        &self,
        url: &str,
        method: &str,
        mut headers: Vec<(String, String)>,
        body: Option<Vec<u8>>,
    ) -> Result<Value, String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
        if !crate::tools::http::check_host(&parsed, &self.allowed) {
            return Err(format!(
                "{} is not in the spec's allowed hosts (policy.network.allow_hosts)",
                parsed.host_str().unwrap_or_default()
            ));
        }
        headers.push(("Accept".into(), "application/json".into()));
        let req = HttpRequest {
            method: method.into(),
            url: url.into(),
            headers,
            body,
        };
        let opts = SendOptions {
            timeout: FETCH_TIMEOUT,
            max_bytes: MAX_DOCUMENT_BYTES,
            progress: None,
            on_chunk: None,
            reshape: None,
        };
        let resp = self
            .transport
            .send_live(Purpose::Tool("serve.auth"), &req, opts)
            .await
            .map_err(|e| e.to_string())?;
        if resp.truncated {
            return Err(format!(
                "the answer is larger than {MAX_DOCUMENT_BYTES} bytes"
            ));
        }
        if !(200..300).contains(&resp.status) {
            return Err(format!("HTTP {}", resp.status));
        }
        serde_json::from_slice::<Value>(&resp.body)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| "the answer is not a JSON object".into())
    }

    /// An opaque token, through the issuer's introspection endpoint (RFC 7662).
    pub(super) async fn introspect(
        &self,
        token: &str,
        client: Option<&(String, String)>,
        audience: &str,
        now_secs: i64,
    ) -> Result<Principal, String> {
        if let Some(known) = self.introspected.get(token) {
            return Ok(known);
        }
        let endpoint = {
            let mut state = self.state.lock().await;
            if state.metadata.is_none() {
                if let Some((at, why)) = &state.failed {
                    if at.elapsed() < RETRY_AFTER_FAILURE {
                        return Err(why.clone());
                    }
                }
            }
            let metadata = self.metadata(&mut state).await;
            if let Err(why) = &metadata {
                state.failed = Some((Instant::now(), why.clone()));
            }
            metadata?.introspection_endpoint
        };
        let (Some(endpoint), Some((id, secret))) = (endpoint, client) else {
            return Err("the token is not a JWT, and opaque tokens need the issuer's introspection endpoint and `serve.auth.client_id` and `client_secret`".into());
        };
        let enc = |s: &str| {
            percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
        };
        let basic = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            format!("{}:{}", enc(id), enc(secret)),
        );
        let headers = vec![
            ("Authorization".into(), format!("Basic {basic}")),
            (
                "Content-Type".into(),
                "application/x-www-form-urlencoded".into(),
            ),
        ];
        let body = format!("token={}&token_type_hint=access_token", enc(token)).into_bytes();
        let answer = self
            .send(&endpoint, "POST", headers, Some(body))
            .await
            .map_err(|e| format!("cannot introspect the token at {endpoint}: {e}"))?;
        if answer["active"] != Value::Bool(true) {
            return Err(
                "the issuer says the token is not active (expired, revoked or unknown)".into(),
            );
        }
        let principal = jwt::check_claims(&answer, &self.issuer, audience, now_secs, false)?;
        let exp = answer["exp"].as_i64();
        self.introspected.put(token, &principal, exp, now_secs);
        Ok(principal)
    }
}

/// Where an issuer's metadata may be, in the order the MCP authorization specification tries
/// them: RFC 8414's well-known URI, then OpenID Connect discovery inserted, then appended.
fn discovery_urls(issuer: &str) -> Vec<String> {
    let Ok(url) = url::Url::parse(issuer) else {
        return Vec::new();
    };
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    if path.is_empty() {
        return vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ];
    }
    vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_looked_for_where_the_specification_says() {
        assert_eq!(
            discovery_urls("https://login.example.com/"),
            [
                "https://login.example.com/.well-known/oauth-authorization-server",
                "https://login.example.com/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            discovery_urls("https://login.example.com/tenant1"),
            [
                "https://login.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://login.example.com/.well-known/openid-configuration/tenant1",
                "https://login.example.com/tenant1/.well-known/openid-configuration"
            ]
        );
    }
}
