//! `serve.auth` and the tools' `scopes:`: `serve --http` as an OAuth resource server. Nothing
//! here reaches the network: the issuer's metadata and keys are fetched by `serve` when a
//! client first needs them, never by `check`.

use super::template_check::{compile_text, Roots};
use super::Ctx;
use crate::codes::Code;
use crate::diag::Diagnostic;
use crate::registry::{Policy, ServeAuth};
use crate::specfile::keys;
use crate::specfile::read::{Obj, Spanned};
use crate::specfile::yaml::Node;

/// `serve.auth`, read once `policy` is (the issuer's host must be allowed).
pub(super) fn compile(node: &Node, policy: &Policy, ctx: &mut Ctx) -> Option<ServeAuth> {
    let obj = Obj::new(node, "`serve.auth`", keys::SERVE_AUTH, &mut ctx.d)?;
    let issuer = obj.require_string("issuer", "`serve.auth`", &mut ctx.d);
    let audience = obj.require_string("audience", "`serve.auth`", &mut ctx.d);
    let scopes = scopes(&obj, ctx);
    let template = |key: &str, ctx: &mut Ctx| {
        let text = obj.string(key, &mut ctx.d)?;
        compile_text(&text.value, obj.get(key)?, &Roots::secrets(), ctx)
    };
    let client_id = template("client_id", ctx);
    let client_secret = template("client_secret", ctx);
    if obj.has("client_id") != obj.has("client_secret") {
        ctx.d.push(
            Diagnostic::new(
                Code::E008,
                "`serve.auth` introspects opaque tokens with a client ID and its secret: give both or neither",
            )
            .at(obj.node.span)
            .help("add `client_id` and `client_secret` (templates over `secrets`), or remove the one given"),
        );
    }
    let issuer = issuer.filter(|i| url_ok(i, "issuer", false, ctx));
    let audience = audience.filter(|a| url_ok(a, "audience", true, ctx));
    let (issuer, audience) = (issuer?, audience?);
    check_host(&issuer, policy, ctx);
    Some(ServeAuth {
        issuer_host: super::url_template::literal_host(&issuer.value),
        issuer: issuer.value,
        audience: audience.value,
        scopes,
        client_id,
        client_secret,
    })
}

/// An issuer or a resource URL: https, or http on a loopback address (a test's, a
/// developer's); no query or fragment (RFC 8414 section 2, RFC 9728 section 1.2).
fn url_ok(text: &Spanned<String>, key: &str, resource: bool, ctx: &mut Ctx) -> bool {
    let why = match url::Url::parse(&text.value) {
        Err(e) => Some(format!("is not a URL ({e})")),
        Ok(u) if u.query().is_some() || u.fragment().is_some() => {
            Some("has a query or a fragment, which an OAuth identifier may not have".into())
        }
        Ok(u) if u.scheme() == "http" && !is_loopback(&u) => Some(
            "is plain http on a host other machines share: tokens and keys would travel unprotected"
                .into(),
        ),
        Ok(u) if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() => {
            Some("is not an http(s) URL with a host".into())
        }
        Ok(_) => None,
    };
    let Some(why) = why else {
        return true;
    };
    let example = if resource {
        "https://tools.example.com/mcp"
    } else {
        "https://login.example.com/"
    };
    ctx.d.push(
        Diagnostic::new(
            Code::E021,
            format!("`serve.auth.{key}` `{}` {why}", text.value),
        )
        .at(text.span)
        .help(format!(
            "write an https URL such as `{example}` (http only on 127.0.0.1, ::1 or localhost)"
        )),
    );
    false
}

fn is_loopback(u: &url::Url) -> bool {
    match u.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// `scopes:` of `serve.auth` or of a tool: scope tokens, each once.
pub(crate) fn scopes(obj: &Obj, ctx: &mut Ctx) -> Vec<String> {
    let Some(list) = obj.string_list("scopes", &mut ctx.d) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for s in list {
        let valid = !s.value.is_empty()
            && s.value
                .bytes()
                .all(|b| matches!(b, 0x21 | 0x23..=0x5b | 0x5d..=0x7e));
        if !valid {
            ctx.d.push(
                Diagnostic::new(
                    Code::E007,
                    format!("`{}` is not an OAuth scope", s.value.escape_debug()),
                )
                .at(s.span)
                .help("a scope is printable ASCII without spaces, `\"` or `\\` (RFC 6749 section 3.3), e.g. `payments.write`"),
            );
        } else if !out.contains(&s.value) {
            out.push(s.value);
        }
    }
    out
}

/// The issuer's host obeys `policy.network.allow_hosts` as an `http` tool's does: fetching its
/// metadata and keys is network access.
fn check_host(issuer: &Spanned<String>, policy: &Policy, ctx: &mut Ctx) {
    let Ok(url) = url::Url::parse(&issuer.value) else {
        return;
    };
    let Some(host) = policy.unlisted_host(&url) else {
        return;
    };
    ctx.d.push(
        Diagnostic::new(
            Code::E020,
            format!("`serve.auth.issuer` is on host `{host}`, which `policy.network.allow_hosts` does not list"),
        )
        .at(issuer.span)
        .help(format!("add `{host}` to `policy.network.allow_hosts` (and the host of its `jwks_uri`, if another), or change the issuer")),
    );
}
