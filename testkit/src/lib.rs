//! Test rig for node-bootstrap: the simulated node (a real systemd as PID 1
//! in a namespace) and stand-ins for programs that cannot run here.

pub mod docker;
pub mod simnode;

use std::path::PathBuf;

/// The repository root.
pub fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit lives in the project root")
        .to_path_buf()
}

/// The project's unit files (`units/*`).
pub fn unit_file(name: &str) -> PathBuf {
    project_root().join("units").join(name)
}

/// A stand-in script shipped in `testkit/standins/`.
pub fn standin(name: &str) -> PathBuf {
    project_root().join("testkit/standins").join(name)
}

/// A binary built in this workspace's target dir (same profile as the
/// running test). Panics with a hint when it is missing.
pub fn built_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test>-<hash>
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("test binary lives in target/<profile>/deps");
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} is not built; run `cargo build --workspace` first",
        p.display()
    );
    p
}
