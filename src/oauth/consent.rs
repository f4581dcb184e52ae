//! Whether a person's login may start while a run goes on: `toolrun auth login` logs in because
//! it was asked to; `run`, `test`, `call`, `chat` and a gateway `serve` ask first on a terminal
//! (y/N, no by default), and never open a browser in CI, with no terminal, or while stdin carries
//! an MCP session (`serve` over stdio).

use std::collections::HashMap;
use std::sync::OnceLock;

/// How a login that a run needs is decided.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Login {
    /// The person asked for it (`toolrun auth login`).
    Yes,
    /// On a terminal: ask, once per server and process.
    Ask,
    /// Never; why (for the error).
    Never(String),
}

/// Set by a command whose stdin is not the person's (`serve` over stdio): no login then,
/// whatever the terminal says.
static FORBIDDEN: OnceLock<String> = OnceLock::new();

/// Refuses every login of this process, for `why`.
pub(crate) fn forbid(why: &str) {
    let _ = FORBIDDEN.set(why.to_string());
}

/// How a run's login is decided now: `CI=true`, no terminal to ask on, or a forbidding command
/// mean never; else ask.
pub(crate) fn mode() -> Login {
    use std::io::IsTerminal;
    if let Some(why) = FORBIDDEN.get() {
        return Login::Never(why.clone());
    }
    if std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1") {
        return Login::Never("CI=true is set".into());
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Login::Never("there is no terminal".into());
    }
    Login::Ask
}

/// The answers given so far, by server: a step-up or a second tool of the same server asks no
/// second time, and the lock keeps two servers' questions from mixing on the terminal.
fn answers() -> &'static tokio::sync::Mutex<HashMap<String, bool>> {
    static ANSWERS: OnceLock<tokio::sync::Mutex<HashMap<String, bool>>> = OnceLock::new();
    ANSWERS.get_or_init(Default::default)
}

/// Asks the person on the terminal whether to log in to `server` at `issuer` now.
pub(crate) async fn ask(server: &str, issuer: &str) -> bool {
    let mut answers = answers().lock().await;
    if let Some(yes) = answers.get(server) {
        return *yes;
    }
    // A progress bar's redraw would hide the question: it is cleared until the answer.
    let _question = crate::term::screen::question();
    {
        use std::io::Write;
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "toolrun: MCP server `{}` needs you to log in (OAuth, at {}). Log in now in the browser? [y/N] ",
            crate::term::visible_line(server),
            crate::term::visible_line(issuer),
        );
        let _ = err.flush();
    }
    let answer = read_line().await.unwrap_or_default();
    let yes = matches!(answer.trim(), "y" | "Y" | "yes" | "Yes");
    if answer.is_empty() {
        // End of input: the prompt's line was never ended.
        eprintln!();
    }
    answers.insert(server.to_string(), yes);
    yes
}

/// One line of stdin, waited for without blocking the runtime: a run stopped meanwhile (a
/// signal, another tool's failure) drops this future and leaves no thread reading behind.
#[cfg(unix)]
async fn read_line() -> Option<String> {
    loop {
        let mut fd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, valid for the call; a zero timeout never blocks.
        let ready = unsafe { libc::poll(&mut fd, 1, 0) };
        if ready != 0 {
            // Readable, hung up or failed: the read below returns at once in each case (a
            // terminal in canonical mode is readable once a whole line is there).
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).ok()?;
    Some(line)
}

#[cfg(not(unix))]
async fn read_line() -> Option<String> {
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).ok().map(|_| line)
    })
    .await
    .ok()
    .flatten()
}
