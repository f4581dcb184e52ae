//! `auth: { oauth: ... }` of a `kind: mcp` entry, as compiled: what the OAuth client
//! (`crate::oauth`) needs to get a token for the server.

use crate::templates::TemplateId;

/// How the client gets its token.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Grant {
    /// A person logs in in the browser (`toolrun auth login`, or on a terminal during a run).
    #[default]
    AuthorizationCode,
    /// The client's own credentials: nobody is asked (CI).
    ClientCredentials,
}

#[derive(Debug, Default)]
pub(crate) struct OAuthConfig {
    /// Templates over `secrets` only.
    pub(crate) client_id: Option<TemplateId>,
    pub(crate) client_secret: Option<TemplateId>,
    /// A PEM PKCS#8 key signing `private_key_jwt` assertions.
    pub(crate) private_key: Option<TemplateId>,
    pub(crate) client_metadata_url: Option<String>,
    /// Empty: the challenge's scopes, else the resource's `scopes_supported`.
    pub(crate) scopes: Vec<String>,
    pub(crate) grant: Grant,
}
