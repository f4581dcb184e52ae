//! Diagnostics of a document being edited (`toolrun lsp`): each tool entry's compile (its
//! diagnostics, the tool, the secrets its templates read) is kept from one compile of the
//! document to the next and reused while the entry and what its compile reads stay the same.
//! The rest of the spec, and every check across tools (policy, hosts, models, tests), runs each
//! time: the diagnostics are `check`'s, only found faster.
//!
//! An entry is reused only when its compile reads nothing outside its own lines but what
//! [`environment`] hashes (limits, `policy.confirm`, the declared secrets, the document's path),
//! reads no file (tables), registers nothing for later passes (`tools: "*"` servers, scripted
//! calls), and every place its diagnostics point at lies within its lines: those are moved
//! with the entry when lines above it come or go. What a reused tool's templates were compiled
//! into is gone, so the registry of such a compile is never handed out: [`diagnose`] returns
//! diagnostics only.

use super::Ctx;
use crate::diag::{Diagnostic, Diagnostics, Span};
use crate::registry::{Limits, Tool};
use crate::specfile::read::Spanned;
use crate::specfile::yaml::{self, Key, Node, Value};
use crate::specfile::Source;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;

/// One document's tool entries, as its last compile left them.
#[derive(Default)]
pub(crate) struct Memo {
    environment: u64,
    entries: HashMap<u64, Entry>,
}

struct Entry {
    /// The entry's lines as they were, compared in full: a hash alone could collide.
    text: String,
    first_line: u32,
    /// Whether the entry may be reused at another line: its diagnostics' text names no line
    /// of it ("the response at line 12").
    movable: bool,
    diagnostics: Vec<Diagnostic>,
    used_secrets: Vec<String>,
    /// Whether its compile made a tool (kept in `tool` between compiles).
    made_tool: bool,
    tool: Option<Tool>,
}

/// A compile in progress: the entries of the last one, and those of this one.
pub(crate) struct Round {
    last: Memo,
    next: HashMap<u64, Entry>,
    /// Which entry made the tool of each name, to take the tools back from the registry.
    made: HashMap<String, u64>,
}

/// What `check` reports for this text at `path`, reusing what `memo` kept of the document's
/// last compile and keeping this one's for the next.
pub(crate) fn diagnose(source: &Source, path: &Path, memo: &mut Memo) -> Vec<Diagnostic> {
    let (root, duplicates) = match yaml::parse_keeping_duplicates(&source.text) {
        Ok(parsed) => parsed,
        Err(errors) => return super::finish(source, Diagnostics { items: errors }),
    };
    // The spec's hash goes only into the registry, which is dropped here.
    let mut ctx = Ctx::new(source, path, String::new(), false);
    for d in duplicates {
        ctx.d.push(d);
    }
    ctx.memo = Some(Round {
        last: std::mem::take(memo),
        next: HashMap::new(),
        made: HashMap::new(),
    });
    let registry = super::compile_root(&root, path, &mut ctx);
    if let Some(round) = ctx.memo.take() {
        *memo = round.finish(registry.map(|r| r.tools).unwrap_or_default());
    }
    super::finish(source, ctx.d)
}

impl Round {
    fn finish(mut self, tools: Vec<Tool>) -> Memo {
        for tool in tools {
            if let Some(entry) = self
                .made
                .get(&tool.name)
                .and_then(|key| self.next.get_mut(key))
            {
                entry.tool = Some(tool);
            }
        }
        // A tool that did not reach the registry (a duplicate name) cannot be reused.
        self.next.retain(|_, e| !e.made_tool || e.tool.is_some());
        Memo {
            environment: self.last.environment,
            entries: self.next,
        }
    }
}

/// Called before the tools compile: entries compiled against other limits, `confirm` list,
/// secrets or path are not reused.
pub(super) fn enter(limits: &Limits, confirm: &[Spanned<String>], ctx: &mut Ctx) {
    let Some(round) = &ctx.memo else { return };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    format!("{limits:?}").hash(&mut h);
    confirm.iter().for_each(|c| c.value.hash(&mut h));
    ctx.secrets.keys().for_each(|s| s.hash(&mut h));
    (ctx.trusted, &ctx.spec_dir, &ctx.root, &ctx.source.display).hash(&mut h);
    let environment = h.finish();
    if round.last.environment != environment {
        if let Some(round) = &mut ctx.memo {
            round.last = Memo {
                environment,
                entries: HashMap::new(),
            };
        }
    }
}

/// The tools of entry `key: node`: those of the last compile when it is the same entry in the
/// same environment, else `compile`'s, kept for the next compile where that is safe.
pub(super) fn reuse_or(
    key: &Key,
    node: &Node,
    is_mcp: bool,
    ctx: &mut Ctx,
    compile: impl FnOnce(&mut Ctx) -> Vec<Tool>,
) -> Vec<Tool> {
    let place = match &ctx.memo {
        Some(_) if !is_mcp => Place::of(key, node, ctx.source),
        _ => None,
    };
    let Some(place) = place else {
        return compile(ctx);
    };
    if let Some(tools) = reuse(&place, &key.name, ctx) {
        return tools;
    }
    let from = (ctx.d.items.len(), ctx.inputs.len(), ctx.wildcards.len());
    let pending = ctx.pending_call_checks.len();
    let outer = std::mem::take(&mut ctx.used_secrets);
    let tools = compile(ctx);
    let used = std::mem::replace(&mut ctx.used_secrets, outer);
    ctx.used_secrets.extend(used.iter().cloned());
    let diagnostics = &ctx.d.items[from.0..];
    let keep = (ctx.inputs.len(), ctx.wildcards.len()) == (from.1, from.2)
        && ctx.pending_call_checks.len() == pending
        && tools.len() <= 1
        && diagnostics.iter().all(|d| place.holds(d));
    if keep {
        let entry = Entry {
            movable: !diagnostics.iter().any(|d| place.named_in(d)),
            text: place.text,
            first_line: place.first_line,
            diagnostics: diagnostics.to_vec(),
            used_secrets: used.into_iter().collect(),
            made_tool: !tools.is_empty(),
            tool: None,
        };
        remember(place.hash, &key.name, entry, ctx);
    }
    tools
}

fn reuse(place: &Place, name: &str, ctx: &mut Ctx) -> Option<Vec<Tool>> {
    let round = ctx.memo.as_mut()?;
    let entry = round.last.entries.get(&place.hash)?;
    let moved = entry.first_line != place.first_line;
    if entry.text != place.text
        || (entry.made_tool && entry.tool.is_none())
        || (moved && !entry.movable)
    {
        return None;
    }
    let mut entry = round.last.entries.remove(&place.hash)?;
    let moved = i64::from(place.first_line) - i64::from(entry.first_line);
    for d in &mut entry.diagnostics {
        shift(d, moved);
    }
    entry.first_line = place.first_line;
    ctx.d.items.extend(entry.diagnostics.iter().cloned());
    ctx.used_secrets.extend(entry.used_secrets.iter().cloned());
    let tools: Vec<Tool> = entry.tool.take().into_iter().collect();
    remember(place.hash, name, entry, ctx);
    Some(tools)
}

fn remember(hash: u64, name: &str, entry: Entry, ctx: &mut Ctx) {
    let Some(round) = &mut ctx.memo else { return };
    // Two entries alike (a duplicate key) share a hash: neither is kept.
    if round.next.remove(&hash).is_some() {
        return;
    }
    if entry.made_tool {
        round.made.insert(name.to_string(), hash);
    }
    round.next.insert(hash, entry);
}

fn shift(d: &mut Diagnostic, lines: i64) {
    let by = |span: &mut Span| {
        let moved = |line: u32| u32::try_from(i64::from(line) + lines).unwrap_or(line);
        span.line = moved(span.line);
        span.end_line = moved(span.end_line);
    };
    if let Some(span) = &mut d.span {
        by(span);
    }
    for (span, _) in &mut d.related {
        by(span);
    }
}

/// An entry's lines: from its key to the end of its value.
struct Place {
    first_line: u32,
    last_line: u32,
    text: String,
    hash: u64,
}

impl Place {
    /// `None` when the entry's value is not all its own text: an alias of a mapping or list
    /// defined elsewhere (whose places lie outside its lines).
    fn of(key: &Key, node: &Node, source: &Source) -> Option<Place> {
        let first_line = key.span.line;
        let last_line = node.span.end_line.max(key.span.end_line);
        let mut text = String::new();
        for n in first_line..=last_line {
            text.push_str(source.line(n).unwrap_or_default());
            text.push('\n');
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.name.hash(&mut h);
        text.hash(&mut h);
        // The values too: an alias of a scalar takes its place but not its value from here.
        let inside = tree_hash(node, first_line, last_line, &mut h);
        inside.then(|| Place {
            first_line,
            last_line,
            text,
            hash: h.finish(),
        })
    }

    fn holds(&self, d: &Diagnostic) -> bool {
        let within = |s: &Span| {
            (self.first_line..=self.last_line).contains(&s.line)
                && (self.first_line..=self.last_line).contains(&s.end_line)
        };
        d.span.as_ref().is_none_or(within) && d.related.iter().all(|(s, _)| within(s))
    }

    /// Whether the diagnostic's text has a number that is one of the entry's lines.
    fn named_in(&self, d: &Diagnostic) -> bool {
        let texts = [Some(&d.message), d.label.as_ref(), d.help.as_ref()];
        let labels = d.related.iter().map(|(_, label)| Some(label));
        texts.into_iter().chain(labels).flatten().any(|text| {
            text.split(|c: char| !c.is_ascii_digit())
                .filter_map(|n| n.parse::<u32>().ok())
                .any(|n| (self.first_line..=self.last_line).contains(&n))
        })
    }
}

/// Hashes the tree's values and places (relative to `first`); false when a place lies outside
/// `first..=last`.
fn tree_hash(node: &Node, first: u32, last: u32, h: &mut impl Hasher) -> bool {
    let span = |s: &Span, h: &mut dyn Hasher| {
        for v in [
            s.line.wrapping_sub(first),
            s.col,
            s.end_line.wrapping_sub(first),
            s.end_col,
        ] {
            h.write_u32(v);
        }
        (first..=last).contains(&s.line) && (first..=last).contains(&s.end_line)
    };
    let mut inside = span(&node.span, h);
    std::mem::discriminant(&node.value).hash(h);
    match &node.value {
        Value::Null => {}
        Value::Bool(b) => b.hash(h),
        Value::Int(i) => i.hash(h),
        Value::Float(f) => f.to_bits().hash(h),
        Value::Str(s) => s.hash(h),
        Value::Seq(items) => {
            for item in items {
                inside &= tree_hash(item, first, last, h);
            }
        }
        Value::Map(entries) => {
            for (k, v) in entries {
                k.name.hash(h);
                inside &= span(&k.span, h);
                inside &= tree_hash(v, first, last, h);
            }
        }
    }
    inside
}

#[cfg(test)]
mod tests {
    use super::{diagnose, Memo};
    use crate::specfile::Source;
    use std::path::{Path, PathBuf};

    fn specs() -> Vec<(PathBuf, String)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut found = Vec::new();
        for dir in ["tests/diagnostics", "specs"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                if path.extension().is_some_and(|x| x == "yaml") {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    found.push((path, text));
                }
            }
        }
        found.sort();
        assert!(found.len() > 20, "the corpus is there");
        found
    }

    fn same_as_compile(text: &str, path: &Path, memo: &mut Memo) {
        let source = Source::new("spec.yaml", text);
        let fresh = crate::compile::compile(&source, path).diagnostics;
        let reused = diagnose(&source, path, memo);
        assert_eq!(format!("{reused:#?}"), format!("{fresh:#?}"), "{text}");
    }

    /// Every spec of the corpus, one after another through one memo (so each is compiled with
    /// entries of the one before it at hand), then again moved down a line, with its secrets
    /// renamed, and as it was: each time exactly what a compile from nothing reports.
    #[test]
    fn reused_entries_give_a_fresh_compiles_diagnostics() {
        let mut memo = Memo::default();
        for (path, text) in specs() {
            let shared = path.with_file_name("spec.yaml");
            let renamed = text.replace("secrets: [", "secrets: [OTHER, ");
            let edits = [&text, &format!("\n{text}"), &renamed, &text, &text];
            for edit in edits {
                same_as_compile(edit, &path, &mut memo);
                same_as_compile(edit, &shared, &mut memo);
            }
        }
    }

    #[test]
    fn an_edited_entry_and_one_whose_secrets_changed_are_compiled_again() {
        let spec = |first: &str| {
            format!(
                "version: 1\nsecrets: [KEY]\ntools:\n  a:\n    kind: http\n    description: {first}\n    request: {{ method: GET, url: \"http://127.0.0.1:9/a\", headers: {{ X-Key: \"{{{{ secrets.KEY }}}}\" }} }}\n  b:\n    kind: mock\n    description: Tells the other thing.\n    responses: [{{ result: 1 }}]\n"
            )
        };
        let path = Path::new("spec.yaml");
        let codes = |text: &str, memo: &mut Memo| -> Vec<&'static str> {
            let source = Source::new("spec.yaml", text);
            let found = diagnose(&source, path, memo);
            found.iter().map(|d| d.code.as_str()).collect()
        };
        let mut memo = Memo::default();
        assert_eq!(codes(&spec("Tells the first thing."), &mut memo), [""; 0]);
        assert_eq!(memo.entries.len(), 2);
        let short = spec("Short.");
        same_as_compile(&short, path, &mut memo);
        assert_eq!(codes(&short, &mut memo), ["W101"]);
        // Another secret: `a` reads an undeclared one now.
        let other = short.replace("[KEY]", "[KEYS]");
        same_as_compile(&other, path, &mut memo);
        assert_eq!(codes(&other, &mut memo), ["W105", "W101", "E018"]);
    }
}
