//! Where an extension's images live and how one becomes the merged one,
//! laid out as Flatcar's sysext-bakery documents it (the kubelet's images
//! shown; containerd's are the same under `containerd`):
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
//! `/etc/extensions/<name>.raw` always names a complete image: the old
//! one or the new one. The image the link named before is kept (a way
//! back); older versioned images are removed.
//!
//! Merging is `systemd-sysext refresh` (unmerge and merge again, which
//! also brings in a replaced image), bounded by the caller's timeout.
//! No systemd offers a D-Bus API for this (newer ones have a Varlink
//! interface, `io.systemd.sysext`; systemd 252, Flatcar's and Debian 12's,
//! has neither), so the command it is. On later boots
//! `systemd-sysext.service` merges the linked image before `sysinit.target`;
//! the caller enables it if the OS has not.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tracing::{info, warn};

/// One extension of the agent's: its name and where its images, its link
/// and (merged) its release file are.
#[derive(Debug, Clone, Copy)]
pub struct Extension<'a> {
    /// `kubernetes`: `<name>.raw`, `extension-release.<name>`.
    pub name: &'a str,
    /// Versioned images (`/opt/extensions/kubernetes`).
    pub images_dir: &'a Path,
    /// Where the link goes (`paths.extensions_dir`, `/etc/extensions`).
    pub extensions_dir: &'a Path,
    /// Where merged extensions show their release files
    /// (`addon.sysext_release_dir`).
    pub release_dir: &'a Path,
}

impl Extension<'_> {
    /// `kubernetes-v1.20.2-x86-64.raw`: the bakery's name of an image.
    pub fn image_file_name(&self, version: &str, arch: &str) -> String {
        format!("{}-{version}-{arch}.raw", self.name)
    }

    /// `/etc/extensions/kubernetes.raw`.
    pub fn link_path(&self) -> PathBuf {
        self.extensions_dir.join(format!("{}.raw", self.name))
    }

    /// What the link names now (`None`: no link; a plain file there is
    /// reported as itself).
    pub fn linked_image(&self) -> Option<PathBuf> {
        let link = self.link_path();
        match std::fs::read_link(&link) {
            Ok(t) if t.is_absolute() => Some(t),
            Ok(t) => Some(link.parent().unwrap_or(Path::new("/")).join(t)),
            Err(_) if link.is_file() => Some(link),
            Err(_) => None,
        }
    }

    /// Points the link at `image` unless it already does; returns whether
    /// it changed.
    pub fn link_to(&self, image: &Path) -> Result<bool> {
        if self.linked_image().as_deref() == Some(image) {
            return Ok(false);
        }
        super::atomic_symlink(image, &self.link_path())?;
        Ok(true)
    }

    /// The release file of the merged extension, when it is merged.
    pub fn merged_release(&self) -> Option<String> {
        super::merged_release(self.release_dir, self.name)
    }

    /// Removes versioned images of this extension other than `keep` (the
    /// current and the previous one, however their paths are spelt).
    /// Returns what was removed.
    pub fn remove_old_images(&self, keep: &[&Path], step: &'static str) -> Vec<PathBuf> {
        let prefix = format!("{}-", self.name);
        let Ok(entries) = std::fs::read_dir(self.images_dir) else {
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
                    info!(step, extension = self.name, path = %p.display(), "removed an older image");
                    removed.push(p);
                }
                Err(e) => {
                    warn!(step, extension = self.name, path = %p.display(), error = %e, "cannot remove an older image")
                }
            }
        }
        removed
    }
}

/// Runs `systemd-sysext refresh`, bounded by `timeout` (`setting` names
/// where that bound is configured), as a transient unit of systemd
/// ([`crate::systemd::manager::Systemd::run_transient`]), never as this
/// process's child: the agent runs in a sandbox with a mount namespace of
/// its own (units/k8s-node-bootstrap.service), and a merge made in there
/// would reach no other process. systemd runs it in the node's mount
/// namespace, from which the merge reaches every process, the agent's
/// sandbox included (its mounts follow the node's).
pub async fn refresh(timeout: Duration, setting: &str, step: &'static str) -> Result<()> {
    let started = std::time::Instant::now();
    let program = find_program(SYSEXT_PROGRAM)?;
    let unit = format!(
        "node-bootstrap-sysext-refresh-{}-{:08x}.service",
        std::process::id(),
        fastrand::u32(..)
    );
    let bus = crate::systemd::agent_bus().await?;
    crate::systemd::manager::Systemd::new(bus)
        .run_transient(
            &unit,
            &[program.display().to_string(), "refresh".to_string()],
            timeout,
        )
        .await
        .map_err(|e| e.context(format!("merging system extensions ({setting} bounds it)")))?;
    info!(step, unit = %unit, elapsed_ms = started.elapsed().as_millis() as u64,
        "systemd-sysext refresh merged the extensions");
    Ok(())
}

/// What `program --version` prints on stdout when systemd runs it (a
/// transient unit, in the node's mount namespace: where the node's units
/// see merged extensions), bounded by `timeout`; its output goes to a file
/// in `scratch` (the run dir, which this process's sandbox shares), read
/// and removed.
pub async fn version_in_node(program: &Path, scratch: &Path, timeout: Duration) -> Result<String> {
    let id = format!("{}-{:08x}", std::process::id(), fastrand::u32(..));
    std::fs::create_dir_all(scratch)
        .map_err(|e| Error::internal(format!("cannot create {}: {e}", scratch.display())))?;
    let out = scratch.join(format!(".version-{id}.out"));
    let unit = format!("node-bootstrap-version-{id}.service");
    let bus = crate::systemd::agent_bus().await?;
    let ran = crate::systemd::manager::Systemd::new(bus)
        .run_transient_to(
            &unit,
            &[program.display().to_string(), "--version".to_string()],
            Some(&out),
            timeout,
        )
        .await;
    let said = std::fs::read_to_string(&out);
    let _ = std::fs::remove_file(&out);
    ran?;
    said.map(|s| s.trim().to_string())
        .map_err(|e| Error::internal(format!("cannot read what {} said: {e}", program.display())))
}

/// The program systemd-sysext is.
const SYSEXT_PROGRAM: &str = "systemd-sysext";

/// `name` on this process's `PATH`, as a shell would find it (systemd
/// takes only an absolute path).
fn find_program(name: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt as _;
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| Error::internal(format!("cannot find {name} on PATH")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_is_replaced_in_one_step_and_old_images_go_but_the_previous_stays() {
        let d = tempfile::tempdir().unwrap();
        let (images, extensions, releases) = (
            d.path().join("opt/extensions/kubernetes"),
            d.path().join("etc/extensions"),
            d.path().join("usr/lib/extension-release.d"),
        );
        let c = Extension {
            name: "kubernetes",
            images_dir: &images,
            extensions_dir: &extensions,
            release_dir: &releases,
        };
        std::fs::create_dir_all(&images).unwrap();
        let img = |v: &str| images.join(c.image_file_name(v, "x86-64"));
        for v in ["v1.19.0", "v1.20.2", "v1.21.0"] {
            std::fs::write(img(v), v).unwrap();
        }
        std::fs::write(images.join("unrelated.raw"), "x").unwrap();
        assert_eq!(c.linked_image(), None);
        assert!(c.link_to(&img("v1.20.2")).unwrap());
        assert!(!c.link_to(&img("v1.20.2")).unwrap(), "already linked");
        assert_eq!(c.linked_image(), Some(img("v1.20.2")));
        assert!(c.link_to(&img("v1.21.0")).unwrap());
        assert_eq!(std::fs::read_link(c.link_path()).unwrap(), img("v1.21.0"));
        // No temporary link is left beside it.
        let names: Vec<String> = std::fs::read_dir(&extensions)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["kubernetes.raw"]);
        // The previous one named relatively still counts as kept.
        let relative =
            extensions.join("../../opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw");
        let removed = c.remove_old_images(&[&img("v1.21.0"), &relative], "test");
        assert_eq!(removed, [img("v1.19.0")]);
        assert!(img("v1.20.2").exists() && images.join("unrelated.raw").exists());
        // Merged: the release file shows in the release dir.
        assert_eq!(c.merged_release(), None);
        let rel = releases.join("extension-release.kubernetes");
        std::fs::create_dir_all(&releases).unwrap();
        std::fs::write(&rel, "ID=flatcar\n").unwrap();
        assert_eq!(c.merged_release().as_deref(), Some("ID=flatcar\n"));
    }
}
