//! The checked-spec cache (`TOOLRUN_CACHE_DIR`) stays bounded: at most 1,000 entries and 50 MB by
//! default (`TOOLRUN_CACHE_MAX_ENTRIES` / `TOOLRUN_CACHE_MAX_BYTES` lower the caps here), the least
//! recently used going first, an entry used by a run counting as recently used.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn spec(dir: &Path, n: usize) -> PathBuf {
    support::write(
        dir,
        &format!("spec{n}.yaml"),
        &format!(
            "version: 1\nname: cached_{n}\ntools:\n  t:\n    description: Returns a number.\n    kind: mock\n    responses: [ {{ result: {n} }} ]\nmodels:\n  m: {{ kind: scripted, scripts: [ {{ turns: [ {{ answer: x }} ] }} ] }}\n"
        ),
    )
}

fn entries(cache: &Path) -> BTreeSet<String> {
    match std::fs::read_dir(cache.join("checked")) {
        Ok(list) => list
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => BTreeSet::new(),
    }
}

/// Compiles `spec` through the binary with the cache at `cache` and `caps`; returns the entry
/// the compile added, if any.
fn compile(spec: &Path, cache: &Path, caps: &[(&str, &str)]) -> BTreeSet<String> {
    let before = entries(cache);
    let mut cmd = support::toolrun();
    cmd.env("TOOLRUN_CACHE_DIR", cache).arg("tools").arg(spec);
    for (k, v) in caps {
        cmd.env(k, v);
    }
    support::run(&mut cmd).assert_success();
    entries(cache).difference(&before).cloned().collect()
}

fn one(mut added: BTreeSet<String>) -> String {
    assert_eq!(added.len(), 1, "one new entry: {added:?}");
    added.pop_first().unwrap()
}

#[test]
fn the_least_recently_used_entries_go_first() {
    let dir = support::temp_dir("cache_lru");
    let cache = dir.join("cache");
    let caps = [("TOOLRUN_CACHE_MAX_ENTRIES", "3")];
    let names: Vec<String> = (1..=3)
        .map(|n| one(compile(&spec(&dir, n), &cache, &caps)))
        .collect();
    // Spec 1 is used again (a hit: nothing new), so spec 2 is now the least recently used.
    assert!(compile(&spec(&dir, 1), &cache, &caps).is_empty());
    let fourth = one(compile(&spec(&dir, 4), &cache, &caps));
    let fifth = one(compile(&spec(&dir, 5), &cache, &caps));
    let kept = entries(&cache);
    let expected: BTreeSet<String> = [names[0].clone(), fourth, fifth].into();
    assert_eq!(kept, expected, "spec 1 (used), 4 and 5 stay; 2 and 3 go");
}

#[test]
fn the_byte_cap_holds_too() {
    let dir = support::temp_dir("cache_bytes");
    let cache = dir.join("cache");
    let first = one(compile(&spec(&dir, 1), &cache, &[]));
    let size = std::fs::metadata(cache.join("checked").join(&first))
        .unwrap()
        .len();
    // Room for two entries (specs differ by a digit or two in size).
    let cap = (size * 2 + size / 2).to_string();
    let caps = [("TOOLRUN_CACHE_MAX_BYTES", cap.as_str())];
    for n in 2..=6 {
        compile(&spec(&dir, n), &cache, &caps);
        let total: u64 = entries(&cache)
            .iter()
            .map(|e| {
                std::fs::metadata(cache.join("checked").join(e))
                    .unwrap()
                    .len()
            })
            .sum();
        assert!(total <= size * 2 + size / 2, "{total} bytes after spec {n}");
    }
    assert_eq!(entries(&cache).len(), 2, "{:?}", entries(&cache));
}

#[test]
fn the_tests_own_cache_is_not_the_users() {
    // `support::toolrun()` points the cache at the tests' own folder: a HOME's `.cache` is
    // never written by the suite.
    let dir = support::temp_dir("cache_home");
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = support::toolrun();
    cmd.env("HOME", &home).arg("tools").arg(spec(&dir, 1));
    support::run(&mut cmd).assert_success();
    assert!(!home.join(".cache").exists());
    let theirs = support::test_cache_dir().join("checked");
    assert!(
        std::fs::read_dir(&theirs).unwrap().next().is_some(),
        "{theirs:?}"
    );
}
