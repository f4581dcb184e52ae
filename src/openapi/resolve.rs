//! `$ref`s of one OpenAPI document, resolved into self-contained JSON Schemas a tool's `input`
//! can hold. Local pointers (`#/components/schemas/Pet`), 3.1's `$id` and `$anchor` references
//! (`/schemas/pet#details`), and siblings next to a `$ref` (3.1: they win). What only documents
//! (`example`, `xml`, `x-*` extensions, dialect keywords) is dropped; 3.0's `nullable` and boolean
//! `exclusiveMinimum`/`exclusiveMaximum` become their JSON Schema spelling. Recursion stops: a
//! `$ref` inside itself, `$recursiveRef`/`$dynamicRef` and anything past the budget accept any
//! value, so a recursive or exponentially branching document cannot exhaust the stack or memory.

use percent_encoding::percent_decode_str;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// How deep `$ref`s are followed inside each other at most.
const MAX_REF_DEPTH: usize = 16;

/// `$ref`s expanded for one value at most: a document whose schemas share parts through many
/// paths would otherwise be copied out exponentially. Generous for real APIs (OpenAI's largest
/// request body expands a few hundred).
const MAX_EXPANSIONS: usize = 5_000;

/// `$ref`s expanded for the whole document: a budget per value alone still lets hundreds of
/// operations each expand their 5,000 (a 63 KB document once became a 298 MB spec). Past it,
/// references accept any value, like a cycle.
const MAX_DOCUMENT_EXPANSIONS: usize = 50_000;

/// Keywords that name or document a schema, never constrain a value: dropped, since every
/// `$ref` is inlined and the tool's input is read by a model on every request.
const DROPPED: [&str; 14] = [
    "xml",
    "example",
    "discriminator",
    "externalDocs",
    "nullable",
    "$schema",
    "$id",
    "$vocabulary",
    "$anchor",
    "$dynamicAnchor",
    "$recursiveAnchor",
    "$comment",
    "$defs",
    "definitions",
];

/// Keywords whose value maps names to schemas: their keys are names, never keywords.
const SCHEMA_MAPS: [&str; 3] = ["properties", "patternProperties", "dependentSchemas"];

pub(super) struct Resolver<'d> {
    doc: &'d Value,
    /// `$id` → JSON Pointer of the schema declaring it.
    ids: HashMap<String, String>,
    /// (`$id` of the enclosing schema resource, `""` for the document; anchor) → JSON Pointer.
    anchors: HashMap<(String, String), String>,
    /// Expansions made so far for the whole document (see [`MAX_DOCUMENT_EXPANSIONS`]).
    spent: std::cell::Cell<usize>,
}

struct Walk {
    depth: usize,
    expansions: usize,
    chain: Vec<String>,
}

impl<'d> Resolver<'d> {
    pub(super) fn new(doc: &'d Value) -> Resolver<'d> {
        let mut r = Resolver {
            doc,
            ids: HashMap::new(),
            anchors: HashMap::new(),
            spent: std::cell::Cell::new(0),
        };
        r.index(doc, &mut String::new(), "");
        r
    }

    fn index(&mut self, v: &Value, pointer: &mut String, resource: &str) {
        match v {
            Value::Object(m) => {
                let id = m.get("$id").and_then(Value::as_str);
                if let Some(id) = id {
                    self.ids.insert(id.to_string(), pointer.clone());
                }
                let resource = id.unwrap_or(resource).to_string();
                for key in ["$anchor", "$dynamicAnchor"] {
                    if let Some(a) = m.get(key).and_then(Value::as_str) {
                        self.anchors
                            .insert((resource.clone(), a.to_string()), pointer.clone());
                    }
                }
                for (k, child) in m {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
                    self.index(child, pointer, &resource);
                    pointer.truncate(len);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    let len = pointer.len();
                    pointer.push_str(&format!("/{i}"));
                    self.index(child, pointer, resource);
                    pointer.truncate(len);
                }
            }
            _ => {}
        }
    }

    /// What a `$ref` points at, or `None` (another file, a URL, a typo).
    fn target(&self, reference: &str) -> Option<&'d Value> {
        let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let fragment = percent_decode_str(fragment).decode_utf8().ok()?;
        let root = if base.is_empty() {
            String::new()
        } else {
            self.ids.get(base)?.clone()
        };
        if fragment.is_empty() || fragment.starts_with('/') {
            self.doc.pointer(&format!("{root}{fragment}"))
        } else {
            let at = self
                .anchors
                .get(&(base.to_string(), fragment.into_owned()))?;
            self.doc.pointer(at)
        }
    }

    pub(super) fn doc(&self) -> &'d Value {
        self.doc
    }

    /// The value with every `$ref` inside it resolved.
    pub(super) fn resolve(&self, v: &Value) -> Value {
        let mut walk = Walk {
            depth: 0,
            expansions: 0,
            chain: Vec::new(),
        };
        let v = self.value(v, &mut walk);
        self.spent.set(self.spent.get() + walk.expansions);
        v
    }

    /// Follows only a `$ref` at the top (a path item, an operation): their parts are resolved
    /// when they are used.
    pub(super) fn shallow(&self, v: &'d Value) -> &'d Value {
        let mut v = v;
        for _ in 0..MAX_REF_DEPTH {
            match v
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| self.target(r))
            {
                Some(t) => v = t,
                None => break,
            }
        }
        v
    }

    fn value(&self, v: &Value, walk: &mut Walk) -> Value {
        match v {
            Value::Object(m) => match m.get("$ref") {
                Some(Value::String(r)) => self.reference(r, m, walk),
                _ => self.object(m, walk),
            },
            Value::Array(items) => {
                Value::Array(items.iter().map(|i| self.value(i, walk)).collect())
            }
            other => other.clone(),
        }
    }

    fn reference(&self, r: &str, m: &Map<String, Value>, walk: &mut Walk) -> Value {
        let target = self.target(r);
        // A cycle would repeat forever (and a branching one grow exponentially): the inner
        // occurrence accepts any value, as does a reference that leads nowhere.
        let stop = walk.depth >= MAX_REF_DEPTH
            || walk.expansions >= MAX_EXPANSIONS
            || self.spent.get() + walk.expansions >= MAX_DOCUMENT_EXPANSIONS
            || walk.chain.iter().any(|c| c == r);
        let mut resolved = match target {
            Some(t) if !stop => {
                walk.expansions += 1;
                walk.depth += 1;
                walk.chain.push(r.to_string());
                let v = self.value(t, walk);
                walk.chain.pop();
                walk.depth -= 1;
                v
            }
            _ => json!({}),
        };
        // 3.1 allows siblings next to `$ref` (a description, say): they win.
        let siblings: Map<String, Value> = m
            .iter()
            .filter(|(k, _)| *k != "$ref")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let (Value::Object(out), Value::Object(extra)) =
            (&mut resolved, self.object(&siblings, walk))
        {
            out.extend(extra);
        }
        resolved
    }

    fn object(&self, m: &Map<String, Value>, walk: &mut Walk) -> Value {
        let mut out = Map::new();
        for (k, val) in m {
            let keep = !(DROPPED.contains(&k.as_str())
                || k.starts_with("x-")
                // Only JSON Schema's own `examples` (a list) is a keyword; OpenAPI's are maps.
                || (k == "examples" && !val.is_array())
                || matches!(k.as_str(), "$ref" | "$recursiveRef" | "$dynamicRef"));
            if !keep {
                continue;
            }
            let resolved = match (SCHEMA_MAPS.contains(&k.as_str()), val) {
                (true, Value::Object(named)) => Value::Object(
                    named
                        .iter()
                        .map(|(name, s)| (name.clone(), self.value(s, walk)))
                        .collect(),
                ),
                _ => self.value(val, walk),
            };
            out.insert(k.clone(), resolved);
        }
        exclusive_bounds(m, &mut out);
        if m.get("nullable") == Some(&Value::Bool(true)) {
            nullable(&mut out);
        }
        Value::Object(out)
    }
}

/// 3.0's `exclusiveMinimum: true` next to `minimum: 5` is JSON Schema's `exclusiveMinimum: 5`.
fn exclusive_bounds(m: &Map<String, Value>, out: &mut Map<String, Value>) {
    for (flag, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(Value::Bool(on)) = m.get(flag) {
            out.remove(flag);
            if *on {
                if let Some(limit) = out.remove(bound) {
                    out.insert(flag.into(), limit);
                }
            }
        }
    }
}

/// 3.0's `nullable: true`: null joins the types (and the enum, which would refuse it).
fn nullable(out: &mut Map<String, Value>) {
    match out.get("type").cloned() {
        Some(Value::String(t)) => {
            out.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(mut ts)) if !ts.contains(&json!("null")) => {
            ts.push(json!("null"));
            out.insert("type".into(), Value::Array(ts));
        }
        _ => {}
    }
    if let Some(Value::Array(values)) = out.get_mut("enum") {
        if !values.contains(&Value::Null) {
            values.push(Value::Null);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_resolve_recursively_and_nullable_becomes_a_type() {
        let doc = json!({
            "components": { "schemas": {
                "Node": { "type": "object", "nullable": true, "properties": { "next": { "$ref": "#/components/schemas/Node" } } }
            } }
        });
        let v = Resolver::new(&doc).resolve(&json!({ "$ref": "#/components/schemas/Node" }));
        assert_eq!(v["type"], json!(["object", "null"]));
        assert_eq!(v["properties"]["next"], json!({}), "the cycle stops");
    }

    #[test]
    fn ids_and_anchors_of_3_1_resolve() {
        let doc = json!({
            "components": { "schemas": {
                "Details": {
                    "$id": "/schemas/details",
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "properties": { "id": { "$anchor": "details_id", "type": "integer" } }
                }
            } }
        });
        let r = Resolver::new(&doc);
        assert_eq!(
            r.resolve(&json!({ "$ref": "/schemas/details#details_id" })),
            json!({ "type": "integer" })
        );
        assert_eq!(
            r.resolve(&json!({ "$ref": "/schemas/details#/properties/id", "description": "d" })),
            json!({ "type": "integer", "description": "d" })
        );
        assert_eq!(
            r.resolve(&json!({ "$ref": "/schemas/details" }))["properties"]["id"],
            json!({ "type": "integer" })
        );
        // A `$ref` that YAML read as null (`$ref: #/x` unquoted is a comment) or that leads
        // nowhere accepts any value rather than failing the import.
        assert_eq!(r.resolve(&json!({ "$ref": null })), json!({}));
        assert_eq!(r.resolve(&json!({ "$ref": "other.yaml#/X" })), json!({}));
    }

    #[test]
    fn property_names_are_never_taken_for_keywords() {
        let doc = json!({});
        let v = Resolver::new(&doc).resolve(&json!({
            "type": "object",
            "x-internal": true,
            "example": { "a": 1 },
            "properties": { "example": { "type": "string", "example": "s" }, "x-id": { "type": "integer" } }
        }));
        assert_eq!(
            v,
            json!({ "type": "object", "properties": { "example": { "type": "string" }, "x-id": { "type": "integer" } } })
        );
    }

    #[test]
    fn openapi_3_0_bounds_and_nullable_enums_become_json_schema() {
        let doc = json!({});
        let r = Resolver::new(&doc);
        assert_eq!(
            r.resolve(&json!({ "type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 1, "exclusiveMaximum": false })),
            json!({ "type": "number", "exclusiveMinimum": 0, "maximum": 1 })
        );
        assert_eq!(
            r.resolve(&json!({ "type": "string", "enum": ["a"], "nullable": true })),
            json!({ "type": ["string", "null"], "enum": ["a", null] })
        );
    }

    #[test]
    fn branching_and_recursive_documents_stay_bounded() {
        // Each level refers to the next three times: 3^30 copies if nothing stopped it.
        let mut schemas = Map::new();
        for i in 0..30 {
            let next = json!({ "$ref": format!("#/components/schemas/S{}", i + 1) });
            schemas.insert(
                format!("S{i}"),
                json!({ "type": "object", "properties": { "a": next, "b": next, "c": next } }),
            );
        }
        schemas.insert("S30".into(), json!({ "type": "string" }));
        schemas.insert(
            "Tree".into(),
            json!({ "$recursiveAnchor": true, "type": "object", "properties": { "kids": { "type": "array", "items": { "$recursiveRef": "#" } } } }),
        );
        let doc = json!({ "components": { "schemas": schemas } });
        let r = Resolver::new(&doc);
        let v = r.resolve(&json!({ "$ref": "#/components/schemas/S0" }));
        assert!(v.to_string().len() < 5_000_000, "bounded");
        let tree = r.resolve(&json!({ "$ref": "#/components/schemas/Tree" }));
        assert_eq!(tree["properties"]["kids"]["items"], json!({}));
    }
}
