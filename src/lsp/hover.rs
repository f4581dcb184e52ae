//! Hover: on a key, its description from the key tables; on a diagnostic code, its explanation;
//! on a tool, model or secret where it is named, its declaration.

use super::document::Document;
use super::index::{get, Decl, Index, Kind};
use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind, Position, Range};

/// The word under the cursor (letters, digits, `_`, `-`) and its range.
pub(super) fn word_at(doc: &Document, pos: Position) -> Option<(String, Range)> {
    let line = doc.line(pos.line);
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let before = doc.before(pos);
    let start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| is_word(*c))
        .last()
        .map_or(before.len(), |(i, _)| i);
    let rest = line.get(before.len()..).unwrap_or("");
    let end = before.len() + rest.find(|c: char| !is_word(c)).unwrap_or(rest.len());
    let word = line.get(start..end)?;
    if word.is_empty() {
        return None;
    }
    let units = |s: &str| s.encode_utf16().count() as u32;
    let range = Range::new(
        Position::new(pos.line, units(line.get(..start)?)),
        Position::new(pos.line, units(line.get(..end)?)),
    );
    Some((word.to_string(), range))
}

/// The secret named by `{{ secrets.NAME }}` under the cursor.
pub(super) fn secret_at(doc: &Document, pos: Position) -> Option<(String, Range)> {
    let (word, range) = word_at(doc, pos)?;
    let line = doc.line(pos.line);
    let start = doc.offset(range.start) - doc.offset(Position::new(pos.line, 0));
    line.get(..start)?
        .ends_with("secrets.")
        .then_some((word, range))
}

pub(super) fn hover(doc: &mut Document, pos: Position) -> Option<Hover> {
    let (word, range) = word_at(doc, pos)?;
    let markdown = |value: String| Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value,
        }),
        range: Some(range),
    };
    if let Some(info) = crate::codes::find(&word) {
        return Some(markdown(crate::codes::explain(info)));
    }
    let secret = secret_at(doc, pos);
    let at = doc.line_col(pos);
    let tree = doc.tree()?;
    let index = Index::of(tree);
    if let Some((name, _)) = secret {
        let declared = index.decl_of(Kind::Secret, &name).map_or_else(
            || "not declared in `secrets:`".to_string(),
            |d| format!("declared in `secrets:` (line {})", d.at.line),
        );
        return Some(markdown(format!(
            "**secret** `{name}`: the environment variable `{name}`, {declared}"
        )));
    }
    if let Some((kind, name, _)) = index.at(at) {
        if let Some(decl) = index.decl_of(kind, name) {
            return Some(markdown(describe(decl)));
        }
    }
    let (path, on_key) = super::index::key_path(tree, at)?;
    if !on_key {
        return None;
    }
    let (key, doc) = super::places::key_doc(&path, Some(tree))?;
    Some(markdown(format!("`{key}`: {doc}")))
}

fn describe(decl: &Decl<'_>) -> String {
    let text = |key: &str| decl.node.and_then(|n| get(n, key)).and_then(|v| v.as_str());
    let what = match decl.kind {
        Kind::Tool => "tool",
        Kind::Model => "model",
        Kind::Secret => "secret",
        Kind::Test => "test",
    };
    let mut out = format!("**{what}** `{}`", decl.name);
    if let Some(kind) = text("kind") {
        out.push_str(&format!(" (kind `{kind}`)"));
    }
    out.push_str(&format!(", declared at line {}", decl.at.line));
    for key in ["description", "model", "builtin", "query"] {
        if let Some(v) = text(key) {
            out.push_str(&format!("\n\n{key}: {v}"));
        }
    }
    let input = decl.node.and_then(|n| get(n, "input")).map(|n| n.to_json());
    let builtin = text("builtin")
        .and_then(|b| crate::builtins::all().iter().find(|i| i.name == b))
        .map(|b| (b.input_schema)());
    if let Some(schema) = input.or(builtin) {
        let pretty = serde_json::to_string_pretty(&schema).unwrap_or_default();
        out.push_str(&format!("\n\ninput schema:\n```json\n{pretty}\n```"));
    }
    out
}
