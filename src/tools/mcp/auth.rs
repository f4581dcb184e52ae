//! The streamable-HTTP transport's hook into the OAuth client (`crate::oauth`), for an entry
//! with `auth: { oauth: ... }`: what goes live carries the server's bearer token, and a 401 (or
//! a 403 asking for more scope) gets a new token before the request goes again, a few times at
//! most. Only live traffic passes here: a recording holds the request without its token and
//! the response the token got, so a replay needs none.

use super::exchange::Rpc;
use crate::net::{HttpRequest, HttpResponse, NetError, Purpose, SendOptions};
use crate::oauth::{self, discover::Challenge};
use crate::redact::Redactor;
use crate::registry::oauth::OAuthConfig;

/// New tokens tried for one request: a server that keeps refusing (403 `insufficient_scope`
/// for a scope it never grants) ends in its refusal, not in a loop of logins.
const MAX_AUTHORIZATIONS: usize = 3;

/// The token last masked for a server: masking is set up once per token.
#[derive(Default)]
struct Masked(std::sync::Mutex<Option<String>>);

impl Rpc<'_, '_> {
    /// Sends `req` live, with the server's token when its entry uses OAuth.
    pub(super) async fn send_live_authorized(
        &self,
        req: &HttpRequest,
        opts: SendOptions<'_>,
    ) -> Result<HttpResponse, NetError> {
        let transport = self.env.transport;
        let purpose = Purpose::Mcp(&self.server.name);
        let Some(config) = &self.server.oauth else {
            return transport.send_live(purpose, req, opts).await;
        };
        let target = self.oauth_target(config).await?;
        let session = self.oauth_session();
        let mut token = session.bearer(&target).await;
        let mut tried = 0;
        loop {
            let sent = self.with_token(req, token.as_deref());
            let resp = transport.send_live(purpose, &sent, opts).await?;
            let challenge = Challenge::parse(resp.header("www-authenticate"));
            let refused = match resp.status {
                401 => true,
                403 => challenge.insufficient_scope(),
                _ => false,
            };
            if !refused || tried == MAX_AUTHORIZATIONS {
                return Ok(resp);
            }
            tried += 1;
            let got = session
                .authorize(&target, &challenge, token.as_deref())
                .await
                .map_err(|e| NetError::Io(format!("no OAuth token: {e}")))?;
            if let Some(refresh) = &got.refresh_token {
                self.mask(refresh);
            }
            token = Some(got.access_token);
        }
    }

    /// `req` with the token held now, for what goes live unrecorded (a session's own stream,
    /// its end, a cancellation): never a new login for those.
    pub(super) async fn authorized_quietly(&self, req: &HttpRequest) -> HttpRequest {
        let Some(config) = &self.server.oauth else {
            return req.clone();
        };
        let Ok(target) = self.oauth_target(config).await else {
            return req.clone();
        };
        let token = self.oauth_session().bearer(&target).await;
        self.with_token(req, token.as_deref())
    }

    fn oauth_session(&self) -> std::sync::Arc<oauth::Session> {
        // Shared by a gateway's client sessions: one login serves them all.
        (self.env.transport).shared::<oauth::Session>(&format!("oauth {}", self.server.name))
    }

    fn with_token(&self, req: &HttpRequest, token: Option<&str>) -> HttpRequest {
        let mut sent = req.clone();
        if let Some(token) = token {
            self.mask(token);
            sent.headers
                .retain(|(k, _)| !k.eq_ignore_ascii_case("authorization"));
            sent.headers
                .push(("Authorization".into(), format!("Bearer {token}")));
        }
        sent
    }

    /// A server that echoes its token hands it to no one (see `Transport::mask_with`).
    fn mask(&self, token: &str) {
        let key = format!("oauth masked {}", self.server.name);
        let masked = self.env.transport.session::<Masked>(&key);
        let Ok(mut last) = masked.0.lock() else {
            return;
        };
        if last.as_deref() == Some(token) {
            return;
        }
        *last = Some(token.to_string());
        let name = format!("the OAuth token of MCP server `{}`", self.server.name);
        (self.env.transport).mask_with(&Redactor::named([(name, token.to_string())]));
    }

    /// The OAuth client of this server, its credentials rendered from the run's secrets.
    async fn oauth_target<'c>(&self, config: &'c OAuthConfig) -> Result<oauth::Target<'c>, NetError>
    where
        Self: 'c,
    {
        let named = [
            ("client_id", &config.client_id),
            ("client_secret", &config.client_secret),
            ("private_key", &config.private_key),
        ];
        let list: Vec<(String, crate::templates::TemplateId)> = named
            .iter()
            .filter_map(|(k, id)| id.as_ref().map(|id| (k.to_string(), id.clone())))
            .collect();
        let mut values = std::collections::HashMap::new();
        for (name, value) in self.render_with_secrets(&list).await {
            let value = value.map_err(|e| {
                NetError::Io(format!(
                    "could not build `auth.oauth.{name}` of MCP server `{}`: {e}",
                    self.server.name
                ))
            })?;
            values.insert(name.clone(), value);
        }
        Ok(oauth::Target {
            name: &self.server.name,
            url: &self.server.url,
            config,
            client_id: values.remove("client_id").filter(|v| !v.is_empty()),
            client_secret: values.remove("client_secret").filter(|v| !v.is_empty()),
            private_key: values.remove("private_key").filter(|v| !v.is_empty()),
            timeout: self.server.timeout,
            login: oauth::consent::mode(),
            spec: self.env.registry.spec_path.display().to_string(),
            allow_hosts: &self.env.registry.policy.allow_hosts,
        })
    }
}

/// `toolrun auth login`: a new token for `server` now, whatever is stored: a person's login
/// in the browser (whether or not there is a terminal: they asked for it), or the client's own
/// credentials. The server is asked once without a token, for its challenge.
pub(crate) async fn login(
    server: &crate::registry::McpServer,
    env: &crate::tools::ToolEnv<'_>,
) -> Result<oauth::store::Token, String> {
    let Some(config) = &server.oauth else {
        return Err(format!(
            "MCP server `{}` has no `auth: {{ oauth: ... }}`: there is nothing to log in to",
            server.name
        ));
    };
    super::check_server_host(server, env).map_err(|e| e.message)?;
    let rpc = Rpc {
        server,
        env,
        conn: None,
        timeout: server.timeout,
    };
    let mut target = rpc.oauth_target(config).await.map_err(|e| e.to_string())?;
    target.login = oauth::consent::Login::Yes;
    let init = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": super::initialize_params(super::PROTOCOL) });
    let req = rpc
        .build("POST", Some(&init))
        .await
        .map_err(|e| e.message)?;
    let opts = SendOptions {
        timeout: server.timeout,
        max_bytes: 64 << 10,
        progress: None,
        on_chunk: None,
        reshape: None,
    };
    let probe = (env.transport)
        .send_live(Purpose::Mcp(&server.name), &req, opts)
        .await
        .map_err(|e| rpc.net_error("initialize", e).message)?;
    let challenge = match probe.status {
        401 | 403 => Challenge::parse(probe.header("www-authenticate")),
        _ => Challenge::default(),
    };
    rpc.oauth_session()
        .authorize(&target, &challenge, None)
        .await
        .map_err(|e| e.to_string())
}
