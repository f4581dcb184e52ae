//! `/save NAME` in `toolrun chat`: the conversation so far appended to the spec's `tests:` as a
//! multi-turn test whose turns expect the answers given. The YAML is edited as text, so every
//! other byte of the file (comments, order, quoting) stays as the person wrote it.

use crate::trace::{Status, TurnTrace};

/// The test for `turns` under `name`, its lines indented by `indent` spaces (the list's own).
fn test_entry(name: &str, turns: &[TurnTrace], indent: usize) -> Result<String, String> {
    let pad = " ".repeat(indent);
    // JSON strings are YAML double-quoted scalars: any text goes in unchanged.
    let quoted = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    let mut out = format!("{pad}- name: {}\n{pad}  turns:\n", quoted(name));
    for t in turns {
        let answer = match (&t.final_output, t.status) {
            (Some(answer), Status::Ok) => answer,
            _ => {
                return Err(format!(
                    "turn `{}` did not end with an answer ({}); only a conversation whose every turn answered can be saved",
                    t.query, t.stop_reason
                ))
            }
        };
        out.push_str(&format!("{pad}    - query: {}\n", quoted(&t.query)));
        let mut expect = Vec::new();
        if !t.tool_results.is_empty() {
            let names: Vec<String> = t.tool_results.iter().map(|r| quoted(&r.name)).collect();
            expect.push(format!("tool_calls: [{}]", names.join(", ")));
        }
        // The whole answer: a session a person liked is the answer they want kept.
        expect.push(format!("output_contains: {}", quoted(answer.trim())));
        out.push_str(&format!("{pad}      expect: {{ {} }}\n", expect.join(", ")));
    }
    Ok(out)
}

/// Is `line` a top-level `tests:` key opening a block (nothing but a comment after it)?
fn opens_tests_block(line: &str) -> bool {
    line.strip_prefix("tests:")
        .is_some_and(|rest| rest.trim().is_empty() || rest.trim_start().starts_with('#'))
}

fn is_content(line: &str) -> bool {
    let t = line.trim();
    !t.is_empty() && !t.starts_with('#')
}

/// `text` with the test appended to its `tests:` list (or a new `tests:` at the end).
pub(crate) fn with_test(text: &str, name: &str, turns: &[TurnTrace]) -> Result<String, String> {
    if turns.is_empty() {
        return Err("nothing to save yet: no turn has been taken".into());
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines
        .iter()
        .any(|l| l.starts_with("tests:") && !opens_tests_block(l))
    {
        return Err(
            "the spec's `tests:` is written inline; write it as a block list to save into it"
                .into(),
        );
    }
    let Some(start) = lines.iter().position(|l| opens_tests_block(l)) else {
        let mut out = text.to_string();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("tests:\n");
        out.push_str(&test_entry(name, turns, 2)?);
        return Ok(out);
    };
    // The block runs until the next top-level key: a content line at column 0 not a list item.
    let end = lines[start + 1..]
        .iter()
        .position(|l| is_content(l) && !l.starts_with([' ', '\t', '-']))
        .map_or(lines.len(), |i| start + 1 + i);
    let items = &lines[start + 1..end];
    let indent = items
        .iter()
        .find(|l| is_content(l))
        .map_or(2, |l| l.len() - l.trim_start_matches(' ').len());
    let quoted_name = serde_json::Value::String(name.to_string()).to_string();
    if items.iter().any(|l| {
        let t = l.trim().trim_start_matches("- ").trim();
        t == format!("name: {name}") || t == format!("name: {quoted_name}")
    }) {
        return Err(format!("the spec already has a test named `{name}`"));
    }
    // After the block's last content line: trailing blank lines and comments stay below it.
    let at = items
        .iter()
        .rposition(|l| is_content(l))
        .map_or(start + 1, |i| start + 2 + i);
    let mut out: String = lines[..at].concat();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&test_entry(name, turns, indent)?);
    out.push_str(&lines[at..].concat());
    Ok(out)
}

/// Saves the conversation into the spec file at `path`, atomically.
pub(crate) fn save(path: &std::path::Path, name: &str, turns: &[TurnTrace]) -> Result<(), String> {
    if name.is_empty() {
        return Err("`/save NAME` needs the test's name".into());
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let saved = with_test(&text, name, turns)?;
    crate::files::write_atomically(path, saved.as_bytes())
        .map_err(|e| format!("cannot write `{}`: {e}", path.display()))
}

/// `/save NAME`: saves, and says on stderr what became of it (the session goes on either way).
pub(crate) fn save_and_say(path: &std::path::Path, name: &str, turns: &[TurnTrace]) {
    match save(path, name, turns) {
        Ok(()) => eprintln!(
            "toolrun: saved the conversation as test `{}` in `{}`",
            crate::term::visible_line(name),
            crate::term::visible_line(&path.display().to_string())
        ),
        Err(e) => eprintln!("toolrun: {}", crate::term::visible(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::StopReason;

    fn turn(query: &str, answer: &str) -> TurnTrace {
        TurnTrace {
            query: query.into(),
            status: Status::Ok,
            stop_reason: StopReason::Answer,
            final_output: Some(answer.into()),
            tool_results: Vec::new(),
            tool_errors: Vec::new(),
            tool_call_count: 0,
            steps: 1,
            first_message: 0,
            pending_tool_call: None,
            error: None,
            usage: None,
            started_at: None,
            duration_ms: 0.0,
        }
    }

    #[test]
    fn a_spec_without_tests_gets_a_tests_block_at_its_end() {
        let out = with_test("version: 1\nname: x", "t", &[turn("hi", "Hello \"you\"")]).unwrap();
        assert_eq!(
            out,
            "version: 1\nname: x\ntests:\n  - name: \"t\"\n    turns:\n      - query: \"hi\"\n        expect: { output_contains: \"Hello \\\"you\\\"\" }\n"
        );
    }

    #[test]
    fn list_items_at_column_zero_keep_their_indent_and_the_next_key_stays_put() {
        let text = "tests:\n- name: a\n  query: q\n\nmodels: {}\n";
        let out = with_test(text, "b", &[turn("q", "a")]).unwrap();
        assert_eq!(
            out,
            "tests:\n- name: a\n  query: q\n- name: \"b\"\n  turns:\n    - query: \"q\"\n      expect: { output_contains: \"a\" }\n\nmodels: {}\n"
        );
    }

    #[test]
    fn an_inline_list_a_taken_name_and_an_unanswered_turn_are_refused() {
        assert!(with_test("tests: []\n", "t", &[turn("q", "a")]).is_err());
        assert!(with_test("tests:\n  - name: t\n", "t", &[turn("q", "a")]).is_err());
        let mut failed = turn("q", "a");
        failed.status = Status::Failed;
        assert!(with_test("tests:\n", "t", &[failed]).is_err());
    }
}
