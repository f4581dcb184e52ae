//! Typed, position-aware reading of the YAML tree. Every accessor reports what is wrong as a
//! diagnostic and returns `None`, so one pass finds every problem in a spec.

use super::keys::Place;
use super::yaml::{Key, Node, Value};
use crate::codes::Code;
use crate::diag::{did_you_mean, Diagnostic, Diagnostics, Span};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Spanned<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
}

/// A mapping whose keys were checked against the keys its place in the spec declares.
#[derive(Clone, Copy)]
pub(crate) struct Obj<'a> {
    pub(crate) node: &'a Node,
    pub(crate) entries: &'a [(Key, Node)],
    /// What the mapping is, when its keys are declared in [`super::keys`]: reading a key it does not
    /// declare is a bug, caught in debug builds. `None` for free-form keys (tool names, headers).
    place: Option<&'static Place>,
}

impl<'a> Obj<'a> {
    /// `what` names the place for messages ("tool `x`", "`limits`"); `place` declares its keys.
    pub(crate) fn new(
        node: &'a Node,
        what: &str,
        place: &'static Place,
        d: &mut Diagnostics,
    ) -> Option<Obj<'a>> {
        let obj = Obj::declared(node, what, place, d)?;
        for (key, _) in obj.entries {
            if !place.declares(&key.name) {
                d.push(unknown_key(key, what, &place.names()));
            }
        }
        Some(obj)
    }

    /// A mapping of `place` whose keys the caller checks itself (a tool: which keys are wrong
    /// depends on its kind).
    pub(crate) fn declared(
        node: &'a Node,
        what: &str,
        place: &'static Place,
        d: &mut Diagnostics,
    ) -> Option<Obj<'a>> {
        let mut obj = Obj::open(node, what, d)?;
        obj.place = Some(place);
        Some(obj)
    }

    /// The same mapping, read as `place` from now on (a tool once its kind is known).
    pub(crate) fn as_place(&self, place: &'static Place) -> Obj<'a> {
        Obj {
            place: Some(place),
            ..*self
        }
    }

    /// `node` read as `place` without reporting anything: for a pass that looks ahead before the
    /// place itself is compiled (and reported on), such as collecting tool names. `None` when
    /// it is not a mapping.
    pub(crate) fn peek(node: &'a Node, place: &'static Place) -> Option<Obj<'a>> {
        let mut obj = Obj::peek_free(node)?;
        obj.place = Some(place);
        Some(obj)
    }

    /// A mapping whose keys the spec format does not declare (a JSON Schema), read without
    /// reporting anything.
    pub(crate) fn peek_free(node: &'a Node) -> Option<Obj<'a>> {
        Obj::open(node, "", &mut Diagnostics::default())
    }

    /// A mapping with free-form keys (tool names, model names, headers).
    pub(crate) fn open(node: &'a Node, what: &str, d: &mut Diagnostics) -> Option<Obj<'a>> {
        match &node.value {
            Value::Map(entries) => Some(Obj {
                node,
                entries,
                place: None,
            }),
            _ => {
                d.push(expected(node, "a mapping", what));
                None
            }
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'a Node> {
        self.reading(key);
        self.entries
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(_, v)| v)
    }

    /// Every read of a declared place goes through here: in debug builds an undeclared key
    /// panics (the spec's shape is declared in `keys.rs` only), and unit tests record what
    /// the compiler reads, to find declared keys nothing reads.
    fn reading(&self, key: &str) {
        let Some(place) = self.place else { return };
        debug_assert!(
            place.declares(key),
            "`{key}` is read from `{}` but not declared there in specfile/keys.rs",
            place.def
        );
        #[cfg(test)]
        reads::record(place, key);
    }

    pub(crate) fn key(&self, key: &str) -> Option<&'a Key> {
        self.reading(key);
        self.entries
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(k, _)| k)
    }

    pub(crate) fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub(crate) fn string(&self, key: &str, d: &mut Diagnostics) -> Option<Spanned<String>> {
        self.get(key).and_then(|n| string(n, key, d))
    }

    pub(crate) fn require_string(
        &self,
        key: &str,
        what: &str,
        d: &mut Diagnostics,
    ) -> Option<Spanned<String>> {
        if !self.has(key) {
            d.push(missing(self.node, key, what));
            return None;
        }
        self.string(key, d)
    }

    pub(crate) fn bool(&self, key: &str, d: &mut Diagnostics) -> Option<Spanned<bool>> {
        let n = self.get(key)?;
        match n.value {
            Value::Bool(b) => Some(Spanned {
                value: b,
                span: n.span,
            }),
            _ => {
                d.push(expected(n, "`true` or `false`", &format!("`{key}`")));
                None
            }
        }
    }

    pub(crate) fn int(&self, key: &str, d: &mut Diagnostics) -> Option<Spanned<i64>> {
        let n = self.get(key)?;
        match n.value {
            Value::Int(i) => Some(Spanned {
                value: i,
                span: n.span,
            }),
            _ => {
                d.push(expected(n, "a whole number", &format!("`{key}`")));
                None
            }
        }
    }

    /// A whole number that must be at least `min`.
    pub(crate) fn count(&self, key: &str, min: i64, d: &mut Diagnostics) -> Option<Spanned<u64>> {
        let v = self.int(key, d)?;
        if v.value < min {
            d.push(
                Diagnostic::new(
                    Code::E023,
                    format!("`{key}` must be at least {min}, found {}", v.value),
                )
                .at(v.span)
                .help(format!("set `{key}` to a number of {min} or more")),
            );
            return None;
        }
        Some(Spanned {
            value: v.value as u64,
            span: v.span,
        })
    }

    pub(crate) fn number(&self, key: &str, d: &mut Diagnostics) -> Option<Spanned<f64>> {
        let n = self.get(key)?;
        match n.value {
            Value::Int(i) => Some(Spanned {
                value: i as f64,
                span: n.span,
            }),
            Value::Float(f) if f.is_finite() => Some(Spanned {
                value: f,
                span: n.span,
            }),
            _ => {
                d.push(expected(n, "a number", &format!("`{key}`")));
                None
            }
        }
    }

    pub(crate) fn duration(&self, key: &str, d: &mut Diagnostics) -> Option<Spanned<Duration>> {
        let n = self.get(key)?;
        let text = match &n.value {
            Value::Str(s) => s.clone(),
            Value::Int(i) => {
                d.push(
                    Diagnostic::new(Code::E024, format!("`{key}` needs a unit"))
                        .at(n.span)
                        .help(format!(
                            "write `{i}s` for seconds or `{i}ms` for milliseconds"
                        )),
                );
                return None;
            }
            _ => {
                d.push(expected(
                    n,
                    "a duration such as `500ms`, `5s` or `2m`",
                    &format!("`{key}`"),
                ));
                return None;
            }
        };
        match parse_duration(&text) {
            Ok(dur) if dur.is_zero() => {
                d.push(
                    Diagnostic::new(Code::E024, format!("`{key}` must be longer than zero"))
                        .at(n.span)
                        .help("use a positive duration such as `5s`"),
                );
                None
            }
            Ok(dur) => Some(Spanned {
                value: dur,
                span: n.span,
            }),
            Err(why) => {
                d.push(
                    Diagnostic::new(Code::E024, format!("invalid duration `{text}`: {why}"))
                        .at(n.span)
                        .help("write a number and a unit: `500ms`, `5s`, `2m` or `1h`"),
                );
                None
            }
        }
    }

    pub(crate) fn string_list(
        &self,
        key: &str,
        d: &mut Diagnostics,
    ) -> Option<Vec<Spanned<String>>> {
        let n = self.get(key)?;
        string_list(n, key, d)
    }
}

pub(crate) fn string(n: &Node, what: &str, d: &mut Diagnostics) -> Option<Spanned<String>> {
    match &n.value {
        Value::Str(s) => Some(Spanned {
            value: s.clone(),
            span: n.span,
        }),
        // A bare number or boolean where text is expected is almost always meant as text
        // (`ticker: 1234`), but silently converting hides typos in names: only accept text.
        _ => {
            d.push(expected(n, "a string", &format!("`{what}`")));
            None
        }
    }
}

pub(crate) fn string_list(
    n: &Node,
    what: &str,
    d: &mut Diagnostics,
) -> Option<Vec<Spanned<String>>> {
    match &n.value {
        Value::Seq(items) => Some(items.iter().filter_map(|i| string(i, what, d)).collect()),
        Value::Null => Some(Vec::new()),
        _ => {
            let example = match &n.value {
                Value::Str(s) => format!("[{s}]"),
                _ => "[a, b]".to_string(),
            };
            d.push(
                expected(n, "a list of strings", &format!("`{what}`")).help(format!(
                    "write a list: `{example}`, or one `- item` per line"
                )),
            );
            None
        }
    }
}

pub(crate) fn seq<'a>(n: &'a Node, what: &str, d: &mut Diagnostics) -> Option<&'a [Node]> {
    match &n.value {
        Value::Seq(items) => Some(items),
        Value::Null => Some(&[]),
        _ => {
            d.push(expected(n, "a list", what));
            None
        }
    }
}

pub(crate) fn expected(n: &Node, wanted: &str, what: &str) -> Diagnostic {
    Diagnostic::new(
        Code::E007,
        format!("{what} must be {wanted}, found {}", n.type_name()),
    )
    .at(n.span)
    .label(format!("expected {wanted}"))
}

pub(crate) fn missing(n: &Node, key: &str, what: &str) -> Diagnostic {
    // Point at the first line of the mapping: the key belongs there.
    missing_at(
        Span {
            end_line: n.span.line,
            end_col: n.span.col + 1,
            ..n.span
        },
        key,
        what,
    )
}

/// For a named mapping (a tool, a model) the name is the most precise place to point at.
pub(crate) fn missing_at(span: Span, key: &str, what: &str) -> Diagnostic {
    Diagnostic::new(
        Code::E008,
        format!("{what} is missing required key `{key}`"),
    )
    .at(span)
    .label(format!("no `{key}` here"))
    .help(format!("add `{key}:` to {what}"))
}

pub(crate) fn unknown_key(key: &Key, what: &str, allowed: &[&str]) -> Diagnostic {
    let mut help = did_you_mean(&key.name, allowed.iter().copied());
    if help.is_none() {
        help = Some(format!("allowed keys in {what}: {}", allowed.join(", ")));
    }
    Diagnostic::new(Code::E006, format!("unknown key `{}` in {what}", key.name))
        .at(key.span)
        .label("unknown key")
        .help_opt(help)
}

/// `500ms`, `5s`, `2m`, `1h`, `1m30s`, `1.5s`. Overflow is an error, not a wrap-around.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("it is empty".into());
    }
    let mut total_ms: u128 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!("expected a number at `{rest}`"));
        }
        let (num, after) = rest.split_at(num_len);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale_ms: f64 = match unit.trim() {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "" => return Err(format!("`{num}` has no unit")),
            other => return Err(format!("unknown unit `{other}`")),
        };
        let value: f64 = num
            .parse()
            .map_err(|_| format!("`{num}` is not a number"))?;
        let ms = value * scale_ms;
        if !ms.is_finite() || ms > 1e15 {
            return Err("it is too long".into());
        }
        total_ms += ms.round() as u128;
        rest = after;
    }
    // Anything longer than a year is a typo, and keeps tokio's timers far from overflow.
    if total_ms > 365 * 24 * 3_600_000 {
        return Err("it is longer than a year".into());
    }
    Ok(Duration::from_millis(total_ms as u64))
}

/// What the compiler read, by place, while unit tests compiled specs.
#[cfg(test)]
pub(crate) mod reads {
    use super::Place;
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    static READS: Mutex<BTreeSet<(&'static str, String)>> = Mutex::new(BTreeSet::new());

    pub(crate) fn record(place: &'static Place, key: &str) {
        // The owner of a base key is the base: `tool.timeout`, not `tool_http.timeout`.
        let def = match place.base {
            Some(base) if !place.owns(key) => base.def,
            _ => place.def,
        };
        let mut reads = READS.lock().unwrap_or_else(|e| e.into_inner());
        reads.insert((def, key.to_string()));
    }

    pub(crate) fn seen(def: &str, key: &str) -> bool {
        let reads = READS.lock().unwrap_or_else(|e| e.into_inner());
        reads.contains(&(def, key.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
    }
}
