//! Discovery, as the MCP authorization spec orders it: the protected resource's metadata (RFC
//! 9728) from the `WWW-Authenticate` challenge's `resource_metadata`, else the well-known URIs
//! (path-based first, then the root); then its authorization server's metadata (RFC 8414 and
//! OpenID Connect Discovery, in the spec's order), whose `issuer` must be the one named.

use super::http;
use super::OAuthError;
use serde_json::Value;
use std::time::Duration;

/// What a 401 or 403 said (`WWW-Authenticate: Bearer ...`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Challenge {
    pub(crate) resource_metadata: Option<String>,
    pub(crate) scope: Option<String>,
    pub(crate) error: Option<String>,
}

impl Challenge {
    /// The `Bearer` challenge's parameters; other schemes are ignored.
    pub(crate) fn parse(header: Option<&str>) -> Challenge {
        let mut c = Challenge::default();
        let Some(text) = header else { return c };
        let Some(start) = text.to_ascii_lowercase().find("bearer") else {
            return c;
        };
        let mut rest = &text[start + "bearer".len()..];
        while let Some(eq) = rest.find('=') {
            let name = rest[..eq]
                .trim()
                .trim_start_matches(',')
                .trim()
                .to_ascii_lowercase();
            let after = rest[eq + 1..].trim_start();
            let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
                let mut value = String::new();
                let mut chars = quoted.char_indices();
                let mut end = quoted.len();
                while let Some((i, ch)) = chars.next() {
                    match ch {
                        '\\' => {
                            if let Some((_, n)) = chars.next() {
                                value.push(n);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        _ => value.push(ch),
                    }
                }
                (value, &quoted[end.min(quoted.len())..])
            } else {
                let end = after.find(',').unwrap_or(after.len());
                (after[..end].trim().to_string(), &after[end..])
            };
            match name.as_str() {
                "resource_metadata" => c.resource_metadata = Some(value),
                "scope" => c.scope = Some(value),
                "error" => c.error = Some(value),
                _ => {}
            }
            rest = tail;
        }
        c
    }

    pub(crate) fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The protected resource's metadata (RFC 9728).
#[derive(Clone, Debug)]
pub(crate) struct Resource {
    pub(crate) resource: String,
    pub(crate) authorization_servers: Vec<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
}

/// The authorization server's metadata (RFC 8414).
#[derive(Clone, Debug)]
pub(crate) struct Server {
    pub(crate) issuer: String,
    pub(crate) authorization_endpoint: Option<String>,
    pub(crate) token_endpoint: String,
    pub(crate) registration_endpoint: Option<String>,
    pub(crate) scopes_supported: Vec<String>,
    pub(crate) code_challenge_methods: Vec<String>,
    pub(crate) token_auth_methods: Vec<String>,
    pub(crate) cimd_supported: bool,
    pub(crate) iss_parameter_supported: bool,
}

/// The protected resource's metadata for the MCP endpoint `server_url`: from the challenge's
/// `resource_metadata`, else the well-known URIs. `None`: the server publishes none (a
/// 2025-03-26 server, whose own origin is its authorization server). Its `resource` must be
/// the endpoint or a parent of it on the same origin.
pub(crate) async fn resource(
    server_url: &str,
    challenge: &Challenge,
    timeout: Duration,
) -> Result<Option<Resource>, OAuthError> {
    let url = parse(server_url)?;
    let mut candidates = Vec::new();
    if let Some(named) = &challenge.resource_metadata {
        candidates.push(named.clone());
    }
    let path = url.path().trim_end_matches('/');
    let origin = url.origin().ascii_serialization();
    if !path.is_empty() {
        candidates.push(format!(
            "{origin}/.well-known/oauth-protected-resource{path}"
        ));
    }
    candidates.push(format!("{origin}/.well-known/oauth-protected-resource"));
    for candidate in candidates {
        let reply = http::get(&candidate, timeout).await?;
        if !reply.ok() {
            continue;
        }
        let doc = json(&candidate, &reply.body)?;
        let found = Resource {
            resource: string(&doc, "resource")
                .ok_or_else(|| malformed(&candidate, "no `resource`"))?,
            authorization_servers: strings(&doc, "authorization_servers").unwrap_or_default(),
            scopes_supported: strings(&doc, "scopes_supported"),
        };
        if !covers(&found.resource, &url) {
            return Err(OAuthError(format!(
                "the protected-resource metadata at {candidate} is for `{}`, not for this server ({server_url}): refusing to get a token for another resource",
                found.resource
            )));
        }
        if found.authorization_servers.is_empty() {
            return Err(malformed(&candidate, "no `authorization_servers`"));
        }
        return Ok(Some(found));
    }
    Ok(None)
}

/// `resource` names the endpoint `url` or a parent path of it on the same origin (RFC 9728 §3.3,
/// RFC 8707 §2: a resource may be named by a prefix of its URL).
fn covers(resource: &str, url: &url::Url) -> bool {
    let Ok(r) = url::Url::parse(resource) else {
        return false;
    };
    if r.origin() != url.origin() {
        return false;
    }
    let want = r.path().trim_end_matches('/');
    let have = url.path().trim_end_matches('/');
    have == want || have.starts_with(&format!("{want}/")) || want.is_empty()
}

/// The metadata of the authorization server `issuer`, from the first well-known URI that has
/// it, in the spec's order. `legacy`: a server without protected-resource metadata, whose
/// endpoints default to `/authorize`, `/token` and `/register` at its origin (2025-03-26).
pub(crate) async fn server(
    issuer: &str,
    legacy: bool,
    timeout: Duration,
) -> Result<Server, OAuthError> {
    let url = parse(issuer)?;
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let candidates = if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    };
    for candidate in &candidates {
        let reply = http::get(candidate, timeout).await?;
        if !reply.ok() {
            continue;
        }
        let doc = json(candidate, &reply.body)?;
        let named = string(&doc, "issuer").ok_or_else(|| malformed(candidate, "no `issuer`"))?;
        // A 2025-03-26 server's origin stands in for an issuer it never named.
        if !legacy && !same_issuer(&named, issuer) {
            return Err(OAuthError(format!(
                "the authorization server metadata at {candidate} names issuer `{named}`, not `{issuer}` (RFC 8414 §3.3): refusing it"
            )));
        }
        return server_of(candidate, &doc, named);
    }
    if legacy {
        return Ok(Server {
            issuer: origin.clone(),
            authorization_endpoint: Some(format!("{origin}/authorize")),
            token_endpoint: format!("{origin}/token"),
            registration_endpoint: Some(format!("{origin}/register")),
            scopes_supported: Vec::new(),
            code_challenge_methods: vec!["S256".into()],
            token_auth_methods: Vec::new(),
            cimd_supported: false,
            iss_parameter_supported: false,
        });
    }
    Err(OAuthError(format!(
        "the authorization server {issuer} publishes no metadata (tried {})",
        candidates.join(", ")
    )))
}

fn server_of(at: &str, doc: &Value, issuer: String) -> Result<Server, OAuthError> {
    let token_endpoint =
        string(doc, "token_endpoint").ok_or_else(|| malformed(at, "no `token_endpoint`"))?;
    Ok(Server {
        issuer,
        authorization_endpoint: string(doc, "authorization_endpoint"),
        token_endpoint,
        registration_endpoint: string(doc, "registration_endpoint"),
        scopes_supported: strings(doc, "scopes_supported").unwrap_or_default(),
        code_challenge_methods: strings(doc, "code_challenge_methods_supported")
            .unwrap_or_default(),
        token_auth_methods: strings(doc, "token_endpoint_auth_methods_supported")
            .unwrap_or_default(),
        cimd_supported: doc.get("client_id_metadata_document_supported")
            == Some(&Value::Bool(true)),
        iss_parameter_supported: doc.get("authorization_response_iss_parameter_supported")
            == Some(&Value::Bool(true)),
    })
}

/// Issuers compare as strings (RFC 8414 §3.3), but for a trailing slash, which URL libraries
/// add and remove as they please.
pub(crate) fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

fn parse(url: &str) -> Result<url::Url, OAuthError> {
    url::Url::parse(url).map_err(|e| OAuthError(format!("`{url}` is not a URL: {e}")))
}

pub(crate) fn json(at: &str, body: &[u8]) -> Result<Value, OAuthError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(malformed(at, "not a JSON object")),
    }
}

fn malformed(at: &str, what: &str) -> OAuthError {
    OAuthError(format!("{at} answered with malformed metadata: {what}"))
}

pub(crate) fn string(doc: &Value, key: &str) -> Option<String> {
    doc.get(key).and_then(Value::as_str).map(str::to_string)
}

fn strings(doc: &Value, key: &str) -> Option<Vec<String>> {
    doc.get(key).and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_challenges_are_read_with_quotes_and_commas() {
        let c = Challenge::parse(Some(
            r#"Bearer error="insufficient_scope", scope="a b", resource_metadata="https://x/.well-known/oauth-protected-resource/mcp", error_description="no, \"really\"""#,
        ));
        assert_eq!(c.scope.as_deref(), Some("a b"));
        assert!(c.insufficient_scope());
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://x/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            Challenge::parse(Some("Basic realm=x")),
            Challenge::default()
        );
    }

    #[test]
    fn a_resource_covers_its_own_url_and_the_paths_below_it_only() {
        let u = url::Url::parse("https://a.example/v1/mcp").unwrap();
        assert!(covers("https://a.example/v1/mcp", &u));
        assert!(covers("https://a.example/", &u));
        assert!(covers("https://a.example/v1", &u));
        assert!(!covers("https://a.example/v2", &u));
        assert!(!covers("https://b.example/v1/mcp", &u));
        assert!(!covers("https://a.example/v1/mc", &u));
    }
}
