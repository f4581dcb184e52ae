//! `toolrun diff A B`: what changed between two traces, fixtures or results files, for people
//! (`human`, `markdown` for a CI summary) or tools (`json`). Exits like `diff`: 0 the same
//! (durations and timestamps aside), 1 different, 2 unreadable.

use crate::cli::{DiffArgs, DiffFormat};
use crate::diff::{CallDiff, Delta, Diff, RunDiff};
use crate::exit;
use serde_json::Value;
use std::fmt::Write;

pub(crate) fn run(args: DiffArgs) -> i32 {
    let read = |p: &std::path::Path| -> Result<Value, String> {
        let bytes = std::fs::read(p).map_err(|e| format!("cannot read `{}`: {e}", p.display()))?;
        // A `serve --record` recording reads as the fixture it is.
        let v = crate::fixture::session_log::document(&bytes, p)?;
        crate::diff::kind_of(&v).map_err(|e| format!("`{}`: {e}", p.display()))?;
        Ok(v)
    };
    let (a, b) = match (read(&args.a), read(&args.b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {}", crate::term::visible_line(&e));
            return exit::USAGE;
        }
    };
    let d = match crate::diff::diff(
        &args.a.display().to_string(),
        &a,
        &args.b.display().to_string(),
        &b,
    ) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let text = match args.format {
        DiffFormat::Json => serde_json::to_string_pretty(&d).unwrap_or_default() + "\n",
        DiffFormat::Human => crate::term::visible(&render(&d, false)).into_owned(),
        DiffFormat::Markdown => render(&d, true),
    };
    print!("{text}");
    if d.same {
        exit::SUCCESS
    } else {
        exit::FAILED
    }
}

/// One line of text: in markdown, safe inside a list item.
fn t(s: &str, md: bool) -> String {
    if md {
        crate::report::markdown::cell_text(s)
    } else {
        s.to_string()
    }
}

fn value(v: &Option<Value>) -> String {
    match v {
        None => "(absent)".into(),
        Some(v) => v.to_string(),
    }
}

fn delta(d: &Delta, md: bool) -> String {
    let at = if d.pointer.is_empty() {
        "/"
    } else {
        &d.pointer
    };
    t(&format!("{at}: {} → {}", value(&d.a), value(&d.b)), md)
}

fn call(c: &CallDiff, md: bool) -> String {
    let show = |v: &Option<Value>| {
        v.as_ref().map_or_else(String::new, |v| {
            format!("{}({})", v["name"].as_str().unwrap_or(""), v["arguments"])
        })
    };
    let text = match c.change {
        "only_a" => format!("call {} only in A: {}", c.call, show(&c.a)),
        "only_b" => format!("call {} only in B: {}", c.call, show(&c.b)),
        _ if c.arguments.is_empty() => {
            format!("call {}: {} → {}", c.call, show(&c.a), show(&c.b))
        }
        _ => {
            let args: Vec<String> = c.arguments.iter().map(|d| delta(d, false)).collect();
            format!(
                "call {} `{}` arguments: {}",
                c.call,
                c.a.as_ref().and_then(|v| v["name"].as_str()).unwrap_or(""),
                args.join("; ")
            )
        }
    };
    t(&text, md)
}

/// A run's differences, each line starting with `indent`.
fn run_lines(out: &mut String, r: &RunDiff, indent: &str, md: bool) {
    let bullet = if md { "- " } else { "" };
    if let Some(div) = &r.first_divergence {
        let turn = div.turn.map(|n| format!(" (turn {n})")).unwrap_or_default();
        let _ = writeln!(
            out,
            "{indent}{bullet}first diverging step: {}{turn}",
            div.step
        );
        let _ = writeln!(out, "{indent}  {bullet}A: {}", t(&div.a, md));
        let _ = writeln!(out, "{indent}  {bullet}B: {}", t(&div.b, md));
    }
    for turn in &r.turns {
        for d in &turn.changes {
            let text = match (&d.pointer[..], &d.a, &d.b) {
                ("", Some(q), None) => format!("turn {} only in A: {q}", turn.turn),
                ("", None, Some(q)) => format!("turn {} only in B: {q}", turn.turn),
                _ => format!("turn {}: {}", turn.turn, delta(d, false)),
            };
            let _ = writeln!(out, "{indent}{bullet}{}", t(&text, md));
        }
    }
    for c in &r.tool_calls {
        let _ = writeln!(out, "{indent}{bullet}{}", call(c, md));
    }
    for d in &r.changes {
        let _ = writeln!(out, "{indent}{bullet}{}", delta(d, md));
    }
}

pub(crate) fn render(d: &Diff, md: bool) -> String {
    let mut out = String::new();
    let kind = match d.kind {
        crate::diff::Kind::Trace => "traces",
        crate::diff::Kind::Fixture => "fixtures",
        crate::diff::Kind::Results => "results files",
    };
    let verdict = if d.same { "the same" } else { "different" };
    let head = format!("A {} and B {} ({kind}): {verdict}", d.a, d.b);
    let bullet = if md { "- " } else { "  " };
    if md {
        let _ = writeln!(out, "### toolrun diff\n\n{}\n", t(&head, md));
    } else {
        let _ = writeln!(out, "{head}");
    }
    if let Some(run) = &d.run {
        run_lines(&mut out, run, "", md);
    }
    for test in &d.tests {
        let _ = writeln!(
            out,
            "{}test {}:",
            if md { "- " } else { "" },
            t(&test.test, md)
        );
        for c in &test.changes {
            let _ = writeln!(out, "  {bullet}{}", delta(c, md));
        }
        for (n, run) in &test.attempts {
            let _ = writeln!(out, "  {bullet}attempt {n}:");
            run_lines(&mut out, run, "    ", md);
        }
    }
    for (which, list) in [("A", &d.only_a), ("B", &d.only_b)] {
        for name in list {
            let _ = writeln!(
                out,
                "{}only in {which}: {}",
                if md { "- " } else { "" },
                t(name, md)
            );
        }
    }
    if !d.other.is_empty() {
        let _ = writeln!(out, "{}other differences:", if md { "\n" } else { "" });
        for o in &d.other {
            let _ = writeln!(out, "{bullet}{}", delta(o, md));
        }
        if d.other_left_out > 0 {
            let _ = writeln!(out, "{bullet}… and {} more", d.other_left_out);
        }
    }
    out
}
