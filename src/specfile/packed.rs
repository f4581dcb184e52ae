//! The parsed tree in a compact binary form, so an unchanged spec is not parsed again
//! (`compile::checked` stores it beside the text it came from).
//!
//! Decoding treats its input as hostile: every length is checked against what is left of the
//! input before anything is allocated, depth and node counts have the parser's own limits, and
//! strings must be UTF-8. A malformed input is `None`, never a panic.

use super::yaml::{Key, Node, Value, MAX_DEPTH, MAX_NODES};
use crate::diag::Span;

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const INT: u8 = 3;
const FLOAT: u8 = 4;
const STR: u8 = 5;
const SEQ: u8 = 6;
const MAP: u8 = 7;

pub(crate) fn encode(node: &Node, out: &mut Vec<u8>) {
    span(node.span, out);
    match &node.value {
        Value::Null => out.push(NULL),
        Value::Bool(false) => out.push(FALSE),
        Value::Bool(true) => out.push(TRUE),
        Value::Int(i) => {
            out.push(INT);
            // Zigzag keeps small negative numbers short.
            varint(((i << 1) ^ (i >> 63)) as u64, out);
        }
        Value::Float(f) => {
            out.push(FLOAT);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Value::Str(s) => {
            out.push(STR);
            string(s, out);
        }
        Value::Seq(items) => {
            out.push(SEQ);
            varint(items.len() as u64, out);
            for item in items {
                encode(item, out);
            }
        }
        Value::Map(entries) => {
            out.push(MAP);
            varint(entries.len() as u64, out);
            for (key, value) in entries {
                span(key.span, out);
                string(&key.name, out);
                encode(value, out);
            }
        }
    }
}

/// The tree `encode` wrote, if `bytes` is exactly one well-formed tree within the parser's
/// limits.
pub(crate) fn decode(bytes: &[u8]) -> Option<Node> {
    let mut reader = Reader {
        bytes,
        at: 0,
        nodes: 0,
    };
    let node = reader.node(0)?;
    (reader.at == bytes.len()).then_some(node)
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn span(s: Span, out: &mut Vec<u8>) {
    // Ends are stored relative to starts: nearly always one byte each.
    varint(u64::from(s.line), out);
    varint(u64::from(s.col), out);
    varint(u64::from(s.end_line.wrapping_sub(s.line)), out);
    varint(u64::from(s.end_col), out);
}

fn string(s: &str, out: &mut Vec<u8>) {
    varint(s.len() as u64, out);
    out.extend_from_slice(s.as_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    nodes: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.varint()?).ok()
    }

    fn span(&mut self) -> Option<Span> {
        let line = self.u32()?;
        let col = self.u32()?;
        let end_line = line.wrapping_add(self.u32()?);
        let end_col = self.u32()?;
        Some(Span {
            line,
            col,
            end_line,
            end_col,
        })
    }

    /// A length that the rest of the input can hold, at `min` bytes an item.
    fn count(&mut self, min: usize) -> Option<usize> {
        let n = usize::try_from(self.varint()?).ok()?;
        (n.checked_mul(min)? <= self.bytes.len() - self.at).then_some(n)
    }

    fn string(&mut self) -> Option<String> {
        let n = self.count(1)?;
        let text = std::str::from_utf8(&self.bytes[self.at..self.at + n]).ok()?;
        self.at += n;
        Some(text.to_owned())
    }

    fn node(&mut self, depth: usize) -> Option<Node> {
        self.nodes += 1;
        if depth > MAX_DEPTH || self.nodes > MAX_NODES {
            return None;
        }
        let span = self.span()?;
        let value = match self.byte()? {
            NULL => Value::Null,
            FALSE => Value::Bool(false),
            TRUE => Value::Bool(true),
            INT => {
                let z = self.varint()?;
                Value::Int((z >> 1) as i64 ^ -((z & 1) as i64))
            }
            FLOAT => {
                let raw = self.bytes.get(self.at..self.at + 8)?;
                self.at += 8;
                Value::Float(f64::from_bits(u64::from_le_bytes(raw.try_into().ok()?)))
            }
            STR => Value::Str(self.string()?),
            // A node takes at least five bytes (a span and a tag), an entry ten.
            SEQ => {
                let n = self.count(5)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.node(depth + 1)?);
                }
                Value::Seq(items)
            }
            MAP => {
                let n = self.count(10)?;
                let mut entries = Vec::with_capacity(n);
                for _ in 0..n {
                    let span = self.span()?;
                    let name = self.string()?;
                    entries.push((Key { name, span }, self.node(depth + 1)?));
                }
                Value::Map(entries)
            }
            _ => return None,
        };
        Some(Node { span, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> Vec<(String, String)> {
        let mut out = Vec::new();
        for dir in ["specs", "tests/data"] {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "yaml") {
                    if let Ok(text) = std::fs::read_to_string(&p) {
                        out.push((p.display().to_string(), text));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn every_spec_of_the_repository_comes_back_as_parsed() {
        let all = specs();
        assert!(all.len() > 5, "found the specs");
        for (name, text) in all {
            let Ok((tree, _)) = super::super::yaml::parse_keeping_duplicates(&text) else {
                continue;
            };
            let mut bytes = Vec::new();
            encode(&tree, &mut bytes);
            assert_eq!(decode(&bytes).as_ref(), Some(&tree), "{name}");
        }
    }

    #[test]
    fn scalars_of_every_kind_and_extreme_values_survive() {
        let text = "a: [null, true, false, 0, -1, 9223372036854775807, -9223372036854775808, 1.5, .nan, -.inf, \"\", \"é😀\"]\nb: {}\nc: []\n";
        let (tree, _) = super::super::yaml::parse_keeping_duplicates(text).unwrap();
        let mut bytes = Vec::new();
        encode(&tree, &mut bytes);
        let back = decode(&bytes).unwrap();
        // NaN is not equal to itself: compare the encodings.
        let mut again = Vec::new();
        encode(&back, &mut again);
        assert_eq!(bytes, again);
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_refused_or_well_formed() {
        let text = "version: 1\ntools:\n  t: {kind: mock, responses: [{result: 1.5}], n: -3}\n";
        let (tree, _) = super::super::yaml::parse_keeping_duplicates(text).unwrap();
        let mut bytes = Vec::new();
        encode(&tree, &mut bytes);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        assert!(decode(&[bytes.as_slice(), &[0]].concat()).is_none());
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                // Either refused or some tree: never a panic nor a huge allocation.
                let _ = decode(&b);
            }
        }
    }

    #[test]
    fn lengths_beyond_the_input_and_runaway_depth_are_refused() {
        // A sequence claiming 2^40 items in a few bytes.
        let mut huge = vec![1, 1, 0, 2, SEQ];
        varint(1 << 40, &mut huge);
        assert!(decode(&huge).is_none());
        let mut deep = Vec::new();
        for _ in 0..=MAX_DEPTH + 1 {
            deep.extend_from_slice(&[1, 1, 0, 2, SEQ, 1]);
        }
        deep.extend_from_slice(&[1, 1, 0, 2, NULL]);
        assert!(decode(&deep).is_none());
        assert!(
            decode(&[1, 1, 0, 2, STR, 2, 0xff, 0xfe]).is_none(),
            "not UTF-8"
        );
    }
}
