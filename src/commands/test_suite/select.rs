//! Which tests run: `--filter` by name, `--partition K/N` by a stable hash (`--sample` draws
//! while the specs compile).

use crate::registry::{shard_of, Registry, TestCase};

/// The selected cases, in spec order. A `--filter` that matches no test at all is a usage error
/// (a typo would otherwise pass CI by testing nothing); an empty shard is not. The rows of data
/// tests were drawn while compiling ([`crate::registry::RowPick`]): the registries hold only
/// the rows that matched the filter, were sampled and fall in the shard.
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
    let rows_matched = registries.iter().any(|r| r.rows_matched.matched > 0);
    if let (Some(f), true) = (filter, matching.is_empty() && !rows_matched) {
        return Err(no_match(f, registries));
    }
    Ok(matching
        .into_iter()
        .filter(|(r, c)| {
            partition.is_none_or(|(k, n)| shard_of(&format!("{}::{}", r.name, c.name), n) == k)
        })
        .collect())
}

/// Why `--filter` ran nothing, with the likeliest name the user meant: among the written tests
/// and, per spec, the row name the compile found most like the filter.
fn no_match(filter: &str, registries: &[Registry]) -> String {
    let names: Vec<&str> = registries
        .iter()
        .flat_map(|r| r.tests.iter().map(|c| c.name.as_str()))
        .collect();
    let closest = registries
        .iter()
        .filter_map(|r| r.rows_matched.closest.as_deref());
    let rows: u64 = registries.iter().map(|r| r.rows_matched.rows).sum();
    let hint = crate::diag::did_you_mean(filter, names.iter().copied().chain(closest))
        .unwrap_or_else(|| match (names.is_empty(), rows) {
            (true, 0) => "the specs declare no tests".to_string(),
            (false, 0) => format!("tests: {}", names.join(", ")),
            (true, _) => format!("{rows} test(s) from data files"),
            (false, _) => format!("tests: {}, and {rows} from data files", names.join(", ")),
        });
    format!("--filter `{filter}` matches no test (it keeps tests whose name contains it); {hint}")
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
