//! The floor of the ready benchmark (`nb-bench node-ready`): the same
//! worker with nothing to bootstrap. Its OS image already brings the
//! runtime and the kubelet the cluster wants, and what the agent wrote on
//! a measured worker of the same kind (kubelet.env, the kubelet's
//! configuration file, containerd's config and drop-in, the kubelet's
//! system extension with its link and `systemd-sysext.service` enabled) is
//! already there, copied from that worker, so the bootstrap unit is
//! skipped (`ConditionPathExists=!/etc/kubernetes/kubelet.env`); booted
//! once to Ready. What is left is what systemd, the runtime, the kubelet
//! and the control plane take anyway: the node's own floor.

use crate::ready::Kind;
use anyhow::{Context as _, Result};
use std::path::Path;
use testkit::cluster::ClusterRig;
use testkit::simnode::SimNode;

/// What the agent writes that a worker with nothing to bootstrap already
/// has.
const AGENT_FILES: &[&str] = &[
    "/etc/kubernetes/kubelet.env",
    "/etc/kubernetes/kubelet-config.yaml",
    "/etc/containerd/config.toml",
];
/// containerd.service's drop-in the agent writes, where it may be.
const CONTAINERD_DROPIN: &str = "containerd.service.d/50-node-bootstrap.conf";
/// The kubelet extension as the agent leaves it: its images, the link
/// systemd-sysext reads, and `systemd-sysext.service` enabled (merged at
/// every boot from then on).
const SYSEXT_ENTRIES: &[&str] = &[
    "/opt/extensions/kubernetes",
    "/etc/extensions/kubernetes.raw",
    "/etc/systemd/system/sysinit.target.wants/systemd-sysext.service",
];

/// Makes `n`, a worker of the rig of `kind` (before its first boot), one
/// with nothing to bootstrap, from `done`, a worker of the same kind the
/// agent bootstrapped (shut down).
pub fn nothing_to_bootstrap(
    n: &SimNode,
    rig: &ClusterRig,
    kind: Kind,
    done: &SimNode,
) -> Result<()> {
    for f in AGENT_FILES {
        if let Some(text) = done.read(f) {
            n.write(f, text, 0o644)?;
        }
    }
    anyhow::ensure!(
        n.exists("/etc/kubernetes/kubelet.env"),
        "{} has no kubelet.env to copy",
        done.name()
    );
    match kind {
        Kind::Docker => {
            let reference = testkit::docker_image::REFERENCE;
            n.write(
                &format!("/usr/share/torcx/store/docker:{reference}.torcx.tgz"),
                rig.docker.bytes()?,
                0o644,
            )?;
            n.write(
                "/usr/share/torcx/profiles/vendor.json",
                format!(r#"{{"kind":"profile-manifest-v0","value":{{"images":[{{"name":"docker","reference":"{reference}"}}]}}}}"#),
                0o644,
            )?;
        }
        Kind::Containerd | Kind::Sysext => {
            let dropin = ["/etc/systemd/system", "/run/systemd/system"]
                .iter()
                .find_map(|d| done.read(&format!("{d}/{CONTAINERD_DROPIN}")))
                .with_context(|| format!("{} has no {CONTAINERD_DROPIN}", done.name()))?;
            n.write(
                &format!("/etc/systemd/system/{CONTAINERD_DROPIN}"),
                dropin,
                0o644,
            )?;
            testkit::pods::enable_os_unit(n, "containerd.service", "multi-user.target")?;
        }
    }
    if kind == Kind::Sysext {
        for e in SYSEXT_ENTRIES {
            copy_entry(&done.path(e), &n.path(e))
                .with_context(|| format!("copying {e} from {}", done.name()))?;
        }
    }
    Ok(())
}

/// Copies a file, a symbolic link (as a link) or a directory (whole) from
/// one node's disk to another's.
fn copy_entry(from: &Path, to: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(from)
        .with_context(|| format!("{} is missing", from.display()))?;
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if meta.file_type().is_symlink() {
        let _ = std::fs::remove_file(to);
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)?;
    } else if meta.is_dir() {
        std::fs::create_dir_all(to)?;
        for e in std::fs::read_dir(from)? {
            let e = e?;
            copy_entry(&e.path(), &to.join(e.file_name()))?;
        }
    } else {
        std::fs::copy(from, to)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_copied_as_they_are() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let images = a.path().join("opt/extensions/kubernetes");
        std::fs::create_dir_all(&images).unwrap();
        std::fs::write(images.join("kubernetes-v1.20.2-x86-64.raw"), b"image").unwrap();
        std::os::unix::fs::symlink(
            "/opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw",
            a.path().join("link.raw"),
        )
        .unwrap();
        copy_entry(&a.path().join("opt"), &b.path().join("opt")).unwrap();
        copy_entry(&a.path().join("link.raw"), &b.path().join("etc/link.raw")).unwrap();
        assert_eq!(
            std::fs::read(
                b.path()
                    .join("opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw")
            )
            .unwrap(),
            b"image"
        );
        assert_eq!(
            std::fs::read_link(b.path().join("etc/link.raw")).unwrap(),
            Path::new("/opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw")
        );
        assert!(copy_entry(&a.path().join("missing"), &b.path().join("x")).is_err());
    }
}
