//! A verified file under a hidden name beside its target, and how it gets
//! its final name: the docker addon's packages, kubelet sysext images. A
//! download goes to `.<name>.part-<hash prefix>` in the target's directory
//! (kept across a crash so the next run resumes it), is verified there, and
//! only then renamed into place ([`Staged::commit`]).

use crate::digest::Sha512;
use crate::error::{Context as _, ErrorClass, Result};
use std::fs;
use std::path::{Path, PathBuf};

const PART_MARK: &str = ".part-";

/// A verified file under its temporary name, renamed into place by
/// [`Staged::commit`]; dropped uncommitted, it is deleted.
#[derive(Debug)]
pub struct Staged {
    partial: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl Staged {
    /// A verified file at `partial`, to be renamed to `target`.
    pub(crate) fn new(partial: PathBuf, target: PathBuf) -> Staged {
        Staged {
            partial,
            target,
            committed: false,
        }
    }

    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The verified file under its temporary name.
    pub fn partial(&self) -> &Path {
        &self.partial
    }

    /// Gives it its final name ([`super::publish`]: fsync, mode
    /// 0644, rename over the target, fsync the directory).
    pub fn commit(mut self) -> Result<PathBuf> {
        super::publish(
            &self.partial,
            &self.target,
            super::MODE_PUBLIC,
            super::Durability::Durable,
        )
        .ctx(ErrorClass::Internal, || {
            format!(
                "failed to move {} into place at {}",
                self.partial.display(),
                self.target.display()
            )
        })?;
        self.committed = true;
        Ok(self.target.clone())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.partial);
        }
    }
}

fn parent(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new("/"))
}

/// The partial file for `final_name` with `hash` in `dir`.
pub fn partial_path(dir: &Path, final_name: &str, hash: &Sha512) -> PathBuf {
    dir.join(format!(".{final_name}{PART_MARK}{}", &hash.to_hex()[..16]))
}

/// Removes partials of `final_name` for other hashes (left by earlier runs
/// that wanted another build).
pub(crate) fn remove_other_partials(dir: &Path, final_name: &str, keep: &Path) {
    let prefix = format!(".{final_name}{PART_MARK}");
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) && e.path() != keep {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Creates a store directory (and makes its entry durable) if missing.
pub(crate) fn ensure_dir(dir: &Path) -> Result<()> {
    if !dir.exists() {
        fs::create_dir_all(dir).ctx(ErrorClass::Internal, || {
            format!("failed to create {}", dir.display())
        })?;
        // Make the new directory's own entry durable too.
        let _ = super::fsync_dir(parent(dir));
    }
    Ok(())
}
