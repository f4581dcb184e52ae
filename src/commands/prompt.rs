//! Questions asked on the terminal while a run goes on (`run` and `chat` share them).

use crate::redact::Redactor;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// Asks on the terminal before a tool with side effects runs; every yes is logged so a
/// recording can replay the approval.
pub(crate) fn terminal_prompt(
    redactor: Redactor,
    approved: Arc<Mutex<Vec<String>>>,
    stop: crate::setup::Interrupt,
) -> impl Fn(&str, &serde_json::Value) -> bool + Send + Sync {
    move |name: &str, arguments: &serde_json::Value| -> bool {
        let _question = crate::term::screen::question();
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "toolrun: `{}` has side effects. Run it with {}? [y/N] ",
            crate::term::visible_line(name),
            crate::term::visible_line(&redactor.str(&arguments.to_string()))
        );
        let _ = err.flush();
        let mut answer = String::new();
        // The read blocks the run's only thread: a signal must end the wait, or SIGTERM would
        // go unseen until someone answers (issue 36 §19).
        if !stdin_ready_unless(&stop) {
            let _ = writeln!(err);
            return false;
        }
        let yes = std::io::stdin().read_line(&mut answer).is_ok()
            && matches!(answer.trim(), "y" | "Y" | "yes" | "Yes");
        if yes {
            if let Ok(mut log) = approved.lock() {
                log.push(name.to_string());
            }
        }
        yes
    }
}

/// Waits until stdin has something to read (true) or a signal stopped the run (false).
#[cfg(unix)]
pub(crate) fn stdin_ready_unless(stop: &crate::setup::Interrupt) -> bool {
    use std::sync::atomic::Ordering;
    while !stop.load(Ordering::SeqCst) {
        let mut fd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, valid for the call. A short timeout covers a signal that lands
        // between the check above and the poll.
        let ready = unsafe { libc::poll(&mut fd, 1, 100) };
        if ready > 0 {
            return true;
        }
        if ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return true;
        }
    }
    false
}

#[cfg(not(unix))]
pub(crate) fn stdin_ready_unless(_: &crate::setup::Interrupt) -> bool {
    true
}
