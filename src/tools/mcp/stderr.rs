//! A stdio server's stderr: its end kept (where the reason it failed usually is), masked, for
//! errors and the `mcp_server_ended` event.

use crate::redact::Redactor;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::oneshot;

/// How much of the server's stderr is kept: its end, where the reason it failed usually is.
const STDERR_KEPT: usize = 64 << 10;

/// The last `STDERR_KEPT` bytes of the server's stderr, masked.
#[derive(Default)]
pub(super) struct Tail {
    bytes: std::collections::VecDeque<u8>,
    dropped: u64,
    done: bool,
    redactor: Redactor,
}

impl Tail {
    pub(super) fn new(redactor: Redactor) -> Tail {
        Tail {
            redactor,
            ..Tail::default()
        }
    }

    /// Keeps the redactor's slack more than is shown: a secret cut where older bytes were
    /// dropped would otherwise show its end unmasked at the start of the text.
    pub(super) fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend(chunk);
        let keep = STDERR_KEPT + self.redactor.slack();
        let over = self.bytes.len().saturating_sub(keep);
        self.bytes.drain(..over);
        self.dropped += over as u64;
    }

    /// The kept bytes, masked, and cut to the last `STDERR_KEPT` bytes once more came (never
    /// within the slack that may hold the end of a secret cut in half).
    pub(super) fn text(&self) -> String {
        let (a, b) = self.bytes.as_slices();
        let raw = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        let masked = self.redactor.str(&raw);
        let mut start = match self.dropped {
            0 => 0,
            _ => self.redactor.slack().min(masked.len()),
        };
        start = start.max(masked.len().saturating_sub(STDERR_KEPT));
        while !masked.is_char_boundary(start) {
            start += 1;
        }
        let not_kept = self.dropped + (raw.len() - (masked.len() - start)) as u64;
        match not_kept {
            0 => masked,
            n => format!("[{n} earlier bytes not kept]\n{}", &masked[start..]),
        }
    }
}

pub(super) async fn keep_stderr(
    mut err: impl AsyncRead + Unpin,
    tail: Arc<Mutex<Tail>>,
    done: oneshot::Sender<()>,
) {
    let mut buf = vec![0u8; 8192];
    while let Ok(n) = err.read(&mut buf).await {
        if n == 0 {
            break;
        }
        if let Ok(mut t) = tail.lock() {
            t.push(&buf[..n]);
        }
    }
    if let Ok(mut t) = tail.lock() {
        t.done = true;
    }
    let _ = done.send(());
}

pub(super) fn with_stderr(why: &str, stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        return format!("{why}; it wrote nothing on stderr");
    }
    // The end is where a crash says why; the whole tail is in the `mcp_server_ended` event.
    let mut start = stderr.len().saturating_sub(2000);
    while !stderr.is_char_boundary(start) {
        start += 1;
    }
    let cut = if start > 0 { "…" } else { "" };
    format!("{why}; its stderr ends with:\n{cut}{}", &stderr[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_cut_within_a_secret_shows_none_of_it() {
        let secret = "zq-secret-9f8e7d6c5b";
        let mut t = Tail::new(Redactor::named([("T".to_string(), secret.to_string())]));
        let end = format!(" and token {secret}");
        t.push(b"early ");
        t.push(secret.as_bytes());
        // What is kept begins with the secret's last four bytes.
        let more = STDERR_KEPT + t.redactor.slack() - 4 - end.len();
        t.push(&vec![b'b'; more]);
        t.push(end.as_bytes());
        assert!(t.bytes.iter().take(4).eq(b"6c5b".iter()));
        let text = t.text();
        assert!(!text.contains("6c5b"), "{}", &text[..60]);
        assert!(text.ends_with("bbb and token ***"), "{text}");
        assert!(text.len() <= STDERR_KEPT + 40);
    }

    #[test]
    fn stderr_keeps_its_last_bytes() {
        let mut t = Tail::default();
        t.push(&vec![b'a'; STDERR_KEPT]);
        t.push(b"the end");
        let text = t.text();
        assert!(
            text.starts_with("[7 earlier bytes not kept]\n"),
            "{}",
            &text[..40]
        );
        assert!(text.ends_with("aaathe end"));
        assert_eq!(t.bytes.len(), STDERR_KEPT);
    }
}
