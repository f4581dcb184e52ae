//! Every function in `src/` (tests aside) stays within about 120 lines, as the developers' guide
//! asks: a longer one hides its steps, so split it into named ones. The scan is brace-aware and
//! enough for this code base: comments, strings, raw strings and character literals are blanked
//! before braces are counted, and `#[cfg(test)]` modules (inline or in their own file) are skipped.

mod support;

use std::path::{Path, PathBuf};

const LIMIT: usize = 120;

#[test]
fn no_function_in_src_is_longer_than_the_limit() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = support::rust_files(&src);
    let test_files = test_module_files(&files);
    let mut long = Vec::new();
    for path in files.iter().filter(|p| !test_files.contains(p)) {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for f in functions(&text).into_iter().filter(|f| f.lines > LIMIT) {
            let shown = path
                .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                .unwrap_or(path);
            long.push(format!(
                "{}:{} `{}` has {} lines",
                shown.display(),
                f.line,
                f.name,
                f.lines
            ));
        }
    }
    assert!(
        long.is_empty(),
        "functions over {LIMIT} lines; split them into named steps:\n  {}",
        long.join("\n  ")
    );
}

#[test]
fn the_scan_sees_through_strings_comments_and_test_modules() {
    let text = r####"
fn short() -> &'static str {
    let _brace = '{';
    let _s = "}}}";
    let _raw = r#"{ " }"#;
    // }
    /* } /* nested } */ } */
    "done"
}

impl X {
    pub(crate) fn method<'a>(&self, x: &'a str) -> Option<&'a str>
    where
        Self: Sized,
    {
        Some(x)
    }
    fn declared(&self);
}

#[cfg(test)]
mod tests {
    fn not_counted() {}
}
"####;
    let found: Vec<(String, usize, usize)> = functions(text)
        .into_iter()
        .map(|f| (f.name, f.line, f.lines))
        .collect();
    assert_eq!(
        found,
        vec![("short".into(), 2, 8), ("method".into(), 12, 6)],
        "{found:?}"
    );
}

struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// Files that are `#[cfg(test)] mod NAME;` of another: `NAME.rs` or `NAME/mod.rs` next to a
/// `mod.rs`/`lib.rs`, or in the folder named after the declaring file.
fn test_module_files(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let parent = path.parent().unwrap_or(Path::new(""));
        let dir = if matches!(stem, "mod" | "lib" | "main") {
            parent.to_path_buf()
        } else {
            parent.join(stem)
        };
        let mut lines = text.lines().map(str::trim);
        while let Some(line) = lines.next() {
            if line != "#[cfg(test)]" {
                continue;
            }
            let Some(next) = lines.next() else { break };
            let decl = next
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            if let Some(name) = decl.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
                out.push(dir.join(format!("{name}.rs")));
                out.push(dir.join(name).join("mod.rs"));
            }
        }
    }
    out
}

/// The text with every comment, string and character literal replaced by spaces (newlines
/// kept), so that only code braces remain.
fn blank(text: &str) -> Vec<char> {
    let s: Vec<char> = text.chars().collect();
    let mut out = s.clone();
    let wipe = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(s.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < s.len() {
        let at = |k: usize| s.get(i + k).copied().unwrap_or('\0');
        let end = if at(0) == '/' && at(1) == '/' {
            (i..s.len()).find(|&j| s[j] == '\n').unwrap_or(s.len())
        } else if at(0) == '/' && at(1) == '*' {
            block_comment_end(&s, i)
        } else if let Some(end) = raw_string_end(&s, i).filter(|_| i == 0 || !ident(s[i - 1])) {
            end
        } else if at(0) == '"' {
            let mut j = i + 1;
            while j < s.len() && s[j] != '"' {
                j += if s[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if at(0) == '\'' && at(1) == '\\' {
            (i + 2..s.len())
                .find(|&j| s[j] == '\'')
                .map_or(s.len(), |j| j + 1)
        } else if at(0) == '\'' && at(2) == '\'' {
            i + 3
        } else {
            i += 1;
            continue;
        };
        wipe(&mut out, i, end);
        i = end;
    }
    // Code outside strings and comments is ASCII but for an odd identifier: make it one byte
    // each, so byte offsets into the text are character offsets.
    for c in &mut out {
        if !c.is_ascii() {
            *c = '_';
        }
    }
    out
}

fn block_comment_end(s: &[char], start: usize) -> usize {
    let mut depth = 0;
    let mut j = start;
    while j + 1 < s.len() {
        if s[j] == '/' && s[j + 1] == '*' {
            depth += 1;
            j += 2;
        } else if s[j] == '*' && s[j + 1] == '/' {
            depth -= 1;
            j += 2;
            if depth == 0 {
                return j;
            }
        } else {
            j += 1;
        }
    }
    s.len()
}

/// `r"..."`, `r#"..."#` (and `br...`) starting at `i`: where it ends.
fn raw_string_end(s: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if s.get(j) == Some(&'b') {
        j += 1;
    }
    if s.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = s[j..].iter().take_while(|c| **c == '#').count();
    j += hashes;
    if s.get(j) != Some(&'"') {
        return None;
    }
    let closing: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    (j + 1..s.len())
        .find(|&k| s[k..].starts_with(&closing))
        .map(|k| k + closing.len())
        .or(Some(s.len()))
}

/// Every function with a body, outside `#[cfg(test)]` modules: its name, the line of `fn` and
/// how many lines it spans up to its closing brace.
fn functions(text: &str) -> Vec<Function> {
    let s = blank(text);
    let line_of = |pos: usize| s[..pos].iter().filter(|c| **c == '\n').count() + 1;
    let skipped = test_modules(&s);
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for i in 0..s.len().saturating_sub(3) {
        let keyword = s[i] == 'f' && s[i + 1] == 'n' && s[i + 2].is_whitespace();
        if !keyword || (i > 0 && ident(s[i - 1])) || skipped.iter().any(|r| r.contains(&i)) {
            continue;
        }
        let name: String = s[i + 2..]
            .iter()
            .skip_while(|c| c.is_whitespace())
            .take_while(|c| ident(**c))
            .collect();
        let Some(open) = body_start(&s, i) else {
            continue;
        };
        let close = matching_brace(&s, open);
        out.push(Function {
            name,
            line: line_of(i),
            lines: line_of(close) - line_of(i) + 1,
        });
    }
    out
}

/// The `{` that opens the body of the `fn` at `i`, or `None` for a declaration (`;`).
fn body_start(s: &[char], i: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (j, c) in s.iter().enumerate().skip(i) {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '{' if depth == 0 => return Some(j),
            ';' if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

fn matching_brace(s: &[char], open: usize) -> usize {
    let mut depth = 0;
    for (j, c) in s.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    s.len().saturating_sub(1)
}

/// The spans of `#[cfg(test)] mod NAME { ... }` blocks.
fn test_modules(s: &[char]) -> Vec<std::ops::Range<usize>> {
    let text: String = s.iter().collect();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = text[from..].find("#[cfg(test)]") {
        let at = from + k;
        from = at + 1;
        let rest = text[at + "#[cfg(test)]".len()..].trim_start();
        let rest = rest
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub ");
        if !rest.starts_with("mod ") {
            continue;
        }
        let Some(open) = text[at..].find(['{', ';']).map(|o| at + o) else {
            break;
        };
        if s[open] == '{' {
            out.push(at..matching_brace(s, open) + 1);
        }
    }
    out
}
