//! What a spec declares (tools, models, secrets, tests) and where it names them, read off its
//! YAML tree: the places that name a tool or a model are the ones the compiler reads as such.

use crate::diag::Span;
use crate::specfile::yaml::{Key, Node, Value};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    Tool,
    Model,
    Secret,
    Test,
}

/// A declaration: its name, where the name is, and the declared value.
pub(super) struct Decl<'a> {
    pub(super) kind: Kind,
    pub(super) name: String,
    pub(super) at: Span,
    pub(super) node: Option<&'a Node>,
}

/// A use of a declared name (a string naming a tool or a model).
pub(super) struct Use {
    pub(super) kind: Kind,
    pub(super) name: String,
    pub(super) at: Span,
}

/// A string naming a file relative to the spec (`fixture:`, `file:`, `fixtures:`).
pub(super) struct FileRef {
    pub(super) path: String,
    pub(super) at: Span,
}

#[derive(Default)]
pub(super) struct Index<'a> {
    pub(super) decls: Vec<Decl<'a>>,
    pub(super) uses: Vec<Use>,
    pub(super) files: Vec<FileRef>,
}

fn map(node: &Node) -> &[(Key, Node)] {
    match &node.value {
        Value::Map(entries) => entries,
        _ => &[],
    }
}

fn seq(node: Option<&Node>) -> &[Node] {
    match node.map(|n| &n.value) {
        Some(Value::Seq(items)) => items,
        _ => &[],
    }
}

pub(super) fn get<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
    map(node)
        .iter()
        .find(|(k, _)| k.name == key)
        .map(|(_, v)| v)
}

impl<'a> Index<'a> {
    pub(super) fn of(root: &'a Node) -> Index<'a> {
        let mut ix = Index::default();
        if let Some(tools) = get(root, "tools") {
            for (k, v) in map(tools) {
                ix.decl(Kind::Tool, &k.name, k.span, Some(v));
                ix.mcp_tools(v);
                ix.file(get(v, "file"));
            }
        }
        if let Some(models) = get(root, "models") {
            for (k, v) in map(models) {
                ix.decl(Kind::Model, &k.name, k.span, Some(v));
                ix.model_uses(v);
            }
        }
        for s in seq(get(root, "secrets")) {
            if let Some(name) = s.as_str() {
                ix.decl(Kind::Secret, name, s.span, None);
            }
        }
        if let Some(policy) = get(root, "policy") {
            for key in ["allow", "deny", "confirm"] {
                ix.names(Kind::Tool, get(policy, key));
            }
        }
        ix.name(Kind::Model, get(root, "default_model"));
        ix.file(get(root, "fixtures"));
        for test in seq(get(root, "tests")) {
            ix.test(test);
        }
        ix
    }

    fn decl(&mut self, kind: Kind, name: &str, at: Span, node: Option<&'a Node>) {
        self.decls.push(Decl {
            kind,
            name: name.to_string(),
            at,
            node,
        });
    }

    fn name(&mut self, kind: Kind, node: Option<&Node>) {
        if let Some(n) = node {
            if let Some(name) = n.as_str() {
                self.uses.push(Use {
                    kind,
                    name: name.to_string(),
                    at: n.span,
                });
            }
        }
    }

    fn names(&mut self, kind: Kind, node: Option<&Node>) {
        for n in seq(node) {
            self.name(kind, Some(n));
        }
    }

    fn file(&mut self, node: Option<&Node>) {
        if let Some(n) = node {
            if let Some(path) = n.as_str() {
                self.files.push(FileRef {
                    path: path.to_string(),
                    at: n.span,
                });
            }
        }
    }

    /// An `mcp` entry declares one tool per entry of its `tools:` list (under `as:` if set).
    fn mcp_tools(&mut self, tool: &'a Node) {
        if get(tool, "kind").and_then(Node::as_str) != Some("mcp") {
            return;
        }
        for entry in seq(get(tool, "tools")) {
            let named = get(entry, "as")
                .or_else(|| get(entry, "name"))
                .unwrap_or(entry);
            if let Some(name) = named.as_str() {
                self.decl(Kind::Tool, name, named.span, Some(entry));
            }
        }
    }

    fn model_uses(&mut self, model: &Node) {
        if let Some(choice) = get(model, "tool_choice") {
            self.name(Kind::Tool, get(choice, "tool"));
        }
        for script in seq(get(model, "scripts")) {
            for turn in seq(get(script, "turns")) {
                for call in seq(get(turn, "tool_calls")) {
                    self.name(Kind::Tool, get(call, "name"));
                }
            }
        }
    }

    fn test(&mut self, test: &'a Node) {
        if let Some(name) = get(test, "name") {
            if let Some(text) = name.as_str() {
                self.decl(Kind::Test, text, name.span, Some(test));
            }
        }
        self.name(Kind::Model, get(test, "model"));
        self.names(Kind::Tool, get(test, "approve"));
        self.file(get(test, "fixture"));
        self.file(get(test, "from"));
        if let Some(faults) = get(test, "faults") {
            for (k, _) in map(faults) {
                self.uses.push(Use {
                    kind: Kind::Tool,
                    name: k.name.clone(),
                    at: k.span,
                });
            }
        }
        if let Some(expect) = get(test, "expect") {
            for key in ["tool_calls", "tool_calls_include", "tool_calls_exclude"] {
                self.names(Kind::Tool, get(expect, key));
            }
            if let Some(judge) = get(expect, "judge") {
                self.name(Kind::Model, get(judge, "model"));
            }
        }
    }

    pub(super) fn decl_of(&self, kind: Kind, name: &str) -> Option<&Decl<'a>> {
        self.decls.iter().find(|d| d.kind == kind && d.name == name)
    }

    pub(super) fn names_of(&self, kind: Kind) -> impl Iterator<Item = &str> {
        self.decls
            .iter()
            .filter(move |d| d.kind == kind)
            .map(|d| d.name.as_str())
    }

    /// The declared or used name under the cursor (1-based line and column).
    pub(super) fn at(&self, pos: (u32, u32)) -> Option<(Kind, &str, Span)> {
        let decl = self
            .decls
            .iter()
            .find(|d| contains(d.at, pos))
            .map(|d| (d.kind, d.name.as_str(), d.at));
        decl.or_else(|| {
            self.uses
                .iter()
                .find(|u| contains(u.at, pos))
                .map(|u| (u.kind, u.name.as_str(), u.at))
        })
    }
}

/// The cursor may stand just after the last character (where the editor puts it after a word).
pub(super) fn contains(span: Span, pos: (u32, u32)) -> bool {
    (span.line, span.col) <= pos && pos <= (span.end_line, span.end_col)
}

/// The span from a node's start to the end of its last descendant (a mapping's own span is its
/// first event only).
pub(super) fn extent(node: &Node) -> Span {
    let mut end = (node.span.end_line, node.span.end_col);
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        end = end.max((n.span.end_line, n.span.end_col));
        match &n.value {
            Value::Seq(items) => stack.extend(items),
            Value::Map(entries) => {
                for (k, v) in entries {
                    end = end.max((k.span.end_line, k.span.end_col));
                    stack.push(v);
                }
            }
            _ => {}
        }
    }
    Span {
        end_line: end.0,
        end_col: end.1,
        ..node.span
    }
}

/// The path of keys (and `None` for list items) from the root to the key the cursor is on, or
/// to the key whose value holds it; `true` when it is on the key itself.
pub(super) fn key_path(root: &Node, pos: (u32, u32)) -> Option<(Vec<Option<String>>, bool)> {
    let mut path = Vec::new();
    let mut node = root;
    loop {
        match &node.value {
            Value::Map(entries) => {
                let (k, v) = entries
                    .iter()
                    .find(|(k, v)| contains(k.span, pos) || contains(extent(v), pos))?;
                path.push(Some(k.name.clone()));
                if contains(k.span, pos) {
                    return Some((path, true));
                }
                node = v;
            }
            Value::Seq(items) => {
                let item = items.iter().find(|i| contains(extent(i), pos))?;
                path.push(None);
                node = item;
            }
            _ => return Some((path, false)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_and_uses_are_found() {
        let text = "version: 1\ntools:\n  a:\n    kind: mock\n    responses: [{ result: 1 }]\n  m:\n    kind: mcp\n    url: https://x.test/mcp\n    tools: [r, { name: s, as: t }]\nsecrets: [K]\npolicy: { allow: [a, t] }\nmodels:\n  bot:\n    kind: scripted\n    scripts: [{ turns: [{ tool_calls: [{ name: a }] }] }]\ntests:\n  - name: one\n    model: bot\n    expect: { tool_calls: [a] }\n";
        let root = crate::specfile::yaml::parse(text).expect("parses");
        let ix = Index::of(&root);
        let tools: Vec<&str> = ix.names_of(Kind::Tool).collect();
        assert_eq!(tools, ["a", "m", "r", "t"]);
        let uses: Vec<(Kind, &str)> = ix.uses.iter().map(|u| (u.kind, u.name.as_str())).collect();
        assert!(
            uses.contains(&(Kind::Model, "bot")) && uses.iter().filter(|u| u.1 == "a").count() == 3,
            "{uses:?}"
        );
        assert_eq!(
            ix.at((11, 19)).map(|(k, n, _)| (k, n)),
            Some((Kind::Tool, "a"))
        );
        let (path, on_key) = key_path(&root, (19, 17)).expect("path");
        assert_eq!(
            path,
            [
                Some("tests".into()),
                None,
                Some("expect".into()),
                Some("tool_calls".into())
            ]
        );
        assert!(on_key);
    }
}
