//! How a tool's arguments are checked against its input schema: which draft reads the schema,
//! and a validator built on the tool's first call. Building validators is most of a cold start,
//! and a run calls few of its tools.

use std::sync::OnceLock;

/// Arguments are checked against formats too (`date`, `email`, ...): a model's malformed date
/// is better rejected as `invalid_arguments` than passed to a tool.
pub(crate) fn tool_validator(
    schema: &serde_json::Value,
) -> Result<jsonschema::Validator, jsonschema::ValidationError<'static>> {
    let mut options = jsonschema::options().with_retriever(Unfetched);
    if let Some(draft) = shared_subset_draft(schema) {
        options = options.with_draft(draft);
    }
    options.should_validate_formats(true).build(schema)
}

/// What a `$ref` to another document (`https://...`, `file:...`) stands for: any value. Such a
/// reference is never fetched (SEP-2106: a client must not dereference a network URI a server's
/// schema names, and a spec's schema reaches no network either); the rest of the schema,
/// references within it included, still checks the arguments.
struct Unfetched;

impl jsonschema::Retrieve for Unfetched {
    fn retrieve(
        &self,
        _uri: &jsonschema::Uri<String>,
    ) -> Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>> {
        Ok(serde_json::json!({}))
    }
}

/// How many allowed values an error lists before it says how many more there are: twelve
/// months fit; a list of every country code would drown the message.
pub(crate) const ENUM_VALUES_SHOWN: usize = 30;

/// A validation error as toolrun words it. The validator's own message for `enum` names two
/// values and counts the rest ("january, february or 10 other candidates"); here every allowed
/// value is listed, up to [`ENUM_VALUES_SHOWN`], so the model (or the person) can fix the call.
/// `masked`: the offending value is not repeated (it may be a secret).
pub(crate) fn error_text(err: &jsonschema::ValidationError<'_>, masked: bool) -> String {
    let jsonschema::error::ValidationErrorKind::Enum { options } = err.kind() else {
        return if masked {
            err.masked().to_string()
        } else {
            err.to_string()
        };
    };
    let values = options.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut shown: Vec<String> = values
        .iter()
        .take(ENUM_VALUES_SHOWN)
        .map(serde_json::Value::to_string)
        .collect();
    if values.len() > ENUM_VALUES_SHOWN {
        shown.push(format!("{} more", values.len() - ENUM_VALUES_SHOWN));
    }
    let list = match shown.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "nothing".to_string(),
    };
    if masked {
        format!("value is not one of {list}")
    } else {
        format!("{} is not one of {list}", err.instance())
    }
}

/// Keywords whose meaning differs between draft-07 and 2020-12, or that only 2020-12 has.
const MODERN_KEYWORDS: &[&str] = &[
    "prefixItems",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
    "$anchor",
    "$vocabulary",
    "minContains",
    "maxContains",
    "contentSchema",
];
/// Keywords that may sit beside `$ref` without changing validation in either draft.
const ANNOTATIONS: &[&str] = &[
    "$ref",
    "description",
    "title",
    "$comment",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Draft-07 when it validates exactly as 2020-12 would, else `None` (2020-12, or the declared
/// `$schema`). Why: building the 2020-12 meta-schema's validator is over half of a small run's
/// start-up, and nearly every tool schema uses only keywords both drafts read the same way
/// (type, properties, required, enum, items as a schema, anyOf, ...).
pub(crate) fn shared_subset_draft(schema: &serde_json::Value) -> Option<jsonschema::Draft> {
    fn modern(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Object(map) => {
                map.keys().any(|k| MODERN_KEYWORDS.contains(&k.as_str()))
                    // Beside `$ref`, draft-07 ignores every other keyword; 2020-12 applies them.
                    || (map.contains_key("$ref") && map.keys().any(|k| !ANNOTATIONS.contains(&k.as_str())))
                    // Array-form `items` is a tuple in draft-07 and an error in 2020-12.
                    || map.get("items").is_some_and(serde_json::Value::is_array)
                    // Formats draft-07 does not know would silently stop being checked.
                    || map.get("format").and_then(serde_json::Value::as_str).is_some_and(|f| matches!(f, "uuid" | "duration"))
                    || map.values().any(modern)
            }
            serde_json::Value::Array(items) => items.iter().any(modern),
            _ => false,
        }
    }
    if schema.get("$schema").is_some() || modern(schema) {
        None
    } else {
        Some(jsonschema::Draft::Draft7)
    }
}

/// A tool's validator: the one `check` built while checking the schema, or one built on the
/// tool's first call.
#[derive(Default)]
pub(crate) struct LazyValidator(OnceLock<Result<jsonschema::Validator, String>>);

impl LazyValidator {
    pub(crate) fn built(validator: jsonschema::Validator) -> LazyValidator {
        LazyValidator(OnceLock::from(Ok(validator)))
    }

    /// The validator of `schema`; `Err` only for a schema that was never checked and does not
    /// compile.
    pub(crate) fn get(&self, schema: &serde_json::Value) -> Result<&jsonschema::Validator, &str> {
        self.0
            .get_or_init(|| tool_validator(schema).map_err(|e| e.masked().to_string()))
            .as_ref()
            .map_err(String::as_str)
    }

    #[cfg(test)]
    pub(crate) fn is_built(&self) -> bool {
        self.0.get().is_some()
    }
}

/// `1` and `1.0` are the same number to a person writing `when:`.
fn json_eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a, b) {
        (serde_json::Value::Number(x), serde_json::Value::Number(y)) => x.as_f64() == y.as_f64(),
        (serde_json::Value::Array(x), serde_json::Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (serde_json::Value::Object(x), serde_json::Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A mock's `when:` or a test's expected arguments: every key it names, with an equal value.
pub(crate) fn is_subset(
    expected: &serde_json::Map<String, serde_json::Value>,
    actual: &serde_json::Value,
) -> bool {
    expected
        .iter()
        .all(|(k, v)| actual.get(k).is_some_and(|a| json_eq(v, a)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_lazy_validator_is_built_on_first_use_and_reports_a_broken_schema() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let lazy = LazyValidator::default();
        assert!(!lazy.is_built());
        assert!(!lazy.get(&schema).unwrap().is_valid(&json!({"n": "x"})));
        assert!(lazy.is_built());
        let broken = LazyValidator::default();
        assert!(broken.get(&json!({"type": "strng"})).is_err());
    }

    #[test]
    fn a_reference_to_another_document_is_not_fetched_and_the_rest_still_checks() {
        let schema = json!({"type": "object", "$defs": {"id": {"type": "string", "pattern": "^[a-z]+$"}},
            "properties": {"id": {"$ref": "#/$defs/id"}, "profile": {"$ref": "http://127.0.0.1:9/profile.json"}},
            "required": ["id"]});
        let v = tool_validator(&schema).unwrap();
        assert!(v.is_valid(&json!({"id": "abc", "profile": {"anything": 1}})));
        assert!(!v.is_valid(&json!({"id": "ABC"})));
    }

    #[test]
    fn plain_schemas_use_the_cheap_draft_and_modern_ones_keep_2020_12() {
        let plain = json!({"type": "object", "properties": {"t": {"type": "string", "enum": ["a"]}, "n": {"anyOf": [{"type": "integer"}]}}, "required": ["t"]});
        assert_eq!(shared_subset_draft(&plain), Some(jsonschema::Draft::Draft7));
        for modern in [
            json!({"type": "object", "properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}]}}}),
            json!({"type": "object", "properties": {"t": {"$ref": "#/$defs/x", "maxLength": 3}}, "$defs": {"x": {"type": "string"}}}),
            json!({"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}}),
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}),
            json!({"type": "object", "properties": {"t": {"items": [{"type": "string"}]}}}),
        ] {
            assert_eq!(shared_subset_draft(&modern), None, "{modern}");
        }
    }

    #[test]
    fn both_drafts_agree_on_the_shared_subset() {
        let schema = json!({"type": "object", "properties": {"t": {"type": "string", "minLength": 2, "pattern": "^[A-Z]+$"}, "n": {"type": "integer", "minimum": 1}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}}, "required": ["t"], "additionalProperties": false});
        let d7 = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft7)
            .build(&schema)
            .unwrap();
        let d2020 = jsonschema::options().build(&schema).unwrap();
        for instance in [
            json!({"t": "AB"}),
            json!({"t": "A"}),
            json!({"t": "ab"}),
            json!({"n": 0}),
            json!({"t": "AB", "x": 1}),
            json!({"t": "AB", "tags": ["a", "b", "c"]}),
            json!({"t": "AB", "tags": [1]}),
            json!({"t": 5}),
        ] {
            assert_eq!(
                d7.is_valid(&instance),
                d2020.is_valid(&instance),
                "{instance}"
            );
        }
    }
}
