//! kubelet.service's drop-in for the sysext kubelet: `units/kubelet-sysext.conf`
//! (`ExecStart=/usr/bin/kubelet`, kubelet.service's own arguments), which
//! the agent puts at `<systemd_config_dir>/kubelet.service.d/10-kubelet-sysext.conf`
//! on a node whose backend resolved to `sysext` ([`super::backend`]),
//! before kubelet.env lets kubelet.service start. The Ignition module
//! writes the same file when the config names `sysext` outright; with
//! `auto` only the node knows, so the agent writes it.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The drop-in, as the repository's `units/` has it.
pub const DROP_IN: &str = include_str!("../../units/kubelet-sysext.conf");
/// Its place under the systemd config dir.
pub const DROP_IN_PATH: &str = "kubelet.service.d/10-kubelet-sysext.conf";

/// Where the drop-in goes.
pub fn drop_in_path(systemd_config_dir: &Path) -> PathBuf {
    systemd_config_dir.join(DROP_IN_PATH)
}

/// Writes the drop-in unless it is there as it should be (atomically, the
/// directory created). `true` when it wrote: systemd must reload before
/// kubelet.service starts.
pub fn ensure_drop_in(systemd_config_dir: &Path) -> Result<bool> {
    let path = drop_in_path(systemd_config_dir);
    if crate::fsutil::read_optional(&path)
        .ok()
        .flatten()
        .as_deref()
        == Some(DROP_IN)
    {
        return Ok(false);
    }
    let dir = path.parent().expect("a drop-in has a directory");
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::internal(format!("failed to create {}: {e}", dir.display())))?;
    crate::fsutil::write_file(
        "kubelet.service's sysext drop-in",
        &path,
        DROP_IN.as_bytes(),
        crate::fsutil::MODE_PUBLIC,
    )?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drop_in_is_written_once_and_rewritten_when_changed() {
        let d = tempfile::tempdir().unwrap();
        assert!(ensure_drop_in(d.path()).unwrap());
        let p = d.path().join("kubelet.service.d/10-kubelet-sysext.conf");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), DROP_IN);
        assert!(!ensure_drop_in(d.path()).unwrap());
        std::fs::write(&p, "[Service]\nExecStart=\nExecStart=/bin/false\n").unwrap();
        assert!(ensure_drop_in(d.path()).unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), DROP_IN);
    }
}
