//! Secrets: read only from declared environment variables, and masked in everything toolrun
//! prints or writes (traces, events, fixtures, reports, errors), including when a server echoes
//! them back encoded.
//!
//! A server can hand a secret back in many spellings: percent-encoded in any subset of its
//! characters (`+` for a space, either hex case), JSON-escaped (`\u0026`, `\/`), as an HTML
//! entity, or base64 (standard or URL-safe, as in `Authorization: Basic user:secret`). Rather
//! than enumerate spellings (2^n for n encodable characters), the matcher decodes escapes as it
//! walks the text and compares the decoded bytes with the secret, so every mixture is one
//! pass. Base64 has no escapes to decode: a secret's bytes land in the base64 stream at one of
//! three offsets modulo 3, and the characters that depend on the secret alone are fixed for each
//! offset, so those three "cores" (in both alphabets) are searched like the secret itself.

mod base64;
mod escapes;
mod matcher;

use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

pub use base64::base64;
use matcher::{replace, Matcher, Strategy};

pub(crate) const MASK: &str = "***";

/// Below this many characters a secret can be guessed, and masking it would also hit ordinary
/// text: such secrets are masked only as text (not in base64) and a warning says so.
pub(crate) const SAFE_SECRET_LEN: usize = 8;

/// Values shorter than this are not masked at all: masking "a" would shred every text.
const MIN_SECRET_LEN: usize = 3;

/// The most text one byte of a secret can take once escaped (`\u00e9` is 6 characters for the
/// 2 bytes of `é`, `%41` is 3 for 1): how far past a cut a match can reach.
const MAX_EXPANSION: usize = 6;

/// Positions where both the literal character and an escape starting there match the secret
/// (only when the secret itself holds `%`, `\` or `&`). Each doubles the work of one match, so
/// past this many the matcher stops exploring and masks what it has matched (fail safe).
const BRANCH_BUDGET: u32 = 256;

/// From this length on, a text's candidates are found with SIMD ([`Finder::simd`]); shorter
/// ones (most strings of a JSON value) with a table lookup per byte, as a call costs more there.
const SIMD_MIN_LEN: usize = 40;

#[derive(Default, Clone, Debug)]
pub struct Secrets {
    values: BTreeMap<String, String>,
    /// Made on first use and shared: every HTTP tool call masks with it, and building one (its
    /// needles, tables and SIMD finder) cost more than the rest of a served call's masking.
    redactor: std::sync::OnceLock<Redactor>,
}

impl Secrets {
    /// Reads each declared variable; returns the names that are not set.
    pub(crate) fn from_env(names: &[String]) -> (Secrets, Vec<String>) {
        let mut values = BTreeMap::new();
        let mut missing = Vec::new();
        for name in names {
            match std::env::var(name) {
                Ok(v) if !v.is_empty() => {
                    values.insert(name.clone(), v);
                }
                _ => missing.push(name.clone()),
            }
        }
        (
            Secrets {
                values,
                redactor: Default::default(),
            },
            missing,
        )
    }

    pub(crate) fn insert(&mut self, name: &str, value: String) {
        self.values.insert(name.to_string(), value);
        self.redactor = Default::default();
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The secrets whose names `keep` accepts, as a JSON object: what a template may see of them.
    pub(crate) fn as_json_of(&self, keep: &dyn Fn(&str) -> bool) -> Value {
        Value::Object(
            self.values
                .iter()
                .filter(|(k, _)| keep(k))
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        )
    }

    /// Masks every secret (and every API key registered here) in all its forms.
    pub fn redactor(&self) -> Redactor {
        self.redactor
            .get_or_init(|| {
                Redactor::named(self.values.iter().map(|(k, v)| (k.clone(), v.clone())))
            })
            .clone()
    }

    /// The warnings for secrets too short to mask safely, one line each (names, never values).
    /// The mask itself (the offline stand-in) is not a real secret and is not reported.
    pub(crate) fn short_warnings(&self) -> Vec<String> {
        self.values
            .iter()
            .filter(|(_, v)| v.as_str() != MASK)
            .filter_map(|(name, v)| {
                let n = v.chars().count();
                if n >= SAFE_SECRET_LEN {
                    None
                } else if n < MIN_SECRET_LEN {
                    Some(format!("warning: secret `{name}` is only {n} character(s) long and cannot be masked at all; use a secret of at least {SAFE_SECRET_LEN} characters"))
                } else {
                    Some(format!("warning: secret `{name}` is only {n} characters long: it is masked as written and percent- or JSON-escaped, but not in base64, and masking it may hide unrelated text; use a secret of at least {SAFE_SECRET_LEN} characters"))
                }
            })
            .collect()
    }
}

/// A secret that survived masking in a document about to be written.
#[derive(Clone, Debug, PartialEq)]
pub struct Leak {
    /// The secret's name (the environment variable), never its value.
    pub(crate) secret: String,
    /// Where it was found: a JSON Pointer (`""` is the whole document).
    pub(crate) pointer: String,
}

impl std::fmt::Display for Leak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.pointer.is_empty() {
            "the document".to_string()
        } else {
            format!("`{}`", self.pointer)
        };
        write!(f, "secret `{}` would appear at {at}", self.secret)
    }
}

/// Cheap to clone: the matcher is shared.
#[derive(Default, Clone, Debug)]
pub struct Redactor {
    inner: Arc<Matcher>,
}

impl Redactor {
    #[cfg(test)]
    /// Unnamed values (tests, ad-hoc masking); a leak names them by position.
    pub(crate) fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        Redactor::named(
            values
                .into_iter()
                .enumerate()
                .map(|(i, v)| (format!("#{}", i + 1), v)),
        )
    }

    pub fn named(entries: impl IntoIterator<Item = (String, String)>) -> Redactor {
        let mut m = Matcher::default();
        for (name, value) in entries {
            m.push(name, value);
        }
        Redactor { inner: Arc::new(m) }
    }

    /// Masks `other`'s secrets too.
    pub(crate) fn merge(&mut self, other: &Redactor) {
        if other
            .inner
            .values
            .iter()
            .all(|v| self.inner.values.contains(v))
        {
            return;
        }
        let m = Arc::make_mut(&mut self.inner);
        for (name, value) in other.inner.names.iter().zip(&other.inner.values) {
            m.push(name.clone(), value.clone());
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.inner.needles.is_empty()
    }

    /// The prefilter against the reference, trying every position: where they find different
    /// spans (or a different first one) in `t`, both, for the fuzz target and the tests.
    pub(crate) fn prefilter_differs(&self, t: &[u8]) -> Option<String> {
        let m = &self.inner;
        let every = m.scan(t, false, false, Strategy::Every);
        let first = m.scan(t, false, true, Strategy::Every);
        [Strategy::Table, Strategy::Simd]
            .into_iter()
            .find_map(|how| {
                let found = m.scan(t, false, false, how);
                (found != every || m.scan(t, false, true, how) != first)
                    .then(|| format!("every position: {every:?}, {how:?}: {found:?}"))
            })
    }

    /// How many bytes past a cut a secret's encoded form can reach: read this much more than
    /// a limit, mask, then cut, and no secret is cut in half.
    pub(crate) fn slack(&self) -> usize {
        self.inner.longest * MAX_EXPANSION
    }

    /// `s` with every form of every secret replaced by the mask.
    pub fn str(&self, s: &str) -> String {
        self.mask(s).into_owned()
    }

    /// Masks `s` where it is: a string without secrets is left as it is, not copied.
    pub(crate) fn mask_in_place(&self, s: &mut String) {
        if let Cow::Owned(m) = self.mask(s) {
            *s = m;
        }
    }

    pub(crate) fn mask<'a>(&self, s: &'a str) -> Cow<'a, str> {
        match self.bytes(s.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(s),
            // Matches start and end on character boundaries (needles are whole UTF-8 text or
            // ASCII, escapes are ASCII), so this is valid UTF-8; lossy only as a safety net.
            Cow::Owned(b) => Cow::Owned(
                String::from_utf8(b)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            ),
        }
    }

    pub fn bytes<'a>(&self, b: &'a [u8]) -> Cow<'a, [u8]> {
        let spans = self.inner.spans(b, false);
        if spans.is_empty() {
            Cow::Borrowed(b)
        } else {
            Cow::Owned(replace(b, &spans))
        }
    }

    /// Masks every string and key in a JSON value.
    pub fn value(&self, v: &mut Value) {
        if self.is_empty() {
            return;
        }
        match v {
            Value::String(s) => {
                if let Cow::Owned(m) = self.mask(s) {
                    *s = m;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i)),
            Value::Object(map) => {
                let keys: Vec<String> = map
                    .keys()
                    .filter(|k| matches!(self.mask(k), Cow::Owned(_)))
                    .cloned()
                    .collect();
                for k in keys {
                    if let Some(val) = map.remove(&k) {
                        map.insert(self.str(&k), val);
                    }
                }
                map.values_mut().for_each(|i| self.value(i));
            }
            _ => {}
        }
    }

    /// Masks, then keeps at most `max_chars` characters, masking a secret begun just before the
    /// cut. Returns the kept text and how many characters of the masked text were dropped.
    pub(crate) fn shorten(&self, s: &str, max_chars: usize) -> (String, usize) {
        self.cut_masked(&self.mask(s), max_chars)
    }

    /// [`shorten`](Self::shorten) for text that is masked already (made from masked values).
    pub(crate) fn cut_masked(&self, masked: &str, max_chars: usize) -> (String, usize) {
        let Some((cut, _)) = masked.char_indices().nth(max_chars) else {
            return (masked.to_string(), 0);
        };
        let dropped = masked[cut..].chars().count();
        (self.mask_tail(&masked[..cut]), dropped)
    }

    /// Masks, then keeps at most `max` bytes (cutting `b`, which may not be text, anywhere).
    /// `was_cut`: `b` is itself the start of something longer. Returns the bytes and whether
    /// anything is missing at the end.
    pub(crate) fn cut_bytes(&self, b: &[u8], max: usize, was_cut: bool) -> (Vec<u8>, bool) {
        let masked = self.bytes(b);
        let (kept, cut) = if masked.len() > max {
            (&masked[..max], true)
        } else {
            (&masked[..], was_cut)
        };
        if !cut || self.is_empty() {
            return (kept.to_vec(), cut);
        }
        let from = kept.len().saturating_sub(self.slack());
        let tail = self.inner.spans(&kept[from..], true);
        let mut out = kept[..from].to_vec();
        out.extend(replace(&kept[from..], &tail));
        (out, true)
    }

    /// `s` was cut: a secret that begins in its last few bytes and runs to the end is masked.
    fn mask_tail(&self, s: &str) -> String {
        let mut from = s.len().saturating_sub(self.slack());
        while !s.is_char_boundary(from) {
            from -= 1;
        }
        let spans = self.inner.spans(&s.as_bytes()[from..], true);
        if spans.is_empty() {
            return s.to_string();
        }
        let tail = replace(&s.as_bytes()[from..], &spans);
        format!("{}{}", &s[..from], String::from_utf8_lossy(&tail))
    }

    /// The name of a secret that appears in `text` in any form, if one does: the last check
    /// before a document is written. A string of serialised JSON that spells a secret with
    /// backslash escapes (`\/`, `\u0026`) has them doubled; they are undone for the scan, as
    /// the trace writer's check does, so a report's embedded JSON is held to the same check.
    pub fn leaks(&self, text: &str) -> Option<&str> {
        self.first_in_json(text)
    }

    /// Whether `b` spells any needle, a stand-in's included: whether masking would change it.
    fn any(&self, b: &[u8]) -> bool {
        !self.inner.scan(b, false, true, Strategy::Auto).is_empty()
    }

    /// [`any`](Self::any) for serialised JSON: also where a string of the document spells a
    /// secret with backslash escapes: serialising doubles each backslash (a provider's `\/` is
    /// written `\\/`), and the text alone would hide the secret from the scan (issue 36 §1).
    fn any_in_json(&self, text: &str) -> bool {
        self.any(text.as_bytes())
            || json_strings_unescaped(text).is_some_and(|t| self.any(t.as_bytes()))
    }

    /// [`first`](Self::first) for serialised JSON, as [`any_in_json`](Self::any_in_json).
    fn first_in_json(&self, text: &str) -> Option<&str> {
        self.first(text.as_bytes())
            .or_else(|| json_strings_unescaped(text).and_then(|t| self.first(t.as_bytes())))
    }

    fn first(&self, b: &[u8]) -> Option<&str> {
        let m = &self.inner;
        // A stand-in for a secret (a replay's, an offline run's) is the mask itself: its
        // encodings are masked back to it, but the mask in a document is no leak.
        if !m.values.iter().any(|v| v == MASK) {
            let first = m.scan(b, false, true, Strategy::Auto);
            return first.first().map(|s| m.names[s.2].as_str());
        }
        m.scan(b, false, false, Strategy::Auto)
            .into_iter()
            .find(|s| m.values[s.2] != MASK)
            .map(|s| m.names[s.2].as_str())
    }

    /// A document as toolrun writes it (pretty JSON and a newline), masked and then checked:
    /// `Err` means it must not be written at all.
    /// Like [`Redactor::to_pretty`], serialised straight from `doc` (a trace of a large result
    /// is not copied into a `Value` first); only a document the scan flags is converted.
    pub(crate) fn to_pretty_from<T: serde::Serialize>(&self, doc: &T) -> Result<String, Leak> {
        let text = serde_json::to_string_pretty(doc).unwrap_or_default() + "\n";
        if !self.any_in_json(&text) {
            return Ok(text);
        }
        drop(text);
        self.to_pretty(serde_json::to_value(doc).unwrap_or_default())
    }

    pub fn to_pretty(&self, mut doc: Value) -> Result<String, Leak> {
        let pretty = |doc: &Value| serde_json::to_string_pretty(doc).unwrap_or_default() + "\n";
        // Documents are usually masked already (the engine masks as it goes): one scan of the
        // final bytes is then the whole cost. Only if it finds something is the document
        // masked and scanned again, and where a secret survives worked out.
        let text = pretty(&doc);
        if !self.any_in_json(&text) {
            return Ok(text);
        }
        self.value(&mut doc);
        let text = pretty(&doc);
        if self.first_in_json(&text).is_some() {
            self.check(&doc, &text)?;
        }
        Ok(text)
    }

    /// [`Redactor::to_pretty`] for one line of a JSON Lines file: compact, no newline.
    pub(crate) fn to_line(&self, mut doc: Value) -> Result<String, Leak> {
        let text = doc.to_string();
        if !self.any(text.as_bytes()) {
            return Ok(text);
        }
        self.value(&mut doc);
        let text = doc.to_string();
        if self.first(text.as_bytes()).is_some() {
            self.check(&doc, &text)?;
        }
        Ok(text)
    }

    /// The last check before a document leaves toolrun (fail closed): every string and key of
    /// `doc`, and the final bytes `text` it was serialised to, must hold no secret in any form.
    pub(crate) fn check(&self, doc: &Value, text: &str) -> Result<(), Leak> {
        if self.is_empty() {
            return Ok(());
        }
        if let Some((secret, pointer)) = self.locate(doc, String::new()) {
            return Err(Leak { secret, pointer });
        }
        if let Some(secret) = self.first_in_json(text) {
            // Only the serialisation spells it (across a key and its value, say): name the
            // smallest part of the document whose JSON still does.
            return Err(Leak {
                secret: secret.to_string(),
                pointer: self.enclosing(doc, String::new()),
            });
        }
        Ok(())
    }

    fn locate(&self, v: &Value, at: String) -> Option<(String, String)> {
        match v {
            Value::String(s) => self.first(s.as_bytes()).map(|n| (n.to_string(), at)),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .find_map(|(i, x)| self.locate(x, format!("{at}/{i}"))),
            Value::Object(map) => map.iter().find_map(|(k, x)| {
                let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match self.first(k.as_bytes()) {
                    Some(n) => Some((n.to_string(), here)),
                    None => self.locate(x, here),
                }
            }),
            _ => None,
        }
    }

    fn enclosing(&self, v: &Value, at: String) -> String {
        let spells = |x: &Value| {
            let compact = x.to_string();
            let pretty = serde_json::to_string_pretty(x).unwrap_or_default();
            self.first(compact.as_bytes()).is_some() || self.first(pretty.as_bytes()).is_some()
        };
        let child = match v {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .find(|(_, x)| spells(x))
                .map(|(i, x)| (format!("{at}/{i}"), x)),
            Value::Object(map) => map.iter().find(|(_, x)| spells(x)).map(|(k, x)| {
                (
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    x,
                )
            }),
            _ => None,
        };
        match child {
            Some((p, x)) => self.enclosing(x, p),
            None => at,
        }
    }
}

/// The text of serialised JSON with its strings' own escapes undone (`\\` to `\`, `\"` to
/// `"`), so the escapes a string holds are seen as the masker sees them in the string; `None`
/// when there are none (the text reads the same).
fn json_strings_unescaped(text: &str) -> Option<String> {
    if !text.contains("\\\\") {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(e @ ('\\' | '"')) => out.push(e),
            Some(other) => {
                out.push(c);
                out.push(other);
            }
            None => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const S: &str = "Zq+8/a=b c&d?e-f.g_h~i";

    /// A small deterministic generator (xorshift), so a failure names a reproducible text.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// `secret` with each character, at random, as written, percent-encoded (either hex case,
    /// `+` for a space), JSON-escaped or an HTML entity.
    fn spell_randomly(secret: &str, rng: &mut Rng) -> String {
        let mut out = String::new();
        for c in secret.chars() {
            let mut utf8 = [0; 4];
            let bytes = c.encode_utf8(&mut utf8).as_bytes();
            match rng.below(7) {
                0 => bytes
                    .iter()
                    .for_each(|b| out.push_str(&format!("%{b:02X}"))),
                1 => bytes
                    .iter()
                    .for_each(|b| out.push_str(&format!("%{b:02x}"))),
                2 if c == ' ' => out.push('+'),
                2 if c == '/' => out.push_str("\\/"),
                2 => {
                    let mut units = [0; 2];
                    for u in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{u:04x}"));
                    }
                }
                3 => out.push_str(&format!("&#{};", u32::from(c))),
                4 if c == '&' => out.push_str("&amp;"),
                4 => out.push_str(&format!("&#x{:X};", u32::from(c))),
                _ => out.push(c),
            }
        }
        out
    }

    /// The prefilter only skips positions where no match can start: on texts made of secrets
    /// spelled every way, pieces of them, lone and broken escapes and ordinary text, it finds
    /// exactly the spans (and the first one) that trying every position finds.
    #[test]
    fn the_prefilter_finds_what_trying_every_position_finds() {
        let secrets = [
            S,
            "sk-live-4f3a9b2c7d1e8f6a5b4c3d2e1f0a9b8c",
            "weather-key-0123456789",
            " lead+ing space",
            "+plus%41\\u0042&amp;x",
            "&lt;tag&gt;é😀\"q\"",
            "\\\\back\\/slash",
            "x/y\"z\\w'v\tu",
            "é😀ü-secret",
            "abc",
            "aaaaaaaaaa",
        ];
        let sets: Vec<Vec<&str>> = std::iter::once(secrets[..3].to_vec())
            .chain(std::iter::once(secrets.to_vec()))
            .chain(secrets.iter().map(|s| vec![*s]))
            .collect();
        let mut pieces: Vec<String> = [
            "%2B",
            "%2b",
            "%20",
            "+",
            " ",
            "\\u0026",
            "\\/",
            "\\\"",
            "\\\\",
            "&amp;",
            "&#x2F;",
            "&#47;",
            "%",
            "\\",
            "&",
            "%C3%A9",
            "\\u00e9",
            "\\ud83d\\ude00",
            "\\ud83d",
            "x",
            "q=",
            "\\u00",
            "%2",
            "&am",
            "a",
            "aa",
            "é",
            "\n",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for s in secrets {
            pieces.push(s.to_string());
            pieces.push(base64(format!("user:{s}").as_bytes(), false));
            pieces.push(base64(format!("u:{s}").as_bytes(), true));
            pieces.extend(s.char_indices().map(|(i, _)| s[..i].to_string()));
            pieces.extend(s.char_indices().map(|(i, _)| s[i..].to_string()));
        }
        for round in 0..6000 {
            let set = &sets[round % sets.len()];
            let r = Redactor::new(set.iter().map(|s| s.to_string()));
            let mut text = String::new();
            for _ in 0..rng.below(14) {
                if rng.below(4) == 0 {
                    let s = set[rng.below(set.len())];
                    let spelled = spell_randomly(s, &mut rng);
                    // A spelling cut short, or whole.
                    let cut = spelled.len() - rng.below(4).min(spelled.len());
                    text.push_str(&String::from_utf8_lossy(&spelled.as_bytes()[..cut]));
                } else {
                    text.push_str(&pieces[rng.below(pieces.len())]);
                }
            }
            if let Some(diff) = r.prefilter_differs(text.as_bytes()) {
                panic!("{set:?} on {text:?}: {diff}");
            }
        }
        // The comparison means something only where the prefilter exists (it needs SIMD).
        assert!(
            !cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
                || Redactor::new([S.to_string()])
                    .inner
                    .finder()
                    .simd()
                    .is_some()
        );
        // Long texts, as the masker sees them in a run: spellings anywhere, after long
        // stretches without a candidate.
        let r = Redactor::new(secrets.iter().map(|s| s.to_string()));
        for round in 0..60 {
            let mut text = String::new();
            for border in [4093, 9000, 70_001] {
                let shift = rng.below(6);
                while text.len() < border - shift {
                    text.push_str(&pieces[rng.below(pieces.len())]);
                    let room = (border - shift).saturating_sub(text.len());
                    text.push_str(&"z".repeat(room.min(rng.below(2000))));
                }
                // Spell one secret in full from exactly `border - shift` (the pieces may
                // have run past it: then the spelling begins later).
                let s = secrets[round % secrets.len()];
                text.push_str(&spell_randomly(s, &mut rng));
            }
            if let Some(diff) = r.prefilter_differs(text.as_bytes()) {
                panic!("round {round}: {diff}");
            }
            let every = r.inner.scan(text.as_bytes(), false, false, Strategy::Every);
            assert_eq!(r.inner.spans(text.as_bytes(), false), every);
            assert!(every.len() >= 3, "round {round}: {every:?}");
        }
    }

    fn r() -> Redactor {
        Redactor::named([("TOKEN".to_string(), S.to_string())])
    }

    #[test]
    fn masks_secrets_everywhere_in_json() {
        let r = Redactor::new(["s3cr3t-value".to_string()]);
        let mut v = json!({"a": "Bearer s3cr3t-value", "b": ["x s3cr3t-value"], "s3cr3t-value": 1});
        r.value(&mut v);
        assert_eq!(v, json!({"a": "Bearer ***", "b": ["x ***"], "***": 1}));
        assert!(r.leaks(&v.to_string()).is_none());
    }

    #[test]
    fn masks_every_percent_encoding_mixture() {
        let r = r();
        for form in [
            "Zq%2B8%2Fa%3Db+c%26d%3Fe-f.g_h~i",
            "Zq%2b8/a=b%20c&d?e-f.g_h~i",
            "Zq+8%2Fa=b+c%26d?e-f.g_h%7Ei",
            "%5Aq%2B8%2F%61%3D%62%20%63%26%64%3F%65%2D%66%2E%67%5F%68%7E%69",
        ] {
            assert_eq!(r.str(&format!("x={form}&y=1")), "x=***&y=1", "{form}");
        }
    }

    #[test]
    fn plus_is_a_space_only_where_the_secret_has_one() {
        let r = Redactor::new(["ab+cd efgh".to_string()]);
        assert_eq!(r.str("ab+cd+efgh"), "***");
        assert_eq!(r.str("ab%2Bcd+efgh"), "***");
        assert_eq!(r.str("ab cd efgh"), "ab cd efgh");
    }

    #[test]
    fn masks_json_and_html_escapes() {
        let r = Redactor::new(["a&b</c>\"d/é😀".to_string()]);
        for form in [
            r#"a\u0026b\u003c\/c\u003e\"d\/\u00e9\ud83d\ude00"#,
            r#"a\u0026b\u003C/c>\"d/é😀"#,
            "a&amp;b&lt;/c&gt;&quot;d/&#233;&#x1F600;",
        ] {
            assert_eq!(r.str(&format!("[{form}]")), "[***]", "{form}");
        }
    }

    #[test]
    fn masks_base64_of_the_secret_and_of_user_colon_secret() {
        let r = r();
        for prefix in ["", "u:", "us:", "user:", "alice@example.com:"] {
            let raw = format!("{prefix}{S}");
            for url_safe in [false, true] {
                let b = base64(raw.as_bytes(), url_safe);
                let masked = r.str(&format!("Basic {b}=="));
                assert!(masked.contains(MASK), "{prefix} {b} -> {masked}");
                assert!(!decodes_to_secret(&masked), "{prefix} {b} -> {masked}");
            }
        }
        // Escaped on the way (`\/` in JSON, `%2B` in a URL), it is still found.
        let b = base64(format!("user:{S}").as_bytes(), false);
        let escaped = b.replace('/', "\\/").replace('+', "%2B");
        assert!(r.str(&escaped).contains(MASK), "{escaped}");
    }

    /// Issue 36 §1: a string that spells the secret JSON-escaped, as Go and PHP write it, is
    /// serialised with its backslashes doubled; the scan of the written text must still see it.
    #[test]
    fn a_json_escaped_spelling_inside_a_string_is_masked_when_written() {
        #[derive(serde::Serialize)]
        struct Doc {
            error: String,
        }
        let key = "sk-tr/Qw7+9x&y<z>\"q";
        let r = Redactor::named([("KEY".to_string(), key.to_string())]);
        let escaped = r#"sk-tr\/Qw7+9x\u0026y\u003cz\u003e\"q"#;
        let doc = Doc {
            error: format!("HTTP 401: {escaped}."),
        };
        for text in [
            r.to_pretty_from(&doc),
            r.to_pretty(json!({ "calls": [{ "error": doc.error }] })),
        ] {
            let text = text.unwrap();
            assert!(text.contains("HTTP 401: ***."), "{text}");
            assert!(!text.contains("sk-tr"), "{text}");
        }
        let doc = json!({ "error": doc.error });
        let leak = r.check(&doc, &serde_json::to_string_pretty(&doc).unwrap());
        assert_eq!(leak.unwrap_err().pointer, "/error");
    }

    #[test]
    fn overlapping_occurrences_are_masked_whole() {
        let r = Redactor::new(["aaaaaaaa".to_string()]);
        assert_eq!(r.str("xaaaaaaaaaaaay"), "x***y");
    }

    #[test]
    fn cutting_never_leaves_a_prefix() {
        let r = r();
        let text = format!("{}{}", "x".repeat(10), "Zq%2B8%2Fa%3Db+c%26d");
        for max in 0..text.len() {
            let (kept, _) = r.shorten(&format!("{text}%3Fe-f.g_h~i tail"), max);
            assert!(!kept.contains("Zq"), "{max}: {kept}");
        }
        let body = format!("{}{}", "y".repeat(20), S).into_bytes();
        for cut in 21..body.len() {
            let (kept, truncated) = r.cut_bytes(&body[..cut], cut, true);
            assert!(truncated);
            assert!(!String::from_utf8_lossy(&kept).contains("Zq"), "{cut}");
        }
        // Masking first: the whole secret fits in the slack, so it is masked, then cut.
        let (kept, truncated) = r.cut_bytes(&body, 22, false);
        assert_eq!(
            (String::from_utf8_lossy(&kept).as_ref(), truncated),
            ("yyyyyyyyyyyyyyyyyyyy**", true)
        );
    }

    #[test]
    fn fail_closed_names_the_secret_and_where() {
        let r = Redactor::named([("K".to_string(), "abcd1234\": \"efgh5678".to_string())]);
        let doc = json!({"a": [1, {"abcd1234": "efgh5678"}]});
        let text = serde_json::to_string_pretty(&doc).unwrap();
        let leak = r.check(&doc, &text).unwrap_err();
        assert_eq!(
            leak,
            Leak {
                secret: "K".into(),
                pointer: "/a/1".into()
            }
        );
        let doc = json!({"x": {"y": "p abcd1234\": \"efgh5678"}});
        let leak = r.check(&doc, "").unwrap_err();
        assert_eq!(leak.pointer, "/x/y");
        assert!(!leak.to_string().contains("abcd"));
    }

    #[test]
    fn a_stand_in_masks_its_encodings_but_is_no_leak() {
        let mut s = Secrets::default();
        s.insert("KEY", MASK.into());
        s.insert("REAL", "long-enough-key".into());
        let r = s.redactor();
        assert_eq!(r.str("k=%2A%2A%2A"), "k=***");
        let doc = json!({ "authorization": "***", "url": "https://x/?k=%2A%2A%2A" });
        let written = r.to_pretty(doc);
        assert!(
            written.as_ref().is_ok_and(|t| t.contains("?k=***")),
            "{written:?}"
        );
        assert!(r
            .leaks("Bearer *** long-enough-key")
            .is_some_and(|n| n == "REAL"));
    }

    #[test]
    fn short_secrets_are_textual_only_and_warned_about() {
        let mut s = Secrets::default();
        s.insert("SHORT", "k3y!".into());
        s.insert("TINY", "ab".into());
        s.insert("LONG", "long-enough-key".into());
        s.insert("OFFLINE", MASK.into());
        let w = s.short_warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w.iter().all(|l| !l.contains("k3y!")));
        let r = s.redactor();
        assert_eq!(r.str("k3y%21"), "***");
    }

    #[test]
    fn text_without_secrets_is_borrowed() {
        assert!(matches!(r().mask("plain text % \\ & +"), Cow::Borrowed(_)));
    }

    #[test]
    fn the_fuzz_property_sees_every_unmasked_spelling() {
        for form in [
            S.to_string(),
            "Zq%2b8/a%3db+c&d%3Fe-f.g_h~i".to_string(),
            r"Zq+8\/a=b c\u0026d?e-f.g_h~i".to_string(),
            format!("Basic {}", base64(format!("user:{S}").as_bytes(), false)),
            format!("x{}", base64(format!("us:{S}").as_bytes(), true)),
        ] {
            assert!(decodes_to_secret(&format!("<{form}>")), "{form}");
        }
    }

    /// Every decoding named in the masker's contract, applied to the whole text.
    fn decodes_to_secret(text: &str) -> bool {
        crate::fuzzing::decodings(text)
            .iter()
            .any(|d| d.windows(S.len()).any(|w| w == S.as_bytes()))
    }
}
