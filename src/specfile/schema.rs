//! The JSON Schema of the spec format, for editors' YAML language servers (`toolrun schema`),
//! generated from the declarations in [`keys`]: the same tables the reader checks keys against.

use super::keys::{self, Kind, Place, Ty};
use serde_json::{json, Map, Value};

pub(crate) const SCHEMA_ID: &str =
    "https://github.com/toolrun/toolrun/raw/main/toolrun.schema.json";

fn r(def: &str) -> Value {
    json!({ "$ref": format!("#/$defs/{def}") })
}

/// The kinds whose mappings `place` describes: `kind:` there is one of these.
fn kinds_of(place: &Place) -> Vec<&'static str> {
    keys::TOOL_KINDS
        .iter()
        .chain(keys::MODEL_KINDS)
        .filter(|k| std::ptr::eq(k.place, place))
        .map(|k| k.name)
        .collect()
}

fn type_of(place: &Place, ty: Ty) -> Value {
    match ty {
        Ty::Str => json!({ "type": "string" }),
        Ty::Bool => json!({ "type": "boolean" }),
        Ty::Object => json!({ "type": "object" }),
        Ty::Any => json!({}),
        Ty::Strings => json!({ "type": "array", "items": { "type": "string" } }),
        Ty::ToolNames => {
            json!({ "type": "array", "items": { "type": "string" }, "uniqueItems": true })
        }
        Ty::Count(min) => json!({ "type": "integer", "minimum": min }),
        Ty::Pattern(p) => json!({ "type": "string", "pattern": p }),
        Ty::Enum(words) => json!({ "enum": words }),
        Ty::Ref(def) => r(def),
        Ty::ListOf(def) => json!({ "type": "array", "items": r(def) }),
        // A kind's own def pins `kind`, so editors only offer that kind's keys.
        Ty::KindName => match kinds_of(place).as_slice() {
            [one] => json!({ "const": one }),
            many => json!({ "enum": many }),
        },
        Ty::EnumOr(words, place) => json!({ "oneOf": [{ "enum": words }, inline(place)] }),
        Ty::Json(schema) => schema(),
    }
}

/// The object schema of a place: its keys with their types and descriptions.
pub(crate) fn inline(place: &Place) -> Value {
    let mut props = Map::new();
    for key in place.all_keys() {
        let mut schema = type_of(place, key.ty);
        // Siblings of `$ref` are allowed in 2020-12, so references get a description too.
        if let Value::Object(m) = &mut schema {
            m.insert("description".into(), json!(key.doc));
        }
        props.insert(key.name.to_string(), schema);
    }
    let mut obj = json!({
        "type": "object",
        "description": place.doc,
        "properties": props,
        "additionalProperties": false,
    });
    let required: Vec<&str> = place
        .all_keys()
        .filter(|k| k.required)
        .map(|k| k.name)
        .collect();
    if !required.is_empty() {
        obj["required"] = json!(required);
    }
    if place.exactly_one {
        obj["minProperties"] = json!(1);
        obj["maxProperties"] = json!(1);
    }
    obj
}

/// `if kind is X then that def`: editors report the keys of the right kind, not a `oneOf` muddle.
fn dispatch(description: &str, kinds: &[Kind]) -> Value {
    let all: Vec<&str> = kinds.iter().map(|k| k.name).collect();
    let branches: Vec<Value> = kinds
        .iter()
        .map(|kind| {
            json!({
                "if": { "properties": { "kind": { "const": kind.name } }, "required": ["kind"] },
                "then": r(kind.place.def),
            })
        })
        .collect();
    json!({
        "type": "object",
        "description": description,
        "required": ["kind"],
        "properties": { "kind": { "enum": all, "description": format!("One of: {}.", all.join(", ")) } },
        "allOf": branches,
    })
}

pub(crate) fn spec_schema() -> Value {
    let mut defs = Map::new();
    let mut root = Value::Null;
    for place in keys::PLACES {
        let obj = inline(place);
        if std::ptr::eq(*place, keys::TOP) {
            root = obj;
        } else {
            defs.insert(place.def.to_string(), obj);
        }
    }
    defs.insert(
        keys::TOOL.def.into(),
        dispatch(keys::TOOL.doc, keys::TOOL_KINDS),
    );
    defs.insert(
        keys::MODEL.def.into(),
        dispatch(keys::MODEL.doc, keys::MODEL_KINDS),
    );
    defs.insert(
        "duration".into(),
        json!({
            "type": "string",
            "pattern": "^\\s*([0-9]+(\\.[0-9]+)?\\s*(ms|s|m|h))+\\s*$",
            "description": "A duration with a unit: `500ms`, `5s`, `2m`, `1h`, `1m30s`.",
        }),
    );
    defs.insert(
        "texts".into(),
        json!({
            "anyOf": [{ "type": ["string", "number"] }, { "type": "array", "items": { "type": "string" } }],
            "description": "A text or a list of texts.",
        }),
    );
    let mut schema = Map::new();
    schema.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    schema.insert("$id".into(), json!(SCHEMA_ID));
    schema.insert("title".into(), json!("toolrun spec"));
    if let Value::Object(root) = root {
        schema.extend(root);
    }
    schema.insert("$defs".into(), Value::Object(defs));
    Value::Object(schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_of(v: &Value) -> Vec<String> {
        v["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    #[test]
    fn every_place_has_exactly_its_declared_keys() {
        let schema = spec_schema();
        for place in keys::PLACES {
            let obj = if std::ptr::eq(*place, keys::TOP) {
                &schema
            } else {
                &schema["$defs"][place.def]
            };
            let want: Vec<String> = place.names().iter().map(|k| k.to_string()).collect();
            assert_eq!(keys_of(obj), want, "properties of `{}`", place.def);
            assert_eq!(
                obj["additionalProperties"],
                json!(false),
                "`{}` must refuse unknown keys",
                place.def
            );
        }
        let kinds = keys::TOOL_KINDS.iter().chain(keys::MODEL_KINDS);
        for kind in kinds {
            assert!(
                keys::PLACES.iter().any(|p| std::ptr::eq(*p, kind.place)),
                "kind `{}`: its place `{}` is not in keys::PLACES",
                kind.name,
                kind.place.def
            );
            let kind_schema = &schema["$defs"][kind.place.def]["properties"]["kind"];
            assert!(
                kind_schema["const"] == kind.name
                    || kind_schema["enum"]
                        .as_array()
                        .is_some_and(|e| e.contains(&json!(kind.name))),
                "`kind` of `{}` must admit `{}`: {kind_schema}",
                kind.place.def,
                kind.name
            );
        }
    }

    #[test]
    fn every_key_is_documented_once() {
        let places = keys::PLACES
            .iter()
            .chain([&keys::TOOL, &keys::MODEL, &keys::TOOL_CHOICE]);
        for place in places {
            assert!(!place.doc.is_empty(), "`{}` has no doc", place.def);
            let names = place.names();
            for key in place.all_keys() {
                assert!(
                    !key.doc.is_empty(),
                    "`{}.{}` has no doc",
                    place.def,
                    key.name
                );
                let n = names.iter().filter(|k| **k == key.name).count();
                assert_eq!(n, 1, "`{}.{}` is declared {n} times", place.def, key.name);
            }
        }
    }

    /// A `Ty::Ref("x")` whose `x` has no definition would leave editors without a schema.
    #[test]
    fn every_reference_is_defined() {
        fn refs(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(r)) = m.get("$ref") {
                        out.push(r.clone());
                    }
                    m.values().for_each(|v| refs(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let schema = spec_schema();
        let mut found = Vec::new();
        refs(&schema, &mut found);
        assert!(!found.is_empty());
        for r in found {
            let def = r.strip_prefix("#/$defs/").expect("local reference");
            assert!(schema["$defs"].get(def).is_some(), "`{r}` is not defined");
        }
    }

    #[test]
    fn schema_is_valid_draft_2020_12() {
        let schema = spec_schema();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        jsonschema::meta::validate(&schema).expect("meta-valid");
        jsonschema::draft202012::new(&schema).expect("compiles");
    }

    fn validator() -> jsonschema::Validator {
        jsonschema::draft202012::new(&spec_schema()).expect("compiles")
    }

    fn errors(v: &jsonschema::Validator, doc: &str) -> Vec<String> {
        let json = crate::specfile::yaml::parse(doc).expect("yaml").to_json();
        v.iter_errors(&json)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    #[test]
    fn every_example_spec_validates() {
        let v = validator();
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/specs");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).expect("specs/") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                let text = std::fs::read_to_string(&path).expect("read");
                let errs = errors(&v, &text);
                assert!(
                    errs.is_empty(),
                    "{} does not validate:\n{}",
                    path.display(),
                    errs.join("\n")
                );
                seen += 1;
            }
        }
        assert!(seen >= 2, "expected the example specs in {dir}");
    }

    #[test]
    fn wrong_keys_and_kinds_are_refused() {
        let v = validator();
        assert!(
            !errors(&v, "version: 1\nnmae: x\n").is_empty(),
            "unknown top-level key"
        );
        assert!(!errors(&v, "version: 2\n").is_empty(), "wrong version");
        let http_rows = "version: 1\ntools:\n  t:\n    kind: http\n    request: {url: 'https://a.test'}\n    rows: []\n";
        assert!(!errors(&v, http_rows).is_empty(), "`rows` on an http tool");
        let mock_ok = "version: 1\ntools:\n  t:\n    kind: mock\n    description: Returns one.\n    responses: [{result: 1}]\n";
        assert_eq!(errors(&v, mock_ok), Vec::<String>::new());
        assert!(
            !errors(&v, "version: 1\ntools:\n  t: {kind: mok}\n").is_empty(),
            "unknown kind"
        );
        let live_scripts = "version: 1\nmodels:\n  m: {kind: openai, model: x, scripts: []}\n";
        assert!(
            !errors(&v, live_scripts).is_empty(),
            "`scripts` on a live model"
        );
        assert!(
            !errors(&v, "version: 1\nlimits: {tool_timeout: 5}\n").is_empty(),
            "duration without unit"
        );
    }

    #[test]
    fn committed_schema_file_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/toolrun.schema.json");
        let fresh = format!(
            "{}\n",
            serde_json::to_string_pretty(&spec_schema()).expect("json")
        );
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(path, &fresh).expect("write toolrun.schema.json");
            return;
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(committed == fresh, "toolrun.schema.json is stale: run `UPDATE_SNAPSHOTS=1 cargo test committed_schema_file_is_current`");
    }
}
