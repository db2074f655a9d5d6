//! An extension image chosen from the artifact search path, put in place
//! and merged: what the kubelet sysext and containerd's package share once
//! each has chosen its image by its own rule.
//!
//! [`install`]:
//! 1. the image is reused when its versioned file is in place with the
//!    metadata's sha512, else downloaded under a hidden name beside it and
//!    verified by size, sha256 and sha512 (exit 6, nothing installed);
//! 2. it is checked as systemd-sysext would merge it on this node
//!    ([`super::image`]: extension-release `ID`, `SYSEXT_LEVEL` or
//!    `VERSION_ID`, `ARCHITECTURE`), its program present and answering
//!    `--version` with the version the metadata names (exit 5, nothing
//!    installed);
//! 3. the versioned file is renamed into place, then the link
//!    (`/etc/extensions/<name>.raw`) pointed at it in one step;
//!    `systemd-sysext.service` enabled for later boots; the extensions the
//!    caller masks linked to `/dev/null` (Flatcar's way to switch off a
//!    built-in extension);
//! 4. `systemd-sysext refresh`, unless this image is merged already; then
//!    the merged program's `--version` must be the chosen version (exit 7
//!    when not). No reboot. The image the link named before is kept, older
//!    ones removed.

use super::image::{self, Expect, Inspection};
use super::install::{self, Extension};
use crate::digest::{Sha512, sha512_file};
use crate::error::{Error, ErrorClass, Result};
use crate::metadata::{self, Found};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tracing::info;

/// What one caller's extension is and how it is installed.
#[derive(Debug, Clone, Copy)]
pub struct Spec<'a> {
    pub extension: Extension<'a>,
    /// The journal's step, the log's `step` field.
    pub step: &'static str,
    /// The program the image is for, inside it and merged
    /// (`usr/bin/kubelet`), and what it is called in messages (`kubelet`).
    pub program: &'a str,
    pub what: &'a str,
    /// Other files the image must carry (`usr/lib/systemd/system/containerd.service`).
    pub requires: &'a [&'a str],
    /// The largest image accepted, and the setting that says so.
    pub max_bytes: (&'a str, u64),
    /// How long `systemd-sysext refresh` may take, and the setting.
    pub merge_timeout: (&'a str, Duration),
    /// Where `systemd-sysext.service` is enabled (`addon.systemd_config_dir`).
    pub systemd_config_dir: &'a Path,
    /// What to change where the OS has no systemd-sysext.
    pub remedy: &'a str,
    /// Other extensions to switch off while this one is merged.
    pub masks: &'a [String],
    /// The node's os-release (`paths.os_release`) and a scratch directory
    /// for the image check's mount point (`paths.run_dir`).
    pub os_release: &'a Path,
    pub scratch: &'a Path,
}

/// Whether a program's `--version` answer is the version chosen; the
/// caller's rule (`Kubernetes v1.20.2`, `containerd … 1.6.20~ds1 …`).
pub type SaysVersion<'a> = &'a (dyn Fn(&str) -> bool + Sync);

/// What [`install`] did: the part of a step's record every extension of
/// the agent shares (flattened into the kubelet's and containerd's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    /// The versioned image, e.g. `/opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw`.
    pub image: PathBuf,
    /// The link systemd-sysext reads, e.g. `/etc/extensions/kubernetes.raw`.
    pub link: PathBuf,
    /// The metadata's sha512, lower case.
    pub sha512: String,
    /// Where it came from.
    pub url: String,
    pub location: String,
    pub signed: bool,
    /// Downloaded by this run (false: the verified file was in place).
    pub downloaded: bool,
    /// The image the link named before, when this run replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<PathBuf>,
    /// `systemd-sysext refresh` ran (false: this image was merged already).
    pub refreshed: bool,
    /// Older images removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<PathBuf>,
    /// The OS's extensions masked by this run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masked: Vec<PathBuf>,
}

#[cfg(test)]
impl Installed {
    /// A fresh install of `image` from `url` (signed, downloaded, merged),
    /// for tests of what reads records.
    pub(crate) fn example(image: &str, url: &str) -> Installed {
        Installed {
            image: image.into(),
            link: "/etc/extensions/kubernetes.raw".into(),
            sha512: "00".into(),
            url: url.into(),
            location: url.rsplit_once('/').map_or(url, |(l, _)| l).into(),
            signed: true,
            downloaded: true,
            previous: None,
            refreshed: true,
            removed: vec![],
            masked: vec![],
        }
    }
}

/// Steps 1 and 2 of [`install`] and the image's versioned file in place:
/// `found` reused or downloaded, verified and checked, renamed to its
/// versioned name; not linked, not merged (what `follow` does before it
/// takes a place in its lease, so that a missing or bad image is found
/// while nothing on the node changed).
pub async fn fetch(
    spec: &Spec<'_>,
    source: &metadata::Inputs<'_>,
    found: &Found,
    arch: &str,
    says_version: SaysVersion<'_>,
) -> Result<Fetched> {
    let ext = &spec.extension;
    let (hex, hash) = item_hash(found, spec.what)?;
    let name = ext.image_file_name(&found.version, arch);
    let image_path = ext.images_dir.join(&name);
    let in_place = image_path.is_file() && sha512_file(&image_path).is_ok_and(|h| h == hash);
    let staged = if in_place {
        None
    } else {
        Some(
            metadata::fetch_staged(
                source,
                found,
                ext.images_dir,
                &name,
                &hash,
                spec.max_bytes,
                spec.step,
            )
            .await?,
        )
    };
    let checked = staged
        .as_ref()
        .map_or(image_path.clone(), |s| s.partial().to_path_buf());
    let inspection = check(spec, &checked, found, says_version)
        .await
        .map_err(|e| e.context(format!("{} {} was not installed", spec.what, found.version)))?;
    let downloaded = staged.is_some();
    if let Some(s) = staged {
        s.commit()?;
    }
    Ok(Fetched {
        image: image_path,
        sha512: hex,
        downloaded,
        release_text: inspection.release_text,
    })
}

/// An image [`fetch`] put under its versioned name.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub image: PathBuf,
    /// The metadata's sha512, lower case.
    pub sha512: String,
    /// Downloaded now (false: the verified file was in place).
    pub downloaded: bool,
    /// Its extension-release file, as a merge shows it.
    pub release_text: String,
}

/// Installs and merges `found` (version `found.version`, for `arch`) as
/// the module docs say; `says_version` tells whether the program's answer
/// is that version.
pub async fn install(
    spec: &Spec<'_>,
    source: &metadata::Inputs<'_>,
    found: &Found,
    arch: &str,
    says_version: SaysVersion<'_>,
) -> Result<Installed> {
    let ext = &spec.extension;
    let fetched = fetch(spec, source, found, arch, says_version).await?;
    let (image_path, hex, downloaded) = (fetched.image, fetched.sha512, fetched.downloaded);
    let before = ext.linked_image();
    let relinked = ext.link_to(&image_path)?;
    super::ensure_unit_enabled(spec.systemd_config_dir, spec.step, spec.remedy)?;
    let masked = super::mask(ext.extensions_dir, spec.masks, spec.step)?;
    let merged_program = Path::new("/").join(spec.program);
    let merged = || merged_answer(&merged_program, says_version);
    let merged_already = !relinked
        && masked.is_empty()
        && ext.merged_release().as_deref() == Some(fetched.release_text.as_str())
        && merged().is_ok();
    if !merged_already {
        let (setting, timeout) = spec.merge_timeout;
        install::refresh(timeout, setting, spec.step).await?;
    }
    let link = ext.link_path();
    let merged_says = if merged_already {
        merged()
    } else {
        merged_in_node(&merged_program, says_version, spec.scratch).await
    };
    let merged_says = merged_says.map_err(|why| {
        Error::refused(format!(
            "{} {} is installed at {} but did not take effect: {why}; check `systemd-sysext status` and `journalctl -u systemd-sysext`",
            spec.what,
            found.version,
            link.display()
        ))
    })?;
    // The image the link named before, unless the link was a plain file
    // (an image put there by hand, now replaced by the link).
    let previous = if relinked {
        before.filter(|p| *p != image_path && *p != link)
    } else {
        None
    };
    let removed = match &previous {
        Some(p) => ext.remove_old_images(&[image_path.as_path(), p.as_path()], spec.step),
        None => Vec::new(),
    };
    info!(step = spec.step, extension = ext.name, version = %found.version, merged = %merged_says,
        refreshed = !merged_already, image = %image_path.display(), previous = ?previous, "image merged");
    Ok(Installed {
        image: image_path,
        link,
        sha512: hex,
        url: found.url.clone(),
        location: found.location.clone(),
        signed: found.signed,
        downloaded,
        previous,
        refreshed: !merged_already,
        removed,
        masked,
    })
}

/// The item's sha512, required (`metadata generate` writes it).
fn item_hash(found: &Found, what: &str) -> Result<(String, Sha512)> {
    let Some(hex) = found.item.sha512.as_deref() else {
        return Err(Error::bad_input(format!(
            "{}: item {} has no sha512; {what} images need one (`metadata generate` writes it)",
            found.url, found.item_name
        )));
    };
    let hash = Sha512::parse_manifest_hash(&format!("sha512-{hex}")).ok_or_else(|| {
        Error::bad_input(format!(
            "{}: item {} has a malformed sha512",
            found.url, found.item_name
        ))
    })?;
    Ok((hex.to_ascii_lowercase(), hash))
}

/// The image check of [`image`] against this node's os-release, and its
/// program against the version the metadata names.
async fn check(
    spec: &Spec<'_>,
    file: &Path,
    found: &Found,
    says_version: SaysVersion<'_>,
) -> Result<Inspection> {
    let host_text = crate::fsutil::read_input("os-release", spec.os_release)?;
    let host = crate::osrelease::parse_env(&host_text);
    let expect = Expect {
        name: spec.extension.name.to_string(),
        program: spec.program.to_string(),
        what: spec.what.to_string(),
        requires: spec.requires.iter().map(|r| r.to_string()).collect(),
    };
    let (file2, scratch) = (file.to_path_buf(), spec.scratch.to_path_buf());
    let inspection = tokio::task::spawn_blocking(move || image::inspect(&file2, &expect, &scratch))
        .await
        .map_err(|e| Error::internal(format!("the image check did not finish: {e}")))??;
    let arch = image::systemd_arch().unwrap_or("unknown");
    let url = &found.url;
    image::compatible(&host, &inspection.release, arch).map_err(|why| {
        Error::bad_input(format!(
            "{url} is not for this node: {why} (systemd-sysext would not merge it; {} says: {})",
            spec.os_release.display(),
            host_text
                .lines()
                .filter(|l| l.starts_with("ID=")
                    || l.starts_with("VERSION_ID=")
                    || l.starts_with("SYSEXT_LEVEL="))
                .collect::<Vec<_>>()
                .join(" ")
        ))
    })?;
    if !says_version(&inspection.says) {
        return Err(Error::new(
            ErrorClass::BadInput,
            format!(
                "{url}: its {} says {:?}, the metadata lists it as {}",
                spec.what, inspection.says, found.version
            ),
        ));
    }
    info!(step = spec.step, url = %url, says = %inspection.says, "the image is one systemd-sysext merges here");
    Ok(inspection)
}

/// What the merged program's `--version` says, when it is the version.
/// [`merged_answer`] where the node's units see the merge: the program's
/// `--version` run by systemd (a transient unit, its output in a file of
/// `scratch`, the run dir), not by this process, whose sandbox has a mount
/// namespace of its own (units/k8s-node-bootstrap.service). kubelet.service
/// and containerd.service run in the node's.
async fn merged_in_node(
    program: &Path,
    says_version: SaysVersion<'_>,
    scratch: &Path,
) -> std::result::Result<String, String> {
    let says = install::version_in_node(program, scratch, image::VERSION_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    if says_version(&says) {
        Ok(says)
    } else {
        Err(format!("{} --version says {says:?}", program.display()))
    }
}

fn merged_answer(
    program: &Path,
    says_version: SaysVersion<'_>,
) -> std::result::Result<String, String> {
    let says = image::run_version(program)?;
    if says_version(&says) {
        Ok(says)
    } else {
        Err(format!("{} --version says {says:?}", program.display()))
    }
}
