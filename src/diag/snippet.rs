//! The source part of a human diagnostic: the lines a diagnostic points at, with `^` under the
//! primary span and `-` under related ones, each with its label — the layout of rustc and
//! `annotate-snippets`, drawn here because it needs only character widths (`unicode-width`).
//!
//! Spans count columns in characters; a terminal shows characters in cells. A CJK character or
//! an emoji takes two cells, a tab is drawn as four spaces (as rustc does), and a control
//! character is drawn as its `term::visible` escape (`\u{202e}`), so the source shown can never
//! drive the terminal and the carets still sit under what they mark.

use super::Span;
use crate::line_index::Lines;
use std::fmt::Write as _;
use unicode_width::UnicodeWidthChar;

/// Widest source line shown whole, in cells; a minified or generated line is cut around the
/// primary column so a single diagnostic cannot print megabytes.
pub(super) const MAX_SHOWN_LINE: usize = 120;

const CUT: &str = "...";

/// One span to underline.
pub(super) struct Mark<'a> {
    pub(crate) span: Span,
    pub(crate) label: Option<&'a str>,
    pub(crate) primary: bool,
}

/// Appends the snippet of `marks` (the primary first) to `out`, with a gutter `pad` wide.
/// Returns the marks it could not draw (their line is not in `source`, or it lies outside the
/// shown part of a cut line), for the caller to mention in a note.
pub(super) fn render<'a>(
    out: &mut String,
    source: Lines,
    marks: &[Mark<'a>],
    pad: usize,
) -> Vec<&'a str> {
    let text_of = |line: u32| source.line(line);
    let mut missed = Vec::new();
    let mut shown: Vec<u32> = marks
        .iter()
        .filter(|m| text_of(m.span.line).is_some())
        .map(|m| m.span.line)
        .collect();
    shown.sort_unstable();
    shown.dedup();
    for m in marks {
        if text_of(m.span.line).is_none() {
            missed.extend(m.label);
        }
    }
    if shown.is_empty() {
        return missed;
    }
    let blank = " ".repeat(pad);
    let _ = writeln!(out, "{blank} |");
    let mut previous: Option<u32> = None;
    for &line in &shown {
        match previous {
            Some(p) if line == p + 2 => {
                if let Some(between) = text_of(p + 1) {
                    let row = Row::new(between, None);
                    let _ = writeln!(out, "{:>pad$} | {}", p + 1, row.text.trim_end());
                }
            }
            Some(p) if line > p + 2 => {
                let _ = writeln!(out, "...");
            }
            _ => {}
        }
        previous = Some(line);
        let on_line: Vec<&Mark> = marks.iter().filter(|m| m.span.line == line).collect();
        let anchor = on_line
            .iter()
            .find(|m| m.primary)
            .unwrap_or(&on_line[0])
            .span
            .col;
        let text = text_of(line).unwrap_or_default();
        let row = Row::new(text, Some(anchor));
        let _ = writeln!(out, "{line:>pad$} | {}", row.text.trim_end());
        let mut drawn = Vec::new();
        for m in on_line {
            match row.cells(m.span) {
                Some((start, end)) => drawn.push((start, end, m)),
                None => missed.extend(m.label),
            }
        }
        for underline in draw(&drawn) {
            let _ = writeln!(out, "{blank} | {}", underline.trim_end());
        }
    }
    missed
}

/// One source line as shown: possibly cut, with the cell at which each character starts.
struct Row {
    text: String,
    /// Cell (in `text`) where each source character starts; one more entry for the line's end.
    starts: Vec<usize>,
    /// Source characters `from..to` are shown; the rest were cut.
    from: usize,
    to: usize,
    /// The line's end is shown (nothing cut on the right), so a column past it can be drawn.
    open_end: bool,
}

impl Row {
    /// The line `text`, cut around the 1-based character column `anchor` when it is too wide.
    fn new(text: &str, anchor: Option<u32>) -> Row {
        let text = text.trim_end();
        let chars: Vec<char> = text.chars().collect();
        let widths: Vec<usize> = chars.iter().map(|&c| cell_width(c)).collect();
        let total: usize = widths.iter().sum();
        let (from, to) = if total <= MAX_SHOWN_LINE {
            (0, chars.len())
        } else {
            window(&widths, anchor.map_or(0, |a| a.max(1) as usize - 1))
        };
        let mut shown = String::new();
        let mut starts = vec![0; chars.len() + 1];
        if from > 0 {
            shown.push_str(CUT);
        }
        let mut cell = if from > 0 { CUT.len() } else { 0 };
        for i in from..to {
            starts[i] = cell;
            push_shown(&mut shown, chars[i]);
            cell += widths[i];
        }
        starts[to] = cell;
        if to < chars.len() {
            shown.push_str(CUT);
        }
        Row {
            text: shown,
            starts,
            from,
            to,
            open_end: to == chars.len(),
        }
    }

    /// The cells `start..end` that `span` covers on this row, cut where the line is cut; `None`
    /// when its start is not shown. A span running onto later lines is drawn to the line's end.
    fn cells(&self, span: Span) -> Option<(usize, usize)> {
        let first = span.col.max(1) as usize - 1;
        let last = if span.end_line == span.line && span.end_col > span.col {
            span.end_col as usize - 1
        } else {
            self.to.max(first + 1)
        };
        let at = |i: usize| -> Option<usize> {
            if i < self.from {
                None
            } else if i <= self.to {
                Some(self.starts[i])
            } else if self.open_end {
                // Past the end of the line (a missing value at its end): one cell per column.
                Some(self.starts[self.to] + (i - self.to))
            } else {
                None
            }
        };
        let start = at(first)?;
        let end = at(last).unwrap_or(self.starts[self.to]);
        Some((start, end.max(start + 1)))
    }
}

/// The characters `from..to` to show of a line too wide for the terminal: the anchor a third of
/// the way in, cut on the left only when that saves more than the `...` it costs.
fn window(widths: &[usize], anchor: usize) -> (usize, usize) {
    let anchor = anchor.min(widths.len());
    let before: usize = widths[..anchor].iter().sum();
    let lead = MAX_SHOWN_LINE / 3;
    let mut from = 0;
    let mut budget = MAX_SHOWN_LINE;
    if before > lead + CUT.len() {
        let mut skipped = 0;
        while from < anchor && before - skipped > lead {
            skipped += widths[from];
            from += 1;
        }
        budget -= CUT.len();
    }
    let mut to = from;
    let mut used = 0;
    while to < widths.len() && used + widths[to] <= budget {
        used += widths[to];
        to += 1;
    }
    (from, to.max(anchor.min(widths.len())))
}

fn cell_width(c: char) -> usize {
    match c {
        '\t' => 4,
        c => match crate::term::shown_char(c, false) {
            Some(escaped) => escaped.len(),
            None => c.width().unwrap_or(0),
        },
    }
}

fn push_shown(out: &mut String, c: char) {
    match c {
        '\t' => out.push_str("    "),
        c => match crate::term::shown_char(c, false) {
            Some(escaped) => out.push_str(&escaped),
            None => out.push(c),
        },
    }
}

/// The rows under a source line: the underlines (`^` primary, `-` related) with the rightmost
/// label beside them, then each other label on its own row, hung from its underline by `|`.
fn draw(marks: &[(usize, usize, &Mark)]) -> Vec<String> {
    if marks.is_empty() {
        return Vec::new();
    }
    let width = marks.iter().map(|m| m.1).max().unwrap_or(0);
    let mut underline = vec![' '; width];
    // Primary last, so it wins where spans overlap.
    for (start, end, _) in marks.iter().filter(|m| !m.2.primary) {
        underline[*start..*end].fill('-');
    }
    for (start, end, _) in marks.iter().filter(|m| m.2.primary) {
        underline[*start..*end].fill('^');
    }
    let mut labelled: Vec<(usize, usize, &str)> = marks
        .iter()
        .filter_map(|(s, e, m)| m.label.map(|l| (*s, *e, l)))
        .collect();
    labelled.sort_by_key(|l| l.0);
    let mut first_row: String = underline.iter().collect();
    if let Some(&(_, end, label)) = labelled.last() {
        if end == width {
            first_row.push(' ');
            first_row.push_str(label);
            labelled.pop();
        }
    }
    let mut rows = vec![first_row];
    if labelled.is_empty() {
        return rows;
    }
    let hang = |upto: usize| {
        let mut row = vec![' '; width];
        for l in &labelled[..upto] {
            row[l.0] = '|';
        }
        row
    };
    rows.push(hang(labelled.len()).iter().collect());
    for i in (0..labelled.len()).rev() {
        let mut row: String = hang(i).iter().take(labelled[i].0).collect();
        row.push_str(labelled[i].2);
        rows.push(row);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snippet(source: &str, marks: &[Mark]) -> String {
        let mut out = String::new();
        let index = crate::line_index::LineIndex::new(source);
        render(&mut out, Lines::new(source, &index), marks, 1);
        out
    }

    fn mark(line: u32, col: u32, end_col: u32, label: &str, primary: bool) -> Mark<'_> {
        Mark {
            span: Span {
                line,
                col,
                end_line: line,
                end_col,
            },
            label: Some(label),
            primary,
        }
    }

    #[test]
    fn wide_characters_take_two_cells() {
        let out = snippet("名前: 株価 x\n", &[mark(1, 5, 7, "here", true)]);
        assert_eq!(out, "  |\n1 | 名前: 株価 x\n  |       ^^^^ here\n");
    }

    #[test]
    fn tabs_are_four_cells() {
        let out = snippet("\tkey: v\n", &[mark(1, 2, 5, "here", true)]);
        assert_eq!(out, "  |\n1 |     key: v\n  |     ^^^ here\n");
    }

    #[test]
    fn control_characters_show_escaped_and_carets_follow() {
        let out = snippet("a\u{202e}b: x\n", &[mark(1, 3, 4, "here", true)]);
        assert_eq!(out, "  |\n1 | a\\u{202e}b: x\n  |          ^ here\n");
    }

    #[test]
    fn two_labels_on_one_line_hang_the_left_one() {
        let out = snippet(
            "{a: 1, a: 2}\n",
            &[mark(1, 8, 9, "second", true), mark(1, 2, 3, "first", false)],
        );
        assert_eq!(
            out,
            "  |\n1 | {a: 1, a: 2}\n  |  -     ^ second\n  |  |\n  |  first\n"
        );
    }

    #[test]
    fn far_apart_lines_are_joined_by_an_ellipsis() {
        let out = snippet(
            "a: 1\nb: 2\nc: 3\na: 4\n",
            &[mark(4, 1, 2, "again", true), mark(1, 1, 2, "first", false)],
        );
        assert_eq!(
            out,
            "  |\n1 | a: 1\n  | - first\n...\n4 | a: 4\n  | ^ again\n"
        );
    }

    #[test]
    fn carets_stop_at_the_cut() {
        let line = format!("k: {}", "x".repeat(300));
        let out = snippet(&line, &[mark(1, 4, 304, "long", true)]);
        let rows: Vec<&str> = out.lines().collect();
        assert!(rows[1].ends_with("..."), "{out}");
        let carets = rows[2].trim_end_matches(" long");
        assert_eq!(carets.len(), rows[1].len() - 3, "{out}");
    }

    #[test]
    fn a_cut_line_keeps_wide_characters_whole() {
        let line = format!("{}X{}", "表".repeat(200), "表".repeat(200));
        let out = snippet(&line, &[mark(1, 201, 202, "x", true)]);
        let rows: Vec<&str> = out.lines().collect();
        let text = rows[1].strip_prefix("1 | ").unwrap();
        let caret = rows[2].strip_prefix("  | ").unwrap();
        let x_cells: usize = text[..text.find('X').unwrap()]
            .chars()
            .map(cell_width)
            .sum();
        assert_eq!(caret.find('^'), Some(x_cells), "{out}");
        let cells: usize = text.chars().map(cell_width).sum();
        assert!(cells <= MAX_SHOWN_LINE + 6, "{out}");
    }
}
