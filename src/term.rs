//! Text for a person's terminal. Answers, tool output, spec text and server messages may hold
//! control sequences (an OSC 52 from a model writes the clipboard; `\r` or a cursor move can
//! hide a line): human-readable output shows them as visible escapes instead. `--json` and
//! files keep the exact text; this is only for what a terminal renders.
//!
//! With `--format github` the reader is also GitHub's runner, which takes a line that starts
//! with `::` (after blanks) or holds `##[` anywhere as a workflow command (`::add-mask::`,
//! `::stop-commands::`, a forged `::error`). Then every text shown this way is defused too
//! ([`github_mode`]): only the commands toolrun writes itself ([`workflow_field`]) remain.

pub(crate) mod screen;

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once by `check` and `test` with `--format github`, before they print anything.
static GITHUB: AtomicBool = AtomicBool::new(false);

/// Harmless in a log and an annotation, but it parts `::` and `##[` so no runner parses them.
const PARTING: char = '\u{200b}';

/// From now on [`visible`] and [`visible_line`] also defuse workflow commands: their output goes
/// to a GitHub runner (`--format github`). For the whole process, as the format is.
pub(crate) fn github_mode() {
    GITHUB.store(true, Ordering::Relaxed);
}

/// `text` with every control character except newline and tab (C0, DEL, C1) and every bidi
/// override shown as `\u{..}` (`\r` as `\r`), so nothing in it can drive the terminal.
pub(crate) fn visible(text: &str) -> Cow<'_, str> {
    for_github(escape(text, false))
}

/// Like [`visible`], for text that must stay on one line (a name, a value in a message):
/// newlines and tabs are escaped too.
pub(crate) fn visible_line(text: &str) -> Cow<'_, str> {
    for_github(escape(text, true))
}

fn for_github(text: Cow<'_, str>) -> Cow<'_, str> {
    if !GITHUB.load(Ordering::Relaxed) {
        return text;
    }
    let defused = match defuse(&text, true) {
        Cow::Owned(s) => Some(s),
        Cow::Borrowed(_) => None,
    };
    defused.map_or(text, Cow::Owned)
}

/// The message or a property of a workflow command toolrun writes itself: `%`, CR and LF
/// percent-escaped (GitHub's escaping for command data; a raw newline would end the command and
/// start a line of its own), other control characters shown as in [`visible`], `##[` defused.
pub(crate) fn workflow_field(text: &str) -> String {
    let data = text
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A");
    defuse(&escape(&data, false), false).into_owned()
}

/// `text` with no workflow command left in it: [`PARTING`] inside every `##[`, and inside the
/// `::` that begins a line after blanks (the start of `text` is a line's when `at_line_start`).
/// The runner breaks lines at CR and LF and trims what .NET's `char.IsWhiteSpace` calls blank:
/// Unicode `White_Space`, as Rust's `char::is_whitespace`.
pub(crate) fn defuse(text: &str, at_line_start: bool) -> Cow<'_, str> {
    let blank = |c: char| c.is_whitespace() && c != '\n' && c != '\r';
    // Where a line's `::` begins, for each line that starts with one.
    let command_at = |start: usize| {
        let rest = text[start..].trim_start_matches(blank);
        rest.starts_with("::").then(|| text.len() - rest.len())
    };
    let line_starts = text.match_indices(['\n', '\r']).map(|(i, _)| i + 1);
    let colons: Vec<usize> = at_line_start
        .then_some(0)
        .into_iter()
        .chain(line_starts)
        .filter_map(command_at)
        .collect();
    if colons.is_empty() && !text.contains("##[") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 3 * (colons.len() + 1));
    let mut from = 0;
    for colon in colons {
        out.push_str(&text[from..=colon]);
        out.push(PARTING);
        from = colon + 1;
    }
    out.push_str(&text[from..]);
    Cow::Owned(out.replace("##[", &format!("#{PARTING}#[")))
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

    #[test]
    fn no_workflow_command_survives_defusing() {
        let z = PARTING;
        let text =
            "::add-mask::x\n  ::error::forged\r\u{3000}::stop-commands::tok\nfoo ##[error]bar a::b";
        assert_eq!(
            defuse(text, true),
            format!(":{z}:add-mask::x\n  :{z}:error::forged\r\u{3000}:{z}:stop-commands::tok\nfoo #{z}#[error]bar a::b")
        );
        // Not at a line's start, `::` is plain text; `##[` never is.
        assert_eq!(defuse("::x ###[y", false), format!("::x ##{z}#[y"));
        assert!(matches!(defuse("a :: b\n# [c]", true), Cow::Borrowed(_)));
        assert_eq!(
            workflow_field("50%\n::error::x\r\u{1b}[1m ##[group]"),
            format!("50%25%0A::error::x%0D\\u{{1b}}[1m #{z}#[group]")
        );
    }
}
