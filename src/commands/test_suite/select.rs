//! Which tests run: `--filter` by name, `--partition K/N` by a stable hash.

use crate::registry::{Registry, TestCase};

/// The selected cases, in spec order. A `--filter` that matches no test at all is a usage error
/// (a typo would otherwise pass CI by testing nothing); an empty shard is not.
pub(crate) fn select<'a>(
    registries: &'a [Registry],
    filter: Option<&str>,
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
    Ok(matching
        .into_iter()
        .filter(|(r, c)| {
            partition.is_none_or(|(k, n)| shard_of(&format!("{}::{}", r.name, c.name), n) == k)
        })
        .collect())
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
    let mut h: u64 = 0xcbf29ce484222325;
    for b in identity.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h % n + 1
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
