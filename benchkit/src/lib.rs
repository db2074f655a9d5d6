//! The benchmark harness behind `bench/run.sh` and `bench/soak.sh`: the
//! `nb-bench` binary and what only it needs (the critical-path
//! measurement, the table rows, the realistic asset bundle, the in-memory
//! S3 stand-in of `bench/run.sh --quick`). Not a test: it prints numbers and a
//! verdict per target, it asserts nothing.
//!
//! The rigs it drives are testkit's, shared with the tests that assert on
//! them: the power-loss rig (`testkit::powerloss`, also
//! `tests/node/reliability_power_loss.rs`), the fleet
//! (`testkit::fleet`, also `tests/host/fleet_retries.rs`) and the node with
//! the real agent (`testkit::agentnode::agent_node`). Nothing depends on
//! this crate, so the test targets never build it.

pub mod breakdown;
pub mod bundle;
pub mod critical;
pub mod floor;
pub mod follow;
pub mod follow_fleet;
pub mod nodewatch;
pub mod ready;
pub mod report;
pub mod s3standin;
pub mod timeline;
pub mod writes;

use anyhow::{Context as _, Result, bail};
use std::path::PathBuf;

/// Another binary of this workspace (`fake-update-engine`), beside the
/// running one in the target dir (`cargo build -p benchkit -p testkit
/// --bins` builds both).
pub fn sibling(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let p = exe.parent().context("exe dir")?.join(name);
    if !p.exists() {
        bail!(
            "{} is not built (cargo build -p testkit --bins)",
            p.display()
        );
    }
    Ok(p)
}
