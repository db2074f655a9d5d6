//! Where a kubelet sysext image lives and how it becomes the merged one,
//! laid out as Flatcar's sysext-bakery documents it:
//!
//! ```text
//! /opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw   versioned images
//! /opt/extensions/kubernetes/kubernetes-v1.19.7-x86-64.raw   (the previous one, kept)
//! /etc/extensions/kubernetes.raw -> /opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw
//! ```
//!
//! An image gets its versioned name only once verified and checked
//! (written under a hidden partial name beside it, fsynced, renamed); the
//! link is then replaced in one step (a new link renamed over the old), so
//! `/etc/extensions/kubernetes.raw` always names a complete image: the old
//! one or the new one. The image the link named before is kept (a way
//! back); older versioned images are removed.
//!
//! Merging is `systemd-sysext refresh` (unmerge and merge again, which
//! also brings in a replaced image), bounded by `kubelet.merge_timeout_secs`.
//! No systemd offers a D-Bus API for this (newer ones have a Varlink
//! interface, `io.systemd.sysext`; systemd 252, Flatcar's and Debian 12's,
//! has neither), so the command it is. On later boots
//! `systemd-sysext.service` merges the linked image before `sysinit.target`,
//! long before kubelet; the step enables it if the OS has not.

use super::Inputs;
use super::config::KubeletSettings;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tracing::{info, warn};

/// `kubernetes-v1.20.2-x86-64.raw`: the bakery's name of an image.
pub fn image_file_name(k: &KubeletSettings, version: &str, arch: &str) -> String {
    format!("{}-{version}-{arch}.raw", k.extension_name)
}

/// `/etc/extensions/kubernetes.raw`.
pub fn link_path(config: &Inputs<'_>) -> PathBuf {
    config
        .paths
        .extensions_dir
        .join(format!("{}.raw", config.kubelet.extension_name))
}

/// What the link names now (`None`: no link; a plain file there is
/// reported as itself).
pub fn linked_image(config: &Inputs<'_>) -> Option<PathBuf> {
    let link = link_path(config);
    match std::fs::read_link(&link) {
        Ok(t) if t.is_absolute() => Some(t),
        Ok(t) => Some(link.parent().unwrap_or(Path::new("/")).join(t)),
        Err(_) if link.is_file() => Some(link),
        Err(_) => None,
    }
}

/// Points the link at `image` unless it already does; returns whether it
/// changed.
pub fn link_to(config: &Inputs<'_>, image: &Path) -> Result<bool> {
    if linked_image(config).as_deref() == Some(image) {
        return Ok(false);
    }
    crate::sysext::atomic_symlink(image, &link_path(config))?;
    Ok(true)
}

/// The release file of the merged extension, when it is merged.
pub fn merged_release(config: &Inputs<'_>) -> Option<String> {
    crate::sysext::merged_release(config.sysext_release_dir, &config.kubelet.extension_name)
}

/// Removes versioned images of this extension other than `keep` (the
/// current and the previous one, however their paths are spelt). Returns
/// what was removed.
pub fn remove_old_images(config: &Inputs<'_>, keep: &[&Path]) -> Vec<PathBuf> {
    let k = &config.kubelet;
    let prefix = format!("{}-", k.extension_name);
    let Ok(entries) = std::fs::read_dir(&k.images_dir) else {
        return Vec::new();
    };
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let keep: Vec<PathBuf> = keep.iter().map(|p| real(p)).collect();
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let p = e.path();
        let ours = name.starts_with(&prefix) && name.ends_with(".raw");
        if !ours || keep.contains(&real(&p)) || !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        match std::fs::remove_file(&p) {
            Ok(()) => {
                info!(step = super::STEP, path = %p.display(), "removed an older kubelet image");
                removed.push(p);
            }
            Err(e) => {
                warn!(step = super::STEP, path = %p.display(), error = %e, "cannot remove an older kubelet image")
            }
        }
    }
    removed
}

/// Runs `systemd-sysext refresh`, bounded by `timeout`.
pub async fn refresh(timeout: Duration) -> Result<()> {
    let started = std::time::Instant::now();
    let mut cmd = tokio::process::Command::new("systemd-sysext");
    cmd.arg("refresh")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = match tokio::time::timeout(timeout, cmd.output()).await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => {
            return Err(Error::internal(format!(
                "cannot run systemd-sysext refresh: {e}"
            )));
        }
        Err(_) => {
            return Err(Error::retryable(format!(
                "systemd-sysext refresh did not finish within {}s (kubelet.merge_timeout_secs)",
                timeout.as_secs()
            )));
        }
    };
    let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if !out.status.success() {
        return Err(Error::retryable(format!(
            "systemd-sysext refresh failed ({}): {said}",
            out.status
        )));
    }
    info!(step = super::STEP, elapsed_ms = started.elapsed().as_millis() as u64, output = %said,
        "systemd-sysext refresh merged the extensions");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(root: &Path) -> super::super::OwnedInputs {
        let mut c = super::super::OwnedInputs::defaults();
        c.paths.extensions_dir = root.join("etc/extensions");
        c.sysext_release_dir = root.join("usr/lib/extension-release.d");
        c.kubelet.backend = super::super::config::Backend::Sysext;
        c.kubelet.images_dir = root.join("opt/extensions/kubernetes");
        c
    }

    #[test]
    fn the_link_is_replaced_in_one_step_and_old_images_go_but_the_previous_stays() {
        let d = tempfile::tempdir().unwrap();
        let owned = config(d.path());
        let c = owned.inputs();
        let images = &c.kubelet.images_dir;
        std::fs::create_dir_all(images).unwrap();
        let img = |v: &str| images.join(format!("kubernetes-{v}-x86-64.raw"));
        for v in ["v1.19.0", "v1.20.2", "v1.21.0"] {
            std::fs::write(img(v), v).unwrap();
        }
        std::fs::write(images.join("unrelated.raw"), "x").unwrap();
        assert_eq!(linked_image(&c), None);
        assert!(link_to(&c, &img("v1.20.2")).unwrap());
        assert!(!link_to(&c, &img("v1.20.2")).unwrap(), "already linked");
        assert_eq!(linked_image(&c), Some(img("v1.20.2")));
        assert!(link_to(&c, &img("v1.21.0")).unwrap());
        assert_eq!(std::fs::read_link(link_path(&c)).unwrap(), img("v1.21.0"));
        // No temporary link is left beside it.
        let names: Vec<String> = std::fs::read_dir(&c.paths.extensions_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["kubernetes.raw"]);
        // The previous one named relatively still counts as kept.
        let relative = c
            .paths
            .extensions_dir
            .join("../../opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw");
        let removed = remove_old_images(&c, &[&img("v1.21.0"), &relative]);
        assert_eq!(removed, [img("v1.19.0")]);
        assert!(img("v1.20.2").exists() && images.join("unrelated.raw").exists());
        // Merged: the release file shows in the release dir.
        assert_eq!(merged_release(&c), None);
        let rel = d
            .path()
            .join("usr/lib/extension-release.d/extension-release.kubernetes");
        std::fs::create_dir_all(rel.parent().unwrap()).unwrap();
        std::fs::write(&rel, "ID=flatcar\n").unwrap();
        assert_eq!(merged_release(&c).as_deref(), Some("ID=flatcar\n"));
    }
}
