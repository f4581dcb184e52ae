//! The OAuth client of `kind: mcp` entries, through the binary, against a fake MCP server and
//! authorization server on 127.0.0.1 (one `TestServer`): `toolrun auth login` with a `$BROWSER`
//! that follows the redirect, the token file (mode 0600), its use by `call` and `run`, tokens
//! kept out of traces and fixtures (and a replay needing none), its use by `serve` as a gateway
//! (shared by sessions of both revisions), `auth status` and `logout`, the
//! refusal to open a browser with `CI=true`, and authorization servers that misbehave. The
//! conformance suite's scenarios are in `mcp_client_conformance.rs`.

mod support;

use serde_json::json;
use std::path::{Path, PathBuf};
use support::http::{Request, Response, TestServer};
use support::{run, toolrun, write};

const TOKEN: &str = "tok-4f1c9a7e2b";
const REFRESH: &str = "ref-8d2e6b0c1a";

/// The base URL the request was sent to (the fake serves both roles on one port).
fn base(req: &Request) -> String {
    format!("http://{}", req.header("host").unwrap_or_default())
}

/// What the fake's authorization server does differently.
#[derive(Clone, Copy, PartialEq)]
enum As {
    Good,
    /// Its token response has no `access_token`.
    NoAccessToken,
    /// Its metadata is 1 MB of JSON.
    HugeMetadata,
    /// Its metadata redirects to itself forever.
    Redirects,
    /// Its tokens expire at once: each use refreshes.
    ShortLived,
}

fn fake(kind: As) -> TestServer {
    let lifetime = if kind == As::ShortLived { 1 } else { 3600 };
    TestServer::start(move |req| {
        let base = base(req);
        match (req.method.as_str(), req.path.as_str()) {
            ("POST", "/mcp") => mcp(req, &base),
            ("GET", "/.well-known/oauth-protected-resource/mcp") => Response::json(
                200,
                json!({ "resource": format!("{base}/mcp"), "authorization_servers": [base], "scopes_supported": ["notes.read"] }),
            ),
            ("GET", "/.well-known/oauth-authorization-server") => match kind {
                As::HugeMetadata => Response::json(200, json!({ "pad": "x".repeat(1 << 20) })),
                As::Redirects => Response::redirect(302, "/.well-known/oauth-authorization-server"),
                _ => Response::json(
                    200,
                    json!({
                        "issuer": base,
                        "authorization_endpoint": format!("{base}/authorize"),
                        "token_endpoint": format!("{base}/token"),
                        "registration_endpoint": format!("{base}/register"),
                        "code_challenge_methods_supported": ["S256"],
                        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
                        "authorization_response_iss_parameter_supported": true,
                    }),
                ),
            },
            ("GET", "/authorize") => {
                let to = format!(
                    "{}?code=code-77&state={}&iss={base}",
                    req.query_param("redirect_uri").unwrap_or_default(),
                    req.query_param("state").unwrap_or_default()
                );
                Response::redirect(302, &to)
            }
            ("POST", "/register") => Response::json(201, json!({ "client_id": "registered-1" })),
            ("POST", "/token") if kind == As::NoAccessToken => {
                Response::json(200, json!({ "token_type": "Bearer" }))
            }
            ("POST", "/token") => Response::json(
                200,
                json!({
                    "access_token": TOKEN, "token_type": "Bearer", "expires_in": lifetime,
                    "refresh_token": REFRESH, "scope": "notes.read",
                }),
            ),
            _ => Response::status(404),
        }
    })
}

/// The MCP endpoint: everything but a request with the token is a 401 challenge.
fn mcp(req: &Request, base: &str) -> Response {
    if req.header("authorization") != Some(&format!("Bearer {TOKEN}")) {
        return Response::json(401, json!({ "error": "invalid_token" })).header(
            "WWW-Authenticate",
            format!(
                r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
            ),
        );
    }
    let msg = req.json().unwrap_or_default();
    let id = msg.get("id").cloned();
    let result = match msg["method"].as_str() {
        Some("initialize") => {
            json!({ "protocolVersion": "2025-11-25", "capabilities": { "tools": {} }, "serverInfo": { "name": "notes", "version": "1" } })
        }
        Some("tools/list") => {
            json!({ "tools": [{ "name": "search", "inputSchema": { "type": "object" } }] })
        }
        Some("tools/call") => json!({ "content": [{ "type": "text", "text": "three notes" }] }),
        _ => return Response::status(202),
    };
    Response::json(200, json!({ "jsonrpc": "2.0", "id": id, "result": result }))
}

fn spec(dir: &Path, url: &str, oauth: &str) -> PathBuf {
    let secrets = match oauth.contains("secrets.") {
        true => "secrets: [NOTES_ID, NOTES_SECRET]",
        false => "",
    };
    let text = format!(
        r#"version: 1
name: notes
{secrets}
tools:
  notes:
    kind: mcp
    url: {url}
    timeout: 60s
    tools: [search]
    auth:
      oauth: {oauth}
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: search }}]
          - answer: "{{{{ results[0].result }}}}"
"#
    );
    write(dir, "notes.yaml", &text)
}

/// A browser that follows the authorization server's redirect to toolrun's listener, and
/// leaves a mark that it was opened.
fn browser(dir: &Path) -> String {
    let script = write(
        dir,
        "browser.sh",
        r#"touch "$(dirname "$0")/browser-opened"
exec python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=60).read()' "$1"
"#,
    );
    format!("bash {}", script.display())
}

fn store_file(state: &Path) -> PathBuf {
    state.join("toolrun/oauth.json")
}

/// The `oauth:` of a client with its own credentials, read from [`CLIENT_SECRETS`].
const CLIENT_CREDENTIALS: &str = r#"{ client_id: "{{ secrets.NOTES_ID }}", client_secret: "{{ secrets.NOTES_SECRET }}", grant: client_credentials }"#;

const CLIENT_SECRETS: [(&str, &str); 2] = [
    ("NOTES_ID", "ci-client"),
    ("NOTES_SECRET", "s3cret-value-91"),
];

/// `toolrun call SPEC search --args {}`.
fn call(spec: &Path) -> std::process::Command {
    let mut cmd = toolrun();
    cmd.arg("call").arg(spec).args(["search", "--args", "{}"]);
    cmd
}

/// [`call`] in CI by the client of [`CLIENT_CREDENTIALS`], its token store in `state`.
fn call_as_client(spec: &Path, state: &Path) -> std::process::Command {
    let mut cmd = call(spec);
    cmd.env("CI", "true")
        .envs(CLIENT_SECRETS)
        .env("XDG_STATE_HOME", state);
    cmd
}

/// `toolrun auth login SPEC` by a person: [`browser`], the token store in `state`.
fn login(spec: &Path, dir: &Path, state: &Path) -> std::process::Command {
    let mut cmd = toolrun();
    cmd.args(["auth", "login"])
        .arg(spec)
        .env("BROWSER", browser(dir))
        .env("XDG_STATE_HOME", state);
    cmd
}

/// The environment of a person at a terminal: [`browser`], the token store in `dir/state`.
fn person(dir: &Path) -> [(&'static str, String); 2] {
    [
        ("BROWSER", browser(dir)),
        ("XDG_STATE_HOME", dir.join("state").display().to_string()),
    ]
}

/// The server's `host:port`.
fn host(s: &TestServer) -> String {
    s.base_url().trim_start_matches("http://").to_string()
}

/// Adds `policy.network.allow_hosts: HOSTS` to the spec.
fn allow_hosts(spec: &Path, hosts: &[String]) {
    let text = std::fs::read_to_string(spec).unwrap_or_default();
    let list: Vec<String> = hosts.iter().map(|h| format!("\"{h}\"")).collect();
    let policy = format!(
        "policy:\n  network:\n    allow_hosts: [{}]\n",
        list.join(", ")
    );
    std::fs::write(spec, format!("{text}\n{policy}")).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn auth_login_keeps_a_private_token_that_later_runs_use_and_never_record() {
    let server = fake(As::Good);
    let dir = support::temp_dir("oauth-login");
    let state = dir.join("state");
    let spec = spec(dir.path(), &server.url("/mcp"), "{}");
    let out = run(&mut login(&spec, dir.path(), &state));
    out.assert_success();
    assert!(
        out.stderr.contains("logged in to MCP server `notes`"),
        "{out:?}"
    );
    assert!(
        !out.stderr.contains(TOKEN) && !out.stderr.contains("code-77"),
        "{out:?}"
    );
    let file = store_file(&state);
    let kept = std::fs::read_to_string(&file).expect("the token file");
    assert!(kept.contains(TOKEN) && kept.contains(REFRESH), "{kept}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the token file is the owner's only");
    }
    // The authorization request carried PKCE S256 and the resource; the code went back with its
    // verifier, and the client registered itself (no client_id in the spec).
    let reqs = server.requests();
    let authorize = reqs
        .iter()
        .find(|r| r.path == "/authorize")
        .expect("authorize");
    assert_eq!(authorize.query_param("code_challenge_method"), Some("S256"));
    assert_eq!(authorize.query_param("client_id"), Some("registered-1"));
    assert_eq!(
        authorize.query_param("resource"),
        Some(server.url("/mcp").as_str())
    );
    assert_eq!(authorize.query_param("scope"), Some("notes.read"));
    let token_req = reqs
        .iter()
        .find(|r| r.path == "/token")
        .expect("token")
        .text();
    assert!(
        token_req.contains("code_verifier=") && token_req.contains("code=code-77"),
        "{token_req}"
    );

    // A later run in CI uses the kept token: no browser, the trace and the fixture hold no token.
    std::fs::remove_file(dir.join("browser-opened")).unwrap();
    let trace = dir.join("trace.json");
    let fixture = dir.join("fixture.json");
    let out = run(toolrun()
        .arg("run")
        .arg(&spec)
        .args(["--query", "notes?", "--trace"])
        .arg(&trace)
        .arg("--record")
        .arg(&fixture)
        .env("CI", "true")
        .env("BROWSER", browser(dir.path()))
        .env("XDG_STATE_HOME", &state));
    out.assert_success();
    assert!(out.stdout.contains("three notes"), "{out:?}");
    assert!(!dir.join("browser-opened").exists());
    for file in [&trace, &fixture] {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(!text.contains(TOKEN) && !text.contains(REFRESH), "{text}");
    }
    // A replay needs no token and no authorization server.
    let empty = dir.join("no-state");
    let out = run(toolrun()
        .arg("replay")
        .arg(&fixture)
        .env("XDG_STATE_HOME", &empty));
    out.assert_success();
    assert!(!empty.exists(), "a replay never writes a token store");
}

#[test]
fn status_shows_what_is_kept_without_the_token_and_logout_forgets_it() {
    let server = fake(As::Good);
    let dir = support::temp_dir("oauth-status");
    let state = dir.join("state");
    let spec = spec(dir.path(), &server.url("/mcp"), "{}");
    run(login(&spec, dir.path(), &state).arg("notes")).assert_success();
    let out = run(toolrun()
        .args(["auth", "status"])
        .env("XDG_STATE_HOME", &state));
    out.assert_success();
    assert!(out.stdout.contains(&server.url("/mcp")), "{out:?}");
    assert!(
        out.stdout.contains("client registered-1") && out.stdout.contains("refreshable"),
        "{out:?}"
    );
    assert!(
        !out.stdout.contains(TOKEN) && !out.stdout.contains(REFRESH),
        "{out:?}"
    );
    let out = run(toolrun()
        .args(["auth", "logout"])
        .arg(&spec)
        .env("XDG_STATE_HOME", &state));
    out.assert_success();
    assert!(out.stdout.contains("forgot 1 OAuth token"), "{out:?}");
    let kept = std::fs::read_to_string(store_file(&state)).unwrap();
    assert!(!kept.contains(TOKEN), "{kept}");
}

#[test]
fn without_a_token_ci_never_opens_a_browser_and_says_how_to_log_in() {
    let server = fake(As::Good);
    let dir = support::temp_dir("oauth-ci");
    let spec = spec(dir.path(), &server.url("/mcp"), "{}");
    let out = run(call(&spec)
        .env("CI", "true")
        .env("BROWSER", browser(dir.path()))
        .env("XDG_STATE_HOME", dir.join("state")));
    out.assert_code(1);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("CI=true is set"), "{out:?}");
    assert!(
        all.contains("toolrun auth login") && all.contains("grant: client_credentials"),
        "{out:?}"
    );
    assert!(!dir.join("browser-opened").exists(), "no browser in CI");
    assert_eq!(server.hits("/authorize"), 0);
}

#[test]
fn client_credentials_get_a_token_with_no_person_and_keep_the_secret_out_of_errors() {
    let server = fake(As::Good);
    let dir = support::temp_dir("oauth-cc");
    let spec = spec(dir.path(), &server.url("/mcp"), CLIENT_CREDENTIALS);
    let out = run(&mut call_as_client(&spec, &dir.join("state")));
    out.assert_success();
    let token_req = server
        .requests()
        .into_iter()
        .find(|r| r.path == "/token")
        .expect("token request");
    assert!(
        token_req.text().contains("grant_type=client_credentials"),
        "{token_req:?}"
    );
    assert!(
        token_req
            .header("authorization")
            .is_some_and(|a| a.starts_with("Basic ")),
        "client_secret_basic"
    );
}

/// An authorization server that misbehaves: a clear error naming it, within the call's time.
fn refused_by(kind: As, expected: &str) {
    let server = fake(kind);
    let dir = support::temp_dir("oauth-bad-as");
    let spec = spec(dir.path(), &server.url("/mcp"), CLIENT_CREDENTIALS);
    let out = run(call(&spec)
        .envs(CLIENT_SECRETS)
        .env("XDG_STATE_HOME", dir.join("state")));
    out.assert_code(1);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains(expected), "{out:?}");
    assert!(
        all.contains(&server.base_url()) || all.contains("127.0.0.1"),
        "names the server: {out:?}"
    );
    assert!(!all.contains("s3cret-value-91"), "{out:?}");
}

#[test]
fn a_token_response_without_an_access_token_is_an_error_naming_the_server() {
    refused_by(As::NoAccessToken, "without an `access_token`");
}

#[test]
fn huge_metadata_is_refused_unread() {
    refused_by(As::HugeMetadata, "answered with more than 256 KiB");
}

#[test]
fn endless_redirects_of_metadata_end() {
    refused_by(As::Redirects, "redirected more than 5 times");
}

#[test]
fn an_unknown_oauth_key_gets_a_did_you_mean() {
    let dir = support::temp_dir("oauth-check");
    let spec = spec(
        dir.path(),
        "https://notes.example.com/mcp",
        "{ scope: [a] }",
    );
    let out = run(toolrun().arg("check").arg(&spec));
    out.assert_code(1);
    assert!(
        out.stderr.contains("unknown key `scope`") && out.stderr.contains("`scopes`"),
        "{out:?}"
    );
}

#[test]
fn an_expired_token_is_refreshed_without_a_person() {
    let server = fake(As::ShortLived);
    let dir = support::temp_dir("oauth-refresh");
    let state = dir.join("state");
    let spec = spec(dir.path(), &server.url("/mcp"), "{}");
    run(&mut login(&spec, dir.path(), &state)).assert_success();
    let out = run(call(&spec).env("CI", "true").env("XDG_STATE_HOME", &state));
    out.assert_success();
    let grants: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/token")
        .map(|r| r.text())
        .collect();
    assert!(
        grants[0].contains("grant_type=authorization_code"),
        "{grants:?}"
    );
    assert!(
        grants[1..]
            .iter()
            .any(|g| g.contains("grant_type=refresh_token")
                && g.contains(&format!("refresh_token={REFRESH}"))),
        "{grants:?}"
    );
    assert_eq!(server.hits("/authorize"), 1, "no second login");
}

/// With `policy.network.allow_hosts`, the authorization server the MCP server names is checked
/// against it before anything goes there: one on another host:port is refused, naming the host
/// and how to allow it, and gets no request; allowed, the same setup gets its token.
#[test]
fn an_authorization_server_outside_the_allow_list_is_refused() {
    let auth = fake(As::Good);
    let issuer = auth.base_url();
    let resource = TestServer::start(move |req| {
        let base = base(req);
        match (req.method.as_str(), req.path.as_str()) {
            ("POST", "/mcp") => mcp(req, &base),
            ("GET", "/.well-known/oauth-protected-resource/mcp") => Response::json(
                200,
                json!({ "resource": format!("{base}/mcp"), "authorization_servers": [issuer.clone()] }),
            ),
            _ => Response::status(404),
        }
    });
    let (resource_host, auth_host) = (host(&resource), host(&auth));
    for allowed in [
        vec![resource_host.clone()],
        vec![resource_host.clone(), auth_host.clone()],
    ] {
        let dir = support::temp_dir("oauth-allow-hosts");
        let spec = spec(dir.path(), &resource.url("/mcp"), CLIENT_CREDENTIALS);
        allow_hosts(&spec, &allowed);
        let out = run(&mut call_as_client(&spec, &dir.join("state")));
        if allowed.len() == 2 {
            out.assert_success();
            assert_eq!(auth.hits("/token"), 1, "{out:?}");
            continue;
        }
        out.assert_code(1);
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(
            all.contains(&format!("refused to contact {auth_host}")),
            "{out:?}"
        );
        assert!(
            all.contains(&format!(
                "add \"{auth_host}\" there to let the OAuth client use it"
            )),
            "{out:?}"
        );
        assert!(all.contains("policy.network.allow_hosts"), "{out:?}");
        assert!(!all.contains("s3cret-value-91"), "{out:?}");
        assert_eq!(auth.hits("/token"), 0, "no credentials sent: {out:?}");
        assert_eq!(auth.hits("/.well-known/oauth-authorization-server"), 0);
    }
}

/// On a terminal with no stored token, `call` and `run` ask before a login: no (or just Enter)
/// stops with the error that says how to log in (exit 1: the work failed), and no browser opens.
#[test]
fn on_a_terminal_no_to_the_login_question_stops_without_a_browser() {
    let server = fake(As::Good);
    for (answer, command) in [("n\n", "call"), ("\n", "run")] {
        let dir = support::temp_dir("oauth-ask-no");
        let spec = spec(dir.path(), &server.url("/mcp"), "{}");
        let spec = spec.to_string_lossy().into_owned();
        let args = match command {
            "call" => vec!["call", &spec, "search", "--args", "{}"],
            _ => vec!["run", &spec, "--query", "notes?"],
        };
        let (code, screen) = support::in_terminal(&args, &person(dir.path()), answer);
        assert_eq!(code, 1, "{screen}");
        assert!(
            screen.contains("MCP server `notes` needs you to log in (OAuth, at http://127.0.0.1:")
                && screen.contains("Log in now in the browser? [y/N]"),
            "{screen}"
        );
        assert!(
            screen.contains("the login was declined")
                && screen.contains("toolrun auth login")
                && screen.contains("grant: client_credentials"),
            "{screen}"
        );
        assert!(!dir.join("browser-opened").exists(), "no browser: {screen}");
        assert!(!store_file(&dir.join("state")).exists(), "{screen}");
    }
    assert_eq!(server.hits("/authorize"), 0);
    assert_eq!(server.hits("/token"), 0);
}

/// Yes logs in as `toolrun auth login` would (the browser opened, the token kept), and the run
/// goes on to its answer, with no token on the screen.
#[test]
fn on_a_terminal_yes_to_the_login_question_logs_in_and_the_run_completes() {
    let server = fake(As::Good);
    let dir = support::temp_dir("oauth-ask-yes");
    let state = dir.join("state");
    let spec = spec(dir.path(), &server.url("/mcp"), "{}");
    let spec = spec.to_string_lossy().into_owned();
    let (code, screen) = support::in_terminal(
        &["run", &spec, "--query", "notes?"],
        &person(dir.path()),
        "y\n",
    );
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("[y/N]"), "{screen}");
    assert!(screen.contains("three notes"), "{screen}");
    assert!(dir.join("browser-opened").exists(), "{screen}");
    assert_eq!(server.hits("/authorize"), 1, "asked once, logged in once");
    assert!(!screen.contains(TOKEN) && !screen.contains(REFRESH) && !screen.contains("code-77"));
    let kept = std::fs::read_to_string(store_file(&state)).expect("the token is kept");
    assert!(kept.contains(TOKEN), "{kept}");
}

/// The `resource_metadata` URL a 401 names is held to `policy.network.allow_hosts` like the
/// authorization server: a challenge naming another host is refused, naming the host and how to
/// allow it, and that host gets no request.
#[test]
fn a_challenge_naming_metadata_outside_the_allow_list_is_refused() {
    let elsewhere = fake(As::Good);
    let named = elsewhere.url("/.well-known/oauth-protected-resource/mcp");
    let resource = TestServer::start(move |req| match (req.method.as_str(), req.path.as_str()) {
        ("POST", "/mcp") => Response::json(401, json!({ "error": "invalid_token" })).header(
            "WWW-Authenticate",
            format!(r#"Bearer resource_metadata="{named}""#),
        ),
        _ => Response::status(404),
    });
    let (resource_host, elsewhere_host) = (host(&resource), host(&elsewhere));
    let dir = support::temp_dir("oauth-challenge-host");
    let spec = spec(dir.path(), &resource.url("/mcp"), CLIENT_CREDENTIALS);
    allow_hosts(&spec, &[resource_host]);
    let out = run(&mut call_as_client(&spec, &dir.join("state")));
    out.assert_code(1);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains(&format!("refused to contact {elsewhere_host}"))
            && all.contains("`resource_metadata` URL in the 401 challenge")
            && all.contains(&format!("add \"{elsewhere_host}\" there")),
        "{out:?}"
    );
    assert!(!all.contains("s3cret-value-91"), "{out:?}");
    assert!(
        elsewhere.requests().is_empty(),
        "nothing sent there: {out:?}"
    );
}

/// The token store is changed under a lock: toolruns getting tokens at once (each for its own
/// server, so each writes its own entry) keep every one of them, and the file stays private.
#[test]
fn tokens_written_by_toolruns_at_once_are_all_kept() {
    const RUNS: usize = 16;
    let dir = support::temp_dir("oauth-concurrent");
    let state = dir.join("state");
    let servers: Vec<TestServer> = (0..RUNS).map(|_| fake(As::Good)).collect();
    let children: Vec<std::process::Child> = servers
        .iter()
        .enumerate()
        .map(|(i, server)| {
            let sub = dir.join(format!("spec-{i}"));
            std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("{e}"));
            let spec = spec(&sub, &server.url("/mcp"), CLIENT_CREDENTIALS);
            call_as_client(&spec, &state)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(store_file(&state)).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
    let mut resources: Vec<String> = kept["tokens"]
        .as_array()
        .map(|t| t.iter().map(|t| t["resource"].to_string()).collect())
        .unwrap_or_default();
    resources.sort();
    resources.dedup();
    assert_eq!(resources.len(), RUNS, "tokens lost: {kept}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for file in [store_file(&state), state.join("toolrun/oauth.json.lock")] {
            let mode = std::fs::metadata(&file)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{}", file.display());
        }
    }
}

/// `toolrun test` draws a progress bar; a test's login question clears it until answered, so
/// another test finishing meanwhile (a redraw) does not write over the question. No stops the
/// test that needed the login with the error saying how to log in; the other test passes.
#[test]
fn the_login_question_of_a_test_run_stays_on_screen_while_other_tests_finish() {
    let server = fake(As::Good);
    let dir = support::temp_dir("oauth-ask-test");
    let release = dir.join("release");
    let gate = release.clone();
    let slow = TestServer::start(move |_| {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !gate.exists() && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Response::json(200, json!({ "ok": true }))
    });
    let spec = spec(dir.path(), &server.url("/mcp"), "{}");
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        format!("{text}tests:\n  - name: notes\n    query: notes?\n    expect: {{ output_contains: three notes }}\n"),
    )
    .unwrap();
    let other = write(
        dir.path(),
        "slow.yaml",
        &format!(
            r#"version: 1
name: slow
tools:
  slow:
    kind: http
    input: {{ type: object }}
    timeout: 150s
    request:
      method: GET
      url: {}
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: slow }}]
          - answer: done slowly
tests:
  - name: slow
    query: slow
    expect: {{ output_contains: done slowly }}
"#,
            slow.url("/slow")
        ),
    );
    let other = other.to_string_lossy().into_owned();
    let spec = spec.to_string_lossy().into_owned();
    let results = dir.join("results.json");
    let mut term = support::toolrun_in_terminal(
        &[
            "test",
            &spec,
            &other,
            "-j",
            "2",
            "--allow-network",
            "--results",
            &results.to_string_lossy(),
        ],
        &person(dir.path()),
    );
    term.wait_for("[y/N]");
    slow.wait_for_requests(1, std::time::Duration::from_secs(120));
    // The other test finishes while the question waits: the bar would be drawn again now.
    std::fs::write(&release, "").unwrap();
    while slow.hits("/slow") == 0 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    term.type_keys("n\n");
    let (code, screen) = term.finish();
    assert_eq!(code, 1, "{screen}");
    let port = server.base_url();
    let question = format!(
        "toolrun: MCP server `notes` needs you to log in (OAuth, at {port}). Log in now in the browser? [y/N] n"
    );
    assert!(
        screen.lines().any(|l| l.trim_end() == question),
        "the question, whole, on its own line:\n{screen}"
    );
    assert!(
        screen.contains("FAIL notes::notes") && screen.contains("1 passed, 1 failed"),
        "the other test passed: {screen}"
    );
    // The tool call that needed the login got the error that says how to log in.
    let results = std::fs::read_to_string(&results).unwrap();
    assert!(
        results.contains("the login was declined")
            && results.contains("toolrun auth login")
            && results.contains("grant: client_credentials"),
        "{results}"
    );
    assert!(!dir.join("browser-opened").exists(), "no browser: {screen}");
    assert_eq!(server.hits("/authorize"), 0);
}

/// A declined login (no to the question on a terminal, or `CI=true` with no terminal) fails a
/// test whose run stopped there, and `toolrun test`'s own report says why under the failed
/// test: the run's error, which says how to log in, not only the expectation it missed.
#[test]
fn a_test_stopped_by_a_declined_login_shows_how_to_log_in() {
    let server = fake(As::Good);
    let dir = support::temp_dir("oauth-test-declined");
    let spec = spec(dir.path(), &server.url("/mcp"), "{}");
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(
        &spec,
        format!("{text}tests:\n  - name: notes\n    query: notes?\n    expect: {{ output_contains: three notes }}\n"),
    )
    .unwrap();
    let shows_how_to_log_in = |report: &str| {
        let under = report
            .split("FAIL notes::notes\n")
            .nth(1)
            .unwrap_or_default();
        let stop = under
            .lines()
            .find(|l| l.starts_with("     the run stopped (mcp_error): "))
            .unwrap_or_default();
        stop.contains("toolrun auth login") && stop.contains("grant: client_credentials")
    };
    let out = run(toolrun()
        .arg("test")
        .arg(&spec)
        .arg("--allow-network")
        .env("CI", "true")
        .env("BROWSER", browser(dir.path()))
        .env("XDG_STATE_HOME", dir.join("state")));
    out.assert_code(1);
    assert!(shows_how_to_log_in(&out.stdout), "{out:?}");
    assert!(out.stdout.contains("CI=true is set"), "{out:?}");

    let spec = spec.to_string_lossy().into_owned();
    let (code, screen) = support::in_terminal(
        &["test", &spec, "--allow-network"],
        &person(dir.path()),
        "n\n",
    );
    assert_eq!(code, 1, "{screen}");
    assert!(screen.contains("[y/N]"), "{screen}");
    let screen = screen.replace("\r\n", "\n");
    assert!(shows_how_to_log_in(&screen), "{screen}");
    assert!(screen.contains("the login was declined"), "{screen}");
    assert!(!dir.join("browser-opened").exists(), "no browser: {screen}");
    assert_eq!(server.hits("/authorize"), 0);
}

/// `chat` asks the same question in the middle of a turn: it stays whole on screen, and no
/// stops that turn with the error saying how to log in.
#[test]
fn the_login_question_in_a_chat_is_shown_whole_and_no_stops_the_turn() {
    let server = fake(As::Good);
    let dir = support::temp_dir("oauth-ask-chat");
    let spec = spec(dir.path(), &server.url("/mcp"), "{}");
    let spec = spec.to_string_lossy().into_owned();
    let mut term = support::toolrun_in_terminal(&["chat", &spec], &person(dir.path()));
    term.wait_for("Ctrl-D ends");
    term.type_keys("notes?\n");
    term.wait_for("[y/N]");
    term.type_keys("n\n");
    term.wait_for("toolrun: turn failed");
    // Ctrl-D ends the session, and again declines saving it as a test.
    term.type_keys("\x04\x04");
    let (_, screen) = term.finish();
    let question = format!(
        "toolrun: MCP server `notes` needs you to log in (OAuth, at {}). Log in now in the browser? [y/N] n",
        server.base_url()
    );
    assert!(
        screen.lines().any(|l| l.trim_end() == question),
        "the question, whole, on its own line:\n{screen}"
    );
    let error = screen
        .lines()
        .find(|l| l.starts_with("toolrun: turn failed"))
        .unwrap_or_default();
    assert!(
        error.contains("the login was declined") && error.contains("toolrun auth login"),
        "{screen}"
    );
    assert!(!dir.join("browser-opened").exists(), "no browser: {screen}");
    assert_eq!(server.hits("/authorize"), 0);
}

/// POSTs one JSON-RPC message to a `toolrun serve --http` URL with these headers; the status,
/// the `Mcp-Session-Id` it gave (if any) and the JSON-RPC response (JSON body or SSE `data:`).
fn post_served(
    url: &str,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
) -> (u16, String, serde_json::Value) {
    let authority = support::served_authority(url);
    let wait = std::time::Duration::from_secs(60);
    let response =
        support::exchange_raw(authority, "POST", "/mcp", headers, &body.to_string(), wait);
    let (head, rest) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let session = support::response_header(head, "mcp-session-id").unwrap_or_default();
    let message = serde_json::from_str(rest).ok().or_else(|| {
        rest.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<serde_json::Value>(d.trim()).ok())
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
    });
    (status, session, message.unwrap_or_default())
}

/// A 2025-11-25 session (initialize, initialized) and its `tools/call` of `search`; the result.
fn call_in_session(url: &str) -> serde_json::Value {
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": { "name": "raw", "version": "1" } } });
    let (status, id, answer) = post_served(url, &[], &init);
    assert_eq!(status, 200, "{answer}");
    let in_session = [
        ("Mcp-Session-Id", id.as_str()),
        ("Mcp-Protocol-Version", "2025-11-25"),
    ];
    let done = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    assert_eq!(post_served(url, &in_session, &done).0, 202);
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "search", "arguments": {} } });
    let (status, _, answer) = post_served(url, &in_session, &call);
    assert_eq!(status, 200, "{answer}");
    answer["result"].clone()
}

/// A stateless 2026-07-28 `tools/call` of `search`; the result.
fn call_stateless(url: &str) -> serde_json::Value {
    let call = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "search", "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" },
            "io.modelcontextprotocol/clientCapabilities": {},
        } } });
    let headers = [
        ("Mcp-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "search"),
    ];
    let (status, _, answer) = post_served(url, &headers, &call);
    assert_eq!(status, 200, "{answer}");
    answer["result"].clone()
}

#[test]
fn serve_as_a_gateway_shares_the_kept_token_and_without_one_in_ci_says_how_to_log_in() {
    let server = fake(As::Good);
    let dir = support::temp_dir("oauth-serve");
    let state = dir.join("state");
    let spec = spec(dir.path(), &server.url("/mcp"), "{}");
    run(&mut login(&spec, dir.path(), &state)).assert_success();
    std::fs::remove_file(dir.join("browser-opened")).unwrap();
    let (authorized, tokens) = (server.hits("/authorize"), server.hits("/token"));
    let mcp_before = server.hits("/mcp");

    let (mut child, url, _stderr) = support::spawn_served(
        toolrun()
            .arg("serve")
            .arg(&spec)
            .args(["--http", "127.0.0.1:0"])
            .env("CI", "true")
            .env("BROWSER", browser(dir.path()))
            .env("XDG_STATE_HOME", &state),
    );
    // Two clients of the gateway, one per revision, both reach the protected server.
    let old = call_in_session(&url);
    let new = call_stateless(&url);
    let _ = child.kill();
    let _ = child.wait();
    for result in [&old, &new] {
        assert_eq!(result["isError"], json!(false), "{result}");
        assert_eq!(result["content"][0]["text"], "three notes", "{result}");
    }
    let to_mcp: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/mcp")
        .collect();
    assert!(
        to_mcp.len() > mcp_before,
        "the gateway reached the protected server"
    );
    let bearer = format!("Bearer {TOKEN}");
    assert!(
        to_mcp[mcp_before..]
            .iter()
            .all(|r| r.header("authorization") == Some(bearer.as_str())),
        "every request of the gateway carried the kept token"
    );
    assert_eq!(server.hits("/authorize"), authorized, "no second login");
    assert_eq!(
        server.hits("/token"),
        tokens,
        "the kept token was used as it is"
    );
    assert!(!dir.join("browser-opened").exists());

    // With no kept token, in CI: no browser, no hang, an error saying how to log in. The gateway
    // reaches its MCP servers when it starts (to list their tools), so it stops there.
    let out = support::run_with_timeout(
        toolrun()
            .arg("serve")
            .arg(&spec)
            .args(["--http", "127.0.0.1:0"])
            .env("CI", "true")
            .env("BROWSER", browser(dir.path()))
            .env("XDG_STATE_HOME", dir.join("empty-state")),
        None,
        std::time::Duration::from_secs(120),
    );
    out.assert_code(1);
    assert!(
        out.stderr.contains("CI=true is set") && out.stderr.contains("toolrun auth login"),
        "{out:?}"
    );
    assert!(!out.stderr.contains(TOKEN), "{out:?}");
    assert!(!dir.join("browser-opened").exists(), "no browser in CI");
    assert_eq!(server.hits("/authorize"), authorized);
}
