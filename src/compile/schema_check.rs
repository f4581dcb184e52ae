//! Tool input schemas: valid JSON Schema, of an object, with defaults that satisfy themselves.

use super::Ctx;
use crate::diag::{did_you_mean, Diagnostic};

const JSON_TYPES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];
use crate::spec::read::expected;
use crate::spec::yaml::{Node, Value};
use serde_json::json;

pub fn empty_object_schema() -> serde_json::Value {
    json!({ "type": "object", "properties": {}, "additionalProperties": false })
}

/// JSON Pointer as jsonschema reports it → the YAML node it names.
fn node_at<'a>(root: &'a Node, location: &str) -> &'a Node {
    root.locate(location)
}

/// The schema and its compiled validator: building a validator is the costliest step of a
/// check, so the one built here is the one the registry keeps.
pub fn compile_input_schema(
    node: &Node,
    tool: &str,
    ctx: &mut Ctx,
) -> Option<(serde_json::Value, jsonschema::Validator)> {
    if !matches!(node.value, Value::Map(_)) {
        ctx.d.push(expected(
            node,
            "a JSON Schema mapping",
            &format!("`input` of tool `{tool}`"),
        ));
        return None;
    }
    let schema = node.to_json();
    let meta = match shared_subset_draft(&schema) {
        Some(jsonschema::Draft::Draft7) => jsonschema::draft7::meta::validate(&schema),
        _ => jsonschema::meta::validate(&schema),
    };
    if let Err(e) = meta {
        let path = e.instance_path().as_str().to_string();
        let at = node_at(node, &path);
        // The meta-schema's own message for a misspelt type is an opaque `anyOf` failure.
        let diagnostic = match (path.rsplit('/').next(), at.as_str()) {
            (Some("type"), Some(t)) => Diagnostic::new("E014", format!("`input` of tool `{tool}` uses `{t}`, which is not a JSON Schema type"))
                .label("unknown type")
                .help(did_you_mean(t, JSON_TYPES.iter().copied()).unwrap_or_else(|| format!("types are {}", JSON_TYPES.join(", ")))),
            _ => Diagnostic::new("E014", format!("`input` of tool `{tool}` is not a valid JSON Schema: {}", e.masked()))
                .help("see https://json-schema.org/understanding-json-schema/ for the keywords and their values"),
        };
        ctx.d.push(diagnostic.at(at.span));
        return None;
    }
    match schema.get("type") {
        Some(serde_json::Value::String(t)) if t == "object" => {}
        other => {
            let at = node.get("type").unwrap_or(node);
            let found = match other {
                Some(serde_json::Value::String(t)) => format!("`type: {t}`"),
                Some(t) => format!("`type: {t}`"),
                None => "no `type`".into(),
            };
            ctx.d.push(
                Diagnostic::new("E015", format!("`input` of tool `{tool}` must be an object schema, found {found}"))
                    .at(at.span)
                    .help("tool arguments are always a JSON object: write `type: object` with `properties:`"),
            );
            return None;
        }
    }
    let validator = match tool_validator(&schema) {
        Ok(v) => v,
        Err(e) => {
            let at = node_at(node, e.schema_path().as_str());
            ctx.d.push(
                Diagnostic::new(
                    "E014",
                    format!("`input` of tool `{tool}` does not compile: {}", e.masked()),
                )
                .at(at.span)
                .help("check `$ref`s and regular expressions in the schema"),
            );
            return None;
        }
    };
    check_defaults(node, &schema, tool, ctx);
    Some((schema, validator))
}

/// Arguments are checked against formats too (`date`, `email`, ...): a model's malformed date
/// is better rejected as `invalid_arguments` than passed to a tool.
pub fn tool_validator(
    schema: &serde_json::Value,
) -> Result<jsonschema::Validator, jsonschema::ValidationError<'static>> {
    let mut options = jsonschema::options();
    if let Some(draft) = shared_subset_draft(schema) {
        options = options.with_draft(draft);
    }
    options.should_validate_formats(true).build(schema)
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
pub fn shared_subset_draft(schema: &serde_json::Value) -> Option<jsonschema::Draft> {
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

/// Real-world schemas are full of `default: null` on string parameters: worth a warning, since
/// a model copying the default sends an invalid call, but not worth refusing the spec.
fn check_defaults(node: &Node, schema: &serde_json::Value, tool: &str, ctx: &mut Ctx) {
    let Some(props) = schema.get("properties").and_then(|p| p.as_object()) else {
        return;
    };
    for (name, prop) in props {
        let Some(default) = prop.get("default") else {
            continue;
        };
        let Ok(validator) = jsonschema::validator_for(prop) else {
            continue;
        };
        let first_error = validator
            .iter_errors(default)
            .next()
            .map(|e| e.masked().to_string());
        if let Some(err) = first_error {
            let at = node.locate(&format!(
                "/properties/{}/default",
                name.replace('~', "~0").replace('/', "~1")
            ));
            ctx.d.push(
                Diagnostic::new("W102", format!("the default of `{name}` in tool `{tool}` breaks its own schema: {err}"))
                    .at(at.span)
                    .help("fix the default, or allow it (e.g. `type: [string, \"null\"]` for `default: null`)"),
            );
        }
    }
}

#[cfg(test)]
mod draft_tests {
    use super::shared_subset_draft;
    use serde_json::json;

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
