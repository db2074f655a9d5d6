//! `node-bootstrap kubelet ensure`: the `kubelet-sysext` step of `run`,
//! alone (an operator moving a node's kubelet after a control plane
//! upgrade; the tests).

use crate::config::Config;
use crate::error::{Error, Result, exit};
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum KubeletCommand {
    /// Which kubelet image `ensure` would take for the cluster version, and
    /// from where; installs nothing.
    Choose {
        /// Cluster version, e.g. v1.20.2.
        #[arg(long)]
        cluster_version: String,
        /// Print the choice as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The kubelet-sysext step of `run`, alone: choose the kubelet image
    /// for the cluster version from the metadata search path, verify and
    /// check it, install it in /etc/extensions and merge it
    /// (systemd-sysext refresh). Does not restart a running kubelet.
    Ensure {
        /// Cluster version, e.g. v1.20.2.
        #[arg(long)]
        cluster_version: String,
        /// Print what was done as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn require_sysext(config: &Config) -> Result<()> {
    use crate::kubelet_sysext::backend::{Runs, on_node};
    let resolved = on_node(config.kubelet.backend, &config.paths.os_release)?;
    if resolved.runs != Runs::Sysext {
        return Err(Error::config(format!(
            "this node's kubelet is kubelet-wrapper ({}; config {}): it runs the kubelet kubelet.env names",
            resolved.why,
            config.source.display()
        )));
    }
    Ok(())
}

/// Runs [`crate::kubelet_sysext::choose`] for `cluster_version`: what `ensure` would take,
/// installing nothing; prints it (JSON) or one line.
pub fn choose(config: &Config, cluster_version: &str, json: bool) -> Result<u8> {
    require_sysext(config)?;
    let c = crate::async_runtime::current_thread()?.block_on(crate::kubelet_sysext::choose(
        &config.kubelet_sysext_inputs(),
        cluster_version,
    ))?;
    super::print_json_or(json, &c, || {
        format!(
            "kubelet {} ({} for cluster {}) from {} ({} metadata); offered: {}",
            c.image.version,
            c.rule.as_str(),
            c.cluster_version,
            c.image.url,
            if c.image.signed { "signed" } else { "UNSIGNED" },
            c.image.offered.join(", ")
        )
    });
    Ok(exit::SUCCESS)
}

/// Runs [`crate::kubelet_sysext::ensure`] for `cluster_version`; prints the record (JSON)
/// or one line.
pub fn ensure(config: &Config, cluster_version: &str, json: bool) -> Result<u8> {
    require_sysext(config)?;
    let rec = crate::async_runtime::current_thread()?.block_on(crate::kubelet_sysext::ensure(
        &config.kubelet_sysext_inputs(),
        cluster_version,
    ))?;
    super::print_json_or(json, &rec, || {
        format!(
            "kubelet {} ({} for cluster {}) is merged from {}{}",
            rec.version,
            rec.rule.as_str(),
            rec.cluster_version,
            rec.installed.image.display(),
            if rec.installed.refreshed {
                "; a running kubelet.service keeps its old binary until restarted"
            } else {
                ""
            }
        )
    });
    Ok(exit::SUCCESS)
}
