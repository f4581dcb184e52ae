//! JWT access tokens (RFC 9068) as `serve.auth` takes them: signed by one of the issuer's
//! public keys (RS256, ES256 or EdDSA; `none` and every HMAC refused, so a public key can
//! never be used as a shared secret), with the exact issuer, this server's audience, and a
//! lifetime that holds now. Verified with `ring`, which rustls already brings.

use base64::Engine;
use ring::signature;
use serde_json::Value;

/// The largest token looked at; an access token is a few hundred bytes to a few kilobytes.
pub(super) const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Clocks of the issuer and this server may differ by this much.
const LEEWAY_SECS: i64 = 30;
/// The most keys kept of an issuer's key set.
const MAX_KEYS: usize = 64;

/// A token split into its parts, its signature not yet checked.
pub(super) struct Parsed {
    pub(super) alg: String,
    pub(super) kid: Option<String>,
    pub(super) claims: Value,
    signing_input: Vec<u8>,
    signature: Vec<u8>,
}

fn b64(part: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .ok()
}

/// `Ok(None)`: not a JWT at all (an opaque token, for introspection).
pub(super) fn parse(token: &str) -> Result<Option<Parsed>, String> {
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Ok(None);
    };
    let Some(header) = b64(h).and_then(|b| serde_json::from_slice::<Value>(&b).ok()) else {
        return Ok(None);
    };
    let alg = header["alg"].as_str().unwrap_or_default().to_string();
    let claims = b64(p)
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .filter(Value::is_object)
        .ok_or("the token's claims are not a JSON object")?;
    Ok(Some(Parsed {
        kid: header["kid"].as_str().map(str::to_string),
        signature: b64(s).ok_or("the token's signature is not base64url")?,
        signing_input: format!("{h}.{p}").into_bytes(),
        alg,
        claims,
    }))
}

/// The algorithms taken, and why the others are not.
pub(super) fn check_alg(alg: &str) -> Result<(), String> {
    match alg {
        "RS256" | "ES256" | "EdDSA" => Ok(()),
        "none" | "" => Err("the token is unsigned (`alg: none`); this server takes only tokens signed by the issuer's keys".into()),
        a if a.starts_with("HS") => Err(format!("the token is signed with `{a}`, a shared secret; this server takes only signatures by the issuer's public keys (RS256, ES256, EdDSA)")),
        a => Err(format!("the token's algorithm `{}` is not one this server takes (RS256, ES256, EdDSA)", a.escape_debug())),
    }
}

/// One public key of the issuer's JWKS.
#[derive(Clone, Debug)]
pub(super) struct Jwk {
    pub(super) kid: Option<String>,
    /// The key's `alg`, when it names one: it may then sign with that only.
    alg: Option<String>,
    key: Key,
}

#[derive(Clone, Debug)]
enum Key {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// The uncompressed point, `04 || x || y`.
    P256(Vec<u8>),
    Ed25519(Vec<u8>),
}

impl Jwk {
    fn alg_of_key(&self) -> &'static str {
        match self.key {
            Key::Rsa { .. } => "RS256",
            Key::P256(_) => "ES256",
            Key::Ed25519(_) => "EdDSA",
        }
    }

    /// Whether this key may verify a signature by `alg`.
    pub(super) fn fits(&self, alg: &str) -> bool {
        self.alg_of_key() == alg && self.alg.as_deref().is_none_or(|a| a == alg)
    }
}

/// The signing keys of a JWKS document that this server can use; others are skipped.
pub(super) fn key_set(doc: &Value) -> Result<Vec<Jwk>, String> {
    let keys = doc["keys"]
        .as_array()
        .ok_or("the key set has no `keys` list")?;
    Ok(keys.iter().filter_map(jwk).take(MAX_KEYS).collect())
}

fn jwk(k: &Value) -> Option<Jwk> {
    if k["use"].as_str().is_some_and(|u| u != "sig") {
        return None;
    }
    let field = |name: &str| k[name].as_str().and_then(b64);
    let key = match (k["kty"].as_str()?, k["crv"].as_str()) {
        ("RSA", _) => Key::Rsa {
            n: field("n")?,
            e: field("e")?,
        },
        ("EC", Some("P-256")) => {
            let (x, y) = (field("x")?, field("y")?);
            if x.len() != 32 || y.len() != 32 {
                return None;
            }
            Key::P256([&[4u8][..], &x, &y].concat())
        }
        ("OKP", Some("Ed25519")) => Key::Ed25519(field("x")?),
        _ => return None,
    };
    Some(Jwk {
        kid: k["kid"].as_str().map(str::to_string),
        alg: k["alg"].as_str().map(str::to_string),
        key,
    })
}

pub(super) fn verify(token: &Parsed, key: &Jwk) -> Result<(), String> {
    let (msg, sig) = (&token.signing_input[..], &token.signature[..]);
    let ok = match &key.key {
        Key::Rsa { n, e } => signature::RsaPublicKeyComponents { n, e }
            .verify(&signature::RSA_PKCS1_2048_8192_SHA256, msg, sig)
            .is_ok(),
        Key::P256(point) => {
            signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                .verify(msg, sig)
                .is_ok()
        }
        Key::Ed25519(x) => signature::UnparsedPublicKey::new(&signature::ED25519, x)
            .verify(msg, sig)
            .is_ok(),
    };
    if ok {
        return Ok(());
    }
    Err(format!(
        "the token's signature does not verify with the issuer's key{}",
        key.kid
            .as_deref()
            .map(|k| format!(" `{}`", k.escape_debug()))
            .unwrap_or_default()
    ))
}

/// Who a verified token speaks for, and what it may do.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Principal {
    /// `sub` (a client credentials token's is its client), else `client_id`.
    pub(crate) subject: String,
    pub(crate) scopes: Vec<String>,
}

impl Principal {
    pub(crate) fn has_all(&self, needed: &[String]) -> bool {
        needed.iter().all(|n| self.scopes.contains(n))
    }
}

/// The claims every token must satisfy, whether read from a JWT or from introspection.
pub(super) fn check_claims(
    claims: &Value,
    issuer: &str,
    audience: &str,
    now_secs: i64,
    need_exp: bool,
) -> Result<Principal, String> {
    match claims["iss"].as_str() {
        Some(iss) if iss == issuer => {}
        Some(iss) => {
            return Err(format!(
                "the token was issued by `{}`, not by `{issuer}`",
                iss.escape_debug()
            ))
        }
        None => {
            return Err(format!(
                "the token names no issuer (`iss`); this server takes tokens of `{issuer}`"
            ))
        }
    }
    let auds: Vec<&str> = match &claims["aud"] {
        Value::String(a) => vec![a.as_str()],
        Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !auds.contains(&audience) {
        let said = match auds.as_slice() {
            [] => "names no audience (`aud`)".to_string(),
            list => format!(
                "is for {}",
                list.iter()
                    .map(|a| format!("`{}`", a.escape_debug()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        return Err(format!("the token {said}, not for this server (`{audience}`); ask the issuer for a token with resource `{audience}`"));
    }
    match claims["exp"].as_i64() {
        Some(exp) if exp + LEEWAY_SECS < now_secs => {
            return Err(format!("the token expired {} s ago", now_secs - exp));
        }
        Some(_) => {}
        None if need_exp => return Err("the token has no expiry (`exp`)".into()),
        None => {}
    }
    if let Some(nbf) = claims["nbf"].as_i64() {
        if nbf - LEEWAY_SECS > now_secs {
            return Err(format!(
                "the token is not valid for another {} s (`nbf`)",
                nbf - now_secs
            ));
        }
    }
    let subject = claims["sub"]
        .as_str()
        .or_else(|| claims["client_id"].as_str())
        .ok_or("the token names no subject (`sub`) or client (`client_id`)")?;
    let scopes = match &claims["scope"] {
        Value::String(s) => s
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        _ => match &claims["scp"] {
            Value::Array(list) => list
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        },
    };
    Ok(Principal {
        subject: subject.to_string(),
        scopes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(extra: Value) -> Value {
        let mut c = json!({ "iss": "https://i/", "aud": "https://r/mcp", "exp": 1000, "sub": "alice", "scope": "a b" });
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            c[k] = v;
        }
        c
    }

    #[test]
    fn claims_are_held_to_issuer_audience_and_lifetime() {
        let ok = check_claims(
            &claims(json!({})),
            "https://i/",
            "https://r/mcp",
            1000,
            true,
        );
        assert_eq!(
            ok,
            Ok(Principal {
                subject: "alice".into(),
                scopes: vec!["a".into(), "b".into()]
            })
        );
        let refused = |c: Value, now: i64| {
            check_claims(&claims(c), "https://i/", "https://r/mcp", now, true)
                .err()
                .unwrap_or_default()
        };
        assert!(refused(json!({ "iss": "https://i" }), 1000).contains("issued by `https://i`"));
        assert!(refused(json!({ "aud": ["https://other/mcp"] }), 1000)
            .contains("is for `https://other/mcp`"));
        assert!(refused(json!({}), 1031).contains("expired 31 s ago"));
        assert!(refused(json!({ "nbf": 1100 }), 1000).contains("not valid for another"));
        assert!(refused(json!({ "sub": null }), 1000).contains("no subject"));
        assert!(check_claims(
            &claims(json!({ "aud": ["x", "https://r/mcp"] })),
            "https://i/",
            "https://r/mcp",
            1000,
            true
        )
        .is_ok());
    }

    #[test]
    fn only_asymmetric_algorithms_are_taken() {
        assert!(
            check_alg("RS256").is_ok() && check_alg("ES256").is_ok() && check_alg("EdDSA").is_ok()
        );
        assert!(
            check_alg("none").is_err()
                && check_alg("HS256").is_err()
                && check_alg("RS512").is_err()
        );
        let rsa =
            key_set(&json!({ "keys": [{ "kty": "RSA", "kid": "k", "n": "AQAB", "e": "AQAB" }] }))
                .unwrap_or_default();
        assert!(rsa[0].fits("RS256") && !rsa[0].fits("ES256"));
    }

    #[test]
    fn opaque_tokens_are_not_jwts() {
        assert!(matches!(parse("abc"), Ok(None)));
        assert!(matches!(parse("a.b.c"), Ok(None)));
    }
}
