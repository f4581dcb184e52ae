//! Shards put back together: `test --partition K/N --results shard-K.json` on N machines, then
//! one results document (`toolrun results merge`, `toolrun report --merge`). What would make the
//! whole a lie is reported: a shard missing, a shard given twice, a test in two shards, shards
//! run with other settings or another version of a spec.

use crate::results::Results;
use std::collections::{BTreeMap, HashMap};

/// Missing shards named one by one; past this many they are counted.
const MAX_NAMED_MISSING: u128 = 20;

/// The merged document and what is wrong with the set of shards (empty when it is whole).
pub(crate) struct Merged {
    pub(crate) results: Results,
    pub(crate) problems: Vec<String>,
}

/// A shard's path, document and `K/N`.
type Shard = (String, Results, Option<(u64, u64)>);

/// `(path, document)` of each shard, in any order.
pub(crate) fn merge(shards: Vec<(String, Results)>) -> Merged {
    let mut problems = Vec::new();
    let mut shards: Vec<Shard> = shards
        .into_iter()
        .map(|(path, r)| {
            let part = r
                .settings
                .partition
                .as_deref()
                .and_then(crate::results::partition);
            (path, r, part)
        })
        .collect();
    shards.sort_by_key(|(_, _, part)| part.map(|(k, _)| k).unwrap_or(0));
    check_partitions(&shards, &mut problems);
    let mut iter = shards.into_iter();
    let Some((first_path, mut merged, _)) = iter.next() else {
        return Merged {
            results: Results::new(Default::default(), 0),
            problems: vec!["no shards to merge".into()],
        };
    };
    merged.settings.partition = None;
    // Each shard compared itself with a baseline; the whole was not.
    merged.baseline = None;
    let mut seen: HashMap<(String, String, Option<String>), String> = merged
        .tests
        .iter()
        .map(|t| {
            (
                (t.spec.clone(), t.name.clone(), t.model.clone()),
                first_path.clone(),
            )
        })
        .collect();
    for (path, r, _) in iter {
        let mut other = r.settings.clone();
        other.partition = None;
        if other != merged.settings {
            problems.push(format!(
                "`{path}` ran with other settings than `{first_path}` (model, repeat, pass rate, record or filter)"
            ));
        }
        for s in r.specs {
            match merged.specs.iter().find(|m| m.name == s.name) {
                Some(m) if m.sha256 != s.sha256 => problems.push(format!(
                    "spec `{}` differs between `{first_path}` and `{path}`",
                    s.name
                )),
                Some(_) => {}
                None => merged.specs.push(s),
            }
        }
        for m in r.models {
            if !merged.models.iter().any(|x| x.name == m.name) {
                merged.models.push(m);
            }
        }
        if let (Some(a), Some(b)) = (&r.started_at, &merged.started_at) {
            if a < b {
                merged.started_at = Some(a.clone());
            }
        }
        for t in r.tests {
            let key = (t.spec.clone(), t.name.clone(), t.model.clone());
            if let Some(other) = seen.get(&key) {
                problems.push(format!(
                    "test `{}::{}` is in both `{other}` and `{path}`: the shards overlap (kept the first)",
                    t.spec, t.name
                ));
                continue;
            }
            seen.insert(key, path.clone());
            merged.tests.push(t);
        }
    }
    merged.finish();
    Merged {
        results: merged,
        problems,
    }
}

/// Every shard of one `N`, each once.
fn check_partitions(shards: &[Shard], problems: &mut Vec<String>) {
    let parts: Vec<(&str, u64, u64)> = shards
        .iter()
        .filter_map(|(p, _, part)| part.map(|(k, n)| (p.as_str(), k, n)))
        .collect();
    for (path, _, part) in shards {
        if part.is_none() && !parts.is_empty() {
            problems.push(format!(
                "`{path}` is not a shard (run without --partition): its tests may repeat the shards'"
            ));
        }
    }
    let Some(&(_, _, n)) = parts.first() else {
        return;
    };
    if let Some((path, _, other)) = parts.iter().find(|(_, _, m)| *m != n) {
        problems.push(format!(
            "`{path}` is a shard of {other}, the others of {n}: they split the suite differently"
        ));
        return;
    }
    // Work bounded by the files given, not by `N`: a shard may claim to be one of 2^64.
    let mut by_k: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (path, k, _) in &parts {
        by_k.entry(*k).or_default().push(path);
    }
    let missing = u128::from(n) - by_k.len() as u128;
    let mut named = 0u128;
    let mut name_missing = |from: u128, to: u128, problems: &mut Vec<String>| {
        let mut k = from;
        while k <= to && named < MAX_NAMED_MISSING {
            problems.push(format!(
                "shard {k}/{n} is missing: its tests are not in the merged results"
            ));
            k += 1;
            named += 1;
        }
    };
    let mut next = 1u128;
    for (&k, paths) in &by_k {
        name_missing(next, u128::from(k) - 1, problems);
        if paths.len() > 1 {
            problems.push(format!(
                "shard {k}/{n} is given more than once: {}",
                paths
                    .iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        next = u128::from(k) + 1;
    }
    name_missing(next, u128::from(n), problems);
    if missing > named {
        problems.push(format!(
            "{} more shard(s) of {n} are missing ({} file(s) were given): their tests are not in the merged results",
            missing - named,
            shards.len()
        ));
    }
}
