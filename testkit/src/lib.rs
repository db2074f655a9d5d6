//! Test rig for node-bootstrap: the simulated node (a real systemd as PID 1
//! in a namespace), the VM node (a QEMU machine booting a Debian-built OS
//! image with the real Ignition), and stand-ins for programs that cannot
//! run here.

pub mod agentnode;
pub mod apiserver;
pub mod bench_agentnode;
pub mod bench_fleet;
pub mod bench_powerloss;
pub mod bench_report;
pub mod docker;
pub mod fake_update_engine;
pub mod faults;
pub mod pkgserver;
pub mod s3;
pub mod simnode;
pub mod simplestreams;
pub mod sshd;
pub mod torcx;
pub mod torcx_fixtures;
pub mod vm;

use std::path::{Path, PathBuf};

/// The repository root.
pub fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit lives in the project root")
        .to_path_buf()
}

/// The project's unit files (`units/*`), or those of the directory in
/// `NODE_BOOTSTRAP_UNITS_DIR` (used by `scripts/mutate-units.sh` to check
/// that each test fails when the setting it checks is removed).
pub fn unit_file(name: &str) -> PathBuf {
    match std::env::var_os("NODE_BOOTSTRAP_UNITS_DIR") {
        Some(dir) => PathBuf::from(dir).join(name),
        None => project_root().join("units").join(name),
    }
}

/// A stand-in script shipped in `testkit/standins/`.
pub fn standin(name: &str) -> PathBuf {
    project_root().join("testkit/standins").join(name)
}

/// A binary built in this workspace's target dir (same profile as the
/// running test). Panics with a hint when it is missing.
pub fn built_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // Tests live in target/<profile>/deps/, binaries in target/<profile>/.
    let mut dir = exe.parent().expect("exe has a directory");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("deps has a parent");
    }
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} is not built; run `cargo build --workspace` first",
        p.display()
    );
    p
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|p| p.join(tool).is_file()))
}

/// Skips (returns `true`) when one of `tools` (names on `PATH`, or
/// absolute paths) is missing, saying which on stderr; under CI
/// (`CI=true`) it panics instead: CI installs them (scripts/setup.sh) and
/// must never skip.
pub fn skip_without(test: &str, tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| {
            let found = if t.starts_with('/') {
                Path::new(t).exists()
            } else {
                on_path(t)
            };
            !found
        })
        .collect();
    if missing.is_empty() {
        return false;
    }
    let msg = format!(
        "{test}: needs {} (run scripts/setup.sh)",
        missing.join(", ")
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{msg}");
    }
    eprintln!("SKIPPED {msg}");
    true
}
