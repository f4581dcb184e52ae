//! `auth: { oauth: ... }` of a `kind: mcp` entry: the OAuth client's settings, checked offline.
//! Its credentials are templates over `secrets` only, as `headers:` are.

use crate::codes::Code;
use crate::compile::template_check::{compile_text, Roots};
use crate::compile::Ctx;
use crate::diag::Diagnostic;
use crate::registry::oauth::{Grant, OAuthConfig};
use crate::specfile::keys;
use crate::specfile::read::Obj;

/// `auth:` of the entry `what`; `stdio` when the server is a program (which takes no OAuth).
pub(super) fn compile_auth(
    obj: &Obj,
    what: &str,
    stdio: bool,
    ctx: &mut Ctx,
) -> Option<OAuthConfig> {
    let node = obj.get("auth")?;
    let auth = Obj::new(
        node,
        &format!("`auth` of {what}"),
        keys::MCP_AUTH,
        &mut ctx.d,
    )?;
    let oauth_node = auth.get("oauth")?;
    if stdio {
        ctx.d.push(
            Diagnostic::new(
                Code::E013,
                "`auth` is for a streamable-HTTP server (`url:`)",
            )
            .at(node.span)
            .help("pass a stdio server its credentials in `env:`"),
        );
        return None;
    }
    let oauth = Obj::new(
        oauth_node,
        &format!("`auth.oauth` of {what}"),
        keys::MCP_OAUTH,
        &mut ctx.d,
    )?;
    let secret = |key: &str, ctx: &mut Ctx| {
        let n = oauth.get(key)?;
        let text = crate::specfile::read::string(n, key, &mut ctx.d)?;
        compile_text(&text.value, n, &Roots::secrets(), ctx)
    };
    let client_id = secret("client_id", ctx);
    let client_secret = secret("client_secret", ctx);
    let private_key = secret("private_key", ctx);
    let grant = match oauth.string("grant", &mut ctx.d) {
        Some(g) if g.value == "client_credentials" => {
            if !oauth.has("client_id") || !(oauth.has("client_secret") || oauth.has("private_key"))
            {
                ctx.d.push(
                    Diagnostic::new(Code::E013, "`grant: client_credentials` needs the client's own credentials")
                        .at(g.span)
                        .help("add `client_id` and `client_secret` (or `private_key`) from secrets, e.g. `client_secret: \"{{ secrets.NOTES_CLIENT_SECRET }}\"`"),
                );
            }
            Grant::ClientCredentials
        }
        _ => Grant::AuthorizationCode,
    };
    let scopes = oauth
        .string_list("scopes", &mut ctx.d)
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.value)
        .collect();
    Some(OAuthConfig {
        client_id,
        client_secret,
        private_key,
        client_metadata_url: oauth
            .string("client_metadata_url", &mut ctx.d)
            .map(|u| u.value),
        scopes,
        grant,
    })
}
