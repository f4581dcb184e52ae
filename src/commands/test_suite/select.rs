//! Which tests run: `--filter` by name, `--partition K/N` by a stable hash.

use crate::registry::{Registry, TestCase};

/// The selected cases, in spec order. A `--filter` that matches no test at all is a usage error
/// (a typo would otherwise pass CI by testing nothing); an empty shard is not.
pub(crate) fn select<'a>(
    registries: &'a [Registry],
    filter: Option<&str>,
    sample: Option<(u64, u64)>,
    partition: Option<(u64, u64)>,
) -> Result<Vec<(&'a Registry, &'a TestCase)>, String> {
    let all = registries
        .iter()
        .flat_map(|r| r.tests.iter().map(move |c| (r, c)));
    let matching: Vec<(&Registry, &TestCase)> = all
        .clone()
        .filter(|(_, c)| filter.is_none_or(|f| c.name.contains(f)))
        .collect();
    if let (Some(f), true) = (filter, matching.is_empty()) {
        let names: Vec<&str> = all.map(|(_, c)| c.name.as_str()).collect();
        let hint = crate::diag::did_you_mean(f, names.iter().copied()).unwrap_or_else(|| {
            if names.is_empty() {
                "the specs declare no tests".to_string()
            } else {
                format!("tests: {}", names.join(", "))
            }
        });
        return Err(format!(
            "--filter `{f}` matches no test (it keeps tests whose name contains it); {hint}"
        ));
    }
    let sampled = match sample {
        Some((n, seed)) => self::sample(matching, n, seed),
        None => matching,
    };
    Ok(sampled
        .into_iter()
        .filter(|(r, c)| {
            partition.is_none_or(|(k, n)| shard_of(&format!("{}::{}", r.name, c.name), n) == k)
        })
        .collect())
}

/// `--sample N --seed S`: of each data test's rows (after `--filter`), the N whose names hash
/// lowest with the seed; written tests all run. Chosen by name, not position, so the sample is
/// the same whatever the order of the file, and a shard of a sample is a shard of the same
/// sample. A bounded heap per data test: a 100,000-row file costs N entries, not 100,000.
fn sample<'a>(
    cases: Vec<(&'a Registry, &'a TestCase)>,
    n: u64,
    seed: u64,
) -> Vec<(&'a Registry, &'a TestCase)> {
    use std::collections::{BinaryHeap, HashMap};
    let key = |r: &Registry, c: &TestCase| {
        let mut h = fnv(&seed.to_le_bytes(), 0xcbf29ce484222325);
        h = fnv(format!("{}::{}", r.name, c.name).as_bytes(), h);
        h
    };
    // Per (spec, data test): the kept positions, largest key on top.
    let mut kept: HashMap<(*const Registry, u32), BinaryHeap<(u64, usize)>> = HashMap::new();
    for (i, (r, c)) in cases.iter().enumerate() {
        let Some(data) = &c.data else { continue };
        let heap = kept.entry((*r as *const Registry, data.group)).or_default();
        heap.push((key(r, c), i));
        if heap.len() as u64 > n {
            heap.pop();
        }
    }
    let chosen: std::collections::HashSet<usize> = kept
        .into_values()
        .flat_map(|h| h.into_iter().map(|(_, i)| i))
        .collect();
    cases
        .into_iter()
        .enumerate()
        .filter(|(i, (_, c))| c.data.is_none() || chosen.contains(i))
        .map(|(_, rc)| rc)
        .collect()
}

fn fnv(bytes: &[u8], mut h: u64) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// `K/N`, 1-based: shard K of N.
pub(crate) fn parse_partition(text: &str) -> Result<(u64, u64), String> {
    let err = || format!("--partition takes K/N with 1 <= K <= N, e.g. 2/4 (got `{text}`)");
    let (k, n) = text.split_once('/').ok_or_else(err)?;
    let (k, n) = (
        k.trim().parse::<u64>().map_err(|_| err())?,
        n.trim().parse::<u64>().map_err(|_| err())?,
    );
    if k == 0 || n == 0 || k > n {
        return Err(err());
    }
    Ok((k, n))
}

/// Sharding by a hash of the test's identity, not its position, so adding a test does not
/// reshuffle every other test between CI machines. FNV-1a: stable across platforms and releases.
pub(crate) fn shard_of(identity: &str, n: u64) -> u64 {
    fnv(identity.as_bytes(), 0xcbf29ce484222325) % n + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_stable_and_cover_everything() {
        assert_eq!(parse_partition("2/4"), Ok((2, 4)));
        assert!(parse_partition("0/4").is_err());
        assert!(parse_partition("5/4").is_err());
        let names: Vec<String> = (0..100).map(|i| format!("s::t{i}")).collect();
        let total: usize = (1..=3)
            .map(|k| names.iter().filter(|n| shard_of(n, 3) == k).count())
            .sum();
        assert_eq!(total, 100);
        assert_eq!(shard_of("s::t1", 3), shard_of("s::t1", 3));
    }
}
