//! The systemd-sysext backend (modern Flatcar): the chosen docker is a
//! system extension image `/etc/extensions/docker.raw`, merged into `/usr`
//! by `systemd-sysext.service` at boot.
//!
//! The same manifest, signature and sha512 rules as torcx apply; the
//! manifest's docker locations point at `.raw` images. The image is
//! replaced atomically (a merged image keeps its old inode until the
//! reboot). Flatcar's built-in docker/containerd extensions are masked
//! (`<name>.raw -> /dev/null`, Flatcar's documented way) so they do not
//! overlay ours, and `systemd-sysext.service` is enabled if it is not.
//!
//! What runs now: Docker's API when docker is up; else the merged
//! extension's `extension-release.docker` (`SYSEXT_VERSION_ID`); else the
//! record this agent keeps in `<state_dir>/addon-sysext.json` of what it
//! installed and in which boot (an image installed in an earlier boot is the
//! one merged now).

use super::Inputs;
use super::fetch::{Fetcher, Source};
use super::manifest::Choice;
use crate::digest::sha512_file;
use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::fsutil;
use crate::fsutil::staged::Staged;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::PathBuf;
use tracing::warn;

/// The extension's name: `docker.raw`, `extension-release.docker`.
pub const EXTENSION_NAME: &str = crate::sysext::DOCKER_EXTENSION;
pub const RECORD_FILE: &str = "addon-sysext.json";

/// `/etc/extensions/docker.raw`.
pub fn image_path(config: &Inputs<'_>) -> PathBuf {
    config
        .paths
        .extensions_dir
        .join(format!("{EXTENSION_NAME}.raw"))
}

/// What this agent installed, and in which boot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysextRecord {
    pub version: String,
    pub sha512: String,
    pub image: PathBuf,
    /// The agent's boot id when it was installed.
    pub boot_id: String,
    /// What ran in that boot, before the install.
    pub previous: Option<String>,
}

pub fn record_path(config: &Inputs<'_>) -> PathBuf {
    config.paths.state_dir.join(RECORD_FILE)
}

pub fn read_record(config: &Inputs<'_>) -> Option<SysextRecord> {
    let p = record_path(config);
    let text = fs::read_to_string(&p).ok()?;
    match serde_json::from_str(&text) {
        Ok(r) => Some(r),
        Err(e) => {
            warn!(step = "docker-addon", path = %p.display(), error = %e, "ignoring an unreadable sysext record");
            None
        }
    }
}

pub fn write_record(config: &Inputs<'_>, rec: &SysextRecord) -> Result<PathBuf> {
    let p = record_path(config);
    let mut text = serde_json::to_string_pretty(rec).expect("records serialize");
    text.push('\n');
    fsutil::write_file("sysext record", &p, text.as_bytes(), fsutil::MODE_PUBLIC)?;
    Ok(p)
}

/// The merged extension's release fields, when docker's extension is merged.
pub fn merged_release(config: &Inputs<'_>) -> Option<Vec<(String, String)>> {
    let text = crate::sysext::merged_release(&config.addon.sysext_release_dir, EXTENSION_NAME)?;
    Some(crate::osrelease::parse_env(&text))
}

/// What the merged extension says about the docker running now, without
/// asking docker: `(version, source)`.
pub fn running_from_sysext(config: &Inputs<'_>, boot_id: &str) -> Option<(String, &'static str)> {
    let release = merged_release(config)?;
    if let Some((_, v)) = release
        .iter()
        .find(|(k, v)| k == "SYSEXT_VERSION_ID" && !v.is_empty())
    {
        return Some((v.clone(), "sysext-release"));
    }
    let rec = read_record(config)?;
    if rec.boot_id != boot_id {
        Some((rec.version, "sysext-record"))
    } else {
        rec.previous.map(|p| (p, "sysext-record"))
    }
}

/// Whether `/etc/extensions/docker.raw` already is the chosen image.
pub fn image_in_place(config: &Inputs<'_>, choice: &Choice) -> Result<bool> {
    let p = image_path(config);
    match fs::symlink_metadata(&p) {
        Ok(m) if m.file_type().is_file() => {
            let h = sha512_file(&p).ctx(ErrorClass::Internal, || {
                format!("failed to read {}", p.display())
            })?;
            Ok(h == choice.hash)
        }
        Ok(_) => Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::internal(format!(
            "failed to inspect {}: {e}",
            p.display()
        ))),
    }
}

/// Downloads and verifies the chosen image next to its target.
pub async fn prepare_image(
    config: &Inputs<'_>,
    fetcher: &Fetcher,
    choice: &Choice,
) -> Result<Staged> {
    let name = format!("{EXTENSION_NAME}.raw");
    let dir = &config.paths.extensions_dir;
    if let Some(item) = &choice.origin {
        return super::metasource::fetch_staged(config, item, dir, &name, &choice.hash).await;
    }
    if choice.urls.is_empty() {
        return Err(Error::bad_input(format!(
            "the package manifest lists no download location for docker {}",
            choice.version
        )));
    }
    let mut first_err: Option<Error> = None;
    for u in &choice.urls {
        let res = match Source::from_url(u) {
            Ok(src) => fetcher.fetch_package(&src, dir, &name, &choice.hash).await,
            Err(e) => Err(e),
        };
        match res {
            Ok(s) => return Ok(s),
            Err(e) => {
                warn!(step = "docker-addon", url = %u, error = %e, "image location failed");
                if first_err
                    .as_ref()
                    .is_none_or(|f| f.class() != ErrorClass::Verification)
                {
                    first_err = Some(e);
                }
            }
        }
    }
    Err(first_err.expect("at least one URL was tried"))
}

/// Points `<extensions_dir>/<name>.raw` at /dev/null for each masked
/// extension (atomically). Returns the links written.
pub fn ensure_masks(config: &Inputs<'_>) -> Result<Vec<PathBuf>> {
    crate::sysext::mask(
        &config.paths.extensions_dir,
        &config.addon.sysext_mask,
        "docker-addon",
    )
}

/// Enables `systemd-sysext.service` (a `sysinit.target.wants` link) unless
/// it already is, by the admin or the OS vendor.
pub fn ensure_unit_enabled(config: &Inputs<'_>) -> Result<Option<PathBuf>> {
    crate::sysext::ensure_unit_enabled(
        &config.addon.systemd_config_dir,
        "docker-addon",
        "set addon.backend to \"torcx\"",
    )
}
