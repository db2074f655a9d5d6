//! `node-bootstrap follow`: the node follows its cluster's Kubernetes
//! version (src/follow/), one run; `--converge` at boot; `--enable` to
//! turn it on for a node already running.

use super::runtime;
use crate::config::Config;
use crate::error::{Result, exit};
use clap::Args;

#[derive(Debug, Args)]
pub struct FollowArgs {
    /// Only make an interrupted change's files one kubelet's whole set
    /// (node-bootstrap-follow-converge.service, at boot before the
    /// kubelet); asks nothing of the cluster.
    #[arg(long, conflicts_with = "enable")]
    pub converge: bool,
    /// Turn following on for this node, already running: follow.enabled
    /// in the config file, the follow units installed and their timer
    /// enabled and started (what the ignition module's `follow` switch
    /// does for a new node). Changes nothing else; run it again and
    /// nothing changes.
    #[arg(long)]
    pub enable: bool,
}

/// `follow --enable` (src/follow/enable.rs): the config file at `path`.
pub(super) fn enable(path: &std::path::Path) -> Result<u8> {
    let done = runtime()?.block_on(crate::follow::enable::enable(path))?;
    println!(
        "follow on: {} {}; units {}; node-bootstrap-follow.timer enabled and started",
        path.display(),
        if done.config_changed {
            "now says follow.enabled"
        } else {
            "already said follow.enabled"
        },
        if done.units_written.is_empty() {
            "already installed".to_string()
        } else {
            format!("installed ({})", done.units_written.join(", "))
        }
    );
    Ok(exit::SUCCESS)
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
