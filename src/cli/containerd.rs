//! `node-bootstrap containerd choose`: where the `containerd` step of
//! `run` would take containerd from for a cluster version (the OS's, or
//! which package of the search path), installing nothing.

use crate::config::Config;
use crate::error::{Result, exit};
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum ContainerdCommand {
    /// Whether the OS's containerd fits the cluster version (the runtime
    /// mappings' containerd list), and if not which containerd image the
    /// containerd step would install, and from where; installs nothing.
    Choose {
        /// Cluster version, e.g. v1.26.3.
        #[arg(long)]
        cluster_version: String,
        /// Print the choice as JSON.
        #[arg(long)]
        json: bool,
        /// The runtime mappings to read (default: the node's, as the
        /// config names them), e.g. on a machine that is not the node.
        #[arg(long, value_name = "FILE")]
        mappings: Option<std::path::PathBuf>,
    },
}

/// Runs [`crate::container_runtime::package::choose`] for `cluster_version`;
/// prints it (JSON) or one line.
pub fn choose(
    config: &Config,
    cluster_version: &str,
    json: bool,
    mappings: Option<&std::path::Path>,
) -> Result<u8> {
    let mut config = config.clone();
    if let Some(m) = mappings {
        if !m.exists() {
            return Err(crate::error::Error::bad_input(format!(
                "--mappings {}: no such file",
                m.display()
            )));
        }
        config.addon.mappings_file = Some(m.to_path_buf());
    }
    let rules = crate::container_runtime::choice::decide(
        cluster_version,
        crate::container_runtime::choice::Requested::Containerd,
        config.kubelet_config.allow_newer_kubernetes,
    )?
    .rules()
    .ok_or_else(|| crate::error::Error::internal("no kubelet rules for the cluster version"))?;
    let cluster = config.containerd_for_cluster(cluster_version, rules)?;
    let choice = crate::async_runtime::current_thread()?.block_on(
        crate::container_runtime::package::choose(
            &config.containerd_inputs(),
            cluster.kubernetes,
            cluster.listed.as_deref(),
        ),
    )?;
    super::print_json_or(json, &choice, || choice.describe());
    Ok(exit::SUCCESS)
}
