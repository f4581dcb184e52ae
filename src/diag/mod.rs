//! Diagnostics are data: one list, rendered as human text, JSON, SARIF or GitHub annotations.

mod snippet;

use crate::codes::Code;
pub(crate) use crate::codes::Severity;
use crate::line_index::Lines;
use serde::Serialize;
use std::fmt::Write as _;

/// A region of a source file. Lines and columns are 1-based; `end_col` is exclusive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Span {
    pub(crate) line: u32,
    pub(crate) col: u32,
    pub(crate) end_line: u32,
    pub(crate) end_col: u32,
}

impl Span {
    pub(crate) fn point(line: u32, col: u32) -> Span {
        Span {
            line,
            col,
            end_line: line,
            end_col: col + 1,
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Diagnostic {
    pub(crate) code: Code,
    pub(crate) severity: Severity,
    pub(crate) message: String,
    pub(crate) file: Option<String>,
    pub(crate) span: Option<Span>,
    /// Short text drawn under the caret.
    pub(crate) label: Option<String>,
    /// Other places that explain this one (where a duplicate key was first defined, the rule that
    /// shadows this one), each with its label: drawn with `-` under the primary caret's `^`.
    pub(crate) related: Vec<(Span, String)>,
    pub(crate) help: Option<String>,
}

impl Diagnostic {
    pub(crate) fn new(code: Code, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            severity: code.severity(),
            message: message.into(),
            file: None,
            span: None,
            label: None,
            related: Vec::new(),
            help: None,
        }
    }
    pub(crate) fn at(mut self, span: Span) -> Self {
        self.span = Some(span);
        self
    }
    pub(crate) fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }
    /// A related place in the same file, labelled.
    pub(crate) fn also(mut self, span: Span, label: impl Into<String>) -> Self {
        self.related.push((span, label.into()));
        self
    }
    pub(crate) fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
    pub(crate) fn help_opt(mut self, help: Option<String>) -> Self {
        if help.is_some() {
            self.help = help;
        }
        self
    }
    pub(crate) fn in_file(mut self, file: &str) -> Self {
        self.file = Some(file.to_string());
        self
    }
    pub(crate) fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Collects diagnostics while a pass keeps going, so the user sees every problem at once.
#[derive(Default, Debug)]
pub(crate) struct Diagnostics {
    pub(crate) items: Vec<Diagnostic>,
}

impl Diagnostics {
    pub(crate) fn push(&mut self, d: Diagnostic) {
        self.items.push(d);
    }
    pub(crate) fn has_errors(&self) -> bool {
        self.items.iter().any(Diagnostic::is_error)
    }
    /// Source order, then code: output is stable for snapshots and code review.
    pub(crate) fn sort(&mut self) {
        self.items.sort_by(|a, b| {
            (&a.file, a.span, a.code, &a.message).cmp(&(&b.file, b.span, b.code, &b.message))
        });
    }
}

/// "did you mean `x`?" for a typo among known names.
pub(crate) fn did_you_mean<'a>(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    closest(wanted, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// The help line of an enum-valued key: the likely intent first, then every allowed value, so
/// one reading of the error is enough to fix it.
pub(crate) fn choose<'a>(
    wanted: &str,
    allowed: impl IntoIterator<Item = &'a str> + Clone,
) -> String {
    let all = allowed.clone().into_iter().collect::<Vec<_>>().join(", ");
    match did_you_mean(wanted, allowed) {
        Some(hint) => format!("{hint} (one of: {all})"),
        None => format!("one of: {all}"),
    }
}

pub(crate) fn closest<'a>(
    wanted: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let wanted_lower = wanted.to_lowercase();
    candidates
        .into_iter()
        .map(|c| {
            let score = strsim::jaro_winkler(&wanted_lower, &c.to_lowercase());
            (score, c)
        })
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, c)| c)
}

/// Renders in the rustc style: header, `-->` location, the source lines with carets and labels,
/// then notes and help. Columns in the location count characters (a tab is one, so is `名`); the
/// carets are placed by display width (see `snippet`).
/// `source` is the file's text, indexed by line (`Source::lines`), when it is at hand.
pub(crate) fn render_human(d: &Diagnostic, source: Option<Lines>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}[{}]: {}", d.severity.as_str(), d.code, d.message);
    let location = match (&d.file, d.span) {
        (Some(f), Some(s)) => Some(format!("{f}:{}:{}", s.line, s.col)),
        (Some(f), None) => Some(f.clone()),
        _ => None,
    };
    let mut marks = Vec::new();
    if let Some(span) = d.span {
        marks.push(snippet::Mark {
            span,
            label: d.label.as_deref(),
            primary: true,
        });
        marks.extend(d.related.iter().map(|(span, label)| snippet::Mark {
            span: *span,
            label: Some(label),
            primary: false,
        }));
    }
    let gutter = marks
        .iter()
        .map(|m| m.span.line.to_string().len())
        .max()
        .unwrap_or(1);
    let pad = " ".repeat(gutter);
    if let Some(loc) = location {
        let _ = writeln!(out, "{pad}--> {loc}");
    }
    let before = out.len();
    let missed = match source {
        Some(lines) => snippet::render(&mut out, lines, &marks, gutter),
        None => marks.iter().filter_map(|m| m.label).collect(),
    };
    let drew_source = out.len() > before;
    let notes: Vec<String> = missed
        .iter()
        .map(|label| {
            let at = marks.iter().find(|m| m.label == Some(label) && !m.primary);
            match at {
                Some(m) => format!("{label} (line {}:{})", m.span.line, m.span.col),
                None => label.to_string(),
            }
        })
        .chain(d.span.is_none().then(|| d.label.clone()).flatten())
        .collect();
    if drew_source && (!notes.is_empty() || d.help.is_some()) {
        let _ = writeln!(out, "{pad} |");
    }
    for note in &notes {
        let _ = writeln!(out, "{pad} = note: {note}");
    }
    if let Some(help) = &d.help {
        for (i, line) in help.lines().enumerate() {
            if i == 0 {
                let _ = writeln!(out, "{pad} = help: {line}");
            } else {
                let _ = writeln!(out, "{pad}         {line}");
            }
        }
    }
    out
}

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    code: &'a str,
    severity: Severity,
    message: &'a str,
    file: Option<&'a str>,
    line: Option<u32>,
    column: Option<u32>,
    end_line: Option<u32>,
    end_column: Option<u32>,
    help: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    related: Vec<JsonRelated<'a>>,
}

#[derive(Serialize)]
struct JsonRelated<'a> {
    line: u32,
    column: u32,
    end_line: u32,
    end_column: u32,
    label: &'a str,
}

pub(crate) fn to_json(diags: &[Diagnostic]) -> serde_json::Value {
    let list: Vec<JsonDiagnostic> = diags
        .iter()
        .map(|d| JsonDiagnostic {
            code: d.code.as_str(),
            severity: d.severity,
            message: &d.message,
            file: d.file.as_deref(),
            line: d.span.map(|s| s.line),
            column: d.span.map(|s| s.col),
            end_line: d.span.map(|s| s.end_line),
            end_column: d.span.map(|s| s.end_col),
            help: d.help.as_deref(),
            related: d
                .related
                .iter()
                .map(|(s, label)| JsonRelated {
                    line: s.line,
                    column: s.col,
                    end_line: s.end_line,
                    end_column: s.end_col,
                    label,
                })
                .collect(),
        })
        .collect();
    serde_json::to_value(list).unwrap_or_default()
}

/// GitHub workflow commands; `%`, CR and LF must be escaped or the annotation is cut. Printed
/// as they are: every field is already safe for a terminal ([`github_command`]).
pub(crate) fn render_github(d: &Diagnostic) -> String {
    let kind = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let mut message = d.message.clone();
    if let Some(h) = &d.help {
        message.push_str(&format!(" (help: {h})"));
    }
    github_command(kind, d.file.as_deref(), d.span, d.code.as_str(), &message)
}

/// One workflow command (`::error file=F,line=L,col=C,...,title=T::message`), for diagnostics
/// and for `toolrun test --format github`'s failing tests. Its fields can start no command of
/// their own (`crate::term::workflow_field`): a message quoting a model's answer stays data.
pub(crate) fn github_command(
    kind: &str,
    file: Option<&str>,
    span: Option<Span>,
    title: &str,
    message: &str,
) -> String {
    use crate::term::workflow_field as escape_data;
    fn escape_prop(s: &str) -> String {
        escape_data(s).replace(':', "%3A").replace(',', "%2C")
    }
    let mut props = Vec::new();
    if let Some(f) = file {
        props.push(format!("file={}", escape_prop(f)));
    }
    if let Some(s) = span {
        props.push(format!("line={}", s.line));
        props.push(format!("col={}", s.col));
        props.push(format!("endLine={}", s.end_line));
        props.push(format!("endColumn={}", s.end_col));
    }
    props.push(format!("title={}", escape_prop(title)));
    format!("::{kind} {}::{}", props.join(","), escape_data(message))
}

/// The page that explains a code (what `toolrun explain CODE` prints), for SARIF and editors.
pub(crate) fn help_uri(code: &str) -> String {
    format!(
        "https://github.com/toolrun/toolrun/blob/main/docs/codes.md#{}",
        code.to_lowercase()
    )
}

pub(crate) fn to_sarif(
    diags: &[Diagnostic],
    rules: &[(&'static str, &'static str)],
) -> serde_json::Value {
    use serde_json::json;
    let used: std::collections::BTreeSet<&str> = diags.iter().map(|d| d.code.as_str()).collect();
    let rule_list: Vec<_> = rules
        .iter()
        .filter(|(code, _)| used.contains(code))
        .map(|(code, title)| {
            json!({
                "id": code,
                "shortDescription": { "text": title },
                "helpUri": help_uri(code),
            })
        })
        .collect();
    let results: Vec<_> = diags
        .iter()
        .map(|d| {
            let mut result = json!({
                "ruleId": d.code,
                "level": match d.severity { Severity::Error => "error", Severity::Warning => "warning" },
                "message": { "text": match &d.help { Some(h) => format!("{} (help: {h})", d.message), None => d.message.clone() } },
            });
            if let Some(file) = &d.file {
                let mut region = serde_json::Map::new();
                if let Some(s) = d.span {
                    region.insert("startLine".into(), s.line.into());
                    region.insert("startColumn".into(), s.col.into());
                    region.insert("endLine".into(), s.end_line.into());
                    region.insert("endColumn".into(), s.end_col.into());
                }
                let mut physical = json!({ "artifactLocation": { "uri": file } });
                if !region.is_empty() {
                    physical["region"] = serde_json::Value::Object(region);
                }
                result["locations"] = json!([{ "physicalLocation": physical }]);
                if !d.related.is_empty() {
                    let related: Vec<_> = d
                        .related
                        .iter()
                        .map(|(s, label)| {
                            json!({
                                "physicalLocation": {
                                    "artifactLocation": { "uri": file },
                                    "region": {
                                        "startLine": s.line, "startColumn": s.col,
                                        "endLine": s.end_line, "endColumn": s.end_col,
                                    },
                                },
                                "message": { "text": label },
                            })
                        })
                        .collect();
                    result["relatedLocations"] = json!(related);
                }
            }
            result
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "toolrun",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/toolrun/toolrun",
                "rules": rule_list,
            }},
            "results": results,
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::line_index::LineIndex;

    #[test]
    fn human_rendering_draws_caret_under_the_span() {
        let d = Diagnostic::new(Code::E012, "unknown tool `get_stok`")
            .in_file("s.yaml")
            .at(Span {
                line: 2,
                col: 10,
                end_line: 2,
                end_col: 18,
            })
            .label("not a tool of this spec")
            .help("did you mean `get_stock`?");
        let text = "a: 1\nallow: [get_stok]\n";
        let out = render_human(&d, Some(Lines::new(text, &LineIndex::new(text))));
        assert_eq!(
            out,
            "error[E012]: unknown tool `get_stok`\n --> s.yaml:2:10\n  |\n2 | allow: [get_stok]\n  |          ^^^^^^^^ not a tool of this spec\n  |\n  = help: did you mean `get_stock`?\n"
        );
    }

    #[test]
    fn long_lines_are_cut_around_the_caret() {
        let line = format!("{}X{}", "a".repeat(500), "b".repeat(500));
        let d = Diagnostic::new(Code::E002, "bad").at(Span::point(1, 501));
        let out = render_human(&d, Some(Lines::new(&line, &LineIndex::new(&line))));
        let lines: Vec<&str> = out.lines().collect();
        let text = lines.iter().find(|l| l.starts_with("1 | ")).unwrap();
        let caret = lines.iter().find(|l| l.contains('^')).unwrap();
        assert!(text.len() < 140, "{text}");
        assert_eq!(text.find('X'), caret.find('^'), "{out}");
    }

    #[test]
    fn suggestions_need_a_close_match() {
        assert_eq!(
            closest("get_stok_price", ["get_stock_price", "weather"]),
            Some("get_stock_price")
        );
        assert_eq!(closest("zzz", ["get_stock_price", "weather"]), None);
    }

    #[test]
    fn github_annotations_escape_separators() {
        let d = Diagnostic::new(Code::E001, "bad, really: 100%")
            .in_file("a,b.yaml")
            .at(Span::point(1, 2));
        assert_eq!(
            render_github(&d),
            "::error file=a%2Cb.yaml,line=1,col=2,endLine=1,endColumn=3,title=E001::bad, really: 100%25"
        );
    }
}
