//! Test rig for node-bootstrap: the simulated node (a real systemd as PID 1
//! in a namespace), the VM node (a QEMU machine booting a Debian-built OS
//! image with the real Ignition), and stand-ins for programs that cannot
//! run here.

pub mod agent_mirror;
pub mod agentnode;
pub mod apiserver;
pub mod cli;
pub mod cluster;
pub mod conformance;
pub mod containerd;
pub mod containerd2;
pub mod containerd_sysext;
pub mod demo;
pub mod docker;
pub mod docker_image;
pub mod fake_update_engine;
pub mod faults;
pub mod files;
pub mod fleet;
pub mod follow;
pub mod hostload;
pub mod ignition;
pub mod kube;
pub mod kubelet_sysext;
pub mod node_authz;
pub mod pkgserver;
pub mod podnet;
pub mod pods;
pub mod powerloss;
pub mod promtool;
pub mod s3;
pub mod simnode;
pub mod simplestreams;
pub mod sshd;
pub mod terraform;
pub mod tls_bootstrap;
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

/// Runs the build script `scripts/<name>` (it builds something the tests
/// use into a cache outside the checkout, or finds it there) and returns
/// the path it prints, which must exist; the error says why not.
pub fn run_build_script(name: &str) -> anyhow::Result<PathBuf> {
    use anyhow::Context as _;
    let script = project_root().join("scripts").join(name);
    let out = std::process::Command::new(&script)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        anyhow::bail!(
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let p = PathBuf::from(String::from_utf8(out.stdout)?.trim());
    if !p.exists() {
        anyhow::bail!(
            "{} printed {}, which does not exist",
            script.display(),
            p.display()
        );
    }
    Ok(p)
}

/// `init` once per test process, its result (or its error, as text) kept
/// in `cell` for every later caller.
pub fn once<T: Clone>(
    cell: &'static std::sync::OnceLock<Result<T, String>>,
    init: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    cell.get_or_init(|| init().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

/// A stand-in script shipped in `testkit/standins/`.
pub fn standin(name: &str) -> PathBuf {
    project_root().join("testkit/standins").join(name)
}

/// A binary built in this workspace's target dir (same profile as the
/// running test). Panics with a hint when it is missing.
///
/// The test runs from `<build dir>/<profile>/deps/`; the binaries are in
/// `<target dir>/<profile>/`. The two are one directory unless cargo was
/// given a build dir of its own (`CARGO_BUILD_BUILD_DIR`: scripts/test.sh
/// keeps its intermediate files in a cache outside the checkout); then the
/// binaries are in `CARGO_TARGET_DIR`, or the checkout's `target/`.
pub fn built_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let mut dir = exe.parent().expect("exe has a directory");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("deps has a parent");
    }
    let profile = dir.file_name().expect("a profile directory");
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| project_root().join("target"));
    let beside = dir.join(name);
    let uplifted = target_dir.join(profile).join(name);
    match [&beside, &uplifted].into_iter().find(|p| p.exists()) {
        Some(p) => p.clone(),
        None => panic!(
            "{} is not built; run `cargo build --workspace` first",
            uplifted.display()
        ),
    }
}

/// A tokio runtime for a test or helper that is not async itself:
/// current-thread, timers and I/O on (`runtime().block_on(...)`).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("building a tokio runtime")
}

/// A runtime that serves stand-ins (the API server, a failing server) in
/// the background: `workers` worker threads, so they keep answering while
/// the test thread blocks on something else (a node booting, a child
/// process). Keep it alive as long as the servers it runs.
pub fn server_runtime(workers: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?)
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|p| p.join(tool).is_file()))
}

/// The name of the running test as libtest gives it: its path inside the
/// test target, e.g. `node_units::master_first_boot_orders_…` (libtest
/// runs each test on a thread named after it). Anywhere else (a thread the
/// test spawned, a binary) it is that thread's name, or "unnamed thread".
pub fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed thread")
        .to_string()
}

/// Whether this is a CI run (`CI=true`), where no test may skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The environment variable naming a file to which every skip appends its
/// `SKIPPED` line: `scripts/test.sh` sets it (one file per tier) to list
/// the skips in its summary, `scripts/mutate-units.sh` to tell a skip
/// from a pass.
pub const SKIP_LOG_ENV: &str = "NODE_BOOTSTRAP_SKIP_LOG";

/// Skips the running test (returns `true`) because of `reason`, saying
/// `SKIPPED <test>: <reason>` on the process's stderr itself (not through
/// `eprintln!`, whose output libtest keeps to itself for a test that
/// passes, as a skipped test does) and appending that line to the file
/// named by [`SKIP_LOG_ENV`] when it is set; under CI (`CI=true`) it
/// panics instead: CI runs as root with everything scripts/setup.sh
/// installs, so a skip there would be a test that silently never ran.
pub fn skip_because(reason: impl std::fmt::Display) -> bool {
    use std::io::Write as _;
    let test = test_name();
    if in_ci() {
        panic!("{test}: must run in CI but cannot: {reason}");
    }
    let line = format!(
        "SKIPPED {test}: {}\n",
        reason.to_string().replace('\n', " ")
    );
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    if let Some(log) = std::env::var_os(SKIP_LOG_ENV) {
        // One write of a short line in append mode: lines of tests that
        // skip at the same moment do not interleave.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            panic!(
                "{test}: cannot record its skip in {} ({SKIP_LOG_ENV}): {e}",
                Path::new(&log).display()
            );
        }
    }
    true
}

/// Skips the running test (see [`skip_because`]) unless `ready` is `Ok`;
/// the reason is `what` followed by the error.
pub fn skip_unless(ready: anyhow::Result<()>, what: &str) -> bool {
    match ready {
        Ok(()) => false,
        Err(e) => skip_because(format!("{what}: {e:#}")),
    }
}

/// Skips the running test (see [`skip_because`]) when one of `tools`
/// (names on `PATH`, or absolute paths) is missing, naming them.
pub fn skip_without(tools: &[&str]) -> bool {
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
    skip_because(format!(
        "needs {} (run scripts/setup.sh)",
        missing.join(", ")
    ))
}

/// Skips the running test (see [`skip_because`]) unless it runs as root.
pub fn skip_unless_root(why: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return false;
    }
    skip_because(format!("needs root: {why}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn test_name_is_the_running_tests_path() {
        assert_eq!(
            super::test_name(),
            "tests::test_name_is_the_running_tests_path"
        );
    }
}
