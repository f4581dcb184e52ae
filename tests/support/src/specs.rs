//! Spec texts more than one test file needs.

/// A spec named `clock` whose one tool, `clock`, is the `datetime` builtin, and whose scripted
/// model calls it once with `arguments` (a YAML flow mapping) and then answers `answer` (a
/// template over `last`). `tests` is the YAML list of `tests:`, items indented two spaces.
pub fn clock_spec(arguments: &str, answer: &str, tests: &str) -> String {
    format!(
        r#"version: 1
name: clock
tools:
  clock:
    description: Dates and times in any time zone.
    kind: builtin
    builtin: datetime
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: clock, arguments: {arguments} }}]
          - answer: "{answer}"
tests:
{tests}"#
    )
}
