//! The shape of `src/`, held by a scan of its text (no build of its own): modules import only from
//! their own layer or below, no two modules import each other, no two files of one folder import
//! each other, and no file holds more than about 750 lines of code besides its tests. The layers
//! are the ones `src/lib.rs` describes; a module not listed here counts as a capability (the top
//! but one), so a new one may use the core and the core may not use it.

use std::collections::{BTreeMap, BTreeSet};
mod support;

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 750;

/// Lowest first. A module may use modules of its own layer or lower ones.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundations",
        &[
            "exit",
            "vocab",
            "codes",
            "line_index",
            "term",
            "files",
            "arguments",
            "stats",
            "diag",
            "redact",
            "events",
            "net",
        ],
    ),
    ("the spec format", &["specfile", "templates", "builtins"]),
    ("the compiled spec", &["registry", "compile"]),
    (
        "running",
        &["fixture", "models", "oauth", "tools", "trace", "engine"],
    ),
    ("capabilities", &["lsp"]),
    ("the command line", &["cli", "commands", "fuzzing", "main"]),
];
const CAPABILITIES: usize = 4;

fn layer_of(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
        .unwrap_or(CAPABILITIES)
}

#[test]
fn no_module_imports_from_a_higher_layer() {
    let graph = module_graph();
    let mut wrong = Vec::new();
    for (from, targets) in &graph {
        for (to, at) in targets {
            if layer_of(to) > layer_of(from) {
                wrong.push(format!(
                    "{at}: `{from}` ({}) uses `{to}` ({})",
                    LAYERS[layer_of(from)].0,
                    LAYERS[layer_of(to)].0
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports running up a layer; move the shared piece down, or the user up:\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn no_two_modules_import_each_other() {
    let graph = module_graph();
    let edges: BTreeMap<&str, BTreeSet<&str>> = graph
        .iter()
        .map(|(k, v)| (k.as_str(), v.keys().map(String::as_str).collect()))
        .collect();
    let cycles = cycles(&edges);
    assert!(
        cycles.is_empty(),
        "modules that import each other: {cycles:?}"
    );
}

#[test]
fn no_two_files_of_a_folder_import_each_other() {
    let mut wrong = Vec::new();
    for (dir, edges) in sibling_graphs() {
        let edges: BTreeMap<&str, BTreeSet<&str>> = edges
            .iter()
            .map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect()))
            .collect();
        for cycle in cycles(&edges) {
            wrong.push(format!("{}: {cycle:?}", shown(&dir)));
        }
    }
    assert!(
        wrong.is_empty(),
        "files of one folder that import each other (move what both need to the folder's mod.rs \
         or to one of them):\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let src = root().join("src");
    let mut long = Vec::new();
    for path in support::rust_files(&src) {
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let n = non_test_lines(&read(&path)).len();
        if n > MAX_LINES {
            long.push(format!("{} has {n} lines besides tests", shown(&path)));
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines of code; split them along their seams:\n  {}",
        long.join("\n  ")
    );
}

#[test]
fn the_scan_skips_tests_and_comments_and_finds_imports() {
    let text = "use crate::a::X;\n// crate::b in a comment\nfn f() { crate::c::g(); }\n\n#[cfg(test)]\nmod tests {\n    use crate::d::Y;\n}\n";
    assert_eq!(non_test_lines(text).len(), 4);
    let lines = code_lines(text);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let used: Vec<String> = lines.iter().flat_map(|(_, l)| crate_modules(l)).collect();
    assert_eq!(used, ["a", "c"]);
    assert_eq!(crate_modules("use crate::{x::Y, z};"), ["x", "z"]);
    let edges: BTreeMap<&str, BTreeSet<&str>> = [
        ("a", BTreeSet::from(["b"])),
        ("b", BTreeSet::from(["c"])),
        ("c", BTreeSet::from(["a"])),
    ]
    .into();
    assert_eq!(cycles(&edges).len(), 1);
    assert_eq!(layer_of("engine"), 3);
    assert_eq!(layer_of("something_new"), CAPABILITIES);
}

// -------------------------------------------------------------------------------------------

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines that are code (numbered from 1): comment and blank lines left out, and tests.
fn code_lines(text: &str) -> Vec<(usize, &str)> {
    non_test_lines(text)
        .into_iter()
        .filter(|(_, l)| !l.trim_start().starts_with("//") && !l.trim().is_empty())
        .collect()
}

/// The lines besides `#[cfg(test)]` modules (numbered from 1). rustfmt puts the closing brace of
/// a module at the module's own indentation.
fn non_test_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        // Attributes and comments may sit between `#[cfg(test)]` and its module.
        let mut j = i + 1;
        while j < lines.len() && {
            let l = lines[j].trim_start();
            l.starts_with("//") || l.starts_with("#[")
        } {
            j += 1;
        }
        let next = lines.get(j).map(|l| l.trim_start()).unwrap_or("");
        if line.trim() == "#[cfg(test)]" && is_inline_module(next) {
            let indent = line.len() - line.trim_start().len();
            let close = format!("{}}}", " ".repeat(indent));
            i = j + 1;
            while i < lines.len() && lines[i] != close {
                i += 1;
            }
            i += 1;
            continue;
        }
        out.push((i + 1, line));
        i += 1;
    }
    out
}

fn is_inline_module(line: &str) -> bool {
    let rest = line
        .strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub "))
        .unwrap_or(line);
    rest.starts_with("mod ") && rest.trim_end().ends_with('{')
}

/// The top module of every `crate::` path on a line (each one of `crate::{a, b::c}` too); a
/// trailing comment is not read.
fn crate_modules(line: &str) -> Vec<String> {
    let line = line.split(" // ").next().unwrap_or(line);
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(list) = rest.strip_prefix('{') {
            let list = list.split('}').next().unwrap_or("");
            out.extend(
                list.split(',')
                    .map(|item| ident(item.trim()))
                    .filter(|m| !m.is_empty()),
            );
        } else {
            let m = ident(rest);
            if !m.is_empty() {
                out.push(m);
            }
        }
    }
    out
}

/// The top module a file belongs to (`src/engine/admission.rs` → `engine`).
fn top_module(path: &Path) -> String {
    let rel = path
        .strip_prefix(root().join("src"))
        .expect("a file of src/");
    let first = rel.components().next().expect("a path");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

/// Top module → the top modules it uses, with where it first does.
fn module_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let src = root().join("src");
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for path in support::rust_files(&src) {
        let from = top_module(&path);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if matches!(name, "tests.rs" | "test_support.rs" | "lib.rs") {
            continue;
        }
        let text = read(&path);
        for (n, line) in code_lines(&text) {
            for to in crate_modules(line) {
                if to != from && to != "test_support" {
                    graph
                        .entry(from.clone())
                        .or_default()
                        .entry(to.clone())
                        .or_insert_with(|| format!("{}:{n}", shown(&path)));
                }
            }
        }
    }
    graph
}

/// For every folder, which of its files (and subfolders) use which others. A file's use of its
/// folder's `mod.rs` (`super::x`) is its parent's, not a sibling's, and is not an edge.
fn sibling_graphs() -> BTreeMap<PathBuf, BTreeMap<String, BTreeSet<String>>> {
    let src = root().join("src");
    let mut out = BTreeMap::new();
    for path in support::rust_files(&src) {
        let dir = path.parent().expect("a folder").to_path_buf();
        let name = path.file_stem().and_then(|n| n.to_str()).unwrap_or("");
        if matches!(name, "mod" | "tests" | "lib" | "main") {
            continue;
        }
        let siblings = siblings(&dir);
        let module_path = module_path(&dir);
        let text = read(&path);
        let mut used = BTreeSet::new();
        for (_, line) in code_lines(&text) {
            for s in &siblings {
                if s != name && uses_sibling(line, s, &module_path) {
                    used.insert(s.clone());
                }
            }
        }
        let graph: &mut BTreeMap<String, BTreeSet<String>> = out.entry(dir).or_default();
        graph.insert(name.to_string(), used);
    }
    out
}

fn siblings(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let p = e.path();
                    let stem = p.file_stem()?.to_str()?.to_string();
                    (p.is_dir() || p.extension().is_some_and(|x| x == "rs")).then_some(stem)
                })
                .filter(|s| s != "mod" && s != "tests")
                .collect()
        })
        .unwrap_or_default()
}

/// `crate::a::b` for `src/a/b`.
fn module_path(dir: &Path) -> String {
    let rel = dir.strip_prefix(root().join("src")).unwrap_or(dir);
    let mut path = String::from("crate");
    for c in rel.components() {
        path.push_str("::");
        path.push_str(&c.as_os_str().to_string_lossy());
    }
    path
}

fn uses_sibling(line: &str, sibling: &str, module_path: &str) -> bool {
    let line = line.split(" // ").next().unwrap_or(line);
    [
        format!("super::{sibling}::"),
        format!("{module_path}::{sibling}::"),
    ]
    .iter()
    .any(|needle| {
        line.match_indices(needle.as_str()).any(|(at, _)| {
            !line[..at]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
        })
    }) || line
        .trim_start()
        .strip_prefix("use super::{")
        .is_some_and(|list| list.split([',', ' ', '}']).any(|w| w == sibling))
        || line.trim() == format!("use super::{sibling};")
}

/// Each pair (or longer loop) of nodes that reach each other, once.
fn cycles(edges: &BTreeMap<&str, BTreeSet<&str>>) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(x) = todo.pop() {
            for y in edges.get(x).into_iter().flatten() {
                if seen.insert(*y) {
                    todo.push(y);
                }
            }
        }
        seen
    };
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    for a in edges.keys() {
        let from_a = reach(a);
        if !from_a.contains(a) {
            continue;
        }
        let mut group: Vec<String> = from_a
            .iter()
            .filter(|b| reach(b).contains(a))
            .map(|b| b.to_string())
            .collect();
        group.sort();
        found.insert(group);
    }
    found.into_iter().collect()
}
