//! The templates of a data test over `row`: `{{ row.COLUMN }}` (or `{{ row["a column"] }}`)
//! found in a string, and a node rendered with one row's values.

use crate::diag::Span;
use crate::specfile::yaml::{Key, Node, Value};

/// Keys whose value, when it is exactly `{{ row.COLUMN }}`, is read as a number from a CSV cell.
const NUMERIC: &[&str] = &[
    "max_tool_calls",
    "max_tokens",
    "max_cost_usd",
    "max_latency_ms",
    "pass",
];

/// One value of a row: a CSV cell, or a JSONL member.
#[derive(Clone, Copy)]
pub(super) enum Cell<'r> {
    Text(&'r str),
    Json(&'r serde_json::Value),
}

/// A piece of a template string.
pub(super) enum Piece<'t> {
    Text(&'t str),
    Column(&'t str),
}

/// `text` split into text and `{{ row.COLUMN }}` pieces, or the first expression that is not a
/// column of `row`.
pub(super) fn pieces(text: &str) -> Result<Vec<Piece<'_>>, &str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            return Err(&rest[start..]);
        };
        if start > 0 {
            out.push(Piece::Text(&rest[..start]));
        }
        let expr = &rest[start..start + len + 2];
        out.push(Piece::Column(
            column_of(&expr[2..expr.len() - 2]).ok_or(expr)?,
        ));
        rest = &rest[start + len + 2..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// `row.amount`, `row["unit price"]` or `row['unit price']` → the column's name.
pub(super) fn column_of(expr: &str) -> Option<&str> {
    let expr = expr.trim();
    if let Some(name) = expr.strip_prefix("row.") {
        let plain = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
        return plain.then_some(name);
    }
    let inner = expr.strip_prefix("row[")?.strip_suffix(']')?.trim();
    ["\"", "'"].iter().find_map(|q| {
        let name = inner.strip_prefix(q)?.strip_suffix(q)?;
        (!name.is_empty() && !name.contains(q)).then_some(name)
    })
}

/// The node with every template over `row` filled in, or the first column the row lacks.
pub(super) fn render<'c, 'r>(
    node: &'c Node,
    row: &dyn Fn(&str) -> Option<Cell<'r>>,
    numeric: bool,
) -> Result<Node, &'c str> {
    let value = match &node.value {
        Value::Str(s) if s.contains("{{") => render_text(s, row, numeric)?,
        Value::Seq(items) => Value::Seq(
            items
                .iter()
                .map(|i| render(i, row, false))
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(entries) => Value::Map(
            entries
                .iter()
                .map(|(k, v)| {
                    Ok::<_, &str>((
                        k.clone(),
                        render(v, row, NUMERIC.contains(&k.name.as_str()))?,
                    ))
                })
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    };
    Ok(Node {
        span: node.span,
        value,
    })
}

/// A template string: exactly one `{{ row.COLUMN }}` keeps a JSONL value's type (and reads a
/// number from a CSV cell where a number is expected); anything else is text.
pub(super) fn render_text<'c, 'r>(
    text: &'c str,
    row: &dyn Fn(&str) -> Option<Cell<'r>>,
    numeric: bool,
) -> Result<Value, &'c str> {
    let Ok(ps) = pieces(text) else {
        return Ok(Value::Str(text.to_string()));
    };
    if let [Piece::Column(c)] = ps.as_slice() {
        return match row(c).ok_or(*c)? {
            Cell::Json(v) => Ok(json_value(v)),
            Cell::Text(t) if numeric => Ok(number(t)),
            Cell::Text(t) => Ok(Value::Str(t.to_string())),
        };
    }
    let mut out = String::with_capacity(text.len());
    for p in ps {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Column(c) => match row(c).ok_or(c)? {
                Cell::Text(t) => out.push_str(t),
                Cell::Json(serde_json::Value::String(s)) => out.push_str(s),
                Cell::Json(serde_json::Value::Null) => {}
                Cell::Json(v) => out.push_str(&v.to_string()),
            },
        }
    }
    Ok(Value::Str(out))
}

fn number(text: &str) -> Value {
    let t = text.trim();
    if let Ok(i) = t.parse::<i64>() {
        return Value::Int(i);
    }
    match t.parse::<f64>() {
        Ok(f) if f.is_finite() => Value::Float(f),
        _ => Value::Str(text.to_string()),
    }
}

fn json_value(v: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    let node = |v: &J| Node {
        span: Span::default(),
        value: json_value(v),
    };
    match v {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        J::String(s) => Value::Str(s.clone()),
        J::Array(items) => Value::Seq(items.iter().map(node).collect()),
        J::Object(m) => Value::Map(
            m.iter()
                .map(|(k, v)| {
                    let key = Key {
                        name: k.clone(),
                        span: Span::default(),
                    };
                    (key, node(v))
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_read_columns_only() {
        let ps = pieces("refund_{{ row.id }} of {{row[\"unit price\"]}}").unwrap();
        let cols: Vec<&str> = ps
            .iter()
            .filter_map(|p| match p {
                Piece::Column(c) => Some(*c),
                Piece::Text(_) => None,
            })
            .collect();
        assert_eq!(cols, ["id", "unit price"]);
        assert_eq!(pieces("{{ args.x }}").err(), Some("{{ args.x }}"));
        assert_eq!(pieces("{{ row.x").err(), Some("{{ row.x"));
    }

    #[test]
    fn one_expression_keeps_its_type() {
        let v = serde_json::json!(12.5);
        let row = |c: &str| (c == "n").then_some(Cell::Json(&v));
        assert_eq!(
            render_text("{{ row.n }}", &row, false),
            Ok(Value::Float(12.5))
        );
        assert_eq!(
            render_text("n={{ row.n }}", &row, false),
            Ok(Value::Str("n=12.5".into()))
        );
        assert_eq!(render_text("{{ row.m }}", &row, false), Err("m"));
        let text = |_: &str| Some(Cell::Text("4000"));
        assert_eq!(
            render_text("{{ row.b }}", &text, true),
            Ok(Value::Int(4000))
        );
        assert_eq!(
            render_text("{{ row.b }}", &text, false),
            Ok(Value::Str("4000".into()))
        );
    }
}
