//! `Content-Encoding` decoding. reqwest's own decoders are left off (their features pull in
//! async-compression and a C zstd); here the body is decoded after it arrived, through
//! pure-Rust decoders read into a buffer that stops at the caller's size cap, so a small
//! "zip bomb" costs at most the cap in memory, never its expanded size.

use std::io::Read;

/// What we advertise in `Accept-Encoding`.
pub(crate) const ACCEPTED: &str = "gzip, br, zstd, deflate";

/// The decoded body, and whether it was cut at `max_bytes`.
pub(crate) struct Decoded {
    pub(crate) body: Vec<u8>,
    pub(crate) truncated: bool,
}

/// Undoes `encodings` (the `Content-Encoding` list, applied in order, so undone in reverse).
/// `cut`: the encoded body was already cut at the cap, so it ends early; what decodes before
/// the end is kept. Unknown encodings are an error rather than garbage handed to a parser.
pub(crate) fn decode(
    encodings: &str,
    body: Vec<u8>,
    max_bytes: u64,
    cut: bool,
) -> Result<Decoded, String> {
    let mut out = Decoded {
        body,
        truncated: cut,
    };
    let list: Vec<String> = encodings
        .split(',')
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty() && e != "identity")
        .collect();
    for enc in list.iter().rev() {
        let input = std::mem::take(&mut out.body);
        let reader: Box<dyn Read + '_> = match enc.as_str() {
            "gzip" | "x-gzip" => Box::new(flate2::read::MultiGzDecoder::new(&input[..])),
            // HTTP's "deflate" is zlib-wrapped; some servers send raw deflate anyway.
            "deflate" if zlib_header(&input) => {
                Box::new(flate2::read::ZlibDecoder::new(&input[..]))
            }
            "deflate" => Box::new(flate2::read::DeflateDecoder::new(&input[..])),
            "br" => Box::new(brotli_decompressor::Decompressor::new(&input[..], 4096)),
            "zstd" => Box::new(
                ruzstd::decoding::StreamingDecoder::new(&input[..])
                    .map_err(|e| format!("the zstd body does not decode: {e}"))?,
            ),
            other => {
                return Err(format!(
                    "the reply uses Content-Encoding `{other}`, which toolrun cannot decode"
                ))
            }
        };
        match read_capped(reader, max_bytes) {
            Ok((body, over)) => {
                out.body = body;
                out.truncated |= over;
            }
            // A body cut at the cap ends mid-stream: what decoded before that is gone with the
            // error, and the reply is too large anyway; say so rather than "corrupt".
            Err(_) if out.truncated => {}
            Err(e) => return Err(format!("the {enc} body does not decode: {e}")),
        }
    }
    Ok(out)
}

fn zlib_header(b: &[u8]) -> bool {
    b.len() >= 2 && b[0] & 0x0f == 8 && (u16::from(b[0]) << 8 | u16::from(b[1])) % 31 == 0
}

/// Reads at most `max + 1` bytes: one more than allowed says the body was longer.
fn read_capped(reader: impl Read, max: u64) -> std::io::Result<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    reader.take(max.saturating_add(1)).read_to_end(&mut out)?;
    let over = out.len() as u64 > max;
    out.truncate(max as usize);
    Ok((out, over))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn every_encoding_decodes() {
        let text = b"{\"ok\": true}".repeat(50);
        let d = decode("gzip", gzip(&text), 1 << 20, false).unwrap();
        assert_eq!((d.body.as_slice(), d.truncated), (&text[..], false));
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&text).unwrap();
        assert_eq!(
            decode("deflate", z.finish().unwrap(), 1 << 20, false)
                .unwrap()
                .body,
            text
        );
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        raw.write_all(&text).unwrap();
        assert_eq!(
            decode("Deflate", raw.finish().unwrap(), 1 << 20, false)
                .unwrap()
                .body,
            text
        );
        let zst = crate::test_support::http::zstd(&text);
        assert_eq!(decode("zstd", zst, 1 << 20, false).unwrap().body, text);
        let br = crate::test_support::http::brotli(&text);
        assert_eq!(decode("br", br, 1 << 20, false).unwrap().body, text);
        // Two encodings: undone last first.
        let both = crate::test_support::http::brotli(&gzip(&text));
        assert_eq!(decode("gzip, br", both, 1 << 20, false).unwrap().body, text);
        assert_eq!(
            decode("identity", text.clone(), 1 << 20, false)
                .unwrap()
                .body,
            text
        );
    }

    #[test]
    fn the_cap_applies_to_decoded_bytes() {
        let bomb = gzip(&vec![0u8; 8 << 20]);
        assert!(bomb.len() < 64 << 10, "{}", bomb.len());
        let d = decode("gzip", bomb, 1000, false).unwrap();
        assert_eq!(d.body.len(), 1000);
        assert!(d.truncated);
    }

    #[test]
    fn garbage_and_unknown_encodings_are_errors() {
        let e = decode("gzip", b"not gzip".to_vec(), 100, false)
            .err()
            .unwrap();
        assert!(e.contains("gzip body does not decode"), "{e}");
        let e = decode("compress", b"x".to_vec(), 100, false).err().unwrap();
        assert!(e.contains("`compress`"), "{e}");
        // Cut at the cap: what decoded is kept.
        let mut g = gzip(&b"abc".repeat(1000));
        g.truncate(g.len() / 2);
        let d = decode("gzip", g, 1 << 20, true).unwrap();
        assert!(d.truncated);
    }
}
