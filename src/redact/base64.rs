//! Base64 as a secret lands in it: the text itself and the parts of it that depend on the
//! secret alone, at each of the three offsets.

pub(super) const STD: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 without padding.
pub fn base64(bytes: &[u8], url_safe: bool) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | u32::from(b) << (16 - 8 * i));
        for k in 0..=chunk.len() {
            let mut c = STD[((n >> (18 - 6 * k)) & 63) as usize];
            if url_safe {
                c = match c {
                    b'+' => b'-',
                    b'/' => b'_',
                    other => other,
                };
            }
            out.push(c as char);
        }
    }
    out
}

/// The base64 characters fixed by `secret` alone, for each of the three offsets at which it can
/// sit in an encoded stream (`user:secret` puts it at offset 5, i.e. 2), in both alphabets.
pub(super) fn base64_cores(secret: &[u8]) -> Vec<Vec<u8>> {
    let mut cores = Vec::new();
    for offset in 0..3usize {
        let mut stream = vec![0u8; offset];
        stream.extend_from_slice(secret);
        // Character k covers bits 6k..6k+6; the secret covers bits 8*offset..8*(offset+len).
        let first = (8 * offset).div_ceil(6);
        let end = 8 * (offset + secret.len()) / 6;
        for url_safe in [false, true] {
            let encoded = base64(&stream, url_safe);
            if let Some(core) = encoded.as_bytes().get(first..end) {
                if !core.is_empty() && !cores.iter().any(|c: &Vec<u8>| c == core) {
                    cores.push(core.to_vec());
                }
            }
        }
    }
    cores
}
