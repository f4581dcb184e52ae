//! Completion. The cursor's place is read from the text, not the tree: while a key or value is
//! being typed the document is often not YAML. Block indentation gives the keys above the
//! cursor, and a small scan of the line gives flow mappings and lists (`{ name: ` , `[a, `).

use super::document::Document;
use super::index::{Index, Kind};
use super::places::{resolve, At, Seg};
use crate::specfile::keys::{self, Place, Ty};
use crate::specfile::yaml::Node;
use lsp_types::{CompletionItem, CompletionItemKind, Position};

/// Where the cursor is: under `path`, at a key (`value_of` is `None`) or in the value of key
/// `value_of`, with `partial` typed so far.
#[derive(Debug, PartialEq)]
pub(super) struct Cursor {
    pub(super) path: Vec<Seg>,
    pub(super) value_of: Option<String>,
    pub(super) partial: String,
    /// The text before the partial word ends with `secrets.` inside a template.
    pub(super) secret: bool,
    /// The column of the cursor's key in a block mapping (`None` inside a flow one).
    pub(super) block: Option<usize>,
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

/// The dashes and the key a line starts with, each at its column.
fn line_tokens(line: &str) -> Vec<(usize, Seg)> {
    let mut out = Vec::new();
    let mut col = line.len() - line.trim_start_matches(' ').len();
    let mut rest = &line[col..];
    while rest == "-" || rest.starts_with("- ") {
        out.push((col, None));
        let after = rest[1..].trim_start_matches(' ');
        col += rest.len() - after.len();
        rest = after;
    }
    if let Some((key, _)) = rest.split_once(':') {
        let key = key.trim().trim_matches(['"', '\'']);
        let after = &rest[rest.find(':').map_or(0, |i| i + 1)..];
        if !key.is_empty()
            && key.chars().all(is_word)
            && (after.is_empty() || after.starts_with(' '))
        {
            out.push((col, Some(key.to_string())));
        }
    }
    out
}

pub(super) fn cursor(doc: &Document, pos: Position) -> Cursor {
    let before = doc.before(pos);
    let word_start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| is_word(*c))
        .last()
        .map_or(before.len(), |(i, _)| i);
    let (head, partial) = before.split_at(word_start);
    let secret = head.ends_with("secrets.") && head.contains("{{");
    let mine = line_tokens(head);
    // The current line's dashes are ancestors; its own key is the cursor's, not an ancestor.
    let dashes: Vec<(usize, Seg)> = mine.iter().filter(|(_, s)| s.is_none()).cloned().collect();
    let content = dashes.last().map_or_else(
        || head.len() - head.trim_start_matches(' ').len(),
        |(col, _)| col + 2,
    );
    let mut threshold = dashes.first().map_or(content, |(c, _)| *c);
    let mut above: Vec<Seg> = Vec::new();
    for l in (0..pos.line).rev() {
        if threshold == 0 {
            break;
        }
        let line = doc.line(l);
        let t = line.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        for (col, seg) in line_tokens(line).into_iter().rev() {
            if col < threshold {
                above.push(seg);
                threshold = col;
            }
        }
    }
    above.reverse();
    let mut path = above;
    path.extend(dashes.into_iter().map(|(_, s)| s));
    let rest = head.get(content.min(head.len())..).unwrap_or("");
    let (flow, value_of) = flow(rest);
    let block = (flow.is_empty() && value_of.is_none()).then_some(content);
    path.extend(flow);
    Cursor {
        path,
        value_of,
        partial: partial.to_string(),
        secret,
        block,
    }
}

/// The keys and lists a line opens before the cursor: `key: { a: [x, ` is `[key, a, item]`
/// with the cursor in a value of `a`.
fn flow(text: &str) -> (Vec<Seg>, Option<String>) {
    let mut stack: Vec<(bool, Option<String>)> = Vec::new();
    let mut key: Option<String> = None;
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            } else {
                word.push(c);
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            ':' if chars.peek().is_none_or(|n| *n == ' ') => {
                key = Some(word.trim().to_string());
                word.clear();
            }
            '{' | '[' => {
                stack.push((c == '[', key.take()));
                word.clear();
            }
            ',' => {
                if stack.last().is_some_and(|(list, _)| !list) {
                    key = None;
                }
                word.clear();
            }
            '}' | ']' => {
                stack.pop();
                key = None;
                word.clear();
            }
            _ => word.push(c),
        }
    }
    let mut segs = Vec::new();
    for (list, k) in &stack {
        if let Some(k) = k {
            segs.push(Some(k.clone()));
        }
        if *list {
            segs.push(None);
        }
    }
    if key.is_some() {
        return (segs, key);
    }
    (segs, None)
}

pub(super) fn complete(doc: &mut Document, pos: Position) -> Vec<CompletionItem> {
    let c = cursor(doc, pos);
    let present = c.block.map(|col| present_keys(doc, pos.line, col));
    let present = present.unwrap_or_default();
    let tree = doc.tree();
    let index = tree.map(Index::of).unwrap_or_default();
    let item = |label: &str, kind: CompletionItemKind, detail: &str| CompletionItem {
        label: label.to_string(),
        kind: Some(kind),
        detail: (!detail.is_empty()).then(|| detail.to_string()),
        ..Default::default()
    };
    let names = |kind: Kind, what: CompletionItemKind| -> Vec<CompletionItem> {
        index.names_of(kind).map(|n| item(n, what, "")).collect()
    };
    if c.secret {
        return names(Kind::Secret, CompletionItemKind::CONSTANT);
    }
    let (path, value_of) = match (&c.value_of, c.path.split_last()) {
        (Some(k), _) => (c.path.clone(), Some(k.clone())),
        // A bare list item: a new mapping of the list's place, or a value of the list's key.
        (None, Some((None, parent))) if !matches!(resolve(&c.path, tree), At::Place(_)) => {
            match parent.split_last() {
                Some((Some(k), grand)) => (grand.to_vec(), Some(k.clone())),
                _ => return Vec::new(),
            }
        }
        _ => (c.path.clone(), None),
    };
    match (resolve(&path, tree), value_of) {
        (At::Place(place), None) => place
            .all_keys()
            .filter(|k| !present.iter().any(|p| p == k.name))
            .map(|k| CompletionItem {
                insert_text: Some(format!("{}: ", k.name)),
                ..item(k.name, CompletionItemKind::PROPERTY, k.doc)
            })
            .collect(),
        (At::Place(place), Some(key)) => values(place, &key, &index, tree)
            .into_iter()
            .map(|(label, kind)| item(&label, kind, ""))
            .collect(),
        (At::ToolNames, None) if path.last() == Some(&Some("faults".to_string())) => {
            names(Kind::Tool, CompletionItemKind::FUNCTION)
        }
        _ => Vec::new(),
    }
}

/// The keys of the block mapping whose keys sit at column `col` around line `line` (that line's
/// own key, being typed, aside): they are not offered again.
fn present_keys(doc: &Document, line: u32, col: usize) -> Vec<String> {
    let mut keys = Vec::new();
    // Its own lines only: up to the line that opens it, down to the first that is not inside it.
    let mut scan = |n: u32, up: bool| -> bool {
        let text = doc.line(n);
        let t = text.trim_start();
        if t.is_empty() || t.starts_with('#') {
            return true;
        }
        let tokens = line_tokens(text);
        let indent = text.len() - t.len();
        // A dash left of the column opens the mapping (above) or the next item's (below).
        let opens = tokens.first().is_some_and(|(c, _)| *c < col);
        if !up && (opens || indent < col) {
            return false;
        }
        for (c, seg) in &tokens {
            if let (true, Some(key)) = (*c == col, seg) {
                keys.push(key.clone());
            }
        }
        !opens && indent >= col
    };
    for n in (0..line).rev() {
        if !scan(n, true) {
            break;
        }
    }
    let last = doc.text.lines().count() as u32;
    for n in line + 1..last {
        if !scan(n, false) {
            break;
        }
    }
    keys
}

const TOOL_REFS: &[(&str, &str)] = &[
    ("policy", "allow"),
    ("policy", "deny"),
    ("policy", "confirm"),
    ("test", "approve"),
    ("expect", "tool_calls"),
    ("expect", "tool_calls_include"),
    ("expect", "tool_calls_exclude"),
    ("scripted_call", "name"),
    ("tool_choice", "tool"),
];
const MODEL_REFS: &[(&str, &str)] = &[
    ("spec", "default_model"),
    ("test", "model"),
    ("judge", "model"),
];

fn values(
    place: &Place,
    key: &str,
    index: &Index<'_>,
    _tree: Option<&Node>,
) -> Vec<(String, CompletionItemKind)> {
    let owned = |names: &mut dyn Iterator<Item = &str>, kind| {
        names.map(|n| (n.to_string(), kind)).collect::<Vec<_>>()
    };
    let at = (place.def, key);
    if TOOL_REFS.contains(&at) {
        return owned(
            &mut index.names_of(Kind::Tool),
            CompletionItemKind::FUNCTION,
        );
    }
    if MODEL_REFS.contains(&at) {
        return owned(&mut index.names_of(Kind::Model), CompletionItemKind::CLASS);
    }
    let value = CompletionItemKind::ENUM_MEMBER;
    match at {
        ("tool_builtin", "builtin") => {
            return owned(&mut crate::builtins::all().iter().map(|b| b.name), value)
        }
        ("expect", "error_kinds") => {
            return owned(&mut crate::vocab::ErrorKind::NAMES.iter().copied(), value)
        }
        _ => {}
    }
    match place.key(key).map(|k| k.ty) {
        Some(Ty::Enum(names)) | Some(Ty::EnumOr(names, _)) => {
            owned(&mut names.iter().copied(), value)
        }
        Some(Ty::Bool) => owned(&mut ["true", "false"].into_iter(), value),
        Some(Ty::KindName) => {
            let kinds = if place.def.starts_with("model") {
                keys::MODEL_KINDS
            } else {
                keys::TOOL_KINDS
            };
            owned(&mut keys::kind_names(kinds), value)
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Cursor {
        let (before, after) = text.split_once('|').expect("a cursor mark");
        let doc = Document::new(format!("{before}{after}"), 1);
        let line = before.matches('\n').count() as u32;
        let col = before
            .rsplit('\n')
            .next()
            .unwrap_or("")
            .encode_utf16()
            .count() as u32;
        cursor(&doc, Position::new(line, col))
    }

    fn seg(s: &str) -> Seg {
        (s != "-").then(|| s.to_string())
    }

    #[test]
    fn the_cursor_is_placed_by_indentation_and_flow() {
        let c = at("version: 1\npolicy:\n  allow: [a, |\n");
        assert_eq!(
            (c.path, c.value_of),
            (vec![seg("policy"), seg("allow"), seg("-")], None)
        );
        let c = at("tests:\n  - name: x\n    expect:\n      sta|\n");
        assert_eq!(c.path, ["tests", "-", "expect"].map(seg));
        assert_eq!(c.partial, "sta");
        let c = at("tests:\n  - name: x\n    expect: { output_contains: \"a, b\", status: o|");
        assert_eq!(
            (c.path, c.value_of),
            (
                ["tests", "-", "expect"].map(seg).to_vec(),
                Some("status".into())
            )
        );
        let c =
            at("tools:\n  t:\n    kind: http\n    request:\n      url: \"https://x/{{ secrets.K|");
        assert!(c.secret);
        let c = at("models:\n  m:\n    kind: scripted\n    scripts:\n      - turns:\n          - tool_calls:\n              - name: |");
        assert_eq!(
            c.path,
            [
                "models",
                "m",
                "scripts",
                "-",
                "turns",
                "-",
                "tool_calls",
                "-"
            ]
            .map(seg)
        );
        assert_eq!(c.value_of.as_deref(), Some("name"));
    }

    #[test]
    fn keys_the_mapping_has_are_found_around_the_cursor() {
        let text = "tools:\n  t:\n    kind: mock\n    responses:\n      - result: 1\n    \n    description: d\n  u:\n    kind: http\ntests:\n  - name: a\n    \n    expect: {}\n  - name: b\n";
        let doc = Document::new(text.to_string(), 1);
        assert_eq!(
            present_keys(&doc, 5, 4),
            ["responses", "kind", "description"]
        );
        assert_eq!(present_keys(&doc, 11, 4), ["name", "expect"]);
        let c = at("tools:\n  t:\n    kind: mock\n    |\n");
        assert_eq!(c.block, Some(4));
        assert_eq!(at("policy: { allow: [a], |").block, None);
    }
}
