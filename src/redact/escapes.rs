//! Escapes a server may spell a secret with: percent, JSON and HTML entities, decoded one at a
//! time as the matcher walks a text.

#[inline]
pub(super) fn is_escape_start(b: u8) -> bool {
    matches!(b, b'%' | b'\\' | b'&')
}

/// The character an escape at `t[i]` stands for, as UTF-8, and the escape's length.
#[derive(Clone, Copy)]
pub(super) struct Decoded {
    pub(super) buf: [u8; 4],
    len: u8,
}

impl Decoded {
    pub(super) fn byte(b: u8) -> Decoded {
        Decoded {
            buf: [b, 0, 0, 0],
            len: 1,
        }
    }
    pub(super) fn char(c: char) -> Decoded {
        let mut buf = [0; 4];
        let len = c.encode_utf8(&mut buf).len() as u8;
        Decoded { buf, len }
    }
    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
    pub(super) fn len(&self) -> usize {
        usize::from(self.len)
    }
}

#[inline]
pub(super) fn hex(b: u8) -> Option<u32> {
    (b as char).to_digit(16)
}

pub(super) fn hex4(t: &[u8]) -> Option<u32> {
    if t.len() < 4 {
        return None;
    }
    t[..4]
        .iter()
        .try_fold(0, |acc, &b| Some(acc * 16 + hex(b)?))
}

/// JSON's two-character escapes: the character after the backslash, and the byte it stands for.
pub(super) const SIMPLE_ESCAPES: [(u8, u8); 9] = [
    (b'"', b'"'),
    (b'\\', b'\\'),
    (b'/', b'/'),
    (b'\'', b'\''),
    (b'b', 8),
    (b'f', 12),
    (b'n', b'\n'),
    (b'r', b'\r'),
    (b't', b'\t'),
];

/// The named HTML entities that are decoded, and the character each stands for.
pub(super) const NAMED_ENTITIES: [(&[u8], u8); 5] = [
    (b"amp", b'&'),
    (b"lt", b'<'),
    (b"gt", b'>'),
    (b"quot", b'"'),
    (b"apos", b'\''),
];

#[inline]
pub(super) fn decode_escape(t: &[u8], i: usize) -> Option<(Decoded, usize)> {
    let rest = &t[i..];
    match rest.first()? {
        b'%' => {
            let hi = hex(*rest.get(1)?)?;
            let lo = hex(*rest.get(2)?)?;
            Some((Decoded::byte((hi * 16 + lo) as u8), 3))
        }
        b'\\' => {
            let simple = match rest.get(1)? {
                b'u' => {
                    let cp = hex4(&rest[2..])?;
                    return match cp {
                        0xD800..=0xDBFF => {
                            if rest.get(6..8)? != b"\\u" {
                                return None;
                            }
                            let low = hex4(&rest[8..])?;
                            if !(0xDC00..=0xDFFF).contains(&low) {
                                return None;
                            }
                            let c =
                                char::from_u32(0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00))?;
                            Some((Decoded::char(c), 12))
                        }
                        _ => Some((Decoded::char(char::from_u32(cp)?), 6)),
                    };
                }
                c => SIMPLE_ESCAPES.iter().find(|(e, _)| e == c)?.1,
            };
            Some((Decoded::byte(simple), 2))
        }
        b'&' => {
            let end = rest.iter().take(12).position(|&b| b == b';')?;
            let name = &rest[1..end];
            let c = match name {
                [b'#', b'x' | b'X', digits @ ..] if !digits.is_empty() => {
                    let n = digits
                        .iter()
                        .try_fold(0u32, |acc, &b| acc.checked_mul(16)?.checked_add(hex(b)?))?;
                    char::from_u32(n)?
                }
                [b'#', digits @ ..] if !digits.is_empty() => {
                    let n = digits.iter().try_fold(0u32, |acc, &b| {
                        acc.checked_mul(10)?.checked_add((b as char).to_digit(10)?)
                    })?;
                    char::from_u32(n)?
                }
                _ => char::from(NAMED_ENTITIES.iter().find(|(e, _)| *e == name)?.1),
            };
            Some((Decoded::char(c), end + 1))
        }
        _ => None,
    }
}
