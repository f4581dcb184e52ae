//! `/save NAME` in `toolrun chat`: the conversation so far appended to the spec's `tests:` as a
//! multi-turn test whose turns expect the answers given. The YAML is edited as text, so every
//! other byte of the file (comments, order, quoting) stays as the person wrote it.

use crate::fixture::{Fixture, Tape};
use crate::redact::Redactor;
use crate::registry::Registry;
use crate::trace::{Status, Trace, TurnTrace};
use std::path::{Path, PathBuf};

/// What a saved test says besides its turns: the model it ran with and the fixture it replays.
#[derive(Default)]
pub(crate) struct Links {
    pub(crate) model: Option<String>,
    /// A `fixture:` path, relative to the spec (none under the spec's `fixtures: DIR`).
    pub(crate) fixture: Option<String>,
}

/// The session a `/save` saves from.
pub(crate) struct Session<'a> {
    pub(crate) registry: &'a Registry,
    pub(crate) spec: &'a Path,
    pub(crate) model: &'a str,
    /// The exchanges so far of a session whose model is live or whose tools reached a server:
    /// its test replays them offline. `None` for a scripted model with offline tools, whose
    /// test runs them again.
    pub(crate) tape: Option<&'a Tape>,
    pub(crate) redactor: &'a Redactor,
    pub(crate) now: i64,
    pub(crate) approvals: Vec<String>,
    /// Turns a `--resume`d trace held: taken before this session, so not on its tape.
    pub(crate) resumed: usize,
}

/// The test for `turns` under `name`, its lines indented by `indent` spaces (the list's own).
fn test_entry(
    name: &str,
    turns: &[TurnTrace],
    indent: usize,
    links: &Links,
) -> Result<String, String> {
    let pad = " ".repeat(indent);
    // JSON strings are YAML double-quoted scalars: any text goes in unchanged.
    let quoted = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    let mut out = format!("{pad}- name: {}\n", quoted(name));
    if let Some(model) = &links.model {
        out.push_str(&format!("{pad}  model: {}\n", quoted(model)));
    }
    if let Some(fixture) = &links.fixture {
        out.push_str(&format!("{pad}  fixture: {}\n", quoted(fixture)));
    }
    out.push_str(&format!("{pad}  turns:\n"));
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
pub(crate) fn with_test(
    text: &str,
    name: &str,
    turns: &[TurnTrace],
    links: &Links,
) -> Result<String, String> {
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
        out.push_str(&test_entry(name, turns, 2, links)?);
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
    out.push_str(&test_entry(name, turns, indent, links)?);
    out.push_str(&lines[at..].concat());
    Ok(out)
}

/// Saves the conversation into the session's spec, atomically, after its fixture when the
/// model is live; says which fixture it wrote.
fn save(
    s: &Session<'_>,
    name: &str,
    turns: &[TurnTrace],
    trace: Option<&Trace>,
) -> Result<Option<PathBuf>, String> {
    if name.is_empty() {
        return Err("`/save NAME` needs the test's name".into());
    }
    // With one model the test runs it anyway; with several it must name the one that answered.
    let mut links = Links {
        model: (s.registry.model_names().count() > 1).then(|| s.model.to_string()),
        fixture: None,
    };
    let recording = match (s.tape, trace) {
        (Some(tape), Some(trace)) => {
            let (path, link) = fixture_place(s, name)?;
            links.fixture = link;
            let fixture = recording(s, &path, tape, trace);
            Some((path, fixture))
        }
        _ => None,
    };
    let path = s.spec;
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let saved = with_test(&text, name, turns, &links)?;
    // The fixture first: a test that names a fixture never written would fail offline.
    if let Some((fixture_path, fixture)) = &recording {
        crate::fixture::write_fixture(fixture_path, fixture, s.redactor)?;
    }
    crate::files::write_atomically(path, saved.as_bytes())
        .map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
    Ok(recording.map(|(p, _)| p))
}

/// Where a live session's fixture goes: the test's file under the spec's `fixtures: DIR` (the
/// test finds it by name), else `fixtures/NAME.json` beside the spec, named by `fixture:`.
fn fixture_place(s: &Session<'_>, name: &str) -> Result<(PathBuf, Option<String>), String> {
    if s.resumed > 0 {
        return Err("this conversation was resumed from a trace: its first turns were not recorded in this session, so a test of it could not replay them offline; save a session started afresh".into());
    }
    let runner = super::test_suite::runner::fixture_under_dir;
    let (path, link) = match runner(s.registry, name, s.model) {
        Some(path) => (path, None),
        None => {
            let link = format!("fixtures/{}.json", crate::registry::fixture_stem(name));
            let dir = s.spec.parent().unwrap_or(Path::new(""));
            (dir.join(&link), Some(link))
        }
    };
    if path.exists() {
        return Err(format!(
            "fixture `{}` already exists; save the conversation under another name",
            path.display()
        ));
    }
    Ok((path, link))
}

/// The session so far as a fixture to be written at `path` (`chat --record`'s, or a saved test's).
pub(crate) fn recording(s: &Session<'_>, path: &Path, tape: &Tape, trace: &Trace) -> Fixture {
    Fixture::recorded(
        crate::fixture::fixture_spec(s.registry, s.spec, path),
        trace
            .turns
            .first()
            .map(|t| t.query.clone())
            .unwrap_or_default(),
        s.model.to_string(),
        s.now,
        s.approvals.clone(),
        tape.exchanges(),
        serde_json::to_value(trace).unwrap_or_default(),
    )
}

/// `/save NAME`: saves, and says on stderr what became of it (the session goes on either way).
pub(crate) fn save_and_say(
    s: &Session<'_>,
    name: &str,
    turns: &[TurnTrace],
    trace: Option<&Trace>,
) {
    match save(s, name, turns, trace) {
        Ok(fixture) => eprintln!(
            "toolrun: saved the conversation as test `{}` in `{}`{}",
            crate::term::visible_line(name),
            crate::term::visible_line(&s.spec.display().to_string()),
            fixture
                .map(|f| format!(
                    ", its model's answers recorded in `{}` for offline replay",
                    crate::term::visible_line(&f.display().to_string())
                ))
                .unwrap_or_default()
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
        let out = with_test(
            "version: 1\nname: x",
            "t",
            &[turn("hi", "Hello \"you\"")],
            &Links::default(),
        )
        .unwrap();
        assert_eq!(
            out,
            "version: 1\nname: x\ntests:\n  - name: \"t\"\n    turns:\n      - query: \"hi\"\n        expect: { output_contains: \"Hello \\\"you\\\"\" }\n"
        );
    }

    #[test]
    fn list_items_at_column_zero_keep_their_indent_and_the_next_key_stays_put() {
        let text = "tests:\n- name: a\n  query: q\n\nmodels: {}\n";
        let out = with_test(text, "b", &[turn("q", "a")], &Links::default()).unwrap();
        assert_eq!(
            out,
            "tests:\n- name: a\n  query: q\n- name: \"b\"\n  turns:\n    - query: \"q\"\n      expect: { output_contains: \"a\" }\n\nmodels: {}\n"
        );
    }

    #[test]
    fn a_test_names_its_model_and_fixture_before_its_turns() {
        let links = Links {
            model: Some("live".into()),
            fixture: Some("fixtures/t.json".into()),
        };
        let out = with_test("tests:\n", "t", &[turn("q", "a")], &links).unwrap();
        assert_eq!(
            out,
            "tests:\n  - name: \"t\"\n    model: \"live\"\n    fixture: \"fixtures/t.json\"\n    turns:\n      - query: \"q\"\n        expect: { output_contains: \"a\" }\n"
        );
    }

    #[test]
    fn an_inline_list_a_taken_name_and_an_unanswered_turn_are_refused() {
        assert!(with_test("tests: []\n", "t", &[turn("q", "a")], &Links::default()).is_err());
        assert!(with_test(
            "tests:\n  - name: t\n",
            "t",
            &[turn("q", "a")],
            &Links::default()
        )
        .is_err());
        let mut failed = turn("q", "a");
        failed.status = Status::Failed;
        assert!(with_test("tests:\n", "t", &[failed], &Links::default()).is_err());
    }
}
