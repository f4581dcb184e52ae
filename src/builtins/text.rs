//! `text`: small string utilities that models reliably get wrong by "eye" (counting,
//! case changes, exact replacements).

use super::{did_you_mean, Args, BuiltinContext, BuiltinError};
use serde_json::{json, Value};

const OPERATIONS: &[&str] = &[
    "length",
    "upper",
    "lower",
    "trim",
    "split",
    "replace",
    "contains",
    "word_count",
];
const OPTIONAL: &[&str] = &["separator", "search", "replacement", "ignore_case", "limit"];
/// Results larger than this are refused rather than built: a replacement can multiply size.
const MAX_OUTPUT_BYTES: usize = 1 << 20;

pub(super) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "operation": {
                "type": "string",
                "enum": OPERATIONS,
                "description": "`length`: number of characters (Unicode scalar values). `upper` / `lower`: \
                    the text in upper / lower case. `trim`: without leading and trailing whitespace. \
                    `split`: array of pieces split on `separator`. `replace`: the text with every \
                    occurrence of `search` replaced by `replacement`. `contains`: true or false, whether \
                    `search` occurs. `word_count`: number of whitespace-separated words."
            },
            "text": {
                "type": "string",
                "description": "The input text."
            },
            "separator": {
                "type": "string",
                "description": "For `split`: the exact separator. Omit it to split on runs of whitespace \
                    (dropping empty pieces)."
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "For `split`: return at most this many pieces; the last holds the rest of the text."
            },
            "search": {
                "type": "string",
                "description": "For `replace` and `contains` (required there): the exact text to look for (not a regex)."
            },
            "replacement": {
                "type": "string",
                "description": "For `replace`: what each occurrence becomes (default: the empty string, i.e. delete)."
            },
            "ignore_case": {
                "type": "boolean",
                "description": "For `contains`: compare case-insensitively (default false)."
            }
        },
        "required": ["operation", "text"],
        "additionalProperties": false
    })
}

pub(super) fn call(args: &Args<'_>, _ctx: &BuiltinContext) -> Result<Value, BuiltinError> {
    let operation = args.req_str("operation")?;
    let text = args.req_str("text")?;
    let allow = |used: &[&str]| args.only_for(operation, used, OPTIONAL);
    match operation {
        "length" => {
            allow(&[])?;
            Ok(json!(text.chars().count()))
        }
        "upper" => {
            allow(&[])?;
            Ok(json!(text.to_uppercase()))
        }
        "lower" => {
            allow(&[])?;
            Ok(json!(text.to_lowercase()))
        }
        "trim" => {
            allow(&[])?;
            Ok(json!(text.trim()))
        }
        "word_count" => {
            allow(&[])?;
            Ok(json!(text.split_whitespace().count()))
        }
        "split" => {
            allow(&["separator", "limit"])?;
            let limit = match args.opt_f64("limit")? {
                None => usize::MAX,
                Some(n) if n >= 1.0 && n.fract() == 0.0 => n.min(usize::MAX as f64) as usize,
                Some(n) => {
                    return Err(BuiltinError::invalid(format!(
                        "`limit` must be a whole number of at least 1, got {n}"
                    )))
                }
            };
            let pieces: Vec<&str> = match args.opt_str("separator")? {
                None => split_whitespace_limited(text, limit),
                Some("") => {
                    return Err(BuiltinError::invalid(
                        "`separator` must not be empty; omit it to split on whitespace",
                    ))
                }
                Some(sep) => text.splitn(limit, sep).collect(),
            };
            Ok(json!(pieces))
        }
        "contains" => {
            allow(&["search", "ignore_case"])?;
            let search = args.req_str("search")?;
            let found = if args.opt_bool("ignore_case")?.unwrap_or(false) {
                text.to_lowercase().contains(&search.to_lowercase())
            } else {
                text.contains(search)
            };
            Ok(json!(found))
        }
        "replace" => {
            allow(&["search", "replacement"])?;
            let search = args.req_str("search")?;
            let replacement = args.opt_str("replacement")?.unwrap_or("");
            if search.is_empty() {
                return Err(BuiltinError::invalid("`search` must not be empty"));
            }
            let count = text.matches(search).count();
            let size = text.len() - count * search.len() + count.saturating_mul(replacement.len());
            if size > MAX_OUTPUT_BYTES {
                return Err(BuiltinError::execution(format!(
                    "the result would be {size} bytes, over the {MAX_OUTPUT_BYTES}-byte limit"
                )));
            }
            Ok(json!(text.replace(search, replacement)))
        }
        other => Err(BuiltinError::invalid(format!(
            "unknown operation `{other}`{}; use one of: {}",
            did_you_mean(other, OPERATIONS.iter().copied()),
            OPERATIONS.join(", ")
        ))),
    }
}

/// Like `split_whitespace`, but the last of `limit` pieces keeps the remainder verbatim
/// (trimmed at its start), matching what `splitn` does for an explicit separator.
fn split_whitespace_limited(text: &str, limit: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        if pieces.len() + 1 == limit {
            pieces.push(rest.trim_end());
            break;
        }
        match rest.find(char::is_whitespace) {
            Some(end) => {
                pieces.push(&rest[..end]);
                rest = rest[end..].trim_start();
            }
            None => {
                pieces.push(rest);
                break;
            }
        }
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::super::{call as call_builtin, BuiltinErrorKind};
    use super::*;

    fn run(args: Value) -> Result<Value, BuiltinError> {
        call_builtin("text", &args, &BuiltinContext { now_unix_ms: 0 })
    }

    fn ok(args: Value) -> Value {
        run(args.clone()).unwrap_or_else(|e| panic!("{args}: {}", e.message))
    }

    fn invalid(args: Value) -> String {
        let e = run(args.clone()).expect_err("should fail");
        assert_eq!(e.kind, BuiltinErrorKind::InvalidArguments, "{}", e.message);
        e.message
    }

    #[test]
    fn simple_operations() {
        assert_eq!(
            ok(json!({"operation": "length", "text": "héllo 👋"})),
            json!(7)
        );
        assert_eq!(ok(json!({"operation": "length", "text": ""})), json!(0));
        assert_eq!(
            ok(json!({"operation": "upper", "text": "straße"})),
            json!("STRASSE")
        );
        assert_eq!(
            ok(json!({"operation": "lower", "text": "ÀB C"})),
            json!("àb c")
        );
        assert_eq!(
            ok(json!({"operation": "trim", "text": " \t hi there\n"})),
            json!("hi there")
        );
        assert_eq!(
            ok(json!({"operation": "word_count", "text": "  one two\nthree\t four "})),
            json!(4)
        );
        assert_eq!(
            ok(json!({"operation": "word_count", "text": "   "})),
            json!(0)
        );
    }

    #[test]
    fn split() {
        assert_eq!(
            ok(json!({"operation": "split", "text": "a,b,,c", "separator": ","})),
            json!(["a", "b", "", "c"])
        );
        assert_eq!(
            ok(json!({"operation": "split", "text": "  a  b\tc \n"})),
            json!(["a", "b", "c"])
        );
        assert_eq!(ok(json!({"operation": "split", "text": "   "})), json!([]));
        assert_eq!(
            ok(json!({"operation": "split", "text": "k=v=w", "separator": "=", "limit": 2})),
            json!(["k", "v=w"])
        );
        assert_eq!(
            ok(json!({"operation": "split", "text": " a b   c d ", "limit": 2})),
            json!(["a", "b   c d"])
        );
        assert_eq!(
            ok(json!({"operation": "split", "text": "a b", "limit": 1})),
            json!(["a b"])
        );
        assert_eq!(
            ok(json!({"operation": "split", "text": "a::b", "separator": "::"})),
            json!(["a", "b"])
        );
        assert!(
            invalid(json!({"operation": "split", "text": "a", "separator": ""}))
                .contains("must not be empty")
        );
        assert!(
            invalid(json!({"operation": "split", "text": "a", "limit": 0})).contains("at least 1")
        );
        assert!(
            invalid(json!({"operation": "split", "text": "a", "limit": 1.5}))
                .contains("whole number")
        );
    }

    #[test]
    fn replace_and_contains() {
        assert_eq!(
            ok(
                json!({"operation": "replace", "text": "a-b-c", "search": "-", "replacement": " + "})
            ),
            json!("a + b + c")
        );
        assert_eq!(
            ok(json!({"operation": "replace", "text": "a-b-c", "search": "-"})),
            json!("abc")
        );
        assert!(
            invalid(json!({"operation": "replace", "text": "a", "search": ""}))
                .contains("must not be empty")
        );
        assert!(invalid(json!({"operation": "replace", "text": "a"})).contains("`search`"));
        assert_eq!(
            ok(json!({"operation": "contains", "text": "Hello", "search": "ell"})),
            json!(true)
        );
        assert_eq!(
            ok(json!({"operation": "contains", "text": "Hello", "search": "HELL"})),
            json!(false)
        );
        assert_eq!(
            ok(
                json!({"operation": "contains", "text": "Hello", "search": "HELL", "ignore_case": true})
            ),
            json!(true)
        );
        assert_eq!(
            ok(json!({"operation": "contains", "text": "x", "search": ""})),
            json!(true)
        );
    }

    #[test]
    fn replacement_output_is_bounded() {
        let text = "a".repeat(10_000);
        let e = run(json!({"operation": "replace", "text": text, "search": "a", "replacement": "b".repeat(200)}))
            .unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::ExecutionError);
        assert!(e.message.contains("limit"));
    }

    #[test]
    fn argument_checks() {
        let m = invalid(json!({"operation": "uppercase", "text": "a"}));
        assert!(m.contains("did you mean `upper`?"), "{m}");
        let m = invalid(json!({"operation": "upper", "text": "a", "search": "x"}));
        assert_eq!(m, "argument `search` is not used by operation `upper`");
        assert!(invalid(json!({"operation": "upper"})).contains("missing required argument `text`"));
    }
}
