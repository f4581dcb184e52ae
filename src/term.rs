//! Text for a person's terminal. Answers, tool output, spec text and server messages may hold
//! control sequences (an OSC 52 from a model writes the clipboard; `\r` or a cursor move can
//! hide a line): human-readable output shows them as visible escapes instead. `--json` and
//! files keep the exact text; this is only for what a terminal renders.

use std::borrow::Cow;

/// `text` with every control character except newline and tab (C0, DEL, C1) and every bidi
/// override shown as `\u{..}` (`\r` as `\r`), so nothing in it can drive the terminal.
pub(crate) fn visible(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// Like [`visible`], for text that must stay on one line (a name, a value in a message):
/// newlines and tabs are escaped too.
pub(crate) fn visible_line(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

fn escape(text: &str, one_line: bool) -> Cow<'_, str> {
    let Some(first) = text.find(|c| is_hidden(c, one_line)) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        match shown_char(c, one_line) {
            Some(escaped) => out.push_str(&escaped),
            None => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn is_hidden(c: char, one_line: bool) -> bool {
    match c {
        '\n' | '\t' => one_line,
        c => c.is_control() || is_bidi_control(c),
    }
}

/// How [`visible`] (or [`visible_line`] when `one_line`) shows `c`: `None` when `c` stays as it
/// is. For renderers that must know each character's on-screen form, like a diagnostic's caret.
pub(crate) fn shown_char(c: char, one_line: bool) -> Option<String> {
    if !is_hidden(c, one_line) {
        return None;
    }
    Some(match c {
        '\n' => "\\n".to_string(),
        '\t' => "\\t".to_string(),
        '\r' => "\\r".to_string(),
        c => format!("\\u{{{:x}}}", u32::from(c)),
    })
}

/// Embeddings, overrides and isolates reorder what a terminal shows ("Trojan Source").
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_sequences_become_visible() {
        let osc52 = "copy \u{1b}]52;c;aGVsbG8=\u{7} done";
        assert_eq!(visible(osc52), "copy \\u{1b}]52;c;aGVsbG8=\\u{7} done");
        assert_eq!(visible("a\r\nb\u{9b}c\u{7f}"), "a\\r\nb\\u{9b}c\\u{7f}");
        assert_eq!(visible("abc\u{202e}fed"), "abc\\u{202e}fed");
    }

    #[test]
    fn newlines_and_tabs_stay_unless_one_line() {
        assert!(matches!(visible("a\n\tb é 😀"), Cow::Borrowed(_)));
        assert_eq!(visible_line("a\n\tb"), "a\\n\\tb");
    }
}
