//! `toolrun auth login | status | logout`: a person's OAuth login to a spec's MCP servers, and
//! the tokens kept for later runs (`crate::oauth::store`). Nothing printed holds a token, a
//! code, a verifier or a client secret.

use crate::cli::AuthCommand;
use crate::exit;
use crate::oauth::store;
use crate::redact::Secrets;
use crate::registry::{McpServer, Registry};
use std::path::Path;

pub(crate) fn run(cmd: AuthCommand) -> i32 {
    match cmd {
        AuthCommand::Login { spec, tool } => login(&spec, tool.as_deref()),
        AuthCommand::Status => status(),
        AuthCommand::Logout { spec, tool } => logout(spec.as_deref(), tool.as_deref()),
    }
}

/// The spec's servers with `auth: { oauth: ... }`, or `tool`'s; a usage error when none.
fn servers<'r>(registry: &'r Registry, tool: Option<&str>) -> Result<Vec<&'r McpServer>, i32> {
    let all: Vec<&McpServer> = registry.mcp_servers().into_iter().map(|s| &**s).collect();
    if let Some(name) = tool {
        let Some(server) = all.iter().find(|s| s.name == name) else {
            let hint = crate::diag::did_you_mean(name, all.iter().map(|s| s.name.as_str()))
                .map(|h| format!("; {h}"))
                .unwrap_or_default();
            eprintln!("error: the spec has no `kind: mcp` entry `{name}`{hint}");
            return Err(exit::USAGE);
        };
        if server.oauth.is_none() {
            eprintln!("error: MCP server `{name}` has no `auth: {{ oauth: ... }}`: there is nothing to log in to");
            return Err(exit::USAGE);
        }
        return Ok(vec![server]);
    }
    let with_oauth: Vec<&McpServer> = all.into_iter().filter(|s| s.oauth.is_some()).collect();
    if with_oauth.is_empty() {
        eprintln!("error: no `kind: mcp` entry of the spec has `auth: {{ oauth: ... }}`");
        return Err(exit::USAGE);
    }
    Ok(with_oauth)
}

fn login(spec: &Path, tool: Option<&str>) -> i32 {
    let registry = match super::load_registry(spec) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let servers = match servers(&registry, tool) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let (secrets, _) = Secrets::from_env(&registry.secrets);
    let transport = crate::net::Transport::live();
    let events = crate::events::Events::none();
    let env = crate::tools::ToolEnv {
        registry: &registry,
        secrets: &secrets,
        transport: &transport,
        events: &events,
        query: "",
        now_unix_ms: 0,
        call_id: "",
        notify: None,
        session: None,
    };
    let rt = crate::setup::runtime();
    let mut code = exit::SUCCESS;
    for server in servers {
        match rt.block_on(crate::tools::mcp::login(server, &env)) {
            Ok(token) => eprintln!(
                "toolrun: logged in to MCP server `{}` (issuer {}, client {}{}); the token is kept in {}",
                server.name,
                token.issuer,
                token.client_id,
                if token.scope.is_empty() { String::new() } else { format!(", scopes {}", token.scope) },
                store::path().map(|p| p.display().to_string()).unwrap_or_default()
            ),
            Err(e) => {
                eprintln!(
                    "error: cannot log in to MCP server `{}`: {}",
                    server.name,
                    secrets.redactor().str(&e)
                );
                code = exit::FAILED;
            }
        }
    }
    code
}

fn status() -> i32 {
    let kept = store::load();
    let place = store::path()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if kept.tokens.is_empty() {
        println!("no OAuth tokens are kept ({place})");
        return exit::SUCCESS;
    }
    println!("OAuth tokens kept in {place}:");
    let now = store::now();
    for t in &kept.tokens {
        let expiry = match t.expires_at {
            Some(at) if at <= now => "expired".to_string(),
            Some(at) => format!("expires in {} min", (at - now).div_ceil(60)),
            None => "no expiry given".to_string(),
        };
        let refresh = if t.refresh_token.is_some() {
            ", refreshable"
        } else {
            ""
        };
        let scope = if t.scope.is_empty() {
            "none".to_string()
        } else {
            t.scope.clone()
        };
        println!(
            "  {}\n    issuer {}, client {}, scopes {scope}, {expiry}{refresh}",
            t.server_url, t.issuer, t.client_id
        );
    }
    exit::SUCCESS
}

fn logout(spec: Option<&Path>, tool: Option<&str>) -> i32 {
    let urls: Option<Vec<String>> = match spec {
        None => None,
        Some(spec) => {
            let registry = match super::load_registry(spec) {
                Ok(r) => r,
                Err(code) => return code,
            };
            match servers(&registry, tool) {
                Ok(s) => Some(s.iter().map(|s| s.url.clone()).collect()),
                Err(code) => return code,
            }
        }
    };
    let mut forgot = 0;
    let changed = store::update(|s| {
        let before = s.tokens.len();
        match &urls {
            None => {
                s.tokens.clear();
                s.clients.clear();
            }
            Some(urls) => s.tokens.retain(|t| !urls.contains(&t.server_url)),
        }
        forgot = before - s.tokens.len();
    });
    if let Err(e) = changed {
        eprintln!("error: {e}");
        return exit::FAILED;
    }
    println!("forgot {forgot} OAuth token(s)");
    exit::SUCCESS
}
