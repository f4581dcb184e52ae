//! `serve --http` as an OAuth 2.1 resource server (`serve.auth`), at the HTTP layer so that it
//! covers every MCP revision served there: protected-resource metadata (RFC 9728) at its
//! well-known path, a bearer token on every request checked (a JWT against the issuer's keys, an
//! opaque token through introspection), 401 with a `WWW-Authenticate` challenge naming the
//! metadata, and 403 `insufficient_scope` for a call the token's scopes do not cover. The
//! verified [`Principal`] rides on the request (its extensions) to the handler, which lists only
//! the tools it may call and names its subject (never the token) in events, recordings and
//! spans.

mod cache;
mod issuer;
mod jwt;

pub(crate) use jwt::Principal;

use crate::registry::{Registry, ServeAuth};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::{Response, StatusCode};
use serde_json::{json, Value};
use std::convert::Infallible;

type Body = BoxBody<Bytes, Infallible>;

const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

pub(crate) struct Auth {
    config: ServeAuth,
    issuer: issuer::Issuer,
    /// `client_id` and `client_secret`, rendered from the secrets, for introspection.
    client: Option<(String, String)>,
    /// Where the metadata is served, and its URL as clients know it (from the audience).
    metadata_path: String,
    metadata_url: String,
    metadata: Bytes,
    /// The scopes of each tool that has any (of `tools: "*"` servers too, listed by now).
    tool_scopes: std::collections::HashMap<String, Vec<String>>,
}

impl Auth {
    /// `serve.auth` of the spec, its credentials rendered; `None` without it.
    pub(crate) async fn new(
        registry: &Registry,
        setup: &crate::setup::Setup,
    ) -> Result<Option<Auth>, String> {
        let Some(config) = registry.serve_auth.clone() else {
            return Ok(None);
        };
        let client = match (&config.client_id, &config.client_secret) {
            (Some(id), Some(secret)) => Some((
                render(registry, setup, id).await?,
                render(registry, setup, secret).await?,
            )),
            _ => None,
        };
        let audience =
            url::Url::parse(&config.audience).map_err(|e| format!("`serve.auth.audience`: {e}"))?;
        let suffix = audience.path().trim_end_matches('/');
        let metadata_path = format!("{WELL_KNOWN}{suffix}");
        let metadata_url = format!("{}{metadata_path}", audience.origin().ascii_serialization());
        let mut scopes: Vec<&String> = config.scopes.iter().collect();
        for tool in registry.callable_tools() {
            scopes.extend(tool.scopes.iter().filter(|s| !config.scopes.contains(s)));
        }
        scopes.sort();
        scopes.dedup();
        let metadata = json!({
            "resource": config.audience,
            "authorization_servers": [config.issuer],
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": registry.name,
        });
        let allowed = crate::tools::http::allowed_hosts(registry).to_vec();
        let tool_scopes = (registry.all_tools())
            .filter(|t| !t.scopes.is_empty())
            .map(|t| (t.name.clone(), t.scopes.clone()))
            .collect();
        Ok(Some(Auth {
            issuer: issuer::Issuer::new(&config.issuer, allowed),
            client,
            metadata_path,
            metadata_url,
            metadata: Bytes::from(metadata.to_string()),
            tool_scopes,
            config,
        }))
    }

    /// The protected-resource metadata, when `path` is where it is published (with the
    /// resource's path, and at the root for clients that look there).
    pub(crate) fn metadata(&self, path: &str) -> Option<Response<Body>> {
        if path != self.metadata_path && path != WELL_KNOWN {
            return None;
        }
        let mut resp = Response::new(Full::new(self.metadata.clone()).boxed());
        let headers = resp.headers_mut();
        headers.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        // Browser-based clients read it from another origin; it holds nothing secret.
        headers.insert(
            hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN,
            hyper::header::HeaderValue::from_static("*"),
        );
        Some(resp)
    }

    /// The request's token, verified; else the 401 to answer.
    pub(crate) async fn authenticate(
        &self,
        headers: &hyper::HeaderMap,
    ) -> Result<Principal, Response<Body>> {
        let given = headers
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(super::http::bearer);
        let Some(token) = given else {
            let why = format!(
                "send `Authorization: Bearer <token>` with an access token of {} (see {})",
                self.config.issuer, self.metadata_url
            );
            return Err(self.challenge(StatusCode::UNAUTHORIZED, None, &why, &self.config.scopes));
        };
        self.verify(token).await.map_err(|why| {
            let said = format!("the access token is refused: {why}");
            self.challenge(
                StatusCode::UNAUTHORIZED,
                Some("invalid_token"),
                &said,
                &self.config.scopes,
            )
        })
    }

    async fn verify(&self, token: &str) -> Result<Principal, String> {
        if token.len() > jwt::MAX_TOKEN_BYTES {
            return Err(format!("it is longer than {} bytes", jwt::MAX_TOKEN_BYTES));
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default();
        let Some(parsed) = jwt::parse(token)? else {
            let client = self.client.as_ref();
            return (self.issuer)
                .introspect(token, client, &self.config.audience, now)
                .await;
        };
        jwt::check_alg(&parsed.alg)?;
        let key = self.issuer.key(parsed.kid.as_deref(), &parsed.alg).await?;
        jwt::verify(&parsed, &key)?;
        jwt::check_claims(
            &parsed.claims,
            &self.issuer.issuer,
            &self.config.audience,
            now,
            true,
        )
    }

    /// 403 `insufficient_scope` for a request the token may not make: any request without
    /// `serve.auth.scopes`, or a `tools/call` (alone or in a batch) of a tool whose own scopes
    /// it lacks. A call of a tool this server does not have is left to the handler's answer.
    pub(crate) fn refuse(&self, principal: &Principal, body: &[u8]) -> Option<Response<Body>> {
        let mut needed = self.config.scopes.clone();
        let mut tools = Vec::new();
        let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let messages = match &parsed {
            Value::Array(list) => list.iter().collect(),
            one => vec![one],
        };
        for m in messages {
            if m["method"] != "tools/call" {
                continue;
            }
            let name = m["params"]["name"].as_str().unwrap_or_default();
            let Some((name, scopes)) = self.tool_scopes.get_key_value(name) else {
                continue;
            };
            if !principal.has_all(scopes) {
                tools.push(name.as_str());
            }
            for s in scopes {
                if !needed.contains(s) {
                    needed.push(s.clone());
                }
            }
        }
        if principal.has_all(&self.config.scopes) && tools.is_empty() {
            return None;
        }
        let why = match tools.as_slice() {
            [] => format!("the token lacks scope {}", list(&self.config.scopes)),
            _ => format!(
                "the token's scopes do not cover tool {}: it needs {}",
                tools
                    .iter()
                    .map(|t| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                list(&needed)
            ),
        };
        Some(self.challenge(
            StatusCode::FORBIDDEN,
            Some("insufficient_scope"),
            &why,
            &needed,
        ))
    }

    /// 403 for a request of a session another subject opened.
    pub(crate) fn foreign(
        &self,
        owner: Option<&str>,
        principal: &Principal,
    ) -> Option<Response<Body>> {
        if owner.is_none_or(|o| o == principal.subject) {
            return None;
        }
        let why =
            "the session was opened with another subject's token; start a session of your own";
        let mut resp = self.challenge(StatusCode::FORBIDDEN, None, why, &[]);
        resp.headers_mut().remove(hyper::header::WWW_AUTHENTICATE);
        Some(resp)
    }

    /// A refusal with its `WWW-Authenticate` challenge (RFC 6750 section 3, RFC 9728 section 5.1).
    fn challenge(
        &self,
        status: StatusCode,
        error: Option<&str>,
        why: &str,
        scopes: &[String],
    ) -> Response<Body> {
        let mut params = vec![format!(
            "resource_metadata=\"{}\"",
            quotable(&self.metadata_url)
        )];
        if !scopes.is_empty() {
            params.push(format!("scope=\"{}\"", quotable(&scopes.join(" "))));
        }
        if let Some(e) = error {
            params.push(format!("error=\"{e}\""));
            params.push(format!("error_description=\"{}\"", quotable(why)));
        }
        let value = format!("Bearer {}", params.join(", "));
        let word = if status == StatusCode::FORBIDDEN {
            "forbidden"
        } else {
            "unauthorized"
        };
        let mut resp = Response::new(Full::new(Bytes::from(format!("{word}: {why}\n"))).boxed());
        *resp.status_mut() = status;
        let headers = resp.headers_mut();
        headers.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if let Ok(v) = hyper::header::HeaderValue::from_str(&value) {
            headers.insert(hyper::header::WWW_AUTHENTICATE, v);
        }
        resp
    }
}

fn list(scopes: &[String]) -> String {
    scopes
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Text for a quoted challenge parameter: RFC 6750 allows neither `"` nor `\` nor controls.
fn quotable(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' | '\\' => '\'',
            c if (' '..='~').contains(&c) => c,
            _ => '?',
        })
        .collect()
}

async fn render(
    registry: &Registry,
    setup: &crate::setup::Setup,
    id: &crate::templates::TemplateId,
) -> Result<String, String> {
    let named = registry.templates.secrets_named(std::iter::once(id));
    let data = json!({ "secrets": setup.secrets.as_json_of(&|n| named.iter().any(|s| s == n)) });
    let ctx = crate::templates::Ctx::new(&data);
    registry
        .templates
        .render_text(id, &ctx)
        .await
        .map_err(|e| format!("`serve.auth`'s client credentials: {e}"))
}
