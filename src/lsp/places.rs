//! Which place of the format (`specfile::keys`) a path of keys leads to: the same tables the
//! JSON Schema and the compiler's key checks are made from, so completion and hover offer
//! exactly the keys `check` accepts.

use crate::specfile::keys::{self, Place, Ty};
use crate::specfile::yaml::{Node, Value};

/// One step of a path: a key, or an item of a list (`None`).
pub(super) type Seg = Option<String>;

/// What a key's value is, as far as completion and hover care.
enum Child {
    Place(&'static Place),
    ListOf(&'static Place),
    /// A mapping of names to tools (`tools:`), models or tool fault lists.
    Tools,
    Models,
    FaultsByTool,
    Other,
}

fn place_named(def: &str) -> Option<&'static Place> {
    keys::PLACES
        .iter()
        .copied()
        .chain([keys::TOOL_CHOICE])
        .find(|p| p.def == def)
}

fn child(place: &Place, key: &str) -> Child {
    // Lists and mappings the tables write as JSON Schema.
    let special = match (place.def, key) {
        ("spec", "tools") => return Child::Tools,
        ("spec", "models") => return Child::Models,
        ("test", "faults") => return Child::FaultsByTool,
        ("tool_mock", "responses") => Some(("mock_response", true)),
        ("script", "turns") => Some(("turn", true)),
        ("turn", "tool_calls") => Some(("scripted_call", true)),
        ("tool_mcp", "tools") => Some(("mcp_tool", true)),
        ("mock_response", "error") => Some(("error_object", false)),
        _ => None,
    };
    if let Some((def, list)) = special {
        return match place_named(def) {
            Some(p) if list => Child::ListOf(p),
            Some(p) => Child::Place(p),
            None => Child::Other,
        };
    }
    match place.key(key).map(|k| k.ty) {
        Some(Ty::Ref(def)) => place_named(def).map_or(Child::Other, Child::Place),
        Some(Ty::ListOf(def)) => place_named(def).map_or(Child::Other, Child::ListOf),
        Some(Ty::EnumOr(_, p)) => Child::Place(p),
        _ => Child::Other,
    }
}

fn get<'a>(node: Option<&'a Node>, key: &str) -> Option<&'a Node> {
    match &node?.value {
        Value::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
        _ => None,
    }
}

fn item(node: Option<&Node>, i: usize) -> Option<&Node> {
    match &node?.value {
        Value::Seq(items) => items.get(i),
        _ => None,
    }
}

/// The place of a tool or model mapping: its kind's; while the kind is not written yet (or
/// the tree is stale), the first kind that takes the next key on the path, else the keys every
/// kind takes.
fn by_kind(
    node: Option<&Node>,
    next: Option<String>,
    kinds: &'static [keys::Kind],
    base: &'static Place,
) -> &'static Place {
    let written = get(node, "kind")
        .and_then(Node::as_str)
        .and_then(|k| keys::find_kind(kinds, k));
    let guessed = || {
        let next = next.as_deref()?;
        kinds.iter().find(|k| k.place.declares(next))
    };
    written.or_else(guessed).map_or(base, |k| k.place)
}

/// Where a path ends: the place of the mapping it names (`None` inside free-form values).
pub(super) enum At {
    Place(&'static Place),
    /// Inside `tools:` (a new tool's name), `models:`, or a test's `faults:` (tool names).
    ToolNames,
    ModelNames,
    None,
}

/// `tree` (the last good parse) tells a tool's or model's kind, by its name; the items of a list
/// share one place, so the first stands for all.
pub(super) fn resolve(path: &[Seg], tree: Option<&Node>) -> At {
    let mut place: &'static Place = keys::TOP;
    let mut node = tree;
    let mut i = 0;
    while i < path.len() {
        let Some(key) = &path[i] else {
            return At::None;
        };
        node = get(node, key);
        i += 1;
        match child(place, key) {
            Child::Place(p) => place = p,
            Child::ListOf(p) => {
                if i < path.len() && path[i].is_none() {
                    node = item(node, 0);
                    i += 1;
                    place = p;
                } else {
                    return At::None;
                }
            }
            Child::Tools | Child::Models | Child::FaultsByTool => {
                let c = child(place, key);
                let Some(Some(name)) = path.get(i) else {
                    return match c {
                        Child::Models => At::ModelNames,
                        _ => At::ToolNames,
                    };
                };
                node = get(node, name);
                i += 1;
                let next = path.get(i).cloned().flatten();
                place = match c {
                    Child::Tools => by_kind(node, next, keys::TOOL_KINDS, keys::TOOL),
                    Child::Models => by_kind(node, next, keys::MODEL_KINDS, keys::MODEL),
                    _ => return At::None,
                };
            }
            Child::Other => return At::None,
        }
    }
    At::Place(place)
}

/// A key's documentation, at the end of a path whose last step is the key.
pub(super) fn key_doc(path: &[Seg], tree: Option<&Node>) -> Option<(&'static str, &'static str)> {
    let (last, parent) = path.split_last()?;
    let last = last.as_deref()?;
    match resolve(parent, tree) {
        At::Place(p) => p.key(last).map(|k| (k.name, k.doc)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> Vec<Seg> {
        p.split('.')
            .map(|s| (s != "-").then(|| s.to_string()))
            .collect()
    }

    fn def(at: At) -> &'static str {
        match at {
            At::Place(p) => p.def,
            At::ToolNames => "<tools>",
            At::ModelNames => "<models>",
            At::None => "<none>",
        }
    }

    #[test]
    fn paths_lead_to_the_places_of_the_key_tables() {
        let tree = crate::specfile::yaml::parse("tools:\n  w:\n    kind: http\n").expect("parses");
        assert_eq!(
            def(resolve(&path("tools.w.request"), Some(&tree))),
            "request"
        );
        assert_eq!(
            key_doc(&path("tools.w.request.url"), Some(&tree)).map(|k| k.0),
            Some("url")
        );
        assert_eq!(def(resolve(&path("tests.-.expect"), None)), "expect");
        // No tree: the kind is the one that takes the next key.
        assert_eq!(
            def(resolve(
                &path("models.m.scripts.-.turns.-.tool_calls.-"),
                None
            )),
            "scripted_call"
        );
        assert_eq!(
            def(resolve(&path("tools.n.responses.-.error"), None)),
            "error_object"
        );
        assert_eq!(def(resolve(&path("tools"), None)), "<tools>");
        assert_eq!(def(resolve(&path("tests.-.faults"), None)), "<tools>");
        assert_eq!(def(resolve(&path("policy.allow"), None)), "<none>");
    }
}
