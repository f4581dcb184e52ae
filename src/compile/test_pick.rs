//! Which rows of one data test become tests, drawn while its file is read: `toolrun test`'s
//! `--filter`, `--sample` and `--partition` ([`RowPick`]). Every other row's test is dropped as
//! soon as it is checked, so memory grows with the tests that run, not with the file.

use crate::registry::{sample_key, shard_of, RowPick, RowsMatched, TestCase};
use std::collections::{BinaryHeap, HashMap};

pub(super) struct Picker<'p> {
    pick: &'p RowPick,
    /// The spec's name: samples and shards are drawn by `spec::test`.
    spec: String,
    /// Rows offered so far: the next row's number.
    rows: u64,
    matched: u64,
    closest: Option<String>,
    /// With `--sample N`: the N lowest keys so far (largest on top) and their tests by row.
    heap: BinaryHeap<(u64, u64)>,
    sampled: HashMap<u64, TestCase>,
    /// Without a sample: the tests kept, in file order.
    kept: Vec<TestCase>,
}

impl<'p> Picker<'p> {
    pub(super) fn new(pick: &'p RowPick, spec: &str) -> Picker<'p> {
        Picker {
            pick,
            spec: spec.to_string(),
            rows: 0,
            matched: 0,
            closest: None,
            heap: BinaryHeap::new(),
            sampled: HashMap::new(),
            kept: Vec::new(),
        }
    }

    /// The next row's test: kept when the pick wants it, dropped otherwise.
    pub(super) fn offer(&mut self, case: TestCase) {
        let row = self.rows;
        self.rows += 1;
        if !self.pick.keep {
            return;
        }
        if let Some(filter) = &self.pick.filter {
            if !case.name.contains(filter.as_str()) {
                if self.matched == 0 {
                    let best = self.closest.as_deref().into_iter();
                    let better = crate::diag::closest(filter, best.chain([case.name.as_str()]));
                    self.closest = better.map(str::to_string);
                }
                return;
            }
        }
        self.matched += 1;
        match self.pick.sample {
            Some((n, seed)) => {
                let key = (sample_key(&self.spec, &case.name, seed), row);
                if (self.heap.len() as u64) < n {
                    self.heap.push(key);
                } else if self.heap.peek().is_some_and(|top| key < *top) {
                    if let Some((_, out)) = self.heap.pop() {
                        self.sampled.remove(&out);
                    }
                    self.heap.push(key);
                } else {
                    return;
                }
                self.sampled.insert(row, case);
            }
            None if self.in_shard(&case) => self.kept.push(case),
            None => {}
        }
    }

    /// `--partition K/N`: whether the test is in shard K.
    fn in_shard(&self, case: &TestCase) -> bool {
        self.pick
            .partition
            .is_none_or(|(k, n)| shard_of(&format!("{}::{}", self.spec, case.name), n) == k)
    }

    /// The kept tests in file order onto `out`; what the filter matched onto `matched`.
    pub(super) fn finish(&mut self, out: &mut Vec<TestCase>, matched: &mut RowsMatched) {
        matched.rows += self.rows;
        matched.matched += self.matched;
        if matched.matched > 0 {
            matched.closest = None;
        } else if let Some(name) = self.closest.take() {
            matched.closest = match matched.closest.take() {
                Some(before) => self.pick.filter.as_deref().and_then(|f| {
                    crate::diag::closest(f, [before.as_str(), name.as_str()]).map(str::to_string)
                }),
                None => Some(name),
            };
        }
        if self.pick.sample.is_some() {
            let mut rows: Vec<(u64, TestCase)> = self.sampled.drain().collect();
            rows.sort_by_key(|(row, _)| *row);
            let shard: Vec<TestCase> = rows
                .into_iter()
                .map(|(_, case)| case)
                .filter(|case| self.in_shard(case))
                .collect();
            out.extend(shard);
        } else {
            out.append(&mut self.kept);
        }
    }
}
