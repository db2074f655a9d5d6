//! `node-bootstrap follow`: one run ([`super::driver`]), the ExecStart of
//! `node-bootstrap-follow.service`, which `node-bootstrap-follow.timer`
//! starts; and `node-bootstrap follow --converge`, the ExecStart of
//! `node-bootstrap-follow-converge.service`, at boot before the kubelet
//! (only while a change's record is there).

use super::driver::{Driver, Ran, Settings};
use super::node::{Local, NodeSeams};
use super::record::{Files, Standing};
use super::{Inputs, RenderKubelet};
use crate::error::Result;
use crate::fsutil::RunLock;
use tracing::{info, warn};

/// How long a run waits for another agent command (`run`, `upgrade`, a
/// `follow` started by hand) to end before it refuses (exit 8).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// `follow`: one look, and a change when one is due (module docs of
/// [`super`]).
pub async fn follow(config: &Inputs<'_>, render: RenderKubelet<'_>) -> Result<Ran> {
    let files = Files::new(&config.paths.state_dir);
    if !config.follow.enabled {
        info!(
            step = "follow",
            "following the cluster's version is off (follow.enabled); nothing to do"
        );
        return Ok(Ran::Looked(Standing::Unknown));
    }
    if !config.paths.kubelet_env.exists() && files.load_change()?.is_none() {
        info!(step = "follow", path = %config.paths.kubelet_env.display(), "the node is not bootstrapped yet (no kubelet.env); nothing to follow");
        return Ok(Ran::Looked(Standing::Unknown));
    }
    let _lock = RunLock::acquire(&config.paths.run_lock(), LOCK_WAIT)?;
    let outcome = run(config, render, files.clone()).await;
    if let Some(dir) = config.textfile_dir {
        match files.load_state() {
            Ok(s) => {
                if let Err(e) = super::metrics::publish(dir, &s) {
                    warn!(step = "follow", path = %dir.display(), error = %e, "cannot publish the follow metrics");
                }
            }
            Err(e) => {
                warn!(step = "follow", error = %e, "cannot read the follow state for the metrics")
            }
        }
    }
    outcome
}

async fn run(config: &Inputs<'_>, render: RenderKubelet<'_>, files: Files) -> Result<Ran> {
    let (kc, cert_name) = match super::api::identity(config.paths, config.cluster) {
        Ok(found) => found,
        Err(e) if e.class().is_retryable() => {
            // The kubelet is still earning its identity: nothing to do yet.
            info!(step = "follow", why = %e, "not following yet");
            let mut state = files.load_state()?;
            state.standing = Standing::Waiting;
            state.why = Some(e.to_string());
            files.save_state(&state, false)?;
            return Ok(Ran::Looked(Standing::Waiting));
        }
        Err(e) => return Err(e),
    };
    let bus = crate::systemd::agent_bus().await?;
    let node = match cert_name {
        Some(n) => n,
        None => crate::join::node_name::of_this_node(config.paths, Some(&bus)).await,
    };
    let cluster = super::api::Cluster::new(&kc, config.cluster.api_timeout, node, config.follow)?;
    let seams = NodeSeams {
        local: Local {
            inputs: *config,
            files: files.clone(),
        },
        follow: config.follow,
        bus,
        render,
    };
    let driver = Driver {
        cluster: &cluster,
        node: &seams,
        files,
        settings: settings(config),
    };
    driver.run().await
}

/// The driver's settings from the config.
pub fn settings(config: &Inputs<'_>) -> Settings {
    Settings {
        stable_checks: config.follow.stable_checks,
        ready_timeout: config.follow.ready_timeout,
        drain_timeout: config.follow.drain_timeout,
        poll: config.follow.poll,
        backend: super::node::backend(config.kubelet.kubelet, &config.paths.os_release),
    }
}

/// `follow --converge` (module docs).
pub async fn converge(config: &Inputs<'_>) -> Result<super::plan::Converge> {
    let _lock = RunLock::acquire(&config.paths.run_lock(), LOCK_WAIT)?;
    let local = Local {
        inputs: *config,
        files: Files::new(&config.paths.state_dir),
    };
    super::node::converge(&local).await
}
