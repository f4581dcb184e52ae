//! The matcher: every needle a secret can be spelled as, found in one pass over a text, with
//! escapes decoded on the way.

use super::base64::base64_cores;
use super::escapes::{decode_escape, is_escape_start, NAMED_ENTITIES, SIMPLE_ESCAPES};
use super::{BRANCH_BUDGET, MASK, MIN_SECRET_LEN, SAFE_SECRET_LEN, SIMD_MIN_LEN};
use aho_corasick::packed;
use std::sync::OnceLock;

#[derive(Default, Clone, Debug)]
pub(super) struct Matcher {
    pub(super) names: Vec<String>,
    /// The raw secret values, to deduplicate additions.
    pub(super) values: Vec<String>,
    pub(super) needles: Vec<Needle>,
    /// Bytes where a match can begin: a needle's first byte, or the start of an escape.
    pub(super) starts: [u64; 4],
    /// The needles by their first byte: at each position only those that can match are tried.
    pub(super) by_first: Vec<Vec<usize>>,
    /// Every pair of first two bytes a needle can begin with as written (a bit per pair): most
    /// positions of a text are ruled out by one lookup.
    pub(super) pairs: Vec<u64>,
    /// The longest needle, in bytes.
    pub(super) longest: usize,
    /// The shortest needle, in bytes: a text spells at most one byte of a needle per byte of
    /// its own (an escape is never shorter than what it stands for), so shorter texts hold none.
    pub(super) shortest: usize,
    /// Every byte a needle begins with (a bit per byte).
    pub(super) firsts: [u64; 4],
    /// Built on the first scan; rebuilt after a needle is added.
    pub(super) finder: OnceLock<Finder>,
}

#[derive(Clone, Debug)]
pub(super) struct Needle {
    bytes: Vec<u8>,
    secret: usize,
}

impl Matcher {
    pub(super) fn push(&mut self, name: String, value: String) {
        if value.len() < MIN_SECRET_LEN || self.values.contains(&value) {
            return;
        }
        let secret = self.names.len();
        let mut forms = vec![value.as_bytes().to_vec()];
        if value.chars().count() >= SAFE_SECRET_LEN {
            for core in base64_cores(value.as_bytes()) {
                if !forms.contains(&core) {
                    forms.push(core);
                }
            }
        }
        if self.by_first.is_empty() {
            self.by_first = vec![Vec::new(); 256];
            self.pairs = vec![0; 65536 / 64];
        }
        for bytes in forms {
            self.longest = self.longest.max(bytes.len());
            if self.shortest == 0 || bytes.len() < self.shortest {
                self.shortest = bytes.len();
            }
            self.set_start(bytes[0]);
            self.firsts[usize::from(bytes[0] >> 6)] |= 1 << (bytes[0] & 63);
            if bytes[0] == b' ' {
                self.set_start(b'+');
            }
            self.by_first[usize::from(bytes[0])].push(self.needles.len());
            let spellings = |b: u8| if b == b' ' { vec![b' ', b'+'] } else { vec![b] };
            for a in spellings(bytes[0]) {
                for b in spellings(bytes[1]) {
                    let pair = usize::from(a) << 8 | usize::from(b);
                    self.pairs[pair >> 6] |= 1 << (pair & 63);
                }
            }
            self.needles.push(Needle { bytes, secret });
        }
        for b in [b'%', b'\\', b'&'] {
            self.set_start(b);
        }
        self.names.push(name);
        self.values.push(value);
        self.finder = OnceLock::new();
    }

    pub(super) fn set_start(&mut self, b: u8) {
        self.starts[usize::from(b >> 6)] |= 1 << (b & 63);
    }

    #[inline]
    pub(super) fn can_start(&self, b: u8) -> bool {
        self.starts[usize::from(b >> 6)] & (1 << (b & 63)) != 0
    }

    /// Can a match start with these two bytes? Where neither is (or can start) an escape, a
    /// needle must begin with exactly that pair.
    #[inline]
    pub(super) fn pair_may_start(&self, b: u8, next: u8) -> bool {
        is_escape_start(b) || is_escape_start(next) || next == b'+' || self.is_pair(b, next)
    }

    /// The ranges of `t` that spell a secret, merged where they overlap, each with the secret
    /// it spells. `to_end`: `t` was cut, so a secret begun before its end counts as found.
    pub(super) fn spans(&self, t: &[u8], to_end: bool) -> Vec<Span> {
        self.scan(t, to_end, false, Strategy::Auto)
    }

    /// `first_only`: stop at the first match (a yes/no question needs no more).
    pub(super) fn scan(
        &self,
        t: &[u8],
        to_end: bool,
        first_only: bool,
        how: Strategy,
    ) -> Vec<Span> {
        let mut out: Vec<Span> = Vec::new();
        if self.needles.is_empty() {
            return out;
        }
        // A cut text is only ever the last few bytes before a cut, where a match may also be
        // an unfinished prefix: those are tried position by position.
        if to_end || how == Strategy::Every {
            for p in 0..t.len() {
                if self.may_start(t, p) && self.try_at(t, p, to_end, &mut out) && first_only {
                    break;
                }
            }
            return out;
        }
        if t.len() < self.shortest {
            return out;
        }
        let finder = self.finder();
        let simd = match how {
            Strategy::Auto if t.len() >= SIMD_MIN_LEN => finder.simd(),
            Strategy::Simd => finder.simd(),
            _ => None,
        };
        match simd {
            Some(teddy) => self.scan_candidates(t, first_only, &mut out, |at| {
                teddy
                    .find_in(t, aho_corasick::Span::from(at..t.len()))
                    .map(|m| m.start())
            }),
            None => self.scan_candidates(t, first_only, &mut out, |at| finder.next_in_table(t, at)),
        }
        out
    }
    /// The quick test before a position is tried: most bytes of most texts fail it.
    #[inline(always)]
    pub(super) fn may_start(&self, t: &[u8], p: usize) -> bool {
        let b = t[p];
        self.can_start(b) && (p + 1 >= t.len() || self.pair_may_start(b, t[p + 1]))
    }

    /// Tries every needle at `t[p]` and merges the longest match into `out`. Returns whether
    /// one matched.
    #[inline(never)]
    pub(super) fn try_at(&self, t: &[u8], p: usize, to_end: bool, out: &mut Vec<Span>) -> bool {
        let b = t[p];
        let mut best: Option<(usize, usize)> = None;
        let mut try_first = |first: u8| {
            for &k in &self.by_first[usize::from(first)] {
                let n = &self.needles[k];
                if let Some(end) = match_at(t, p, &n.bytes, to_end) {
                    if best.is_none_or(|(e, _)| end > e) {
                        best = Some((end, n.secret));
                    }
                }
            }
        };
        // The first unit is the byte itself, `+` standing for a space, or an escape.
        try_first(b);
        match b {
            b'+' => try_first(b' '),
            b'%' | b'\\' | b'&' => {
                if let Some((d, _)) = decode_escape(t, p) {
                    if d.buf[0] != b {
                        try_first(d.buf[0]);
                    }
                }
            }
            _ => {}
        }
        let Some((end, secret)) = best else {
            return false;
        };
        match out.last_mut() {
            Some(last) if p < last.1 => last.1 = last.1.max(end),
            _ => out.push((p, end, secret)),
        }
        true
    }

    /// Finds the places where a match can begin (see [`Matcher::scan_candidates`]): a
    /// needle's first two bytes written out (a space also as `+`), and the first two bytes of
    /// each escape that can decode to a byte a needle begins with or has second.
    pub(super) fn finder(&self) -> &Finder {
        self.finder.get_or_init(|| {
            let mut patterns: Vec<[u8; 2]> = Vec::new();
            let mut add = |p: [u8; 2]| {
                if !patterns.contains(&p) {
                    patterns.push(p);
                }
            };
            let spellings = |b: u8| if b == b' ' { vec![b' ', b'+'] } else { vec![b] };
            let mut wanted = [false; 256];
            for n in &self.needles {
                for a in spellings(n.bytes[0]) {
                    for b in spellings(n.bytes[1]) {
                        add([a, b]);
                    }
                }
                wanted[usize::from(n.bytes[0])] = true;
                wanted[usize::from(n.bytes[1])] = true;
            }
            // `%XY` decodes to a byte whose high half is X.
            for (v, _) in wanted.iter().enumerate().filter(|(_, w)| **w) {
                let high = b"0123456789ABCDEF"[v >> 4];
                add([b'%', high]);
                add([b'%', high.to_ascii_lowercase()]);
            }
            for (second, decoded) in SIMPLE_ESCAPES {
                if wanted[usize::from(decoded)] {
                    add([b'\\', second]);
                }
            }
            for (name, decoded) in NAMED_ENTITIES {
                if wanted[usize::from(decoded)] {
                    add([b'&', name[0]]);
                }
            }
            // `\uXXXX` and `&#...;` can stand for any character.
            add(*b"\\u");
            add(*b"&#");
            let mut table = Box::new([0u64; 1024]);
            for p in &patterns {
                let pair = usize::from(p[0]) << 8 | usize::from(p[1]);
                table[pair >> 6] |= 1 << (pair & 63);
            }
            Finder {
                patterns,
                table,
                simd: OnceLock::new(),
            }
        })
    }

    /// Tries only where a match can begin, as `next_hit(at)` finds them (the first position
    /// from `at` on where one of the finder's patterns is written). A match's first two units
    /// (each a byte as written or an escape) spell its needle's first two bytes, so it begins
    /// where they are written out, at an escape that decodes to a needle's first byte, or one
    /// byte before an escape that decodes to the second byte of a needle that begins with that
    /// byte. The finder skips escapes that cannot matter (`\"` in JSON of JSON, `%20`,
    /// `&amp;` unless a secret begins with their character): escape-dense text costs about
    /// what plain text does.
    pub(super) fn scan_candidates(
        &self,
        t: &[u8],
        first_only: bool,
        out: &mut Vec<Span>,
        mut next_hit: impl FnMut(usize) -> Option<usize>,
    ) {
        // Candidates come in order; one can come twice (before an escape, then as a pair).
        let mut next = 0;
        let mut at = 0;
        while at + 1 < t.len() {
            let Some(h) = next_hit(at) else {
                return;
            };
            at = h + 1;
            let escape = if is_escape_start(t[h]) {
                decode_escape(t, h).map(|(d, _)| d.buf[0])
            } else {
                None
            };
            let before = escape.is_some_and(|d| h > 0 && self.is_pair(t[h - 1], d));
            let here = (h + 1 < t.len() && self.is_pair(t[h], t[h + 1]))
                || escape.is_some_and(|d| self.is_first(d));
            for (p, candidate) in [(h.wrapping_sub(1), before), (h, here)] {
                if candidate && p >= next {
                    next = p + 1;
                    if self.may_start(t, p) && self.try_at(t, p, false, out) && first_only {
                        return;
                    }
                }
            }
        }
    }

    #[inline]
    pub(super) fn is_first(&self, b: u8) -> bool {
        self.firsts[usize::from(b >> 6)] & (1 << (b & 63)) != 0
    }

    /// Does some needle begin with `a` (a `+` for its space) followed by `b`?
    #[inline]
    pub(super) fn is_pair(&self, a: u8, b: u8) -> bool {
        let pair = usize::from(a) << 8 | usize::from(b);
        self.pairs[pair >> 6] & (1 << (pair & 63)) != 0
    }
}

/// A range of a text that spells a secret: start, end, and the secret's index.
pub(super) type Span = (usize, usize, usize);

/// How [`Matcher::scan`] finds where matches can start.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Strategy {
    /// The finder: SIMD on long texts, the table on short ones.
    Auto,
    /// Every position: the reference the finder is tested against.
    Every,
    /// The finder's table, whatever the length (tests and fuzzing).
    Table,
    /// The finder's SIMD search, whatever the length (tests and fuzzing).
    Simd,
}

/// The two-byte patterns where a match can begin (see [`Matcher::finder`]).
#[derive(Clone, Debug)]
pub(super) struct Finder {
    patterns: Vec<[u8; 2]>,
    /// A bit per pair of bytes: the patterns, looked up byte by byte in short texts.
    table: Box<[u64; 1024]>,
    /// The patterns in a SIMD searcher (Teddy), built on the first long text. `None` without
    /// SIMD or with too many patterns: the table then serves every text.
    simd: OnceLock<Option<packed::Searcher>>,
}

impl Finder {
    /// The first position from `at` on where a pattern is written, by table lookups.
    #[inline]
    pub(super) fn next_in_table(&self, t: &[u8], at: usize) -> Option<usize> {
        let table: &[u64; 1024] = &self.table;
        t.get(at..)?
            .windows(2)
            .position(|w| {
                let pair = usize::from(w[0]) << 8 | usize::from(w[1]);
                table[pair >> 6] & (1 << (pair & 63)) != 0
            })
            .map(|i| at + i)
    }

    pub(super) fn simd(&self) -> Option<&packed::Searcher> {
        self.simd
            .get_or_init(|| {
                let mut config = packed::Config::new();
                config.heuristic_pattern_limits(false);
                let mut builder = config.builder();
                builder.extend(&self.patterns);
                builder.build()
            })
            .as_ref()
    }
}

pub(super) fn replace(t: &[u8], spans: &[(usize, usize, usize)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(t.len());
    let mut last = 0;
    for &(a, b, _) in spans {
        out.extend_from_slice(&t[last..a]);
        out.extend_from_slice(MASK.as_bytes());
        last = b;
    }
    out.extend_from_slice(&t[last..]);
    out
}

/// Where the longest spelling of needle `n` that starts at `t[start]` ends.
pub(super) fn match_at(t: &[u8], start: usize, n: &[u8], to_end: bool) -> Option<usize> {
    let mut budget = BRANCH_BUDGET;
    walk(t, start, n, 0, to_end, &mut budget)
}

pub(super) fn walk(
    t: &[u8],
    mut i: usize,
    n: &[u8],
    mut j: usize,
    to_end: bool,
    budget: &mut u32,
) -> Option<usize> {
    loop {
        if j == n.len() {
            return Some(i);
        }
        let Some(&c) = t.get(i) else {
            return (to_end && j > 0).then_some(i);
        };
        let literal = c == n[j] || (c == b'+' && n[j] == b' ');
        let escape = if is_escape_start(c) {
            decode_escape(t, i).filter(|(d, _)| n[j..].starts_with(d.as_bytes()))
        } else {
            None
        };
        match (literal, escape) {
            (true, None) => {
                i += 1;
                j += 1;
            }
            (false, Some((d, len))) => {
                i += len;
                j += d.len();
            }
            (true, Some((d, len))) => {
                if *budget == 0 {
                    return Some(i);
                }
                *budget -= 1;
                let a = walk(t, i + 1, n, j + 1, to_end, budget);
                let b = walk(t, i + len, n, j + d.len(), to_end, budget);
                return a.max(b);
            }
            (false, None) => {
                // Cut in the middle of an escape (`...Zq%2`): the secret had begun.
                let unfinished =
                    to_end && j > 0 && matches!(c, b'%' | b'\\' | b'&') && t.len() - i < 12;
                return unfinished.then_some(t.len());
            }
        }
    }
}
