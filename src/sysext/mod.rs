//! System extensions (systemd-sysext), as the docker addon's sysext
//! backend, the kubelet sysext and containerd's package use them: the
//! names they may take, the link that makes an image the merged one
//! (replaced in one step), the merged image's release file, masks of the
//! OS's own extensions, and `systemd-sysext.service` enabled for later
//! boots; what is inside an image and whether this node's systemd-sysext
//! would merge it ([`image`]); versioned images, their link and the merge
//! ([`install`]); and an extension's images on the artifact search path
//! ([`offers`]), one of them put in place and merged ([`package`]), which
//! the kubelet and containerd share.
//!
//! No config: callers pass the directories (`paths.extensions_dir`,
//! `addon.sysext_release_dir`, `addon.systemd_config_dir`) and settings.

pub mod image;
pub mod install;
pub mod offers;
pub mod package;

use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::settings::{FieldError, FieldResult};
use std::fs;
use std::path::{Path, PathBuf};
use tracing::info;

/// The docker addon's extension: `docker.raw`, `extension-release.docker`.
/// No other extension of this agent may take the name.
pub const DOCKER_EXTENSION: &str = "docker";
/// containerd's package (`containerd.raw`, `extension-release.containerd`,
/// the bakery's name). No other extension of this agent may take it.
pub const CONTAINERD_EXTENSION: &str = "containerd";
/// Where merged extensions' release files are (`addon.sysext_release_dir`).
pub const DEFAULT_RELEASE_DIR: &str = "/usr/lib/extension-release.d";
/// Where units are enabled (`addon.systemd_config_dir`).
pub const DEFAULT_SYSTEMD_CONFIG_DIR: &str = "/etc/systemd/system";
/// The unit that merges extensions at boot.
pub const SYSEXT_UNIT: &str = "systemd-sysext.service";

/// A torcx profile or sysext name: one path component, no surprises.
pub fn check_name(field: &str, name: &str) -> FieldResult<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!(
                "must be 1-64 characters of [A-Za-z0-9._-] not starting with '.', got {name:?}"
            ),
        ))
    }
}

/// The extensions a setting `field` masks (`default` unless set):
/// names systemd-sysext takes, none of them `own`, the extension the
/// caller installs.
pub fn masks_setting(
    field: &str,
    names: Option<Vec<String>>,
    default: &[&str],
    own: &str,
) -> FieldResult<Vec<String>> {
    let names = names.unwrap_or_else(|| default.iter().map(|n| n.to_string()).collect());
    for (i, name) in names.iter().enumerate() {
        let field = format!("{field}[{i}]");
        check_name(&field, name)?;
        if name == own {
            return Err(FieldError::new(
                field,
                "must not mask the extension this agent installs",
            ));
        }
    }
    Ok(names)
}

/// The release file of extension `name` when it is merged
/// (`<release_dir>/extension-release.<name>`).
pub fn merged_release(release_dir: &Path, name: &str) -> Option<String> {
    fs::read_to_string(release_dir.join(format!("extension-release.{name}"))).ok()
}

/// Enables `systemd-sysext.service` (a `sysinit.target.wants` link) unless
/// it already is, by the admin or the OS vendor: the link goes
/// in `<systemd_config_dir>/sysinit.target.wants`; `step` names the caller
/// in the log, `remedy` what to change where the OS has no systemd-sysext.
pub fn ensure_unit_enabled(
    systemd_config_dir: &Path,
    step: &'static str,
    remedy: &str,
) -> Result<Option<PathBuf>> {
    let wants = systemd_config_dir
        .join("sysinit.target.wants")
        .join(SYSEXT_UNIT);
    if fs::symlink_metadata(&wants).is_ok() {
        return Ok(None);
    }
    let vendor_dirs = ["/usr/lib/systemd/system", "/lib/systemd/system"];
    if vendor_dirs.iter().any(|d| {
        Path::new(d)
            .join("sysinit.target.wants")
            .join(SYSEXT_UNIT)
            .exists()
    }) {
        return Ok(None);
    }
    let Some(unit) = vendor_dirs
        .iter()
        .map(|d| Path::new(d).join(SYSEXT_UNIT))
        .find(|p| p.exists())
    else {
        return Err(Error::refused(format!(
            "{SYSEXT_UNIT} is not installed on this OS; the sysext backend needs systemd-sysext ({remedy})"
        )));
    };
    atomic_symlink(&unit, &wants)?;
    info!(step, path = %wants.display(), "enabled {}", SYSEXT_UNIT);
    Ok(Some(wants))
}

/// Points `<extensions_dir>/<name>.raw` at `/dev/null` for each of
/// `names` (one step each), Flatcar's documented way to switch off a
/// built-in extension. Returns the links written (none already in place).
pub fn mask(extensions_dir: &Path, names: &[String], step: &'static str) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for name in names {
        let link = extensions_dir.join(format!("{name}.raw"));
        if fs::read_link(&link).is_ok_and(|t| t == Path::new("/dev/null")) {
            continue;
        }
        atomic_symlink(Path::new("/dev/null"), &link)?;
        info!(step, path = %link.display(), "masked a built-in extension");
        written.push(link);
    }
    Ok(written)
}

/// Points `link` at `target` in one step (a new link renamed over it).
pub fn atomic_symlink(target: &Path, link: &Path) -> Result<()> {
    let dir = link.parent().unwrap_or(Path::new("/"));
    let io = || -> std::io::Result<()> {
        fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(
            ".{}.tmp-{}-{:08x}",
            link.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id(),
            fastrand::u32(..)
        ));
        std::os::unix::fs::symlink(target, &tmp)?;
        if let Err(e) = fs::rename(&tmp, link) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        crate::fsutil::fsync_dir(dir)
    };
    io().ctx(ErrorClass::Internal, || {
        format!("failed to link {} -> {}", link.display(), target.display())
    })
}
