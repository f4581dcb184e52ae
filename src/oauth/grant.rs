//! Talking to the token and registration endpoints: client registration (dynamic, RFC 7591),
//! client authentication (`client_secret_basic`, `client_secret_post`, `private_key_jwt` with
//! an RFC 7523 assertion, or `none`), and the token requests of each grant.

use super::discover::{self, Server};
use super::http::{self, Body};
use super::OAuthError;
use base64::Engine as _;
use serde_json::{json, Value};
use std::time::Duration;

/// Who the client is at one authorization server, and how it proves it.
#[derive(Clone, Debug)]
pub(crate) struct ClientAuth {
    pub(crate) client_id: String,
    pub(crate) secret: Option<String>,
    /// PEM PKCS#8, for `private_key_jwt`.
    pub(crate) private_key: Option<String>,
    /// `token_endpoint_auth_method`.
    pub(crate) method: String,
}

/// The method for a client with a secret: what the server lists, `client_secret_basic` first
/// (RFC 8414's default when it lists none).
pub(crate) fn secret_method(server: &Server) -> String {
    let listed = &server.token_auth_methods;
    if listed.is_empty() || listed.iter().any(|m| m == "client_secret_basic") {
        return "client_secret_basic".into();
    }
    if listed.iter().any(|m| m == "client_secret_post") {
        return "client_secret_post".into();
    }
    "client_secret_basic".into()
}

/// Dynamic client registration: a public client when the server accepts one, else one with a
/// secret, redirected to `redirect_uri`.
pub(crate) async fn register(
    server: &Server,
    endpoint: &str,
    redirect_uri: &str,
    timeout: Duration,
) -> Result<ClientAuth, OAuthError> {
    let listed = &server.token_auth_methods;
    let method = if listed.iter().any(|m| m == "none") || listed.is_empty() {
        "none".to_string()
    } else {
        secret_method(server)
    };
    let body = json!({
        "client_name": "toolrun",
        // A program on the person's machine, redirected to a loopback address (SEP-837).
        "application_type": "native",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
    });
    let reply = http::post(endpoint, Body::Json(&body), None, timeout).await?;
    if !reply.ok() {
        return Err(OAuthError(format!(
            "the authorization server {} refused to register toolrun as a client at {endpoint} (HTTP {}): {}",
            server.issuer,
            reply.status,
            error_text(&reply.body)
        )));
    }
    let doc = discover::json(endpoint, &reply.body)?;
    let client_id = discover::string(&doc, "client_id").ok_or_else(|| {
        OAuthError(format!(
            "the registration at {endpoint} answered without a `client_id`"
        ))
    })?;
    let secret = discover::string(&doc, "client_secret");
    let method =
        discover::string(&doc, "token_endpoint_auth_method").unwrap_or_else(|| match secret {
            Some(_) => secret_method(server),
            None => "none".into(),
        });
    Ok(ClientAuth {
        client_id,
        secret,
        private_key: None,
        method,
    })
}

/// A token response (RFC 6749 §5.1).
#[derive(Debug)]
pub(crate) struct Tokens {
    pub(crate) access_token: String,
    pub(crate) refresh_token: Option<String>,
    pub(crate) expires_in: Option<u64>,
    pub(crate) scope: Option<String>,
}

/// A request to the token endpoint with the client's authentication added.
pub(crate) async fn token_request(
    server: &Server,
    client: &ClientAuth,
    mut form: Vec<(&str, String)>,
    timeout: Duration,
) -> Result<Tokens, OAuthError> {
    let endpoint = &server.token_endpoint;
    let mut basic = None;
    match client.method.as_str() {
        "client_secret_basic" => {
            let secret = client.secret.as_deref().unwrap_or_default();
            basic = Some((client.client_id.as_str(), secret));
        }
        "client_secret_post" => {
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_secret", client.secret.clone().unwrap_or_default()));
        }
        "private_key_jwt" => {
            let key = client.private_key.as_deref().unwrap_or_default();
            form.push(("client_id", client.client_id.clone()));
            form.push((
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into(),
            ));
            form.push((
                "client_assertion",
                assertion(key, &client.client_id, &server.issuer)?,
            ));
        }
        _ => form.push(("client_id", client.client_id.clone())),
    }
    let reply = http::post(endpoint, Body::Form(&form), basic, timeout).await?;
    if !reply.ok() {
        return Err(OAuthError(format!(
            "the authorization server {} refused the token request at {endpoint} (HTTP {}): {}",
            server.issuer,
            reply.status,
            error_text(&reply.body)
        )));
    }
    let doc = discover::json(endpoint, &reply.body)?;
    let access_token = discover::string(&doc, "access_token").filter(|t| !t.is_empty()).ok_or_else(|| {
        OAuthError(format!(
            "the authorization server {} answered the token request at {endpoint} without an `access_token`",
            server.issuer
        ))
    })?;
    if let Some(kind) = discover::string(&doc, "token_type") {
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(OAuthError(format!(
                "the authorization server {} issued a `{kind}` token; toolrun sends Bearer tokens only",
                server.issuer
            )));
        }
    }
    Ok(Tokens {
        access_token,
        refresh_token: discover::string(&doc, "refresh_token"),
        expires_in: doc.get("expires_in").and_then(Value::as_u64),
        scope: discover::string(&doc, "scope"),
    })
}

/// The OAuth error in a refusal, never more than a line of it.
fn error_text(body: &[u8]) -> String {
    let doc: Value = serde_json::from_slice(body).unwrap_or_default();
    let text = match (
        doc.get("error").and_then(Value::as_str),
        doc.get("error_description").and_then(Value::as_str),
    ) {
        (Some(e), Some(d)) => format!("{e}: {d}"),
        (Some(e), None) => e.to_string(),
        _ => String::from_utf8_lossy(body).chars().take(200).collect(),
    };
    text.chars().filter(|c| !c.is_control()).take(300).collect()
}

/// An RFC 7523 client assertion: `iss` and `sub` the client, `aud` the issuer, valid for five
/// minutes, signed with ES256 (an EC P-256 key) or RS256 (an RSA key).
pub(crate) fn assertion(pem: &str, client_id: &str, audience: &str) -> Result<String, OAuthError> {
    use ring::signature;
    let der = pem_der(pem)?;
    let rng = ring::rand::SystemRandom::new();
    let now = super::store::now();
    let claims = json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + 300,
        "jti": super::browser::random(16)?,
    });
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let sign_failed = || OAuthError("could not sign the client assertion".into());
    if let Ok(key) =
        signature::EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
    {
        let input = format!(
            "{}.{}",
            b64(br#"{"alg":"ES256","typ":"JWT"}"#),
            b64(claims.to_string().as_bytes())
        );
        let sig = key
            .sign(&rng, input.as_bytes())
            .map_err(|_| sign_failed())?;
        return Ok(format!("{input}.{}", b64(sig.as_ref())));
    }
    if let Ok(key) = signature::RsaKeyPair::from_pkcs8(&der) {
        let input = format!(
            "{}.{}",
            b64(br#"{"alg":"RS256","typ":"JWT"}"#),
            b64(claims.to_string().as_bytes())
        );
        let mut sig = vec![0; key.public().modulus_len()];
        key.sign(
            &signature::RSA_PKCS1_SHA256,
            &rng,
            input.as_bytes(),
            &mut sig,
        )
        .map_err(|_| sign_failed())?;
        return Ok(format!("{input}.{}", b64(&sig)));
    }
    Err(OAuthError(
        "`private_key` is not a PKCS#8 EC P-256 or RSA private key (`-----BEGIN PRIVATE KEY-----`)"
            .into(),
    ))
}

fn pem_der(pem: &str) -> Result<Vec<u8>, OAuthError> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----") && !l.is_empty())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|_| OAuthError("`private_key` is not a PEM key".into()))
}
