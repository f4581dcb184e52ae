//! `json_query`: RFC 6901 JSON Pointer lookup.

use super::{closest, json_type, Args, BuiltinContext, BuiltinError};
use serde_json::{json, Value};

pub(super) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "data": {
                "description": "The JSON document to look into (any JSON value)."
            },
            "pointer": {
                "type": "string",
                "description": "RFC 6901 JSON Pointer: empty for the whole document, otherwise `/`-separated \
                    keys and zero-based array indexes, e.g. `/users/0/name`. Write `~1` for a `/` inside a \
                    key and `~0` for `~`. The result is the value found there, unchanged."
            }
        },
        "required": ["data", "pointer"],
        "additionalProperties": false
    })
}

pub(super) fn call(args: &Args<'_>, _ctx: &BuiltinContext) -> Result<Value, BuiltinError> {
    let pointer = args.req_str("pointer")?;
    // `data: null` is a legitimate document, so look it up raw rather than via `req`.
    let data = args
        .map
        .get("data")
        .ok_or_else(|| BuiltinError::invalid("missing required argument `data`"))?;
    lookup(data, pointer).cloned()
}

/// Resolves `pointer` in `data`, explaining where resolution stopped when it fails.
pub(crate) fn lookup<'v>(data: &'v Value, pointer: &str) -> Result<&'v Value, BuiltinError> {
    if pointer.is_empty() {
        return Ok(data);
    }
    let Some(body) = pointer.strip_prefix('/') else {
        return Err(BuiltinError::invalid(format!(
            "`pointer` `{pointer}` must be empty or start with `/`{}",
            suggest_pointer(pointer)
        )));
    };
    let mut current = data;
    let mut walked = String::new();
    for raw in body.split('/') {
        let token = unescape(raw).ok_or_else(|| {
            BuiltinError::invalid(format!(
                "`pointer` `{pointer}` has an invalid escape in `{raw}`: `~` must be followed by 0 or 1"
            ))
        })?;
        let at = if walked.is_empty() {
            "the document root".to_string()
        } else {
            format!("`{walked}`")
        };
        current = match current {
            Value::Object(map) => match map.get(&token) {
                Some(v) => v,
                None => {
                    let hint = match closest(&token, map.keys().map(String::as_str)) {
                        Some(k) => format!("; did you mean `{k}`?"),
                        None if map.is_empty() => "; the object is empty".to_string(),
                        None => format!("; keys there: {}", key_list(map.keys())),
                    };
                    return Err(BuiltinError::not_found(format!(
                        "no key `{token}` in the object at {at}{hint}"
                    )));
                }
            },
            Value::Array(items) => {
                let index = parse_index(&token).ok_or_else(|| {
                    BuiltinError::invalid(format!(
                        "`{token}` is not an array index (use 0, 1, 2, ... without leading zeros); \
                         the value at {at} is an array"
                    ))
                })?;
                match index.and_then(|i| items.get(i)) {
                    Some(v) => v,
                    None => {
                        return Err(BuiltinError::not_found(format!(
                        "index `{token}` is past the end of the array at {at}, which has {} item{}",
                        items.len(),
                        if items.len() == 1 { "" } else { "s" }
                    )))
                    }
                }
            }
            scalar => {
                return Err(BuiltinError::not_found(format!(
                    "cannot look up `{token}` in {} at {at}",
                    json_type(scalar)
                )))
            }
        };
        walked.push('/');
        walked.push_str(raw);
    }
    Ok(current)
}

fn unescape(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// `Some(None)` is `-` (the element after the last, which never exists for reading) or an
/// index too large for memory; `None` means the token is not an index at all.
fn parse_index(token: &str) -> Option<Option<usize>> {
    if token == "-" {
        return Some(None);
    }
    let digits_only = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    Some(token.parse().ok())
}

fn key_list<'k>(keys: impl Iterator<Item = &'k String>) -> String {
    let keys: Vec<&String> = keys.collect();
    let shown: Vec<String> = keys.iter().take(20).map(|k| format!("`{k}`")).collect();
    let more = keys.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Models often write `users.0.name` or `users/0/name`; offer the pointer they meant.
fn suggest_pointer(pointer: &str) -> String {
    let fixed = if let Some(rest) = pointer.strip_prefix('#') {
        rest.to_string()
    } else if pointer.contains('/') {
        format!("/{pointer}")
    } else {
        let path = pointer.strip_prefix('$').unwrap_or(pointer);
        let path = path.strip_prefix('.').unwrap_or(path);
        let converted = path.replace('[', ".").replace(']', "");
        format!(
            "/{}",
            converted
                .split('.')
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("/")
        )
    };
    if fixed.starts_with('/') && fixed != "/" {
        format!("; did you mean `{fixed}`?")
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{call as call_builtin, BuiltinErrorKind};
    use super::*;

    fn doc() -> Value {
        json!({
            "users": [
                {"name": "Alice", "email": "alice@example.com", "tags": []},
                {"name": "Bob", "email": null}
            ],
            "a/b": 1,
            "m~n": 2,
            "": "empty key",
            "count": 2
        })
    }

    fn run(pointer: &str) -> Result<Value, BuiltinError> {
        call_builtin(
            "json_query",
            &json!({"data": doc(), "pointer": pointer}),
            &BuiltinContext { now_unix_ms: 0 },
        )
    }

    fn ok(pointer: &str) -> Value {
        run(pointer).unwrap_or_else(|e| panic!("{pointer}: {}", e.message))
    }

    fn err(pointer: &str, kind: BuiltinErrorKind) -> String {
        let e = run(pointer).expect_err(pointer);
        assert_eq!(e.kind, kind, "{pointer}: {}", e.message);
        e.message
    }

    #[test]
    fn resolves_rfc_6901_pointers() {
        assert_eq!(ok(""), doc());
        assert_eq!(ok("/users/0/name"), json!("Alice"));
        assert_eq!(ok("/users/1"), json!({"name": "Bob", "email": null}));
        assert_eq!(ok("/users/1/email"), Value::Null);
        assert_eq!(ok("/users/0/tags"), json!([]));
        assert_eq!(ok("/a~1b"), json!(1));
        assert_eq!(ok("/m~0n"), json!(2));
        assert_eq!(ok("/"), json!("empty key"));
        assert_eq!(ok("/count"), json!(2));
    }

    #[test]
    fn escapes_apply_in_order() {
        // `~01` is `~1` literally, not `/`.
        let data = json!({"~1": "tilde-one", "/": "slash"});
        assert_eq!(lookup(&data, "/~01").unwrap(), "tilde-one");
        assert_eq!(lookup(&data, "/~1").unwrap(), "slash");
    }

    #[test]
    fn missing_values_are_not_found_with_context() {
        let m = err("/users/0/nmae", BuiltinErrorKind::NotFound);
        assert_eq!(
            m,
            "no key `nmae` in the object at `/users/0`; did you mean `name`?"
        );
        let m = err("/users/5", BuiltinErrorKind::NotFound);
        assert_eq!(
            m,
            "index `5` is past the end of the array at `/users`, which has 2 items"
        );
        assert!(err("/users/-", BuiltinErrorKind::NotFound).contains("past the end"));
        let m = err("/count/x", BuiltinErrorKind::NotFound);
        assert_eq!(m, "cannot look up `x` in a number at `/count`");
        let m = err("/zzz", BuiltinErrorKind::NotFound);
        assert!(
            m.contains("at the document root; keys there: `users`"),
            "{m}"
        );
        assert!(err("/users/1/email/x", BuiltinErrorKind::NotFound).contains("in null"));
        assert!(
            err("/users/99999999999999999999999", BuiltinErrorKind::NotFound)
                .contains("past the end")
        );
    }

    #[test]
    fn malformed_pointers_are_invalid() {
        let m = err("users/0/name", BuiltinErrorKind::InvalidArguments);
        assert!(m.ends_with("did you mean `/users/0/name`?"), "{m}");
        let m = err("users.0.name", BuiltinErrorKind::InvalidArguments);
        assert!(m.ends_with("did you mean `/users/0/name`?"), "{m}");
        let m = err("$.users[0].name", BuiltinErrorKind::InvalidArguments);
        assert!(m.ends_with("did you mean `/users/0/name`?"), "{m}");
        let m = err("#/users", BuiltinErrorKind::InvalidArguments);
        assert!(m.ends_with("did you mean `/users`?"), "{m}");
        assert!(err("/users/01", BuiltinErrorKind::InvalidArguments).contains("leading zeros"));
        assert!(
            err("/users/first", BuiltinErrorKind::InvalidArguments).contains("not an array index")
        );
        assert!(err("/a~2", BuiltinErrorKind::InvalidArguments).contains("invalid escape"));
        assert!(err("/a~", BuiltinErrorKind::InvalidArguments).contains("invalid escape"));
    }

    #[test]
    fn null_data_is_a_document() {
        let ctx = BuiltinContext { now_unix_ms: 0 };
        let v = call_builtin("json_query", &json!({"data": null, "pointer": ""}), &ctx).unwrap();
        assert_eq!(v, Value::Null);
        let e = call_builtin("json_query", &json!({"pointer": ""}), &ctx).unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::InvalidArguments);
    }

    #[test]
    fn long_key_lists_are_truncated() {
        let map: serde_json::Map<String, Value> =
            (0..30).map(|i| (format!("key{i:02}"), json!(i))).collect();
        let e = lookup(&Value::Object(map), "/zzzzzz").unwrap_err();
        assert!(e.message.ends_with("and 10 more"), "{}", e.message);
    }
}
