//! The report as one self-contained HTML file: inline CSS and script, the data in one JSON block,
//! nothing fetched. A Content-Security-Policy forbids every network load and lets only the page's
//! own script run (by its hash), so even a page edited by hand cannot phone home.

use super::{escape, Report};
use crate::redact::Redactor;
use base64::Engine as _;
use sha2::{Digest, Sha256};
use std::io::Write;

const CSS: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// JSON that can sit inside `<script type="application/json">`: no `</script>`, no `<!--`, no
/// character a parser treats as a line end. The escapes are valid JSON, so the page reads back
/// exactly the data that was written.
pub(crate) fn script_safe_json(v: &serde_json::Value) -> String {
    let text = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// A secret that survived masking, found before the text that holds it was written.
#[derive(Debug)]
pub(crate) struct Leak(pub(crate) String);

impl std::fmt::Display for Leak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "secret `{}` would appear in it", self.0)
    }
}

impl std::error::Error for Leak {}

/// Writes `text` unless a secret survived in it (fail closed, as every writer does).
fn put(w: &mut dyn Write, redactor: &Redactor, text: &str) -> std::io::Result<()> {
    if let Some(secret) = redactor.leaks(text) {
        return Err(std::io::Error::other(Leak(secret.to_string())));
    }
    w.write_all(text.as_bytes())
}

/// One value of the data block, masked and safe inside its script element.
fn put_json<T: serde::Serialize>(
    w: &mut dyn Write,
    redactor: &Redactor,
    value: &T,
) -> std::io::Result<()> {
    let mut v = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
    redactor.value(&mut v);
    put(w, redactor, &script_safe_json(&v))
}

#[cfg(test)]
pub(crate) fn render(report: &Report, redactor: &Redactor) -> String {
    let mut out = Vec::new();
    let _ = render_to(report, redactor, None, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// The page, written as it is made (issue 36 §19: the whole page as one JSON tree, then as one
/// string, then copied into the page, held a report of 500 MB of results several times over).
/// The data block is the report's JSON, written a part at a time, each masked and checked for
/// secrets before it is written: the same bytes as the whole document written at once.
/// With `attempts`, each cell's attempts are written by it (`stream::Spool::copy`: the report's
/// own are then only what the summary reads); without, they are the report's.
pub(crate) fn render_to(
    report: &Report,
    redactor: &Redactor,
    mut attempts: Option<Attempts>,
    w: &mut dyn Write,
) -> std::io::Result<()> {
    let script_hash =
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT.as_bytes()));
    let mut specs: Vec<&str> = report
        .columns
        .iter()
        .flat_map(|c| c.specs.iter().map(|s| s.name.as_str()))
        .collect();
    specs.sort_unstable();
    specs.dedup();
    let title = escape(&redactor.str(&format!("toolrun report: {}", specs.join(", "))));
    let head = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; \
script-src 'sha256-{script_hash}'; img-src data:; base-uri 'none'; form-action 'none'\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta name=\"generator\" content=\"toolrun {version}\">\n\
<title>{title}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n\
<noscript>This report draws its tables with JavaScript; open it in a browser with scripts enabled.</noscript>\n\
<main id=\"app\"></main>\n{charts}\
<script type=\"application/json\" id=\"toolrun-data\">",
        version = env!("CARGO_PKG_VERSION"),
        // Drawn from the same view model; masked like the data block.
        charts = redactor.str(&super::charts::render(report)),
    );
    put(w, redactor, &head)?;
    // `Report`'s fields in their order, as serde writes them.
    w.write_all(b"{\"toolrun_version\":")?;
    put_json(w, redactor, &report.toolrun_version)?;
    w.write_all(b",\"columns\":")?;
    put_json(w, redactor, &report.columns)?;
    w.write_all(b",\"rows\":[")?;
    for (i, row) in report.rows.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        match attempts.as_deref_mut() {
            Some(attempts) => put_row(w, redactor, row, i, attempts)?,
            None => {
                let mut v = serde_json::to_value(row).unwrap_or(serde_json::Value::Null);
                let cells = v.get_mut("cells").and_then(|c| c.as_array_mut());
                for cell in cells.into_iter().flatten() {
                    if let Some(attempts) = cell.get_mut("attempts") {
                        super::budgets::with_texts(attempts);
                    }
                }
                put_json(w, redactor, &v)?
            }
        }
    }
    w.write_all(b"],\"comparisons\":")?;
    put_json(w, redactor, &report.comparisons)?;
    w.write_all(b",\"notes\":")?;
    put_json(w, redactor, &report.notes)?;
    w.write_all(b"}")?;
    put(
        w,
        redactor,
        &format!("</script>\n<script>{SCRIPT}</script>\n</body>\n</html>\n"),
    )
}

/// Writes the attempts of the cell at (row, column), as JSON, masked and checked.
pub(crate) type Attempts<'a> =
    &'a mut dyn FnMut(usize, usize, &mut dyn Write) -> std::io::Result<()>;

/// A row as serde writes it, each cell's attempts written by `attempts`.
fn put_row(
    w: &mut dyn Write,
    redactor: &Redactor,
    row: &super::Row,
    index: usize,
    attempts: &mut dyn FnMut(usize, usize, &mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    w.write_all(b"{\"spec\":")?;
    put_json(w, redactor, &row.spec)?;
    w.write_all(b",\"name\":")?;
    put_json(w, redactor, &row.name)?;
    w.write_all(b",\"query\":")?;
    put_json(w, redactor, &row.query)?;
    w.write_all(b",\"cells\":[")?;
    for (column, cell) in row.cells.iter().enumerate() {
        if column > 0 {
            w.write_all(b",")?;
        }
        let Some(cell) = cell else {
            w.write_all(b"null")?;
            continue;
        };
        let mut v = serde_json::to_value(cell).unwrap_or(serde_json::Value::Null);
        if let Some(fields) = v.as_object_mut() {
            // In its place (the map keeps serde's order): `attempts` is the cell's last field.
            fields.insert("attempts".into(), serde_json::Value::Array(Vec::new()));
        }
        redactor.value(&mut v);
        let text = script_safe_json(&v);
        let Some(head) = text.strip_suffix("[]}") else {
            return Err(std::io::Error::other(
                "a report cell did not end with its attempts",
            ));
        };
        put(w, redactor, head)?;
        attempts(index, column, w)?;
        w.write_all(b"}")?;
    }
    w.write_all(b"],\"failing\":")?;
    put_json(w, redactor, &row.failing)?;
    w.write_all(b"}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::results;
    use crate::report::{build, Input};

    #[test]
    fn embedded_json_cannot_close_its_script_and_reads_back_unchanged() {
        let v = serde_json::json!({ "name": "</script><script>alert(1)</script><!-- \u{2028} &" });
        let text = script_safe_json(&v);
        assert!(!text.contains('<') && !text.contains('>'), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(back, v);
    }

    #[test]
    fn the_page_is_self_contained_and_escaped() {
        let mut r = results("gpt", &[("one", true)]);
        r.specs[0].name = "</title><script>x</script>".into();
        r.tests[0].name = "</script><img src=x onerror=alert(1)>".into();
        let page = render(
            &build(vec![Input {
                path: "a.json".into(),
                results: r,
            }]),
            &Redactor::default(),
        );
        assert!(!page.contains("<img"), "markup from data reached the page");
        assert!(page.contains("&lt;/title&gt;&lt;script&gt;"));
        assert_eq!(
            page.matches("</script>").count(),
            2,
            "only the page's own scripts close"
        );
        for remote in ["http://", "https://", "//cdn", "src=\"", "href=\""] {
            assert!(!page.contains(remote), "the page refers to `{remote}`");
        }
    }

    /// The page written a part at a time is the page written whole, as it was made before.
    #[test]
    fn the_data_block_written_in_parts_is_the_whole_document() {
        let a = results("gpt", &[("one", true), ("two", false)]);
        let b = results("claude", &[("one", false), ("two", true)]);
        let report = build(vec![
            Input {
                path: "a.json".into(),
                results: a,
            },
            Input {
                path: "b.json".into(),
                results: b,
            },
        ]);
        let redactor = Redactor::new(["<b>up</b>".to_string()]);
        let page = render(&report, &redactor);
        let whole = script_safe_json(&crate::report::to_json(&report, &redactor));
        let start = page.find("id=\"toolrun-data\">").unwrap_or(0) + 18;
        let end = page[start..].find("</script>").unwrap_or(0) + start;
        assert_eq!(&page[start..end], whole);
        assert!(page.contains("what is ***?"), "{page}");
    }

    #[test]
    fn secrets_are_masked_in_the_page() {
        let mut r = results("gpt", &[("one", true)]);
        r.tests[0].query = "use key sk-live-123456".into();
        let page = render(
            &build(vec![Input {
                path: "a.json".into(),
                results: r,
            }]),
            &Redactor::new(["sk-live-123456".to_string()]),
        );
        assert!(!page.contains("sk-live-123456"));
        assert!(page.contains("use key ***"));
    }
}
