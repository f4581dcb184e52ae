//! `regex_match`: regular-expression search with the `regex` crate, whose matching is
//! linear in the input, so no pattern can cause catastrophic backtracking.

use super::{Args, BuiltinContext, BuiltinError};
use regex::RegexBuilder;
use serde_json::{json, Map, Value};

const MAX_PATTERN_CHARS: usize = 2_000;
const MAX_TEXT_BYTES: usize = 1 << 20;
/// Compiled-program budget; keeps a pattern like `\w{1000}{1000}` from allocating gigabytes.
const SIZE_LIMIT: usize = 1 << 20;
const MAX_LISTED: usize = 100;

pub(super) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "maxLength": MAX_PATTERN_CHARS,
                "description": "Regular expression in Rust `regex` syntax (like PCRE without look-around or \
                    backreferences). Named groups: `(?P<year>\\d{4})` or `(?<year>\\d{4})`. Inline flags: \
                    `(?i)` case-insensitive, `(?m)` multi-line, `(?s)` dot matches newline."
            },
            "text": {
                "type": "string",
                "description": "The text to search."
            },
            "ignore_case": {
                "type": "boolean",
                "description": "Match case-insensitively (default false); same as starting the pattern with `(?i)`."
            }
        },
        "required": ["pattern", "text"],
        "additionalProperties": false
    })
}

pub(super) fn call(args: &Args<'_>, _ctx: &BuiltinContext) -> Result<Value, BuiltinError> {
    let pattern = args.req_str("pattern")?;
    let text = args.req_str("text")?;
    let ignore_case = args.opt_bool("ignore_case")?.unwrap_or(false);
    let chars = pattern.chars().count();
    if chars > MAX_PATTERN_CHARS {
        return Err(BuiltinError::invalid(format!(
            "`pattern` is too long ({chars} characters; the limit is {MAX_PATTERN_CHARS})"
        )));
    }
    if text.len() > MAX_TEXT_BYTES {
        return Err(BuiltinError::invalid(format!(
            "`text` is too long ({} bytes; the limit is {MAX_TEXT_BYTES})",
            text.len()
        )));
    }
    let re = RegexBuilder::new(pattern)
        .case_insensitive(ignore_case)
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(SIZE_LIMIT)
        .nest_limit(100)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => BuiltinError::invalid(
                "`pattern` is too complex (its compiled form exceeds the size limit); simplify large repetitions",
            ),
            other => BuiltinError::invalid(format!("`pattern` is not a valid regex: {other}")),
        })?;

    let mut matches = Vec::new();
    let mut count = 0usize;
    for m in re.find_iter(text) {
        if matches.len() < MAX_LISTED {
            matches.push(Value::from(m.as_str()));
        }
        count += 1;
    }

    let mut groups = Map::new();
    if let Some(caps) = re.captures(text) {
        let names: Vec<Option<&str>> = re.capture_names().collect();
        for (i, name) in names.iter().enumerate().skip(1) {
            let key = match name {
                Some(n) => (*n).to_string(),
                None => i.to_string(),
            };
            let value = caps.get(i).map_or(Value::Null, |m| Value::from(m.as_str()));
            groups.insert(key, value);
        }
    }

    Ok(json!({
        "matched": count > 0,
        "count": count,
        "matches": matches,
        "groups": groups,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::{call as call_builtin, BuiltinErrorKind};
    use super::*;

    fn run(args: Value) -> Result<Value, BuiltinError> {
        call_builtin("regex_match", &args, &BuiltinContext { now_unix_ms: 0 })
    }

    fn ok(pattern: &str, text: &str) -> Value {
        run(json!({"pattern": pattern, "text": text}))
            .unwrap_or_else(|e| panic!("{pattern}: {}", e.message))
    }

    #[test]
    fn finds_matches_and_groups() {
        let v = ok(r"(?P<year>\d{4})-(\d{2})", "from 2024-02 to 2025-03");
        assert_eq!(
            v,
            json!({
                "matched": true,
                "count": 2,
                "matches": ["2024-02", "2025-03"],
                "groups": {"year": "2024", "2": "02"}
            })
        );
    }

    #[test]
    fn no_match() {
        let v = ok(r"\d+", "no digits");
        assert_eq!(
            v,
            json!({"matched": false, "count": 0, "matches": [], "groups": {}})
        );
        let v = ok(r"(x)(y)?", "abc");
        assert_eq!(v["groups"], json!({}));
    }

    #[test]
    fn unmatched_optional_group_is_null() {
        let v = ok(r"a(b)?(?<c>c)", "ac");
        assert_eq!(v["groups"], json!({"1": null, "c": "c"}));
    }

    #[test]
    fn case_insensitivity() {
        let v = run(json!({"pattern": "hello", "text": "HeLLo", "ignore_case": true})).unwrap();
        assert_eq!(v["matched"], true);
        assert_eq!(ok("(?i)hello", "HELLO")["matches"], json!(["HELLO"]));
        assert_eq!(ok("hello", "HELLO")["matched"], false);
    }

    #[test]
    fn listed_matches_are_capped_but_counted() {
        let text = "a ".repeat(500);
        let v = ok("a", &text);
        assert_eq!(v["count"], 500);
        assert_eq!(v["matches"].as_array().unwrap().len(), MAX_LISTED);
    }

    #[test]
    fn empty_matches_terminate() {
        let v = ok("x*", "abc");
        assert_eq!(v["count"], 4);
        assert_eq!(v["matched"], true);
    }

    #[test]
    fn unicode_text() {
        let v = ok(r"\w+", "naïve café");
        assert_eq!(v["matches"], json!(["naïve", "café"]));
    }

    #[test]
    fn invalid_and_oversized_patterns() {
        let e = run(json!({"pattern": "(unclosed", "text": "x"})).unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::InvalidArguments);
        assert!(
            e.message.starts_with("`pattern` is not a valid regex"),
            "{}",
            e.message
        );
        let e = run(json!({"pattern": r"(a)\1", "text": "aa"})).unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::InvalidArguments);
        let e = run(json!({"pattern": r"\w{1000}{1000}", "text": "x"})).unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::InvalidArguments);
        assert!(e.message.contains("too complex"), "{}", e.message);
        let e =
            run(json!({"pattern": "a".repeat(MAX_PATTERN_CHARS + 1), "text": "x"})).unwrap_err();
        assert!(e.message.contains("too long"));
        let e = run(json!({"pattern": "(".repeat(150) + "a" + &")".repeat(150), "text": "a"}))
            .unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::InvalidArguments);
        let e = run(json!({"pattern": "a", "text": "a".repeat(MAX_TEXT_BYTES + 1)})).unwrap_err();
        assert!(e.message.contains("`text` is too long"));
    }

    #[test]
    fn pathological_pattern_is_fast() {
        // Exponential for backtracking engines; linear here.
        let text = "a".repeat(5_000) + "!";
        let v = ok(r"^(a+)+$", &text);
        assert_eq!(v["matched"], false);
    }
}
