//! A table tool's rows. A CSV file's cells are kept as text in one buffer and typed when a query
//! reads them, instead of a JSON object (with its own copy of every column name) per row: a large
//! file then costs about its own size in memory, and a wide one no more than that either.

use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::collections::HashMap;

pub(crate) struct Table {
    columns: Vec<String>,
    /// Column name → its index in `columns`.
    positions: HashMap<String, usize>,
    rows: Rows,
}

enum Rows {
    /// Inline `rows:` and JSON files: any JSON in a cell, and each row has its own columns.
    Objects(Vec<Map<String, Value>>),
    /// CSV: every row has every column. Cell `i` (row-major) is `text[ends[i - 1]..ends[i]]`,
    /// trimmed as the CSV reader gives it; an empty one reads as `empty` (the table's `empty_as`,
    /// null by default: CSV cannot tell "no value" from "", and text it is not).
    Csv {
        text: String,
        ends: Vec<u32>,
        empty: Value,
    },
}

impl Table {
    /// Rows written as JSON objects; the columns are every key any row has, in order of first
    /// appearance.
    pub(crate) fn from_objects(rows: Vec<Map<String, Value>>) -> Table {
        let mut columns = Vec::new();
        let mut positions = HashMap::new();
        for row in &rows {
            for key in row.keys() {
                if !positions.contains_key(key) {
                    positions.insert(key.clone(), columns.len());
                    columns.push(key.clone());
                }
            }
        }
        Table {
            columns,
            positions,
            rows: Rows::Objects(rows),
        }
    }

    pub(crate) fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The columns for a message: all of them, or the first few and how many there are, so a
    /// wide table does not put every column name in front of a model.
    pub(crate) fn column_list(&self) -> String {
        const LISTED: usize = 30;
        let listed = self.columns[..self.columns.len().min(LISTED)].join(", ");
        match self.columns.len() {
            n if n > LISTED => format!("{listed}, ... ({n} in all)"),
            _ => listed,
        }
    }

    /// The index of a column by its name.
    pub(crate) fn position(&self, column: &str) -> Option<usize> {
        self.positions.get(column).copied()
    }

    pub(crate) fn len(&self) -> usize {
        match &self.rows {
            Rows::Objects(rows) => rows.len(),
            Rows::Csv { ends, .. } => ends.len().checked_div(self.columns.len()).unwrap_or(0),
        }
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value in row `row`, column `column` (an index from [`Table::position`]); `None` when
    /// the row has no such column.
    pub(crate) fn cell(&self, row: usize, column: usize) -> Option<Cow<'_, Value>> {
        match &self.rows {
            Rows::Objects(rows) => rows[row].get(&self.columns[column]).map(Cow::Borrowed),
            Rows::Csv { text, ends, empty } => {
                let i = row * self.columns.len() + column;
                let start = if i == 0 { 0 } else { ends[i - 1] as usize };
                match &text[start..ends[i] as usize] {
                    "" => Some(Cow::Borrowed(empty)),
                    cell => Some(Cow::Owned(csv_cell(cell))),
                }
            }
        }
    }

    /// Row `row` as a JSON object, its columns in the order they were written.
    pub(crate) fn row_object(&self, row: usize) -> Map<String, Value> {
        match &self.rows {
            Rows::Objects(rows) => rows[row].clone(),
            Rows::Csv { .. } => (0..self.columns.len())
                .filter_map(|c| Some((self.columns[c].clone(), self.cell(row, c)?.into_owned())))
                .collect(),
        }
    }
}

/// Builds a CSV table record by record while the file is read, so the file's text and its
/// parsed rows are never both held whole.
pub(crate) struct CsvTableBuilder {
    columns: Vec<String>,
    positions: HashMap<String, usize>,
    /// For each column, the field of a record that fills it: the last one of that name, when a
    /// header repeats a name.
    fields: Vec<usize>,
    text: String,
    ends: Vec<u32>,
    empty: Value,
}

impl CsvTableBuilder {
    /// `empty` is what an empty cell reads as (`empty_as`).
    pub(crate) fn new(headers: &csv::StringRecord, empty: Value) -> CsvTableBuilder {
        let mut columns: Vec<String> = Vec::new();
        let mut positions = HashMap::new();
        let mut fields = Vec::new();
        for (field, name) in headers.iter().enumerate() {
            match positions.get(name) {
                Some(&column) => fields[column] = field,
                None => {
                    positions.insert(name.to_string(), columns.len());
                    columns.push(name.to_string());
                    fields.push(field);
                }
            }
        }
        CsvTableBuilder {
            columns,
            positions,
            fields,
            text: String::new(),
            ends: Vec::new(),
            empty,
        }
    }

    /// Appends a record with as many fields as the header (the CSV reader checks that). Fails
    /// only past 4 GiB of cell text, far beyond the size limit of a table file.
    pub(crate) fn push(&mut self, record: &csv::StringRecord) -> Result<(), &'static str> {
        for &field in &self.fields {
            self.text.push_str(record.get(field).unwrap_or(""));
            let end = u32::try_from(self.text.len()).map_err(|_| "the table is too large")?;
            self.ends.push(end);
        }
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Table {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
        Table {
            columns: self.columns,
            positions: self.positions,
            rows: Rows::Csv {
                text: self.text,
                ends: self.ends,
                empty: self.empty,
            },
        }
    }
}

/// CSV has no types; numbers and booleans are recognised so comparisons behave as in YAML rows.
fn csv_cell(v: &str) -> Value {
    if let Ok(i) = v.parse::<i64>() {
        return json!(i);
    }
    if let Ok(f) = v.parse::<f64>() {
        if f.is_finite() && v.contains('.') {
            return json!(f);
        }
    }
    match v {
        "true" => json!(true),
        "false" => json!(false),
        _ => json!(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(text: &str) -> Table {
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let mut builder = CsvTableBuilder::new(reader.headers().unwrap(), Value::Null);
        for record in reader.records() {
            builder.push(&record.unwrap()).unwrap();
        }
        builder.finish()
    }

    #[test]
    fn csv_cells_are_typed_when_read() {
        let t = csv("name, n ,x,ok\nAda, 7 ,1.5,true\n,-2,3.,no\n");
        assert_eq!(t.columns(), ["name", "n", "x", "ok"]);
        assert_eq!(t.len(), 2);
        let n = t.position("n").unwrap();
        assert_eq!(t.cell(0, n).unwrap().into_owned(), json!(7));
        assert_eq!(t.cell(1, n).unwrap().into_owned(), json!(-2));
        assert_eq!(
            Value::Object(t.row_object(0)),
            json!({"name": "Ada", "n": 7, "x": 1.5, "ok": true})
        );
        assert_eq!(
            Value::Object(t.row_object(1)),
            json!({"name": null, "n": -2, "x": 3.0, "ok": "no"})
        );
    }

    #[test]
    fn a_repeated_header_keeps_its_first_place_and_last_value() {
        let t = csv("a,b,a\n1,2,3\n");
        assert_eq!(t.columns(), ["a", "b"]);
        assert_eq!(Value::Object(t.row_object(0)), json!({"a": 3, "b": 2}));
    }

    #[test]
    fn a_header_without_rows_is_an_empty_table_with_columns() {
        let t = csv("a,b\n");
        assert!(t.is_empty());
        assert_eq!(t.columns(), ["a", "b"]);
        let empty = csv("");
        assert!(empty.is_empty());
        assert!(empty.columns().is_empty() || empty.columns() == [""]);
    }

    #[test]
    fn object_rows_keep_their_own_columns() {
        let rows = [json!({"a": 1, "b": [1]}), json!({"c": null, "a": 2})]
            .into_iter()
            .map(|r| r.as_object().cloned().unwrap())
            .collect();
        let t = Table::from_objects(rows);
        assert_eq!(t.columns(), ["a", "b", "c"]);
        assert!(t.cell(1, t.position("b").unwrap()).is_none());
        assert_eq!(t.cell(1, 2).unwrap().into_owned(), Value::Null);
        assert_eq!(Value::Object(t.row_object(1)), json!({"c": null, "a": 2}));
    }
}
