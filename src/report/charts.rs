//! The report's pictures, drawn here as inline SVG markup: pass rate per column with its 95%
//! interval, cost against pass rate per model, latency per test. No script draws them and
//! nothing is fetched (system fonts only), so they need nothing from the page's CSP and show
//! even with scripts off. Every text from a results file goes through `escape`.

use super::{duration, escape, percent, usd, Report};
use std::fmt::Write;

/// Drawn 1000 units wide and scaled to the page: legible at 1280 px.
const WIDTH: f64 = 1000.0;
/// Latency bars for at most this many tests (the slowest), so the picture stays a picture.
const MAX_TESTS: usize = 25;
/// Column colours, in order; text is never coloured only.
const COLOURS: [&str; 6] = [
    "#2457c5", "#c2410c", "#15803d", "#7e22ce", "#a16207", "#0e7490",
];

fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// A label cut to `max` characters, escaped.
fn label(s: &str, max: usize) -> String {
    let cut: String = if s.chars().count() > max {
        s.chars().take(max - 1).chain(['…']).collect()
    } else {
        s.to_string()
    };
    escape(&cut)
}

fn svg(id: &str, title: &str, height: f64, body: &str) -> String {
    format!(
        "<figure class=\"chart\"><svg id=\"{id}\" role=\"img\" aria-label=\"{t}\" viewBox=\"0 0 {WIDTH} {height}\" \
width=\"100%\" preserveAspectRatio=\"xMinYMin meet\" font-family=\"system-ui, sans-serif\" font-size=\"13\">\
<title>{t}</title>{body}</svg><figcaption>{t}</figcaption></figure>\n",
        t = escape(title)
    )
}

/// Horizontal bars, one per column: attempts passed, with the Wilson interval as a whisker.
fn pass_rates(report: &Report) -> String {
    let (left, right, bar) = (220.0, 160.0, 22.0);
    let plot = WIDTH - left - right;
    let mut body = String::new();
    axis(
        &mut body,
        left,
        plot,
        10.0,
        26.0 + report.columns.len() as f64 * 34.0,
    );
    for (i, c) in report.columns.iter().enumerate() {
        let y = 30.0 + i as f64 * 34.0;
        let rate = c.totals.pass_rate;
        let _ = write!(
            body,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
<rect class=\"bar\" data-column=\"{i}\" x=\"{left}\" y=\"{y}\" width=\"{:.1}\" height=\"{bar}\" fill=\"{}\"><title>{}: {} of {} attempts passed</title></rect>",
            left - 8.0,
            y + 16.0,
            label(&c.label, 28),
            plot * rate,
            colour(i),
            escape(&c.label),
            c.totals.attempts_passed,
            c.totals.attempts
        );
        if let Some(iv) = c.interval {
            let (x1, x2, ym) = (left + plot * iv.low, left + plot * iv.high, y + bar / 2.0);
            let _ = write!(
                body,
                "<g class=\"interval\" stroke=\"currentColor\" stroke-width=\"2\"><line x1=\"{x1:.1}\" y1=\"{ym}\" x2=\"{x2:.1}\" y2=\"{ym}\"/>\
<line x1=\"{x1:.1}\" y1=\"{}\" x2=\"{x1:.1}\" y2=\"{}\"/><line x1=\"{x2:.1}\" y1=\"{}\" x2=\"{x2:.1}\" y2=\"{}\"/></g>",
                ym - 7.0,
                ym + 7.0,
                ym - 7.0,
                ym + 7.0
            );
        }
        let interval = c
            .interval
            .map(|iv| format!(" [{}–{}]", percent(iv.low), percent(iv.high)))
            .unwrap_or_default();
        let _ = write!(
            body,
            "<text x=\"{}\" y=\"{}\" class=\"value\">{}{interval}</text>",
            left + plot + 10.0,
            y + 16.0,
            percent(rate),
        );
    }
    let height = 40.0 + report.columns.len() as f64 * 34.0 + 20.0;
    svg(
        "chart-pass-rate",
        "Attempts passed per column, with the 95% Wilson interval",
        height,
        &body,
    )
}

/// Grid lines at 0, 25, 50, 75 and 100%.
fn axis(body: &mut String, left: f64, plot: f64, top: f64, bottom: f64) {
    for k in 0..=4 {
        let x = left + plot * f64::from(k) / 4.0;
        let _ = write!(
            body,
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{bottom}\" stroke=\"#8884\"/>\
<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\">{}%</text>",
            bottom + 14.0,
            k * 25
        );
    }
}

/// One point per column: total cost (x) against attempts passed (y).
fn cost_vs_pass_rate(report: &Report) -> String {
    let priced: Vec<(usize, f64)> = report
        .columns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.totals.cost_usd.map(|cost| (i, cost)))
        .collect();
    let (left, top, plot_w, plot_h) = (80.0, 20.0, WIDTH - 300.0, 220.0);
    let mut body = String::new();
    if priced.is_empty() {
        body.push_str("<text x=\"20\" y=\"40\">No model declares a price: add `price:` to a model to see cost against pass rate.</text>");
        return svg(
            "chart-cost",
            "Cost against pass rate per model",
            70.0,
            &body,
        );
    }
    let max_cost = priced.iter().map(|(_, c)| *c).fold(0.0, f64::max).max(1e-9);
    let _ = write!(
        body,
        "<rect x=\"{left}\" y=\"{top}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"none\" stroke=\"#8888\"/>\
<text x=\"{left}\" y=\"{}\" fill=\"#888\">$0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#888\">{}</text>\
<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#888\">100%</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#888\">0%</text>\
<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">cost (USD)</text>",
        top + plot_h + 16.0,
        left + plot_w,
        top + plot_h + 16.0,
        usd(max_cost),
        left - 6.0,
        top + 10.0,
        left - 6.0,
        top + plot_h,
        left + plot_w / 2.0,
        top + plot_h + 32.0
    );
    for (i, cost) in priced {
        let c = &report.columns[i];
        let (x, y) = (
            left + plot_w * cost / max_cost,
            top + plot_h * (1.0 - c.totals.pass_rate),
        );
        let _ = write!(
            body,
            "<circle class=\"point\" data-column=\"{i}\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"7\" fill=\"{}\"><title>{}: {} at {}</title></circle>\
<text x=\"{:.1}\" y=\"{:.1}\">{} · {} · {}</text>",
            colour(i),
            escape(&c.label),
            percent(c.totals.pass_rate),
            usd(cost),
            (x + 10.0).min(WIDTH - 10.0),
            y + 4.0,
            label(&c.label, 24),
            percent(c.totals.pass_rate),
            usd(cost)
        );
    }
    svg(
        "chart-cost",
        "Cost against pass rate per model",
        top + plot_h + 44.0,
        &body,
    )
}

/// Per test (the slowest first), the mean duration of its attempts in each column.
fn latency(report: &Report) -> String {
    let mean = |c: &super::Cell| (c.runs > 0).then(|| c.duration_ms / f64::from(c.runs));
    let mut tests: Vec<(&super::Row, f64)> = report
        .rows
        .iter()
        .map(|r| {
            let slowest = r
                .cells
                .iter()
                .flatten()
                .filter_map(mean)
                .fold(0.0, f64::max);
            (r, slowest)
        })
        .filter(|(_, ms)| *ms > 0.0)
        .collect();
    tests.sort_by(|a, b| b.1.total_cmp(&a.1));
    let left_out = tests.len().saturating_sub(MAX_TESTS);
    tests.truncate(MAX_TESTS);
    let max = tests.first().map(|t| t.1).unwrap_or(1.0).max(1e-9);
    let cols = report.columns.len().max(1) as f64;
    let (left, right, bar) = (300.0, 120.0, (24.0 / cols).max(6.0));
    let group = bar * cols + 10.0;
    let plot = WIDTH - left - right;
    let mut body = String::new();
    for (j, (row, _)) in tests.iter().enumerate() {
        let y = 10.0 + j as f64 * group;
        let _ = write!(
            body,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 8.0,
            y + group / 2.0,
            label(&row.name, 40)
        );
        for (i, cell) in row.cells.iter().enumerate() {
            let Some(ms) = cell.as_ref().and_then(mean) else {
                continue;
            };
            let yb = y + i as f64 * bar;
            let _ = write!(
                body,
                "<rect class=\"latency\" x=\"{left}\" y=\"{yb:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}::{} ({}): {} per attempt</title></rect>\
<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}</text>",
                (plot * ms / max).max(1.0),
                bar - 1.0,
                colour(i),
                escape(&row.spec),
                escape(&row.name),
                escape(&report.columns[i].label),
                duration(ms),
                left + (plot * ms / max).max(1.0) + 4.0,
                yb + bar - 2.0,
                duration(ms)
            );
        }
    }
    if tests.is_empty() {
        body.push_str("<text x=\"20\" y=\"30\">No attempt ran.</text>");
    }
    let mut height = 20.0 + tests.len() as f64 * group;
    if left_out > 0 {
        let _ = write!(
            body,
            "<text x=\"{left}\" y=\"{:.1}\" fill=\"#888\">… and {left_out} faster test(s)</text>",
            height + 6.0
        );
        height += 20.0;
    }
    svg(
        "chart-latency",
        "Mean time per attempt, per test (slowest first)",
        height.max(50.0),
        &body,
    )
}

/// The legend: column colours and labels.
fn legend(report: &Report) -> String {
    let mut out = String::from("<p class=\"legend\">");
    for (i, c) in report.columns.iter().enumerate() {
        let _ = write!(
            out,
            "<span><svg width=\"12\" height=\"12\" aria-hidden=\"true\"><rect width=\"12\" height=\"12\" fill=\"{}\"/></svg> {}</span> ",
            colour(i),
            escape(&c.label)
        );
    }
    out.push_str("</p>\n");
    out
}

/// The charts section of the page.
pub(crate) fn render(report: &Report) -> String {
    format!(
        "<section id=\"charts\" aria-label=\"Charts\">\n<h2>Charts</h2>\n{}{}{}{}</section>\n",
        legend(report),
        pass_rates(report),
        cost_vs_pass_rate(report),
        latency(report)
    )
}
