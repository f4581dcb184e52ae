//! YAML into a tree that remembers where every node came from.
//!
//! The parser is event-based (saphyr-parser); the tree is built with an explicit stack so depth is
//! bounded by a limit, not by the thread's stack, and aliases are expanded against a node budget so
//! a "billion laughs" document is refused after a bounded amount of work and memory.

use crate::codes::Code;
use crate::diag::{Diagnostic, Span};
use saphyr_parser::{Event, Parser, ScalarStyle};
use std::collections::HashMap;
use std::hash::BuildHasher as _;

pub(crate) const MAX_DEPTH: usize = 128;
pub(crate) const MAX_NODES: usize = 1_000_000;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub(crate) span: Span,
    pub(crate) value: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Key {
    pub(crate) name: String,
    pub(crate) span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

impl Node {
    pub(crate) fn type_name(&self) -> &'static str {
        match &self.value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Tests only: the compiler reads mappings through [`super::read::Obj`], which checks each
    /// key against the place `keys.rs` declares it in (`Obj::peek` for a look ahead).
    #[cfg(test)]
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
            _ => None,
        }
    }

    #[cfg(test)]
    pub(crate) fn key_span(&self, key: &str) -> Option<Span> {
        match &self.value {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.name == key)
                .map(|(k, _)| k.span),
            _ => None,
        }
    }

    /// Follows an RFC 6901 pointer, returning the deepest node reached: a diagnostic about a
    /// nested value then points as close to it as the document allows.
    pub(crate) fn locate(&self, pointer: &str) -> &Node {
        let mut node = self;
        if pointer.is_empty() {
            return node;
        }
        for raw in pointer.trim_start_matches('/').split('/') {
            let token = raw.replace("~1", "/").replace("~0", "~");
            let next = match &node.value {
                Value::Map(entries) => entries
                    .iter()
                    .find(|(k, _)| k.name == token)
                    .map(|(_, v)| v),
                Value::Seq(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            match next {
                Some(n) => node = n,
                None => break,
            }
        }
        node
    }

    pub(crate) fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(J::Number)
                .unwrap_or(J::Null),
            Value::Str(s) => J::String(s.clone()),
            Value::Seq(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Value::Map(entries) => J::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.name.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

fn span_of(s: &saphyr_parser::Span) -> Span {
    Span {
        line: s.start.line() as u32,
        col: s.start.col() as u32 + 1,
        end_line: s.end.line() as u32,
        end_col: s.end.col() as u32 + 1,
    }
}

enum Frame {
    Seq {
        span: Span,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        span: Span,
        anchor: usize,
        entries: Vec<(Key, Node)>,
        keys: KeyIndex,
        pending_key: Option<PendingKey>,
    },
}

/// A mapping's keys by the hash of their name, pointing into its entries: finding a duplicate
/// costs a hash rather than a look at every earlier key (quadratic in a mapping of many keys),
/// and no name is stored twice. Small mappings, nearly all of a spec, are searched directly.
#[derive(Default)]
struct KeyIndex {
    /// Name hash → the first entry with that hash; empty until the mapping has `INDEXED` keys.
    by_hash: HashMap<u64, usize>,
    hasher: std::hash::RandomState,
}

impl KeyIndex {
    const INDEXED: usize = 16;

    /// Where `name` was defined among `entries`, if it was.
    fn find(&self, entries: &[(Key, Node)], name: &str) -> Option<Span> {
        let scan = || {
            entries
                .iter()
                .find(|(k, _)| k.name == name)
                .map(|(k, _)| k.span)
        };
        if entries.len() < Self::INDEXED {
            return scan();
        }
        let &i = self.by_hash.get(&self.hasher.hash_one(name))?;
        match &entries[i].0 {
            key if key.name == name => Some(key.span),
            // Two names with one hash, next to never with a random key: look at every entry.
            _ => scan(),
        }
    }

    /// Indexes the entry just pushed (and, when the mapping reaches the size worth an index,
    /// every earlier one).
    fn added(&mut self, entries: &[(Key, Node)]) {
        let from = match entries.len() {
            n if n < Self::INDEXED => return,
            n if n == Self::INDEXED => 0,
            n => n - 1,
        };
        for (i, (key, _)) in entries.iter().enumerate().skip(from) {
            let hash = self.hasher.hash_one(key.name.as_str());
            self.by_hash.entry(hash).or_insert(i);
        }
    }
}

/// A key whose value is still being read; the value of a duplicate is dropped, keeping the
/// first definition.
struct PendingKey {
    key: Key,
    duplicate: bool,
}

fn count_nodes(node: &Node) -> usize {
    match &node.value {
        Value::Seq(items) => 1 + items.iter().map(count_nodes).sum::<usize>(),
        Value::Map(entries) => {
            1 + entries
                .iter()
                .map(|(_, v)| 1 + count_nodes(v))
                .sum::<usize>()
        }
        _ => 1,
    }
}

/// Parses exactly one YAML document. Errors are diagnostics with codes E002 (syntax), E003
/// (shape), E004 (resource limits) and E005 (duplicate keys); duplicate keys are reported all
/// together, other errors stop the parse.
pub(crate) fn parse(source: &str) -> Result<Node, Vec<Diagnostic>> {
    match parse_keeping_duplicates(source)? {
        (node, duplicates) if duplicates.is_empty() => Ok(node),
        (_, duplicates) => Err(duplicates),
    }
}

/// Like [`parse`], but duplicate keys do not stop it: the document comes back (keeping each
/// key's first definition) with the E005 diagnostics beside it, so `check` can report every
/// other problem of the spec in the same pass.
pub(crate) fn parse_keeping_duplicates(
    source: &str,
) -> Result<(Node, Vec<Diagnostic>), Vec<Diagnostic>> {
    let mut parser = Parser::new_from_str(source);
    let mut tree = TreeBuilder::default();
    while let Some(next) = parser.next_event() {
        let (event, span) = next.map_err(|err| vec![syntax_error(&err)])?;
        let here = span_of(&span);
        if let Some((node, anchor)) = tree.event(event, here).map_err(|d| vec![d])? {
            tree.attach(node, anchor).map_err(|d| vec![d])?;
        }
    }
    match tree.root {
        Some(node) => Ok((node, tree.duplicates)),
        None => Err(vec![Diagnostic::new(Code::E003, "the spec is empty")
            .at(Span::point(1, 1))
            .help("start with `version: 1`")]),
    }
}

fn syntax_error(err: &saphyr_parser::ScanError) -> Diagnostic {
    let m = err.marker();
    let at = Span::point((m.line() as u32).max(1), m.col() as u32 + 1);
    // saphyr stops flow collections at its own depth limit, below ours for block nesting: it is
    // the same resource limit, so it gets the same code.
    if err.info().contains("recursion limit") {
        return depth_error(at);
    }
    Diagnostic::new(Code::E002, format!("YAML syntax error: {}", err.info()))
        .at(at)
        .help("check indentation and quoting near this position")
}

/// The tree under construction: open collections on an explicit stack, anchors, and what is
/// left of the node budget.
struct TreeBuilder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, (Node, usize)>,
    root: Option<Node>,
    documents: usize,
    budget: usize,
    duplicates: Vec<Diagnostic>,
}

impl Default for TreeBuilder {
    fn default() -> TreeBuilder {
        TreeBuilder {
            stack: Vec::new(),
            anchors: HashMap::new(),
            root: None,
            documents: 0,
            budget: MAX_NODES,
            duplicates: Vec::new(),
        }
    }
}

/// A node just completed, with its anchor id (0 for none).
type Completed = Option<(Node, usize)>;

impl TreeBuilder {
    fn event(&mut self, event: Event, here: Span) -> Result<Completed, Diagnostic> {
        match event {
            Event::StreamStart | Event::StreamEnd | Event::Nothing | Event::DocumentEnd => Ok(None),
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(Diagnostic::new(Code::E003, "a spec holds exactly one YAML document")
                        .at(here)
                        .help("remove the `---` separator and everything after it, or split into several spec files"));
                }
                Ok(None)
            }
            Event::Alias(id) => self.alias(id, here).map(Some),
            Event::Scalar(text, style, anchor, tag) => {
                if self.budget == 0 {
                    return Err(Diagnostic::new(
                        Code::E004,
                        format!("document has more than {MAX_NODES} nodes"),
                    )
                    .at(here));
                }
                self.budget -= 1;
                let forced_str = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let value = if style == ScalarStyle::Plain && !forced_str {
                    resolve_plain(&text)
                } else {
                    Value::Str(text.into_owned())
                };
                Ok(Some((Node { span: here, value }, anchor)))
            }
            Event::SequenceStart(anchor, _) => {
                self.open(Frame::Seq {
                    span: here,
                    anchor,
                    items: Vec::new(),
                })?;
                Ok(None)
            }
            Event::MappingStart(anchor, _) => {
                self.open(Frame::Map {
                    span: here,
                    anchor,
                    entries: Vec::new(),
                    keys: KeyIndex::default(),
                    pending_key: None,
                })?;
                Ok(None)
            }
            Event::SequenceEnd => self.close(true, here).map(Some),
            Event::MappingEnd => self.close(false, here).map(Some),
        }
    }

    /// A copy of the anchored node, paid for from the node budget ("billion laughs").
    fn alias(&mut self, id: usize, here: Span) -> Result<(Node, usize), Diagnostic> {
        let Some((node, size)) = self.anchors.get(&id) else {
            return Err(
                Diagnostic::new(Code::E002, "YAML alias refers to an unknown anchor").at(here),
            );
        };
        if *size > self.budget {
            return Err(Diagnostic::new(
                Code::E004,
                format!("aliases expand to more than {MAX_NODES} nodes"),
            )
            .at(here)
            .help("this looks like an alias bomb (\"billion laughs\"); write the values out or use fewer nested aliases"));
        }
        self.budget -= size;
        let mut copy = node.clone();
        copy.span = here;
        Ok((copy, 0))
    }

    fn open(&mut self, frame: Frame) -> Result<(), Diagnostic> {
        if self.stack.len() >= MAX_DEPTH {
            let (Frame::Seq { span, .. } | Frame::Map { span, .. }) = frame;
            return Err(depth_error(span));
        }
        self.stack.push(frame);
        Ok(())
    }

    /// The end of the innermost collection: its node, spanning from its start to `here`.
    fn close(&mut self, seq: bool, here: Span) -> Result<(Node, usize), Diagnostic> {
        let (span, anchor, value) = match (self.stack.pop(), seq) {
            (
                Some(Frame::Seq {
                    span,
                    anchor,
                    items,
                }),
                true,
            ) => (span, anchor, Value::Seq(items)),
            (
                Some(Frame::Map {
                    span,
                    anchor,
                    entries,
                    ..
                }),
                false,
            ) => (span, anchor, Value::Map(entries)),
            _ => {
                let what = if seq { "sequence" } else { "mapping" };
                return Err(
                    Diagnostic::new(Code::E002, format!("unbalanced YAML {what}")).at(here),
                );
            }
        };
        let span = Span {
            end_line: here.end_line,
            end_col: here.end_col,
            ..span
        };
        Ok((Node { span, value }, anchor))
    }

    /// Puts a completed node where it belongs: the root, the open sequence, or the open
    /// mapping (as a key, or as the value of the pending key).
    fn attach(&mut self, node: Node, anchor: usize) -> Result<(), Diagnostic> {
        if anchor != 0 {
            let size = count_nodes(&node);
            self.anchors.insert(anchor, (node.clone(), size));
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries,
                keys,
                pending_key,
                ..
            }) => match pending_key.take() {
                None => {
                    let key = map_key(&node)?;
                    let first = keys.find(entries, &key.name);
                    if let Some(first) = first {
                        self.duplicates.push(duplicate_key(&key, first));
                    }
                    let duplicate = first.is_some();
                    *pending_key = Some(PendingKey { key, duplicate });
                }
                // Keep the first definition: the duplicate is an error either way.
                Some(PendingKey {
                    duplicate: true, ..
                }) => {}
                Some(PendingKey { key, .. }) => {
                    entries.push((key, node));
                    keys.added(entries);
                }
            },
        }
        Ok(())
    }
}

/// A mapping key as a name: scalars by their text, collections refused.
fn map_key(node: &Node) -> Result<Key, Diagnostic> {
    let name = match &node.value {
        Value::Str(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Null => "null".to_string(),
        Value::Seq(_) | Value::Map(_) => {
            return Err(Diagnostic::new(
                Code::E003,
                "mapping keys must be plain names, not lists or mappings",
            )
            .at(node.span))
        }
    };
    Ok(Key {
        name,
        span: node.span,
    })
}

fn duplicate_key(key: &Key, first: Span) -> Diagnostic {
    let name = &key.name;
    Diagnostic::new(Code::E005, format!("duplicate key `{name}`"))
        .at(key.span)
        .label("second definition")
        .also(first, "first defined here")
        .help(format!(
            "`{name}` is already defined at line {}; remove one of them",
            first.line
        ))
}

fn depth_error(span: Span) -> Diagnostic {
    Diagnostic::new(
        Code::E004,
        format!("nesting is deeper than {MAX_DEPTH} levels"),
    )
    .at(span)
    .help("flatten the structure; no spec key needs this depth")
}

/// YAML 1.2 core schema resolution of plain scalars (so `no` stays a string, unlike YAML 1.1).
fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Value::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
        _ => {}
    }
    let bytes = text.as_bytes();
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(i) = text.parse::<i64>() {
            return Value::Int(i);
        }
        if let Ok(f) = text.parse::<f64>() {
            return Value::Float(f);
        }
    }
    if let Some(hex) = text.strip_prefix("0x") {
        if let Ok(i) = i64::from_str_radix(hex, 16) {
            return Value::Int(i);
        }
    }
    if let Some(oct) = text.strip_prefix("0o") {
        if let Ok(i) = i64::from_str_radix(oct, 8) {
            return Value::Int(i);
        }
    }
    let looks_numeric = bytes
        .iter()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
        && bytes.iter().any(u8::is_ascii_digit)
        && !text.ends_with(['e', 'E']);
    if looks_numeric {
        if let Ok(f) = text.parse::<f64>() {
            return Value::Float(f);
        }
    }
    Value::Str(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_follow_the_core_schema() {
        let n = parse("a: 1\nb: 1.5\nc: no\nd: ~\ne: '1'\nf: true\ng: -3\nh: 1e3\n").unwrap();
        assert_eq!(n.get("a").unwrap().value, Value::Int(1));
        assert_eq!(n.get("b").unwrap().value, Value::Float(1.5));
        assert_eq!(n.get("c").unwrap().value, Value::Str("no".into()));
        assert_eq!(n.get("d").unwrap().value, Value::Null);
        assert_eq!(n.get("e").unwrap().value, Value::Str("1".into()));
        assert_eq!(n.get("f").unwrap().value, Value::Bool(true));
        assert_eq!(n.get("g").unwrap().value, Value::Int(-3));
        assert_eq!(n.get("h").unwrap().value, Value::Float(1000.0));
    }

    #[test]
    fn spans_point_at_values_and_keys() {
        let n = parse("tools:\n  x:\n    kind: mock\n").unwrap();
        let kind = n.locate("/tools/x/kind");
        assert_eq!((kind.span.line, kind.span.col), (3, 11));
        assert_eq!(
            n.locate("/tools").key_span("x").map(|s| (s.line, s.col)),
            Some((2, 3))
        );
    }

    #[test]
    fn duplicate_keys_are_reported_at_the_second() {
        let errs = parse("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(errs[0].code, Code::E005);
        assert_eq!(errs[0].span.unwrap().line, 3);
    }

    #[test]
    fn duplicates_are_found_below_and_above_the_indexed_size() {
        let mut doc: String = (0..40).map(|i| format!("k{i}: {i}\n")).collect();
        doc.push_str("k3: x\nk39: y\nk40: 40\nk40: z\n");
        let (node, errs) = parse_keeping_duplicates(&doc).unwrap();
        let found: Vec<(u32, &str)> = errs
            .iter()
            .map(|e| (e.span.unwrap().line, e.help.as_deref().unwrap()))
            .collect();
        assert_eq!(
            found,
            [
                (41, "`k3` is already defined at line 4; remove one of them"),
                (
                    42,
                    "`k39` is already defined at line 40; remove one of them"
                ),
                (
                    44,
                    "`k40` is already defined at line 43; remove one of them"
                ),
            ]
        );
        assert_eq!(
            node.get("k3").unwrap().value,
            Value::Int(3),
            "the first is kept"
        );
        assert_eq!(node.get("k40").unwrap().value, Value::Int(40));
        let Value::Map(entries) = &node.value else {
            panic!()
        };
        assert_eq!(entries.len(), 41);
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut doc = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        let mut prev = 'a';
        for name in 'b'..='j' {
            doc.push_str(&format!("{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
            prev = name;
        }
        let errs = parse(&doc).unwrap_err();
        assert_eq!(errs[0].code, Code::E004);
    }

    #[test]
    fn deep_nesting_is_refused() {
        let doc = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(parse(&doc).unwrap_err()[0].code, Code::E004);
    }

    #[test]
    fn aliases_expand() {
        let n = parse("base: &b {x: 1}\nother: *b\n").unwrap();
        assert_eq!(
            n.get("other").unwrap().get("x").unwrap().value,
            Value::Int(1)
        );
    }
}
