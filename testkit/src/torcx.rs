//! The real torcx, the program that consumes what the docker addon writes.
//!
//! `scripts/build-torcx.sh` (run by `scripts/setup.sh`) builds it from the
//! torcx sources the test machines carry beside the checkout
//! (`../shared/tools/torcx`: github.com/flatcar/torcx with its vendored
//! dependencies) into a cache outside the checkout. One static binary is
//! both `torcx` and, called by that name, `torcx-generator`, which systemd
//! runs at every boot before any unit starts: it applies the profile named
//! in `/etc/torcx/next-profile`, unpacks the images to
//! `/run/torcx/unpack/<name>`, links their binaries into `/run/torcx/bin`,
//! copies their units into `/run/systemd/system` and records what it
//! applied in `/run/torcx/profile.json` and `/run/metadata/torcx`.
//!
//! [`install_generator`] puts it on a simulated node where Flatcar has it;
//! [`install_os_image`] lays out the rest of a Container Linux image around
//! it (vendor docker, profile) for the docker addon.

use crate::simnode::SimNode;
use crate::torcx_fixtures::{AddonRig, docker_archive, os_release, runtime_mappings_yaml};
use anyhow::{Context, Result};
use std::path::PathBuf;

/// Where Flatcar has the generator.
pub const GENERATOR: &str = "/usr/lib/systemd/system-generators/torcx-generator";

/// Flatcar's `torcx.target` (torcx's `examples/torcx.target`): reached once
/// the generator sealed its state; docker's torcx units require it.
pub const TARGET_UNIT: &str = "[Unit]\nDescription=Verify torcx succeeded\nDefaultDependencies=no\n\
AssertPathExists=/run/metadata/torcx\n\n[Install]\nWantedBy=basic.target\n";

/// The real torcx binary, built (or found in the cache) by
/// `scripts/build-torcx.sh`, once per test process.
pub fn binary() -> Result<PathBuf> {
    static FOUND: std::sync::OnceLock<std::result::Result<PathBuf, String>> =
        std::sync::OnceLock::new();
    crate::once(&FOUND, || crate::run_build_script("build-torcx.sh"))
}

/// Skips the running test (returns `true`) when the real torcx cannot be
/// built here, saying why; under CI (`CI=true`) it panics instead: CI must
/// run these tests (see [`crate::skip_because`]).
pub fn skip_unless_available() -> bool {
    crate::skip_unless(binary().map(drop), "the real torcx is not available")
}

/// Installs the real `torcx-generator` on a node (before boot) where
/// Flatcar has it, and Flatcar's `torcx.target`.
pub fn install_generator(n: &SimNode) -> Result<()> {
    let bin = binary()?;
    n.write("/usr/lib/systemd/system/torcx.target", TARGET_UNIT, 0o644)?;
    let link = n.path(GENERATOR);
    std::fs::create_dir_all(link.parent().expect("a generator dir"))?;
    std::os::unix::fs::symlink(&bin, &link)
        .with_context(|| format!("linking {} to {}", link.display(), bin.display()))
}

/// A file of docker's datadir from running the OS image's vendor docker:
/// the data a docker change must wipe.
pub const DOCKER_DATA_MARKER: &str = "/var/lib/docker/image/marker";

/// Makes a node (before boot) a Container Linux machine ready for the
/// docker addon's torcx backend: what the OS image brings (os-release for
/// `os_version` on the rig's board, the real torcx generator, the vendor
/// docker `vendor` as a store archive of build `vendor_build` and the
/// vendor profile naming it) and what provisioning wrote (runtime
/// mappings: Kubernetes 1.9 wants docker 17.03, else 1.12; the rig's
/// signing key as the keyring). Docker's old datadir
/// ([`DOCKER_DATA_MARKER`]) is the caller's to add.
pub fn install_os_image(
    n: &SimNode,
    rig: &AddonRig,
    os_version: &str,
    vendor: &str,
    vendor_build: &str,
) -> Result<()> {
    install_os(n, &rig.board, os_version, vendor, vendor_build)?;
    n.write(
        "/etc/kubernetes/installer/runtime-mappings.yaml",
        runtime_mappings_yaml("1.9", &["17.03", "1.12"]),
        0o644,
    )?;
    n.write(
        "/etc/kubernetes/installer/keyring.asc",
        rig.key.public_armored(),
        0o644,
    )
}

/// What a Container Linux image of `os_version` on `board` brings for
/// docker, before boot: os-release, the real torcx generator and
/// `torcx.target`, the vendor docker `vendor` (a stand-in image of build
/// `vendor_build`) in the vendor store with the vendor profile naming it.
/// [`install_os_image`] adds what provisioning writes.
pub fn install_os(
    n: &SimNode,
    board: &str,
    os_version: &str,
    vendor: &str,
    vendor_build: &str,
) -> Result<()> {
    n.write(
        crate::agentnode::OS_RELEASE,
        os_release(os_version, board),
        0o644,
    )?;
    install_generator(n)?;
    n.write(
        "/usr/share/torcx/profiles/vendor.json",
        format!(
            r#"{{"kind":"profile-manifest-v0","value":{{"images":[{{"name":"docker","reference":"{vendor}"}}]}}}}"#
        ),
        0o644,
    )?;
    n.write(
        &format!("/usr/share/torcx/store/docker:{vendor}.torcx.tgz"),
        docker_archive(vendor_build),
        0o644,
    )
}

/// Runs the real `torcx` inside a running node (e.g. `profile new`).
pub fn run_in(n: &SimNode, args: &[&str]) -> Result<std::process::Output> {
    let bin = binary()?;
    let bin = bin.to_string_lossy().into_owned();
    let mut argv = vec![bin.as_str()];
    argv.extend_from_slice(args);
    n.exec(&argv)
}
