//! An OAuth 2.1 client for remote MCP servers, as the MCP authorization spec asks of one: on a
//! 401 it discovers the server's protected-resource metadata and its authorization server's
//! metadata (`discover`), registers or names its client (pre-registered, a client ID metadata
//! document, or dynamic registration, in that order), and gets a token with PKCE (S256 only)
//! and the RFC 8707 `resource` parameter, through a person's login in the browser (`browser`)
//! or the client's own credentials (`grant: client_credentials`). Tokens are kept per issuer,
//! resource and client in one private file (`store`) and refreshed when they expire.
//!
//! Nothing here goes through the recording transport: a fixture never holds a token, and a
//! replay never needs one.

pub(crate) mod browser;
pub(crate) mod consent;
pub(crate) mod discover;
pub(crate) mod grant;
mod http;
pub(crate) mod store;

use crate::registry::oauth::{Grant, OAuthConfig};
use discover::{Challenge, Server};
use grant::ClientAuth;
use std::time::Duration;
use store::Token;

/// Why no token could be had; the text names the server at fault and holds no credential.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OAuthError(pub(crate) String);

impl std::fmt::Display for OAuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One MCP server's OAuth client, with its credentials rendered from the run's secrets.
pub(crate) struct Target<'a> {
    /// The entry's name, for messages.
    pub(crate) name: &'a str,
    /// The MCP endpoint.
    pub(crate) url: &'a str,
    pub(crate) config: &'a OAuthConfig,
    pub(crate) client_id: Option<String>,
    pub(crate) client_secret: Option<String>,
    pub(crate) private_key: Option<String>,
    /// Bounds each request to an authorization server.
    pub(crate) timeout: Duration,
    /// Whether a person's login may start now: asked for, asked first, or never.
    pub(crate) login: consent::Login,
    /// The spec's path, for the command that logs in.
    pub(crate) spec: String,
    /// `policy.network.allow_hosts`; empty: the spec has no allow list.
    pub(crate) allow_hosts: &'a [crate::registry::HostRule],
}

impl Target<'_> {
    /// An authorization server is found at run time, so its hosts are checked then against the
    /// spec's allow list: its credentials must not go to a host the spec never allowed.
    fn check_host(&self, url: &str, what: &str) -> Result<(), OAuthError> {
        if self.allow_hosts.is_empty() {
            return Ok(());
        }
        let parsed = url::Url::parse(url)
            .map_err(|e| OAuthError(format!("the {what} `{url}` is not a URL: {e}")))?;
        let host = parsed.host_str().unwrap_or_default();
        let port = parsed.port_or_known_default().unwrap_or(0);
        if self.allow_hosts.iter().any(|r| r.matches(host, port)) {
            return Ok(());
        }
        let named = match parsed.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        Err(OAuthError(format!(
            "refused to contact {named}: the {what} of MCP server `{}` ({url}) is not in the spec's allowed hosts (policy.network.allow_hosts); add \"{named}\" there to let the OAuth client use it",
            self.name
        )))
    }
}

/// The token one server's requests carry, for as long as the transport lives (shared by a
/// gateway's sessions): loaded from the store on first use, replaced when the server refuses it.
#[derive(Default)]
pub(crate) struct Session {
    held: tokio::sync::Mutex<Held>,
}

#[derive(Default)]
struct Held {
    loaded: bool,
    token: Option<Token>,
}

impl Session {
    /// The access token to send now: the stored one, refreshed when it has expired.
    pub(crate) async fn bearer(&self, t: &Target<'_>) -> Option<String> {
        let mut held = self.held.lock().await;
        if !held.loaded {
            held.loaded = true;
            held.token = store::load().token(t.url, t.client_id.as_deref()).cloned();
        }
        if let Some(old) = held.token.clone().filter(Token::expired) {
            held.token = refresh(t, &old).await.ok();
        }
        held.token.as_ref().map(|t| t.access_token.clone())
    }

    /// The server refused `sent` (none: the request carried no token) with `challenge`: a new
    /// token, unless another request got one meanwhile.
    pub(crate) async fn authorize(
        &self,
        t: &Target<'_>,
        challenge: &Challenge,
        sent: Option<&str>,
    ) -> Result<Token, OAuthError> {
        let mut held = self.held.lock().await;
        if let Some(now) = &held.token {
            if Some(now.access_token.as_str()) != sent && !challenge.insufficient_scope() {
                return Ok(now.clone());
            }
        }
        let token = obtain(t, challenge, held.token.as_ref()).await?;
        if let Err(e) = store::update(|s| s.put_token(token.clone())) {
            eprintln!(
                "toolrun: warning: the token for MCP server `{}` is not kept for later runs: {e}",
                t.name
            );
        }
        held.token = Some(token.clone());
        Ok(token)
    }
}

/// Discovery, then a token by the entry's grant.
async fn obtain(
    t: &Target<'_>,
    challenge: &Challenge,
    previous: Option<&Token>,
) -> Result<Token, OAuthError> {
    // The challenge may name any URL: it is held to the allow list like the servers it leads to.
    if let Some(named) = &challenge.resource_metadata {
        t.check_host(named, "`resource_metadata` URL in the 401 challenge")?;
    }
    let prm = discover::resource(t.url, challenge, t.timeout).await?;
    let issuer = match &prm {
        Some(p) => p.authorization_servers[0].clone(),
        None => origin(t.url)?,
    };
    t.check_host(&issuer, "authorization server")?;
    let server = discover::server(&issuer, prm.is_none(), t.timeout).await?;
    let endpoints = [
        (Some(&server.token_endpoint), "token endpoint"),
        (
            server.authorization_endpoint.as_ref(),
            "authorization endpoint",
        ),
        (
            server.registration_endpoint.as_ref(),
            "registration endpoint",
        ),
    ];
    for (url, what) in endpoints {
        if let Some(url) = url {
            t.check_host(url, what)?;
        }
    }
    let resource = match &prm {
        Some(p) => p.resource.clone(),
        None => t.url.to_string(),
    };
    let scopes = scopes(t, challenge, prm.as_ref(), &server, previous);
    let request = Request {
        server: &server,
        resource,
        scopes,
    };
    match t.config.grant {
        Grant::ClientCredentials => client_credentials(t, &request).await,
        Grant::AuthorizationCode => {
            // A refresh token answers a 401 without a person; more scopes need their consent.
            let refreshable = previous.filter(|p| {
                p.refresh_token.is_some()
                    && !challenge.insufficient_scope()
                    && discover::same_issuer(&p.issuer, &server.issuer)
            });
            if let Some(p) = refreshable {
                if let Ok(token) = refresh(t, p).await {
                    return Ok(token);
                }
            }
            match &t.login {
                consent::Login::Yes => {}
                consent::Login::Ask => {
                    if !consent::ask(t.name, &server.issuer).await {
                        return Err(needs_login(t, "the login was declined"));
                    }
                }
                consent::Login::Never(why) => return Err(needs_login(t, why)),
            }
            login(t, &request).await
        }
    }
}

/// What a token is asked for.
struct Request<'a> {
    server: &'a Server,
    resource: String,
    scopes: Vec<String>,
}

impl Request<'_> {
    fn scope(&self) -> Option<String> {
        (!self.scopes.is_empty()).then(|| self.scopes.join(" "))
    }
}

/// The spec's `scopes:`, else the challenge's, else all the resource lists (none: no `scope`
/// at all). A step-up (403 `insufficient_scope`) adds the challenge's to those held, and
/// `offline_access` is asked for when the authorization server offers it (for a refresh token).
fn scopes(
    t: &Target<'_>,
    challenge: &Challenge,
    prm: Option<&discover::Resource>,
    server: &Server,
    previous: Option<&Token>,
) -> Vec<String> {
    let split = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let mut scopes: Vec<String> = if !t.config.scopes.is_empty() {
        t.config.scopes.clone()
    } else if let Some(s) = &challenge.scope {
        split(s)
    } else {
        prm.and_then(|p| p.scopes_supported.clone())
            .unwrap_or_default()
    };
    if challenge.insufficient_scope() {
        for s in previous
            .map(|p| split(&p.scope))
            .unwrap_or_default()
            .into_iter()
            .chain(challenge.scope.as_deref().map(split).unwrap_or_default())
        {
            if !scopes.contains(&s) {
                scopes.push(s);
            }
        }
    }
    let offline = "offline_access".to_string();
    if t.config.grant == Grant::AuthorizationCode
        && server.scopes_supported.contains(&offline)
        && !scopes.contains(&offline)
    {
        scopes.push(offline);
    }
    scopes
}

/// The authorization code grant: the person logs in in the browser, the redirect comes back
/// to 127.0.0.1, and the code is exchanged with its PKCE verifier.
async fn login(t: &Target<'_>, r: &Request<'_>) -> Result<Token, OAuthError> {
    let server = r.server;
    if !server.code_challenge_methods.iter().any(|m| m == "S256") {
        return Err(OAuthError(format!(
            "the authorization server {} does not advertise PKCE with S256 (`code_challenge_methods_supported`): toolrun does not log in without it",
            server.issuer
        )));
    }
    let endpoint = server.authorization_endpoint.as_deref().ok_or_else(|| {
        OAuthError(format!(
            "the authorization server {} names no `authorization_endpoint`",
            server.issuer
        ))
    })?;
    let callback = browser::Callback::open().await?;
    let client = client_for(t, server, &callback.redirect_uri).await?;
    let verifier = browser::random(48)?;
    let state = browser::random(24)?;
    let mut url = url::Url::parse(endpoint).map_err(|e| {
        OAuthError(format!(
            "the authorization endpoint `{endpoint}` is not a URL: {e}"
        ))
    })?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client.client_id)
            .append_pair("redirect_uri", &callback.redirect_uri)
            .append_pair("code_challenge", &browser::challenge(&verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("resource", &r.resource);
        if let Some(scope) = r.scope() {
            q.append_pair("scope", &scope);
        }
    }
    let redirect_uri = callback.redirect_uri.clone();
    browser::open(url.as_str(), t.name);
    let answer = callback.wait(&state).await?;
    check_iss(server, answer.iss.as_deref())?;
    let form = vec![
        ("grant_type", "authorization_code".to_string()),
        ("code", answer.code),
        ("redirect_uri", redirect_uri),
        ("code_verifier", verifier),
        ("resource", r.resource.clone()),
    ];
    let tokens = grant::token_request(server, &client, form, t.timeout).await?;
    Ok(token_of(t, r, &client, tokens, None))
}

/// RFC 9207: the authorization response names its issuer when the server says it will, and
/// a named issuer must be the one asked (else the response came from another server: mix-up),
/// compared as strings with no normalization at all (SEP-2468: not even a trailing slash).
fn check_iss(server: &Server, iss: Option<&str>) -> Result<(), OAuthError> {
    match iss {
        Some(iss) if iss != server.issuer => Err(OAuthError(format!(
            "the login's redirect names issuer `{iss}`, not `{}` (RFC 9207): refusing its code",
            server.issuer
        ))),
        None if server.iss_parameter_supported => Err(OAuthError(format!(
            "the login's redirect names no issuer, and {} says its redirects do (RFC 9207): refusing its code",
            server.issuer
        ))),
        _ => Ok(()),
    }
}

/// The client, in the spec's order: pre-registered (`client_id`), a client ID metadata
/// document (`client_metadata_url`, where the server accepts one), one registered before
/// with this issuer, else dynamic registration.
async fn client_for(
    t: &Target<'_>,
    server: &Server,
    redirect_uri: &str,
) -> Result<ClientAuth, OAuthError> {
    if let Some(client) = preregistered(t, server) {
        return Ok(client);
    }
    if let (true, Some(url)) = (server.cimd_supported, &t.config.client_metadata_url) {
        return Ok(ClientAuth {
            client_id: url.clone(),
            secret: None,
            private_key: None,
            method: "none".into(),
        });
    }
    if let Some(c) = store::load().client(&server.issuer) {
        return Ok(ClientAuth {
            client_id: c.client_id.clone(),
            secret: c.client_secret.clone(),
            private_key: None,
            method: c.auth_method.clone(),
        });
    }
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(OAuthError(format!(
            "the authorization server {} offers no dynamic registration{}: give `auth.oauth.client_id` (and `client_secret`) of a client registered there",
            server.issuer,
            if server.cimd_supported { " and the entry has no `client_metadata_url`" } else { "" },
        )));
    };
    let client = grant::register(server, endpoint, redirect_uri, t.timeout).await?;
    let kept = store::Client {
        issuer: server.issuer.clone(),
        client_id: client.client_id.clone(),
        client_secret: client.secret.clone(),
        auth_method: client.method.clone(),
    };
    if let Err(e) = store::update(|s| s.put_client(kept)) {
        eprintln!(
            "toolrun: warning: the client registered with {} is not kept: {e}",
            server.issuer
        );
    }
    Ok(client)
}

fn preregistered(t: &Target<'_>, server: &Server) -> Option<ClientAuth> {
    let id = t.client_id.clone()?;
    let method = if t.private_key.is_some() {
        "private_key_jwt".to_string()
    } else if t.client_secret.is_some() {
        grant::secret_method(server)
    } else {
        "none".to_string()
    };
    Some(ClientAuth {
        client_id: id,
        secret: t.client_secret.clone(),
        private_key: t.private_key.clone(),
        method,
    })
}

async fn client_credentials(t: &Target<'_>, r: &Request<'_>) -> Result<Token, OAuthError> {
    let client = preregistered(t, r.server).ok_or_else(|| {
        OAuthError(format!(
            "`grant: client_credentials` of MCP server `{}` needs `client_id`",
            t.name
        ))
    })?;
    let mut form = vec![
        ("grant_type", "client_credentials".to_string()),
        ("resource", r.resource.clone()),
    ];
    if let Some(scope) = r.scope() {
        form.push(("scope", scope));
    }
    let tokens = grant::token_request(r.server, &client, form, t.timeout).await?;
    Ok(token_of(t, r, &client, tokens, None))
}

/// A new access token for `old` from its refresh token.
async fn refresh(t: &Target<'_>, old: &Token) -> Result<Token, OAuthError> {
    let refresh_token = old
        .refresh_token
        .clone()
        .ok_or_else(|| OAuthError("no refresh token".into()))?;
    t.check_host(&old.token_endpoint, "token endpoint")?;
    if let Some(newer) = store::load().newer_than(old) {
        return Ok(newer.clone());
    }
    let server = Server {
        issuer: old.issuer.clone(),
        authorization_endpoint: None,
        token_endpoint: old.token_endpoint.clone(),
        registration_endpoint: None,
        scopes_supported: Vec::new(),
        code_challenge_methods: Vec::new(),
        token_auth_methods: vec![old.auth_method.clone()],
        cimd_supported: false,
        iss_parameter_supported: false,
    };
    let client = match preregistered(t, &server) {
        Some(c) => c,
        None => {
            let kept = store::load().client(&old.issuer).cloned();
            ClientAuth {
                client_id: old.client_id.clone(),
                secret: kept.and_then(|c| c.client_secret),
                private_key: None,
                method: old.auth_method.clone(),
            }
        }
    };
    let form = vec![
        ("grant_type", "refresh_token".to_string()),
        ("refresh_token", refresh_token),
        ("resource", old.resource.clone()),
    ];
    let tokens = grant::token_request(&server, &client, form, t.timeout).await?;
    let r = Request {
        server: &server,
        resource: old.resource.clone(),
        scopes: old.scope.split_whitespace().map(str::to_string).collect(),
    };
    let token = token_of(t, &r, &client, tokens, old.refresh_token.clone());
    if let Err(e) = store::update(|s| s.put_token(token.clone())) {
        eprintln!(
            "toolrun: warning: the refreshed token for MCP server `{}` is not kept: {e}",
            t.name
        );
    }
    Ok(token)
}

fn token_of(
    t: &Target<'_>,
    r: &Request<'_>,
    client: &ClientAuth,
    tokens: grant::Tokens,
    kept_refresh: Option<String>,
) -> Token {
    Token {
        issuer: r.server.issuer.clone(),
        resource: r.resource.clone(),
        client_id: client.client_id.clone(),
        access_token: tokens.access_token,
        refresh_token: tokens.refresh_token.or(kept_refresh),
        expires_at: tokens.expires_in.map(|s| store::now() + s),
        scope: tokens.scope.or_else(|| r.scope()).unwrap_or_default(),
        token_endpoint: r.server.token_endpoint.clone(),
        auth_method: client.method.clone(),
        server_url: t.url.to_string(),
    }
}

fn needs_login(t: &Target<'_>, why: &str) -> OAuthError {
    OAuthError(format!(
        "MCP server `{}` needs a person to log in (OAuth), and {why}, so no browser is opened: run `toolrun auth login {} {}` first, or for CI give its entry `auth: {{ oauth: {{ grant: client_credentials }} }}` with the client's own credentials",
        t.name, t.spec, t.name
    ))
}

fn origin(url: &str) -> Result<String, OAuthError> {
    url::Url::parse(url)
        .map(|u| u.origin().ascii_serialization())
        .map_err(|e| OAuthError(format!("`{url}` is not a URL: {e}")))
}
