//! The manual is the README plus the pages in `docs/`. A newcomer follows its links and copies its
//! commands, so a link to a moved page or a renamed heading, or an example spec that no longer
//! exists, is a bug: every relative link in README.md and docs/*.md must reach an existing file
//! (and, with `#anchor`, a heading of that page as GitHub names it), every `specs/*.yaml` they
//! name must exist, every page must be reachable from the README, and the README must keep the
//! commands CI and a newcomer run first.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Spec paths the manual uses as placeholders in diagnostics and examples, not files to open.
const PLACEHOLDER_SPECS: &[&str] = &["specs/x.yaml"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/*.md, as paths relative to the repository root.
fn manual_pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| {
            p.strip_prefix(root())
                .expect("inside the root")
                .to_path_buf()
        })
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

fn read(page: &Path) -> String {
    std::fs::read_to_string(root().join(page)).unwrap_or_else(|e| panic!("{}: {e}", page.display()))
}

/// The page's lines outside fenced code blocks, with their line numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let marker = if t.starts_with("```") {
            Some("```")
        } else if t.starts_with("~~~") {
            Some("~~~")
        } else {
            None
        };
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// A line with its inline code spans blanked, so `[a](b)` written as code is not a link.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else {
            out.push(if in_code { ' ' } else { c });
        }
    }
    out
}

/// Link targets on a line: `[text](target)`, `![alt](target "title")` and `[label]: target`.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    if let Some(rest) = line.trim_start().strip_prefix('[') {
        if let Some((_, after)) = rest.split_once("]: ") {
            if let Some(t) = after.split_whitespace().next() {
                targets.push(t.to_string());
            }
        }
    }
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.trim_matches(|c| c == '<' || c == '>').to_string());
        rest = &after[end..];
    }
    targets
}

/// The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as `-`,
/// a repeated heading suffixed `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let title = title.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let base: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let mut slug = base.clone();
        let mut n = 1;
        while seen.contains(&slug) {
            slug = format!("{base}-{n}");
            n += 1;
        }
        seen.insert(slug);
    }
    seen
}

fn is_external(target: &str) -> bool {
    target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:")
}

/// What is wrong with one relative link target on `page`, if anything.
fn broken(page: &Path, target: &str) -> Option<String> {
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().unwrap_or(Path::new("")).join(path)
    };
    let on_disk = root().join(&file);
    if !on_disk.exists() {
        return Some(format!("`{}` does not exist", file.display()));
    }
    let anchor = anchor.filter(|a| !a.is_empty())?;
    if on_disk.extension().is_some_and(|x| x == "md") && !anchors(&read(&file)).contains(anchor) {
        return Some(format!("`{}` has no heading `#{anchor}`", file.display()));
    }
    None
}

#[test]
fn every_relative_link_in_the_manual_resolves() {
    let mut problems = Vec::new();
    let mut links = 0;
    for page in manual_pages() {
        let text = read(&page);
        for (n, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if target.is_empty() || is_external(&target) {
                    continue;
                }
                links += 1;
                if let Some(why) = broken(&page, &target) {
                    problems.push(format!("{}:{n}: link to `{target}`: {why}", page.display()));
                }
            }
        }
    }
    assert!(links > 10, "the manual's links were not found ({links})");
    assert!(
        problems.is_empty(),
        "broken links in the manual:\n  {}",
        problems.join("\n  ")
    );
}

/// `specs/NAME.yaml` mentions on a line (code included), except after `>`: a command's output.
fn named_specs(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("specs/") {
        let before = &rest[..at];
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "_-./".contains(*c))
            .collect();
        rest = &rest[at + name.len()..];
        let boundary = !before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '/');
        if boundary && name.ends_with(".yaml") && !before.trim_end().ends_with('>') {
            out.push(name);
        }
    }
    out
}

#[test]
fn every_example_spec_the_manual_names_exists() {
    let mut missing = Vec::new();
    let mut named = BTreeSet::new();
    for page in manual_pages() {
        for (i, line) in read(&page).lines().enumerate() {
            for spec in named_specs(line) {
                if PLACEHOLDER_SPECS.contains(&spec.as_str()) {
                    continue;
                }
                if !root().join(&spec).is_file() {
                    missing.push(format!("{}:{}: `{spec}`", page.display(), i + 1));
                }
                named.insert(spec);
            }
        }
    }
    assert!(
        named.len() >= 5,
        "the manual's example specs were not found: {named:?}"
    );
    assert!(
        missing.is_empty(),
        "example specs the manual names that do not exist:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_docs_page_is_reachable_from_the_readme() {
    let readme = read(Path::new("README.md"));
    let linked: BTreeSet<String> = prose_lines(&readme)
        .into_iter()
        .flat_map(|(_, l)| link_targets(l))
        .map(|t| t.split('#').next().unwrap_or("").to_string())
        .collect();
    let orphans: Vec<String> = manual_pages()
        .into_iter()
        .skip(1)
        .map(|p| p.display().to_string())
        .filter(|p| !linked.contains(p))
        .collect();
    assert!(
        orphans.is_empty(),
        "docs pages the README does not link to (add them to its Documentation table): {orphans:?}"
    );
}

#[test]
fn the_readme_keeps_the_commands_a_newcomer_and_ci_run() {
    let readme = read(Path::new("README.md"));
    let ci = read(Path::new(".ci/run"));
    assert!(
        ci.lines().any(|l| l.trim() == "cargo test --locked"),
        ".ci/run no longer runs `cargo test --locked`; keep it and the README in step"
    );
    assert!(
        readme.lines().any(|l| l.trim() == "cargo test --locked"),
        "the README lost the test command CI runs (`cargo test --locked`)"
    );
    assert!(
        readme
            .lines()
            .any(|l| l.starts_with("cargo run -- run specs/stock_assistant.yaml --query ")),
        "the README lost the command that builds toolrun and runs the main job"
    );
}

#[test]
fn the_checks_see_what_they_should() {
    let text = "# A title\n## Tools from `MCP` servers!\n## A title\n```\n# not a heading\n```\n";
    let a = anchors(text);
    assert!(a.contains("a-title") && a.contains("a-title-1"), "{a:?}");
    assert!(
        a.contains("tools-from-mcp-servers") && !a.contains("not-a-heading"),
        "{a:?}"
    );
    assert_eq!(
        link_targets("see [x](docs/a.md#b), `[no](c.md)` and ![i](<img.png> \"t\")"),
        ["docs/a.md#b", "img.png"]
    );
    assert_eq!(link_targets("[ref]: docs/x.md"), ["docs/x.md"]);
    assert_eq!(
        named_specs("toolrun x specs/a.yaml > specs/out.yaml; specs/data/ myspecs/b.yaml"),
        ["specs/a.yaml"]
    );
    assert!(broken(Path::new("README.md"), "docs/nope.md").is_some());
    assert!(broken(Path::new("docs/spec.md"), "../README.md").is_none());
    assert!(broken(Path::new("docs/spec.md"), "#no-such-heading").is_some());
}
