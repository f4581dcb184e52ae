//! A person's login: the authorization URL opened in a browser (`$BROWSER` when set, else the
//! desktop's opener, and always printed), and the redirect received on 127.0.0.1 at an
//! ephemeral port (RFC 8252 §7.3) by a listener that takes exactly one valid callback: one
//! whose `state` is the one sent. Anything else it answers with an error page and ignores.

use super::OAuthError;
use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Longest wait for the person to finish logging in.
const LOGIN_WAIT: std::time::Duration = std::time::Duration::from_secs(300);
/// Longest request line and headers read from a connection to the listener.
const MAX_REQUEST: usize = 16 << 10;
const PAGE_DONE: &str = "<!doctype html><title>toolrun</title><p>You are logged in: return to toolrun. This window may be closed.</p>";

/// Random URL-safe text from `bytes` random bytes (PKCE verifiers, `state`).
pub(crate) fn random(bytes: usize) -> Result<String, OAuthError> {
    use ring::rand::SecureRandom;
    let mut buf = vec![0u8; bytes];
    ring::rand::SystemRandom::new()
        .fill(&mut buf)
        .map_err(|_| OAuthError("the system's random number generator failed".into()))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf))
}

/// The S256 challenge of a PKCE verifier (RFC 7636 §4.2).
pub(crate) fn challenge(verifier: &str) -> String {
    use sha2::Digest;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

/// The listener the authorization server redirects to.
pub(crate) struct Callback {
    listener: TcpListener,
    pub(crate) redirect_uri: String,
}

/// What the redirect carried.
pub(crate) struct Answer {
    pub(crate) code: String,
    pub(crate) iss: Option<String>,
}

impl Callback {
    pub(crate) async fn open() -> Result<Callback, OAuthError> {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|e| {
            OAuthError(format!(
                "cannot listen on 127.0.0.1 for the login's redirect: {e}"
            ))
        })?;
        let port = listener
            .local_addr()
            .map_err(|e| OAuthError(e.to_string()))?
            .port();
        Ok(Callback {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
        })
    }

    /// Waits for the one redirect that carries `state`.
    pub(crate) async fn wait(self, state: &str) -> Result<Answer, OAuthError> {
        let deadline = tokio::time::Instant::now() + LOGIN_WAIT;
        loop {
            let accepted = tokio::time::timeout_at(deadline, self.listener.accept()).await;
            let Ok(Ok((mut stream, _))) = accepted else {
                return Err(OAuthError(format!(
                    "no login arrived within {} s (the browser never came back to {})",
                    LOGIN_WAIT.as_secs(),
                    self.redirect_uri
                )));
            };
            let read = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                request_target(&mut stream),
            )
            .await;
            let Ok(Some(target)) = read else { continue };
            match answer_of(&target, state) {
                Outcome::Ignore(status, why) => respond(&mut stream, status, why).await,
                Outcome::Failed(why) => {
                    respond(&mut stream, "400 Bad Request", &why).await;
                    return Err(OAuthError(why));
                }
                Outcome::Done(answer) => {
                    respond(&mut stream, "200 OK", PAGE_DONE).await;
                    return Ok(answer);
                }
            }
        }
    }
}

enum Outcome {
    Ignore(&'static str, &'static str),
    Failed(String),
    Done(Answer),
}

fn answer_of(target: &str, state: &str) -> Outcome {
    let Ok(url) = url::Url::parse(&format!("http://127.0.0.1{target}")) else {
        return Outcome::Ignore("400 Bad Request", "not a login");
    };
    if url.path() != "/callback" {
        return Outcome::Ignore("404 Not Found", "not found");
    }
    let get = |k: &str| {
        url.query_pairs()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.into_owned())
    };
    if get("state").as_deref() != Some(state) {
        return Outcome::Ignore(
            "400 Bad Request",
            "this is not the login toolrun is waiting for (its state does not match)",
        );
    }
    if let Some(error) = get("error") {
        let text = get("error_description")
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        return Outcome::Failed(format!(
            "the authorization server refused the login ({error}{text})"
        ));
    }
    match get("code") {
        Some(code) => Outcome::Done(Answer {
            code,
            iss: get("iss"),
        }),
        None => Outcome::Failed("the login's redirect carried no code".into()),
    }
}

/// The request target of `GET TARGET HTTP/1.1`, read within [`MAX_REQUEST`].
async fn request_target(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 || buf.len() + n > MAX_REQUEST {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&buf);
    let mut parts = line.lines().next()?.split(' ');
    (parts.next()? == "GET").then_some(())?;
    parts.next().map(str::to_string)
}

async fn respond(stream: &mut tokio::net::TcpStream, status: &str, body: &str) {
    let body = if body.starts_with('<') {
        body.to_string()
    } else {
        format!("<!doctype html><title>toolrun</title><p>{body}</p>")
    };
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Opens `url` for the person: with `$BROWSER` when set (each `:`-separated command tried in
/// turn, `%s` standing for the URL, else the URL added as the last argument), else the
/// desktop's opener. The URL is printed as well, for a browser on another machine.
pub(crate) fn open(url: &str, server: &str) {
    eprintln!("toolrun: log in to MCP server `{server}` in the browser; if it does not open, visit:\n  {url}");
    if let Some(browser) = std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
        for command in browser.to_string_lossy().split(':') {
            if spawn(command, url) {
                return;
            }
        }
        return;
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    spawn(opener, url);
}

fn spawn(command: &str, url: &str) -> bool {
    let mut words: Vec<String> = command.split_whitespace().map(str::to_string).collect();
    if words.is_empty() {
        return false;
    }
    if words.iter().any(|w| w.contains("%s")) {
        for w in &mut words {
            *w = w.replace("%s", url);
        }
    } else {
        words.push(url.to_string());
    }
    let child = tokio::process::Command::new(&words[0])
        .args(&words[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match child {
        Ok(mut child) => {
            // Reaped when it ends; the login does not wait for the browser.
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_s256_challenge_is_the_unpadded_base64url_sha256_of_the_verifier() {
        // As Python's hashlib and base64.urlsafe_b64encode compute it.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K4uhvrfhrIJMAxG0XcjC1Ag2UE"),
            "QGVQDHdFn4_p06Cv1w6rwPJ3ROel-9oYMVPs8DQ4-JM"
        );
    }

    #[test]
    fn only_the_callback_with_the_state_sent_is_taken() {
        assert!(matches!(
            answer_of("/favicon.ico", "s"),
            Outcome::Ignore(..)
        ));
        assert!(matches!(
            answer_of("/callback?code=c&state=t", "s"),
            Outcome::Ignore(..)
        ));
        assert!(matches!(
            answer_of("/callback?error=access_denied&state=s", "s"),
            Outcome::Failed(_)
        ));
        match answer_of("/callback?code=c&state=s&iss=https%3A%2F%2Fa", "s") {
            Outcome::Done(a) => {
                assert_eq!(a.code, "c");
                assert_eq!(a.iss.as_deref(), Some("https://a"));
            }
            _ => panic!("the valid callback is taken"),
        }
    }
}
