//! Built-in tools that run inside the process, without a shell or network.
//!
//! Every builtin is a pure function of its arguments and a [`BuiltinContext`]: nothing
//! reads the system clock, the environment or the file system, so a recorded fixture
//! replays to exactly the same observations.

use serde_json::{Map, Value};
use std::fmt;

mod calculator;
pub(crate) mod datetime;
mod json_query;
mod regex_match;
mod text;
mod unit_convert;

/// Why a builtin refused or failed; maps onto the trace's error `kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinError {
    pub(crate) kind: BuiltinErrorKind,
    pub(crate) message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum BuiltinErrorKind {
    /// The caller (usually the model) sent something it should fix and retry.
    InvalidArguments,
    /// The arguments were well-formed but the computation itself failed.
    ExecutionError,
    /// The thing asked for does not exist (a missing JSON Pointer target, an unknown builtin).
    NotFound,
}

impl BuiltinErrorKind {
    /// The spelling used for error `kind` in traces and fixtures.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            BuiltinErrorKind::InvalidArguments => "invalid_arguments",
            BuiltinErrorKind::ExecutionError => "execution_error",
            BuiltinErrorKind::NotFound => "not_found",
        }
    }
}

impl fmt::Display for BuiltinErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl BuiltinError {
    pub(crate) fn new(kind: BuiltinErrorKind, message: impl Into<String>) -> Self {
        BuiltinError {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(BuiltinErrorKind::InvalidArguments, message)
    }

    pub(crate) fn execution(message: impl Into<String>) -> Self {
        Self::new(BuiltinErrorKind::ExecutionError, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(BuiltinErrorKind::NotFound, message)
    }
}

impl fmt::Display for BuiltinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BuiltinError {}

/// Deterministic inputs the runtime supplies (recorded in fixtures so replays are identical).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinContext {
    pub now_unix_ms: i64,
}

/// Static description of one builtin, enough to compile it into a tool definition.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinInfo {
    pub name: &'static str,
    /// JSON Schema (draft 2020-12 compatible) of the arguments object.
    pub input_schema: fn() -> Value,
}

type Handler = fn(&Args<'_>, &BuiltinContext) -> Result<Value, BuiltinError>;

// Kept sorted by name: `all()` promises that order and `find` relies on it.
static BUILTINS: [BuiltinInfo; 6] = [
    BuiltinInfo {
        name: "calculator",
        input_schema: calculator::schema,
    },
    BuiltinInfo {
        name: "datetime",
        input_schema: datetime::schema,
    },
    BuiltinInfo {
        name: "json_query",
        input_schema: json_query::schema,
    },
    BuiltinInfo {
        name: "regex_match",
        input_schema: regex_match::schema,
    },
    BuiltinInfo {
        name: "text",
        input_schema: text::schema,
    },
    BuiltinInfo {
        name: "unit_convert",
        input_schema: unit_convert::schema,
    },
];

fn handler(name: &str) -> Option<Handler> {
    Some(match name {
        "calculator" => calculator::call,
        "datetime" => datetime::call,
        "json_query" => json_query::call,
        "regex_match" => regex_match::call,
        "text" => text::call,
        "unit_convert" => unit_convert::call,
        _ => return None,
    })
}

/// Every builtin, sorted by name.
pub fn all() -> &'static [BuiltinInfo] {
    &BUILTINS
}

pub(crate) fn find(name: &str) -> Option<&'static BuiltinInfo> {
    BUILTINS
        .binary_search_by(|b| b.name.cmp(name))
        .ok()
        .map(|i| &BUILTINS[i])
}

/// Runs a builtin. Never panics, whatever `args` holds.
pub fn call(name: &str, args: &Value, ctx: &BuiltinContext) -> Result<Value, BuiltinError> {
    let (info, run) = match (find(name), handler(name)) {
        (Some(info), Some(run)) => (info, run),
        _ => {
            let names: Vec<&str> = BUILTINS.iter().map(|b| b.name).collect();
            return Err(BuiltinError::not_found(format!(
                "unknown builtin `{name}`{}; available: {}",
                did_you_mean(name, names.iter().copied()),
                names.join(", ")
            )));
        }
    };
    let empty = Map::new();
    let map = match args {
        Value::Object(map) => map,
        Value::Null => &empty,
        other => {
            return Err(BuiltinError::invalid(format!(
                "arguments must be a JSON object, got {}",
                json_type(other)
            )))
        }
    };
    // Callers are meant to validate against the schema first; this re-check keeps a
    // misspelt optional argument from being silently ignored if they did not.
    let schema = (info.input_schema)();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for key in map.keys() {
            if !props.contains_key(key) {
                return Err(BuiltinError::invalid(format!(
                    "unknown argument `{key}` for `{}`{}; accepted: {}",
                    info.name,
                    did_you_mean(key, props.keys().map(String::as_str)),
                    props
                        .keys()
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
    }
    run(&Args { map }, ctx)
}

/// Typed access to an arguments object, with messages that name the argument.
pub(crate) struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// Absent and `null` both mean "not given": models often send `null` for unused options.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&'a str>, BuiltinError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(wrong_type(key, "a string", other)),
        }
    }

    pub(crate) fn req_str(&self, key: &str) -> Result<&'a str, BuiltinError> {
        self.opt_str(key)?
            .ok_or_else(|| BuiltinError::invalid(format!("missing required argument `{key}`")))
    }

    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, BuiltinError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(wrong_type(key, "a boolean", other)),
        }
    }

    pub(crate) fn opt_f64(&self, key: &str) -> Result<Option<f64>, BuiltinError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(x) if x.is_finite() => Ok(Some(x)),
                _ => Err(BuiltinError::invalid(format!(
                    "argument `{key}` is not a finite number"
                ))),
            },
            Some(other) => Err(wrong_type(key, "a number", other)),
        }
    }

    pub(crate) fn req_f64(&self, key: &str) -> Result<f64, BuiltinError> {
        self.opt_f64(key)?
            .ok_or_else(|| BuiltinError::invalid(format!("missing required argument `{key}`")))
    }

    /// Rejects arguments that the chosen `operation` would silently ignore.
    pub(crate) fn only_for(
        &self,
        operation: &str,
        allowed: &[&str],
        all_optional: &[&str],
    ) -> Result<(), BuiltinError> {
        for key in all_optional {
            if self.get(key).is_some() && !allowed.contains(key) {
                return Err(BuiltinError::invalid(format!(
                    "argument `{key}` is not used by operation `{operation}`"
                )));
            }
        }
        Ok(())
    }
}

fn wrong_type(key: &str, expected: &str, got: &Value) -> BuiltinError {
    BuiltinError::invalid(format!(
        "argument `{key}` must be {expected}, got {}",
        json_type(got)
    ))
}

pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `"; did you mean `x`?"` for the closest candidate, or `""` when nothing is close.
pub(crate) fn did_you_mean<'c>(
    input: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> String {
    match closest(input, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => String::new(),
    }
}

pub(crate) fn closest<'c>(
    input: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    let input = input.to_lowercase();
    let mut best: Option<(f64, &str)> = None;
    for c in candidates {
        let score = strsim::jaro_winkler(&input, &c.to_lowercase());
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, c));
        }
    }
    // 0.8 keeps typos ("sqr", "metr") and drops unrelated words ("banana").
    best.filter(|(s, _)| *s >= 0.8).map(|(_, c)| c)
}

/// A JSON number without binary floating-point noise: integral values within the exactly
/// representable range become JSON integers, everything else is rounded to 12 significant
/// digits (so `0.1 + 0.2` reads `0.3`). `None` for NaN and infinities, which JSON lacks.
pub(crate) fn clean_number(x: f64) -> Option<Value> {
    if !x.is_finite() {
        return None;
    }
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if x.abs() < EXACT && x.fract() == 0.0 {
        // The cast also folds -0 into 0, which a JSON integer cannot express anyway.
        return Some(Value::from(x as i64));
    }
    let rounded = round_significant(x, 12);
    // Checking `x` too keeps 2^53 from posing as the exact integer 9007199254740000.
    if x.abs() < EXACT && rounded.fract() == 0.0 {
        return Some(Value::from(rounded as i64));
    }
    serde_json::Number::from_f64(rounded).map(Value::Number)
}

/// Rounds through the decimal representation, which is exact where `x * 10^k` is not.
pub(crate) fn round_significant(x: f64, digits: usize) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let text = format!("{:.*e}", digits.saturating_sub(1), x);
    text.parse().unwrap_or(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CTX: BuiltinContext = BuiltinContext {
        now_unix_ms: 1_709_208_000_000,
    };

    #[test]
    fn all_is_sorted_and_findable() {
        let names: Vec<&str> = all().iter().map(|b| b.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        for b in all() {
            assert_eq!(find(b.name).map(|f| f.name), Some(b.name));
            assert!(handler(b.name).is_some(), "{} has no handler", b.name);
        }
        assert!(find("nope").is_none());
    }

    #[test]
    fn schemas_are_closed_objects_with_described_properties() {
        for b in all() {
            let s = (b.input_schema)();
            assert_eq!(s["type"], "object", "{}", b.name);
            assert_eq!(s["additionalProperties"], false, "{}", b.name);
            let props = s["properties"].as_object().expect("properties");
            assert!(!props.is_empty());
            for (k, p) in props {
                let d = p["description"].as_str().unwrap_or("");
                assert!(!d.is_empty(), "{}.{} lacks a description", b.name, k);
            }
            for r in s["required"].as_array().into_iter().flatten() {
                assert!(props.contains_key(r.as_str().unwrap()), "{}: {r}", b.name);
            }
        }
    }

    #[test]
    fn unknown_builtin_is_not_found_with_suggestion() {
        let e = call("calculater", &json!({}), &CTX).unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::NotFound);
        assert!(
            e.message.contains("did you mean `calculator`?"),
            "{}",
            e.message
        );
    }

    #[test]
    fn non_object_arguments_are_rejected() {
        for args in [json!(1), json!("x"), json!([1]), json!(true)] {
            let e = call("calculator", &args, &CTX).unwrap_err();
            assert_eq!(e.kind, BuiltinErrorKind::InvalidArguments);
        }
        let e = call("calculator", &Value::Null, &CTX).unwrap_err();
        assert!(e.message.contains("missing required argument `expression`"));
    }

    #[test]
    fn unknown_argument_is_rejected_with_suggestion() {
        let e = call("calculator", &json!({"expresion": "1"}), &CTX).unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::InvalidArguments);
        assert!(
            e.message.contains("did you mean `expression`?"),
            "{}",
            e.message
        );
    }

    #[test]
    fn wrong_types_are_invalid_arguments() {
        let e = call("calculator", &json!({"expression": 5}), &CTX).unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::InvalidArguments);
        assert!(e.message.contains("must be a string, got a number"));
    }

    #[test]
    fn clean_number_drops_float_noise() {
        assert_eq!(clean_number(0.1 + 0.2), Some(json!(0.3)));
        assert_eq!(clean_number((178.15 - 150.0) * 100.0), Some(json!(2815)));
        assert_eq!(clean_number(1.0 / 3.0), Some(json!(0.333333333333)));
        assert_eq!(clean_number(-0.0), Some(json!(0)));
        assert_eq!(clean_number(2f64.powi(53)), Some(json!(9.00719925474e15)));
        assert_eq!(clean_number(1e300), Some(json!(1e300)));
        assert_eq!(clean_number(f64::NAN), None);
        assert_eq!(clean_number(f64::INFINITY), None);
        assert!(clean_number(2815.0).unwrap().is_i64());
    }

    #[test]
    fn error_kind_spellings_match_the_trace_contract() {
        assert_eq!(
            BuiltinErrorKind::InvalidArguments.as_str(),
            "invalid_arguments"
        );
        assert_eq!(BuiltinErrorKind::ExecutionError.as_str(), "execution_error");
        assert_eq!(BuiltinErrorKind::NotFound.as_str(), "not_found");
    }

    #[test]
    fn closest_ignores_unrelated_words() {
        assert_eq!(closest("sqr", ["sqrt", "sin"]), Some("sqrt"));
        assert_eq!(closest("banana", ["sqrt", "sin"]), None);
    }
}
