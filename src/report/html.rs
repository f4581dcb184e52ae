//! The report as one self-contained HTML file: inline CSS and script, the data in one JSON block,
//! nothing fetched. A Content-Security-Policy forbids every network load and lets only the page's
//! own script run (by its hash), so even a page edited by hand cannot phone home.

use super::{escape, Report};
use crate::redact::Redactor;
use base64::Engine as _;
use sha2::{Digest, Sha256};

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

pub(crate) fn render(report: &Report, redactor: &Redactor) -> String {
    let data = script_safe_json(&super::to_json(report, redactor));
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
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; \
script-src 'sha256-{script_hash}'; img-src data:; base-uri 'none'; form-action 'none'\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta name=\"generator\" content=\"toolrun {version}\">\n\
<title>{title}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n\
<noscript>This report draws its tables with JavaScript; open it in a browser with scripts enabled.</noscript>\n\
<main id=\"app\"></main>\n{charts}\
<script type=\"application/json\" id=\"toolrun-data\">{data}</script>\n\
<script>{SCRIPT}</script>\n</body>\n</html>\n",
        version = env!("CARGO_PKG_VERSION"),
        // Drawn from the same view model; masked like the data block.
        charts = redactor.str(&super::charts::render(report)),
    )
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
            &build(&[Input {
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

    #[test]
    fn secrets_are_masked_in_the_page() {
        let mut r = results("gpt", &[("one", true)]);
        r.tests[0].query = "use key sk-live-123456".into();
        let page = render(
            &build(&[Input {
                path: "a.json".into(),
                results: r,
            }]),
            &Redactor::new(["sk-live-123456".to_string()]),
        );
        assert!(!page.contains("sk-live-123456"));
        assert!(page.contains("use key ***"));
    }
}
