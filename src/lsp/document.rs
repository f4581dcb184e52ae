//! An open document: its text as the editor has it, edited in place by full or incremental
//! changes, and the conversions between LSP positions (UTF-16 code units on a line, as the
//! protocol counts by default) and the byte offsets and character columns toolrun counts in.

use crate::diag::Span;
use crate::line_index::LineIndex;
use crate::specfile::yaml::Node;
use lsp_types::{Position, Range};

pub(super) struct Document {
    pub(super) text: String,
    pub(super) version: i32,
    lines: LineIndex,
    /// The YAML tree of the last text that parsed: while a edit leaves the text broken, names
    /// and keys are still found in the tree before it (its positions may be off by the edit).
    tree: Option<Node>,
    parsed: bool,
}

impl Document {
    pub(super) fn new(text: String, version: i32) -> Document {
        Document {
            lines: LineIndex::new(&text),
            text,
            version,
            tree: None,
            parsed: false,
        }
    }

    pub(super) fn tree(&mut self) -> Option<&Node> {
        if !self.parsed {
            self.parsed = true;
            if self.text.len() as u64 <= crate::specfile::MAX_SPEC_BYTES {
                if let Ok(tree) = crate::specfile::yaml::parse(&self.text) {
                    self.tree = Some(tree);
                }
            }
        }
        self.tree.as_ref()
    }

    /// The 1-based line and character column of a position, as spans count.
    pub(super) fn line_col(&self, p: Position) -> (u32, u32) {
        self.lines.position(&self.text, self.offset(p))
    }

    /// Applies one change. A range past the end of the text is clamped to it (the text the
    /// client meant is unknowable; the next full change or reopen repairs any drift), and an
    /// inverted range counts as empty at its start.
    pub(super) fn apply(&mut self, range: Option<Range>, new_text: &str) {
        match range {
            None => self.text = new_text.to_string(),
            Some(r) => {
                let start = self.offset(r.start);
                let end = self.offset(r.end).max(start);
                self.text.replace_range(start..end, new_text);
            }
        }
        self.lines = LineIndex::new(&self.text);
        self.parsed = false;
    }

    /// Line `n` (0-based) with its ending, or "" past the end.
    fn raw_line(&self, n: u32) -> &str {
        let start = self.line_start(n);
        let end = self.line_start(n + 1);
        self.text.get(start..end).unwrap_or("")
    }

    /// The line (0-based) without its ending.
    pub(super) fn line(&self, n: u32) -> &str {
        self.lines.line(&self.text, n as usize + 1).unwrap_or("")
    }

    /// The text of a line before the cursor.
    pub(super) fn before(&self, p: Position) -> &str {
        let start = self.line_start(p.line);
        let at = self.offset(p).max(start);
        self.text.get(start..at).unwrap_or("")
    }

    /// The byte offset where 0-based line `n` starts; the end of the text past the last line.
    fn line_start(&self, n: u32) -> usize {
        self.lines.start(n as usize + 1).unwrap_or(self.text.len())
    }

    /// The byte offset of an LSP position, clamped to its line (and to the text).
    pub(super) fn offset(&self, p: Position) -> usize {
        let start = self.line_start(p.line);
        let line = self.raw_line(p.line);
        let content = line.trim_end_matches(['\n', '\r']);
        let mut units = 0u32;
        for (i, c) in content.char_indices() {
            if units >= p.character {
                return start + i;
            }
            units += c.len_utf16() as u32;
        }
        start + content.len()
    }

    /// 1-based line and character column (toolrun's spans) to an LSP position.
    pub(super) fn at_line_col(&self, line: u32, col: u32) -> Position {
        let text = self.lines.line(&self.text, line as usize).unwrap_or("");
        let units: usize = text
            .chars()
            .take(col.saturating_sub(1) as usize)
            .map(char::len_utf16)
            .sum();
        Position::new(line.saturating_sub(1), units as u32)
    }

    pub(super) fn range(&self, span: Span) -> Range {
        Range::new(
            self.at_line_col(span.line, span.col),
            self.at_line_col(span.end_line, span.end_col),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_columns_and_clamped_edits() {
        let mut d = Document::new("a: 名😀x\nb: 2\n".into(), 1);
        // 😀 is two UTF-16 units: `x` is at unit 6.
        assert_eq!(d.offset(Position::new(0, 6)), "a: 名😀".len());
        assert_eq!(d.range(Span::point(1, 6)).start, Position::new(0, 6));
        d.apply(
            Some(Range::new(Position::new(1, 3), Position::new(1, 4))),
            "3",
        );
        assert_eq!(d.text, "a: 名😀x\nb: 3\n");
        // Past the end: clamped, never a panic.
        d.apply(
            Some(Range::new(Position::new(9, 9), Position::new(99, 0))),
            "c",
        );
        assert_eq!(d.text, "a: 名😀x\nb: 3\nc");
        d.apply(
            Some(Range::new(Position::new(1, 99), Position::new(0, 0))),
            "!",
        );
        assert_eq!(d.text, "a: 名😀x\nb: 3!\nc");
        d.apply(None, "new");
        assert_eq!(d.text, "new");
    }
}
