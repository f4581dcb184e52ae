//! Table tools: filter rows by equality or case-insensitive `contains`, project columns, limit.

use super::{ErrorKind, ToolError};
use crate::registry::Table;
use serde_json::{Map, Value};

const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 100;

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Strings compare without case (emails, names typed by a model); numbers compare as numbers
/// even when a CSV cell holds them as text.
fn cell_matches(cell: Option<&Value>, wanted: &Value) -> bool {
    let cell = cell.unwrap_or(&Value::Null);
    if let Some(needle) = wanted.get("contains").and_then(Value::as_str) {
        return text_of(cell)
            .to_lowercase()
            .contains(&needle.to_lowercase());
    }
    match (cell, wanted) {
        (Value::String(a), Value::String(b)) => {
            a.eq_ignore_ascii_case(b) || a.to_lowercase() == b.to_lowercase()
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::String(a), Value::Number(b)) | (Value::Number(b), Value::String(a)) => {
            a.trim().parse::<f64>().ok() == b.as_f64()
        }
        _ => cell == wanted,
    }
}

pub fn execute(table: &Table, args: &Value) -> Result<Value, ToolError> {
    let filters = args
        .get("where")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let columns: Option<Vec<String>> = args.get("columns").and_then(Value::as_array).map(|c| {
        c.iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    });
    // Filtered and requested columns must both exist; a typo gets a did-you-mean.
    let requested = columns.iter().flatten();
    if let Some(column) = filters
        .keys()
        .chain(requested)
        .find(|c| !table.columns.contains(c))
    {
        let hint = crate::diag::did_you_mean(column, table.columns.iter().map(String::as_str))
            .unwrap_or_else(|| format!("columns: {}", table.columns.join(", ")));
        return Err(ToolError::new(
            ErrorKind::InvalidArguments,
            format!("unknown column `{column}`; {hint}"),
        ));
    }
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .map(|l| (l as usize).clamp(1, MAX_LIMIT))
        .unwrap_or(DEFAULT_LIMIT);
    let rows: Vec<Value> = table
        .rows
        .iter()
        .filter(|row| {
            filters
                .iter()
                .all(|(col, wanted)| cell_matches(row.get(col), wanted))
        })
        .take(limit)
        .map(|row| match &columns {
            Some(cols) => Value::Object(
                cols.iter()
                    .filter_map(|c| row.get(c).map(|v| (c.clone(), v.clone())))
                    .collect::<Map<_, _>>(),
            ),
            None => Value::Object(row.clone()),
        })
        .collect();
    if rows.is_empty() {
        let described = if filters.is_empty() {
            "the table is empty".to_string()
        } else {
            format!("no rows match {}", Value::Object(filters))
        };
        return Err(ToolError::new(ErrorKind::NotFound, described));
    }
    Ok(Value::Array(rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table() -> Table {
        let rows = vec![
            json!({"name": "Alice Johnson", "email": "alice@example.com", "salary": "100"}),
            json!({"name": "Bob Stone", "email": "bob@example.com", "salary": 90}),
        ];
        Table {
            columns: vec!["name".into(), "email".into(), "salary".into()],
            rows: rows
                .into_iter()
                .map(|r| r.as_object().cloned().unwrap())
                .collect(),
        }
    }

    #[test]
    fn filters_by_equality_and_contains() {
        let t = table();
        let r = execute(&t, &json!({"where": {"email": "BOB@example.com"}})).unwrap();
        assert_eq!(r[0]["name"], "Bob Stone");
        let r = execute(
            &t,
            &json!({"where": {"name": {"contains": "johns"}}, "columns": ["email"]}),
        )
        .unwrap();
        assert_eq!(r, json!([{"email": "alice@example.com"}]));
        let r = execute(&t, &json!({"where": {"salary": 100}})).unwrap();
        assert_eq!(r[0]["name"], "Alice Johnson");
    }

    #[test]
    fn unknown_columns_and_no_rows_are_errors() {
        let t = table();
        let e = execute(&t, &json!({"where": {"emial": "x"}})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArguments);
        assert!(e.message.contains("did you mean `email`"));
        assert_eq!(
            execute(&t, &json!({"where": {"name": "Zed"}}))
                .unwrap_err()
                .kind,
            ErrorKind::NotFound
        );
    }
}
