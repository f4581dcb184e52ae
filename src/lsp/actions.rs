//! Quick fixes: a diagnostic whose help says "did you mean `x`?" offers replacing the mistyped
//! word with `x`, as an edit the client applies.

use super::document::Document;
use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, Position, Range, TextEdit,
    WorkspaceEdit,
};
use std::collections::HashMap;

pub(super) fn code_actions(doc: &Document, p: CodeActionParams) -> Vec<CodeActionOrCommand> {
    let mut out = Vec::new();
    for d in p.context.diagnostics {
        let fix = d
            .data
            .as_ref()
            .and_then(|v| v.get("fix"))
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .or_else(|| super::diagnostics::suggestion(&d.message));
        let Some(fix) = fix else { continue };
        let Some(range) = mistyped(doc, d.range, &fix) else {
            continue;
        };
        let edit = TextEdit::new(range, fix.clone());
        out.push(CodeActionOrCommand::CodeAction(CodeAction {
            title: format!("Change to `{fix}`"),
            kind: Some(CodeActionKind::QUICKFIX),
            diagnostics: Some(vec![d]),
            edit: Some(WorkspaceEdit {
                changes: Some(HashMap::from([(p.text_document.uri.clone(), vec![edit])])),
                ..Default::default()
            }),
            is_preferred: Some(true),
            ..Default::default()
        }));
    }
    out
}

/// The word inside `range` that the suggestion replaces: the one most like it (a diagnostic's
/// range may hold more than the word, such as quotes or a whole template).
fn mistyped(doc: &Document, range: Range, fix: &str) -> Option<Range> {
    if range.start.line != range.end.line {
        return None;
    }
    let line = doc.line(range.start.line);
    let start = doc.offset(range.start) - doc.offset(Position::new(range.start.line, 0));
    let end = doc.offset(range.end) - doc.offset(Position::new(range.start.line, 0));
    let text = line.get(start..end)?;
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let mut best: Option<(f64, usize, usize)> = None;
    let mut words = Vec::new();
    let mut from = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (is_word(c), from) {
            (true, None) => from = Some(i),
            (false, Some(a)) => {
                words.push((a, i));
                from = None;
            }
            _ => {}
        }
    }
    for (a, b) in words {
        let word = &text[a..b];
        if word == fix {
            continue;
        }
        let score = strsim::jaro_winkler(&word.to_lowercase(), &fix.to_lowercase());
        if best.is_none_or(|(s, _, _)| score > s) {
            best = Some((score, a, b));
        }
    }
    let (_, a, b) = best?;
    let units = |s: &str| s.encode_utf16().count() as u32;
    let line_no = range.start.line;
    Some(Range::new(
        Position::new(line_no, units(line.get(..start + a)?)),
        Position::new(line_no, units(line.get(..start + b)?)),
    ))
}
