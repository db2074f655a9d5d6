//! The critical-path benchmark (`nb-bench critical-path`): a node with the
//! real agent ([`testkit::agentnode::agent_node`]) against the "floor"
//! node, the same units with an agent that only copies the seed
//! kubelet.env into place (what systemd alone costs between the bootstrap
//! unit starting and kubelet running), timed from systemd's own
//! timestamps.

use anyhow::{Result, bail};
use testkit::agentnode::{AgentNodeSpec, agent_node};
use testkit::simnode::SimNode;

/// The floor node: the same node as `spec` (units, files, update_engine),
/// with an "agent" that only copies the seed kubelet.env into place.
pub fn floor_node(spec: &AgentNodeSpec) -> Result<SimNode> {
    let dir = tempfile::tempdir()?;
    let agent = dir.path().join("no-op-agent");
    std::fs::write(
        &agent,
        "#!/bin/sh\nexec cp /etc/kubernetes/installer/kubelet.env /etc/kubernetes/kubelet.env\n",
    )?;
    let mut spec = spec.clone();
    spec.agent = agent;
    agent_node(&spec)
}

/// The durable floor node: like [`floor_node`], but the copy is made
/// durable the way the agent writes kubelet.env (data synced, renamed into
/// place, directory synced), with coreutils: `dd conv=fsync`, `mv`, `sync
/// DIR` (three processes where the floor has one).
pub fn durable_floor_node(spec: &AgentNodeSpec) -> Result<SimNode> {
    let dir = tempfile::tempdir()?;
    let agent = dir.path().join("durable-no-op-agent");
    std::fs::write(
        &agent,
        "#!/bin/sh
set -e
cd /etc/kubernetes
         dd if=installer/kubelet.env of=.kubelet.env.tmp conv=fsync status=none
         mv .kubelet.env.tmp kubelet.env
exec sync /etc/kubernetes
",
    )?;
    let mut spec = spec.clone();
    spec.agent = agent;
    agent_node(&spec)
}

/// Microseconds from `k8s-node-bootstrap.service` leaving inactive to
/// `kubelet.service` entering active, from systemd's own monotonic
/// timestamps (both on the node's clock).
pub fn critical_path_us(n: &SimNode) -> Result<u64> {
    let start = n.timestamp_us(
        "k8s-node-bootstrap.service",
        "InactiveExitTimestampMonotonic",
    )?;
    let end = n.timestamp_us("kubelet.service", "ActiveEnterTimestampMonotonic")?;
    if start == 0 || end == 0 || end < start {
        bail!(
            "unusable timestamps: k8s-node-bootstrap InactiveExit={start}, kubelet ActiveEnter={end}\n{}",
            n.diagnostics()
        );
    }
    Ok(end - start)
}

/// Microseconds the bootstrap unit's main process (`ExecStart=`, the
/// agent) ran, from systemd's timestamps.
pub fn agent_runtime_us(n: &SimNode) -> Result<u64> {
    let start = n.timestamp_us(
        "k8s-node-bootstrap.service",
        "ExecMainStartTimestampMonotonic",
    )?;
    let end = n.timestamp_us(
        "k8s-node-bootstrap.service",
        "ExecMainExitTimestampMonotonic",
    )?;
    if start == 0 || end < start {
        bail!("unusable timestamps: ExecMainStart={start}, ExecMainExit={end}");
    }
    Ok(end - start)
}
