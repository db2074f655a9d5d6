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
//! [`install_generator`] puts it on a simulated node where Flatcar has it.

use crate::simnode::SimNode;
use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::Command;

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
    FOUND
        .get_or_init(|| build().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn build() -> Result<PathBuf> {
    let script = crate::project_root().join("scripts/build-torcx.sh");
    let out = Command::new(&script)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let p = PathBuf::from(String::from_utf8(out.stdout)?.trim());
    if !p.exists() {
        bail!(
            "{} printed {}, which does not exist",
            script.display(),
            p.display()
        );
    }
    Ok(p)
}

/// Skips (returns `true`) when the real torcx cannot be built here, saying
/// why; under CI (`CI=true`) it panics instead: CI must run these tests.
pub fn skip_unless_available(test: &str) -> bool {
    match binary() {
        Ok(_) => false,
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{test}: the real torcx must run in CI but cannot: {e:#}");
            }
            eprintln!("SKIPPED {test}: the real torcx is not available: {e:#}");
            true
        }
    }
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

/// Runs the real `torcx` inside a running node (e.g. `profile new`).
pub fn run_in(n: &SimNode, args: &[&str]) -> Result<std::process::Output> {
    let bin = binary()?;
    let bin = bin.to_string_lossy().into_owned();
    let mut argv = vec![bin.as_str()];
    argv.extend_from_slice(args);
    n.exec(&argv)
}
