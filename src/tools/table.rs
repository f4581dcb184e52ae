//! Table tools: filter rows by equality or case-insensitive `contains`, project columns, limit.

use super::{ErrorKind, ToolError};
use crate::registry::Table;
use serde_json::{Map, Value};

const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 100;

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        // An empty CSV cell: no text, so `{contains: "nu"}` does not find it.
        Value::Null => String::new(),
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

pub(crate) fn execute(table: &Table, args: &Value) -> Result<Value, ToolError> {
    let no_filters = Map::new();
    let filters = args
        .get("where")
        .and_then(Value::as_object)
        .unwrap_or(&no_filters);
    let requested: Option<Vec<&str>> = args
        .get("columns")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(Value::as_str).collect());
    // Filtered and requested columns must both exist; a typo gets a did-you-mean.
    let filters = filters
        .iter()
        .map(|(name, wanted)| Ok((position(table, name)?, wanted)))
        .collect::<Result<Vec<_>, ToolError>>()?;
    let projection = requested
        .map(|names| {
            names
                .into_iter()
                .map(|name| Ok((position(table, name)?, name)))
                .collect::<Result<Vec<_>, ToolError>>()
        })
        .transpose()?;
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .map(|l| (l as usize).clamp(1, MAX_LIMIT))
        .unwrap_or(DEFAULT_LIMIT);
    let rows: Vec<Value> = (0..table.len())
        .filter(|&row| {
            filters
                .iter()
                .all(|&(column, wanted)| cell_matches(table.cell(row, column).as_deref(), wanted))
        })
        .take(limit)
        .map(|row| match &projection {
            Some(columns) => Value::Object(
                columns
                    .iter()
                    .filter_map(|&(c, name)| {
                        Some((name.to_string(), table.cell(row, c)?.into_owned()))
                    })
                    .collect::<Map<_, _>>(),
            ),
            None => Value::Object(table.row_object(row)),
        })
        .collect();
    if rows.is_empty() {
        let described = if filters.is_empty() {
            "the table is empty".to_string()
        } else {
            let filters = args.get("where").cloned().unwrap_or_default();
            format!("no rows match {filters}")
        };
        return Err(ToolError::new(ErrorKind::NotFound, described));
    }
    Ok(Value::Array(rows))
}

/// The index of a column the arguments name, or an error with a did-you-mean.
fn position(table: &Table, column: &str) -> Result<usize, ToolError> {
    if let Some(position) = table.position(column) {
        return Ok(position);
    }
    let columns = table.columns();
    let hint = crate::diag::did_you_mean(column, columns.iter())
        .unwrap_or_else(|| format!("columns: {}", table.column_list()));
    Err(ToolError::new(
        ErrorKind::InvalidArguments,
        format!("unknown column `{column}`; {hint}"),
    ))
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
        Table::from_objects(
            rows.into_iter()
                .map(|r| r.as_object().cloned().unwrap())
                .collect(),
        )
        .unwrap()
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
