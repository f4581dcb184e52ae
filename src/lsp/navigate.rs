//! Go to definition, find references and the outline (document symbols).

use super::document::Document;
use super::hover::secret_at;
use super::index::{extent, Index, Kind};
use lsp_types::{DocumentSymbol, Location, Position, Range, SymbolKind, Uri};
use std::path::Path;
use std::str::FromStr as _;

fn file_uri(path: &Path) -> Option<Uri> {
    let url = url::Url::from_file_path(path).ok()?;
    Uri::from_str(url.as_str()).ok()
}

/// From a tool, model or secret to its declaration; from `fixture:`, `file:` or `fixtures:` to
/// the file or folder (when it exists).
pub(super) fn definition(doc: &mut Document, uri: &Uri, pos: Position) -> Option<Location> {
    let secret = secret_at(doc, pos);
    let at = doc.line_col(pos);
    let spans = {
        let tree = doc.tree()?;
        let index = Index::of(tree);
        if let Some((name, _)) = secret {
            Some(index.decl_of(Kind::Secret, &name)?.at)
        } else if let Some((kind, name, _)) = index.at(at) {
            Some(index.decl_of(kind, name)?.at)
        } else {
            let file = index
                .files
                .iter()
                .find(|f| super::index::contains(f.at, at))?;
            let spec = super::path_of(uri);
            let dir = spec.parent().unwrap_or(Path::new("."));
            let target = dir.join(&file.path);
            if file.path.contains('{') || !target.exists() {
                return None;
            }
            let target = target.canonicalize().unwrap_or(target);
            return Some(Location::new(file_uri(&target)?, Range::default()));
        }
    };
    spans.map(|span| Location::new(uri.clone(), doc.range(span)))
}

/// Every place a tool (or model) is named, from its declaration or any use.
pub(super) fn references(
    doc: &mut Document,
    uri: &Uri,
    pos: Position,
    with_declaration: bool,
) -> Vec<Location> {
    let at = doc.line_col(pos);
    let spans: Vec<crate::diag::Span> = {
        let Some(tree) = doc.tree() else {
            return Vec::new();
        };
        let index = Index::of(tree);
        let Some((kind, name, _)) = index.at(at) else {
            return Vec::new();
        };
        let decl = index
            .decl_of(kind, name)
            .filter(|_| with_declaration)
            .map(|d| d.at);
        decl.into_iter()
            .chain(
                index
                    .uses
                    .iter()
                    .filter(|u| u.kind == kind && u.name == name)
                    .map(|u| u.at),
            )
            .collect()
    };
    spans
        .into_iter()
        .map(|s| Location::new(uri.clone(), doc.range(s)))
        .collect()
}

/// The outline: tools, models, secrets and tests, each under its section.
pub(super) fn symbols(doc: &mut Document) -> Vec<DocumentSymbol> {
    let found: Vec<(Kind, String, crate::diag::Span, crate::diag::Span)> = {
        let Some(tree) = doc.tree() else {
            return Vec::new();
        };
        Index::of(tree)
            .decls
            .iter()
            .map(|d| {
                let whole = d.node.map_or(d.at, |n| {
                    let e = extent(n);
                    crate::diag::Span {
                        end_line: e.end_line,
                        end_col: e.end_col,
                        ..d.at
                    }
                });
                (d.kind, d.name.clone(), d.at, whole)
            })
            .collect()
    };
    let sections = [
        (Kind::Tool, "tools", SymbolKind::FUNCTION),
        (Kind::Model, "models", SymbolKind::CLASS),
        (Kind::Secret, "secrets", SymbolKind::CONSTANT),
        (Kind::Test, "tests", SymbolKind::METHOD),
    ];
    let mut out = Vec::new();
    for (kind, title, symbol) in sections {
        let children: Vec<DocumentSymbol> = found
            .iter()
            .filter(|f| f.0 == kind)
            .map(|(_, name, at, whole)| {
                let selection = doc.range(*at);
                let mut range = doc.range(*whole);
                if range.end < selection.end {
                    range.end = selection.end;
                }
                symbol_of(name, symbol, range, selection, None)
            })
            .collect();
        if let (Some(first), Some(last)) = (children.first(), children.last()) {
            let range = Range::new(first.range.start, last.range.end);
            out.push(symbol_of(
                title,
                SymbolKind::NAMESPACE,
                range,
                range,
                Some(children),
            ));
        }
    }
    out
}

#[allow(deprecated)] // `deprecated` is a field every DocumentSymbol literal must set.
fn symbol_of(
    name: &str,
    kind: SymbolKind,
    range: Range,
    selection_range: Range,
    children: Option<Vec<DocumentSymbol>>,
) -> DocumentSymbol {
    DocumentSymbol {
        name: name.to_string(),
        detail: None,
        kind,
        tags: None,
        deprecated: None,
        range,
        selection_range,
        children,
    }
}
