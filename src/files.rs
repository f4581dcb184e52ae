//! Files, safely (issue 12 §3). Every file toolrun writes (traces, fixtures, `--events` of every
//! command, JUnit, results and reports, the spec cache) is written through here, every input a
//! spec or fixture names is read through here, and the paths those files name are kept inside
//! the project root.

use std::fs::{File, Metadata, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// Writes to a new temporary file next to the target, then renames it over the target, so
/// readers never see half a file. The temporary name is unpredictable and created with
/// `O_EXCL` (a symlink planted there makes the create fail, it is never followed); the rename
/// replaces whatever is at the destination, a symlink included, without writing through it.
pub(crate) fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    write_via_temp(path, &mut |f| f.write_all(contents), false)
}

/// Like [`write_atomically`], for contents made as they are written (a report larger than
/// memory should hold twice): `fill` writes them, buffered; an error from it leaves nothing.
/// `fill` may be called a second time, from the start, on a system where the file with no
/// name could not be published.
pub(crate) fn write_atomically_with(
    path: &Path,
    fill: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    write_via_temp(
        path,
        &mut |f| {
            let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
            fill(&mut w)?;
            w.flush()
        },
        false,
    )
}

/// Like [`write_atomically`], for a file only its owner may read or write (the spec cache,
/// whose entries are trusted only when nobody else could have written them). Not synced: losing
/// it in a crash only costs time.
pub(crate) fn write_private_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    write_via_temp(path, &mut |f| f.write_all(contents), true)
}

/// Writes the contents `fill` makes into a file.
type Fill<'a> = &'a mut dyn FnMut(&mut File) -> std::io::Result<()>;

fn write_via_temp(path: &Path, fill: Fill, private: bool) -> std::io::Result<()> {
    if let Some(done) = write_unnamed(path, fill, private) {
        return done;
    }
    let (mut f, tmp) = create_temp_beside(path)?;
    let result = if private {
        restrict_to_owner(&f).and_then(|()| fill(&mut f))
    } else {
        fill(&mut f).and_then(|()| f.sync_all())
    }
    .and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Issue 36 §19: a write killed midway (SIGKILL, out of memory, power) left its named temporary
/// file (`.NAME.<hex>.tmp`) next to fixtures and results, where `git add .` took it. On Linux the
/// contents go into a file with no name (`O_TMPFILE`, in the destination's folder, so the
/// rename stays atomic): killed before it is done, it vanishes with the process. It is given its
/// temporary name only once complete, for the rename that publishes it. `None` where such files
/// cannot be made (another system, a file system without them, no `/proc`): the caller writes
/// through a named temporary file, as before.
#[cfg(target_os = "linux")]
fn write_unnamed(path: &Path, fill: Fill, private: bool) -> Option<std::io::Result<()>> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let mut f = OpenOptions::new()
        .write(true)
        .mode(if private { 0o600 } else { 0o666 })
        .custom_flags(libc::O_TMPFILE)
        .open(folder_of(path))
        .ok()?;
    let written = if private {
        fill(&mut f)
    } else {
        fill(&mut f).and_then(|()| f.sync_all())
    };
    if let Err(e) = written {
        return Some(Err(e));
    }
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", f.as_raw_fd())).ok()?;
    for _ in 0..16 {
        let tmp = temp_name(path);
        let to = std::ffi::CString::new(tmp.as_os_str().as_bytes()).ok()?;
        // SAFETY: both paths are NUL-terminated strings that outlive the call; linkat only
        // reads them.
        let linked = unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        };
        if linked == 0 {
            let renamed = std::fs::rename(&tmp, path);
            if renamed.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            return Some(renamed);
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::AlreadyExists {
            return None;
        }
    }
    None
}

/// Can a file with no name (`O_TMPFILE`) be made in `dir`? False also where they do not exist.
#[cfg(target_os = "linux")]
fn unnamed_file_in(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
        .is_ok()
}

#[cfg(not(target_os = "linux"))]
fn unnamed_file_in(_: &Path) -> bool {
    false
}

#[cfg(not(target_os = "linux"))]
fn write_unnamed(_: &Path, _: Fill, _: bool) -> Option<std::io::Result<()>> {
    None
}

/// Opens a file to stream into (`--events`), created the same way as `write_atomically`'s: a
/// fresh file renamed into place at once, so a symlink at `path` is replaced, not followed, and
/// a reader sees the stream from its first line. A FIFO or a terminal that already exists at
/// `path` (`--events /dev/stderr`, a named pipe a watcher reads) is written to as it is.
pub(crate) fn create_stream(path: &Path) -> std::io::Result<File> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if is_stream_target(&meta) {
            return open_no_follow(path);
        }
        if meta.is_dir() {
            return Err(std::io::Error::other("it is a directory"));
        }
    }
    let (f, tmp) = create_temp_beside(path)?;
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(f)
}

#[cfg(unix)]
fn restrict_to_owner(f: &File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
}

#[cfg(not(unix))]
fn restrict_to_owner(_: &File) -> std::io::Result<()> {
    Ok(())
}

/// Could only this process's user have written the file? Owned by the effective user and not
/// writable by group or others (elsewhere than Unix: whatever the platform's ACLs allow).
#[cfg(unix)]
pub(crate) fn written_only_by_us(meta: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    meta.uid() == me && meta.mode() & 0o022 == 0
}

#[cfg(not(unix))]
pub(crate) fn written_only_by_us(_: &Metadata) -> bool {
    true
}

#[cfg(unix)]
fn is_stream_target(meta: &Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    t.is_fifo() || t.is_char_device() || t.is_socket()
}

#[cfg(not(unix))]
fn is_stream_target(_: &Metadata) -> bool {
    false
}

#[cfg(unix)]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NOFOLLOW: the check above saw no symlink; one swapped in since must not be followed.
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).open(path)
}

fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// `.NAME.<16 hex digits>.tmp`, beside `path`.
fn temp_name(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    folder_of(path).join(format!(".{name}.{:016x}.tmp", random_u64()))
}

fn create_temp_beside(path: &Path) -> std::io::Result<(File, PathBuf)> {
    let mut last = None;
    for _ in 0..16 {
        let tmp = temp_name(path);
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
}

/// 64 unpredictable bits: std's `RandomState` is seeded from the operating system's generator.
fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    h.finish()
}

// ---------------------------------------------------------------------------------------------
// Reading: regular files only

/// Why an input path is not something to read.
#[derive(Debug)]
pub(crate) enum NotAFile {
    Missing,
    Directory,
    /// A FIFO, a device or a socket: reading it could block forever or never end.
    Special(&'static str),
    Io(std::io::Error),
}

impl NotAFile {
    /// "does not exist", "is a directory", "is a character device", ...: after the path.
    pub(crate) fn describe(&self) -> String {
        match self {
            NotAFile::Missing => "does not exist".into(),
            NotAFile::Directory => "is a directory, not a file".into(),
            NotAFile::Special(kind) => format!("is a {kind}, not a regular file"),
            NotAFile::Io(e) => format!("cannot be read: {e}"),
        }
    }
}

impl std::fmt::Display for NotAFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// The metadata of `path` (symlinks followed) when it is a regular file. FIFOs and devices are
/// refused before they are opened: opening a FIFO for reading blocks until a writer comes.
pub(crate) fn regular_file(path: &Path) -> Result<Metadata, NotAFile> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(NotAFile::Missing),
        Err(e) => return Err(NotAFile::Io(e)),
    };
    if meta.is_dir() {
        return Err(NotAFile::Directory);
    }
    if !meta.is_file() {
        return Err(NotAFile::Special(special_kind(&meta)));
    }
    Ok(meta)
}

#[cfg(unix)]
fn special_kind(meta: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_fifo() {
        "named pipe (FIFO)"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

#[cfg(not(unix))]
fn special_kind(_: &Metadata) -> &'static str {
    "special file"
}

/// What went wrong reading an input file.
#[derive(Debug)]
pub(crate) enum ReadError {
    NotAFile(NotAFile),
    TooLarge { limit: u64 },
}

/// Reads a regular file of at most `limit` bytes. The file is checked again once open, so one
/// swapped for a FIFO in between is still refused; reading stops one byte past the limit.
pub(crate) fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let (f, len) = open_regular(path, limit)?;
    let mut bytes = Vec::with_capacity(len as usize);
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::NotAFile(NotAFile::Io(e)))?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge { limit });
    }
    Ok(bytes)
}

/// Opens a regular file of at most `limit` bytes (as it was when opened) for a reader that
/// streams it, with its length. Checked before and after opening, as [`read_regular`] does; a
/// reader that must not go past the limit if the file grows reads it through `take(limit + 1)`.
pub(crate) fn open_regular(path: &Path, limit: u64) -> Result<(File, u64), ReadError> {
    let meta = regular_file(path).map_err(ReadError::NotAFile)?;
    if meta.len() > limit {
        return Err(ReadError::TooLarge { limit });
    }
    let f = File::open(path).map_err(|e| ReadError::NotAFile(NotAFile::Io(e)))?;
    match f.metadata() {
        Ok(m) if m.is_file() => Ok((f, m.len())),
        Ok(m) => Err(ReadError::NotAFile(NotAFile::Special(special_kind(&m)))),
        Err(e) => Err(ReadError::NotAFile(NotAFile::Io(e))),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading a file as a stream

/// Passes a file's bytes through while counting them and checking that they are UTF-8, so the
/// file can be parsed as a stream (never held whole) and still be refused for its encoding or
/// its size exactly as reading it whole would.
pub(crate) struct Checked<R> {
    inner: R,
    /// The start of a character the last read cut in two.
    pending: Vec<u8>,
    invalid: bool,
    count: u64,
}

impl<R: Read> Checked<R> {
    pub(crate) fn new(inner: R) -> Checked<R> {
        Checked {
            inner,
            pending: Vec::new(),
            invalid: false,
            count: 0,
        }
    }

    /// Was anything read so far not UTF-8?
    pub(crate) fn invalid(&self) -> bool {
        self.invalid
    }

    /// Bytes read so far.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Reads what is left, checking it: after a parse error, whether the file is UTF-8 at all
    /// still decides which error it gets.
    pub(crate) fn finish(&mut self) {
        let _ = std::io::copy(self, &mut std::io::sink());
    }

    fn check(&mut self, mut bytes: &[u8]) {
        if !self.pending.is_empty() {
            // At most 4 bytes: the cut character and what follows it.
            let take = bytes.len().min(4 - self.pending.len());
            let had = self.pending.len();
            self.pending.extend_from_slice(&bytes[..take]);
            match std::str::from_utf8(&self.pending) {
                Ok(_) => bytes = &bytes[take..],
                Err(e) if e.valid_up_to() > 0 => bytes = &bytes[e.valid_up_to() - had..],
                Err(e) if e.error_len().is_some() => {
                    self.invalid = true;
                    return;
                }
                // Still cut: this read was shorter than the character.
                Err(_) => return,
            }
            self.pending.clear();
        }
        if let Err(e) = std::str::from_utf8(bytes) {
            match e.error_len() {
                Some(_) => self.invalid = true,
                None => self.pending.extend_from_slice(&bytes[e.valid_up_to()..]),
            }
        }
    }
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let not_utf8 = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not valid UTF-8");
        if self.invalid {
            return Err(not_utf8());
        }
        let n = self.inner.read(buf)?;
        self.count += n as u64;
        if n == 0 && !self.pending.is_empty() {
            self.invalid = true;
        }
        self.check(&buf[..n]);
        if self.invalid {
            return Err(not_utf8());
        }
        Ok(n)
    }
}

// ---------------------------------------------------------------------------------------------
// The project root

static ROOT_OVERRIDE: OnceLock<PathBuf> = OnceLock::new();

/// `--root DIR`: the project root for every path a spec or fixture names, in this process.
pub(crate) fn set_root_override(dir: PathBuf) {
    let _ = ROOT_OVERRIDE.set(dir);
}

/// The project root of a file: `--root` if given, else the nearest enclosing directory holding
/// a `.git` (a folder, or the file of a git worktree), else the file's own directory.
pub(crate) fn project_root(file: &Path) -> PathBuf {
    if let Some(dir) = ROOT_OVERRIDE.get() {
        return dir.canonicalize().unwrap_or_else(|_| dir.clone());
    }
    let dir = parent_dir(file);
    let dir = dir.canonicalize().unwrap_or(dir);
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
        .unwrap_or(dir)
}

fn parent_dir(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Why a path named inside a spec or fixture was refused.
#[derive(Debug, PartialEq)]
pub(crate) enum Escape {
    Absolute,
    OutsideRoot(PathBuf),
}

impl Escape {
    pub(crate) fn describe(&self, written: &str) -> String {
        match self {
            Escape::Absolute => format!("`{written}` is an absolute path"),
            // The root itself is left out: messages (and their snapshots) stay machine-independent.
            Escape::OutsideRoot(_) => format!("`{written}` leads outside the project root"),
        }
    }

    pub(crate) const HELP: &'static str = "write the path relative to the file that names it, inside the project (the nearest folder holding `.git`, or `--root DIR`)";
}

/// `written` (relative to `base_dir`) as a path, if it stays inside `root`. `..` is allowed as
/// long as the result stays inside; symlinks are resolved for the existing part of the path, so
/// a link leading out is an escape too.
pub(crate) fn within_root(root: &Path, base_dir: &Path, written: &str) -> Result<PathBuf, Escape> {
    let rel = Path::new(written);
    if rel.is_absolute() || rel.components().any(|c| matches!(c, Component::Prefix(_))) {
        return Err(Escape::Absolute);
    }
    let joined = base_dir.join(rel);
    let resolved = resolve(&joined);
    let root_real = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    if resolved.starts_with(&root_real) {
        Ok(joined)
    } else {
        Err(Escape::OutsideRoot(root_real))
    }
}

/// The canonical form of the longest existing prefix, with the rest appended lexically.
fn resolve(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    let mut out = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => resolve(p),
        _ => std::env::current_dir().unwrap_or_default(),
    };
    match path.components().next_back() {
        Some(Component::ParentDir) => {
            out.pop();
        }
        Some(Component::Normal(n)) => out.push(n),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> crate::test_support::TempDir {
        crate::test_support::temp_dir(&format!("files-{name}"))
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_at_the_old_predictable_temp_name_is_not_followed() {
        let d = scratch("tmp");
        let victim = d.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        // The name the previous implementation used for its temporary file.
        let old = d.join(format!(".out.json.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &old).unwrap();
        write_atomically(&d.join("out.json"), b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(d.join("out.json")).unwrap(), "new");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_at_the_destination_is_replaced() {
        let d = scratch("dest");
        let victim = d.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, d.join("out.json")).unwrap();
        write_atomically(&d.join("out.json"), b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        let meta = std::fs::symlink_metadata(d.join("out.json")).unwrap();
        assert!(meta.is_file());
        std::os::unix::fs::symlink(&victim, d.join("events.jsonl")).unwrap();
        let mut f = create_stream(&d.join("events.jsonl")).unwrap();
        f.write_all(b"{}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(d.join("events.jsonl")).unwrap(),
            "{}\n"
        );
    }

    #[cfg(unix)]
    #[test]
    fn devices_are_named_as_devices() {
        let e = regular_file(Path::new("/dev/null")).unwrap_err();
        assert_eq!(e.describe(), "is a character device, not a regular file");
        assert!(matches!(
            regular_file(Path::new("/")),
            Err(NotAFile::Directory)
        ));
    }

    #[test]
    fn paths_stay_inside_the_root() {
        let root = scratch("root");
        std::fs::create_dir_all(root.join("specs")).unwrap();
        let specs = root.join("specs");
        assert!(within_root(&root, &specs, "../fixtures/y.json").is_ok());
        assert!(within_root(&root, &specs, "data/t.csv").is_ok());
        assert_eq!(
            within_root(&root, &specs, "/etc/passwd"),
            Err(Escape::Absolute)
        );
        assert!(matches!(
            within_root(&root, &specs, "../../etc/passwd"),
            Err(Escape::OutsideRoot(_))
        ));
        assert!(matches!(
            within_root(&root, &specs, "a/../../../x"),
            Err(Escape::OutsideRoot(_))
        ));
    }
}

/// Can a file be written at `path` later? Checked before a run starts, so a typo in `--trace
/// out/trace.json` fails in a moment instead of after the whole loop ran. `creates_folders`:
/// the writer makes missing folders itself (fixtures), so only an existing ancestor must be a
/// writable folder. `flag` names the option in the message.
pub(crate) fn check_destination(
    path: &Path,
    flag: &str,
    creates_folders: bool,
) -> Result<(), String> {
    let shown = path.display();
    if path.is_dir() {
        return Err(format!(
            "{flag} `{shown}` is a folder; give a file name, e.g. `{}`",
            path.join("out.json").display()
        ));
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut folder = parent;
    if creates_folders {
        while !folder.exists() {
            match folder.parent().filter(|p| !p.as_os_str().is_empty()) {
                Some(up) => folder = up,
                None => {
                    folder = Path::new(".");
                    break;
                }
            }
        }
    }
    if !folder.is_dir() {
        return Err(if folder.exists() {
            format!("{flag} `{shown}`: `{}` is not a folder", folder.display())
        } else {
            format!(
                "{flag} `{shown}`: the folder `{}` does not exist; create it first (`mkdir -p {}`)",
                folder.display(),
                folder.display()
            )
        });
    }
    // Permissions say little (root, ACLs, read-only mounts): try what the writer will do, with
    // a file that has no name where it can (a kill leaves nothing behind, issue 36 §19).
    if unnamed_file_in(folder) {
        return Ok(());
    }
    let probe = folder.join(format!(".toolrun-probe.{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!(
            "{flag} `{shown}`: cannot write in `{}`: {e}",
            folder.display()
        )),
    }
}

#[cfg(test)]
mod destination_tests {
    use super::check_destination;

    #[test]
    fn destinations_are_checked_before_anything_runs() {
        let dir = crate::test_support::temp_dir("dest-check");
        assert!(check_destination(&dir.join("t.json"), "--trace", false).is_ok());
        let err = check_destination(&dir.join("missing/t.json"), "--trace", false).unwrap_err();
        assert!(
            err.contains("does not exist") && err.contains("mkdir -p"),
            "{err}"
        );
        assert!(check_destination(&dir.join("missing/deeper/f.json"), "--record", true).is_ok());
        let err = check_destination(&dir, "--junit", false).unwrap_err();
        assert!(err.contains("is a folder"), "{err}");
        std::fs::write(dir.join("file"), "x").unwrap();
        let err = check_destination(&dir.join("file/t.json"), "--record", true).unwrap_err();
        assert!(err.contains("is not a folder"), "{err}");
    }
}

#[cfg(test)]
mod stream_tests {
    use super::Checked;
    use std::io::Read;

    /// Reads `bytes` through `Checked` in pieces of `size` bytes.
    fn checked_in_pieces(bytes: &[u8], size: usize) -> (bool, u64) {
        struct Pieces<'a>(&'a [u8], usize);
        impl Read for Pieces<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut c = Checked::new(Pieces(bytes, size));
        c.finish();
        (c.invalid(), c.count())
    }

    #[test]
    fn a_stream_is_checked_for_utf8_wherever_reads_cut_it() {
        let good = "aé€😀b\n".repeat(3);
        for size in 1..=9 {
            assert_eq!(
                checked_in_pieces(good.as_bytes(), size),
                (false, good.len() as u64),
                "{size}"
            );
            for bad in [
                &b"caf\xe9!"[..],
                b"ok\xf0\x9f\x98",
                b"\xff",
                b"a\xe2\x82\xe2\x82\xac",
            ] {
                let mut bytes = good.as_bytes().to_vec();
                bytes.extend_from_slice(bad);
                assert!(checked_in_pieces(&bytes, size).0, "{size} {bad:?}");
            }
        }
    }
}
