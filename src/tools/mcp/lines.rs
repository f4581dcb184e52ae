//! A stdio server's stdout, one JSON-RPC message a line, each line bounded in memory.

use tokio::io::AsyncBufReadExt;

pub(super) enum Line {
    Full,
    TooLong,
    End,
}

/// One line of at most `cap` bytes (without its newline). A longer one is read to its end and
/// dropped past the cap, so memory stays bounded whatever the server writes.
pub(super) async fn read_line(
    out: &mut (impl tokio::io::AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let buf = out.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if line.is_empty() && !too_long {
                Line::End
            } else if too_long {
                Line::TooLong
            } else {
                Line::Full
            });
        }
        let (chunk, found) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        let room = cap.saturating_sub(line.len());
        if chunk.len() > room {
            too_long = true;
        }
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = found.unwrap_or(buf.len());
        out.consume(used);
        if found.is_some() {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() && !too_long {
                continue; // blank lines between messages
            }
            return Ok(if too_long { Line::TooLong } else { Line::Full });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    #[test]
    fn lines_are_capped_and_resynchronised() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let data: &[u8] = b"\n{\"a\":1}\r\n0123456789abcdef\n{\"b\":2}";
            let mut r = BufReader::with_capacity(4, data);
            let mut line = Vec::new();
            assert!(matches!(
                read_line(&mut r, &mut line, 10).await.unwrap(),
                Line::Full
            ));
            assert_eq!(line, b"{\"a\":1}");
            line.clear();
            assert!(matches!(
                read_line(&mut r, &mut line, 10).await.unwrap(),
                Line::TooLong
            ));
            assert_eq!(line, b"0123456789");
            line.clear();
            assert!(matches!(
                read_line(&mut r, &mut line, 10).await.unwrap(),
                Line::Full
            ));
            assert_eq!(line, b"{\"b\":2}");
            line.clear();
            assert!(matches!(
                read_line(&mut r, &mut line, 10).await.unwrap(),
                Line::End
            ));
        });
    }
}
