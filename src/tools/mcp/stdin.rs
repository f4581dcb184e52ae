//! A stdio server's stdin, written one line per message. A server that stops reading fills the
//! pipe, and a write to a full pipe waits for ever: every write here has a deadline, and ending
//! the server cuts short whatever write is waiting, so neither a call nor the end of a run (or
//! of `serve`, SIGTERM included) can hang on a server that reads nothing.

use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::watch;

/// The longest a message toolrun sends on its own (an answer to the server's request, a
/// notification) may take to be written: a server that has read nothing for that long is not
/// reading.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) struct Stdin {
    pipe: tokio::sync::Mutex<Option<ChildStdin>>,
    /// Set once the server is being ended: a waiting write gives up at once.
    ending: watch::Sender<bool>,
}

impl Stdin {
    pub(crate) fn new(pipe: Option<ChildStdin>) -> Stdin {
        Stdin {
            pipe: tokio::sync::Mutex::new(pipe),
            ending: watch::Sender::new(false),
        }
    }

    /// Writes one message and its newline within `within`. A write cut short leaves part of a
    /// line behind, which no later message can follow: the pipe is closed then, and the server
    /// sees the end of its input.
    pub(crate) async fn write_line(&self, message: &[u8], within: Duration) -> std::io::Result<()> {
        let deadline = tokio::time::Instant::now() + within;
        let mut ending = self.ending.subscribe();
        let stopped =
            |why: &str| std::io::Error::new(std::io::ErrorKind::TimedOut, why.to_string());
        let not_reading = || {
            stopped(&format!(
                "it read none of its stdin for {within:?}: it has stopped reading"
            ))
        };
        let mut guard = tokio::select! {
            g = tokio::time::timeout_at(deadline, self.pipe.lock()) => g.map_err(|_| not_reading())?,
            _ = ending.wait_for(|e| *e) => return Err(stopped("it is being ended")),
        };
        if *ending.borrow() {
            return Err(stopped("it is being ended"));
        }
        let Some(w) = guard.as_mut() else {
            return Err(std::io::Error::other("its stdin is closed"));
        };
        // Messages have no embedded newlines (serde_json escapes them), so one line is one message.
        let mut framed = Vec::with_capacity(message.len() + 1);
        framed.extend_from_slice(message);
        framed.push(b'\n');
        let written = async {
            w.write_all(&framed).await?;
            w.flush().await
        };
        let cut = tokio::select! {
            r = written => return r,
            _ = tokio::time::sleep_until(deadline) => not_reading(),
            _ = ending.wait_for(|e| *e) => stopped("it is being ended"),
        };
        *guard = None;
        Err(cut)
    }

    /// Closes the pipe, the first step of ending the server, without waiting on a write: one in
    /// progress gives up first.
    pub(crate) async fn close(&self) {
        self.ending.send_replace(true);
        drop(self.pipe.lock().await.take());
    }
}
