//! Safe unpacking of an asset bundle (tar.gz, or plain tar) into a fresh
//! directory.
//!
//! Rejected, with a message naming the entry (class `BadInput`):
//! - absolute paths, and paths with a `..` component;
//! - entries whose parent path goes through a symlink or a file;
//! - symlinks with an absolute target, a target that leaves the bundle, or a
//!   target that does not exist in the bundle (checked once everything is
//!   unpacked, by resolving each link for real);
//! - hard links to anything but a regular file already unpacked (a link
//!   to itself included);
//! - device files, FIFOs and any other special entry;
//! - entries larger than `limits.max_entry_bytes`, a total beyond
//!   `limits.max_total_bytes` (counted from the bytes actually written, so
//!   a lying header or a gzip bomb stops there), more than
//!   `limits.max_entries` entries;
//! - zip archives (not supported: terraform and operators produce tar.gz).
//!
//! The caller unpacks into a fresh staging directory and deletes it on
//! any error, so a rejected bundle leaves nothing in place.
//!
//! Secrets: a regular file is a secret when its name ends in `.key`, its
//! name starts with `kubeconfig`, or it lies (at any depth) under a
//! directory named `tls` or `auth`. Secrets are written with mode 0600 from
//! the start (never briefly readable). Other files keep their archive mode
//! masked with 0755 (no setuid/setgid/sticky, no group/world write).
//! Directories get 0755. Contents are never logged, only paths and counts.

use super::config::UnpackLimits;
use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::fsutil::MODE_SECRET;
use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// What was unpacked.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UnpackReport {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub hardlinks: u64,
    /// Bytes of file contents written.
    pub bytes: u64,
    /// Relative paths of files written as secrets (mode 0600).
    pub secrets: Vec<String>,
}

/// Whether a file at `rel` (relative to the bundle root) is a secret (see
/// module docs for the rule).
pub fn is_secret(rel: &Path) -> bool {
    let name = rel
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    if name.ends_with(".key") || name.starts_with("kubeconfig") {
        return true;
    }
    rel.parent().is_some_and(|p| {
        p.components()
            .any(|c| matches!(c, Component::Normal(n) if n == "tls" || n == "auth"))
    })
}

fn reject(entry: &str, why: impl std::fmt::Display) -> Error {
    Error::bad_input(format!("asset bundle entry {entry:?} rejected: {why}"))
}

/// The archive path as normal components; `Ok(None)` for the root itself
/// (`./`). Rejects absolute paths and `..`.
fn sanitize(raw: &[u8]) -> Result<Option<PathBuf>> {
    let shown = String::from_utf8_lossy(raw).into_owned();
    if raw.is_empty() {
        return Err(reject(&shown, "empty path"));
    }
    if raw.contains(&0) {
        return Err(reject(&shown, "NUL byte in path"));
    }
    let p = Path::new(OsStr::from_bytes(raw));
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => {
                return Err(reject(&shown, "absolute path"));
            }
            Component::ParentDir => return Err(reject(&shown, "path contains `..`")),
            Component::CurDir => {}
            Component::Normal(n) => out.push(n),
        }
    }
    Ok((!out.as_os_str().is_empty()).then_some(out))
}

/// Makes sure every parent of `rel` below `root` is a real directory
/// (creating missing ones), never a symlink or a file.
fn ensure_parents(root: &Path, rel: &Path, shown: &str, report: &mut UnpackReport) -> Result<()> {
    let mut cur = root.to_path_buf();
    let parent = rel.parent().unwrap_or(Path::new(""));
    for c in parent.components() {
        cur.push(c);
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(reject(shown, "its path goes through a symlink"));
            }
            Ok(_) => return Err(reject(shown, "its path goes through a file")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir(&cur).ctx(ErrorClass::Internal, || {
                    format!("failed to create {}", cur.display())
                })?;
                fs::set_permissions(&cur, fs::Permissions::from_mode(0o755))
                    .ctx(ErrorClass::Internal, || {
                        format!("failed to set mode of {}", cur.display())
                    })?;
                report.dirs += 1;
            }
            Err(e) => {
                return Err(Error::internal(format!(
                    "failed to inspect {}: {e}",
                    cur.display()
                )));
            }
        }
    }
    Ok(())
}

/// Removes a non-directory at `path` (a later duplicate entry wins, as in
/// tar); a directory there is an error.
fn clear_slot(path: &Path, shown: &str) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_dir() => Err(reject(shown, "it would replace a directory")),
        Ok(_) => fs::remove_file(path).ctx(ErrorClass::Internal, || {
            format!("failed to replace {}", path.display())
        }),
        Err(_) => Ok(()),
    }
}

/// Resolves a relative symlink target lexically from the link's directory;
/// `None` if it climbs above the root.
fn lexical_target(link_rel: &Path, target: &Path) -> Option<PathBuf> {
    let mut parts: Vec<&OsStr> = link_rel
        .parent()
        .map(|p| p.iter().collect())
        .unwrap_or_default();
    for c in target.components() {
        match c {
            Component::Normal(n) => parts.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

/// Byte counter that enforces the entry and total limits while copying.
struct Limited<'a, R> {
    inner: R,
    entry_left: u64,
    total_left: &'a mut u64,
    hit: Option<&'static str>,
}

impl<R: Read> Read for Limited<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let n64 = n as u64;
        if n64 > self.entry_left {
            self.hit = Some("entry");
            return Err(io::Error::other("entry size limit"));
        }
        if n64 > *self.total_left {
            self.hit = Some("total");
            return Err(io::Error::other("total size limit"));
        }
        self.entry_left -= n64;
        *self.total_left -= n64;
        Ok(n)
    }
}

/// Unpacks a tar.gz (or plain tar) stream into `dest`; see module docs.
pub fn unpack<R: Read>(reader: R, dest: &Path, limits: &UnpackLimits) -> Result<UnpackReport> {
    let mut buffered = BufReader::with_capacity(64 * 1024, reader);
    let head = buffered
        .fill_buf()
        .ctx(ErrorClass::BadInput, || "failed to read the asset bundle")?
        .to_vec();
    if head.starts_with(&[0x1f, 0x8b]) {
        let gz = flate2::bufread::MultiGzDecoder::new(buffered);
        unpack_tar(gz, dest, limits)
    } else if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        Err(Error::bad_input(
            "the asset bundle is a zip archive; only tar.gz (or tar) bundles are supported",
        ))
    } else if head.len() >= 262 && &head[257..262] == b"ustar" {
        unpack_tar(buffered, dest, limits)
    } else {
        Err(Error::bad_input(
            "the asset bundle is neither a tar.gz nor a tar archive",
        ))
    }
}

fn unpack_tar<R: Read>(reader: R, dest: &Path, limits: &UnpackLimits) -> Result<UnpackReport> {
    let mut archive = tar::Archive::new(reader);
    let mut u = Unpacker {
        root: dest,
        limits,
        total_left: limits.max_total_bytes,
        report: UnpackReport::default(),
        symlinks: Vec::new(),
        buf: vec![0; COPY_BUF],
    };
    let not_tar = || "the asset bundle is not a valid tar archive";
    let mut count = 0u64;
    for entry in archive.entries().ctx(ErrorClass::BadInput, not_tar)? {
        let mut entry = entry.ctx(ErrorClass::BadInput, not_tar)?;
        let etype = entry.header().entry_type();
        if matches!(etype, tar::EntryType::XGlobalHeader) {
            continue;
        }
        count += 1;
        if count > limits.max_entries {
            return Err(Error::bad_input(format!(
                "the asset bundle has more than {} entries (assets.limits.max_entries)",
                limits.max_entries
            )));
        }
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let Some(rel) = sanitize(&raw)? else {
            continue; // "./": the root itself
        };
        match etype {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                u.file(&mut entry, rel, &shown)?
            }
            tar::EntryType::Directory => u.dir(&rel, &shown)?,
            tar::EntryType::Symlink => u.symlink(&entry, rel, &shown)?,
            tar::EntryType::Link => u.hard_link(&entry, &rel, &shown)?,
            tar::EntryType::Char | tar::EntryType::Block => {
                return Err(reject(&shown, "device files are not allowed"));
            }
            tar::EntryType::Fifo => return Err(reject(&shown, "FIFOs are not allowed")),
            other => {
                return Err(reject(&shown, format!("unsupported entry type {other:?}")));
            }
        }
    }
    u.check_symlinks()?;
    Ok(u.report)
}

/// One bundle being unpacked below `root`, within `limits`.
struct Unpacker<'a> {
    root: &'a Path,
    limits: &'a UnpackLimits,
    /// Bytes the bundle may still unpack to.
    total_left: u64,
    report: UnpackReport,
    /// Symlinks made, checked once everything is unpacked.
    symlinks: Vec<PathBuf>,
    /// The copy buffer, one for all files.
    buf: Vec<u8>,
}

impl Unpacker<'_> {
    /// A regular file: size limits, secret modes, never through a symlink.
    fn file(&mut self, entry: &mut impl TarEntry, rel: PathBuf, shown: &str) -> Result<()> {
        let limits = self.limits;
        let size = entry.size();
        if size > limits.max_entry_bytes {
            return Err(reject(
                shown,
                format!(
                    "{size} bytes is more than the {} byte limit (assets.limits.max_entry_mib)",
                    limits.max_entry_bytes
                ),
            ));
        }
        if size > self.total_left {
            return Err(reject(
                shown,
                format!(
                    "the bundle exceeds the {} byte total limit (assets.limits.max_total_mib)",
                    limits.max_total_bytes
                ),
            ));
        }
        let target = self.prepare_slot(&rel, shown)?;
        let secret = is_secret(&rel);
        let mode = if secret {
            MODE_SECRET
        } else {
            entry.mode() & 0o755
        };
        let mut out = Writeback::new(create_file(&target, mode)?);
        let mut limited = Limited {
            inner: entry,
            entry_left: limits.max_entry_bytes,
            total_left: &mut self.total_left,
            hit: None,
        };
        let copied = copy(&mut limited, &mut out, &mut self.buf);
        match (copied, limited.hit) {
            (Ok(n), _) => self.report.bytes += n,
            (Err(_), Some(which)) => {
                return Err(reject(
                    shown,
                    format!("it exceeds the {which} size limit (assets.limits)"),
                ));
            }
            (Err(e), None) => {
                return Err(Error::bad_input(format!(
                    "the asset bundle is corrupt at entry {shown:?}: {e}"
                )));
            }
        }
        out.finish().ctx(ErrorClass::Internal, || {
            format!("failed to write {}", target.display())
        })?;
        self.report.files += 1;
        if secret {
            self.report.secrets.push(rel.to_string_lossy().into_owned());
        }
        Ok(())
    }

    fn dir(&mut self, rel: &Path, shown: &str) -> Result<()> {
        ensure_parents(self.root, rel, shown, &mut self.report)?;
        let target = self.root.join(rel);
        match fs::symlink_metadata(&target) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(_) => return Err(reject(shown, "a file or symlink has this path")),
            Err(_) => {
                fs::create_dir(&target).ctx(ErrorClass::Internal, || {
                    format!("failed to create {}", target.display())
                })?;
                self.report.dirs += 1;
            }
        }
        set_mode(&target, 0o755)
    }

    /// A symlink that stays inside the bundle (checked lexically here, and
    /// for real once everything is unpacked).
    fn symlink(&mut self, entry: &impl TarEntry, rel: PathBuf, shown: &str) -> Result<()> {
        let link = entry
            .link_name()
            .ok_or_else(|| reject(shown, "symlink without a target"))?;
        let link_path = Path::new(OsStr::from_bytes(&link));
        if link_path.is_absolute() {
            return Err(reject(
                shown,
                format!(
                    "symlink to the absolute path {:?}",
                    link_path.to_string_lossy()
                ),
            ));
        }
        if link.is_empty() || lexical_target(&rel, link_path).is_none() {
            return Err(reject(
                shown,
                format!(
                    "symlink to {:?} points outside the bundle",
                    link_path.to_string_lossy()
                ),
            ));
        }
        let target = self.prepare_slot(&rel, shown)?;
        std::os::unix::fs::symlink(link_path, &target).ctx(ErrorClass::Internal, || {
            format!("failed to create symlink {}", target.display())
        })?;
        self.symlinks.push(rel);
        self.report.symlinks += 1;
        Ok(())
    }

    /// A hard link to a regular file unpacked before it, reached through
    /// real directories only.
    fn hard_link(&mut self, entry: &impl TarEntry, rel: &Path, shown: &str) -> Result<()> {
        let link = entry
            .link_name()
            .ok_or_else(|| reject(shown, "hard link without a target"))?;
        let link_rel = sanitize(&link)
            .map_err(|_| {
                reject(
                    shown,
                    format!(
                        "hard link to {:?} points outside the bundle",
                        String::from_utf8_lossy(&link)
                    ),
                )
            })?
            .ok_or_else(|| reject(shown, "hard link to the bundle root"))?;
        if link_rel == rel {
            // Its own path is cleared before the link is made.
            return Err(reject(shown, "hard link to itself"));
        }
        let mut through_link = false;
        let mut cur = self.root.to_path_buf();
        for c in link_rel.parent().unwrap_or(Path::new("")).components() {
            cur.push(c);
            if !fs::symlink_metadata(&cur).is_ok_and(|m| m.file_type().is_dir()) {
                through_link = true;
            }
        }
        let src = self.root.join(&link_rel);
        let is_file = fs::symlink_metadata(&src).is_ok_and(|m| m.file_type().is_file());
        if through_link || !is_file {
            return Err(reject(
                shown,
                format!(
                    "hard link to {:?}, which is not a regular file unpacked before it",
                    link_rel.to_string_lossy()
                ),
            ));
        }
        let target = self.prepare_slot(rel, shown)?;
        fs::hard_link(&src, &target).ctx(ErrorClass::Internal, || {
            format!("failed to create hard link {}", target.display())
        })?;
        if is_secret(rel) {
            set_mode(&target, MODE_SECRET)?;
            self.report.secrets.push(rel.to_string_lossy().into_owned());
        }
        self.report.hardlinks += 1;
        Ok(())
    }

    /// Makes the entry's parents and clears its path; returns the path.
    fn prepare_slot(&mut self, rel: &Path, shown: &str) -> Result<PathBuf> {
        ensure_parents(self.root, rel, shown, &mut self.report)?;
        let target = self.root.join(rel);
        clear_slot(&target, shown)?;
        Ok(target)
    }

    /// Every symlink must resolve, for real, to something inside the bundle.
    fn check_symlinks(&self) -> Result<()> {
        let canon_root = fs::canonicalize(self.root).ctx(ErrorClass::Internal, || {
            format!("failed to resolve {}", self.root.display())
        })?;
        for rel in &self.symlinks {
            let shown = rel.to_string_lossy();
            match fs::canonicalize(self.root.join(rel)) {
                Ok(resolved) if resolved.starts_with(&canon_root) => {}
                Ok(_) => return Err(reject(&shown, "symlink resolves outside the bundle")),
                Err(_) => {
                    return Err(reject(
                        &shown,
                        "symlink points to nothing in the bundle (or to a loop)",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What the unpacker needs of a tar entry (the `tar` crate's entry).
trait TarEntry: Read {
    fn size(&self) -> u64;
    fn mode(&self) -> u32;
    fn link_name(&self) -> Option<Vec<u8>>;
}

impl<R: Read> TarEntry for tar::Entry<'_, R> {
    fn size(&self) -> u64 {
        self.header().size().unwrap_or(u64::MAX)
    }
    fn mode(&self) -> u32 {
        self.header().mode().unwrap_or(0o644)
    }
    fn link_name(&self) -> Option<Vec<u8>> {
        self.link_name_bytes().map(|b| b.into_owned())
    }
}

/// Bytes read from the archive per write (fewer syscalls than `io::copy`'s 8 KiB).
const COPY_BUF: usize = 256 << 10;
/// Writeback of a file's bytes is started every this much.
const WRITEBACK_STEP: u64 = 8 << 20;

/// Copies `r` to `w` through `buf`; returns the bytes copied.
fn copy(r: &mut impl Read, w: &mut impl Write, buf: &mut [u8]) -> io::Result<u64> {
    let mut total = 0u64;
    loop {
        let n = match r.read(buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        w.write_all(&buf[..n])?;
        total += n as u64;
    }
}

/// A file being unpacked whose bytes start going to disk while the unpack
/// goes on (`sync_file_range(SYNC_FILE_RANGE_WRITE)` every
/// [`WRITEBACK_STEP`] and at the end: it starts writeback, it does not wait
/// for it), so the `syncfs` before the tree is published finds little left
/// to write. Durability still comes from that `syncfs` alone.
struct Writeback {
    file: fs::File,
    written: u64,
    started: u64,
}

impl Writeback {
    fn new(file: fs::File) -> Writeback {
        Writeback {
            file,
            written: 0,
            started: 0,
        }
    }

    fn start_writeback(&mut self) {
        if self.written > self.started {
            crate::fsutil::start_writeback(&self.file, self.started, self.written - self.started);
            self.started = self.written;
        }
    }

    /// All written: start the writeback of the rest.
    fn finish(mut self) -> io::Result<()> {
        self.file.flush()?;
        self.start_writeback();
        Ok(())
    }
}

impl Write for Writeback {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.started >= WRITEBACK_STEP {
            self.start_writeback();
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A new file (never through a symlink) with exactly `mode`.
fn create_file(target: &Path, mode: u32) -> Result<fs::File> {
    let out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(target)
        .ctx(ErrorClass::Internal, || {
            format!("failed to create {}", target.display())
        })?;
    out.set_permissions(fs::Permissions::from_mode(mode))
        .ctx(ErrorClass::Internal, || {
            format!("failed to set mode of {}", target.display())
        })?;
    Ok(out)
}

fn set_mode(target: &Path, mode: u32) -> Result<()> {
    fs::set_permissions(target, fs::Permissions::from_mode(mode)).ctx(ErrorClass::Internal, || {
        format!("failed to set mode of {}", target.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_rule() {
        for s in [
            "tls/ca.crt",
            "auth/kubeconfig",
            "kubeconfig",
            "kubeconfig-kubelet",
            "x/apiserver.key",
            "a/tls/b/c.pem",
        ] {
            assert!(is_secret(Path::new(s)), "{s}");
        }
        for s in ["bootkube.sh", "manifests/tls.yaml", "keys.txt", "tlsx/a"] {
            assert!(!is_secret(Path::new(s)), "{s}");
        }
    }

    #[test]
    fn sanitize_rejects_escapes() {
        assert_eq!(sanitize(b"./a/./b").unwrap(), Some(PathBuf::from("a/b")));
        assert_eq!(sanitize(b"./").unwrap(), None);
        assert!(sanitize(b"/etc/passwd").is_err());
        assert!(sanitize(b"a/../../x").is_err());
        assert!(sanitize(b"..").is_err());
    }

    #[test]
    fn lexical_targets() {
        assert_eq!(
            lexical_target(Path::new("a/b/link"), Path::new("../c")),
            Some(PathBuf::from("a/c"))
        );
        assert_eq!(lexical_target(Path::new("link"), Path::new("../x")), None);
        assert_eq!(
            lexical_target(Path::new("a/link"), Path::new("../../x")),
            None
        );
    }
}
