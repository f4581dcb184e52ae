//! JUnit XML for CI systems that show test results (`--junit FILE`).

use super::cases::{CaseResult, Outcome};

fn xml_escape(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&apos;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// Writes the JUnit report if one was asked for; a failure to write fails the command.
pub(crate) fn write_requested(path: Option<&std::path::Path>, results: &[CaseResult]) -> i32 {
    let Some(path) = path else {
        return crate::exit::SUCCESS;
    };
    match crate::files::write_atomically(path, junit_xml(results).as_bytes()) {
        Ok(()) => crate::exit::SUCCESS,
        Err(e) => {
            let message = format!(
                "error: cannot write the JUnit report to `{}`: {e}",
                path.display()
            );
            eprintln!("{}", crate::term::visible(&message));
            crate::exit::FAILED
        }
    }
}

pub(crate) fn junit_xml(results: &[CaseResult]) -> String {
    let mut suites: Vec<(&str, Vec<&CaseResult>)> = Vec::new();
    for r in results {
        match suites.iter_mut().find(|(s, _)| *s == r.suite) {
            Some((_, list)) => list.push(r),
            None => suites.push((&r.suite, vec![r])),
        }
    }
    let mut out =
        String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"toolrun\">\n");
    for (suite, list) in suites {
        let failures = list.iter().filter(|r| r.outcome == Outcome::Failed).count();
        let skipped = list
            .iter()
            .filter(|r| r.outcome == Outcome::Skipped)
            .count();
        let time: f64 = list.iter().map(|r| r.duration_ms).sum::<f64>() / 1000.0;
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\" time=\"{time:.3}\">\n",
            xml_escape(suite),
            list.len()
        ));
        for r in list {
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                xml_escape(suite),
                xml_escape(&r.name),
                r.duration_ms / 1000.0
            ));
            match r.outcome {
                Outcome::Passed => out.push_str("/>\n"),
                // A regression since the baseline is its own failure type, so CI can tell it
                // from a failure the baseline already had.
                Outcome::Failed => {
                    out.push_str(&format!(
                    ">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>\n",
                    if r.regression.is_some() { "regression" } else { "failure" },
                    xml_escape(r.failures.first().map(String::as_str).unwrap_or("failed")),
                    xml_escape(&r.failures.join("\n"))
                ))
                }
                Outcome::Skipped => out.push_str(&format!(
                    ">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                    xml_escape(r.failures.first().map(String::as_str).unwrap_or(""))
                )),
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_escapes_text() {
        let r = CaseResult {
            suite: "s".into(),
            name: "a<b".into(),
            outcome: Outcome::Failed,
            failures: vec!["x & y".into()],
            duration_ms: 1.0,
            runs: None,
            regression: None,
        };
        let xml = junit_xml(&[r]);
        assert!(xml.contains("name=\"a&lt;b\""));
        assert!(xml.contains("x &amp; y"));
    }
}
