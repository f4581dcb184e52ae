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
            if r.outcome == Outcome::Passed && r.properties.is_empty() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            out.push_str(&properties(&r.properties));
            match r.outcome {
                Outcome::Passed => {}
                // A regression since the baseline is its own failure type, so CI can tell it
                // from a failure the baseline already had.
                Outcome::Failed => out.push_str(&format!(
                    "      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
                    if r.regression.is_some() {
                        "regression"
                    } else {
                        "failure"
                    },
                    xml_escape(r.failures.first().map(String::as_str).unwrap_or("failed")),
                    xml_escape(&r.failures.join("\n"))
                )),
                Outcome::Skipped => out.push_str(&format!(
                    "      <skipped message=\"{}\"/>\n",
                    xml_escape(r.failures.first().map(String::as_str).unwrap_or(""))
                )),
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// The `<properties>` line of a test case (its budgets, how close it came); empty when it has
/// none. CI test views read them as they read pytest's `record_property`.
fn properties(list: &[(String, String)]) -> String {
    if list.is_empty() {
        return String::new();
    }
    let items: String = list
        .iter()
        .map(|(n, v)| {
            format!(
                "<property name=\"{}\" value=\"{}\"/>",
                xml_escape(n),
                xml_escape(v)
            )
        })
        .collect();
    format!("      <properties>{items}</properties>\n")
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
            properties: vec![("budget.max_tokens".into(), "30 / 40 tokens (75%)".into())],
            notes: Vec::new(),
        };
        let xml = junit_xml(&[r]);
        assert!(xml.contains("name=\"a&lt;b\""));
        assert!(xml.contains("x &amp; y"));
        assert!(xml.contains(
            "<properties><property name=\"budget.max_tokens\" value=\"30 / 40 tokens (75%)\"/></properties>"
        ));
    }
}
