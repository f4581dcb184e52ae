//! The stdio framing (`Content-Length` headers), read and written on threads of their own.
//! lsp-server's own reader sizes its buffer from the header before reading a byte of the body,
//! so a client that sends `Content-Length: 99999999999` would make it allocate that much; this
//! one refuses a message over [`MAX_MESSAGE`] and skips its body, and one that is not JSON-RPC
//! is reported on stderr and skipped: neither ends the session.

use lsp_server::Message;
use std::io::{BufRead, Read, Write};
use std::sync::mpsc::{Receiver, Sender};

/// Far above any spec (the compiler refuses specs over 8 MiB) even JSON-escaped.
pub(super) const MAX_MESSAGE: usize = 64 << 20;

pub(super) enum Incoming {
    Message(Message),
    /// A message that was read but could not be understood; its id, when it had one, is
    /// answered with a parse error.
    Malformed(Option<lsp_server::RequestId>, String),
}

/// Reads messages from `input` until it ends or its framing breaks (then the session is over:
/// where the next message starts is unknowable).
pub(super) fn read_loop(mut input: impl BufRead, to: Sender<Incoming>) {
    loop {
        let frame = match read_frame(&mut input) {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(e) => {
                eprintln!("toolrun lsp: {e}; closing the session");
                return;
            }
        };
        let incoming = match frame {
            Err(why) => Incoming::Malformed(None, why),
            Ok(body) => match serde_json::from_slice::<Message>(&body) {
                Ok(m) => Incoming::Message(m),
                Err(e) => {
                    let id = serde_json::from_slice::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|v| serde_json::from_value(v.get("id")?.clone()).ok());
                    Incoming::Malformed(id, format!("not a JSON-RPC message: {e}"))
                }
            },
        };
        if to.send(incoming).is_err() {
            return;
        }
    }
}

/// One message's body; `Ok(Some(Err(_)))` for a body that was skipped.
fn read_frame(input: &mut impl BufRead) -> std::io::Result<Option<Result<Vec<u8>, String>>> {
    let mut length: Option<usize> = None;
    let mut line = String::new();
    let mut any = false;
    loop {
        line.clear();
        // A header line longer than this is no header.
        let n = input.by_ref().take(1024).read_line(&mut line)?;
        if n == 0 {
            return if any {
                Err(std::io::Error::other("the input ended inside a header"))
            } else {
                Ok(None)
            };
        }
        any = true;
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(std::io::Error::other(format!(
                "malformed header {header:?}"
            )));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            length = value.trim().parse().ok();
        }
    }
    let Some(length) = length else {
        return Err(std::io::Error::other("a message without Content-Length"));
    };
    if length > MAX_MESSAGE {
        std::io::copy(
            &mut input.by_ref().take(length as u64),
            &mut std::io::sink(),
        )?;
        return Ok(Some(Err(format!(
            "a message of {length} bytes, over the limit of {MAX_MESSAGE}"
        ))));
    }
    let mut body = vec![0; length];
    input.read_exact(&mut body)?;
    Ok(Some(Ok(body)))
}

/// Writes messages to stdout until every sender is gone or stdout closes.
pub(super) fn write_loop(from: Receiver<Message>) {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for message in from {
        if message.write(&mut out).is_err() || out.flush().is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_and_malformed_messages_are_skipped() {
        let big = MAX_MESSAGE + 1;
        let mut input = format!("Content-Length: {big}\r\n\r\n").into_bytes();
        input.extend(std::iter::repeat_n(b' ', big));
        input.extend(b"Content-Length: 3\r\n\r\n{x}");
        let exit = r#"{"jsonrpc":"2.0","method":"exit"}"#;
        input.extend(format!("Content-Length: {}\r\n\r\n{exit}", exit.len()).bytes());
        let (tx, rx) = std::sync::mpsc::channel();
        read_loop(std::io::Cursor::new(input), tx);
        let got: Vec<Incoming> = rx.try_iter().collect();
        assert_eq!(got.len(), 3);
        assert!(matches!(&got[0], Incoming::Malformed(None, m) if m.contains("over the limit")));
        assert!(matches!(&got[1], Incoming::Malformed(None, _)));
        assert!(
            matches!(&got[2], Incoming::Message(Message::Notification(n)) if n.method == "exit")
        );
    }
}
