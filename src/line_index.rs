//! Where each line of a text starts, found once: turning a byte offset into `line:col`, or a line
//! number into the line shown under a diagnostic, is then a binary search or a slice instead of a
//! scan from the top of the file for every diagnostic (quadratic for a file full of them).

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LineIndex {
    /// Byte offset of the first byte of each line; the first line starts at 0.
    starts: Vec<usize>,
    len: usize,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let mut starts = Vec::with_capacity(text.len() / 32 + 1);
        starts.push(0);
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex {
            starts,
            len: text.len(),
        }
    }

    /// Line `n` (1-based) of `text`, the text this index was built from, without its line ending:
    /// what `text.lines().nth(n - 1)` gives.
    pub fn line<'t>(&self, text: &'t str, n: usize) -> Option<&'t str> {
        debug_assert_eq!(
            text.len(),
            self.len,
            "a LineIndex is only valid for its own text"
        );
        let start = *self.starts.get(n.checked_sub(1)?)?;
        // A text ending in a newline has no empty line after it, as with `str::lines`.
        if start >= self.len {
            return None;
        }
        let line = match self.starts.get(n) {
            // `lines` drops `\r` only as part of a `\r\n` ending.
            Some(&next) => {
                let line = text.get(start..next - 1)?;
                line.strip_suffix('\r').unwrap_or(line)
            }
            None => text.get(start..)?,
        };
        Some(line)
    }

    /// The byte offset where line `n` (1-based) starts; `None` past the last line (a text ending
    /// in a newline has an empty line after it here, where an editor's cursor can be).
    pub fn start(&self, n: usize) -> Option<usize> {
        self.starts.get(n.checked_sub(1)?).copied()
    }

    /// The 1-based line and column (counted in characters) of byte `offset` in `text`. An offset
    /// past the end, or inside a character, counts as the nearest character boundary before it.
    pub fn position(&self, text: &str, offset: usize) -> (u32, u32) {
        debug_assert_eq!(
            text.len(),
            self.len,
            "a LineIndex is only valid for its own text"
        );
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self.starts[line - 1];
        let col = text[start..offset].chars().count() + 1;
        (line as u32, col as u32)
    }
}

/// A text and its index, for looking its lines up by number.
#[derive(Clone, Copy)]
pub struct Lines<'a> {
    text: &'a str,
    index: &'a LineIndex,
}

impl<'a> Lines<'a> {
    pub fn new(text: &'a str, index: &'a LineIndex) -> Lines<'a> {
        Lines { text, index }
    }

    /// Line `n` (1-based), without its line ending.
    pub fn line(&self, n: u32) -> Option<&'a str> {
        self.index.line(self.text, n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_what_str_lines_gives() {
        for text in [
            "",
            "\n",
            "a",
            "a\n",
            "a\nb",
            "a\n\nb\n",
            "a\r\nb\r\n",
            "a\rb\n",
            "x\r",
            "\n\n\n",
            "é\nü\r\n\n€",
        ] {
            let index = LineIndex::new(text);
            let expected: Vec<&str> = text.lines().collect();
            let got: Vec<&str> = (1..).map_while(|n| index.line(text, n)).collect::<Vec<_>>();
            assert_eq!(got, expected, "{text:?}");
            assert_eq!(index.line(text, 0), None);
            assert_eq!(index.line(text, expected.len() + 1), None, "{text:?}");
        }
    }

    #[test]
    fn positions_are_one_based_lines_and_character_columns() {
        let text = "ab\né€x\n\nlast";
        let index = LineIndex::new(text);
        assert_eq!(index.position(text, 0), (1, 1));
        assert_eq!(index.position(text, 2), (1, 3), "the newline ends line 1");
        assert_eq!(index.position(text, 3), (2, 1));
        // `é` is 2 bytes and `€` 3: `x` is the third character.
        assert_eq!(index.position(text, 3 + 2 + 3), (2, 3));
        assert_eq!(index.position(text, 10), (3, 1));
        assert_eq!(index.position(text, 11), (4, 1));
        assert_eq!(index.position(text, text.len()), (4, 5));
        assert_eq!(index.position(text, 1000), (4, 5), "clamped to the end");
        assert_eq!(index.position(text, 4), (2, 1), "inside `é`: its start");
    }

    #[test]
    fn agrees_with_a_scan_from_the_top_on_every_offset() {
        let text = "k: 1\n  é: [a, b]\r\n\n# €\nz";
        let index = LineIndex::new(text);
        for offset in (0..=text.len()).filter(|&o| text.is_char_boundary(o)) {
            let before = &text[..offset];
            let line = before.matches('\n').count() as u32 + 1;
            let col = before.rsplit('\n').next().unwrap_or("").chars().count() as u32 + 1;
            assert_eq!(index.position(text, offset), (line, col), "offset {offset}");
        }
    }
}
