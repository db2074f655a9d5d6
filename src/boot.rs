//! This boot's id: a random id kept in `<run_dir>/boot-id`, a tmpfs, so it
//! is new after every reboot. (Not the kernel's boot id: on a simulated node
//! the kernel is the host's and does not reboot.) The state journal stamps
//! every record with it, so the flow tells "done before the reboot" from
//! "done in this boot"; `status` reads it without ever creating one.

use crate::error::{Context as _, ErrorClass, Result};
use crate::fsutil;
use std::path::Path;

const FILE: &str = "boot-id";

/// This boot's id, created on first use in a boot.
pub fn id(run_dir: &Path) -> Result<String> {
    if let Some(id) = read(run_dir)? {
        return Ok(id);
    }
    let path = run_dir.join(FILE);
    let id = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    // Two processes racing here: whichever rename lands last wins, and both
    // re-read below, so every caller in this boot agrees on one id.
    fsutil::write_file(
        "boot id",
        &path,
        format!("{id}\n").as_bytes(),
        fsutil::MODE_PUBLIC,
    )?;
    let stored = std::fs::read_to_string(&path).ctx(ErrorClass::Internal, || {
        format!("failed to read boot id {}", path.display())
    })?;
    Ok(stored.trim().to_string())
}

/// This boot's id if anything created one yet (`status` never creates it).
pub fn read(run_dir: &Path) -> Result<Option<String>> {
    let path = run_dir.join(FILE);
    let text = fsutil::read_optional(&path).ctx(ErrorClass::Internal, || {
        format!("failed to read boot id {}", path.display())
    })?;
    Ok(text.map(|t| t.trim().to_string()).filter(|t| !t.is_empty()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_id_is_made_once_per_boot_and_read_without_making_one() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(super::read(d.path()).unwrap(), None);
        let a = super::id(d.path()).unwrap();
        assert_eq!(a.len(), 32);
        assert_eq!(super::id(d.path()).unwrap(), a);
        assert_eq!(super::read(d.path()).unwrap(), Some(a));
    }
}
