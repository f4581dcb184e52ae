//! Tool input schemas: valid JSON Schema, of an object, with defaults that satisfy themselves.

use super::Ctx;
use crate::codes::Code;
use crate::diag::{did_you_mean, Diagnostic};

const JSON_TYPES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];
use crate::specfile::read::{expected, Obj};
use crate::specfile::yaml::{Node, Value};
use serde_json::json;

pub(super) fn empty_object_schema() -> serde_json::Value {
    json!({ "type": "object", "properties": {}, "additionalProperties": false })
}

/// JSON Pointer as jsonschema reports it → the YAML node it names.
fn node_at<'a>(root: &'a Node, location: &str) -> &'a Node {
    root.locate(location)
}

/// The schema and its compiled validator: building a validator is the costliest step of a
/// check, so the one built here is the one the registry keeps. A spec checked before
/// (`ctx.trusted`) skips the checks and leaves the validator to the tool's first call.
pub(super) fn compile_input_schema(
    node: &Node,
    tool: &str,
    ctx: &mut Ctx,
) -> Option<(serde_json::Value, Option<jsonschema::Validator>)> {
    if !matches!(node.value, Value::Map(_)) {
        ctx.d.push(expected(
            node,
            "a JSON Schema mapping",
            &format!("`input` of tool `{tool}`"),
        ));
        return None;
    }
    let schema = node.to_json();
    if ctx.trusted {
        return Some((schema, None));
    }
    let meta = match crate::arguments::shared_subset_draft(&schema) {
        Some(jsonschema::Draft::Draft7) => jsonschema::draft7::meta::validate(&schema),
        _ => jsonschema::meta::validate(&schema),
    };
    if let Err(e) = meta {
        let path = e.instance_path().as_str().to_string();
        let at = node_at(node, &path);
        // The meta-schema's own message for a misspelt type is an opaque `anyOf` failure.
        let diagnostic = match (path.rsplit('/').next(), at.as_str()) {
            (Some("type"), Some(t)) => Diagnostic::new(Code::E014, format!("`input` of tool `{tool}` uses `{t}`, which is not a JSON Schema type"))
                .label("unknown type")
                .help(did_you_mean(t, JSON_TYPES.iter().copied()).unwrap_or_else(|| format!("types are {}", JSON_TYPES.join(", ")))),
            _ => Diagnostic::new(Code::E014, format!("`input` of tool `{tool}` is not a valid JSON Schema: {}", e.masked()))
                .help("see https://json-schema.org/understanding-json-schema/ for the keywords and their values"),
        };
        ctx.d.push(diagnostic.at(at.span));
        return None;
    }
    match schema.get("type") {
        Some(serde_json::Value::String(t)) if t == "object" => {}
        other => {
            let at = Obj::peek_free(node).and_then(|n| n.get("type"));
            let at = at.unwrap_or(node);
            let found = match other {
                Some(serde_json::Value::String(t)) => format!("`type: {t}`"),
                Some(t) => format!("`type: {t}`"),
                None => "no `type`".into(),
            };
            ctx.d.push(
                Diagnostic::new(Code::E015, format!("`input` of tool `{tool}` must be an object schema, found {found}"))
                    .at(at.span)
                    .help("tool arguments are always a JSON object: write `type: object` with `properties:`"),
            );
            return None;
        }
    }
    let validator = match crate::arguments::tool_validator(&schema) {
        Ok(v) => v,
        Err(e) => {
            let at = node_at(node, e.schema_path().as_str());
            ctx.d.push(
                Diagnostic::new(
                    Code::E014,
                    format!("`input` of tool `{tool}` does not compile: {}", e.masked()),
                )
                .at(at.span)
                .help("check `$ref`s and regular expressions in the schema"),
            );
            return None;
        }
    };
    check_defaults(node, &schema, tool, ctx);
    Some((schema, Some(validator)))
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
            .map(|e| crate::arguments::error_text(&e, true));
        if let Some(err) = first_error {
            let at = node.locate(&format!(
                "/properties/{}/default",
                name.replace('~', "~0").replace('/', "~1")
            ));
            ctx.d.push(
                Diagnostic::new(Code::W102, format!("the default of `{name}` in tool `{tool}` breaks its own schema: {err}"))
                    .at(at.span)
                    .help("fix the default, or allow it (e.g. `type: [string, \"null\"]` for `default: null`)"),
            );
        }
    }
}
