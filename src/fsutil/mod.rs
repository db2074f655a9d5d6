//! Filesystem primitives every subsystem uses: atomic writes, the one way
//! a file gets its final name ([`publish`]), `.done` markers, the run lock.
//!
//! A file that another unit reads (kubelet.env, torcx profiles, store
//! archives, `.done` markers, the state journal) is only ever replaced
//! whole: written to a temp file in the same directory, given its mode and
//! renamed over the target, so a reader sees the old file or the new one,
//! never a mix. How much survives a power cut is chosen per write
//! ([`Durability`]): commit points (kubelet.env, markers, profiles, store
//! files) are [`Durability::Durable`]: the temp file is fsynced before the
//! rename and the directory after it. At worst a power cut leaves a stray
//! temp file (named `.<name>.tmp-*`) that [`remove_stale_temps`] clears.
//!
//! Downloads follow the same rule: streamed into an [`AtomicFile`] (or a
//! resumable partial of their own name: [`staged`]), verified, and only then given
//! their final name by [`AtomicFile::commit`] / [`publish`].

mod lock;
pub mod staged;

pub use lock::RunLock;

use crate::error::{Context as _, ErrorClass, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Starts writing `len` bytes of `file` from `offset` back to disk without
/// waiting for it (`sync_file_range(SYNC_FILE_RANGE_WRITE)`): a head start
/// for a later `syncfs`/`fsync`, never a durability guarantee of its own.
/// Best effort: where the call is not supported, the later sync does it all.
pub fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd as _;
    // SAFETY: plain syscall on a file descriptor `file` keeps open for the
    // call; no memory is passed.
    unsafe {
        nix::libc::sync_file_range(
            file.as_raw_fd(),
            offset as nix::libc::off64_t,
            len as nix::libc::off64_t,
            nix::libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

/// Mode for files other programs read (profiles, kubelet.env, markers).
pub const MODE_PUBLIC: u32 = 0o644;
/// Mode for secrets (keys, kubeconfigs).
pub const MODE_SECRET: u32 = 0o600;

const TEMP_MARK: &str = ".tmp-";

/// What a replace guarantees across a power cut (it is atomic either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsync the file, rename, fsync the directory: once the write returns,
    /// the new file survives a power cut.
    Durable,
    /// Rename only, no fsync: a power cut shortly after may bring back the
    /// old file (or, on a filesystem that does not write data before a
    /// rename, an empty one). For records that can be re-derived, written
    /// on a latency-critical path (the state journal during `run`; a clean
    /// shutdown or reboot syncs them like everything else).
    AtomicOnly,
}

/// A file being written under a temporary name next to its target. It gets
/// the target's name only on [`AtomicFile::commit`]; dropping it uncommitted
/// removes the temp file.
pub struct AtomicFile {
    file: Option<File>,
    temp: PathBuf,
    target: PathBuf,
    mode: u32,
    /// Renamed into place: nothing to remove on drop.
    committed: bool,
}

impl AtomicFile {
    /// Creates the temp file (mode `mode`, exclusive) in `target`'s directory,
    /// creating the directory (0755) if needed.
    pub fn create(target: &Path, mode: u32) -> io::Result<AtomicFile> {
        let dir = parent_dir(target);
        fs::create_dir_all(dir)?;
        let name = target
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "target has no file name"))?
            .to_string_lossy()
            .into_owned();
        for _ in 0..16 {
            let temp = temp_beside(dir, &name);
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&temp)
            {
                Ok(file) => {
                    // The umask may have narrowed the mode given to open(2).
                    file.set_permissions(fs::Permissions::from_mode(mode))?;
                    return Ok(AtomicFile {
                        file: Some(file),
                        temp,
                        target: target.to_path_buf(),
                        mode,
                        committed: false,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "could not create a unique temp file",
        ))
    }

    /// The temp file's path (for logging and tests).
    pub fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// The open temp file, e.g. to seek or to hash what was written.
    pub fn file_mut(&mut self) -> &mut File {
        self.file
            .as_mut()
            .expect("the file is open until finish_writing or commit")
    }

    /// Ends the writing: fsyncs and closes the temp file, which stays under
    /// its temp name (removed on drop) until [`AtomicFile::commit`]. A file
    /// still open for writing cannot be executed (`ETXTBSY`): a binary is
    /// checked to run between the two.
    pub fn finish_writing(&mut self) -> io::Result<()> {
        if let Some(f) = self.file.take() {
            f.sync_all()?;
            f.set_permissions(fs::Permissions::from_mode(self.mode))?;
        }
        Ok(())
    }

    /// fsync, set mode, rename over the target, fsync the directory.
    pub fn commit(self) -> io::Result<()> {
        self.commit_with(Durability::Durable)
    }

    /// Set mode, rename over the target; with [`Durability::Durable`] the
    /// file is fsynced before and the directory after.
    pub fn commit_with(mut self, durability: Durability) -> io::Result<()> {
        let r = match self.file.take() {
            Some(file) => publish_open(file, &self.temp, &self.target, self.mode, durability),
            None => publish(&self.temp, &self.target, self.mode, durability),
        };
        self.committed = r.is_ok();
        r
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file_mut().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file_mut().flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

/// Gives a written (and verified) file `temp` its final name `target`:
/// with [`Durability::Durable`] the file is fsynced first and the directory
/// after; its mode is set; the rename replaces whatever `target` was in one
/// step. The one way a file gets its final name (see module docs).
pub fn publish(temp: &Path, target: &Path, mode: u32, durability: Durability) -> io::Result<()> {
    let file = OpenOptions::new().read(true).open(temp)?;
    publish_open(file, temp, target, mode, durability)
}

fn publish_open(
    file: File,
    temp: &Path,
    target: &Path,
    mode: u32,
    durability: Durability,
) -> io::Result<()> {
    let durable = durability == Durability::Durable;
    if durable {
        file.sync_all()?;
    }
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    drop(file);
    fs::rename(temp, target)?;
    if durable {
        fsync_dir(parent_dir(target))?;
    }
    Ok(())
}

/// A temp name for `name` in `dir` (`.<name>.tmp-<pid>-<random>`, what
/// [`remove_stale_temps`] clears).
fn temp_beside(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(
        ".{name}{TEMP_MARK}{}-{:08x}",
        std::process::id(),
        fastrand::u32(..)
    ))
}

/// Makes `target` a hard link to `existing` in one step (link under a temp
/// name, rename over `target`, fsync the directory): `target` is the old
/// file or the new link, never missing.
pub fn link_over(existing: &Path, target: &Path) -> io::Result<()> {
    let dir = parent_dir(target);
    let name = target
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "target has no file name"))?
        .to_string_lossy()
        .into_owned();
    let temp = temp_beside(dir, &name);
    let r = fs::hard_link(existing, &temp)
        .and_then(|()| fs::rename(&temp, target))
        .and_then(|()| fsync_dir(dir));
    if r.is_err() {
        let _ = fs::remove_file(&temp);
    }
    r
}

fn parent_dir(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// fsyncs a directory so a rename or create in it is durable.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `target` with `contents` atomically and durably (see module docs).
pub fn atomic_write(target: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    atomic_write_with(target, contents, mode, Durability::Durable)
}

/// Replaces `target` with `contents` atomically, as durable as asked.
pub fn atomic_write_with(
    target: &Path,
    contents: &[u8],
    mode: u32,
    durability: Durability,
) -> io::Result<()> {
    let mut f = AtomicFile::create(target, mode)?;
    f.write_all(contents)?;
    f.commit_with(durability)
}

/// [`atomic_write`] with an error that names what the file is.
pub fn write_file(what: &str, target: &Path, contents: &[u8], mode: u32) -> Result<()> {
    write_file_with(what, target, contents, mode, Durability::Durable)
}

/// [`atomic_write_with`] with an error that names what the file is.
pub fn write_file_with(
    what: &str,
    target: &Path,
    contents: &[u8],
    mode: u32,
    durability: Durability,
) -> Result<()> {
    atomic_write_with(target, contents, mode, durability).ctx(ErrorClass::Internal, || {
        format!("failed to write {what} at {}", target.display())
    })
}

/// Reads a whole file, with an error naming what it is and where.
/// A missing or unreadable file is [`ErrorClass::BadInput`].
pub fn read_input(what: &str, path: &Path) -> Result<String> {
    fs::read_to_string(path).ctx(ErrorClass::BadInput, || {
        format!("failed to read {what} at {}", path.display())
    })
}

/// Reads a file if it exists; `Ok(None)` when it does not.
pub fn read_optional(path: &Path) -> io::Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes a `.done` marker atomically; its content says when and what.
pub fn mark_done(marker: &Path, note: &str) -> Result<()> {
    let body = format!("{} {note}\n", crate::clock::now_rfc3339());
    write_file("done marker", marker, body.as_bytes(), MODE_PUBLIC)
}

/// Whether a `.done` marker exists.
pub fn is_done(marker: &Path) -> bool {
    marker.exists()
}

/// Removes temp files a crash left behind in `dir` (only our own
/// `.<name>.tmp-*` pattern; other files are never touched). Returns how many.
pub fn remove_stale_temps(dir: &Path) -> io::Result<usize> {
    let mut removed = 0;
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') && name.contains(TEMP_MARK) && entry.file_type()?.is_file() {
            fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn atomic_write_replaces_whole_file_with_mode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/kubelet.env");
        atomic_write(&p, b"A=1\n", MODE_PUBLIC).unwrap();
        atomic_write(&p, b"B=2\n", MODE_SECRET).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "B=2\n");
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        let names: Vec<_> = fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temp files left: {names:?}");
    }

    #[test]
    fn uncommitted_file_leaves_target_untouched() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("profile.json");
        atomic_write(&p, b"old", MODE_PUBLIC).unwrap();
        {
            let mut f = AtomicFile::create(&p, MODE_PUBLIC).unwrap();
            f.write_all(b"half of the new").unwrap();
            assert!(f.temp_path().exists());
        }
        assert_eq!(fs::read_to_string(&p).unwrap(), "old");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn stale_temps_are_removed_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join(".kubelet.env.tmp-123-abcd"), "x").unwrap();
        fs::write(d.path().join("kubelet.env"), "keep").unwrap();
        fs::write(d.path().join(".hidden"), "keep").unwrap();
        assert_eq!(remove_stale_temps(d.path()).unwrap(), 1);
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 2);
    }

    #[test]
    fn mark_done_is_visible() {
        let d = tempfile::tempdir().unwrap();
        let m = d.path().join("init_bootkube.done");
        assert!(!is_done(&m));
        mark_done(&m, "bootkube").unwrap();
        assert!(is_done(&m));
        assert!(fs::read_to_string(&m).unwrap().ends_with("bootkube\n"));
    }

    #[test]
    fn read_input_names_what_and_where() {
        let err =
            read_input("seed kubelet.env", Path::new("/nonexistent/kubelet.env")).unwrap_err();
        assert_eq!(err.class(), ErrorClass::BadInput);
        assert!(
            err.to_string()
                .starts_with("failed to read seed kubelet.env at /nonexistent/kubelet.env: ")
        );
    }
}
