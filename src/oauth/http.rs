//! The OAuth client's own HTTP: metadata, registration and token requests go to authorization
//! servers the MCP server named, never through the recording transport (a replay needs none of
//! them, and a fixture must hold no token). Every request is bounded in time and size, and
//! redirects are followed a few hops at most, so a broken authorization server is an error
//! naming it, never a hang.

use super::OAuthError;
use std::sync::OnceLock;
use std::time::Duration;

/// Largest body read from an authorization server: metadata and token responses are small.
pub(crate) const MAX_BODY: usize = 256 << 10;
/// Redirects a metadata GET follows before giving up.
const MAX_REDIRECTS: usize = 5;
const USER_AGENT: &str = concat!("toolrun/", env!("CARGO_PKG_VERSION"));

pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

fn client() -> Result<&'static reqwest::Client, OAuthError> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| OAuthError(format!("HTTP client: {e}")))
}

/// A GET of JSON metadata, following at most [`MAX_REDIRECTS`] redirects.
pub(crate) async fn get(url: &str, timeout: Duration) -> Result<Reply, OAuthError> {
    let mut at =
        url::Url::parse(url).map_err(|e| OAuthError(format!("{url} is not a URL: {e}")))?;
    for _ in 0..=MAX_REDIRECTS {
        let req = client()?
            .get(at.clone())
            .header("Accept", "application/json")
            .header("User-Agent", USER_AGENT);
        let (status, location, body) = send(req, at.as_str(), timeout).await?;
        match (status, location) {
            (301 | 302 | 303 | 307 | 308, Some(to)) => {
                at = at
                    .join(&to)
                    .map_err(|e| OAuthError(format!("{at} redirected to an invalid URL: {e}")))?;
            }
            _ => return Ok(Reply { status, body }),
        }
    }
    Err(OAuthError(format!(
        "{url} redirected more than {MAX_REDIRECTS} times"
    )))
}

/// A form POST (token and registration requests are never redirected).
pub(crate) async fn post(
    url: &str,
    body: Body<'_>,
    basic: Option<(&str, &str)>,
    timeout: Duration,
) -> Result<Reply, OAuthError> {
    let mut req = client()?
        .post(url)
        .header("Accept", "application/json")
        .header("User-Agent", USER_AGENT);
    req = match body {
        Body::Form(pairs) => req
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form(pairs)),
        Body::Json(v) => req
            .header("Content-Type", "application/json")
            .body(v.to_string()),
    };
    if let Some((id, secret)) = basic {
        req = req.header("Authorization", basic_header(id, secret));
    }
    let (status, _, body) = send(req, url, timeout).await?;
    Ok(Reply { status, body })
}

pub(crate) enum Body<'a> {
    Form(&'a [(&'a str, String)]),
    Json(&'a serde_json::Value),
}

/// `application/x-www-form-urlencoded`, as OAuth 2.1 §2.4.1 asks for client credentials too.
pub(crate) fn form(pairs: &[(&str, String)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())))
        .finish()
}

/// `client_secret_basic`: id and secret each form-encoded, then joined (RFC 6749 §2.3.1).
pub(crate) fn basic_header(id: &str, secret: &str) -> String {
    use base64::Engine as _;
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", enc(id), enc(secret));
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

async fn send(
    req: reqwest::RequestBuilder,
    url: &str,
    timeout: Duration,
) -> Result<(u16, Option<String>, Vec<u8>), OAuthError> {
    let work = async {
        let mut resp = req.send().await.map_err(|e| describe(url, &e))?;
        let status = resp.status().as_u16();
        let location = resp
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| describe(url, &e))? {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(OAuthError(format!(
                    "{url} answered with more than {} KiB",
                    MAX_BODY >> 10
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, location, body))
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(OAuthError(format!(
            "{url} did not answer within {:.0}s",
            timeout.as_secs_f64()
        ))),
    }
}

fn describe(url: &str, e: &reqwest::Error) -> OAuthError {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message = s.to_string();
        source = s.source();
    }
    OAuthError(format!("cannot reach {url}: {message}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn basic_credentials_are_form_encoded_before_base64() {
        assert_eq!(super::basic_header("a b", "c:d"), "Basic YStiOmMlM0Fk");
    }
}
