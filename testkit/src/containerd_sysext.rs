//! containerd as a system extension, for the agent's containerd package
//! (`runtime.containerd.package = "sysext"`): images laid out as Flatcar's
//! sysext-bakery builds containerd images (`usr/bin/containerd`, its shim
//! and `ctr`, `usr/lib/systemd/system/containerd.service`,
//! `usr/lib/extension-release.d/extension-release.containerd`), from
//! Debian's containerd 1.6.20 (binaries and unit file as the package
//! installs them) or a stand-in of any version; a simulated node whose OS
//! has no containerd ([`hide_os_containerd`]); and Flatcar's
//! `ensure-sysext.service`, which starts what an extension brings on
//! later boots. Mirrors: [`crate::kubelet_sysext::ExtensionMirror::of`]`(PRODUCT)`.

use crate::kubelet_sysext::release;
use crate::simnode::SimNode;
use crate::torcx_fixtures::sysext_image_of;
use anyhow::{Context as _, Result};

/// The agent's product and extension name.
pub const PRODUCT: &str = "containerd";
/// Where the agent keeps containerd's images on a node, and its link.
pub const IMAGES: &str = "/opt/extensions/containerd";
pub const LINK: &str = "/etc/extensions/containerd.raw";
/// containerd's unit, on the OS and inside an image.
pub const UNIT_FILE: &str = "/usr/lib/systemd/system/containerd.service";

/// Debian's containerd package: every file it installs that a node would
/// run or read (`dpkg -L containerd`; `/lib` is `/usr/lib` on Debian 12),
/// and where an image carries it.
const DEBIAN_FILES: &[(&str, &str)] = &[
    ("/usr/bin/containerd", "usr/bin/containerd"),
    ("/usr/bin/containerd-shim", "usr/bin/containerd-shim"),
    (
        "/usr/bin/containerd-shim-runc-v1",
        "usr/bin/containerd-shim-runc-v1",
    ),
    (
        "/usr/bin/containerd-shim-runc-v2",
        "usr/bin/containerd-shim-runc-v2",
    ),
    ("/usr/bin/ctr", "usr/bin/ctr"),
    (UNIT_FILE, "usr/lib/systemd/system/containerd.service"),
];

/// The extension-release of the bakery's containerd images for Flatcar
/// (`ID=flatcar`, `SYSEXT_LEVEL=1.0`, this machine's architecture).
pub fn flatcar_release() -> String {
    release("flatcar", "1.0")
}

/// A containerd image of Debian's containerd (the host's): its binaries
/// and unit file, with `release`. About 100 MiB.
pub fn debian_image(release: &str) -> Result<Vec<u8>> {
    let files: Vec<(String, Vec<u8>)> = DEBIAN_FILES
        .iter()
        // What a bakery image holds: containerd, the runc v2 shim, ctr, the unit.
        .filter(|(_, inside)| !inside.contains("containerd-shim") || inside.ends_with("runc-v2"))
        .map(|(host, inside)| {
            std::fs::read(host)
                .with_context(|| format!("reading {host} (Debian's containerd)"))
                .map(|b| (inside.to_string(), b))
        })
        .collect::<Result<_>>()?;
    let refs: Vec<(&str, &[u8], u32)> = files
        .iter()
        .map(|(p, b)| {
            let mode = if p.starts_with("usr/bin/") {
                0o755
            } else {
                0o644
            };
            (p.as_str(), b.as_slice(), mode)
        })
        .collect();
    sysext_image_of(PRODUCT, &refs, release)
}

/// A containerd stand-in that answers `--version` as containerd
/// `version` does and, run as the service, never serves a socket: a node
/// that took it has no containerd to speak CRI with.
pub fn fake_containerd(version: &str) -> Vec<u8> {
    format!(
        "#!/bin/sh\n\
         if [ \"$1\" = --version ]; then\n\
         echo \"containerd github.com/containerd/containerd v{version} 0000000000000000000000000000000000000000\"; exit 0\n\
         fi\n\
         exec sleep infinity\n"
    )
    .into_bytes()
}

/// An image of [`fake_containerd`] `version` with Debian's unit file.
pub fn fake_image(version: &str, release: &str) -> Result<Vec<u8>> {
    let unit = std::fs::read(UNIT_FILE)
        .with_context(|| format!("reading {UNIT_FILE} (Debian's containerd)"))?;
    sysext_image_of(
        PRODUCT,
        &[
            ("usr/bin/containerd", &fake_containerd(version), 0o755),
            ("usr/lib/systemd/system/containerd.service", &unit, 0o644),
        ],
        release,
    )
}

/// Hides Debian's containerd from a node, before boot (whiteouts over
/// every file of the package, its config too): the node's OS has no
/// containerd, as Container Linux before Flatcar 2765 had none outside the
/// docker torcx image.
pub fn hide_os_containerd(n: &SimNode) -> Result<()> {
    for path in os_containerd_files() {
        n.hide(path)?;
    }
    Ok(())
}

/// Every file of Debian's containerd package a node would run or read,
/// its config included: what [`hide_os_containerd`] hides, and what a VM
/// test removes from a disk for an OS without containerd.
pub fn os_containerd_files() -> Vec<&'static str> {
    DEBIAN_FILES
        .iter()
        .map(|(host, _)| *host)
        .chain(["/etc/containerd/config.toml"])
        .collect()
}

/// Flatcar's `ensure-sysext.service`, as Flatcar ships it: once
/// `systemd-sysext.service` has merged the extensions at boot, systemd
/// reloads its units (an extension's units appear only then) and starts
/// what the targets want again.
pub const ENSURE_SYSEXT: &str = "\
[Unit]
BindsTo=systemd-sysext.service
After=systemd-sysext.service
DefaultDependencies=no
# Keep in sync with systemd-sysext.service
ConditionDirectoryNotEmpty=|/etc/extensions
ConditionDirectoryNotEmpty=|/run/extensions
ConditionDirectoryNotEmpty=|/var/lib/extensions
ConditionDirectoryNotEmpty=|/usr/local/lib/extensions
ConditionDirectoryNotEmpty=|/usr/lib/extensions
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/systemctl daemon-reload
ExecStart=/usr/bin/systemctl restart --no-block sockets.target timers.target multi-user.target
[Install]
WantedBy=sysinit.target
";

/// Installs and enables [`ENSURE_SYSEXT`] on a node, before boot, as on
/// Flatcar.
pub fn install_ensure_sysext(n: &SimNode) -> Result<()> {
    n.write(
        "/usr/lib/systemd/system/ensure-sysext.service",
        ENSURE_SYSEXT,
        0o644,
    )?;
    n.enable(&["ensure-sysext.service"])
}

/// Whether a simulated node can run the agent's containerd package here:
/// simulated nodes, Debian's containerd (the image's contents), `mkfs.ext4`
/// (the images) and the runc shim's python3 (containerd's test parts).
pub fn can_run() -> Result<()> {
    crate::simnode::can_run()?;
    for (host, _) in DEBIAN_FILES {
        anyhow::ensure!(
            std::path::Path::new(host).exists(),
            "{host} is missing (Debian's containerd; scripts/setup.sh installs it)"
        );
    }
    for (path, package) in [
        ("/usr/sbin/mkfs.ext4", "e2fsprogs"),
        ("/usr/bin/python3", "python3 (the runc shim)"),
    ] {
        anyhow::ensure!(
            std::path::Path::new(path).exists(),
            "{path} is missing ({package}; scripts/setup.sh installs it)"
        );
    }
    Ok(())
}

/// Skips the running test (see [`crate::skip_because`]) unless [`can_run`].
pub fn skip_unless_possible() -> bool {
    crate::skip_unless(
        can_run(),
        "the containerd package cannot run on simulated nodes here",
    )
}
