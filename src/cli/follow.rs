//! `node-bootstrap follow`: the node follows its cluster's Kubernetes
//! version (src/follow/), one run; `--converge` at boot.

use super::runtime;
use crate::config::Config;
use crate::error::{Result, exit};
use clap::Args;

#[derive(Debug, Args)]
pub struct FollowArgs {
    /// Only make an interrupted change's files one kubelet's whole set
    /// (node-bootstrap-follow-converge.service, at boot before the
    /// kubelet); asks nothing of the cluster.
    #[arg(long)]
    pub converge: bool,
}

pub(super) fn command(config: &Config, args: &FollowArgs) -> Result<u8> {
    let rt = runtime()?;
    let inputs = config.follow_inputs();
    if args.converge {
        let done = rt.block_on(crate::follow::command::converge(&inputs))?;
        tracing::info!(step = "follow", converged = ?done, "converge done");
        return Ok(exit::SUCCESS);
    }
    // The kubelet's files of a version, as `run` renders them.
    let render = |version: &str, runtime: &_, containerd: Option<&_>| {
        crate::flow::node::render_kubelet_files(config, version, runtime, containerd)
            .map(|f| (f.config, f.env))
    };
    let ran = rt.block_on(crate::follow::command::follow(&inputs, &render))?;
    tracing::info!(step = "follow", outcome = ?ran, "follow run done");
    Ok(exit::SUCCESS)
}
