//! Remembers specs that passed every check, so a run of an unchanged spec skips the work that
//! depends only on its text: parsing the YAML, its SHA-256 (the trace's `spec.sha256`), checking
//! tool input schemas against the JSON Schema meta-schema, building validators and regexes the
//! run may never use. The rest of compiling (every semantic check and the security rules) runs on
//! every run. `check` always checks everything.
//!
//! One entry per spec text, under `$TOOLRUN_CACHE_DIR/checked/` (default `$XDG_CACHE_HOME/toolrun`
//! or `~/.cache/toolrun`; `TOOLRUN_CACHE_DIR=off` turns the cache off), named by a fast hash of
//! the text and toolrun's version. An entry holds the text itself, its SHA-256, the parsed tree
//! (`specfile::packed`) and a stamp of every file the compile read (tables). It is used only if all
//! of these hold, and otherwise ignored and rebuilt:
//! - the file is owned by this user and writable by nobody else (nobody else could plant it);
//! - it was written by this very build of toolrun (version, format and the executable's stamp);
//! - its checksum matches (not truncated, not damaged, not half-written: entries are renamed
//!   into place);
//! - its text equals the spec's text byte for byte, and every file the compile read is unchanged
//!   and is the one this compile reads (tables are named relative to the spec);
//! - its tree decodes within the parser's own limits.
//!
//! The folder keeps at most 1,000 entries and 50 MB (`TOOLRUN_CACHE_MAX_ENTRIES` and
//! `TOOLRUN_CACHE_MAX_BYTES` change the caps): each time an entry is written, the least recently
//! used go until both hold. A hit marks its entry used (its modification time).
//!
//! Failing to read or write the cache only costs time.

use crate::specfile::packed;
use crate::specfile::yaml::Node;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Bumped when the entry's layout, the parser's output or the checks a hit skips change.
const FORMAT: u64 = 2;
const MAGIC: &[u8; 8] = b"toolrun\x01";
const MAX_ENTRY_BYTES: u64 = 64 << 20;
/// What the folder keeps at most, unless `TOOLRUN_CACHE_MAX_ENTRIES` / `_MAX_BYTES` say
/// otherwise: 1,200 distinct specs once left 1,202 files and 64 MB behind.
const MAX_ENTRIES: u64 = 1_000;
const MAX_BYTES: u64 = 50_000_000;

/// What identifies a file's content without reading it: length, inode, modification and
/// status-change times. Taken before the file is read, so a change made while reading it makes
/// the next run miss.
pub(super) type Stamp = [u64; 4];

pub(super) struct Hit {
    pub(super) tree: Node,
    pub(super) sha256: String,
    /// The files the compile that wrote the entry read, unchanged since.
    pub(super) inputs: Vec<PathBuf>,
}

/// The place of one spec text's entry.
pub(super) struct Cache {
    file: PathBuf,
    build: u64,
}

impl Cache {
    pub(super) fn for_text(text: &str) -> Option<Cache> {
        let name = format!(
            "{:016x}-{}",
            fingerprint(text.as_bytes(), 0),
            env!("CARGO_PKG_VERSION")
        );
        Some(Cache {
            file: cache_dir()?.join("checked").join(name),
            build: build_stamp()?,
        })
    }

    /// The entry for exactly this text, if it is intact, ours and still current; a hit is
    /// marked as used, so pruning keeps it over entries not used since.
    pub(super) fn load(&self, text: &str) -> Option<Hit> {
        let (bytes, file) = self.open_ours()?;
        let hit = read_entry(&bytes, self.build, text)?;
        let _ = file.set_modified(std::time::SystemTime::now());
        Some(hit)
    }

    /// The entry file's bytes, if only this user could have written them.
    fn read_ours(&self) -> Option<Vec<u8>> {
        self.open_ours().map(|(bytes, _)| bytes)
    }

    fn open_ours(&self) -> Option<(Vec<u8>, std::fs::File)> {
        let file = std::fs::File::open(&self.file).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file()
            || meta.len() > MAX_ENTRY_BYTES
            || !crate::files::written_only_by_us(&meta)
        {
            return None;
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        (&file).take(MAX_ENTRY_BYTES).read_to_end(&mut bytes).ok()?;
        Some((bytes, file))
    }

    /// Remembers a text that passed every check, with what it was parsed into and the files
    /// its compile read.
    pub(super) fn store(
        &self,
        text: &str,
        sha256: &str,
        tree: &Node,
        inputs: &[(PathBuf, Option<Stamp>)],
    ) {
        let Some(bytes) = entry(self.build, text, sha256, tree, inputs) else {
            return;
        };
        // `check` of a remembered spec: the entry is already what it would write (and one that
        // others could have written is replaced, even with the same bytes).
        if self.read_ours().is_some_and(|old| old == bytes) {
            return;
        }
        if let Some(dir) = self.file.parent() {
            if create_private_dir(dir).is_ok()
                && crate::files::write_private_atomically(&self.file, &bytes).is_ok()
            {
                prune(dir, &self.file);
            }
        }
    }
}

/// Removes the least recently used entries until the folder is within its caps; `keep` (the
/// entry just written) stays whatever the caps say. Only files named as entries (and their
/// temporary files) are counted and removed: the folder may be one the user chose.
fn prune(dir: &Path, keep: &Path) {
    let cap = |var: &str, default: u64| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(default)
    };
    let (max_entries, max_bytes) = (
        cap("TOOLRUN_CACHE_MAX_ENTRIES", MAX_ENTRIES),
        cap("TOOLRUN_CACHE_MAX_BYTES", MAX_BYTES),
    );
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<(std::time::SystemTime, u64, PathBuf)> = listing
        .flatten()
        .filter(|e| is_entry_name(&e.file_name().to_string_lossy()))
        .filter_map(|e| {
            // Not followed: a symlink is neither an entry nor counted.
            let meta = e.metadata().ok().filter(std::fs::Metadata::is_file)?;
            Some((meta.modified().ok()?, meta.len(), e.path()))
        })
        .collect();
    let (mut count, mut bytes) = (
        entries.len() as u64,
        entries.iter().map(|e| e.1).sum::<u64>(),
    );
    if count <= max_entries && bytes <= max_bytes {
        return;
    }
    entries.sort();
    for (_, len, path) in entries {
        if count <= max_entries && bytes <= max_bytes {
            break;
        }
        if path != keep && std::fs::remove_file(&path).is_ok() {
            count -= 1;
            bytes -= len;
        }
    }
}

/// `{16 hex digits}-{version}`, or a temporary file of one (`.{name}.{random}.tmp`).
fn is_entry_name(name: &str) -> bool {
    let name = name.strip_prefix('.').unwrap_or(name);
    let bytes = name.as_bytes();
    bytes.len() > 17 && bytes[..16].iter().all(u8::is_ascii_hexdigit) && bytes[16] == b'-'
}

fn cache_dir() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = env("TOOLRUN_CACHE_DIR") {
        return (dir != "off").then(|| PathBuf::from(dir));
    }
    env("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("toolrun"))
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// This build of toolrun: a development build changes the parser without changing the version,
/// so the executable's own stamp is part of it.
fn build_stamp() -> Option<u64> {
    let exe = std::env::current_exe().ok()?;
    let mut words = stamp(&exe)?.to_vec();
    words.push(FORMAT);
    let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    bytes.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
    Some(fingerprint(&bytes, FORMAT))
}

#[cfg(unix)]
pub(super) fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    let nanos = |s: i64, ns: i64| {
        (s as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ns as u64)
    };
    Some([
        m.len(),
        m.ino(),
        nanos(m.mtime(), m.mtime_nsec()),
        nanos(m.ctime(), m.ctime_nsec()),
    ])
}

#[cfg(not(unix))]
pub(super) fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    let modified = m
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some([m.len(), 0, modified.as_nanos() as u64, 0])
}

/// A fast 64-bit hash, not a cryptographic one: it names entries and catches damaged ones.
/// Whatever it lets through is still compared byte for byte with the spec.
fn fingerprint(bytes: &[u8], seed: u64) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(K);
    let mut words = bytes.chunks_exact(8);
    let mut word = [0u8; 8];
    for w in &mut words {
        word.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(word))
            .wrapping_mul(K)
            .rotate_left(29);
    }
    let rest = words.remainder();
    word = [0; 8];
    word[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(word)).wrapping_mul(K);
    h ^ (h >> 29)
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn entry(
    build: u64,
    text: &str,
    sha256: &str,
    tree: &Node,
    inputs: &[(PathBuf, Option<Stamp>)],
) -> Option<Vec<u8>> {
    if sha256.len() != 64 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 + 256);
    out.extend_from_slice(MAGIC);
    put_u64(&mut out, build);
    out.extend_from_slice(sha256.as_bytes());
    put_u64(&mut out, inputs.len() as u64);
    for (path, stamp) in inputs {
        // A file that could not be stamped (or named) cannot be checked later: not remembered.
        put_bytes(&mut out, path.to_str()?.as_bytes());
        for w in (*stamp)? {
            put_u64(&mut out, w);
        }
    }
    put_bytes(&mut out, text.as_bytes());
    let mut tree_bytes = Vec::with_capacity(text.len() * 2);
    packed::encode(tree, &mut tree_bytes);
    put_bytes(&mut out, &tree_bytes);
    let sum = fingerprint(&out, 1);
    put_u64(&mut out, sum);
    (out.len() as u64 <= MAX_ENTRY_BYTES).then_some(out)
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let b = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(b)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }
}

fn read_entry(bytes: &[u8], build: u64, text: &str) -> Option<Hit> {
    let (body, sum) = bytes.split_at(bytes.len().checked_sub(8)?);
    if fingerprint(body, 1) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    let mut r = Cursor { bytes: body, at: 0 };
    if r.take(8)? != MAGIC || r.u64()? != build {
        return None;
    }
    let sha256 = r.take(64)?;
    if !sha256
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        return None;
    }
    // Each input takes at least 40 bytes: a count beyond the entry runs out of bytes below.
    let mut inputs = Vec::new();
    for _ in 0..r.u64()? {
        let path = std::str::from_utf8(r.bytes()?).ok()?;
        inputs.push(PathBuf::from(path));
        let mut want: Stamp = [0; 4];
        for w in &mut want {
            *w = r.u64()?;
        }
        if stamp(Path::new(path))? != want {
            return None;
        }
    }
    if r.bytes()? != text.as_bytes() {
        return None;
    }
    let tree = packed::decode(r.bytes()?)?;
    (r.at == body.len()).then(|| Hit {
        tree,
        sha256: String::from_utf8_lossy(sha256).into_owned(),
        inputs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specfile::Source;

    const SPEC: &str = "version: 1\ntools:\n  t:\n    kind: mock\n    description: Returns one thing.\n    input: {type: object, properties: {n: {type: integer}}}\n    responses: [{result: 1}]\n  c:\n    kind: builtin\n    builtin: calculator\n";

    #[test]
    fn a_trusted_compile_builds_no_validator_and_a_full_one_keeps_what_it_checked() {
        let source = Source::new("t.yaml", SPEC);
        let full = super::super::compile(&source, Path::new("t.yaml"));
        let full = full.registry.expect("compiles");
        assert!(full.tool("t").unwrap().validator.is_built());
        // Generated schemas are never worth checking: built on first call either way.
        assert!(!full.tool("c").unwrap().validator.is_built());
        let (tree, _) = crate::specfile::yaml::parse_keeping_duplicates(SPEC).unwrap();
        let hit = Hit {
            tree,
            sha256: full.spec_sha256.clone(),
            inputs: Vec::new(),
        };
        let fast =
            super::super::compile_hit(&source, Path::new("t.yaml"), hit, &super::super::NO_ROWS)
                .expect("reads no file");
        let fast = fast.registry.expect("compiles");
        assert_eq!(fast.spec_sha256, full.spec_sha256);
        for tool in &fast.tools {
            assert!(!tool.validator.is_built(), "{}", tool.name);
        }
        let t = fast.tool("t").unwrap();
        assert!(!t
            .validator()
            .unwrap()
            .is_valid(&serde_json::json!({"n": "x"})));
    }

    fn sample() -> (Vec<u8>, u64) {
        let (tree, _) = crate::specfile::yaml::parse_keeping_duplicates(SPEC).unwrap();
        let sha = "ab".repeat(32);
        (entry(7, SPEC, &sha, &tree, &[]).unwrap(), 7)
    }

    #[test]
    fn an_entry_is_read_back_only_for_its_own_text_and_build() {
        let (bytes, build) = sample();
        let hit = read_entry(&bytes, build, SPEC).expect("hit");
        assert_eq!(hit.sha256, "ab".repeat(32));
        assert!(read_entry(&bytes, build + 1, SPEC).is_none(), "other build");
        let other = SPEC.replace("one thing", "one thinG");
        assert!(read_entry(&bytes, build, &other).is_none(), "other text");
    }

    #[test]
    fn damaged_and_truncated_entries_are_ignored() {
        let (bytes, build) = sample();
        for cut in 0..bytes.len() {
            assert!(
                read_entry(&bytes[..cut], build, SPEC).is_none(),
                "cut {cut}"
            );
        }
        // Every flipped byte of the tree, the text or the header is caught (by the checksum).
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x20;
            assert!(read_entry(&b, build, SPEC).is_none(), "byte {i}");
        }
    }

    #[test]
    fn an_input_file_that_changed_makes_the_entry_stale() {
        let dir = crate::test_support::temp_dir("checked-inputs");
        let table = dir.path().join("t.csv");
        std::fs::write(&table, "a\n1\n").unwrap();
        let (tree, _) = crate::specfile::yaml::parse_keeping_duplicates(SPEC).unwrap();
        let inputs = [(table.clone(), stamp(&table))];
        let bytes = entry(7, SPEC, &"0".repeat(64), &tree, &inputs).unwrap();
        assert!(read_entry(&bytes, 7, SPEC).is_some());
        std::fs::write(&table, "a\n12\n").unwrap();
        assert!(read_entry(&bytes, 7, SPEC).is_none());
        let unstamped = [(table, None)];
        assert!(entry(7, SPEC, &"0".repeat(64), &tree, &unstamped).is_none());
    }
}
