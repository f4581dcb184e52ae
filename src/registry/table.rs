//! A table tool's rows. A CSV file's cells are kept as text in one buffer and typed when a query
//! reads them, instead of a JSON object (with its own copy of every column name) per row: a large
//! file then costs about its own size in memory, and a wide one no more than that either (its
//! column names are one buffer too, looked up through a sorted index).

use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::collections::HashSet;

const TOO_LARGE: &str = "the table is too large";

pub(crate) struct Table {
    columns: Names,
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
    /// appearance. Fails only past 4 GiB of column names, far beyond the size limit of a file.
    pub(crate) fn from_objects(rows: Vec<Map<String, Value>>) -> Result<Table, &'static str> {
        let mut seen = HashSet::new();
        let columns: Vec<&str> = rows
            .iter()
            .flat_map(|row| row.keys())
            .map(String::as_str)
            .filter(|key| seen.insert(*key))
            .collect();
        drop(seen);
        let columns = Names::new(columns.iter().copied())?;
        Ok(Table {
            columns,
            rows: Rows::Objects(rows),
        })
    }

    pub(crate) fn columns(&self) -> &Names {
        &self.columns
    }

    /// The columns for a message: all of them, or the first few and how many there are, so a
    /// wide table does not put every column name in front of a model.
    pub(crate) fn column_list(&self) -> String {
        const LISTED: usize = 30;
        let listed: Vec<&str> = self.columns.iter().take(LISTED).collect();
        let listed = listed.join(", ");
        match self.columns.len() {
            n if n > LISTED => format!("{listed}, ... ({n} in all)"),
            _ => listed,
        }
    }

    /// The index of a column by its name.
    pub(crate) fn position(&self, column: &str) -> Option<usize> {
        self.columns.position(column)
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
            Rows::Objects(rows) => rows[row].get(self.columns.get(column)).map(Cow::Borrowed),
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
                .filter_map(|c| {
                    let value = self.cell(row, c)?.into_owned();
                    Some((self.columns.get(c).to_string(), value))
                })
                .collect(),
        }
    }
}

/// Column names in one buffer, with an index sorted by name for lookups: a wide table (hundreds
/// of thousands of columns) then costs a few bytes per column beyond the names themselves,
/// instead of two `String`s and a hash entry each.
pub(crate) struct Names {
    text: String,
    /// Name `i` is `text[ends[i - 1]..ends[i]]`.
    ends: Vec<u32>,
    /// Column indices in the order of their names.
    sorted: Vec<u32>,
}

impl Names {
    /// Names in column order. Fails only past 4 GiB of names.
    fn new<'n, I>(names: I) -> Result<Names, &'static str>
    where
        I: IntoIterator<Item = &'n str>,
        I::IntoIter: Clone,
    {
        let names = names.into_iter();
        // Sized first: growing buffers of megabytes step by step leaves the steps behind as
        // peak memory.
        let (bytes, count) = names.clone().fold((0, 0), |(b, c), n| (b + n.len(), c + 1));
        let mut text = String::with_capacity(bytes);
        let mut ends = Vec::with_capacity(count);
        for name in names {
            text.push_str(name);
            ends.push(u32::try_from(text.len()).map_err(|_| TOO_LARGE)?);
        }
        let mut names = Names {
            text,
            ends,
            sorted: Vec::new(),
        };
        let count = u32::try_from(names.ends.len()).map_err(|_| TOO_LARGE)?;
        let mut sorted: Vec<u32> = (0..count).collect();
        sorted.sort_by(|&a, &b| names.get(a as usize).cmp(names.get(b as usize)));
        names.sorted = sorted;
        Ok(names)
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The name of column `i`.
    pub(crate) fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> + Clone + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    fn position(&self, name: &str) -> Option<usize> {
        let found = self
            .sorted
            .binary_search_by(|&i| self.get(i as usize).cmp(name))
            .ok()?;
        Some(self.sorted[found] as usize)
    }
}

/// Builds a CSV table record by record while the file is read, so the file's text and its
/// parsed rows are never both held whole.
pub(crate) struct CsvTableBuilder {
    columns: Names,
    /// For each column, the field of a record that fills it, when a header repeats a name (the
    /// last field of that name); without repeats, column `i` is field `i`.
    fields: Option<Vec<u32>>,
    text: String,
    ends: Vec<u32>,
    empty: Value,
}

impl CsvTableBuilder {
    /// `empty` is what an empty cell reads as (`empty_as`). A name the header repeats keeps the
    /// place of its first field and the value of its last.
    pub(crate) fn new(
        headers: &csv::StringRecord,
        empty: Value,
    ) -> Result<CsvTableBuilder, &'static str> {
        let all = Names::new(headers.iter())?;
        // Sorted by name, and stably: a repeated name's fields are neighbours, first to last.
        let mut last_of: Vec<Option<u32>> = Vec::new();
        let mut i = 0;
        while i < all.sorted.len() {
            let first = all.sorted[i];
            let mut j = i + 1;
            while j < all.sorted.len() && all.get(all.sorted[j] as usize) == all.get(first as usize)
            {
                j += 1;
            }
            if j > i + 1 {
                if last_of.is_empty() {
                    last_of = (0..all.len() as u32).map(Some).collect();
                }
                for &later in &all.sorted[i + 1..j] {
                    last_of[later as usize] = None;
                }
                last_of[first as usize] = Some(all.sorted[j - 1]);
            }
            i = j;
        }
        let (columns, fields) = if last_of.is_empty() {
            (all, None)
        } else {
            let kept = (0..all.len()).filter(|&f| last_of[f].is_some());
            let columns = Names::new(kept.clone().map(|f| all.get(f)))?;
            let fields = kept.filter_map(|f| last_of[f]).collect();
            (columns, Some(fields))
        };
        Ok(CsvTableBuilder {
            columns,
            fields,
            text: String::new(),
            ends: Vec::new(),
            empty,
        })
    }

    /// Makes room for the rest of the file (`remaining` bytes) at once, estimated from its first
    /// record (`bytes` long in the file): growing buffers of megabytes step by step leaves the
    /// steps behind as peak memory. A wrong estimate costs only address space or a regrowth.
    pub(crate) fn reserve(&mut self, first: &csv::StringRecord, bytes: u64, remaining: u64) {
        let rows = usize::try_from(remaining / bytes.max(1)).unwrap_or(0) + 1;
        let text = first.as_slice().len().saturating_mul(rows);
        self.text
            .reserve(text.min(usize::try_from(remaining).unwrap_or(0)));
        self.ends.reserve(self.columns.len().saturating_mul(rows));
    }

    /// Appends a record with as many fields as the header (the CSV reader checks that). Fails
    /// only past 4 GiB of cell text, far beyond the size limit of a table file.
    pub(crate) fn push(&mut self, record: &csv::StringRecord) -> Result<(), &'static str> {
        let mut push = |cell: &str| {
            self.text.push_str(cell.trim());
            let end = u32::try_from(self.text.len()).map_err(|_| TOO_LARGE)?;
            self.ends.push(end);
            Ok(())
        };
        match &self.fields {
            None => record.iter().try_for_each(&mut push),
            Some(fields) => fields
                .iter()
                .try_for_each(|&f| push(record.get(f as usize).unwrap_or(""))),
        }
    }

    pub(crate) fn finish(mut self) -> Table {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
        Table {
            columns: self.columns,
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
        let mut builder = CsvTableBuilder::new(reader.headers().unwrap(), Value::Null).unwrap();
        for record in reader.records() {
            builder.push(&record.unwrap()).unwrap();
        }
        builder.finish()
    }

    fn names(t: &Table) -> Vec<&str> {
        t.columns().iter().collect()
    }

    #[test]
    fn csv_cells_are_typed_when_read() {
        let t = csv("name, n ,x,ok\nAda, 7 ,1.5,true\n,-2,3.,no\n");
        assert_eq!(names(&t), ["name", "n", "x", "ok"]);
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
        assert_eq!(names(&t), ["a", "b"]);
        assert_eq!(Value::Object(t.row_object(0)), json!({"a": 3, "b": 2}));
        let t = csv("b,a,c,a,b,a,d\n1,2,3,4,5,6,7\n");
        assert_eq!(names(&t), ["b", "a", "c", "d"]);
        assert_eq!(
            Value::Object(t.row_object(0)),
            json!({"b": 5, "a": 6, "c": 3, "d": 7})
        );
        for (i, name) in ["b", "a", "c", "d"].into_iter().enumerate() {
            assert_eq!(t.position(name), Some(i));
        }
        assert_eq!(t.position("e"), None);
        assert_eq!(t.position(""), None);
    }

    #[test]
    fn a_header_without_rows_is_an_empty_table_with_columns() {
        let t = csv("a,b\n");
        assert!(t.is_empty());
        assert_eq!(names(&t), ["a", "b"]);
        let empty = csv("");
        assert!(empty.is_empty());
        assert!(names(&empty).is_empty() || names(&empty) == [""]);
    }

    #[test]
    fn object_rows_keep_their_own_columns() {
        let rows = [json!({"a": 1, "b": [1]}), json!({"c": null, "a": 2})]
            .into_iter()
            .map(|r| r.as_object().cloned().unwrap())
            .collect();
        let t = Table::from_objects(rows).unwrap();
        assert_eq!(names(&t), ["a", "b", "c"]);
        assert!(t.cell(1, t.position("b").unwrap()).is_none());
        assert_eq!(t.cell(1, 2).unwrap().into_owned(), Value::Null);
        assert_eq!(Value::Object(t.row_object(1)), json!({"c": null, "a": 2}));
    }
}
